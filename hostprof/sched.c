/*
 * sched.c — the scheduler's events through a private tracefs instance
 * (sched.h).
 *
 * The instance filters in the kernel: set_event_pid holds the session's
 * threads, and the event-fork option adds every task they create.  For
 * sched_switch the kernel keeps an event when either the thread switched
 * out or the one switched in is listed, and for a wakeup when the woken
 * thread is.  Each record read is turned into a struct host_sched_event
 * with libtraceevent's field accessors; a task_newtask also adds the new
 * thread to hp->threads, in its creator's process when its clone flags
 * have CLONE_THREAD, else as a process of its own with its creator's role.
 */
#include "hostprof/sched.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>

#include <tracefs/tracefs.h>
#include <traceevent/event-parse.h>

#define INSTANCE_PREFIX     "coprof-"
#define BUFFER_ALL_KB       8192    /* per CPU, with the emulator's threads */

static const struct {
    const char *system, *name;
} sources[HOST_KINDS] = {
    [HOST_SWITCH] = {"sched", "sched_switch"},
    [HOST_WAKEUP] = {"sched", "sched_wakeup"},
    [HOST_WAKEUP_NEW] = {"sched", "sched_wakeup_new"},
    [HOST_MIGRATE] = {"sched", "sched_migrate_task"},
    [HOST_FORK] = {"sched", "sched_process_fork"},
    [HOST_EXIT] = {"sched", "sched_process_exit"},
    [HOST_NEWTASK] = {"task", "task_newtask"},
};

static long long field(struct tep_event *ev, struct tep_record *rec,
                       const char *name)
{
    unsigned long long val = 0;

    tep_get_field_val(NULL, ev, name, rec, &val, 0);
    return (long long)val;
}

static void field_comm(struct tep_event *ev, struct tep_record *rec,
                       const char *name, char *comm)
{
    int len = 0;
    const char *raw = tep_get_field_raw(NULL, ev, name, rec, &len, 0);

    comm[0] = '\0';
    if (raw && len > 0)
        snprintf(comm, HOST_COMM_MAX, "%.*s", len, raw);
}

/* sched_switch's prev_state as ps(1)'s letter: R when preempted. */
static void state_letter(long long state, char *out)
{
    static const char letters[] = "SDTtXZPI";

    out[0] = 'R';
    out[1] = '\0';
    for (int i = 0; i < 8; i++) {
        if (state & (1LL << i)) {
            out[0] = letters[i];
            return;
        }
    }
}

/* A new task: its process and role from its creator's (a QEMU is named
 * "qemu" only at the end, store.c: it is copsim's name until its exec). */
static void new_task(struct hostprof *hp, pid_t parent, pid_t tid,
                     const char *comm, uint64_t flags)
{
    struct host_thread *p = hostprof_find_thread(hp, parent), *t;
    const char *role;
    pid_t pid = tid;

    if (!p)
        return;         /* not a task of the session's */
    role = p->role;
    if (flags & CLONE_THREAD)
        pid = p->pid;
    if ((t = hostprof_thread(hp, tid, pid, role)) != NULL)
        snprintf(t->comm, sizeof(t->comm), "%s", comm);
}

static void fill(struct host_sched *s, int kind, struct tep_event *ev,
                 struct tep_record *rec, struct host_sched_event *e)
{
    switch (kind) {
    case HOST_SWITCH:
        e->tid = (pid_t)field(ev, rec, "prev_pid");
        field_comm(ev, rec, "prev_comm", e->comm);
        state_letter(field(ev, rec, "prev_state"), e->prev_state);
        e->other_tid = (pid_t)field(ev, rec, "next_pid");
        field_comm(ev, rec, "next_comm", e->other_comm);
        break;
    case HOST_WAKEUP:
    case HOST_WAKEUP_NEW:
        e->tid = (pid_t)field(ev, rec, "pid");
        field_comm(ev, rec, "comm", e->comm);
        e->target_cpu = (int)field(ev, rec, "target_cpu");
        break;
    case HOST_MIGRATE:
        e->tid = (pid_t)field(ev, rec, "pid");
        field_comm(ev, rec, "comm", e->comm);
        e->orig_cpu = (int)field(ev, rec, "orig_cpu");
        e->target_cpu = (int)field(ev, rec, "dest_cpu");
        break;
    case HOST_FORK:
        e->tid = (pid_t)field(ev, rec, "child_pid");
        field_comm(ev, rec, "child_comm", e->comm);
        e->other_tid = (pid_t)field(ev, rec, "parent_pid");
        field_comm(ev, rec, "parent_comm", e->other_comm);
        break;
    case HOST_EXIT:
        e->tid = (pid_t)field(ev, rec, "pid");
        field_comm(ev, rec, "comm", e->comm);
        break;
    case HOST_NEWTASK:
        e->tid = (pid_t)field(ev, rec, "pid");
        field_comm(ev, rec, "comm", e->comm);
        e->other_tid = tep_data_pid(s->tep, rec);
        e->clone_flags = (uint64_t)field(ev, rec, "clone_flags");
        new_task(s->hp, e->other_tid, e->tid, e->comm, e->clone_flags);
        break;
    }
}

