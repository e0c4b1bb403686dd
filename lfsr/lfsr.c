/*
 * lfsr.c — exact forward, backward and inverse computation of the trace
 * unit's 24-bit LFSR (see lfsr.h for the interface).
 *
 * How it works
 * ------------
 * The LFSR is linear over GF(2): one step is a 24x24 bit matrix S applied to
 * the state, one step back is its inverse R.  Going back N steps is R^N,
 * which we apply as a product of the precomputed powers R^(2^k) for the bits
 * set in N.  Each power is stored as three 256-entry tables, one per byte of
 * the state (struct bitmap), so applying it costs three loads and two XORs.
 * lfsr_value_for_count(N) = R^N(0xFFFFFF) starts from a table of
 * R^(4096 b)(0xFFFFFF) for the high 12 bits b of N, so it needs at most 12
 * of those applications, for the low 12 bits.
 *
 * The inverse is a discrete logarithm.  The polynomial is primitive, so the
 * state space with S is the field GF(2^24) with "multiply by x": the linear
 * map phi, defined by phi(S^k(0xFFFFFF)) = x^k for k = 0..23, sends every
 * state of the cycle to a power of x, and phi(S^k(0xFFFFFF)) = x^k for all k.
 * For a value V, y = phi(V) = x^e with e = -N mod (2^24 - 1).  As
 * 2^24 - 1 = 4095 * 4097 with coprime factors, we find e by Pohlig-Hellman
 * in two halves: y^4097 lies in the subgroup of order 4095 and y^4095 in the
 * one of order 4097; two hash tables of those subgroups give e mod 4095 and
 * e mod 4097, and the Chinese remainder theorem gives e.  Raising to these
 * powers needs only the Frobenius maps y -> y^(2^j), which are linear (three
 * table loads again), and five field multiplications.
 *
 * Everything is built once, on first use, under pthread_once.
 */
#include "lfsr/lfsr.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define ORDER_LOW   4095u     /* 2^12 - 1 */
#define ORDER_HIGH  4097u     /* 2^12 + 1; ORDER_LOW * ORDER_HIGH = LFSR_PERIOD */
#define LOG_SLOTS   8192u     /* hash slots per subgroup table, a power of 2 */
#define EXPIRY_STRIDE_BITS 12
#define EXPIRY_STRIDE  (1u << EXPIRY_STRIDE_BITS)
#define EXPIRY_STRIDES (1u << (LFSR_BITS - EXPIRY_STRIDE_BITS))

/* A linear map on 24-bit vectors, as one lookup table per input byte. */
struct bitmap {
    uint32_t byte[3][256];
};

/* A subgroup of GF(2^24)*: element -> its exponent, by open addressing. */
struct log_table {
    uint32_t element[LOG_SLOTS];   /* 0 marks an empty slot */
    uint16_t exponent[LOG_SLOTS];
};

static struct {
    struct bitmap rewind_pow[LFSR_BITS];  /* R^(2^k) */
    uint32_t expiry_rewound[EXPIRY_STRIDES];  /* R^(b * EXPIRY_STRIDE)(EXPIRY) */
    struct bitmap to_field;               /* phi */
    struct bitmap frobenius[4];           /* y -> y^(2^(2^j)), j = 0..3 */
    uint32_t modulus;                     /* low 24 bits of the field's polynomial */
    struct log_table log_low;             /* subgroup of order 4095 */
    struct log_table log_high;            /* subgroup of order 4097 */
    uint32_t crt_inverse;                 /* ORDER_LOW^-1 mod ORDER_HIGH */
} tables;

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* ---- single steps ------------------------------------------------------ */

uint32_t lfsr_step(uint32_t state)
{
    uint32_t bit = ((state >> 23) ^ (state >> 22) ^ (state >> 17) ^ state) & 1;
    return ((state & LFSR_MASK) >> 1) | (bit << 23);
}

/*
 * After a step, bits 0..22 hold the old bits 1..23 and bit 23 holds
 * old23 ^ old22 ^ old17 ^ old0; solving for old0 gives the step back.
 */
