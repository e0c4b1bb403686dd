/*
 * sched.h — the Linux scheduler's events of the session's threads, from a
 * private tracefs instance (libtracefs, libtraceevent).
 *
 * host_sched_start() makes the instance "coprof-PID" (PID: this
 * process), so the system's own tracing and other sessions are untouched:
 * its trace clock "mono" (CLOCK_MONOTONIC), its set_event_pid the
 * threads known to hp (hostprof_add_process), with event-fork so that
 * every thread and process they create later is traced too, and the
 * events sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task,
 * sched_process_fork, sched_process_exit and task_newtask (whose clone
 * flags tell a new thread from a new process).  host_sched_read() drains
 * the instance's buffers into hp->sched (call it often: the buffers are
 * the kernel's default size per CPU, 8 MiB when the emulator's threads are
 * followed too, and what overflows is counted in hp->lost_sched);
 * host_sched_stop() stops tracing, drains the rest and starts removing
 * the instance in a thread (the kernel takes about 0.1 s), so that the
 * session is stored meanwhile; host_sched_finish() waits for the
 * removal.  Every error path of host_sched_start() removes it at once.
 *
 * Start-up is what `coprof record` waits for before the command runs, so
 * it is kept to what the kernel must do: the instance, its clock (and,
 * for all threads, its buffers), the seven events' enable files; libtraceevent parses only
 * the ring buffer's page header and the seven formats.
 */
#ifndef COPROF_HOSTPROF_SCHED_H
#define COPROF_HOSTPROF_SCHED_H

#include "hostprof/hostprof.h"

#include <pthread.h>

struct tracefs_instance;
struct tep_handle;
struct tep_event;

struct host_sched {
    struct tracefs_instance *instance;
    struct tep_handle *tep;
    struct tep_event *events[HOST_KINDS];
    struct hostprof *hp;
    pthread_t remover;          /* removing the instance, if removing */
    int removing;
};

/* 0, or -1 with one line in err (no privilege: "Permission denied"). */
int host_sched_start(struct host_sched *s, struct hostprof *hp, char *err,
                     size_t errlen);
void host_sched_read(struct host_sched *s);

/* Adds the threads of hp->threads from index `from` on to the instance's
 * filter (a process followed once it runs; its earlier events are not
 * had).  0, or -1. */
int host_sched_follow(struct host_sched *s, size_t from);
/* Whether tracing runs (started and not yet stopped). */
int host_sched_active(const struct host_sched *s);
void host_sched_stop(struct host_sched *s);
void host_sched_finish(struct host_sched *s);

/* Removes the instances left by coprof-host processes that are gone
 * (killed with SIGKILL, which no cleanup survives). */
void host_sched_remove_stale(void);

#endif
