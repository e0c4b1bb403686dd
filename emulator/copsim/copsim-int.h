/*
 * copsim-int.h — copsim's internal structures, shared by its modules:
 *
 *   copsim.c     creating and destroying a copsim, the context table
 *   server.c     the socket, peer credentials, one thread per connection,
 *                the requests (INFO, CREATE, LOAD, RUN, DESTROY)
 *   emulator.c   one run of a context: its QEMU, the console, the exit
 *   scheduler.c  slots, the run queue, time slices, bind/unbind, hooks
 *   console.c    a context's console on its way to its client
 *   slots.c      the slot model: long-lived slot emulators running
 *                contexts as saved state (--context-model=slot)
 *   resolve.c    object-ids and call stacks through /proc/PID/maps
 *   schedlog.c   the SCHED records
 *
 * Locking: sim->lock guards the context table and the list of
 * connections; sched->lock guards the slots, the run queue and the
 * scheduling fields of every context, and is the lock the driver's hooks
 * run under.  No function holds both at once.  The other fields of a
 * context belong to the thread of its connection.
 */
#ifndef COPROF_COPSIM_INT_H
#define COPROF_COPSIM_INT_H

#include "emulator/copsim/copsim.h"
#include "abi/copsim-protocol.h"
#include "abi/slot-stub.h"
#include "emulator/copsim/resolve.h"
#include "emulator/copsim/schedlog.h"
#include "common/image.h"
#include "common/loader.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

struct trace_unit;

/* Where a context is in its life; the scheduler's states under its lock. */
enum sim_state {
    SIM_IDLE = 0,       /* created or loaded, not running */
    SIM_STARTING,       /* its QEMU starts; the plugin has not attached */
    SIM_QUEUED,         /* held at its gate, waiting for a slot */
    SIM_BOUND,          /* on a slot */
    SIM_ENDED,          /* its QEMU has ended; retired from the scheduler */
};

/* Why copsim itself ended a run, or that it ended. */
enum sim_kill {
    SIM_KILL_NONE = 0,
    SIM_KILL_CYCLES,    /* over its cycle limit: a looping program */
    SIM_KILL_BIND,      /* the register file refused to bind it */
    SIM_KILL_CLIENT,    /* its client hung up */
    SIM_KILL_ATTACH,    /* its plugin never came to the gate */
    SIM_KILL_ENDED,     /* not killed: it ended by itself */
};

struct sim_context {
    struct copsim_context info;     /* what the hooks see */
    char name[COPSIM_NAME_MAX];
    struct image_source source;     /* the image's bytes and identity */
    struct cop_image image;         /* parsed, pointing into source.bytes */
    int loaded;
    struct cop_ram ram;
    char *stack;                    /* creation call stack, formatted */

    /* Scheduling: under sched->lock. */
    enum sim_state state;
    int slot;                       /* bound slot, or -1 */
    struct sim_context *next;       /* run queue */
    uint64_t cycles_run;            /* on slots, finished bindings */
    uint64_t max_cycles;            /* 0: no limit */
    uint32_t binds;
    uint32_t preemptions;
    enum sim_kill kill;
    uint64_t retry_hold_ns;         /* after a hold that timed out */
    pid_t emulator;                 /* its QEMU while it runs, else 0 */

    /* Slot model (slots.c): the context as saved state between binds. */
    unsigned char *saved;           /* local store and boot block */
    uint32_t save_area[SLOT_CTX_SIZE / 4];  /* the stub's: registers, pc */
    unsigned char *call_stack;      /* --call-graph: its shadow stack as
                                       the plugin saved it (slot-stub.h) */
    uint32_t call_stack_len;        /* bytes; 0: empty (a run's start) */
    int main_fd;                    /* its main-memory file (image and
                                       data windows), or -1 */
    uint64_t main_id;               /* that file's inode (SLOT_H_WINDOW_ID) */
    int affinity;                   /* the slot it resumes on, or -1 */
    struct console_out *console;    /* its console while it runs */
    int bound_fd;                   /* eventfd: written at its first bind,
                                       so its run's thread stops waiting
                                       for the client and waits for the
                                       end */
    int wait_slot;                  /* the slot on whose entry its run's
                                       thread sleeps, or -1 (slots.c) */
};

struct sched_slot {
    struct sim_context *bound;
    uint64_t bind_cycle;            /* the slot's cycles at the bind */
};

struct scheduler {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct trace_unit *unit;
    struct schedlog *log;
    struct copsim_info info;        /* for the hooks' start and stop */
    uint32_t n_slots;
    struct sched_slot *slots;
    struct sim_context *queue_head;
    struct sim_context *queue_tail;
    uint64_t slice_cycles;
    uint32_t tick_us;
    uint32_t gather;                /* test hook: see scheduler_gathering() */
    uint64_t gather_until_ns;
    const struct copsim_hooks *hooks;
    struct slot_model *model;       /* slot model (slots.c); NULL: a QEMU
                                       per context */
    int pin;                        /* slot model with exact counts: a
                                       preempted context resumes on its
                                       slot, whose plugin holds its counts */
    int stopping;
    int running;
    pthread_t thread;
};

