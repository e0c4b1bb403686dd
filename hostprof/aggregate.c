/*
 * aggregate.c — the scheduler's events into each thread's state times per
 * bucket and per context, and the ring of the newest events
 * (aggregate.h).
 *
 * Each session thread (struct host_thread) carries its state, since when,
 * its cumulative time in each state and its open bucket; an event moves a
 * thread to a state, which closes the time in the old one (add_time: into
 * the cumulative times and the buckets it covers).  A context's times are
 * the difference of its thread's cumulative times at the context's last
 * and first SCHED record (copsim's, read by lives.c and queued here as
 * HOST_MARK events in the same time order).  A snapshot taken before the
 * thread's first event is settled by that event: the state it implies back
 * to the recording's start covers the snapshot too.  Time never goes back:
 * an event read after later ones were aggregated is taken at the time
 * aggregated so far, and counted (hp->sched_late).  Memory: the ring,
 * what is pending (the events of the last read or two), a few words per
 * thread, the live contexts, and the rows not yet stored.
 */
#include "hostprof/aggregate.h"

#include <stdlib.h>
#include <string.h>

int host_agg_init(struct hostprof *hp, size_t ring_events, uint64_t bucket_ns)
{
    struct host_sched_ring *r = &hp->ring;

    hp->bucket_ns = bucket_ns ? bucket_ns : HOST_BUCKET_NS_DEFAULT;
    memset(r, 0, sizeof(*r));
    if (!ring_events)
        return 0;
    /* untouched until events fill it: memory grows with what was
     * recorded, up to the ring's size, and the start pays nothing */
    if (!(r->items = malloc(ring_events * sizeof(*r->items))))
        return -1;
    r->cap = ring_events;
    return 0;
}

const struct host_sched_event *host_ring_at(const struct hostprof *hp,
                                            size_t i)
{
    const struct host_sched_ring *r = &hp->ring;

    return &r->items[r->n < r->cap ? i : (r->next + i) % r->cap];
}

static void ring_push(struct hostprof *hp, const struct host_sched_event *e)
{
    struct host_sched_ring *r = &hp->ring;

    if (!r->cap) {
        r->dropped++;
        return;
    }
    if (r->n == r->cap)
        r->dropped++;
    else
        r->n++;
    r->items[r->next] = *e;
    r->next = (r->next + 1) % r->cap;
}

/* ---- Buckets ------------------------------------------------------------ */

static void flush_bucket(struct hostprof *hp, struct host_thread *t)
{
    struct host_bucket_row *row;

    if (t->bucket == HOST_NO_BUCKET)
        return;
    if ((t->acc[0] | t->acc[1] | t->acc[2]) &&
        (row = vec_push(&hp->bucket_rows)) != NULL) {
        row->tid = t->tid;
        row->start_ns = t->bucket;
        memcpy(row->ns, t->acc, sizeof(row->ns));
    }
    memset(t->acc, 0, sizeof(t->acc));
    t->bucket = HOST_NO_BUCKET;
}

/* [from, to) of thread t in state: its cumulative time and buckets. */
static void add_time(struct hostprof *hp, struct host_thread *t,
                     uint64_t from, uint64_t to, int state)
{
    t->cum[state] += to - from;
    while (from < to) {
        uint64_t start = from - from % hp->bucket_ns;
        uint64_t end = start + hp->bucket_ns;
        uint64_t upto = to < end ? to : end;

        if (t->bucket != start) {
            flush_bucket(hp, t);
            t->bucket = start;
        }
        t->acc[state] += upto - from;
        from = upto;
    }
}

/* ---- Contexts ----------------------------------------------------------- */

/* Thread tid's cumulative times at time_ns into out; 0, or -1 when its
 * state is not known yet (it had no event). */
static int snapshot(struct hostprof *hp, pid_t tid, uint64_t time_ns,
                    uint64_t *out)
{
    struct host_thread *t = tid ? hostprof_find_thread(hp, tid) : NULL;

    memset(out, 0, HOST_STATES * sizeof(*out));
    if (!t || !t->seen)
        return -1;
    memcpy(out, t->cum, HOST_STATES * sizeof(*out));
    if (t->state != HOST_GONE && time_ns > t->since)
        out[t->state] += time_ns - t->since;
    return 0;
}

