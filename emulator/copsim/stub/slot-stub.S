/*
 * slot-stub.S — the resident stub of a slot: it runs the slot's contexts,
 * each of them saved state (its local store and registers), one at a time
 * on the one hart of a long-lived qemu-system-riscv32, switching at timer
 * interrupts.
 *
 * QEMU's plugin API cannot write guest registers, and code written into
 * guest RAM from outside is not seen by QEMU's translated-code cache; this
 * stub does both from inside: it copies the incoming context's local store
 * from its staging area into place with guest stores (so that QEMU's
 * self-modifying-code detection drops every stale translation), executes
 * fence.i, loads the context's registers and returns into it with mret.
 * In place (copsim's way, slot-stub.h) its controller has already written
 * the local store from outside; the stub then only passes SLOT_STUB_FLUSH,
 * where the plugin has QEMU drop every translation.
 * The trace-unit plugin neither counts nor captures an instruction in
 * SLOT_STUB_BASE .. + SLOT_STUB_SIZE, so a context's instruction count and
 * samples are what it does on its own, however often it is switched.
 *
 * The stub runs in machine mode and owns the trap vector (mtvec, direct
 * mode) and mscratch, which holds the running context's save area.  A
 * context runs in user mode, unmodified: PMP denies it the virt test
 * device's page (so the store that would end QEMU faults into the stub)
 * and the stub's own code and control block, and allows everything else;
 * the M-mode CSRs a program of the SDK (or a bare-metal one) uses are the
 * context's own, kept in its save area and emulated here
 * (docs/coprocessor-abi.md, "What a program may do").  A trap:
 *
 *   machine timer interrupt   the slice is over: if the controller wants
 *   or the ring (in place:    the context back, save it and hand it back
 *   the plugin's machine      (PREEMPTED); if another context is runnable,
 *   software interrupt, or    save this one's local store and boot block
 *   the UART's through the    to its staging area and switch; else run on.
 *   PLIC, a machine external  All reach the stub while a context runs in
 *   one: slot-stub.h)         user mode (mie has MTIE, MEIE and MSIE,
 *                             nothing is delegated; the context's own mie
 *                             and mstatus are copies in its save area);
 *   illegal instruction       a csrrw/csrrs/csrrc(i) of mtvec, mscratch,
 *                             mepc, mcause, mtval, mstatus, mie or (read
 *                             only) mhartid is done on the context's own
 *                             copy, an mret returns to its own mepc; the
 *                             context goes on after it (its slice is not
 *                             renewed).  Any other is an exception;
 *   a store to the test       the context exits with the status it meant
 *   device or SLOT_EXIT_ADDR  for the virt test device (slot-stub.h);
 *   ecall                     with a trap vector of its own, an exception
 *                             (mcause 11, as in machine mode); without,
 *                             the context exits with status a0 (the test
 *                             guests of slot-crt0.S);
 *   any other exception       delivered to the context's own trap vector,
 *                             if it set one (its mepc, mcause, mtval
 *                             set, as the hardware would); else the
 *                             context faults (status 132, mcause, mtval
 *                             and pc kept).  An exception at the vector's
 *                             own first instruction is a trap storm (it
 *                             would be taken there again for ever): the
 *                             context faults too, its handler still set.
 *                             Either way the slot goes on with the
 *                             others.
 *
 * Once it has written the state of an entry it ended or handed back, the
 * stub passes SLOT_STUB_HANDED, where the plugin wakes the controller, and
 * only then quiets the ring.  In place, a context runs with the timer's
 * interrupt off: the controller preempts through the ring, and mtimecmp
 * and mtime are MMIO, which takes QEMU's global lock (times are read
 * through the time CSR).
 * When no context is runnable the stub passes SLOT_STUB_IDLE, where the
 * plugin of copsim's slot model waits for the controller's doorbell, and
 * then waits (wfi, looking again every slice) for its controller to fill
 * an entry, or, once the controller has closed the slot, ends QEMU through
 * the virt test device (status 0).  Its controller sets up the control block and the staging
 * areas before QEMU starts (slot-stub.h) and starts the hart at
 * stub_boot (-device loader,addr=SLOT_STUB_BASE,cpu-num=0).
 *
 * Registers inside the stub: s0 the control block, s1 the context's save
 * area, s2 its index, s3 a start time, s5 a saved return address;
 * everything is free once the context is saved.
 */
