/*
 * clock.c — record timestamps and their conversion to CLOCK_MONOTONIC.
 *
 * A writer stamps each record with a raw clock read in its fast path, and
 * readers convert it to CLOCK_MONOTONIC nanoseconds.  The raw clock is the
 * TSC when /proc/cpuinfo says it is invariant (constant_tsc: one rate at any
 * frequency; nonstop_tsc: it keeps counting in idle states), since rdtsc
 * costs about 11 ns on this project's machine against 25 ns for
 * clock_gettime.  Otherwise it is CLOCK_MONOTONIC itself, and conversion is
 * the identity.  The Linux trace clocks and LTTng do the same.
 *
 * Conversion goes through calibration pairs (raw, ns) stored in the file's
 * header.  A pair is taken by reading the TSC on both sides of clock_gettime
 * a few times and keeping the tightest bracket.  Creation stores two pairs
 * 2 ms apart (they also give the rate, clock_hz) that are never replaced;
 * then the first writer to see that a second has passed since the last pair
 * adds one, round-robin over the other slots, so a log always holds pairs
 * from its last minute of writing.  A reader sorts the pairs and converts
 * piecewise linearly between them, extrapolating from the nearest segment
 * outside.  Each pair is guarded by a sequence word like a seqlock, so a
 * reader never uses a half-written one.
 */
#include "eventlog/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIR_TRIES         5
#define CREATION_SPAN_NS   2000000u     /* between the two creation pairs */
#define CALIBRATION_NS     1000000000u  /* between later pairs */

uint64_t clock_read_fenced(enum coplog_clock kind)
{
#if CLOCK_HAS_TSC
    if (kind == COPLOG_CLOCK_TSC) {
        uint64_t clock;

        _mm_lfence();
        clock = __rdtsc();
        _mm_lfence();
        return clock;
    }
#endif
    (void)kind;
    return clock_monotonic_ns();
}

static bool flags_line_has(const char *line, const char *flag)
{
    size_t length = strlen(flag);
    const char *at = line;

    while ((at = strstr(at, flag)) != NULL) {
        bool starts = at == line || at[-1] == ' ' || at[-1] == '\t';
        bool ends = at[length] == ' ' || at[length] == '\n' ||
                    at[length] == '\0';
        if (starts && ends)
            return true;
        at += length;
    }
    return false;
}

bool clock_tsc_invariant(void)
{
    char line[8192];
    bool invariant = false;
    FILE *cpuinfo;

    if (!CLOCK_HAS_TSC)
        return false;
    cpuinfo = fopen("/proc/cpuinfo", "r");
    if (cpuinfo == NULL)
        return false;
    while (fgets(line, sizeof line, cpuinfo) != NULL) {
        if (strncmp(line, "flags", 5) == 0) {
            invariant = flags_line_has(line, "constant_tsc") &&
                        flags_line_has(line, "nonstop_tsc");
            break;
        }
    }
    fclose(cpuinfo);
    return invariant;
}

enum coplog_clock clock_choose(enum coplog_clock requested)
{
    const char *forced = getenv("COPLOG_CLOCK");

    if (requested == COPLOG_CLOCK_AUTO && forced != NULL) {
        if (strcmp(forced, "tsc") == 0)
            requested = COPLOG_CLOCK_TSC;
        else if (strcmp(forced, "monotonic") == 0)
            requested = COPLOG_CLOCK_MONOTONIC;
    }
    if (requested == COPLOG_CLOCK_AUTO)
        requested = clock_tsc_invariant() ? COPLOG_CLOCK_TSC
                                          : COPLOG_CLOCK_MONOTONIC;
    if (requested == COPLOG_CLOCK_TSC && !CLOCK_HAS_TSC)
        requested = COPLOG_CLOCK_MONOTONIC;
    return requested;
}

/* One pair: the raw clock at the midpoint of the tightest bracket. */
static struct clock_pair clock_pair_take(enum coplog_clock kind)
{
    struct clock_pair best = { 0, 0 };
    uint64_t best_span = UINT64_MAX;

