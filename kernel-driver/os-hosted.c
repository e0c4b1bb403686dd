/*
 * os-hosted.c - the driver's OS shim in user space (see copdrv-os.h) and
 * the hosted driver built on it (copdrv-hosted.h).
 *
 * Memory is calloc, the driver lock a pthread mutex, time CLOCK_MONOTONIC.
 * The poll timer is a thread that sleeps on the trace unit's doorbell (a
 * futex word in the register file) until each deadline and calls
 * copdrv_poll(); its deadlines advance by whole intervals and skip the
 * ones it missed.  When a producer rings the doorbell (a FIFO passed its
 * watermark, or stalls) the thread wakes early and calls
 * copdrv_poll_doorbell(), and the next deadline is an interval after that
 * poll.  A stop rings the doorbell too, so the thread sees it at once.
 *
 * The reader's side of the event buffer is one end of a Unix socket pair.
 * Whoever calls buffer_wake() (the poll thread after a poll, a hook after
 * its records) sends the new bytes on with a non-blocking send, so a poll
 * costs one system call more and no other thread is woken; what the socket
 * cannot take stays in the buffer, which fills, and the driver counts the
 * samples that do not fit.  After a stop a finisher thread sends the rest,
 * blocking, and closes the socket.  If the reader closed its end, the
 * bytes are thrown away.
 *
 * Local stores are read from the guest RAM mapped in this process: the
 * handle is the host address of local-store byte 0.
 */
#include "kernel-driver/copdrv-hosted.h"
#include "trace-unit/trace-unit.h"

#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PREFAULT_BYTES	(64u << 10)
#define PAGE_BYTES	4096u

struct copdrv_os {
	struct copdrv *drv;
	unsigned int flags;
	u32 ls_size;
	pthread_mutex_t lock;		/* the driver lock */

	/* Poll timer. */
	pthread_t poll_thread;
	int poll_thread_running;
	int timer_stopping;		/* atomic */
	u32 *doorbell;			/* the register file's */
	u64 interval_ns;
	u64 poll_cpu_ns;		/* of the last poll thread, at its end */

	/* The stream: event buffer -> socket. */
	pthread_mutex_t flush_lock;	/* held by the one thread sending */
	int stream_fd;			/* writing end of the socket pair */
	int reader_gone;		/* the reader closed its end */
	pthread_t finisher;		/* sends the end of a stopped stream */
	int finisher_running;
	int finisher_fd;		/* -1 once the finisher closed it */
	pthread_mutex_t fd_lock;	/* finisher_fd's close against a shutdown */
};

/* ---- Shim: memory, lock, time ------------------------------------------- */

/*
 * Large blocks (the event buffer) are touched page by page at once, as
 * vmalloc would allocate them, so that the poll path takes no page fault.
 */
void *copdrv_os_alloc(struct copdrv_os *os, size_t bytes)
{
	volatile u8 *block = calloc(1, bytes ? bytes : 1);

	if (block && bytes >= PREFAULT_BYTES)
		for (size_t at = 0; at < bytes; at += PAGE_BYTES)
			block[at] = 0;
	return (void *)block;
}

void copdrv_os_free(struct copdrv_os *os, void *ptr)
{
	free(ptr);
}

void copdrv_os_lock(struct copdrv_os *os)
{
	pthread_mutex_lock(&os->lock);
}

void copdrv_os_unlock(struct copdrv_os *os)
{
	pthread_mutex_unlock(&os->lock);
}

u64 copdrv_os_now_ns(struct copdrv_os *os)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000u + (u64)ts.tv_nsec;
}

/* ---- Shim: local store -------------------------------------------------- */

int copdrv_os_read_ls(struct copdrv_os *os, void *ls, u32 offset,
		      u32 *words, u32 count)
{
	const u32 *at = (const u32 *)((const u8 *)ls + offset);

	if (!ls || offset % 4 != 0 || offset > os->ls_size ||
	    count > (os->ls_size - offset) / 4)
		return -EFAULT;
	for (u32 i = 0; i < count; i++)
		words[i] = le32toh(__atomic_load_n(&at[i], __ATOMIC_RELAXED));
	return 0;
}

/* ---- Shim: poll timer --------------------------------------------------- */

static u64 thread_cpu_ns(pthread_t thread)
{
	struct timespec ts;
	clockid_t clock;

	if (pthread_getcpuclockid(thread, &clock) ||
	    clock_gettime(clock, &ts))
		return 0;
	return (u64)ts.tv_sec * 1000000000u + (u64)ts.tv_nsec;
}

