/*
 * trace-plugin.c — the trace unit: a QEMU TCG plugin that emulates the Cell
 * SPU's LFSR-clocked PC trace array for the coprocessor context running in
 * this emulator.
 *
 *   qemu-system-riscv32 ... \
 *       -plugin libcoptrace.so,regs=FILE,context=N[,mode=fast|reference]
 *               [,counts=COUNTS][,ram=RAM]
 *
 * FILE is the register file (trace-regs.h, docs/trace-unit.md) that copsim,
 * the driver or cop-run created; N is this context's entry in it.  The
 * context entry says which slot the context is bound to, so the plugin
 * finds its LFSR, counters and FIFO there and can be moved to another slot
 * while it is held at its run gate.
 *
 * One cycle is one retired guest instruction.  Every cycle steps the slot's
 * LFSR; the instruction whose step brings it to 0xFFFFFF is captured (its
 * local-store offset >> 2 goes into the slot's FIFO, under the slot's
 * FIFO-full policy: dropped, or the emulator stalls until the driver
 * drains) and the LFSR reloads the programmed value, or with the slot's
 * dither on the value for N plus the slot generator's next jitter
 * (trace_dither_interval; the first interval after a load is dithered
 * when the context attaches, dither_first_interval).  Two modes compute this:
 *
 * reference  One callback per instruction steps the LFSR with lfsr_step()
 *            and compares with 0xFFFFFF: the definition, executed literally.
 *
 * fast       One callback per translation block and no LFSR stepping.  The
 *            plugin knows the slot cycle of the next expiry (reload cycle +
 *            lfsr_count_for_value(value)) and publishes it as the context's
 *            check_cycle; a block that ends before it costs an add, one
 *            compare and two stores.  Only a block that reaches it takes the
 *            slow path, which picks the captured PC from the block's
 *            instruction addresses (recorded once, at translation), reloads,
 *            and looks at the run gate.  A controller that closes the gate
 *            sets check_cycle to 0, so the next block takes the slow path:
 *            the fast path needs no look at the gate.
 *
 * A block is counted when it starts, before it runs.  QEMU 7.2's test
 * device ends the process from inside the store that reaches it, in the
 * middle of a block, where the reference mode has counted that store and
 * nothing after it.  So the instructions after a block's last memory write
 * (its tail) are provisional: at such an exit, on the vCPU thread, the
 * current block's tail is taken back, and an expiry that falls in a tail is
 * decided only when the next block starts.  Both modes therefore give the
 * same captures, sample for sample; the one exception, documented in
 * docs/trace-unit.md, is a guest exception in the middle of a block.
 *
 * counts=COUNTS adds an exact count of every instruction, for tests that
 * check the samples against the truth: one more callback before every
 * instruction (the reference mode's way, so a block left early by an exit
 * or a trap counts only what ran) increments a counter of its own.  The
 * counters belong to the translated code, keyed by its start address and
 * its instruction bytes, so two overlays loaded at one address (QEMU
 * retranslates after the overlay manager's fence.i) keep apart.  At exit
 * they are appended to COUNTS (created 0600; its controller names it as
 * /proc/PID/fd/N of a file or directory it made, open_counts_file) with
 * the bytes, one record per distinct
 * block (format: docs/trace-unit.md).  Counting touches nothing the
 * sampling reads, so the captures are the same with or without it.
 *
 * ram=RAM is the guest RAM file QEMU maps (memory-backend-file; local-store
 * byte 0 at file offset 0).  When the context block names overlay guard
 * words to watch (guard_count > 0, read once here at the start), the
 * plugin maps the file read-only, copies the words, and at every capture,
 * before the capture is pushed (or counted outside the LS, or dropped),
 * compares the live words with its copy: each changed word becomes an
 * overlay event at the slot's fifo_head.  Exactness: in reference mode the
 * words are read before the captured instruction runs, after everything
 * before it.  In fast mode an expiry is decided at the start of the block
 * it falls in, before that block runs, or, when it falls in the block's
 * tail, at the start of the next block, after it: a tail has no store, and
 * a block of overlay code has no guard store (only the resident overlay
 * manager stores guards, and its block ends at the return or jump that
 * leaves it), so a capture in overlay code always sees the guards that
 * were current when it executed.  The check costs nothing on the fast
 * path; docs/trace-unit.md has the whole argument.
 *
 * Call stacks: when the register file has a call-stack area (its header's
 * stack_depth, for --call-graph), the plugin keeps a shadow stack of the
 * context (shadow-stack.c) from the call and return instructions it
 * translates: each gets one more callback that notes the operation, and
 * the next block settles it before anything of that block is captured
 * (on_block_stacked, on_insn_stacked: the fast and reference modes thus
 * see the same stack at every capture).  Each capture then carries the
 * innermost frames (trace_slot_capture_stack).  Without the area none of
 * this is registered: the callbacks are the ones above.  With slot=S the
 * stack is the bound context's: saved as bytes in the slot's RAM
 * (SLOT_STACK_SAVE) where the stub hands the context back, restored from
 * there, where its controller put it, at the context's first block on any
 * slot (slot_save_stack, slot_restore_stack).
 *
 * DMA (mfc.c, docs/coprocessor-abi.md "DMA"): with ram= the plugin maps
 * the context's channel block read-write.  The runtime's issue and wait
 * markers (fence.i words that end their block) get one more callback: an
 * issue is stamped with its modelled completion, a wait's cycles are
 * charged to the marker as DMA wait (captures in them take the marker's
 * PC, and the waited transfer is the current-wait info, tu.wait), after
 * the block's own cycles, in both modes alike.  The runtime's transfer
 * engine, whose code range the block names, is neither counted nor
 * captured: its stores stand for the MFC's, whose time the model gives.
 * The clock of the DMA is the context's own cycles (tu.context_cycles
 * plus the slot's cycles since the attach, kept in the context's entry
 * across holds).
 */
#include "abi/slot-stub.h"
#include "emulator/mbox.h"
#include "emulator/mfc.h"
#include "emulator/qemu-plugin-api.h"
#include "emulator/shadow-stack.h"
#include "emulator/timing.h"
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"

#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define NEVER UINT64_MAX        /* expiry cycle while capture is off */
#define CLOCKS 2                /* TRACE_EVENT_CYCLES, _INSTRUCTIONS */

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

struct block;

/* Reference mode's callback data: instruction i of block b. */
struct insn_ref {
    const struct block *b;
    uint32_t i;
};

/*
 * What the fast and reference modes need about one translated block: its
 * instructions and their cost in ticks of either clock (the slot's event:
 * modelled cycles, timing.h, or retired instructions).
 */
struct block {
    uint64_t start;             /* vaddr[0] */
    uint64_t fallthrough;       /* the address after its last instruction */
    uint32_t ticks[CLOCKS];     /* the whole block's static cost */
    uint32_t exit_cost[CLOCKS][2];  /* cycles its exit adds when the next
                                       block is [0] not the fall-through,
                                       [1] the fall-through */
    uint32_t n_insns;
    uint32_t n_if_stopped;      /* up to its last memory write; the rest is
                                   its tail */
    uint64_t *vaddr;            /* guest address of each instruction */
    uint32_t *words;            /* each instruction's bytes */
    uint32_t *stall;            /* cycles instruction i waits on operands */
    uint32_t *cycles_end;       /* cycles from the block's start to the end
                                   of instruction i */
    struct insn_ref *refs;      /* reference mode: one per instruction */
};

/* counts=: one distinct piece of translated code and its counters. */
struct code {
    uint32_t context;           /* whose: slot_context_now() at translation */
    uint64_t vaddr;             /* its first instruction */
    uint32_t n_insns;
    uint32_t n_bytes;
    uint32_t hash;              /* FNV-1a of the bytes */
    uint64_t *insn_vaddr;       /* n_insns addresses */
    uint32_t *insn_size;        /* n_insns sizes in bytes */
    uint64_t *counts;           /* n_insns counters; never move */
    uint32_t *stall;            /* n_insns: static dependency cycles */
    uint32_t *issue;            /* n_insns: issue cycles */
    uint64_t branch_cycles;     /* its exit's dynamic cycles, summed */
    uint64_t dma_wait;          /* its last instruction's DMA waits */
    uint64_t mbox_wait;         /* its last instruction's mailbox waits */
    uint64_t *memory;           /* n_insns: main-memory cycles */
    struct timing_exit exit;    /* its last instruction's exit */
    uint8_t bytes[];            /* the instruction bytes, as translated */
};

/* Stands in for a slot while the context is detached: never written. */
static struct trace_regs_slot detached_slot;

static struct {
    /* Hot: read on every block. */
    struct trace_regs_slot *slot;   /* &detached_slot while detached */
    uint64_t *check_cycle;          /* the context's check_cycle */
    const struct block *current;    /* fast: the block that runs */
    uint32_t clock;                 /* the slot's event: ticks of blocks */
    uint64_t retired;               /* instructions since the attach */

    /* Cold. */
    struct trace_regs_context *context;
    int attached;
    uint32_t open_gate;             /* the gate value we run under */
    uint64_t expiry;                /* fast: slot cycle of the next expiry */
    const struct block *tail;       /* fast: block whose tail waits */
    uint32_t lfsr;                  /* reference: the LFSR state */
    struct trace_unit *unit;
    uint32_t context_id;
    uint32_t fifo_depth;
    uint64_t ls_base;
    uint64_t ls_size;
    int reference;
    int finished;
    pid_t vcpu_thread;
    uint32_t cached_value;          /* lfsr_count_for_value cache */
    uint32_t cached_count;
    struct lfsr_memo value_memo;    /* the dithered intervals' values */
    uint64_t instructions;          /* retired on earlier slots */
    const struct insn_ref *last;    /* reference: the last instruction */
    struct timing_model model;      /* timing=FILE, or the built-in one */
    const struct code *count_exit;  /* counts=: the code whose exit ran
                                       last, settled by the next block */
    GHashTable *blocks;             /* interned struct block */
    GHashTable *codes;              /* counts=: interned struct code */
    const uint8_t *ram;             /* ram=: LS byte 0, mapped up to the
                                       watched words */
    const uint32_t *guards;         /* ram=: the watched words, mapped */
    uint32_t guard_count;           /* 0: no watch */
    uint32_t guard_seen[TRACE_MAX_GUARDS];  /* their values at the last
                                               capture */
    FILE *counts_out;               /* counts=: appended to at exit */
    const char *counts_path;
    volatile struct cop_mfc *mfc;   /* ram=: the DMA channel block, mapped
                                       read-write; NULL: DMA untimed */
    const volatile struct cop_boot_block *boot;     /* its boot block */
    uint64_t context_cycles;        /* the context's cycles before the
                                       attach */
    uint64_t attach_cycles;         /* the slot's cycles at the attach */
    uint64_t wait_charge;           /* the last marker's wait, for counts= */
    uint64_t window_base;           /* the attached context's data window */
    uint64_t window_size;           /* 0: no main-memory cycles charged */
    uint64_t memory_charge;         /* the last access's cycles, for counts= */
    int watch_clock;                /* the clock the live translations'
                                       memory callbacks were decided
                                       under; -1: none since the last
                                       flush */
    GArray *memory_pending;         /* reference: the addresses of the
                                       instructions of the running block
                                       that accessed main memory, charged
                                       at its end */
    const char *ram_path;           /* ram=: the guest RAM file */
    volatile struct cop_mbox *mbox; /* the mailbox block, mapped */
    int mbox_qemus;                 /* it is in QEMU's mapping (the window,
                                       or a slot's RAM), not one of ours */
    uint32_t mbox_addr;             /* its guest address */
    struct {                        /* while a wait's cycles are charged:
                                       the capture path's current wait */
        enum trace_stall_reason reason;
        struct mfc_wait_info dma;   /* DMA_WAIT: the transfer waited for */
    } wait;
    int stacks;                     /* the file has a call-stack area */
    uint32_t *stack_area;           /* the bound slot's stack records */
    struct shadow_stack shadow;     /* stacks: the context's call stack */
    qemu_plugin_id_t plugin_id;     /* for qemu_plugin_reset */
} tu = { .slot = &detached_slot, .watch_clock = -1 };

/*
 * QEMU 9.0 (plugin API 2) refuses version-1 plugins although nothing this
 * plugin uses changed (qemu-plugin-api.h); announce version 2 when the QEMU
 * loading us has that API.  QEMU reads the variable after this runs.
 */
__attribute__((constructor)) static void announce_api_version(void)
{
    if (dlsym(RTLD_DEFAULT, "qemu_plugin_scoreboard_new"))
        qemu_plugin_version = 2;
}

/* ---- Failing ------------------------------------------------------------ */

