/*
 * test-trace-unit.c — GTest suite for the trace unit's register file
 * library (trace-regs.h, trace-unit.c), without an emulator: layout,
 * validation of corrupt files, the FIFO under a concurrent producer and
 * consumer, the LFSR seqlock, binding rules and the hold handshake, with a
 * thread standing in for the plugin.
 */
#include "trace-unit/trace-unit.h"
#include "trace-unit/tests/stall-wait.h"
#include "lfsr/lfsr.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <linux/futex.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct fixture {
    char *dir;
    char *path;
    struct trace_unit *unit;
};

static void setup_with(struct fixture *f, uint32_t slots, uint32_t depth)
{
    struct trace_geometry geo;
    char err[512] = "";

    f->dir = g_dir_make_tmp("test-trace-unit-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->path = g_build_filename(f->dir, "regs", NULL);
    trace_geometry_default(&geo);
    geo.n_slots = slots;
    geo.fifo_depth = depth;
    f->unit = trace_unit_create(f->path, &geo, err, sizeof(err));
    if (!f->unit)
        g_test_message("create: %s", err);
    g_assert_nonnull(f->unit);
}

static void setup(struct fixture *f, gconstpointer data)
{
    setup_with(f, 2, 64);
}

static void teardown(struct fixture *f, gconstpointer data)
{
    trace_unit_close(f->unit, 1);
    g_rmdir(f->dir);
    g_free(f->path);
    g_free(f->dir);
}

/* ---- Layout and validation ---------------------------------------------- */

static void test_default_layout(void)
{
    struct fixture f;
    struct trace_geometry geo;
    const struct trace_regs_header *h;
    char err[512];

    f.dir = g_dir_make_tmp("test-trace-unit-XXXXXX", NULL);
    f.path = g_build_filename(f.dir, "regs", NULL);
    trace_geometry_default(&geo);
    f.unit = trace_unit_create(f.path, &geo, err, sizeof(err));
    g_assert_nonnull(f.unit);
    h = f.unit->header;
    g_assert_cmpmem(h->magic, 8, "COPTRACE", 8);
    g_assert_cmpuint(h->version, ==, 5);
    g_assert_cmpuint(h->n_slots, ==, 8);
    g_assert_cmpuint(h->fifo_depth, ==, 4096);
    /* 256-byte slot head, 8192 FIFO bytes, 16384 bytes of cause words,
     * 1024 events of 16 bytes. */
    g_assert_cmpuint(trace_regs_slot_causes_offset(4096), ==, 256 + 8192);
    g_assert_cmpuint(trace_regs_slot_events_offset(4096), ==,
                     256 + 8192 + 16384);
    g_assert_cmpuint(h->slot_stride, ==, 256 + 8192 + 16384 + 16384);
    g_assert_cmpuint(h->slots_offset, ==, 128);
    g_assert_cmpuint(h->contexts_offset, ==, 128 + 8 * 41216);
    g_assert_cmpuint(h->mailbox_offset, ==, 128 + 8 * 41216 + 64 * 128);
    g_assert_cmpuint(h->mailbox_stride, ==, 1024);
    g_assert_cmpuint(h->file_size, ==, 128 + 8 * 41216 + 64 * 128
                     + 8 * 1024);
    /* Each on a line of its own. */
    g_assert_cmpuint(trace_regs_slot_causes_offset(2), ==, 320);
    g_assert_cmpuint(trace_regs_slot_events_offset(2), ==, 384);
    g_assert_cmpuint(h->doorbell, ==, 0);
    g_assert_cmphex(h->ls_base, ==, 0x80000000);
    g_assert_cmphex(h->ls_size, ==, 0x40000);
    for (uint32_t i = 0; i < 8; i++) {
        const struct trace_regs_slot *slot = trace_unit_slot(f.unit, i);

        g_assert_cmphex(slot->bound_context, ==, TRACE_NONE);
        g_assert_cmpuint(slot->fifo_policy, ==, TRACE_FIFO_DROP);
        g_assert_cmpuint(slot->watermark, ==, 2048);
        g_assert_cmpuint(slot->dither, ==, 0);
    }
    for (uint32_t i = 0; i < 64; i++) {
        g_assert_cmphex(trace_unit_context(f.unit, i)->slot, ==, TRACE_NONE);
        g_assert_cmpuint(trace_unit_context(f.unit, i)->gate, ==, 0);
    }
    g_assert_null(trace_unit_slot(f.unit, 8));
    g_assert_null(trace_unit_context(f.unit, 64));
    g_assert_null(trace_unit_mailbox(f.unit, 8));
    g_assert_true((char *)trace_unit_mailbox(f.unit, 7) + 1024
                  == (char *)f.unit->base + h->file_size);
    g_assert_null(trace_unit_create(f.path, &geo, err, sizeof(err)));
    g_assert_nonnull(strstr(err, "File exists"));
    teardown(&f, NULL);
}

/*
 * The call-stack area: after the mailboxes, named by the header, a record
 * per FIFO entry written with its capture and drained with it; a capture
 * dropped for a full FIFO leaves the record of the entry it would have
 * taken (the consumer's) alone.
 */
static void test_call_stack_area(void)
{
    struct fixture f;
    struct trace_geometry geo;
    const struct trace_regs_header *h;
    struct trace_regs_slot *slot;
    uint32_t *area, frames[4] = { TRACE_STACK_FRAME(0x8, 0),
                                  TRACE_STACK_FRAME(0xC, 2),
                                  TRACE_STACK_FRAME(0x10, 0),
                                  TRACE_STACK_FRAME(0x14, 0) };
    struct trace_unit *again;
    char err[512], *text = NULL;
    size_t size = 0;
    uint64_t drained = 0;
    FILE *out;

    f.dir = g_dir_make_tmp("test-trace-unit-XXXXXX", NULL);
    f.path = g_build_filename(f.dir, "regs", NULL);
    trace_geometry_default(&geo);
    geo.n_slots = 2;
    geo.fifo_depth = 4;
    geo.stack_depth = 3;
    f.unit = trace_unit_create(f.path, &geo, err, sizeof(err));
    g_assert_nonnull(f.unit);
    h = f.unit->header;
    g_assert_cmpuint(h->stack_depth, ==, 3);
    g_assert_cmpuint(h->stack_offset, ==, h->mailbox_offset + 2 * 1024);
    g_assert_cmpuint(h->file_size, ==, h->stack_offset + 2 * 4 * 4 * 4);
    again = trace_unit_open(f.path, err, sizeof(err));
    g_assert_nonnull(again);
    trace_unit_close(again, 0);

    slot = trace_unit_slot(f.unit, 1);
    area = trace_stack_area(f.unit->base, h, 1);
    g_assert_true((uint8_t *)area == f.unit->base + h->stack_offset + 64);
    g_assert_cmpint(trace_slot_capture_stack(f.unit, slot, area, 0x1, 0,
                                             frames), ==, 1);
    g_assert_cmpint(trace_slot_capture_stack(f.unit, slot, area, 0x2, 2,
                                             frames), ==, 1);
    g_assert_cmpint(trace_slot_capture_stack(f.unit, slot, area, 0x3, 4,
                                             frames), ==, 1);
    g_assert_cmpint(trace_slot_capture_stack(f.unit, slot, area, 0x4, 1,
                                             frames + 3), ==, 1);
    /* Full: dropped, and entry 0's record (the consumer's) untouched. */
    g_assert_cmpint(trace_slot_capture_stack(f.unit, slot, area, 0x5, 3,
                                             frames + 1), ==, 0);
    g_assert_cmpuint(area[0], ==, 0);
    out = open_memstream(&text, &size);
    g_assert_cmpint(trace_slot_drain_to(f.unit, 1, out, NULL, &drained, err,
                                        sizeof(err)), ==, 0);
    fclose(out);
    g_assert_cmpstr(text, ==, "0x00004\n"
                              "0x00008 0x00020 0x00030@2\n"
                              "0x0000c 0x00020 0x00030@2 0x00040 ...\n"
                              "0x00010 0x00050\n");
    free(text);

    geo.stack_depth = TRACE_MAX_STACK_DEPTH + 1;
    g_assert_null(trace_unit_create("/nonexistent/x", &geo, err,
                                    sizeof(err)));
    g_assert_nonnull(strstr(err, "call-stack depth 65 is above 64"));
    teardown(&f, NULL);
}

static void expect_open_error(struct fixture *f,
                              void (*damage)(uint8_t *bytes, gsize *size),
                              const char *reason);

static void damage_stack_depth(uint8_t *b, gsize *size) { b[84] = 4; }

/* A header whose call-stack area does not match its file is refused. */
static void test_call_stack_area_damaged(void)
{
    struct fixture f;
    struct trace_geometry geo;
    char err[512];

    f.dir = g_dir_make_tmp("test-trace-unit-XXXXXX", NULL);
    f.path = g_build_filename(f.dir, "regs", NULL);
    trace_geometry_default(&geo);
    geo.n_slots = 2;
    geo.fifo_depth = 4;
    geo.stack_depth = 3;
    f.unit = trace_unit_create(f.path, &geo, err, sizeof(err));
    g_assert_nonnull(f.unit);
    expect_open_error(&f, damage_stack_depth, "the geometry needs");
    teardown(&f, NULL);
}

static void test_bad_geometry(void)
{
    struct trace_geometry geo;
    char err[512];

    trace_geometry_default(&geo);
    geo.fifo_depth = 1000;
    g_assert_null(trace_unit_create("/nonexistent/x", &geo, err, sizeof(err)));
    g_assert_nonnull(strstr(err, "FIFO depth 1000 is not a power of two"));
    trace_geometry_default(&geo);
    geo.n_slots = 65;
    g_assert_null(trace_unit_create("/nonexistent/x", &geo, err, sizeof(err)));
    g_assert_nonnull(strstr(err, "slot count 65"));
    trace_geometry_default(&geo);
    geo.ls_size = 0x80000;
    g_assert_null(trace_unit_create("/nonexistent/x", &geo, err, sizeof(err)));
    g_assert_nonnull(strstr(err, "local store"));
}

/* Opens a copy of the fixture's file after `damage` changed it. */
static void expect_open_error(struct fixture *f,
                              void (*damage)(uint8_t *bytes, gsize *size),
                              const char *reason)
{
    char *copy = g_build_filename(f->dir, "damaged", NULL);
    gchar *bytes;
    gsize size;
    char err[512] = "";

    g_assert_true(g_file_get_contents(f->path, &bytes, &size, NULL));
    damage((uint8_t *)bytes, &size);
    g_assert_true(g_file_set_contents(copy, bytes, (gssize)size, NULL));
    g_assert_null(trace_unit_open(copy, err, sizeof(err)));
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, copy));
    g_assert_nonnull(strstr(err, reason));
    g_assert_null(strchr(err, '\n'));
    g_unlink(copy);
    g_free(bytes);
    g_free(copy);
}

