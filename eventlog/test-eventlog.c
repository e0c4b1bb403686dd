/*
 * test-eventlog.c — GTest suite for the event log's writer and reader, one
 * thread at a time: records round-trip with every argument kind, formats
 * are deduplicated, levels and switches gate records (at run time and at
 * compile time), one-shot and cyclic rings count what they refuse and
 * overwrite, strings survive or are reported lost, timestamps convert to
 * CLOCK_MONOTONIC, and bad configurations and paths give one-line errors.
 * Messages are checked against snprintf with the same format and values.
 */
#include "eventlog/coplog.h"
#include "eventlog/message.h"
#include "eventlog/test-support.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

enum { SCHED, APP };

static uint64_t monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static const struct test_event *event_at(GArray *events, guint i)
{
    return &g_array_index(events, struct test_event, i);
}

/* ------------------------------------------------------------ messages */

/* The stored words are the values converted to 64 bits, as a writer
 * stores them; the message must be what printf makes of the values. */
#define CHECK_FORMAT(format, ...)                                           \
    do {                                                                    \
        char printf_text[256], message_text[256];                           \
        uint64_t words[] = { __VA_ARGS__ };                                 \
        snprintf(printf_text, sizeof printf_text, format, __VA_ARGS__);     \
        message_format(format, words, sizeof words / sizeof words[0], NULL,\
                       message_text, sizeof message_text);                  \
        g_assert_cmpstr(message_text, ==, printf_text);                     \
    } while (0)

