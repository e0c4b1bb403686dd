/*
 * hostprof.h — the host side of a coprof session: what coprof-host
 * records besides the coprocessor samples, held in memory until the end
 * of the recording and then stored in the session (store.c).
 *
 * Two sources, each optional:
 *   - sched.c: the Linux scheduler's events (sched_switch, sched_wakeup,
 *     sched_wakeup_new, sched_migrate_task, sched_process_fork,
 *     sched_process_exit, task_newtask) of the session's threads, from a
 *     private tracefs instance on the "mono" trace clock (CLOCK_MONOTONIC);
 *   - samples.c: host CPU samples of the profiled command's threads, from
 *     perf_event_open (the event encoded by libpfm4), with their mmaps so
 *     that symbols.c can name each address after the processes ended.
 *
 * The scheduler's events are not kept: aggregate.c turns them, in time
 * order, into each thread's running / runnable / blocked time per time
 * bucket and per context (a copsim context's life, from copsim's SCHED
 * records: lives.c), and keeps the newest of them in a fixed ring.  Rows
 * of aggregates wait in memory until the next store (store.c), which
 * coprof-host does when enough of them waited, at a dump and at the end.
 * All times are CLOCK_MONOTONIC nanoseconds, the clock of the coprocessor
 * samples and copsim's SCHED records.
 */
#ifndef COPROF_HOSTPROF_H
#define COPROF_HOSTPROF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HOST_COMM_MAX   16          /* TASK_COMM_LEN */
#define HOST_ERR_MAX    512

/* A growable array of fixed-size items. */
struct vec {
    void *items;
    size_t n, cap, size;
};

void vec_init(struct vec *v, size_t item_size);
/* A new zeroed item at the end, or NULL when out of memory. */
void *vec_push(struct vec *v);
void vec_free(struct vec *v);
#define VEC_AT(v, type, i) (&((type *)(v)->items)[i])

enum host_sched_kind {
    HOST_SWITCH, HOST_WAKEUP, HOST_WAKEUP_NEW, HOST_MIGRATE, HOST_FORK,
    HOST_EXIT, HOST_NEWTASK, HOST_KINDS,
    HOST_MARK = HOST_KINDS      /* not the kernel's: a copsim SCHED record
                                   of a context (aggregate.c) */
};

/* A thread's state; HOST_GONE after it ended. */
enum host_state {
    HOST_GONE = -1, HOST_RUNNING, HOST_RUNNABLE, HOST_BLOCKED, HOST_STATES
};

/* The names stored and reported, by enum host_state. */
extern const char *const host_state_names[HOST_STATES];

/* The names stored in host_sched_events.kind, by enum host_sched_kind. */
extern const char *const host_sched_kind_names[HOST_KINDS];

/*
 * One scheduler event.  tid/comm is the thread it is about: the thread
 * switched out (switch), woken (wakeup, wakeup_new), moved (migrate),
 * created (fork, newtask) or ended (exit).  other_tid/other_comm: the
 * thread switched in (switch), the parent (fork, newtask); 0 otherwise.
 * A HOST_MARK: tid is the context's host thread (0: not said),
 * clone_flags its copsim context id, other_tid 1 when the record ends it
 * (destroy, reap).
 */
struct host_sched_event {
    uint64_t time_ns;
    int cpu;
    int kind;
    pid_t tid, other_tid;
    char comm[HOST_COMM_MAX], other_comm[HOST_COMM_MAX];
    char prev_state[4];         /* switch: R (preempted), S, D, T, ... */
    int orig_cpu, target_cpu;   /* migrate: from, to; wakeup: target */
    uint64_t clone_flags;       /* newtask */
};

/* A thread of the session: its process, name and why it is traced, and
 * where the aggregation is in its events (aggregate.c). */
struct host_thread {
    pid_t tid, pid;
    char comm[HOST_COMM_MAX];
    const char *role;           /* "command", "copsim", "qemu", ... */
    int seen;                   /* an event gave it a state */
    int born;                   /* created while recorded: no state before */
    int state;                  /* enum host_state, once seen */
    uint64_t since;             /* when it entered it */
    uint64_t cum[HOST_STATES];  /* time in each state up to since */
    uint64_t bucket;            /* the open bucket's start, or NO_BUCKET */
    uint64_t acc[HOST_STATES];  /* its time in it so far */
};

