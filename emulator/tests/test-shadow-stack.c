/*
 * test-shadow-stack.c — the shadow stack saved as bytes and restored
 * (shadow_save, shadow_restore: how a context's stack follows it from
 * slot to slot).  A stack built by calls and returns, saved and restored
 * into another, has the same frames, the same call noted and not yet
 * settled, and goes on the same way (a longjmp-like return through the
 * remembered call sites included); four zero bytes are an empty stack;
 * short, inconsistent or foreign bytes are refused.
 */
#include "emulator/shadow-stack.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#define LS_BASE 0x80000000u
#define LS_SIZE 0x40000u

static void fresh(struct shadow_stack *s)
{
    shadow_init(s, NULL, LS_BASE, LS_SIZE, NULL, 0);
}

/* A call at `site` (returning to site + 4) into the block at `target`. */
static void call(struct shadow_stack *s, uint32_t site, uint32_t target)
{
    shadow_note(s, SHADOW_CALL, site + 4);
    shadow_settle(s, target);
}

static void ret(struct shadow_stack *s, uint32_t to)
{
    shadow_note(s, SHADOW_RETURN, 0);
    shadow_settle(s, to);
}

static void assert_same(const struct shadow_stack *a,
                        const struct shadow_stack *b)
{
    uint32_t fa[64], fb[64];
    uint32_t da = shadow_frames(a, fa, 64), db = shadow_frames(b, fb, 64);

    g_assert_cmpuint(da, ==, db);
    g_assert_cmpmem(fa, MIN(da, 64u) * 4, fb, MIN(db, 64u) * 4);
    g_assert_cmpuint(a->pending_op, ==, b->pending_op);
    g_assert_cmpuint(a->pending_return, ==, b->pending_return);
    g_assert_cmpuint(a->unmatched, ==, b->unmatched);
    g_assert_cmpuint(a->underflows, ==, b->underflows);
    g_assert_cmpmem(a->sites, sizeof(a->sites), b->sites, sizeof(b->sites));
}

static void test_round_trip(void)
{
    struct shadow_stack a, b;
    size_t size, len = 1 << 20;
    uint8_t *buf = g_malloc0(len);

    fresh(&a);
    fresh(&b);
    for (uint32_t k = 0; k < 10; k++)       /* main -> f -> f -> ... */
        call(&a, LS_BASE + 0x100 + 8 * k, LS_BASE + 0x1000);
    ret(&a, LS_BASE + 0x100 + 8 * 9 + 4);   /* one return */
    shadow_note(&a, SHADOW_CALL, LS_BASE + 0x2004); /* noted, unsettled */
    size = shadow_save(&a, buf, len);
    g_assert_cmpuint(size, ==, shadow_save_size(&a));
    g_assert_cmpuint(*(uint32_t *)buf, ==, SHADOW_SAVE_MAGIC);
    g_assert_cmpuint(((uint32_t *)buf)[1], ==, size);
    call(&b, LS_BASE + 0x500, LS_BASE + 0x600);     /* b had its own */
    g_assert_cmpint(shadow_restore(&b, buf, size), ==, 0);
    assert_same(&a, &b);

    /* Both go on alike: the noted call settles, then a longjmp-like
     * return to the third call's return address pops to its depth. */
    shadow_settle(&a, LS_BASE + 0x3000);
    shadow_settle(&b, LS_BASE + 0x3000);
    ret(&a, LS_BASE + 0x100 + 8 * 2 + 4);
    ret(&b, LS_BASE + 0x100 + 8 * 2 + 4);
    assert_same(&a, &b);
    g_assert_cmpuint(b.depth, ==, 2);

    /* Too small a buffer: nothing written. */
    g_assert_cmpuint(shadow_save(&a, buf, shadow_save_size(&a) - 1), ==, 0);
    shadow_free(&a);
    shadow_free(&b);
    g_free(buf);
}

static void test_empty_and_refused(void)
{
    struct shadow_stack a, b;
    uint8_t zero[4] = {0}, buf[4096];
    size_t size;

    fresh(&a);
    call(&a, LS_BASE + 0x10, LS_BASE + 0x40);
    g_assert_cmpint(shadow_restore(&a, zero, sizeof(zero)), ==, 0);
    g_assert_cmpuint(a.depth, ==, 0);       /* a run's start */
    g_assert_cmpuint(a.pending_op, ==, SHADOW_NONE);

    fresh(&b);
    call(&b, LS_BASE + 0x10, LS_BASE + 0x40);
    size = shadow_save(&b, buf, sizeof(buf));
    g_assert_cmpuint(size, >, 8);
    g_assert_cmpint(shadow_restore(&a, buf, size - 1), ==, -1);  /* short */
    buf[8] ^= 1;                                /* depth disagrees */
    g_assert_cmpint(shadow_restore(&a, buf, size), ==, -1);
    buf[8] ^= 1;
    buf[0] ^= 1;                                /* not a saved stack */
    g_assert_cmpint(shadow_restore(&a, buf, size), ==, -1);
    g_assert_cmpuint(a.depth, ==, 0);           /* left empty */
    buf[0] ^= 1;
    g_assert_cmpint(shadow_restore(&a, buf, size), ==, 0);
    g_assert_cmpuint(a.depth, ==, 1);
    shadow_free(&a);
    shadow_free(&b);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/shadow-stack/round-trip", test_round_trip);
    g_test_add_func("/shadow-stack/empty-and-refused", test_empty_and_refused);
    return g_test_run();
}