static void damage_magic(uint8_t *b, gsize *size) { b[0] = 'X'; }
static void damage_version(uint8_t *b, gsize *size) { b[8] = 2; }
static void damage_reserved(uint8_t *b, gsize *size) { b[100] = 1; }
static void damage_depth(uint8_t *b, gsize *size) { b[33] ^= 0x01; }
static void damage_stride(uint8_t *b, gsize *size) { b[36] += 64; }
static void damage_truncate(uint8_t *b, gsize *size) { *size -= 128; }
static void damage_tiny(uint8_t *b, gsize *size) { *size = 20; }

static void test_corrupt_files(struct fixture *f, gconstpointer data)
{
    struct trace_unit *again;
    char err[512];

    expect_open_error(f, damage_magic, "bad magic");
    expect_open_error(f, damage_version,
                      "version 2, this build reads version 5");
    expect_open_error(f, damage_reserved, "reserved header byte 100");
    expect_open_error(f, damage_depth, "not a power of two");
    expect_open_error(f, damage_stride, "inconsistent layout");
    expect_open_error(f, damage_truncate, "header says");
    expect_open_error(f, damage_tiny, "shorter than the header");
    g_assert_null(trace_unit_open("/nonexistent/regs", err, sizeof(err)));
    g_assert_nonnull(strstr(err, "/nonexistent/regs: cannot open"));
    again = trace_unit_open(f->path, err, sizeof(err));
    g_assert_nonnull(again);
    trace_unit_close(again, 0);
}

/* A file padded past file_size (as ivshmem needs) still opens. */
static void test_padded_file(struct fixture *f, gconstpointer data)
{
    uint64_t size = f->unit->header->file_size;
    struct trace_unit *again;
    char err[512] = "";

    g_assert_cmpint(truncate(f->path, (off_t)(size * 2)), ==, 0);
    again = trace_unit_open(f->path, err, sizeof(err));
    g_test_message("%s", err);
    g_assert_nonnull(again);
    g_assert_cmpuint(again->header->file_size, ==, size);
    trace_unit_close(again, 0);
}

/* ---- FIFO --------------------------------------------------------------- */

static void test_overflow_counted(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 1);
    uint16_t out[200];
    uint32_t queued = 0;

    for (uint32_t i = 0; i < 164; i++)
        queued += (uint32_t)trace_slot_push(slot, 64, (uint16_t)i);
    trace_slot_count_outside(slot);
    g_assert_cmpuint(queued, ==, 64);
    g_assert_cmpuint(slot->capture_count, ==, 165);
    g_assert_cmpuint(slot->overflow_count, ==, 100);
    g_assert_cmpuint(slot->outside_count, ==, 1);
    g_assert_cmpint(trace_slot_drain(slot, 64, out, 200), ==, 64);
    for (uint32_t i = 0; i < 64; i++)
        g_assert_cmpuint(out[i], ==, i);       /* the oldest are kept */
    g_assert_cmpint(trace_slot_drain(slot, 64, out, 200), ==, 0);
    g_assert_cmpint(trace_slot_push(slot, 64, 7), ==, 1);
    slot->fifo_head += 100;                    /* corrupt: beyond depth */
    g_assert_cmpint(trace_slot_drain(slot, 64, out, 200), ==, -1);
}

/* Every entry carries its cause word; the drain bounds what it copies:
 * a reason outside the enum, a reserved bit or a transfer on another
 * reason than DMA_WAIT reads as ISSUE. */
static void test_cause_words(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 1);
    uint32_t depth = f->unit->header->fifo_depth;
    uint32_t dma = trace_cause_transfer(31, 0xABCD), causes[8];
    const uint32_t sent[8] = {
        TRACE_STALL_ISSUE, TRACE_STALL_DEPENDENCY, TRACE_STALL_BRANCH, dma,
        TRACE_STALL_MAILBOX_WAIT, TRACE_STALL_MEMORY,
        TRACE_STALL_REASONS,                            /* out of range */
        TRACE_STALL_BRANCH | TRACE_CAUSE_TRANSFER,      /* not a DMA wait */
    };
    const uint32_t got[8] = { 0, 1, 2, dma, 4, 5, 0, 0 };
    uint16_t out[8];

    for (uint32_t i = 0; i < 8; i++)
        g_assert_cmpint(trace_slot_capture_entry(f->unit, slot, NULL,
                                                 (uint16_t)i, sent[i], 0,
                                                 NULL), ==, 1);
    g_assert_cmpint(trace_slot_drain_entries(slot, depth, out, causes, NULL,
                                             0, NULL, 8), ==, 8);
    for (uint32_t i = 0; i < 8; i++) {
        g_assert_cmpuint(out[i], ==, i);
        g_assert_cmphex(causes[i], ==, got[i]);
    }
    g_assert_cmpuint(trace_cause_reason(dma), ==, TRACE_STALL_DMA_WAIT);
    g_assert_true(trace_cause_has_transfer(dma));
    g_assert_cmpuint(trace_cause_tag(dma), ==, 31);
    g_assert_cmphex(trace_cause_issuer_field(dma), ==, 0xABCD);
    g_assert_cmphex(trace_cause_checked(dma | 0x20), ==, TRACE_STALL_ISSUE);
    /* The plain capture queues ISSUE whatever the word held before. */
    trace_slot_causes(slot, depth)[8] = TRACE_STALL_BRANCH;
    g_assert_cmpint(trace_slot_capture(f->unit, slot, 9), ==, 1);
    g_assert_cmpint(trace_slot_drain_entries(slot, depth, out, causes, NULL,
                                             0, NULL, 8), ==, 1);
    g_assert_cmphex(causes[0], ==, TRACE_STALL_ISSUE);
}

/* ---- FIFO-full policy, doorbell, dither --------------------------------- */

