/*
 * test-eventlog-corrupt.c — GTest suite for bad log files: truncated and
 * padded files, each header and descriptor field made wrong, records and
 * format tables full of garbage, and thousands of random byte flips.  A bad
 * file must give one line naming the file and what is wrong, or read
 * without a crash; it must never bring the reader down.
 */
#include "eventlog/coplog.h"
#include "eventlog/file.h"
#include "eventlog/layout.h"
#include "eventlog/test-support.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define FLIP_ROUNDS 2000

static const struct coplog_subsys_config small_subsys[] = {
    { .name = "SCHED", .capacity = 32 },
    { .name = "APP", .capacity = 16, .args = 12, .policy = COPLOG_ONESHOT },
};

/* A small valid log with records of every kind, as bytes. */
static GBytes *sample_log(void)
{
    struct coplog_config config = { .subsys = small_subsys, .subsys_count = 2,
                                    .format_slots = 64, .format_bytes = 4096 };
    char *path = test_path("sample");
    char error[COPLOG_ERROR_MAX], *bytes;
    struct coplog *log = coplog_create(path, &config, error);
    gsize length;

    g_assert_nonnull(log);
    for (int i = 0; i < 40; i++) {
        COPLOG(log, 0, COPLOG_TERSE, "bind slot %d context %s at %.2f", i,
               i % 2 ? "odd" : "even", i * 0.5);
        COPLOG(log, 1, COPLOG_WARNING, "%d %u %x %p %s %c", -i, i, i,
               (void *)&config, "text", 'A' + i % 26);
    }
    coplog_close(log);
    g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
    remove(path);
    g_free(path);
    return g_bytes_new_take(bytes, length);
}

/* Writes bytes to a new file (without g_file_set_contents' fsync). */
static char *write_variant(const void *bytes, gsize length)
{
    char *path = test_path("variant");
    FILE *out = fopen(path, "wb");

    g_assert_nonnull(out);
    g_assert_cmpuint(fwrite(bytes, 1, length, out), ==, length);
    g_assert_cmpint(fclose(out), ==, 0);
    return path;
}

static void discard_variant(char *path)
{
    remove(path);
    g_free(path);
}

/* Opening must fail with one line naming the file and containing words. */
static void expect_refused(const char *path, const char *words)
{
    char error[COPLOG_ERROR_MAX] = "";

    g_assert_null(coplog_reader_open(path, error));
    if (strstr(error, words) == NULL)
        g_error("error '%s' lacks '%s'", error, words);
    g_assert_true(g_str_has_prefix(error, path));
    g_assert_null(strchr(error, '\n'));
    g_assert_null(coplog_open(path, error));
    g_assert_nonnull(strstr(error, words));
}

/* Reads everything a file gives, every way; returns the events. */
static unsigned read_everything(const char *path)
{
    char error[COPLOG_ERROR_MAX], text[4096];
    struct coplog_reader *reader = coplog_reader_open(path, error);
    struct coplog_file_info info;
    struct coplog_event event;
    unsigned events = 0;

    if (reader == NULL) {
        g_assert_true(g_str_has_prefix(error, path));
        g_assert_null(strchr(error, '\n'));
        return 0;
    }
    coplog_reader_set_stall(reader, 0);
    for (unsigned flags = COPLOG_READ_LIVE; flags <= COPLOG_READ_ALL; flags++) {
        while (coplog_reader_next(reader, &event, flags) > 0) {
            coplog_event_format(&event, text, sizeof text);
            events++;
        }
    }
    for (unsigned i = 0; i < coplog_reader_subsys_count(reader); i++) {
        struct coplog_subsys_stat stat;
        g_assert_cmpint(coplog_reader_stat(reader, i, &stat), ==, 0);
    }
    coplog_reader_info(reader, &info);
    coplog_reader_order_ns(reader, UINT64_MAX);
    coplog_reader_ns_order(reader, UINT64_MAX);
    coplog_reader_close(reader);
    return events;
}

static void test_sample_reads(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const void *bytes = g_bytes_get_data(sample, &length);
    char *path = write_variant(bytes, length);

    /* 32 per SCHED ring stay at most; APP is one-shot with 16 per ring. */
    g_assert_cmpuint(read_everything(path), >=, 32 + 16);
    discard_variant(path);
    g_bytes_unref(sample);
}

static void test_truncated(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    const gsize short_cuts[] = { 0, 1, 100, sizeof(struct layout_header) - 1 };
    const gsize long_cuts[] = { sizeof(struct layout_header), 4096, 8192,
                                length / 2, length - 1 };
    char *path;

    for (size_t i = 0; i < G_N_ELEMENTS(short_cuts); i++) {
        path = write_variant(bytes, short_cuts[i]);
        expect_refused(path, "truncated");
        expect_refused(path, "less than a coplog header");
        discard_variant(path);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(long_cuts); i++) {
        char words[128];

        path = write_variant(bytes, long_cuts[i]);
        snprintf(words, sizeof words, "truncated: the header says %zu bytes, "
                 "the file has %zu", length, long_cuts[i]);
        expect_refused(path, words);
        discard_variant(path);
    }
    g_bytes_unref(sample);
}