static int timer_stopping(struct copdrv_os *os)
{
	return __atomic_load_n(&os->timer_stopping, __ATOMIC_ACQUIRE);
}

/*
 * Sleeps on the doorbell until the deadline.  Returns 1 when it rang (a
 * producer wants a drain), 0 at the deadline.
 */
static int timer_wait(struct copdrv_os *os, u32 *seen, u64 deadline)
{
	for (;;) {
		u64 now = copdrv_os_now_ns(os);

		if (now >= deadline || timer_stopping(os))
			return 0;
		if (trace_doorbell_wait(os->doorbell, *seen, deadline - now)) {
			*seen = __atomic_load_n(os->doorbell,
						__ATOMIC_ACQUIRE);
			return !timer_stopping(os);
		}
	}
}

static void *poll_thread_main(void *arg)
{
	struct copdrv_os *os = arg;
	u64 deadline = copdrv_os_now_ns(os) + os->interval_ns;
	u32 seen = __atomic_load_n(os->doorbell, __ATOMIC_ACQUIRE);

	while (!timer_stopping(os)) {
		u64 now;

		if (timer_wait(os, &seen, deadline)) {
			copdrv_poll_doorbell(os->drv);
			deadline = copdrv_os_now_ns(os) + os->interval_ns;
			continue;
		}
		if (timer_stopping(os))
			break;
		copdrv_poll(os->drv);
		now = copdrv_os_now_ns(os);
		deadline += os->interval_ns;
		if (deadline <= now)
			deadline = now + os->interval_ns;
	}
	os->poll_cpu_ns = thread_cpu_ns(pthread_self());
	return NULL;
}

int copdrv_os_timer_start(struct copdrv_os *os, u64 interval_ns,
			  u32 *doorbell)
{
	int err;

	if (os->flags & COPDRV_HOSTED_MANUAL_POLL)
		return 0;
	os->interval_ns = interval_ns;
	os->doorbell = doorbell;
	os->timer_stopping = 0;
	os->poll_cpu_ns = 0;
	err = pthread_create(&os->poll_thread, NULL, poll_thread_main, os);
	if (err)
		return -err;
	pthread_setname_np(os->poll_thread, "copdrv-poll");
	os->poll_thread_running = 1;
	return 0;
}

void copdrv_os_timer_stop(struct copdrv_os *os)
{
	if (!os->poll_thread_running)
		return;
	__atomic_store_n(&os->timer_stopping, 1, __ATOMIC_RELEASE);
	trace_doorbell_ring(os->doorbell);
	pthread_join(os->poll_thread, NULL);
	os->poll_thread_running = 0;
}

void copdrv_os_wake_producer(struct copdrv_os *os, u32 *tail)
{
	trace_futex_wake(tail);
}

/* ---- Shim: the stream socket ------------------------------------------- */

/*
 * Sends what the buffer holds, as far as the socket takes it without
 * blocking (or, with block set, all of it until the stream's end).  A
 * reader that has gone makes the rest be thrown away.  Called with
 * flush_lock held: the buffer has one reader.
 */
