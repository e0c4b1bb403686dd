/*
 * cop-abi.h — the coprocessor ABI: memory map, devices, boot block, overlay
 * tables, image note and exit statuses.
 *
 * This header is shared by both sides: the host tools (loader, cop-run,
 * cop-embed, cop-overlays, copsim, the driver) and the coprocessor runtime
 * built with riscv64-unknown-elf-gcc.  It holds only constants and structs
 * of fixed-width little-endian 32-bit fields, so it means the same thing on
 * x86-64 and on RV32.  docs/coprocessor-abi.md explains every item.
 *
 * Who writes and reads (abi/README.md): the SDK (sdk/: crt0, runtime,
 * cop.ld, cop-embed, cop-overlays) writes images and their tables and
 * notes; the loader (common/loader.c, in copsim and cop-run) writes the
 * boot block; overlay/ and coprofd read the overlay tables; the plugin
 * and the driver read guard words.  Version rule: COP_BOOT_VERSION rises
 * when the boot block changes; a table or note gets a new type rather
 * than a new meaning, so old images stay readable.
 *
 * Guest physical memory of qemu-system-riscv32 -M virt (one file of
 * COP_RAM_SIZE bytes mapped at COP_RAM_BASE, shared with other processes):
 *
 *   0x80000000  local store (LS), 256 KiB: code, data, stack, overlay regions
 *   0x80040000  boot block, 4 KiB: arguments and window addresses
 *   0x80041000  reserved
 *   0x80100000  image window, 7 MiB: the whole ELF file, byte for byte
 *   0x80800000  data window, 6 MiB: shared with the host program (its
 *               last 4 KiB: the mailboxes, struct cop_mbox)
 *   0x80e00000  reserved, 2 MiB: QEMU copies its device tree here at reset
 *   0x81000000  end of RAM
 *
 * A byte's offset in the RAM file is its guest address - COP_RAM_BASE, so
 * an LS address A is at file offset A - 0x80000000 (the "LS offset").
 */
#ifndef COPROF_COP_ABI_H
#define COPROF_COP_ABI_H

#include <stdint.h>

/* Guest RAM: one file, mapped by QEMU at COP_RAM_BASE. */
#define COP_RAM_BASE        0x80000000u
#define COP_RAM_SIZE        0x01000000u     /* 16 MiB */

/* The local store: everything the coprocessor executes lives here. */
#define COP_LS_BASE         0x80000000u
#define COP_LS_SIZE         0x00040000u     /* 256 KiB */
#define COP_LS_END          (COP_LS_BASE + COP_LS_SIZE)

/*
 * What the loader requires of every segment: an address on a word (the
 * instructions are 4 bytes, there is no C extension; code placed off a
 * word traps at once, and the trap handler with it), and to end at least
 * COP_STACK_LEAST bytes below COP_LS_END, where the stack grows down from
 * (a .bss over the stack would be cleared, and written, by the stack).
 * cop.ld keeps COP_STACK_MIN, 16 KiB by default, free.
 */
#define COP_SEGMENT_ALIGN   4u
#define COP_STACK_LEAST     0x1000u         /* 4 KiB */

/* The boot block: written by the loader, read by crt0 (struct below). */
#define COP_BOOT_BASE       0x80040000u
#define COP_BOOT_SIZE       0x00001000u     /* 4 KiB */

/* Main memory: the whole ELF image, where overlays are fetched from. */
#define COP_IMAGE_BASE      0x80100000u
#define COP_IMAGE_SIZE      0x00700000u     /* 7 MiB: the largest image */

/* Main memory shared with the host program. */
#define COP_DATA_BASE       0x80800000u
#define COP_DATA_SIZE       0x00600000u     /* 6 MiB */

/* QEMU writes the device tree at the top of RAM, 2 MiB aligned. */
#define COP_FDT_BASE        0x80e00000u
#define COP_FDT_SIZE        0x00200000u

/* Devices of the virt machine. */
#define COP_UART_BASE       0x10000000u     /* ns16550a console */
#define COP_UART_THR        0u              /* transmit holding register */
#define COP_UART_LSR        5u              /* line status register */
#define COP_UART_LSR_THRE   0x20u           /* transmitter ready */
#define COP_TEST_BASE       0x00100000u     /* sifive_test: exit device */
#define COP_TEST_PASS       0x5555u         /* QEMU exits with status 0 */
#define COP_TEST_FAIL       0x3333u         /* | status << 16: exits with it */

