/*
 * knob — a coprocessor program of known shape for copreport's tests:
 * four steady functions of equal cost and one, knob_work, whose cost a
 * compile-time knob multiplies (-DKNOB_FACTOR=2: twice as slow).
 *
 *   knob [ROUNDS]        (default 20)
 *
 * Per round each steady_* function runs STEADY_ITERS iterations of a
 * loop of its own (about 24% of the instructions each at factor 1) and
 * knob_work KNOB_ITERS * KNOB_FACTOR (about 1%), so that a diff of the
 * factor-2 build against the factor-1 build has one function that
 * changed (its share about doubles) while the others' shares move by
 * about 1% of themselves.  Every loop is a few instructions of one
 * basic block, so its hottest instruction is in its body.  The output
 * is one digest line.
 */
#include "sdk/cop.h"

#include <stdlib.h>

#ifndef KNOB_FACTOR
#define KNOB_FACTOR 1
#endif
#define DEFAULT_ROUNDS 20
#define STEADY_ITERS 50000
#define KNOB_ITERS 2000

__attribute__((noinline)) uint32_t steady_add(uint32_t x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        x = x * 1103515245u + 12345u;
    return x;
}

__attribute__((noinline)) uint32_t steady_xor(uint32_t x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        x ^= (x << 13) ^ i;
    return x;
}

__attribute__((noinline)) uint32_t steady_rot(uint32_t x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        x = ((x << 7) | (x >> 25)) + i;
    return x;
}

__attribute__((noinline)) uint32_t steady_sub(uint32_t x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        x = (x - 0x9e3779b9u) ^ (i >> 3);
    return x;
}

__attribute__((noinline)) uint32_t knob_work(uint32_t x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        x = x * 69069u + i;
    return x;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ROUNDS;
    uint32_t x = 1;

    if (rounds <= 0) {
        cop_printf("knob: ROUNDS must be a positive number\n");
        return 2;
    }
    for (long r = 0; r < rounds; r++) {
        x = steady_add(x, STEADY_ITERS);
        x = steady_xor(x, STEADY_ITERS);
        x = steady_rot(x, STEADY_ITERS);
        x = steady_sub(x, STEADY_ITERS);
        x = knob_work(x, KNOB_ITERS * KNOB_FACTOR);
    }
    cop_printf("knob rounds=%ld factor=%d digest=%08lx\n", rounds,
               KNOB_FACTOR, (unsigned long)x);
    return 0;
}
