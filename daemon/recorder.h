/*
 * recorder.h — one profiling session being recorded: the stream's session
 * state, its database and the event-log import, flushed together.
 *
 * coprofd drives a recorder from its main loop (input, timer, signals);
 * bench/daemon drives one from memory.  A flush is one transaction: the
 * session's changes since the last flush, the new scheduler events and the
 * flush time.  A flush that fails (a full disk) is rolled back and loses
 * nothing: the same data goes into the next one.
 */
#ifndef COPROF_DAEMON_RECORDER_H
#define COPROF_DAEMON_RECORDER_H

#include "daemon/session.h"

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct recorder_options {
    const char *session_dir;
    const char *event_log;      /* the kernel event log, or NULL */
    const char *source;         /* where the stream comes from */
    bool overwrite;             /* replace a session already there */
    bool live;                  /* the event log is still being written */
    bool quiet;                 /* no warnings on stderr */
    unsigned busy_timeout_ms;   /* how long a flush waits for another
                                   writer of the database; 0: 5000 */
    uint64_t timeline_ns;       /* sample timeline buckets; 0: none */
};

struct recorder;

struct recorder *recorder_open(const struct recorder_options *options,
                               GError **error);
/* Flushes nothing: call recorder_flush() first to keep the data. */
void recorder_close(struct recorder *recorder);

void recorder_feed(struct recorder *recorder, const uint8_t *bytes,
                   size_t length);
/* The stream ended, or the daemon is stopping (session_finish). */
void recorder_finish(struct recorder *recorder);
/* One transaction; -1 with *error set when it failed (nothing lost).
 * reason ("timer", "dump", "end", ...) is recorded with it. */
int recorder_flush(struct recorder *recorder, const char *reason,
                   GError **error);

struct session *recorder_session(struct recorder *recorder);
const char *recorder_db_path(const struct recorder *recorder);
uint64_t recorder_flushes(const struct recorder *recorder);
uint64_t recorder_sched_events(const struct recorder *recorder);

/*
 * The session's end as its keys tell it (docs/session-format.md):
 * end_state is "live" from the first transaction on; recorder_set_end()
 * makes the next flush write "complete" (reason NULL) or "incomplete" with
 * the one-line reason in end_reason.  recorder_write_end() writes only
 * those two keys, one small transaction, for when a whole flush failed.
 */
void recorder_set_end(struct recorder *recorder, const char *reason);
int recorder_write_end(struct recorder *recorder, GError **error);
/* The OS error (errno) behind the last failed flush, or 0. */
int recorder_last_errno(const struct recorder *recorder);

#endif /* COPROF_DAEMON_RECORDER_H */