uint32_t lfsr_step_back(uint32_t state)
{
    uint32_t old0 = ((state >> 23) ^ (state >> 22) ^ (state >> 21) ^
                     (state >> 16)) & 1;
    return ((state << 1) & LFSR_MASK) | old0;
}

/* ---- linear maps ------------------------------------------------------- */

static uint32_t bitmap_apply(const struct bitmap *m, uint32_t v)
{
    return m->byte[0][v & 0xff] ^ m->byte[1][(v >> 8) & 0xff] ^
           m->byte[2][(v >> 16) & 0xff];
}

/* Fills the byte tables of the map whose image of bit i is column[i]. */
static void bitmap_from_columns(struct bitmap *m, const uint32_t column[LFSR_BITS])
{
    for (int b = 0; b < 3; b++) {
        m->byte[b][0] = 0;
        for (unsigned v = 1; v < 256; v++) {
            unsigned low = __builtin_ctz(v);
            m->byte[b][v] = m->byte[b][v & (v - 1)] ^ column[8 * b + low];
        }
    }
}

/* Inverts a 24x24 bit matrix given by columns; returns -1 if singular. */
static int columns_invert(const uint32_t column[LFSR_BITS],
                          uint32_t inverse[LFSR_BITS])
{
    /* Row-reduce [A | I], with rows stored as (A row bits) | (I row bits << 24). */
    uint64_t row[LFSR_BITS];

    for (int r = 0; r < LFSR_BITS; r++) {
        uint64_t bits = 0;
        for (int c = 0; c < LFSR_BITS; c++)
            bits |= (uint64_t)((column[c] >> r) & 1) << c;
        row[r] = bits | (1ull << (LFSR_BITS + r));
    }
    for (int c = 0; c < LFSR_BITS; c++) {
        int pivot = c;
        while (pivot < LFSR_BITS && !((row[pivot] >> c) & 1))
            pivot++;
        if (pivot == LFSR_BITS)
            return -1;
        uint64_t t = row[pivot];
        row[pivot] = row[c];
        row[c] = t;
        for (int r = 0; r < LFSR_BITS; r++)
            if (r != c && ((row[r] >> c) & 1))
                row[r] ^= row[c];
    }
    for (int c = 0; c < LFSR_BITS; c++) {
        uint32_t bits = 0;
        for (int r = 0; r < LFSR_BITS; r++)
            bits |= (uint32_t)((row[r] >> (LFSR_BITS + c)) & 1) << r;
        inverse[c] = bits;
    }
    return 0;
}

/* ---- the field GF(2^24) = GF(2)[x] / (x^24 + modulus) ------------------ */

static uint32_t field_multiply(uint32_t a, uint32_t b)
{
    uint32_t product = 0;

    for (int i = 0; i < LFSR_BITS; i++) {
        product ^= a & -(b & 1);
        b >>= 1;
        a = (a << 1) ^ (tables.modulus & -((a >> 23) & 1));
        a &= LFSR_MASK;
    }
    return product;
}

static uint32_t field_power(uint32_t base, uint64_t exponent)
{
    uint32_t result = 1;

    while (exponent) {
        if (exponent & 1)
            result = field_multiply(result, base);
        base = field_multiply(base, base);
        exponent >>= 1;
    }
    return result;
}

/* y^(2^(2^j)): a linear map, built from the images of the basis x^i. */
static void build_frobenius(struct bitmap *m, int j)
{
    uint32_t column[LFSR_BITS];

    for (int i = 0; i < LFSR_BITS; i++) {
        uint32_t y = 1u << i;
        for (int s = 0; s < (1 << j); s++)
            y = field_multiply(y, y);
        column[i] = y;
    }
    bitmap_from_columns(m, column);
}

static unsigned log_slot(uint32_t element)
{
    return (element * 2654435761u) >> (32 - 13);   /* 13 = log2(LOG_SLOTS) */
}