struct copsim {
    struct copsim_config config;
    char *socket_path;
    char *state_dir;
    char *images_dir;               /* copies of anonymous images */
    char *regs_path;
    char *counts_dir;               /* --exact-counts DIR as the plugin
                                       opens it: /proc/PID/fd/N of
                                       counts_fd; or NULL */
    int counts_fd;                  /* DIR, made by safe_dir_make(); -1 */
    char *event_log_path;
    char *plugin_path;
    int listen_fd;
    int wake_pipe[2];               /* copsim_shutdown() writes here */
    int spare_fd;                   /* /dev/null, given up to accept and
                                       close a connection when copsim has
                                       no descriptor left (server.c) */
    int parent_fd;                  /* pidfd of a private copsim's parent */
    int started;                    /* copsim_create() succeeded */
    int made_state_dir;             /* this copsim made state_dir */
    int made_images_dir;            /* ... and images_dir */
    struct trace_unit *unit;
    struct schedlog log;
    struct scheduler sched;
    struct hash_cache hashes;

    pthread_mutex_t lock;           /* the fields below */
    pthread_cond_t idle;            /* signalled when a connection ends */
    unsigned char *context_used;    /* register file context blocks */
    uint64_t next_context_id;
    unsigned connections;
    struct connection *connection_list;

    copsim_request_handler driver_requests;
    void *driver_data;

    struct slot_model *slot_model;  /* --context-model=slot, else NULL */
};

/* ---- console.c ---------------------------------------------------------- */

#define CONSOLE_CHUNK       4096
#define LINE_MAX_KEPT       (COPSIM_TEXT_MAX - 64)

/* The last complete line of a stream that starts with a given prefix (or
 * any line, with prefix ""), assembled across reads. */
struct line_tracker {
    const char *prefix;
    char current[LINE_MAX_KEPT];
    size_t length;
    char last[LINE_MAX_KEPT];
};

void tracker_feed(struct line_tracker *t, const char *bytes, size_t n);
/* The last line, or an unterminated one at the end of the stream. */
const char *tracker_last(struct line_tracker *t);

/* A context's console on its way to the client's descriptor. */
struct console_out {
    int client;                     /* where it goes; -1 once broken */
    char partial[CONSOLE_CHUNK];    /* bytes after the last newline */
    size_t partial_length;
    struct line_tracker cop_lines;  /* the last "cop: " line */
};

void console_out_init(struct console_out *out, int client);
/* Passes bytes on a whole line at a time, and keeps the last "cop: " line. */
void console_out_feed(struct console_out *out, const char *bytes, size_t n);
/* At the end: what is left of an unterminated line. */
void console_out_flush(struct console_out *out);

/* ---- copsim.c ----------------------------------------------------------- */

/* A new context of process pid (thread tid): a register file block, its
 * RAM file, its call stack.  NULL with err and errno set. */
struct sim_context *sim_context_new(struct copsim *sim, pid_t pid, pid_t tid,
                                    const uint64_t *frames, size_t n_frames,
                                    char *err, size_t errlen);
/* Loads the image at object_id of the context's process. */
int sim_context_load(struct copsim *sim, struct sim_context *c, pid_t tid,
                     uint64_t object_id, uint64_t size, char *err,
                     size_t errlen);
/* DIR/context-ID.counts, the exact counts file of context c (config
 * exact_counts_dir); -1 when it does not fit. */
int copsim_counts_path(const struct copsim *sim, const struct sim_context *c,
                       char *buf, size_t len);
/* Frees a context that is not running; reaped says its client vanished. */
void sim_context_free(struct copsim *sim, struct sim_context *c, int reaped);

/* "REASON (copsim may open N files)" for a descriptor that could not be
 * had (EMFILE, ENFILE), else strerror(error), into buf. */
const char *copsim_fd_error(int error, char *buf, size_t len);

/* ---- emulator.c --------------------------------------------------------- */

struct run_result {
    uint32_t stop_reason;           /* COPSIM_STOP_* */
    int exit_status;
    uint64_t instructions;
    int client_gone;                /* the client hung up meanwhile */
    char detail[COPSIM_TEXT_MAX];
};

/* How a run's program ended: the emulator's exit status (its program's),
 * or the signal that killed it. */
struct emulator_end {
    int signaled;
    int code;                   /* exit status or signal number */
};

/* The run's result from how it ended, why copsim ended it (if it did) and
 * the last "cop: " line of its console and line the emulator said. */
void emulator_classify(const char *cop_line, const char *error_line,
                       const struct emulator_end *end,
                       enum sim_kill kill_reason, const struct sim_context *c,
                       struct run_result *result);

/* A message from the client while its context runs: EBUSY for anything
 * but a hang-up.  Returns 1 when the client is gone. */
int emulator_client_event(int sock);

/*
 * Runs the loaded context with argv until its program ends, forwarding its
 * console to console_fd and watching client_sock for a hang-up.  Returns 0
 * with *result filled, or -1 with err set when the program could not be
 * started (no emulator, a plugin that refused, arguments too long).
 */