/* Drop: every capture is queued or counted, the oldest entries kept. */
static void test_drop_conserves(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    uint32_t queued = 0;
    uint16_t out[64];

    trace_slot_set_policy(slot, TRACE_FIFO_DROP, 0);
    for (uint32_t i = 0; i < 100; i++)
        queued += (uint32_t)trace_slot_capture(f->unit, slot, (uint16_t)i);
    g_assert_cmpuint(queued, ==, 64);
    g_assert_cmpuint(slot->capture_count, ==, 100);
    g_assert_cmpuint(slot->capture_count, ==,
                     slot->overflow_count + trace_slot_queued(slot));
    g_assert_cmpint(trace_slot_drain(slot, 64, out, 64), ==, 64);
    for (uint32_t i = 0; i < 64; i++)
        g_assert_cmpuint(out[i], ==, i);
    g_assert_cmpuint(slot->stall_count, ==, 0);
}

struct stall_producer {
    const struct trace_unit *unit;
    struct trace_regs_slot *slot;
    uint32_t count;
    uint32_t queued;
};

static gpointer produce_captures(gpointer data)
{
    struct stall_producer *p = data;

    for (uint32_t i = 0; i < p->count; i++)
        p->queued += (uint32_t)trace_slot_capture(p->unit, p->slot,
                                                  (uint16_t)i);
    return NULL;
}

/*
 * Stall: a producer pushing 1000 captures into a 4-entry FIFO waits for a
 * consumer that drains only when the doorbell rings (and first waits for
 * a stall); nothing is lost, the sequence is the one pushed, and the
 * producer counted its stalls and their time.
 */
static void test_stall_loses_nothing(void)
{
    struct fixture f;
    struct trace_regs_slot *slot;
    struct stall_producer p;
    uint32_t *doorbell;
    GArray *got = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    uint16_t out[4];
    int32_t n;
    GThread *thread;

    setup_with(&f, 1, 4);
    slot = trace_unit_slot(f.unit, 0);
    doorbell = &f.unit->header->doorbell;
    trace_unit_set_controller(f.unit, getpid());
    trace_slot_set_policy(slot, TRACE_FIFO_STALL, 2);
    p = (struct stall_producer){ f.unit, slot, 1000, 0 };
    thread = g_thread_new("producer", produce_captures, &p);
    wait_until_stalled(f.unit, slot);
    while (got->len < 1000) {
        uint32_t seen = __atomic_load_n(doorbell, __ATOMIC_ACQUIRE);

        while ((n = trace_slot_drain(slot, 4, out, 4)) > 0) {
            trace_slot_wake_producer(slot);
            g_array_append_vals(got, out, (guint)n);
        }
        g_assert_cmpint(n, ==, 0);
        if (got->len < 1000 && trace_slot_queued(slot) == 0)
            trace_doorbell_wait(doorbell, seen, 1000000000ull);
    }
    g_thread_join(thread);
    g_assert_cmpuint(p.queued, ==, 1000);
    for (guint i = 0; i < got->len; i++)
        g_assert_cmpuint(g_array_index(got, uint16_t, i), ==, i);
    g_assert_cmpuint(slot->capture_count, ==, 1000);
    g_assert_cmpuint(slot->overflow_count, ==, 0);
    g_assert_cmpuint(slot->stall_count, >=, 1);
    g_assert_cmpuint(slot->stall_ns, >, 0);
    g_assert_cmpuint(slot->stalled, ==, 0);
    g_array_free(got, TRUE);
    teardown(&f, NULL);
}

/* A stalled producer whose controller is gone, or whose policy turns to
 * drop, stops waiting: the capture is dropped and counted, no hang. */
static void test_stall_abandoned(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    struct stall_producer p = { f->unit, slot, 1, 0 };
    GThread *thread;
    pid_t gone = fork();

    if (gone == 0)
        _exit(0);
    g_assert_cmpint(waitpid(gone, NULL, 0), ==, gone);
    trace_slot_set_policy(slot, TRACE_FIFO_STALL, 0);
    for (uint32_t i = 0; i < 64; i++)
        g_assert_cmpint(trace_slot_capture(f->unit, slot, 1), ==, 1);
    trace_unit_set_controller(f->unit, gone);
    g_assert_cmpint(trace_slot_capture(f->unit, slot, 2), ==, 0);
    g_assert_cmpuint(slot->overflow_count, ==, 1);
    g_assert_cmpuint(slot->stall_count, ==, 1);
    g_assert_cmpuint(slot->capture_count, ==, 65);

    trace_unit_set_controller(f->unit, getpid());
    thread = g_thread_new("producer", produce_captures, &p);
    wait_until_stalled(f->unit, slot);
    trace_slot_set_policy(slot, TRACE_FIFO_DROP, 0);
    g_thread_join(thread);
    g_assert_cmpuint(p.queued, ==, 0);
    g_assert_cmpuint(slot->overflow_count, ==, 2);
    g_assert_cmpuint(slot->stall_count, ==, 2);
    g_assert_cmpuint(slot->capture_count, ==, 66);
}

/* The doorbell rings once when the queue reaches the watermark. */
static void test_doorbell_watermark(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 1);
    uint32_t *doorbell = &f->unit->header->doorbell;
    uint16_t out[64];

    g_assert_cmpuint(slot->watermark, ==, 32);      /* half, by default */
    trace_slot_set_policy(slot, TRACE_FIFO_DROP, 4);
    for (uint32_t i = 0; i < 3; i++)
        trace_slot_capture(f->unit, slot, 0);
    g_assert_cmpuint(*doorbell, ==, 0);
    g_assert_cmpint(trace_doorbell_wait(doorbell, 0, 1000), ==, 0);
    trace_slot_capture(f->unit, slot, 0);
    g_assert_cmpuint(*doorbell, ==, 1);
    g_assert_cmpint(trace_doorbell_wait(doorbell, 0, 1000), ==, 1);
    for (uint32_t i = 0; i < 10; i++)
        trace_slot_capture(f->unit, slot, 0);
    g_assert_cmpuint(*doorbell, ==, 1);
    trace_slot_drain(slot, 64, out, 64);
    for (uint32_t i = 0; i < 4; i++)
        trace_slot_capture(f->unit, slot, 0);
    g_assert_cmpuint(*doorbell, ==, 2);             /* past it again */
    trace_slot_set_policy(slot, TRACE_FIFO_DROP, 0);
    trace_slot_drain(slot, 64, out, 64);
    for (uint32_t i = 0; i < 10; i++)
        trace_slot_capture(f->unit, slot, 0);
    g_assert_cmpuint(*doorbell, ==, 2);             /* 0: never */
}

/* ---- Handshakes (the waits inside a slot's switch) ---------------------- */

#define HANDSHAKE_FOREVER_NS    60000000000ull      /* 60 s: never reached */
#define HANDSHAKE_WOKEN_NS      10000000000ull      /* 10 s: a lost wake */
#define HANDSHAKE_ROUNDS        20000

struct handshake_waiter {
    uint32_t word;
    uint32_t sleepers;
    uint32_t started, done;
    uint64_t spin_ns, timeout_ns;
    enum trace_handshake how;
};

