/*
 * sampling.c — the dither and FIFO-full options (sampling.h): parsing,
 * defaults, the seed drawn at start, and the words that describe them in
 * summaries and --status.
 */
#include "control/sampling.h"

#include "abi/copdrv-control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void sampling_spec_init(struct sampling_spec *spec)
{
    spec->dither = SAMPLING_UNSET;
    spec->fifo_full = SAMPLING_UNSET;
    spec->seed = 0;
}

void sampling_spec_merge(struct sampling_spec *base,
                         const struct sampling_spec *given)
{
    if (given->dither != SAMPLING_UNSET) {
        base->dither = given->dither;
        base->seed = given->seed;   /* --dither, --no-dither drop a seed */
    }
    if (given->seed)
        base->seed = given->seed;
    if (given->fifo_full != SAMPLING_UNSET)
        base->fifo_full = given->fifo_full;
}

const char *sampling_fifo_name(uint32_t fifo_full)
{
    return fifo_full == COPDRV_FIFO_DROP ? "drop" : "stall";
}

int sampling_fifo_parse(const char *name)
{
    if (strcmp(name, "stall") == 0)
        return COPDRV_FIFO_STALL;
    if (strcmp(name, "drop") == 0)
        return COPDRV_FIFO_DROP;
    return -1;
}

int sampling_parse_seed(const char *text, uint64_t *seed)
{
    unsigned long long n;
    char *end;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    n = strtoull(text, &end, 10);
    if (errno || *end || n == 0 || n > SAMPLING_SEED_MAX)
        return -1;
    *seed = n;
    return 0;
}

int sampling_take_option(struct sampling_spec *spec, int c, const char *arg,
                         char *err, size_t errlen)
{
    int fifo;

    switch (c) {
    case SAMPLING_OPT_DITHER:
    case SAMPLING_OPT_NO_DITHER:
        spec->dither = c == SAMPLING_OPT_DITHER;
        if (!spec->dither && spec->seed) {
            snprintf(err, errlen, "--no-dither and --dither-seed: a seed "
                     "needs the dither");
            return -1;
        }
        return 0;
    case SAMPLING_OPT_SEED:
        if (spec->dither == 0) {
            snprintf(err, errlen, "--dither-seed=%s and --no-dither: a "
                     "seed needs the dither", arg);
            return -1;
        }
        if (sampling_parse_seed(arg, &spec->seed) < 0) {
            snprintf(err, errlen, "--dither-seed=%s: not a seed (a decimal "
                     "number in 1..%llu)", arg,
                     (unsigned long long)SAMPLING_SEED_MAX);
            return -1;
        }
        return 0;
    case SAMPLING_OPT_FIFO_FULL:
        if ((fifo = sampling_fifo_parse(arg)) < 0) {
            snprintf(err, errlen, "--fifo-full=%s: not a policy (stall or "
                     "drop)", arg);
            return -1;
        }
        spec->fifo_full = fifo;
        return 0;
    default:
        snprintf(err, errlen, "unknown sampling option");
        return -1;
    }
}

/* A random seed in 1..SAMPLING_SEED_MAX (0 is "none" in the spec). */
static int draw_seed(uint64_t *seed, char *err, size_t errlen)
{
    do {
        if (getrandom(seed, sizeof(*seed), 0) != (ssize_t)sizeof(*seed)) {
            snprintf(err, errlen, "getrandom: cannot draw a dither seed: %s",
                     strerror(errno));
            return -1;
        }
        *seed &= SAMPLING_SEED_MAX;
    } while (*seed == 0);
    return 0;
}

int sampling_resolve(const struct sampling_spec *spec, struct sampling *out,
                     char *err, size_t errlen)
{
    out->dither = spec->dither != 0;        /* UNSET: on */
    out->fifo_full = spec->fifo_full == SAMPLING_UNSET ? COPDRV_FIFO_STALL :
                     (uint32_t)spec->fifo_full;
    out->seed = 0;
    if (!out->dither)
        return 0;
    if (spec->seed) {
        out->seed = spec->seed;
        return 0;
    }
    return draw_seed(&out->seed, err, errlen);
}

void sampling_describe(int dither, uint64_t seed, const char *fifo_full,
                       char *buf, size_t len)
{
    if (dither)
        snprintf(buf, len, "dither on (seed %llu), FIFO full: %s",
                 (unsigned long long)seed, fifo_full);
    else
        snprintf(buf, len, "dither off, FIFO full: %s", fifo_full);
}

void sampling_describe_stalls(uint64_t count, uint64_t ns, uint64_t run_ns,
                              unsigned slots, char *buf, size_t len)
{
    int n = snprintf(buf, len, "stalled %.2f ms in %llu stall%s",
                     (double)ns / 1e6, (unsigned long long)count,
                     count == 1 ? "" : "s");

    if (run_ns && slots && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " (%.2f%% of the %u %s run "
                 "time)", 100.0 * (double)ns / ((double)run_ns * slots),
                 slots, slots == 1 ? "slot's" : "slots'");
}
