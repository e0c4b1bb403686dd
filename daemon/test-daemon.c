/*
 * test-daemon.c — GTest suite for daemon/: the hash tables, the attribution
 * rules of the session, the image checks, the store and the event-log
 * import.
 *
 * Streams are built here with the escape-protocol encoder around the
 * overlay/ test image (build/tests/overlay/overlays.elf: resident code,
 * region 1 with overlays 1-3, region 2 with overlays 4-5, an unused region
 * 3), recorded into a temporary session directory, and the database is
 * read back with SQL.  Where a sample must land is computed with the
 * overlay library (its own tests check resolution); what these tests check
 * is which samples are exact, ambiguous, pending, unmapped or orphan, and
 * that nothing is lost or counted twice.
 */
#include "abi/trace-regs.h"
#include "daemon/counts.h"
#include "daemon/images.h"
#include "daemon/recorder.h"
#include "daemon/schedlog.h"
#include "eventlog/coplog.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* LS addresses of the test image (overlay/tests/overlay-test.ld). */
#define RESIDENT_ADDR   0x00010u    /* resident .text */
#define REGION1_ADDR    0x00114u    /* start of region 1: every overlay */
#define REGION1_ADDR2   0x00150u    /* in overlays 2 and 3, not 1 */
#define REGION2_ADDR    0x001c8u    /* start of region 2 */
#define GAP_ADDR        0x00800u    /* in no segment */

static char *temp_root;

/* ---- fixtures ----------------------------------------------------------- */

static char *test_image_path(void)
{
    const char *build = g_getenv("COPROF_BUILD");

    if (build != NULL)
        return g_build_filename(build, "tests", "overlay", "overlays.elf",
                                NULL);
    return g_build_filename(DAEMON_TEST_IMAGES, "overlays.elf", NULL);
}

static char *new_dir(const char *name)
{
    static int serial;
    char *dir = g_strdup_printf("%s/%s-%d", temp_root, name, ++serial);

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    return dir;
}

static struct copstream_image_id identity_of(const char *path)
{
    struct stat st;
    gchar *bytes;
    gsize length;

    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
    struct copstream_image_id id = {
        (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
        image_content_hash((const uint8_t *)bytes, length),
    };
    g_free(bytes);
    return id;
}

/* ---- stream builder ----------------------------------------------------- */

struct builder {
    GByteArray *bytes;
    struct copstream_image_id id;
    char *path;
    uint64_t samples, lost;
};

/* A stream naming the image at image_path, with the identity id or, when
 * id is NULL, the file's own. */
static void builder_init_as(struct builder *b, const char *image_path,
                            const struct copstream_image_id *id)
{
    b->bytes = g_byte_array_new();
    b->path = g_strdup(image_path);
    b->id = id ? *id : identity_of(image_path);
    b->samples = b->lost = 0;
}

static void builder_init(struct builder *b, const char *image_path)
{
    builder_init_as(b, image_path, NULL);
}

static void builder_free(struct builder *b)
{
    g_byte_array_free(b->bytes, TRUE);
    g_free(b->path);
}

static void put(struct builder *b, const struct copstream_record *rec)
{
    uint8_t out[COPSTREAM_MAX_RECORD_BYTES];
    int n = copstream_encode_record(out, sizeof out, rec);

    g_assert_cmpint(n, >, 0);
    g_byte_array_append(b->bytes, out, (guint)n);
}

static void put_start(struct builder *b)
{
    struct copstream_record rec = { .code = COPSTREAM_START };

    rec.u.start = (struct copstream_start){
        .version = COPSTREAM_VERSION, .slots = 8, .lfsr_value = 0xFFFFFE,
        .lfsr_count = 1, .clock_hz = 1000000000, .fifo_depth = 1024,
        .ls_size = 262144, .poll_interval_ns = 1000000,
        .start_time_ns = 1000,
    };
    put(b, &rec);
}

static void put_image_path(struct builder *b, const char *path)
{
    struct copstream_record rec = { .code = COPSTREAM_IMAGE };

    rec.u.image.id = b->id;
    rec.u.image.path = (const uint8_t *)path;
    rec.u.image.path_length = (uint32_t)strlen(path);
    put(b, &rec);
}

static void put_context(struct builder *b, uint32_t slot, uint64_t context,
                        uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_CONTEXT };

    rec.u.context = (struct copstream_context){
        .slot = slot, .pid = 10, .tid = 20 + (uint32_t)context,
        .context_id = context, .object_id = 0x5000, .image = b->id,
        .image_offset = 0, .cycle = cycle,
    };
    put(b, &rec);
}

static void put_overlay(struct builder *b, uint32_t slot, uint32_t region,
                        uint32_t guard, uint32_t flags)
{
    struct copstream_record rec = { .code = COPSTREAM_OVERLAY };

    rec.u.overlay = (struct copstream_overlay){
        .slot = slot, .region = region, .guard = guard, .flags = flags };
    put(b, &rec);
}

/* A poll-time read (not placed). */
static void put_guard(struct builder *b, uint32_t slot, uint32_t region,
                      uint32_t guard)
{
    put_overlay(b, slot, region, guard, 0);
}

/* CONTEXT and the first read of the three regions. */
static void put_bind(struct builder *b, uint32_t slot, uint64_t context,
                     uint32_t g1, uint32_t g2)
{
    put_context(b, slot, context, 0);
    put_guard(b, slot, 0, g1);
    put_guard(b, slot, 1, g2);
    put_guard(b, slot, 2, 0);
}

static void put_samples(struct builder *b, uint32_t slot, uint32_t address,
                        unsigned n)
{
    uint64_t word = copstream_sample_word(slot, address);

    for (unsigned i = 0; i < n; i++)
        g_byte_array_append(b->bytes, (const uint8_t *)&word, sizeof word);
    b->samples += n;
}

static void put_time(struct builder *b, uint32_t slot, uint64_t cycle,
                     uint64_t time_ns)
{
    struct copstream_record rec = { .code = COPSTREAM_TIME };

    rec.u.time = (struct copstream_time){ slot, cycle, time_ns };
    put(b, &rec);
}

static void put_lost(struct builder *b, uint32_t slot, uint32_t cause,
                     uint64_t count)
{
    struct copstream_record rec = { .code = COPSTREAM_LOST };

    rec.u.lost = (struct copstream_lost){ slot, cause, count, 0 };
    put(b, &rec);
    b->lost += count;
}

/* REASONS (1.6): the reasons of the slot's next samples, one hex digit
 * a sample. */
static void put_reasons(struct builder *b, uint32_t slot, const char *digits)
{
    struct copstream_record rec = { .code = COPSTREAM_REASONS };
    uint8_t stalls[COPSTREAM_MAX_REASONS / 2] = { 0 };
    uint32_t n = (uint32_t)strlen(digits);

    for (uint32_t i = 0; i < n; i++)
        copstream_put_reason(stalls, i,
                             (uint32_t)g_ascii_xdigit_value(digits[i]));
    rec.u.reasons = (struct copstream_reasons){ slot, n, stalls };
    put(b, &rec);
}

/* TRANSFER (1.6): the slot's DMA waits from now on wait on (tag, issuer). */
static void put_transfer(struct builder *b, uint32_t slot, uint32_t tag,
                         uint32_t issuer)
{
    struct copstream_record rec = { .code = COPSTREAM_TRANSFER };

    rec.u.transfer = (struct copstream_transfer){
        slot, COPSTREAM_TRANSFER_KNOWN, tag, issuer,
    };
    put(b, &rec);
}

static void put_release(struct builder *b, uint32_t slot, uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_RELEASE };

    rec.u.release = (struct copstream_release){ slot, cycle };
    put(b, &rec);
}

static void put_stop(struct builder *b)
{
    struct copstream_record rec = { .code = COPSTREAM_STOP };

    rec.u.stop = (struct copstream_stop){ 99000, b->samples, b->lost };
    put(b, &rec);
}

/* The usual beginning: START and the image's path. */
static void put_header(struct builder *b)
{
    put_start(b);
    put_image_path(b, b->path);
}

/* ---- recording and reading back ----------------------------------------- */

struct recording {
    char *dir;
    sqlite3 *db;
    struct session_totals totals;
};

