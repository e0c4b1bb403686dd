/*
 * copsim.h — the emulated coprocessor complex as a library: the daemon's
 * core, used by copsim's main() and by the kernel driver it hosts.
 *
 * A struct copsim owns the trace unit's register file, N slots, the
 * scheduler that binds contexts to them, the kernel event log it writes
 * SCHED records to, and the UNIX socket through which host programs (via
 * libcop) create, load, run and destroy contexts.  copsim_serve() runs it
 * until copsim_shutdown() is called (from a signal handler too) or, for a
 * private copsim, until its parent process dies.
 *
 * README.md in this folder describes the daemon, its socket protocol and
 * its SCHED records.
 */
#ifndef COPROF_COPSIM_H
#define COPROF_COPSIM_H

#include "emulator/copsim/copsim-hooks.h"
#include "common/copsim-socket.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define COPSIM_DEFAULT_CONTEXTS     256         /* register file blocks */
#define COPSIM_SLOT_DEFAULT_CONTEXTS 4096       /* the same, slot model:
                                                   TRACE_MAX_CONTEXTS */
#define COPSIM_DEFAULT_SLICE        2000000     /* cycles */
#define COPSIM_DEFAULT_TICK_US      1000        /* scheduler poll period */
#define COPSIM_DEFAULT_CALL_GRAPH   16          /* --call-graph's depth */

struct copsim_config {
    uint32_t n_slots;           /* 0: COPSIM_DEFAULT_SLOTS */
    uint32_t n_contexts;        /* 0: COPSIM_DEFAULT_CONTEXTS, or
                                   COPSIM_SLOT_DEFAULT_CONTEXTS */
    uint32_t fifo_depth;        /* 0: the trace unit's default */
    uint32_t call_graph;        /* frames per capture's call stack (the
                                   register file's stack area); 0: none */
    uint64_t slice_cycles;      /* 0: COPSIM_DEFAULT_SLICE */
    uint64_t max_cycles;        /* per run; 0: no limit */
    uint64_t nominal_hz;        /* 0: COPSIM_DEFAULT_NOMINAL_HZ */
    uint32_t tick_us;           /* 0: COPSIM_DEFAULT_TICK_US */
    const char *socket_path;    /* NULL: copsim_socket_path() */
    const char *state_dir;      /* register file, image copies, default
                                   event log; NULL: the socket's directory */
    const char *ram_dir;        /* NULL: anonymous RAM files (memfd) */
    const char *event_log_path; /* NULL: STATE_DIR/copsim.coplog */
    const char *qemu_program;   /* NULL: qemu-system-riscv32 from PATH */
    const char *plugin_path;    /* NULL: trace_plugin_path() */
    int reference_mode;         /* plugin in reference mode */
    const char *exact_counts_dir; /* plugin's exact counts go to
                                   DIR/context-ID.counts; NULL: none */
    pid_t parent_pid;           /* private copsim: stop when it dies; 0 */
    int slot_model;             /* 1: a slot is a long-lived emulator and
                                   a context saved state (slots.c); 0: a
                                   QEMU per context */
};

struct copsim;

/*
 * Creates the state directory (owner-only), the register file, the event
 * log and the listening socket (mode 0600).  NULL with err set on failure.
 */
struct copsim *copsim_create(const struct copsim_config *config,
                             char *err, size_t errlen);

/* Serves clients until copsim_shutdown(); returns 0, or -1 on an error
 * that stopped it (written to stderr). */
int copsim_serve(struct copsim *sim);

/* Asks copsim_serve() to return: async-signal-safe. */
void copsim_shutdown(struct copsim *sim);

/* Kills every emulator, calls the stop hook, removes the socket and the
 * register file, closes the event log. */
void copsim_destroy(struct copsim *sim);

/*
 * Installs the driver's hooks (copsim-hooks.h) and calls their start hook
 * with the contexts bound now.  One table at a time: -1 with err set when
 * one is installed already or the start hook refuses.
 */
int copsim_hooks_install(struct copsim *sim, const struct copsim_hooks *hooks,
                         char *err, size_t errlen);

/* Calls the stop hook and removes the table; nothing if none is installed. */
void copsim_hooks_remove(struct copsim *sim);

/*
 * The driver's control interface joins the socket protocol here: requests
 * whose type is in COPSIM_DRIVER_FIRST..COPSIM_DRIVER_LAST (protocol.h) go
 * to handler, on the thread of the client's connection, with the client's
 * pid from SO_PEERCRED; it sends exactly one reply on sock (the request
 * type with COPSIM_REPLY set, starting with a struct copsim_status) and
 * returns 0, or -1 to hang up.  Descriptors that came with the request are
 * closed after it returns.  Without a handler such requests get ENOSYS.
 */
typedef int (*copsim_request_handler)(void *data, int sock,
                                      const struct copsim_message *request,
                                      pid_t peer_pid);

int copsim_set_driver_requests(struct copsim *sim,
                               copsim_request_handler handler, void *data);

#endif /* COPROF_COPSIM_H */
