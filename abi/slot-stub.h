/*
 * slot-stub.h — the layout shared by the resident slot stub (slot-stub.S),
 * the trace-unit plugin (which does not count the stub's instructions) and
 * its controllers (slotrun.py): where the stub lives in a slot's guest RAM,
 * its control block, and one context's save area.
 *
 * A slot is one long-lived qemu-system-riscv32 with 64 MiB of RAM; the
 * contexts it runs are saved state.  The stub sits in the reserved gap
 * between the boot block and the image window (docs/coprocessor-abi.md,
 * "Memory map"), outside the local store, so no context can reach it by
 * its own addresses:
 *
 *   0x80041000  4 KiB   stub code (the plugin's excluded range)
 *   0x80042000  8 KiB   control block: header, then one save area per
 *                       context (SLOT_CTX_SIZE bytes each)
 *   0x81000000  ...     staging: SLOT_AREA_SIZE bytes per context: its
 *                       local store and boot block (SLOT_SWAP_SIZE bytes,
 *                       0x80000000..0x80040fff, swapped at every switch)
 *   0x82f00000  15 MiB  the bound context's call stack (--call-graph), as
 *                       the trace-unit plugin saved it: written by the
 *                       controller before the context runs, by the
 *                       plugin when it is handed back (below)
 *
 * A context's image and data windows are not in the slot's RAM but in
 * "main memory", one file shared by every slot's emulator and the host
 * programs, which the slot sees as BAR 2 of an ivshmem-plain device (PCI
 * 00:01.0) that the stub places at SLOT_MAIN_BASE when it boots: context
 * k's windows are SLOT_MAIN_AREA bytes there (the image at the start, the
 * data window SLOT_MAIN_DATA bytes in), named by its boot block, so they
 * need no copy at a switch and its host shares its data window while it
 * runs, as an SPU's host shares main memory.
 *
 * A context runs unmodified, in user mode (slot-stub.S): its exit is its
 * store to the virt test device, whose page PMP denies it (or a store to
 * SLOT_EXIT_ADDR, where nothing is mapped): the store faults into the
 * stub, which reads the value the context meant for the device
 * (COP_TEST_PASS, or status << 16 | COP_TEST_FAIL) from the store's
 * source register.  Its M-mode CSRs are its own, kept in its save area
 * (SLOT_C_HANDLER is its mtvec; SLOT_C_MEPC..SLOT_C_MHARTID) and emulated
 * by the stub at the illegal-instruction trap of each access, and its
 * exceptions go to its own vector.
 *
 * The controller owns an entry that is EMPTY, EXITED, FAULTED or PREEMPTED:
 * it may
 * fill its staging area and save area (registers zero, pc the entry point,
 * handler, binds 0) and then, last, set its state to RUNNABLE, while the emulator
 * runs; the stub owns a RUNNABLE entry until it ends it, or, when its
 * PREEMPT word is set (by the controller, before or while it runs), until
 * the end of the next slice it runs, when the stub saves it and hands it
 * back as PREEMPTED: its staging and save areas are then the whole
 * context, which the controller may resume in any entry of any slot.  The stub runs
 * until no entry is runnable and CLOSED is set; while none is runnable and
 * CLOSED is not, it waits (wfi) and looks again every slice.
 *
 * In place (INPLACE set, one entry): the incoming local store and boot
 * block reach 0x80000000 from outside the guest while the stub waits, and
 * the outgoing one leaves from there once it is handed back or ended (the
 * trace-unit plugin copies them between the RAM and the context's file at
 * SLOT_MAIN_LS: in at SLOT_STUB_FLUSH, out at SLOT_STUB_PARKED or
 * SLOT_STUB_ENDED, before the stub writes the entry's state); the stub
 * copies nothing and passes SLOT_STUB_FLUSH instead, where the plugin
 * (slot=S) has QEMU drop every translation (qemu_plugin_reset: writes from
 * outside the guest are not seen by its self-modifying-code detection).
 * That is how copsim runs slots (--context-model=slot).
 *
 * copsim's main memory is a window: its slots' ivshmem BAR is one
 * SLOT_MAIN_AREA (a file of the slot's own), and every context has a file
 * of that size (its image, its data window SLOT_MAIN_DATA bytes in), whose
 * boot block names SLOT_MAIN_BASE.  Before it marks an entry runnable
 * copsim writes WINDOW; at SLOT_STUB_FLUSH the plugin maps that file over
 * QEMU's host mapping of the BAR (MAP_FIXED, the same host addresses), so
 * the number of contexts is not bounded by the 32-bit guest's address
 * space (trace-plugin.c, "The main-memory window").
 *
 * Who writes and reads (abi/README.md): copsim (slots.c) and slotrun.py
 * are the controller, the stub (emulator/copsim/stub/slot-stub.S) runs
 * the contexts, and the trace-unit plugin (emulator/trace-plugin.c) reads
 * the control block to leave the stub's instructions uncounted and, with
 * --call-graph, moves the bound context's call stack through
 * SLOT_STACK_SAVE (below).  Version rule: the stub is built with copsim
 * and laid into every slot by it, so the three always come from one
 * build; SLOT_MAGIC changes if the control block's or the save area's
 * meaning does, so a plugin of another build finds no stub.
 *
 * Call stacks (a register file with a call-stack area): the plugin keeps
 * the shadow stack of the context it runs; a context's stack travels with
 * it as bytes in SLOT_STACK_SAVE.  The controller writes the context's
 * saved stack there before it marks the entry runnable (four zero bytes
 * for a run's start: an empty stack), the plugin restores it at the
 * context's first block and saves it there where the stub passes
 * SLOT_STUB_PARKED, before the entry reads PREEMPTED; the controller then
 * keeps SLOT_STACK_LENGTH's word of bytes from SLOT_STACK_SAVE (the form
 * is the plugin's, emulator/shadow-stack.h; only its first two words,
 * magic and length, are the controller's to read).  Nothing of a context
 * runs there: it lies above the last staging area and below QEMU's device
 * tree (the top 2 MiB of the 64 MiB).
 *
 * Plain #defines only: the assembler, C and Python (abi/cheader.py reads
 * the "#define NAME VALUE" lines) share this file.
 */