/*
 * The boot block at COP_BOOT_BASE.  The loader fills it before the program
 * starts; addresses are guest addresses.  argv_addr points at argc + 1
 * guest pointers (the last one 0) followed by the NUL-terminated strings,
 * all inside the block.
 */
#define COP_BOOT_MAGIC      0x42504f43u     /* "COPB" */
#define COP_BOOT_VERSION    1u

struct cop_boot_block {
    uint32_t magic;         /* COP_BOOT_MAGIC */
    uint32_t version;       /* COP_BOOT_VERSION */
    uint32_t image_addr;    /* COP_IMAGE_BASE */
    uint32_t image_size;    /* bytes of the ELF file placed there */
    uint32_t data_addr;     /* COP_DATA_BASE */
    uint32_t data_size;     /* COP_DATA_SIZE */
    uint32_t argc;
    uint32_t argv_addr;     /* guest address of argv[0] */
    uint32_t started;       /* 0 from the loader; COP_BOOT_STARTED once
                               the runtime has checked the block */
    uint32_t reserved[7];   /* zero */
};

/* What the runtime writes into `started`: a runner (cop-run) that finds
 * it still 0 when QEMU has exited knows the program never ran. */
#define COP_BOOT_STARTED    0x4e555243u     /* "CRUN" */

#define COP_BOOT_ARGS_OFFSET 64u    /* where argv[] starts in the block */
#define COP_BOOT_ARGS_END   0xc00u  /* argv and its strings end below it */

/*
 * The memory flow controller (MFC): DMA between the local store and the
 * data window, the Cell's way (docs/coprocessor-abi.md, "DMA").  Its
 * channel is this block, the last KiB of the boot block (so it is the
 * context's, saved and restored with the local store): the runtime
 * (sdk/runtime/mfc.c) queues commands in it and marks each with an issue
 * marker, a wait with a wait marker; the trace unit (emulator/mfc.c)
 * stamps each command's modelled completion and each wait's end; the
 * runtime's transfer engine then moves the bytes of the commands that
 * have completed, with guest stores.  Words are little-endian; 64-bit
 * cycle counts are two words, low first.
 */
#define COP_MFC_BASE        (COP_BOOT_BASE + COP_BOOT_ARGS_END)
#define COP_MFC_MAGIC       0x3143464du     /* "MFC1": the runtime set it up */
#define COP_MFC_QUEUE_DEPTH 16u             /* commands outstanding */
#define COP_MFC_TAGS        32u             /* tag groups 0..31 */
#define COP_MFC_ALIGN       16u             /* of addresses and sizes */
#define COP_MFC_MAX_SIZE    16384u          /* bytes of one transfer */

/* struct cop_mfc_command.op */
#define COP_MFC_GET         1u              /* data window -> local store */
#define COP_MFC_PUT         2u              /* local store -> data window */

/* struct cop_mfc.wait_mode */
#define COP_MFC_WAIT_ALL    0u              /* until every tag of the mask */
#define COP_MFC_WAIT_ANY    1u              /* until one tag of the mask */
#define COP_MFC_WAIT_NONE   2u              /* no wait: the status now */

/*
 * The markers: fence.i with its reserved immediate set (QEMU decodes any
 * immediate as fence.i, which ends the translation block, so a marker is
 * always the last instruction of its block).  The trace unit knows them
 * by their word.
 */
#define COP_MARK_DMA_ISSUE  0x7c10100fu     /* fence.i, imm 0x7c1 */
#define COP_MARK_DMA_WAIT   0x7c20100fu     /* fence.i, imm 0x7c2 */
#define COP_MARK_MBOX_READ  0x7c30100fu     /* fence.i, imm 0x7c3 */
#define COP_MARK_MBOX_WRITE 0x7c40100fu     /* fence.i, imm 0x7c4 */
#define COP_MARK_MBOX_COUNT 0x7c50100fu     /* fence.i, imm 0x7c5 */

struct cop_mfc_command {
    uint32_t op;            /* COP_MFC_GET, COP_MFC_PUT */
    uint32_t ls;            /* local-store address */
    uint32_t ea;            /* main-memory address, in the data window */
    uint32_t size;          /* bytes */
    uint32_t tag;           /* 0 .. COP_MFC_TAGS - 1 */
    uint32_t pc;            /* trace unit: the issue marker's address */
    uint32_t done_lo;       /* trace unit: modelled completion, in the */
    uint32_t done_hi;       /*   context's cycles */
};

