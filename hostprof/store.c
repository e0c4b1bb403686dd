/*
 * store.c — the host tables of a session (store.h).
 *
 * The schema is created if absent (CREATE ... IF NOT EXISTS), so a session
 * without a host side simply lacks the tables, and each store is one
 * IMMEDIATE transaction through prepared statements: the aggregates'
 * rows that waited are appended (and let go once committed), the threads
 * and keys replaced; at a dump and at the end the raw events are the
 * ring's, replacing the last dump's; at the end the host samples and the
 * places they name.  A reader sees whole stores.
 */
#include "hostprof/store.h"
#include "hostprof/aggregate.h"

#include "abi/session-dir.h"
#include "abi/session-schema.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_MS     30000

/* The host tables, from abi/session-schema.sql (generated at build
 * time): CREATE ... IF NOT EXISTS. */
static const char schema[] = SESSION_SCHEMA_COPROF_HOST;

struct writer {
    sqlite3 *db;
    sqlite3_stmt *stmt;
    char *err;
    size_t errlen;
};

static int fail(struct writer *w, const char *what)
{
    snprintf(w->err, w->errlen, "session.db: %s: %s", what,
             sqlite3_errmsg(w->db));
    return -1;
}

static int prepare(struct writer *w, const char *sql)
{
    sqlite3_finalize(w->stmt);
    w->stmt = NULL;
    return sqlite3_prepare_v2(w->db, sql, -1, &w->stmt, NULL) == SQLITE_OK ?
           0 : fail(w, "prepare");
}

static int step(struct writer *w, const char *what)
{
    int rc = sqlite3_step(w->stmt);

    sqlite3_reset(w->stmt);
    sqlite3_clear_bindings(w->stmt);
    return rc == SQLITE_DONE ? 0 : fail(w, what);
}

static void text_or_null(sqlite3_stmt *st, int col, const char *text)
{
    if (text && *text)
        sqlite3_bind_text(st, col, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, col);
}

