// SPDX-License-Identifier: GPL-2.0
/*
 * copdrv-pci.c - copdrv.ko's front end: the trace unit as a PCI device.
 *
 * The trace unit's register file (abi/trace-regs.h) reaches the
 * guest as BAR 2 of an ivshmem-plain device (1af4:1110) whose memory
 * backend is the register file copsim shares with its emulators.  Probe
 * maps the BAR write-back (it is RAM on the host, shared with processes
 * there), checks the header (magic, version, header size, the file inside
 * the BAR) and refuses anything else with one dmesg line naming the
 * reason, then creates the portable driver core over the Linux shim
 * (os-linux.c) and offers the stream as /dev/copdrv with its control
 * files (copdrv-dev.c).  One trace unit: a second one is refused when
 * /dev/copdrv exists.
 *
 * Remove (rmmod, or an unbind through sysfs) stops a running session, so
 * the stream ends with its losses and STOP, and wakes the reader, which
 * takes the rest and gets end-of-file; the last reference (the reader's
 * close, or remove) frees the core.
 */
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "kernel-driver/linux/copdrv-linux.h"
#include "abi/trace-regs.h"

#define COPDRV_BAR		2
#define COPDRV_IVSHMEM_DEVICE	0x1110	/* ivshmem, vendor Red Hat/Qumranet */

/*
 * Whether the BAR holds a register file this driver speaks: 0, or
 * -ENODEV after one dmesg line that names the reason.
 */
static int check_header(struct pci_dev *pdev,
			const struct trace_regs_header *h, u64 bar_size)
{
	if (bar_size < sizeof(*h)) {
		dev_err(&pdev->dev, "refused: BAR %d of %llu bytes holds no register file header\n",
			COPDRV_BAR, bar_size);
		return -ENODEV;
	}
	if (memcmp(h->magic, TRACE_REGS_MAGIC, TRACE_REGS_MAGIC_SIZE)) {
		dev_err(&pdev->dev, "refused: register file magic is not %s\n",
			TRACE_REGS_MAGIC);
		return -ENODEV;
	}
	if (h->version != TRACE_REGS_VERSION) {
		dev_err(&pdev->dev, "refused: register file version %u, this driver speaks %u\n",
			h->version, TRACE_REGS_VERSION);
		return -ENODEV;
	}
	if (h->header_size != sizeof(*h) || h->file_size > bar_size ||
	    h->file_size < sizeof(*h)) {
		dev_err(&pdev->dev, "refused: register file header size %u, file size %llu do not fit BAR %d of %llu bytes\n",
			h->header_size, h->file_size, COPDRV_BAR, bar_size);
		return -ENODEV;
	}
	if (h->mailbox_stride != sizeof(struct trace_regs_mailbox) ||
	    h->mailbox_offset + (u64)h->n_slots * h->mailbox_stride >
	    h->file_size) {
		dev_err(&pdev->dev, "refused: register file mailboxes (%u bytes at %u) do not fit its %llu bytes\n",
			h->mailbox_stride, h->mailbox_offset, h->file_size);
		return -ENODEV;
	}
	return 0;
}

static int map_registers(struct copdrv_dev *cd)
{
	struct pci_dev *pdev = cd->pdev;
	resource_size_t start = pci_resource_start(pdev, COPDRV_BAR);
	resource_size_t len = pci_resource_len(pdev, COPDRV_BAR);
	int err;

	if (!len) {
		dev_err(&pdev->dev, "refused: no BAR %d\n", COPDRV_BAR);
		return -ENODEV;
	}
	err = pcim_enable_device(pdev);
	if (err)
		return err;
	err = pci_request_region(pdev, COPDRV_BAR, KBUILD_MODNAME);
	if (err)
		return err;
	cd->regs = devm_memremap(&pdev->dev, start, len, MEMREMAP_WB);
	if (IS_ERR(cd->regs))
		return PTR_ERR(cd->regs);
	cd->regs_size = len;
	return 0;
}