#include "abi/slot-stub.h"

#define CLINT_MTIMECMP  0x02004000
#define CLINT_MTIME     0x0200bff8
#define TEST_DEVICE     0x00100000
#define TEST_PASS       0x5555
#define MIE_MTIE        0x80
#define MIE_MEIE        0x800
#define MIE_MSIE        0x8
#define MSTATUS_MPP     0x1800
#define MSTATUS_MPIE    0x80            /* mret: MPP = user, MPIE = 1 */
#define CAUSE_ILLEGAL   2
#define CAUSE_ECALL_U   8
#define CAUSE_ECALL_M   11
#define CAUSE_STORE_FAULT 7
#define CSR_OPCODE      0x73
#define MRET            0x30200073
#define TEST_PAGE       (TEST_DEVICE >> 12)
/* PMP for the contexts (user mode): entry 0 denies the test device's page
 * (NAPOT 4 KiB), entries 1-2 the stub and its control block (TOR), entry
 * 3 allows everything else (NAPOT, all of it). */
#define PMPADDR_TEST    ((TEST_DEVICE >> 2) | 0x1ff)
#define PMPADDR_STUB    (SLOT_STUB_BASE >> 2)
#define PMPADDR_CTL_END ((SLOT_CTL_BASE + SLOT_CTL_SIZE) >> 2)
#define PMPCFG          0x1f080018

/* Loads x1 and x3..x31 from the save area sp points at. */
    .macro restore_registers
    lw      x1, SLOT_C_REGS + 4 * 1(sp)
    lw      x3, SLOT_C_REGS + 4 * 3(sp)
    lw      x4, SLOT_C_REGS + 4 * 4(sp)
    lw      x5, SLOT_C_REGS + 4 * 5(sp)
    lw      x6, SLOT_C_REGS + 4 * 6(sp)
    lw      x7, SLOT_C_REGS + 4 * 7(sp)
    lw      x8, SLOT_C_REGS + 4 * 8(sp)
    lw      x9, SLOT_C_REGS + 4 * 9(sp)
    lw      x10, SLOT_C_REGS + 4 * 10(sp)
    lw      x11, SLOT_C_REGS + 4 * 11(sp)
    lw      x12, SLOT_C_REGS + 4 * 12(sp)
    lw      x13, SLOT_C_REGS + 4 * 13(sp)
    lw      x14, SLOT_C_REGS + 4 * 14(sp)
    lw      x15, SLOT_C_REGS + 4 * 15(sp)
    lw      x16, SLOT_C_REGS + 4 * 16(sp)
    lw      x17, SLOT_C_REGS + 4 * 17(sp)
    lw      x18, SLOT_C_REGS + 4 * 18(sp)
    lw      x19, SLOT_C_REGS + 4 * 19(sp)
    lw      x20, SLOT_C_REGS + 4 * 20(sp)
    lw      x21, SLOT_C_REGS + 4 * 21(sp)
    lw      x22, SLOT_C_REGS + 4 * 22(sp)
    lw      x23, SLOT_C_REGS + 4 * 23(sp)
    lw      x24, SLOT_C_REGS + 4 * 24(sp)
    lw      x25, SLOT_C_REGS + 4 * 25(sp)
    lw      x26, SLOT_C_REGS + 4 * 26(sp)
    lw      x27, SLOT_C_REGS + 4 * 27(sp)
    lw      x28, SLOT_C_REGS + 4 * 28(sp)
    lw      x29, SLOT_C_REGS + 4 * 29(sp)
    lw      x30, SLOT_C_REGS + 4 * 30(sp)
    lw      x31, SLOT_C_REGS + 4 * 31(sp)
    .endm

    .section .text.stub, "ax"
    .option norvc