static void stop_emulator(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void stop_emulator(const char *fmt, ...)
{
    va_list ap;

    fputs("coptrace: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    tu.finished = 1;
    if (tu.context)
        trace_context_exit(tu.context, tu.instructions);
    exit(EXIT_FAILURE);
}

/* ---- The LFSR ----------------------------------------------------------- */

static uint32_t steps_to_expiry(uint32_t state)
{
    if (state != tu.cached_value) {
        tu.cached_value = state;
        tu.cached_count = lfsr_count_for_value(state);
    }
    return tu.cached_count;
}

/* Overlay watch: an event for every guard word that changed since the
 * last capture, placed at the FIFO position the coming capture takes. */
static void place_guard_changes(void)
{
    for (uint32_t r = 0; r < tu.guard_count; r++) {
        uint32_t now = le32toh(__atomic_load_n(&tu.guards[r],
                                               __ATOMIC_RELAXED));

        if (now != tu.guard_seen[r]) {
            trace_slot_push_event(tu.slot, tu.fifo_depth, r, now);
            tu.guard_seen[r] = now;
        }
    }
}

/* A capture with its cause word and, with a call-stack area, the shadow
 * stack's innermost frames. */
static void capture_entry(uint16_t field, uint32_t cause)
{
    uint32_t frames[TRACE_MAX_STACK_DEPTH];
    uint32_t depth = 0;

    if (tu.stack_area)
        depth = shadow_frames(&tu.shadow, frames,
                              tu.unit->header->stack_depth);
    trace_slot_capture_entry(tu.unit, tu.slot, tu.stack_area, field, cause,
                             depth, frames);
}

/* A capture of the instruction at `vaddr` at a cycle spent for `cause`
 * (a cause word: trace-regs.h). */
static void capture(uint64_t vaddr, uint32_t cause)
{
    uint64_t offset = vaddr - tu.ls_base;

    if (tu.guard_count)
        place_guard_changes();
    if (vaddr >= tu.ls_base && offset < tu.ls_size)
        capture_entry((uint16_t)(offset >> 2), cause);
    else
        trace_slot_count_outside(tu.slot);
}

/* The cause of a capture at tick `tick` (1-based) of instruction i of
 * block b: its first stall[i] cycles wait on operands, the rest issue.
 * Under SPU_INSTRUCTIONS every tick is an issue. */
static uint32_t insn_cause(const struct block *b, uint32_t i, uint64_t tick)
{
    if (tu.clock == TRACE_EVENT_CYCLES && tick <= b->stall[i])
        return TRACE_STALL_DEPENDENCY;
    return TRACE_STALL_ISSUE;
}

/* The cause of the captures in the current wait's cycles (tu.wait): for
 * a DMA wait on a known transfer, its tag and the get/put that issued it. */
static uint32_t wait_cause(void)
{
    const struct mfc_wait_info *dma = &tu.wait.dma;
    uint64_t offset = (uint64_t)dma->pc - tu.ls_base;

    if (tu.wait.reason != TRACE_STALL_DMA_WAIT || !dma->valid
        || dma->pc < tu.ls_base || offset >= tu.ls_size)
        return tu.wait.reason;
    return trace_cause_transfer(dma->tag, (uint32_t)(offset >> 2));
}

static uint64_t slot_cycles(void)
{
    return __atomic_load_n(&tu.slot->cycles, __ATOMIC_RELAXED);
}

static void set_slot_cycles(uint64_t cycles)
{
    __atomic_store_n(&tu.slot->cycles, cycles, __ATOMIC_RELAXED);
}

/* With the slot's dither on: the cycles of the next interval, N plus the
 * slot generator's next jitter; 0 with it off. */
static uint32_t dithered_count(uint32_t value)
{
    uint64_t draw;
    uint32_t count;

    if (!value || !__atomic_load_n(&tu.slot->dither, __ATOMIC_ACQUIRE))
        return 0;
    draw = __atomic_load_n(&tu.slot->dither_draws, __ATOMIC_RELAXED);
    count = trace_dither_interval(steps_to_expiry(value),
                                  __atomic_load_n(&tu.slot->dither_seed,
                                                  __ATOMIC_RELAXED), draw);
    __atomic_store_n(&tu.slot->dither_draws, draw + 1, __ATOMIC_RELAXED);
    return count;
}

/* With the dither on, interval 0 after a load is dithered too: the first
 * producer to run on the slot after the load (draws still 0, no cycle
 * run since) replaces the loaded value for N by the value for N + J(0).
 * Returns the LFSR state to run with. */
static uint32_t dither_first_interval(const struct trace_lfsr_snapshot *snap,
                                      uint32_t state)
{
    uint32_t count;

    if (!state || snap->cycles != snap->reload_cycle ||
        __atomic_load_n(&tu.slot->dither_draws, __ATOMIC_RELAXED))
        return state;
    count = dithered_count(state);
    if (!count)
        return state;
    state = lfsr_memo_value(&tu.value_memo, count);
    trace_slot_write_lfsr(tu.slot, snap->cycles, state);
    return state;
}

/* The LFSR reached 0xFFFFFF at cycle `at`: reload the programmed value,
 * or with dither the value for that interval plus a jitter. */
static void reload(uint64_t at)
{
    uint32_t value = __atomic_load_n(&tu.slot->programmed_value,
                                     __ATOMIC_ACQUIRE) & LFSR_MASK;
    uint32_t count = dithered_count(value);

    if (count)
        value = lfsr_memo_value(&tu.value_memo, count);
    else if (value)
        count = steps_to_expiry(value);
    trace_slot_write_lfsr(tu.slot, at, value);
    tu.lfsr = value;
    tu.expiry = value ? at + count : NEVER;
}

/* Ticks of the slot's clock from block b's start to its instruction i. */
static uint32_t ticks_before(const struct block *b, uint32_t i)
{
    if (tu.clock == TRACE_EVENT_INSTRUCTIONS || !i)
        return i;
    return b->cycles_end[i - 1];
}

static void check_expiry_ahead(void)
{
    if (tu.expiry <= slot_cycles())
        stop_emulator("%s: slot registers changed under running context %u",
                      tu.unit->path, tu.context_id);
}

/* Fast mode: instructions [from, to) of block b have retired; the slot's
 * cycles stand at instruction `from`.  An expiry at tick `at` captures
 * the instruction whose ticks hold it. */
static void retire(const struct block *b, uint32_t from, uint32_t to)
{
    uint64_t base = slot_cycles() - ticks_before(b, from);
    uint64_t end = base + ticks_before(b, to);
    uint32_t k = from;

    check_expiry_ahead();
    while (tu.expiry <= end) {
        uint64_t at = tu.expiry;

        while (base + ticks_before(b, k + 1) < at)
            k++;
        capture(b->vaddr[k], insn_cause(b, k,
                                        at - base - ticks_before(b, k)));
        reload(at);
    }
    set_slot_cycles(end);
    tu.retired += to - from;
}

/* The ticks block p's exit costs when the next block starts at `next`. */
static uint32_t exit_ticks(const struct block *p, uint64_t next)
{
    return p->exit_cost[tu.clock][next == p->fallthrough];
}

/* Fast mode: `ticks` more ticks spent at instruction `vaddr` for
 * `cause`; every expiry in them captures it. */
static void advance(uint64_t vaddr, uint64_t ticks, uint32_t cause)
{
    uint64_t end;

    check_expiry_ahead();
    end = slot_cycles() + ticks;
    while (tu.expiry <= end) {
        uint64_t at = tu.expiry;

        capture(vaddr, cause);
        reload(at);
    }
    set_slot_cycles(end);
}

/* The next block starts at `next` after tu.current: the cycles of its
 * exit (a mispredicted or indirect branch) belong to that block's last
 * instruction. */
static void retire_exit(uint64_t next)
{
    const struct block *p = tu.current;

    tu.current = NULL;
    if (!p || !tu.attached || !exit_ticks(p, next))
        return;
    advance(p->vaddr[p->n_insns - 1], exit_ticks(p, next),
            TRACE_STALL_BRANCH);
}

/* Fast mode: block b starts.  Its tail is left for the next block to
 * retire when an expiry falls in it. */
static void retire_block(const struct block *b)
{
    retire(b, 0, b->n_if_stopped);
    if (tu.expiry <= slot_cycles() + (ticks_before(b, b->n_insns)
                                      - ticks_before(b, b->n_if_stopped)))
        tu.tail = b;
    else
        retire(b, b->n_if_stopped, b->n_insns);
}

static void retire_tail(void)
{
    const struct block *b = tu.tail;

    tu.tail = NULL;
    retire(b, b->n_if_stopped, b->n_insns);
}

/* ---- The slot and the gate ---------------------------------------------- */

/* The ring from the vCPU (slot=, below). */
static int soft_ring_wanted(void);
static void soft_ring_raise(void);

static int gate_changed(void)
{
    return __atomic_load_n(&tu.context->gate, __ATOMIC_ACQUIRE) != tu.open_gate;
}

/*
 * Fast mode: publishes the cycle at which the next block must take the
 * slow path (at once with a tail or main-memory accesses to settle).  A
 * controller closes the gate, then zeroes check_cycle; we store
 * check_cycle, then look at the gate (both sequentially consistent), so
 * one of us sees the other and a hold is never missed.  With slot= the
 * same holds for the stub's PREEMPT, which raises the ring here.
 */
static void arm(void)
{
    __atomic_store_n(tu.check_cycle, tu.tail || tu.memory_pending->len ? 0
                                     : tu.expiry, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&tu.context->gate, __ATOMIC_SEQ_CST) != tu.open_gate)
        __atomic_store_n(tu.check_cycle, 0, __ATOMIC_RELAXED);
    if (soft_ring_wanted())
        soft_ring_raise();
}

static void detach(void)
{
    tu.context_cycles += slot_cycles() - tu.attach_cycles;
    __atomic_store_n(&tu.context->cycles, tu.context_cycles,
                     __ATOMIC_RELEASE);
    tu.instructions += tu.retired;
    tu.retired = 0;
    __atomic_store_n(&tu.context->instructions, tu.instructions,
                     __ATOMIC_RELEASE);
    __atomic_store_n(tu.check_cycle, 0, __ATOMIC_RELAXED);
    tu.slot = &detached_slot;
    tu.stack_area = NULL;
    tu.attached = 0;
    tu.window_size = 0;
}

/* The attached context's data window, whose direct accesses cost
 * main-memory cycles: the one its boot block names, under SPU_CYCLES. */
static void on_reset(qemu_plugin_id_t id);

static void learn_window(void)
{
    tu.window_base = tu.window_size = 0;
    if (!tu.boot || tu.clock != TRACE_EVENT_CYCLES)
        return;
    tu.window_base = le32toh(tu.boot->data_addr);
    tu.window_size = le32toh(tu.boot->data_size);
    if (tu.window_base + tu.window_size + TIMING_LOCAL_MARGIN > tu.ls_base
        && tu.window_base < tu.ls_base + tu.ls_size + TIMING_LOCAL_MARGIN)
        stop_emulator("%s: context %u's data window 0x%llx (0x%llx bytes) "
                      "is within 1 MiB of the local store, where direct "
                      "accesses are not watched", tu.unit->path,
                      tu.context_id, (unsigned long long)tu.window_base,
                      (unsigned long long)tu.window_size);
}

/*
 * Memory callbacks exist only under SPU_CYCLES (watch_memory), decided at
 * translation with the clock of then: when the attach finds another
 * clock, every translation is dropped (qemu_plugin_reset, done before the
 * vCPU's next block) so that the code translates anew with the callbacks
 * the new clock wants.  The block being entered runs once as translated.
 */
static void flush_on_clock_change(void)
{
    if (tu.watch_clock < 0 || tu.watch_clock == (int)tu.clock)
        return;
    tu.watch_clock = -1;
    qemu_plugin_reset(tu.plugin_id, on_reset);
}

/* Takes over the slot our context is bound to, with its LFSR as it is. */
static void attach(uint32_t gate)
{
    uint32_t slot_id = __atomic_load_n(&tu.context->slot, __ATOMIC_ACQUIRE);
    struct trace_regs_slot *slot = trace_unit_slot(tu.unit, slot_id);
    struct trace_lfsr_snapshot snap;
    uint32_t state;

    if (!slot || __atomic_load_n(&slot->bound_context, __ATOMIC_ACQUIRE)
                 != tu.context_id)
        stop_emulator("%s: context %u was let run without a slot bound to "
                      "it (slot field %u)", tu.unit->path, tu.context_id,
                      slot_id);
    /* -1: a producer killed inside its write left the lock held; its
     * values are as it left them, and this one samples from them */
    (void)trace_slot_read_lfsr(slot, &snap);
    state = trace_lfsr_snapshot_state(&snap);
    tu.slot = slot;
    state = dither_first_interval(&snap, state);
    if (tu.stacks)
        tu.stack_area = trace_stack_area(tu.unit->base, tu.unit->header,
                                         slot_id);
    tu.attached = 1;
    tu.open_gate = gate;
    tu.clock = __atomic_load_n(&slot->event, __ATOMIC_ACQUIRE)
               == TRACE_EVENT_INSTRUCTIONS ? TRACE_EVENT_INSTRUCTIONS
                                           : TRACE_EVENT_CYCLES;
    tu.retired = 0;
    learn_window();
    flush_on_clock_change();
    tu.attach_cycles = snap.cycles;
    tu.lfsr = state;
    tu.expiry = state ? snap.cycles + steps_to_expiry(state) : NEVER;
}

/* At a block boundary, with everything before it retired: wait while held,
 * then run on whatever slot the context is bound to now. */
static void slot_take_context(void);

static void obey_gate(void)
{
    uint32_t gate;

    if (!tu.vcpu_thread)
        tu.vcpu_thread = (pid_t)syscall(SYS_gettid);
    if (!tu.context)
        slot_take_context();        /* slot=: the context bound now */
    if (tu.attached)
        detach();
    gate = trace_context_wait_open(tu.unit, tu.context);
    if (gate == TRACE_NONE)
        stop_emulator("%s: the controller (pid %d) died while context %u "
                      "was held", tu.unit->path,
                      (int)tu.unit->header->controller_pid, tu.context_id);
    attach(gate);
}

/* ---- Execution callbacks ------------------------------------------------ */

static void settle_memory(void);

/* Kept out of line so that on_block stays a leaf with a tail call. */
static __attribute__((noinline, cold)) void on_block_slow(const struct block *b)
{
    if (tu.tail)
        retire_tail();
    settle_memory();
    retire_exit(b->start);
    tu.current = b;
    while (!tu.attached || gate_changed())
        obey_gate();
    retire_block(b);
    arm();
}

/* Fast mode, at the start of every block: the previous block's exit and
 * this block's static cost, in the slot clock's ticks. */
static void on_block(unsigned int vcpu_index, void *udata)
{
    const struct block *b = udata, *p = tu.current;
    uint64_t end = slot_cycles() + b->ticks[tu.clock]
                   + (p ? exit_ticks(p, b->start) : 0);

    if (__builtin_expect(end < __atomic_load_n(tu.check_cycle,
                                               __ATOMIC_RELAXED), 1)) {
        tu.current = b;
        tu.retired += b->n_insns;
        set_slot_cycles(end);
        return;
    }
    on_block_slow(b);
}

/* Reference mode: `ticks` ticks of instruction `vaddr` spent for
 * `cause`, one LFSR step each. */
static void step_ticks(uint64_t vaddr, uint32_t ticks, uint32_t cause)
{
    uint64_t cycles = slot_cycles();

    for (uint32_t k = 0; k < ticks; k++) {
        cycles++;
        set_slot_cycles(cycles);
        tu.lfsr = lfsr_step(tu.lfsr);
        if (tu.lfsr == LFSR_EXPIRY) {
            capture(vaddr, cause);
            reload(cycles);
        }
    }
}

/* Reference mode, where a block starts at `next`: the exit of the block
 * whose last instruction ran just before, if it did. */
static void step_exit(uint64_t next)
{
    const struct insn_ref *last = tu.last;

    settle_memory();        /* of a block left before its end */
    tu.last = NULL;
    if (!last || !tu.attached || last->i + 1 != last->b->n_insns)
        return;
    step_ticks(last->b->vaddr[last->i], exit_ticks(last->b, next),
               TRACE_STALL_BRANCH);
}

/* Reference mode, before every instruction. */
static void on_insn(unsigned int vcpu_index, void *udata)
{
    const struct insn_ref *r = udata;
    const struct block *b = r->b;
    uint32_t ticks, waits;

    if (!r->i) {
        step_exit(b->start);
        while (!tu.attached || gate_changed())
            obey_gate();
        if (soft_ring_wanted())
            soft_ring_raise();
    }
    ticks = ticks_before(b, r->i + 1) - ticks_before(b, r->i);
    waits = tu.clock == TRACE_EVENT_CYCLES ? b->stall[r->i] : 0;
    step_ticks(b->vaddr[r->i], waits, TRACE_STALL_DEPENDENCY);
    step_ticks(b->vaddr[r->i], ticks - waits, TRACE_STALL_ISSUE);
    tu.last = r;
    tu.retired++;
    if (r->i + 1 == b->n_insns)
        settle_memory();
}

/* Call stacks: before a call or return instruction (udata: the return
 * address, and the operation in bits 32..). */
static void on_stack_insn(unsigned int vcpu_index, void *udata)
{
    uint64_t tag = (uintptr_t)udata;

    shadow_note(&tu.shadow, (enum shadow_op)(tag >> 32), (uint32_t)tag);
}

/* Fast mode with call stacks: a tail waiting from the previous block is
 * captured with the stack before that block's call or return, which is
 * then settled before this block's captures. */
static void on_block_stacked(unsigned int vcpu_index, void *udata)
{
    const struct block *b = udata;

    if (tu.tail)
        retire_tail();
    settle_memory();
    retire_exit(b->start);  /* with the stack of the branch's block */
    if (!tu.context)
        slot_take_context();        /* slot=: its stack restored first */
    shadow_settle(&tu.shadow, b->vaddr[0]);
    on_block(vcpu_index, udata);
}

/* Reference mode with call stacks: the previous block's exit, then the
 * stack settled, as in the fast mode. */
static void on_insn_stacked(unsigned int vcpu_index, void *udata)
{
    const struct insn_ref *r = udata;

    if (!r->i) {
        step_exit(r->b->start);
        if (!tu.context)
            slot_take_context();    /* slot=: its stack restored first */
        shadow_settle(&tu.shadow, r->b->start);
    }
    on_insn(vcpu_index, udata);
}

/* ---- DMA (mfc.c) -------------------------------------------------------- */

/* The context's cycles so far: the clock of its DMA. */
static uint64_t context_cycles(void)
{
    return tu.context_cycles + (slot_cycles() - tu.attach_cycles);
}

/* `ticks` cycles of a wait for `reason` at instruction `vaddr`, after its
 * own; tu.wait says what it waits for while captures are taken. */
static void charge_wait(uint64_t vaddr, uint64_t ticks,
                        enum trace_stall_reason reason)
{
    tu.wait_charge = ticks;
    if (!ticks)
        return;
    tu.wait.reason = reason;
    if (!tu.reference) {
        advance(vaddr, ticks, wait_cause());
        arm();
    } else {
        for (; ticks > UINT32_MAX; ticks -= UINT32_MAX)
            step_ticks(vaddr, UINT32_MAX, wait_cause());
        step_ticks(vaddr, (uint32_t)ticks, wait_cause());
    }
    tu.wait.reason = TRACE_STALL_ISSUE;
    tu.wait.dma.valid = 0;
}

static void dma_bounds(struct mfc_bounds *b)
{
    b->ls_base = (uint32_t)tu.ls_base;
    b->ls_size = (uint32_t)tu.ls_size;
    b->data_base = le32toh(tu.boot->data_addr);
    b->data_size = le32toh(tu.boot->data_size);
}

/* A marker, the last instruction of block b, is about to run: everything
 * before it retired and charged (its block's tail, main-memory accesses
 * waiting), so that its wait comes after them.  0: no context attached. */
static int marker_begins(const struct block *b)
{
    tu.wait_charge = 0;
    if (!tu.attached)
        return 0;
    if (tu.tail == b)
        retire_tail();
    settle_memory();
    return 1;
}

/* A DMA marker, the last instruction of block b, is about to run, its own
 * cycles counted: an issue is stamped, a wait charged to it.  Under
 * SPU_INSTRUCTIONS there are no cycles: transfers complete at once. */
static void on_dma_marker(unsigned int vcpu_index, void *udata)
{
    const struct block *b = udata;
    uint32_t last = b->n_insns - 1;
    int cycles = tu.clock == TRACE_EVENT_CYCLES;
    uint64_t wait = 0;
    char err[512];

    if (!marker_begins(b))
        return;
    if (b->words[last] == COP_MARK_DMA_ISSUE) {
        struct mfc_bounds bounds;

        dma_bounds(&bounds);
        if (mfc_issue(tu.mfc, cycles ? &tu.model : NULL, &bounds,
                      context_cycles(), (uint32_t)b->vaddr[last], err,
                      sizeof(err)) < 0)
            stop_emulator("context %u: %s", tu.context_id, err);
        return;
    }
    if (mfc_wait(tu.mfc, context_cycles(), &wait, &tu.wait.dma, err,
                 sizeof(err)) < 0)
        stop_emulator("context %u: %s", tu.context_id, err);
    charge_wait(b->vaddr[last], wait, TRACE_STALL_DMA_WAIT);
}

/* counts=: after on_dma_marker, the wait it charged. */
static void on_count_dma(unsigned int vcpu_index, void *udata)
{
    ((struct code *)udata)->dma_wait += tu.wait_charge;
}

/* Whether block b ends with a DMA marker (and the channel is mapped). */
static int is_dma_marker_block(const struct block *b)
{
    uint32_t word = b->n_insns ? b->words[b->n_insns - 1] : 0;

    return tu.mfc && (word == COP_MARK_DMA_ISSUE || word == COP_MARK_DMA_WAIT);
}

/* ---- Main memory ------------------------------------------------------- */

/*
 * Under SPU_CYCLES a load or store that may reach main memory
 * (timing_watch_memory) has a memory callback; an access inside the attached context's data
 * window costs memory.latency cycles, charged to the instruction as
 * TRACE_STALL_MEMORY after every instruction of its block has counted its
 * own cycles, in both modes: the reference mode charges at the block's
 * last instruction, the fast mode at once when its block has counted
 * everything (it counts at the block's start), else (a tail left for the
 * next block, or one counted before it is known to run) at the next
 * block's start.  Exit in the middle of a block charges what ran.
 */

/* Charges the accesses waiting, in the order they ran. */
static void settle_memory(void)
{
    GArray *pending = tu.memory_pending;

    if (!pending->len)
        return;
    for (guint k = 0; k < pending->len; k++)
        charge_wait(g_array_index(pending, uint64_t, k),
                    tu.model.memory_latency, TRACE_STALL_MEMORY);
    g_array_set_size(pending, 0);
}

/* Whether the fast mode has counted the cycles of all of block b that is
 * known to run once instruction i has: not when the block's tail waits,
 * nor when i is before a tail (QEMU may end inside a store before it). */
static int counted_through(const struct block *b, uint32_t i)
{
    return tu.tail != b && (i >= b->n_if_stopped
                            || b->n_if_stopped == b->n_insns);
}

static __attribute__((noinline, cold)) void charge_memory(
    const struct insn_ref *r)
{
    uint64_t vaddr = r->b->vaddr[r->i];

    tu.memory_charge = tu.model.memory_latency;
    g_array_append_val(tu.memory_pending, vaddr);
    if (tu.reference ? r->i + 1 == r->b->n_insns
                     : counted_through(r->b, r->i)) {
        settle_memory();
        return;
    }
    if (!tu.reference)      /* the next block takes the slow path */
        __atomic_store_n(tu.check_cycle, 0, __ATOMIC_RELAXED);
}

/* After an access of a load or store that may reach main memory. */
static void on_memory(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                      uint64_t vaddr, void *udata)
{
    if (__builtin_expect(vaddr - tu.window_base >= tu.window_size, 1)) {
        tu.memory_charge = 0;
        return;
    }
    charge_memory(udata);
}

/* counts=: after on_memory, the cycles it charged. */
static void on_count_memory(unsigned int vcpu_index,
                            qemu_plugin_meminfo_t info, uint64_t vaddr,
                            void *udata)
{
    *(uint64_t *)udata += tu.memory_charge;
}

/* The block's loads and stores that may reach main memory
 * (timing_watch_memory), when the context has a data window (a boot
 * block) and the clock is SPU_CYCLES: under SPU_INSTRUCTIONS nothing. */
static void watch_memory(struct qemu_plugin_tb *tb, const struct block *b,
                         struct code *c)
{
    uint8_t *watch;

    if (!tu.boot)
        return;
    tu.watch_clock = (int)tu.clock;
    if (tu.clock != TRACE_EVENT_CYCLES)
        return;
    watch = g_malloc(b->n_insns);
    timing_watch_memory(b->words, b->vaddr, b->n_insns, tu.ls_base,
                        tu.ls_size, watch);
    for (uint32_t i = 0; i < b->n_insns; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

        if (!watch[i])
            continue;
        qemu_plugin_register_vcpu_mem_cb(insn, on_memory,
                                         QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW,
                                         (void *)&b->refs[i]);
        if (c)
            qemu_plugin_register_vcpu_mem_cb(insn, on_count_memory,
                                             QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW,
                                             &c->memory[i]);
    }
    g_free(watch);
}

/* ---- Mailboxes (mbox.c) ------------------------------------------------- */

/* Maps the page of `path` at `offset` read-write; NULL with a line on
 * stderr when it cannot. */
static void *map_page(const char *path, off_t offset, size_t bytes)
{
    void *base;
    int fd = open(path, O_RDWR | O_CLOEXEC);

    if (fd < 0) {
        fprintf(stderr, "coptrace: %s: cannot open: %s\n", path,
                strerror(errno));
        return NULL;
    }
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    close(fd);
    if (base == MAP_FAILED) {
        fprintf(stderr, "coptrace: %s: cannot map: %s\n", path,
                strerror(errno));
        return NULL;
    }
    return base;
}

static uint8_t *window_host(void);
static uint8_t *slot_ram_host(void);

/* The context's mailbox block: the last page of the data window its boot
 * block names, in the guest RAM file (a QEMU of its own) or in the
 * main-memory window (window=, the slot model), where the bound context's
 * main-memory file is mapped: the same address, each context's bytes. */
static volatile struct cop_mbox *mbox_block(void)
{
    uint32_t addr = le32toh(tu.boot->data_addr) + COP_MBOX_OFFSET;
    uint8_t *host;
    void *page = NULL;

    if (tu.mbox && addr == tu.mbox_addr)
        return tu.mbox;
    if (tu.mbox && !tu.mbox_qemus)
        munmap((void *)tu.mbox, COP_MBOX_SIZE);
    tu.mbox = NULL;
    tu.mbox_qemus = 0;
    if (addr >= SLOT_MAIN_BASE && addr - SLOT_MAIN_BASE
                                  <= SLOT_MAIN_AREA - COP_MBOX_SIZE) {
        host = window_host();
        if (host) {
            page = host + (addr - SLOT_MAIN_BASE);
            tu.mbox_qemus = 1;
        }
    } else if (addr >= COP_RAM_BASE && addr - COP_RAM_BASE
                                       <= COP_RAM_SIZE - COP_MBOX_SIZE) {
        if ((host = slot_ram_host())) {
            page = host + (addr - COP_RAM_BASE);
            tu.mbox_qemus = 1;
        } else {
            page = map_page(tu.ram_path, addr - COP_RAM_BASE, COP_MBOX_SIZE);
        }
    }
    if (!page)
        stop_emulator("context %u: mailbox block at 0x%08x is in no memory "
                      "the trace unit maps", tu.context_id, addr);
    tu.mbox = page;
    tu.mbox_addr = addr;
    return tu.mbox;
}

/* Sleeps (no CPU) until `word` may differ from `seen`, or 10 ms; a hold
 * of the context (a gate closed meanwhile) is obeyed before it returns:
 * a context blocked on a mailbox may be held like a running one. */
static void mbox_sleep(volatile uint32_t *word, uint32_t seen)
{
    struct timespec ts = { 0, 10 * 1000 * 1000 };

    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
    if (!gate_changed())
        return;
    while (!tu.attached || gate_changed())
        obey_gate();
    if (!tu.reference)
        arm();
}

static void mbox_wake(volatile uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* A read or write marker at context cycle `now`, until it is served. */
static uint64_t mbox_serve(volatile struct cop_mbox *mb, uint32_t word)
{
    int reading = word == COP_MARK_MBOX_READ;
    const struct timing_model *m = tu.clock == TRACE_EVENT_CYCLES ? &tu.model
                                                                  : NULL;
    volatile uint32_t *sleep_on = reading ? &mb->in_put : &mb->out_taken;
    uint32_t value = le32toh(tu.mfc->mbox_value);
    uint64_t wait = 0;
    char err[512];

    for (;;) {
        uint32_t seen = __atomic_load_n(sleep_on, __ATOMIC_ACQUIRE);
        enum mbox_result r = reading
            ? mbox_read(mb, m, context_cycles(), &value, &wait, err,
                        sizeof(err))
            : mbox_write(mb, m, context_cycles(), value, &wait, err,
                         sizeof(err));

        if (r == MBOX_ERROR)
            stop_emulator("context %u: %s", tu.context_id, err);
        if (r == MBOX_DONE)
            break;
        mbox_sleep(sleep_on, seen);
    }
    mbox_wake(reading ? &mb->in_taken : &mb->out_put);
    tu.mfc->mbox_value = htole32(value);
    return wait;
}

/* A mailbox marker, the last instruction of block b, is about to run, its
 * own cycles counted: a read or write is served (sleeping while the
 * mailbox is empty or full) and its modelled wait charged to it; a count
 * is answered. */
static void on_mbox_marker(unsigned int vcpu_index, void *udata)
{
    const struct block *b = udata;
    uint32_t last = b->n_insns - 1, word = b->words[last];
    volatile struct cop_mbox *mb;
    uint64_t wait = 0;
    char err[512];

    if (!marker_begins(b))
        return;
    mb = mbox_block();
    if (word == COP_MARK_MBOX_COUNT) {
        int n = mbox_count(mb, tu.clock == TRACE_EVENT_CYCLES ? &tu.model
                                                              : NULL,
                           context_cycles(), err, sizeof(err));

        if (n < 0)
            stop_emulator("context %u: %s", tu.context_id, err);
        tu.mfc->mbox_value = htole32((uint32_t)n);
    } else {
        wait = mbox_serve(mb, word);
    }
    __atomic_store_n(&tu.mfc->mbox_done, htole32(1), __ATOMIC_RELEASE);
    charge_wait(b->vaddr[last], wait, TRACE_STALL_MAILBOX_WAIT);
}

/* counts=: after on_mbox_marker, the wait it charged. */
static void on_count_mbox(unsigned int vcpu_index, void *udata)
{
    ((struct code *)udata)->mbox_wait += tu.wait_charge;
}

/* Whether block b ends with a mailbox marker (and the channel is mapped). */
static int is_mbox_marker_block(const struct block *b)
{
    uint32_t word = b->n_insns ? b->words[b->n_insns - 1] : 0;

    return tu.mfc && (word == COP_MARK_MBOX_READ || word == COP_MARK_MBOX_WRITE
                      || word == COP_MARK_MBOX_COUNT);
}

/* Whether the block is the runtime's transfer engine, which stands for
 * the MFC's own work: not the coprocessor's cycles. */
static int is_engine_block(const struct qemu_plugin_tb *tb)
{
    uint32_t start, end;
    uint64_t vaddr;

    if (!tu.mfc || !qemu_plugin_tb_n_insns(tb)
        || !mfc_engine_range(tu.mfc, &start, &end))
        return 0;
    vaddr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
    return vaddr >= start && vaddr < end;
}

/* ram=: maps the boot block's page, with the channel block, read-write.
 * A file too small to hold it (a test guest's) leaves DMA untimed. */
static int map_channel(const char *path)
{
    off_t offset = COP_BOOT_BASE - COP_RAM_BASE;
    struct stat st;
    void *base;
    int fd = open(path, O_RDWR | O_CLOEXEC);

    if (fd < 0) {
        fprintf(stderr, "coptrace: %s: cannot open: %s\n", path,
                strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || st.st_size < offset + COP_BOOT_SIZE) {
        close(fd);
        return 0;
    }
    base = mmap(NULL, COP_BOOT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                offset);
    close(fd);
    if (base == MAP_FAILED) {
        fprintf(stderr, "coptrace: %s: cannot map the boot block: %s\n",
                path, strerror(errno));
        return -1;
    }
    tu.boot = base;
    tu.mfc = (volatile struct cop_mfc *)((char *)base
                                         + (COP_MFC_BASE - COP_BOOT_BASE));
    return 0;
}

/* Fast mode at exit: on the vCPU thread QEMU is exiting from inside the
 * current block, so its tail never ran; elsewhere it ran to its end. */
static void retire_last_block(void)
{
    int inside = (pid_t)syscall(SYS_gettid) == tu.vcpu_thread;
    const struct block *b = tu.current;

    if (!inside) {
        if (tu.tail)
            retire_tail();
        return;
    }
    if (tu.tail == b) {
        tu.tail = NULL;
        return;
    }
    if (b) {
        set_slot_cycles(slot_cycles() - (ticks_before(b, b->n_insns)
                                         - ticks_before(b, b->n_if_stopped)));
        tu.retired -= b->n_insns - b->n_if_stopped;
    }
}

/* ---- Contexts of a slot stub -------------------------------------------- */

/*
 * On a slot that runs several contexts through the resident stub
 * (emulator/copsim/stub/), ram= is the slot's RAM file and its control
 * block holds the stub's magic: the plugin maps the block read-only and
 * attributes code to the context whose local store is in place (the
 * block's `resident`).  The stub rewrites the whole local store with guest
 * stores at every switch, so QEMU translates a context's code again while
 * that context is resident: the context at translation is the one that
 * runs the code.  counts= then keeps counters per context and writes one
 * run per context (context= its entry in the stub's table).
 */
static const uint32_t *slot_control;    /* NULL: not a slot stub's RAM */

static const void *map_ram(const char *path, size_t bytes);

static void slot_map_control(const char *ram)
{
    const uint8_t *base;
    size_t offset = SLOT_CTL_BASE - SLOT_LS_BASE;
    struct stat st;

    if (!ram || stat(ram, &st) < 0
        || (uint64_t)st.st_size < offset + SLOT_CTL_SIZE)
        return;
    base = map_ram(ram, offset + SLOT_CTL_SIZE);
    if (base && le32toh(*(const uint32_t *)(base + offset)) == SLOT_MAGIC)
        slot_control = (const uint32_t *)(base + offset);
}

static struct {
    int on;                         /* slot=S given */
    uint32_t index;                 /* S */
    const char *counts_dir;         /* countsdir=DIR */
    const uint8_t *ls;              /* the slot's RAM from the local store
                                       to the stub's control block, mapped */
    uint32_t *stats;                /* the control block's header, mapped
                                       writable: SLOT_H_FLUSHES, _KEPT */
    uint8_t *stack_save;            /* stacks: SLOT_STACK_SAVE, mapped
                                       writable */
    uint64_t no_check;              /* check_cycle while no context */
    GHashTable *code;               /* local-store code translated since
                                       the last flush: (vaddr | bytes << 32)
                                       -> its bytes */
    int foreign_code;               /* code translated since then from
                                       memory a switch changes but that is
                                       not the local store */
    int handing_switch;             /* the entry the stub hands back next
                                       was parked for a switch (not ended,
                                       not killed): decided before the stub
                                       writes its state */
    int spin_for_go;                /* that hand-back was made: the next
                                       idle wait is a switch's */
} slot_mode;

_Static_assert(SHADOW_SAVE_MAGIC == SLOT_STACK_MAGIC,
               "slot-stub.h and shadow-stack.h name one saved stack");

static uint32_t slot_bound_context(void)
{
    return __atomic_load_n(&trace_unit_slot(tu.unit, slot_mode.index)
                                ->bound_context, __ATOMIC_ACQUIRE);
}

/* The context that code translated now belongs to: with slot=, the
 * run bound to the slot (copsim's context id from the slot's mailbox: a
 * register-file block serves several contexts one after another). */
static uint32_t slot_context_now(void)
{
    if (slot_mode.on)
        return (uint32_t)__atomic_load_n(
            &trace_unit_mailbox(tu.unit, slot_mode.index)->context_id,
            __ATOMIC_ACQUIRE);
    if (!slot_control)
        return tu.context_id;
    return le32toh(__atomic_load_n(&slot_control[SLOT_H_RESIDENT / 4],
                                   __ATOMIC_ACQUIRE));
}

/* ---- Exact counts (counts=) --------------------------------------------- */

/* Before every instruction, with counts= on. */
static void on_count(unsigned int vcpu_index, void *udata)
{
    (*(uint64_t *)udata)++;
}

/* counts=: a block starts at `vaddr`; the exit of the code whose last
 * instruction ran just before costs its cycles for the outcome. */
static void settle_count_exit(uint64_t vaddr)
{
    const struct code *c = tu.count_exit;

    if (!c)
        return;
    tu.count_exit = NULL;
    ((struct code *)c)->branch_cycles += vaddr == c->exit.fallthrough
                                         ? c->exit.not_taken : c->exit.taken;
}

static void on_count_first(unsigned int vcpu_index, void *udata)
{
    settle_count_exit((uintptr_t)udata);
}

/* counts=: after the last instruction of code whose exit may cost. */
static void on_count_exit(unsigned int vcpu_index, void *udata)
{
    tu.count_exit = udata;
}

static gint code_order(gconstpointer a, gconstpointer b)
{
    const struct code *x = a, *y = b;

    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    if (x->n_insns != y->n_insns)
        return x->n_insns < y->n_insns ? -1 : 1;
    return memcmp(x->bytes, y->bytes, MIN(x->n_bytes, y->n_bytes));
}

static uint64_t code_total(const struct code *c)
{
    uint64_t total = 0;

    for (uint32_t i = 0; i < c->n_insns; i++)
        total += c->counts[i];
    return total;
}

/* The cycles code c's instructions cost in all. */
static uint64_t code_cycles(const struct code *c)
{
    uint64_t cycles = c->branch_cycles;

    for (uint32_t i = 0; i < c->n_insns; i++)
        cycles += c->counts[i] * (c->issue[i] + c->stall[i]) + c->memory[i];
    return cycles + c->dma_wait + c->mbox_wait;
}

/* A line per instruction: address, bytes, executions, then its cycles by
 * reason: issue, dependency, branch (its exit's, on the last one), DMA
 * wait and mailbox wait (a marker's, the last one), main memory. */
static void write_code(FILE *out, const struct code *c)
{
    const uint8_t *bytes = c->bytes;

    fprintf(out, "code 0x%08llx %u 0x%08x\n", (unsigned long long)c->vaddr,
            c->n_insns, c->hash);
    for (uint32_t i = 0; i < c->n_insns; i++) {
        fprintf(out, "0x%08llx ", (unsigned long long)c->insn_vaddr[i]);
        for (uint32_t k = 0; k < c->insn_size[i]; k++)
            fprintf(out, "%02x", *bytes++);
        int last = i + 1 == c->n_insns;

        fprintf(out, " %llu %llu %llu %llu %llu %llu %llu\n",
                (unsigned long long)c->counts[i],
                (unsigned long long)(c->counts[i] * c->issue[i]),
                (unsigned long long)(c->counts[i] * c->stall[i]),
                (unsigned long long)(last ? c->branch_cycles : 0),
                (unsigned long long)(last ? c->dma_wait : 0),
                (unsigned long long)(last ? c->mbox_wait : 0),
                (unsigned long long)c->memory[i]);
    }
}

/* Writes one run: the codes of `context` (their key) that ran, in address
 * order, between a header (naming register-file context `id`) and an end
 * line that carries the totals. */
static void write_run(FILE *out, GList *codes, uint32_t context, uint32_t id)
{
    uint64_t total = 0, cycles = 0;
    unsigned written = 0;

    fprintf(out, "coprof-exact-counts 2\n");
    fprintf(out, "run context=%u mode=%s ls_base=0x%08llx ls_size=0x%llx\n",
            id, tu.reference ? "reference" : "fast",
            (unsigned long long)tu.ls_base, (unsigned long long)tu.ls_size);
    for (GList *l = codes; l; l = l->next) {
        const struct code *c = l->data;
        uint64_t n = code_total(c);

        if (!n || c->context != context)
            continue;
        write_code(out, c);
        total += n;
        cycles += code_cycles(c);
        written++;
    }
    fprintf(out, "end instructions=%llu codes=%u cycles=%llu\n",
            (unsigned long long)total, written, (unsigned long long)cycles);
}

/* Appends this run's counters to COUNTS: one run, or on a slot stub's RAM
 * one run per context that executed something, in the order of their
 * entries. */
static void write_counts(void)
{
    GList *codes = g_list_sort(g_hash_table_get_values(tu.codes), code_order);
    FILE *out = tu.counts_out;

    if (!slot_control) {
        write_run(out, codes, tu.context_id, tu.context_id);
    } else {
        for (uint32_t k = 0; k < SLOT_MAX_CONTEXTS; k++)
            for (GList *l = codes; l; l = l->next)
                if (((const struct code *)l->data)->context == k
                    && code_total(l->data)) {
                    write_run(out, codes, k, k);
                    break;
                }
    }
    g_list_free(codes);
    if (fclose(out) != 0)
        fprintf(stderr, "coptrace: %s: cannot write: %s\n", tu.counts_path,
                strerror(errno));
    tu.counts_out = NULL;
}

/* ---- Slot mode (slot=S) ------------------------------------------------- */

/*
 * With slot=S the plugin serves slot S of copsim's slot model: one
 * long-lived emulator whose resident stub runs the contexts copsim binds
 * to S, one after another (emulator/copsim/stub/, in place).  It attaches
 * to no context at start; at the first block of a context it takes the
 * context bound to S in the register file (its gate, check_cycle and
 * instructions so far, its overlay watch), and lets go of it where the
 * stub passes SLOT_STUB_ENDED (the context ended: as at QEMU's exit, the
 * last block's tail is taken back, countsdir=DIR gets its exact counts in
 * DIR/context-ID.counts, ID from the slot's mailbox, and the context is
 * marked exited) or SLOT_STUB_PARKED (handed back at a block boundary:
 * its tail retired, its instructions kept for the next slot).  When copsim
 * wants the context back it sets the entry's PREEMPT and zeroes the
 * context's check_cycle; the slow path's arm() then raises the ring, a
 * software interrupt, from the vCPU's thread (soft_ring below,
 * slot-stub.h).
 */

/* The context's overlay watch, on the slot's local store. */
static void slot_watch_guards(uint32_t context)
{
    uint32_t offset = 0, count = 0;
    char err[512];

    tu.guard_count = 0;
    if (trace_context_guards(tu.unit, context, &offset, &count, err,
                             sizeof(err)) < 0)
        stop_emulator("%s", err);
    if (!count)
        return;
    if (!slot_mode.ls)
        stop_emulator("%s: context %u watches %u guard words; give the "
                      "slot's RAM file with ram=FILE", tu.unit->path,
                      context, count);
    tu.guards = (const uint32_t *)(slot_mode.ls + offset);
    tu.guard_count = count;
    for (uint32_t r = 0; r < count; r++)
        tu.guard_seen[r] = le32toh(__atomic_load_n(&tu.guards[r],
                                                   __ATOMIC_RELAXED));
}

/* Call stacks: the context's shadow stack as its controller placed it
 * (slot-stub.h, SLOT_STACK_SAVE), on this slot's local store and the
 * context's guard words. */
static void slot_restore_stack(void)
{
    shadow_free(&tu.shadow);
    shadow_init(&tu.shadow, slot_mode.ls, tu.ls_base, tu.ls_size,
                tu.guard_count ? tu.guards : NULL, tu.guard_count);
    if (shadow_restore(&tu.shadow, slot_mode.stack_save,
                       SLOT_STACK_SAVE_SIZE) < 0)
        stop_emulator("%s: slot %u: context %u's saved call stack is not "
                      "sound", tu.unit->path, slot_mode.index, tu.context_id);
}

/* Call stacks: the stack of the context handed back, where its
 * controller takes it from. */
static void slot_save_stack(void)
{
    if (!shadow_save(&tu.shadow, slot_mode.stack_save, SLOT_STACK_SAVE_SIZE))
        stop_emulator("%s: slot %u: context %u's call stack (%zu bytes) "
                      "does not fit in %u", tu.unit->path, slot_mode.index,
                      tu.context_id, shadow_save_size(&tu.shadow),
                      SLOT_STACK_SAVE_SIZE);
}

/* A word of the stub's control block that the plugin writes (its own
 * writable mapping of it). */
static uint32_t *slot_stats_word(uint32_t offset)
{
    return (uint32_t *)((uint8_t *)slot_mode.stats + offset);
}

/* A word of the stub's control block (slot-stub.h). */
static uint32_t *slot_control_word(uint32_t offset)
{
    return (uint32_t *)(slot_mode.ls + (SLOT_CTL_BASE - SLOT_LS_BASE)
                        + offset);
}

/*
 * The ring from the vCPU (slot-stub.h, SLOT_H_SOFT_RING).  The plugin API
 * cannot raise an interrupt, but the QEMU that loads us exports its memory
 * API (Debian's does: every symbol), so the vCPU's thread stores 1 to the
 * CLINT's MSIP as a guest store would: QEMU takes its global lock for that
 * one store (uncontended: its main loop sleeps) and has the hart take the
 * machine software interrupt at the next block.  copsim's PREEMPT, with
 * the context's check_cycle zeroed (trace_context_kick), brings the slow
 * path here; a QEMU without the symbols leaves SLOT_H_SOFT_RING 0, and
 * copsim rings through the UART.  The store's attributes (MemTxAttrs, a
 * bit-field struct of at most 8 bytes, passed in a register) are all
 * clear; the CLINT ignores them.
 */
typedef void (*address_space_store_fn)(void *address_space, uint64_t addr,
                                       uint32_t value, uint64_t attrs,
                                       void *result);

static struct {
    address_space_store_fn store;   /* QEMU's address_space_stl_le */
    void *memory;                   /* its address_space_memory */
    int raised;                     /* for the bound context, once */
} soft_ring;

/* Looks the two symbols up; a test hook, COPTRACE_TEST_UART_RING=1 in
 * QEMU's environment, makes the plugin do without them, as with a QEMU
 * that does not export them. */
static void soft_ring_find(void)
{
    const char *uart = getenv("COPTRACE_TEST_UART_RING");

    soft_ring.store = (address_space_store_fn)dlsym(RTLD_DEFAULT,
                                                    "address_space_stl_le");
    soft_ring.memory = dlsym(RTLD_DEFAULT, "address_space_memory");
    if (!soft_ring.store || !soft_ring.memory || (uart && *uart == '1')) {
        soft_ring.store = NULL;
        return;
    }
    __atomic_store_n(slot_stats_word(SLOT_H_SOFT_RING), 1, __ATOMIC_RELEASE);
}

/* Whether copsim wants the bound context back and the ring is not raised
 * yet (sequentially consistent: arm() stores check_cycle first, copsim
 * PREEMPT first, so either arm() sees PREEMPT or the next block takes the
 * slow path, whose arm() does). */
static int soft_ring_wanted(void)
{
    return soft_ring.store && tu.context && !soft_ring.raised
           && __atomic_load_n(slot_control_word(SLOT_H_SIZE + SLOT_C_PREEMPT),
                              __ATOMIC_SEQ_CST);
}

static void soft_ring_raise(void)
{
    soft_ring.raised = 1;
    soft_ring.store(soft_ring.memory, SLOT_CLINT_MSIP, 1, 0, NULL);
}

/* When the context bound last ran its first block, for copsim to time
 * the switch by (SLOT_H_TAKEN). */
static void slot_note_taken(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    __atomic_store_n((uint64_t *)(void *)slot_stats_word(SLOT_H_TAKEN),
                     (uint64_t)now.tv_sec * 1000000000u
                     + (uint64_t)now.tv_nsec, __ATOMIC_RELEASE);
}

/* At a context's first block: the context bound to the slot now. */
static void slot_take_context(void)
{
    uint32_t id = slot_bound_context();
    struct trace_regs_context *ctx = trace_unit_context(tu.unit, id);

    if (!slot_mode.on || !ctx)
        stop_emulator("%s: slot %u runs a context while none is bound to "
                      "it", tu.unit->path, slot_mode.index);
    slot_note_taken();
    __atomic_store_n(&ctx->pid, (int32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->mode, tu.reference ? TRACE_MODE_REFERENCE
                                              : TRACE_MODE_FAST,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->status, TRACE_CONTEXT_RUNNING, __ATOMIC_RELEASE);
    tu.context = ctx;
    tu.context_id = id;
    tu.check_cycle = &ctx->check_cycle;
    tu.instructions = __atomic_load_n(&ctx->instructions, __ATOMIC_ACQUIRE);
    tu.context_cycles = __atomic_load_n(&ctx->cycles, __ATOMIC_ACQUIRE);
    slot_watch_guards(id);
    if (tu.stacks)
        slot_restore_stack();
}

static void slot_let_go(void)
{
    soft_ring.raised = 0;
    tu.context = NULL;
    tu.check_cycle = &slot_mode.no_check;
    tu.current = NULL;
    tu.last = NULL;
    tu.count_exit = NULL;
    tu.tail = NULL;
    tu.guard_count = 0;
}

static void free_code(struct code *c);
static FILE *open_counts_file(const char *path, int nofollow);

static gboolean code_of_context(gpointer key, gpointer value, gpointer id)
{
    struct code *c = key;

    if (c->context != *(const uint32_t *)id)
        return FALSE;
    free_code(c);
    return TRUE;
}

/* countsdir=: appends the ended context's run to its file, then forgets
 * its codes (the register file's block serves another context later). */
static void slot_write_counts(void)
{
    unsigned long long id = __atomic_load_n(
        &trace_unit_mailbox(tu.unit, slot_mode.index)->context_id,
        __ATOMIC_ACQUIRE);
    uint32_t key = (uint32_t)id;
    char path[4096];
    GList *codes;
    FILE *out;

    if (!slot_mode.counts_dir)
        return;
    snprintf(path, sizeof(path), "%s/" TRACE_COUNTS_NAME,
             slot_mode.counts_dir, id);
    out = open_counts_file(path, 1);
    if (!out) {
        fprintf(stderr, "coptrace: %s: cannot write: %s\n", path,
                strerror(errno));
    } else {
        codes = g_list_sort(g_hash_table_get_values(tu.codes), code_order);
        write_run(out, codes, key, tu.context_id);
        g_list_free(codes);
        if (fclose(out) != 0)
            fprintf(stderr, "coptrace: %s: cannot write: %s\n", path,
                    strerror(errno));
    }
    g_hash_table_foreach_steal(tu.codes, code_of_context, &key);
}

static void window_save_local_store(void);

/* The stub passes SLOT_STUB_ENDED: the context's program ended inside its
 * last block (the exit store faulted), as QEMU's exit would have. */
static void on_stub_ended(unsigned int vcpu_index, void *udata)
{
    slot_mode.handing_switch = 0;
    window_save_local_store();
    if (!tu.context)
        return;
    if (tu.attached) {
        if (!tu.reference)
            retire_last_block();
        settle_memory();
        tu.instructions += tu.retired;
        tu.retired = 0;
        tu.attached = 0;
        tu.slot = &detached_slot;
    }
    slot_write_counts();
    trace_context_exit(tu.context, tu.instructions);
    slot_let_go();
}

/* The running context's save area in the stub's table (slot-stub.h);
 * NULL: not a slot stub, or no context resident. */
static const uint32_t *slot_save_area(void)
{
    uint32_t entry;

    if (slot_mode.on)
        entry = 0;
    else if (slot_control)
        entry = le32toh(slot_control[SLOT_H_RESIDENT / 4]);
    else
        return NULL;
    if (entry >= SLOT_MAX_CONTEXTS)
        return NULL;
    return (slot_mode.on ? (const uint32_t *)(slot_mode.ls
                            + (SLOT_CTL_BASE - SLOT_LS_BASE))
                         : slot_control)
           + (SLOT_H_SIZE + entry * SLOT_CTX_SIZE) / 4;
}

/* The stub passes SLOT_STUB_PARKED: the context was handed back at an
 * interrupt (its slice's timer or the ring), between blocks.  Its last
 * block's exit costs what the block it resumes at (its save area's pc)
 * makes it cost, charged now: on whatever slot it runs next, its first
 * block follows no block.  With call stacks its stack goes where its
 * controller takes it from. */
static void on_stub_parked(unsigned int vcpu_index, void *udata)
{
    const uint32_t *area = slot_save_area();
    uint64_t resume;

    slot_mode.handing_switch = __atomic_load_n(
        slot_control_word(SLOT_H_KILL), __ATOMIC_ACQUIRE) == 0;
    window_save_local_store();
    if (!tu.context)
        return;
    resume = area ? le32toh(__atomic_load_n(&area[SLOT_C_PC / 4],
                                            __ATOMIC_ACQUIRE)) : 0;
    if (tu.attached) {
        if (tu.tail)
            retire_tail();
        settle_memory();
        if (tu.reference)
            step_exit(resume);
        else
            retire_exit(resume);
        detach();
    }
    settle_count_exit(resume);
    if (tu.stacks)
        slot_save_stack();
    slot_let_go();
}

/* Whether the stub has work: an entry is runnable, or it is closed. */
static int slot_has_work(void)
{
    uint32_t count = le32toh(__atomic_load_n(slot_control_word(SLOT_H_COUNT),
                                             __ATOMIC_ACQUIRE));

    if (__atomic_load_n(slot_control_word(SLOT_H_CLOSED), __ATOMIC_ACQUIRE))
        return 1;
    for (uint32_t i = 0; i < count && i < SLOT_MAX_CONTEXTS; i++)
        if (le32toh(__atomic_load_n(slot_control_word(
                SLOT_H_SIZE + i * SLOT_CTX_SIZE + SLOT_C_STATE),
                __ATOMIC_ACQUIRE)) == SLOT_RUNNABLE)
            return 1;
    return 0;
}

/* Wakes a controller waiting (futex) for an entry's state to change: the
 * stub passes SLOT_STUB_HANDED right after it wrote the state of an entry
 * it ended or handed back, so the controller sleeps instead of polling.
 * A hand-back for a switch wakes only its waiters for SWITCH
 * (slot-stub.h), and only if one sleeps: copsim spins for it first, and
 * may have seen the state, unbound the context and changed the state
 * already, which is why whether it is a switch was decided at
 * SLOT_STUB_PARKED, before the stub wrote the state. */
static void slot_wake_controller(int switching)
{
    uint32_t count = le32toh(__atomic_load_n(slot_control_word(SLOT_H_COUNT),
                                             __ATOMIC_ACQUIRE));

    for (uint32_t i = 0; i < count && i < SLOT_MAX_CONTEXTS; i++) {
        uint32_t *state = slot_control_word(SLOT_H_SIZE + i * SLOT_CTX_SIZE
                                            + SLOT_C_STATE);

        if (switching)
            trace_handshake_wake(state,
                                 slot_control_word(SLOT_H_SWITCH_SLEEPERS),
                                 SLOT_WAKE_SWITCH);
        else
            syscall(SYS_futex, state, FUTEX_WAKE_BITSET, INT32_MAX, NULL,
                    NULL, FUTEX_BITSET_MATCH_ANY);
    }
}

/* The stub passes SLOT_STUB_HANDED: an entry it ended or handed back is
 * the controller's; the stub quiets the ring only after this, while the
 * controller unbinds the context. */
static void on_stub_handed(unsigned int vcpu_index, void *udata)
{
    slot_wake_controller(slot_mode.handing_switch);
    slot_mode.spin_for_go = slot_mode.handing_switch;
    slot_mode.handing_switch = 0;
}

/* The stub passes SLOT_STUB_IDLE: nothing is runnable.  Instead of the
 * stub's wfi, woken every slice, the vCPU sleeps here until the
 * controller rings the control block's doorbell (or has gone), counted in
 * SLOT_H_BELL_SLEEPERS so that a ring nobody sleeps for makes no system
 * call.  Right after it handed a context back for a switch, it spins
 * SLOT_SWITCH_SPIN_NS first (the controller is copying the next context
 * in); an idle slot only sleeps. */
static void on_stub_idle(unsigned int vcpu_index, void *udata)
{
    uint32_t *bell = slot_control_word(SLOT_H_DOORBELL);
    pid_t controller = (pid_t)tu.unit->header->controller_pid;
    uint64_t spin = slot_mode.spin_for_go ? SLOT_SWITCH_SPIN_NS : 0;

    slot_mode.spin_for_go = 0;
    for (;;) {
        uint32_t seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);

        if (slot_has_work()
            || (controller > 0 && kill(controller, 0) < 0 && errno == ESRCH))
            return;
        trace_handshake_wait(bell, seen,
                             slot_stats_word(SLOT_H_BELL_SLEEPERS), spin,
                             100000000u);
        spin = 0;
    }
}

/*
 * The stub passes SLOT_STUB_FLUSH: the next context's local store is
 * copied into the slot's RAM here (window_map), from outside QEMU, whose
 * self-modifying-code detection does not see it, so translations of the
 * previous context's code would run on.  qemu_plugin_reset() drops every
 * translation (tb_flush, as safe work before the vCPU's next block: the
 * stub's own next block already runs translated anew) and every callback
 * of this plugin, which on_reset registers again.  A flush and the
 * translation of the code the context runs again cost tens of
 * microseconds; copying the local store with guest stores cost a
 * millisecond.
 */
static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
static void on_qemu_exit(qemu_plugin_id_t id, void *userdata);

static void on_reset(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
}

/*
 * slot=: notes the bytes of a block translated from the local store and
 * boot block (the range copsim swaps at a switch), so that a switch can
 * tell whether the incoming context has the same code there.  Code from
 * the main-memory window or the rest of the slot's RAM (which a switch
 * may change and this does not compare) makes the next switch flush;
 * QEMU's reset code is the same for every context.
 */
static void slot_note_code(const struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vaddr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
    uint32_t size = 0, at = 0;
    uint8_t *bytes;

    for (size_t i = 0; i < n; i++)
        size += (uint32_t)qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
    if (vaddr < SLOT_LS_BASE || vaddr + size > SLOT_LS_BASE + SLOT_SWAP_SIZE) {
        if (vaddr >= SLOT_MAIN_BASE)
            slot_mode.foreign_code = 1;
        return;
    }
    bytes = g_malloc(size);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t len = qemu_plugin_insn_size(insn);

        memcpy(bytes + at, qemu_plugin_insn_data(insn), len);
        at += (uint32_t)len;
    }
    g_hash_table_insert(slot_mode.code, (gpointer)(uintptr_t)
                        (vaddr | (uint64_t)size << 32), bytes);
}

/* Whether every block noted since the last flush has the same bytes in
 * the slot's RAM now, which copsim has just rewritten. */
static int slot_code_unchanged(void)
{
    GHashTableIter it;
    gpointer key, bytes;

    if (slot_mode.foreign_code)
        return 0;
    g_hash_table_iter_init(&it, slot_mode.code);
    while (g_hash_table_iter_next(&it, &key, &bytes)) {
        uint64_t k = (uint64_t)(uintptr_t)key;
        uint32_t vaddr = (uint32_t)k, size = (uint32_t)(k >> 32);

        if (memcmp(slot_mode.ls + (vaddr - SLOT_LS_BASE), bytes, size))
            return 0;
    }
    return 1;
}

static void slot_count(uint32_t offset)
{
    __atomic_add_fetch(&slot_mode.stats[offset / 4], 1, __ATOMIC_RELAXED);
}

/*
 * The main-memory window (window=FILE).  copsim's slots see main memory
 * through one window each: QEMU maps the window's file (window=, a memfd
 * of copsim's opened as /proc/PID/fd/N; memory-backend-file with share=on
 * is mmap(MAP_SHARED) of the whole file, SLOT_MAIN_AREA bytes) as the
 * ivshmem BAR at SLOT_MAIN_BASE, and every context's image and data
 * windows are a file of copsim's of that size.  At SLOT_STUB_FLUSH, before
 * the incoming context runs, the plugin maps that context's file (the
 * control block's SLOT_H_WINDOW: copsim's descriptor + 1, opened as
 * /proc/CONTROLLER/fd/N) over QEMU's mapping of the window with MAP_FIXED.
 * The host addresses stay, so QEMU's RAMBlock, its softmmu TLB (a host
 * address per guest page) and its translated blocks (keyed by guest
 * physical address) stay valid as pointers; only the bytes are the new
 * context's.  A block translated from the window since the last flush
 * makes the switch flush (slot_mode.foreign_code), as any code outside the
 * local store does.  QEMU's address of the window is looked up once in
 * /proc/self/maps: the mapping of the window file's device and inode, at
 * offset 0, SLOT_MAIN_AREA bytes long.  The plugin cannot ask QEMU for it.
 */
#define WINDOW_FILES 8              /* contexts' files kept open */

struct window_file {
    uint64_t id;                    /* its inode; 0: none */
    int fd;
    uint64_t used;                  /* when it was bound last */
    uint8_t *ls;                    /* its local store and boot block
                                       (SLOT_MAIN_LS), mapped here */
};

static struct {
    const char *path;               /* window=, or NULL: left as it is */
    uint8_t *host;                  /* QEMU's mapping of the window */
    uint8_t *ram_host;              /* QEMU's mapping of the slot's RAM */
    uint64_t mapped;                /* the inode of the file mapped there */
    struct window_file *resident;   /* whose local store is in the RAM */
    uint64_t uses;
    struct window_file files[WINDOW_FILES];
} window;

/* QEMU's mapping of `size` bytes of the file at path from offset 0 (the
 * plugin's own mappings of it are smaller), from /proc/self/maps. */
static uint8_t *qemu_mapping(const char *what, const char *path,
                             unsigned long size, struct stat *st)
{
    char line[4096];
    uint8_t *host = NULL;
    FILE *maps;

    if (stat(path, st) < 0)
        stop_emulator("%s=%s: %s", what, path, strerror(errno));
    maps = fopen("/proc/self/maps", "r");
    if (!maps)
        stop_emulator("/proc/self/maps: %s", strerror(errno));
    while (!host && fgets(line, sizeof(line), maps)) {
        unsigned long start, end, inode;
        unsigned long long offset;
        unsigned int major, minor;

        if (sscanf(line, "%lx-%lx %*s %llx %x:%x %lu", &start, &end, &offset,
                   &major, &minor, &inode) == 6
            && inode == st->st_ino && makedev(major, minor) == st->st_dev
            && offset == 0 && end - start == size)
            host = (uint8_t *)start;
    }
    fclose(maps);
    if (!host)
        stop_emulator("%s=%s: QEMU has no mapping of it (%lu bytes at "
                      "offset 0) in /proc/self/maps", what, path, size);
    return host;
}

/*
 * Finds QEMU's mappings of the window and of the slot's RAM, where each
 * bind maps the bound context's file and copies its local store
 * (window_map).  From then on the plugin reads the local store and boot
 * block through QEMU's mapping of the RAM (slot_mode.ls, the channel
 * block, a mailbox there).
 */
static void window_locate(void)
{
    struct stat st;

    window.host = qemu_mapping("window", window.path, SLOT_MAIN_AREA, &st);
    window.mapped = st.st_ino;
    window.ram_host = qemu_mapping("ram", tu.ram_path, SLOT_RAM_SIZE, &st);
    munmap((void *)slot_mode.ls, SLOT_CTL_BASE - SLOT_LS_BASE + SLOT_CTL_SIZE);
    slot_mode.ls = window.ram_host;
    if (tu.boot)
        munmap((void *)tu.boot, COP_BOOT_SIZE);
    tu.boot = (volatile struct cop_boot_block *)(void *)
              (window.ram_host + (COP_BOOT_BASE - SLOT_LS_BASE));
    tu.mfc = (volatile struct cop_mfc *)(void *)
             ((uint8_t *)window.ram_host + (COP_MFC_BASE - SLOT_LS_BASE));
    if (tu.mbox && !tu.mbox_qemus) {
        munmap((void *)tu.mbox, COP_MBOX_SIZE);
        tu.mbox = NULL;
    }
}

/* QEMU's mapping of the window, where the bound context's main memory
 * is; NULL without window=. */
static uint8_t *window_host(void)
{
    if (!window.path)
        return NULL;
    if (!window.host)
        window_locate();
    return window.host;
}

/* QEMU's mapping of the slot's RAM, where the bound context's local store
 * and boot block are; NULL without window=. */
static uint8_t *slot_ram_host(void)
{
    return window_host() ? window.ram_host : NULL;
}

/*
 * At a hand-back or an end, before the stub writes the entry's state (so
 * before copsim sees it): the context's local store and boot block go
 * back from the slot's RAM to its file, where copsim finds them while it
 * is not bound.  The vCPU copies what it has just run with, from its own
 * cache.
 */
static void window_save_local_store(void)
{
    if (!window.resident)
        return;
    memcpy(window.resident->ls, window.ram_host, SLOT_SWAP_SIZE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    window.resident = NULL;
}

/*
 * The bound context's main-memory file, whose inode copsim wrote beside
 * its descriptor (SLOT_H_WINDOW_ID): one of the files kept open (with its
 * local store mapped) since an earlier bind, or opened now as
 * /proc/CONTROLLER/fd/N in place of the one used longest ago.  Opening
 * through /proc costs as much as the mapping itself, and time-sliced
 * contexts come back again and again; a destroyed context's pages go once
 * its file has left this list too (WINDOW_FILES per slot at most).  A
 * file kept open keeps its inode, so no other file can have it meanwhile.
 */
static struct window_file *window_file(uint32_t word, uint64_t id)
{
    struct window_file *f, *victim = &window.files[0];
    char path[64];
    struct stat st;
    void *ls;
    int fd;

    for (f = window.files; f < window.files + WINDOW_FILES; f++) {
        if (f->id == id)
            return f;
        if (f->used < victim->used)
            victim = f;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%u",
             (int)tu.unit->header->controller_pid, word - 1);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0)
        stop_emulator("%s: the bound context's main memory: %s", path,
                      strerror(errno));
    if ((uint64_t)st.st_ino != id
        || st.st_size < SLOT_MAIN_LS + SLOT_SWAP_SIZE)
        stop_emulator("%s: not the bound context's main memory (inode "
                      "%llu, %lld bytes; inode %llu expected)", path,
                      (unsigned long long)st.st_ino, (long long)st.st_size,
                      (unsigned long long)id);
    ls = mmap(NULL, SLOT_SWAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
              SLOT_MAIN_LS);
    if (ls == MAP_FAILED)
        stop_emulator("%s: cannot map the bound context's local store: %s",
                      path, strerror(errno));
    if (victim == window.resident)
        window_save_local_store();
    if (victim->id) {
        munmap(victim->ls, SLOT_SWAP_SIZE);
        close(victim->fd);
    }
    victim->id = id;
    victim->fd = fd;
    victim->ls = ls;
    slot_count(SLOT_H_OPENED);
    return victim;
}

/*
 * Puts the bound context on the slot: its main-memory file mapped over
 * the window (unless it is there already), its local store and boot block
 * copied from its file into the slot's RAM.  The copy of 260 KiB in
 * measured 11-14 microseconds (7 out, at the hand-back); mapping the file
 * over the RAM instead cost 33, most of it the old mapping's teardown (a
 * TLB shootdown), and then a page fault on every page the context touched
 * again.
 */
static void window_map(void)
{
    uint32_t word = le32toh(__atomic_load_n(slot_control_word(SLOT_H_WINDOW),
                                            __ATOMIC_ACQUIRE));
    uint64_t id = __atomic_load_n((const uint64_t *)(const void *)
                                  slot_control_word(SLOT_H_WINDOW_ID),
                                  __ATOMIC_ACQUIRE);
    struct window_file *f;

    if (!window.path || !word)
        return;
    if (!window.host)
        window_locate();
    f = window_file(word, id);
    f->used = ++window.uses;
    if (id != window.mapped) {
        if (mmap(window.host, SLOT_MAIN_AREA, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_FIXED, f->fd, 0) == MAP_FAILED)
            stop_emulator("window: cannot map the bound context's main "
                          "memory (inode %llu) over it: %s",
                          (unsigned long long)id, strerror(errno));
        window.mapped = id;
        slot_count(SLOT_H_WINDOWS);
    }
    memcpy(window.ram_host, f->ls, SLOT_SWAP_SIZE);
    window.resident = f;
}

/*
 * A switch drops the translations only when the incoming context's code
 * differs from what QEMU translated (a block is keyed by its physical
 * address, which every context's local store shares): contexts of one
 * image, time-sliced, keep their translated code from switch to switch.
 * With countsdir= a block's counters are one context's, so every switch
 * flushes.
 */
static void on_stub_flush(unsigned int vcpu_index, void *udata)
{
    slot_mode.spin_for_go = 0;      /* the next context came without idling */
    window_map();
    if (!slot_mode.counts_dir && slot_code_unchanged()) {
        slot_count(SLOT_H_KEPT);
        return;
    }
    g_hash_table_remove_all(slot_mode.code);
    slot_mode.foreign_code = 0;
    slot_count(SLOT_H_FLUSHES);
    tu.watch_clock = -1;
    qemu_plugin_reset(tu.plugin_id, on_reset);
}

static void slot_watch_stub(struct qemu_plugin_tb *tb)
{
    uint64_t vaddr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));

    if (!slot_mode.on)
        return;
    if (vaddr == SLOT_STUB_ENDED)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_stub_ended,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
    else if (vaddr == SLOT_STUB_PARKED)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_stub_parked,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
    else if (vaddr == SLOT_STUB_IDLE)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_stub_idle,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
    else if (vaddr == SLOT_STUB_FLUSH)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_stub_flush,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
    else if (vaddr == SLOT_STUB_HANDED)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_stub_handed,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
}

