/*
 * test-timing.c - the timing model (emulator/timing.h): the built-in
 * machine description, the parser's errors, the decoder's classes, the
 * scheduler's dependency stalls and the exits' branch costs, each against
 * the arithmetic of emulator/timing/spu.model.
 */
#include "emulator/timing.h"

#include <glib.h>
#include <string.h>

/* RV32IM encodings. */
static uint32_t r_type(uint32_t f7, uint32_t rs2, uint32_t rs1, uint32_t f3,
                       uint32_t rd)
{
    return f7 << 25 | rs2 << 20 | rs1 << 15 | f3 << 12 | rd << 7 | 0x33;
}

static uint32_t addi(uint32_t rd, uint32_t rs1, int32_t imm)
{
    return (uint32_t)imm << 20 | rs1 << 15 | rd << 7 | 0x13;
}

static uint32_t lw(uint32_t rd, uint32_t rs1)
{
    return rs1 << 15 | 2u << 12 | rd << 7 | 0x03;
}

/* bne rs1, rs2, offset (a multiple of 2). */
static uint32_t bne(uint32_t rs1, uint32_t rs2, int32_t off)
{
    uint32_t imm = (uint32_t)off;

    return ((imm >> 12) & 1) << 31 | ((imm >> 5) & 0x3f) << 25 | rs2 << 20
           | rs1 << 15 | 1u << 12 | ((imm >> 1) & 0xf) << 8
           | ((imm >> 11) & 1) << 7 | 0x63;
}

static void test_default_model(void)
{
    struct timing_model m;

    timing_model_default(&m);
    g_assert_cmpuint(m.latency[TIMING_INTEGER], ==, 2);
    g_assert_cmpuint(m.latency[TIMING_MULTIPLY], ==, 7);
    g_assert_cmpuint(m.latency[TIMING_LOAD], ==, 6);
    g_assert_cmpuint(m.issue[TIMING_DIVIDE], ==, 32);
    g_assert_cmpuint(m.branch_miss, ==, 18);
    g_assert_cmpuint(m.branch_indirect, ==, 18);
    g_assert_cmpint(m.predict, ==, TIMING_BACKWARD_TAKEN);
    g_assert_cmpuint(m.memory_latency, ==, 1000);
}

static void expect_error(const char *text, const char *message)
{
    struct timing_model m;
    char err[256];

    g_assert_cmpint(timing_model_parse(&m, text, "t.model", err, sizeof(err)),
                    ==, -1);
    g_assert_cmpstr(err, ==, message);
}

static void test_parse_errors(void)
{
    GString *text = g_string_new(timing_default_model);

    expect_error("integer.issue 1\nfoo 3\n", "t.model:2: unknown key 'foo'");
    expect_error("integer.issue x\n",
                 "t.model:1: integer.issue: 'x' is not a cycle count in "
                 "0..1000");
    expect_error("integer.issue 1\ninteger.issue 2\n",
                 "t.model:2: integer.issue given twice");
    expect_error("branch.predict sideways\n",
                 "t.model:1: branch.predict: 'sideways' is not "
                 "backward-taken, never-taken or always-taken");
    expect_error("integer.issue 1 2\n",
                 "t.model:1: integer.issue: expected one value");
    expect_error("# nothing\n", "t.model: integer.issue is missing");
    g_string_replace(text, "integer.issue      1", "integer.issue 0", 1);
    expect_error(text->str, "t.model: integer.issue must be at least 1");
    g_string_free(text, TRUE);
}

/* sw rs2, 0(rs1). */
static uint32_t sw(uint32_t rs2, uint32_t rs1)
{
    return rs2 << 20 | rs1 << 15 | 2u << 12 | 0x23;
}

static uint32_t lui(uint32_t rd, uint32_t imm20)
{
    return imm20 << 12 | rd << 7 | 0x37;
}

static uint32_t auipc(uint32_t rd, uint32_t imm20)
{
    return imm20 << 12 | rd << 7 | 0x17;
}

/* timing_watch_memory on `n` words at 0x80001000 (the local store at
 * 0x80000000, 256 KiB): its answer for the last one. */
static int last_watched(const uint32_t *words, uint32_t n)
{
    uint64_t pc[16];
    uint8_t watch[16];

    g_assert_cmpuint(n, <=, 16);
    for (uint32_t i = 0; i < n; i++)
        pc[i] = 0x80001000u + 4 * i;
    timing_watch_memory(words, pc, n, 0x80000000u, 0x40000u, watch);
    for (uint32_t i = 0; i + 1 < n; i++)        /* none but loads/stores */
        if ((words[i] & 0x7f) != 0x03 && (words[i] & 0x7f) != 0x23)
            g_assert_cmpuint(watch[i], ==, 0);
    return watch[n - 1];
}