static void copdrv_dev_free(struct kref *ref)
{
	struct copdrv_dev *cd = container_of(ref, struct copdrv_dev, ref);

	if (cd->drv)
		copdrv_destroy(cd->drv);
	kfree(cd);
}

void copdrv_dev_put(struct copdrv_dev *cd)
{
	kref_put(&cd->ref, copdrv_dev_free);
}

static struct copdrv_dev *copdrv_dev_alloc(struct pci_dev *pdev)
{
	struct copdrv_dev *cd = kzalloc(sizeof(*cd), GFP_KERNEL);

	if (!cd)
		return NULL;
	kref_init(&cd->ref);
	cd->pdev = pdev;
	mutex_init(&cd->control);
	mutex_init(&cd->reading);
	copdrv_os_linux_init(&cd->os);
	return cd;
}

/* The core over the checked register file, and the reader's device. */
static int copdrv_dev_start(struct copdrv_dev *cd)
{
	struct pci_dev *pdev = cd->pdev;
	const struct trace_regs_header *h = cd->regs;
	int err;

	cd->drv = copdrv_create(&cd->os, cd->regs, h->file_size, &err);
	if (!cd->drv) {
		dev_err(&pdev->dev, "refused: register file geometry: error %d\n",
			err);
		return err;
	}
	cd->os.drv = cd->drv;
	cd->fifo_depth = h->fifo_depth;
	err = copdrv_mailbox_start(cd);
	if (err) {
		dev_err(&pdev->dev, "refused: mailbox thread: error %d\n", err);
		return err;
	}
	err = copdrv_dev_register(cd);
	if (err) {
		dev_err(&pdev->dev, "refused: /dev/copdrv: error %d (one trace unit at a time)\n",
			err);
		copdrv_mailbox_stop(cd);
		return err;
	}
	dev_info(&pdev->dev, "trace unit: %u slots, %u contexts, FIFO depth %u, local store %u bytes\n",
		 h->n_slots, h->n_contexts, h->fifo_depth, h->ls_size);
	return 0;
}

static int copdrv_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct copdrv_dev *cd = copdrv_dev_alloc(pdev);
	int err;

	if (!cd)
		return -ENOMEM;
	err = map_registers(cd);
	if (!err)
		err = check_header(pdev, cd->regs, cd->regs_size);
	if (!err)
		err = copdrv_dev_start(cd);
	if (err) {
		copdrv_dev_put(cd);
		return err;
	}
	pci_set_drvdata(pdev, cd);
	return 0;
}

static void copdrv_remove(struct pci_dev *pdev)
{
	struct copdrv_dev *cd = pci_get_drvdata(pdev);
	struct copdrv_stats stats;

	copdrv_mailbox_stop(cd);
	mutex_lock(&cd->control);
	copdrv_get_stats(cd->drv, &stats);
	if (stats.running) {
		copdrv_stop(cd->drv);
		dev_info(&pdev->dev, "removed during a session: stopped it\n");
	}
	/* A reader that sees gone sees the stream up to STOP. */
	smp_store_release(&cd->gone, true);
	mutex_unlock(&cd->control);
	copdrv_os_buffer_wake(&cd->os);
	copdrv_dev_unregister(cd);
	copdrv_dev_put(cd);
}

static const struct pci_device_id copdrv_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, COPDRV_IVSHMEM_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, copdrv_ids);

static struct pci_driver copdrv_pci_driver = {
	.name = KBUILD_MODNAME,
	.id_table = copdrv_ids,
	.probe = copdrv_probe,
	.remove = copdrv_remove,
	.dev_groups = copdrv_control_groups,
};
module_pci_driver(copdrv_pci_driver);

MODULE_DESCRIPTION("coprof trace unit driver: samples coprocessor PCs");
MODULE_LICENSE("GPL");