static uint64_t bits_of(double value)
{
    uint64_t bits;

    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static void test_message_integers(void)
{
    char expected[256], got[256];
    uint64_t minus_one = (uint64_t)-1;

    CHECK_FORMAT("%d %i %u", 42, -7, 3000000000u);
    CHECK_FORMAT("%x %X %o %#x %08x", 0xbeefu, 0xbeefu, 8u, 255u, 0x12u);
    CHECK_FORMAT("[%5d] [%-5d] [%+d] [% d] [%05d]", 42, 42, 42, 42, -42);
    CHECK_FORMAT("%lld %llu %llx", -5000000000ll, 18000000000000000000ull,
                  0xfedcba9876543210ull);
    CHECK_FORMAT("%ld %lu %zu %jd", -3l, 3ul, (size_t)77, (intmax_t)-9);
    /* Stored words are sign-extended; hh and h truncate as printf does. */
    snprintf(expected, sizeof expected, "%hhd %hd %hhu %d", (signed char)-1,
             (short)-1, (unsigned char)255, -1);
    message_format("%hhd %hd %hhu %d",
                   (uint64_t[]){ minus_one, minus_one, 255, minus_one }, 4,
                   NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, expected);
}

static void test_message_floats_strings(void)
{
    char got[256];
    const char *texts[] = { NULL, "abc", NULL };

    message_format("%.3f %e %g", (uint64_t[]){ bits_of(3.14159), bits_of(1e-9),
                   bits_of(2.5) }, 3, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "3.142 1.000000e-09 2.5");
    message_format("%d [%-5s] %s", (uint64_t[]){ 1, 0, 0 }, 3, texts, got,
                   sizeof got);
    g_assert_cmpstr(got, ==, "1 [abc  ] (null)");
    message_format("%p", (uint64_t[]){ 0x1234 }, 1, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "0x1234");
}

static void test_message_special(void)
{
    char got[64];
    size_t length;

    /* Star width and precision are arguments of their own. */
    message_format("[%*d] [%.*f] [%-*s]",
                   (uint64_t[]){ 6, 42, 2, bits_of(1.005), (uint64_t)-4, 0 },
                   6, (const char *[]){ 0, 0, 0, 0, 0, "ab" }, got, sizeof got);
    g_assert_cmpstr(got, ==, "[    42] [1.00] [ab  ]");
    message_format("100%% %m %n!", (uint64_t[]){ 0 }, 1, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "100% %m !");
    /* Missing arguments, unknown and positional conversions. */
    message_format("%d and %d", (uint64_t[]){ 1 }, 1, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "1 and <?>");
    message_format("%d %y %d", (uint64_t[]){ 1, 2 }, 2, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "1 %y %d");
    message_format("%1$d", (uint64_t[]){ 1 }, 1, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "%1$d");
    message_format("50%", NULL, 0, NULL, got, sizeof got);
    g_assert_cmpstr(got, ==, "50%");
    /* Huge widths are capped; the length is counted like snprintf. */
    length = message_format("%999999999d", (uint64_t[]){ 1 }, 1, NULL, got,
                            sizeof got);
    g_assert_cmpuint(length, ==, 1024);
    g_assert_cmpuint(strlen(got), ==, sizeof got - 1);
}

static void test_message_kinds(void)
{
    unsigned wanted;
    uint64_t kinds = message_kinds("%d %lu %s %*.*f %Lg %p %c %hhx %%", 12,
                                   &wanted);
    static const enum message_arg_kind expected[] = {
        ARG_INT, ARG_LONG, ARG_STRING, ARG_INT, ARG_INT, ARG_DOUBLE,
        ARG_LONG_DOUBLE, ARG_POINTER, ARG_INT, ARG_UINT
    };
    char conversions[12];

    g_assert_cmpuint(wanted, ==, 10);
    g_assert_cmpuint(message_kinds_count(kinds), ==, 10);
    for (unsigned i = 0; i < 10; i++)
        g_assert_cmpint(message_kind_at(kinds, i), ==, expected[i]);
    g_assert_cmpuint(message_conversions("%d %*s %p", conversions, 12), ==, 4);
    g_assert_cmpmem(conversions, 4, "d*sp", 4);
    kinds = message_kinds("%d %d %d %d %d %d", 4, &wanted);
    g_assert_cmpuint(wanted, ==, 6);
    g_assert_cmpuint(message_kinds_count(kinds), ==, 4);
}

/* ------------------------------------------------------------ records */

static const struct coplog_subsys_config two_subsys[] = {
    { .name = "SCHED", .capacity = 64 },
    { .name = "APP", .capacity = 64, .args = 12 },
};

static void test_roundtrip(void)
{
    char *path = test_path("roundtrip");
    struct coplog *log = test_create(path, two_subsys, 2);
    const struct test_event *e;
    char expected[512];
    GArray *events;
    int local;

    COPLOG(log, SCHED, COPLOG_TERSE, "bind slot %u context %d", 3u, -7);
    COPLOG(log, APP, COPLOG_VERBOSE, "%s took %.3f ms at %p, %llu bytes, %c%hhd",
           "decode", 12.5, (void *)&local, 1ull << 40, 'Z', (signed char)-3);
    coplog_close(log);

    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 2);
    e = event_at(events, 0);
    g_assert_cmpstr(e->subsys, ==, "SCHED");
    g_assert_cmpuint(e->event.level, ==, COPLOG_TERSE);
    g_assert_cmpstr(e->message, ==, "bind slot 3 context -7");
    g_assert_cmpuint(e->event.pid, ==, (unsigned)getpid());
    g_assert_cmpuint(e->event.tid, ==, (unsigned)gettid());
    g_assert_cmpuint(e->event.cpu, <, (unsigned)get_nprocs_conf());
    g_assert_cmpuint(e->event.nargs, ==, 2);
    g_assert_cmpuint(e->event.format_nargs, ==, 2);
    g_assert_cmpuint(e->event.seq, ==, 0);
    /* The caller is an address inside this function. */
    g_assert_cmpuint(e->event.caller, >, (uintptr_t)test_roundtrip);
    g_assert_cmpuint(e->event.caller, <, (uintptr_t)test_roundtrip + 16384);

    e = event_at(events, 1);
    snprintf(expected, sizeof expected,
             "%s took %.3f ms at %p, %llu bytes, %c%hhd", "decode", 12.5,
             (void *)&local, 1ull << 40, 'Z', (signed char)-3);
    g_assert_cmpstr(e->message, ==, expected);
    g_assert_cmpstr(e->strings[0], ==, "decode");
    g_assert_cmpuint(e->event.nargs, ==, 6);
    g_assert_cmpint(coplog_event_compare(&event_at(events, 0)->event,
                                         &e->event), <, 0);
    g_array_unref(events);
    g_free(path);
}

