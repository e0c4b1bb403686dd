// SPDX-License-Identifier: GPL-2.0
/*
 * core.c - the portable core of the coprof kernel driver (see copdrv.h).
 *
 * State.  For every slot the driver keeps what the host said is bound
 * there (bound, the context) and whether the stream already says so
 * (announced: its CONTEXT, or the RELEASE, is written).  A record that does
 * not fit in the event buffer is not lost: the slot stays unannounced and
 * the next poll or hook tries again, while the slot's samples are counted
 * as lost (buffer-full) rather than written under the wrong context.  The
 * same holds for guard words (an overlay change is written once it fits)
 * and for lost counts (they add up until a LOST record fits).
 *
 * A poll group.  poll_slot() drains the slot's FIFO into a scratch array,
 * then the slot's overlay events, reads the slot's cycle counter and the
 * context's guard words after the drain, and only then writes, in the
 * order escape-protocol/README.md §3 prescribes: the samples with a placed
 * OVERLAY at each event's FIFO position, the guard words the poll read
 * found changed, the LOST records, one TIME record.  The samples leave
 * room for the rest of their group, so a full buffer costs samples, never
 * the records that explain them.
 *
 * Overlay watch.  When the trace unit watches the bound context's guard
 * words (its register-file context block has guard_count > 0), every
 * change reaches the driver as an event placed in the FIFO sequence, and
 * the poll read is not reported: a change it sees is placed at the trace
 * unit's next capture, which may come after captures the next drain takes.
 * Two exceptions: at a context switch the emulator is stopped, so a change
 * the final read sees came after the last capture and is written placed
 * after the last sample; and when the trace unit dropped events (its
 * event_overflow advanced), the poll read is reported unplaced as without
 * the watch.  A placed OVERLAY that does not fit waits, and the slot's
 * samples after it are lost (buffer-full) until it is written: then it
 * still precedes every later sample of the slot.  Meanwhile the changes
 * of each region coalesce into the latest (no sample lies between them),
 * so the events are always drained whole and a full buffer never makes
 * the trace unit drop events.
 *
 * Conservation.  At start the driver loads every slot's LFSR, takes the
 * counters as the baseline and discards what was queued before.  From then
 * on every capture is a drained entry (a sample, or lost buffer-full or
 * no-context), a FIFO overflow or a PC outside the local store, and each
 * is reported exactly once; the end reserve of the buffer guarantees that
 * the last losses and STOP always fit.
 *
 * FIFO-full policy, doorbell, dither.  A start writes every slot's policy
 * (stall: the producer waits for room, so nothing is lost in the FIFO),
 * doorbell watermark and dither (each slot's jitter seeded from the
 * session's seed and the slot: trace_dither_slot_seed()) before it loads
 * the LFSR; a stop turns
 * the policy back to drop, so a producer the host could not hold never
 * waits for a driver that is gone.  The shim polls early when the trace
 * unit rings the doorbell; a drain that finds a producer stalled wakes it.
 * The producer's stall counters are reported per slot in STALL records of
 * the poll group, attributed to the context bound then.  Under the stall
 * policy a poll drains only what the buffer surely holds (drain_budget()):
 * while the reader is behind, captures wait in the FIFO and the producer
 * stalls; only a switch's drain, which must take everything, can still
 * lose samples buffer-full.
 *
 * Call stacks.  When the register file has a call-stack area (its header's
 * stack_depth, for --call-graph), a drain copies each entry's stack record
 * with it, and every sample is written with its CALLSTACK record right
 * after it (stream 1.4): both or neither, so a full buffer loses whole
 * samples and never splits one from its stack.  Without the area nothing
 * changes: the samples go out in one copy, as before.
 *
 * Stall reasons.  A drain copies each entry's cause word with it, bounded
 * by the trace unit (trace_cause_checked()).  Each run of samples written
 * together (a drain, or its part between two placed OVERLAYs) goes out
 * after one REASONS record (stream 1.6) giving the 4-bit reasons of its
 * samples in order, up to the last that is not ISSUE; a run of ISSUE
 * alone needs none.  The run is cut to what fits in the buffer before the
 * REASONS is written, so its count is exactly the samples that follow:
 * a full buffer loses whole samples, never a reason's place.  A TRANSFER
 * record names the DMA transfer before a DMA-wait sample whose transfer
 * differs from the one the stream gives the slot (none after START and
 * each CONTEXT).
 *
 * Portable: the OS shim (copdrv-os.h), the freestanding stream encoder and
 * the trace unit's freestanding register primitives, nothing else.
 */
#include "kernel-driver/copdrv.h"
#include "kernel-driver/event-buffer.h"
#include "abi/trace-regs.h"

static_assert(TRACE_MAX_SLOTS == COPDRV_MAX_SLOTS, "stall counters by slot");
static_assert(TRACE_FIFO_STALL == COPSTREAM_FIFO_STALL, "FIFO-full policies");
static_assert(TRACE_FIFO_DROP == COPSTREAM_FIFO_DROP, "FIFO-full policies");
static_assert(TRACE_EVENT_CYCLES == COPSTREAM_EVENT_CYCLES, "events");
static_assert(TRACE_EVENT_INSTRUCTIONS == COPSTREAM_EVENT_INSTRUCTIONS,
	      "events");

#define WORD_BYTES		COPSTREAM_WORD_BYTES
#define RECORD_BYTES(words)	(WORD_BYTES * (2 + (words)))
#define OVERLAY_BYTES		RECORD_BYTES(COPSTREAM_OVERLAY_WORDS)
#define LOST_BYTES		RECORD_BYTES(COPSTREAM_LOST_WORDS)
#define TIME_BYTES		RECORD_BYTES(COPSTREAM_TIME_WORDS)
#define STOP_BYTES		RECORD_BYTES(COPSTREAM_STOP_WORDS)
#define STALL_BYTES		RECORD_BYTES(COPSTREAM_STALL_WORDS)
#define TRANSFER_BYTES		RECORD_BYTES(COPSTREAM_TRANSFER_WORDS)
#define NO_TRANSFER		0xFFFFFFFFu	/* a sample that is no DMA wait */
#define LOST_CAUSES		(COPSTREAM_LOST_CAUSE_END - 1)

/* A guard word not reported yet in this binding (real ones are 32-bit). */
#define GUARD_UNKNOWN		BIT_ULL(32)

struct copdrv_image {
	struct copstream_image_id id;
	u8 *path;
	u32 path_length;
	u32 sent;		/* its IMAGE is written in this session */
};

struct copdrv_slot {
	struct trace_regs_slot *regs;
	u32 index;
	u32 bound;		/* the host bound a context here */
	u32 announced;		/* the stream says so (CONTEXT or RELEASE) */
	struct copdrv_context ctx;	/* path not kept: see image */
	u32 image;		/* index into copdrv.images */
	u64 switch_cycle;	/* slot cycle at the last bind or unbind */
	u64 *guards;		/* guard words as last reported */
	u32 guards_capacity;
	u64 overflow_seen;	/* overflow_count already counted */
	u64 outside_seen;	/* outside_count already counted */
	u64 pending[COPSTREAM_LOST_CAUSE_END];	/* lost, not yet reported */
	u32 watched;		/* the trace unit watches the guard words */
	u32 event_overflow_seen;	/* event_overflow already counted */
	u32 n_events;		/* drained into copdrv.events this group */
	/* placed changes that wait for room, by region; GUARD_UNKNOWN: none */
	u64 *stalled;
	u32 n_stalled;		/* regions with one */
	u64 stalls_seen;	/* stall_count already reported */
	u64 stall_ns_seen;	/* stall_ns already reported */
	u32 end_pending;	/* an ended context's END waits to be written */
	u64 end_context;	/* its context id ... */
	u64 end_cycle;		/* ... and the slot's cycle when it left */
	u32 *stack_area;	/* the slot's stack records, or NULL */
	u32 transfer_sent;	/* the stream's TRANSFER: a cause word, 0 none */
};

