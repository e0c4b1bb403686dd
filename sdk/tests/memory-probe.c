/*
 * memory-probe.c — direct loads and stores to the data window, which the
 * timing model charges as main-memory access (emulator/timing/spu.model's
 * memory.latency, docs/coprocessor-abi.md "Direct access to the data
 * window"), for emulator/tests/test_main_memory.py:
 *
 *   memory-probe N    window_loads: N loads from the data window;
 *                     ls_loads: N loads from the local store;
 *                     window_stores: N stores to the data window.
 *
 * Each loop is written out in assembly (a lw or sw on a0, an add, two
 * addi and a backward bne), so the test knows its instructions.
 */
#include "sdk/cop.h"

#include <stdlib.h>

uint32_t window_loads(const uint32_t *p, uint32_t n);
uint32_t ls_loads(const uint32_t *p, uint32_t n);
void window_stores(uint32_t *p, uint32_t n);

__asm__(
    "    .text\n"
    "    .balign 4\n"
    "    .globl window_loads\n"
    "window_loads:\n"
    "    li a2, 0\n"
    "1:  lw a3, 0(a0)\n"
    "    add a2, a2, a3\n"
    "    addi a0, a0, 4\n"
    "    addi a1, a1, -1\n"
    "    bne a1, zero, 1b\n"
    "    mv a0, a2\n"
    "    ret\n"
    "    .globl ls_loads\n"
    "ls_loads:\n"
    "    li a2, 0\n"
    "2:  lw a3, 0(a0)\n"
    "    add a2, a2, a3\n"
    "    addi a0, a0, 4\n"
    "    addi a1, a1, -1\n"
    "    bne a1, zero, 2b\n"
    "    mv a0, a2\n"
    "    ret\n"
    "    .globl window_stores\n"
    "window_stores:\n"
    "3:  sw a1, 0(a0)\n"
    "    addi a0, a0, 4\n"
    "    addi a1, a1, -1\n"
    "    bne a1, zero, 3b\n"
    "    ret\n");

#define MAX_WORDS 4096

static uint32_t local[MAX_WORDS];

int main(int argc, char **argv)
{
    uint32_t *window = cop_data_window(NULL);
    unsigned long n = argc == 2 ? strtoul(argv[1], NULL, 10) : 0;
    uint32_t sum;

    if (!n || n > MAX_WORDS) {
        cop_printf("usage: memory-probe N (1 .. %d)\n", MAX_WORDS);
        return 2;
    }
    for (uint32_t i = 0; i < n; i++)
        local[i] = i;
    sum = window_loads(window, n);
    sum += ls_loads(local, n);
    window_stores(window, n);
    cop_printf("sum=%lu\n", (unsigned long)sum);
    return 0;
}