/* Fixed entry points (slot-stub.h; slot-stub.ld checks the addresses):
 * each is a block of its own, so the trace-unit plugin can watch them. */
    .globl stub_entry, stub_vector, stub_ended, stub_parked, stub_idle
    .globl stub_flush, stub_handed
stub_entry:                             /* SLOT_STUB_BASE: the hart starts */
    j       stub_boot
stub_vector:                            /* SLOT_STUB_TRAP: mtvec */
    j       stub_trap
stub_ended:                             /* SLOT_STUB_ENDED: a context ended */
    j       ended_done
stub_parked:                            /* SLOT_STUB_PARKED: one handed back */
    j       parked_done
stub_idle:                              /* SLOT_STUB_IDLE: nothing runnable */
    j       idle_wait
stub_flush:                             /* SLOT_STUB_FLUSH: the controller
                                           wrote a local store in place */
    j       placed
stub_handed:                            /* SLOT_STUB_HANDED: an entry is the
                                           controller's again */
    j       handed_done

stub_boot:
    la      t0, stub_vector
    csrw    mtvec, t0
    li      t0, PMPADDR_TEST
    csrw    pmpaddr0, t0
    li      t0, PMPADDR_STUB
    csrw    pmpaddr1, t0
    li      t0, PMPADDR_CTL_END
    csrw    pmpaddr2, t0
    li      t0, -1
    csrw    pmpaddr3, t0
    li      t0, PMPCFG
    csrw    pmpcfg0, t0
    li      t0, 7                       /* cycle, time, instret readable */
    csrw    mcounteren, t0
    csrw    scounteren, t0
    li      t0, MIE_MTIE
    csrw    mie, t0
    call    place_main_memory
    call    place_ring
    li      s0, SLOT_CTL_BASE
    li      t0, -1
    sw      t0, SLOT_H_CURRENT(s0)
    sw      t0, SLOT_H_RESIDENT(s0)
    li      s2, -1
    j       schedule

/* ---- Trap entry: save the context's registers ----------------------- */
    .balign 4
stub_trap:
    csrrw   sp, mscratch, sp            /* sp: the save area */
    sw      x1, SLOT_C_REGS + 4 * 1(sp)
    sw      x3, SLOT_C_REGS + 4 * 3(sp)
    sw      x4, SLOT_C_REGS + 4 * 4(sp)
    sw      x5, SLOT_C_REGS + 4 * 5(sp)
    sw      x6, SLOT_C_REGS + 4 * 6(sp)
    sw      x7, SLOT_C_REGS + 4 * 7(sp)
    sw      x8, SLOT_C_REGS + 4 * 8(sp)
    sw      x9, SLOT_C_REGS + 4 * 9(sp)
    sw      x10, SLOT_C_REGS + 4 * 10(sp)
    sw      x11, SLOT_C_REGS + 4 * 11(sp)
    sw      x12, SLOT_C_REGS + 4 * 12(sp)
    sw      x13, SLOT_C_REGS + 4 * 13(sp)
    sw      x14, SLOT_C_REGS + 4 * 14(sp)
    sw      x15, SLOT_C_REGS + 4 * 15(sp)
    sw      x16, SLOT_C_REGS + 4 * 16(sp)
    sw      x17, SLOT_C_REGS + 4 * 17(sp)
    sw      x18, SLOT_C_REGS + 4 * 18(sp)
    sw      x19, SLOT_C_REGS + 4 * 19(sp)
    sw      x20, SLOT_C_REGS + 4 * 20(sp)
    sw      x21, SLOT_C_REGS + 4 * 21(sp)
    sw      x22, SLOT_C_REGS + 4 * 22(sp)
    sw      x23, SLOT_C_REGS + 4 * 23(sp)
    sw      x24, SLOT_C_REGS + 4 * 24(sp)
    sw      x25, SLOT_C_REGS + 4 * 25(sp)
    sw      x26, SLOT_C_REGS + 4 * 26(sp)
    sw      x27, SLOT_C_REGS + 4 * 27(sp)
    sw      x28, SLOT_C_REGS + 4 * 28(sp)
    sw      x29, SLOT_C_REGS + 4 * 29(sp)
    sw      x30, SLOT_C_REGS + 4 * 30(sp)
    sw      x31, SLOT_C_REGS + 4 * 31(sp)
    csrr    t0, mscratch                /* the context's own sp */
    sw      t0, SLOT_C_REGS + 4 * 2(sp)
    csrr    t0, mepc
    sw      t0, SLOT_C_PC(sp)
    mv      s1, sp
    li      s0, SLOT_CTL_BASE
    lw      s2, SLOT_H_CURRENT(s0)
    csrr    t0, mcause
    bltz    t0, on_interrupt
    li      t1, CAUSE_ILLEGAL
    beq     t0, t1, on_illegal
    li      t1, CAUSE_ECALL_U
    bne     t0, t1, 2f
    li      t0, CAUSE_ECALL_M           /* as the context sees it */
    lw      t1, SLOT_C_HANDLER(s1)
    beqz    t1, on_ecall
