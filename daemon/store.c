/*
 * store.c — the session database (see store.h and docs/session-format.md).
 *
 * One SQLite connection in WAL mode with synchronous=NORMAL: a committed
 * flush survives the daemon being killed (it is in the WAL, which the next
 * opener replays); only a power loss could take the last flushes.  Every
 * statement is prepared once when the store opens, from the table below,
 * and reset after each use.  A lock file in the session directory keeps a
 * second daemon out of a session in use.
 *
 * A session is its user's alone, like perf.data: the directories are made
 * 0700, the lock and the database 0600 (made so as soon as SQLite created
 * it, before the first write, and SQLite gives its -wal, -shm and -journal
 * files the database's mode).
 */
#include "daemon/store.h"
#include "daemon/images.h"

#include "abi/session-schema.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CANDIDATES_MAX  64
#define BUSY_TIMEOUT_MS 5000

/* The tables, from abi/session-schema.sql (generated at build time). */
static const char schema[] = SESSION_SCHEMA_COPROFD;

enum statement {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
    ST_META, ST_GET_META,
    ST_IMAGE, ST_REGION, ST_OVERLAY,
    ST_CONTEXT, ST_BINDING,
    ST_EXACT, ST_SAMPLE_STALL, ST_DMA_WAIT, ST_UNMAPPED, ST_AMBIGUOUS, ST_ORPHAN, ST_CANDIDATE,
    ST_TIMELINE, ST_STALL_TIMELINE, ST_CLEAR_PENDING, ST_PENDING,
    ST_OVERLAY_EVENT, ST_LOST, ST_STALL, ST_STACK, ST_STACK_STALL, ST_TIME, ST_ERROR_COUNT,
    ST_ERROR,
    ST_SCHED, ST_LINK_STACKS, ST_SET_STACK,
    ST_COUNT
};

