/*
 * trace-unit.h — host-side access to the trace unit's register file
 * (abi/trace-regs.h, specified in docs/trace-unit.md).
 *
 * One library for every party: the QEMU plugin opens and validates the file
 * and waits at its run gate; copsim creates it, binds contexts to slots and
 * holds and releases them; the driver programs and drains slots; cop-run and
 * coptrace use the simple consumer at the end.  Functions that can fail
 * return -1 (or NULL) and write a one-line reason into err[errlen].
 */
#ifndef COPROF_TRACE_UNIT_H
#define COPROF_TRACE_UNIT_H

#include "abi/trace-regs.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* A mapped register file. */
struct trace_unit {
    char *path;
    int fd;
    uint8_t *base;
    size_t size;
    struct trace_regs_header *header;
};

struct trace_geometry {
    uint32_t n_slots;
    uint32_t n_contexts;
    uint32_t fifo_depth;
    uint32_t ls_base;
    uint32_t ls_size;
    uint32_t stack_depth;           /* frames per call-stack record; 0 = the
                                       file has no call-stack area */
};

/* ---- Files ------------------------------------------------------------- */

void trace_geometry_default(struct trace_geometry *geo);

/* Creates a new register file at path (which must not exist) and maps it:
 * every slot unbound and programmed 0, every context closed and unbound. */
struct trace_unit *trace_unit_create(const char *path,
                                     const struct trace_geometry *geo,
                                     char *err, size_t errlen);

/* The same in a fresh file dir/coptrace-XXXXXX (dir NULL: $TMPDIR or /tmp).
 * trace_unit_close(unit, 1) removes it again. */
struct trace_unit *trace_unit_create_temp(const char *dir,
                                          const struct trace_geometry *geo,
                                          char *err, size_t errlen);

/* Maps an existing file after validating it. */
struct trace_unit *trace_unit_open(const char *path, char *err, size_t errlen);

/* Checks the header and geometry of a mapped file of `size` bytes.
 * Returns 0, or -1 with the reason. */
int trace_regs_validate(const void *base, uint64_t size,
                        char *err, size_t errlen);

void trace_unit_close(struct trace_unit *unit, int remove_file);

struct trace_regs_slot *trace_unit_slot(const struct trace_unit *unit,
                                        uint32_t slot);
struct trace_regs_context *trace_unit_context(const struct trace_unit *unit,
                                              uint32_t context);
/* A slot's mailbox (version 4; docs/trace-unit.md, "Mailbox"). */
struct trace_regs_mailbox *trace_unit_mailbox(const struct trace_unit *unit,
                                              uint32_t slot);

/* ---- Controller (copsim, the driver) ----------------------------------- */

/* Records the process whose death releases held emulators (0: none). */
void trace_unit_set_controller(struct trace_unit *unit, pid_t pid);

/* The value the LFSR reloads at its next expiry; 0 stops capture then. */
void trace_slot_program(struct trace_regs_slot *slot, uint32_t value);

/* Loads the LFSR with `state` now (0 stops it).  Only while no emulator
 * runs on the slot: unbound, or its context held. */
void trace_slot_load(struct trace_regs_slot *slot, uint32_t state);

/* What a capture does when the slot's FIFO is full, the fill at which it
 * rings the doorbell, and the dither (trace_slot_configure). */
void trace_slot_set_policy(struct trace_regs_slot *slot, uint32_t fifo_policy,
                           uint32_t watermark);
void trace_slot_set_dither(struct trace_regs_slot *slot, uint32_t dither,
                           uint64_t seed);

/* "stall" or "drop" as TRACE_FIFO_*; 0, or -1 for other text.
 * trace_fifo_policy_name() is the inverse ("drop" for unknown values). */
int trace_parse_fifo_policy(const char *text, uint32_t *policy);

/* The events that clock a slot's LFSR (TRACE_EVENT_*) by name: 0, or -1
 * for another name. */
