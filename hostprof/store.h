/*
 * store.h — the host side written into the session's session.db, beside
 * what coprofd wrote (docs/session-format.md, "The host side"): the
 * tables host_threads, host_thread_times, host_context_times,
 * host_sched_events, host_locations and host_samples, and the session
 * keys host.*.  Each store one transaction (a busy database is waited for
 * up to 30 s).
 */
#ifndef COPROF_HOSTPROF_STORE_H
#define COPROF_HOSTPROF_STORE_H

#include "hostprof/hostprof.h"

/* What a store writes: the aggregates' rows that waited (with the
 * threads and keys); at a dump also the ring's raw events; at the end also
 * the host samples. */
#define HOST_STORE_ROWS     0
#define HOST_STORE_DUMP     1
#define HOST_STORE_END      2

/* chain_locations: host_symbolize()'s (HOST_STORE_END).  0, or -1 with
 * one line in err (the rows stay, for the next store). */
int host_store(const char *session_dir, struct hostprof *hp,
               const int *chain_locations, int what, char *err,
               size_t errlen);

/* The host processes that run contexts in the session (coprofd's
 * contexts table, as of its last flush), added to *pids (pid_t) when new.
 * 0, or -1 when the session cannot be read now. */
int host_session_pids(const char *session_dir, struct vec *pids);

#endif
