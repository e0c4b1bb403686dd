/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trace-regs.h — the trace unit's register file: the binary layout of the
 * shared file through which the QEMU plugin (the emulated hardware), copsim
 * (the scheduler) and the kernel driver talk, plus the lock-free primitives
 * every side uses on it.
 *
 * docs/trace-unit.md is the specification: every offset, width, writer and
 * ordering rule below is documented there, and the static_asserts at the end
 * of this file pin the structures to it.
 *
 * The file is a header followed by n_slots slot blocks and n_contexts context
 * blocks.  A slot is one emulated trace-array channel: an LFSR, counters and
 * a FIFO of 16-bit PC fields with one producer (the emulator of the context
 * bound to the slot) and one consumer (the driver), and after the FIFO a
 * small ring of overlay events.  A context block is the handshake with one
 * emulator process: which slot it runs on, the run gate at which it waits
 * between translation blocks while copsim has it held, and the overlay guard
 * words the trace unit watches for it.
 *
 * Overlay watch (version 2): a controller that knows the context's image
 * writes where its overlay guard words are (guard_ls_offset, guard_count).
 * At every capture the emulator compares those words in the local store
 * with the values it saw at its previous capture and, for each one that
 * changed, pushes an event {fifo_pos, region, guard} on its slot before the
 * capture itself: fifo_pos is the slot's fifo_head at that moment, so the
 * consumer knows that the FIFO entries before fifo_pos were captured under
 * the old guard and those from fifo_pos on under the new one.  Like a data
 * address comparator with data-value trace in a real trace macrocell, it
 * places every overlay change exactly in the sample sequence.
 *
 * FIFO-full policy, doorbell and dither (version 3): the controller writes
 * per slot what a capture does when the FIFO is full (fifo_policy: drop
 * and count it, as the Cell did, or stall the producer until the consumer
 * drains), the FIFO fill at which the producer rings the header's doorbell
 * (a futex word the driver waits on, so it drains early), and whether each
 * sampling interval is randomized (dither, dither_seed): interval k after
 * a load is N + trace_dither_jitter(seed, k, width), drawn by the producer
 * at each reload (interval 0 when it first runs after the load).  The
 * producer counts its stalls and their time in the slot's fourth line.
 *
 * Mailbox (version 4): after the context blocks, one mailbox per slot
 * through which the controller (copsim) tells the driver what it used to
 * learn through direct calls: a bind (the context's identity, its image's
 * identity and path, where its guard words are and their values), an
 * unbind at preemption, an end.  The controller fills the message and
 * publishes it with a release store of seq + 1; the driver reads it after
 * an acquire load of seq and stores ack = seq when it has acted on it.
 *
 * Call stacks (an optional area appended after the mailboxes; the header's
 * stack_depth says whether there is one, so the version stays 4 and a
 * reader that does not know it never looks past the mailboxes): per slot,
 * one stack record per FIFO entry, entry i's at index i mod fifo_depth.
 * The producer writes the record of a capture before the release store of
 * fifo_head that publishes the entry, the consumer copies it with the
 * entry before it stores fifo_tail, exactly as the FIFO entries.  A
 * record is 1 + stack_depth words: the depth of the emulator's shadow
 * stack at the capture (it may exceed stack_depth, and then only the
 * innermost stack_depth frames are kept), then the frames, innermost
 * first, each the return address's PC field (LS offset >> 2) in bits
 * 0..15 and in bits 16..31 the overlay (1-based index) that held the
 * return address when the call was made, 0 for resident code or unknown.
 *
 * Cause words (version 5): each FIFO entry has a parallel 32-bit cause
 * word, entry i's at index i of the slot's cause array (after the FIFO,
 * on a new line), like the Cell trace array's per-entry status bits: the
 * stall reason of the captured cycle and, for a DMA-wait capture, the
 * transfer waited on (its tag and the LS offset of the get/put that
 * issued it).  The producer writes it before the release store of
 * fifo_head, the consumer copies it with the entry (trace_slot_drain_
 * entries(), which bounds every field: trace_cause_checked()).
 *
 * Each block is split into 64-byte lines with a single writer each, so the
 * emulator's per-block store to `cycles` never shares a line with what the
 * controller or the consumer write.
 *
 * Everything here is freestanding C (no libc) so the kernel-style driver
 * core can include it.  Shared words are accessed through the trace_*
 * accessors below: GCC's __atomic builtins in user space, the kernel's own
 * READ_ONCE/WRITE_ONCE and virt_* barriers in copdrv.ko (the other party
 * is a host process, so the barriers must hold on a !SMP guest too).
 *
 * The register file is untrusted input for whoever maps it: a reader takes
 * the header once (trace_regs_snapshot()) into its own memory, checks the
 * copy (trace_regs_check(), the one validator of the hosted tools and the
 * module) and never reads a geometry field from the file again; sizes are
 * computed in 64 bits, so no field value wraps a check.
 *
 * Who writes and reads (abi/README.md): copsim creates the file and is the
 * controller (bind, hold, mailbox); the QEMU plugin (emulator/) is the
 * producer of every slot it runs; the driver (kernel-driver/, hosted in
 * copsim or in copdrv.ko) is the consumer; coptrace and cop-run play both
 * ends for one slot; trace-unit/ is the library the user-space parties
 * map it with.  Version rule: TRACE_REGS_VERSION rises with every change
 * a reader of the old layout would misread, and every party refuses a
 * file of another version; an area appended where an old reader never
 * looks, announced by a header field (stack_depth), keeps the version.
 */
#ifndef COPROF_TRACE_REGS_H
#define COPROF_TRACE_REGS_H

#include <stdint.h>

/*
 * Accessors of words another agent writes at the same time.  Each is one
 * whole load or store of a naturally aligned word:
 *
 *   trace_load_once(p), trace_store_once(p, v)  no ordering
 *   trace_load_acquire(p)      later accesses stay after it
 *   trace_store_release(p, v)  earlier accesses stay before it
 *   trace_fence_load()         earlier loads before later loads
 *   trace_cas(p, old, new)     1 if *p was old and is now new (full barrier)
 */
#ifdef __KERNEL__
#include <linux/compiler.h>
#include <linux/atomic.h>
#include <asm/barrier.h>
#define trace_load_once(p)              READ_ONCE(*(p))
#define trace_store_once(p, v)          WRITE_ONCE(*(p), v)
/* Each use below says which access of the other party it pairs with. */
#define trace_load_acquire(p)           virt_load_acquire(p)
/* Each use below says which access of the other party it pairs with. */
#define trace_store_release(p, v)       virt_store_release(p, v)
/* Its one use, the seqlock's read side, pairs with the writer's CAS. */
#define trace_fence_load()              virt_rmb()
#define TRACE_NULL                      NULL
#include <linux/build_bug.h>

/* Its one use, the seqlock writer's entry, pairs with the other writer's. */
static inline int trace_cas(uint32_t *p, uint32_t old, uint32_t new_)
{
    return cmpxchg(p, old, new_) == old;
}
#else
#define trace_load_once(p)              __atomic_load_n(p, __ATOMIC_RELAXED)
#define trace_store_once(p, v)          __atomic_store_n(p, v, __ATOMIC_RELAXED)
#define trace_load_acquire(p)           __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define trace_store_release(p, v)       __atomic_store_n(p, v, __ATOMIC_RELEASE)
#define trace_fence_load()              __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define TRACE_NULL                      ((void *)0)
#ifndef static_assert
#define static_assert                   _Static_assert
#endif