static const char *const statement_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_META] = "INSERT OR REPLACE INTO session (key, value) VALUES (?1, ?2)",
    [ST_GET_META] = "SELECT value FROM session WHERE key = ?1",
    [ST_IMAGE] = "INSERT OR REPLACE INTO images (id, path, image_offset,"
        " device, inode, size, hash, status, message, short_name, image_size,"
        " cache_file, image_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
        " ?9, ?10, ?11, ?12, ?13)",
    [ST_REGION] = "INSERT OR REPLACE INTO regions (image, region, ls_start,"
        " ls_end, guard_ls_addr, overlays) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_OVERLAY] = "INSERT OR REPLACE INTO overlays (image, overlay, region,"
        " vaddr, size, file_offset, section) VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
        " ?7)",
    [ST_CONTEXT] = "INSERT OR IGNORE INTO contexts (id, context_id, pid, tid,"
        " object_id, image, first_slot, first_cycle) VALUES (?1, ?2, ?3, ?4,"
        " ?5, ?6, ?7, ?8)",
    [ST_BINDING] = "INSERT OR REPLACE INTO bindings (id, slot, context,"
        " start_cycle, end_cycle, start_time_ns, end_time_ns, end_reason)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_EXACT] = "INSERT INTO samples (context, image, file_offset, overlay,"
        " count) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE"
        " SET count = count + excluded.count",
    [ST_SAMPLE_STALL] = "INSERT INTO sample_stalls (context, image,"
        " file_offset, stall, count) VALUES (?1, ?2, ?3, ?4, ?5)"
        " ON CONFLICT DO UPDATE SET count = count + excluded.count",
    [ST_DMA_WAIT] = "INSERT INTO dma_wait_samples (context, image,"
        " file_offset, tag, issuer_ls_addr, issuer_offset, count) VALUES (?1,"
        " ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO UPDATE"
        " SET count = count + excluded.count",
    [ST_UNMAPPED] = "INSERT INTO unmapped_samples (context, image, ls_addr,"
        " reason, guard, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT DO UPDATE SET count = count + excluded.count",
    [ST_AMBIGUOUS] = "INSERT INTO ambiguous_samples (context, image, ls_addr,"
        " region, guard_from, guard_to, count) VALUES (?1, ?2, ?3, ?4, ?5,"
        " ?6, ?7) ON CONFLICT DO UPDATE SET count = count + excluded.count",
    [ST_ORPHAN] = "INSERT INTO orphan_samples (slot, ls_addr, count)"
        " VALUES (?1, ?2, ?3) ON CONFLICT DO UPDATE"
        " SET count = count + excluded.count",
    [ST_CANDIDATE] = "INSERT OR IGNORE INTO ambiguous_candidates (image,"
        " ls_addr, overlay, file_offset) VALUES (?1, ?2, ?3, ?4)",
    [ST_TIMELINE] = "INSERT INTO sample_timeline (context, image,"
        " bucket_start_ns, function_offset, count) VALUES (?1, ?2, ?3, ?4,"
        " ?5) ON CONFLICT DO UPDATE SET count = count + excluded.count",
    [ST_STALL_TIMELINE] = "INSERT INTO stall_timeline (context, image,"
        " bucket_start_ns, stall, count) VALUES (?1, ?2, ?3, ?4, ?5)"
        " ON CONFLICT DO UPDATE SET count = count + excluded.count",
    [ST_CLEAR_PENDING] = "DELETE FROM pending_samples",
    [ST_PENDING] = "INSERT INTO pending_samples (context, image, ls_addr,"
        " region, guard, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_OVERLAY_EVENT] = "INSERT INTO overlay_events (context, slot, region,"
        " guard, cycle, initial, placed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_STALL] = "INSERT INTO stalls (slot, context, count, ns, cycle)"
        " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_LOST] = "INSERT INTO lost_events (slot, context, cause, cause_name,"
        " count, cycle) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_STACK] = "INSERT INTO stacks (context, image, frames, count)"
        " VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO UPDATE"
        " SET count = count + excluded.count",
    [ST_STACK_STALL] = "INSERT INTO stack_stalls (context, image, frames,"
        " stall, count) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO UPDATE"
        " SET count = count + excluded.count",
    [ST_TIME] = "INSERT INTO time_sync (slot, cycle, time_ns)"
        " VALUES (?1, ?2, ?3)",
    [ST_ERROR_COUNT] = "INSERT OR REPLACE INTO decode_errors (kind, count)"
        " VALUES (?1, ?2)",
    [ST_ERROR] = "INSERT INTO error_log (stream_offset, kind, code)"
        " VALUES (?1, ?2, ?3)",
    [ST_SCHED] = "INSERT OR IGNORE INTO sched_events (order_num, ring, seq,"
        " time_ns, level, pid, tid, cpu, kind, slot, context_id, cycle,"
        " host_pid, host_tid, stack, message) VALUES (?1, ?2, ?3, ?4, ?5,"
        " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    [ST_SET_STACK] = "UPDATE contexts SET creation_stack = ?2"
        " WHERE context_id = ?1 AND creation_stack IS NULL",
    [ST_LINK_STACKS] = "UPDATE contexts SET creation_stack = (SELECT e.stack"
        " FROM sched_events e WHERE e.kind = 'create'"
        " AND e.context_id = contexts.context_id AND e.stack IS NOT NULL"
        " AND (e.host_pid IS NULL OR e.host_pid = contexts.pid)"
        " ORDER BY e.order_num DESC LIMIT 1) WHERE creation_stack IS NULL",
};

struct store {
    char *dir;
    char *db_path;
    int lock_fd;
    sqlite3 *db;
    sqlite3_stmt *statements[ST_COUNT];
    char *last_error;
    int last_errno;
};

/* ---- errors ------------------------------------------------------------- */

static int sql_fail(struct store *store)
{
    g_free(store->last_error);
    store->last_error = g_strdup(sqlite3_errmsg(store->db));
    store->last_errno = sqlite3_system_errno(store->db);
    /* SQLite reports a full disk as SQLITE_FULL with no errno. */
    if (store->last_errno == 0 &&
        (sqlite3_errcode(store->db) & 0xff) == SQLITE_FULL)
        store->last_errno = ENOSPC;
    return -1;
}

const char *store_last_error(const struct store *store)
{
    return store->last_error ? store->last_error : "no error";
}

int store_format_version(void)
{
    return SESSION_FORMAT_VERSION;
}

int store_last_errno(const struct store *store)
{
    return store->last_error ? store->last_errno : 0;
}

/* Runs a statement that returns no rows, with its parameters bound. */
static int run(struct store *store, sqlite3_stmt *statement)
{
    int rc = sqlite3_step(statement);

    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    return rc == SQLITE_DONE ? 0 : sql_fail(store);
}

static sqlite3_stmt *statement(struct store *store, enum statement which)
{
    return store->statements[which];
}

static void bind_text_or_null(sqlite3_stmt *st, int index, const char *text)
{
    if (text != NULL)
        sqlite3_bind_text(st, index, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, index);
}

static void bind_int_or_null(sqlite3_stmt *st, int index, int64_t value,
                             int64_t none)
{
    if (value != none)
        sqlite3_bind_int64(st, index, value);
    else
        sqlite3_bind_null(st, index);
}

/* ---- opening ------------------------------------------------------------ */

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Removes the database, its WAL files and the image cache. */
static int remove_session(const char *dir, const char *db_path,
                          GError **error)
{
    static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };

    for (size_t i = 0; i < G_N_ELEMENTS(suffixes); i++) {
        g_autofree char *path = g_strconcat(db_path, suffixes[i], NULL);
        if (unlink(path) != 0 && errno != ENOENT) {
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                        "%s: cannot remove: %s", path, g_strerror(errno));
            return -1;
        }
    }
    g_autofree char *cache = g_build_filename(dir, SESSION_CACHE_DIR, NULL);
    GDir *listing = g_dir_open(cache, 0, NULL);
    if (listing == NULL)
        return 0;
    const char *name;
    while ((name = g_dir_read_name(listing)) != NULL) {
        g_autofree char *path = g_build_filename(cache, name, NULL);
        unlink(path);
    }
    g_dir_close(listing);
    return 0;
}

static int take_lock(struct store *store, GError **error)
{
    g_autofree char *path = g_build_filename(store->dir, SESSION_LOCK_NAME,
                                             NULL);

    store->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                          SAFE_FILE_MODE);
    if (store->lock_fd < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "%s: cannot create: %s", path, g_strerror(errno));
        return -1;
    }
    if (flock(store->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                    "%s: session in use by another coprofd", store->dir);
        return -1;
    }
    return 0;
}