    if (kind != COPLOG_CLOCK_TSC) {
        best.ns = clock_monotonic_ns();
        best.clock = best.ns;
        return best;
    }
    for (int i = 0; i < PAIR_TRIES; i++) {
        uint64_t before = clock_read_fenced(kind);
        uint64_t ns = clock_monotonic_ns();
        uint64_t after = clock_read_fenced(kind);

        if (after - before < best_span) {
            best_span = after - before;
            best.clock = before + best_span / 2;
            best.ns = ns;
        }
    }
    return best;
}

/* Stores a pair in slot; gives up if another writer is writing it. */
static void calibration_store(struct layout_calibration *slot,
                              struct clock_pair pair)
{
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);

    if ((seq & 1) ||
        !atomic_compare_exchange_strong_explicit(&slot->seq, &seq, seq + 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&slot->clock, pair.clock, memory_order_relaxed);
    atomic_store_explicit(&slot->ns, pair.ns, memory_order_relaxed);
    atomic_store_explicit(&slot->seq, seq + 2, memory_order_release);
}

void clock_init_header(struct layout_header *header, enum coplog_clock kind)
{
    struct clock_pair first, second;

    header->clock_kind = kind;
    if (kind != COPLOG_CLOCK_TSC) {
        header->clock_hz = 1000000000u;
        header->calibration_interval = CALIBRATION_NS;
        atomic_store(&header->next_calibration, UINT64_MAX);
        return;
    }
    first = clock_pair_take(kind);
    while (clock_monotonic_ns() < first.ns + CREATION_SPAN_NS)
        ;
    second = clock_pair_take(kind);
    header->clock_hz = (uint64_t)((double)(second.clock - first.clock) * 1e9 /
                                  (double)(second.ns - first.ns) + 0.5);
    header->calibration_interval = header->clock_hz;
    calibration_store(&header->calibration[0], first);
    calibration_store(&header->calibration[1], second);
    atomic_store(&header->calibration_count, LAYOUT_PINNED_PAIRS);
    atomic_store(&header->next_calibration,
                 second.clock + header->calibration_interval);
}

void clock_calibrate(struct layout_header *header, enum coplog_clock kind)
{
    const uint64_t rotating = LAYOUT_CALIBRATIONS - LAYOUT_PINNED_PAIRS;
    uint64_t index;

    if (kind != COPLOG_CLOCK_TSC)
        return;
    index = atomic_fetch_add_explicit(&header->calibration_count, 1,
                                      memory_order_relaxed);
    index = LAYOUT_PINNED_PAIRS + index % rotating;
    calibration_store(&header->calibration[index], clock_pair_take(kind));
}

void clock_calibrate_due(struct layout_header *header, enum coplog_clock kind,
                         uint64_t clock)
{
    uint64_t next = atomic_load_explicit(&header->next_calibration,
                                         memory_order_relaxed);

    if (clock < next)
        return;
    /* One writer wins the right to take this pair. */
    if (!atomic_compare_exchange_strong_explicit(
            &header->next_calibration, &next,
            clock + header->calibration_interval,
            memory_order_relaxed, memory_order_relaxed))
        return;
    clock_calibrate(header, kind);
}

static int pair_compare(const void *a, const void *b)
{
    const struct clock_pair *x = a, *y = b;

    return (x->clock > y->clock) - (x->clock < y->clock);
}

static bool calibration_load(const struct layout_calibration *slot,
                             struct clock_pair *pair)
{
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);

    if (seq == 0 || (seq & 1))
        return false;
    pair->clock = atomic_load_explicit(&slot->clock, memory_order_relaxed);
    pair->ns = atomic_load_explicit(&slot->ns, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&slot->seq, memory_order_relaxed) == seq;
}

