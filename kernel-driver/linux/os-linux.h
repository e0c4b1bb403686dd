/* SPDX-License-Identifier: GPL-2.0 */
/*
 * os-linux.h - the Linux module's OS shim (os-linux.c) as the front end
 * (copdrv-pci.c) sees it.
 *
 * One shim instance per trace unit: it owns the driver lock, the poll
 * thread and the reader's wait queue, and points at the core's driver
 * once the front end has created it.
 */
#ifndef COPROF_OS_LINUX_H
#define COPROF_OS_LINUX_H

#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include "kernel-driver/copdrv.h"

struct copdrv_os {
	struct mutex lock;		/* the driver lock of copdrv-os.h */
	struct copdrv *drv;		/* set by the front end after create */
	struct task_struct *poller;	/* the poll thread while a session runs */
	u64 interval_ns;
	u32 *doorbell;
	u32 doorbell_seen;
	wait_queue_head_t readers;	/* the reader of /dev/copdrv */
	atomic_t wakes;			/* buffer wakes so far */
};

void copdrv_os_linux_init(struct copdrv_os *os);

#endif /* COPROF_OS_LINUX_H */