static int exec_sql(struct store *store, const char *sql, GError **error)
{
    char *message = NULL;

    if (sqlite3_exec(store->db, sql, NULL, NULL, &message) == SQLITE_OK)
        return 0;
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: %s",
                store->db_path, message ? message : "SQLite error");
    sqlite3_free(message);
    return -1;
}

static int create_schema(struct store *store, GError **error)
{
    g_autofree char *pragmas = g_strdup_printf(
        "PRAGMA application_id = %d; PRAGMA user_version = %d;",
        SESSION_APPLICATION_ID, SESSION_FORMAT_VERSION);

    if (exec_sql(store, "BEGIN", error) != 0 ||
        exec_sql(store, schema, error) != 0 ||
        exec_sql(store, pragmas, error) != 0 ||
        exec_sql(store, "COMMIT", error) != 0)
        return -1;
    return 0;
}

static int prepare_statements(struct store *store, GError **error)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v2(store->db, statement_sql[i], -1,
                               &store->statements[i], NULL) != SQLITE_OK) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                        "%s: cannot prepare a statement: %s", store->db_path,
                        sqlite3_errmsg(store->db));
            return -1;
        }
    }
    return 0;
}

/* Makes the database file that SQLite just created mode 0600, before
 * anything is written (the files SQLite makes beside it copy its mode). */
static int make_private(const char *path, GError **error)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0 || fchmod(fd, SAFE_FILE_MODE) < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "%s: cannot make it private: %s", path,
                    g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int open_database(struct store *store, GError **error)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                SQLITE_OPEN_NOMUTEX;

    if (sqlite3_open_v2(store->db_path, &store->db, flags, NULL) !=
        SQLITE_OK) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                    "%s: cannot open: %s", store->db_path,
                    store->db ? sqlite3_errmsg(store->db) : "out of memory");
        return -1;
    }
    if (make_private(store->db_path, error) != 0)
        return -1;
    sqlite3_busy_timeout(store->db, BUSY_TIMEOUT_MS);
    if (exec_sql(store, "PRAGMA journal_mode = WAL;"
                        " PRAGMA synchronous = NORMAL;", error) != 0)
        return -1;
    if (create_schema(store, error) != 0)
        return -1;
    return prepare_statements(store, error);
}

