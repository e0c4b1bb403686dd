/*
 * copdrv-control.h - the driver's control interface on copsim's socket.
 *
 * Who writes and reads: the driver hosted in copsim answers these
 * messages (emulator/copsim/copsim-host.c); copcontrol and coprof
 * (control/driver.c) send them, and with --driver=linux fill the same
 * replies from copdrv.ko's answers (control/driver-linux.c).  Version rule: as copsim's protocol
 * (abi/copsim-protocol.h): fixed-width fields, a new one at the end of
 * its structure (SET still takes the first form, below), and a raised
 * COPSIM_PROTOCOL_VERSION; the driver's bounds are abi/copdrv-limits.h.
 *
 * Like oprofilefs (/dev/oprofile/cpu_buffer_size, .../enable, .../buffer),
 * but as messages of copsim's socket protocol (abi/copsim-protocol.h)
 * in the range copsim reserves for the driver.  Each request gets one
 * reply of its type with COPSIM_REPLY set, beginning with a struct
 * copsim_status:
 *
 *   SET    the session's parameters: LFSR value and count N (computed by
 *          lfsr/: the value must be the one for N, and N at least
 *          lfsr_min_count()), poll interval, event buffer size, FIFO-full
 *          policy, doorbell watermark, dither and its seed, and the
 *          event that clocks the LFSRs (SPU_CYCLES or SPU_INSTRUCTIONS).
 *          Refused while a session runs.  A SET of an earlier form is
 *          taken with the rest zero: the first (24-byte parameters, up to
 *          buffer_bytes and a zero word) as drop, half-FIFO watermark, no
 *          dither; the second (40 bytes, up to dither_seed) as
 *          SPU_CYCLES.
 *   GET    the parameters, and what the driver is: slots, FIFO depth,
 *          nominal clock, whether a session runs.
 *   START  starts a session with the parameters set; the reply carries the
 *          stream's reading end as a descriptor (SCM_RIGHTS): the whole
 *          escape-coded stream, START to STOP, then end-of-file.
 *   STOP   ends the session (the rest of the stream follows on the
 *          descriptor).
 *   STATS  the driver's statistics (struct copdrv_stats, widened),
 *          with the session's stalls and stall time, in all and by slot.
 *
 * Errors are errno values with one line: EINVAL (bad parameters), EBUSY
 * (SET or START while a session runs), EALREADY (STOP with none).
 */
#ifndef COPROF_COPDRV_CONTROL_H
#define COPROF_COPDRV_CONTROL_H

#include "abi/copsim-protocol.h"
#include "abi/copdrv-limits.h"

#include <stdint.h>

#define COPDRV_CONTROL_SET	0x100u
#define COPDRV_CONTROL_GET	0x101u
#define COPDRV_CONTROL_START	0x102u
#define COPDRV_CONTROL_STOP	0x103u
#define COPDRV_CONTROL_STATS	0x104u

/* event: what clocks the slots' LFSRs (the trace unit's TRACE_EVENT_*). */
#define COPDRV_EVENT_CYCLES	0u	/* SPU_CYCLES: modelled cycles */
#define COPDRV_EVENT_INSTRUCTIONS 1u	/* SPU_INSTRUCTIONS: retired insns */

/* fifo_full: what a capture does when the slot's FIFO is full. */
#define COPDRV_FIFO_DROP	0u	/* dropped, counted (the Cell) */
#define COPDRV_FIFO_STALL	1u	/* the coprocessor waits: no loss */

struct copdrv_control_params {
	uint32_t lfsr_value;
	uint32_t lfsr_count;
	uint64_t poll_interval_ns;
	uint32_t buffer_bytes;		/* 0: the driver's default */
	uint32_t fifo_full;		/* COPDRV_FIFO_DROP or _STALL */
	uint32_t dither;		/* 1: each interval N plus a jitter */
	uint32_t watermark;		/* FIFO fill that wakes the driver, below
					 * the FIFO depth; 0: half the FIFO */
	uint64_t dither_seed;		/* the jitter generator's seed */
	uint32_t event;			/* COPDRV_EVENT_*; 0 in the second form */
	uint32_t reserved;		/* zero */
};

/* The parameters' first form, which SET still takes. */
#define COPDRV_CONTROL_PARAMS_V1_SIZE	24u
/* Their second form (up to dither_seed), which SET takes as SPU_CYCLES. */
#define COPDRV_CONTROL_PARAMS_V2_SIZE	40u

struct copdrv_control_params_v1 {
	uint32_t lfsr_value;
	uint32_t lfsr_count;
	uint64_t poll_interval_ns;
	uint32_t buffer_bytes;
	uint32_t reserved;		/* zero */
};

/* SET: the parameters, of either form. */
struct copdrv_control_set {
	struct copsim_header header;
	struct copdrv_control_params params;
};

struct copdrv_control_set_v1 {
	struct copsim_header header;
	struct copdrv_control_params_v1 params;
};

/* GET, START, STOP, STATS: a bare header. */
struct copdrv_control_request {
	struct copsim_header header;
};

/* The reply to SET, GET, START and STOP. */
struct copdrv_control_reply {
	struct copsim_header header;
	struct copsim_status status;
	struct copdrv_control_params params;
	uint32_t running;
	uint32_t slots;
	uint32_t fifo_depth;
	uint32_t stack_depth;		/* frames per call stack (the register
					 * file's area, --call-graph); 0: none */
	uint64_t clock_hz;
};

/* The reply to STATS: struct copdrv_stats with fixed-width fields. */
struct copdrv_control_stats {
	struct copsim_header header;
	struct copsim_status status;
	uint32_t running;
	uint32_t ended;
	uint64_t polls;
	uint64_t samples;
	uint64_t lost_by_cause[8];	/* index: LOST cause */
	uint64_t lost_pending;
	uint64_t records[16];		/* index: record code */
	uint64_t records_waiting;
	uint64_t bytes_written;
	uint64_t bytes_read;
	uint64_t buffer_bytes;
	uint64_t buffer_used;
	uint64_t buffer_high_water;
	uint64_t fifo_errors;
	uint64_t guard_errors;
	uint64_t poll_ns;
	uint64_t poll_cpu_ns;
	uint64_t overlays_placed;	/* placed OVERLAY records written */
	uint64_t overlay_events_lost;	/* overlay events the unit dropped */
	uint64_t doorbell_polls;	/* polls the doorbell started early */
	uint64_t stalls;		/* captures that waited, all slots */
	uint64_t stall_ns;		/* time producers spent stalled */
	uint64_t slot_stalls[64];	/* by slot (COPDRV_MAX_SLOTS) */
	uint64_t slot_stall_ns[64];
};

#endif /* COPROF_COPDRV_CONTROL_H */