static inline int trace_cas(uint32_t *p, uint32_t old, uint32_t new_)
{
    return __atomic_compare_exchange_n(p, &old, new_, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}
#endif

#define TRACE_REGS_MAGIC        "COPTRACE"  /* 8 bytes, no terminator */
#define TRACE_REGS_MAGIC_SIZE   8
#define TRACE_REGS_VERSION      5
#define TRACE_LINE_SIZE         64

#define TRACE_NONE              0xFFFFFFFFu /* no slot / no context */

/* Geometry limits the validator enforces. */
#define TRACE_MAX_SLOTS         64
#define TRACE_MAX_CONTEXTS      4096
#define TRACE_MIN_FIFO_DEPTH    2
#define TRACE_MAX_FIFO_DEPTH    0x1000000u  /* 2^24 */
#define TRACE_MAX_LS_SIZE       0x40000u    /* 16-bit field << 2 */
#define TRACE_MAX_GUARDS        64          /* guard words one context watches */

/*
 * Overlay events per slot (a power of two); see struct trace_ovl_event.  A
 * capture pushes at most one event per guard word; the driver polls long
 * before half the default FIFO is queued at the real emulation speed (its
 * interval is for the nominal clock), so 1024 holds a poll's events for
 * overlays swapped every few captures.  A full ring only makes the driver
 * fall back to reading the guard words at its polls.
 */
#define TRACE_EVENT_DEPTH       1024
#define TRACE_MAX_STACK_DEPTH   64          /* frames per stack record */
#define TRACE_STACK_FRAME(field, overlay) \
    ((uint32_t)(field) | (uint32_t)(overlay) << 16)
#define TRACE_STACK_FRAME_FIELD(frame)   ((uint16_t)((frame) & 0xFFFFu))
#define TRACE_STACK_FRAME_OVERLAY(frame) ((uint16_t)((frame) >> 16))

/* Defaults of the hardware model (docs/trace-unit.md). */
#define TRACE_DEFAULT_SLOTS      8
#define TRACE_DEFAULT_CONTEXTS   64
/*
 * 4096, not the Cell's 1024: with the stall policy a FIFO that fills before
 * the driver comes stalls the coprocessor.  bench/trace-unit measured
 * host-pipeline at SPU_CYCLES:997 on this loaded 2-core machine: with 1024
 * entries up to 5% of a slot's run time stalled (drop lost 7-10% of the
 * captures), with 4096 the median stall share was 0 (drop lost under 1%).
 */
#define TRACE_DEFAULT_FIFO_DEPTH 4096
#define TRACE_DEFAULT_LS_BASE    0x80000000u
#define TRACE_DEFAULT_LS_SIZE    0x40000u

/* Context status, written by the emulator. */
#define TRACE_CONTEXT_IDLE      0   /* no emulator attached */
#define TRACE_CONTEXT_RUNNING   1   /* executing under an open gate */
#define TRACE_CONTEXT_HELD      2   /* waiting at a closed gate */
#define TRACE_CONTEXT_EXITED    3   /* the emulator has ended */

/* FIFO-full policies (slot register fifo_policy, written by the controller). */
#define TRACE_FIFO_DROP         0   /* drop the capture, count it (the Cell) */
#define TRACE_FIFO_STALL        1   /* the producer waits for room */

/*
 * Events (slot register event, written by the controller): what steps the
 * slot's LFSR and its `cycles` counter.  0, the value of a file that
 * predates the field, is the timing model's cycles.
 */
#define TRACE_EVENT_CYCLES       0  /* SPU_CYCLES: modelled cycles */
#define TRACE_EVENT_INSTRUCTIONS 1  /* SPU_INSTRUCTIONS: retired instructions */

/*
 * Stall reasons: why the coprocessor spent the cycle at which a capture
 * was taken (docs/trace-unit.md, "Stall reasons").  The emulator knows it
 * from the timing model; every capture carries one.  Under
 * SPU_INSTRUCTIONS every capture is TRACE_STALL_ISSUE.
 */
enum trace_stall_reason {
    TRACE_STALL_ISSUE = 0,          /* the instruction occupies the issue slot */
    TRACE_STALL_DEPENDENCY = 1,     /* it waits for an operand in flight */
    TRACE_STALL_BRANCH = 2,         /* a mispredicted branch / indirect jump */
    TRACE_STALL_DMA_WAIT = 3,       /* waiting for DMA tags to complete */
    TRACE_STALL_MAILBOX_WAIT = 4,   /* waiting on a mailbox (empty / full) */
    TRACE_STALL_MEMORY = 5          /* a direct access to main memory */
};
#define TRACE_STALL_REASONS     6   /* values 0 .. TRACE_STALL_REASONS - 1 */

/*
 * A FIFO entry's cause word (docs/trace-unit.md, "FIFO entries"):
 *   bits  0..3   the stall reason (enum trace_stall_reason)
 *   bit   4      TRACE_CAUSE_TRANSFER: the entry names a DMA transfer
 *   bits  8..12  its tag (0..31)
 *   bits 16..31  the PC field (LS offset >> 2) of the get/put that issued it
 * Every other bit is zero.  A transfer is named only with TRACE_STALL_DMA_WAIT.
 */
#define TRACE_CAUSE_TRANSFER    0x10u
#define TRACE_DMA_TAGS          32u
#define TRACE_CAUSE_RESERVED    0x0000E0E0u

/* The cause word of a DMA-wait capture waiting on transfer `tag`, issued
 * at PC field `issuer_field`. */
static inline uint32_t trace_cause_transfer(uint32_t tag,
                                            uint32_t issuer_field)
{
    return TRACE_STALL_DMA_WAIT | TRACE_CAUSE_TRANSFER
           | (tag & (TRACE_DMA_TAGS - 1)) << 8 | (issuer_field & 0xFFFFu) << 16;
}

static inline uint32_t trace_cause_reason(uint32_t cause)
{
    return cause & 0xFu;
}

static inline int trace_cause_has_transfer(uint32_t cause)
{
    return (cause & TRACE_CAUSE_TRANSFER) != 0;
}

static inline uint32_t trace_cause_tag(uint32_t cause)
{
    return (cause >> 8) & (TRACE_DMA_TAGS - 1);
}

static inline uint32_t trace_cause_issuer_field(uint32_t cause)
{
    return cause >> 16;
}

/*
 * A cause word read from the (untrusted) register file, bounded: a
 * reason outside the enum, a reserved bit set, or a transfer on another
 * reason than DMA_WAIT gives TRACE_STALL_ISSUE (the PC field beside it is
 * still the capture's).  The issuer field is 16 bits like a PC field.
 */
static inline uint32_t trace_cause_checked(uint32_t cause)
{
    uint32_t reason = trace_cause_reason(cause);

    if (reason >= TRACE_STALL_REASONS || (cause & TRACE_CAUSE_RESERVED)
        || (trace_cause_has_transfer(cause)
            && reason != TRACE_STALL_DMA_WAIT))
        return TRACE_STALL_ISSUE;
    if (!trace_cause_has_transfer(cause))
        return reason;
    return cause;
}

/* Emulator modes, written by the emulator. */
#define TRACE_MODE_FAST         1   /* one callback per translation block */
#define TRACE_MODE_REFERENCE    2   /* one callback per instruction */

/*
 * Gate values: the controller adds one at every change, so even values are
 * closed and odd values open, and each hold has its own value that the
 * emulator echoes in `ack` once it obeys it.  A fresh context starts closed
 * at 0.
 */

struct trace_regs_header {          /* offset 0, written once by the creator */
    char     magic[TRACE_REGS_MAGIC_SIZE];  /*  0 */
    uint32_t version;               /*  8 */
    uint32_t header_size;           /* 12: sizeof(struct trace_regs_header) */
    uint64_t file_size;             /* 16 */
    uint32_t n_slots;               /* 24 */
    uint32_t n_contexts;            /* 28 */
    uint32_t fifo_depth;            /* 32: entries per slot, a power of two */
    uint32_t slot_stride;           /* 36 */
    uint32_t slots_offset;          /* 40 */
    uint32_t context_stride;        /* 44 */
    uint32_t contexts_offset;       /* 48 */
    uint32_t ls_base;               /* 52: guest address of LS byte 0 */
    uint32_t ls_size;               /* 56: local-store bytes */
    int32_t  controller_pid;        /* 60: 0, or the process that holds gates */
    uint32_t doorbell;              /* 64: producers add 1 and FUTEX_WAKE it
                                           when a FIFO passes its watermark
                                           or stalls; the driver waits on it */
    uint32_t mailbox_offset;        /* 68: the slots' mailboxes (v4) */
    uint32_t mailbox_stride;        /* 72: sizeof(struct trace_regs_mailbox) */
    uint32_t mailbox_reader;        /* 76: 1 while a driver outside the
                                           controller acks the mailboxes
                                           (written by that driver) */
    uint32_t stack_offset;          /* 80: the call-stack area, after the
                                           mailboxes; 0 = none */
    uint32_t stack_depth;           /* 84: frames per stack record, 0 = no
                                           call-stack area */
    uint8_t  reserved[40];          /* 88: zero */
};

struct trace_regs_slot {
    /* Line 0: written by the controller (copsim / driver). */
    uint32_t programmed_value;      /*   0: reload value, 0 = capture off */
    uint32_t bound_context;         /*   4: context on it, or TRACE_NONE */
    uint32_t fifo_policy;           /*   8: TRACE_FIFO_DROP or _STALL */
    uint32_t watermark;             /*  12: queued entries that ring the
                                           doorbell; 0 = never */
    uint32_t dither;                /*  16: 1 = randomize each interval */
    uint32_t event;                 /*  20: the LFSR's clock: TRACE_EVENT_* */
    uint64_t dither_seed;           /*  24: seed of the jitter generator */
    uint8_t  controller_pad[32];

    /* Line 1: written by the producer (the emulator bound to the slot). */
    uint64_t cycles;                /*  64: ticks of the slot's event */
    uint64_t capture_count;         /*  72: expiries, including dropped ones */
    uint64_t overflow_count;        /*  80: captures dropped, FIFO full */
    uint64_t outside_count;         /*  88: captures whose PC was outside LS */
    uint64_t reload_cycle;          /*  96: cycle the LFSR was loaded at */
    uint32_t reload_state;          /* 104: the state it was loaded with */
    uint32_t lfsr_seq;              /* 108: seqlock over cycles/reload_* */
    uint32_t fifo_head;             /* 112: entries ever pushed (mod 2^32) */
    uint32_t event_head;            /* 116: overlay events ever pushed */
    uint32_t event_overflow;        /* 120: overlay events dropped, ring full */
    uint8_t  producer_pad[4];

    /* Line 2: written by the consumer (the driver). */
    uint32_t fifo_tail;             /* 128: entries ever drained (mod 2^32) */
    uint32_t event_tail;            /* 132: overlay events ever drained */
    uint8_t  consumer_pad[56];

    /* Line 3: written by the producer (stalls, the dither's position). */
    uint64_t stall_ns;              /* 192: wall time spent stalled */
    uint64_t stall_count;           /* 200: captures that found the FIFO full
                                           and waited */
    uint64_t dither_draws;          /* 208: jitters drawn since the last
                                           load (the loader zeroes it) */
    uint32_t stalled;               /* 216: 1 while the producer waits */
    uint8_t  stall_pad[36];

    uint16_t fifo[];                /* 256: fifo_depth PC fields, then their
                                           cause words (trace_slot_causes()),
                                           then the events
                                           (trace_slot_events()) */
};

/*
 * One overlay event: the guard word of `region` (0-based index into the
 * context's guard words) became `guard` before the capture that was to be
 * FIFO entry number fifo_pos (the slot's fifo_head when it was seen).
 */
struct trace_ovl_event {
    uint32_t fifo_pos;
    uint32_t region;
    uint32_t guard;
    uint32_t reserved;              /* zero */
};

struct trace_regs_context {
    /* Line 0: written by the controller. */
    uint32_t gate;                  /*   0: run gate, odd = open */
    uint32_t slot;                  /*   4: bound slot, or TRACE_NONE */
    uint32_t guard_ls_offset;       /*   8: LS byte offset of the overlay
                                           guard words (_ovly_buf_table) */
    uint32_t guard_count;           /*  12: guard words to watch, 0 = none */
    uint8_t  controller_pad[48];

    /* Line 1: written by the emulator. */
    uint32_t ack;                   /*  64: last gate value obeyed */
    uint32_t status;                /*  68: TRACE_CONTEXT_* */
    int32_t  pid;                   /*  72: emulator process, 0 = none */
    uint32_t mode;                  /*  76: TRACE_MODE_* */
    uint64_t instructions;          /*  80: retired, as of the last hold/exit */
    uint64_t check_cycle;           /*  88: fast mode's next slow path; the
                                           controller zeroes it at a hold */
    uint64_t cycles;                /*  96: the context's modelled cycles,
                                           as of the last hold (the clock of
                                           its DMA, emulator/mfc.h) */
    uint8_t  emulator_pad[24];
};

/* Mailbox operations (struct trace_regs_mailbox.op). */
#define TRACE_MAILBOX_NONE      0   /* nothing posted yet */
#define TRACE_MAILBOX_BIND      1   /* context bound to the slot */
#define TRACE_MAILBOX_UNBIND    2   /* taken off, to run again (preempted) */
#define TRACE_MAILBOX_END       3   /* taken off for good (exit, fault, kill) */
#define TRACE_MAILBOX_PATH_MAX  576 /* bytes of the image path carried */

/*
 * One slot's mailbox (docs/trace-unit.md, "Mailbox").  Lines 0-1 and the
 * guard words and path are written by the controller before it publishes
 * seq; line 2 by the driver.  A path longer than TRACE_MAILBOX_PATH_MAX
 * has its full length in path_length and only its first bytes in path[].
 */
struct trace_regs_mailbox {
    /* Line 0: the message, written by the controller. */
    uint32_t seq;                   /*   0: messages posted (release) */
    uint32_t op;                    /*   4: TRACE_MAILBOX_* */
    uint32_t context;               /*   8: its block in the register file */
    uint32_t slot;                  /*  12: this mailbox's slot */
    uint64_t context_id;            /*  16: copsim's id, never reused */
    uint64_t object_id;             /*  24: ELF header's host address */
    int32_t  pid;                   /*  32: host process of the context */
    int32_t  tid;                   /*  36: host thread that runs it */
    uint64_t image_offset;          /*  40: file offset of the ELF header */
    uint32_t guard_ls_offset;       /*  48: LS offset of the guard words */
    uint32_t guard_count;           /*  52: guard words (regions); guards[]
                                           holds the first TRACE_MAX_GUARDS */
    uint32_t path_length;           /*  56: bytes of the image path */
    uint32_t status;                /*  60: END: the program's exit status */

    /* Line 1: the image's identity, written by the controller. */
    uint64_t image_device;          /*  64: st_dev */
    uint64_t image_inode;           /*  72: st_ino */
    uint64_t image_file_size;       /*  80: st_size */
    uint64_t image_hash;            /*  88: first 8 bytes of its SHA-256 */
    uint8_t  image_pad[32];

    /* Line 2: written by the driver. */
    uint32_t ack;                   /* 128: last seq acted on */
    uint8_t  driver_pad[60];

    uint32_t guards[TRACE_MAX_GUARDS];      /* 192: guard words at BIND */
    char     path[TRACE_MAILBOX_PATH_MAX];  /* 448: not NUL-terminated */
};

/*
 * Controller: publishes the message filled in *box (everything but seq and
 * ack) and returns its seq.  The slot's previous message must be acked.
 */
static inline uint32_t trace_mailbox_post(struct trace_regs_mailbox *box)
{
    uint32_t seq = trace_load_once(&box->seq) + 1;

    trace_store_release(&box->seq, seq);
    return seq;
}

/* Driver: the seq of a message not acked yet, or 0 when none waits. */
static inline uint32_t trace_mailbox_pending(const struct trace_regs_mailbox *box)
{
    uint32_t seq = trace_load_acquire(&box->seq);

    return seq != trace_load_once(&box->ack) ? seq : 0;
}

/* Driver: says it has acted on message `seq`. */
static inline void trace_mailbox_ack(struct trace_regs_mailbox *box,
                                     uint32_t seq)
{
    trace_store_release(&box->ack, seq);
}

/* Controller: whether the driver acked the slot's last message. */
static inline int trace_mailbox_acked(const struct trace_regs_mailbox *box)
{
    return trace_load_acquire(&box->ack)
           == trace_load_once(&box->seq);
}

static inline int trace_gate_is_open(uint32_t gate)
{
    return (gate & 1u) != 0;
}

static inline uint64_t trace_line_round(uint64_t bytes)
{
    return (bytes + TRACE_LINE_SIZE - 1) & ~(uint64_t)(TRACE_LINE_SIZE - 1);
}

/*
 * Offset of a slot block's cause words: after its FIFO, on a new line.
 * 64-bit: a fifo_depth read from a hostile file must not wrap the sum.
 */
static inline uint64_t trace_regs_slot_causes_offset(uint32_t fifo_depth)
{
    return trace_line_round(sizeof(struct trace_regs_slot)
                            + 2ull * fifo_depth);
}

/* Offset of a slot block's overlay events: after its cause words. */
static inline uint64_t trace_regs_slot_events_offset(uint32_t fifo_depth)
{
    return trace_line_round(trace_regs_slot_causes_offset(fifo_depth)
                            + 4ull * fifo_depth);
}

/* Bytes of one slot block with its FIFO and its events, in whole lines. */
static inline uint64_t trace_regs_slot_stride(uint32_t fifo_depth)
{
    return trace_regs_slot_events_offset(fifo_depth)
           + TRACE_EVENT_DEPTH * (uint64_t)sizeof(struct trace_ovl_event);
}

static inline struct trace_ovl_event *
trace_slot_events(struct trace_regs_slot *slot, uint32_t fifo_depth)
{
    return (struct trace_ovl_event *)((char *)slot
            + trace_regs_slot_events_offset(fifo_depth));
}

static inline uint32_t *trace_slot_causes(struct trace_regs_slot *slot,
                                          uint32_t fifo_depth)
{
    return (uint32_t *)((char *)slot
                        + trace_regs_slot_causes_offset(fifo_depth));
}

/* Words of one stack record: the depth, then stack_depth frames. */
static inline uint32_t trace_stack_record_words(uint32_t stack_depth)
{
    return 1u + stack_depth;
}

/* Bytes of one slot's stack records (fifo_depth of them). */
static inline uint64_t trace_stack_slot_bytes(uint32_t fifo_depth,
                                              uint32_t stack_depth)
{
    return (uint64_t)fifo_depth * ((uint64_t)stack_depth + 1) * 4u;
}

/*
 * Where each part of a register file lies for its geometry (64-bit, so
 * any 32-bit field values give exact sums): the context blocks after the
 * slot blocks, the mailboxes after them, the optional call-stack area
 * last.
 */
static inline uint64_t trace_regs_contexts_at(uint32_t n_slots,
                                              uint32_t fifo_depth)
{
    return sizeof(struct trace_regs_header)
           + (uint64_t)n_slots * trace_regs_slot_stride(fifo_depth);
}

static inline uint64_t trace_regs_mailboxes_at(uint32_t n_slots,
                                               uint32_t n_contexts,
                                               uint32_t fifo_depth)
{
    return trace_regs_contexts_at(n_slots, fifo_depth)
           + (uint64_t)n_contexts * sizeof(struct trace_regs_context);
}

/* The call-stack area (0: none, stack_depth 0). */
static inline uint64_t trace_regs_stacks_at(uint32_t n_slots,
                                            uint32_t n_contexts,
                                            uint32_t fifo_depth,
                                            uint32_t stack_depth)
{
    if (!stack_depth)
        return 0;
    return trace_regs_mailboxes_at(n_slots, n_contexts, fifo_depth)
           + (uint64_t)n_slots * sizeof(struct trace_regs_mailbox);
}

static inline uint64_t trace_regs_size_for(uint32_t n_slots,
                                           uint32_t n_contexts,
                                           uint32_t fifo_depth,
                                           uint32_t stack_depth)
{
    uint64_t stacks = stack_depth ? trace_stack_slot_bytes(fifo_depth,
                                                           stack_depth) : 0;

    return trace_regs_mailboxes_at(n_slots, n_contexts, fifo_depth)
           + (uint64_t)n_slots * sizeof(struct trace_regs_mailbox)
           + (uint64_t)n_slots * stacks;
}

/* What trace_regs_check() and trace_geometry_fault() find wrong. */
enum trace_regs_fault {
    TRACE_REGS_OK = 0,
    TRACE_REGS_SHORT,           /* shorter than the header */
    TRACE_REGS_BAD_MAGIC,
    TRACE_REGS_BAD_VERSION,
    TRACE_REGS_BAD_HEADER_SIZE,
    TRACE_REGS_BAD_RESERVED,    /* a reserved byte is not zero */
    TRACE_REGS_BAD_SLOTS,       /* n_slots outside 1..TRACE_MAX_SLOTS */
    TRACE_REGS_BAD_CONTEXTS,    /* n_contexts outside 1..TRACE_MAX_CONTEXTS */
    TRACE_REGS_BAD_FIFO_DEPTH,  /* not a power of two in MIN..MAX */
    TRACE_REGS_BAD_LOCAL_STORE, /* unaligned, too large or past 4 GiB */
    TRACE_REGS_BAD_STACK_DEPTH, /* above TRACE_MAX_STACK_DEPTH */
    TRACE_REGS_BAD_LAYOUT,      /* a stride or offset not the geometry's */
    TRACE_REGS_BAD_FILE_SIZE,   /* not the geometry's, or past the mapping */
};

/* Whether a geometry is one the trace unit supports. */
static inline enum trace_regs_fault
trace_geometry_fault(uint32_t n_slots, uint32_t n_contexts,
                     uint32_t fifo_depth, uint32_t ls_base, uint32_t ls_size,
                     uint32_t stack_depth)
{
    if (n_slots < 1 || n_slots > TRACE_MAX_SLOTS)
        return TRACE_REGS_BAD_SLOTS;
    if (n_contexts < 1 || n_contexts > TRACE_MAX_CONTEXTS)
        return TRACE_REGS_BAD_CONTEXTS;
    if ((fifo_depth & (fifo_depth - 1)) != 0
        || fifo_depth < TRACE_MIN_FIFO_DEPTH
        || fifo_depth > TRACE_MAX_FIFO_DEPTH)
        return TRACE_REGS_BAD_FIFO_DEPTH;
    if (ls_size < 4 || ls_size > TRACE_MAX_LS_SIZE || ls_size % 4
        || ls_base % 4 || (uint64_t)ls_base + ls_size > 0x100000000ull)
        return TRACE_REGS_BAD_LOCAL_STORE;
    if (stack_depth > TRACE_MAX_STACK_DEPTH)
        return TRACE_REGS_BAD_STACK_DEPTH;
    return TRACE_REGS_OK;
}

/*
 * The one validator of a register file's header, for every host (the
 * trace unit's tools, the hosted driver, copdrv.ko): `h` is the caller's
 * own copy (trace_regs_snapshot()), `size` the bytes mapped.  Every
 * bound the layout has: magic, version, header size, reserved bytes, the
 * geometry's limits, every stride and offset exactly the geometry's, and
 * the file inside the mapping (which may be longer: ivshmem maps a power
 * of two).
 */
static inline enum trace_regs_fault
trace_regs_check(const struct trace_regs_header *h, uint64_t size)
{
    enum trace_regs_fault fault;
    uint32_t i;

    if (size < sizeof(*h))
        return TRACE_REGS_SHORT;
    for (i = 0; i < TRACE_REGS_MAGIC_SIZE; i++)
        if (h->magic[i] != TRACE_REGS_MAGIC[i])
            return TRACE_REGS_BAD_MAGIC;
    if (h->version != TRACE_REGS_VERSION)
        return TRACE_REGS_BAD_VERSION;
    if (h->header_size != sizeof(*h))
        return TRACE_REGS_BAD_HEADER_SIZE;
    for (i = 0; i < sizeof(h->reserved); i++)
        if (h->reserved[i])
            return TRACE_REGS_BAD_RESERVED;
    fault = trace_geometry_fault(h->n_slots, h->n_contexts, h->fifo_depth,
                                 h->ls_base, h->ls_size, h->stack_depth);
    if (fault)
        return fault;
    if (h->slot_stride != trace_regs_slot_stride(h->fifo_depth)
        || h->slots_offset != sizeof(*h)
        || h->context_stride != sizeof(struct trace_regs_context)
        || h->contexts_offset != trace_regs_contexts_at(h->n_slots,
                                                        h->fifo_depth)
        || h->mailbox_stride != sizeof(struct trace_regs_mailbox)
        || h->mailbox_offset != trace_regs_mailboxes_at(h->n_slots,
                                                        h->n_contexts,
                                                        h->fifo_depth)
        || h->stack_offset != trace_regs_stacks_at(h->n_slots, h->n_contexts,
                                                   h->fifo_depth,
                                                   h->stack_depth))
        return TRACE_REGS_BAD_LAYOUT;
    if (h->file_size != trace_regs_size_for(h->n_slots, h->n_contexts,
                                            h->fifo_depth, h->stack_depth)
        || size < h->file_size)
        return TRACE_REGS_BAD_FILE_SIZE;
    return TRACE_REGS_OK;
}

/* The fault in words, for a one-line error. */
static inline const char *trace_regs_fault_text(enum trace_regs_fault fault)
{
    switch (fault) {
    case TRACE_REGS_OK:                 return "valid";
    case TRACE_REGS_SHORT:              return "shorter than its header";
    case TRACE_REGS_BAD_MAGIC:          return "magic is not " TRACE_REGS_MAGIC;
    case TRACE_REGS_BAD_VERSION:        return "version is not this build's";
    case TRACE_REGS_BAD_HEADER_SIZE:    return "header size is wrong";
    case TRACE_REGS_BAD_RESERVED:       return "a reserved header byte is not zero";
    case TRACE_REGS_BAD_SLOTS:          return "slot count out of range";
    case TRACE_REGS_BAD_CONTEXTS:       return "context count out of range";
    case TRACE_REGS_BAD_FIFO_DEPTH:     return "FIFO depth not a power of two in range";
    case TRACE_REGS_BAD_LOCAL_STORE:    return "local store out of range";
    case TRACE_REGS_BAD_STACK_DEPTH:    return "call-stack depth out of range";
    case TRACE_REGS_BAD_LAYOUT:         return "inconsistent layout";
    case TRACE_REGS_BAD_FILE_SIZE:      return "file size not the geometry's or past the mapping";
    }
    return "unknown fault";
}

/*
 * Copies the header of the register file at `src` (shared, maybe being
 * written) into `dst`, the caller's memory, one whole word at a time, so
 * that the checks and every later use see the same values.
 */
static inline void trace_regs_snapshot(struct trace_regs_header *dst,
                                       const struct trace_regs_header *src)
{
    uint32_t i;

    for (i = 0; i < TRACE_REGS_MAGIC_SIZE; i++)
        dst->magic[i] = trace_load_once(&src->magic[i]);
    dst->version = trace_load_once(&src->version);
    dst->header_size = trace_load_once(&src->header_size);
    dst->file_size = trace_load_once(&src->file_size);
    dst->n_slots = trace_load_once(&src->n_slots);
    dst->n_contexts = trace_load_once(&src->n_contexts);
    dst->fifo_depth = trace_load_once(&src->fifo_depth);
    dst->slot_stride = trace_load_once(&src->slot_stride);
    dst->slots_offset = trace_load_once(&src->slots_offset);
    dst->context_stride = trace_load_once(&src->context_stride);
    dst->contexts_offset = trace_load_once(&src->contexts_offset);
    dst->ls_base = trace_load_once(&src->ls_base);
    dst->ls_size = trace_load_once(&src->ls_size);
    dst->controller_pid = trace_load_once(&src->controller_pid);
    dst->doorbell = trace_load_once(&src->doorbell);
    dst->mailbox_offset = trace_load_once(&src->mailbox_offset);
    dst->mailbox_stride = trace_load_once(&src->mailbox_stride);
    dst->mailbox_reader = trace_load_once(&src->mailbox_reader);
    dst->stack_offset = trace_load_once(&src->stack_offset);
    dst->stack_depth = trace_load_once(&src->stack_depth);
    for (i = 0; i < sizeof(dst->reserved); i++)
        dst->reserved[i] = trace_load_once(&src->reserved[i]);
}

/*
 * The stack records of slot `slot`, or NULL when the file has no area;
 * `h` is a checked header (the caller's snapshot).
 */
static inline uint32_t *trace_stack_area(void *base,
                                         const struct trace_regs_header *h,
                                         uint32_t slot)
{
    if (!h->stack_depth)
        return TRACE_NULL;
    return (uint32_t *)((char *)base + h->stack_offset
                        + slot * trace_stack_slot_bytes(h->fifo_depth,
                                                        h->stack_depth));
}

/*
 * Producer: writes the stack record of the capture about to be queued as
 * FIFO entry fifo_head, when that entry is free (the consumer may still
 * be reading the one a full FIFO would overwrite).  `frames` are the
 * innermost min(depth, stack_depth) frames.  Call it before the push that
 * publishes the entry.
 */
static inline void trace_slot_put_stack(struct trace_regs_slot *slot,
                                        uint32_t fifo_depth, uint32_t *area,
                                        uint32_t stack_depth, uint32_t depth,
                                        const uint32_t *frames)
{
    uint32_t head = trace_load_once(&slot->fifo_head);
    uint32_t tail = trace_load_acquire(&slot->fifo_tail);
    uint32_t *rec, n = depth < stack_depth ? depth : stack_depth;

    if (head - tail >= fifo_depth)
        return;
    rec = area + (uint64_t)(head & (fifo_depth - 1))
                 * trace_stack_record_words(stack_depth);
    rec[0] = depth;
    for (uint32_t i = 0; i < n; i++)
        rec[1 + i] = frames[i];
}

/*
 * Producer: writes the cause word of the capture about to be queued as FIFO
 * entry fifo_head, when that entry is free, as trace_slot_put_stack().
 * Call it before the push that publishes the entry.
 */
static inline void trace_slot_put_cause(struct trace_regs_slot *slot,
                                        uint32_t fifo_depth, uint32_t cause)
{
    uint32_t head = trace_load_once(&slot->fifo_head);
    uint32_t tail = trace_load_acquire(&slot->fifo_tail);

    if (head - tail >= fifo_depth)
        return;
    trace_slot_causes(slot, fifo_depth)[head & (fifo_depth - 1)] = cause;
}

/*
 * Producer: queues one expiry whose PC field is `field` if the FIFO has
 * room.  The entry is written before the release store of fifo_head
 * publishes it, and capture_count is stored last (release), so a reader
 * that sees it also sees the entry.  Returns 1 if queued, 0 (nothing
 * written) when the FIFO is full.
 */
static inline int trace_slot_try_push(struct trace_regs_slot *slot,
                                      uint32_t fifo_depth, uint16_t field)
{
    uint32_t head = trace_load_once(&slot->fifo_head);
    uint32_t tail = trace_load_acquire(&slot->fifo_tail);
    uint64_t captures;

    if (head - tail >= fifo_depth)
        return 0;
    captures = trace_load_once(&slot->capture_count);
    slot->fifo[head & (fifo_depth - 1)] = field;
    trace_store_release(&slot->fifo_head, head + 1);
    trace_store_release(&slot->capture_count, captures + 1);
    return 1;
}

/* Producer: counts one expiry dropped because the FIFO was full. */
static inline void trace_slot_count_overflow(struct trace_regs_slot *slot)
{
    uint64_t dropped = trace_load_once(&slot->overflow_count);
    uint64_t captures = trace_load_once(&slot->capture_count);

    trace_store_once(&slot->overflow_count, dropped + 1);
    trace_store_release(&slot->capture_count, captures + 1);
}

/*
 * Producer, drop policy: records one expiry, queued, or counted in
 * overflow_count when the FIFO is full (it keeps its oldest entries).
 * Returns 1 if queued, 0 if dropped.  The stall policy is
 * trace_slot_capture() (trace-unit.h), which waits instead.
 */
static inline int trace_slot_push(struct trace_regs_slot *slot,
                                  uint32_t fifo_depth, uint16_t field)
{
    if (trace_slot_try_push(slot, fifo_depth, field))
        return 1;
    trace_slot_count_overflow(slot);
    return 0;
}

/* Entries queued in a slot's FIFO now (producer or consumer). */
static inline uint32_t trace_slot_queued(const struct trace_regs_slot *slot)
{
    return trace_load_acquire(&slot->fifo_head)
           - trace_load_acquire(&slot->fifo_tail);
}

/* Producer: records an expiry whose PC lay outside the local store. */
static inline void trace_slot_count_outside(struct trace_regs_slot *slot)
{
    uint64_t outside = trace_load_once(&slot->outside_count);
    uint64_t captures = trace_load_once(&slot->capture_count);

    trace_store_once(&slot->outside_count, outside + 1);
    trace_store_release(&slot->capture_count, captures + 1);
}

/*
 * Producer: records that guard word `region` became `guard` before the next
 * capture, at FIFO position fifo_head.  Push the events a capture found
 * before trace_slot_push() of that capture.  The entry is written before
 * the release store of event_head publishes it; a full ring counts the
 * event in event_overflow instead (the consumer then knows that changes
 * went unplaced).  Returns 1 if queued, 0 if dropped.
 */
static inline int trace_slot_push_event(struct trace_regs_slot *slot,
                                        uint32_t fifo_depth, uint32_t region,
                                        uint32_t guard)
{
    uint32_t head = trace_load_once(&slot->event_head);
    uint32_t tail = trace_load_acquire(&slot->event_tail);
    struct trace_ovl_event *e;

    if (head - tail >= TRACE_EVENT_DEPTH) {
        uint32_t dropped = trace_load_once(&slot->event_overflow);
        trace_store_release(&slot->event_overflow, dropped + 1);
        return 0;
    }
    e = &trace_slot_events(slot, fifo_depth)[head & (TRACE_EVENT_DEPTH - 1)];
    e->fifo_pos = trace_load_once(&slot->fifo_head);
    e->region = region;
    e->guard = guard;
    e->reserved = 0;
    trace_store_release(&slot->event_head, head + 1);
    return 1;
}

/*
 * Consumer: moves up to `max` queued overlay events into out[], oldest
 * first, stopping before the first one placed after FIFO position *end
 * (when end is not NULL).  Drain the FIFO first, then the events: every
 * event placed before a drained entry is then visible.  Pass the drained
 * end as *end when the emulator may still run: an event it pushed after
 * that drain may follow a capture the drain did not take, and must wait
 * for the drain that takes it.  Returns the number moved, or -1 when head
 * and tail are more than TRACE_EVENT_DEPTH apart (nothing moved).
 */
static inline int32_t trace_slot_drain_events_upto(struct trace_regs_slot *slot,
                                                   uint32_t fifo_depth,
                                                   struct trace_ovl_event *out,
                                                   uint32_t max,
                                                   const uint32_t *end)
{
    uint32_t tail = trace_load_once(&slot->event_tail);
    uint32_t head = trace_load_acquire(&slot->event_head);
    const struct trace_ovl_event *ring = trace_slot_events(slot, fifo_depth);
    uint32_t queued = head - tail;
    uint32_t n = 0;

    if (queued > TRACE_EVENT_DEPTH)
        return -1;
    while (n < queued && n < max) {
        const struct trace_ovl_event *e =
            &ring[(tail + n) & (TRACE_EVENT_DEPTH - 1)];

        if (end && (int32_t)(e->fifo_pos - *end) > 0)
            break;
        out[n++] = *e;
    }
    trace_store_release(&slot->event_tail, tail + n);
    return (int32_t)n;
}

/* trace_slot_drain_events_upto() with no end: every queued event. */
static inline int32_t trace_slot_drain_events(struct trace_regs_slot *slot,
                                              uint32_t fifo_depth,
                                              struct trace_ovl_event *out,
                                              uint32_t max)
{
    return trace_slot_drain_events_upto(slot, fifo_depth, out, max,
                                        TRACE_NULL);
}

/*
 * Consumer: moves up to `max` queued entries out, oldest first, and frees
 * them: each PC field into out[], with causes not NULL its cause word,
 * bounded by trace_cause_checked(), into causes[], and with `area` not
 * NULL its stack record (trace_stack_record_words(stack_depth) words)
 * into records[].  Returns the number moved, or -1 when head and tail are
 * more than fifo_depth apart (a corrupt register file; nothing moved).
 */
static inline int32_t trace_slot_drain_entries(struct trace_regs_slot *slot,
                                               uint32_t fifo_depth,
                                               uint16_t *out,
                                               uint32_t *causes,
                                               const uint32_t *area,
                                               uint32_t stack_depth,
                                               uint32_t *records,
                                               uint32_t max)
{
    uint32_t tail = trace_load_once(&slot->fifo_tail);
    uint32_t head = trace_load_acquire(&slot->fifo_head);
    const uint32_t *cause = trace_slot_causes(slot, fifo_depth);
    uint32_t words = trace_stack_record_words(stack_depth);
    uint32_t queued = head - tail;
    uint32_t n;

    if (queued > fifo_depth)
        return -1;
    n = queued < max ? queued : max;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = (tail + i) & (fifo_depth - 1);

        out[i] = slot->fifo[at];
        if (causes)
            causes[i] = trace_cause_checked(cause[at]);
        if (!area)
            continue;
        for (uint32_t w = 0; w < words; w++)
            records[(uint64_t)i * words + w] = area[(uint64_t)at * words + w];
    }
    trace_store_release(&slot->fifo_tail, tail + n);
    return (int32_t)n;
}