static void log_table_build(struct log_table *t, uint32_t generator,
                            uint32_t order)
{
    uint32_t element = 1;

    memset(t->element, 0, sizeof(t->element));
    for (uint32_t k = 0; k < order; k++) {
        unsigned slot = log_slot(element);
        while (t->element[slot])
            slot = (slot + 1) & (LOG_SLOTS - 1);
        t->element[slot] = element;
        t->exponent[slot] = (uint16_t)k;
        element = field_multiply(element, generator);
    }
}

/* The exponent of element in the table's subgroup; element must be in it. */
static uint32_t log_table_find(const struct log_table *t, uint32_t element)
{
    unsigned slot = log_slot(element);

    while (t->element[slot] != element) {
        if (!t->element[slot])
            abort();    /* cannot happen for a state of the cycle */
        slot = (slot + 1) & (LOG_SLOTS - 1);
    }
    return t->exponent[slot];
}

/* ---- building the tables ----------------------------------------------- */

static void build_rewind_powers(void)
{
    uint32_t column[LFSR_BITS], squared[LFSR_BITS];

    for (int i = 0; i < LFSR_BITS; i++)
        column[i] = lfsr_step_back(1u << i);
    for (int k = 0; k < LFSR_BITS; k++) {
        bitmap_from_columns(&tables.rewind_pow[k], column);
        for (int i = 0; i < LFSR_BITS; i++)
            squared[i] = bitmap_apply(&tables.rewind_pow[k], column[i]);
        memcpy(column, squared, sizeof(column));
    }
}

/*
 * phi maps S^k(EXPIRY) to x^k for k = 0..23; the field's polynomial is then
 * x^24 + phi(S^24(EXPIRY)), the characteristic polynomial of S.
 */
static void build_field(void)
{
    uint32_t orbit[LFSR_BITS], to_field[LFSR_BITS];
    uint32_t state = LFSR_EXPIRY;

    for (int k = 0; k < LFSR_BITS; k++) {
        orbit[k] = state;
        state = lfsr_step(state);
    }
    if (columns_invert(orbit, to_field) != 0)
        abort();    /* the orbit of a maximal LFSR spans the space */
    bitmap_from_columns(&tables.to_field, to_field);
    tables.modulus = bitmap_apply(&tables.to_field, state);

    for (int j = 0; j < 4; j++)
        build_frobenius(&tables.frobenius[j], j);

    /* x generates the whole group; these generate the two subgroups. */
    log_table_build(&tables.log_low, field_power(2, ORDER_HIGH), ORDER_LOW);
    log_table_build(&tables.log_high, field_power(2, ORDER_LOW), ORDER_HIGH);

    uint32_t inverse = 1;
    while ((ORDER_LOW * inverse) % ORDER_HIGH != 1)
        inverse++;
    tables.crt_inverse = inverse;
}

/* Every value is a short rewind from one of these: see lfsr_value_for_count. */
static void build_expiry_strides(void)
{
    uint32_t state = LFSR_EXPIRY;

    for (uint32_t b = 0; b < EXPIRY_STRIDES; b++) {
        tables.expiry_rewound[b] = state;
        state = bitmap_apply(&tables.rewind_pow[EXPIRY_STRIDE_BITS], state);
    }
}

static void build_tables(void)
{
    build_rewind_powers();
    build_expiry_strides();
    build_field();
}

static void ensure_tables(void)
{
    pthread_once(&tables_once, build_tables);
}

/* ---- jumps --------------------------------------------------------------- */

static uint32_t rewind_by_powers(uint32_t state, uint32_t steps)
{
    for (int k = 0; steps; k++, steps >>= 1)
        if (steps & 1)
            state = bitmap_apply(&tables.rewind_pow[k], state);
    return state;
}

uint32_t lfsr_rewind(uint32_t state, uint32_t steps)
{
    ensure_tables();
    return rewind_by_powers(state & LFSR_MASK, steps % LFSR_PERIOD);
}

uint32_t lfsr_advance(uint32_t state, uint32_t steps)
{
    return lfsr_rewind(state, LFSR_PERIOD - steps % LFSR_PERIOD);
}