static void test_formats_deduplicated(void)
{
    char *path = test_path("dedup");
    struct coplog *log = test_create(path, two_subsys, 2);
    struct coplog *again;
    char error[COPLOG_ERROR_MAX];
    GArray *events;

    for (int i = 0; i < 3; i++) {
        COPLOG(log, SCHED, COPLOG_TERSE, "same %d", i);
        COPLOG(log, APP, COPLOG_TERSE, "same %d", i);
        COPLOG(log, SCHED, COPLOG_TERSE, "other %d", i);
    }
    again = coplog_open(path, error);
    g_assert_nonnull(again);
    COPLOG(again, APP, COPLOG_TERSE, "same %d", 9);
    coplog_close(again);
    coplog_close(log);

    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 10);
    for (guint i = 0; i < events->len; i++) {
        const struct test_event *e = event_at(events, i);
        unsigned expected_id = event_at(events, strncmp(e->message, "same", 4) == 0
                                                    ? 0 : 2)->event.format_id;
        g_assert_cmpuint(e->event.format_id, ==, expected_id);
    }
    g_assert_cmpuint(event_at(events, 0)->event.format_id, !=,
                     event_at(events, 2)->event.format_id);
    g_assert_cmpstr(event_at(events, 9)->message, ==, "same 9");
    g_array_unref(events);
    g_free(path);
}

static int evaluated;

static int side_effect(int value)
{
    evaluated++;
    return value;
}

/* Records above the compiled level vanish, arguments and all. */
#undef COPLOG_COMPILED_LEVEL
#define COPLOG_COMPILED_LEVEL COPLOG_TERSE
static void write_compiled_out(struct coplog *log)
{
    COPLOG(log, SCHED, COPLOG_PROLOG, "compiled out %d", side_effect(1));
    COPLOG(log, SCHED, COPLOG_TERSE, "compiled in %d", side_effect(2));
}
#undef COPLOG_COMPILED_LEVEL
#define COPLOG_COMPILED_LEVEL COPLOG_LEVEL_MAX

static void test_levels(void)
{
    char *path = test_path("levels");
    struct coplog *log = test_create(path, two_subsys, 2);
    GArray *events;

    g_assert_true(coplog_wants(log, SCHED, COPLOG_VERBOSE));
    g_assert_false(coplog_wants(log, SCHED, COPLOG_PROLOG));
    g_assert_false(coplog_wants(log, 7, COPLOG_ERROR));
    g_assert_false(coplog_wants(log, SCHED, 0));
    g_assert_false(coplog_wants(NULL, SCHED, COPLOG_ERROR));
    COPLOG(NULL, SCHED, COPLOG_ERROR, "nowhere %d", side_effect(0));

    COPLOG(log, SCHED, COPLOG_PROLOG, "above threshold %d", side_effect(0));
    g_assert_cmpint(coplog_set_level(log, SCHED, COPLOG_PROLOG), ==, 0);
    COPLOG(log, SCHED, COPLOG_PROLOG, "prolog kept %d", 1);
    g_assert_cmpint(coplog_set_enabled(log, SCHED, false), ==, 0);
    COPLOG(log, SCHED, COPLOG_ERROR, "while off %d", side_effect(0));
    g_assert_cmpint(coplog_set_enabled(log, SCHED, true), ==, 0);
    g_assert_cmpint(coplog_set_level(log, SCHED, 9), ==, -1);
    g_assert_cmpint(coplog_set_level(log, 5, COPLOG_TERSE), ==, -1);
    g_assert_cmpint(evaluated, ==, 0);
    write_compiled_out(log);
    g_assert_cmpint(evaluated, ==, 1);
    coplog_close(log);

    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 2);
    g_assert_cmpstr(event_at(events, 0)->message, ==, "prolog kept 1");
    g_assert_cmpstr(event_at(events, 1)->message, ==, "compiled in 2");
    g_array_unref(events);
    g_free(path);
}