/* Consumer: trace_slot_drain_entries() of the PC fields alone. */
static inline int32_t trace_slot_drain(struct trace_regs_slot *slot,
                                       uint32_t fifo_depth,
                                       uint16_t *out, uint32_t max)
{
    return trace_slot_drain_entries(slot, fifo_depth, out, TRACE_NULL,
                                    TRACE_NULL, 0, TRACE_NULL, max);
}

/*
 * Consumer: trace_slot_drain() that also copies each drained entry's stack
 * record (trace_stack_record_words(stack_depth) words) into records[].
 */
static inline int32_t trace_slot_drain_stacks(struct trace_regs_slot *slot,
                                              uint32_t fifo_depth,
                                              const uint32_t *area,
                                              uint32_t stack_depth,
                                              uint16_t *out, uint32_t *records,
                                              uint32_t max)
{
    return trace_slot_drain_entries(slot, fifo_depth, out, TRACE_NULL, area,
                                    stack_depth, records, max);
}

/*
 * Tries a writer or a reader of the LFSR seqlock makes before it gives
 * up: the writer inside is a process that may have died there, or the
 * file is hostile; nobody spins for ever.
 */
#define TRACE_LFSR_TRIES        0x100000u   /* 2^20, writers and readers */

/*
 * Enters the write side of the LFSR seqlock: takes lfsr_seq from an even
 * value to the next odd one with a compare-and-swap, so that two writers
 * (the producer at a reload, copdrv.ko loading the LFSR while the producer
 * runs) never both enter and never leave it odd.  Returns 0 with *seq the
 * even value taken, or -1 after TRACE_LFSR_TRIES looks at a held
 * lock (nothing written).  The CAS is a full barrier: the data stores
 * after it pair with the reader's trace_fence_load() in
 * trace_slot_read_lfsr().
 */
