/*
 * timing.c - microbenchmarks of known cost for the timing model
 * (emulator/timing/spu.model; tests/test_timing_model.py computes each
 * one's cycles from the model's figures):
 *
 *   mul_chain    MUL_ROUNDS rounds of 8 dependent multiplies (each waits
 *                6 cycles for the previous one), a counter and a backward
 *                bne (predicted taken: 18 cycles when it falls through);
 *   branch_loop  BRANCH_ROUNDS rounds of a forward bne that is always
 *                taken (predicted not taken: 18 cycles each time);
 *   load_use     LOAD_ROUNDS rounds of a load and its consumer (5 cycles).
 */
#include "guest.h"

#define MUL_ROUNDS    3000
#define BRANCH_ROUNDS 4000
#define LOAD_ROUNDS   2000

uint32_t mul_chain(uint32_t x, uint32_t rounds);
uint32_t branch_loop(uint32_t rounds);
uint32_t load_use(const uint32_t *p, uint32_t rounds);

__asm__(
    "    .text\n"
    "    .balign 4\n"
    "    .globl mul_chain\n"
    "mul_chain:\n"
    "    li a2, 3\n"
    "1:  mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    mul a0, a0, a2\n"
    "    addi a1, a1, -1\n"
    "    bne a1, zero, 1b\n"
    "    ret\n"
    "    .globl branch_loop\n"
    "branch_loop:\n"
    "    li a1, 0\n"
    "2:  addi a0, a0, -1\n"
    "    bne a0, zero, 3f\n"
    "    j 4f\n"
    "3:  addi a1, a1, 1\n"
    "    j 2b\n"
    "4:  mv a0, a1\n"
    "    ret\n"
    "    .globl load_use\n"
    "load_use:\n"
    "    li a2, 0\n"
    "5:  lw a3, 0(a0)\n"
    "    add a2, a2, a3\n"
    "    addi a1, a1, -1\n"
    "    bne a1, zero, 5b\n"
    "    mv a0, a2\n"
    "    ret\n");

static uint32_t word = 5;

int main(void)
{
    uint32_t sum = mul_chain(1, MUL_ROUNDS);

    sum += branch_loop(BRANCH_ROUNDS);
    sum += load_use(&word, LOAD_ROUNDS);
    guest_puts("timing ");
    guest_put_hex(sum);
    guest_puts("\n");
    return 0;
}