static void test_control_by_path(void)
{
    char *path = test_path("control");
    struct coplog *log = test_create(path, two_subsys, 2);
    char error[COPLOG_ERROR_MAX];
    struct coplog_reader *reader;
    struct coplog_subsys_stat stat;

    g_assert_cmpint(coplog_control(path, "SCHED", COPLOG_CHANGE_DISABLE, 0,
                                   error), ==, 0);
    g_assert_false(coplog_wants(log, SCHED, COPLOG_ERROR));
    g_assert_true(coplog_wants(log, APP, COPLOG_ERROR));
    g_assert_cmpint(coplog_control(path, "all", COPLOG_CHANGE_LEVEL,
                                   COPLOG_PROLOG, error), ==, 0);
    g_assert_cmpint(coplog_control(path, "all", COPLOG_CHANGE_ENABLE, 0,
                                   error), ==, 0);
    g_assert_true(coplog_wants(log, SCHED, COPLOG_PROLOG));
    g_assert_cmpint(coplog_control(path, "APP", COPLOG_CHANGE_ECHO_ON, 0,
                                   error), ==, 0);
    reader = test_reader(path);
    coplog_reader_stat(reader, APP, &stat);
    g_assert_true(stat.echo && stat.enabled);
    g_assert_cmpuint(stat.level, ==, COPLOG_PROLOG);
    coplog_reader_close(reader);
    g_assert_cmpint(coplog_control(path, "NOPE", COPLOG_CHANGE_ENABLE, 0,
                                   error), ==, -1);
    g_assert_nonnull(strstr(error, "no subsystem 'NOPE'"));
    g_assert_cmpint(coplog_control(path, "APP", COPLOG_CHANGE_LEVEL, 0,
                                   error), ==, -1);
    coplog_close(log);
    g_free(path);
}

static void test_oneshot(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "ONCE", .capacity = 8, .policy = COPLOG_ONESHOT,
          .shared_ring = true },
    };
    char *path = test_path("oneshot");
    struct coplog *log = test_create(path, config, 1);
    struct coplog_reader *reader;
    struct coplog_subsys_stat stat;
    unsigned accepted = 0;
    GArray *events;

    for (int i = 0; i < 20; i++) {
        static struct coplog_site site;
        accepted += coplog_write(log, &site, 0, COPLOG_TERSE, "n %d", i) != 0;
    }
    coplog_close(log);
    g_assert_cmpuint(accepted, ==, 8);

    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 8);
    for (guint i = 0; i < 8; i++) {
        char expected[16];
        snprintf(expected, sizeof expected, "n %u", i);
        g_assert_cmpstr(event_at(events, i)->message, ==, expected);
    }
    reader = test_reader(path);
    coplog_reader_stat(reader, 0, &stat);
    g_assert_cmpuint(stat.reserved, ==, 20);
    g_assert_cmpuint(stat.committed, ==, 8);
    g_assert_cmpuint(stat.refused, ==, 12);
    g_assert_cmpuint(stat.overwritten, ==, 0);
    coplog_reader_close(reader);
    g_array_unref(events);
    g_free(path);
}

static void test_cyclic(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "RING", .capacity = 8, .shared_ring = true },
    };
    char *path = test_path("cyclic");
    struct coplog *log = test_create(path, config, 1);
    struct coplog_reader *reader;
    struct coplog_subsys_stat stat;
    struct coplog_read_counts counts;
    GArray *events = g_array_new(FALSE, TRUE, sizeof(struct test_event));

    for (int i = 0; i < 20; i++)
        COPLOG(log, 0, COPLOG_TERSE, "n %d", i);
    coplog_close(log);

    reader = test_reader(path);
    test_read(reader, events, COPLOG_READ_ALL);
    g_assert_cmpuint(events->len, ==, 8);
    for (guint i = 0; i < 8; i++) {
        char expected[16];
        snprintf(expected, sizeof expected, "n %u", 12 + i);
        g_assert_cmpstr(event_at(events, i)->message, ==, expected);
        g_assert_cmpuint(event_at(events, i)->event.seq, ==, 12 + i);
    }
    coplog_reader_stat(reader, 0, &stat);
    g_assert_cmpuint(stat.reserved, ==, 20);
    g_assert_cmpuint(stat.committed, ==, 8);
    g_assert_cmpuint(stat.overwritten, ==, 12);
    g_assert_cmpuint(stat.refused, ==, 0);
    coplog_reader_counts(reader, &counts);
    g_assert_cmpuint(counts.delivered, ==, 8);
    g_assert_cmpuint(counts.missed, ==, 12);
    coplog_reader_close(reader);
    g_array_unref(events);
    g_free(path);
}

/* A log takes on disk what was written into it, up to its size: made
 * with rings of 16 MiB, it holds a few blocks; a thousand records add
 * about their bytes; it never holds more than its size. */
