/*
 * copsim-probe.c — a coprocessor program for copsim's tests: one behaviour
 * per command, so that a test picks a program that ends, loops, faults or
 * talks through the data window.
 *
 *   hello             print "hello from CONTEXT-NAME" and exit 0
 *   spin N            N rounds of arithmetic (about 8 instructions each),
 *                     then print the result
 *   hop N             N rounds of a loop whose every block ends in a
 *                     branch the timing model charges: a taken forward
 *                     branch (mispredicted) and an indirect jump, so that
 *                     wherever a context is preempted, its last block's
 *                     exit costs cycles
 *   loop              never end
 *   data N            data[i] = data[i] * 3 + 1 for the first N words of
 *                     the data window, then print their sum
 *   rendezvous N      set data word 1, wait until the host sets data word
 *                     0, then spin N: the host starts every context's work
 *                     once all of them have run
 *   wait MS           run until the time CSR (QEMU virt's 10 MHz timer)
 *                     has advanced MS milliseconds, then exit 0: a run
 *                     of a known length in time, whatever the host's speed
 *   trap              execute an illegal instruction
 *   exit S            exit with status S
 */
#include "sdk/cop.h"

#include <stdlib.h>
#include <string.h>

static int spin(unsigned rounds)
{
    volatile uint32_t sink;
    uint32_t x = 1;

    for (unsigned i = 0; i < rounds; i++)
        x = x * 1103515245u + 12345u + (x >> 7);
    sink = x;
    cop_printf("spin %u -> %08x\n", rounds, (unsigned)sink);
    return 0;
}

static int hop(unsigned rounds)
{
    unsigned left = rounds;

    __asm__ volatile(
        "   la      t0, 1f\n"
        "1: addi    %0, %0, -1\n"
        "   bnez    %0, 2f\n"          /* forward, taken: 18 cycles */
        "   j       3f\n"
        "2: jr      t0\n"              /* indirect: 18 cycles */
        "3:\n"
        : "+r"(left) : : "t0", "memory");
    cop_printf("hop %u\n", rounds);
    return 0;
}

static void loop_forever(void)
{
    volatile uint32_t counter = 0;

    for (;;)
        counter++;
}

static int transform_data(unsigned words)
{
    size_t size;
    volatile uint32_t *data = cop_data_window(&size);
    uint32_t sum = 0;

    if (words > size / 4)
        return 2;
    for (unsigned i = 0; i < words; i++) {
        data[i] = data[i] * 3 + 1;
        sum += data[i];
    }
    cop_printf("data %u sum=%08x\n", words, (unsigned)sum);
    return 0;
}

static int rendezvous(unsigned rounds)
{
    volatile uint32_t *data = cop_data_window(NULL);

    data[1] = 1;
    while (data[0] == 0)
        ;
    return spin(rounds);
}

#define TIMER_HZ 10000000u          /* QEMU virt's timebase */

static uint32_t read_time(void)
{
    uint32_t now;

    __asm__ volatile("rdtime %0" : "=r"(now));
    return now;
}

static int wait_ms(unsigned ms)
{
    uint32_t start = read_time();

    while (read_time() - start < ms * (TIMER_HZ / 1000u))
        ;
    cop_printf("waited %u ms\n", ms);
    return 0;
}

int main(int argc, char **argv)
{
    const char *command = argc > 1 ? argv[1] : "hello";
    unsigned number = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0;

    if (strcmp(command, "hello") == 0) {
        cop_printf("hello from %s\n", cop_program_name());
        return 0;
    }
    if (strcmp(command, "spin") == 0)
        return spin(number);
    if (strcmp(command, "hop") == 0)
        return hop(number);
    if (strcmp(command, "loop") == 0)
        loop_forever();
    if (strcmp(command, "data") == 0)
        return transform_data(number);
    if (strcmp(command, "rendezvous") == 0)
        return rendezvous(number);
    if (strcmp(command, "wait") == 0)
        return wait_ms(number);
    if (strcmp(command, "trap") == 0)
        __asm__ volatile(".4byte 0x00000000");
    if (strcmp(command, "exit") == 0)
        cop_exit((int)number);
    cop_printf("copsim-probe: unknown command '%s'\n", command);
    return 64;
}