struct copdrv {
	struct copdrv_os *os;
	u8 *regs;
	struct trace_regs_header header;	/* the file's, checked at create */
	u32 n_slots;
	u32 fifo_depth;
	u32 ls_size;
	u8 *contexts;		/* context blocks */
	u32 n_contexts;
	u32 context_stride;

	struct copdrv_params params;
	u32 running;
	u32 stopping;		/* the stop's last drains: take everything */
	u64 start_time_ns;
	u64 last_wake_ns;	/* when the reader was last woken */
	struct copdrv_slot slots[TRACE_MAX_SLOTS];

	struct copdrv_image *images;
	u32 n_images;
	u32 images_capacity;

	struct copdrv_buffer buffer;
	u16 *fields;		/* drain scratch, fifo_depth entries */
	u32 *causes;		/* their cause words, the same */
	u8 *stalls;		/* a REASONS record's stalls, 4 bits each */
	struct trace_ovl_event events[TRACE_EVENT_DEPTH];	/* the same */
	u32 *guard_words;	/* guard read scratch, COPDRV_MAX_REGIONS */
	u8 scratch[COPSTREAM_MAX_RECORD_BYTES];
	u32 stack_depth;	/* frames per stack record; 0: no stacks */
	u32 *stacks;		/* drain scratch, fifo_depth stack records */
	u8 frames[COPSTREAM_MAX_FRAMES * COPSTREAM_WORD_BYTES];
	struct copdrv_stats stats;
};

/* ---- Register file ------------------------------------------------------ */

/*
 * Whether the trace unit watches the guard words of the context the
 * register file binds to the slot (its guard_count).
 */
static u32 slot_watched(const struct copdrv *drv, const struct copdrv_slot *s)
{
	/* pairs with the controller's release store of bound_context */
	u32 index = copdrv_load_acquire(&s->regs->bound_context);
	const struct trace_regs_context *c;

	if (index >= drv->n_contexts)
		return 0;
	c = (const struct trace_regs_context *)
		(drv->contexts + (u64)index * drv->context_stride);
	/* pairs with the controller's release store of guard_count */
	return copdrv_load_acquire(&c->guard_count) > 0;
}

static u64 slot_cycles(const struct copdrv_slot *s)
{
	/* pairs with the producer's store of cycles after its captures */
	return copdrv_load_acquire(&s->regs->cycles);
}

/*
 * Programs the reload value and loads the LFSR with it now.  The hosted
 * glue holds the slot's emulator around start and stop; copdrv.ko cannot,
 * so the LFSR seqlock keeps the two writers apart.  A seqlock that stays
 * held (a producer gone inside it, a hostile file) skips the load: the
 * slot keeps its old LFSR state, counted in lfsr_busy.
 */
static void slot_load(struct copdrv *drv, struct copdrv_slot *s, u32 value)
{
	/* pairs with the producer's acquire load at its reload */
	copdrv_store_release(&s->regs->programmed_value, value);
	if (trace_slot_load_state(s->regs, value))
		drv->stats.lfsr_busy++;
}

/* After a session: no producer may wait for a driver that is gone. */
static void slot_unconfigure(struct copdrv_slot *s)
{
	/* pairs with the producer's acquire load at a full FIFO */
	copdrv_store_release(&s->regs->fifo_policy, COPSTREAM_FIFO_DROP);
}

/*
 * The session's FIFO-full policy, doorbell watermark, dither and event:
 * each slot's jitter generator is seeded from the session's seed and the
 * slot, so that no two slots draw the same intervals; the event (cycles
 * or instructions) is what the slot's LFSR counts from the producer's
 * next attach.
 */
static void slot_configure(struct copdrv *drv, struct copdrv_slot *s)
{
	const struct copdrv_params *p = &drv->params;

	trace_slot_configure(s->regs, p->fifo_full,
			     p->watermark ? p->watermark : drv->fifo_depth / 2,
			     p->dither,
			     trace_dither_slot_seed(p->dither_seed, s->index));
	trace_slot_set_event(s->regs, p->event);
}

/*
 * Overlay events queued so far are dropped (they describe captures the
 * stream will not hold; the first read or the CONTEXT that follows tells
 * the state) and event_overflow becomes the baseline.
 */
static void discard_events(struct copdrv *drv, struct copdrv_slot *s)
{
	u32 i;

	trace_slot_drain_events(s->regs, drv->fifo_depth, drv->events,
				TRACE_EVENT_DEPTH);
	s->n_events = 0;
	for (i = 0; i < s->guards_capacity; i++)
		s->stalled[i] = GUARD_UNKNOWN;
	s->n_stalled = 0;
	/* pairs with the producer's release store in trace_slot_push_event() */
	s->event_overflow_seen = copdrv_load_acquire(&s->regs->event_overflow);
}

