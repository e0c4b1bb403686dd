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

/*
 * What the session holds of the host side, one line for a summary:
 * "Linux scheduler events of 16 threads (1694 events, 0 lost); host
 * samples on cpu-clock every 250000: 1417, 0 lost" (what was not recorded
 * is left out: coprof-host said why when it started; "" when nothing
 * was).  1 when the session has no host side; 0 with the line; -1 with
 * one line in err.
 */
int host_describe(const char *session_dir, char *line, size_t len,
                  char *err, size_t errlen);

/* The host processes that run contexts in the session (coprofd's
 * contexts table, as of its last flush), added to *pids (pid_t) when new.
 * 0, or -1 when the session cannot be read now. */
int host_session_pids(const char *session_dir, struct vec *pids);

#endif
