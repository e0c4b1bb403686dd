/*
 * test-lfsr.c — GTest suite for lfsr/.
 *
 * The central test walks the whole 2^24 - 1 cycle backwards from 0xFFFFFF
 * once, one step at a time, and checks lfsr_value_for_count and
 * lfsr_count_for_value for every count against that walk.
 */
#include "lfsr/lfsr.h"

#include <glib.h>
#include <string.h>

static void test_known_values(void)
{
    /* One step before 0xFFFFFF: bits 23, 22, 17 set and bit 0 clear. */
    g_assert_cmphex(lfsr_value_for_count(1), ==, 0xFFFFFE);
    g_assert_cmphex(lfsr_step(0xFFFFFE), ==, 0xFFFFFF);
    g_assert_cmphex(lfsr_value_for_count(LFSR_PERIOD), ==, 0xFFFFFF);
    g_assert_cmpuint(lfsr_count_for_value(0xFFFFFF), ==, LFSR_PERIOD);
    g_assert_cmphex(lfsr_step(0), ==, 0);
    g_assert_cmphex(lfsr_step_back(0), ==, 0);
}

static void test_step_back_inverts_step(void)
{
    guint bad = 0;

    for (uint32_t s = 0; s <= LFSR_MASK; s++)
        if (lfsr_step_back(lfsr_step(s)) != s || lfsr_step(lfsr_step_back(s)) != s)
            bad++;
    g_assert_cmpuint(bad, ==, 0);
}

static void test_maximal_period(void)
{
    uint32_t state = LFSR_EXPIRY;
    guint64 steps = 0;

    do {
        state = lfsr_step(state);
        steps++;
        g_assert_cmphex(state, !=, 0);
    } while (state != LFSR_EXPIRY && steps <= LFSR_PERIOD);
    g_assert_cmpuint(steps, ==, LFSR_PERIOD);
}

static void test_whole_cycle(void)
{
    uint32_t state = LFSR_EXPIRY;
    guint bad_value = 0, bad_count = 0;
    uint32_t first_bad = 0;

    for (uint32_t n = 1; n <= LFSR_PERIOD; n++) {
        state = lfsr_step_back(state);
        if (lfsr_value_for_count(n) != state) {
            if (!bad_value++)
                first_bad = n;
        }
        if (lfsr_count_for_value(state) != n) {
            if (!bad_count++ && !first_bad)
                first_bad = n;
        }
    }
    if (bad_value || bad_count)
        g_test_message("first mismatch at N = %u", first_bad);
    g_assert_cmpuint(bad_value, ==, 0);
    g_assert_cmpuint(bad_count, ==, 0);
    g_assert_cmphex(state, ==, LFSR_EXPIRY);
}

static void test_advance_rewind(void)
{
    GRand *rand = g_rand_new_with_seed(42);

    for (int i = 0; i < 100000; i++) {
        uint32_t s = g_rand_int_range(rand, 1, LFSR_MASK + 1);
        uint32_t k = g_rand_int(rand);
        g_assert_cmphex(lfsr_rewind(lfsr_advance(s, k), k), ==, s);
        g_assert_cmphex(lfsr_advance(s, LFSR_PERIOD), ==, s);
    }
    /* Short jumps against single steps. */
    uint32_t s = 0x123456, forward = s;
    for (uint32_t k = 0; k < 1000; k++) {
        g_assert_cmphex(lfsr_advance(s, k), ==, forward);
        forward = lfsr_step(forward);
    }
    g_rand_free(rand);
}

static void test_round_trips(void)
{
    GRand *rand = g_rand_new_with_seed(7);

    for (int i = 0; i < 100000; i++) {
        uint32_t n = g_rand_int_range(rand, 1, LFSR_PERIOD + 1);
        uint32_t v = lfsr_value_for_count(n);
        g_assert_cmpuint(lfsr_count_for_value(v), ==, n);
        g_assert_cmphex(lfsr_advance(v, n), ==, LFSR_EXPIRY);
        if (n < LFSR_PERIOD)
            g_assert_cmphex(lfsr_advance(v, n - 1), !=, LFSR_EXPIRY);
    }
    g_rand_free(rand);
}

static void test_out_of_range(void)
{
    g_assert_cmphex(lfsr_value_for_count(0), ==, LFSR_DISABLED);
    g_assert_cmphex(lfsr_value_for_count(LFSR_PERIOD + 1), ==, LFSR_DISABLED);
    g_assert_cmphex(lfsr_value_for_count(UINT32_MAX), ==, LFSR_DISABLED);
    g_assert_cmpuint(lfsr_count_for_value(0), ==, 0);
    g_assert_cmpuint(lfsr_count_for_value(0x1000000), ==, 0);
    g_assert_cmpuint(lfsr_count_for_value(UINT32_MAX), ==, 0);
}