static gpointer handshake_wait_thread(gpointer data)
{
    struct handshake_waiter *w = data;

    __atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
    w->how = trace_handshake_wait(&w->word, 0, &w->sleepers, w->spin_ns,
                                  w->timeout_ns);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The word changes while the waiter spins: it returns without a futex
 * sleep (never counted a sleeper), and the waker makes no FUTEX_WAKE. */
static void test_handshake_spun(void)
{
    struct handshake_waiter w = { .spin_ns = HANDSHAKE_FOREVER_NS,
                                  .timeout_ns = HANDSHAKE_FOREVER_NS };
    GThread *thread = g_thread_new("waiter", handshake_wait_thread, &w);

    while (!__atomic_load_n(&w.started, __ATOMIC_SEQ_CST))
        g_thread_yield();
    __atomic_store_n(&w.word, 1, __ATOMIC_SEQ_CST);
    g_assert_cmpint(trace_handshake_wake(&w.word, &w.sleepers,
                                         FUTEX_BITSET_MATCH_ANY), ==, 0);
    g_thread_join(thread);
    g_assert_cmpint(w.how, ==, TRACE_HANDSHAKE_SPUN);
    g_assert_cmpuint(w.sleepers, ==, 0);
}

/* The word changes after the spin: the waiter counted itself as a
 * sleeper, so the waker wakes it (it returns WOKEN, not at its timeout),
 * and the count is back to 0 after. */
static void test_handshake_woken(void)
{
    struct handshake_waiter w = { .spin_ns = 1000,
                                  .timeout_ns = HANDSHAKE_WOKEN_NS };
    GThread *thread = g_thread_new("waiter", handshake_wait_thread, &w);

    while (__atomic_load_n(&w.sleepers, __ATOMIC_SEQ_CST) == 0
           && !__atomic_load_n(&w.done, __ATOMIC_SEQ_CST))
        g_thread_yield();
    __atomic_store_n(&w.word, 1, __ATOMIC_SEQ_CST);
    g_assert_cmpint(trace_handshake_wake(&w.word, &w.sleepers,
                                         FUTEX_BITSET_MATCH_ANY), ==, 1);
    g_thread_join(thread);
    g_assert_cmpint(w.how, ==, TRACE_HANDSHAKE_WOKEN);
    g_assert_cmpuint(w.sleepers, ==, 0);
    g_assert_cmpint(trace_handshake_wait(&w.word, 1, &w.sleepers, 0, 1000),
                    ==, TRACE_HANDSHAKE_EXPIRED);
}

/* Two threads ring each other's counter HANDSHAKE_ROUNDS times, mostly
 * without spinning, so that the waker's skip and the waiter's count meet
 * in every order: a lost wake-up would leave one asleep until its
 * timeout (EXPIRED). */
struct handshake_pair {
    uint32_t bell[2];
    uint32_t sleepers[2];
    uint32_t expired[2];
};

static void handshake_play(struct handshake_pair *p, int me)
{
    for (uint32_t round = 0; round < HANDSHAKE_ROUNDS; round++) {
        uint32_t seen = round;

        if (me == 1)
            trace_handshake_ring(&p->bell[0], &p->sleepers[0]);
        while (__atomic_load_n(&p->bell[me], __ATOMIC_SEQ_CST) == seen)
            if (trace_handshake_wait(&p->bell[me], seen, &p->sleepers[me],
                                     round % 4 ? 0 : 2000,
                                     HANDSHAKE_WOKEN_NS)
                    == TRACE_HANDSHAKE_EXPIRED)
                p->expired[me]++;
        if (me == 0)
            trace_handshake_ring(&p->bell[1], &p->sleepers[1]);
    }
}

static gpointer handshake_play_thread(gpointer data)
{
    handshake_play(data, 1);
    return NULL;
}

static void test_handshake_no_lost_wakeup(void)
{
    struct handshake_pair p = { { 0, 0 }, { 0, 0 }, { 0, 0 } };
    GThread *thread = g_thread_new("other", handshake_play_thread, &p);

    handshake_play(&p, 0);
    g_thread_join(thread);
    g_assert_cmpuint(p.expired[0], ==, 0);
    g_assert_cmpuint(p.expired[1], ==, 0);
    g_assert_cmpuint(p.bell[0], ==, HANDSHAKE_ROUNDS);
    g_assert_cmpuint(p.bell[1], ==, HANDSHAKE_ROUNDS);
    g_assert_cmpuint(p.sleepers[0] + p.sleepers[1], ==, 0);
}

/* The jitter: width a power of two at most N/2 that keeps N + W - 1 in
 * the LFSR's period; every interval within N-W+1 .. N+W-1; the mean over
 * many draws within 5 standard errors of N (it is exactly N in law). */
static void test_dither_bounds_and_mean(void)
{
    static const uint32_t counts[] = { 1, 3, 4, 5, 625, 997, 1001, 100000,
                                       LFSR_PERIOD - 3, LFSR_PERIOD };
    const uint32_t draws = 1u << 16;

    g_assert_cmpuint(trace_dither_width(1), ==, 1);
    g_assert_cmpuint(trace_dither_width(4), ==, 2);
    g_assert_cmpuint(trace_dither_width(997), ==, 256);
    g_assert_cmpuint(trace_dither_width(1024), ==, 512);
    g_assert_cmpuint(trace_dither_width(LFSR_PERIOD), ==, 1);
    for (guint c = 0; c < G_N_ELEMENTS(counts); c++) {
        uint32_t n = counts[c], w = trace_dither_width(n);
        double sum = 0, sd = w / sqrt(6.0);
        uint32_t low = UINT32_MAX, high = 0;

        g_assert_cmpuint(w & (w - 1), ==, 0);
        g_assert_cmpuint(w, <=, n / 2 > 1 ? n / 2 : 1);
        g_assert_cmpuint((uint64_t)n + w - 1, <=, LFSR_PERIOD);
        for (uint32_t k = 0; k < draws; k++) {
            uint32_t interval = trace_dither_interval(n, 42, k);

            low = MIN(low, interval);
            high = MAX(high, interval);
            sum += (double)interval - n;
        }
        g_assert_cmpuint(low, >=, n - w + 1);
        g_assert_cmpuint(high, <=, n + w - 1);
        if (w > 2) {                    /* it spreads over the range */
            g_assert_cmpuint(low, <=, n - w / 2);
            g_assert_cmpuint(high, >=, n + w / 2);
        }
        g_assert_cmpfloat(fabs(sum / draws), <=, 5 * sd / sqrt(draws));
    }
    /* Reproducible from the seed alone, different for another seed. */
    {
        int differ = 0;

        for (uint32_t k = 0; k < 16; k++) {
            g_assert_cmpuint(trace_dither_interval(997, 7, k), ==,
                             trace_dither_interval(997, 7, k));
            differ |= trace_dither_interval(997, 7, k)
                      != trace_dither_interval(997, 8, k);
        }
        g_assert_true(differ);
    }
}

/*
 * Why: a 7-instruction loop sampled every N = 1001 = 7 * 143 cycles.
 * Undithered every capture falls on the same instruction of the loop;
 * dithered, each of the 7 gets its share within 4 standard deviations.
 */
static void test_dither_dealiases(void)
{
    const uint32_t n = 1001, loop = 7, captures = 70000;
    uint64_t at = 0, fixed = 0;
    uint32_t dithered[7] = { 0 }, undithered[7] = { 0 };
    double expect = captures / 7.0, sd = sqrt(expect * 6.0 / 7.0);

    for (uint32_t k = 0; k < captures; k++) {
        at += trace_dither_interval(n, 99, k);
        fixed += n;
        dithered[at % loop]++;
        undithered[fixed % loop]++;
    }
    g_assert_cmpuint(undithered[0], ==, captures);
    for (uint32_t i = 0; i < loop; i++)
        g_assert_cmpfloat(fabs(dithered[i] - expect), <=, 4 * sd);
}

/*
 * Each slot of a session draws from its own generator: slot 0's is the
 * session's seed itself (cop-run --dither SEED), and no two of the 64
 * slots share their first 64 intervals or their capture positions.
 */
static void test_dither_slot_seeds(void)
{
    const uint32_t n = 1001, draws = 64;
    uint64_t seeds[TRACE_MAX_SLOTS];

    g_assert_cmpuint(trace_dither_slot_seed(20261125, 0), ==, 20261125);
    g_assert_cmpuint(trace_dither_mix(0), ==, 0);
    for (uint32_t s = 0; s < TRACE_MAX_SLOTS; s++) {
        seeds[s] = trace_dither_slot_seed(20261125, s);
        for (uint32_t t = 0; t < s; t++) {
            uint32_t same = 0;

            g_assert_cmpuint(seeds[s], !=, seeds[t]);
            for (uint32_t k = 0; k < draws; k++)
                same += trace_dither_interval(n, seeds[s], k)
                        == trace_dither_interval(n, seeds[t], k);
            /* two independent triangular draws on 1023 values agree
             * with probability about 1/512: a few of 64 at most */
            g_assert_cmpuint(same, <=, 4);
        }
    }
    /* another session's slots are other generators again */
    g_assert_cmpuint(trace_dither_slot_seed(7, 3), !=,
                     trace_dither_slot_seed(20261125, 3));
}

/* ---- Overlay events ---------------------------------------------------- */

/* Events carry the FIFO position of the capture they come before, and
 * survive the FIFO's own drains; a full ring counts what it drops. */
static void test_events(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 1);
    struct trace_ovl_event out[TRACE_EVENT_DEPTH + 8];
    uint16_t fields[8];

    g_assert_cmpint(trace_slot_drain_events(slot, 64, out, 8), ==, 0);
    trace_slot_push(slot, 64, 10);
    trace_slot_push(slot, 64, 11);
    g_assert_cmpint(trace_slot_push_event(slot, 64, 1, 5), ==, 1);
    g_assert_cmpint(trace_slot_push_event(slot, 64, 0, 3), ==, 1);
    trace_slot_push(slot, 64, 12);
    g_assert_cmpint(trace_slot_drain(slot, 64, fields, 8), ==, 3);
    g_assert_cmpint(trace_slot_drain_events(slot, 64, out, 1), ==, 1);
    g_assert_cmpuint(out[0].fifo_pos, ==, 2);
    g_assert_cmpuint(out[0].region, ==, 1);
    g_assert_cmpuint(out[0].guard, ==, 5);
    g_assert_cmpuint(out[0].reserved, ==, 0);
    g_assert_cmpint(trace_slot_drain_events(slot, 64, out, 8), ==, 1);
    g_assert_cmpuint(out[0].fifo_pos, ==, 2);
    g_assert_cmpuint(out[0].region, ==, 0);
    g_assert_cmpuint(out[0].guard, ==, 3);

    /* Fill the ring; the rest is counted, the oldest are kept. */
    for (uint32_t i = 0; i < TRACE_EVENT_DEPTH + 5; i++)
        trace_slot_push_event(slot, 64, 0, 100 + i);
    g_assert_cmpuint(slot->event_overflow, ==, 5);
    g_assert_cmpint(trace_slot_drain_events(slot, 64, out,
                                            TRACE_EVENT_DEPTH + 8),
                    ==, TRACE_EVENT_DEPTH);
    for (uint32_t i = 0; i < TRACE_EVENT_DEPTH; i++) {
        g_assert_cmpuint(out[i].guard, ==, 100 + i);
        g_assert_cmpuint(out[i].fifo_pos, ==, 3);
    }
    /* The ring lies after the FIFO: FIFO entries leave it untouched. */
    for (uint32_t i = 0; i < 64; i++)
        trace_slot_push(slot, 64, 0xFFFF);
    g_assert_cmpint(trace_slot_push_event(slot, 64, 2, 9), ==, 1);
    g_assert_cmpint(trace_slot_drain_events(slot, 64, out, 8), ==, 1);
    g_assert_cmpuint(out[0].guard, ==, 9);
    g_assert_cmpuint(out[0].fifo_pos, ==, 67);
    slot->event_head += TRACE_EVENT_DEPTH + 1;   /* corrupt */
    g_assert_cmpint(trace_slot_drain_events(slot, 64, out, 8), ==, -1);
}