/* A recorder with a sample timeline of 10 us buckets. */
static struct recorder *open_recorder(const char *dir, const char *event_log)
{
    struct recorder_options options = {
        .session_dir = dir, .event_log = event_log, .source = "test",
        .quiet = true, .busy_timeout_ms = 50, .timeline_ns = 10000,
    };
    GError *error = NULL;
    struct recorder *r = recorder_open(&options, &error);

    g_assert_no_error(error);
    return r;
}

static sqlite3 *open_db(const char *dir)
{
    char *path = g_build_filename(dir, "session.db", NULL);
    sqlite3 *db;

    g_assert_cmpint(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                    ==, SQLITE_OK);
    g_free(path);
    return db;
}

/* Records the whole stream (fed in pieces of `piece` bytes) and opens it. */
static struct recording record_pieces(const struct builder *b, size_t piece)
{
    struct recording rec = { .dir = new_dir("session") };
    struct recorder *r = open_recorder(rec.dir, NULL);
    GError *error = NULL;

    for (size_t at = 0; at < b->bytes->len; at += piece)
        recorder_feed(r, b->bytes->data + at, MIN(piece, b->bytes->len - at));
    recorder_finish(r);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    session_get_totals(recorder_session(r), &rec.totals);
    recorder_close(r);
    rec.db = open_db(rec.dir);
    return rec;
}

static struct recording record(const struct builder *b)
{
    return record_pieces(b, b->bytes->len ? b->bytes->len : 1);
}

static void recording_free(struct recording *rec)
{
    sqlite3_close(rec->db);
    g_free(rec->dir);
}

/* The integer a query returns (0 for no row or NULL). */
static int64_t query(sqlite3 *db, const char *format, ...)
{
    va_list args;
    sqlite3_stmt *st;
    int64_t value = 0;

    va_start(args, format);
    char *sql = g_strdup_vprintf(format, args);
    va_end(args);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        g_error("%s: %s", sql, sqlite3_errmsg(db));
    if (sqlite3_step(st) == SQLITE_ROW)
        value = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    g_free(sql);
    return value;
}

static char *query_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    char *text = NULL;

    g_assert_cmpint(sqlite3_prepare_v2(db, sql, -1, &st, NULL), ==,
                    SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        text = g_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return text;
}

/* Where address lies under guards (g1, g2, 0), per the overlay library. */
static struct ovl_location where(uint32_t address, uint32_t g1, uint32_t g2)
{
    char *path = test_image_path();
    struct ovl_error error;
    struct ovl_image *image = ovl_image_open(path, &error);
    uint32_t guards[3] = { g1, g2, 0 };
    struct ovl_location loc;

    g_assert_nonnull(image);
    ovl_resolve(image, address, guards, 3, &loc);
    loc.image = NULL;
    loc.section = NULL;
    ovl_image_close(image);
    g_free(path);
    return loc;
}

static int64_t exact_at(sqlite3 *db, uint32_t address, uint32_t g1,
                        uint32_t g2)
{
    struct ovl_location loc = where(address, g1, g2);

    g_assert_cmpint(loc.reason, ==, OVL_MAPPED);
    return query(db, "SELECT SUM(count) FROM samples WHERE file_offset = %"
                 G_GUINT64_FORMAT, loc.file_offset);
}

/* Every sample decoded is in exactly one table. */
static void assert_conserved(const struct recording *rec)
{
    int64_t stored =
        query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM samples") +
        query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM ambiguous_samples") +
        query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM unmapped_samples") +
        query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM orphan_samples") +
        query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM pending_samples");

    g_assert_cmpint(stored, ==, (int64_t)rec->totals.samples);
    g_assert_cmpint(rec->totals.exact + rec->totals.ambiguous +
                    rec->totals.unmapped + rec->totals.orphan +
                    rec->totals.pending + rec->totals.open, ==,
                    rec->totals.samples);
    g_assert_cmpint(query(rec->db, "SELECT value FROM session"
                          " WHERE key = 'stream.samples'"), ==,
                    (int64_t)rec->totals.samples);
    /* sample_stalls: every exact sample by reason, no more. */
    g_assert_cmpint(query(rec->db, "SELECT COUNT(*) FROM samples s WHERE"
                          " count != (SELECT IFNULL(SUM(t.count), 0) FROM"
                          " sample_stalls t WHERE t.context = s.context AND"
                          " t.image = s.image AND"
                          " t.file_offset = s.file_offset)"), ==, 0);
    g_assert_cmpint(query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM"
                          " sample_stalls"), ==,
                    query(rec->db, "SELECT IFNULL(SUM(count), 0) FROM"
                          " samples"));
}

/* ---- counts.c ----------------------------------------------------------- */

static void test_tally_matches_reference(void)
{
    struct addr_tally tally;
    GHashTable *reference = g_hash_table_new(g_direct_hash, g_direct_equal);
    GRand *rand = g_rand_new_with_seed(11);

    addr_tally_init(&tally);
    for (int round = 0; round < 4; round++) {
        uint32_t spread = round % 2 ? 40000u : 100u;
        for (int i = 0; i < 100000; i++) {
            uint32_t address = 4 * g_rand_int_range(rand, 0, (gint32)spread);
            uint32_t cause = g_rand_int_range(rand, 0, 3);
            addr_tally_add(&tally, address, cause);
            gpointer key = GUINT_TO_POINTER((address | cause) + 1);
            g_hash_table_insert(reference, key, GUINT_TO_POINTER(
                GPOINTER_TO_UINT(g_hash_table_lookup(reference, key)) + 1));
        }
        g_assert_cmpuint(tally.used_count, ==, g_hash_table_size(reference));
        for (uint32_t i = 0; i < tally.used_count; i++) {
            gpointer key = GUINT_TO_POINTER((addr_tally_address(&tally, i) |
                                             addr_tally_cause(&tally, i)) + 1);
            g_assert_cmpuint(addr_tally_count(&tally, i), ==,
                             GPOINTER_TO_UINT(g_hash_table_lookup(reference,
                                                                  key)));
        }
        addr_tally_clear(&tally);
        g_hash_table_remove_all(reference);
        g_assert_cmpuint(tally.used_count, ==, 0);
    }
    addr_tally_free(&tally);
    g_hash_table_destroy(reference);
    g_rand_free(rand);
}

static void test_count_table_dirty_and_growth(void)
{
    struct count_table table;
    struct count_key key;

    count_table_init(&table);
    memset(&key, 0, sizeof key);
    key.kind = COUNT_EXACT;
    for (uint64_t i = 0; i < 5000; i++) {
        key.position = i;
        count_table_add(&table, &key, 0, -1, i + 1);
    }
    g_assert_cmpuint(table.dirty_count, ==, 5000);
    count_table_mark_flushed(&table);
    g_assert_cmpuint(table.dirty_count, ==, 0);
    key.position = 7;
    count_table_add(&table, &key, 0, -1, 10);
    count_table_add(&table, &key, 0, -1, 5);
    g_assert_cmpuint(table.dirty_count, ==, 1);
    const struct count_entry *e = count_table_find(&table, &key);
    g_assert_nonnull(e);
    g_assert_cmpuint(e->total, ==, 8 + 15);
    g_assert_cmpuint(e->unflushed, ==, 15);
    for (uint64_t i = 5000; i < 20000; i++) {   /* grows with a dirty entry */
        key.position = i;
        count_table_add(&table, &key, 0, -1, 1);
    }
    g_assert_cmpuint(table.dirty_count, ==, 15001);
    key.position = 7;
    g_assert_cmpuint(count_table_find(&table, &key)->unflushed, ==, 15);
    key.guard_to = 1;                           /* another key */
    g_assert_null(count_table_find(&table, &key));
    count_table_free(&table);
}

/* ---- attribution -------------------------------------------------------- */

