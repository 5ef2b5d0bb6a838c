/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ramex_sysfs.h - read-only counters under /sys/kernel/ramex/.
 *
 * Owns the kobject and one file per counter of struct ramex_stats, for
 * people and scripts; the agent reads the same numbers with RAMEX_IOC_STATS.
 */
#ifndef RAMEX_SYSFS_H
#define RAMEX_SYSFS_H

struct ramex_stats;

int ramex_sysfs_init(void (*read_stats)(struct ramex_stats *st));
void ramex_sysfs_exit(void);

#endif /* RAMEX_SYSFS_H */
