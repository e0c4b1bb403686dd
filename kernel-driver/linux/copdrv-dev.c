// SPDX-License-Identifier: GPL-2.0
/*
 * copdrv-dev.c - the stream as /dev/copdrv, its control files and its
 * statistics.
 *
 * The reader.  /dev/copdrv (a misc device) is the event buffer's one
 * reader: a second open gets -EBUSY.  read() copies the oldest unread
 * bytes of the stream, blocking (unless O_NONBLOCK) until there are some;
 * once STOP has been read it returns 0 (end-of-file) until the next
 * start, and 0 for good once the PCI device is gone.  poll() says
 * readable in the same cases.  The reading mutex keeps the reader away
 * while a start replaces the buffer (copdrv.h).
 *
 * The control files, in the manner of oprofilefs, are attributes of the
 * PCI device in its directory copdrv/ (/sys/bus/pci/devices/BDF/copdrv/,
 * apart from the PCI core's own files such as `enable`), one value each:
 * the session's parameters (struct copdrv_params, one decimal or 0x-hex
 * number each, refused with -EBUSY while a session runs) and `enable`
 * (write 1 to start, 0 to stop; reads whether a session runs).  The FIFO
 * depth is the register file's.  The core's statistics are one debugfs
 * file, copdrv/stats, one "name value" line each.
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kernel-driver/linux/copdrv-linux.h"

/* ---- The reader ---------------------------------------------------------- */

static struct copdrv_dev *dev_of_file(struct file *file)
{
	return container_of(file->private_data, struct copdrv_dev, misc);
}

static int copdrv_open(struct inode *inode, struct file *file)
{
	struct copdrv_dev *cd = dev_of_file(file);

	if (atomic_cmpxchg(&cd->readers, 0, 1))
		return -EBUSY;
	kref_get(&cd->ref);
	return stream_open(inode, file);
}

static int copdrv_release(struct inode *inode, struct file *file)
{
	struct copdrv_dev *cd = dev_of_file(file);

	atomic_set(&cd->readers, 0);
	copdrv_dev_put(cd);
	return 0;
}

/*
 * Copies what is readable now: bytes (> 0), 0 at the stream's end, or
 * -EAGAIN when the reader must wait.  *wakes is the wake count seen
 * before the look, to wait for a later one.
 */
static ssize_t read_now(struct copdrv_dev *cd, char __user *out, size_t len,
			int *wakes)
{
	const u8 *bytes;
	bool gone;
	int ended;
	u64 n;

	/*
	 * The wake count before the look: pairs with the barrier before the
	 * increment in copdrv_os_buffer_wake(), so a look that misses the
	 * last bytes saw the count from before their wake, and waits for it.
	 */
	*wakes = atomic_read_acquire(&cd->os.wakes);
	/* pairs with remove's smp_store_release: gone means STOP is in */
	gone = smp_load_acquire(&cd->gone);
	mutex_lock(&cd->reading);
	n = copdrv_buffer_peek(cd->drv, &bytes, &ended);
	if (n) {
		n = min_t(u64, n, len);
		if (copy_to_user(out, bytes, n)) {
			mutex_unlock(&cd->reading);
			return -EFAULT;
		}
		copdrv_buffer_consume(cd->drv, n);
	}
	mutex_unlock(&cd->reading);
	if (n)
		return n;
	return ended || gone ? 0 : -EAGAIN;
}

static ssize_t copdrv_read(struct file *file, char __user *out, size_t len,
			   loff_t *pos)
{
	struct copdrv_dev *cd = dev_of_file(file);
	ssize_t got;
	int wakes;

	if (!len)
		return 0;
	for (;;) {
		got = read_now(cd, out, len, &wakes);
		if (got != -EAGAIN || (file->f_flags & O_NONBLOCK))
			return got;
		if (wait_event_interruptible(cd->os.readers,
					     atomic_read(&cd->os.wakes) != wakes))
			return -ERESTARTSYS;
	}
}

static __poll_t copdrv_poll_file(struct file *file, poll_table *wait)
{
	struct copdrv_dev *cd = dev_of_file(file);
	const u8 *bytes;
	bool gone;
	int ended;
	u64 n;

	poll_wait(file, &cd->os.readers, wait);
	/* pairs with remove's smp_store_release: gone means STOP is in */
	gone = smp_load_acquire(&cd->gone);
	mutex_lock(&cd->reading);
	n = copdrv_buffer_peek(cd->drv, &bytes, &ended);
	mutex_unlock(&cd->reading);
	return n || ended || gone ? EPOLLIN | EPOLLRDNORM : 0;
}

