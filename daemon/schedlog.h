/*
 * schedlog.h — importing the scheduler's events from the kernel event log.
 *
 * copsim logs every create, load, bind, unbind, preempt, exit and fault to
 * the event log's SCHED subsystem (eventlog/coplog.h).  At each flush the
 * daemon copies the SCHED events it has not copied yet into the session's
 * sched_events table, in the log's global order, resuming from the order
 * number reached by the last committed flush (kept in the session as
 * eventlog.position).  A flush that fails is rolled back and the reader
 * goes back to that position, so every event lands exactly once.
 *
 * Messages are formatted and kept whole; by convention (docs/
 * session-format.md) a SCHED message is a kind word followed by key=value
 * fields (copsim's emulator/copsim/schedlog.c writes them so), and the
 * fields slot, context, cycles, pid, tid and stack (the last field; its
 * value runs to the end of the message) get columns of their own.
 */
#ifndef COPROF_DAEMON_SCHEDLOG_H
#define COPROF_DAEMON_SCHEDLOG_H

#include "daemon/store.h"

#include <stdbool.h>
#include <stdint.h>

struct schedlog;

/* The log at path; opened lazily (it may not exist yet), resuming after
 * order `position`.  quiet: no warnings. */
struct schedlog *schedlog_new(const char *path, uint64_t position, bool quiet);
void schedlog_free(struct schedlog *log);

/* The session started at start_ns (CLOCK_MONOTONIC, the stream's START):
 * events logged before it are not the session's and are not imported.
 * Only the first call counts. */
void schedlog_start_at(struct schedlog *log, uint64_t start_ns);

/*
 * Copies the events available now into the store's open transaction.
 * live: only events no writer can still precede (a log being written);
 * otherwise everything committed (a log whose writers are done).
 * Returns the events copied, or -1 (store error).
 */
int64_t schedlog_import(struct schedlog *log, struct store *store, bool live);
/* The transaction holding the last imports committed, or was rolled back. */
void schedlog_committed(struct schedlog *log);
void schedlog_rolled_back(struct schedlog *log);

/* Events copied and committed so far. */
uint64_t schedlog_imported(const struct schedlog *log);

/* Splits a SCHED message into its kind and fields (exposed for tests). */
void schedlog_parse_message(const char *message,
                            struct store_sched_event *event,
                            char **kind, char **stack);

#endif /* COPROF_DAEMON_SCHEDLOG_H */