static void flush(struct copdrv_os *os, int block)
{
	for (;;) {
		const u8 *bytes;
		int ended;
		u64 count = copdrv_buffer_peek(os->drv, &bytes, &ended);
		ssize_t sent;

		if (!count)
			return;
		if (os->reader_gone) {
			copdrv_buffer_consume(os->drv, count);
			continue;
		}
		sent = send(os->stream_fd, bytes, count,
			    MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
		if (sent > 0) {
			copdrv_buffer_consume(os->drv, (u64)sent);
		} else if (sent < 0 && errno == EINTR) {
			continue;
		} else if (sent < 0 && (errno == EAGAIN ||
					errno == EWOULDBLOCK)) {
			return;
		} else {
			os->reader_gone = 1;
		}
	}
}

/*
 * New bytes: the caller (the poll thread, or a hook) sends them on at
 * once, unless another thread is already sending.  What the socket cannot
 * take now waits in the buffer for the next poll.
 */
void copdrv_os_buffer_wake(struct copdrv_os *os)
{
	if (pthread_mutex_trylock(&os->flush_lock))
		return;
	if (os->stream_fd >= 0)
		flush(os, 0);
	pthread_mutex_unlock(&os->flush_lock);
}

/* After the stop: sends the rest, blocking, then closes the socket. */
static void *finish_stream(void *arg)
{
	struct copdrv_os *os = arg;

	pthread_mutex_lock(&os->flush_lock);
	flush(os, 1);
	pthread_mutex_lock(&os->fd_lock);
	close(os->stream_fd);
	os->stream_fd = -1;
	os->finisher_fd = -1;
	pthread_mutex_unlock(&os->fd_lock);
	pthread_mutex_unlock(&os->flush_lock);
	return NULL;
}

/*
 * Waits for the last session's finisher; abandon: its reader is gone.  A
 * finisher that has closed its socket already is not disturbed: its
 * descriptor's number may belong to another file by now (a client's
 * connection to copsim was shut down that way).
 */
static void join_finisher(struct copdrv_os *os, int abandon)
{
	if (!os->finisher_running)
		return;
	pthread_mutex_lock(&os->fd_lock);
	if (abandon && os->finisher_fd >= 0)
		shutdown(os->finisher_fd, SHUT_RDWR);
	pthread_mutex_unlock(&os->fd_lock);
	pthread_join(os->finisher, NULL);
	os->finisher_running = 0;
}

static int start_finisher(struct copdrv_os *os)
{
	int error;

	os->finisher_fd = os->stream_fd;
	error = pthread_create(&os->finisher, NULL, finish_stream, os);
	if (error) {
		finish_stream(os);
		return -error;
	}
	os->finisher_running = 1;
	return 0;
}

/* ---- The hosted driver -------------------------------------------------- */

void copdrv_hosted_error(int error, const char *what, char *err,
			 size_t errlen)
{
	snprintf(err, errlen, "kernel driver: %s: %s", what, strerror(-error));
}

static int init_sync(struct copdrv_os *os)
{
	pthread_mutex_init(&os->lock, NULL);
	pthread_mutex_init(&os->flush_lock, NULL);
	pthread_mutex_init(&os->fd_lock, NULL);
	return 0;
}

struct copdrv_os *copdrv_hosted_create(void *regs, size_t size,
				       unsigned int flags, char *err,
				       size_t errlen)
{
	struct copdrv_os *os;
	int error;

	if (trace_regs_validate(regs, size, err, errlen))
		return NULL;
	os = calloc(1, sizeof(*os));
	if (!os || init_sync(os)) {
		snprintf(err, errlen, "kernel driver: out of memory");
		free(os);
		return NULL;
	}
	os->flags = flags;
	os->stream_fd = -1;
	os->ls_size = ((const struct trace_regs_header *)regs)->ls_size;
	os->drv = copdrv_create(os, regs, size, &error);
	if (!os->drv) {
		copdrv_hosted_error(error, "create", err, errlen);
		free(os);
		return NULL;
	}
	return os;
}

void copdrv_hosted_destroy(struct copdrv_os *os)
{
	struct copdrv_stats stats;

	if (!os)
		return;
	copdrv_get_stats(os->drv, &stats);
	if (stats.running) {
		copdrv_stop(os->drv);
		start_finisher(os);
	}
	join_finisher(os, 1);
	copdrv_destroy(os->drv);
	pthread_mutex_destroy(&os->lock);
	pthread_mutex_destroy(&os->flush_lock);
	pthread_mutex_destroy(&os->fd_lock);
	free(os);
}

struct copdrv *copdrv_hosted_driver(struct copdrv_os *os)
{
	return os->drv;
}

int copdrv_hosted_start(struct copdrv_os *os,
			const struct copdrv_params *params, int *stream_fd,
			char *err, size_t errlen)
{
	struct copdrv_stats stats;
	int pair[2];
	int error;

	copdrv_get_stats(os->drv, &stats);
	if (stats.running) {
		copdrv_hosted_error(-EBUSY, "start", err, errlen);
		return -1;
	}
	join_finisher(os, 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair)) {
		snprintf(err, errlen, "kernel driver: stream socket: %s",
			 strerror(errno));
		return -1;
	}
	shutdown(pair[0], SHUT_WR);
	os->stream_fd = pair[1];
	os->reader_gone = 0;
	error = copdrv_start(os->drv, params);
	if (error) {
		os->stream_fd = -1;
		close(pair[0]);
		close(pair[1]);
		copdrv_hosted_error(error, "start", err, errlen);
		return -1;
	}
	*stream_fd = pair[0];
	return 0;
}

int copdrv_hosted_stop(struct copdrv_os *os, char *err, size_t errlen)
{
	int error = copdrv_stop(os->drv);

	if (error) {
		snprintf(err, errlen, "kernel driver: stop: not started");
		return -1;
	}
	error = start_finisher(os);
	if (error) {
		copdrv_hosted_error(error, "stream finisher", err, errlen);
		return -1;
	}
	return 0;
}

unsigned long long copdrv_hosted_poll_cpu_ns(struct copdrv_os *os)
{
	if (os->poll_thread_running)
		return thread_cpu_ns(os->poll_thread);
	return os->poll_cpu_ns;
}
