// SPDX-License-Identifier: GPL-2.0
/*
 * ramex_main.c - /dev/ramex: the module's entry points.
 *
 * Owns the module parameters, the misc device and its file operations
 * (ioctl, poll, mmap), the OOM notifier and the order of setup and
 * teardown. The pages themselves live in ramex_store.c (offline) and
 * ramex_pool.c (lending pool); this file only validates what user space
 * asks for and routes it.
 *
 * Pages are global to the module: an open file owns nothing but its
 * "last OOM event seen" mark for poll(). The module cannot be unloaded
 * while a file is open or a pool mapping exists (both pin it), and
 * unloading gives every page back.
 */
#include <linux/fs.h>
#include <linux/init.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/oom.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "ramex_pool.h"
#include "ramex_store.h"
#include "ramex_sysfs.h"
#include "uapi/ramex.h"

/* The pool is for a first lending data path, not for bulk: 256 MiB at most. */
#define RAMEX_POOL_HARD_MAX 65536UL

static unsigned long max_pages;
module_param(max_pages, ulong, 0444);
MODULE_PARM_DESC(max_pages,
		 "most pages offline at once (0: half of RAM at load time)");

static unsigned long pool_max_pages = 1024;
module_param(pool_max_pages, ulong, 0444);
MODULE_PARM_DESC(pool_max_pages, "largest lending pool in pages (<= 65536)");

static unsigned long oom_pages = 256;
module_param(oom_pages, ulong, 0444);
MODULE_PARM_DESC(oom_pages,
		 "pages given back per OOM event (0: never give back)");

static DECLARE_WAIT_QUEUE_HEAD(oom_wq);

struct ramex_file {
	u64 oom_seen; /* oom_events when this file last read its stats */
};

static void ramex_read_stats(struct ramex_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->abi_version = RAMEX_ABI_VERSION;
	ramex_store_stats(st);
	ramex_pool_stats(st);
}

static u64 ramex_oom_events(void)
{
	struct ramex_stats st;

	ramex_read_stats(&st);
	return st.oom_events;
}

static int ramex_oom_notify(struct notifier_block *nb, unsigned long unused,
			    void *parm)
{
	unsigned long *freed = parm;
	unsigned long got = ramex_store_oom_release(oom_pages);

	if (got) {
		*freed += got;
		wake_up_interruptible(&oom_wq);
	}
	return NOTIFY_OK;
}

static struct notifier_block ramex_oom_nb = {
	.notifier_call = ramex_oom_notify,
};

static int ramex_open(struct inode *inode, struct file *file)
{
	struct ramex_file *rf = kzalloc(sizeof(*rf), GFP_KERNEL);

	if (!rf)
		return -ENOMEM;
	rf->oom_seen = ramex_oom_events();
	file->private_data = rf;
	return nonseekable_open(inode, file);
}

static int ramex_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

static long ramex_ioc_info(void __user *uarg)
{
	struct ramex_info info;

	memset(&info, 0, sizeof(info));
	info.abi_version = RAMEX_ABI_VERSION;
	info.page_size = PAGE_SIZE;
	info.max_pages = max_pages;
	info.pool_max_pages = pool_max_pages;
	info.oom_pages = oom_pages;
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long ramex_ioc_stats(struct ramex_file *rf, void __user *uarg)
{
	struct ramex_stats st;

	ramex_read_stats(&st);
	if (copy_to_user(uarg, &st, sizeof(st)))
		return -EFAULT;
	WRITE_ONCE(rf->oom_seen, st.oom_events);
	return 0;
}

/*
 * Pages moved before a failed copy back stay moved: they are global and
 * RAMEX_IOC_STATS shows them, so nothing is lost.
 */
static long ramex_ioc_pages(void __user *uarg, int (*op)(u64 want, u64 *done))
{
	struct ramex_pages req;
	int ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.reserved)
		return -EINVAL;
	ret = op(req.pages, &req.done);
	if (copy_to_user(uarg, &req, sizeof(req)))
		return -EFAULT;
	return ret;
}

static long ramex_ioctl(struct file *file, unsigned int cmd,
			unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case RAMEX_IOC_INFO:
		return ramex_ioc_info(uarg);
	case RAMEX_IOC_OFFLINE:
		return ramex_ioc_pages(uarg, ramex_store_offline);
	case RAMEX_IOC_ONLINE:
		return ramex_ioc_pages(uarg, ramex_store_online);
	case RAMEX_IOC_STATS:
		return ramex_ioc_stats(file->private_data, uarg);
	case RAMEX_IOC_POOL_SET:
		return ramex_ioc_pages(uarg, ramex_pool_set);
	default:
		return -ENOTTY;
	}
}

static __poll_t ramex_poll(struct file *file, poll_table *wait)
{
	struct ramex_file *rf = file->private_data;

	poll_wait(file, &oom_wq, wait);
	return ramex_oom_events() != READ_ONCE(rf->oom_seen) ? EPOLLPRI : 0;
}

static const struct file_operations ramex_fops = {
	.owner = THIS_MODULE,
	.open = ramex_open,
	.release = ramex_release,
	.unlocked_ioctl = ramex_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = ramex_poll,
	.mmap = ramex_pool_mmap,
	.llseek = no_llseek,
};

static struct miscdevice ramex_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "ramex",
	.fops = &ramex_fops,
	.mode = 0600,
};

static int ramex_check_params(void)
{
	if (!max_pages)
		max_pages = totalram_pages() / 2;
	if (max_pages > totalram_pages()) {
		pr_err("ramex: max_pages %lu is more than the %lu pages of RAM\n",
		       max_pages, totalram_pages());
		return -EINVAL;
	}
	if (pool_max_pages > RAMEX_POOL_HARD_MAX) {
		pr_err("ramex: pool_max_pages %lu is more than %lu\n",
		       pool_max_pages, RAMEX_POOL_HARD_MAX);
		return -EINVAL;
	}
	return 0;
}

static int __init ramex_init(void)
{
	int ret;

	BUILD_BUG_ON(PAGE_SIZE != RAMEX_PAGE_SIZE);
	BUILD_BUG_ON(sizeof(struct ramex_pages) != 4 * 8);
	BUILD_BUG_ON(sizeof(struct ramex_info) != 8 * 8);
	BUILD_BUG_ON(sizeof(struct ramex_stats) != 16 * 8);

	ret = ramex_check_params();
	if (ret)
		return ret;
	ramex_store_init(max_pages);
	ret = ramex_pool_init(pool_max_pages);
	if (ret)
		return ret;
	ret = ramex_sysfs_init(ramex_read_stats);
	if (ret)
		goto fail_pool;
	ret = register_oom_notifier(&ramex_oom_nb);
	if (ret)
		goto fail_sysfs;
	ret = misc_register(&ramex_misc);
	if (ret)
		goto fail_oom;
	pr_info("ramex: abi %d, max_pages %lu, pool_max_pages %lu, oom_pages %lu\n",
		RAMEX_ABI_VERSION, max_pages, pool_max_pages, oom_pages);
	return 0;

fail_oom:
	unregister_oom_notifier(&ramex_oom_nb);
fail_sysfs:
	ramex_sysfs_exit();
fail_pool:
	ramex_pool_exit();
	return ret;
}

static void __exit ramex_exit(void)
{
	misc_deregister(&ramex_misc);
	unregister_oom_notifier(&ramex_oom_nb);
	ramex_sysfs_exit();
	ramex_store_release_all();
	ramex_pool_exit();
}

module_init(ramex_init);
module_exit(ramex_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ramex: take pages offline and hold lent pages for the RAM exchange");
MODULE_VERSION("1");