static void test_exact_steady_guards(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 5);
    for (int group = 0; group < 3; group++) {
        put_samples(&b, 0, RESIDENT_ADDR, 10);
        put_samples(&b, 0, REGION1_ADDR2, 7);
        put_samples(&b, 0, REGION2_ADDR, 3);
        put_time(&b, 0, 1000 * (group + 1), 5000 * (group + 1));
    }
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, RESIDENT_ADDR, 2, 5), ==, 30);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 5), ==, 21);
    g_assert_cmpint(exact_at(rec.db, REGION2_ADDR, 2, 5), ==, 9);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM samples"), ==, 3);
    g_assert_cmpint(query(rec.db, "SELECT overlay FROM samples WHERE"
                          " file_offset = %" G_GUINT64_FORMAT,
                          where(REGION1_ADDR2, 2, 5).file_offset), ==, 2);
    g_assert_cmpint(rec.totals.ambiguous + rec.totals.unmapped, ==, 0);
    /* No REASON (as a 1.5 stream): every sample is ISSUE. */
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM sample_stalls WHERE"
                          " stall != 0"), ==, 0);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM stall_timeline WHERE"
                          " stall != 0"), ==, 0);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/*
 * Guard of region 1 changes (2 -> 3) in group 2: the region-1 samples of
 * groups 2 and 3 are ambiguous, those of groups 1 and 4 exact under the
 * guard of their time; resident and region-2 samples stay exact.
 */
static void test_ambiguity_window(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 5);
    for (int group = 1; group <= 4; group++) {
        put_samples(&b, 0, REGION1_ADDR2, (unsigned)group);
        put_samples(&b, 0, RESIDENT_ADDR, 10);
        put_samples(&b, 0, REGION2_ADDR, 10);
        if (group == 2)
            put_guard(&b, 0, 0, 3);
        put_time(&b, 0, 1000 * group, 1000 * group);
    }
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 5), ==, 1);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 3, 5), ==, 4);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " ls_addr = %u AND region = 1 AND guard_from = 2"
                          " AND guard_to = 3", REGION1_ADDR2), ==, 2 + 3);
    g_assert_cmpint(exact_at(rec.db, RESIDENT_ADDR, 0, 0), ==, 40);
    g_assert_cmpint(exact_at(rec.db, REGION2_ADDR, 2, 5), ==, 40);
    /* The candidates: overlays 2 and 3 cover the address, 1 does not. */
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM ambiguous_candidates"
                          " WHERE ls_addr = %u", REGION1_ADDR2), ==, 2);
    g_assert_cmpint(query(rec.db, "SELECT file_offset FROM"
                          " ambiguous_candidates WHERE ls_addr = %u AND"
                          " overlay = 3", REGION1_ADDR2), ==,
                    (int64_t)where(REGION1_ADDR2, 3, 5).file_offset);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM overlay_events"
                          " WHERE initial = 0"), ==, 1);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* Changes in two groups in a row widen the window; "before" is the guard
 * read before the first change. */
static void test_ambiguity_two_changes(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 1, 4);
    for (int group = 1; group <= 5; group++) {
        put_samples(&b, 0, REGION1_ADDR, 1u << group);
        if (group == 2)
            put_guard(&b, 0, 0, 2);
        if (group == 3)
            put_guard(&b, 0, 0, 3);
        put_time(&b, 0, 1000 * group, 1000 * group);
    }
    put_stop(&b);
    struct recording rec = record(&b);

    /* group 2: 1 -> 2; group 3: 1 -> 3 (from the read before group 2's
     * change); group 4: 2 -> 3; groups 1 and 5 exact. */
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR, 1, 4), ==, 2);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 1 AND guard_to = 2"), ==, 4);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 1 AND guard_to = 3"), ==, 8);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 2 AND guard_to = 3"), ==, 16);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR, 3, 4), ==, 32);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* Conservation, then the recording, the builder and the image path go. */
static void recording_done(struct recording *rec, struct builder *b,
                           char *path)
{
    assert_conserved(rec);
    recording_free(rec);
    builder_free(b);
    g_free(path);
}

/* A stream of context 1 bound on slot 0 with guards (g1, g2, 0); the image
 * path, for recording_done(). */
static char *begin_on_slot_0(struct builder *b, uint32_t g1, uint32_t g2)
{
    char *path = test_image_path();

    builder_init(b, path);
    put_header(b);
    put_bind(b, 0, 1, g1, g2);
    return path;
}

/* A placed change (stream 1.1): exact in the sample sequence. */
static void put_placed(struct builder *b, uint32_t slot, uint32_t region,
                       uint32_t guard)
{
    put_overlay(b, slot, region, guard, COPSTREAM_OVERLAY_PLACED);
}

static int64_t ambiguous_count(sqlite3 *db)
{
    return query(db, "SELECT IFNULL(SUM(count), 0) FROM ambiguous_samples");
}

/*
 * Placed changes mid-group: the samples before each are exact under the
 * guard before it, those after under the new one; two changes of a region
 * at one point, a change at the group's end, other regions untouched.
 */
static void test_placed_mid_group(void)
{
    struct builder b;
    char *path = begin_on_slot_0(&b, 2, 5);
    put_samples(&b, 0, REGION1_ADDR2, 3);       /* under 2 */
    put_samples(&b, 0, REGION2_ADDR, 1);
    put_placed(&b, 0, 0, 3);
    put_samples(&b, 0, REGION1_ADDR2, 4);       /* under 3 */
    put_samples(&b, 0, RESIDENT_ADDR, 2);
    put_placed(&b, 0, 0, 1);
    put_placed(&b, 0, 0, 2);                    /* twice at one point */
    put_samples(&b, 0, REGION1_ADDR2, 6);       /* under 2 */
    put_samples(&b, 0, REGION2_ADDR, 1);
    put_placed(&b, 0, 0, 3);                    /* at the group's end */
    put_time(&b, 0, 1000, 1000);
    put_samples(&b, 0, REGION1_ADDR2, 5);       /* under 3 */
    put_time(&b, 0, 2000, 2000);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 5), ==, 3 + 6);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 3, 5), ==, 4 + 5);
    g_assert_cmpint(exact_at(rec.db, REGION2_ADDR, 2, 5), ==, 2);
    g_assert_cmpint(exact_at(rec.db, RESIDENT_ADDR, 0, 0), ==, 2);
    g_assert_cmpint(rec.totals.ambiguous + rec.totals.unmapped, ==, 0);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM overlay_events"
                          " WHERE placed = 1 AND initial = 0"), ==, 4);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM overlay_events"
                          " WHERE placed = 0"), ==, 3);
    /* The timeline holds the exact samples of both groups. */
    g_assert_cmpint(query(rec.db, "SELECT SUM(count) FROM sample_timeline"),
                    ==, 3 + 6 + 4 + 5 + 2 + 2);
    recording_done(&rec, &b, path);
}

/*
 * Placed and unplaced changes of one region: any sample of a group that an
 * unplaced change's window touches is ambiguous, before or after a placed
 * change; outside such windows placed changes divide exactly.
 */
static void test_placed_and_unplaced(void)
{
    struct builder b;
    char *path = begin_on_slot_0(&b, 2, 5);
    put_samples(&b, 0, REGION1_ADDR2, 1);       /* group 1: exact, 2 */
    put_placed(&b, 0, 0, 3);
    put_samples(&b, 0, REGION1_ADDR2, 2);       /* exact, 3 */
    put_time(&b, 0, 1000, 1000);
    put_samples(&b, 0, REGION1_ADDR2, 4);       /* group 2: ambiguous */
    put_samples(&b, 0, REGION2_ADDR, 1);        /* other region: exact */
    put_guard(&b, 0, 0, 2);
    put_time(&b, 0, 2000, 2000);
    put_samples(&b, 0, REGION1_ADDR2, 8);       /* group 3: ambiguous */
    put_placed(&b, 0, 0, 3);
    put_samples(&b, 0, REGION1_ADDR2, 16);      /* ambiguous too */
    put_time(&b, 0, 3000, 3000);
    put_samples(&b, 0, REGION1_ADDR2, 32);      /* group 4: exact, 3 */
    put_time(&b, 0, 4000, 4000);
    put_samples(&b, 0, REGION1_ADDR2, 64);      /* group 5: ambiguous, */
    put_placed(&b, 0, 0, 1);
    put_guard(&b, 0, 0, 2);                     /* an unplaced change */
    put_time(&b, 0, 5000, 5000);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 5), ==, 1);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 3, 5), ==, 2 + 32);
    g_assert_cmpint(exact_at(rec.db, REGION2_ADDR, 2, 5), ==, 1);
    g_assert_cmpint(ambiguous_count(rec.db), ==, 4 + 8 + 16 + 64);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 3 AND guard_to = 2"), ==, 4 + 8);
    /* Group 3's after its placed change (from 3, the guard now 3), and
     * group 5's before its placed change (from 3, taken under 3). */
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 3 AND guard_to = 3"), ==, 16 + 64);
    recording_done(&rec, &b, path);
}