int emulator_run(struct copsim *sim, struct sim_context *c, int client_sock,
                 int console_fd, int argc, char **argv, uint64_t max_cycles,
                 struct run_result *result, char *err, size_t errlen);

/* ---- scheduler.c -------------------------------------------------------- */

int scheduler_init(struct scheduler *s, struct trace_unit *unit,
                   struct schedlog *log, const struct copsim_info *info,
                   uint32_t tick_us, char *err, size_t errlen);
int scheduler_start(struct scheduler *s, char *err, size_t errlen);
void scheduler_stop(struct scheduler *s);
void scheduler_destroy(struct scheduler *s);

/* The context's emulator waits at its closed gate: queue it for a slot. */
void scheduler_make_runnable(struct scheduler *s, struct sim_context *c);

/* Marks a context as starting (its QEMU spawned as emulator). */
void scheduler_starting(struct scheduler *s, struct sim_context *c,
                        pid_t emulator, uint64_t max_cycles);

/* Kills the context's emulator, once, for a reason; the scheduler then
 * leaves the context alone until it is retired. */
void scheduler_kill(struct scheduler *s, struct sim_context *c,
                    enum sim_kill why);

/*
 * The context's emulator has ended (a zombie, not reaped yet, so its pid
 * cannot be reused): from now on nothing signals it.  Returns the reason
 * copsim killed it, or SIM_KILL_ENDED.
 */
enum sim_kill scheduler_disarm(struct scheduler *s, struct sim_context *c);

/*
 * The context's emulator has ended: logs the exit or fault, takes it off its
 * slot (unbind hook) or out of the run queue.
 */
void scheduler_retire(struct scheduler *s, struct sim_context *c,
                      enum copsim_unbind_reason reason, int status,
                      uint64_t instructions, const char *detail);

/* Counters of a context, read under the lock. */
void scheduler_counts(struct scheduler *s, const struct sim_context *c,
                      uint32_t *binds, uint32_t *preemptions);

int scheduler_hooks_install(struct scheduler *s,
                            const struct copsim_hooks *hooks, char *err,
                            size_t errlen);
void scheduler_hooks_remove(struct scheduler *s);

/* ---- slots.c ------------------------------------------------------------ */

/* The slot model: main memory and the loader's scratch RAM, the QEMU
 * program found; or stopped (after every context retired), with the slot
 * emulators that were started.  slots_ensure() starts slot's emulator if
 * it has none yet (the first bind there; the scheduler's lock held). */
int slots_start(struct copsim *sim, char *err, size_t errlen);
void slots_stop(struct copsim *sim);
int slots_ensure(struct slot_model *m, uint32_t slot, char *err,
                 size_t errlen);

/* Whether slot's emulator was started and its stub has set itself up. */
int slots_booted(struct slot_model *m, uint32_t slot);

/* A context's main-memory file (its windows: a sparse memfd the slot's
 * plugin maps over the window while it is bound), and the file and offset
 * of its data window for the client (CREATE).  -1 with err (and errno)
 * when memory or descriptors run out. */
int slots_context_new(struct copsim *sim, struct sim_context *c, char *err,
                      size_t errlen);
int slots_data_window(const struct copsim *sim, const struct sim_context *c,
                      uint64_t *offset);
void slots_context_free(struct copsim *sim, struct sim_context *c);

/* emulator_run() of the slot model. */
int slots_run(struct copsim *sim, struct sim_context *c, int client_sock,
              int console_fd, int argc, char **argv, uint64_t max_cycles,
              struct run_result *result, char *err, size_t errlen);

/* The scheduler's side, with its lock held.  slots_bind() puts the
 * context's state on the slot (before the bind hook: its guard words are
 * in the slot's local store then); slots_go() lets the stub run it (after
 * the gate opened); slots_hand_back() has the stub save it at the end of
 * its stub slice and takes its state back: 0, 1 when it ended meanwhile,
 * -1 after timeout_ms; slots_unbind() frees the slot's entry;
 * slots_kill() ends a bound context's run (handed back, then retired). */
void slots_bind(struct slot_model *m, uint32_t slot, struct sim_context *c);
void slots_go(struct slot_model *m, uint32_t slot, struct sim_context *c);
int slots_hand_back(struct slot_model *m, uint32_t slot,
                    struct sim_context *c, int timeout_ms);
void slots_unbind(struct slot_model *m, uint32_t slot,
                  struct sim_context *c);
void slots_kill(struct slot_model *m, struct sim_context *c);

/* ---- server.c ----------------------------------------------------------- */

/* Fails when a copsim answers on the socket path; removes a stale one. */
int server_check_unused(struct copsim *sim, char *err, size_t errlen);
int server_listen(struct copsim *sim, char *err, size_t errlen);
int server_accept_loop(struct copsim *sim);
/* Hangs up every connection and waits until their threads have ended. */
void server_close_all(struct copsim *sim);

#endif /* COPROF_COPSIM_INT_H */