static inline int trace_lfsr_write_begin(struct trace_regs_slot *slot,
                                         uint32_t *seq)
{
    uint32_t tries;

    for (tries = 0; tries < TRACE_LFSR_TRIES; tries++) {
        *seq = trace_load_once(&slot->lfsr_seq);
        if (!(*seq & 1u) && trace_cas(&slot->lfsr_seq, *seq, *seq + 1))
            return 0;
    }
    return -1;
}

/*
 * Writer of the LFSR registers (the producer, or the controller): publishes
 * that the LFSR was loaded with `state` at cycle `cycle`, and advances
 * `cycles` to it.  A seqlock: odd lfsr_seq while writing; the release
 * store of the even value pairs with the reader's acquire load of it.
 * Returns 0, or -1 when it could not enter (nothing written).
 */
static inline int trace_slot_write_lfsr(struct trace_regs_slot *slot,
                                        uint64_t cycle, uint32_t state)
{
    uint32_t seq;

    if (trace_lfsr_write_begin(slot, &seq))
        return -1;
    trace_store_once(&slot->cycles, cycle);
    trace_store_once(&slot->reload_cycle, cycle);
    trace_store_once(&slot->reload_state, state);
    trace_store_release(&slot->lfsr_seq, seq + 2);
    return 0;
}

