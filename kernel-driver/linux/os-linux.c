// SPDX-License-Identifier: GPL-2.0
/*
 * os-linux.c - the driver core's OS shim (copdrv-os.h) over kernel
 * services, for copdrv.ko.
 *
 *   allocation       kvzalloc / kvfree
 *   driver lock      a mutex: the hooks and the poll may sleep on it
 *   clock            ktime_get_ns (CLOCK_MONOTONIC)
 *   poll timer       a kernel thread that sleeps on an absolute hrtimer
 *                    deadline (schedule_hrtimeout_range), then polls;
 *                    deadlines advance by the interval, so polls do not
 *                    drift
 *   doorbell         no interrupt: ivshmem-plain has none, and Debian
 *                    ships no ivshmem-server for the doorbell variant.  At
 *                    every poll the thread looks at the doorbell word and
 *                    calls copdrv_poll_doorbell() when it moved, so STATS
 *                    counts the polls a doorbell would have started
 *   producer wake    nothing to do: the stalled producer is a process on
 *                    the host, beyond the guest's reach; it re-reads the
 *                    FIFO tail at the end of each of its bounded waits
 *   reader wake      a wake count, and wake_up_interruptible on the
 *                    reader's wait queue (the reader waits for the count
 *                    to move past the one it saw before it looked)
 *   local store      none: the guest cannot see the contexts' RAM; the
 *                    handle is the context's mailbox (copdrv-mailbox.c),
 *                    whose BIND carried the guard words' values at the
 *                    bind; later reads find the message gone and fail
 *
 * So under the stall policy a full FIFO waits for the next poll (the
 * interval lfsr/ chose, at least 100 us) plus at most one of the
 * producer's wait slices, instead of being drained at once.
 */
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "kernel-driver/linux/os-linux.h"
#include "emulator/trace-regs.h"

/* How late a poll may come, so the timer can coalesce wakeups. */
#define POLL_SLACK_NS	(20 * NSEC_PER_USEC)

void copdrv_os_linux_init(struct copdrv_os *os)
{
	mutex_init(&os->lock);
	init_waitqueue_head(&os->readers);
}

void *copdrv_os_alloc(struct copdrv_os *os, size_t bytes)
{
	return kvzalloc(bytes, GFP_KERNEL);
}

void copdrv_os_free(struct copdrv_os *os, void *ptr)
{
	kvfree(ptr);
}

void copdrv_os_lock(struct copdrv_os *os)
{
	mutex_lock(&os->lock);
}

void copdrv_os_unlock(struct copdrv_os *os)
{
	mutex_unlock(&os->lock);
}

u64 copdrv_os_now_ns(struct copdrv_os *os)
{
	return ktime_get_ns();
}

/* One poll: a doorbell poll when a producer rang since the last one. */
static void poll_once(struct copdrv_os *os)
{
	/* pairs with the producers' increment of the doorbell (release) */
	u32 rung = copdrv_load_acquire(os->doorbell);

	if (rung != os->doorbell_seen) {
		os->doorbell_seen = rung;
		copdrv_poll_doorbell(os->drv);
	} else {
		copdrv_poll(os->drv);
	}
}

/* Sleeps until the absolute CLOCK_MONOTONIC deadline or kthread_stop. */
static void sleep_until(ktime_t deadline)
{
	set_current_state(TASK_IDLE);
	if (kthread_should_stop()) {
		__set_current_state(TASK_RUNNING);
		return;
	}
	schedule_hrtimeout_range(&deadline, POLL_SLACK_NS, HRTIMER_MODE_ABS);
}

static int poll_thread(void *data)
{
	struct copdrv_os *os = data;
	ktime_t deadline = ktime_add_ns(ktime_get(), os->interval_ns);

	while (!kthread_should_stop()) {
		sleep_until(deadline);
		if (kthread_should_stop())
			break;
		poll_once(os);
		deadline = ktime_add_ns(deadline, os->interval_ns);
		if (ktime_before(deadline, ktime_get()))
			deadline = ktime_add_ns(ktime_get(), os->interval_ns);
	}
	return 0;
}

int copdrv_os_timer_start(struct copdrv_os *os, u64 interval_ns,
			  u32 *doorbell)
{
	struct task_struct *task;

	os->interval_ns = interval_ns;
	os->doorbell = doorbell;
	os->doorbell_seen = copdrv_read_once(doorbell);
	task = kthread_run(poll_thread, os, "copdrv-poll");
	if (IS_ERR(task))
		return PTR_ERR(task);
	os->poller = task;
	return 0;
}

void copdrv_os_timer_stop(struct copdrv_os *os)
{
	if (!os->poller)
		return;
	kthread_stop(os->poller);
	os->poller = NULL;
}

void copdrv_os_wake_producer(struct copdrv_os *os, u32 *tail)
{
}

void copdrv_os_buffer_wake(struct copdrv_os *os)
{
	/*
	 * The buffer's bytes (written under the driver lock, before this
	 * call) before the new count: pairs with the reader's
	 * atomic_read_acquire() of the count before its look.
	 */
	smp_mb__before_atomic();
	atomic_inc(&os->wakes);
	wake_up_interruptible(&os->readers);
}

int copdrv_os_read_ls(struct copdrv_os *os, void *ls, u32 offset,
		      u32 *words, u32 count)
{
	const struct trace_regs_mailbox *box = ls;
	u32 i;

	if (!box || READ_ONCE(box->op) != TRACE_MAILBOX_BIND ||
	    READ_ONCE(box->guard_ls_offset) != offset ||
	    count > TRACE_MAX_GUARDS)
		return -EFAULT;
	for (i = 0; i < count; i++)
		words[i] = READ_ONCE(box->guards[i]);
	return 0;
}