struct cop_mfc {
    uint32_t magic;         /* runtime: COP_MFC_MAGIC */
    uint32_t engine_start;  /* runtime: the transfer engine's code, which */
    uint32_t engine_end;    /*   the trace unit neither counts nor samples */
    uint32_t count;         /* runtime: commands in queue[] */
    uint32_t wait_mask;     /* runtime: the tags a wait marker waits for */
    uint32_t wait_mode;     /* runtime: COP_MFC_WAIT_* */
    uint32_t now_lo;        /* runtime: all ones before a wait marker; */
    uint32_t now_hi;        /*   trace unit: the context's cycle at its end */
    uint32_t bus_lo;        /* trace unit: the cycle the bus is free */
    uint32_t bus_hi;
    uint32_t mbox_value;    /* runtime: the message a mailbox write
                               marker sends; trace unit: the message a
                               read marker took, the count of a count */
    uint32_t mbox_done;     /* runtime: 0 before a mailbox marker; trace
                               unit: 1 once it has served it */
    uint32_t reserved[20];  /* zero */
    struct cop_mfc_command queue[COP_MFC_QUEUE_DEPTH];
};

/*
 * The mailboxes (docs/coprocessor-abi.md, "Mailboxes"), the Cell's shape:
 * per context an inbound mailbox (host -> coprocessor, COP_MBOX_IN_DEPTH
 * 32-bit messages) and an outbound one (coprocessor -> host,
 * COP_MBOX_OUT_DEPTH).  Their block is the data window's last page, in
 * memory the host program (libcop) and the trace unit both map in either
 * context model; the runtime neither reads nor writes it: it asks the
 * trace unit through the mailbox markers and struct cop_mfc's mbox_value
 * and mbox_done.  Counters only grow (a slot is counter % depth); the
 * side named writes each word.  A message's stamp is in the context's
 * cycles (see the timing rule in the docs).  in_put, out_taken,
 * in_taken and out_put are futex words: the writer wakes them.
 */
#define COP_MBOX_SIZE       0x1000u         /* the data window's last page */
#define COP_MBOX_OFFSET     (COP_DATA_SIZE - COP_MBOX_SIZE)
#define COP_MBOX_IN_DEPTH   4u
#define COP_MBOX_OUT_DEPTH  1u

struct cop_mbox_message {
    uint32_t value;
    uint32_t stamp_lo;      /* inbound: the write cycle of the newest */
    uint32_t stamp_hi;      /*   outbound message the host had read, 0 */
    uint32_t reserved;      /* outbound: the cycle the coprocessor wrote */
};

struct cop_mbox {
    uint32_t in_put;        /* host: inbound messages written so far */
    uint32_t in_taken;      /* trace unit: inbound messages read so far */
    uint32_t out_put;       /* trace unit: outbound messages written */
    uint32_t out_taken;     /* host: outbound messages read */
    uint32_t seen_lo;       /* host: the write cycle of the newest */
    uint32_t seen_hi;       /*   outbound message it has read */
    uint32_t reserved[10];  /* zero */
    struct cop_mbox_message in[COP_MBOX_IN_DEPTH];
    struct cop_mbox_message out[COP_MBOX_OUT_DEPTH];
};

/*
 * Overlay tables, with the SPU toolchain's layout.  _ovly_table ..
 * _ovly_table_end holds one entry per overlay; its 1-based position is the
 * overlay's index.  _ovly_buf_table .. _ovly_buf_table_end holds one guard
 * word per overlay region ("buffer"): the index of the overlay loaded there,
 * 0 for none.
 */
struct cop_ovly_entry {
    uint32_t vma;           /* LS address of the region */
    uint32_t size;          /* bytes of this overlay */
    uint32_t file_off;      /* offset of its bytes in the ELF file */
    uint32_t buf;           /* 1-based region index into _ovly_buf_table */
};

#define COP_PF_OVERLAY      0x08000000u     /* p_flags bit 27 */

/*
 * The image's short name: an SHT_NOTE section ".note.cop_name" (also a
 * PT_NOTE segment) with owner "COPNAME", type NT_COP_NAME, and the name as a
 * NUL-terminated string of 1 .. COP_NAME_MAX characters [A-Za-z0-9_.-].
 */
#define COP_NOTE_SECTION    ".note.cop_name"
#define COP_NOTE_OWNER      "COPNAME"
#define NT_COP_NAME         1u
#define COP_NAME_MAX        63u

/*
 * Exit statuses the runtime itself uses (a program's own status is 0..255
 * as on POSIX).  They mirror a host process killed by SIGILL or SIGABRT.
 */
#define COP_STATUS_TRAP     132u    /* unhandled trap: fault, illegal insn */
#define COP_STATUS_FATAL    134u    /* runtime error: bad overlay call, ... */

#endif
