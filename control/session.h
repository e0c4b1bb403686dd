/*
 * session.h — the session directory that coprofd writes
 * (docs/session-format.md), as copcontrol and coprof record handle it.
 *
 * session_prepare() readies DIR for a new session the way perf keeps
 * perf.data.old: a DIR that exists and is not empty is renamed DIR.old
 * (an older DIR.old that is provably a session and holds nothing else, or
 * is empty, is removed first; any other DIR.old is refused), then DIR is
 * created and must be writable.
 * session_read() reads the totals a summary shows from DIR/session.db,
 * opened read-only (WAL: the last committed flush, while coprofd runs).
 * Functions that can fail return -1 with one line in err.
 */
#ifndef COPROF_CONTROL_SESSION_H
#define COPROF_CONTROL_SESSION_H

#include "abi/session-dir.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SESSION_CAUSES_MAX  8

struct session_totals {
    int64_t samples;            /* stream.samples */
    int64_t callstacks;         /* stream.callstacks: samples with their
                                   call stack (--call-graph) */
    int64_t lost;               /* sum of lost_by_cause but outside-ls */
    int64_t outside;            /* outside-ls: captures of no context's
                                   code (QEMU's reset code), not lost */
    /* each cause escape-protocol names (also at 0), then others found */
    int64_t contexts;           /* rows of contexts */
    int64_t images;
    int64_t sched_events;
    int64_t complete;           /* stream.complete */
    int64_t dumps;              /* flushes.dump */
    char fifo_full[16];         /* sampling.fifo_full; "" when absent */
    char dither[16];            /* sampling.dither: "on", "off" or "" */
    uint64_t dither_seed;       /* sampling.dither_seed */
    int64_t stalls, stall_ns;   /* summed over the stalls table */
    int64_t run_ns;             /* stream.stop_time_ns - start_time_ns */
    int64_t slots;              /* stream.slots */
    char end_state[16];         /* live, complete, incomplete; "" if none */
    char end_reason[512];       /* why it is incomplete */
    char host_end_state[16];    /* host.end_state: live, complete,
                                   incomplete; "" without a host side */
    char host_end_reason[512];  /* host.end_reason */
    unsigned n_causes;
    struct {
        char name[32];
        int64_t count;
    } causes[SESSION_CAUSES_MAX];
};

/* $XDG_DATA_HOME/coprof/current, else ~/.local/share/coprof/current. */
int session_default_dir(char *buf, size_t len);

/* An option's path made absolute (against the working directory). */
int session_absolute(const char *option, const char *path, char *buf,
                     size_t len, char *err, size_t errlen);

/*
 * Moves an existing DIR aside to DIR.old, creates DIR, checks it; *moved
 * (if given) says whether DIR.old is the moved session.  DIR is walked by
 * common/safe-file.h's rule: a link another user planted on the way, a
 * DIR that is a link or another user's directory are refused before
 * anything moves; only DIR itself is created (0700; a missing parent is
 * an error naming it, except for the default directory's, made in the
 * user's data folder); an empty DIR of this user's is made 0700.
 */
int session_prepare(const char *dir, int *moved, char *err, size_t errlen);

/* Undoes session_prepare: removes the new DIR, puts DIR.old back. */
void session_restore(const char *dir, int moved);

/* Removes a whole tree (a directory of our own making, or a session). */
int session_remove_tree(const char *path, char *err, size_t errlen);

/*
 * Whether DIR holds a coprof session and nothing else: its session.db
 * opens as SQLite and has the session table with format_version, and
 * every other entry is one coprofd or coprof record writes.
 */
int session_is_session(const char *dir);

/*
 * Sets n session keys (INSERT OR REPLACE into its session table, in one
 * transaction, waiting up to 5 s for coprofd's).  -1 with err when the
 * database cannot be written.
 */
int session_write_keys(const char *dir, const char *const *keys,
                       const char *const *values, int n, char *err,
                       size_t errlen);

/*
 * Completes what the session says about its end where the caller knows
 * more than coprofd could: end_state becomes "incomplete" and end_reason
 * reason (one line).  -1 with err when the database cannot be written.
 */
int session_mark_incomplete(const char *dir, const char *reason, char *err,
                            size_t errlen);

/*
 * The host side's end (session keys host.end_state, host.end_reason):
 * session_host_begin() says "live" when coprof-host starts (coprof-host
 * writes "complete" with its tables, in one transaction); a controller
 * that finds it still live once coprof-host ended marks it "incomplete"
 * with why (one line).  -1 with err when the database cannot be written.
 */
int session_host_begin(const char *dir, char *err, size_t errlen);
int session_mark_host_incomplete(const char *dir, const char *reason,
                                 char *err, size_t errlen);

/* Removes what coprofd writes in DIR (and DIR itself if then empty). */
int session_remove(const char *dir, char *err, size_t errlen);

/* The totals of DIR's session; -1 when there is no readable session. */
int session_read(const char *dir, struct session_totals *totals, char *err,
                 size_t errlen);

/*
 * What the session holds of the host side (coprof-host's tables), one line
 * for a summary: "Linux scheduler events of 16 threads (1694 events, 0
 * lost); host samples on cpu-clock every 250000: 1417, 0 lost" (what was
 * not recorded is left out: coprof-host said why when it started; "" when
 * nothing was).  1 when the session has no host side; 0 with the line;
 * -1 with one line in err.
 */
int session_describe_host(const char *dir, char *line, size_t len,
                          char *err, size_t errlen);

/* One line: "samples=N lost=N (fifo-overflow=N ...) outside-ls=N
 * contexts=N": every cause of loss the stream format names, and any other
 * the session holds; outside-ls, captures outside the local store (no
 * context's code), apart.  samples + lost + outside-ls = the captures. */
void session_describe(const struct session_totals *t, char *buf, size_t len);

/* One line: "dither on (seed S), FIFO full: stall, stalled 1.20 ms in 5
 * stalls (0.01% of the 8 slots' run time)"; "not recorded" for what a
 * session from before these keys lacks. */
void session_describe_sampling(const struct session_totals *t, char *buf,
                               size_t len);

#endif
