/*
 * lfsr.h — exact values for the trace unit's 24-bit LFSR sample counter.
 *
 * The trace unit (docs/trace-unit.md) counts with the Cell SPU's
 * 24-bit Fibonacci LFSR: each cycle the state shifts right by one and the new
 * bit 23 is the XOR of bits 23, 22, 17 and 0.  When the state reaches
 * LFSR_EXPIRY (0xFFFFFF) the unit captures a PC and reloads the programmed
 * value.  So "one sample every N cycles" needs the value V that reaches
 * 0xFFFFFF after exactly N steps: lfsr_value_for_count(N).  Its inverse,
 * lfsr_count_for_value(V), says how many cycles a programmed value stands for.
 * Both are exact and take well under a microsecond (see lfsr.c for how).
 *
 * The rest converts what a user asks for ("50us", "10kHz" at a given
 * coprocessor clock) into N, and computes the poll interval that drains a
 * trace FIFO before it can overflow.
 *
 * The library is thread-safe; its tables are built on first use.
 */
#ifndef COPROF_LFSR_H
#define COPROF_LFSR_H

#include <stdint.h>

#define LFSR_BITS      24
#define LFSR_MASK      0xFFFFFFu
#define LFSR_EXPIRY    0xFFFFFFu    /* the state at which a capture happens */
#define LFSR_PERIOD    16777215u    /* 2^24 - 1: the largest count */
#define LFSR_DISABLED  0u           /* programmed value that stops capture */

/* One step forward (one cycle) and one step back.  State 0 maps to 0. */
uint32_t lfsr_step(uint32_t state);
uint32_t lfsr_step_back(uint32_t state);

/* Many steps at once, in O(log steps); steps may be any 32-bit number. */
uint32_t lfsr_advance(uint32_t state, uint32_t steps);
uint32_t lfsr_rewind(uint32_t state, uint32_t steps);

/*
 * The value that reaches LFSR_EXPIRY after exactly count steps, for count in
 * 1 .. LFSR_PERIOD (the full period gives 0xFFFFFF itself).  Returns
 * LFSR_DISABLED (0), which is never a valid value, when count is out of range.
 */
uint32_t lfsr_value_for_count(uint32_t count);

/*
 * The inverse: the number of steps, 1 .. LFSR_PERIOD, from value to
 * LFSR_EXPIRY.  Returns 0 when value is 0 or has bits above bit 23.
 */
uint32_t lfsr_count_for_value(uint32_t value);

/*
 * A memo of lfsr_value_for_count for one caller that asks for the same
 * counts again and again: the trace unit's reload with dither asks for N
 * plus a jitter of under N/2 either way at every capture, so one value
 * in a few hundred cycles, each a dozen table-driven matrix products.
 * Direct-mapped by the count's low LFSR_MEMO_BITS bits, so any run of up
 * to LFSR_MEMO_SIZE consecutive counts (every dithered interval of an N
 * up to 2 * LFSR_MEMO_SIZE) is computed once; other counts only evict
 * each other.  A zeroed memo is empty.  Not thread-safe: one memo per
 * thread.  misses counts the values it had to compute.
 */
#define LFSR_MEMO_BITS 12
#define LFSR_MEMO_SIZE (1u << LFSR_MEMO_BITS)
struct lfsr_memo {
    struct {
        uint32_t count;     /* 0: empty */
        uint32_t value;
    } entry[LFSR_MEMO_SIZE];
    uint64_t misses;
};

/* lfsr_value_for_count(count), from the memo when it holds it. */
uint32_t lfsr_memo_value(struct lfsr_memo *memo, uint32_t count);

/*
 * Parsing what a user types.  Each returns 0 on success and -1 on bad text.
 *   lfsr_parse_seconds: a number with a unit ns, us, ms or s ("50us", "1.5ms")
 *   lfsr_parse_hz:      a number with an optional unit Hz, kHz, MHz or GHz
 *                       ("1e9", "800MHz", "10kHz")
 *   lfsr_parse_count:   a decimal count of cycles ("50000")
 *   lfsr_parse_value:   an LFSR value, hexadecimal with 0x or decimal
 * The parsers check only syntax; the range checks are separate.
 */
int lfsr_parse_seconds(const char *text, double *seconds);
int lfsr_parse_hz(const char *text, double *hz);
int lfsr_parse_count(const char *text, uint64_t *count);
int lfsr_parse_value(const char *text, uint64_t *value);

/*
 * Converts a sample period in seconds, or a sample frequency in Hz, at a
 * coprocessor clock of clock_hz into a count of cycles, rounded to the
 * nearest cycle.  Returns 0 and sets *count, or -1 when the result is outside
 * 1 .. LFSR_PERIOD or an input is not a positive finite number.
 */
int lfsr_count_for_period(double seconds, double clock_hz, uint32_t *count);
int lfsr_count_for_frequency(double hz, double clock_hz, uint32_t *count);

/*
 * The poll interval that keeps a trace FIFO of fifo_depth entries from
 * overflowing when it captures once every count cycles at clock_hz.
 *
 * Safety margin: the FIFO is drained when, at the nominal rate, it is at
 * most 1/LFSR_POLL_MARGIN full, so a poll may come LFSR_POLL_MARGIN times
 * late before anything is lost.  The interval is capped at LFSR_POLL_MAX_NS
 * so lost-sample counts and overlay states stay fresh at slow rates.
 * Returns 0 when an input is out of range (count 0, depth 0, clock <= 0).
 */
#define LFSR_POLL_MARGIN  2
#define LFSR_POLL_MAX_NS  100000000ull   /* 100 ms */
uint64_t lfsr_poll_interval_ns(uint32_t count, double clock_hz,
                               uint32_t fifo_depth);

/*
 * The minimum-rate rule, in one place for copsim, the driver's start path
 * and copcontrol/coprof: the smallest N the profiler takes at clock_hz
 * with a fifo_depth-entry FIFO (157 with copsim's defaults, 3.2 GHz and
 * 4096 entries).  The driver polls at lfsr_poll_interval_ns(N, ...), and
 * a poll thread is not woken reliably (nor cheaply: each wakeup costs
 * microseconds of CPU) more often than every LFSR_MIN_POLL_NS.  With the
 * stall policy nothing is lost at any N, but a smaller N fills the FIFO
 * faster than such polls drain it, so the coprocessor would stall (or,
 * dropping, lose captures) at every fill; the doorbell wakes the driver
 * early, but its wakeups cost the same.  bench/trace-unit measured
 * host-pipeline at N = 157 with 4096 entries on a loaded machine: about 3%
 * of each slot's time stalled, none at 16384.  A faster rate needs a
 * deeper FIFO.  Returns 0 when no N reaches the floor.
 *
 * lfsr_check_count() applies it: 0, or -1 with one line in err that names
 * N, the range and the reason.
 */
#define LFSR_MIN_POLL_NS  100000ull      /* 100 us */
uint32_t lfsr_min_count(double clock_hz, uint32_t fifo_depth);
int lfsr_check_count(uint32_t count, double clock_hz, uint32_t fifo_depth,
                     char *err, unsigned long errlen);

#endif /* COPROF_LFSR_H */
