/*
 * rate.c — parsing --event, --sample-period and --frequency, and resolving
 * them into the driver's parameters (see rate.h).
 *
 * All the arithmetic is lfsr/'s: the parsers (lfsr_parse_*), the
 * conversion of a period or frequency into cycles at the nominal clock
 * (lfsr_count_for_*), the LFSR value and the poll interval.  What this file
 * adds is the range in the user's unit: N in 1..LFSR_PERIOD, and no N
 * under lfsr_min_count() (the one minimum-rate rule, which copsim and the
 * driver apply too).  A refusal states the range in the unit the user
 * wrote, and the reason.
 */
#include "control/rate.h"

#include "lfsr/lfsr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *rate_option(enum rate_kind kind)
{
    switch (kind) {
    case RATE_EVENT:
        return "--event";
    case RATE_PERIOD:
        return "--sample-period";
    case RATE_FREQUENCY:
        return "--frequency";
    default:
        return "--event";
    }
}

static const char *const event_names[] = {
    [RATE_SPU_CYCLES] = RATE_EVENT_NAME,
    [RATE_SPU_INSTRUCTIONS] = RATE_INSTRUCTIONS_NAME,
};
#define N_EVENTS (sizeof(event_names) / sizeof(event_names[0]))

const char *rate_event_name(uint32_t event)
{
    return event < N_EVENTS ? event_names[event] : RATE_EVENT_NAME;
}

/* The event named by text[0..len), or -1. */
static int event_by_name(const char *text, size_t len)
{
    for (uint32_t e = 0; e < N_EVENTS; e++)
        if (strlen(event_names[e]) == len &&
            strncmp(text, event_names[e], len) == 0)
            return (int)e;
    return -1;
}

/* "SPU_CYCLES:N" or "SPU_INSTRUCTIONS:N": the name, then a count in range. */
static int parse_event(const char *text, struct rate_spec *spec, char *err,
                       size_t errlen)
{
    const char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : strlen(text);
    int event = event_by_name(text, name_len);
    uint64_t count;

    if (event < 0) {
        snprintf(err, errlen, "--event=%s: unknown event %.*s; the valid "
                 "events are %s:N and %s:N with N in 1..%u (see "
                 "--list-events)", text, (int)name_len, text,
                 RATE_EVENT_NAME, RATE_INSTRUCTIONS_NAME, LFSR_PERIOD);
        return -1;
    }
    if (!colon) {
        snprintf(err, errlen, "--event=%s: no count; give %s:N with N in "
                 "1..%u", text, event_names[event], LFSR_PERIOD);
        return -1;
    }
    if (lfsr_parse_count(colon + 1, &count) < 0) {
        snprintf(err, errlen, "--event=%s: count '%s' is not a number; N "
                 "is in 1..%u", text, colon + 1, LFSR_PERIOD);
        return -1;
    }
    if (count < 1 || count > LFSR_PERIOD) {
        snprintf(err, errlen, "--event=%s: count %llu is outside 1..%u",
                 text, (unsigned long long)count, LFSR_PERIOD);
        return -1;
    }
    spec->count = (uint32_t)count;
    spec->event = (uint32_t)event;
    return 0;
}

int rate_parse(enum rate_kind kind, const char *text, struct rate_spec *spec,
               char *err, size_t errlen)
{
    memset(spec, 0, sizeof(*spec));
    if (strlen(text) >= sizeof(spec->text)) {
        snprintf(err, errlen, "%s=%.20s...: too long", rate_option(kind),
                 text);
        return -1;
    }
    spec->kind = kind;
    snprintf(spec->text, sizeof(spec->text), "%s", text);
    if (kind == RATE_EVENT)
        return parse_event(text, spec, err, errlen);
    if (kind == RATE_PERIOD && (lfsr_parse_seconds(text, &spec->amount) < 0
                                || !(spec->amount > 0))) {
        snprintf(err, errlen, "--sample-period=%s: not a positive time "
                 "with a unit ns, us, ms or s (e.g. 50us)", text);
        return -1;
    }
    if (kind == RATE_FREQUENCY && (lfsr_parse_hz(text, &spec->amount) < 0
                                   || !(spec->amount > 0))) {
        snprintf(err, errlen, "--frequency=%s: not a positive frequency "
                 "in Hz, kHz, MHz or GHz (e.g. 20kHz)", text);
        return -1;
    }
    return 0;
}

int rate_take_option(struct rate_spec *spec, int c, const char *arg,
                     char *err, size_t errlen)
{
    enum rate_kind kind = (enum rate_kind)(c - RATE_OPTION_BASE);

    if (spec->kind != RATE_NONE && spec->kind != kind) {
        snprintf(err, errlen, "%s and %s: give one rate",
                 rate_option(spec->kind), rate_option(kind));
        return -1;
    }
    return rate_parse(kind, arg, spec, err, errlen);
}

void rate_format_hz(double hz, char *buf, size_t len)
{
    static const char *const units[] = {"Hz", "kHz", "MHz", "GHz"};
    int unit = 0;

    while (unit < 3 && fabs(hz) >= 1000.0) {
        hz /= 1000.0;
        unit++;
    }
    snprintf(buf, len, "%.4g %s", hz, units[unit]);
}

void rate_format_seconds(double seconds, char *buf, size_t len)
{
    static const char *const units[] = {"s", "ms", "us", "ns"};
    int unit = 0;

    while (unit < 3 && seconds != 0 && fabs(seconds) < 1.0) {
        seconds *= 1000.0;
        unit++;
    }
    snprintf(buf, len, "%.4g %s", seconds, units[unit]);
}