#ifndef SLOT_STUB_H
#define SLOT_STUB_H

#define SLOT_STUB_BASE      0x80041000  /* where the hart starts */
#define SLOT_STUB_SIZE      0x1000
#define SLOT_STUB_TRAP      0x80041004  /* mtvec */
#define SLOT_STUB_ENDED     0x80041008  /* passed when a context ended */
#define SLOT_STUB_PARKED    0x8004100c  /* passed when one was handed back */
#define SLOT_STUB_IDLE      0x80041010  /* passed when nothing is runnable */
#define SLOT_STUB_HANDED    0x80041018  /* passed when an entry was handed
                                           back (ended or preempted) */
#define SLOT_STUB_FLUSH     0x80041014  /* passed when the controller wrote
                                           a local store in place */
#define SLOT_CTL_BASE       0x80042000
#define SLOT_CTL_SIZE       0x2000
#define SLOT_STAGING        0x81000000
#define SLOT_AREA_SIZE      0x100000
#define SLOT_SWAP_SIZE      0x41000     /* local store and boot block */
#define SLOT_RAM_SIZE       0x4000000   /* 64 MiB */
#define SLOT_STACK_SAVE     0x82f00000  /* the bound context's call stack */
#define SLOT_STACK_SAVE_SIZE 0xf00000
#define SLOT_STACK_MAGIC    0x4b534853  /* "SHSK": word 0 of a saved stack */
#define SLOT_STACK_LENGTH   0x04        /* its bytes, word 1 */
#define SLOT_MAIN_BASE      0x40000000  /* main memory: ivshmem's BAR 2 */
#define SLOT_MAIN_SIZE      0x20000000  /* 512 MiB, a power of two */
#define SLOT_MAIN_AREA      0x1000000   /* one context's windows */
#define SLOT_MAIN_DATA      0x800000    /* its data window in its area */
#define SLOT_MAIN_LS        0x1000000   /* its local store and boot block
                                           (SLOT_SWAP_SIZE bytes) in its
                                           file, after its windows: the
                                           plugin copies them into the
                                           slot's RAM at a bind */
#define SLOT_PCI_IVSHMEM    0x30008000  /* ECAM of PCI 00:01.0 */
#define SLOT_IVSHMEM_ID     0x11101af4  /* device 0x1110, vendor 0x1af4 */
#define SLOT_EXIT_ADDR      0x00200000  /* unassigned on the virt machine */
#define SLOT_RESET_VECTOR   0x00001000  /* QEMU virt's reset code: six
                                           instructions, then 0x80000000 */