#define TRACE_EVENT_CYCLES_NAME       "SPU_CYCLES"
#define TRACE_EVENT_INSTRUCTIONS_NAME "SPU_INSTRUCTIONS"
#define TRACE_EVENT_NAMES TRACE_EVENT_CYCLES_NAME " or " \
                          TRACE_EVENT_INSTRUCTIONS_NAME
int trace_parse_event(const char *text, uint32_t *event);
const char *trace_fifo_policy_name(uint32_t policy);

/* The default doorbell watermark: half the FIFO. */
static inline uint32_t trace_default_watermark(uint32_t fifo_depth)
{
    return fifo_depth / 2;
}

/* Binds a context to a slot, unbinding it from its previous slot and the
 * slot from its previous context.  Neither context may be running: each
 * must be without emulator, held, or exited. */
int trace_unit_bind(struct trace_unit *unit, uint32_t context, uint32_t slot,
                    char *err, size_t errlen);
void trace_unit_unbind(struct trace_unit *unit, uint32_t context);

/*
 * Overlay watch: the emulator of `context` watches guard_count 32-bit guard
 * words at local-store byte guard_ls_offset (_ovly_buf_table) and places
 * every change among its slot's captures (trace-regs.h).  guard_count 0
 * turns the watch off.  The emulator reads these when it starts, so set
 * them before; refused while the context runs, or for words that are not
 * aligned, more than TRACE_MAX_GUARDS or outside the local store.
 */
int trace_context_watch_guards(struct trace_unit *unit, uint32_t context,
                               uint32_t guard_ls_offset, uint32_t guard_count,
                               char *err, size_t errlen);

/* The guard words of an image with `regions` overlay regions that a
 * context can have watched: all, or none when there are more than
 * TRACE_MAX_GUARDS (its changes then go unplaced, read at each poll). */
static inline uint32_t trace_watchable_guards(uint32_t regions)
{
    return regions <= TRACE_MAX_GUARDS ? regions : 0;
}

/* Reads and checks a context's watch (for the emulator): 0 with the
 * offset and count, or -1 with the reason. */
int trace_context_guards(const struct trace_unit *unit, uint32_t context,
                         uint32_t *guard_ls_offset, uint32_t *guard_count,
                         char *err, size_t errlen);

/* For a controller whose context has left its emulator (copsim's slot
 * model: handed back by the slot stub, or not yet on a slot): its gate
 * closed and acknowledged, status HELD, as if it had stopped there. */
void trace_context_park(struct trace_regs_context *context);

/* Closes the context's gate; returns the closed gate value to wait for. */
uint32_t trace_context_hold(struct trace_regs_context *context);

/* Makes the context's emulator look at its controller at its next block
 * (the slow path) without closing the gate: for a word of the controller's
 * own that the emulator reads there, stored (sequentially consistent)
 * before this (copsim's slot model: PREEMPT, slot-stub.h). */
void trace_context_kick(struct trace_regs_context *context);

#define TRACE_WAIT_HELD     0   /* the emulator obeys the hold */
#define TRACE_WAIT_EXITED   1   /* the emulator exited or died */
#define TRACE_WAIT_TIMEOUT  2

/* Waits until the emulator acknowledges hold `gate`, or exits. */
int trace_context_wait_held(struct trace_regs_context *context, uint32_t gate,
                            int timeout_ms);

/* Opens the context's gate and wakes its emulator. */
void trace_context_release(struct trace_regs_context *context);

/* Everything a controller reads about a slot, in one call. */
struct trace_slot_status {
    uint64_t cycles;
    uint64_t captures;      /* all expiries, including dropped and outside */
    uint64_t dropped;       /* FIFO was full */
    uint64_t outside;       /* PC outside the local store, not queued */
    uint32_t queued;        /* entries waiting in the FIFO */
    uint64_t stall_ns;      /* time the producer spent stalled */
    uint64_t stalls;        /* captures that waited for room */
    uint32_t lfsr_state;
    uint32_t programmed_value;
    uint32_t bound_context;
};
void trace_slot_status(const struct trace_unit *unit, uint32_t slot,
                       struct trace_slot_status *status);

