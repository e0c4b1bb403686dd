/*
 * recorder.c — a session, its store and its event-log import (recorder.h).
 */
#include "daemon/recorder.h"
#include "daemon/schedlog.h"
#include "daemon/store.h"

#include <glib.h>
#include <time.h>

#define COPROFD_VERSION "1.0"

struct recorder {
    struct recorder_options options;
    struct store *store;
    struct session *session;
    struct schedlog *schedlog;      /* NULL without an event log */
    bool finished;
    bool end_set;                   /* recorder_set_end() was called */
    char *end_reason;               /* NULL: the session is complete */
    uint64_t flushes;
};

static int64_t clock_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The session keys written once, in the first transaction. */
static int write_header(struct recorder *r, GError **error)
{
    if (store_begin(r->store, error) != 0)
        return -1;
    if (store_put_meta_int(r->store, "format_version",
                           store_format_version()) != 0 ||
        store_put_meta_text(r->store, "coprofd_version",
                            COPROFD_VERSION) != 0 ||
        store_put_meta_text(r->store, "source", r->options.source) != 0 ||
        store_put_meta_int(r->store, "created_realtime_ns",
                           clock_ns(CLOCK_REALTIME)) != 0 ||
        store_put_meta_text(r->store, "end_state", "live") != 0 ||
        store_put_meta_text(r->store, "end_reason", "") != 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: %s",
                    store_db_path(r->store), store_last_error(r->store));
        store_rollback(r->store);
        return -1;
    }
    return store_commit(r->store, error);
}

struct recorder *recorder_open(const struct recorder_options *options,
                               GError **error)
{
    struct recorder *r = g_new0(struct recorder, 1);

    r->options = *options;
    r->store = store_open(options->session_dir, options->overwrite, error);
    if (r->store != NULL && options->busy_timeout_ms != 0)
        store_set_busy_timeout(r->store, options->busy_timeout_ms);
    if (r->store == NULL || write_header(r, error) != 0) {
        recorder_close(r);
        return NULL;
    }
    r->session = session_new(options->session_dir, options->timeline_ns,
                             options->quiet);
    if (options->event_log != NULL)
        r->schedlog = schedlog_new(options->event_log, 0, options->quiet);
    return r;
}

void recorder_close(struct recorder *r)
{
    if (r == NULL)
        return;
    schedlog_free(r->schedlog);
    session_free(r->session);
    store_close(r->store);
    g_free(r->end_reason);
    g_free(r);
}

void recorder_feed(struct recorder *r, const uint8_t *bytes, size_t length)
{
    session_feed(r->session, bytes, length);
}

void recorder_finish(struct recorder *r)
{
    session_finish(r->session);
    r->finished = true;
}

void recorder_set_end(struct recorder *r, const char *reason)
{
    g_free(r->end_reason);
    r->end_reason = g_strdup(reason);
    r->end_set = true;
}

/* end_state and end_reason, once the end is known. */
static int write_end(struct recorder *r)
{
    if (!r->end_set)
        return 0;
    if (store_put_meta_text(r->store, "end_state", r->end_reason ?
                            "incomplete" : "complete") != 0)
        return -1;
    return store_put_meta_text(r->store, "end_reason",
                               r->end_reason ? r->end_reason : "");
}

int recorder_write_end(struct recorder *r, GError **error)
{
    if (store_begin(r->store, error) != 0)
        return -1;
    if (write_end(r) != 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: %s",
                    store_db_path(r->store), store_last_error(r->store));
        store_rollback(r->store);
        return -1;
    }
    if (store_commit(r->store, error) != 0) {
        store_rollback(r->store);
        return -1;
    }
    return 0;
}

int recorder_last_errno(const struct recorder *r)
{
    return store_last_errno(r->store);
}

/* The session's scheduler events: those from its stream's START on, so
 * none before the START is read (a stream that ended without one gets the
 * whole log). */
static int import_events(struct recorder *r)
{
    bool live = r->options.live && !r->finished;
    uint64_t start_ns;

    if (session_start_time(r->session, &start_ns))
        schedlog_start_at(r->schedlog, start_ns);
    else if (!r->finished)
        return 0;
    if (schedlog_import(r->schedlog, r->store, live) < 0 ||
        store_link_creation_stacks(r->store) != 0)
        return -1;
    return 0;
}

static int write_all(struct recorder *r, const char *reason)
{
    if (session_write(r->session, r->store) != 0 || write_end(r) != 0)
        return -1;
    if (r->schedlog != NULL && import_events(r) != 0)
        return -1;
    g_autofree char *reason_key = g_strconcat("flushes.", reason, NULL);
    int64_t count = store_get_meta_int(r->store, reason_key, 0);
    if (store_put_meta_int(r->store, reason_key, count + 1) != 0 ||
        store_put_meta_text(r->store, "last_flush_reason", reason) != 0)
        return -1;
    return store_put_meta_int(r->store, "last_flush_realtime_ns",
                              clock_ns(CLOCK_REALTIME));
}

int recorder_flush(struct recorder *r, const char *reason, GError **error)
{
    if (store_begin(r->store, error) != 0)
        return -1;
    if (write_all(r, reason) != 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: %s",
                    store_db_path(r->store), store_last_error(r->store));
        goto fail;
    }
    if (store_commit(r->store, error) != 0)
        goto fail;
    session_written(r->session);
    if (r->schedlog != NULL)
        schedlog_committed(r->schedlog);
    r->flushes++;
    return 0;
fail:
    store_rollback(r->store);
    if (r->schedlog != NULL)
        schedlog_rolled_back(r->schedlog);
    return -1;
}

struct session *recorder_session(struct recorder *r)
{
    return r->session;
}

const char *recorder_db_path(const struct recorder *r)
{
    return store_db_path(r->store);
}

uint64_t recorder_flushes(const struct recorder *r)
{
    return r->flushes;
}

uint64_t recorder_sched_events(const struct recorder *r)
{
    return r->schedlog ? schedlog_imported(r->schedlog) : 0;
}
