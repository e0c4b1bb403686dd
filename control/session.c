/*
 * session.c — preparing, removing and reading session directories
 * (session.h).
 *
 * Removal is deliberately narrow: only the names coprofd writes
 * (session.db and its WAL files, .lock, images/) and coprof record's
 * (events.coplog, coprofd.log) are removed, then the directory if it is
 * empty, so a mistyped --session-dir never costs a user's files.  A
 * DIR.old in the way is removed whole only if it is provably a session
 * (its session.db has the session table with format_version) holding
 * nothing but those names; anything else there is refused.
 *
 * Reading is all here: control/'s commands read a session (coprofd's
 * totals, coprof-host's host side) through this file, whose queries are
 * of the tables abi/session-schema.sql defines.
 */
#include "control/session.h"

#include "control/daemons.h"
#include "control/sampling.h"
#include "escape-protocol/copstream.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The files a session directory may hold besides SESSION_CACHE_DIR:
 * coprofd's (abi/session-dir.h) with SQLite's beside the database, and
 * coprof record's own logs. */
static const char *const session_files[] = {
    SESSION_DB_NAME, SESSION_DB_NAME "-wal", SESSION_DB_NAME "-shm",
    SESSION_DB_NAME "-journal", SESSION_LOCK_NAME,
    "events.coplog", "coprofd.log", "guest.log",
};

int session_default_dir(char *buf, size_t len)
{
    const char *data = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    int n;

    if (data && *data)
        n = snprintf(buf, len, "%s/coprof/current", data);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.local/share/coprof/current", home);
    else
        return -1;
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The default directory's missing parents (in the user's own data
 * folder) are made; a directory a user named gets none made. */
static int make_default_parents(const char *dir, char *err, size_t errlen)
{
    char def[PATH_MAX], *slash;

    if (session_default_dir(def, sizeof(def)) < 0 || strcmp(def, dir) != 0)
        return 0;
    slash = strrchr(def, '/');
    if (!slash || slash == def)
        return 0;
    *slash = '\0';
    return safe_make_dirs(def, SAFE_DIR_MODE, err, errlen);
}

/*
 * Refuses, before anything is moved, a DIR that is a symbolic link or a
 * directory of another user's, and a path through a link another user
 * planted (safe_path_parent()).
 */
static int check_named_dir(const char *dir, char *err, size_t errlen)
{
    char name[NAME_MAX + 1];
    struct stat st;
    int fd = safe_path_parent(dir, name, err, errlen);

    if (fd < 0)
        return -1;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        close(fd);
        return 0;
    }
    close(fd);
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen, "%s: a symbolic link, not a directory: "
                 "refusing to use it", dir);
        return -1;
    }
    if (S_ISDIR(st.st_mode) && st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s: owned by uid %ld, not by this user (uid "
                 "%ld): refusing to use it", dir, (long)st.st_uid,
                 (long)geteuid());
        return -1;
    }
    return 0;
}

static int is_empty_dir(const char *path)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    int empty = 1;

    if (!dir)
        return 0;
    while (empty && (e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = 0;
    closedir(dir);
    return empty;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int session_remove_tree(const char *path, char *err, size_t errlen)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Whether name is one that coprofd or coprof record writes in a session,
 * of the right type (images/ a directory, the rest regular files). */
static int is_session_entry(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (lstat(path, &st) < 0)
        return 0;
    if (strcmp(name, SESSION_CACHE_DIR) == 0)
        return S_ISDIR(st.st_mode);
    for (size_t i = 0; i < sizeof(session_files) / sizeof(*session_files);
         i++)
        if (strcmp(name, session_files[i]) == 0)
            return S_ISREG(st.st_mode);
    return 0;
}

/* Whether dir/session.db is a coprof session database. */
static int has_session_db(const char *dir)
{
    char path[PATH_MAX];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt;
    int found = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, SESSION_DB_NAME);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT value FROM session WHERE key = "
                           "'format_version'", -1, &stmt, NULL) == SQLITE_OK) {
        found = sqlite3_step(stmt) == SQLITE_ROW;
        sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return found;
}