/* The LFSR state a snapshot stands for. */
uint32_t trace_lfsr_snapshot_state(const struct trace_lfsr_snapshot *snap);

/* ---- Consumer ---------------------------------------------------------- */

/* Drains every queued entry of a slot, writing each as its local-store
 * address in hex ("0x%05x\n") to out (NULL: discard), and its stall reason
 * to reasons (NULL: discard) as a line "0x%05x STALL" with " TAG 0x%05x"
 * (the waited transfer's tag and issuer's LS address) after a DMA wait's.
 * Adds the number of entries to *drained.  Returns 0, or -1 on a corrupt
 * FIFO. */
int trace_slot_drain_to(struct trace_unit *unit, uint32_t slot, FILE *out,
                        FILE *reasons,
                        uint64_t *drained, char *err, size_t errlen);

/* Drains every queued overlay event of a slot (after its FIFO: see
 * trace_slot_drain_events), writing each as "POS REGION GUARD\n" to out
 * (NULL: discard), POS being fifo_pos - base.  Adds the number of events
 * to *drained.  Returns 0, or -1 on a corrupt ring. */
int trace_slot_drain_events_to(struct trace_unit *unit, uint32_t slot,
                               uint32_t base, FILE *out, uint64_t *drained,
                               char *err, size_t errlen);

/* A consumer that drained the slot: wakes its producer if it is stalled
 * (waiting on fifo_tail for room). */
void trace_slot_wake_producer(struct trace_regs_slot *slot);

/*
 * The doorbell (the header's `doorbell` word), for whoever drains (the
 * hosted driver's poll thread): trace_doorbell_wait() sleeps until the
 * word differs from `seen` or timeout_ns passes, and returns 1 when it
 * rang, 0 on timeout.  trace_doorbell_ring() rings it (producers, and a
 * host that wants its waiter up).  trace_futex_wake() wakes every waiter
 * on a shared futex word.
 */
int trace_doorbell_wait(uint32_t *doorbell, uint32_t seen,
                        uint64_t timeout_ns);
void trace_doorbell_ring(uint32_t *doorbell);
void trace_futex_wake(uint32_t *word);

/*
 * A handshake: a futex word one thread waits to change and another
 * changes, with a count of sleepers beside it (both in shared memory), for
 * waits whose step is short and on a critical path (the two waits inside
 * a slot's context switch).  trace_handshake_wait() spins (reading the
 * word, a CPU pause between reads) for spin_ns at most, then counts itself
 * in *sleepers and sleeps on the word until it differs from `seen` or
 * timeout_ns (from the call) passes.  It returns TRACE_HANDSHAKE_SPUN when
 * the word changed while it spun (no system call), TRACE_HANDSHAKE_WOKEN
 * when it changed after it slept and was woken, TRACE_HANDSHAKE_EXPIRED
 * when the time passed first (the word may have changed since: callers
 * look at it).  The waker changes the word, then calls
 * trace_handshake_wake(), which makes the FUTEX_WAKE (bitset: the futex
 * bitset it wakes, FUTEX_BITSET_MATCH_ANY for all) only when *sleepers is
 * not 0 and returns whether it did; trace_handshake_ring() adds 1 to a
 * counter word and wakes it so.  No wake-up is lost: see trace-unit.c.
 */
enum trace_handshake {
    TRACE_HANDSHAKE_EXPIRED = 0,
    TRACE_HANDSHAKE_SPUN = 1,
    TRACE_HANDSHAKE_WOKEN = 2,
};

enum trace_handshake trace_handshake_wait(uint32_t *word, uint32_t seen,
                                          uint32_t *sleepers,
                                          uint64_t spin_ns,
                                          uint64_t timeout_ns);
int trace_handshake_wake(uint32_t *word, const uint32_t *sleepers,
                         uint32_t bitset);
