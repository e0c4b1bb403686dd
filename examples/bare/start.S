/*
 * start.S — the start code of examples/bare, a plain RISC-V program
 * built without the SDK (no crt0, no runtime, no cop.ld): it marks the
 * boot block started (for runners: docs/coprocessor-abi.md), sets its
 * stack and its own trap vector, calls main, and ends through the virt
 * machine's test device with main's status, as any bare-metal program of
 * qemu-system-riscv32 -M virt would.  docs/coprocessor-abi.md, "Programs
 * without the SDK", says what such a program may do on coprof's slots.
 */
    .section .text.start, "ax"
    .globl _start
_start:
    li      t0, 0x80040020              /* the boot block's `started`: */
    li      t1, 0x4e555243              /* COP_BOOT_STARTED, for runners */
    sw      t1, 0(t0)
    la      sp, __stack_top
    la      t0, on_trap
    csrw    mtvec, t0
    csrw    mscratch, zero
    call    main
    /* fall through with main's status in a0 */
    .globl bare_exit
bare_exit:
    li      t0, 0x00100000              /* the virt test device */
    li      t1, 0x5555                  /* pass */
    beqz    a0, 1f
    slli    t1, a0, 16
    li      t2, 0x3333                  /* fail, with the status above */
    or      t1, t1, t2
1:  sw      t1, 0(t0)
2:  j       2b

/* A trap: its cause, pc and value to the handler in C, which does not
 * return (the program's own, through its own vector). */
    .balign 4
on_trap:
    la      sp, __stack_top
    csrr    a0, mcause
    csrr    a1, mepc
    csrr    a2, mtval
    call    bare_trap
    j       bare_exit