void clock_map_load(struct clock_map *map, const struct layout_header *header)
{
    struct clock_pair pairs[LAYOUT_CALIBRATIONS];
    unsigned found = 0;

    map->kind = header->clock_kind == COPLOG_CLOCK_TSC ? COPLOG_CLOCK_TSC
                                                       : COPLOG_CLOCK_MONOTONIC;
    map->hz = header->clock_hz > 0 ? (double)header->clock_hz : 1e9;
    map->count = 0;
    if (map->kind != COPLOG_CLOCK_TSC)
        return;
    for (unsigned i = 0; i < LAYOUT_CALIBRATIONS; i++)
        if (calibration_load(&header->calibration[i], &pairs[found]))
            found++;
    qsort(pairs, found, sizeof pairs[0], pair_compare);
    /* Keep a strictly increasing chain: segments then never divide by 0. */
    for (unsigned i = 0; i < found; i++) {
        if (map->count > 0) {
            const struct clock_pair *last = &map->pair[map->count - 1];

            if (pairs[i].clock <= last->clock || pairs[i].ns <= last->ns)
                continue;
        }
        map->pair[map->count++] = pairs[i];
    }
}

static uint64_t clamp_real(long double value)
{
    if (!(value > 0))
        return 0;
    if (value >= 18446744073709551615.0L)
        return UINT64_MAX;
    return (uint64_t)value;
}

static uint64_t clamp_u64(__int128 value)
{
    if (value < 0)
        return 0;
    if (value > (__int128)UINT64_MAX)
        return UINT64_MAX;
    return (uint64_t)value;
}

/* y at x on the line through (x0, y0) and (x1, y1), with x1 > x0: exact
 * in 128-bit integers, in long double when the product could overflow
 * (only pairs of a corrupt file are that far apart). */
static uint64_t interpolate(uint64_t x, uint64_t x0, uint64_t y0,
                            uint64_t x1, uint64_t y1)
{
    const __int128 limit = (__int128)1 << 62;
    __int128 dx = (__int128)x - x0, dy = (__int128)y1 - y0;

    if (dx >= limit || dx <= -limit || dy >= limit)
        return clamp_real((long double)y0 + (long double)dx *
                          (long double)dy / (long double)(x1 - x0));
    return clamp_u64((__int128)y0 + dx * dy / ((__int128)x1 - x0));
}

/* The coordinates of a pair: (x, y) = (clock, ns) to convert clocks to ns,
 * (ns, clock) the other way. */
static uint64_t pair_x(const struct clock_pair *pair, bool from_ns)
{
    return from_ns ? pair->ns : pair->clock;
}

static uint64_t pair_y(const struct clock_pair *pair, bool from_ns)
{
    return from_ns ? pair->clock : pair->ns;
}

/* The segment to use for x: the pair at or before it, clamped so that a
 * following pair exists. */
static unsigned segment_for(const struct clock_map *map, uint64_t x,
                            bool from_ns)
{
    unsigned low = 0, high = map->count - 1;

    while (low + 1 < high) {
        unsigned middle = (low + high) / 2;

        if (pair_x(&map->pair[middle], from_ns) <= x)
            low = middle;
        else
            high = middle;
    }
    return low;
}

/* Converts x along the calibration pairs; with fewer than two pairs, along
 * the header's rate. */
static uint64_t map_convert(const struct clock_map *map, uint64_t x,
                            bool from_ns)
{
    long double y_per_x = from_ns ? map->hz / 1e9L : 1e9L / map->hz;
    const struct clock_pair *a, *b;
    unsigned i;

    if (map->kind != COPLOG_CLOCK_TSC)
        return x;
    if (map->count == 0)
        return clamp_real((long double)x * y_per_x);
    a = &map->pair[0];
    if (map->count == 1)
        return clamp_real((long double)pair_y(a, from_ns) +
                          ((long double)x - pair_x(a, from_ns)) * y_per_x);
    i = segment_for(map, x, from_ns);
    a = &map->pair[i];
    b = &map->pair[i + 1];
    return interpolate(x, pair_x(a, from_ns), pair_y(a, from_ns),
                       pair_x(b, from_ns), pair_y(b, from_ns));
}

uint64_t clock_map_ns(const struct clock_map *map, uint64_t clock)
{
    return map_convert(map, clock, false);
}

uint64_t clock_map_clock(const struct clock_map *map, uint64_t ns)
{
    return map_convert(map, ns, true);
}

uint64_t clock_ticks(const struct clock_map *map, uint64_t ns)
{
    if (map->kind != COPLOG_CLOCK_TSC)
        return ns;
    return clamp_real((long double)ns * map->hz / 1e9L);
}