int trace_handshake_ring(uint32_t *word, const uint32_t *sleepers);

/* ---- Emulator (the QEMU plugin) ---------------------------------------- */

/*
 * Producer: records a capture whose PC field is `field` under the slot's
 * FIFO-full policy.  Drop: queued, or counted in overflow_count.  Stall:
 * with the FIFO full, it rings the doorbell and waits (futex on fifo_tail)
 * until the consumer frees an entry, counting the stall and its time in
 * the slot; it stops waiting and drops (counted) only when the policy
 * turns to drop or the controller (controller_pid) is gone, so a dead
 * consumer never hangs the emulator.  Rings the doorbell when the queue
 * reaches the slot's watermark.  Returns 1 if queued, 0 if dropped.
 */
int trace_slot_capture(const struct trace_unit *unit,
                       struct trace_regs_slot *slot, uint16_t field);

/* The same with the capture's call stack (trace-regs.h, "Call stacks"):
 * its record is written into `area` (the slot's stack records,
 * trace_stack_area()) when the capture is queued.  `frames` holds the
 * innermost min(depth, the header's stack_depth) frames. */
int trace_slot_capture_stack(const struct trace_unit *unit,
                             struct trace_regs_slot *slot, uint32_t *area,
                             uint16_t field, uint32_t depth,
                             const uint32_t *frames);

/* The same with the capture's cause word (trace-regs.h, "Cause words"),
 * and its call stack when `area` is not NULL; the others queue
 * TRACE_STALL_ISSUE. */
int trace_slot_capture_entry(const struct trace_unit *unit,
                             struct trace_regs_slot *slot, uint32_t *area,
                             uint16_t field, uint32_t cause, uint32_t depth,
                             const uint32_t *frames);

/* Claims a context for this process and records its mode.  Fails when the
 * id is out of range or a live process already owns it. */
struct trace_regs_context *trace_context_attach(struct trace_unit *unit,
                                                uint32_t context,
                                                uint32_t mode,
                                                char *err, size_t errlen);

/* Blocks while the gate is closed, acknowledging the hold; returns the
 * open gate value, or TRACE_NONE when the controller died meanwhile. */
uint32_t trace_context_wait_open(const struct trace_unit *unit,
                                 struct trace_regs_context *context);

/* Publishes the final instruction count and marks the context exited. */
void trace_context_exit(struct trace_regs_context *context,
                        uint64_t instructions);

/* ---- Running the plugin ------------------------------------------------ */

/* Finds libcoptrace.so: $COPROF_TRACE_PLUGIN, else beside the running
 * program (../lib/ or ../lib/coprof/).  Returns 0 or -1. */
int trace_plugin_path(char *buf, size_t len);

/* Formats QEMU's -plugin argument for a context; commas in paths are
 * doubled as QEMU's option syntax needs.  counts, unless NULL, is the file
 * the plugin's exact instruction counts go to (counts=); ram, unless NULL,
 * the guest RAM file in which it watches the context's guard words
 * (ram=).  Returns 0, or -1 if too long. */
int trace_plugin_arg(char *buf, size_t len, const char *plugin,
                     const char *regs, uint32_t context, uint32_t mode,
                     const char *counts, const char *ram);

/* The same for slot S of copsim's slot model (emulator/copsim/stub/): the
 * plugin serves whichever context is bound to S in the slot emulator whose
 * RAM file is ram; counts_dir, unless NULL, gets each context's exact
 * counts (countsdir=, files named TRACE_COUNTS_NAME); window, unless NULL,
 * is the file QEMU maps as the main-memory window, over which the plugin
 * maps the bound context's main-memory file (window=, slot-stub.h): its
 * data window, and so its mailboxes, are there. */
int trace_plugin_slot_arg(char *buf, size_t len, const char *plugin,
                          const char *regs, uint32_t slot, uint32_t mode,
                          const char *counts_dir, const char *ram,
                          const char *window);