int session_is_session(const char *dir)
{
    DIR *d;
    struct dirent *e;
    int only_session = 1;

    if (!has_session_db(dir) || !(d = opendir(dir)))
        return 0;
    while (only_session && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            only_session = is_session_entry(dir, e->d_name);
    closedir(d);
    return only_session;
}

/* Makes room for DIR.old: only an empty directory or a session goes. */
static int clear_old(const char *old, char *err, size_t errlen)
{
    struct stat st;

    if (lstat(old, &st) < 0)
        return 0;
    if (S_ISDIR(st.st_mode) && is_empty_dir(old)) {
        if (rmdir(old) == 0 || errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", old, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode) && session_is_session(old))
        return session_remove_tree(old, err, errlen);
    snprintf(err, errlen, "%s: is in the way of the previous session and "
             "is not only a coprof session; move it away or remove it",
             old);
    return -1;
}

int session_absolute(const char *option, const char *path, char *buf,
                     size_t len, char *err, size_t errlen)
{
    char cwd[PATH_MAX];
    int n;

    if (!*path || strchr(path, '\n')) {
        snprintf(err, errlen, "%s=%.64s: not a usable path", option, path);
        return -1;
    }
    if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        n = snprintf(buf, len, "%s", path);
    else
        n = snprintf(buf, len, "%s/%s", cwd, path);
    if (n < 0 || (size_t)n >= len) {
        snprintf(err, errlen, "%s=%.64s...: path too long", option, path);
        return -1;
    }
    return 0;
}

/* A session_prepare() that failed after moving DIR to DIR.old puts it back
 * (DIR may have been made, empty, meanwhile); returns -1. */
static int put_back(const char *dir, int *moved)
{
    char old[PATH_MAX];

    if (moved && *moved) {
        snprintf(old, sizeof(old), "%s.old", dir);
        rmdir(dir);
        if (rename(old, dir) == 0)
            *moved = 0;
    }
    return -1;
}

int session_prepare(const char *dir, int *moved, char *err, size_t errlen)
{
    char old[PATH_MAX];
    struct stat st;
    int fd;

    if (moved)
        *moved = 0;
    if (make_default_parents(dir, err, errlen) < 0
        || check_named_dir(dir, err, errlen) < 0)
        return -1;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && !is_empty_dir(dir)) {
        snprintf(old, sizeof(old), "%s.old", dir);
        if (clear_old(old, err, errlen) < 0)
            return -1;
        if (rename(dir, old) < 0) {
            snprintf(err, errlen, "%s: cannot move it to %s: %s", dir, old,
                     strerror(errno));
            return -1;
        }
        if (moved)
            *moved = 1;
    } else if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", dir, strerror(ENOTDIR));
        return -1;
    }
    fd = safe_dir_make(dir, err, errlen);
    if (fd < 0)
        return put_back(dir, moved);
    close(fd);
    if (access(dir, W_OK | X_OK) < 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return put_back(dir, moved);
    }
    return 0;
}

int session_remove(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];

    for (size_t i = 0; i < sizeof(session_files) / sizeof(*session_files);
         i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, session_files[i]);
        if (unlink(path) < 0 && errno != ENOENT) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
    }
    snprintf(path, sizeof(path), "%s/images", dir);
    if (access(path, F_OK) == 0 && session_remove_tree(path, err, errlen) < 0)
        return -1;
    if (is_empty_dir(dir))
        rmdir(dir);
    return 0;
}

void session_restore(const char *dir, int moved)
{
    char old[PATH_MAX], err[256];

    session_remove(dir, err, sizeof(err));
    snprintf(old, sizeof(old), "%s.old", dir);
    if (moved && access(dir, F_OK) < 0)
        rename(old, dir);
}