2:  li      t1, CAUSE_STORE_FAULT
    bne     t0, t1, exception
    csrr    t1, mtval
    li      t2, SLOT_EXIT_ADDR
    beq     t1, t2, on_exit_store
    srli    t1, t1, 12
    li      t2, TEST_PAGE
    beq     t1, t2, on_exit_store
exception:                              /* t0: the cause */
    lw      t1, SLOT_C_HANDLER(s1)
    beqz    t1, fault
    andi    t1, t1, -4                  /* direct or vectored: the base */
    lw      t2, SLOT_C_PC(s1)
    bne     t1, t2, deliver
    /* A trap storm: the vector's own first instruction trapped.  Taken
     * there, it would trap again with the same registers and memory, for
     * ever; the context faults instead (its handler still set says so). */

/* ---- A fault: the context ends, the slot goes on -------------------- */
fault:
    sw      t0, SLOT_C_CAUSE(s1)
    csrr    t1, mtval
    sw      t1, SLOT_C_TVAL(s1)
    li      t1, SLOT_STATUS_TRAP
    sw      t1, SLOT_C_STATUS(s1)
    li      t1, SLOT_FAULTED
    j       ended

on_ecall:
    lw      t1, SLOT_C_REGS + 4 * 10(s1)    /* a0: the status */
    andi    t1, t1, 0xff
    sw      t1, SLOT_C_STATUS(s1)
    li      t1, SLOT_EXITED
    j       ended

/* The exit store: its value, from the sw's source register (rs2), says
 * COP_TEST_PASS (status 0) or status << 16 | COP_TEST_FAIL. */
on_exit_store:
    lw      t1, SLOT_C_PC(s1)
    lw      t2, 0(t1)                   /* the sw itself */
    srli    t2, t2, 20
    andi    t2, t2, 31
    slli    t2, t2, 2
    add     t2, t2, s1
    lw      t2, SLOT_C_REGS(t2)         /* x0's word is always 0 */
    li      t3, 0xffff
    and     t4, t2, t3
    li      t3, TEST_PASS
    li      t1, 0
    beq     t4, t3, 2f
    srli    t1, t2, 16
    andi    t1, t1, 0xff
2:  sw      t1, SLOT_C_STATUS(s1)
    li      t1, SLOT_EXITED
    j       ended

/* The exception t0 goes to the context's own trap vector, as the
 * hardware would take it there: its mepc, mcause and mtval set. */