static void on_qemu_exit(qemu_plugin_id_t id, void *userdata)
{
    if (tu.finished)
        return;
    tu.finished = 1;
    if (tu.attached) {
        if (!tu.reference)
            retire_last_block();
        settle_memory();
        tu.instructions += tu.retired;
        tu.retired = 0;
    }
    if (tu.counts_out)
        write_counts();     /* before a controller learns we are done */
    if (tu.context)
        trace_context_exit(tu.context, tu.instructions);
}

/* ---- Translation -------------------------------------------------------- */

/* Whether the instruction writes memory: the only way a guest reaches the
 * device that ends QEMU in the middle of a block.  Known by its mnemonic,
 * which follows the encoding in QEMU's disassembly. */
static int insn_writes_memory(const struct qemu_plugin_insn *insn)
{
    static const char *const stores[] = {
        "sb", "sh", "sw", "sd", "c.sw", "c.sd", "c.swsp", "c.sdsp",
        "fsh", "fsw", "fsd", "fsq", "c.fsw", "c.fsd", "c.fswsp", "c.fsdsp",
    };
    char *text = qemu_plugin_insn_disas(insn);
    char *mnemonic, *save = NULL;
    int writes = 0;

    if (!text)
        return 0;
    mnemonic = strtok_r(text, " \t", &save);
    if (mnemonic && strspn(mnemonic, "0123456789abcdef") == strlen(mnemonic))
        mnemonic = strtok_r(NULL, " \t", &save);
    if (mnemonic) {
        writes = !strncmp(mnemonic, "amo", 3) || !strncmp(mnemonic, "sc.", 3);
        for (size_t i = 0; !writes && i < G_N_ELEMENTS(stores); i++)
            writes = !strcmp(mnemonic, stores[i]);
    }
    free(text);
    return writes;
}

