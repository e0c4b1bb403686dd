/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copdrv-linux.h - one trace unit as copdrv.ko holds it, shared by the
 * PCI front end (copdrv-pci.c), the mailbox reader (copdrv-mailbox.c) and
 * the reader's device and control files (copdrv-dev.c).
 *
 * The structure outlives the PCI device while the reader still has
 * /dev/copdrv open: remove stops the session and marks it gone, the reader
 * takes the rest of the stream and gets end-of-file, and the last
 * reference frees the core.
 *
 * The module is for x86-64 only: the core divides 64-bit values, uses
 * 64-bit atomic loads of the register file's counters, and reads the
 * register file in its native (little-endian) layout.
 */
#ifndef COPROF_COPDRV_LINUX_H
#define COPROF_COPDRV_LINUX_H

#include <asm/byteorder.h>
#include <linux/dcache.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>

#include "kernel-driver/linux/os-linux.h"
#include "abi/trace-regs.h"

#if !defined(CONFIG_X86_64) || !defined(__LITTLE_ENDIAN)
#error "copdrv.ko builds for x86-64 (little-endian) only"
#endif

struct copdrv_dev {
	struct kref ref;
	struct pci_dev *pdev;
	void *regs;		/* the mapped BAR 2: shared, never trusted */
	u64 regs_size;
	struct copdrv_os os;
	struct copdrv *drv;
	struct copdrv_params params;	/* for the next start */
	struct mutex control;	/* params, start, stop, gone */
	struct mutex reading;	/* the reader against start's new buffer */
	atomic_t readers;	/* 0 or 1: /dev/copdrv is open */
	bool gone;		/* the PCI device was removed */
	bool lfsr_busy_said;	/* say_lfsr_busy() has spoken */
	struct task_struct *mailbox_thread;	/* while a session runs */
	struct trace_regs_mailbox *message;	/* the mailbox thread's copy */
	struct miscdevice misc;
	struct dentry *debugfs;	/* copdrv/stats */
};

int copdrv_dev_register(struct copdrv_dev *cd);
void copdrv_dev_unregister(struct copdrv_dev *cd);
void copdrv_dev_put(struct copdrv_dev *cd);
void copdrv_stats_create(struct copdrv_dev *cd);
int copdrv_mailbox_start(struct copdrv_dev *cd);
void copdrv_mailbox_stop(struct copdrv_dev *cd);
void copdrv_mailbox_scan(struct copdrv_dev *cd);
extern const struct attribute_group *copdrv_control_groups[];

#endif /* COPROF_COPDRV_LINUX_H */
