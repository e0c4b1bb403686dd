/*
 * sampling.h — how the captures are taken, besides their rate (rate.h):
 * the dither and what a full FIFO does, as copcontrol and coprof record
 * take them from the command line and send them in the driver's SET
 * (abi/copdrv-control.h).
 *
 *   --no-dither, --dither   dither off / on (default on).  With dither, each
 *                           capture interval is N plus a bounded jitter of
 *                           mean 0 drawn by the trace unit from a seeded
 *                           generator (like ARM SPE's PMSIRR.RND), so code
 *                           in step with a fixed period (a loop whose
 *                           length divides N) is not sampled at one place.
 *   --dither-seed=S         the generator's seed (decimal, 1..2^63-1), to
 *                           repeat a capture sequence; default: drawn from
 *                           getrandom at each start
 *   --fifo-full=stall|drop  a full trace FIFO stalls the coprocessor until
 *                           the driver drains it (default: no capture lost,
 *                           only wall time passes), or drops the capture
 *                           and counts it (the Cell's behaviour)
 *
 * A spec holds what was given (SAMPLING_UNSET where nothing was);
 * sampling_resolve() fills in the defaults and draws the seed.
 */
#ifndef COPROF_CONTROL_SAMPLING_H
#define COPROF_CONTROL_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLING_UNSET      (-1)
/* Seeds stay in SQLite's (and the session's) signed 64-bit integers. */
#define SAMPLING_SEED_MAX   UINT64_C(0x7fffffffffffffff)

struct sampling_spec {
    int dither;                 /* 1 on, 0 off, SAMPLING_UNSET */
    int fifo_full;              /* COPDRV_FIFO_STALL or _DROP, or UNSET */
    uint64_t seed;              /* 0: none given */
};

/* Resolved: what the driver gets. */
struct sampling {
    int dither;
    uint32_t fifo_full;
    uint64_t seed;              /* 0 when dither is off */
};

/* The options in an option table (common/cli.h), keys SAMPLING_OPTION_BASE
 * + n. */
#define SAMPLING_OPTION_BASE    0x3000
enum {
    SAMPLING_OPT_DITHER = SAMPLING_OPTION_BASE,
    SAMPLING_OPT_NO_DITHER, SAMPLING_OPT_SEED, SAMPLING_OPT_FIFO_FULL,
    SAMPLING_OPT_END
};
#define SAMPLING_LONG_OPTIONS \
    {0, "dither", no_argument, SAMPLING_OPT_DITHER}, \
    {0, "no-dither", no_argument, SAMPLING_OPT_NO_DITHER}, \
    {0, "dither-seed", required_argument, SAMPLING_OPT_SEED}, \
    {0, "fifo-full", required_argument, SAMPLING_OPT_FIFO_FULL}
#define SAMPLING_IS_OPTION(c) \
    ((c) >= SAMPLING_OPTION_BASE && (c) < SAMPLING_OPT_END)

/* Takes one of the options; 0, or -1 with one line in err. */
int sampling_take_option(struct sampling_spec *spec, int c, const char *arg,
                         char *err, size_t errlen);

/* A spec with nothing given. */
void sampling_spec_init(struct sampling_spec *spec);

/* Whatever `given` sets replaces base's. */
void sampling_spec_merge(struct sampling_spec *base,
                         const struct sampling_spec *given);

/* The words of the settings file and the session: "stall", "drop". */
const char *sampling_fifo_name(uint32_t fifo_full);
/* COPDRV_FIFO_* for a name, or -1. */
int sampling_fifo_parse(const char *name);
/* A decimal seed in 1..SAMPLING_SEED_MAX; 0, or -1. */
int sampling_parse_seed(const char *text, uint64_t *seed);

/*
 * Defaults filled in (dither on, FIFO stall) and, for dither without a
 * seed, one drawn from getrandom; 0, or -1 with one line in err.
 */
int sampling_resolve(const struct sampling_spec *spec, struct sampling *out,
                     char *err, size_t errlen);

/* "dither on (seed 1234), FIFO full: stall". */
void sampling_describe(int dither, uint64_t seed, const char *fifo_full,
                       char *buf, size_t len);

/*
 * "stalled 1.2 ms in 5 stalls (0.01% of the 8 slots' run time)"; the share
 * is left out when run_ns is 0.
 */
void sampling_describe_stalls(uint64_t count, uint64_t ns, uint64_t run_ns,
                              unsigned slots, char *buf, size_t len);

#endif
