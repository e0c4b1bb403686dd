/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copdrv-limits.h - the kernel driver's numbers that its users rely on:
 * the event buffer's bounds and default, the poll interval's bounds and
 * how long a waiting reader may sleep.
 *
 * Who writes and reads: the driver core (kernel-driver/core.c, hosted in
 * copsim and in copdrv.ko) enforces them and refuses a SET outside them
 * (abi/copdrv-control.h); copcontrol and coprof (control/) check their
 * options against them and wait on a stream for the wake latency.
 *
 * Version rule: a bound may widen, never narrow, without a new
 * COPSIM_PROTOCOL_VERSION: a SET that was taken stays taken.  Kernel
 * style and no includes: the module and user space share this file.
 */
#ifndef COPROF_ABI_COPDRV_LIMITS_H
#define COPROF_ABI_COPDRV_LIMITS_H

/* The event buffer's size: bounds and default, in bytes. */
#define COPDRV_BUFFER_MIN	(64u << 10)
#define COPDRV_BUFFER_MAX	(1024u << 20)
#define COPDRV_BUFFER_DEFAULT	(4u << 20)

/* Poll interval bounds, in nanoseconds. */
#define COPDRV_POLL_MIN_NS	10000ull		/* 10 us */
#define COPDRV_POLL_MAX_NS	10000000000ull		/* 10 s */

/* The reader is woken at least this often while data waits (ns). */
#define COPDRV_WAKE_LATENCY_NS	50000000ull		/* 50 ms */

#endif /* COPROF_ABI_COPDRV_LIMITS_H */