uint32_t lfsr_value_for_count(uint32_t count)
{
    if (count < 1 || count > LFSR_PERIOD)
        return LFSR_DISABLED;
    ensure_tables();
    /* At most 12 matrix applications instead of 24. */
    return rewind_by_powers(tables.expiry_rewound[count >> EXPIRY_STRIDE_BITS],
                            count & (EXPIRY_STRIDE - 1));
}

uint32_t lfsr_memo_value(struct lfsr_memo *memo, uint32_t count)
{
    uint32_t slot = count & (LFSR_MEMO_SIZE - 1);

    if (count < 1 || count > LFSR_PERIOD)
        return LFSR_DISABLED;
    if (memo->entry[slot].count != count) {
        memo->entry[slot].value = lfsr_value_for_count(count);
        memo->entry[slot].count = count;
        memo->misses++;
    }
    return memo->entry[slot].value;
}

/* y^(2^12 - 1) = y^(1 + 2 + ... + 2^11), by the chain 1, 3, 15, 255, 4095. */
static uint32_t power_4095(uint32_t y)
{
    const struct bitmap *f = tables.frobenius;
    uint32_t p3 = field_multiply(bitmap_apply(&f[0], y), y);        /* 2^2-1 */
    uint32_t p15 = field_multiply(bitmap_apply(&f[1], p3), p3);     /* 2^4-1 */
    uint32_t p255 = field_multiply(bitmap_apply(&f[2], p15), p15);  /* 2^8-1 */
    return field_multiply(bitmap_apply(&f[2], p255), p15);          /* 2^12-1 */
}

uint32_t lfsr_count_for_value(uint32_t value)
{
    if (value == 0 || value > LFSR_MASK)
        return 0;
    ensure_tables();

    uint32_t y = bitmap_apply(&tables.to_field, value);
    uint32_t y_4096 = bitmap_apply(&tables.frobenius[2],
                                   bitmap_apply(&tables.frobenius[3], y));
    uint32_t e_low = log_table_find(&tables.log_low, field_multiply(y_4096, y));
    uint32_t e_high = log_table_find(&tables.log_high, power_4095(y));

    /* e = e_low + ORDER_LOW * t with e = e_high (mod ORDER_HIGH). */
    uint32_t t = ((e_high + ORDER_HIGH - e_low % ORDER_HIGH) % ORDER_HIGH) *
                 tables.crt_inverse % ORDER_HIGH;
    uint32_t e = e_low + ORDER_LOW * t;

    /* value = S^-count(EXPIRY), so x^e = x^-count. */
    return e == 0 ? LFSR_PERIOD : LFSR_PERIOD - e;
}

/* ---- what users type ----------------------------------------------------- */

/* Parses a finite number and returns the unit text that follows it. */
static int parse_number(const char *text, double *number, const char **unit)
{
    char *end;

    if (text == NULL)
        return -1;
    while (*text == ' ')
        text++;
    if (*text == '\0')
        return -1;
    errno = 0;
    *number = strtod(text, &end);
    if (end == text || errno == ERANGE || !isfinite(*number))
        return -1;
    while (*end == ' ')
        end++;
    *unit = end;
    return 0;
}

static int parse_with_units(const char *text, double *out,
                            const char *const names[], const double scale[],
                            int unit_required)
{
    double number;
    const char *unit;

    if (parse_number(text, &number, &unit) != 0)
        return -1;
    if (*unit == '\0' && !unit_required) {
        *out = number;
        return 0;
    }
    for (int i = 0; names[i]; i++) {
        if (strcasecmp(unit, names[i]) == 0) {
            *out = number * scale[i];
            return 0;
        }
    }
    return -1;
}

int lfsr_parse_seconds(const char *text, double *seconds)
{
    static const char *const names[] = { "ns", "us", "ms", "s", NULL };
    static const double scale[] = { 1e-9, 1e-6, 1e-3, 1.0 };

    return parse_with_units(text, seconds, names, scale, 1);
}

int lfsr_parse_hz(const char *text, double *hz)
{
    static const char *const names[] = { "hz", "khz", "mhz", "ghz", NULL };
    static const double scale[] = { 1.0, 1e3, 1e6, 1e9 };

    return parse_with_units(text, hz, names, scale, 0);
}