static const struct file_operations copdrv_fops = {
	.owner = THIS_MODULE,
	.open = copdrv_open,
	.release = copdrv_release,
	.read = copdrv_read,
	.poll = copdrv_poll_file,
	.llseek = no_llseek,
};

int copdrv_dev_register(struct copdrv_dev *cd)
{
	cd->misc.minor = MISC_DYNAMIC_MINOR;
	cd->misc.name = "copdrv";
	cd->misc.fops = &copdrv_fops;
	cd->misc.parent = &cd->pdev->dev;
	cd->misc.mode = 0600;
	return misc_register(&cd->misc);
}

void copdrv_dev_unregister(struct copdrv_dev *cd)
{
	misc_deregister(&cd->misc);
}

/* ---- Control files ------------------------------------------------------- */

static struct copdrv_dev *dev_of(struct device *dev)
{
	return pci_get_drvdata(to_pci_dev(dev));
}

static bool running(struct copdrv_dev *cd)
{
	struct copdrv_stats stats;

	copdrv_get_stats(cd->drv, &stats);
	return stats.running;
}

static ssize_t param_show(struct device *dev, size_t offset, size_t size,
			  char *buf)
{
	struct copdrv_dev *cd = dev_of(dev);
	const u8 *field = (const u8 *)&cd->params + offset;
	u64 value;

	mutex_lock(&cd->control);
	value = size == sizeof(u32) ? *(const u32 *)field : *(const u64 *)field;
	mutex_unlock(&cd->control);
	return sysfs_emit(buf, "%llu\n", value);
}

static ssize_t param_store(struct device *dev, size_t offset, size_t size,
			   const char *buf, size_t count)
{
	struct copdrv_dev *cd = dev_of(dev);
	u8 *field = (u8 *)&cd->params + offset;
	u64 value;
	int err = kstrtou64(buf, 0, &value);

	if (err)
		return err;
	if (size == sizeof(u32) && value > U32_MAX)
		return -ERANGE;
	mutex_lock(&cd->control);
	if (cd->gone || running(cd)) {
		mutex_unlock(&cd->control);
		return -EBUSY;
	}
	if (size == sizeof(u32))
		*(u32 *)field = value;
	else
		*(u64 *)field = value;
	mutex_unlock(&cd->control);
	return count;
}

#define COPDRV_PARAM(name)						\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return param_show(dev, offsetof(struct copdrv_params, name),	\
			  sizeof_field(struct copdrv_params, name), buf);\
}									\
static ssize_t name##_store(struct device *dev,				\
			    struct device_attribute *attr,		\
			    const char *buf, size_t count)		\
{									\
	return param_store(dev, offsetof(struct copdrv_params, name),	\
			   sizeof_field(struct copdrv_params, name),	\
			   buf, count);					\
}									\
static DEVICE_ATTR_RW(name)

COPDRV_PARAM(lfsr_value);
COPDRV_PARAM(lfsr_count);
COPDRV_PARAM(poll_interval_ns);
COPDRV_PARAM(clock_hz);
COPDRV_PARAM(buffer_bytes);
COPDRV_PARAM(fifo_full);
COPDRV_PARAM(watermark);
COPDRV_PARAM(dither);
COPDRV_PARAM(dither_seed);
COPDRV_PARAM(event);

/*
 * Says once, the first time a start or stop could not load some slot's
 * LFSR (its seqlock stayed held: core.c slot_load()), what that costs.
 */
static void say_lfsr_busy(struct copdrv_dev *cd)
{
	struct copdrv_stats stats;

	if (cd->lfsr_busy_said)
		return;
	copdrv_get_stats(cd->drv, &stats);
	if (!stats.lfsr_busy)
		return;
	cd->lfsr_busy_said = true;
	dev_warn(&cd->pdev->dev, "LFSR loads skipped: %llu, a slot's lfsr_seq stayed odd; those slots keep their old sampling state (said once)\n",
		 stats.lfsr_busy);
}

/*
 * Starts a session with the parameters set, the reader kept away, and the
 * mailbox thread for its duration.  The host's emulators may run: the
 * module cannot hold them as copsim holds its own around the hosted
 * driver's start (README.md, "Sessions while the emulators run").
 */
