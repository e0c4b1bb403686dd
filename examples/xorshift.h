/*
 * xorshift.h — the examples' pseudo-random numbers: Marsaglia's xorshift32
 * (shifts 13, 17, 5), deterministic so that the examples' output can be
 * recomputed (examples/example_models.py).
 */
#ifndef COPROF_EXAMPLES_XORSHIFT_H
#define COPROF_EXAMPLES_XORSHIFT_H

#include <stdint.h>

static inline uint32_t xorshift32(uint32_t *state)
{
    uint32_t x = *state;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

#endif
