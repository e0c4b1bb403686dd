/*
 * slot-stub.h — the layout shared by the resident slot stub (slot-stub.S),
 * the trace-unit plugin (which does not count the stub's instructions) and
 * its controllers (slotrun.py): where the stub lives in a slot's guest RAM,
 * its control block, and one context's save area.
 *
 * A slot is one long-lived qemu-system-riscv32; the contexts it runs are
 * saved state.  The stub sits in the reserved gap between the boot block
 * and the image window (docs/coprocessor-abi.md, "Memory map"), outside the
 * local store, so no context can reach it by its own addresses:
 *
 *   0x80041000  4 KiB   stub code (the plugin's excluded range)
 *   0x80042000  8 KiB   control block: header, then one save area per
 *                       context (SLOT_CTX_SIZE bytes each)
 *   0x80100000  ...     staging: SLOT_LS_SIZE bytes per context, the saved
 *                       local store of context i at SLOT_STAGING + i * LS
 *
 * The controller owns an entry that is EMPTY, EXITED or FAULTED: it may
 * fill its staging area and save area (registers zero, pc the entry point,
 * binds 0) and then, last, set its state to RUNNABLE, while the emulator
 * runs; the stub owns a RUNNABLE entry until it ends it.  The stub runs
 * until no entry is runnable and CLOSED is set; while none is runnable and
 * CLOSED is not, it waits (wfi) and looks again every slice.
 *
 * Plain #defines only: the assembler, C and Python (which reads the
 * "#define NAME VALUE" lines) share this file.
 */
#ifndef SLOT_STUB_H
#define SLOT_STUB_H

#define SLOT_STUB_BASE      0x80041000
#define SLOT_STUB_SIZE      0x1000
#define SLOT_CTL_BASE       0x80042000
#define SLOT_CTL_SIZE       0x2000
#define SLOT_STAGING        0x80100000
#define SLOT_LS_BASE        0x80000000
#define SLOT_LS_SIZE        0x40000
#define SLOT_MAX_CONTEXTS   31

/* The control block's header (byte offsets from SLOT_CTL_BASE). */
#define SLOT_MAGIC          0x544f4c53  /* "SLOT" */
#define SLOT_H_MAGIC        0x00
#define SLOT_H_COUNT        0x04    /* contexts in the table */
#define SLOT_H_CURRENT      0x08    /* index running now, -1 none */
#define SLOT_H_RESIDENT     0x0c    /* whose local store is in place, -1 */
#define SLOT_H_SLICE        0x10    /* timer ticks (10 MHz) per slice */
#define SLOT_H_CLOSED       0x14    /* controller: no more contexts come */
#define SLOT_H_SWITCHES     0x18    /* local stores swapped */
#define SLOT_H_TICKS        0x1c    /* timer ticks spent swapping them */
#define SLOT_H_INTERRUPTS   0x20    /* timer interrupts taken */
#define SLOT_H_SIZE         0x40

/* One context's save area (byte offsets from its start). */
#define SLOT_CTX_SIZE       0x100
#define SLOT_C_STATE        0x00
#define SLOT_C_STATUS       0x04    /* exit status, or 132 for a fault */
#define SLOT_C_CAUSE        0x08    /* mcause of a fault */
#define SLOT_C_TVAL         0x0c    /* mtval of a fault */
#define SLOT_C_BINDS        0x10    /* times it was put on the slot */
#define SLOT_C_PC           0x14    /* where it resumes (at a fault: the pc) */
#define SLOT_C_REGS         0x20    /* x0..x31, x0's word unused */

/* A context's state. */
#define SLOT_EMPTY          0
#define SLOT_RUNNABLE       1
#define SLOT_EXITED         2
#define SLOT_FAULTED        3

#define SLOT_STATUS_TRAP    132     /* as the runtime's unhandled trap */

#endif