/*
 * The session directory a user named, by safe-file.h's rule: its last
 * component created 0700 (never a missing parent), an existing one a real
 * directory of this user's, made 0700; no link another user planted on
 * the way followed.
 */
static int make_session_dir(const char *dir, GError **error)
{
    char why[1024];
    int fd = safe_dir_make(dir, why, sizeof why);

    if (fd < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "%s", why);
        return -1;
    }
    close(fd);
    return 0;
}

struct store *store_open(const char *session_dir, bool overwrite,
                         GError **error)
{
    struct store *store = g_new0(struct store, 1);

    store->lock_fd = -1;
    store->dir = g_strdup(session_dir);
    store->db_path = g_build_filename(session_dir, SESSION_DB_NAME, NULL);
    g_autofree char *cache = g_build_filename(session_dir, SESSION_CACHE_DIR,
                                              NULL);
    if (make_session_dir(session_dir, error) != 0)
        goto fail;
    if (mkdir(cache, SAFE_DIR_MODE) != 0 && errno != EEXIST) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "%s: cannot create: %s", cache, g_strerror(errno));
        goto fail;
    }
    if (take_lock(store, error) != 0)
        goto fail;
    if (file_exists(store->db_path)) {
        if (!overwrite) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                        "%s: a session is already there (--overwrite "
                        "replaces it)", session_dir);
            goto fail;
        }
        if (remove_session(session_dir, store->db_path, error) != 0)
            goto fail;
    }
    if (open_database(store, error) != 0)
        goto fail;
    return store;
fail:
    store_close(store);
    return NULL;
}

void store_close(struct store *store)
{
    if (store == NULL)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(store->statements[i]);
    sqlite3_close(store->db);
    if (store->lock_fd >= 0)
        close(store->lock_fd);
    g_free(store->dir);
    g_free(store->db_path);
    g_free(store->last_error);
    g_free(store);
}

const char *store_dir(const struct store *store)
{
    return store->dir;
}

void store_set_busy_timeout(struct store *store, unsigned ms)
{
    sqlite3_busy_timeout(store->db, (int)ms);
}

const char *store_db_path(const struct store *store)
{
    return store->db_path;
}

/* ---- transactions ------------------------------------------------------- */

static int run_or_error(struct store *store, enum statement which,
                        GError **error)
{
    if (run(store, statement(store, which)) == 0)
        return 0;
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: %s",
                store->db_path, store_last_error(store));
    return -1;
}

int store_begin(struct store *store, GError **error)
{
    return run_or_error(store, ST_BEGIN, error);
}

int store_commit(struct store *store, GError **error)
{
    return run_or_error(store, ST_COMMIT, error);
}

void store_rollback(struct store *store)
{
    if (!sqlite3_get_autocommit(store->db))
        run(store, statement(store, ST_ROLLBACK));
}

/* ---- session keys ------------------------------------------------------- */

int store_put_meta_text(struct store *store, const char *key,
                        const char *value)
{
    sqlite3_stmt *st = statement(store, ST_META);

    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    bind_text_or_null(st, 2, value);
    return run(store, st);
}

int store_put_meta_int(struct store *store, const char *key, int64_t value)
{
    sqlite3_stmt *st = statement(store, ST_META);

    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, value);
    return run(store, st);
}

int64_t store_get_meta_int(struct store *store, const char *key,
                           int64_t fallback)
{
    sqlite3_stmt *st = statement(store, ST_GET_META);
    int64_t value = fallback;

    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) == SQLITE_INTEGER)
        value = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return value;
}

/* ---- images ------------------------------------------------------------- */

static int put_regions(struct store *store, uint32_t image,
                       const struct ovl_image *ovl)
{
    sqlite3_stmt *st = statement(store, ST_REGION);

    for (unsigned r = 1; r <= ovl_image_region_count(ovl); r++) {
        const struct ovl_region *region = ovl_image_region(ovl, r);
        sqlite3_bind_int64(st, 1, image);
        sqlite3_bind_int64(st, 2, region->index);
        sqlite3_bind_int64(st, 3, region->ls_start);
        sqlite3_bind_int64(st, 4, region->ls_end);
        sqlite3_bind_int64(st, 5, region->guard_ls_addr);
        sqlite3_bind_int64(st, 6, region->overlay_count);
        if (run(store, st) != 0)
            return -1;
    }
    return 0;
}