/* The memo gives lfsr_value_for_count's values, computes each dithered
 * interval of N = 2003 (the default rate) once, and a count that maps to
 * an occupied entry evicts it without being confused with it. */
static void test_memo(void)
{
    static struct lfsr_memo memo;
    uint32_t low = 2003 - 511, high = 2003 + 511;

    for (int pass = 0; pass < 3; pass++)
        for (uint32_t n = low; n <= high; n++)
            g_assert_cmphex(lfsr_memo_value(&memo, n), ==,
                            lfsr_value_for_count(n));
    g_assert_cmpuint(memo.misses, ==, high - low + 1);
    g_assert_cmphex(lfsr_memo_value(&memo, 2003 + LFSR_MEMO_SIZE), ==,
                    lfsr_value_for_count(2003 + LFSR_MEMO_SIZE));
    g_assert_cmpuint(memo.misses, ==, high - low + 2);
    g_assert_cmphex(lfsr_memo_value(&memo, 2003), ==,
                    lfsr_value_for_count(2003));
    g_assert_cmpuint(memo.misses, ==, high - low + 3);
    g_assert_cmphex(lfsr_memo_value(&memo, LFSR_PERIOD), ==, LFSR_EXPIRY);
    g_assert_cmphex(lfsr_memo_value(&memo, 0), ==, LFSR_DISABLED);
    g_assert_cmphex(lfsr_memo_value(&memo, LFSR_PERIOD + 1), ==,
                    LFSR_DISABLED);
}

static void test_parsing(void)
{
    double d;
    uint64_t u;

    g_assert_cmpint(lfsr_parse_seconds("50us", &d), ==, 0);
    g_assert_cmpfloat_with_epsilon(d, 50e-6, 1e-15);
    g_assert_cmpint(lfsr_parse_seconds("1.5ms", &d), ==, 0);
    g_assert_cmpfloat_with_epsilon(d, 1.5e-3, 1e-15);
    g_assert_cmpint(lfsr_parse_seconds("100 ns", &d), ==, 0);
    g_assert_cmpfloat_with_epsilon(d, 100e-9, 1e-18);
    g_assert_cmpint(lfsr_parse_seconds("2s", &d), ==, 0);
    g_assert_cmpfloat(d, ==, 2.0);
    g_assert_cmpint(lfsr_parse_seconds("50", &d), ==, -1);
    g_assert_cmpint(lfsr_parse_seconds("50 furlongs", &d), ==, -1);
    g_assert_cmpint(lfsr_parse_seconds("", &d), ==, -1);
    g_assert_cmpint(lfsr_parse_seconds("inf s", &d), ==, -1);

    g_assert_cmpint(lfsr_parse_hz("1e9", &d), ==, 0);
    g_assert_cmpfloat(d, ==, 1e9);
    g_assert_cmpint(lfsr_parse_hz("800MHz", &d), ==, 0);
    g_assert_cmpfloat(d, ==, 800e6);
    g_assert_cmpint(lfsr_parse_hz("20kHz", &d), ==, 0);
    g_assert_cmpfloat(d, ==, 20e3);
    g_assert_cmpint(lfsr_parse_hz("fast", &d), ==, -1);

    g_assert_cmpint(lfsr_parse_count("50000", &u), ==, 0);
    g_assert_cmpuint(u, ==, 50000);
    g_assert_cmpint(lfsr_parse_count("12abc", &u), ==, -1);
    g_assert_cmpint(lfsr_parse_count("-1", &u), ==, -1);
    g_assert_cmpint(lfsr_parse_count("99999999999999999999999", &u), ==, -1);
    g_assert_cmpint(lfsr_parse_value("0xfffffe", &u), ==, 0);
    g_assert_cmphex(u, ==, 0xfffffe);
    g_assert_cmpint(lfsr_parse_value("0x", &u), ==, -1);
    g_assert_cmpint(lfsr_parse_value("0xzz", &u), ==, -1);
}