/*
 * A trailing group (a switch, no TIME after): samples before a placed
 * change are exact at once (the record says the guard held until it);
 * those after it wait for the context's next first read as before.
 */
static void test_placed_trailing(void)
{
    struct builder b;
    char *path = begin_on_slot_0(&b, 2, 4);

    put_bind(&b, 1, 2, 2, 4);
    put_samples(&b, 0, REGION1_ADDR2, 3);
    put_samples(&b, 1, REGION1_ADDR2, 5);
    put_placed(&b, 0, 0, 3);
    put_placed(&b, 1, 0, 3);
    put_samples(&b, 0, REGION1_ADDR2, 7);
    put_samples(&b, 1, REGION1_ADDR2, 9);
    put_release(&b, 0, 100);
    put_release(&b, 1, 100);
    put_bind(&b, 0, 1, 3, 4);               /* 1 back: same guard */
    put_bind(&b, 1, 2, 1, 4);               /* 2 back: it changed */
    put_time(&b, 0, 200, 200);
    put_time(&b, 1, 200, 200);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 4), ==, 3 + 5);
    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 3, 4), ==, 7);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " context = 2 AND guard_from = 3 AND"
                          " guard_to = 1"), ==, 9);
    g_assert_cmpint(ambiguous_count(rec.db), ==, 9);
    recording_done(&rec, &b, path);
}

/*
 * Samples drained at a switch after the last guard read wait for the
 * context's next first read: the same guard makes them exact, another
 * guard ambiguous; resident ones are exact at once.
 */
static void test_trailing_group(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);               /* context 1 on slot 0 */
    put_bind(&b, 1, 2, 2, 4);               /* context 2 on slot 1 */
    put_samples(&b, 0, REGION1_ADDR2, 3);
    put_samples(&b, 1, REGION1_ADDR2, 5);
    put_samples(&b, 0, RESIDENT_ADDR, 7);
    put_bind(&b, 0, 3, 1, 4);               /* both switched out, no TIME */
    put_bind(&b, 1, 4, 1, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 1);
    put_time(&b, 0, 100, 100);
    put_bind(&b, 0, 1, 2, 4);               /* 1 back: same guard */
    put_bind(&b, 1, 2, 3, 4);               /* 2 back: the guard changed */
    put_time(&b, 0, 200, 200);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR2, 2, 4), ==, 3);
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " context = 2 AND guard_from = 2 AND"
                          " guard_to = 3"), ==, 5);
    g_assert_cmpint(exact_at(rec.db, RESIDENT_ADDR, 0, 0), ==, 8);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM pending_samples"),
                    ==, 0);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM bindings WHERE"
                          " end_reason = 'switch'"), ==, 4);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* A pending tail is in the database after a flush, and becomes ambiguous
 * (after: unknown) when its context never comes back. */
static void test_pending_then_stop(void)
{
    char *path = test_image_path();
    char *dir = new_dir("pending");
    struct builder b;
    GError *error = NULL;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);
    put_samples(&b, 0, REGION2_ADDR, 6);
    put_release(&b, 0, 500);
    struct recorder *r = open_recorder(dir, NULL);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    sqlite3 *db = open_db(dir);
    g_assert_cmpint(query(db, "SELECT count FROM pending_samples WHERE"
                          " ls_addr = %u AND region = 2 AND guard = 4",
                          REGION2_ADDR), ==, 6);
    g_assert_cmpint(query(db, "SELECT end_cycle FROM bindings WHERE"
                          " end_reason = 'release'"), ==, 500);

    g_byte_array_set_size(b.bytes, 0);
    put_stop(&b);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    recorder_finish(r);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM pending_samples"), ==, 0);
    g_assert_cmpint(query(db, "SELECT count FROM ambiguous_samples WHERE"
                          " guard_from = 4 AND guard_to = -1"), ==, 6);
    sqlite3_close(db);
    recorder_close(r);
    builder_free(&b);
    g_free(dir);
    g_free(path);
}