deliver:
    sw      t0, SLOT_C_MCAUSE(s1)
    csrr    t1, mtval
    sw      t1, SLOT_C_MTVAL(s1)
    lw      t1, SLOT_C_PC(s1)
    sw      t1, SLOT_C_MEPC(s1)
    lw      t1, SLOT_C_HANDLER(s1)
    andi    t1, t1, -4                  /* direct or vectored: the base */
    sw      t1, SLOT_C_PC(s1)
    j       go_on

/* ---- An illegal instruction: the context's own M-mode CSRs ---------- */
on_illegal:
    lw      t1, SLOT_C_PC(s1)
    lw      t2, 0(t1)                   /* the instruction */
    li      t3, MRET
    beq     t2, t3, emulate_mret
    andi    t3, t2, 0x7f
    li      t4, CSR_OPCODE
    bne     t3, t4, exception
    srli    t3, t2, 12
    andi    t3, t3, 7                   /* funct3: 1-3, 5-7 are CSR ops */
    andi    t4, t3, 3
    beqz    t4, exception
    srli    a0, t2, 20                  /* the CSR */
    call    own_csr
    beqz    a0, exception
    srli    t4, t2, 15
    andi    t4, t4, 31                  /* rs1, or the immediate */
    andi    t5, t3, 3
    li      t6, 1
    beq     t5, t6, 3f                  /* csrrw(i) always writes */
    beqz    t4, 5f                      /* csrrs/c with x0 or 0: no write */
3:  beqz    a1, exception               /* writing a read-only CSR */
    andi    t6, t3, 4
    bnez    t6, 4f                      /* immediate */
    slli    t4, t4, 2
    add     t4, t4, s1
    lw      t4, SLOT_C_REGS(t4)         /* x0's word is always 0 */
4:  lw      t6, 0(a0)
    li      a2, 1
    beq     t5, a2, 6f                  /* csrrw: the value */
    li      a2, 2
    beq     t5, a2, 7f
    not     t4, t4                      /* csrrc: old & ~value */
    and     t4, t6, t4
    j       6f
7:  or      t4, t6, t4                  /* csrrs: old | value */
6:  sw      t4, 0(a0)
    mv      t4, t6
    j       8f
5:  lw      t4, 0(a0)                   /* read only */
8:  srli    t5, t2, 7
    andi    t5, t5, 31                  /* rd gets the old value */
    beqz    t5, 9f
    slli    t5, t5, 2
    add     t5, t5, s1
    sw      t4, SLOT_C_REGS(t5)
9:  lw      t1, SLOT_C_PC(s1)
    addi    t1, t1, 4
    sw      t1, SLOT_C_PC(s1)
    j       go_on

emulate_mret:
    lw      t1, SLOT_C_MEPC(s1)
    sw      t1, SLOT_C_PC(s1)
    j       go_on

/* a0 = the address of the context's own copy of CSR a0 in its save area
 * (s1), a1 = 1 if it may be written; a0 = 0 if it is not one the stub
 * emulates. */
own_csr:
    li      a1, 1
    li      t6, 0x305
    li      t5, SLOT_C_HANDLER
    beq     a0, t6, 1f
    li      t6, 0x340
    li      t5, SLOT_C_MSCRATCH
    beq     a0, t6, 1f
    li      t6, 0x341
    li      t5, SLOT_C_MEPC
    beq     a0, t6, 1f
    li      t6, 0x342
    li      t5, SLOT_C_MCAUSE
    beq     a0, t6, 1f
    li      t6, 0x343
    li      t5, SLOT_C_MTVAL
    beq     a0, t6, 1f
    li      t6, 0x300
    li      t5, SLOT_C_MSTATUS
    beq     a0, t6, 1f
    li      t6, 0x304
    li      t5, SLOT_C_MIE
    beq     a0, t6, 1f
    li      a1, 0
    li      t6, 0xf14
    li      t5, SLOT_C_MHARTID
    beq     a0, t6, 1f
    li      a0, 0
    ret
