/*
 * copdrv-hosted.h - the driver hosted in a user-space process (copsim, the
 * tests, the benchmark): the core of copdrv.h over the pthreads shim of
 * os-hosted.c.
 *
 * A hosted driver runs its poll thread while a session is on: it calls
 * copdrv_poll() at the poll interval.  The stream goes out through one end
 * of a Unix socket pair whose other end the host reads, as a process reads
 * /dev/oprofile/buffer: after each poll (and each hook) the new bytes are
 * sent on without blocking.  While the reader does not keep up, the socket
 * fills, then the event buffer, and the driver reports what did not fit as
 * LOST buffer-full records.  After a stop, a finisher thread sends the
 * rest of the stream and closes the socket: the reader sees end-of-file
 * after STOP.  The next start abandons what a previous reader left unread.
 *
 *     struct copdrv_os *os = copdrv_hosted_create(regs, size, 0, err, len);
 *     struct copdrv *drv = copdrv_hosted_driver(os);
 *     copdrv_bind(drv, &ctx);                 (the context-switch hooks)
 *     copdrv_hosted_start(os, &params, &fd, err, len);
 *     ... read(fd) until end-of-file, in another thread ...
 *     copdrv_hosted_stop(os, err, len);
 *     copdrv_hosted_destroy(os);
 *
 * The local-store handle in struct copdrv_context is, hosted, the host
 * address of the context's local-store byte 0 in its mapped guest RAM.
 * Functions that can fail return -1 (or NULL) and write one line saying
 * why into err[errlen].
 */
#ifndef COPROF_COPDRV_HOSTED_H
#define COPROF_COPDRV_HOSTED_H

#include "kernel-driver/copdrv.h"

#include <stddef.h>

/* copdrv_hosted_create() flags. */
#define COPDRV_HOSTED_MANUAL_POLL	1u	/* no poll thread: the host
						 * calls copdrv_poll() */

/*
 * A driver over the trace register file mapped at regs (size bytes),
 * which it validates.  The host keeps it mapped until destroy.
 */
struct copdrv_os *copdrv_hosted_create(void *regs, size_t size,
				       unsigned int flags, char *err,
				       size_t errlen);
void copdrv_hosted_destroy(struct copdrv_os *os);

struct copdrv *copdrv_hosted_driver(struct copdrv_os *os);

/*
 * Starts a session; *stream_fd receives the reading end of its stream
 * (the caller closes it).  A reader that goes away does not block the
 * driver: the rest of the stream is discarded.
 */
int copdrv_hosted_start(struct copdrv_os *os,
			const struct copdrv_params *params, int *stream_fd,
			char *err, size_t errlen);

/* Ends the session; the stream's last bytes follow on the socket. */
int copdrv_hosted_stop(struct copdrv_os *os, char *err, size_t errlen);

/* CPU time the poll thread used in this session, in nanoseconds. */
unsigned long long copdrv_hosted_poll_cpu_ns(struct copdrv_os *os);

/* A negative errno of the core as one line naming the operation. */
void copdrv_hosted_error(int error, const char *what, char *err,
			 size_t errlen);

#endif /* COPROF_COPDRV_HOSTED_H */