static void test_orphans_and_unmapped(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_samples(&b, 3, RESIDENT_ADDR, 4);           /* no context yet */
    put_context(&b, 0, 1, 0);                        /* no first read */
    put_samples(&b, 0, REGION1_ADDR, 2);             /* guard unknown */
    put_samples(&b, 0, GAP_ADDR, 5);
    put_time(&b, 0, 10, 10);
    put_guard(&b, 0, 1, 0);                          /* region 2 empty */
    put_time(&b, 0, 20, 20);
    put_samples(&b, 0, REGION2_ADDR, 9);
    put_time(&b, 0, 30, 30);
    put_time(&b, 0, 40, 40);
    put_samples(&b, 0, REGION2_ADDR, 1);
    put_time(&b, 0, 50, 50);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(query(rec.db, "SELECT count FROM orphan_samples WHERE"
                          " slot = 3 AND ls_addr = %u", RESIDENT_ADDR), ==, 4);
    g_assert_cmpint(query(rec.db, "SELECT count FROM unmapped_samples WHERE"
                          " reason = 'guard-unknown' AND guard = -1"), ==, 2);
    g_assert_cmpint(query(rec.db, "SELECT count FROM unmapped_samples WHERE"
                          " reason = 'no-segment' AND ls_addr = %u",
                          GAP_ADDR), ==, 5);
    /* Region 2's first read came as a change: ambiguous for two groups,
     * then "region-empty" with the guard kept. */
    g_assert_cmpint(query(rec.db, "SELECT count FROM ambiguous_samples WHERE"
                          " region = 2 AND guard_from = -1 AND"
                          " guard_to = 0"), ==, 9);
    g_assert_cmpint(query(rec.db, "SELECT count FROM unmapped_samples WHERE"
                          " reason = 'region-empty' AND guard = 0"), ==, 1);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

static void test_lost_time_and_bindings(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_context(&b, 2, 7, 1000);
    put_samples(&b, 2, RESIDENT_ADDR, 3);
    put_lost(&b, 2, COPSTREAM_LOST_FIFO_OVERFLOW, 11);
    put_time(&b, 2, 1500, 20000);
    put_lost(&b, 5, COPSTREAM_LOST_NO_CONTEXT, 2);
    put_lost(&b, 2, 77, 1);
    put_time(&b, 2, 2000, 20500);
    put_release(&b, 2, 2100);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(query(rec.db, "SELECT count FROM lost_by_cause WHERE"
                          " cause_name = 'fifo-overflow'"), ==, 11);
    g_assert_cmpint(query(rec.db, "SELECT context FROM lost_events WHERE"
                          " cause = 1"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM lost_events WHERE"
                          " cause = 3 AND context IS NULL"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT count FROM lost_events WHERE"
                          " cause = 77 AND cause_name IS NULL"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT lost FROM context_totals"), ==, 12);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM time_sync"), ==, 2);
    /* Bound at cycle 1000, 500 cycles before (1500, 20000 ns) at 1 GHz;
     * released at 2100, 100 cycles after (2000, 20500 ns). */
    g_assert_cmpint(query(rec.db, "SELECT start_time_ns FROM bindings"), ==,
                    19500);
    g_assert_cmpint(query(rec.db, "SELECT end_time_ns FROM bindings"), ==,
                    20600);
    g_assert_cmpint(query(rec.db, "SELECT first_slot FROM contexts"), ==, 2);
    g_assert_cmpint(query(rec.db, "SELECT context_id FROM contexts"), ==, 7);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* A context bound on a second slot without leaving the first. */
static void test_context_moves(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 1, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 2);
    put_bind(&b, 1, 1, 1, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 3);       /* slot 0: now an orphan */
    put_time(&b, 1, 10, 10);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM bindings WHERE"
                          " slot = 0 AND end_reason = 'moved'"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM contexts"), ==, 1);
    g_assert_cmpint(exact_at(rec.db, RESIDENT_ADDR, 0, 0), ==, 2);
    g_assert_cmpint(query(rec.db, "SELECT SUM(count) FROM orphan_samples"),
                    ==, 3);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* The function whose symbol covers address under guards (g1, g2, 0). */
static uint64_t function_at(uint32_t address, uint32_t g1, uint32_t g2)
{
    char *path = test_image_path();
    struct ovl_image *image = ovl_image_open(path, NULL);
    struct ovl_symbol symbol;

    g_assert_nonnull(image);
    g_assert_cmpint(ovl_symbol_at(image, where(address, g1, g2).file_offset,
                                  &symbol), ==, 0);
    ovl_image_close(image);
    g_free(path);
    return symbol.file_offset;
}

/* Exact samples by function in 10 us buckets, by their group's TIME; a
 * flush in the middle of a bucket adds to it later. */
static void test_sample_timeline(void)
{
    char *path = test_image_path();
    char *dir = new_dir("timeline");
    struct builder b;
    GError *error = NULL;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 3);
    put_samples(&b, 0, RESIDENT_ADDR + 4, 1);       /* same function */
    put_time(&b, 0, 100, 5000);                     /* bucket 0 */
    put_samples(&b, 0, REGION1_ADDR2, 2);
    put_time(&b, 0, 200, 12000);                    /* bucket 1 */
    struct recorder *r = open_recorder(dir, NULL);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_byte_array_set_size(b.bytes, 0);
    put_samples(&b, 0, REGION1_ADDR2, 5);
    put_guard(&b, 0, 0, 3);                         /* ambiguous: not */
    put_samples(&b, 0, RESIDENT_ADDR, 7);           /* in the timeline */
    put_time(&b, 0, 300, 19000);                    /* bucket 1 again */
    put_samples(&b, 0, RESIDENT_ADDR, 1);
    put_time(&b, 0, 400, 25000);                    /* bucket 2 */
    put_stop(&b);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    recorder_finish(r);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    recorder_close(r);
    sqlite3 *db = open_db(dir);
    uint64_t resident = function_at(RESIDENT_ADDR, 2, 4);
    uint64_t overlay = function_at(REGION1_ADDR2, 2, 4);

    g_assert_cmpint(function_at(RESIDENT_ADDR + 4, 2, 4), ==, resident);
    g_assert_cmpint(query(db, "SELECT count FROM sample_timeline WHERE"
                          " bucket_start_ns = 0 AND function_offset = %"
                          G_GUINT64_FORMAT, resident), ==, 4);
    g_assert_cmpint(query(db, "SELECT count FROM sample_timeline WHERE"
                          " bucket_start_ns = 10000 AND function_offset = %"
                          G_GUINT64_FORMAT, overlay), ==, 2);
    g_assert_cmpint(query(db, "SELECT count FROM sample_timeline WHERE"
                          " bucket_start_ns = 10000 AND function_offset = %"
                          G_GUINT64_FORMAT, resident), ==, 7);
    g_assert_cmpint(query(db, "SELECT count FROM sample_timeline WHERE"
                          " bucket_start_ns = 20000"), ==, 1);
    g_assert_cmpint(query(db, "SELECT SUM(count) FROM sample_timeline"), ==,
                    4 + 2 + 7 + 1);
    g_assert_cmpint(query(db, "SELECT value FROM session WHERE"
                          " key = 'timeline.bucket_ns'"), ==, 10000);
    sqlite3_close(db);
    builder_free(&b);
    g_free(dir);
    g_free(path);
}

/* The count of sample_stalls at address under guards (g1, g2, 0). */
static int64_t stall_at(sqlite3 *db, uint32_t context, uint32_t address,
                        uint32_t g1, uint32_t g2, uint32_t stall)
{
    return query(db, "SELECT count FROM sample_stalls WHERE context = %u AND"
                 " file_offset = %" G_GUINT64_FORMAT " AND stall = %u",
                 context, where(address, g1, g2).file_offset, stall);
}

/*
 * Stream 1.6: each sample takes its reason from its slot's last REASONS
 * (ISSUE beyond it) and keeps it through every path (settled, held at a
 * placed change, pending at a switch); DMA waits keep the transfer the
 * last TRANSFER named, the issuer resolved when it lies in the image; the
 * timeline counts by reason.  Reasons a CONTEXT finds unread are an error
 * (reasons-unread) and never move onto the next context's samples.
 */
static void test_stall_reasons(void)
{
    struct builder b;
    char *path = begin_on_slot_0(&b, 2, 4);

    put_samples(&b, 0, RESIDENT_ADDR, 3);               /* ISSUE */
    put_reasons(&b, 0, "1111111");
    put_samples(&b, 0, RESIDENT_ADDR, 5);
    put_samples(&b, 0, RESIDENT_ADDR + 4, 2);
    put_reasons(&b, 0, "33333");
    put_transfer(&b, 0, 5, RESIDENT_ADDR + 4);
    put_samples(&b, 0, RESIDENT_ADDR, 4);
    put_transfer(&b, 0, 6, 0x3fffc);                    /* no file */
    put_samples(&b, 0, RESIDENT_ADDR, 1);
    put_reasons(&b, 0, "44444");
    put_samples(&b, 0, REGION1_ADDR2, 2);               /* held: guard 2 */
    put_placed(&b, 0, 0, 3);
    put_samples(&b, 0, REGION1_ADDR2, 3);
    put_time(&b, 0, 100, 5000);                         /* bucket 0 */
    put_reasons(&b, 0, "44444444");                     /* 2 unread */
    put_samples(&b, 0, REGION1_ADDR2, 6);               /* pending */
    put_bind(&b, 0, 2, 3, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 2);               /* ISSUE again */
    put_bind(&b, 0, 1, 3, 4);                           /* 1 back: exact */
    put_time(&b, 0, 200, 6000);
    put_stop(&b);
    struct recording rec = record(&b);
    sqlite3 *db = rec.db;

    g_assert_cmpint(stall_at(db, 1, RESIDENT_ADDR, 2, 4, 0), ==, 3);
    g_assert_cmpint(stall_at(db, 1, RESIDENT_ADDR, 2, 4, 1), ==, 5);
    g_assert_cmpint(stall_at(db, 1, RESIDENT_ADDR, 2, 4, 3), ==, 5);
    g_assert_cmpint(stall_at(db, 1, RESIDENT_ADDR + 4, 2, 4, 1), ==, 2);
    g_assert_cmpint(stall_at(db, 1, REGION1_ADDR2, 2, 4, 4), ==, 2);
    g_assert_cmpint(stall_at(db, 1, REGION1_ADDR2, 3, 4, 4), ==, 3 + 6);
    g_assert_cmpint(stall_at(db, 2, RESIDENT_ADDR, 3, 4, 0), ==, 2);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM sample_stalls"), ==, 7);
    g_assert_cmpint(query(db, "SELECT count FROM dma_wait_samples WHERE"
                          " tag = 5 AND issuer_ls_addr = %u AND"
                          " issuer_offset = %" G_GUINT64_FORMAT " AND"
                          " file_offset = %" G_GUINT64_FORMAT,
                          RESIDENT_ADDR + 4,
                          where(RESIDENT_ADDR + 4, 2, 4).file_offset,
                          where(RESIDENT_ADDR, 2, 4).file_offset), ==, 4);
    g_assert_cmpint(query(db, "SELECT count FROM dma_wait_samples WHERE"
                          " tag = 6 AND issuer_ls_addr = %u AND"
                          " issuer_offset IS NULL", 0x3fffc), ==, 1);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM dma_wait_samples"), ==,
                    2);
    /* Bucket 0 of context 1: the groups closed by a TIME, by reason. */
    char *timeline = query_text(db, "SELECT GROUP_CONCAT(stall || ':' ||"
                                " count, ' ') FROM (SELECT stall, count FROM"
                                " stall_timeline WHERE context = 1 AND"
                                " bucket_start_ns = 0 ORDER BY stall)");
    g_assert_cmpstr(timeline, ==, "0:3 1:7 3:5 4:5");
    g_free(timeline);
    g_assert_cmpint(query(db, "SELECT SUM(count) FROM stall_timeline"), ==,
                    query(db, "SELECT SUM(count) FROM sample_timeline"));
    g_assert_cmpint(query(db, "SELECT count FROM decode_errors WHERE "
                          "kind = 'reasons-unread'"), ==, 1);
    recording_done(&rec, &b, path);
}

/* ---- images ------------------------------------------------------------- */

static char *copy_image(const char *name)
{
    char *source = test_image_path();
    char *dir = new_dir(name);
    char *copy = g_build_filename(dir, "image.elf", NULL);
    gchar *bytes;
    gsize length;

    g_assert_true(g_file_get_contents(source, &bytes, &length, NULL));
    g_assert_true(g_file_set_contents(copy, bytes, (gssize)length, NULL));
    g_free(bytes);
    g_free(source);
    g_free(dir);
    return copy;
}