static void test_rates(void)
{
    uint32_t n;

    g_assert_cmpint(lfsr_count_for_period(50e-6, 1e9, &n), ==, 0);
    g_assert_cmpuint(n, ==, 50000);
    g_assert_cmpint(lfsr_count_for_frequency(20e3, 1e9, &n), ==, 0);
    g_assert_cmpuint(n, ==, 50000);
    g_assert_cmpint(lfsr_count_for_period(1.4e-9, 1e9, &n), ==, 0);
    g_assert_cmpuint(n, ==, 1);
    g_assert_cmpint(lfsr_count_for_period(1.6e-9, 1e9, &n), ==, 0);
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpint(lfsr_count_for_period(LFSR_PERIOD / 1e9, 1e9, &n), ==, 0);
    g_assert_cmpuint(n, ==, LFSR_PERIOD);
    g_assert_cmpint(lfsr_count_for_period(0.4e-9, 1e9, &n), ==, -1);
    g_assert_cmpint(lfsr_count_for_period(1.0, 1e9, &n), ==, -1);
    g_assert_cmpint(lfsr_count_for_period(-1.0, 1e9, &n), ==, -1);
    g_assert_cmpint(lfsr_count_for_period(1e-6, 0, &n), ==, -1);
    g_assert_cmpint(lfsr_count_for_frequency(3e9, 1e9, &n), ==, -1);
}

static void test_poll_interval(void)
{
    /* 1024 captures of 50000 cycles at 1 GHz fill in 51.2 ms; poll at half. */
    g_assert_cmpuint(lfsr_poll_interval_ns(50000, 1e9, 1024), ==, 25600000);
    g_assert_cmpuint(lfsr_poll_interval_ns(1, 1e9, 1024), ==, 512);
    g_assert_cmpuint(lfsr_poll_interval_ns(LFSR_PERIOD, 1e9, 1024), ==,
                     LFSR_POLL_MAX_NS);
    g_assert_cmpuint(lfsr_poll_interval_ns(0, 1e9, 1024), ==, 0);
    g_assert_cmpuint(lfsr_poll_interval_ns(100, 1e9, 0), ==, 0);
    g_assert_cmpuint(lfsr_poll_interval_ns(100, 0, 1024), ==, 0);
}

/* The minimum-rate rule: the smallest N whose poll interval reaches
 * 100 us, and refusals that name N, the range and the reason. */
static void test_min_count(void)
{
    char err[512];
    uint32_t min = lfsr_min_count(3.2e9, 4096);

    g_assert_cmpuint(min, ==, 157);
    g_assert_cmpuint(lfsr_poll_interval_ns(min, 3.2e9, 4096), >=,
                     LFSR_MIN_POLL_NS);
    g_assert_cmpuint(lfsr_poll_interval_ns(min - 1, 3.2e9, 4096), <,
                     LFSR_MIN_POLL_NS);
    g_assert_cmpuint(lfsr_min_count(3.2e9, 1024), ==, 625);
    g_assert_cmpint(lfsr_check_count(min, 3.2e9, 4096, err, sizeof(err)),
                    ==, 0);
    g_assert_cmpint(lfsr_check_count(LFSR_PERIOD, 3.2e9, 4096, err,
                                     sizeof(err)), ==, 0);
    g_assert_cmpint(lfsr_check_count(1, 3.2e9, 4096, err, sizeof(err)),
                    ==, -1);
    g_assert_cmpstr(err, ==, "SPU_CYCLES:1: outside 157..16777215 at "
                    "3.2e+09 Hz with a 4096-entry FIFO: a faster rate fills "
                    "the FIFO before a poll can come (the driver polls at "
                    "most every 100 us), so the coprocessor would stall, or "
                    "drop captures, at every fill; use a deeper FIFO");
    g_assert_cmpint(lfsr_check_count(0, 3.2e9, 4096, err, sizeof(err)),
                    ==, -1);
    g_assert_cmpint(lfsr_check_count(LFSR_PERIOD + 1, 3.2e9, 4096, err,
                                     sizeof(err)), ==, -1);
    g_assert_nonnull(strstr(err, "outside 157..16777215"));
    g_assert_cmpuint(lfsr_min_count(1e12, 2), ==, 0);
    g_assert_cmpint(lfsr_check_count(1000, 1e12, 2, err, sizeof(err)),
                    ==, -1);
    g_assert_nonnull(strstr(err, "no rate is possible"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lfsr/min-count", test_min_count);
    g_test_add_func("/lfsr/known-values", test_known_values);
    g_test_add_func("/lfsr/step-back-inverts-step", test_step_back_inverts_step);
    g_test_add_func("/lfsr/maximal-period", test_maximal_period);
    g_test_add_func("/lfsr/whole-cycle", test_whole_cycle);
    g_test_add_func("/lfsr/advance-rewind", test_advance_rewind);
    g_test_add_func("/lfsr/round-trips", test_round_trips);
    g_test_add_func("/lfsr/out-of-range", test_out_of_range);
    g_test_add_func("/lfsr/memo", test_memo);
    g_test_add_func("/lfsr/parsing", test_parsing);
    g_test_add_func("/lfsr/rates", test_rates);
    g_test_add_func("/lfsr/poll-interval", test_poll_interval);
    return g_test_run();
}
