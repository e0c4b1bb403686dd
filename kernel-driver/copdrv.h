/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copdrv.h - the coprof kernel driver core: what a host (copsim now, a
 * Linux module later) calls.
 *
 * The driver turns the trace unit's register file into the escape-coded
 * sample stream (escape-protocol/README.md):
 *
 *   copdrv_start()   programs and loads every slot's LFSR with the value
 *                    user space chose, writes START, then IMAGE and
 *                    CONTEXT for every context already bound, and starts
 *                    the poll timer;
 *   copdrv_poll()    (the timer) drains every slot's FIFO into samples,
 *                    reports changed overlay guard words, lost samples and
 *                    one TIME record per slot;
 *   copdrv_bind()    (context switch, before the context runs) drains the
 *   copdrv_unbind()  slot, then writes CONTEXT or RELEASE (and END for a
 *                    context that ended, copdrv_unbind_end());
 *   copdrv_stop()    drains a last time, writes the pending losses and STOP.
 *
 * The stream goes into a bounded event buffer that one reader empties with
 * copdrv_buffer_peek() and copdrv_buffer_consume().  When it is full,
 * samples are counted and reported as LOST buffer-full records, never
 * silently dropped: for every slot, the capture counter's advance during
 * the session equals the slot's samples in the stream plus its LOST counts.
 *
 * Start and stop load LFSRs and take the counters' baselines.  The hosted
 * glue calls them with every slot's emulator held (or exited) and the
 * hooks with the slot's emulator held.  copdrv.ko cannot hold the host's
 * emulators: it calls them while emulators run, the LFSR seqlock keeps
 * the load apart from the producer, and a load the seqlock refuses is
 * skipped and counted (lfsr_busy; kernel-driver/linux/README.md,
 * "Sessions while the emulators run").  The host keeps the register file
 * and every local store mapped while the driver uses them.
 *
 * Errors are negative errno values.  Everything here runs under the
 * driver lock of the OS shim (copdrv-os.h).
 */
#ifndef COPROF_COPDRV_H
#define COPROF_COPDRV_H

#include "kernel-driver/copdrv-os.h"
#include "abi/copdrv-limits.h"
#include "escape-protocol/copstream.h"

/*
 * Image identities the driver keeps, at most: each holds its path until
 * a start forgets those no bound context uses; a bind of one more is
 * refused (-ENOSPC), so a controller that announces a new identity at
 * every bind cannot grow the driver's memory without bound.
 */
#define COPDRV_MAX_IMAGES	1024u

/* Overlay regions (guard words) of one context, at most. */
#define COPDRV_MAX_REGIONS	1024u

/* What user space chose (lfsr/ computes the value and the interval). */
struct copdrv_params {
	u32 lfsr_value;		/* 24-bit reload value; 0: capture off */
	u32 lfsr_count;		/* cycles per capture N; 0 iff value is 0 */
	u64 poll_interval_ns;
	u64 clock_hz;		/* nominal coprocessor clock */
	u32 fifo_depth;		/* must be the register file's */
	u32 buffer_bytes;	/* event buffer size; 0: the default */
	u32 fifo_full;		/* COPSTREAM_FIFO_DROP or COPSTREAM_FIFO_STALL */
	/* FIFO fill that rings the doorbell, below fifo_depth; 0: half */
	u32 watermark;
	u32 dither;		/* 1: each interval N plus a seeded jitter */
	u64 dither_seed;
	/* what clocks the LFSRs: COPSTREAM_EVENT_CYCLES or _INSTRUCTIONS */
	u32 event;
};

/* Slots whose stall counters STATS carries (the trace unit's maximum). */
#define COPDRV_MAX_SLOTS	64u

/*
 * A context bound to a slot, as the host knows it.  The driver copies what
 * it keeps (the path too), so the host's storage may go after the call.
 */
struct copdrv_context {
	u32 slot;
	u32 pid;		/* host process that owns the context */
	u32 tid;		/* host thread that runs it */
	u64 context_id;
	u64 object_id;		/* address of the ELF header in the host */
	struct copstream_image_id image;
	u64 image_offset;	/* file offset of the ELF header */
	const u8 *path;		/* the image file's path, not NUL-terminated */
	u32 path_length;
	void *ls;		/* the shim's handle on the local store */
	u32 guard_offset;	/* LS offset of _ovly_buf_table */
	u32 regions;		/* guard words there; 0: no overlays */
};