/* Records a little stream whose IMAGE names path with identity id. */
static struct recording record_with_identity(const char *path,
                                             struct copstream_image_id id)
{
    struct builder b;

    builder_init_as(&b, path, &id);
    put_header(&b);
    put_bind(&b, 0, 1, 1, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 5);
    put_samples(&b, 0, REGION1_ADDR, 2);
    put_time(&b, 0, 10, 10);
    put_bind(&b, 1, 2, 1, 4);                   /* a second context */
    put_samples(&b, 1, RESIDENT_ADDR, 1);
    put_time(&b, 1, 10, 10);
    put_stop(&b);
    struct recording rec = record(&b);
    builder_free(&b);
    return rec;
}

static void assert_raw(const struct recording *rec, const char *status)
{
    char *text = query_text(rec->db, "SELECT status FROM images");

    g_assert_cmpstr(text, ==, status);
    g_free(text);
    g_assert_cmpint(query(rec->db, "SELECT COUNT(*) FROM images"), ==, 1);
    g_assert_cmpint(query(rec->db, "SELECT COUNT(*) FROM samples"), ==, 0);
    g_assert_cmpint(query(rec->db, "SELECT SUM(count) FROM unmapped_samples"
                          " WHERE reason = 'no-image' AND ls_addr = %u",
                          RESIDENT_ADDR), ==, 6);
    g_assert_cmpint(query(rec->db, "SELECT count FROM unmapped_samples"
                          " WHERE context = 1 AND ls_addr = %u",
                          REGION1_ADDR), ==, 2);
    g_assert_cmpint(query(rec->db, "SELECT COUNT(*) FROM images WHERE"
                          " message IS NOT NULL AND cache_file IS NULL"), ==,
                    1);
    assert_conserved(rec);
}

static void test_image_cached(void)
{
    char *path = copy_image("cached");
    struct recording rec = record_with_identity(path, identity_of(path));
    char *cache = query_text(rec.db, "SELECT cache_file FROM images");
    char *cached = g_build_filename(rec.dir, cache, NULL);
    char *name = query_text(rec.db, "SELECT short_name FROM images");
    gchar *a, *c;
    gsize la, lc;

    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM overlays"), ==, 5);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM regions"), ==, 3);
    g_assert_cmpstr(name, ==, "ovl-test.1");
    g_assert_true(g_file_get_contents(path, &a, &la, NULL));
    g_assert_true(g_file_get_contents(cached, &c, &lc, NULL));
    g_assert_cmpmem(a, la, c, lc);
    g_free(a), g_free(c), g_free(name), g_free(cached), g_free(cache);
    recording_free(&rec);
    g_free(path);
}

static void test_image_unreadable(void)
{
    char *path = copy_image("unreadable");
    struct copstream_image_id id = identity_of(path);

    g_assert_cmpint(g_unlink(path), ==, 0);
    struct recording rec = record_with_identity(path, id);
    assert_raw(&rec, "unreadable");
    recording_free(&rec);
    g_free(path);
}

static void test_image_not_elf(void)
{
    char *path = copy_image("not-elf");

    g_assert_true(g_file_set_contents(path, "not an image", -1, NULL));
    struct recording rec = record_with_identity(path, identity_of(path));
    assert_raw(&rec, "unreadable");
    recording_free(&rec);
    g_free(path);
}

static void test_image_changed(void)
{
    char *path = copy_image("changed");
    struct copstream_image_id id = identity_of(path);
    struct copstream_image_id wrong[3] = { id, id, id };

    wrong[0].inode++;
    wrong[1].size--;
    wrong[2].hash ^= 1;
    for (int i = 0; i < 3; i++) {
        struct recording rec = record_with_identity(path, wrong[i]);
        assert_raw(&rec, "changed");
        recording_free(&rec);
    }
    g_free(path);
}

/* CONTEXT before the IMAGE record of its identity: the image is opened
 * when the path comes, in time for the group's samples. */
static void test_image_path_late(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_start(&b);
    put_bind(&b, 0, 1, 1, 4);
    put_samples(&b, 0, REGION1_ADDR, 3);
    put_image_path(&b, path);
    put_time(&b, 0, 10, 10);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(exact_at(rec.db, REGION1_ADDR, 1, 4), ==, 3);
    char *status = query_text(rec.db, "SELECT status FROM images");
    g_assert_cmpstr(status, ==, "ok");
    g_free(status);
    recording_free(&rec);
    builder_free(&b);
    g_free(path);
}

/* ---- the stream --------------------------------------------------------- */

/* Random bytes after every poll group's samples. */
static void test_garbage_counted_and_skipped(void)
{
    char *path = test_image_path();
    struct builder b;
    GRand *rand = g_rand_new_with_seed(5);

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);
    for (int group = 0; group < 50; group++) {
        put_samples(&b, 0, RESIDENT_ADDR + 4 * (group % 8), 20);
        guint n = g_rand_int_range(rand, 1, 40);
        for (guint i = 0; i < n; i++) {
            uint8_t byte = (uint8_t)g_rand_int(rand);
            g_byte_array_append(b.bytes, &byte, 1);
        }
        put_time(&b, 0, 10 * group, 10 * group);
    }
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(query(rec.db, "SELECT SUM(count) FROM decode_errors"), >,
                    0);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM error_log"), >, 0);
    g_assert_cmpint(query(rec.db, "SELECT value FROM session WHERE"
                          " key = 'stream.skipped_bytes'"), >, 0);
    /* The garbage comes after each group's samples: the decoder hunts from
     * there to the TIME record, so every sample is decoded, and stored. */
    g_assert_cmpint(rec.totals.samples, ==, 50 * 20);
    g_assert_cmpint(rec.totals.exact, ==, 50 * 20);
    assert_conserved(&rec);
    recording_free(&rec);
    builder_free(&b);
    g_rand_free(rand);
    g_free(path);
}

/* The same stream fed whole and in odd pieces gives the same session. */
static void test_split_invariance(void)
{
    char *path = test_image_path();
    struct builder b;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);
    put_bind(&b, 1, 2, 1, 5);
    for (int group = 1; group <= 6; group++) {
        put_samples(&b, 0, REGION1_ADDR2, 3);
        put_samples(&b, 1, REGION2_ADDR, 2);
        if (group == 3)
            put_guard(&b, 1, 1, 4);
        put_time(&b, 0, group, group);
        put_time(&b, 1, group, group);
    }
    put_stop(&b);
    struct recording whole = record(&b);
    struct recording split = record_pieces(&b, 7);
    const char *sums[] = {
        "SELECT SUM(count * (file_offset + 1)) FROM samples",
        "SELECT SUM(count * (ls_addr + guard_from + guard_to + 3))"
        " FROM ambiguous_samples",
        "SELECT COUNT(*) FROM overlay_events",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(sums); i++)
        g_assert_cmpint(query(whole.db, "%s", sums[i]), ==,
                        query(split.db, "%s", sums[i]));
    g_assert_cmpint(query(whole.db, "SELECT SUM(count) FROM"
                          " ambiguous_samples"), ==, 2 * 2);
    recording_free(&whole);
    recording_free(&split);
    builder_free(&b);
    g_free(path);
}

/* ---- store and flushes -------------------------------------------------- */

static void test_store_refuses_existing_and_locked(void)
{
    char *dir = new_dir("store");
    GError *error = NULL;
    struct store *store = store_open(dir, false, &error);

    g_assert_no_error(error);
    struct store *second = store_open(dir, true, &error);
    g_assert_null(second);
    g_assert_nonnull(strstr(error->message, "in use"));
    g_clear_error(&error);
    store_close(store);
    g_assert_null(store_open(dir, false, &error));
    g_assert_nonnull(strstr(error->message, "--overwrite"));
    g_clear_error(&error);
    store = store_open(dir, true, &error);
    g_assert_no_error(error);
    store_close(store);
    g_free(dir);
}

/* A flush that cannot write (another writer holds the database) keeps its
 * data; the next one writes it, once. */