static int take_record(struct tep_event *ev, struct tep_record *rec,
                       int cpu, void *context)
{
    struct host_sched *s = context;
    struct host_sched_event *e;

    if (rec->missed_events > 0)
        s->hp->lost_sched += (uint64_t)rec->missed_events;
    for (int kind = 0; kind < HOST_KINDS; kind++) {
        if (s->events[kind] != ev)
            continue;
        if (!(e = vec_push(&s->hp->pending)))
            return 1;       /* out of memory: stop this read */
        e->time_ns = rec->ts;
        e->cpu = cpu;
        e->kind = kind;
        fill(s, kind, ev, rec, e);
        return 0;
    }
    return 0;
}

void host_sched_read(struct host_sched *s)
{
    if (s->instance)
        tracefs_iterate_raw_events(s->tep, s->instance, NULL, 0,
                                   take_record, s);
}

static void destroy(struct host_sched *s)
{
    if (s->instance) {
        tracefs_instance_destroy(s->instance);
        tracefs_instance_free(s->instance);
        s->instance = NULL;
    }
    if (s->tep) {
        tep_free(s->tep);
        s->tep = NULL;
    }
}

/* The instance's removal, in a thread of its own: the kernel takes about
 * 0.1 s to take the instance down (its events' probes, its buffers). */
static void *remove_instance(void *instance)
{
    tracefs_instance_destroy(instance);
    tracefs_instance_free(instance);
    return NULL;
}

int host_sched_active(const struct host_sched *s)
{
    return s->instance != NULL;
}

void host_sched_stop(struct host_sched *s)
{
    struct tracefs_instance *instance = s->instance;

    if (!instance)
        return;
    tracefs_trace_off(instance);
    host_sched_read(s);
    s->instance = NULL;
    tep_free(s->tep);
    s->tep = NULL;
    if (pthread_create(&s->remover, NULL, remove_instance, instance) == 0)
        s->removing = 1;
    else
        remove_instance(instance);
}

void host_sched_finish(struct host_sched *s)
{
    if (s->removing)
        pthread_join(s->remover, NULL);
    s->removing = 0;
}

static int remove_if_stale(const char *name, void *context)
{
    struct tracefs_instance *instance;
    char *end;
    long pid;

    (void)context;
    if (strncmp(name, INSTANCE_PREFIX, strlen(INSTANCE_PREFIX)) != 0)
        return 0;
    pid = strtol(name + strlen(INSTANCE_PREFIX), &end, 10);
    if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    if ((instance = tracefs_instance_alloc(NULL, name)) != NULL) {
        tracefs_instance_destroy(instance);
        tracefs_instance_free(instance);
    }
    return 0;
}

void host_sched_remove_stale(void)
{
    tracefs_instances_walk(remove_if_stale, NULL);
}

/* set_event_pid: the threads known from index `from` on, replacing the
 * list (from 0) or added to it.  An empty list would trace every task:
 * before the session has a thread (copcontrol's, until its first host
 * program runs) it holds this process, whose events are not the
 * session's. */
static int write_pids(struct host_sched *s, size_t from)
{
    size_t len = 0, cap = (s->hp->threads.n - from) * 12 + 16;
    char *list = malloc(cap);
    int rc;

    if (!list)
        return -1;
    list[0] = '\0';
    if (!from && !s->hp->threads.n)
        len = (size_t)snprintf(list, cap, "%ld ", (long)getpid());
    for (size_t i = from; i < s->hp->threads.n; i++)
        len += (size_t)snprintf(list + len, cap - len, "%d ",
                                VEC_AT(&s->hp->threads, struct host_thread,
                                       i)->tid);
    rc = from ? tracefs_instance_file_append(s->instance, "set_event_pid",
                                             list) :
         tracefs_instance_file_write(s->instance, "set_event_pid", list);
    free(list);
    return rc < 0 ? -1 : 0;
}

int host_sched_follow(struct host_sched *s, size_t from)
{
    if (!s->instance || from >= s->hp->threads.n)
        return 0;
    return write_pids(s, from);
}