struct copdrv_stats {
	u32 running;		/* started and not stopped */
	u32 ended;		/* stopped: STOP is in the buffer */
	u64 polls;
	u64 samples;		/* sample words written */
	u64 lost_by_cause[COPSTREAM_LOST_CAUSE_END];	/* in LOST records */
	u64 lost_pending;	/* counted, not reported yet */
	u64 records[COPSTREAM_CODE_END];		/* written, by code */
	u64 records_waiting;	/* records that had to wait for room */
	u64 bytes_written;
	u64 bytes_read;
	u64 buffer_bytes;
	u64 buffer_used;
	u64 buffer_high_water;
	u64 fifo_errors;	/* drains refused: FIFO pointers corrupt */
	u64 lfsr_busy;		/* LFSR loads skipped: seqlock held */
	u64 guard_errors;	/* guard words that could not be read */
	u64 overlays_placed;	/* placed OVERLAY records written */
	u64 overlay_events_lost;	/* events the trace unit dropped */
	u64 poll_ns;		/* wall time spent in polls */
	u64 doorbell_polls;	/* polls the trace unit's doorbell started */
	u64 stalls;		/* captures that waited for a full FIFO */
	u64 stall_ns;		/* wall time producers spent stalled */
	u64 slot_stalls[COPDRV_MAX_SLOTS];	/* the same by slot */
	u64 slot_stall_ns[COPDRV_MAX_SLOTS];
};

struct copdrv;

/*
 * A driver over the register file mapped at regs (regs_size bytes).  The
 * header is read once and checked (trace_regs_check()); nothing later
 * reads it from the file again.  Returns NULL with *error set (-ENOMEM,
 * -EINVAL for a header the validator refuses).
 */
struct copdrv *copdrv_create(struct copdrv_os *os, void *regs,
			     u64 regs_size, int *error);

struct trace_regs_header;
/* The register file's header as the driver read and checked it at create. */
const struct trace_regs_header *copdrv_header(const struct copdrv *drv);

/* Stops the driver if it runs and frees it. */
void copdrv_destroy(struct copdrv *drv);

int copdrv_start(struct copdrv *drv, const struct copdrv_params *params);
int copdrv_stop(struct copdrv *drv);

/*
 * One poll of every slot (the shim's timer calls it).  The shim calls
 * copdrv_poll_doorbell() instead when the trace unit rang the doorbell
 * (a FIFO passed its watermark, or a producer stalled): the same poll,
 * counted apart.
 */
void copdrv_poll(struct copdrv *drv);
void copdrv_poll_doorbell(struct copdrv *drv);

/*
 * Context-switch hooks.  Both are called whether the driver runs or not,
 * so that a start knows the contexts already bound.  bind: -EINVAL for a
 * bad slot, path or guard table, -ENOMEM; a refused context still ends the
 * previous one's time on the slot, and its samples count as lost
 * (no-context).
 */
int copdrv_bind(struct copdrv *drv, const struct copdrv_context *ctx);
struct trace_regs_mailbox;
/*
 * The context of a mailbox's BIND message; -EINVAL if it is none.  `box`
 * is memory the caller owns (copdrv.ko copies the message out of the
 * shared file first): ctx->path points into it.
 */
int copdrv_mailbox_context(const struct trace_regs_mailbox *box, void *ls,
			   struct copdrv_context *ctx);
void copdrv_unbind(struct copdrv *drv, u32 slot);
/*
 * The same for a context that ended (exited, faulted, reaped): it will
 * never be bound again, and the stream says so with an END after the
 * RELEASE (stream 1.3), so the reader can let go of it.
 */
void copdrv_unbind_end(struct copdrv *drv, u32 slot);

void copdrv_get_stats(struct copdrv *drv, struct copdrv_stats *stats);

/*
 * The reader's side of the event buffer, for one reader at a time.  peek
 * points *bytes at the oldest unread bytes and returns how many follow
 * contiguously (0: nothing now); *ended is set once the stream is complete
 * and wholly read.  consume frees bytes the reader has taken.  The host
 * keeps readers away across copdrv_start() and copdrv_destroy(), which
 * replace and free the buffer.
 */
u64 copdrv_buffer_peek(struct copdrv *drv, const u8 **bytes, int *ended);
void copdrv_buffer_consume(struct copdrv *drv, u64 bytes);

#endif /* COPROF_COPDRV_H */
