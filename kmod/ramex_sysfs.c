// SPDX-License-Identifier: GPL-2.0
/*
 * ramex_sysfs.c - /sys/kernel/ramex/<counter>, one decimal number per file.
 *
 * Every file is the same show() over a different field of a fresh stats
 * snapshot, so sysfs and the ioctl can never disagree on what they count.
 */
#include <linux/kobject.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "ramex_sysfs.h"
#include "uapi/ramex.h"

struct counter_attr {
	struct kobj_attribute attr;
	size_t offset; /* of the __u64 field in struct ramex_stats */
};

static struct kobject *ramex_kobj;
static void (*sysfs_read_stats)(struct ramex_stats *st);

static ssize_t counter_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct counter_attr *c = container_of(attr, struct counter_attr, attr);
	struct ramex_stats st;

	memset(&st, 0, sizeof(st));
	sysfs_read_stats(&st);
	return sysfs_emit(buf, "%llu\n",
			  (unsigned long long)*(__u64 *)((char *)&st + c->offset));
}

#define COUNTER(field)                                                  \
	static struct counter_attr counter_##field = {                  \
		.attr = __ATTR(field, 0444, counter_show, NULL),        \
		.offset = offsetof(struct ramex_stats, field),          \
	}

COUNTER(pages_offline);
COUNTER(pages_pool);
COUNTER(pool_mappings);
COUNTER(total_offlined);
COUNTER(total_onlined);
COUNTER(alloc_failures);
COUNTER(oom_released);
COUNTER(oom_events);

static struct attribute *counter_attrs[] = {
	&counter_pages_offline.attr.attr,
	&counter_pages_pool.attr.attr,
	&counter_pool_mappings.attr.attr,
	&counter_total_offlined.attr.attr,
	&counter_total_onlined.attr.attr,
	&counter_alloc_failures.attr.attr,
	&counter_oom_released.attr.attr,
	&counter_oom_events.attr.attr,
	NULL,
};

static const struct attribute_group counter_group = {
	.attrs = counter_attrs,
};

int ramex_sysfs_init(void (*read_stats)(struct ramex_stats *st))
{
	int ret;

	sysfs_read_stats = read_stats;
	ramex_kobj = kobject_create_and_add("ramex", kernel_kobj);
	if (!ramex_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(ramex_kobj, &counter_group);
	if (ret)
		goto fail;
	return 0;
fail:
	kobject_put(ramex_kobj);
	ramex_kobj = NULL;
	return ret;
}

void ramex_sysfs_exit(void)
{
	sysfs_remove_group(ramex_kobj, &counter_group);
	kobject_put(ramex_kobj);
	ramex_kobj = NULL;
}
