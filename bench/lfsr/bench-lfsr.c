/*
 * bench-lfsr.c — how fast and how exact is lfsr_value_for_count?
 *
 * Three ways to get the LFSR value for "one capture every N cycles", timed
 * side by side over the same random N (uniform in 1 .. 2^24 - 1):
 *
 *   exact        lfsr_value_for_count (table-driven matrix powers)
 *   brute force  step back from 0xFFFFFF N times, one step at a time
 *   Cell table   OProfile's Cell method, re-implemented from its description:
 *                N rounded up to a 303-entry table (2^16, then steps of 2^12,
 *                2^15 and 2^18); fast but inexact
 *
 * It also times the inverse, lfsr_count_for_value, and computes the table
 * method's worst relative error over every N (not just the sample).
 * Each measurement is repeated in interleaved rounds; medians are printed.
 */
#include "lfsr/lfsr.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SAMPLE_SIZE     (1 << 20)
#define BRUTE_SAMPLES   24
#define ROUNDS          5

#define TABLE_BASE      (1u << 16)
#define RANGE2_END      (TABLE_BASE + (1u << 19))
#define RANGE3_END      (RANGE2_END + (1u << 22))
#define TABLE_ENTRIES   303

static uint32_t cell_table[TABLE_ENTRIES];

/* The count the Cell table method really programs for a requested n. */
static uint32_t cell_table_index(uint32_t n)
{
    if (n <= TABLE_BASE)
        return 0;
    if (n <= RANGE2_END)
        return (n - TABLE_BASE + (1u << 12) - 1) >> 12;
    if (n <= RANGE3_END)
        return 128 + ((n - RANGE2_END + (1u << 15) - 1) >> 15);
    uint32_t index = 256 + ((n - RANGE3_END + (1u << 18) - 1) >> 18);
    return index < TABLE_ENTRIES ? index : TABLE_ENTRIES - 1;
}

static uint32_t cell_table_count(uint32_t index)
{
    if (index == 0)
        return TABLE_BASE;
    if (index <= 128)
        return TABLE_BASE + (index << 12);
    if (index <= 256)
        return RANGE2_END + ((index - 128) << 15);
    uint64_t count = RANGE3_END + ((uint64_t)(index - 256) << 18);
    return count > LFSR_PERIOD ? LFSR_PERIOD : (uint32_t)count;
}

static void cell_table_build(void)
{
    for (uint32_t i = 0; i < TABLE_ENTRIES; i++)
        cell_table[i] = lfsr_value_for_count(cell_table_count(i));
}

static uint32_t cell_table_value(uint32_t n)
{
    return cell_table[cell_table_index(n)];
}

static uint32_t brute_force_value(uint32_t n)
{
    uint32_t state = LFSR_EXPIRY;

    while (n--)
        state = lfsr_step_back(state);
    return state;
}

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double v[ROUNDS])
{
    qsort(v, ROUNDS, sizeof(v[0]), compare_doubles);
    return v[ROUNDS / 2];
}

static volatile uint32_t sink;

static double time_per_call(uint32_t (*fn)(uint32_t), const uint32_t *input,
                            int count)
{
    uint32_t acc = 0;
    double start = now_ns();

    for (int i = 0; i < count; i++)
        acc ^= fn(input[i]);
    double elapsed = now_ns() - start;
    sink = acc;
    return elapsed / count;
}

/* Worst relative error of the table method over every n in [from, to]. */
static double cell_table_worst_error(uint32_t from, uint32_t to, uint32_t *at)
{
    double worst = 0;

    for (uint32_t n = from; n <= to; n++) {
        double error = ((double)cell_table_count(cell_table_index(n)) - n) / n;
        if (error < 0)
            error = -error;
        if (error > worst) {
            worst = error;
            *at = n;
        }
    }
    return worst;
}

int main(void)
{
    static uint32_t counts[SAMPLE_SIZE], values[SAMPLE_SIZE];
    double exact[ROUNDS], inverse[ROUNDS], table[ROUNDS], brute[ROUNDS];
    srand(12345);

    for (int i = 0; i < SAMPLE_SIZE; i++) {
        counts[i] = 1 + (uint32_t)(((uint64_t)rand() << 16 ^ rand()) % LFSR_PERIOD);
        values[i] = lfsr_value_for_count(counts[i]);   /* also builds tables */
    }
    cell_table_build();

    for (int r = 0; r < ROUNDS; r++) {
        exact[r] = time_per_call(lfsr_value_for_count, counts, SAMPLE_SIZE);
        inverse[r] = time_per_call(lfsr_count_for_value, values, SAMPLE_SIZE);
        table[r] = time_per_call(cell_table_value, counts, SAMPLE_SIZE);
        brute[r] = time_per_call(brute_force_value, counts + r * BRUTE_SAMPLES,
                                 BRUTE_SAMPLES);
    }

    /* Exactness of what was timed, on the brute-force sample. */
    int wrong = 0;
    for (int i = 0; i < BRUTE_SAMPLES; i++)
        wrong += lfsr_value_for_count(counts[i]) != brute_force_value(counts[i]);

    uint32_t at_all = 0, at_table = 0;
    double error_all = cell_table_worst_error(1, LFSR_PERIOD, &at_all);
    double error_table = cell_table_worst_error(TABLE_BASE, LFSR_PERIOD, &at_table);

    double e = median(exact), i = median(inverse), t = median(table),
           b = median(brute);
    printf("lfsr: value for a count, %d random counts, median of %d rounds\n",
           SAMPLE_SIZE, ROUNDS);
    printf("  exact value-for-count     %10.1f ns/value  1.0x  (exact: %s)\n",
           e, wrong ? "NO" : "yes, checked against stepping");
    printf("  brute-force stepping      %10.0f ns/value  %.0fx slower\n",
           b, b / e);
    printf("  Cell 303-entry table      %10.1f ns/value  %.2fx of exact's time\n",
           t, t / e);
    printf("  exact count-for-value     %10.1f ns/value  (the inverse)\n", i);
    printf("  Cell table worst error: %.2f%% for N >= 2^16 (at N=%u), "
           "%.0fx for N < 2^16 (at N=%u)\n",
           error_table * 100, at_table, error_all + 1, at_all);
    printf("  target: exact under 1000 ns (aim 100 ns): %s\n",
           !wrong && e < 1000 ? (e < 100 ? "met, and the aim" : "met") : "MISSED");
    return wrong ? 1 : 0;
}