static gsize disk_bytes(const char *path)
{
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    return (gsize)st.st_blocks * 512;
}

static void test_grows_with_records(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "RING", .capacity = 1 << 17, .args = 12,
          .shared_ring = true },
    };
    char *path = test_path("grows");
    struct coplog *log = test_create(path, config, 1);
    gsize size = test_file_size(path), empty = disk_bytes(path), used;

    g_assert_cmpuint(size, >, 16u << 20);
    g_assert_cmpuint(empty, <, 1u << 20);
    for (int i = 0; i < 1000; i++)
        COPLOG(log, 0, COPLOG_TERSE, "n %d", i);
    coplog_close(log);
    used = disk_bytes(path);
    g_assert_cmpuint(used, >=, empty + 1000 * 128 - 4096);
    g_assert_cmpuint(used, <, empty + 1000 * 128 + (256u << 10));
    g_assert_cmpuint(test_read_all(path)->len, ==, 1000);
    g_free(path);
}

static void test_args(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "NARROW", .capacity = 16 },
        { .name = "WIDE", .capacity = 16, .args = 12 },
    };
    char *path = test_path("args");
    struct coplog *log = test_create(path, config, 2);
    GArray *events;

    COPLOG(log, 0, COPLOG_TERSE, "%d %d %d %d %d %d", 1, 2, 3, 4, 5, 6);
    COPLOG(log, 1, COPLOG_TERSE, "%d %d %d %d %d %d %d %d %d %d %.1f %s",
           1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11.5, "twelve");
    coplog_close(log);

    events = test_read_all(path);
    g_assert_cmpstr(event_at(events, 0)->message, ==, "1 2 3 4 <?> <?>");
    g_assert_cmpuint(event_at(events, 0)->event.nargs, ==, 4);
    g_assert_cmpuint(event_at(events, 0)->event.format_nargs, ==, 6);
    g_assert_cmpstr(event_at(events, 1)->message, ==,
                    "1 2 3 4 5 6 7 8 9 10 11.5 twelve");
    g_array_unref(events);
    g_free(path);
}

static void test_write_array(void)
{
    char *path = test_path("array");
    struct coplog *log = test_create(path, two_subsys, 2);
    union coplog_arg args[] = { { .i = -3 }, { .u = 7 }, { .d = 0.25 },
                                { .s = "text" } };
    GArray *events;

    g_assert_cmpuint(coplog_write_array(log, APP, COPLOG_TERSE,
                                        "%d %x %.2f %s", args, 4), !=, 0);
    g_assert_cmpuint(coplog_write_array(log, APP, COPLOG_TERSE, "%d %d", args,
                                        1), !=, 0);
    g_assert_cmpuint(coplog_write_array(log, APP, COPLOG_PROLOG, "no", NULL, 0),
                     ==, 0);
    coplog_close(log);
    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 2);
    g_assert_cmpstr(event_at(events, 0)->message, ==, "-3 7 0.25 text");
    g_assert_cmpstr(event_at(events, 1)->message, ==, "-3 <?>");
    g_array_unref(events);
    g_free(path);
}

/* ------------------------------------------------------------ strings */

static void test_strings(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "S", .capacity = 64, .string_bytes = 64, .shared_ring = true },
        { .name = "ONCE", .capacity = 64, .string_bytes = 16,
          .policy = COPLOG_ONESHOT, .shared_ring = true },
        { .name = "BIG", .capacity = 4, .string_bytes = 8192,
          .shared_ring = true },
    };
    char *path = test_path("strings");
    struct coplog *log = test_create(path, config, 3);
    const char *volatile no_text = NULL;   /* hidden from -Wformat */
    char long_text[2000];
    GArray *events;

    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    COPLOG(log, 0, COPLOG_TERSE, "first %s", "survivor?");
    for (int i = 0; i < 8; i++)
        COPLOG(log, 0, COPLOG_TERSE, "filler %s", "0123456789");
    COPLOG(log, 0, COPLOG_TERSE, "null %s", no_text);
    COPLOG(log, 1, COPLOG_TERSE, "fits %s", "12345678");
    COPLOG(log, 1, COPLOG_TERSE, "no room %s", "12345678");
    COPLOG(log, 2, COPLOG_TERSE, "long %s", long_text);
    coplog_close(log);

    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 13);
    /* Eight 16-byte fillers wrapped the 64-byte area over the first text. */
    g_assert_cmpstr(event_at(events, 0)->message, ==,
                    "first <string overwritten>");
    g_assert_cmpstr(event_at(events, 4)->message, ==,
                    "filler <string overwritten>");
    g_assert_cmpstr(event_at(events, 5)->message, ==, "filler 0123456789");
    g_assert_cmpstr(event_at(events, 8)->message, ==, "filler 0123456789");
    g_assert_cmpstr(event_at(events, 9)->message, ==, "null (null)");
    g_assert_cmpstr(event_at(events, 10)->message, ==, "fits 12345678");
    g_assert_cmpstr(event_at(events, 11)->message, ==, "no room <string lost>");
    g_assert_cmpuint(strlen(event_at(events, 12)->message), ==,
                     strlen("long ") + 1023);
    g_array_unref(events);
    g_free(path);
}