/*
 * The driver's race: it drained the FIFO up to position 1; then the
 * emulator pushed capture 1, saw a change and pushed an event at 2.  The
 * event follows a capture the drain did not take, so a drain of the events
 * up to the FIFO drain's end leaves it for the next one.
 */
static void test_events_upto(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 1);
    struct trace_ovl_event out[8];
    uint16_t fields[8];
    uint32_t end;

    trace_slot_push_event(slot, 64, 0, 4);          /* before capture 0 */
    trace_slot_push(slot, 64, 10);
    g_assert_cmpint(trace_slot_drain(slot, 64, fields, 8), ==, 1);
    end = slot->fifo_tail;                          /* drained up to 1 */
    trace_slot_push_event(slot, 64, 0, 5);          /* before capture 1 */
    trace_slot_push(slot, 64, 11);
    trace_slot_push_event(slot, 64, 0, 6);          /* before capture 2 */
    g_assert_cmpint(trace_slot_drain_events_upto(slot, 64, out, 8, &end),
                    ==, 2);
    g_assert_cmpuint(out[0].fifo_pos, ==, 0);
    g_assert_cmpuint(out[1].fifo_pos, ==, 1);       /* at the end: kept */
    g_assert_cmpuint(out[1].guard, ==, 5);
    g_assert_cmpint(trace_slot_drain(slot, 64, fields, 8), ==, 1);
    end = slot->fifo_tail;
    g_assert_cmpint(trace_slot_drain_events_upto(slot, 64, out, 8, &end),
                    ==, 1);
    g_assert_cmpuint(out[0].fifo_pos, ==, 2);
    g_assert_cmpuint(out[0].guard, ==, 6);
}

/* The events drained to a file, positions counted from a base. */
static void test_events_to_file(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    char *text = NULL, err[512];
    size_t size = 0;
    uint64_t drained = 0;
    FILE *out;

    slot->fifo_head = 1000;
    slot->fifo_tail = 1000;
    trace_slot_push_event(slot, 64, 1, 4);
    trace_slot_push(slot, 64, 1);
    trace_slot_push_event(slot, 64, 0, 2);
    out = open_memstream(&text, &size);
    g_assert_cmpint(trace_slot_drain_events_to(f->unit, 0, 990, out,
                                               &drained, err, sizeof(err)),
                    ==, 0);
    fclose(out);
    g_assert_cmpstr(text, ==, "10 1 4\n11 0 2\n");
    g_assert_cmpuint(drained, ==, 2);
    slot->event_tail -= TRACE_EVENT_DEPTH + 1;
    g_assert_cmpint(trace_slot_drain_events_to(f->unit, 0, 0, NULL,
                                               &drained, err, sizeof(err)),
                    ==, -1);
    g_assert_nonnull(strstr(err, "slot 0 event ring is corrupt"));
    free(text);
}

/* The controller's watch: validated, refused while running, read back. */
static void test_watch_guards(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 3);
    uint32_t offset = 1, count = 1;
    char err[512];

    g_assert_cmpint(trace_context_guards(f->unit, 3, &offset, &count, err,
                                         sizeof(err)), ==, 0);
    g_assert_cmpuint(count, ==, 0);
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x2050, 2, err,
                                               sizeof(err)), ==, 0);
    g_assert_cmphex(ctx->guard_ls_offset, ==, 0x2050);
    g_assert_cmpuint(ctx->guard_count, ==, 2);
    g_assert_cmpint(trace_context_guards(f->unit, 3, &offset, &count, err,
                                         sizeof(err)), ==, 0);
    g_assert_cmphex(offset, ==, 0x2050);
    g_assert_cmpuint(count, ==, 2);

    /* The last word of the local store is allowed, one more is not. */
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x40000 - 256,
                                               TRACE_MAX_GUARDS, err,
                                               sizeof(err)), ==, 0);
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x40000 - 252,
                                               TRACE_MAX_GUARDS, err,
                                               sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "inside the 0x40000-byte local store"));
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x40000, 1, err,
                                               sizeof(err)), ==, -1);
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0xFFFFFFFCu, 2,
                                               err, sizeof(err)), ==, -1);
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x2052, 1, err,
                                               sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "not aligned"));
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0,
                                               TRACE_MAX_GUARDS + 1, err,
                                               sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "more than 64"));
    g_assert_cmpint(trace_context_watch_guards(f->unit, 64, 0, 1, err,
                                               sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "out of range"));
    g_assert_cmpint(trace_context_guards(f->unit, 64, &offset, &count, err,
                                         sizeof(err)), ==, -1);

    /* Off: the offset reads 0 too. */
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x100, 0, err,
                                               sizeof(err)), ==, 0);
    g_assert_cmpuint(ctx->guard_count, ==, 0);
    g_assert_cmphex(ctx->guard_ls_offset, ==, 0);

    /* A context whose emulator runs keeps its watch. */
    ctx->pid = getpid();
    ctx->status = TRACE_CONTEXT_RUNNING;
    ctx->gate = 1;
    g_assert_cmpint(trace_context_watch_guards(f->unit, 3, 0x2050, 2, err,
                                               sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "context 3 is running"));

    /* A file whose watch lies outside the local store is refused to the
     * emulator that reads it. */
    ctx->guard_ls_offset = 0x3FFFC;
    ctx->guard_count = 2;
    g_assert_cmpint(trace_context_guards(f->unit, 3, &offset, &count, err,
                                         sizeof(err)), ==, -1);
}

struct producer {
    struct trace_regs_slot *slot;
    uint32_t depth;
    uint32_t count;
    guint8 *dropped;            /* one flag per pushed value */
};

static gpointer produce(gpointer data)
{
    struct producer *p = data;

    for (uint32_t i = 0; i < p->count; i++) {
        p->dropped[i] = !trace_slot_push(p->slot, p->depth, (uint16_t)i);
        if ((i & 0x1F) == 0)
            g_thread_yield();
    }
    return NULL;
}

static void test_concurrent_fifo(struct fixture *f, gconstpointer data)
{
    struct producer p = { trace_unit_slot(f->unit, 0), 64, 300000, NULL };
    uint16_t batch[64];
    uint32_t next = 0, drained = 0, dropped = 0;
    GThread *thread;
    int32_t n;

    p.dropped = g_malloc0(p.count);
    thread = g_thread_new("producer", produce, &p);
    for (;;) {
        int producer_done = __atomic_load_n(&p.slot->capture_count,
                                            __ATOMIC_ACQUIRE) == p.count;

        n = trace_slot_drain(p.slot, p.depth, batch, G_N_ELEMENTS(batch));
        g_assert_cmpint(n, >=, 0);
        for (int32_t i = 0; i < n; i++) {
            /* The next value is the next one the producer did not drop. */
            while (next < p.count && __atomic_load_n(&p.dropped[next],
                                                     __ATOMIC_RELAXED))
                next++;
            g_assert_cmpuint(batch[i], ==, (uint16_t)next);
            next++;
            drained++;
        }
        if (producer_done && n == 0)
            break;
    }
    g_thread_join(thread);
    for (uint32_t i = 0; i < p.count; i++)
        dropped += p.dropped[i];
    g_test_message("drained %u, dropped %u", drained, dropped);
    g_assert_cmpuint(drained + dropped, ==, p.count);
    g_assert_cmpuint(p.slot->overflow_count, ==, dropped);
    g_free(p.dropped);
}

