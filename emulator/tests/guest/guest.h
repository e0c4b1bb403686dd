/*
 * guest.h — console output for the trace unit's test guests (the virt
 * machine's 16550 UART, which needs no set-up under QEMU).
 */
#ifndef GUEST_H
#define GUEST_H

#include <stdint.h>

static inline void guest_puts(const char *s)
{
    volatile uint8_t *thr = (volatile uint8_t *)0x10000000;

    while (*s)
        *thr = (uint8_t)*s++;
}

static inline void guest_put_hex(uint32_t value)
{
    char text[11] = "0x";

    for (int i = 0; i < 8; i++)
        text[2 + i] = "0123456789abcdef"[(value >> (28 - 4 * i)) & 15];
    text[10] = '\0';
    guest_puts(text);
}

#endif