/*
 * Controller: loads the LFSR with `state` now and restarts the dither's
 * draws (with the dither on, the producer that runs next draws interval
 * 0's jitter before its first cycle).  The hosted driver
 * calls it with no producer running on the slot; copdrv.ko cannot hold the
 * host's emulators and calls it while one may run: the seqlock keeps the
 * two writers apart, and the producer takes the new value at its next
 * attach or reload.  Returns 0, or -1 when the lock stayed held.
 */
static inline int trace_slot_load_state(struct trace_regs_slot *slot,
                                        uint32_t state)
{
    uint32_t seq;

    if (trace_lfsr_write_begin(slot, &seq))
        return -1;
    trace_store_once(&slot->dither_draws, 0);
    trace_store_once(&slot->reload_cycle, trace_load_once(&slot->cycles));
    trace_store_once(&slot->reload_state, state);
    trace_store_release(&slot->lfsr_seq, seq + 2);
    return 0;
}

/*
 * Controller: what a capture does with the FIFO full (TRACE_FIFO_*), the
 * fill that rings the doorbell (0: never), and the dither.  The producer
 * reads the policy at each full FIFO and the dither at each reload; set
 * them while no producer runs on the slot, before the load.
 */
static inline void trace_slot_configure(struct trace_regs_slot *slot,
                                        uint32_t fifo_policy,
                                        uint32_t watermark, uint32_t dither,
                                        uint64_t dither_seed)
{
    trace_store_once(&slot->fifo_policy, fifo_policy);
    trace_store_once(&slot->watermark, watermark);
    trace_store_once(&slot->dither_seed, dither_seed);
    trace_store_release(&slot->dither, dither ? 1u : 0u);
}

