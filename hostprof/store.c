/*
 * store.c — the host tables of a session (store.h).
 *
 * The schema is created if absent (CREATE ... IF NOT EXISTS), so a session
 * without a host side simply lacks the tables, and the rows are inserted
 * through prepared statements in one IMMEDIATE transaction: a reader sees
 * all of the host side or none of it.  Scheduler events are stored when
 * the thread they are about, or the thread switched in, is one of the
 * session's (hp->threads); the kernel's filter already keeps little else.
 */
#include "hostprof/store.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_MS     30000

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS host_threads ("
    " tid INTEGER PRIMARY KEY, pid INTEGER NOT NULL, comm TEXT,"
    " role TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS host_sched_events ("
    " id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL,"
    " cpu INTEGER NOT NULL, kind TEXT NOT NULL, tid INTEGER NOT NULL,"
    " comm TEXT, prev_state TEXT, other_tid INTEGER, other_comm TEXT,"
    " orig_cpu INTEGER, target_cpu INTEGER, clone_flags INTEGER);"
    "CREATE INDEX IF NOT EXISTS host_sched_events_tid"
    " ON host_sched_events (tid, time_ns);"
    "CREATE TABLE IF NOT EXISTS host_locations ("
    " id INTEGER PRIMARY KEY, file TEXT NOT NULL, build_id TEXT,"
    " symbol TEXT, symbol_offset INTEGER NOT NULL, inlined TEXT,"
    " source TEXT, line INTEGER);"
    "CREATE TABLE IF NOT EXISTS host_samples ("
    " id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL,"
    " pid INTEGER NOT NULL, tid INTEGER NOT NULL, cpu INTEGER NOT NULL,"
    " ip INTEGER NOT NULL, location INTEGER NOT NULL, callchain TEXT);";

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

/* The newest name each thread had in the events (host_threads.comm). */
static void name_threads(struct hostprof *hp)
{
    for (size_t i = 0; i < hp->sched.n; i++) {
        struct host_sched_event *e = VEC_AT(&hp->sched,
                                            struct host_sched_event, i);
        struct host_thread *t = hostprof_find_thread(hp, e->tid);

        if (t && e->comm[0])
            snprintf(t->comm, sizeof(t->comm), "%s", e->comm);
    }
    /* copsim's child processes that exec'd QEMU, with their threads */
    for (size_t i = 0; i < hp->threads.n; i++) {
        struct host_thread *t = VEC_AT(&hp->threads, struct host_thread, i);
        struct host_thread *main = hostprof_find_thread(hp, t->pid);

        if (strcmp(t->role, "copsim") == 0 && t->pid != (pid_t)0 && main &&
            main->pid != 0 && strncmp(main->comm, "qemu", 4) == 0)
            t->role = "qemu";
    }
}

static int ours(struct hostprof *hp, const struct host_sched_event *e)
{
    return hostprof_find_thread(hp, e->tid) ||
           (e->kind == HOST_SWITCH && hostprof_find_thread(hp,
                                                           e->other_tid));
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

/* Events in time order (each CPU's buffer is read in order, but one
 * read may end on one CPU before an event of another is committed). */
static int by_time(const void *a, const void *b)
{
    const struct host_sched_event *x = a, *y = b;

    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->cpu - y->cpu;
}

static int write_sched(struct writer *w, struct hostprof *hp)
{
    if (hp->sched.n)
        qsort(hp->sched.items, hp->sched.n,
              sizeof(struct host_sched_event), by_time);
    if (prepare(w, "INSERT INTO host_sched_events (time_ns, cpu, kind, tid,"
                " comm, prev_state, other_tid, other_comm, orig_cpu,"
                " target_cpu, clone_flags) VALUES (?,?,?,?,?,?,?,?,?,?,?)"))
        return -1;
    for (size_t i = 0; i < hp->sched.n; i++) {
        struct host_sched_event *e = VEC_AT(&hp->sched,
                                            struct host_sched_event, i);

        if (!ours(hp, e))
            continue;
        bind_event(w->stmt, e);
        if (step(w, "host_sched_events"))
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

static int write_keys(struct writer *w, struct hostprof *hp)
{
    char n[32];

    if (write_key(w, "host.sched", hp->sched_state) ||
        write_key(w, "host.samples", hp->samples_state) ||
        write_key(w, "host.end_state", "complete") ||
        write_key(w, "host.end_reason", ""))
        return -1;
    snprintf(n, sizeof(n), "%" PRIu64, hp->lost_sched);
    if (write_key(w, "host.sched_lost", n))
        return -1;
    snprintf(n, sizeof(n), "%" PRIu64, hp->start_ns);
    if (write_key(w, "host.start_ns", n))
        return -1;
    snprintf(n, sizeof(n), "%" PRIu64, hp->stop_ns);
    if (write_key(w, "host.stop_ns", n))
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

static int write_all(struct writer *w, struct hostprof *hp, const int *chain)
{
    if (sqlite3_exec(w->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "begin");
    if (sqlite3_exec(w->db, schema, NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "schema");
    name_threads(hp);
    if (write_locations(w, hp) || write_samples(w, hp, chain) ||
        write_sched(w, hp) || write_threads(w, hp) || write_keys(w, hp))
        return -1;
    if (sqlite3_exec(w->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        return fail(w, "commit");
    return 0;
}

int host_store(const char *session_dir, struct hostprof *hp,
               const int *chain_locations, char *err, size_t errlen)
{
    struct writer w = {NULL, NULL, err, errlen};
    char path[4096];
    int rc;

    snprintf(path, sizeof(path), "%s/session.db", session_dir);
    if (sqlite3_open_v2(path, &w.db, SQLITE_OPEN_READWRITE |
                        SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, w.db ? sqlite3_errmsg(w.db) :
                 "out of memory");
        sqlite3_close(w.db);
        return -1;
    }
    sqlite3_busy_timeout(w.db, BUSY_MS);
    rc = write_all(&w, hp, chain_locations);
    sqlite3_finalize(w.stmt);
    if (rc < 0)
        sqlite3_exec(w.db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(w.db);
    return rc;
}

/* ---- Reading the summary back --------------------------------------------- */

static void read_key(sqlite3 *db, const char *key, char *buf, size_t len)
{
    sqlite3_stmt *st = NULL;

    buf[0] = '\0';
    if (sqlite3_prepare_v2(db, "SELECT value FROM session WHERE key = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

static long long count_of(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long n = 0;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* What was recorded (what was not, coprof-host said when it started). */
static void describe(sqlite3 *db, char *line, size_t len)
{
    char sched[HOST_ERR_MAX], samples[HOST_ERR_MAX], event[128];
    char period[32], lost[32];
    size_t n = 0;

    read_key(db, "host.sched", sched, sizeof(sched));
    read_key(db, "host.samples", samples, sizeof(samples));
    line[0] = '\0';
    if (strcmp(sched, "recorded") == 0) {
        read_key(db, "host.sched_lost", lost, sizeof(lost));
        n += (size_t)snprintf(line, len, "Linux scheduler events of %lld "
                              "threads (%lld events, %s lost)",
                              count_of(db, "SELECT COUNT(*) FROM "
                                       "host_threads"),
                              count_of(db, "SELECT COUNT(*) FROM "
                                       "host_sched_events"), lost);
    }
    if (n < len && strcmp(samples, "recorded") == 0) {
        read_key(db, "host.event", event, sizeof(event));
        read_key(db, "host.period", period, sizeof(period));
        read_key(db, "host.samples_lost", lost, sizeof(lost));
        snprintf(line + n, len - n, "%shost samples on %s every %s: %lld, "
                 "%s lost", n ? "; " : "", event, period,
                 count_of(db, "SELECT COUNT(*) FROM host_samples"), lost);
    }
}

int host_describe(const char *session_dir, char *line, size_t len,
                  char *err, size_t errlen)
{
    char path[4096], sched[16];
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/session.db", session_dir);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY |
                        SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) :
                 "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, BUSY_MS);
    read_key(db, "host.sched", sched, sizeof(sched));
    if (!sched[0]) {
        sqlite3_close(db);
        return 1;
    }
    describe(db, line, len);
    sqlite3_close(db);
    return 0;
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

    snprintf(path, sizeof(path), "%s/session.db", session_dir);
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