/*
 * Loads and stores based on x0, sp, gp or tp, or on a register the block
 * set from them or from a constant near the local store (addi, mv, lui,
 * auipc), are not watched; those through a register of unknown value, a
 * constant in the data window, or one moved out of the margin are.
 */
static void test_watch_memory(void)
{
    const uint32_t a0 = 10, a1 = 11, a3 = 13, sp = 2;

    {   /* unknown bases */
        uint32_t w1[] = { lw(a3, a0) }, w2[] = { sw(a1, a0) };
        uint32_t w3[] = { lw(1, 1) };
        uint32_t w4[] = { lw(a0, sp), lw(a3, a0) };     /* loaded: unknown */
        uint32_t w5[] = { addi(a0, sp, 16),
                          r_type(0, a1, a0, 0, a0),     /* add: unknown */
                          lw(a3, a0) };
        uint32_t w6[] = { addi(a0, a1, 16), lw(a3, a0) };

        g_assert_true(last_watched(w1, 1));
        g_assert_true(last_watched(w2, 1));
        g_assert_true(last_watched(w3, 1));
        g_assert_true(last_watched(w4, 2));
        g_assert_true(last_watched(w5, 3));
        g_assert_true(last_watched(w6, 2));
    }
    for (uint32_t base = 0; base <= 4; base++) {
        uint32_t l[] = { lw(a3, base) }, s[] = { sw(a1, base) };

        if (base == 1)
            continue;
        g_assert_false(last_watched(l, 1));
        g_assert_false(last_watched(s, 1));
    }
    {   /* derived from sp or a local-store constant */
        uint32_t w1[] = { addi(a0, sp, 16), lw(a3, a0) };
        uint32_t w2[] = { addi(a0, sp, 0), addi(a1, a0, -2048),
                          sw(a3, a1) };                 /* mv, addi */
        uint32_t w3[] = { lui(a0, 0x80010), addi(a0, a0, 0x7f0),
                          lw(a3, a0) };
        uint32_t w4[] = { auipc(a0, 0), lw(a3, a0) };
        uint32_t w5[] = { lui(a0, 0x80040), sw(a3, a0) };   /* boot block */

        g_assert_false(last_watched(w1, 2));
        g_assert_false(last_watched(w2, 3));
        g_assert_false(last_watched(w3, 3));
        g_assert_false(last_watched(w4, 2));
        g_assert_false(last_watched(w5, 2));
    }
    {   /* a window constant; out of the margin; overwritten */
        uint32_t w1[] = { lui(a0, 0x80800), lw(a3, a0) };
        uint32_t w2[] = { lui(a0, 0x40000), sw(a3, a0) };
        uint32_t w3[] = { lui(a0, 0x80140), lw(a3, a0) };
        uint32_t w4[] = { lui(a0, 0x8013f), addi(a0, a0, 2047),
                          lw(a3, a0) };     /* 0x8013f7ff: inside */
        uint32_t w5[] = { lui(a0, 0x8013f), addi(a0, a0, 2047),
                          addi(a0, a0, 2047), addi(a0, a0, 2047),
                          lw(a3, a0) };                     /* 0x801407fd */
        uint32_t w6[] = { addi(a0, sp, 0), lw(a0, a0), lw(a3, a0) };

        g_assert_true(last_watched(w1, 2));
        g_assert_true(last_watched(w2, 2));
        g_assert_true(last_watched(w3, 2));
        g_assert_false(last_watched(w4, 3));
        g_assert_true(last_watched(w5, 5));
        g_assert_true(last_watched(w6, 3));
    }
}

static void test_decode(void)
{
    struct timing_insn in;

    timing_decode(r_type(1, 3, 2, 0, 1), &in);          /* mul x1,x2,x3 */
    g_assert_cmpint(in.cls, ==, TIMING_MULTIPLY);
    g_assert_cmpuint(in.rd, ==, 1);
    g_assert_cmpuint(in.rs1, ==, 2);
    g_assert_cmpuint(in.rs2, ==, 3);
    timing_decode(r_type(1, 3, 2, 4, 1), &in);          /* div */
    g_assert_cmpint(in.cls, ==, TIMING_DIVIDE);
    timing_decode(r_type(0, 3, 2, 0, 1), &in);          /* add */
    g_assert_cmpint(in.cls, ==, TIMING_INTEGER);
    timing_decode(lw(5, 2), &in);
    g_assert_cmpint(in.cls, ==, TIMING_LOAD);
    g_assert_cmpuint(in.rs2, ==, 0);
    timing_decode(bne(5, 0, -8), &in);
    g_assert_cmpint(in.cls, ==, TIMING_BRANCH);
    g_assert_cmpuint(in.rd, ==, 0);
}