/* Controller: the event that clocks the slot's LFSR (TRACE_EVENT_*); the
 * producer reads it when it attaches.  Set it while no producer runs. */
static inline void trace_slot_set_event(struct trace_regs_slot *slot,
                                        uint32_t event)
{
    trace_store_release(&slot->event, event);
}

/* A consistent view of a slot's clock: the LFSR is reload_state advanced by
 * cycles - reload_cycle steps. */
struct trace_lfsr_snapshot {
    uint64_t cycles;
    uint64_t reload_cycle;
    uint32_t reload_state;
};

/*
 * Any reader: takes a consistent snapshot, retrying while a write is on,
 * TRACE_LFSR_TRIES times at most.  Returns 0, or -1 with the values
 * of the last try when lfsr_seq stayed odd or moving: a producer killed
 * inside its write leaves it odd for ever, and its values as they were
 * (no reader may spin on a lock whose holder is gone).
 */
static inline int trace_slot_read_lfsr(const struct trace_regs_slot *slot,
                                       struct trace_lfsr_snapshot *snap)
{
    uint32_t before, after, tries;

    for (tries = 0; tries < TRACE_LFSR_TRIES; tries++) {
        before = trace_load_acquire(&slot->lfsr_seq);
        snap->reload_cycle = trace_load_once(&slot->reload_cycle);
        snap->reload_state = trace_load_once(&slot->reload_state);
        snap->cycles = trace_load_once(&slot->cycles);
        trace_fence_load();
        after = trace_load_once(&slot->lfsr_seq);
        if (before == after && !(before & 1u))
            return 0;
    }
    return -1;
}