/* ---- LFSR registers ----------------------------------------------------- */

static uint32_t state_for_cycle(uint64_t cycle)
{
    return (uint32_t)(cycle * 2654435761u) & LFSR_MASK;
}

static gpointer write_lfsr(gpointer data)
{
    struct trace_regs_slot *slot = data;

    for (uint64_t c = 1; c <= 3000000; c += 3) {
        trace_slot_write_lfsr(slot, c, state_for_cycle(c));
        __atomic_store_n(&slot->cycles, c + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->cycles, c + 2, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_lfsr_seqlock(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    struct trace_lfsr_snapshot snap;
    GThread *thread = g_thread_new("writer", write_lfsr, slot);
    guint reads = 0;

    do {
        trace_slot_read_lfsr(slot, &snap);
        g_assert_cmphex(snap.reload_state, ==,
                        state_for_cycle(snap.reload_cycle));
        g_assert_cmpuint(snap.cycles, >=, snap.reload_cycle);
        g_assert_cmpuint(snap.cycles, <=, snap.reload_cycle + 2);
        reads++;
    } while (snap.reload_cycle < 2999998);
    g_thread_join(thread);
    g_test_message("%u consistent snapshots", reads);
}

static void test_lfsr_state(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    struct trace_slot_status status;
    uint32_t value = lfsr_value_for_count(100);

    slot->cycles = 1000;
    trace_slot_load(slot, value);
    g_assert_cmpuint(slot->reload_cycle, ==, 1000);
    slot->cycles = 1040;
    trace_slot_program(slot, 0x1FFFFFF);        /* only 24 bits kept */
    trace_slot_status(f->unit, 0, &status);
    g_assert_cmphex(status.lfsr_state, ==, lfsr_advance(value, 40));
    g_assert_cmpuint(lfsr_count_for_value(status.lfsr_state), ==, 60);
    g_assert_cmphex(status.programmed_value, ==, 0xFFFFFF);
    g_assert_cmpuint(status.cycles, ==, 1040);
    trace_slot_load(slot, 0);
    trace_slot_status(f->unit, 0, &status);
    g_assert_cmphex(status.lfsr_state, ==, 0);
}

/* ---- Binding and the run gate ------------------------------------------- */

struct emulator {
    struct fixture *f;
    uint32_t context;
    uint32_t stop;              /* set by the test to end the thread */
    uint32_t gate_changes;
    uint32_t last_slot;
    uint32_t died;
};

/* Stands in for the plugin: runs "blocks" on its slot while the gate is
 * open, re-reading the binding after every hold, as trace-plugin.c does. */
static gpointer emulate(gpointer data)
{
    struct emulator *e = data;
    char err[256];
    struct trace_regs_context *ctx = trace_context_attach(e->f->unit,
                                                          e->context,
                                                          TRACE_MODE_FAST,
                                                          err, sizeof(err));
    uint32_t gate = TRACE_NONE;

    g_assert_nonnull(ctx);
    while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
        if (gate == TRACE_NONE
            || __atomic_load_n(&ctx->gate, __ATOMIC_RELAXED) != gate) {
            gate = trace_context_wait_open(e->f->unit, ctx);
            if (gate == TRACE_NONE) {
                __atomic_store_n(&e->died, 1, __ATOMIC_RELEASE);
                return NULL;
            }
            e->gate_changes++;
            __atomic_store_n(&e->last_slot, ctx->slot, __ATOMIC_RELEASE);
        }
        struct trace_regs_slot *slot = trace_unit_slot(e->f->unit, ctx->slot);
        __atomic_store_n(&slot->cycles, slot->cycles + 5, __ATOMIC_RELAXED);
        g_usleep(50);
    }
    trace_context_exit(ctx, 1234);
    return NULL;
}

static void test_hold_and_move(struct fixture *f, gconstpointer data)
{
    struct emulator e = { .f = f, .context = 3 };
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 3);
    struct trace_regs_slot *slot0 = trace_unit_slot(f->unit, 0);
    struct trace_regs_slot *slot1 = trace_unit_slot(f->unit, 1);
    char err[512];
    GThread *thread;
    uint32_t gate;
    uint64_t frozen;

    g_assert_cmpint(trace_unit_bind(f->unit, 3, 0, err, sizeof(err)), ==, 0);
    thread = g_thread_new("emulator", emulate, &e);
    /* A fresh context waits at its closed gate. */
    while (__atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
           == TRACE_CONTEXT_IDLE)
        g_usleep(100);
    g_assert_cmpint(trace_context_wait_held(ctx, 0, 5000), ==, TRACE_WAIT_HELD);
    g_assert_cmpuint(ctx->status, ==, TRACE_CONTEXT_HELD);
    g_assert_cmpuint(slot0->cycles, ==, 0);
    trace_context_release(ctx);
    while (__atomic_load_n(&slot0->cycles, __ATOMIC_ACQUIRE) < 100)
        g_usleep(100);
    g_assert_cmpint(trace_unit_bind(f->unit, 3, 1, err, sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "context 3 is running; hold it first"));

    gate = trace_context_hold(ctx);
    g_assert_false(trace_gate_is_open(gate));
    g_assert_cmpint(trace_context_wait_held(ctx, gate, 5000), ==,
                    TRACE_WAIT_HELD);
    g_assert_cmpuint(ctx->ack, ==, gate);
    g_assert_cmpuint(ctx->status, ==, TRACE_CONTEXT_HELD);
    frozen = slot0->cycles;
    g_usleep(20000);
    g_assert_cmpuint(slot0->cycles, ==, frozen);    /* nothing runs */

    g_assert_cmpint(trace_unit_bind(f->unit, 3, 1, err, sizeof(err)), ==, 0);
    g_assert_cmphex(slot0->bound_context, ==, TRACE_NONE);
    g_assert_cmpuint(slot1->bound_context, ==, 3);
    trace_context_release(ctx);
    while (__atomic_load_n(&slot1->cycles, __ATOMIC_ACQUIRE) < 100)
        g_usleep(100);
    g_assert_cmpuint(slot0->cycles, ==, frozen);
    g_assert_cmpuint(__atomic_load_n(&e.last_slot, __ATOMIC_ACQUIRE), ==, 1);

    __atomic_store_n(&e.stop, 1, __ATOMIC_RELEASE);
    gate = trace_context_hold(ctx);
    g_assert_cmpint(trace_context_wait_held(ctx, gate, 5000), ==,
                    TRACE_WAIT_EXITED);
    g_thread_join(thread);
    g_assert_cmpuint(ctx->instructions, ==, 1234);
    g_assert_cmpuint(e.gate_changes, ==, 2);
}

static void test_hold_timeout(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx;
    char err[256];
    uint32_t gate;

    ctx = trace_context_attach(f->unit, 5, TRACE_MODE_FAST, err, sizeof(err));
    g_assert_nonnull(ctx);
    trace_context_release(ctx);
    /* Nobody obeys: this process "is" the emulator and never checks. */
    gate = trace_context_hold(ctx);
    g_assert_cmpint(trace_context_wait_held(ctx, gate, 50), ==,
                    TRACE_WAIT_TIMEOUT);
    g_assert_cmpint(trace_context_hold(ctx), ==, gate);  /* already closed */
}

static void test_bind_rules(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx;
    char err[512];

    g_assert_cmpint(trace_unit_bind(f->unit, 0, 2, err, sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "out of range"));
    g_assert_cmpint(trace_unit_bind(f->unit, 64, 0, err, sizeof(err)), ==, -1);

    /* Context 1 runs on slot 0: nobody else may take the slot. */
    ctx = trace_context_attach(f->unit, 1, TRACE_MODE_FAST, err, sizeof(err));
    g_assert_cmpint(trace_unit_bind(f->unit, 1, 0, err, sizeof(err)), ==, 0);
    trace_context_release(ctx);
    g_assert_cmpint(trace_unit_bind(f->unit, 2, 0, err, sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "slot 0 is in use by running context 1"));

    /* Once it exited, the slot may go to another context. */
    trace_context_exit(ctx, 10);
    g_assert_cmpint(trace_unit_bind(f->unit, 2, 0, err, sizeof(err)), ==, 0);
    g_assert_cmpuint(trace_unit_slot(f->unit, 0)->bound_context, ==, 2);
    g_assert_cmphex(ctx->slot, ==, TRACE_NONE);

    /* A context owned by a live process cannot be attached twice. */
    ctx->pid = getppid();
    ctx->status = TRACE_CONTEXT_RUNNING;
    g_assert_null(trace_context_attach(f->unit, 1, TRACE_MODE_FAST, err,
                                       sizeof(err)));
    g_assert_nonnull(strstr(err, "context 1 is attached to emulator pid"));
    g_assert_null(trace_context_attach(f->unit, 99, TRACE_MODE_FAST, err,
                                       sizeof(err)));
    g_assert_nonnull(strstr(err, "context 99 is out of range"));
}

static pid_t dead_pid(void)
{
    pid_t pid = fork();

    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

static void test_controller_death(struct fixture *f, gconstpointer data)
{
    struct emulator e = { .f = f, .context = 4 };
    GThread *thread;
    char err[256];

    g_assert_cmpint(trace_unit_bind(f->unit, 4, 1, err, sizeof(err)), ==, 0);
    trace_unit_set_controller(f->unit, getpid());
    thread = g_thread_new("emulator", emulate, &e);
    g_assert_cmpint(trace_context_wait_held(trace_unit_context(f->unit, 4), 0,
                                            5000), ==, TRACE_WAIT_HELD);
    g_assert_false(__atomic_load_n(&e.died, __ATOMIC_ACQUIRE));
    trace_unit_set_controller(f->unit, dead_pid());
    g_thread_join(thread);
    g_assert_true(e.died);
}

/* ---- Consumer and plugin arguments -------------------------------------- */

static void test_drain_to_file(struct fixture *f, gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    uint64_t drained = 0;
    char err[256];

    trace_slot_push(slot, 64, 0);
    trace_slot_push(slot, 64, 0x1234);
    trace_slot_push(slot, 64, 0xFFFF);
    g_assert_cmpint(trace_slot_drain_to(f->unit, 0, out, NULL, &drained, err,
                                        sizeof(err)), ==, 0);
    fclose(out);
    g_assert_cmpstr(text, ==, "0x00000\n0x048d0\n0x3fffc\n");
    g_assert_cmpuint(drained, ==, 3);
    free(text);
}

/*
 * The mailbox: a message is pending for the driver from its post until its
 * ack, and the controller sees it acked only then.
 */
static void test_mailbox(struct fixture *f, gconstpointer data)
{
    struct trace_regs_mailbox *box = trace_unit_mailbox(f->unit, 1);
    uint32_t seq;

    (void)data;
    g_assert_nonnull(box);
    g_assert_cmpuint(trace_mailbox_pending(box), ==, 0);
    g_assert_true(trace_mailbox_acked(box));
    box->op = TRACE_MAILBOX_BIND;
    box->context_id = 42;
    seq = trace_mailbox_post(box);
    g_assert_cmpuint(seq, ==, 1);
    g_assert_false(trace_mailbox_acked(box));
    g_assert_cmpuint(trace_mailbox_pending(box), ==, 1);
    trace_mailbox_ack(box, seq);
    g_assert_cmpuint(trace_mailbox_pending(box), ==, 0);
    g_assert_true(trace_mailbox_acked(box));
    box->op = TRACE_MAILBOX_END;
    g_assert_cmpuint(trace_mailbox_post(box), ==, 2);
    g_assert_cmpuint(trace_mailbox_pending(box), ==, 2);
    g_assert_cmpuint(trace_mailbox_pending(trace_unit_mailbox(f->unit, 0)),
                     ==, 0);
}

static void test_trace_run(void)
{
    struct trace_geometry geo;
    struct trace_run run;
    struct trace_regs_context *ctx;
    char *text = NULL, *path, *event_text = NULL;
    size_t size = 0, event_size = 0;
    FILE *out, *events;
    pid_t child;
    char err[512];

    /* Any readable file stands in for the plugin here. */
    g_setenv("COPROF_TRACE_PLUGIN", "/proc/self/exe", TRUE);
    trace_geometry_default(&geo);
    g_assert_cmpint(trace_run_start(&run, NULL, &geo, 2, 3, 0,
                                    TRACE_MODE_FAST, NULL, NULL, NULL, err,
                                    sizeof(err)),
                    ==, -1);
    g_assert_nonnull(strstr(err, "sample count 0 is outside 1..16777215"));
    g_assert_cmpint(trace_run_start(&run, NULL, &geo, 2, 3, 100,
                                    TRACE_MODE_REFERENCE, NULL, NULL, NULL,
                                    err,
                                    sizeof(err)),
                    ==, 0);
    path = g_strdup(run.unit->path);
    ctx = trace_unit_context(run.unit, 2);
    g_assert_cmpuint(ctx->slot, ==, 3);
    g_assert_true(trace_gate_is_open(ctx->gate));
    g_assert_cmphex(trace_unit_slot(run.unit, 3)->reload_state, ==,
                    lfsr_value_for_count(100));
    g_assert_cmphex(trace_unit_slot(run.unit, 3)->programmed_value, ==,
                    lfsr_value_for_count(100));
    g_assert_cmpint(run.unit->header->controller_pid, ==, getpid());
    g_assert_true(g_str_has_prefix(run.plugin_arg, "/proc/self/exe,regs="));
    g_assert_true(g_str_has_suffix(run.plugin_arg,
                                   ",context=2,mode=reference"));

    /* The report counts from the start of the run. */
    trace_slot_push(trace_unit_slot(run.unit, 3), geo.fifo_depth, 1);
    trace_slot_count_outside(trace_unit_slot(run.unit, 3));
    ctx->instructions = 250;
    out = open_memstream(&text, &size);
    trace_run_report(&run, out);
    fclose(out);
    g_assert_cmpstr(text, ==, "captures=2 dropped=0 instructions=250 "
                              "outside_ls=1\n");
    free(text);
    text = NULL;
    trace_run_end(&run);

    /* A watched run: the context's words, ram= and the events line. */
    g_assert_cmpint(trace_run_start(&run, NULL, &geo, 1, 0, 7,
                                    TRACE_MODE_FAST, NULL,
                                    &(struct trace_watch){ "/r", 0x2050, 2 },
                                    NULL, err, sizeof(err)),
                    ==, 0);
    g_assert_cmpuint(trace_unit_context(run.unit, 1)->guard_count, ==, 2);
    g_assert_cmphex(trace_unit_context(run.unit, 1)->guard_ls_offset, ==,
                    0x2050);
    g_assert_true(g_str_has_suffix(run.plugin_arg, ",mode=fast,ram=/r"));
    trace_slot_push(trace_unit_slot(run.unit, 0), geo.fifo_depth, 1);
    trace_slot_push_event(trace_unit_slot(run.unit, 0), geo.fifo_depth, 1, 4);
    child = fork();
    if (child == 0)
        _exit(0);
    events = open_memstream(&event_text, &event_size);
    g_assert_cmpint(trace_run_consume(&run, child, 1, NULL, NULL, events, err,
                                      sizeof(err)), ==, 0);
    fclose(events);
    waitpid(child, NULL, 0);
    g_assert_cmpstr(event_text, ==, "1 1 4\n");  /* before the 2nd capture */
    out = open_memstream(&text, &size);
    trace_run_report(&run, out);
    fclose(out);
    g_assert_true(g_str_has_prefix(text, "events=1 events_dropped=0\n"
                                         "captures=1 "));
    free(event_text);
    trace_run_end(&run);
    g_assert_cmpint(trace_run_start(&run, NULL, &geo, 1, 0, 7,
                                    TRACE_MODE_FAST, NULL,
                                    &(struct trace_watch){ "/r", 0x3FFFC, 2 },
                                    NULL, err, sizeof(err)),
                    ==, -1);
    g_assert_nonnull(strstr(err, "inside the 0x40000-byte local store"));
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));   /* private */

    g_setenv("COPROF_TRACE_PLUGIN", "/nonexistent/libcoptrace.so", TRUE);
    g_assert_cmpint(trace_run_start(&run, NULL, &geo, 0, 0, 5,
                                    TRACE_MODE_FAST, NULL, NULL, NULL, err,
                                    sizeof(err)),
                    ==, -1);
    g_assert_nonnull(strstr(err, "cannot find libcoptrace.so"));
    g_unsetenv("COPROF_TRACE_PLUGIN");
    free(text);
    g_free(path);
}

