/*
 * window.c — loads from a data window in two phases, for the trace unit's
 * clock-change test (test-trace-plugin.c): WINDOW_WORDS loads from
 * 0x80800000 (the window the test's boot block names), then it marks
 * HANDSHAKE[0] and spins until the test sets HANDSHAKE[1] (meanwhile the
 * test holds it and changes the slot's event), then the same loads again
 * through the same code.  The handshake words are outside the local store
 * and the window, so they cost no main-memory cycles.
 */
#include "guest.h"

#define WINDOW ((volatile uint32_t *)0x80800000)
#define HANDSHAKE ((volatile uint32_t *)0x80f00000)
#define WINDOW_WORDS 64

static __attribute__((noinline)) uint32_t sum_window(volatile uint32_t *p)
{
    uint32_t sum = 0;

    for (uint32_t i = 0; i < WINDOW_WORDS; i++)
        sum += p[i];
    return sum;
}

int main(void)
{
    uint32_t sum = sum_window(WINDOW);

    HANDSHAKE[0] = 1;
    while (!HANDSHAKE[1])
        ;
    sum += sum_window(WINDOW);
    guest_puts("window ");
    guest_put_hex(sum);
    guest_puts("\n");
    return 0;
}