/*
 * Dither (period randomization, like ARM SPE's PMSIRR.RND).  With a slot's
 * dither on, interval k after a load (k = 0, 1, ...; counted in
 * dither_draws) is N + trace_dither_jitter(seed, k, W) cycles instead of
 * N, with W = trace_dither_width(N) and seed the slot's dither_seed.  The
 * jitter is u - v for u and v uniform on 0 .. W-1, drawn from one
 * splitmix64 output: triangular on -(W-1) .. W-1, mean exactly 0, so the
 * mean interval is exactly N.  docs/trace-unit.md says why this
 * distribution (de-aliasing loops whose length divides N).  Interval 0 is
 * dithered too: the controller loads the value for N, and the producer
 * that first runs on the slot after the load draws jitter 0 before its
 * first cycle (it rewrites the loaded state for N + J(seed, 0)).
 *
 * A session has one seed; each slot draws from its own generator,
 * trace_dither_slot_seed(seed, slot), so that identical contexts started
 * together on different slots are captured at different instructions.
 * Slot 0's seed is the session's own.
 */
#define TRACE_DITHER_GAMMA      0x9E3779B97F4A7C15ull

/* The jitter width W for a count N: the largest power of two at most N/2
 * that keeps N + W - 1 within the LFSR's period (2^24 - 1); 1 (no jitter)
 * for N < 4. */