static void test_padded(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    char *padded = g_malloc0(length + 100);
    char *path;

    memcpy(padded, bytes, length);
    path = write_variant(padded, length + 100);
    expect_refused(path, "corrupt: the header says");
    discard_variant(path);
    g_free(padded);
    g_bytes_unref(sample);
}

/* One field of the header or a descriptor made wrong. */
struct damage {
    const char *words;
    size_t offset;      /* in the header, or past subsys_offset if in_subsys */
    bool in_subsys;
    unsigned size;      /* 1, 4 or 8 bytes */
    uint64_t value;
};

#define HEADER_FIELD(field, value, words) \
    { words, offsetof(struct layout_header, field), false, \
      sizeof(((struct layout_header *)0)->field), value }
#define SUBSYS_FIELD(field, value, words) \
    { words, offsetof(struct layout_subsys, field), true, \
      sizeof(((struct layout_subsys *)0)->field), value }

static const struct damage damages[] = {
    HEADER_FIELD(magic[0], 'X', "not a coplog file (bad magic)"),
    HEADER_FIELD(version, 2, "format version 2 is not supported"),
    HEADER_FIELD(header_bytes, 100, "header size 100"),
    HEADER_FIELD(subsys_count, 0, "0 subsystems"),
    HEADER_FIELD(subsys_count, 65, "65 subsystems"),
    HEADER_FIELD(clock_kind, 7, "clock kind 7"),
    HEADER_FIELD(clock_hz, 0, "clock rate 0 Hz"),
    HEADER_FIELD(cpu_rings, 3, "3 CPU rings"),
    HEADER_FIELD(subsys_offset, 1ull << 40, "subsystem table outside"),
    HEADER_FIELD(rings_offset, 1ull << 40, "ring table outside"),
    HEADER_FIELD(ring_count, 100000, "ring table outside"),
    HEADER_FIELD(format_slots, 3, "format table outside"),
    HEADER_FIELD(format_slots_offset, 1ull << 40, "format table outside"),
    HEADER_FIELD(format_heap_bytes, 1ull << 40, "format heap outside"),
    SUBSYS_FIELD(name[0], '\0', "bad name"),
    SUBSYS_FIELD(name[2], ' ', "bad name"),
    SUBSYS_FIELD(capacity, 3, "capacity 3"),
    SUBSYS_FIELD(capacity, 1u << 30, "capacity 1073741824"),
    SUBSYS_FIELD(record_bytes, 96, "record size 96"),
    SUBSYS_FIELD(policy, 5, "policy 5"),
    SUBSYS_FIELD(rings, 5, "5 rings"),
    SUBSYS_FIELD(first_ring, 1000, "rings from ring 1000"),
    SUBSYS_FIELD(strings_bytes, 12, "rings outside the file"),
    SUBSYS_FIELD(data_offset, 1ull << 40, "rings outside the file"),
    SUBSYS_FIELD(data_offset, 64, "rings outside the file"),
    SUBSYS_FIELD(ring_stride, 1ull << 30, "rings outside the file"),
};

static void test_damaged_fields(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    uint64_t subsys_offset =
        ((const struct layout_header *)bytes)->subsys_offset;

    for (size_t i = 0; i < G_N_ELEMENTS(damages); i++) {
        const struct damage *d = &damages[i];
        char *copy = g_memdup2(bytes, length), *path;
        size_t at = d->offset + (d->in_subsys ? subsys_offset : 0);

        memcpy(copy + at, &d->value, d->size);
        path = write_variant(copy, length);
        expect_refused(path, d->words);
        discard_variant(path);
        g_free(copy);
    }
    g_bytes_unref(sample);
}

/* Records that look committed but hold random words; a format table with
 * random entries pointing into a heap of random text full of '%'. */
