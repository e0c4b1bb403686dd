// SPDX-License-Identifier: GPL-2.0
/*
 * copdrv-mailbox.c - copdrv.ko's reader of the register file's mailboxes.
 *
 * copsim posts every bind, unbind and end of a context on a slot in that
 * slot's mailbox (docs/trace-unit.md, "Mailbox"): what the hosted driver
 * learns through direct calls reaches the guest through the register
 * file.  A kernel thread, running from probe to remove whether or not a
 * session runs, scans the mailboxes every MAILBOX_PERIOD_US: for each
 * message not yet acked it calls the core as the hosted glue does
 * (copdrv_bind with copdrv_mailbox_context's context, copdrv_unbind,
 * copdrv_unbind_end), so a switch drains the slot first, and then stores
 * the ack.  Probe scans once before the thread starts, so the contexts
 * bound before the module was loaded are known when insmod returns.
 * From probe to remove the header's mailbox_reader is 1, so copsim waits
 * for each ack before the switched slot runs again.
 *
 * The context's local store handle is its mailbox: the guest has no
 * access to the contexts' RAM, so os-linux.c reads the guard words the
 * message carried at the bind.
 */
#include <linux/delay.h>
#include <linux/kthread.h>

#include "kernel-driver/linux/copdrv-linux.h"
#include "abi/trace-regs.h"

/* How often the thread looks (the issue measured a 100 us hrtimer at
 * 184 us mean latency to a host write). */
#define MAILBOX_PERIOD_US	100

static struct trace_regs_mailbox *mailbox(struct copdrv_dev *cd, u32 slot)
{
	const struct trace_regs_header *h = cd->regs;

	return (struct trace_regs_mailbox *)((char *)cd->regs +
		h->mailbox_offset + (size_t)slot * h->mailbox_stride);
}

static void bind_from(struct copdrv_dev *cd, struct trace_regs_mailbox *box,
		      u32 slot)
{
	struct copdrv_context ctx;
	int err = -EINVAL;

	if (READ_ONCE(box->slot) == slot)
		err = copdrv_mailbox_context(box, box, &ctx);
	if (!err)
		err = copdrv_bind(cd->drv, &ctx);
	if (err)
		dev_warn_ratelimited(&cd->pdev->dev, "slot %u: context %llu not bound: error %d; its samples count as lost (no-context)\n",
				     slot, READ_ONCE(box->context_id), err);
}

/* Acts on one slot's pending message, if any, and acks it. */
static void take_message(struct copdrv_dev *cd, u32 slot)
{
	struct trace_regs_mailbox *box = mailbox(cd, slot);
	u32 seq = trace_mailbox_pending(box);

	if (!seq)
		return;
	switch (READ_ONCE(box->op)) {
	case TRACE_MAILBOX_BIND:
		bind_from(cd, box, slot);
		break;
	case TRACE_MAILBOX_UNBIND:
		copdrv_unbind(cd->drv, slot);
		break;
	case TRACE_MAILBOX_END:
		copdrv_unbind_end(cd->drv, slot);
		break;
	default:
		dev_warn_ratelimited(&cd->pdev->dev, "slot %u: mailbox op %u unknown; ignored\n",
				     slot, READ_ONCE(box->op));
	}
	trace_mailbox_ack(box, seq);
}

void copdrv_mailbox_scan(struct copdrv_dev *cd)
{
	const struct trace_regs_header *h = cd->regs;
	u32 slot;

	for (slot = 0; slot < h->n_slots; slot++)
		take_message(cd, slot);
}

static int mailbox_thread(void *data)
{
	struct copdrv_dev *cd = data;

	while (!kthread_should_stop()) {
		copdrv_mailbox_scan(cd);
		usleep_range(MAILBOX_PERIOD_US, 2 * MAILBOX_PERIOD_US);
	}
	return 0;
}

/* Says in the header that copsim must wait for our acks (or not). */
static void set_reader(struct copdrv_dev *cd, u32 reading)
{
	struct trace_regs_header *h = cd->regs;

	smp_store_release(&h->mailbox_reader, reading);
}

int copdrv_mailbox_start(struct copdrv_dev *cd)
{
	struct task_struct *task;

	set_reader(cd, 1);
	copdrv_mailbox_scan(cd);
	task = kthread_run(mailbox_thread, cd, "copdrv-mailbox");
	if (IS_ERR(task)) {
		set_reader(cd, 0);
		return PTR_ERR(task);
	}
	cd->mailbox_thread = task;
	return 0;
}

void copdrv_mailbox_stop(struct copdrv_dev *cd)
{
	if (!cd->mailbox_thread)
		return;
	kthread_stop(cd->mailbox_thread);
	cd->mailbox_thread = NULL;
	set_reader(cd, 0);
}