static inline uint32_t trace_dither_width(uint32_t count)
{
    uint32_t limit = count / 2, room = 0xFFFFFFu - count + 1, w = 1;

    if (room < limit)
        limit = room;
    while (w * 2 <= limit)
        w *= 2;
    return w;
}

/* splitmix64's output function: a bijection of 64-bit words that maps 0
 * to 0 and any other input to a well-mixed word. */
static inline uint64_t trace_dither_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The seed of slot `slot`'s generator in a session seeded with `seed`:
 * the seed XOR a mix of the slot's index (slot 0: the seed itself). */
static inline uint64_t trace_dither_slot_seed(uint64_t seed, uint32_t slot)
{
    return seed ^ trace_dither_mix((uint64_t)slot * TRACE_DITHER_GAMMA);
}

/* Jitter number `draw` of the generator seeded with `seed`. */
static inline int32_t trace_dither_jitter(uint64_t seed, uint64_t draw,
                                          uint32_t width)
{
    uint64_t z = trace_dither_mix(seed + (draw + 1) * TRACE_DITHER_GAMMA);

    return (int32_t)((uint32_t)z & (width - 1))
           - (int32_t)((uint32_t)(z >> 32) & (width - 1));
}

/* The interval (cycles) of reload number `draw` for count N. */
static inline uint32_t trace_dither_interval(uint32_t count, uint64_t seed,
                                             uint64_t draw)
{
    return (uint32_t)((int32_t)count
                      + trace_dither_jitter(seed, draw,
                                            trace_dither_width(count)));
}

static_assert(sizeof(struct trace_regs_header) == 128, "header layout");
static_assert(__builtin_offsetof(struct trace_regs_header, file_size) == 16,
               "header layout");
static_assert(__builtin_offsetof(struct trace_regs_header,
                                  controller_pid) == 60, "header layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, cycles) == 64,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, fifo_head) == 112,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, event_head) == 116,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, fifo_tail) == 128,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, event_tail) == 132,
               "slot layout");
static_assert(sizeof(struct trace_ovl_event) == 16, "event layout");
static_assert(__builtin_offsetof(struct trace_regs_header, doorbell) == 64,
               "header layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, fifo_policy) == 8,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, dither_seed) == 24,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, stall_ns) == 192,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, stalled) == 216,
               "slot layout");
static_assert(__builtin_offsetof(struct trace_regs_slot, fifo) == 256,
               "slot layout");
static_assert(sizeof(struct trace_regs_context) == 128, "context layout");
static_assert(__builtin_offsetof(struct trace_regs_context,
                                  guard_count) == 12, "context layout");
static_assert(__builtin_offsetof(struct trace_regs_context, ack) == 64,
               "context layout");
static_assert(__builtin_offsetof(struct trace_regs_context,
                                  instructions) == 80, "context layout");
static_assert(__builtin_offsetof(struct trace_regs_context, check_cycle) == 88,
               "context layout");

static_assert(__builtin_offsetof(struct trace_regs_header,
                                  mailbox_offset) == 68, "header layout");
static_assert(__builtin_offsetof(struct trace_regs_header,
                                  stack_depth) == 84, "header layout");
static_assert(__builtin_offsetof(struct trace_regs_mailbox, image_device)
               == 64, "mailbox layout");
static_assert(__builtin_offsetof(struct trace_regs_mailbox, ack) == 128,
               "mailbox layout");
static_assert(__builtin_offsetof(struct trace_regs_mailbox, guards) == 192,
               "mailbox layout");
static_assert(sizeof(struct trace_regs_mailbox) == 1024, "mailbox layout");

#endif /* COPROF_TRACE_REGS_H */