#define SLOT_LS_BASE        0x80000000
#define SLOT_LS_SIZE        0x40000
#define SLOT_MAX_CONTEXTS   31

/* The control block's header (byte offsets from SLOT_CTL_BASE). */
#define SLOT_MAGIC          0x36544c53  /* "SLT6": contexts in user mode,
                                           call stacks saved, switches
                                           timed, windows by identity,
                                           sleepers counted, local stores
                                           copied by the plugin, the ring
                                           raised by the plugin */
#define SLOT_H_MAGIC        0x00
#define SLOT_H_COUNT        0x04    /* contexts in the table */
#define SLOT_H_CURRENT      0x08    /* index running now, -1 none;
                                       SLOT_BOOTING until the stub ran */
#define SLOT_H_RESIDENT     0x0c    /* whose local store is in place, -1 */
#define SLOT_H_SLICE        0x10    /* timer ticks (10 MHz) per slice */
#define SLOT_H_CLOSED       0x14    /* controller: no more contexts come */
#define SLOT_H_SWITCHES     0x18    /* local stores swapped */
#define SLOT_H_TICKS        0x1c    /* timer ticks spent swapping them */
#define SLOT_H_INTERRUPTS   0x20    /* timer interrupts taken */
#define SLOT_H_INPLACE      0x24    /* 1: the controller moves local
                                       stores itself (below) */
#define SLOT_H_DOORBELL     0x28    /* rung (+1, futex wake) by the
                                       controller when it fills an entry */
#define SLOT_H_FLUSHES      0x2c    /* plugin: switches that dropped
                                       every translation */
#define SLOT_H_KEPT         0x30    /* plugin: switches that kept them (the
                                       incoming code was the same) */
#define SLOT_H_RINGS        0x34    /* ring interrupts taken */
#define SLOT_H_WINDOW       0x38    /* copsim: 1 + its descriptor of the
                                       bound context's main-memory file,
                                       which the plugin maps over the
                                       window; 0: the window stays */
#define SLOT_H_WINDOWS      0x3c    /* plugin: windows it mapped */
#define SLOT_H_WINDOW_ID    0x40    /* copsim: that file's inode (64
                                       bits), the plugin's key for the
                                       files it keeps open */
#define SLOT_H_TAKEN        0x48    /* plugin: CLOCK_MONOTONIC (ns, 64
                                       bits) of the first block of the
                                       context bound last: copsim times
                                       its switches by it */
#define SLOT_H_OPENED       0x50    /* plugin: windows' files it opened
                                       (the others it had kept open) */
#define SLOT_H_KILL         0x54    /* copsim: 1 while the bound context's
                                       run is to end at its hand-back */
#define SLOT_H_SWITCH_SLEEPERS 0x58 /* copsim: 1 while it sleeps on the
                                       entry's state word for a hand-back
                                       it rang for (the plugin skips the
                                       SWITCH wake at 0) */