1:  add     a0, s1, t5
    ret

/* The end (t1: EXITED or FAULTED) passes stub_ended first, so that the
 * plugin has accounted for the context before its controller sees it. */
ended:
    j       stub_ended
ended_done:
    li      t0, -1                      /* its local store is no one's */
    sw      t0, SLOT_H_RESIDENT(s0)
    sw      t1, SLOT_C_STATE(s1)        /* last: the entry is the controller's */
    j       stub_handed

/* ---- The slice is over ---------------------------------------------- */
on_interrupt:
    lw      t0, SLOT_H_INTERRUPTS(s0)
    addi    t0, t0, 1
    sw      t0, SLOT_H_INTERRUPTS(s0)
    lw      t0, SLOT_C_PREEMPT(s1)
    bnez    t0, on_preempt
    call    quiet_ring
    addi    a0, s2, 1                   /* anyone else runnable? */
    lw      a1, SLOT_H_COUNT(s0)
    addi    a1, a1, -1
    call    find_runnable
    bltz    a0, resume                  /* no: run on */
    call    save_current
    j       schedule

/* The controller wants it back: saved, its entry is the controller's. */
on_preempt:
    call    save_current
    sw      zero, SLOT_C_PREEMPT(s1)
    li      t0, -1
    sw      t0, SLOT_H_RESIDENT(s0)
    j       stub_parked                 /* the plugin lets go of it, then */
parked_done:
    li      t0, SLOT_PREEMPTED
    sw      t0, SLOT_C_STATE(s1)        /* last */
    j       stub_handed

/* An entry was handed back: the plugin wakes its controller, and only
 * then is the ring quieted (mcause is still the trap's), while the
 * controller unbinds the context: the UART's and the PLIC's registers
 * are MMIO, which waits for QEMU's global lock, held by the main loop
 * that has just delivered the ring. */
handed_done:
    call    quiet_ring
    j       schedule

/* ---- Pick the next runnable context after the current one ----------- */
schedule:
    addi    a0, s2, 1                   /* s2 is -1 at boot */
    lw      a1, SLOT_H_COUNT(s0)
    call    find_runnable
    bgez    a0, found
    lw      t0, SLOT_H_CLOSED(s0)
    bnez    t0, all_done
    j       stub_idle                   /* the plugin may wait there */
idle_wait:
    addi    a0, s2, 1
    lw      a1, SLOT_H_COUNT(s0)
    call    find_runnable
    bgez    a0, found
    call    arm_timer                   /* none yet: wait a slice, look again */
    li      t0, MIE_MTIE
    csrs    mie, t0
    wfi
    j       schedule

found:
    mv      s2, a0
    call    save_area_of
    mv      s1, a0
    sw      s2, SLOT_H_CURRENT(s0)
    lw      t0, SLOT_H_RESIDENT(s0)
    beq     t0, s2, bind                /* its local store is in place */
    call    read_mtime
    mv      s3, a0
    lw      t0, SLOT_H_INPLACE(s0)
    bnez    t0, stub_flush              /* in place: the plugin drops the
                                           translations there */
    mv      a1, s2
    call    staging_of                  /* from its staging area */
    li      a1, SLOT_LS_BASE
    li      a2, SLOT_SWAP_SIZE
    call    copy
    fence.i
placed:
    sw      s2, SLOT_H_RESIDENT(s0)
    lw      t0, SLOT_H_SWITCHES(s0)
    addi    t0, t0, 1
    sw      t0, SLOT_H_SWITCHES(s0)
    call    read_mtime
    sub     t0, a0, s3
    lw      t1, SLOT_H_TICKS(s0)
    add     t1, t1, t0
    sw      t1, SLOT_H_TICKS(s0)
bind:
    lw      t0, SLOT_C_BINDS(s1)
    addi    t0, t0, 1
    sw      t0, SLOT_C_BINDS(s1)