/* The counters as of now become the baseline; queued entries are dropped. */
static void slot_baseline(struct copdrv *drv, struct copdrv_slot *s)
{
	u32 cause;

	/* these pair with the producer's release stores of its counters */
	s->overflow_seen = copdrv_load_acquire(&s->regs->overflow_count);
	s->outside_seen = copdrv_load_acquire(&s->regs->outside_count);
	trace_slot_drain(s->regs, drv->fifo_depth, drv->fields,
			 drv->fifo_depth);
	discard_events(drv, s);
	for (cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
		s->pending[cause] = 0;
	s->stalls_seen = copdrv_load_acquire(&s->regs->stall_count);
	s->stall_ns_seen = copdrv_load_acquire(&s->regs->stall_ns);
}

/* Hardware losses since the last look become pending LOST counts. */
static void count_hardware_losses(struct copdrv_slot *s)
{
	/* pair with the release store of capture_count after each count */
	u64 overflow = copdrv_load_acquire(&s->regs->overflow_count);
	u64 outside = copdrv_load_acquire(&s->regs->outside_count);

	s->pending[COPSTREAM_LOST_FIFO_OVERFLOW] += overflow - s->overflow_seen;
	s->pending[COPSTREAM_LOST_OUTSIDE_LS] += outside - s->outside_seen;
	s->overflow_seen = overflow;
	s->outside_seen = outside;
}

/* ---- Records ------------------------------------------------------------ */

/*
 * Writes a record, leaving `keep` bytes free (room for the TIME record that
 * closes a poll group).  A record that does not fit is counted as waiting;
 * the caller keeps what it needs to write it later.
 */
static int emit(struct copdrv *drv, const struct copstream_record *rec,
		enum copdrv_buffer_use use, u64 keep)
{
	int bytes = copdrv_buffer_put_record(&drv->buffer, drv->scratch, rec,
					     use, keep);

	if (bytes < 0) {
		drv->stats.records_waiting++;
		return bytes;
	}
	drv->stats.records[rec->code]++;
	return 0;
}

static int emit_start(struct copdrv *drv)
{
	struct copstream_record rec = { .code = COPSTREAM_START };
	struct copstream_start *start = &rec.u.start;

	start->version = COPSTREAM_VERSION;
	start->slots = drv->n_slots;
	start->lfsr_value = drv->params.lfsr_value;
	start->lfsr_count = drv->params.lfsr_count;
	start->clock_hz = drv->params.clock_hz;
	start->fifo_depth = drv->fifo_depth;
	start->ls_size = drv->ls_size;
	start->poll_interval_ns = drv->params.poll_interval_ns;
	start->start_time_ns = drv->start_time_ns;
	start->fifo_full = drv->params.fifo_full;
	start->dither = drv->params.dither;
	start->dither_seed = drv->params.dither_seed;
	start->watermark = drv->params.watermark ? drv->params.watermark :
			   drv->fifo_depth / 2;
	start->event = drv->params.event;
	return emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

static int emit_image(struct copdrv *drv, struct copdrv_image *image)
{
	struct copstream_record rec = { .code = COPSTREAM_IMAGE };
	int err;

	if (image->sent)
		return 0;
	rec.u.image.id = image->id;
	rec.u.image.path = image->path;
	rec.u.image.path_length = image->path_length;
	err = emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
	if (!err)
		image->sent = 1;
	return err;
}

static int emit_context(struct copdrv *drv, const struct copdrv_slot *s)
{
	struct copstream_record rec = { .code = COPSTREAM_CONTEXT };
	struct copstream_context *c = &rec.u.context;

	c->slot = s->index;
	c->pid = s->ctx.pid;
	c->tid = s->ctx.tid;
	c->context_id = s->ctx.context_id;
	c->object_id = s->ctx.object_id;
	c->image = s->ctx.image;
	c->image_offset = s->ctx.image_offset;
	c->cycle = s->switch_cycle;
	return emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

static int emit_release(struct copdrv *drv, const struct copdrv_slot *s)
{
	struct copstream_record rec = { .code = COPSTREAM_RELEASE };

	rec.u.release.slot = s->index;
	rec.u.release.cycle = s->switch_cycle;
	return emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

static int emit_end(struct copdrv *drv, const struct copdrv_slot *s)
{
	struct copstream_record rec = { .code = COPSTREAM_END };

	rec.u.end.slot = s->index;
	rec.u.end.context_id = s->end_context;
	rec.u.end.cycle = s->end_cycle;
	return emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

static int emit_overlay(struct copdrv *drv, const struct copdrv_slot *s,
			u32 region, u32 guard, u64 cycle, u32 flags)
{
	struct copstream_record rec = { .code = COPSTREAM_OVERLAY };
	int err;

	rec.u.overlay.slot = s->index;
	rec.u.overlay.region = region;
	rec.u.overlay.guard = guard;
	rec.u.overlay.cycle = cycle;
	rec.u.overlay.flags = flags;
	err = emit(drv, &rec, COPDRV_BUFFER_NORMAL, TIME_BYTES);
	if (!err && (flags & COPSTREAM_OVERLAY_PLACED))
		drv->stats.overlays_placed++;
	return err;
}

static void emit_time(struct copdrv *drv, const struct copdrv_slot *s,
		      u64 cycle, u64 time_ns)
{
	struct copstream_record rec = { .code = COPSTREAM_TIME };

	rec.u.time.slot = s->index;
	rec.u.time.cycle = cycle;
	rec.u.time.time_ns = time_ns;
	emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

/*
 * The producer's stalls since the last report: counted in the statistics
 * and written as a STALL record (with room left for TIME).  A record that
 * does not fit leaves them for the next group.
 */
static void emit_stalls(struct copdrv *drv, struct copdrv_slot *s, u64 cycle)
{
	struct copstream_record rec = { .code = COPSTREAM_STALL };
	/* pair with the producer's stores at the end of each stall */
	u64 count = copdrv_load_acquire(&s->regs->stall_count);
	u64 ns = copdrv_load_acquire(&s->regs->stall_ns);

	if (count == s->stalls_seen)
		return;
	rec.u.stall.slot = s->index;
	rec.u.stall.count = count - s->stalls_seen;
	rec.u.stall.ns = ns - s->stall_ns_seen;
	rec.u.stall.cycle = cycle;
	if (emit(drv, &rec, COPDRV_BUFFER_NORMAL, TIME_BYTES))
		return;
	drv->stats.stalls += rec.u.stall.count;
	drv->stats.stall_ns += rec.u.stall.ns;
	drv->stats.slot_stalls[s->index] += rec.u.stall.count;
	drv->stats.slot_stall_ns[s->index] += rec.u.stall.ns;
	s->stalls_seen = count;
	s->stall_ns_seen = ns;
}

/*
 * Writes the slot's pending losses, each cause as soon as it fits; in a
 * poll group, with room left for its TIME record.
 */
static int emit_losses(struct copdrv *drv, struct copdrv_slot *s, u64 cycle,
		       enum copdrv_buffer_use use)
{
	struct copstream_record rec = { .code = COPSTREAM_LOST };
	int written = 0;
	u32 cause;

	for (cause = 1; cause < COPSTREAM_LOST_CAUSE_END; cause++) {
		if (!s->pending[cause])
			continue;
		rec.u.lost.slot = s->index;
		rec.u.lost.cause = cause;
		rec.u.lost.count = s->pending[cause];
		rec.u.lost.cycle = cycle;
		if (emit(drv, &rec, use,
			 use == COPDRV_BUFFER_FINAL ? 0 : TIME_BYTES))
			continue;
		drv->stats.lost_by_cause[cause] += s->pending[cause];
		s->pending[cause] = 0;
		written++;
	}
	return written;
}

static void emit_stop(struct copdrv *drv)
{
	struct copstream_record rec = { .code = COPSTREAM_STOP };
	u32 cause;

	rec.u.stop.time_ns = copdrv_os_now_ns(drv->os);
	rec.u.stop.samples = drv->stats.samples;
	for (cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
		rec.u.stop.lost += drv->stats.lost_by_cause[cause];
	emit(drv, &rec, COPDRV_BUFFER_FINAL, 0);
}

/* ---- Overlay guard words ------------------------------------------------ */

/*
 * Reads the bound context's guard words into drv->guard_words and returns
 * how many differ from what the stream last said.
 */
static u32 read_guards(struct copdrv *drv, struct copdrv_slot *s)
{
	u32 changed = 0;
	u32 i;

	if (!s->ctx.regions)
		return 0;
	if (copdrv_os_read_ls(drv->os, s->ctx.ls, s->ctx.guard_offset,
			      drv->guard_words, s->ctx.regions)) {
		drv->stats.guard_errors++;
		return 0;
	}
	for (i = 0; i < s->ctx.regions; i++)
		if (s->guards[i] != drv->guard_words[i])
			changed++;
	return changed;
}

/*
 * Writes the changes read_guards() found, with `flags`; one that does not
 * fit waits.
 */
static void emit_guard_changes(struct copdrv *drv, struct copdrv_slot *s,
			       u64 cycle, u32 flags)
{
	u32 i;

	for (i = 0; i < s->ctx.regions; i++) {
		u32 guard = drv->guard_words[i];

		if (s->guards[i] == guard)
			continue;
		if (emit_overlay(drv, s, i, guard, cycle, flags))
			return;
		s->guards[i] = guard;
	}
}

/* ---- Overlay events ----------------------------------------------------- */

/*
 * Drains the slot's overlay events placed at or before FIFO position end
 * (the end of the FIFO drain just made) into drv->events: a later one
 * follows a capture still in the FIFO and waits for the next drain.
 * Returns 1 when the trace unit dropped events since the last look (or
 * its ring is corrupt): changes then went unplaced.
 */
static int drain_events(struct copdrv *drv, struct copdrv_slot *s, u32 end)
{
	u32 overflow;
	int got;

	s->n_events = 0;
	got = trace_slot_drain_events_upto(s->regs, drv->fifo_depth,
					   drv->events, TRACE_EVENT_DEPTH,
					   &end);
	if (got < 0) {
		drv->stats.fifo_errors++;
		return 1;
	}
	s->n_events = (u32)got;
	/* pairs with the release store in trace_slot_push_event() */
	overflow = copdrv_load_acquire(&s->regs->event_overflow);
	if (overflow == s->event_overflow_seen)
		return 0;
	drv->stats.overlay_events_lost += overflow - s->event_overflow_seen;
	s->event_overflow_seen = overflow;
	return 1;
}

/*
 * Where an event falls among the `drained` entries that began at FIFO
 * position `tail`: before entry number n, or at the end for an event at or
 * past the drained end.  An event of a position drained earlier (there is
 * none from the trace unit) goes before all of them.
 */
static u64 event_index(const struct trace_ovl_event *e, u32 tail, u64 drained)
{
	s32 at = (s32)(e->fifo_pos - tail);

	if (at < 0)
		return 0;
	return (u64)at < drained ? (u64)at : drained;
}

/* Writes a placed OVERLAY of the region, unless it changes nothing. */
static int emit_placed(struct copdrv *drv, struct copdrv_slot *s, u32 region,
		       u32 guard, u64 cycle)
{
	if (s->guards[region] == guard)
		return 0;
	if (emit_overlay(drv, s, region, guard, cycle,
			 COPSTREAM_OVERLAY_PLACED))
		return -ENOSPC;
	s->guards[region] = guard;
	return 0;
}

/* A placed change waits for room; a later one of its region replaces it. */
static void stall(struct copdrv_slot *s, u32 region, u32 guard)
{
	if (s->stalled[region] == GUARD_UNKNOWN)
		s->n_stalled++;
	s->stalled[region] = guard;
}

/*
 * Writes the changes that waited for room, before any sample of the group.
 * Returns -ENOSPC while one still does not fit.
 */
static int emit_stalled(struct copdrv *drv, struct copdrv_slot *s, u64 cycle)
{
	u32 region;

	for (region = 0; s->n_stalled && region < s->ctx.regions; region++) {
		if (s->stalled[region] == GUARD_UNKNOWN)
			continue;
		if (emit_placed(drv, s, region, (u32)s->stalled[region],
				cycle))
			return -ENOSPC;
		s->stalled[region] = GUARD_UNKNOWN;
		s->n_stalled--;
	}
	return 0;
}

/* The CALLSTACK of a drained entry's stack record, frames in drv->frames. */
static void stack_record(struct copdrv *drv, const struct copdrv_slot *s,
			 const u32 *record, struct copstream_record *rec)
{
	u32 n = record[0], i;

	if (n > drv->stack_depth)
		n = drv->stack_depth;
	if (n > COPSTREAM_MAX_FRAMES)
		n = COPSTREAM_MAX_FRAMES;
	for (i = 0; i < n; i++) {
		u32 frame = record[1 + i];

		u64 word = copstream_frame_word((u32)TRACE_STACK_FRAME_FIELD(frame) << 2,
						TRACE_STACK_FRAME_OVERLAY(frame));

		copstream_put_frame(drv->frames, i, word);
	}
	rec->code = COPSTREAM_CALLSTACK;
	rec->u.callstack = (struct copstream_callstack){
		.slot = s->index, .depth = record[0] > n ? record[0] : n,
		.n_frames = n, .frames = drv->frames,
	};
}

/*
 * Call stacks: each sample of [from, to) with its CALLSTACK after it,
 * while both fit; returns the samples written.
 */
static u64 put_samples_stacked(struct copdrv *drv, struct copdrv_slot *s,
			       u64 from, u64 to, u64 keep)
{
	u32 words = trace_stack_record_words(drv->stack_depth);
	u64 i;

	for (i = from; i < to; i++) {
		struct copstream_record rec;
		int bytes;

		stack_record(drv, s, drv->stacks + i * words, &rec);
		bytes = copstream_record_bytes(&rec);
		if (bytes < 0 ||
		    copdrv_buffer_room(&drv->buffer, COPDRV_BUFFER_NORMAL) <
		    keep + WORD_BYTES + (u64)bytes)
			break;
		copdrv_buffer_put_samples(&drv->buffer, s->index,
					  drv->fields + i, 1, keep + bytes);
		emit(drv, &rec, COPDRV_BUFFER_NORMAL, keep);
	}
	drv->stats.samples += i - from;
	return i - from;
}

/*
 * Writes drained entries [from, to), all waiting on one transfer (if any),
 * as samples; returns how many fitted.
 */
static u64 put_run(struct copdrv *drv, struct copdrv_slot *s, u64 from,
		   u64 to, u64 keep)
{
	u64 written;

	if (drv->stack_depth)
		return put_samples_stacked(drv, s, from, to, keep);
	written = copdrv_buffer_put_samples(&drv->buffer, s->index,
					    drv->fields + from, to - from,
					    keep);
	drv->stats.samples += written;
	return written;
}

/*
 * The transfer a drained entry's sample needs the stream to name: its
 * cause word for a DMA wait on a known transfer, 0 (none) for a DMA wait
 * on none, NO_TRANSFER when the sample is no DMA wait.
 */
static u32 transfer_of(u32 cause)
{
	if (trace_cause_reason(cause) != TRACE_STALL_DMA_WAIT)
		return NO_TRANSFER;
	return trace_cause_has_transfer(cause) ? cause : 0;
}

/* Whether entry i needs a TRANSFER before it, the slot's being `now`. */
static int transfer_changes(const struct copdrv *drv, u64 i, u32 now)
{
	u32 t = transfer_of(drv->causes[i]);

	return t != NO_TRANSFER && t != now;
}

/* The TRANSFER record naming the transfer of cause word `t` (0: none). */
static int emit_transfer(struct copdrv *drv, struct copdrv_slot *s, u32 t,
			 u64 keep)
{
	struct copstream_record rec = { .code = COPSTREAM_TRANSFER };
	struct copstream_transfer *r = &rec.u.transfer;

	r->slot = s->index;
	if (t) {
		r->flags = COPSTREAM_TRANSFER_KNOWN;
		r->tag = trace_cause_tag(t);
		r->issuer = trace_cause_issuer_field(t) << 2;
	}
	if (emit(drv, &rec, COPDRV_BUFFER_NORMAL, keep))
		return -ENOSPC;
	s->transfer_sent = t;
	return 0;
}

/* Bytes of a REASONS record of `count` reasons; 0 for none. */
static u64 reasons_bytes(u64 count)
{
	if (!count)
		return 0;
	return RECORD_BYTES(COPSTREAM_REASONS_WORDS +
			    copstream_reasons_words((u32)count));
}

/* Bytes entry i's sample takes: its word, and its CALLSTACK if any. */
static u64 sample_bytes(struct copdrv *drv, const struct copdrv_slot *s, u64 i)
{
	u32 words = trace_stack_record_words(drv->stack_depth);
	struct copstream_record rec;

	if (!drv->stack_depth)
		return WORD_BYTES;
	stack_record(drv, s, drv->stacks + i * words, &rec);
	return WORD_BYTES + (u64)copstream_record_bytes(&rec);
}

/*
 * How many of entries [from, to) fit in the buffer beside `keep` bytes,
 * with their REASONS and TRANSFER records; *reasons is set to the count
 * the REASONS carries (up to the last reason other than ISSUE: the
 * samples after it read as ISSUE without one).
 */
static u64 samples_that_fit(struct copdrv *drv, struct copdrv_slot *s,
			    u64 from, u64 to, u64 keep, u64 *reasons)
{
	u64 room = copdrv_buffer_room(&drv->buffer, COPDRV_BUFFER_NORMAL);
	u64 used = 0, i, last = 0;
	u32 now = s->transfer_sent;

	*reasons = 0;
	if (room <= keep)
		return 0;
	room -= keep;
	if (to - from > COPSTREAM_MAX_REASONS)
		to = from + COPSTREAM_MAX_REASONS;
	for (i = from; i < to; i++) {
		u64 need = sample_bytes(drv, s, i), count = last;

		if (transfer_changes(drv, i, now))
			need += TRANSFER_BYTES;
		if (trace_cause_reason(drv->causes[i]) != TRACE_STALL_ISSUE)
			count = i - from + 1;
		if (used + need + reasons_bytes(count) > room)
			break;
		used += need;
		last = count;
		if (transfer_changes(drv, i, now))
			now = transfer_of(drv->causes[i]);
	}
	*reasons = last;
	return i - from;
}

/* The REASONS record of entries [from, from + count). */
static int emit_reasons(struct copdrv *drv, struct copdrv_slot *s,
			u64 from, u64 count)
{
	struct copstream_record rec = { .code = COPSTREAM_REASONS };
	u64 i;

	for (i = 0; i < (count + 1) / 2; i++)
		drv->stalls[i] = 0;
	for (i = 0; i < count; i++)
		copstream_put_reason(drv->stalls, (u32)i,
				     trace_cause_reason(drv->causes[from + i]));
	rec.u.reasons = (struct copstream_reasons){
		.slot = s->index, .count = (u32)count, .stalls = drv->stalls,
	};
	return emit(drv, &rec, COPDRV_BUFFER_NORMAL, 0);
}

/*
 * Writes entries [from, from + n), which samples_that_fit() found room
 * for, with a TRANSFER before each DMA-wait sample whose transfer differs
 * from the slot's; returns the samples written.
 */
static u64 put_runs(struct copdrv *drv, struct copdrv_slot *s, u64 from,
		    u64 n, u64 keep)
{
	u64 done = from, end = from + n;

	while (done < end) {
		u64 run = done + 1, written;

		if (transfer_changes(drv, done, s->transfer_sent) &&
		    emit_transfer(drv, s, transfer_of(drv->causes[done]), keep))
			break;
		while (run < end &&
		       !transfer_changes(drv, run, s->transfer_sent))
			run++;
		written = put_run(drv, s, done, run, keep);
		done += written;
		if (done < run)
			break;
	}
	return done - from;
}

/*
 * Writes drained entries [from, to) as samples (stream 1.6): each chunk
 * that fits after one REASONS record giving its reasons, sample for
 * sample, so a reason can never shift onto another sample; the entries
 * that do not fit are not written (the caller counts them lost).
 * Returns how many were written.
 */
static u64 put_samples(struct copdrv *drv, struct copdrv_slot *s, u64 from,
		       u64 to, u64 keep)
{
	u64 done = from;

	while (done < to) {
		u64 reasons, n, written;

		n = samples_that_fit(drv, s, done, to, keep, &reasons);
		if (!n)
			break;
		if (reasons && emit_reasons(drv, s, done, reasons))
			break;
		written = put_runs(drv, s, done, n, keep);
		done += written;
		if (written < n)
			break;
	}
	return done - from;
}

/*
 * Writes the drained samples (from FIFO position `tail`) with a placed
 * OVERLAY at the position of every drained event, after the changes that
 * waited for room, keeping `keep` bytes for the rest of the group and room
 * for the OVERLAYs still to come.  When an OVERLAY does not fit, it and
 * the changes after it wait (stall()), and the samples after it are not
 * written (the caller counts them lost).  Returns the samples written.
 */
static u64 put_samples_placed(struct copdrv *drv, struct copdrv_slot *s,
			      u32 tail, u64 drained, u64 cycle, u64 keep)
{
	u64 done = 0, written = 0, at;
	int stalled = emit_stalled(drv, s, cycle) != 0;
	u32 i;

	for (i = 0; i < s->n_events; i++) {
		const struct trace_ovl_event *e = &drv->events[i];

		if (e->region >= s->ctx.regions)
			continue;
		if (!stalled) {
			at = event_index(e, tail, drained);
			if (at > done) {
				written += put_samples(drv, s, done, at, keep +
					(u64)(s->n_events - i) * OVERLAY_BYTES);
				done = at;
			}
			stalled = emit_placed(drv, s, e->region, e->guard,
					      cycle) != 0;
		}
		if (stalled)
			stall(s, e->region, e->guard);
	}
	s->n_events = 0;
	if (!stalled)
		written += put_samples(drv, s, done, drained, keep);
	return written;
}

/* ---- Slots -------------------------------------------------------------- */

/*
 * Makes the stream say what is bound on the slot: IMAGE (once per session)
 * and CONTEXT followed by the first read of every guard word, or RELEASE.
 * Returns 0 once announced, -ENOSPC while the records do not fit.
 */
static int announce_switch(struct copdrv *drv, struct copdrv_slot *s)
{
	u32 region;
	int err;

	if (s->announced)
		return 0;
	if (!s->bound) {
		err = emit_release(drv, s);
		if (!err)
			s->announced = 1;
		return err;
	}
	err = emit_image(drv, &drv->images[s->image]);
	if (!err)
		err = emit_context(drv, s);
	if (err)
		return err;
	s->announced = 1;
	s->transfer_sent = 0;	/* a CONTEXT resets the transfer */
	for (region = 0; region < s->ctx.regions; region++)
		s->guards[region] = GUARD_UNKNOWN;
	if (read_guards(drv, s))
		emit_guard_changes(drv, s, s->switch_cycle, 0);
	return 0;
}

/*
 * The switch record, then the END of a context that ended on the slot
 * (stream 1.3): after the RELEASE or CONTEXT that closed its last binding,
 * so every record of it precedes its END.  Both wait for room alike.
 */
static int announce(struct copdrv *drv, struct copdrv_slot *s)
{
	int err = announce_switch(drv, s);

	if (err || !s->end_pending)
		return err;
	err = emit_end(drv, s);
	if (!err)
		s->end_pending = 0;
	return err;
}

/*
 * The most bytes one drained entry can take in the stream: its sample,
 * a TRANSFER before it, a REASONS record of its own and, with call
 * stacks, the largest CALLSTACK.
 */
static u64 entry_bytes_max(const struct copdrv *drv)
{
	u64 bytes = WORD_BYTES + TRANSFER_BYTES +
		    RECORD_BYTES(COPSTREAM_REASONS_WORDS + 1);

	if (drv->stack_depth)
		bytes += COPSTREAM_MAX_RECORD_BYTES;
	return bytes;
}

/*
 * How many entries a poll drains from the slot.  Under the stall policy
 * the FIFO is where captures wait for room: a drain takes only what the
 * buffer surely holds (every entry at its largest, beside the rest of its
 * group and the OVERLAYs the trace unit may place among them), and none
 * while the slot's CONTEXT waits for room, so that a full buffer stalls
 * the producer instead of losing samples.  A hook's drain (final: the
 * emulator is stopped at a switch) takes all, since what stayed would be
 * read under the next binding; so do the stop, the drop policy and an
 * idle slot.
 */
static u32 drain_budget(const struct copdrv *drv, const struct copdrv_slot *s,
			int final)
{
	u64 room, reserve, fits;

	if (final || drv->stopping || !s->bound ||
	    drv->params.fifo_full != COPSTREAM_FIFO_STALL)
		return drv->fifo_depth;
	if (!s->announced)
		return 0;
	room = copdrv_buffer_room(&drv->buffer, COPDRV_BUFFER_NORMAL);
	reserve = (u64)s->ctx.regions * OVERLAY_BYTES +
		  LOST_CAUSES * LOST_BYTES + STALL_BYTES + TIME_BYTES;
	if (slot_watched(drv, s))
		reserve += (u64)TRACE_EVENT_DEPTH * OVERLAY_BYTES;
	if (room <= reserve)
		return 0;
	fits = (room - reserve) / entry_bytes_max(drv);
	return fits < drv->fifo_depth ? (u32)fits : drv->fifo_depth;
}

/*
 * Drains up to `max` entries of the slot's FIFO into drv->fields; returns
 * the entries drained.
 */
static u64 drain_slot(struct copdrv *drv, struct copdrv_slot *s, u32 max)
{
	int got = trace_slot_drain_entries(s->regs, drv->fifo_depth,
					   drv->fields, drv->causes,
					   s->stack_area, drv->stack_depth,
					   drv->stacks, max);

	if (got < 0) {
		drv->stats.fifo_errors++;
		return 0;
	}
	/*
	 * The full barrier orders the drain's tail store before this load;
	 * it pairs with the producer's seq-cst store of stalled before its
	 * re-read of the tail (trace-unit.c), a Dekker pair.  A drain that
	 * made no room wakes nobody: the producer would only ring again.
	 */
	if (got > 0 && copdrv_load_full(&s->regs->stalled))
		copdrv_os_wake_producer(drv->os, &s->regs->fifo_tail);
	return (u64)got;
}

/*
 * How the guard words the poll read found changed are reported: not at
 * all while the trace unit places every change (unless it dropped some),
 * placed at a context switch (the emulator is stopped: the change came
 * after its last capture), else unplaced.  Returns -1 for not at all, or
 * the OVERLAY flags.
 */
static int read_flags(const struct copdrv_slot *s, int events_lost,
		      int final)
{
	if (!s->watched || events_lost)
		return 0;
	return final ? (int)COPSTREAM_OVERLAY_PLACED : -1;
}

/*
 * The group of a bound, announced slot: the samples with the placed
 * OVERLAYs among them, then the changes of the poll read.  Returns the
 * samples written.
 */
static u64 put_bound_group(struct copdrv *drv, struct copdrv_slot *s,
			   u32 tail, u64 drained, u64 cycle, int events_lost,
			   int final)
{
	int flags = read_flags(s, events_lost, final);
	u64 changed = 0, keep, written;
	u32 region;

	/*
	 * Events lost: a region may have changed and changed back unseen, so
	 * every region is reported again (unplaced: a window for each).
	 */
	if (events_lost && s->watched)
		for (region = 0; region < s->ctx.regions; region++)
			s->guards[region] = GUARD_UNKNOWN;
	/*
	 * Not reported at all: no read (put_samples_placed() keeps the room
	 * of the placed OVERLAYs).
	 */
	if (flags >= 0)
		changed = read_guards(drv, s);
	keep = changed * OVERLAY_BYTES + LOST_CAUSES * LOST_BYTES +
	       STALL_BYTES + TIME_BYTES;
	written = put_samples_placed(drv, s, tail, drained, cycle, keep);
	/* Placed changes still waiting come first: the read must follow. */
	if (flags >= 0 && !s->n_stalled)
		emit_guard_changes(drv, s, cycle, (u32)flags);
	return written;
}

/*
 * One poll group of one slot (see the top of the file).  Drained samples
 * go out only under an announced context.  While the slot's CONTEXT (or
 * RELEASE) waits for room they stay in the FIFO under the stall policy
 * (drain_budget()); those drained then are counted lost, buffer-full, and
 * the group says nothing more, so that no record of the slot precedes its
 * switch record with a later cycle.  On an idle slot they are counted
 * lost, no-context.  final: a hook's drain, the emulator stopped.
 */
static void poll_slot(struct copdrv *drv, struct copdrv_slot *s, int final)
{
	u64 drained, written = 0, cycle, time_ns;
	u32 tail = copdrv_read_once(&s->regs->fifo_tail);
	int events_lost;

	announce(drv, s);
	drained = drain_slot(drv, s, drain_budget(drv, s, final));
	events_lost = drain_events(drv, s, tail + (u32)drained);
	cycle = slot_cycles(s);
	time_ns = copdrv_os_now_ns(drv->os);
	count_hardware_losses(s);

	if (!s->announced || !s->bound)
		discard_events(drv, s);
	if (!s->announced) {
		s->pending[s->bound ? COPSTREAM_LOST_BUFFER_FULL :
			   COPSTREAM_LOST_NO_CONTEXT] += drained;
		return;
	}
	if (s->bound) {
		if (!final)
			s->watched = slot_watched(drv, s);
		written = put_bound_group(drv, s, tail, drained, cycle,
					  events_lost, final);
		s->pending[COPSTREAM_LOST_BUFFER_FULL] += drained - written;
	} else {
		s->pending[COPSTREAM_LOST_NO_CONTEXT] += drained;
	}
	if (emit_losses(drv, s, cycle, COPDRV_BUFFER_NORMAL) || written ||
	    s->bound) {
		if (s->bound)
			emit_stalls(drv, s, cycle);
		emit_time(drv, s, cycle, time_ns);
	}
}

static void poll_all(struct copdrv *drv)
{
	u64 begin = copdrv_os_now_ns(drv->os);
	u32 i;

	for (i = 0; i < drv->n_slots; i++)
		poll_slot(drv, &drv->slots[i], 0);
	drv->stats.polls++;
	drv->stats.poll_ns += copdrv_os_now_ns(drv->os) - begin;
}

/* ---- Images ------------------------------------------------------------- */

static int same_image(const struct copstream_image_id *a,
		      const struct copstream_image_id *b)
{
	return a->device == b->device && a->inode == b->inode &&
	       a->size == b->size && a->hash == b->hash;
}

static int grow_images(struct copdrv *drv)
{
	u32 capacity = drv->images_capacity ? 2 * drv->images_capacity : 8;
	struct copdrv_image *images;
	u32 i;

	images = copdrv_os_alloc(drv->os, capacity * sizeof(*images));
	if (!images)
		return -ENOMEM;
	for (i = 0; i < drv->n_images; i++)
		images[i] = drv->images[i];
	copdrv_os_free(drv->os, drv->images);
	drv->images = images;
	drv->images_capacity = capacity;
	return 0;
}

/* The index of the context's image in the table, added if new. */
static int find_image(struct copdrv *drv, const struct copdrv_context *ctx)
{
	struct copdrv_image *image;
	u32 i;

	for (i = 0; i < drv->n_images; i++)
		if (same_image(&drv->images[i].id, &ctx->image))
			return (int)i;
	if (drv->n_images >= COPDRV_MAX_IMAGES)
		return -ENOSPC;
	if (drv->n_images == drv->images_capacity && grow_images(drv))
		return -ENOMEM;
	image = &drv->images[drv->n_images];
	image->path = copdrv_os_alloc(drv->os, ctx->path_length);
	if (!image->path)
		return -ENOMEM;
	for (i = 0; i < ctx->path_length; i++)
		image->path[i] = ctx->path[i];
	image->path_length = ctx->path_length;
	image->id = ctx->image;
	image->sent = 0;
	return (int)drv->n_images++;
}

/* Whether a bound context of some slot uses image number `image`. */
static int image_bound(const struct copdrv *drv, u32 image)
{
	u32 i;

	for (i = 0; i < drv->n_slots; i++)
		if (drv->slots[i].bound && drv->slots[i].image == image)
			return 1;
	return 0;
}

/*
 * At a start: forgets the images no bound context uses (their IMAGE
 * would be written again anyway), so the table holds the bound ones and
 * those of one session, never more than COPDRV_MAX_IMAGES.
 */
static void prune_images(struct copdrv *drv)
{
	u32 i, slot, kept = 0;

	for (i = 0; i < drv->n_images; i++) {
		if (!image_bound(drv, i)) {
			copdrv_os_free(drv->os, drv->images[i].path);
			continue;
		}
		for (slot = 0; slot < drv->n_slots; slot++)
			if (drv->slots[slot].bound && drv->slots[slot].image == i)
				drv->slots[slot].image = kept;
		drv->images[kept++] = drv->images[i];
	}
	drv->n_images = kept;
}

/* ---- The reader ---------------------------------------------------------- */

/*
 * Whether to wake the reader now: when the buffer holds a watermark's
 * worth (an eighth of it), when the reader has not been woken for
 * COPDRV_WAKE_LATENCY_NS, or when the stream has ended.  Like OProfile's
 * buffer watershed, this keeps a wakeup (hosted: a send) off most polls.
 */
static int wake_due(struct copdrv *drv)
{
	u64 now;

	if (!drv->buffer.data)
		return 0;
	now = copdrv_os_now_ns(drv->os);
	if (!drv->buffer.ended &&
	    copdrv_buffer_used(&drv->buffer) < drv->buffer.size / 8 &&
	    now - drv->last_wake_ns < COPDRV_WAKE_LATENCY_NS)
		return 0;
	drv->last_wake_ns = now;
	return 1;
}

/* Drops the driver lock, then wakes the reader if wake_due() says so. */
static void unlock_and_wake(struct copdrv *drv)
{
	int wake = wake_due(drv);

	copdrv_os_unlock(drv->os);
	if (wake)
		copdrv_os_buffer_wake(drv->os);
}

/* ---- Binding ------------------------------------------------------------ */

/*
 * The slot now holds the context in s->ctx (bound) or nothing: remember
 * the switch's cycle and, in a session, write CONTEXT or RELEASE.  The
 * caller has drained the slot for the previous context.
 */
static void switch_slot(struct copdrv *drv, struct copdrv_slot *s, u32 bound)
{
	s->bound = bound;
	s->announced = !drv->running;
	s->switch_cycle = slot_cycles(s);
	s->watched = bound ? slot_watched(drv, s) : 0;
	discard_events(drv, s);
	if (drv->running)
		announce(drv, s);
}

static int context_valid(const struct copdrv *drv,
			 const struct copdrv_context *ctx)
{
	u32 i;

	if (ctx->slot >= drv->n_slots || ctx->regions > COPDRV_MAX_REGIONS)
		return 0;
	if (ctx->regions && (ctx->guard_offset % 4 != 0 ||
			     ctx->guard_offset + 4ull * ctx->regions >
			     drv->ls_size))
		return 0;
	if (!ctx->path || ctx->path_length < 1 ||
	    ctx->path_length > COPSTREAM_MAX_PATH)
		return 0;
	for (i = 0; i < ctx->path_length; i++)
		if (ctx->path[i] == 0)
			return 0;
	return 1;
}

static int reserve_guards(struct copdrv *drv, struct copdrv_slot *s,
			  u32 regions)
{
	u64 *guards, *stalled;
	u32 i;

	if (regions <= s->guards_capacity)
		return 0;
	guards = copdrv_os_alloc(drv->os, regions * sizeof(*guards));
	stalled = copdrv_os_alloc(drv->os, regions * sizeof(*stalled));
	if (!guards || !stalled) {
		copdrv_os_free(drv->os, guards);
		copdrv_os_free(drv->os, stalled);
		return -ENOMEM;
	}
	for (i = 0; i < regions; i++)
		stalled[i] = GUARD_UNKNOWN;
	copdrv_os_free(drv->os, s->guards);
	copdrv_os_free(drv->os, s->stalled);
	s->guards = guards;
	s->stalled = stalled;
	s->guards_capacity = regions;
	s->n_stalled = 0;
	return 0;
}

/*
 * Fills *ctx from the BIND message in `box` (docs/trace-unit.md,
 * "Mailbox"); `ls` is the shim's handle on the context's local store.
 * The path stays in the mailbox: bind before the next message is posted.
 */
int copdrv_mailbox_context(const struct trace_regs_mailbox *box, void *ls,
			   struct copdrv_context *ctx)
{
	if (box->op != TRACE_MAILBOX_BIND ||
	    box->path_length > TRACE_MAILBOX_PATH_MAX)
		return -EINVAL;
	*ctx = (struct copdrv_context){
		.slot = box->slot,
		.pid = (u32)box->pid,
		.tid = (u32)box->tid,
		.context_id = box->context_id,
		.object_id = box->object_id,
		.image = { .device = box->image_device,
			   .inode = box->image_inode,
			   .size = box->image_file_size,
			   .hash = box->image_hash },
		.image_offset = box->image_offset,
		.path = (const u8 *)box->path,
		.path_length = box->path_length,
		.ls = ls,
		.guard_offset = box->guard_ls_offset,
		.regions = box->guard_count,
	};
	return 0;
}

/*
 * A context the driver cannot take (bad guard table or path, no memory)
 * still ends the previous one's time on the slot: its samples are drained
 * and the slot released, so the new context's samples count as lost
 * (no-context) instead of going to the old one.
 */
int copdrv_bind(struct copdrv *drv, const struct copdrv_context *ctx)
{
	struct copdrv_slot *s;
	int image = -EINVAL, err = -EINVAL;

	if (ctx->slot >= drv->n_slots)
		return -EINVAL;
	copdrv_os_lock(drv->os);
	s = &drv->slots[ctx->slot];
	if (drv->running)
		poll_slot(drv, s, 1);
	if (context_valid(drv, ctx)) {
		image = find_image(drv, ctx);
		err = image < 0 ? image : reserve_guards(drv, s, ctx->regions);
	}
	if (err) {
		if (s->bound)
			switch_slot(drv, s, 0);
		unlock_and_wake(drv);
		return err;
	}
	s->ctx = *ctx;
	s->ctx.path = NULL;
	s->image = (u32)image;
	switch_slot(drv, s, 1);
	unlock_and_wake(drv);
	return 0;
}

/*
 * ended: the context will never be bound again; its END follows the
 * slot's RELEASE.  An END still waiting for room when the next context on
 * the slot ends is replaced (that context stays live for the reader).
 */
static void unbind_slot(struct copdrv *drv, u32 slot, int ended)
{
	struct copdrv_slot *s;

	if (slot >= drv->n_slots)
		return;
	copdrv_os_lock(drv->os);
	s = &drv->slots[slot];
	if (s->bound) {
		if (drv->running)
			poll_slot(drv, s, 1);
		if (ended && drv->running) {
			s->end_pending = 1;
			s->end_context = s->ctx.context_id;
			s->end_cycle = slot_cycles(s);
		}
		switch_slot(drv, s, 0);
	}
	unlock_and_wake(drv);
}

void copdrv_unbind(struct copdrv *drv, u32 slot)
{
	unbind_slot(drv, slot, 0);
}

void copdrv_unbind_end(struct copdrv *drv, u32 slot)
{
	unbind_slot(drv, slot, 1);
}

/* ---- Start, poll, stop -------------------------------------------------- */

static int params_valid(const struct copdrv *drv,
			const struct copdrv_params *p)
{
	if (p->lfsr_value > 0xFFFFFF || p->lfsr_count > 0xFFFFFF ||
	    !p->lfsr_value != !p->lfsr_count)
		return 0;
	if (p->poll_interval_ns < COPDRV_POLL_MIN_NS ||
	    p->poll_interval_ns > COPDRV_POLL_MAX_NS)
		return 0;
	if (p->clock_hz < 1 || p->fifo_depth != drv->fifo_depth)
		return 0;
	if (p->fifo_full > COPSTREAM_FIFO_STALL || p->dither > 1 ||
	    p->watermark >= drv->fifo_depth ||
	    p->event > COPSTREAM_EVENT_INSTRUCTIONS)
		return 0;
	return p->buffer_bytes == 0 ||
	       (p->buffer_bytes >= COPDRV_BUFFER_MIN &&
		p->buffer_bytes <= COPDRV_BUFFER_MAX);
}

/* A fresh event buffer for a session; the old one is freed. */
static int new_buffer(struct copdrv *drv, u32 bytes)
{
	u64 reserve = (u64)drv->n_slots * LOST_CAUSES * LOST_BYTES +
		      STOP_BYTES;
	u64 size = (bytes ? bytes : COPDRV_BUFFER_DEFAULT) & ~7ull;
	u8 *data = copdrv_os_alloc(drv->os, size);

	if (!data)
		return -ENOMEM;
	copdrv_os_free(drv->os, drv->buffer.data);
	copdrv_buffer_init(&drv->buffer, data, size, reserve);
	return 0;
}

static void reset_session(struct copdrv *drv)
{
	struct copdrv_stats empty = { 0 };
	u32 i;

	drv->stats = empty;
	drv->stopping = 0;
	prune_images(drv);
	for (i = 0; i < drv->n_images; i++)
		drv->images[i].sent = 0;
	for (i = 0; i < drv->n_slots; i++) {
		struct copdrv_slot *s = &drv->slots[i];

		slot_configure(drv, s);
		slot_load(drv, s, drv->params.lfsr_value);
		slot_baseline(drv, s);
		s->announced = !s->bound;
		s->end_pending = 0;
		s->transfer_sent = 0;	/* as the START says */
	}
}

int copdrv_start(struct copdrv *drv, const struct copdrv_params *params)
{
	int err;
	u32 i;

	copdrv_os_lock(drv->os);
	err = drv->running ? -EBUSY : 0;
	if (!err && !params_valid(drv, params))
		err = -EINVAL;
	if (!err)
		err = new_buffer(drv, params->buffer_bytes);
	if (err) {
		copdrv_os_unlock(drv->os);
		return err;
	}
	drv->params = *params;
	drv->start_time_ns = copdrv_os_now_ns(drv->os);
	drv->last_wake_ns = drv->start_time_ns;
	reset_session(drv);
	emit_start(drv);
	for (i = 0; i < drv->n_slots; i++)
		announce(drv, &drv->slots[i]);
	err = copdrv_os_timer_start(drv->os, params->poll_interval_ns,
				    &((struct trace_regs_header *)
				      drv->regs)->doorbell);
	if (err) {
		for (i = 0; i < drv->n_slots; i++) {
			slot_load(drv, &drv->slots[i], 0);
			slot_unconfigure(&drv->slots[i]);
		}
		emit_stop(drv);
		copdrv_buffer_end(&drv->buffer);
	} else {
		drv->running = 1;
	}
	copdrv_os_unlock(drv->os);
	copdrv_os_buffer_wake(drv->os);
	return err;
}

void copdrv_poll(struct copdrv *drv)
{
	copdrv_os_lock(drv->os);
	if (drv->running)
		poll_all(drv);
	unlock_and_wake(drv);
}

void copdrv_poll_doorbell(struct copdrv *drv)
{
	copdrv_os_lock(drv->os);
	if (drv->running) {
		poll_all(drv);
		drv->stats.doorbell_polls++;
	}
	unlock_and_wake(drv);
}

int copdrv_stop(struct copdrv *drv)
{
	u32 i;

	copdrv_os_timer_stop(drv->os);
	copdrv_os_lock(drv->os);
	if (!drv->running) {
		copdrv_os_unlock(drv->os);
		return -EINVAL;
	}
	for (i = 0; i < drv->n_slots; i++) {
		slot_load(drv, &drv->slots[i], 0);
		slot_unconfigure(&drv->slots[i]);
	}
	drv->stopping = 1;
	poll_all(drv);
	for (i = 0; i < drv->n_slots; i++) {
		struct copdrv_slot *s = &drv->slots[i];

		emit_losses(drv, s, slot_cycles(s), COPDRV_BUFFER_FINAL);
	}
	emit_stop(drv);
	copdrv_buffer_end(&drv->buffer);
	drv->running = 0;
	copdrv_os_unlock(drv->os);
	copdrv_os_buffer_wake(drv->os);
	return 0;
}

/* ---- Life cycle, statistics, reader ------------------------------------- */

static int alloc_scratch(struct copdrv *drv)
{
	drv->fields = copdrv_os_alloc(drv->os,
				      drv->fifo_depth * sizeof(*drv->fields));
	drv->causes = copdrv_os_alloc(drv->os,
				      drv->fifo_depth * sizeof(*drv->causes));
	drv->stalls = copdrv_os_alloc(drv->os, COPSTREAM_MAX_REASONS / 2);
	drv->guard_words = copdrv_os_alloc(drv->os, COPDRV_MAX_REGIONS *
					   sizeof(*drv->guard_words));
	if (drv->stack_depth)
		drv->stacks = copdrv_os_alloc(drv->os, (u64)drv->fifo_depth *
			trace_stack_record_words(drv->stack_depth) *
			sizeof(*drv->stacks));
	return drv->fields && drv->causes && drv->stalls && drv->guard_words &&
	       (drv->stacks || !drv->stack_depth) ? 0 : -ENOMEM;
}

/*
 * The header is read once, into drv->header, and checked there with the
 * trace unit's validator (trace_regs_check()): every pointer the driver
 * keeps into the file is computed from that copy, so a host process that
 * rewrites the header later changes nothing the driver relies on.
 */
struct copdrv *copdrv_create(struct copdrv_os *os, void *regs,
			     u64 regs_size, int *error)
{
	const struct trace_regs_header *h;
	struct copdrv *drv;
	u32 i;

	drv = copdrv_os_alloc(os, sizeof(*drv));
	if (!drv) {
		*error = -ENOMEM;
		return NULL;
	}
	h = &drv->header;
	drv->os = os;
	drv->regs = regs;
	if (regs_size >= sizeof(*h))
		trace_regs_snapshot(&drv->header, regs);
	if (trace_regs_check(h, regs_size) != TRACE_REGS_OK) {
		copdrv_os_free(os, drv);
		*error = -EINVAL;
		return NULL;
	}
	drv->n_slots = h->n_slots;
	drv->fifo_depth = h->fifo_depth;
	drv->ls_size = h->ls_size;
	drv->contexts = drv->regs + h->contexts_offset;
	drv->n_contexts = h->n_contexts;
	drv->context_stride = h->context_stride;
	drv->stack_depth = h->stack_depth;
	for (i = 0; i < drv->n_slots; i++) {
		drv->slots[i].index = i;
		drv->slots[i].announced = 1;
		drv->slots[i].regs = (struct trace_regs_slot *)
			(drv->regs + h->slots_offset + (u64)i * h->slot_stride);
		drv->slots[i].stack_area = trace_stack_area(regs, h, i);
	}
	*error = alloc_scratch(drv);
	if (*error) {
		copdrv_destroy(drv);
		return NULL;
	}
	return drv;
}

const struct trace_regs_header *copdrv_header(const struct copdrv *drv)
{
	return &drv->header;
}

void copdrv_destroy(struct copdrv *drv)
{
	u32 i;

	if (drv->running)
		copdrv_stop(drv);
	for (i = 0; i < drv->n_slots; i++) {
		copdrv_os_free(drv->os, drv->slots[i].guards);
		copdrv_os_free(drv->os, drv->slots[i].stalled);
	}
	for (i = 0; i < drv->n_images; i++)
		copdrv_os_free(drv->os, drv->images[i].path);
	copdrv_os_free(drv->os, drv->images);
	copdrv_os_free(drv->os, drv->buffer.data);
	copdrv_os_free(drv->os, drv->fields);
	copdrv_os_free(drv->os, drv->causes);
	copdrv_os_free(drv->os, drv->stalls);
	copdrv_os_free(drv->os, drv->stacks);
	copdrv_os_free(drv->os, drv->guard_words);
	copdrv_os_free(drv->os, drv);
}

void copdrv_get_stats(struct copdrv *drv, struct copdrv_stats *stats)
{
	u32 i, cause;

	copdrv_os_lock(drv->os);
	*stats = drv->stats;
	stats->running = drv->running;
	stats->ended = drv->buffer.ended;
	for (i = 0; i < drv->n_slots; i++)
		for (cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
			stats->lost_pending += drv->slots[i].pending[cause];
	if (drv->buffer.data) {
		stats->bytes_written = drv->buffer.head;
		/* pairs with the reader's release store of tail */
		stats->bytes_read = copdrv_load_acquire(&drv->buffer.tail);
		stats->buffer_bytes = drv->buffer.size;
		stats->buffer_used = copdrv_buffer_used(&drv->buffer);
		stats->buffer_high_water = drv->buffer.high_water;
	}
	copdrv_os_unlock(drv->os);
}

u64 copdrv_buffer_peek(struct copdrv *drv, const u8 **bytes, int *ended)
{
	if (!drv->buffer.data) {
		*bytes = NULL;
		*ended = 0;
		return 0;
	}
	return copdrv_buffer_readable(&drv->buffer, bytes, ended);
}

void copdrv_buffer_consume(struct copdrv *drv, u64 bytes)
{
	copdrv_buffer_take(&drv->buffer, bytes);
}