/* mul a0,a0,a1 four times: each waits 6 cycles for the previous (latency
 * 7, issue 1); a load's consumer waits 5. */
static void test_schedule(void)
{
    struct timing_model m;
    uint32_t words[6], stall[6], issue[6];

    timing_model_default(&m);
    for (int i = 0; i < 4; i++)
        words[i] = r_type(1, 11, 10, 0, 10);
    words[4] = lw(12, 2);
    words[5] = addi(13, 12, 1);
    timing_schedule(&m, words, 6, stall, issue);
    g_assert_cmpuint(stall[0], ==, 0);
    for (int i = 1; i < 4; i++)
        g_assert_cmpuint(stall[i], ==, 6);
    g_assert_cmpuint(stall[4], ==, 0);
    g_assert_cmpuint(stall[5], ==, 5);
    for (int i = 0; i < 6; i++)
        g_assert_cmpuint(issue[i], ==, 1);
    words[0] = addi(0, 10, 1);              /* writes x0: no dependency */
    words[1] = addi(5, 0, 1);
    timing_schedule(&m, words, 2, stall, issue);
    g_assert_cmpuint(stall[1], ==, 0);
}

/*
 * A system instruction empties the scoreboard, as a block's end does: a
 * load's consumer right after a csrw costs the same whether QEMU cut the
 * block after the csrw or (a slot's stub ran it as a nop) did not.
 */
static void test_schedule_system(void)
{
    struct timing_model m;
    uint32_t words[3], stall[3], issue[3];
    uint32_t split_stall[1], split_issue[1];

    timing_model_default(&m);
    words[0] = lw(12, 2);
    words[1] = 0x30529073u;                 /* csrw mtvec, t0 */
    words[2] = addi(13, 12, 1);             /* reads the load's a2 */
    timing_schedule(&m, words, 3, stall, issue);
    timing_schedule(&m, &words[2], 1, split_stall, split_issue);
    g_assert_cmpuint(stall[1], ==, 0);
    g_assert_cmpuint(stall[2], ==, split_stall[0]);
    g_assert_cmpuint(stall[2], ==, 0);
    words[0] = addi(5, 0, 1);               /* t0, read by the csrw */
    timing_schedule(&m, words, 2, stall, issue);
    g_assert_cmpuint(stall[1], ==, 1);
}

static void test_exit(void)
{
    struct timing_model m;
    struct timing_exit e;

    timing_model_default(&m);
    timing_exit(&m, bne(5, 0, -8), 0x1000, &e);     /* a loop's branch */
    g_assert_cmpuint(e.fallthrough, ==, 0x1004);
    g_assert_cmpuint(e.taken, ==, 0);
    g_assert_cmpuint(e.not_taken, ==, 18);
    timing_exit(&m, bne(5, 0, 16), 0x1000, &e);     /* forward */
    g_assert_cmpuint(e.taken, ==, 18);
    g_assert_cmpuint(e.not_taken, ==, 0);
    timing_exit(&m, 0x00008067, 0x1000, &e);        /* ret */
    g_assert_cmpuint(e.taken, ==, 18);
    g_assert_cmpuint(e.not_taken, ==, 18);
    timing_exit(&m, 0x0000006f, 0x1000, &e);        /* jal x0, 0 */
    g_assert_cmpuint(e.taken + e.not_taken, ==, 0);
    m.predict = TIMING_NEVER_TAKEN;
    timing_exit(&m, bne(5, 0, -8), 0x1000, &e);
    g_assert_cmpuint(e.taken, ==, 18);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/timing/default-model", test_default_model);
    g_test_add_func("/timing/parse-errors", test_parse_errors);
    g_test_add_func("/timing/decode", test_decode);
    g_test_add_func("/timing/watch-memory", test_watch_memory);
    g_test_add_func("/timing/schedule", test_schedule);
    g_test_add_func("/timing/schedule-system", test_schedule_system);
    g_test_add_func("/timing/exit", test_exit);
    return g_test_run();
}
