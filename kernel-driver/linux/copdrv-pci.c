// SPDX-License-Identifier: GPL-2.0
/*
 * copdrv-pci.c - copdrv.ko's front end: the trace unit as a PCI device.
 *
 * The trace unit's register file (emulator/trace-regs.h) reaches the
 * guest as BAR 2 of an ivshmem-plain device (1af4:1110) whose memory
 * backend is the register file copsim shares with its emulators.  That
 * memory is written by host processes while the module runs, so it is
 * untrusted input, as a NIC's descriptor rings are: probe maps the BAR
 * write-back (it is RAM on the host), takes one copy of the header and
 * checks it with the trace unit's validator (trace_regs_check()) before
 * it claims the BAR; anything else is refused with one dmesg line naming
 * the reason.  The driver core then keeps its own checked copy
 * (copdrv_header()) and nothing reads a geometry field from the file
 * again.
 *
 * Binding.  ivshmem-plain devices serve other purposes too, so the module
 * has no MODULE_DEVICE_TABLE (nothing loads it automatically) and a
 * device whose BAR 2 does not start with the magic is left alone with an
 * info line.  One trace unit at a time: a second is refused at probe,
 * before anything is registered.
 *
 * Probe creates the driver core over the Linux shim (os-linux.c), scans
 * the mailboxes once (contexts bound before insmod), registers
 * /dev/copdrv and the statistics (copdrv-dev.c).  Remove (rmmod, or an
 * unbind through sysfs) stops a running session, so the stream ends with
 * its losses and STOP, and wakes the reader, which takes the rest and
 * gets end-of-file; the last reference (the reader's close, or remove)
 * frees the core.
 */
#include <linux/debugfs.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "kernel-driver/linux/copdrv-linux.h"

#define COPDRV_BAR		2
#define COPDRV_IVSHMEM_DEVICE	0x1110	/* ivshmem, vendor Red Hat/Qumranet */

/* The one trace unit bound, or NULL. */
static DEFINE_MUTEX(copdrv_unit_lock);
static struct copdrv_dev *copdrv_unit;

/*
 * Whether the BAR holds a register file this driver speaks: 0, or
 * -ENODEV after one dmesg line that names the reason.  `h` is the
 * caller's copy of the header.
 */
static int check_header(struct pci_dev *pdev,
			const struct trace_regs_header *h, u64 bar_size)
{
	enum trace_regs_fault fault = trace_regs_check(h, bar_size);

	switch (fault) {
	case TRACE_REGS_OK:
		return 0;
	case TRACE_REGS_BAD_MAGIC:
		dev_info(&pdev->dev, "refused: register file magic is not %s\n",
			 TRACE_REGS_MAGIC);
		break;
	case TRACE_REGS_BAD_VERSION:
		dev_err(&pdev->dev, "refused: register file version %u, this driver speaks %u\n",
			h->version, TRACE_REGS_VERSION);
		break;
	default:
		dev_err(&pdev->dev, "refused: register file of %llu bytes in BAR %d of %llu: %s\n",
			h->file_size, COPDRV_BAR, bar_size,
			trace_regs_fault_text(fault));
	}
	return -ENODEV;
}

/* Maps BAR 2 and checks its header; claims the BAR only if it is ours. */
static int map_registers(struct copdrv_dev *cd)
{
	struct pci_dev *pdev = cd->pdev;
	resource_size_t start = pci_resource_start(pdev, COPDRV_BAR);
	resource_size_t len = pci_resource_len(pdev, COPDRV_BAR);
	struct trace_regs_header header;
	int err;

	if (len < sizeof(header)) {
		dev_info(&pdev->dev, "refused: BAR %d of %llu bytes holds no register file header\n",
			 COPDRV_BAR, (u64)len);
		return -ENODEV;
	}
	err = pcim_enable_device(pdev);
	if (err)
		return err;
	cd->regs = devm_memremap(&pdev->dev, start, len, MEMREMAP_WB);
	if (IS_ERR(cd->regs))
		return PTR_ERR(cd->regs);
	cd->regs_size = len;
	trace_regs_snapshot(&header, cd->regs);
	err = check_header(pdev, &header, len);
	if (err)
		return err;
	return pci_request_region(pdev, COPDRV_BAR, KBUILD_MODNAME);
}

static void copdrv_dev_free(struct kref *ref)
{
	struct copdrv_dev *cd = container_of(ref, struct copdrv_dev, ref);

	if (cd->drv)
		copdrv_destroy(cd->drv);
	kfree(cd->message);
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
	cd->message = kzalloc(sizeof(*cd->message), GFP_KERNEL);
	if (!cd->message) {
		kfree(cd);
		return NULL;
	}
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
	const struct trace_regs_header *h;
	int err;

	cd->drv = copdrv_create(&cd->os, cd->regs, cd->regs_size, &err);
	if (!cd->drv) {
		dev_err(&pdev->dev, "refused: register file changed during probe: error %d\n",
			err);
		return err;
	}
	cd->os.drv = cd->drv;
	h = copdrv_header(cd->drv);
	err = copdrv_dev_register(cd);
	if (err) {
		dev_err(&pdev->dev, "refused: /dev/copdrv: error %d\n", err);
		return err;
	}
	copdrv_stats_create(cd);
	copdrv_mailbox_scan(cd);
	dev_info(&pdev->dev, "trace unit: %u slots, %u contexts, FIFO depth %u, local store %u bytes\n",
		 h->n_slots, h->n_contexts, h->fifo_depth, h->ls_size);
	return 0;
}

/* Takes the one place of a trace unit: 0, or -EBUSY with a dmesg line. */
static int claim_unit(struct copdrv_dev *cd)
{
	int err = 0;

	mutex_lock(&copdrv_unit_lock);
	if (copdrv_unit) {
		dev_err(&cd->pdev->dev, "refused: trace unit %s is already bound (one at a time)\n",
			pci_name(copdrv_unit->pdev));
		err = -EBUSY;
	} else {
		copdrv_unit = cd;
	}
	mutex_unlock(&copdrv_unit_lock);
	return err;
}

static void release_unit(struct copdrv_dev *cd)
{
	mutex_lock(&copdrv_unit_lock);
	if (copdrv_unit == cd)
		copdrv_unit = NULL;
	mutex_unlock(&copdrv_unit_lock);
}

static int copdrv_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct copdrv_dev *cd = copdrv_dev_alloc(pdev);
	int err;

	if (!cd)
		return -ENOMEM;
	err = map_registers(cd);
	if (!err)
		err = claim_unit(cd);
	if (!err) {
		err = copdrv_dev_start(cd);
		if (err)
			release_unit(cd);
	}
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

	debugfs_remove_recursive(cd->debugfs);
	mutex_lock(&cd->control);
	copdrv_get_stats(cd->drv, &stats);
	if (stats.running) {
		copdrv_stop(cd->drv);
		dev_info(&pdev->dev, "removed during a session: stopped it\n");
	}
	copdrv_mailbox_stop(cd);
	/* pairs with the readers' smp_load_acquire: gone means STOP is in */
	smp_store_release(&cd->gone, true);
	mutex_unlock(&cd->control);
	copdrv_os_buffer_wake(&cd->os);
	copdrv_dev_unregister(cd);
	release_unit(cd);
	copdrv_dev_put(cd);
}

/*
 * Every ivshmem device: probe keeps only those whose BAR 2 holds a
 * register file.  No MODULE_DEVICE_TABLE: the module is loaded by hand
 * (insmod, guest.py), never for any ivshmem device that appears.
 */
static const struct pci_device_id copdrv_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, COPDRV_IVSHMEM_DEVICE) },
	{ }
};

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
