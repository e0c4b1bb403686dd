// SPDX-License-Identifier: GPL-2.0
/*
 * copdrv-mailbox.c - copdrv.ko's reader of the register file's mailboxes.
 *
 * copsim posts every bind, unbind and end of a context on a slot in that
 * slot's mailbox (docs/trace-unit.md, "Mailbox"): what the hosted driver
 * learns through direct calls reaches the guest through the register
 * file.  For each message not yet acked the reader copies the message
 * into the module's memory, calls the core as the hosted glue does
 * (copdrv_bind with copdrv_mailbox_context's context, copdrv_unbind,
 * copdrv_unbind_end), so a switch drains the slot first, and then stores
 * the ack.
 *
 * When.  Probe scans once, so the contexts bound before the module was
 * loaded are known when insmod returns.  A session start sets the
 * header's mailbox_reader to 1 (copsim then waits for each ack before the
 * switched slot runs again), scans, and starts a kernel thread that scans
 * every MAILBOX_PERIOD_US until the session stops, when mailbox_reader
 * goes back to 0.  No thread runs between sessions: copsim does not wait
 * then, and the scan at the next start reads each slot's latest message,
 * which says what is bound there now.
 *
 * Untrusted input.  The mailboxes' place comes from the core's checked
 * copy of the header (copdrv_header()), never from the file; a message is
 * copied before any of it is used, and the core bounds every field (slot,
 * path length, guard table).  The context's local store handle is its
 * live mailbox: the guest has no access to the contexts' RAM, so
 * os-linux.c reads the guard words the message carried, at most
 * TRACE_MAX_GUARDS of them.
 */
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/string.h>

#include "kernel-driver/linux/copdrv-linux.h"

/*
 * How often the thread looks (a 100 us hrtimer was measured at 184 us
 * mean latency to a host write).
 */
#define MAILBOX_PERIOD_US	100

static struct trace_regs_mailbox *mailbox(struct copdrv_dev *cd, u32 slot)
{
	const struct trace_regs_header *h = copdrv_header(cd->drv);

	return (struct trace_regs_mailbox *)((char *)cd->regs +
		h->mailbox_offset + (size_t)slot * h->mailbox_stride);
}

static void bind_from(struct copdrv_dev *cd, struct trace_regs_mailbox *box,
		      u32 slot)
{
	const struct trace_regs_mailbox *msg = cd->message;
	struct copdrv_context ctx;
	int err = -EINVAL;

	if (msg->slot == slot)
		err = copdrv_mailbox_context(msg, box, &ctx);
	if (!err)
		err = copdrv_bind(cd->drv, &ctx);
	if (err)
		dev_warn_ratelimited(&cd->pdev->dev, "slot %u: context %llu not bound: error %d; its samples count as lost (no-context)\n",
				     slot, msg->context_id, err);
}

/* Acts on one slot's pending message, if any, and acks it. */
static void take_message(struct copdrv_dev *cd, u32 slot)
{
	struct trace_regs_mailbox *box = mailbox(cd, slot);
	u32 seq = trace_mailbox_pending(box);

	if (!seq)
		return;
	/* After the acquire load of seq: the message as copsim posted it. */
	memcpy(cd->message, box, sizeof(*cd->message));
	switch (cd->message->op) {
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
				     slot, cd->message->op);
	}
	trace_mailbox_ack(box, seq);
}

/* Every slot's mailbox once; called by one thread at a time. */
void copdrv_mailbox_scan(struct copdrv_dev *cd)
{
	u32 slot, n_slots = copdrv_header(cd->drv)->n_slots;

	for (slot = 0; slot < n_slots; slot++)
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

	/* pairs with copsim's acquire load of mailbox_reader after a post */
	virt_store_release(&h->mailbox_reader, reading);
}

/* A session starts: scan, then a thread scans until it stops. */
int copdrv_mailbox_start(struct copdrv_dev *cd)
{
	struct task_struct *task;

	set_reader(cd, 1);
	/*
	 * The store of mailbox_reader before the scan's loads of seq: pairs
	 * with copsim's post (release store of seq) before its load of
	 * mailbox_reader, so a message is either seen here or waits for us.
	 */
	virt_mb();
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
