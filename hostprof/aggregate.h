/*
 * aggregate.h — the scheduler's events turned, as they come, into what
 * reports use (docs/session-format.md, "The host side"):
 *
 *   - per thread and time bucket (hp->bucket_ns wide), its running,
 *     runnable and blocked time: hp->bucket_rows;
 *   - per copsim context, its host thread's time in each state from the
 *     context's first SCHED record to its last: hp->context_rows;
 *   - the newest events themselves in a ring of fixed size (hp->ring),
 *     what it let go counted.
 *
 * Events are read from the kernel's per-CPU buffers a little out of order
 * (sched.c), so they wait in hp->pending and are aggregated in time order
 * once no earlier one can still come (host_agg_advance's `upto`).  A
 * thread's states follow the rules of report/coprof_report/host.py to the
 * nanosecond: running from a switch in to the next switch out; runnable
 * after a switch out with prev_state R or a wake-up, until switched in;
 * blocked after a switch out in any other state, until woken; before a
 * thread's first event the state it implies back to the recording's
 * start (unless that event is its creation); after prev_state X or Z, none.
 */
#ifndef COPROF_HOSTPROF_AGGREGATE_H
#define COPROF_HOSTPROF_AGGREGATE_H

#include "hostprof/hostprof.h"

#define HOST_RING_DEFAULT       131072      /* events: about 10 MiB */
#define HOST_BUCKET_NS_DEFAULT  1000000000ull

/* The ring of ring_events, allocated and touched now so that the
 * recorder's memory does not grow later.  0, or -1 out of memory. */
int host_agg_init(struct hostprof *hp, size_t ring_events,
                  uint64_t bucket_ns);

/* A copsim SCHED record of context id at time_ns: its host thread tid (0:
 * not said), ends: destroy or reap.  0, or -1 out of memory. */
int host_agg_mark(struct hostprof *hp, uint64_t time_ns, uint64_t id,
                  pid_t tid, int ends);

/* Aggregates the pending events before upto, in time order. */
void host_agg_advance(struct hostprof *hp, uint64_t upto);

/* The end (hp->stop_ns): every pending event, every open state, bucket
 * and context. */
void host_agg_finish(struct hostprof *hp);

/* The i-th event of the ring, oldest first (i < hp->ring.n). */
const struct host_sched_event *host_ring_at(const struct hostprof *hp,
                                            size_t i);

#endif