static void test_failed_flush_keeps_data(void)
{
    char *path = test_image_path();
    char *dir = new_dir("busy");
    struct builder b;
    GError *error = NULL;
    sqlite3 *blocker;

    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 2, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 25);
    put_time(&b, 0, 10, 10);
    struct recorder *r = open_recorder(dir, NULL);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    char *db_path = g_build_filename(dir, "session.db", NULL);
    g_assert_cmpint(sqlite3_open(db_path, &blocker), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_exec(blocker, "BEGIN IMMEDIATE", NULL, NULL,
                                 NULL), ==, SQLITE_OK);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, -1);
    g_assert_nonnull(error);
    g_clear_error(&error);
    g_assert_cmpint(sqlite3_exec(blocker, "ROLLBACK", NULL, NULL, NULL), ==,
                    SQLITE_OK);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_assert_cmpint(query(blocker, "SELECT SUM(count) FROM samples"), ==, 25);
    g_assert_cmpint(query(blocker, "SELECT COUNT(*) FROM contexts"), ==, 1);
    g_assert_cmpint(query(blocker, "SELECT COUNT(*) FROM overlay_events"), ==,
                    3);
    sqlite3_close(blocker);
    recorder_close(r);
    builder_free(&b);
    g_free(db_path);
    g_free(dir);
    g_free(path);
}

/* ---- the event log ------------------------------------------------------ */

static void test_sched_message_fields(void)
{
    struct store_sched_event e;
    char *kind, *stack;

    schedlog_parse_message("create context=12 pid=300 tid=301 mono=5 "
                           "trace_context=2 stack=/bin/host+0x1010 "
                           "/lib/libc.so.6+0x2724a ", &e, &kind, &stack);
    g_assert_cmpstr(kind, ==, "create");
    g_assert_cmpstr(stack, ==, "/bin/host+0x1010 /lib/libc.so.6+0x2724a");
    g_assert_cmpint(e.context_id, ==, 12);
    g_assert_cmpint(e.host_pid, ==, 300);
    g_assert_cmpint(e.host_tid, ==, 301);
    g_assert_cmpint(e.slot, ==, -1);
    g_free(kind), g_free(stack);
    schedlog_parse_message("bind slot=3 ctx=0x10 cycles=99 extra", &e, &kind,
                           &stack);
    g_assert_cmpstr(kind, ==, "bind");
    g_assert_null(stack);
    g_assert_cmpint(e.slot, ==, 3);
    g_assert_cmpint(e.context_id, ==, 16);
    g_assert_cmpint(e.cycle, ==, 99);
    g_free(kind);
    schedlog_parse_message("slot=x  context=-4 laststack=1", &e, &kind,
                           &stack);
    g_assert_null(kind);
    g_assert_null(stack);
    g_assert_cmpint(e.slot, ==, -1);
    g_assert_cmpint(e.context_id, ==, -1);
    schedlog_parse_message("exit slot=-1 context=3 cycles=7 status=0", &e,
                           &kind, &stack);
    g_assert_cmpstr(kind, ==, "exit");
    g_assert_cmpint(e.slot, ==, -1);
    g_assert_cmpint(e.cycle, ==, 7);
    g_free(kind);
}

static void write_sched(struct coplog *log, const char *kind, unsigned slot,
                        unsigned context)
{
    COPLOG(log, 0, COPLOG_TERSE, "%s slot=%u context=%u cycle=%u", kind, slot,
           context, 100 * slot);
}

static void test_sched_import_incremental(void)
{
    char *path = test_image_path();
    char *dir = new_dir("sched");
    char *log_path = g_build_filename(dir, "run.coplog", NULL);
    char *session = g_build_filename(dir, "session", NULL);
    static const struct coplog_subsys_config subsys[] = {
        { .name = "SCHED", .capacity = 1024 },
        { .name = "APP", .capacity = 64 },
    };
    struct coplog_config config = { .subsys = subsys, .subsys_count = 2 };
    char error_text[COPLOG_ERROR_MAX];
    struct coplog *log = coplog_create(log_path, &config, error_text);
    struct builder b;
    GError *error = NULL;

    g_assert_nonnull(log);
    COPLOG(log, 0, COPLOG_TERSE, "create context=%u pid=%u tid=%u stack=%s",
           1u, 10u, 21u, "main+0x4@host");
    write_sched(log, "bind", 0, 1);
    COPLOG(log, 1, COPLOG_TERSE, "not a scheduler event %d", 5);
    builder_init(&b, path);
    put_header(&b);
    put_bind(&b, 0, 1, 1, 4);
    struct recorder *r = open_recorder(session, log_path);
    recorder_feed(r, b.bytes->data, b.bytes->len);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    sqlite3 *db = open_db(session);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM sched_events"), ==, 2);
    char *stack = query_text(db, "SELECT creation_stack FROM contexts");
    g_assert_cmpstr(stack, ==, "main+0x4@host");
    g_free(stack);

    for (unsigned i = 0; i < 10; i++)
        write_sched(log, i % 2 ? "unbind" : "bind", i % 8, 2 + i);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_assert_cmpint(recorder_flush(r, "test", &error), ==, 0);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM sched_events"), ==, 12);
    g_assert_cmpint(query(db, "SELECT COUNT(*) FROM sched_events WHERE"
                          " kind = 'unbind' AND slot IS NOT NULL AND"
                          " cycle IS NOT NULL"), ==, 5);
    g_assert_cmpint(query(db, "SELECT COUNT(DISTINCT order_num) FROM"
                          " sched_events"), ==, 12);
    g_assert_cmpuint(recorder_sched_events(r), ==, 12);
    g_assert_cmpint(query(db, "SELECT value FROM session WHERE"
                          " key = 'eventlog.position'"), ==,
                    query(db, "SELECT MAX(order_num) FROM sched_events"));
    sqlite3_close(db);
    recorder_close(r);
    coplog_close(log);
    builder_free(&b);
    g_free(session), g_free(log_path), g_free(dir), g_free(path);
}

/* ---- main --------------------------------------------------------------- */

static void remove_tree(const char *path)
{
    GDir *dir = g_dir_open(path, 0, NULL);
    const char *name;

    if (dir == NULL) {
        g_unlink(path);
        return;
    }
    while ((name = g_dir_read_name(dir)) != NULL) {
        char *child = g_build_filename(path, name, NULL);
        remove_tree(child);
        g_free(child);
    }
    g_dir_close(dir);
    g_rmdir(path);
}

/* ---- context ends (stream 1.3) ------------------------------------------ */

static void put_end(struct builder *b, uint32_t slot, uint64_t context)
{
    struct copstream_record rec = { .code = COPSTREAM_END };

    rec.u.end = (struct copstream_end){ slot, context, 0 };
    put(b, &rec);
}

/*
 * One short context: bound, a group closed by TIME (exact and region
 * samples), a trailing group in region 1 (pending until its end), RELEASE
 * and, with_end, its END.
 */
static void put_short_context(struct builder *b, uint64_t context,
                              bool with_end)
{
    uint32_t slot = (uint32_t)(context % 8);

    put_bind(b, slot, context, 1, 4);
    put_samples(b, slot, RESIDENT_ADDR, 1 + (unsigned)(context % 3));
    put_samples(b, slot, REGION2_ADDR, 2);
    put_time(b, slot, 100, 1000 + context * 10);
    put_samples(b, slot, REGION1_ADDR, 1 + (unsigned)(context % 2));
    put_release(b, slot, 200);
    if (with_end)
        put_end(b, slot, context);
}

static void feed_batch(struct recorder *r, struct builder *b)
{
    recorder_feed(r, b->bytes->data, b->bytes->len);
    g_byte_array_set_size(b->bytes, 0);
}

/* Everything per context a session holds, one line per context. */
static char *per_context(sqlite3 *db)
{
    return query_text(db, "SELECT group_concat(line, ',') FROM (SELECT "
                      "t.context || ':' || t.exact || ':' || t.ambiguous "
                      "|| ':' || t.unmapped || ':' || t.pending || ':' || "
                      "t.lost || ':' || c.context_id AS line FROM "
                      "context_totals t JOIN contexts c ON c.id = "
                      "t.context ORDER BY t.context)");
}

#define SHORT_CONTEXTS  50000u
#define SHORT_BATCH     500u
/* Bytes a session may hold for one batch of live contexts: the states
 * with their settled tally (about 14 KiB; a tail tally only while samples
 * are pending) and buckets. */
#define BATCH_BYTES_MAX (SHORT_BATCH * 24u * 1024u)

