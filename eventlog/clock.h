/*
 * clock.h — record timestamps and their conversion to CLOCK_MONOTONIC.
 *
 * See clock.c for how the clock is chosen and calibrated.
 */
#ifndef COPROF_EVENTLOG_CLOCK_H
#define COPROF_EVENTLOG_CLOCK_H

#include "eventlog/coplog.h"
#include "eventlog/layout.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CLOCK_HAS_TSC 1
#else
#define CLOCK_HAS_TSC 0
#endif

static inline uint64_t clock_monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* The raw clock, for the writers' fast path: not ordered against earlier
 * instructions (readers allow for that, see reader.c). */
static inline uint64_t clock_read(enum coplog_clock kind)
{
#if CLOCK_HAS_TSC
    if (kind == COPLOG_CLOCK_TSC)
        return __rdtsc();
#endif
    (void)kind;
    return clock_monotonic_ns();
}

/* The raw clock, not read before earlier loads nor after later ones. */
uint64_t clock_read_fenced(enum coplog_clock kind);

/* Whether /proc/cpuinfo says the TSC is invariant (constant_tsc and
 * nonstop_tsc). */
bool clock_tsc_invariant(void);

/* The clock a new log uses for a requested one (AUTO resolved). */
enum coplog_clock clock_choose(enum coplog_clock requested);

/* Measures the raw clock against CLOCK_MONOTONIC and stores the first
 * calibration pairs and the schedule of later ones in a new header. */
void clock_init_header(struct layout_header *header, enum coplog_clock kind);

/* Adds a calibration pair if the interval since the last one has passed;
 * writers call it with the clock of a record they just wrote. */
void clock_calibrate_due(struct layout_header *header, enum coplog_clock kind,
                         uint64_t clock);

/* Adds a calibration pair now. */
void clock_calibrate(struct layout_header *header, enum coplog_clock kind);

/* The calibration pairs of a file, sorted, for conversions. */
struct clock_pair {
    uint64_t clock;
    uint64_t ns;
};

struct clock_map {
    enum coplog_clock kind;
    double hz;                  /* the header's rate, a last resort */
    unsigned count;
    struct clock_pair pair[LAYOUT_CALIBRATIONS];
};

/* Reads the pairs of a (possibly corrupt) header.  A corrupt header gives
 * wrong times, never a crash. */
void clock_map_load(struct clock_map *map, const struct layout_header *header);
uint64_t clock_map_ns(const struct clock_map *map, uint64_t clock);
uint64_t clock_map_clock(const struct clock_map *map, uint64_t ns);

/* Raw ticks in a duration of ns nanoseconds, from the header's rate. */
uint64_t clock_ticks(const struct clock_map *map, uint64_t ns);

#endif /* COPROF_EVENTLOG_CLOCK_H */
