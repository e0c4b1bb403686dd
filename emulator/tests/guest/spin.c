/*
 * spin.c — about 300 million instructions of calls and loops, long enough
 * for a controller to hold and move the context several times mid-run.
 */
#include "guest.h"

static uint32_t mixer(uint32_t h, uint32_t i)
{
    h ^= i;
    h *= 16777619u;
    return h & 1 ? h + (i >> 3) : h - (i << 2);
}

int main(void)
{
    uint32_t h = 2166136261u;

    for (uint32_t round = 0; round < 2000; round++)
        for (uint32_t i = 0; i < 10000; i++)
            h = mixer(h, i + round);
    guest_puts("spin ");
    guest_put_hex(h);
    guest_puts("\n");
    return 0;
}