static int write_threads(struct writer *w, struct hostprof *hp)
{
    if (prepare(w, "INSERT OR REPLACE INTO host_threads VALUES (?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->threads.n; i++) {
        struct host_thread *t = VEC_AT(&hp->threads, struct host_thread, i);

        sqlite3_bind_int(w->stmt, 1, t->tid);
        sqlite3_bind_int(w->stmt, 2, t->pid);
        text_or_null(w->stmt, 3, t->comm);
        sqlite3_bind_text(w->stmt, 4, t->role, -1, SQLITE_STATIC);
        if (step(w, "host_threads"))
            return -1;
    }
    return 0;
}

/* copsim's child processes that exec'd QEMU, with their threads (the
 * names are the newest the events gave: aggregate.c). */
static void name_threads(struct hostprof *hp)
{
    for (size_t i = 0; i < hp->threads.n; i++) {
        struct host_thread *t = VEC_AT(&hp->threads, struct host_thread, i);
        struct host_thread *main = hostprof_find_thread(hp, t->pid);

        if (strcmp(t->role, "copsim") == 0 && t->pid != (pid_t)0 && main &&
            main->pid != 0 && strncmp(main->comm, "qemu", 4) == 0)
            t->role = "qemu";
    }
}

static void bind_event(sqlite3_stmt *st, const struct host_sched_event *e)
{
    sqlite3_bind_int64(st, 1, (sqlite3_int64)e->time_ns);
    sqlite3_bind_int(st, 2, e->cpu);
    sqlite3_bind_text(st, 3, host_sched_kind_names[e->kind], -1,
                      SQLITE_STATIC);
    sqlite3_bind_int(st, 4, e->tid);
    text_or_null(st, 5, e->comm);
    text_or_null(st, 6, e->prev_state);
    if (e->kind == HOST_SWITCH || e->kind == HOST_FORK ||
        e->kind == HOST_NEWTASK) {
        sqlite3_bind_int(st, 7, e->other_tid);
        text_or_null(st, 8, e->other_comm);
    }
    if (e->kind == HOST_MIGRATE)
        sqlite3_bind_int(st, 9, e->orig_cpu);
    if (e->kind == HOST_MIGRATE || e->kind == HOST_WAKEUP ||
        e->kind == HOST_WAKEUP_NEW)
        sqlite3_bind_int(st, 10, e->target_cpu);
    if (e->kind == HOST_NEWTASK)
        sqlite3_bind_int64(st, 11, (sqlite3_int64)e->clone_flags);
}

/* The ring's events, oldest first, replacing those of the last store. */
static int write_sched(struct writer *w, struct hostprof *hp)
{
    if (sqlite3_exec(w->db, "DELETE FROM host_sched_events", NULL, NULL,
                     NULL) != SQLITE_OK)
        return fail(w, "host_sched_events");
    if (prepare(w, "INSERT INTO host_sched_events (time_ns, cpu, kind, tid,"
                " comm, prev_state, other_tid, other_comm, orig_cpu,"
                " target_cpu, clone_flags) VALUES (?,?,?,?,?,?,?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->ring.n; i++) {
        bind_event(w->stmt, host_ring_at(hp, i));
        if (step(w, "host_sched_events"))
            return -1;
    }
    return 0;
}

static int write_bucket_rows(struct writer *w, struct hostprof *hp)
{
    if (prepare(w, "INSERT INTO host_thread_times VALUES (?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->bucket_rows.n; i++) {
        struct host_bucket_row *r = VEC_AT(&hp->bucket_rows,
                                           struct host_bucket_row, i);

        sqlite3_bind_int(w->stmt, 1, r->tid);
        sqlite3_bind_int64(w->stmt, 2, (sqlite3_int64)r->start_ns);
        for (int s = 0; s < HOST_STATES; s++)
            sqlite3_bind_int64(w->stmt, 3 + s, (sqlite3_int64)r->ns[s]);
        if (step(w, "host_thread_times"))
            return -1;
    }
    return 0;
}

static int write_context_rows(struct writer *w, struct hostprof *hp)
{
    if (prepare(w, "INSERT OR REPLACE INTO host_context_times VALUES "
                "(?,?,?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->context_rows.n; i++) {
        struct host_context *c = VEC_AT(&hp->context_rows,
                                        struct host_context, i);

        sqlite3_bind_int64(w->stmt, 1, (sqlite3_int64)c->id);
        sqlite3_bind_int(w->stmt, 2, c->tid);
        sqlite3_bind_int64(w->stmt, 3, (sqlite3_int64)c->start_ns);
        sqlite3_bind_int64(w->stmt, 4, (sqlite3_int64)c->end_ns);
        for (int s = 0; s < HOST_STATES; s++)
            sqlite3_bind_int64(w->stmt, 5 + s,
                               (sqlite3_int64)(c->end[s] - c->begin[s]));
        if (step(w, "host_context_times"))
            return -1;
    }
    return 0;
}

static int write_locations(struct writer *w, struct hostprof *hp)
{
    if (prepare(w, "INSERT INTO host_locations VALUES (?,?,?,?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->locations.n; i++) {
        struct host_location *l = VEC_AT(&hp->locations,
                                         struct host_location, i);

        sqlite3_bind_int64(w->stmt, 1, (sqlite3_int64)i + 1);
        sqlite3_bind_text(w->stmt, 2, l->file, -1, SQLITE_STATIC);
        text_or_null(w->stmt, 3, l->build_id);
        text_or_null(w->stmt, 4, l->symbol);
        sqlite3_bind_int64(w->stmt, 5, (sqlite3_int64)l->offset);
        text_or_null(w->stmt, 6, l->inlined);
        text_or_null(w->stmt, 7, l->source);
        if (l->source)
            sqlite3_bind_int(w->stmt, 8, l->line);
        if (step(w, "host_locations"))
            return -1;
    }
    return 0;
}

/* The callchain's location ids, innermost first, space-separated. */
static char *chain_text(const struct host_sample *s, const int *chain)
{
    char *text = malloc(s->chain_len * 12 + 1);
    size_t len = 0;

    if (!text)
        return NULL;
    text[0] = '\0';
    for (size_t j = 0; j < s->chain_len; j++)
        len += (size_t)sprintf(text + len, "%s%d", j ? " " : "",
                               chain[s->chain_off + j] + 1);
    return text;
}

static int write_samples(struct writer *w, struct hostprof *hp,
                         const int *chain)
{
    if (prepare(w, "INSERT INTO host_samples (time_ns, pid, tid, cpu, ip,"
                " location, callchain) VALUES (?,?,?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->samples.n; i++) {
        struct host_sample *s = VEC_AT(&hp->samples, struct host_sample, i);
        char *text = s->chain_len ? chain_text(s, chain) : NULL;

        sqlite3_bind_int64(w->stmt, 1, (sqlite3_int64)s->time_ns);
        sqlite3_bind_int(w->stmt, 2, s->pid);
        sqlite3_bind_int(w->stmt, 3, s->tid);
        sqlite3_bind_int(w->stmt, 4, (int)s->cpu);
        sqlite3_bind_int64(w->stmt, 5, (sqlite3_int64)s->ip);
        sqlite3_bind_int(w->stmt, 6, s->location + 1);
        text_or_null(w->stmt, 7, text);
        free(text);
        if (step(w, "host_samples"))
            return -1;
        /* the sampled threads are the session's too */
        hostprof_thread(hp, s->tid, s->pid, "command");
    }
    return 0;
}

static int write_key(struct writer *w, const char *key, const char *value)
{
    if (prepare(w, "INSERT OR REPLACE INTO session (key, value) "
                "VALUES (?, ?)"))
        return -1;
    sqlite3_bind_text(w->stmt, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(w->stmt, 2, value, -1, SQLITE_TRANSIENT);
    return step(w, key);
}

static int write_number(struct writer *w, const char *key, uint64_t value)
{
    char n[32];

    snprintf(n, sizeof(n), "%" PRIu64, value);
    return write_key(w, key, n);
}

/* How much raw detail the session holds, and from when. */
static int write_raw_keys(struct writer *w, struct hostprof *hp)
{
    uint64_t from = hp->ring.dropped && hp->ring.n ?
                    host_ring_at(hp, 0)->time_ns : hp->start_ns;

    return write_number(w, "host.sched_events", hp->sched_events) ||
           write_number(w, "host.raw_events", hp->ring.n) ||
           write_number(w, "host.raw_dropped", hp->ring.dropped) ||
           write_number(w, "host.raw_from_ns", from) ||
           write_number(w, "host.sched_late", hp->sched_late) ||
           write_number(w, "host.ring", hp->ring.cap);
}

static int write_keys(struct writer *w, struct hostprof *hp, int what)
{
    char n[32];

    if (write_key(w, "host.sched", hp->sched_state) ||
        write_key(w, "host.sched_threads", hp->sched_threads) ||
        write_number(w, "host.sched_lost", hp->lost_sched) ||
        write_number(w, "host.start_ns", hp->start_ns) ||
        write_number(w, "host.bucket_ns", hp->bucket_ns))
        return -1;
    if (what != HOST_STORE_ROWS && write_raw_keys(w, hp))
        return -1;
    if (what != HOST_STORE_END)
        return 0;
    if (write_key(w, "host.samples", hp->samples_state) ||
        write_number(w, "host.stop_ns", hp->stop_ns) ||
        write_key(w, "host.end_state", "complete") ||
        write_key(w, "host.end_reason", ""))
        return -1;
    if (strcmp(hp->samples_state, "recorded") != 0)
        return 0;
    snprintf(n, sizeof(n), "%" PRIu64, hp->period);
    if (write_key(w, "host.event", hp->event) ||
        write_key(w, "host.period", n) ||
        write_key(w, "host.call_graph", hp->call_graph ? "fp" : "none"))
        return -1;
    snprintf(n, sizeof(n), "%" PRIu64, hp->lost_samples);
    return write_key(w, "host.samples_lost", n);
}

static int write_all(struct writer *w, struct hostprof *hp, const int *chain,
                     int what)
{
    if (sqlite3_exec(w->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "begin");
    if (sqlite3_exec(w->db, schema, NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "schema");
    if (what == HOST_STORE_END) {
        name_threads(hp);
        if (write_locations(w, hp) || write_samples(w, hp, chain))
            return -1;
    }
    if (what != HOST_STORE_ROWS && write_sched(w, hp))
        return -1;
    if (write_bucket_rows(w, hp) || write_context_rows(w, hp) ||
        write_threads(w, hp) || write_keys(w, hp, what))
        return -1;
    if (sqlite3_exec(w->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "commit");
    hp->bucket_rows.n = hp->context_rows.n = 0;     /* stored */
    return 0;
}

int host_store(const char *session_dir, struct hostprof *hp,
               const int *chain_locations, int what, char *err,
               size_t errlen)
{
    struct writer w = {NULL, NULL, err, errlen};
    char path[4096];
    int rc;

    snprintf(path, sizeof(path), "%s/%s", session_dir, SESSION_DB_NAME);
    if (sqlite3_open_v2(path, &w.db, SQLITE_OPEN_READWRITE |
                        SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, w.db ? sqlite3_errmsg(w.db) :
                 "out of memory");
        sqlite3_close(w.db);
        return -1;
    }
    sqlite3_busy_timeout(w.db, BUSY_MS);
    rc = write_all(&w, hp, chain_locations, what);
    sqlite3_finalize(w.stmt);
    if (rc < 0)
        sqlite3_exec(w.db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(w.db);
    return rc;
}

/* ---- The session's host processes ------------------------------------------ */

static int known_pid(const struct vec *pids, pid_t pid)
{
    for (size_t i = 0; i < pids->n; i++)
        if (*VEC_AT(pids, pid_t, i) == pid)
            return 1;
    return 0;
}

int host_session_pids(const char *session_dir, struct vec *pids)
{
    char path[4096];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = -1;

    snprintf(path, sizeof(path), "%s/%s", session_dir, SESSION_DB_NAME);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY |
                        SQLITE_OPEN_NOFOLLOW, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT DISTINCT pid FROM contexts WHERE "
                           "pid IS NOT NULL", -1, &st, NULL) == SQLITE_OK) {
        rc = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            pid_t pid = (pid_t)sqlite3_column_int(st, 0);
            pid_t *slot;

            if (pid > 0 && !known_pid(pids, pid) &&
                (slot = vec_push(pids)) != NULL)
                *slot = pid;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}
