/*
 * loop.S — alias's hot loop: exactly 7 instructions per iteration, split
 * over three functions of 1, 2 and 4 instructions, so their true shares
 * are 1/7, 2/7 and 4/7 of the loop.
 *
 *   uint32_t alias_spin(uint32_t iterations, uint32_t seed);
 *
 * alias_spin sets up (seed in t0 and t1) and falls through into the loop;
 * each iteration runs alias_head, alias_mid and alias_tail in that order
 * (each falls through into the next; alias_tail branches back to
 * alias_head), and alias_tail returns the digest once the count reaches 0.
 * Per iteration, with n the count after its decrement, all mod 2^32:
 *
 *   t0 ^= n;  t1 += t0;  t1 ^= t0 << 3;  t1 += n
 *
 * Written in assembly so that the compiler cannot change the loop's
 * length: at a fixed sampling period N that is a multiple of 7 (N = 1001
 * = 7 x 143), every capture falls on the same instruction of the loop.
 * RV32I, no compressed instructions (sdk/cop.mk's -march).
 */
    .text
    .option norvc

    .globl alias_spin
    .type alias_spin, @function
alias_spin:
    mv t0, a1
    mv t1, a1
    beqz a0, .Ldone
    .size alias_spin, . - alias_spin

    .globl alias_head
    .type alias_head, @function
alias_head:                     /* 1 instruction */
    addi a0, a0, -1
    .size alias_head, . - alias_head

    .globl alias_mid
    .type alias_mid, @function
alias_mid:                      /* 2 instructions */
    xor t0, t0, a0
    add t1, t1, t0
    .size alias_mid, . - alias_mid

    .globl alias_tail
    .type alias_tail, @function
alias_tail:                     /* 4 instructions */
    slli t2, t0, 3
    xor t1, t1, t2
    add t1, t1, a0
    bnez a0, alias_head
.Ldone:
    mv a0, t1
    ret
    .size alias_tail, . - alias_tail

    .section .note.GNU-stack, "", @progbits
