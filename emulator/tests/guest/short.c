/*
 * short.c — a few thousand instructions, short enough to compare every
 * capture at N = 1 with QEMU's own single-step trace.  Returns 7, so the
 * exit status path is exercised too.
 */
#include "guest.h"

static uint32_t table[64];

int main(void)
{
    uint32_t sum = 0;

    for (uint32_t i = 0; i < 64; i++)
        table[i] = i * i + 3;
    for (uint32_t i = 0; i < 64; i += 3)
        sum += table[i] / (i + 1);
    guest_puts("short ");
    guest_put_hex(sum);
    guest_puts("\n");
    return 7;
}