static guint block_hash(gconstpointer key)
{
    const struct block *b = key;
    guint hash = b->n_insns * 31u + b->n_if_stopped;

    for (uint32_t i = 0; i < b->n_insns; i++)
        hash = (hash * 1000003u ^ (guint)(b->vaddr[i] ^ (b->vaddr[i] >> 32)))
               * 31u + b->words[i];
    return hash;
}

/* The same addresses with the same bytes: two overlays' code at one
 * address has two costs. */
static gboolean block_equal(gconstpointer a, gconstpointer b)
{
    const struct block *x = a, *y = b;

    return x->n_insns == y->n_insns && x->n_if_stopped == y->n_if_stopped
           && !memcmp(x->vaddr, y->vaddr, x->n_insns * sizeof(x->vaddr[0]))
           && !memcmp(x->words, y->words, x->n_insns * sizeof(x->words[0]));
}

/* The instruction's word; 0 (no registers, the system class) for one
 * that is not 4 bytes. */
static uint32_t insn_word(const struct qemu_plugin_insn *insn)
{
    uint32_t word = 0;

    if (qemu_plugin_insn_size(insn) != 4)
        return 0;
    memcpy(&word, qemu_plugin_insn_data(insn), 4);
    return le32toh(word);
}

/* The timing model's static costs of block b (words filled in). */
static void cost_block(struct block *b)
{
    uint32_t *issue = g_new(uint32_t, b->n_insns), cycles = 0;
    struct timing_exit exit;

    timing_schedule(&tu.model, b->words, b->n_insns, b->stall, issue);
    for (uint32_t i = 0; i < b->n_insns; i++) {
        cycles += b->stall[i] + issue[i];
        b->cycles_end[i] = cycles;
    }
    g_free(issue);
    timing_exit(&tu.model, b->n_insns ? b->words[b->n_insns - 1] : 0,
                b->n_insns ? b->vaddr[b->n_insns - 1] : 0, &exit);
    b->ticks[TRACE_EVENT_CYCLES] = cycles;
    b->ticks[TRACE_EVENT_INSTRUCTIONS] = b->n_insns;
    b->fallthrough = exit.fallthrough;
    b->exit_cost[TRACE_EVENT_CYCLES][0] = exit.taken;
    b->exit_cost[TRACE_EVENT_CYCLES][1] = exit.not_taken;
    b->exit_cost[TRACE_EVENT_INSTRUCTIONS][0] = 0;
    b->exit_cost[TRACE_EVENT_INSTRUCTIONS][1] = 0;
}