#define SLOT_H_BELL_SLEEPERS 0x5c   /* plugin: 1 while the vCPU sleeps on
                                       SLOT_H_DOORBELL (copsim skips the
                                       doorbell's wake at 0) */
#define SLOT_H_SOFT_RING    0x60    /* plugin: 1 when it raises the ring
                                       itself (below) */
#define SLOT_H_SOFT_RINGS   0x64    /* of SLOT_H_RINGS, those it raised */
#define SLOT_H_SIZE         0x68

/* Whom the plugin wakes (futex bitsets on an entry's state word) once the
 * stub has written it: a context handed back for a switch wakes only the
 * waiters for SWITCH (copsim's scheduler); an end, or a hand-back that
 * ends the run (KILL), wakes every waiter, among them those for END (the
 * run's thread, which a switch leaves asleep). */
#define SLOT_WAKE_SWITCH    0x1
#define SLOT_WAKE_END       0x2

/* The two waits inside a switch spin this long before they sleep
 * (trace_handshake_wait): copsim for the hand-back it rang for (the ring
 * reaching the stub and the save: 11-12 us median, p95 21-29 us, with the
 * plugin's ring below; 30-55 us through the UART), the vCPU for the go
 * after it parked a context (copsim's unbind and bind: 3-5 us median).
 * A thread whose CPU went idle takes tens of microseconds to wake from a
 * futex, so a wait that ends within the spin saves a wake; one that does
 * not costs this much CPU, once per switch.  Both waits sleeping at once
 * cost more CPU than they spin: time slicing at 1 ms measured 1.13-1.16x
 * CPU against one after another, where spinning measures 1.04-1.07x
 * (bench/copsim, emulator/copsim/README.md).  An idle slot, a queued
 * context and a run waiting for its end never spin. */
#define SLOT_SWITCH_SPIN_NS 80000

/* The ring (in place) interrupts the bound context at its next block
 * boundary, so that a PREEMPT is seen at once, not at the end of a slice.
 * Through the UART: the controller writes a byte to the emulator's
 * standard input, the virt machine's UART receives it and raises its
 * interrupt through the PLIC; that wakes QEMU's main loop twice (the
 * byte, then the drain's accept-input) and has the vCPU wait for QEMU's
 * global lock while the main loop holds it. */
#define SLOT_UART           0x10000000  /* ns16550a: RBR 0, IER 1, LSR 5 */
#define SLOT_UART_IRQ       10
#define SLOT_PLIC           0x0c000000  /* priority of source n at 4 n */
#define SLOT_PLIC_ENABLE    0x0c002000  /* hart 0, machine mode */
#define SLOT_PLIC_CLAIM     0x0c200004  /* its threshold 4 bytes before */
#define SLOT_CAUSE_RING     0x8000000b  /* machine external interrupt */

/* From the vCPU, without QEMU's main loop: a plugin that can store to the
 * machine's memory from the vCPU's thread (QEMU exports
 * address_space_stl_le) says so in SLOT_H_SOFT_RING.  The controller then
 * sets PREEMPT and makes the bound context's next block take the trace
 * unit's slow path (trace_context_kick), where the plugin, seeing PREEMPT,
 * raises the hart's machine software interrupt through the CLINT; the
 * stub takes it at the next block boundary and lowers it with a store of
 * its own.  No byte, no main loop, no lock held by another thread: the
 * vCPU's thread does it all.  The UART stays for a plugin without it. */
#define SLOT_CLINT_MSIP     0x02000000  /* hart 0's software interrupt */
#define SLOT_CAUSE_SOFT_RING 0x80000003 /* machine software interrupt */

/* One context's save area (byte offsets from its start). */
#define SLOT_CTX_SIZE       0x100
#define SLOT_C_STATE        0x00
#define SLOT_C_STATUS       0x04    /* exit status, or 132 for a fault */
#define SLOT_C_CAUSE        0x08    /* mcause of a fault */
#define SLOT_C_TVAL         0x0c    /* mtval of a fault */
#define SLOT_C_BINDS        0x10    /* times it was put on the slot */
#define SLOT_C_PC           0x14    /* where it resumes (at a fault: the pc) */
#define SLOT_C_HANDLER      0x18    /* its own trap entry (its mtvec), 0:
                                       none */
#define SLOT_C_PREEMPT      0x1c    /* hand it back after its next slice */
#define SLOT_C_REGS         0x20    /* x0..x31, x0's word unused */
#define SLOT_C_MEPC         0xa0    /* the context's own M-mode CSRs, */
#define SLOT_C_MCAUSE       0xa4    /* which the stub emulates (its mtvec */
#define SLOT_C_MTVAL        0xa8    /* is SLOT_C_HANDLER) */
#define SLOT_C_MSCRATCH     0xac
#define SLOT_C_MSTATUS      0xb0
#define SLOT_C_MIE          0xb4
#define SLOT_C_MHARTID      0xb8    /* read-only, 0 */

/* SLOT_H_CURRENT as the controller lays the stub out: the stub writes -1
 * there when it has set itself up, so a controller knows its emulator
 * booted. */
#define SLOT_BOOTING        0xfffffffeu

/* A context's state. */
#define SLOT_EMPTY          0
#define SLOT_RUNNABLE       1
#define SLOT_EXITED         2
#define SLOT_FAULTED        3       /* with SLOT_C_HANDLER set: a trap
                                       storm, an exception at the first
                                       instruction of its own trap vector */
#define SLOT_PREEMPTED      4       /* saved and handed back */

#define SLOT_STATUS_TRAP    132     /* as the runtime's unhandled trap */

#endif