/* One integer from a query; 0 when it gives no row or NULL. */
static int64_t query_int(sqlite3 *db, const char *sql, const char *arg)
{
    sqlite3_stmt *stmt;
    int64_t value = 0;

    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return 0;
    if (arg)
        sqlite3_bind_text(stmt, 1, arg, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return value;
}

static int64_t key(sqlite3 *db, const char *name)
{
    return query_int(db, "SELECT CAST(value AS INTEGER) FROM session "
                     "WHERE key = ?1", name);
}

/* A text key into buf ("" when absent). */
static void key_text(sqlite3 *db, const char *name, char *buf, size_t len)
{
    sqlite3_stmt *stmt;
    const unsigned char *text;

    buf[0] = '\0';
    if (sqlite3_prepare_v2(db, "SELECT value FROM session WHERE key = ?1",
                           -1, &stmt, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW &&
        (text = sqlite3_column_text(stmt, 0)) != NULL)
        snprintf(buf, len, "%s", (const char *)text);
    sqlite3_finalize(stmt);
}

/* The dither, the FIFO-full policy and the stalls (issue 13's keys). */
static void read_sampling(sqlite3 *db, struct session_totals *t)
{
    char seed[32];
    int64_t start = key(db, "stream.start_time_ns");
    int64_t stop = key(db, "stream.stop_time_ns");

    key_text(db, "sampling.fifo_full", t->fifo_full, sizeof(t->fifo_full));
    key_text(db, "sampling.dither", t->dither, sizeof(t->dither));
    key_text(db, "sampling.dither_seed", seed, sizeof(seed));
    t->dither_seed = strtoull(seed, NULL, 10);
    t->stalls = query_int(db, "SELECT SUM(count) FROM stalls", NULL);
    t->stall_ns = query_int(db, "SELECT SUM(ns) FROM stalls", NULL);
    t->run_ns = start > 0 && stop > start ? stop - start : 0;
    t->slots = key(db, "stream.slots");
}

/* The slot of a cause in t, added if new. */
static unsigned cause_slot(struct session_totals *t, const char *name)
{
    unsigned i;

    for (i = 0; i < t->n_causes; i++)
        if (strcmp(t->causes[i].name, name) == 0)
            return i;
    if (i == SESSION_CAUSES_MAX)
        return i - 1;       /* more causes than slots: the last adds up */
    snprintf(t->causes[i].name, sizeof(t->causes[i].name), "%s", name);
    t->causes[i].count = 0;
    t->n_causes++;
    return i;
}

/* Every cause of loss the stream names (0 when none was lost), then
 * others; captures outside the local store (no context's code, such as
 * QEMU's reset code) are counted apart, not as lost. */
static void read_causes(sqlite3 *db, struct session_totals *t)
{
    const char *outside = copstream_cause_name(COPSTREAM_LOST_OUTSIDE_LS);
    sqlite3_stmt *stmt;

    for (uint32_t cause = 1; cause < COPSTREAM_LOST_CAUSE_END; cause++)
        if (cause != COPSTREAM_LOST_OUTSIDE_LS)
            cause_slot(t, copstream_cause_name(cause));
    if (sqlite3_prepare_v2(db, "SELECT COALESCE(cause_name, 'cause-' || "
                           "cause), SUM(count) FROM lost_by_cause GROUP BY "
                           "cause ORDER BY cause", -1, &stmt, NULL)
        != SQLITE_OK)
        return;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(stmt, 0);
        int64_t n = sqlite3_column_int64(stmt, 1);

        if (name && strcmp((const char *)name, outside) == 0) {
            t->outside += n;
            continue;
        }
        t->causes[cause_slot(t, name ? (const char *)name : "?")].count += n;
        t->lost += n;
    }
    sqlite3_finalize(stmt);
}

/* ---- The host side ------------------------------------------------------ */

#define HOST_TEXT_MAX   512     /* host.sched, host.samples: a state */
#define HOST_BUSY_MS    30000   /* coprof-host's transaction, at most */

static long long host_key_number(sqlite3 *db, const char *key,
                                 long long dflt)
{
    char value[32];

    key_text(db, key, value, sizeof(value));
    return value[0] ? strtoll(value, NULL, 10) : dflt;
}

/* "the command's 5 threads (1694 events, 0 lost; raw events: all kept)",
 * or with the ring wrapped "...; raw events: the last N, from S s into
 * the recording: the ring let D go)". */
static size_t describe_host_sched(sqlite3 *db, char *line, size_t len)
{
    char threads[32];
    long long events, dropped, kept, from;
    size_t n;

    key_text(db, "host.sched_threads", threads, sizeof(threads));
    kept = query_int(db, "SELECT COUNT(*) FROM host_sched_events", NULL);
    events = host_key_number(db, "host.sched_events", kept);
    dropped = host_key_number(db, "host.raw_dropped", 0);
    from = host_key_number(db, "host.raw_from_ns", 0) -
           host_key_number(db, "host.start_ns", 0);
    n = (size_t)snprintf(line, len, "Linux scheduler events of %s %lld "
                         "threads (%lld events, %lld lost; raw events: ",
                         strcmp(threads, "all") == 0 ?
                         "the command's, copsim's and its QEMUs'" :
                         "the command's",
                         (long long)query_int(db, "SELECT COUNT(*) FROM "
                                              "host_threads", NULL),
                         events, host_key_number(db, "host.sched_lost", 0));
    if (n >= len)
        return len;
    n += (size_t)(dropped ?
         snprintf(line + n, len - n, "the last %lld, from %.3f s into the "
                  "recording: the ring let %lld go)", kept,
                  (double)from / 1e9, dropped) :
         snprintf(line + n, len - n, "all kept)"));
    return n < len ? n : len;
}

/* What was recorded (what was not, coprof-host said when it started). */
static void describe_host(sqlite3 *db, char *line, size_t len)
{
    char sched[HOST_TEXT_MAX], samples[HOST_TEXT_MAX], event[128];
    char period[32], lost[32];
    size_t n = 0;

    key_text(db, "host.sched", sched, sizeof(sched));
    key_text(db, "host.samples", samples, sizeof(samples));
    line[0] = '\0';
    if (strcmp(sched, "recorded") == 0)
        n = describe_host_sched(db, line, len);
    if (n < len && strcmp(samples, "recorded") == 0) {
        key_text(db, "host.event", event, sizeof(event));
        key_text(db, "host.period", period, sizeof(period));
        key_text(db, "host.samples_lost", lost, sizeof(lost));
        snprintf(line + n, len - n, "%shost samples on %s every %s: %lld, "
                 "%s lost", n ? "; " : "", event, period,
                 (long long)query_int(db, "SELECT COUNT(*) FROM host_samples",
                                      NULL), lost);
    }
}

int session_describe_host(const char *dir, char *line, size_t len,
                          char *err, size_t errlen)
{
    char path[PATH_MAX], sched[HOST_TEXT_MAX];
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, SESSION_DB_NAME);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY |
                        SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) :
                 "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, HOST_BUSY_MS);
    key_text(db, "host.sched", sched, sizeof(sched));
    if (!sched[0]) {
        sqlite3_close(db);
        return 1;
    }
    describe_host(db, line, len);
    sqlite3_close(db);
    return 0;
}