/*
 * 50,000 short contexts, each ended by an END: between batches the
 * session holds no context and none of their count entries, while it
 * holds a batch its accounting stays under a fixed bound, and the counts
 * per context equal those of the same stream without END records.
 */
static void test_many_short_contexts(void)
{
    char *image = test_image_path();
    char *dir_end = new_dir("ends"), *dir_plain = new_dir("plain");
    struct recorder *with = open_recorder(dir_end, NULL);
    struct recorder *without = open_recorder(dir_plain, NULL);
    struct builder be, bp;
    struct session_totals t;
    GError *error = NULL;
    uint64_t peak_bytes = 0;

    builder_init(&be, image);
    builder_init(&bp, image);
    put_header(&be);
    put_header(&bp);
    for (uint64_t next = 1; next <= SHORT_CONTEXTS;) {
        for (unsigned i = 0; i < SHORT_BATCH; i++, next++) {
            put_short_context(&be, next, true);
            put_short_context(&bp, next, false);
        }
        feed_batch(with, &be);
        feed_batch(without, &bp);
        session_get_totals(recorder_session(with), &t);
        g_assert_cmpuint(t.live_contexts, <=, SHORT_BATCH);
        g_assert_cmpuint(t.context_bytes, <=, BATCH_BYTES_MAX);
        peak_bytes = MAX(peak_bytes, t.context_bytes);
        g_assert_cmpint(recorder_flush(with, "timer", &error), ==, 0);
        g_assert_cmpint(recorder_flush(without, "timer", &error), ==, 0);
        session_get_totals(recorder_session(with), &t);
        g_assert_cmpuint(t.live_contexts, ==, 0);
        g_assert_cmpuint(t.context_bytes, ==, 0);
        g_assert_cmpuint(t.count_entries, ==, 0);
        g_assert_cmpuint(t.contexts, ==, next - 1);
    }
    g_test_message("contexts=%u peak context bytes=%" G_GUINT64_FORMAT,
                   SHORT_CONTEXTS, peak_bytes);
    put_stop(&be);
    put_stop(&bp);
    feed_batch(with, &be);
    feed_batch(without, &bp);
    recorder_finish(with);
    recorder_finish(without);
    g_assert_cmpint(recorder_flush(with, "end", &error), ==, 0);
    g_assert_cmpint(recorder_flush(without, "end", &error), ==, 0);
    session_get_totals(recorder_session(with), &t);
    struct session_totals tp;
    session_get_totals(recorder_session(without), &tp);
    g_assert_cmpuint(t.exact, ==, tp.exact);
    g_assert_cmpuint(t.ambiguous, ==, tp.ambiguous);
    g_assert_cmpuint(t.errors, ==, 0);
    g_assert_cmpuint(tp.live_contexts, ==, SHORT_CONTEXTS);
    recorder_close(with);
    recorder_close(without);

    sqlite3 *de = open_db(dir_end), *dp = open_db(dir_plain);
    g_assert_cmpint(query(de, "SELECT COUNT(*) FROM contexts"), ==,
                    SHORT_CONTEXTS);
    char *a = per_context(de), *b = per_context(dp);
    g_assert_cmpstr(a, ==, b);
    g_assert_cmpint(query(de, "SELECT SUM(count) FROM sample_timeline"), ==,
                    query(dp, "SELECT SUM(count) FROM sample_timeline"));
    g_assert_cmpint(query(de, "SELECT COUNT(*) FROM decode_errors"), ==, 0);
    g_free(a);
    g_free(b);
    sqlite3_close(de);
    sqlite3_close(dp);
    builder_free(&be);
    builder_free(&bp);
    g_free(dir_end);
    g_free(dir_plain);
    g_free(image);
}

/*
 * Malformed ends: an END of a context never seen, an END twice, a bind
 * after the END (its samples are orphans), an END while still bound (the
 * binding closes): each a counted error or handled, never a crash, and
 * every sample still counted once.
 */
static void test_malformed_ends(void)
{
    char *image = test_image_path();
    struct builder b;

    builder_init(&b, image);
    put_header(&b);
    put_end(&b, 0, 77);                 /* never seen */
    put_bind(&b, 0, 1, 1, 4);
    put_samples(&b, 0, RESIDENT_ADDR, 3);
    put_time(&b, 0, 10, 2000);
    put_end(&b, 0, 1);                  /* still bound: released */
    put_end(&b, 0, 1);                  /* twice */
    put_bind(&b, 0, 1, 1, 4);           /* bound after its end */
    put_samples(&b, 0, RESIDENT_ADDR, 5);
    put_time(&b, 0, 20, 3000);
    put_release(&b, 0, 30);
    put_stop(&b);
    struct recording rec = record(&b);

    g_assert_cmpint(query(rec.db, "SELECT count FROM decode_errors WHERE "
                          "kind = 'end-unknown'"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT count FROM decode_errors WHERE "
                          "kind = 'end-twice'"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT count FROM decode_errors WHERE "
                          "kind = 'bind-after-end'"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT COUNT(*) FROM contexts"), ==, 1);
    g_assert_cmpint(query(rec.db, "SELECT exact FROM context_totals"), ==, 3);
    g_assert_cmpint(query(rec.db, "SELECT SUM(count) FROM orphan_samples"),
                    ==, 5);
    g_assert_cmpint(query(rec.db, "SELECT end_reason = 'release' FROM "
                          "bindings WHERE context = 1"), ==, 1);
    g_assert_cmpuint(rec.totals.errors, ==, 3);
    g_assert_cmpuint(rec.totals.exact + rec.totals.orphan, ==, 8);
    recording_free(&rec);
    builder_free(&b);
    g_free(image);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    temp_root = g_dir_make_tmp("test-daemon-XXXXXX", NULL);
    g_assert_nonnull(temp_root);
    g_test_add_func("/daemon/tally/matches-reference",
                    test_tally_matches_reference);
    g_test_add_func("/daemon/counts/dirty-and-growth",
                    test_count_table_dirty_and_growth);
    g_test_add_func("/daemon/attribution/exact", test_exact_steady_guards);
    g_test_add_func("/daemon/attribution/window", test_ambiguity_window);
    g_test_add_func("/daemon/attribution/two-changes",
                    test_ambiguity_two_changes);
    g_test_add_func("/daemon/attribution/trailing-group", test_trailing_group);
    g_test_add_func("/daemon/attribution/placed-mid-group",
                    test_placed_mid_group);
    g_test_add_func("/daemon/attribution/placed-and-unplaced",
                    test_placed_and_unplaced);
    g_test_add_func("/daemon/attribution/placed-trailing",
                    test_placed_trailing);
    g_test_add_func("/daemon/attribution/pending-then-stop",
                    test_pending_then_stop);
    g_test_add_func("/daemon/attribution/orphans-and-unmapped",
                    test_orphans_and_unmapped);
    g_test_add_func("/daemon/attribution/lost-time-bindings",
                    test_lost_time_and_bindings);
    g_test_add_func("/daemon/attribution/context-moves", test_context_moves);
    g_test_add_func("/daemon/attribution/timeline", test_sample_timeline);
    g_test_add_func("/daemon/attribution/stall-reasons", test_stall_reasons);
    g_test_add_func("/daemon/images/cached", test_image_cached);
    g_test_add_func("/daemon/images/unreadable", test_image_unreadable);
    g_test_add_func("/daemon/images/not-elf", test_image_not_elf);
    g_test_add_func("/daemon/images/changed", test_image_changed);
    g_test_add_func("/daemon/images/path-late", test_image_path_late);
    g_test_add_func("/daemon/stream/garbage",
                    test_garbage_counted_and_skipped);
    g_test_add_func("/daemon/stream/split-invariance", test_split_invariance);
    g_test_add_func("/daemon/store/existing-and-locked",
                    test_store_refuses_existing_and_locked);
    g_test_add_func("/daemon/store/failed-flush",
                    test_failed_flush_keeps_data);
    g_test_add_func("/daemon/sched/message-fields", test_sched_message_fields);
    g_test_add_func("/daemon/sched/import-incremental",
                    test_sched_import_incremental);
    g_test_add_func("/daemon/ends/many-short-contexts",
                    test_many_short_contexts);
    g_test_add_func("/daemon/ends/malformed", test_malformed_ends);
    int status = g_test_run();
    remove_tree(temp_root);
    g_free(temp_root);
    return status;
}