static void test_garbage_contents(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    GRand *rand = g_rand_new_with_seed(7);

    for (int round = 0; round < 50; round++) {
        char *copy = g_memdup2(bytes, length), *path;
        struct log_file file = { .base = (uint8_t *)copy, .size = length,
                                 .header = (struct layout_header *)copy };
        uint64_t *slots = (uint64_t *)(copy + file.header->format_slots_offset);
        char *heap = copy + file.header->format_heap_offset;

        for (uint64_t i = 0; i < file.header->format_heap_bytes; i++)
            heap[i] = "%%%sdnpfxl*.-9 \0abc"[g_rand_int_range(rand, 0, 19)];
        for (uint32_t i = 0; i < file.header->format_slots; i++)
            slots[i] = g_rand_int_range(rand, 0, 4) ? 0 :
                       (uint64_t)g_rand_int(rand) << 32 |
                       (uint32_t)g_rand_int_range(rand, 0, 5000);
        for (unsigned s = 0; s < file.header->subsys_count; s++) {
            struct layout_subsys *subsys = log_file_subsys(&file, s);
            for (unsigned r = 0; r < subsys->rings; r++) {
                uint64_t *words = (uint64_t *)log_file_records(&file, subsys, r);
                uint64_t count = (uint64_t)subsys->capacity *
                                 subsys->record_bytes / 8;
                for (uint64_t w = 0; w < count; w++)
                    words[w] = (uint64_t)g_rand_int(rand) << 32 |
                               g_rand_int(rand);
                for (uint64_t p = 0; p < subsys->capacity; p++) {
                    uint64_t *record = words + p * subsys->record_bytes / 8;
                    record[RECORD_COMMIT] = record_commit_word(p, 0);
                    record[RECORD_ORIGIN] = record[RECORD_ORIGIN] % 70 << 48;
                }
                log_file_ring(&file, subsys, r)->head = subsys->capacity;
                log_file_ring(&file, subsys, r)->strings_head =
                    g_rand_int_range(rand, 0, 4096);
            }
        }
        path = write_variant(copy, length);
        g_assert_cmpuint(read_everything(path), >, 0);
        discard_variant(path);
        g_free(copy);
    }
    g_rand_free(rand);
    g_bytes_unref(sample);
}

/* Heads far beyond the capacity, or about to wrap. */
static void test_wild_heads(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    const uint64_t heads[] = { UINT64_MAX, UINT64_MAX - 5, 1ull << 63, 33 };

    for (size_t i = 0; i < G_N_ELEMENTS(heads); i++) {
        char *copy = g_memdup2(bytes, length), *path;
        struct log_file file = { .base = (uint8_t *)copy, .size = length,
                                 .header = (struct layout_header *)copy };

        for (unsigned s = 0; s < file.header->subsys_count; s++) {
            struct layout_subsys *subsys = log_file_subsys(&file, s);
            for (unsigned r = 0; r < subsys->rings; r++) {
                log_file_ring(&file, subsys, r)->head = heads[i];
                log_file_ring(&file, subsys, r)->strings_head = heads[i];
            }
        }
        path = write_variant(copy, length);
        read_everything(path);
        discard_variant(path);
        g_free(copy);
    }
    g_bytes_unref(sample);
}

/* Random flips in the header and descriptors: refused with a line, or read. */
static void test_random_flips(void)
{
    GBytes *sample = sample_log();
    gsize length;
    const char *bytes = g_bytes_get_data(sample, &length);
    const struct layout_header *header = (const struct layout_header *)bytes;
    gsize span = header->rings_offset + header->ring_count *
                 sizeof(struct layout_ring);
    GRand *rand = g_rand_new_with_seed(11);
    unsigned opened = 0;

    for (int round = 0; round < FLIP_ROUNDS; round++) {
        char *copy = g_memdup2(bytes, length), *path;
        int flips = g_rand_int_range(rand, 1, 5);

        for (int f = 0; f < flips; f++)
            copy[g_rand_int_range(rand, 0, (gint32)span)] ^=
                (char)(1 << g_rand_int_range(rand, 0, 8));
        path = write_variant(copy, length);
        char error[COPLOG_ERROR_MAX];
        struct coplog_reader *reader = coplog_reader_open(path, error);
        if (reader != NULL) {
            opened++;
            coplog_reader_close(reader);
        }
        read_everything(path);
        discard_variant(path);
        g_free(copy);
    }
    g_test_message("%u of %d damaged files opened", opened, FLIP_ROUNDS);
    g_assert_cmpuint(opened, >, 0);
    g_assert_cmpuint(opened, <, FLIP_ROUNDS);
    g_rand_free(rand);
    g_bytes_unref(sample);
}

int main(int argc, char **argv)
{
    test_support_init(&argc, &argv);
    g_test_add_func("/eventlog/corrupt/sample-reads", test_sample_reads);
    g_test_add_func("/eventlog/corrupt/truncated", test_truncated);
    g_test_add_func("/eventlog/corrupt/padded", test_padded);
    g_test_add_func("/eventlog/corrupt/damaged-fields", test_damaged_fields);
    g_test_add_func("/eventlog/corrupt/garbage-contents", test_garbage_contents);
    g_test_add_func("/eventlog/corrupt/wild-heads", test_wild_heads);
    g_test_add_func("/eventlog/corrupt/random-flips", test_random_flips);
    return g_test_run();
}