/* ---- Totals --------------------------------------------------------------- */

int session_read(const char *dir, struct session_totals *t, char *err,
                 size_t errlen)
{
    char path[PATH_MAX];
    sqlite3 *db = NULL;

    memset(t, 0, sizeof(*t));
    snprintf(path, sizeof(path), "%s/%s", dir, SESSION_DB_NAME);
    if (access(path, R_OK) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) :
                 "cannot open");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 2000);
    t->samples = key(db, "stream.samples");
    t->callstacks = key(db, "stream.callstacks");
    t->complete = key(db, "stream.complete");
    t->dumps = key(db, "flushes.dump");
    key_text(db, "end_state", t->end_state, sizeof(t->end_state));
    key_text(db, "end_reason", t->end_reason, sizeof(t->end_reason));
    key_text(db, "host.end_state", t->host_end_state,
             sizeof(t->host_end_state));
    key_text(db, "host.end_reason", t->host_end_reason,
             sizeof(t->host_end_reason));
    t->contexts = query_int(db, "SELECT COUNT(*) FROM contexts", NULL);
    t->images = query_int(db, "SELECT COUNT(*) FROM images", NULL);
    t->sched_events = query_int(db, "SELECT COUNT(*) FROM sched_events",
                                NULL);
    read_causes(db, t);
    read_sampling(db, t);
    sqlite3_close(db);
    return 0;
}

