/*
 * copsim-host.h - the kernel driver hosted in copsim.
 *
 * copsim is the emulated kernel: its scheduler calls the driver's hooks at
 * every bind and unbind (emulator/copsim/copsim-hooks.h), and its socket
 * carries the driver's control interface (copdrv-control.h), as the Cell
 * kernel called spu_switch_notify and exposed oprofilefs.  This module is
 * the glue: the hooks call the core (copdrv.h, hosted by os-hosted.c), the
 * control requests set, start and stop sessions.
 *
 * The hooks stay installed while copsim runs, so the driver always knows
 * which context is on which slot.  A session's start and stop must run
 * while no emulator runs (they load LFSRs and take baselines): they are
 * done inside copsim's start and stop hooks, which copsim calls under its
 * scheduler lock, by removing and installing the hooks again; there the
 * glue holds every running context at its gate for the moment it takes.
 *
 * Functions that can fail return -1 with one line in err[errlen].
 */
#ifndef COPROF_COPSIM_HOST_H
#define COPROF_COPSIM_HOST_H

#include "emulator/copsim/copsim.h"
#include "kernel-driver/copdrv.h"
#include "abi/copdrv-control.h"
#include "lfsr/lfsr.h"

#include <stddef.h>
#include <stdio.h>

struct copsim_driver;

/*
 * The poll interval's floor: the shortest interval fill_params() chooses
 * (and copcontrol accepts); the minimum-rate rule of lfsr_min_count().
 */
#define COPSIM_DRIVER_MIN_POLL_NS	LFSR_MIN_POLL_NS

/* What `copsim --event=SPU_CYCLES:N --stream-out FILE -- CMD` asks for. */
struct copsim_run_session {
	uint32_t count;		/* N: one capture every N events */
	uint32_t event;		/* COPDRV_EVENT_* (SPU_CYCLES, default) */
	uint32_t fifo_full;	/* COPDRV_FIFO_STALL (default) or _DROP */
	uint32_t dither;	/* 1 (default): each interval N + jitter */
	uint64_t dither_seed;	/* its seed (default: from getrandom) */
};

/* Installs the hooks and the control requests in a created copsim. */
struct copsim_driver *copsim_driver_attach(struct copsim *sim, char *err,
					   size_t errlen);

/* Removes the hooks and the control requests from a copsim that goes on
 * without the driver (which it stops if running); then free it. */
void copsim_driver_detach(struct copsim_driver *driver);

/* After copsim_destroy() (which stops a running session), or a detach. */
void copsim_driver_free(struct copsim_driver *driver);

/*
 * The parameters of the next session (SET).  fill_params() computes them
 * with lfsr/ for one capture every `count` cycles: the LFSR value and the
 * poll interval that keeps the FIFO from overflowing at the nominal clock,
 * at least 100 us, refusing a count below lfsr_min_count(); the rest is
 * drop, no dither, a half-FIFO watermark.  SET refuses the same counts.
 */
int copsim_driver_set(struct copsim_driver *driver,
		      const struct copdrv_control_params *params, char *err,
		      size_t errlen);
int copsim_driver_fill_params(struct copsim_driver *driver, uint32_t count,
			      struct copdrv_control_params *params, char *err,
			      size_t errlen);

/* Starts a session; *stream_fd is the stream's reading end (caller's). */
int copsim_driver_start(struct copsim_driver *driver, int *stream_fd,
			char *err, size_t errlen);
int copsim_driver_stop(struct copsim_driver *driver, char *err,
		       size_t errlen);

void copsim_driver_stats(struct copsim_driver *driver,
			 struct copdrv_stats *stats,
			 unsigned long long *poll_cpu_ns);

/*
 * One line per slot that ran: the trace unit's counters at the last stop,
 * as the driver copied them then, so this may be called after
 * copsim_destroy() (copsim-run.c reports after the teardown's stop).
 */
void copsim_driver_report_slots(struct copsim_driver *driver, FILE *out);

/*
 * copsim --event=SPU_CYCLES:N --stream-out FILE -- COMMAND ARGS: runs
 * COMMAND against a private copsim (config, with its socket in a fresh
 * directory and COPSIM_SOCKET set for COMMAND) with the session that
 * `session` describes started before COMMAND runs, writes the
 * whole stream to stream_path, prints each slot's trace-unit counters and
 * the stream's totals on stderr, and returns COMMAND's exit status (128 +
 * signal when killed), or 125 when copsim itself failed, 126 when COMMAND
 * could not run, 127 when it was not found.
 */
int copsim_driver_run_command(const struct copsim_config *config,
			      const struct copsim_run_session *session,
			      const char *stream_path, char *const command[]);

#endif /* COPROF_COPSIM_HOST_H */