/*
 * The formats of the ring buffer's pages and of the seven events, parsed
 * into s->tep: all that reading the instance's raw events needs.  (libtracefs's
 * tracefs_local_events_system() also loads every kernel symbol and printk
 * format, which took most of this program's start-up, about 0.1 s.)
 */
static int load_formats(struct host_sched *s, const char **what)
{
    enum tep_endian endian = tep_is_bigendian() ? TEP_BIG_ENDIAN :
                             TEP_LITTLE_ENDIAN;
    char *text;
    int size, rc;

    *what = "events/header_page";
    if (!(s->tep = tep_alloc()))
        return -1;
    tep_set_file_bigendian(s->tep, endian);
    tep_set_local_bigendian(s->tep, endian);
    tep_set_long_size(s->tep, (int)sizeof(long));
    tep_set_page_size(s->tep, (int)sysconf(_SC_PAGESIZE));
    if (!(text = tracefs_instance_file_read(NULL, "events/header_page",
                                            &size)))
        return -1;
    rc = tep_parse_header_page(s->tep, text, (unsigned long)size,
                               (int)sizeof(long));
    free(text);
    for (int kind = 0; rc == 0 && kind < HOST_KINDS; kind++) {
        *what = sources[kind].name;
        text = tracefs_event_file_read(NULL, sources[kind].system,
                                       sources[kind].name, "format", &size);
        if (!text ||
            tep_parse_event(s->tep, text, (unsigned long)size,
                            sources[kind].system) != TEP_ERRNO__SUCCESS)
            rc = -1;
        free(text);
        if (rc == 0 && !(s->events[kind] = tep_find_event_by_name(
                s->tep, sources[kind].system, sources[kind].name)))
            rc = -1;
    }
    return rc;
}

/*
 * The instance's buffers: the kernel's default size (trace_buf_size,
 * 1,410 KiB per CPU unless the boot line changed it) for the command's
 * threads, BUFFER_ALL_KB with the emulator's, whose threads wake each
 * other about 150,000 times a second.  Growing them is a resize the
 * kernel takes 8-32 ms for, on the path `coprof record` waits on before
 * the command runs; the default holds about 19,000 events a CPU, many
 * times what a command's threads make between two reads (every 50 ms,
 * coprof-host.c), and what overflows is counted (hp->lost_sched).
 */
static int size_buffers(struct host_sched *s)
{
    if (!s->hp->sched_threads || strcmp(s->hp->sched_threads, "all") != 0)
        return 0;
    return tracefs_instance_set_buffer_size(s->instance, BUFFER_ALL_KB, -1);
}

/* The instance's settings and events; the step that failed in *what. */
static int configure(struct host_sched *s, const char **what)
{
    *what = "trace_clock mono";
    if (tracefs_instance_file_write(s->instance, "trace_clock", "mono") < 0)
        return -1;
    *what = "buffer_size_kb";
    if (size_buffers(s) < 0)
        return -1;
    *what = "set_event_pid";
    if (write_pids(s, 0) < 0)
        return -1;
    *what = "options/event-fork";
    if (tracefs_option_enable(s->instance, TRACEFS_OPTION_EVENT_FORK) < 0)
        return -1;
    for (int kind = 0; kind < HOST_KINDS; kind++) {
        *what = sources[kind].name;
        if (tracefs_event_file_write(s->instance, sources[kind].system,
                                     sources[kind].name, "enable", "1") < 0)
            return -1;
    }
    *what = "tracing_on";
    return tracefs_trace_on(s->instance) < 0 ? -1 : 0;
}

int host_sched_start(struct host_sched *s, struct hostprof *hp, char *err,
                     size_t errlen)
{
    const char *dir, *what;
    char name[64];

    memset(s, 0, sizeof(*s));
    s->hp = hp;
    errno = 0;
    if (!(dir = tracefs_tracing_dir()) || access(dir, R_OK | W_OK) < 0) {
        snprintf(err, errlen, "%s: %s", dir ? dir : "tracefs",
                 errno ? strerror(errno) : "not mounted");
        return -1;
    }
    host_sched_remove_stale();
    snprintf(name, sizeof(name), INSTANCE_PREFIX "%ld", (long)getpid());
    errno = 0;
    if (!(s->instance = tracefs_instance_create(name))) {
        snprintf(err, errlen, "%s/instances/%s: %s", dir, name,
                 strerror(errno ? errno : EACCES));
        return -1;
    }
    errno = 0;
    if (load_formats(s, &what) == 0 && configure(s, &what) == 0)
        return 0;
    snprintf(err, errlen, "%s/instances/%s: %s: %s", dir, name, what,
             strerror(errno ? errno : EINVAL));
    destroy(s);
    return -1;
}