/* Thread t's first event implies state `before` since the recording's
 * start (none when it was born): the snapshots taken until then. */
static void settle(struct hostprof *hp, const struct host_thread *t,
                   int before)
{
    for (size_t i = 0; i < hp->contexts.n; i++) {
        struct host_context *c = VEC_AT(&hp->contexts, struct host_context,
                                        i);

        if (c->tid != t->tid)
            continue;
        if (c->begin_unknown && !t->born && c->start_ns > hp->start_ns)
            c->begin[before] += c->start_ns - hp->start_ns;
        if (c->end_unknown && !t->born && c->end_ns > hp->start_ns)
            c->end[before] += c->end_ns - hp->start_ns;
        c->begin_unknown = c->end_unknown = 0;
    }
}

/* Context i into the rows to store, when its thread's times are known;
 * 1 when it left the live contexts. */
static int emit(struct hostprof *hp, size_t i)
{
    struct host_context *c = VEC_AT(&hp->contexts, struct host_context, i);
    struct host_context *row;

    if (c->begin_unknown || c->end_unknown)
        return 0;
    if (c->end_ns > c->start_ns &&
        (row = vec_push(&hp->context_rows)) != NULL)
        *row = *c;
    *c = *VEC_AT(&hp->contexts, struct host_context, --hp->contexts.n);
    return 1;
}

static struct host_context *find_context(struct hostprof *hp, uint64_t id,
                                         size_t *at)
{
    for (size_t i = 0; i < hp->contexts.n; i++) {
        struct host_context *c = VEC_AT(&hp->contexts, struct host_context,
                                        i);

        if (c->id == id) {
            *at = i;
            return c;
        }
    }
    return NULL;
}

static void mark(struct hostprof *hp, const struct host_sched_event *e)
{
    size_t at;
    struct host_context *c = find_context(hp, e->clone_flags, &at);

    if (!c) {
        if (!(c = vec_push(&hp->contexts)))
            return;
        at = hp->contexts.n - 1;
        c->id = e->clone_flags;
        c->tid = e->tid;
        c->start_ns = e->time_ns;
        c->begin_unknown = snapshot(hp, c->tid, c->start_ns, c->begin) < 0;
    }
    if (!c->tid && e->tid) {
        c->tid = e->tid;
        c->begin_unknown = snapshot(hp, c->tid, c->start_ns, c->begin) < 0;
    }
    c->end_ns = e->time_ns;
    c->end_unknown = snapshot(hp, c->tid, c->end_ns, c->end) < 0;
    if (e->other_tid)
        emit(hp, at);      /* else at the end, when its thread is seen */
}

int host_agg_mark(struct hostprof *hp, uint64_t time_ns, uint64_t id,
                  pid_t tid, int ends)
{
    struct host_sched_event *e = vec_push(&hp->pending);

    if (!e)
        return -1;
    e->time_ns = time_ns;
    e->cpu = -1;
    e->kind = HOST_MARK;
    e->tid = tid;
    e->other_tid = ends ? 1 : 0;
    e->clone_flags = id;
    return 0;
}

/* ---- States ------------------------------------------------------------- */

/* Thread tid enters state at time_ns; `before`: the state its first event
 * implies back to the start. */
static void move(struct hostprof *hp, pid_t tid, uint64_t time_ns, int state,
                 int before)
{
    struct host_thread *t = tid ? hostprof_find_thread(hp, tid) : NULL;

    if (!t)
        return;
    if (!t->seen) {
        if (!t->born && time_ns > hp->start_ns)
            add_time(hp, t, hp->start_ns, time_ns, before);
        t->seen = 1;
        settle(hp, t, before);
    } else if (t->state == state) {
        return;
    } else if (t->state != HOST_GONE) {
        add_time(hp, t, t->since, time_ns, t->state);
    }
    t->state = state;
    t->since = time_ns;
}