/* The block's description, shared by every translation of the same code
 * (retranslations, e.g. of overlays, would otherwise grow memory). */
static const struct block *intern_block(const struct qemu_plugin_tb *tb)
{
    uint32_t n = (uint32_t)qemu_plugin_tb_n_insns(tb);
    struct block *b = g_new0(struct block, 1);
    struct block *known;

    b->n_insns = n;
    b->n_if_stopped = n;
    b->vaddr = g_new(uint64_t, n);
    b->words = g_new(uint32_t, n);
    for (uint32_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

        b->vaddr[i] = qemu_plugin_insn_vaddr(insn);
        b->words[i] = qemu_plugin_insn_size(insn) != 4 ? 0
                      : insn_word(insn);
        if (insn_writes_memory(insn))
            b->n_if_stopped = i + 1;
    }
    b->start = n ? b->vaddr[0] : 0;
    known = g_hash_table_lookup(tu.blocks, b);
    if (known) {
        g_free(b->vaddr);
        g_free(b->words);
        g_free(b);
        return known;
    }
    b->stall = g_new(uint32_t, n);
    b->cycles_end = g_new(uint32_t, n);
    b->refs = g_new(struct insn_ref, n);
    for (uint32_t i = 0; i < n; i++)
        b->refs[i] = (struct insn_ref){ b, i };
    cost_block(b);
    g_hash_table_add(tu.blocks, b);
    return b;
}