static int put_overlays(struct store *store, uint32_t image,
                        const struct ovl_image *ovl)
{
    sqlite3_stmt *st = statement(store, ST_OVERLAY);

    for (unsigned i = 1; i <= ovl_image_overlay_count(ovl); i++) {
        const struct ovl_overlay *overlay = ovl_image_overlay(ovl, i);
        sqlite3_bind_int64(st, 1, image);
        sqlite3_bind_int64(st, 2, overlay->index);
        sqlite3_bind_int64(st, 3, overlay->region);
        sqlite3_bind_int64(st, 4, overlay->vaddr);
        sqlite3_bind_int64(st, 5, overlay->size);
        sqlite3_bind_int64(st, 6, (int64_t)overlay->file_offset);
        bind_text_or_null(st, 7, overlay->section);
        if (run(store, st) != 0)
            return -1;
    }
    return 0;
}

/* A count, size or offset of the stream as a column value: at most
 * INT64_MAX, never a negative number. */
static int64_t clamp_int64(uint64_t value)
{
    return value > INT64_MAX ? INT64_MAX : (int64_t)value;
}

int store_put_image(struct store *store, const struct store_image *image)
{
    sqlite3_stmt *st = statement(store, ST_IMAGE);
    char hash[17], image_hash[17];

    g_snprintf(hash, sizeof hash, "%016" PRIx64, image->identity.hash);
    sqlite3_bind_int64(st, 1, image->id);
    bind_text_or_null(st, 2, image->path);
    /* An offset or size of 2^63 or more is stored as INT64_MAX (the image
     * is unusable then, images.c says why): never negative.  Device and
     * inode are identities, stored as their 64-bit pattern. */
    sqlite3_bind_int64(st, 3, clamp_int64(image->offset));
    sqlite3_bind_int64(st, 4, (int64_t)image->identity.device);
    sqlite3_bind_int64(st, 5, (int64_t)image->identity.inode);
    sqlite3_bind_int64(st, 6, clamp_int64(image->identity.size));
    sqlite3_bind_text(st, 7, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 8, image->status, -1, SQLITE_STATIC);
    bind_text_or_null(st, 9, image->message);
    if (image->ovl != NULL) {
        bind_text_or_null(st, 10, ovl_image_short_name(image->ovl));
        sqlite3_bind_int64(st, 11, (int64_t)ovl_image_size(image->ovl));
        /* the image's own bytes: its cached copy is checked against this
         * once the file it was found in is gone */
        g_snprintf(image_hash, sizeof image_hash, "%016" PRIx64,
                   image_content_hash(ovl_image_bytes(image->ovl),
                                      ovl_image_size(image->ovl)));
        sqlite3_bind_text(st, 13, image_hash, -1, SQLITE_TRANSIENT);
    }
    bind_text_or_null(st, 12, image->cache_file);
    if (run(store, st) != 0)
        return -1;
    if (image->ovl == NULL)
        return 0;
    if (put_regions(store, image->id, image->ovl) != 0)
        return -1;
    return put_overlays(store, image->id, image->ovl);
}

/* ---- contexts and bindings ---------------------------------------------- */

int store_put_context(struct store *store,
                      const struct store_context *context)
{
    sqlite3_stmt *st = statement(store, ST_CONTEXT);
    char object_id[19];

    g_snprintf(object_id, sizeof object_id, "0x%" PRIx64, context->object_id);
    sqlite3_bind_int64(st, 1, context->id);
    sqlite3_bind_int64(st, 2, (int64_t)context->context_id);
    sqlite3_bind_int64(st, 3, context->pid);
    sqlite3_bind_int64(st, 4, context->tid);
    sqlite3_bind_text(st, 5, object_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 6, context->image);
    sqlite3_bind_int64(st, 7, context->first_slot);
    sqlite3_bind_int64(st, 8, (int64_t)context->first_cycle);
    return run(store, st);
}