static void switched(struct hostprof *hp, const struct host_sched_event *e)
{
    char st = e->prev_state[0] ? e->prev_state[0] : 'R';
    int out = st == 'X' || st == 'Z' ? HOST_GONE :
              st == 'R' ? HOST_RUNNABLE : HOST_BLOCKED;

    move(hp, e->tid, e->time_ns, out, HOST_RUNNING);
    move(hp, e->other_tid, e->time_ns, HOST_RUNNING, HOST_RUNNABLE);
}

static void woken(struct hostprof *hp, const struct host_sched_event *e)
{
    struct host_thread *t = hostprof_find_thread(hp, e->tid);

    if (!t)
        return;
    if (e->kind == HOST_WAKEUP_NEW && !t->seen)
        t->born = 1;
    if (!t->seen || t->state != HOST_RUNNING)
        move(hp, e->tid, e->time_ns, HOST_RUNNABLE, HOST_BLOCKED);
}

static void states(struct hostprof *hp, const struct host_sched_event *e)
{
    struct host_thread *t;

    switch (e->kind) {
    case HOST_SWITCH:
        switched(hp, e);
        break;
    case HOST_WAKEUP:
    case HOST_WAKEUP_NEW:
        woken(hp, e);
        break;
    case HOST_FORK:
    case HOST_NEWTASK:
        if ((t = hostprof_find_thread(hp, e->tid)) != NULL && !t->seen)
            t->born = 1;
        break;
    }
}

/* ---- In time order ------------------------------------------------------ */

/* An event about a session thread, or switching one in. */
static struct host_thread *ours(struct hostprof *hp,
                                const struct host_sched_event *e)
{
    struct host_thread *t = hostprof_find_thread(hp, e->tid);

    if (!t && e->kind == HOST_SWITCH)
        return hostprof_find_thread(hp, e->other_tid);
    return t;
}

static void aggregate(struct hostprof *hp, struct host_sched_event *e)
{
    struct host_thread *t;

    /* time never goes back: an event read too late (a CPU's buffer page
     * handed over after the settling time) is taken as of now */
    if (e->time_ns < hp->aggregated_ns) {
        e->time_ns = hp->aggregated_ns;
        hp->sched_late++;
    }
    hp->aggregated_ns = e->time_ns;
    if (e->kind == HOST_MARK) {
        mark(hp, e);
        return;
    }
    if (!(t = ours(hp, e)))
        return;
    /* the newest name each thread had in the events (host_threads.comm) */
    if (t->tid == e->tid && e->comm[0])
        memcpy(t->comm, e->comm, sizeof(t->comm));
    hp->sched_events++;
    ring_push(hp, e);
    states(hp, e);
}

/* Time order; at one time the CPU's order (marks, cpu -1, first). */
static int by_time(const void *a, const void *b)
{
    const struct host_sched_event *x = a, *y = b;

    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->cpu - y->cpu;
}

void host_agg_advance(struct hostprof *hp, uint64_t upto)
{
    struct host_sched_event *items = hp->pending.items;
    size_t n = hp->pending.n, done = 0;

    if (!n)
        return;
    qsort(items, n, sizeof(*items), by_time);
    while (done < n && items[done].time_ns < upto)
        aggregate(hp, &items[done++]);
    memmove(items, items + done, (n - done) * sizeof(*items));
    hp->pending.n = n - done;
}

void host_agg_finish(struct hostprof *hp)
{
    host_agg_advance(hp, UINT64_MAX);
    for (size_t i = 0; i < hp->threads.n; i++) {
        struct host_thread *t = VEC_AT(&hp->threads, struct host_thread, i);

        if (t->seen && t->state != HOST_GONE && hp->stop_ns > t->since) {
            add_time(hp, t, t->since, hp->stop_ns, t->state);
            t->since = hp->stop_ns;
        }
        flush_bucket(hp, t);
    }
    for (size_t i = 0; i < hp->contexts.n;)
        if (!emit(hp, i))
            i++;
    hp->contexts.n = 0;     /* threads never seen: no times */
}