/* The range of a kind at a clock, in the user's unit, for a refusal. */
static void describe_range(enum rate_kind kind, uint32_t min_count,
                           double clock_hz, char *buf, size_t len)
{
    char low[32], high[32];

    if (kind == RATE_PERIOD) {
        rate_format_seconds(min_count / clock_hz, low, sizeof(low));
        rate_format_seconds(LFSR_PERIOD / clock_hz, high, sizeof(high));
    } else if (kind == RATE_FREQUENCY) {
        rate_format_hz(clock_hz / LFSR_PERIOD, low, sizeof(low));
        rate_format_hz(clock_hz / min_count, high, sizeof(high));
    } else {
        snprintf(low, sizeof(low), "%u", min_count);
        snprintf(high, sizeof(high), "%u", LFSR_PERIOD);
    }
    snprintf(buf, len, "%s..%s", low, high);
}

/* The count a spec asks for at clock_hz; 0 when out of 1..LFSR_PERIOD. */
static uint32_t spec_count(const struct rate_spec *spec, double clock_hz)
{
    uint32_t count = 0;

    if (spec->kind == RATE_EVENT)
        return spec->count;
    if (spec->kind == RATE_PERIOD &&
        lfsr_count_for_period(spec->amount, clock_hz, &count) < 0)
        return 0;
    if (spec->kind == RATE_FREQUENCY &&
        lfsr_count_for_frequency(spec->amount, clock_hz, &count) < 0)
        return 0;
    return count;
}

/* Whether a spec asks for more cycles between captures than the LFSR
 * counts (a rate slower than its slowest). */
static int spec_too_slow(const struct rate_spec *spec, double clock_hz)
{
    double cycles = 0;

    if (spec->kind == RATE_PERIOD)
        cycles = spec->amount * clock_hz;
    else if (spec->kind == RATE_FREQUENCY && spec->amount > 0)
        cycles = clock_hz / spec->amount;
    else if (spec->kind == RATE_EVENT)
        cycles = spec->count;
    return floor(cycles + 0.5) > LFSR_PERIOD;
}

int rate_resolve(const struct rate_spec *spec, double clock_hz,
                 uint32_t fifo_depth, struct rate *rate, char *err,
                 size_t errlen)
{
    uint32_t min_count = lfsr_min_count(clock_hz, fifo_depth);
    uint32_t count = spec_count(spec, clock_hz);
    char range[96], clock[32];

    rate_format_hz(clock_hz, clock, sizeof(clock));
    if (min_count == 0) {
        snprintf(err, errlen, "%s=%s: no rate polls slower than the "
                 "driver's floor of %llu us with a %u-entry FIFO at %s; "
                 "start copsim with a deeper FIFO (--fifo-depth)",
                 rate_option(spec->kind), spec->text,
                 LFSR_MIN_POLL_NS / 1000, fifo_depth, clock);
        return -1;
    }
    describe_range(spec->kind, min_count, clock_hz, range, sizeof(range));
    if (count == 0 && spec_too_slow(spec, clock_hz)) {
        snprintf(err, errlen, "%s=%s: outside %s at the nominal clock of %s "
                 "(too slow: the trace unit's LFSR counts at most %u cycles "
                 "between captures; use a faster rate)",
                 rate_option(spec->kind), spec->text, range, clock,
                 LFSR_PERIOD);
        return -1;
    }
    if (count == 0 || count < min_count) {
        snprintf(err, errlen, "%s=%s: outside %s at the nominal clock of %s "
                 "with a %u-entry FIFO (a faster rate fills the FIFO before "
                 "a poll can come: the driver polls at most every %llu us; "
                 "use a deeper FIFO, copsim --fifo-depth)",
                 rate_option(spec->kind), spec->text, range, clock,
                 fifo_depth, LFSR_MIN_POLL_NS / 1000);
        return -1;
    }
    rate->count = count;
    rate->event = spec->kind == RATE_EVENT ? spec->event : RATE_SPU_CYCLES;
    rate->value = lfsr_value_for_count(count);
    rate->poll_ns = lfsr_poll_interval_ns(count, clock_hz, fifo_depth);
    rate->clock_hz = clock_hz;
    return 0;
}

void rate_describe(const struct rate *rate, char *buf, size_t len)
{
    char period[32], hz[32], clock[32], poll[32];

    rate_format_seconds(rate->count / rate->clock_hz, period, sizeof(period));
    rate_format_hz(rate->clock_hz / rate->count, hz, sizeof(hz));
    rate_format_hz(rate->clock_hz, clock, sizeof(clock));
    rate_format_seconds(rate->poll_ns / 1e9, poll, sizeof(poll));
    if (rate->event == RATE_SPU_INSTRUCTIONS) {
        snprintf(buf, len, "%s:%u (LFSR value 0x%06x), a sample every %u "
                 "retired instructions per slot (at most %s at the nominal "
                 "clock of %s), polled every %s", RATE_INSTRUCTIONS_NAME,
                 rate->count, rate->value, rate->count, hz, clock, poll);
        return;
    }
    snprintf(buf, len, "%s:%u (LFSR value 0x%06x), a sample every %s = %s "
             "per slot at the nominal clock of %s, polled every %s",
             RATE_EVENT_NAME, rate->count, rate->value, period, hz, clock,
             poll);
}