/* ------------------------------------------------------------ clocks */

static void check_clock(enum coplog_clock clock, uint64_t tolerance_ns)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "T", .capacity = 256 },
    };
    struct coplog_config log_config = { .subsys = config, .subsys_count = 1,
                                        .clock = clock };
    char *path = test_path("clock");
    char error[COPLOG_ERROR_MAX];
    struct coplog *log = coplog_create(path, &log_config, error);
    struct coplog_reader *reader;
    struct coplog_file_info info;
    uint64_t before[100], after[100];
    GArray *events;

    g_assert_nonnull(log);
    for (int i = 0; i < 100; i++) {
        before[i] = monotonic_ns();
        COPLOG(log, 0, COPLOG_TERSE, "tick %d", i);
        after[i] = monotonic_ns();
        g_usleep(i % 10 == 0 ? 2000 : 50);
    }
    coplog_close(log);
    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 100);
    for (guint i = 0; i < 100; i++) {
        uint64_t ns = event_at(events, i)->event.time_ns;
        g_assert_cmpuint(ns + tolerance_ns, >=, before[i]);
        g_assert_cmpuint(ns, <=, after[i] + tolerance_ns);
    }
    reader = test_reader(path);
    coplog_reader_info(reader, &info);
    g_assert_cmpint(info.clock, ==, clock);
    if (clock == COPLOG_CLOCK_TSC) {
        uint64_t order = event_at(events, 50)->event.order;
        uint64_t back = coplog_reader_ns_order(reader,
                            coplog_reader_order_ns(reader, order));
        g_assert_cmpuint(info.calibrations, >=, 2);
        g_assert_cmpfloat(fabs((double)back - (double)order), <,
                          info.clock_hz * 1e-8);
    }
    coplog_reader_close(reader);
    g_array_unref(events);
    g_free(path);
}

/* A writer adds a calibration pair once a second has passed. */
static void test_clock_calibration_schedule(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "T", .capacity = 16 },
    };
    struct coplog_config log_config = { .subsys = config, .subsys_count = 1,
                                        .clock = COPLOG_CLOCK_TSC };
    char *path = test_path("schedule");
    char error[COPLOG_ERROR_MAX];
    struct coplog *log = coplog_create(path, &log_config, error);
    struct coplog_reader *reader;
    struct coplog_file_info info;
    uint64_t before, after;
    GArray *events;

    g_assert_nonnull(log);
    COPLOG(log, 0, COPLOG_TERSE, "first");
    g_usleep(1100 * 1000);
    before = monotonic_ns();
    COPLOG(log, 0, COPLOG_TERSE, "after a second");
    after = monotonic_ns();
    coplog_close(log);
    reader = test_reader(path);
    coplog_reader_info(reader, &info);
    g_assert_cmpuint(info.calibrations, ==, 3);
    coplog_reader_close(reader);
    events = test_read_all(path);
    g_assert_cmpuint(event_at(events, 1)->event.time_ns + 10000, >=, before);
    g_assert_cmpuint(event_at(events, 1)->event.time_ns, <=, after + 10000);
    g_array_unref(events);
    g_free(path);
}

static void test_clock_monotonic(void)
{
    check_clock(COPLOG_CLOCK_MONOTONIC, 0);
}