static guint code_hash(gconstpointer key)
{
    const struct code *c = key;

    return c->hash ^ (guint)c->vaddr ^ c->n_insns ^ c->context * 16777619u;
}

static gboolean code_equal(gconstpointer a, gconstpointer b)
{
    const struct code *x = a, *y = b;

    return x->context == y->context
           && x->vaddr == y->vaddr && x->n_insns == y->n_insns
           && x->n_bytes == y->n_bytes
           && !memcmp(x->bytes, y->bytes, x->n_bytes)
           && !memcmp(x->insn_size, y->insn_size,
                      x->n_insns * sizeof(x->insn_size[0]));
}

/* A copy of code c's description, without counters. */
static struct code *describe_copy(const struct code *c)
{
    struct code *copy = g_malloc0(sizeof(*copy) + c->n_bytes);

    memcpy(copy, c, sizeof(*copy) + c->n_bytes);
    copy->insn_vaddr = g_memdup2(c->insn_vaddr,
                                 c->n_insns * sizeof(c->insn_vaddr[0]));
    copy->insn_size = g_memdup2(c->insn_size,
                                c->n_insns * sizeof(c->insn_size[0]));
    copy->stall = g_memdup2(c->stall, c->n_insns * sizeof(c->stall[0]));
    copy->issue = g_memdup2(c->issue, c->n_insns * sizeof(c->issue[0]));
    copy->counts = NULL;
    copy->memory = NULL;
    return copy;
}