int store_put_binding(struct store *store,
                      const struct store_binding *binding)
{
    sqlite3_stmt *st = statement(store, ST_BINDING);
    bool ended = binding->end_reason != NULL;

    sqlite3_bind_int64(st, 1, binding->id);
    sqlite3_bind_int64(st, 2, binding->slot);
    sqlite3_bind_int64(st, 3, binding->context);
    sqlite3_bind_int64(st, 4, (int64_t)binding->start_cycle);
    if (ended)
        sqlite3_bind_int64(st, 5, (int64_t)binding->end_cycle);
    bind_int_or_null(st, 6, binding->start_time_ns, STORE_TIME_NONE);
    bind_int_or_null(st, 7, binding->end_time_ns, STORE_TIME_NONE);
    bind_text_or_null(st, 8, binding->end_reason);
    return run(store, st);
}

/* ---- counts ------------------------------------------------------------- */

static const char *unmapped_reason_name(uint32_t reason)
{
    if (reason == COUNT_REASON_NO_IMAGE)
        return "no-image";
    return ovl_reason_name((enum ovl_reason)reason);
}

/* An exact entry's samples by their stall reason (sample_stalls). */
static int add_sample_stall(struct store *store,
                            const struct count_entry *entry,
                            const struct count_cause *cause, uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_SAMPLE_STALL);

    sqlite3_bind_int64(st, 1, entry->key.context);
    sqlite3_bind_int64(st, 2, entry->key.image);
    sqlite3_bind_int64(st, 3, (int64_t)entry->key.position);
    sqlite3_bind_int64(st, 4, cause->stall);
    sqlite3_bind_int64(st, 5, (int64_t)delta);
    return run(store, st);
}

/* A DMA wait's samples by the transfer waited on (dma_wait_samples). */
static int add_dma_wait(struct store *store, const struct count_entry *entry,
                        const struct count_cause *cause, uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_DMA_WAIT);

    sqlite3_bind_int64(st, 1, entry->key.context);
    sqlite3_bind_int64(st, 2, entry->key.image);
    sqlite3_bind_int64(st, 3, (int64_t)entry->key.position);
    sqlite3_bind_int64(st, 4, cause->tag);
    sqlite3_bind_int64(st, 5, cause->issuer);
    bind_int_or_null(st, 6, entry->issuer_offset, -1);
    sqlite3_bind_int64(st, 7, (int64_t)delta);
    return run(store, st);
}

static int add_exact(struct store *store, const struct count_entry *entry,
                     const struct count_cause *cause, uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_EXACT);

    sqlite3_bind_int64(st, 1, entry->key.context);
    sqlite3_bind_int64(st, 2, entry->key.image);
    sqlite3_bind_int64(st, 3, (int64_t)entry->key.position);
    sqlite3_bind_int64(st, 4, entry->overlay);
    sqlite3_bind_int64(st, 5, (int64_t)delta);
    if (run(store, st) != 0 ||
        add_sample_stall(store, entry, cause, delta) != 0)
        return -1;
    return cause->transfer ? add_dma_wait(store, entry, cause, delta) : 0;
}

static int add_unmapped(struct store *store, const struct count_entry *entry,
                        uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_UNMAPPED);

    sqlite3_bind_int64(st, 1, entry->key.context);
    sqlite3_bind_int64(st, 2, entry->key.image);
    sqlite3_bind_int64(st, 3, (int64_t)entry->key.position);
    sqlite3_bind_text(st, 4, unmapped_reason_name(entry->key.detail), -1,
                      SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, entry->key.guard_from);
    sqlite3_bind_int64(st, 6, (int64_t)delta);
    return run(store, st);
}

static int add_ambiguous(struct store *store, const struct count_entry *entry,
                         uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_AMBIGUOUS);

    sqlite3_bind_int64(st, 1, entry->key.context);
    sqlite3_bind_int64(st, 2, entry->key.image);
    sqlite3_bind_int64(st, 3, (int64_t)entry->key.position);
    sqlite3_bind_int64(st, 4, entry->key.detail);
    sqlite3_bind_int64(st, 5, entry->key.guard_from);
    sqlite3_bind_int64(st, 6, entry->key.guard_to);
    sqlite3_bind_int64(st, 7, (int64_t)delta);
    return run(store, st);
}

static int add_orphan(struct store *store, const struct count_entry *entry,
                      uint64_t delta)
{
    sqlite3_stmt *st = statement(store, ST_ORPHAN);

    sqlite3_bind_int64(st, 1, entry->key.detail);
    sqlite3_bind_int64(st, 2, (int64_t)entry->key.position);
    sqlite3_bind_int64(st, 3, (int64_t)delta);
    return run(store, st);
}