static void test_clock_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* Calibration pairs bracket clock_gettime within about 100 ns; the
     * rate from two pairs 2 ms apart is good to some 50 ppm, a microsecond
     * over this test.  A loaded machine gets ten. */
    check_clock(COPLOG_CLOCK_TSC, 10000);
#else
    g_test_skip("no TSC on this architecture");
#endif
}

/* ------------------------------------------------------------ reading */

static void test_seek_and_select(void)
{
    char *path = test_path("seek");
    struct coplog *log = test_create(path, two_subsys, 2);
    struct coplog_reader *reader;
    struct coplog_read_counts counts;
    uint64_t orders[10];
    GArray *events = g_array_new(FALSE, TRUE, sizeof(struct test_event));

    for (int i = 0; i < 10; i++) {
        static struct coplog_site site;
        orders[i] = coplog_write(log, &site, (unsigned)(i % 2), COPLOG_TERSE,
                                 "n %d", i);
    }
    coplog_close(log);

    reader = test_reader(path);
    coplog_reader_seek(reader, orders[4]);
    test_read(reader, events, COPLOG_READ_ALL);
    g_assert_cmpuint(events->len, ==, 6);
    g_assert_cmpstr(event_at(events, 0)->message, ==, "n 4");
    g_assert_cmpuint(event_at(events, 0)->event.order, ==, orders[4]);
    coplog_reader_counts(reader, &counts);
    g_assert_cmpuint(counts.filtered, ==, 4);
    g_assert_cmpuint(coplog_reader_position(reader), >, orders[9]);

    g_array_set_size(events, 0);
    g_assert_cmpint(coplog_reader_select(reader, "APP"), ==, 0);
    g_assert_cmpint(coplog_reader_select(reader, "NOPE"), ==, -1);
    g_assert_nonnull(strstr(coplog_reader_error(reader), "no subsystem 'NOPE'"));
    coplog_reader_seek(reader, 0);
    test_read(reader, events, COPLOG_READ_ALL);
    g_assert_cmpuint(events->len, ==, 5);
    for (guint i = 0; i < events->len; i++)
        g_assert_cmpstr(event_at(events, i)->subsys, ==, "APP");
    coplog_reader_close(reader);
    g_array_unref(events);
    g_free(path);
}

static void test_live_follow(void)
{
    char *path = test_path("follow");
    struct coplog *log = test_create(path, two_subsys, 2);
    struct coplog_reader *reader = test_reader(path);
    GArray *events = g_array_new(FALSE, TRUE, sizeof(struct test_event));
    uint64_t position;

    for (int i = 0; i < 5; i++)
        COPLOG(log, SCHED, COPLOG_TERSE, "early %d", i);
    g_usleep(1000);    /* past the reader's skew margin */
    test_read(reader, events, COPLOG_READ_LIVE);
    g_assert_cmpuint(events->len, ==, 5);
    position = coplog_reader_position(reader);
    for (int i = 0; i < 5; i++)
        COPLOG(log, APP, COPLOG_TERSE, "late %d", i);
    g_usleep(1000);
    test_read(reader, events, COPLOG_READ_LIVE);
    g_assert_cmpuint(events->len, ==, 10);
    g_assert_cmpstr(event_at(events, 9)->message, ==, "late 4");
    g_assert_cmpuint(coplog_reader_position(reader), >, position);
    for (guint i = 1; i < events->len; i++)
        g_assert_cmpint(coplog_event_compare(&event_at(events, i - 1)->event,
                                             &event_at(events, i)->event), <, 0);
    coplog_reader_close(reader);
    coplog_close(log);
    g_array_unref(events);
    g_free(path);
}