static int start_session(struct copdrv_dev *cd)
{
	int err;

	cd->params.fifo_depth = copdrv_header(cd->drv)->fifo_depth;
	err = copdrv_mailbox_start(cd);
	if (err) {
		dev_err(&cd->pdev->dev, "start refused: mailbox thread: error %d\n",
			err);
		return err;
	}
	mutex_lock(&cd->reading);
	err = copdrv_start(cd->drv, &cd->params);
	mutex_unlock(&cd->reading);
	if (err) {
		copdrv_mailbox_stop(cd);
		dev_err(&cd->pdev->dev, "start refused: error %d\n", err);
	}
	say_lfsr_busy(cd);
	return err;
}

static int stop_session(struct copdrv_dev *cd)
{
	int err = copdrv_stop(cd->drv);

	copdrv_mailbox_stop(cd);
	say_lfsr_busy(cd);
	return err;
}

static ssize_t enable_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%d\n", running(dev_of(dev)));
}

static ssize_t enable_store(struct device *dev, struct device_attribute *attr,
			    const char *buf, size_t count)
{
	struct copdrv_dev *cd = dev_of(dev);
	bool on;
	int err = kstrtobool(buf, &on);

	if (err)
		return err;
	mutex_lock(&cd->control);
	if (cd->gone)
		err = -ENODEV;
	else if (on == running(cd))
		err = on ? -EBUSY : -EALREADY;
	else if (on)
		err = start_session(cd);
	else
		err = stop_session(cd);
	mutex_unlock(&cd->control);
	return err ? err : count;
}
static DEVICE_ATTR_RW(enable);

/* ---- Statistics (debugfs) ----------------------------------------------- */

static int stats_show(struct seq_file *m, void *unused)
{
	struct copdrv_dev *cd = m->private;
	struct copdrv_stats *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (!s)
		return -ENOMEM;
	copdrv_get_stats(cd->drv, s);
	seq_printf(m, "running %u\nended %u\npolls %llu\nsamples %llu\n",
		   s->running, s->ended, s->polls, s->samples);
	seq_printf(m, "lost_fifo_overflow %llu\nlost_buffer_full %llu\n",
		   s->lost_by_cause[COPSTREAM_LOST_FIFO_OVERFLOW],
		   s->lost_by_cause[COPSTREAM_LOST_BUFFER_FULL]);
	seq_printf(m, "lost_no_context %llu\nlost_outside_ls %llu\n",
		   s->lost_by_cause[COPSTREAM_LOST_NO_CONTEXT],
		   s->lost_by_cause[COPSTREAM_LOST_OUTSIDE_LS]);
	seq_printf(m, "lost_pending %llu\nbytes_written %llu\nbytes_read %llu\n",
		   s->lost_pending, s->bytes_written, s->bytes_read);
	seq_printf(m, "buffer_bytes %llu\nbuffer_high_water %llu\nfifo_errors %llu\n",
		   s->buffer_bytes, s->buffer_high_water, s->fifo_errors);
	seq_printf(m, "doorbell_polls %llu\nstalls %llu\nstall_ns %llu\npoll_ns %llu\n",
		   s->doorbell_polls, s->stalls, s->stall_ns, s->poll_ns);
	seq_printf(m, "lfsr_busy %llu\n", s->lfsr_busy);
	kfree(s);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(stats);

/* debugfs copdrv/stats; nothing fails for want of debugfs. */
void copdrv_stats_create(struct copdrv_dev *cd)
{
	cd->debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("stats", 0400, cd->debugfs, cd, &stats_fops);
}

static struct attribute *copdrv_control_attrs[] = {
	&dev_attr_lfsr_value.attr,
	&dev_attr_lfsr_count.attr,
	&dev_attr_poll_interval_ns.attr,
	&dev_attr_clock_hz.attr,
	&dev_attr_buffer_bytes.attr,
	&dev_attr_fifo_full.attr,
	&dev_attr_watermark.attr,
	&dev_attr_dither.attr,
	&dev_attr_dither_seed.attr,
	&dev_attr_event.attr,
	&dev_attr_enable.attr,
	NULL,
};

static const struct attribute_group copdrv_control_group = {
	.name = "copdrv",
	.attrs = copdrv_control_attrs,
};

const struct attribute_group *copdrv_control_groups[] = {
	&copdrv_control_group,
	NULL,
};