#define HOST_NO_BUCKET  UINT64_MAX

/* A thread's time in each state in one bucket (host_thread_times). */
struct host_bucket_row {
    pid_t tid;
    uint64_t start_ns;
    uint64_t ns[HOST_STATES];
};

/* A copsim context's life and its host thread's state times in it
 * (host_context_times): begin/end are the thread's cumulative times at
 * the context's first and last SCHED record. */
struct host_context {
    uint64_t id;
    pid_t tid;
    uint64_t start_ns, end_ns;
    uint64_t begin[HOST_STATES], end[HOST_STATES];
    int begin_unknown, end_unknown; /* taken before the thread's first
                                       event: settled by it */
};

/* The newest scheduler events, oldest first from `next` once full. */
struct host_sched_ring {
    struct host_sched_event *items;
    size_t cap, next, n;
    uint64_t dropped;           /* let go to make room */
};

/* hp->threads by tid: an open-addressing table of index + 1 (0: free). */
struct host_tid_index {
    uint32_t *slots;
    size_t cap;
};

/* One host CPU sample; its callchain is chain_len addresses of
 * host_samples.chain from chain_off, innermost first. */
struct host_sample {
    uint64_t time_ns, ip;
    pid_t pid, tid;
    uint32_t cpu;
    size_t chain_off, chain_len;
    int location;               /* set by symbols.c: host_locations index */
};

/* An executable mapping of a process (PERF_RECORD_MMAP2). */
struct host_map {
    pid_t pid;
    uint64_t start, len, pgoff;
    char *path;
};

/* A fork seen by the sampler: pid's memory was ppid's until its exec. */
struct host_fork {
    pid_t pid, ppid;
};

/* A place in host code, as symbols.c names it. */
struct host_location {
    char *file, *build_id, *symbol, *inlined, *source;
    uint64_t offset;            /* the address's offset in its symbol */
    int line;
};

/* Everything recorded, and how. */
struct hostprof {
    struct vec pending;         /* struct host_sched_event: read, not yet
                                   aggregated (aggregate.c) */
    struct host_sched_ring ring;      /* the newest aggregated events */
    struct vec threads;         /* struct host_thread */
    struct host_tid_index index;
    struct vec contexts;        /* struct host_context: live */
    struct vec bucket_rows;     /* struct host_bucket_row: to store */
    struct vec context_rows;    /* struct host_context: to store */
    uint64_t bucket_ns;         /* host_thread_times' bucket width */
    uint64_t sched_events;      /* the session's events aggregated */
    uint64_t aggregated_ns;     /* the time aggregated up to */
    uint64_t sched_late;        /* events read after later ones had been
                                   aggregated: taken at aggregated_ns */
    const char *sched_threads;  /* "command" or "all" */
    struct vec samples;         /* struct host_sample */
    struct vec chain;           /* uint64_t */
    struct vec maps;            /* struct host_map */
    struct vec forks;           /* struct host_fork */
    struct vec locations;       /* struct host_location */
    char sched_state[HOST_ERR_MAX];   /* "recorded", or why not */
    char samples_state[HOST_ERR_MAX]; /* "recorded", "off", or why not */
    char event[128];            /* the host event as given */
    uint64_t period;
    int call_graph;
    uint64_t lost_samples, lost_sched;
    uint64_t start_ns, stop_ns;     /* the recording, CLOCK_MONOTONIC */
};

void hostprof_init(struct hostprof *hp);
void hostprof_free(struct hostprof *hp);

/* The thread tid, added (pid, role) when new; NULL when out of memory. */
struct host_thread *hostprof_thread(struct hostprof *hp, pid_t tid,
                                    pid_t pid, const char *role);
struct host_thread *hostprof_find_thread(struct hostprof *hp, pid_t tid);

/* Adds pid's threads (/proc/PID/task) with role; its child processes
 * (/proc/.../children) too, as role_children.  The number of threads. */
int hostprof_add_process(struct hostprof *hp, pid_t pid, const char *role,
                         const char *role_children);

/* Whether every thread of the session has ended (gone from /proc or a
 * zombie): none of them can run or create a task any more. */
int hostprof_threads_ended(const struct hostprof *hp);

#endif