static void test_echo(void)
{
    if (g_test_subprocess()) {
        static const struct coplog_subsys_config config[] = {
            { .name = "LOUD", .capacity = 8, .echo = true },
        };
        char *path = test_path("echo");
        struct coplog *log = test_create(path, config, 1);

        COPLOG(log, 0, COPLOG_WARNING, "disk %s at %d%%", "sda", 93);
        coplog_set_echo(log, 0, false);
        COPLOG(log, 0, COPLOG_WARNING, "quiet %d", 1);
        coplog_close(log);
        g_free(path);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("coplog LOUD warning */*: disk sda at 93%\n");
    g_test_trap_assert_stderr_unmatched("*quiet*");
}

/* ------------------------------------------------------------ errors */

static void expect_config_error(const struct coplog_subsys_config *subsys,
                                unsigned count, uint32_t format_slots,
                                const char *words)
{
    struct coplog_config config = { .subsys = subsys, .subsys_count = count,
                                    .format_slots = format_slots };
    char *path = test_path("bad");
    char error[COPLOG_ERROR_MAX] = "";

    g_assert_null(coplog_create(path, &config, error));
    if (strstr(error, words) == NULL)
        g_error("error '%s' lacks '%s'", error, words);
    g_assert_null(strchr(error, '\n'));
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    g_free(path);
}

static void test_config_errors(void)
{
    struct coplog_subsys_config c[2] = { { .name = "A" }, { .name = "B" } };

    expect_config_error(c, 0, 0, "1 to 64 subsystems");
    c[0].capacity = 1000;
    expect_config_error(c, 1, 0, "capacity 1000 is not a power of two");
    c[0].capacity = 0;
    c[0].name = "MUCH_TOO_LONG_NAME";
    expect_config_error(c, 1, 0, "is not 1 to 15 of");
    c[0].name = "bad name";
    expect_config_error(c, 1, 0, "'bad name' is not");
    c[0].name = "B";
    expect_config_error(c, 2, 0, "'B' appears twice");
    c[0].name = "A";
    c[0].args = 13;
    expect_config_error(c, 1, 0, "13 arguments per record");
    c[0].args = 0;
    c[0].level = 9;
    expect_config_error(c, 1, 0, "level 9");
    c[0].level = 0;
    expect_config_error(c, 1, 3, "3 format slots");
    c[0].name = NULL;
    expect_config_error(c, 1, 0, "subsystem 0 has no name");
}

static void test_open_errors(void)
{
    char error[COPLOG_ERROR_MAX] = "";
    char *missing = test_path("missing");
    char *folder = test_path("folder");

    g_assert_null(coplog_reader_open(missing, error));
    g_assert_nonnull(strstr(error, "cannot open: No such file"));
    g_assert_true(g_str_has_prefix(error, missing));
    g_assert_null(coplog_open(missing, error));
    g_assert_cmpint(mkdir(folder, 0700), ==, 0);
    g_assert_null(coplog_reader_open(folder, error));
    g_assert_nonnull(strstr(error, "not a regular file"));
    g_free(missing);
    g_free(folder);
}

int main(int argc, char **argv)
{
    test_support_init(&argc, &argv);
    g_test_add_func("/eventlog/message/integers", test_message_integers);
    g_test_add_func("/eventlog/message/floats-strings",
                    test_message_floats_strings);
    g_test_add_func("/eventlog/message/special", test_message_special);
    g_test_add_func("/eventlog/message/kinds", test_message_kinds);
    g_test_add_func("/eventlog/roundtrip", test_roundtrip);
    g_test_add_func("/eventlog/formats-deduplicated", test_formats_deduplicated);
    g_test_add_func("/eventlog/levels", test_levels);
    g_test_add_func("/eventlog/control-by-path", test_control_by_path);
    g_test_add_func("/eventlog/oneshot", test_oneshot);
    g_test_add_func("/eventlog/cyclic", test_cyclic);
    g_test_add_func("/eventlog/grows-with-records", test_grows_with_records);
    g_test_add_func("/eventlog/args", test_args);
    g_test_add_func("/eventlog/write-array", test_write_array);
    g_test_add_func("/eventlog/strings", test_strings);
    g_test_add_func("/eventlog/clock/monotonic", test_clock_monotonic);
    g_test_add_func("/eventlog/clock/tsc", test_clock_tsc);
#if defined(__x86_64__) || defined(__i386__)
    g_test_add_func("/eventlog/clock/calibration-schedule",
                    test_clock_calibration_schedule);
#endif
    g_test_add_func("/eventlog/seek-and-select", test_seek_and_select);
    g_test_add_func("/eventlog/live-follow", test_live_follow);
    g_test_add_func("/eventlog/echo", test_echo);
    g_test_add_func("/eventlog/config-errors", test_config_errors);
    g_test_add_func("/eventlog/open-errors", test_open_errors);
    return g_test_run();
}
