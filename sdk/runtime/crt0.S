/*
 * crt0.S — the coprocessor's entry point and trap entry.
 *
 * QEMU's virt reset vector jumps to 0x80000000 in machine mode; cop.ld puts
 * _start there (section .text.start).  _start sets up gp, the stack at the
 * top of the local store and the trap vector, clears .bss (and .tbss, which
 * cop.ld puts right before it), points tp at the thread-local storage block
 * (cop.ld's __tls_base: the loaded .tdata, then .tbss), and calls
 * __cop_start (start.c), which runs main and exits.
 *
 * Every trap is fatal: __cop_trap_entry moves to a fresh stack (the program
 * is ending, and the old one may be the cause) and reports the trap through
 * __cop_trap (exit.c).
 */
    .section .text.start, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la      gp, __global_pointer$
    .option pop
    la      sp, __cop_stack_top
    la      t0, __cop_trap_entry
    csrw    mtvec, t0
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:  la      tp, __tls_base
    call    __cop_start
3:  j       3b
    .size _start, . - _start

    .text
    .balign 4
    .globl __cop_trap_entry
    .type __cop_trap_entry, @function
__cop_trap_entry:
    la      sp, __cop_stack_top
    csrr    a0, mcause
    csrr    a1, mepc
    csrr    a2, mtval
    call    __cop_trap
1:  j       1b
    .size __cop_trap_entry, . - __cop_trap_entry