/* The name of a context's exact counts file in copsim's --exact-counts
 * directory (printf format, the context id as unsigned long long): copsim
 * names it, the plugin's countsdir= writes it. */
#define TRACE_COUNTS_NAME "context-%llu.counts"

/* ---- A simple traced run (cop-run, coptrace run) ---------------------- */

/* The overlay watch of a traced run. */
struct trace_watch {
    const char *ram;                /* the guest RAM file (LS at offset 0) */
    uint32_t guard_ls_offset;       /* LS byte offset of _ovly_buf_table */
    uint32_t guard_count;           /* guard words; 0: no watch */
};

/* A traced run's FIFO-full policy and dither. */
struct trace_sampling {
    uint32_t fifo_policy;           /* TRACE_FIFO_DROP or TRACE_FIFO_STALL */
    uint32_t dither;                /* 1: randomize each interval */
    uint64_t dither_seed;
    uint32_t event;                 /* TRACE_EVENT_*: what N counts */
};

/* One emulator traced on one slot, with the simple consumer. */
struct trace_run {
    struct trace_unit *unit;
    int private_file;               /* created here, to be removed */
    int file_removed;
    uint32_t context;
    uint32_t slot;
    struct trace_slot_status start; /* the slot when the run began */
    uint64_t drained;
    uint32_t fifo_base;             /* the slot's fifo_head at the start */
    uint32_t start_event_overflow;  /* its event_overflow then */
    uint64_t events_drained;
    char plugin_arg[8192];          /* for QEMU's -plugin option */
};

/*
 * Prepares a run: opens the register file `regs`, or creates a private one
 * with `geo` when regs is NULL; binds `context` to `slot`; loads and
 * programs the LFSR for one capture every `count` instructions; records
 * this process as the controller; opens the gate; and formats the plugin
 * argument for `mode` (and `counts`, the exact counts file, or NULL).
 * With a watch (NULL: none) the context watches its guard words and the
 * plugin gets the RAM file.  sampling (NULL: drop, no dither) sets the
 * slot's FIFO-full policy and dither.  Returns 0, or -1 with the reason
 * (nothing left behind).
 */
int trace_run_start(struct trace_run *run, const char *regs,
                    const struct trace_geometry *geo, uint32_t context,
                    uint32_t slot, uint32_t count, uint32_t mode,
                    const char *counts, const struct trace_watch *watch,
                    const struct trace_sampling *sampling,
                    char *err, size_t errlen);

/*
 * The simple consumer: drains the run's slot into out (and each capture's
 * stall reason into reasons, as trace_slot_drain_to(); NULL: discard)
 * until process `child` (the emulator) ends, then once more; after each
 * drain of the
 * FIFO it drains the overlay events into events (NULL: discard), their
 * positions counted from the run's first capture (a line of out).  It does not reap the child:
 * the caller waits for it and reads its status.  With drain 0 it drains
 * only that last time: a consumer that stalls while the emulator runs, so
 * the FIFO keeps its oldest entries and overflows (under the drop policy
 * only: a stalling emulator would wait for it).  Under the stall policy
 * it drains whenever the emulator rings the doorbell.  A private register
 * file is unlinked as soon as the emulator has attached to it, so nothing
 * is left behind however the run ends.  Returns 0, or -1 with the reason.
 */
int trace_run_consume(struct trace_run *run, pid_t child, int drain,
                      FILE *out, FILE *reasons, FILE *events,
                      char *err, size_t errlen);

/* Prints "captures=A dropped=B instructions=C outside_ls=D" for the run
 * (the slot's counters since the start, the context's instructions), after
 * a line "events=E events_dropped=F" when it watches guard words and a
 * line "stalls=S stall_ns=T" under the stall policy (so the counters stay
 * the last line). */
void trace_run_report(const struct trace_run *run, FILE *out);

/* Unmaps the register file, removing it if the run created it. */
void trace_run_end(struct trace_run *run);

#endif /* COPROF_TRACE_UNIT_H */
