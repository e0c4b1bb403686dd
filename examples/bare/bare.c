/*
 * bare.c — examples/bare: a bare-metal RISC-V program built without the
 * SDK (start.S, bare.ld; no crt0, no runtime, no libc), the kind of
 * firmware image coprof's slots run unmodified.
 *
 *   bare            (no arguments: it reads none)
 *
 * It runs two kernels of known weight, a checksum loop (checksum, about
 * three quarters of the instructions) and a table walk (walk, about a
 * quarter), prints "bare: sum=S walk=W" on the virt machine's UART (an
 * ns16550 at 0x10000000), reads its own mscratch back through a CSR
 * (which a slot emulates) and exits 0 through the test device.  A trap
 * prints "bare: trap cause=C pc=P" and exits 3.
 */
#include <stdint.h>

#define UART_THR ((volatile uint8_t *)0x10000000)
#define ROUNDS 4000

void bare_trap(uint32_t cause, uint32_t pc, uint32_t value);

static uint32_t table[256];

static void put_char(char c)
{
    *UART_THR = (uint8_t)c;
}

static void put_string(const char *s)
{
    while (*s)
        put_char(*s++);
}

static void put_hex(uint32_t v)
{
    for (int shift = 28; shift >= 0; shift -= 4)
        put_char("0123456789abcdef"[(v >> shift) & 15]);
}

__attribute__((noinline)) static uint32_t checksum(uint32_t seed)
{
    uint32_t h = seed;

    for (int i = 0; i < 3 * ROUNDS; i++)
        h = (h ^ (uint32_t)i) * 0x01000193u + (h >> 7);
    return h;
}

__attribute__((noinline)) static uint32_t walk(uint32_t start)
{
    uint32_t at = start & 255, total = 0;

    for (int i = 0; i < ROUNDS; i++) {
        total += table[at];
        at = (at * 5 + 1) & 255;
    }
    return total;
}

int main(void)
{
    uint32_t sum = 0, walked = 0, scratch;

    for (uint32_t i = 0; i < 256; i++)
        table[i] = i * 2654435761u;
    for (uint32_t round = 0; round < 8; round++) {
        sum += checksum(round);
        walked += walk(round);
    }
    __asm__ volatile("csrw mscratch, %1\n\tcsrr %0, mscratch"
                     : "=r"(scratch) : "r"(sum));
    put_string("bare: sum=");
    put_hex(sum);
    put_string(" walk=");
    put_hex(walked);
    put_string(scratch == sum ? "\n" : " mscratch lost\n");
    return scratch == sum ? 0 : 1;
}

void bare_trap(uint32_t cause, uint32_t pc, uint32_t value)
{
    (void)value;
    put_string("bare: trap cause=");
    put_hex(cause);
    put_string(" pc=");
    put_hex(pc);
    put_char('\n');
    __asm__ volatile("li a0, 3\n\tj bare_exit");
    for (;;)
        ;
}