static void test_plugin_arg(void)
{
    char buf[256];

    g_assert_cmpint(trace_plugin_arg(buf, sizeof(buf), "/a,b/lib.so",
                                     "/tmp/x,y", 3, TRACE_MODE_REFERENCE,
                                     NULL, NULL),
                    ==, 0);
    g_assert_cmpstr(buf, ==, "/a,,b/lib.so,regs=/tmp/x,,y,context=3,"
                             "mode=reference");
    g_assert_cmpint(trace_plugin_arg(buf, sizeof(buf), "p.so", "r", 0,
                                     TRACE_MODE_FAST, NULL, NULL), ==, 0);
    g_assert_cmpstr(buf, ==, "p.so,regs=r,context=0,mode=fast");
    g_assert_cmpint(trace_plugin_arg(buf, sizeof(buf), "p.so", "r", 1,
                                     TRACE_MODE_FAST, "/c,d/n.counts", NULL), ==, 0);
    g_assert_cmpstr(buf, ==, "p.so,regs=r,context=1,mode=fast,"
                    "counts=/c,,d/n.counts");
    g_assert_cmpint(trace_plugin_arg(buf, sizeof(buf), "p.so", "r", 1,
                                     TRACE_MODE_FAST, "c", "/proc/1/fd/3,x"),
                    ==, 0);
    g_assert_cmpstr(buf, ==, "p.so,regs=r,context=1,mode=fast,counts=c,"
                    "ram=/proc/1/fd/3,,x");
    g_assert_cmpint(trace_plugin_arg(buf, 48, "p.so", "r", 0,
                                     TRACE_MODE_FAST, NULL, "a-long-ram-path"),
                    ==, -1);
    g_assert_cmpint(trace_plugin_arg(buf, 12, "p.so", "r", 0,
                                     TRACE_MODE_FAST, NULL, NULL), ==, -1);
    g_assert_cmpint(trace_plugin_arg(buf, 40, "p.so", "r", 0,
                                     TRACE_MODE_FAST, "a-long-counts-path", NULL),
                    ==, -1);
}

