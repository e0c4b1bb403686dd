/*
 * mix.c — a mixed workload of about a million instructions: sorting,
 * recursion, division, CRC and console output, so blocks of every length
 * and memory writes in many of them.
 */
#include "guest.h"

#define ITEMS 600

static uint32_t items[ITEMS];

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void insertion_sort(uint32_t *a, int n)
{
    for (int i = 1; i < n; i++) {
        uint32_t v = a[i];
        int j = i - 1;

        while (j >= 0 && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static uint32_t fib(uint32_t n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static uint32_t crc32(const uint32_t *words, int n)
{
    uint32_t crc = 0xFFFFFFFFu;

    for (int i = 0; i < n; i++) {
        crc ^= words[i];
        for (int bit = 0; bit < 32; bit++)
            crc = (crc >> 1) ^ (0xEDB88320u & -(crc & 1));
    }
    return ~crc;
}

int main(void)
{
    uint32_t state = 2463534242u, quotients = 0;

    for (int i = 0; i < ITEMS; i++)
        items[i] = next_random(&state);
    insertion_sort(items, ITEMS);
    for (int i = 1; i < ITEMS; i++)
        quotients += items[i] / (items[i - 1] % 977 + 1);
    guest_puts("mix crc ");
    guest_put_hex(crc32(items, ITEMS));
    guest_puts(" fib ");
    guest_put_hex(fib(18));
    guest_puts(" q ");
    guest_put_hex(quotients);
    guest_puts("\n");
    return 0;
}