int session_write_keys(const char *dir, const char *const *keys,
                       const char *const *values, int n, char *err,
                       size_t errlen)
{
    char path[PATH_MAX];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int rc;

    snprintf(path, sizeof(path), "%s/%s", dir, SESSION_DB_NAME);
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO session (key, "
                                "value) VALUES (?1, ?2)", -1, &stmt, NULL);
    for (int i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_bind_text(stmt, 1, keys[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 2, values[i], -1, SQLITE_STATIC);
        rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        sqlite3_reset(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) :
                 "cannot open");
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

int session_mark_incomplete(const char *dir, const char *reason, char *err,
                            size_t errlen)
{
    static const char *const keys[] = {"end_state", "end_reason"};
    const char *values[] = {"incomplete", reason};

    return session_write_keys(dir, keys, values, 2, err, errlen);
}

int session_host_begin(const char *dir, char *err, size_t errlen)
{
    static const char *const keys[] = {"host.end_state", "host.end_reason"};
    static const char *const values[] = {"live", ""};

    return session_write_keys(dir, keys, values, 2, err, errlen);
}

int session_mark_host_incomplete(const char *dir, const char *reason,
                                 char *err, size_t errlen)
{
    static const char *const keys[] = {"host.end_state", "host.end_reason"};
    const char *values[] = {"incomplete", reason};

    return session_write_keys(dir, keys, values, 2, err, errlen);
}

void session_describe(const struct session_totals *t, char *buf, size_t len)
{
    size_t used;

    used = (size_t)snprintf(buf, len, "samples=%lld lost=%lld (",
                            (long long)t->samples, (long long)t->lost);
    for (unsigned i = 0; i < t->n_causes && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s=%lld",
                                 i ? " " : "", t->causes[i].name,
                                 (long long)t->causes[i].count);
    if (used < len)
        snprintf(buf + used, len - used, ") %s=%lld contexts=%lld",
                 copstream_cause_name(COPSTREAM_LOST_OUTSIDE_LS),
                 (long long)t->outside, (long long)t->contexts);
}

void session_describe_sampling(const struct session_totals *t, char *buf,
                               size_t len)
{
    char how[256], stalls[256];

    if (t->dither[0])
        sampling_describe(strcmp(t->dither, "on") == 0, t->dither_seed,
                          t->fifo_full[0] ? t->fifo_full : "not recorded",
                          how, sizeof(how));
    else
        snprintf(how, sizeof(how), "dither not recorded, FIFO full: %s",
                 t->fifo_full[0] ? t->fifo_full : "not recorded");
    if (strcmp(t->fifo_full, "stall") != 0 && t->stalls == 0) {
        snprintf(buf, len, "%s", how);
        return;
    }
    sampling_describe_stalls((uint64_t)t->stalls, (uint64_t)t->stall_ns,
                             (uint64_t)t->run_ns, (unsigned)t->slots, stalls,
                             sizeof(stalls));
    snprintf(buf, len, "%s, %s", how, stalls);
}
