/*
 * alias — a loop whose length divides a sampling period: the test case of
 * aliasing (issue 13, docs/trace-unit.md "Dither").
 *
 *   alias [ROUNDS [ITERATIONS]]     (default 4 and 1,000,000)
 *
 * Each round runs the 7-instruction loop of loop.S ITERATIONS times from
 * a seed of its own (the round number), so one round is 7 x ITERATIONS
 * instructions (7,000,000 by default) and their split is exact: alias_head 1/7 (14.3%),
 * alias_mid 2/7 (28.6%), alias_tail 4/7 (57.1%), less the few hundred
 * instructions of main and the runtime.  Sampled at SPU_CYCLES:1001 (7 x
 * 143) without dither, every capture lands on the same instruction and one
 * function takes them all; with the trace unit's dither the shares come
 * out right.  The output is one line, "alias rounds=R digest=XXXXXXXX",
 * which examples/example_models.py recomputes.
 */
#include "sdk/cop.h"

#include <stdint.h>
#include <errno.h>
#include <stdlib.h>

#define DEFAULT_ROUNDS 4
#define ITERATIONS 1000000L

uint32_t alias_spin(uint32_t iterations, uint32_t seed);

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ROUNDS;
    long iterations = argc > 2 ? strtol(argv[2], NULL, 10) : ITERATIONS;
    uint32_t digest = 0;

    if (rounds < 1 || iterations < 1 || errno == ERANGE) {
        cop_printf("alias: ROUNDS and ITERATIONS: each must be a positive "
                   "number\n");
        return 2;
    }
    for (long round = 0; round < rounds; round++)
        digest = digest * 33 + alias_spin((uint32_t)iterations,
                                          (uint32_t)round);
    cop_printf("alias rounds=%ld digest=%08lx\n", rounds,
               (unsigned long)digest);
    return 0;
}
