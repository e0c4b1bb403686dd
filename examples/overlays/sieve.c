/* sieve.c — overlay "sieve" (region 2): the sieve of Eratosthenes. */
#include "examples/overlays/overlays.h"

uint32_t count_primes(uint32_t limit)
{
    uint32_t count = 0;

    if (limit > SIEVE_LIMIT)
        limit = SIEVE_LIMIT;
    for (uint32_t i = 0; i < limit; i++)
        sieve_marks[i] = i >= 2;
    for (uint32_t i = 2; i * i < limit; i++)
        if (sieve_marks[i])
            for (uint32_t j = i * i; j < limit; j += i)
                sieve_marks[j] = 0;
    for (uint32_t i = 0; i < limit; i++)
        count += sieve_marks[i];
    return count;
}
