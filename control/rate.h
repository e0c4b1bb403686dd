/*
 * rate.h — what a user asks to sample at, turned into what the driver needs.
 *
 * A rate is given one of three ways: --event=SPU_CYCLES:N (one sample every
 * N modelled cycles of a slot) or --event=SPU_INSTRUCTIONS:N (every N
 * retired instructions), --sample-period=TIME or --frequency=HZ (converted
 * into SPU_CYCLES:N through copsim's nominal clock, 3.2 GHz by default).  rate_parse() checks what
 * can be checked without copsim (the syntax, the event's name, N's range);
 * rate_resolve() finishes the job once copsim's nominal clock and FIFO
 * depth are known: N, the LFSR value for N (lfsr_value_for_count) and the
 * poll interval (lfsr_poll_interval_ns), refusing an N under lfsr/'s one
 * minimum-rate rule (lfsr_min_count: polls no more often than
 * LFSR_MIN_POLL_NS).  Every refusal is one line naming what was given,
 * the valid range and the reason.
 */
#ifndef COPROF_CONTROL_RATE_H
#define COPROF_CONTROL_RATE_H

#include <stddef.h>
#include <stdint.h>

#define RATE_EVENT_NAME     "SPU_CYCLES"
#define RATE_INSTRUCTIONS_NAME "SPU_INSTRUCTIONS"
#define RATE_TEXT_MAX       96
/*
 * The rate when none is given: at least 10,000 samples of
 * `coprof record -- build/examples/host-pipeline` (64.0 million modelled
 * cycles at its defaults: 12,800 samples); prime, so no loop length
 * divides it even without the dither (control/README.md, "The rate").
 * It was 2003 while SPU_CYCLES counted instructions (26.1 million): the
 * cycle clock runs about 2.5 times faster, and the same density of
 * samples over the program's work costs the same at 4999.
 */
#define RATE_DEFAULT_EVENT  RATE_EVENT_NAME ":4999"

enum rate_kind { RATE_NONE, RATE_EVENT, RATE_PERIOD, RATE_FREQUENCY };

/*
 * The event that clocks the slots' LFSRs; the values are the driver's
 * (COPDRV_EVENT_*, the trace unit's TRACE_EVENT_*).
 */
enum rate_event {
    RATE_SPU_CYCLES = 0,        /* the timing model's cycles */
    RATE_SPU_INSTRUCTIONS = 1   /* retired instructions */
};

/* "SPU_CYCLES", "SPU_INSTRUCTIONS"; "SPU_CYCLES" for another value. */
const char *rate_event_name(uint32_t event);

/* A rate as the user gave it. */
struct rate_spec {
    enum rate_kind kind;
    char text[RATE_TEXT_MAX];   /* the option's value, e.g. "SPU_CYCLES:997" */
    uint32_t count;             /* RATE_EVENT: N */
    uint32_t event;             /* enum rate_event (period, frequency:
                                   SPU_CYCLES) */
    double amount;              /* RATE_PERIOD: seconds; RATE_FREQUENCY: Hz */
};

/* A rate resolved at a clock and FIFO depth. */
struct rate {
    uint32_t count;             /* events per sample */
    uint32_t event;             /* enum rate_event */
    uint32_t value;             /* the LFSR value for count */
    uint64_t poll_ns;           /* the driver's poll interval */
    double clock_hz;            /* the nominal clock it was resolved at */
};

/*
 * The three options in an option table (common/cli.h): RATE_LONG_OPTIONS
 * expands to their entries, whose values are RATE_OPTION_BASE + kind, and
 * rate_take_option() takes one of them, refusing a second kind.
 */
#define RATE_OPTION_BASE    0x1000
#define RATE_LONG_OPTIONS \
    {0, "event", required_argument, RATE_OPTION_BASE + RATE_EVENT}, \
    {0, "sample-period", required_argument, \
     RATE_OPTION_BASE + RATE_PERIOD}, \
    {0, "frequency", required_argument, RATE_OPTION_BASE + RATE_FREQUENCY}
#define RATE_IS_OPTION(c) \
    ((c) > RATE_OPTION_BASE + RATE_NONE && \
     (c) <= RATE_OPTION_BASE + RATE_FREQUENCY)

int rate_take_option(struct rate_spec *spec, int c, const char *arg,
                     char *err, size_t errlen);

/* The option that sets a kind ("--event", ...). */
const char *rate_option(enum rate_kind kind);

/* Parses an option's value; 0, or -1 with one line in err. */
int rate_parse(enum rate_kind kind, const char *text, struct rate_spec *spec,
               char *err, size_t errlen);

/* N, the LFSR value and the poll interval; 0, or -1 with one line in err. */
int rate_resolve(const struct rate_spec *spec, double clock_hz,
                 uint32_t fifo_depth, struct rate *rate, char *err,
                 size_t errlen);

/* "3.2 GHz", "31.25 us": for messages. */
void rate_format_hz(double hz, char *buf, size_t len);
void rate_format_seconds(double seconds, char *buf, size_t len);

/*
 * One line describing a resolved rate: "SPU_CYCLES:N (LFSR value 0x..),
 * one sample every T = F Hz per slot at the nominal clock of C, polled
 * every P"; for SPU_INSTRUCTIONS:N "a sample every N retired instructions
 * per slot (at most F at the nominal clock of C), polled every P".
 */
void rate_describe(const struct rate *rate, char *buf, size_t len);

#endif
