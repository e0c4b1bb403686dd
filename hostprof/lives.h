/*
 * lives.h — copsim's SCHED records of the contexts (its event log,
 * events.coplog: emulator/copsim/schedlog.c), followed as they are
 * written, so that aggregate.c can give each context its host thread's
 * state times: every record naming a context (`context=`) becomes a
 * HOST_MARK at its `mono=` time, with the record's host thread (`tid=`),
 * ending the context on `destroy` and `reap`.  The records are read from
 * the recording's start on, in the log's merged order (libcoplog's live
 * reader), and all that is committed at the end.
 */
#ifndef COPROF_HOSTPROF_LIVES_H
#define COPROF_HOSTPROF_LIVES_H

#include "hostprof/hostprof.h"

struct coplog_reader;

struct host_lives {
    const char *path;           /* NULL: no event log */
    struct coplog_reader *reader;
    int unusable;               /* no SCHED subsystem: given up */
};

/* Reads what the log holds now (all: also what is not final yet, at the
 * end) into hp's pending events.  A log not there yet is tried again at
 * the next call. */
void host_lives_read(struct host_lives *l, struct hostprof *hp, int all);
void host_lives_close(struct host_lives *l);

#endif