static void free_code(struct code *c)
{
    g_free(c->insn_vaddr);
    g_free(c->insn_size);
    g_free(c->stall);
    g_free(c->issue);
    g_free(c->counts);
    g_free(c->memory);
    g_free(c);
}

/* counts=: the timing model's static costs of code c and its exit. */
static void cost_code(struct code *c)
{
    uint32_t *words = g_new0(uint32_t, c->n_insns);

    for (uint32_t i = 0, at = 0; i < c->n_insns; at += c->insn_size[i++])
        if (c->insn_size[i] == 4)
            words[i] = le32toh(*(const uint32_t *)(c->bytes + at));
    c->stall = g_new(uint32_t, c->n_insns);
    c->issue = g_new(uint32_t, c->n_insns);
    timing_schedule(&tu.model, words, c->n_insns, c->stall, c->issue);
    timing_exit(&tu.model, c->n_insns ? words[c->n_insns - 1] : 0,
                c->n_insns ? c->insn_vaddr[c->n_insns - 1] : 0, &c->exit);
    g_free(words);
}

/* The counters of the block's code: the same for every translation of the
 * same bytes at the same address by the same context, apart for other
 * bytes there or another context of a slot stub. */
static struct code *describe_code(const struct qemu_plugin_tb *tb);
static struct code *intern_described(struct code *c);

static struct code *intern_code(const struct qemu_plugin_tb *tb)
{
    return intern_described(describe_code(tb));
}

/* The block's code, not interned, its context the one running now. */
static struct code *describe_code(const struct qemu_plugin_tb *tb)
{
    uint32_t n = (uint32_t)qemu_plugin_tb_n_insns(tb), size = 0;
    struct code *c;

    for (uint32_t i = 0; i < n; i++)
        size += (uint32_t)qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
    c = g_malloc0(sizeof(*c) + size);
    c->n_insns = n;
    c->n_bytes = size;
    c->hash = 2166136261u;
    c->insn_vaddr = g_new0(uint64_t, n);
    c->insn_size = g_new0(uint32_t, n);
    for (uint32_t i = 0, at = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint8_t *data = qemu_plugin_insn_data(insn);

        c->insn_vaddr[i] = qemu_plugin_insn_vaddr(insn);
        c->insn_size[i] = (uint32_t)qemu_plugin_insn_size(insn);
        memcpy(c->bytes + at, data, c->insn_size[i]);
        at += c->insn_size[i];
    }
    c->vaddr = n ? c->insn_vaddr[0] : 0;
    c->context = slot_context_now();
    cost_code(c);
    for (uint32_t k = 0; k < size; k++)
        c->hash = (c->hash ^ c->bytes[k]) * 16777619u;
    return c;
}

/* The interned code equal to c (which is freed then), or c itself, with
 * counters, added. */
static struct code *intern_described(struct code *c)
{
    struct code *known = g_hash_table_lookup(tu.codes, c);

    if (known) {
        free_code(c);
        return known;
    }
    c->counts = g_new0(uint64_t, c->n_insns);
    c->memory = g_new0(uint64_t, c->n_insns);
    g_hash_table_add(tu.codes, c);
    return c;
}

/*
 * slot=: code outside the local store (QEMU's reset code, which every
 * context runs first) keeps its translation from one context to the next
 * (the stub's copy only drops the local store's), so its counters are
 * found when it runs, for the context running then: `shape` describes the
 * code, insn its instruction.
 */
struct shared_insn {
    struct code *shape;
    uint32_t insn;
};

static void on_count_shared(unsigned int vcpu_index, void *udata)
{
    const struct shared_insn *si = udata;
    struct code *c;

    if (!si->insn)
        settle_count_exit(si->shape->vaddr);
    si->shape->context = slot_context_now();
    c = g_hash_table_lookup(tu.codes, si->shape);
    if (!c) {
        c = describe_copy(si->shape);
        c->counts = g_new0(uint64_t, c->n_insns);
        c->memory = g_new0(uint64_t, c->n_insns);
        g_hash_table_add(tu.codes, c);
    }
    c->counts[si->insn]++;
    if (si->insn + 1 == c->n_insns && (c->exit.taken || c->exit.not_taken))
        tu.count_exit = c;
}

static void count_shared_block(struct qemu_plugin_tb *tb)
{
    struct code *shape = describe_code(tb);

    for (uint32_t i = 0; i < shape->n_insns; i++) {
        struct shared_insn *si = g_new(struct shared_insn, 1);

        si->shape = shape;          /* kept while QEMU may run the block */
        si->insn = i;
        qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, i),
                                               on_count_shared,
                                               QEMU_PLUGIN_CB_NO_REGS, si);
    }
}

/* Registers the block's counters; returns its code (NULL: shared). */
static struct code *count_block(struct qemu_plugin_tb *tb)
{
    struct code *c;

    if (slot_mode.on && (qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0))
                         - tu.ls_base) >= tu.ls_size) {
        count_shared_block(tb);
        return NULL;
    }
    c = intern_code(tb);

    for (uint32_t i = 0; i < c->n_insns; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

        if (!i)
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn, on_count_first, QEMU_PLUGIN_CB_NO_REGS,
                (void *)(uintptr_t)c->vaddr);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_count,
                                               QEMU_PLUGIN_CB_NO_REGS,
                                               &c->counts[i]);
        if (i + 1 == c->n_insns && (c->exit.taken || c->exit.not_taken))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_count_exit,
                                                   QEMU_PLUGIN_CB_NO_REGS, c);
    }
    return c;
}

/* Call stacks: a callback on each call and return instruction, which QEMU
 * runs after the callbacks registered before it on that instruction. */
static void watch_calls(struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        enum shadow_op op = shadow_classify(qemu_plugin_insn_data(insn), size);
        uint64_t tag;

        if (op == SHADOW_NONE)
            continue;
        tag = (uint32_t)(qemu_plugin_insn_vaddr(insn) + size)
              | (uint64_t)op << 32;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_stack_insn,
                                               QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)tag);
    }
}

/* ---- The slot stub ------------------------------------------------------ */

/*
 * Whether the block is the resident slot stub's (emulator/copsim/stub/):
 * the code that switches a slot's contexts belongs to none of them, so it
 * is neither counted (not in the slot's cycles, not in counts=) nor
 * captured.  Nothing else runs there (the ABI keeps the range reserved), so
 * runs without a stub are unchanged.
 */
static int is_stub_block(const struct qemu_plugin_tb *tb)
{
    uint64_t vaddr;

    if (!qemu_plugin_tb_n_insns(tb))
        return 0;
    vaddr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
    return vaddr >= SLOT_STUB_BASE && vaddr < SLOT_STUB_BASE + SLOT_STUB_SIZE;
}

/* A block ending in a DMA or mailbox marker: its callback after the
 * block's own, then the counter of its wait. */