/* ---- Return into the context in s1 ---------------------------------- */
resume:
    call    arm_slice
go_on:                                  /* the same slice goes on */
    csrw    mscratch, s1
    lw      t0, SLOT_C_PC(s1)
    csrw    mepc, t0
    li      t0, MSTATUS_MPP
    csrc    mstatus, t0                 /* mret: user mode */
    li      t0, MSTATUS_MPIE
    csrs    mstatus, t0
    mv      sp, s1
    restore_registers
    lw      sp, SLOT_C_REGS + 4 * 2(sp)
    mret

all_done:
    li      t0, TEST_DEVICE
    li      t1, TEST_PASS
    sw      t1, 0(t0)
1:  j       1b

/* ---- Helpers (leaf functions: a0, a1 in, a0 out, t0-t1 and a2 used) -- */

/* a0 = the first runnable context among the a1 entries from a0 on (its
 * index taken modulo the count), or -1. */
find_runnable:
    lw      t2, SLOT_H_COUNT(s0)
    li      t3, SLOT_CTL_BASE + SLOT_H_SIZE
    li      t4, SLOT_RUNNABLE
1:  blez    a1, 3f
    bltu    a0, t2, 2f
    sub     a0, a0, t2
2:  slli    t0, a0, 8                   /* SLOT_CTX_SIZE */
    add     t0, t0, t3
    lw      t0, SLOT_C_STATE(t0)
    beq     t0, t4, 4f
    addi    a0, a0, 1
    addi    a1, a1, -1
    j       1b
3:  li      a0, -1
4:  ret

/* Saves the running context's local store and boot block to its staging
 * area, timed into the header's ticks. */
save_current:
    lw      t0, SLOT_H_INPLACE(s0)
    bnez    t0, 1f                      /* the controller reads it */
    mv      s5, ra
    call    read_mtime
    mv      s3, a0
    mv      a1, s2
    call    staging_of
    mv      a1, a0
    li      a0, SLOT_LS_BASE
    li      a2, SLOT_SWAP_SIZE
    call    copy
    call    read_mtime
    sub     t0, a0, s3
    lw      t1, SLOT_H_TICKS(s0)
    add     t1, t1, t0
    sw      t1, SLOT_H_TICKS(s0)
    mv      ra, s5
1:  ret

/* Main memory: BAR 2 of the ivshmem device at 00:01.0, if there is one,
 * at SLOT_MAIN_BASE (64-bit BAR: high word 0), memory decoding on. */
place_main_memory:
    li      t0, SLOT_PCI_IVSHMEM
    lw      t1, 0(t0)
    li      t2, SLOT_IVSHMEM_ID
    bne     t1, t2, 1f
    li      t1, SLOT_MAIN_BASE
    sw      t1, 0x18(t0)
    sw      zero, 0x1c(t0)
    li      t1, 2                       /* command: memory space */
    sh      t1, 4(t0)
1:  ret

/* In place: the ring (slot-stub.h), the UART's receive interrupt through
 * the PLIC to this hart's machine mode, and the software interrupt the
 * plugin raises. */
place_ring:
    li      t0, SLOT_CTL_BASE
    lw      t1, SLOT_H_INPLACE(t0)
    beqz    t1, 1f
    li      t0, SLOT_PLIC + 4 * SLOT_UART_IRQ
    li      t1, 1
    sw      t1, 0(t0)
    li      t0, SLOT_PLIC_ENABLE
    li      t1, 1 << SLOT_UART_IRQ
    sw      t1, 0(t0)
    li      t0, SLOT_PLIC_CLAIM - 4     /* threshold 0 */
    sw      zero, 0(t0)
    li      t0, SLOT_UART
    li      t1, 1                       /* IER: received data */
    sb      t1, 1(t0)
    li      t0, MIE_MEIE | MIE_MSIE     /* and the plugin's ring */
    csrs    mie, t0
1:  ret