int store_add_count(struct store *store, const struct count_entry *entry,
                    const struct count_cause *cause, uint64_t delta)
{
    switch (entry->key.kind) {
    case COUNT_EXACT:
        return add_exact(store, entry, cause, delta);
    case COUNT_UNMAPPED:
        return add_unmapped(store, entry, delta);
    case COUNT_AMBIGUOUS:
        return add_ambiguous(store, entry, delta);
    case COUNT_ORPHAN:
        return add_orphan(store, entry, delta);
    }
    g_free(store->last_error);
    store->last_error = g_strdup_printf("count of unknown kind %u",
                                        entry->key.kind);
    return -1;
}

int store_put_candidates(struct store *store, uint32_t image,
                         const struct ovl_image *ovl, uint32_t ls_addr)
{
    sqlite3_stmt *st = statement(store, ST_CANDIDATE);
    struct ovl_location candidates[CANDIDATES_MAX];
    size_t count = ovl_candidates(ovl, ls_addr, candidates, CANDIDATES_MAX);

    if (count > CANDIDATES_MAX)
        count = CANDIDATES_MAX;
    for (size_t i = 0; i < count; i++) {
        sqlite3_bind_int64(st, 1, image);
        sqlite3_bind_int64(st, 2, ls_addr);
        sqlite3_bind_int64(st, 3, candidates[i].overlay);
        sqlite3_bind_int64(st, 4, (int64_t)candidates[i].file_offset);
        if (run(store, st) != 0)
            return -1;
    }
    return 0;
}

int store_add_timeline(struct store *store, uint32_t context, uint32_t image,
                       uint64_t bucket_start_ns, uint64_t function_offset,
                       uint64_t count)
{
    sqlite3_stmt *st = statement(store, ST_TIMELINE);

    sqlite3_bind_int64(st, 1, context);
    sqlite3_bind_int64(st, 2, image);
    sqlite3_bind_int64(st, 3, (int64_t)bucket_start_ns);
    sqlite3_bind_int64(st, 4, (int64_t)function_offset);
    sqlite3_bind_int64(st, 5, (int64_t)count);
    return run(store, st);
}

int store_add_stall_timeline(struct store *store, uint32_t context,
                             uint32_t image, uint64_t bucket_start_ns,
                             uint32_t stall, uint64_t count)
{
    sqlite3_stmt *st = statement(store, ST_STALL_TIMELINE);

    sqlite3_bind_int64(st, 1, context);
    sqlite3_bind_int64(st, 2, image);
    sqlite3_bind_int64(st, 3, (int64_t)bucket_start_ns);
    sqlite3_bind_int64(st, 4, stall);
    sqlite3_bind_int64(st, 5, (int64_t)count);
    return run(store, st);
}

int store_clear_pending(struct store *store)
{
    return run(store, statement(store, ST_CLEAR_PENDING));
}

int store_put_pending(struct store *store, uint32_t context, uint32_t image,
                      uint32_t ls_addr, uint32_t region, int64_t guard,
                      uint64_t count)
{
    sqlite3_stmt *st = statement(store, ST_PENDING);

    sqlite3_bind_int64(st, 1, context);
    sqlite3_bind_int64(st, 2, image);
    sqlite3_bind_int64(st, 3, ls_addr);
    sqlite3_bind_int64(st, 4, region);
    sqlite3_bind_int64(st, 5, guard);
    sqlite3_bind_int64(st, 6, (int64_t)count);
    return run(store, st);
}

/* ---- events ------------------------------------------------------------- */

int store_put_overlay_event(struct store *store,
                            const struct store_overlay_event *event)
{
    sqlite3_stmt *st = statement(store, ST_OVERLAY_EVENT);

    sqlite3_bind_int64(st, 1, event->context);
    sqlite3_bind_int64(st, 2, event->slot);
    sqlite3_bind_int64(st, 3, event->region);
    sqlite3_bind_int64(st, 4, event->guard);
    sqlite3_bind_int64(st, 5, (int64_t)event->cycle);
    sqlite3_bind_int(st, 6, event->initial);
    sqlite3_bind_int(st, 7, event->placed);
    return run(store, st);
}

