/*
 * store.h — the host side written into the session's session.db, beside
 * what coprofd wrote (docs/session-format.md, "The host side"): the
 * tables host_threads, host_sched_events, host_locations and
 * host_samples, and the session keys host.*.  One transaction, after
 * coprofd has finished (a busy database is waited for up to 30 s).
 */
#ifndef COPROF_HOSTPROF_STORE_H
#define COPROF_HOSTPROF_STORE_H

#include "hostprof/hostprof.h"

/* chain_locations: host_symbolize()'s.  0, or -1 with one line in err. */
int host_store(const char *session_dir, struct hostprof *hp,
               const int *chain_locations, char *err, size_t errlen);

/* The host processes that run contexts in the session (coprofd's
 * contexts table, as of its last flush), added to *pids (pid_t) when new.
 * 0, or -1 when the session cannot be read now. */
int host_session_pids(const char *session_dir, struct vec *pids);

#endif