static void watch_marker(struct qemu_plugin_tb *tb, const struct block *b,
                         struct code *c, qemu_plugin_vcpu_udata_cb_t serve,
                         qemu_plugin_vcpu_udata_cb_t count)
{
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb,
                                                            b->n_insns - 1);

    qemu_plugin_register_vcpu_insn_exec_cb(insn, serve,
                                           QEMU_PLUGIN_CB_NO_REGS, (void *)b);
    if (c)
        qemu_plugin_register_vcpu_insn_exec_cb(insn, count,
                                               QEMU_PLUGIN_CB_NO_REGS, c);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    const struct block *b;
    struct code *c = NULL;

    if (is_stub_block(tb)) {
        slot_watch_stub(tb);
        return;
    }
    if (slot_mode.on && n)
        slot_note_code(tb);     /* the engine's too: a switch compares it */
    if (is_engine_block(tb))
        return;
    if (tu.codes)
        c = count_block(tb);

    b = intern_block(tb);
    if (!tu.reference) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tu.stacks ? on_block_stacked
                                                           : on_block,
                                             QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)b);
    } else {
        for (size_t i = 0; i < n; i++)
            qemu_plugin_register_vcpu_insn_exec_cb(
                qemu_plugin_tb_get_insn(tb, i),
                tu.stacks ? on_insn_stacked : on_insn,
                QEMU_PLUGIN_CB_NO_REGS, (void *)&b->refs[i]);
    }
    if (is_dma_marker_block(b))
        watch_marker(tb, b, c, on_dma_marker, on_count_dma);
    if (is_mbox_marker_block(b))
        watch_marker(tb, b, c, on_mbox_marker, on_count_mbox);
    if (tu.stacks)      /* after on_insn_stacked, which settles first */
        watch_calls(tb);
    watch_memory(tb, b, c);
}

/* ---- Installation ------------------------------------------------------- */

struct options {
    const char *regs;
    const char *counts;
    const char *counts_dir;
    const char *ram;
    const char *window;
    const char *timing;
    uint32_t context;
    int have_context;
    uint32_t slot;
    int have_slot;
    int reference;
};

/* NAME=N, N below TRACE_NONE. */
static int parse_id(const char *arg, const char *what, uint32_t *id)
{
    char *end;
    unsigned long n = strtoul(arg, &end, 10);

    if (!*arg || *end || n >= TRACE_NONE) {
        fprintf(stderr, "coptrace: bad %s '%s'\n", what, arg);
        return -1;
    }
    *id = (uint32_t)n;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof(*opt));
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];

        if (!strncmp(arg, "regs=", 5) && arg[5]) {
            opt->regs = arg + 5;
        } else if (!strncmp(arg, "context=", 8)) {
            if (parse_id(arg + 8, "context id", &opt->context) < 0)
                return -1;
            opt->have_context = 1;
        } else if (!strncmp(arg, "slot=", 5)) {
            if (parse_id(arg + 5, "slot", &opt->slot) < 0)
                return -1;
            opt->have_slot = 1;
        } else if (!strncmp(arg, "countsdir=", 10) && arg[10]) {
            opt->counts_dir = arg + 10;
        } else if (!strncmp(arg, "counts=", 7) && arg[7]) {
            opt->counts = arg + 7;
        } else if (!strncmp(arg, "ram=", 4) && arg[4]) {
            opt->ram = arg + 4;
        } else if (!strncmp(arg, "window=", 7) && arg[7]) {
            opt->window = arg + 7;
        } else if (!strncmp(arg, "timing=", 7) && arg[7]) {
            opt->timing = arg + 7;
        } else if (!strcmp(arg, "mode=fast")) {
            opt->reference = 0;
        } else if (!strcmp(arg, "mode=reference")) {
            opt->reference = 1;
        } else {
            fprintf(stderr, "coptrace: unknown option '%s' (expected "
                    "regs=FILE, context=N, mode=fast|reference, "
                    "counts=FILE, ram=FILE, slot=N, countsdir=DIR, "
                    "window=FILE, timing=FILE)\n", arg);
            return -1;
        }
    }
    if (!opt->regs || opt->have_context == opt->have_slot) {
        fprintf(stderr, "coptrace: usage: -plugin libcoptrace.so,regs=FILE,"
                "context=N[,mode=fast|reference][,counts=FILE][,ram=FILE]"
                " or regs=FILE,slot=N,ram=FILE[,mode=...][,countsdir=DIR]"
                "[,window=FILE]\n");
        return -1;
    }
    if (opt->window && !opt->have_slot) {
        fprintf(stderr, "coptrace: window=%s needs slot=N\n", opt->window);
        return -1;
    }
    if (opt->have_slot && (!opt->ram || opt->counts)) {
        fprintf(stderr, "coptrace: slot=%u needs ram=FILE (the slot's RAM) "
                "and takes countsdir=DIR, not counts=FILE\n", opt->slot);
        return -1;
    }
    return 0;
}

/* counts=: the file is opened now (appended to, so that several runs of a
 * context can share it), so that a bad path stops QEMU before it runs. */
static int counts_need_api(const qemu_info_t *info, const char *option,
                           const char *path)
{
    if (info->version.cur < 3)
        return 0;
    fprintf(stderr, "coptrace: %s=%s needs QEMU's plugin API 1 or 2 (QEMU "
            "9.0 or older); this QEMU has %d\n", option, path,
            info->version.cur);
    return -1;
}

/*
 * A counts file to append to, created 0600 if missing (never 0644: the
 * samples' private rule).  The name is one the controller handed over:
 * /proc/PID/fd/N of a file it made (followed: that is its point), or a
 * name inside a directory it made 0700 (nofollow: nothing is planted
 * there, and a link would not be followed anyway).
 */
static FILE *open_counts_file(const char *path, int nofollow)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC
                        | (nofollow ? O_NOFOLLOW : 0), 0600);
    FILE *out;

    if (fd < 0)
        return NULL;
    out = fdopen(fd, "a");
    if (!out)
        close(fd);
    return out;
}

static int open_counts(const qemu_info_t *info, const char *path)
{
    if (counts_need_api(info, "counts", path) < 0)
        return -1;
    tu.counts_out = open_counts_file(path, 0);
    if (!tu.counts_out) {
        fprintf(stderr, "coptrace: %s: cannot write: %s\n", path,
                strerror(errno));
        return -1;
    }
    tu.counts_path = path;
    tu.codes = g_hash_table_new(code_hash, code_equal);
    return 0;
}

/* Maps the first `bytes` bytes of the RAM file read-only. */
static const void *map_ram(const char *path, size_t bytes)
{
    struct stat st;
    void *base;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        fprintf(stderr, "coptrace: %s: cannot open: %s\n", path,
                strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < bytes) {
        fprintf(stderr, "coptrace: %s: not a guest RAM file holding the "
                "guard words (%zu bytes needed)\n", path, bytes);
        close(fd);
        return NULL;
    }
    base = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        fprintf(stderr, "coptrace: %s: cannot map: %s\n", path,
                strerror(errno));
        return NULL;
    }
    return base;
}

/* ram=: sets up the context's overlay watch, if it has one, and copies
 * the guard words as they are at the start. */
static int watch_guards(uint32_t context, const char *ram)
{
    uint32_t offset, count;
    const uint8_t *base;
    char err[512];

    if (trace_context_guards(tu.unit, context, &offset, &count, err,
                             sizeof(err)) < 0) {
        fprintf(stderr, "coptrace: %s\n", err);
        return -1;
    }
    if (!count)
        return 0;
    if (!ram) {
        fprintf(stderr, "coptrace: %s: context %u watches %u guard words; "
                "give the guest RAM file with ram=FILE\n", tu.unit->path,
                context, count);
        return -1;
    }
    base = map_ram(ram, (size_t)offset + 4u * count);
    if (!base)
        return -1;
    tu.ram = base;
    tu.guards = (const uint32_t *)(base + offset);
    tu.guard_count = count;
    for (uint32_t r = 0; r < count; r++)
        tu.guard_seen[r] = le32toh(__atomic_load_n(&tu.guards[r],
                                                   __ATOMIC_RELAXED));
    return 0;
}

/* Call stacks decode instructions with qemu_plugin_insn_data, whose
 * signature changed in API 3. */
static int stacks_supported(const qemu_info_t *info)
{
    if (!tu.unit->header->stack_depth || info->version.cur < 3)
        return 1;
    fprintf(stderr, "coptrace: %s: call stacks need QEMU's plugin API 1 or 2 "
            "(QEMU 9.0 or older); this QEMU has %d\n", tu.unit->path,
            info->version.cur);
    return 0;
}

/* The register file has a call-stack area: keep the context's shadow
 * stack, with overlay identity when the guard words are watched. */
static void keep_stacks(void)
{
    shadow_init(&tu.shadow, tu.ram, tu.ls_base, tu.ls_size, tu.guards,
                tu.guard_count);
    tu.stacks = 1;
}

/* context=N: the overlay watch, a slot stub's control block, and the
 * context itself, attached for the whole run. */
static int attach_context(uint32_t context, const char *ram)
{
    char err[512];

    if (watch_guards(context, ram) < 0)
        return -1;
    slot_map_control(ram);
    tu.context = trace_context_attach(tu.unit, context,
                                      tu.reference ? TRACE_MODE_REFERENCE
                                                   : TRACE_MODE_FAST,
                                      err, sizeof(err));
    if (!tu.context) {
        fprintf(stderr, "coptrace: %s\n", err);
        return -1;
    }
    tu.check_cycle = &tu.context->check_cycle;
    tu.context_id = context;
    return 0;
}

/* slot=S: the header of the stub's control block, mapped writable for
 * the plugin's counters (slot-stub.h). */
static uint32_t *map_stats(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    void *base = MAP_FAILED;

    if (fd >= 0) {
        base = mmap(NULL, SLOT_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                    fd, SLOT_CTL_BASE - SLOT_LS_BASE);
        close(fd);
    }
    if (base == MAP_FAILED) {
        fprintf(stderr, "coptrace: %s: cannot map the slot's control block: "
                "%s\n", path, strerror(errno));
        return NULL;
    }
    return base;
}

/* Call stacks with slot=S: where contexts' stacks are handed over, the
 * one part of the slot's RAM the plugin writes (slot-stub.h). */
static uint8_t *map_stack_save(const char *ram)
{
    struct stat st;
    void *base;
    int fd = open(ram, O_RDWR | O_CLOEXEC);

    if (fd < 0) {
        fprintf(stderr, "coptrace: %s: cannot open for the call stacks: "
                "%s\n", ram, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size
                              < SLOT_STACK_SAVE - SLOT_LS_BASE
                                + SLOT_STACK_SAVE_SIZE) {
        fprintf(stderr, "coptrace: %s: not a slot's RAM file (%u bytes "
                "needed for the call stacks)\n", ram, SLOT_RAM_SIZE);
        close(fd);
        return NULL;
    }
    base = mmap(NULL, SLOT_STACK_SAVE_SIZE, PROT_READ | PROT_WRITE,
                MAP_SHARED, fd, SLOT_STACK_SAVE - SLOT_LS_BASE);
    close(fd);
    if (base == MAP_FAILED) {
        fprintf(stderr, "coptrace: %s: cannot map the call stacks' area: "
                "%s\n", ram, strerror(errno));
        return NULL;
    }
    return base;
}

/* slot=S: no context yet; the slot's local store mapped for the contexts'
 * overlay watches. */
static int slot_start(uint32_t slot, const char *ram)
{
    if (!trace_unit_slot(tu.unit, slot)) {
        fprintf(stderr, "coptrace: %s: slot %u is out of range (%u slots)\n",
                tu.unit->path, slot, tu.unit->header->n_slots);
        return -1;
    }
    slot_mode.ls = map_ram(ram, SLOT_CTL_BASE - SLOT_LS_BASE + SLOT_CTL_SIZE);
    if (!slot_mode.ls || !(slot_mode.stats = map_stats(ram)))
        return -1;
    if (tu.unit->header->stack_depth
        && !(slot_mode.stack_save = map_stack_save(ram)))
        return -1;
    slot_mode.code = g_hash_table_new_full(g_direct_hash, g_direct_equal,
                                           NULL, g_free);
    slot_mode.on = 1;
    slot_mode.index = slot;
    slot_let_go();
    soft_ring_find();
    return 0;
}

/* countsdir=DIR: counters per context, a file per context at its end. */
static int slot_open_counts(const qemu_info_t *info, const char *dir)
{
    if (counts_need_api(info, "countsdir", dir) < 0)
        return -1;
    slot_mode.counts_dir = dir;
    tu.codes = g_hash_table_new(code_hash, code_equal);
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info,
                                           int argc, char **argv)
{
    struct options opt;
    char err[512];

    if (parse_options(argc, argv, &opt) < 0)
        return -1;
    if (!opt.timing)
        timing_model_default(&tu.model);
    else if (timing_model_load(&tu.model, opt.timing, err, sizeof(err)) < 0) {
        fprintf(stderr, "coptrace: timing=%s: %s\n", opt.timing, err);
        return -1;
    }
    if (info->system_emulation && info->system.smp_vcpus != 1) {
        fprintf(stderr, "coptrace: one context runs on one vCPU; this "
                "machine has %d\n", info->system.smp_vcpus);
        return -1;
    }
    if (opt.counts && open_counts(info, opt.counts) < 0)
        return -1;
    if (opt.counts_dir && slot_open_counts(info, opt.counts_dir) < 0)
        return -1;
    tu.unit = trace_unit_open(opt.regs, err, sizeof(err));
    if (!tu.unit) {
        fprintf(stderr, "coptrace: %s\n", err);
        return -1;
    }
    if (!stacks_supported(info)) {
        trace_unit_close(tu.unit, 0);
        return -1;
    }
    tu.reference = opt.reference;
    tu.plugin_id = id;
    if (opt.have_slot) {
        window.path = opt.window;
        if (slot_start(opt.slot, opt.ram) < 0) {
            trace_unit_close(tu.unit, 0);
            return -1;
        }
    } else if (attach_context(opt.context, opt.ram) < 0) {
        trace_unit_close(tu.unit, 0);
        return -1;
    }
    tu.ram_path = opt.ram;
    if (opt.ram && map_channel(opt.ram) < 0) {
        trace_unit_close(tu.unit, 0);
        return -1;
    }
    tu.fifo_depth = tu.unit->header->fifo_depth;
    tu.ls_base = tu.unit->header->ls_base;
    tu.ls_size = tu.unit->header->ls_size;
    tu.blocks = g_hash_table_new(block_hash, block_equal);
    tu.memory_pending = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    if (tu.unit->header->stack_depth)
        keep_stacks();
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