int store_put_lost(struct store *store, const struct store_lost *lost)
{
    sqlite3_stmt *st = statement(store, ST_LOST);

    sqlite3_bind_int64(st, 1, lost->slot);
    bind_int_or_null(st, 2, lost->context, 0);
    sqlite3_bind_int64(st, 3, lost->cause);
    bind_text_or_null(st, 4, copstream_cause_name(lost->cause));
    sqlite3_bind_int64(st, 5, (int64_t)lost->count);
    sqlite3_bind_int64(st, 6, (int64_t)lost->cycle);
    return run(store, st);
}

int store_put_stall(struct store *store, const struct store_stall *stall)
{
    sqlite3_stmt *st = statement(store, ST_STALL);

    sqlite3_bind_int64(st, 1, stall->slot);
    bind_int_or_null(st, 2, stall->context, 0);
    sqlite3_bind_int64(st, 3, (int64_t)stall->count);
    sqlite3_bind_int64(st, 4, (int64_t)stall->ns);
    sqlite3_bind_int64(st, 5, (int64_t)stall->cycle);
    return run(store, st);
}

int store_add_stack(struct store *store, uint32_t context, uint32_t image,
                    uint32_t stall, const char *frames, uint64_t count)
{
    sqlite3_stmt *st = statement(store, ST_STACK);

    sqlite3_bind_int64(st, 1, context);
    sqlite3_bind_int64(st, 2, image);
    sqlite3_bind_text(st, 3, frames, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, (int64_t)count);
    if (run(store, st) != 0)
        return -1;
    st = statement(store, ST_STACK_STALL);
    sqlite3_bind_int64(st, 1, context);
    sqlite3_bind_int64(st, 2, image);
    sqlite3_bind_text(st, 3, frames, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, stall);
    sqlite3_bind_int64(st, 5, (int64_t)count);
    return run(store, st);
}

int store_put_time(struct store *store, uint32_t slot, uint64_t cycle,
                   uint64_t time_ns)
{
    sqlite3_stmt *st = statement(store, ST_TIME);

    sqlite3_bind_int64(st, 1, slot);
    sqlite3_bind_int64(st, 2, (int64_t)cycle);
    sqlite3_bind_int64(st, 3, (int64_t)time_ns);
    return run(store, st);
}

int store_put_error_count(struct store *store, const char *kind,
                          uint64_t count)
{
    sqlite3_stmt *st = statement(store, ST_ERROR_COUNT);

    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)count);
    return run(store, st);
}

int store_put_error(struct store *store, uint64_t offset, const char *kind,
                    uint16_t code)
{
    sqlite3_stmt *st = statement(store, ST_ERROR);

    sqlite3_bind_int64(st, 1, (int64_t)offset);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, code);
    return run(store, st);
}

int store_put_sched_event(struct store *store,
                          const struct store_sched_event *event)
{
    sqlite3_stmt *st = statement(store, ST_SCHED);

    sqlite3_bind_int64(st, 1, (int64_t)event->order);
    sqlite3_bind_int64(st, 2, event->ring);
    sqlite3_bind_int64(st, 3, (int64_t)event->seq);
    sqlite3_bind_int64(st, 4, (int64_t)event->time_ns);
    sqlite3_bind_int(st, 5, (int)event->level);
    sqlite3_bind_int64(st, 6, event->pid);
    sqlite3_bind_int64(st, 7, event->tid);
    sqlite3_bind_int64(st, 8, event->cpu);
    bind_text_or_null(st, 9, event->kind);
    bind_int_or_null(st, 10, event->slot, -1);
    bind_int_or_null(st, 11, event->context_id, -1);
    bind_int_or_null(st, 12, event->cycle, -1);
    bind_int_or_null(st, 13, event->host_pid, -1);
    bind_int_or_null(st, 14, event->host_tid, -1);
    bind_text_or_null(st, 15, event->stack);
    bind_text_or_null(st, 16, event->message);
    return run(store, st);
}

int store_link_creation_stacks(struct store *store)
{
    return run(store, statement(store, ST_LINK_STACKS));
}

int store_set_creation_stack(struct store *store, int64_t context_id,
                             const char *stack)
{
    sqlite3_stmt *st = statement(store, ST_SET_STACK);

    sqlite3_bind_int64(st, 1, context_id);
    sqlite3_bind_text(st, 2, stack, -1, SQLITE_STATIC);
    return run(store, st);
}