/*
 * The LFSR seqlock's write side is entered with a compare-and-swap: a
 * writer that finds it held (odd) neither enters nor leaves it odd, and
 * gives up after a bounded number of tries; a free one advances it by 2.
 * copdrv.ko loads the LFSR while the producer may be inside.
 */
static void test_lfsr_seqlock_two_writers(void)
{
    struct trace_regs_slot *slot = g_malloc0(sizeof(*slot));

    slot->lfsr_seq = 5;                 /* the producer is inside */
    slot->reload_state = 0x777;
    trace_slot_load_state(slot, 0x1234);
    g_assert_cmpuint(slot->lfsr_seq, ==, 5);
    g_assert_cmphex(slot->reload_state, ==, 0x777);
    slot->lfsr_seq = 6;                 /* it left */
    trace_slot_load_state(slot, 0x1234);
    g_assert_cmpuint(slot->lfsr_seq, ==, 8);
    g_assert_cmphex(slot->reload_state, ==, 0x1234);
    g_free(slot);
}

/*
 * A producer killed inside its LFSR write (an emulator's SIGKILL) leaves
 * lfsr_seq odd for ever: a reader gives up after TRACE_LFSR_TRIES tries
 * with the values as they were left, and trace_slot_status() returns
 * (copsim's driver stop once spun on it for ever under its scheduler
 * lock).  An alarm fails the test where a reader would spin.
 */
static void test_lfsr_reader_of_a_dead_writer(struct fixture *f,
                                              gconstpointer data)
{
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    struct trace_slot_status status;
    struct trace_lfsr_snapshot snap;

    (void)data;
    slot->cycles = 5000;
    slot->reload_cycle = 4000;
    slot->reload_state = 0x1234;
    slot->lfsr_seq = 7;                 /* a writer inside, and gone */
    alarm(60);
    g_assert_cmpint(trace_slot_read_lfsr(slot, &snap), ==, -1);
    g_assert_cmpuint(snap.cycles, ==, 5000);
    g_assert_cmpuint(snap.reload_cycle, ==, 4000);
    g_assert_cmphex(snap.reload_state, ==, 0x1234);
    trace_slot_status(f->unit, 0, &status);
    alarm(0);
    g_assert_cmpuint(status.cycles, ==, 5000);
    g_assert_cmpuint(slot->lfsr_seq, ==, 7);
    slot->lfsr_seq = 8;                 /* a writer that left */
    g_assert_cmpint(trace_slot_read_lfsr(slot, &snap), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/trace-unit/default-layout", test_default_layout);
    g_test_add_func("/trace-unit/lfsr-seqlock-two-writers",
                    test_lfsr_seqlock_two_writers);
    g_test_add_func("/trace-unit/bad-geometry", test_bad_geometry);
    g_test_add_func("/trace-unit/call-stack-area", test_call_stack_area);
    g_test_add_func("/trace-unit/call-stack-area-damaged",
                    test_call_stack_area_damaged);
    g_test_add("/trace-unit/corrupt-files", struct fixture, NULL, setup,
               test_corrupt_files, teardown);
    g_test_add("/trace-unit/padded-file", struct fixture, NULL, setup,
               test_padded_file, teardown);
    g_test_add("/trace-unit/overflow-counted", struct fixture, NULL, setup,
               test_overflow_counted, teardown);
    g_test_add("/trace-unit/cause-words", struct fixture, NULL, setup,
               test_cause_words, teardown);
    g_test_add("/trace-unit/concurrent-fifo", struct fixture, NULL, setup,
               test_concurrent_fifo, teardown);
    g_test_add("/trace-unit/lfsr-seqlock", struct fixture, NULL, setup,
               test_lfsr_seqlock, teardown);
    g_test_add("/trace-unit/lfsr-reader-of-a-dead-writer", struct fixture,
               NULL, setup, test_lfsr_reader_of_a_dead_writer, teardown);
    g_test_add("/trace-unit/lfsr-state", struct fixture, NULL, setup,
               test_lfsr_state, teardown);
    g_test_add("/trace-unit/hold-and-move", struct fixture, NULL, setup,
               test_hold_and_move, teardown);
    g_test_add("/trace-unit/hold-timeout", struct fixture, NULL, setup,
               test_hold_timeout, teardown);
    g_test_add("/trace-unit/bind-rules", struct fixture, NULL, setup,
               test_bind_rules, teardown);
    g_test_add("/trace-unit/controller-death", struct fixture, NULL, setup,
               test_controller_death, teardown);
    g_test_add("/trace-unit/drain-to-file", struct fixture, NULL, setup,
               test_drain_to_file, teardown);
    g_test_add("/trace-unit/mailbox", struct fixture, NULL, setup,
               test_mailbox, teardown);
    g_test_add("/trace-unit/events", struct fixture, NULL, setup,
               test_events, teardown);
    g_test_add("/trace-unit/events-upto", struct fixture, NULL, setup,
               test_events_upto, teardown);
    g_test_add("/trace-unit/events-to-file", struct fixture, NULL, setup,
               test_events_to_file, teardown);
    g_test_add("/trace-unit/watch-guards", struct fixture, NULL, setup,
               test_watch_guards, teardown);
    g_test_add("/trace-unit/drop-conserves", struct fixture, NULL, setup,
               test_drop_conserves, teardown);
    g_test_add_func("/trace-unit/stall-loses-nothing",
                    test_stall_loses_nothing);
    g_test_add("/trace-unit/stall-abandoned", struct fixture, NULL, setup,
               test_stall_abandoned, teardown);
    g_test_add("/trace-unit/doorbell-watermark", struct fixture, NULL, setup,
               test_doorbell_watermark, teardown);
    g_test_add_func("/trace-unit/dither-bounds-and-mean",
                    test_dither_bounds_and_mean);
    g_test_add_func("/trace-unit/dither-dealiases", test_dither_dealiases);
    g_test_add_func("/trace-unit/dither-slot-seeds", test_dither_slot_seeds);
    g_test_add_func("/trace-unit/trace-run", test_trace_run);
    g_test_add_func("/trace-unit/plugin-arg", test_plugin_arg);
    g_test_add_func("/trace-unit/handshake-spun", test_handshake_spun);
    g_test_add_func("/trace-unit/handshake-woken", test_handshake_woken);
    g_test_add_func("/trace-unit/handshake-no-lost-wakeup",
                    test_handshake_no_lost_wakeup);
    return g_test_run();
}