/* The ring's interrupt: the UART's claimed, its bytes read, completed;
 * the plugin's lowered (one store to the CLINT); either counted.  Other
 * interrupts pass. */
quiet_ring:
    csrr    t0, mcause
    li      t1, SLOT_CAUSE_SOFT_RING
    bne     t0, t1, 4f
    li      t0, SLOT_CLINT_MSIP
    sw      zero, 0(t0)
    lw      t1, SLOT_H_SOFT_RINGS(s0)
    addi    t1, t1, 1
    sw      t1, SLOT_H_SOFT_RINGS(s0)
    j       5f
4:  li      t1, SLOT_CAUSE_RING
    bne     t0, t1, 3f
    li      t0, SLOT_PLIC_CLAIM
    lw      t1, 0(t0)
    li      t2, SLOT_UART
1:  lbu     a0, 5(t2)                   /* LSR: data ready? */
    andi    a0, a0, 1
    beqz    a0, 2f
    lbu     a0, 0(t2)                   /* RBR */
    j       1b
2:  sw      t1, 0(t0)
5:  lw      t1, SLOT_H_RINGS(s0)
    addi    t1, t1, 1
    sw      t1, SLOT_H_RINGS(s0)
3:  ret

/* a0 = the save area of context a0. */
save_area_of:
    slli    a0, a0, 8                   /* SLOT_CTX_SIZE */
    li      t0, SLOT_CTL_BASE + SLOT_H_SIZE
    add     a0, a0, t0
    ret

/* a0 = the staging area of context a1. */
staging_of:
    slli    a0, a1, 20                  /* SLOT_AREA_SIZE */
    li      t0, SLOT_STAGING
    add     a0, a0, t0
    ret

/* a0 = mtime's low word (the 10 MHz timer; differences of a slice fit),
 * through the time CSR: a read of the CLINT would be MMIO, which takes
 * QEMU's global lock. */
read_mtime:
    csrr    a0, time
    ret

/* The context's slice.  Not in place: the timer armed for one slice.  In
 * place the controller preempts through the ring, so the context runs
 * with the timer's interrupt off (idle_wait turns it on for its wfi):
 * writing mtimecmp is MMIO under QEMU's global lock and wakes QEMU's main
 * loop (a timer moved), which cost tens of microseconds per switch. */
arm_slice:
    lw      t0, SLOT_H_INPLACE(s0)
    beqz    t0, arm_timer
    li      t0, MIE_MTIE
    csrc    mie, t0
    ret

/* mtimecmp = mtime + the slice, written high word first. */
arm_timer:
    li      t0, CLINT_MTIME
1:  lw      t1, 4(t0)
    lw      a0, 0(t0)
    lw      a2, 4(t0)
    bne     t1, a2, 1b
    lw      t0, SLOT_H_SLICE(s0)
    add     t0, a0, t0
    sltu    a0, t0, a0                  /* carry */
    add     a2, a2, a0
    li      t1, CLINT_MTIMECMP
    li      a0, -1
    sw      a0, 4(t1)
    sw      t0, 0(t1)
    sw      a2, 4(t1)
    ret

/* Copies a2 bytes (a multiple of 32, maybe 0) from a0 to a1. */
copy:
    add     a2, a2, a0
    bgeu    a0, a2, 2f
1:  lw      t0, 0(a0)
    lw      t1, 4(a0)
    lw      t2, 8(a0)
    lw      t3, 12(a0)
    lw      t4, 16(a0)
    lw      t5, 20(a0)
    lw      t6, 24(a0)
    lw      a3, 28(a0)
    sw      t0, 0(a1)
    sw      t1, 4(a1)
    sw      t2, 8(a1)
    sw      t3, 12(a1)
    sw      t4, 16(a1)
    sw      t5, 20(a1)
    sw      t6, 24(a1)
    sw      a3, 28(a1)
    addi    a0, a0, 32
    addi    a1, a1, 32
    bltu    a0, a2, 1b
2:  ret