static int parse_unsigned(const char *text, int base, uint64_t *out)
{
    char *end;

    if (text == NULL || *text == '\0' || *text == '-' || *text == '+' ||
        *text == ' ')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, base);
    if (*end != '\0' || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

int lfsr_parse_count(const char *text, uint64_t *count)
{
    return parse_unsigned(text, 10, count);
}

int lfsr_parse_value(const char *text, uint64_t *value)
{
    if (text && (strncmp(text, "0x", 2) == 0 || strncmp(text, "0X", 2) == 0))
        return text[2] ? parse_unsigned(text + 2, 16, value) : -1;
    return parse_unsigned(text, 10, value);
}

static int count_from_cycles(double cycles, uint32_t *count)
{
    if (!isfinite(cycles))
        return -1;
    double rounded = floor(cycles + 0.5);
    if (rounded < 1 || rounded > LFSR_PERIOD)
        return -1;
    *count = (uint32_t)rounded;
    return 0;
}

int lfsr_count_for_period(double seconds, double clock_hz, uint32_t *count)
{
    if (!(seconds > 0) || !(clock_hz > 0))
        return -1;
    return count_from_cycles(seconds * clock_hz, count);
}

int lfsr_count_for_frequency(double hz, double clock_hz, uint32_t *count)
{
    if (!(hz > 0) || !(clock_hz > 0))
        return -1;
    return count_from_cycles(clock_hz / hz, count);
}

uint64_t lfsr_poll_interval_ns(uint32_t count, double clock_hz,
                               uint32_t fifo_depth)
{
    if (count < 1 || count > LFSR_PERIOD || fifo_depth == 0 || !(clock_hz > 0))
        return 0;
    double fill_ns = (double)fifo_depth * count / clock_hz * 1e9;
    double interval = floor(fill_ns / LFSR_POLL_MARGIN);
    if (interval > (double)LFSR_POLL_MAX_NS)
        return LFSR_POLL_MAX_NS;
    return interval < 1 ? 1 : (uint64_t)interval;
}

uint32_t lfsr_min_count(double clock_hz, uint32_t fifo_depth)
{
    uint32_t low = 1, high = LFSR_PERIOD;

    if (lfsr_poll_interval_ns(high, clock_hz, fifo_depth) < LFSR_MIN_POLL_NS)
        return 0;
    while (low < high) {
        uint32_t mid = low + (high - low) / 2;

        if (lfsr_poll_interval_ns(mid, clock_hz, fifo_depth)
            >= LFSR_MIN_POLL_NS)
            high = mid;
        else
            low = mid + 1;
    }
    return low;
}

int lfsr_check_count(uint32_t count, double clock_hz, uint32_t fifo_depth,
                     char *err, unsigned long errlen)
{
    uint32_t min = lfsr_min_count(clock_hz, fifo_depth);

    if (min && count >= min && count <= LFSR_PERIOD)
        return 0;
    if (!min)
        snprintf(err, errlen, "SPU_CYCLES:%u: no rate is possible with a "
                 "%u-entry FIFO at %.4g Hz: the driver would have to poll "
                 "more often than every %llu us; use a deeper FIFO", count,
                 fifo_depth, clock_hz, LFSR_MIN_POLL_NS / 1000);
    else if (count > LFSR_PERIOD)
        snprintf(err, errlen, "SPU_CYCLES:%u: outside %u..%u", count, min,
                 LFSR_PERIOD);
    else
        snprintf(err, errlen, "SPU_CYCLES:%u: outside %u..%u at %.4g Hz "
                 "with a %u-entry FIFO: a faster rate fills the FIFO before "
                 "a poll can come (the driver polls at most every %llu us), "
                 "so the coprocessor would stall, or drop captures, at every "
                 "fill; use a deeper FIFO", count, min, LFSR_PERIOD,
                 clock_hz, fifo_depth, LFSR_MIN_POLL_NS / 1000);
    return -1;
}
