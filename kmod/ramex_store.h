/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ramex_store.h - the store of offline pages.
 *
 * Owns every page that ramex.ko has taken offline: a list of pages marked
 * PageOffline and removed from the managed page count, the limit on how
 * many there may be, and the counters about them. Pages belong to the
 * module, not to any open file. Safe under any number of concurrent callers,
 * including the OOM notifier.
 */
#ifndef RAMEX_STORE_H
#define RAMEX_STORE_H

#include <linux/types.h>

struct ramex_stats;

void ramex_store_init(unsigned long max_pages);
int ramex_store_offline(u64 want, u64 *done);
int ramex_store_online(u64 want, u64 *done);
unsigned long ramex_store_oom_release(unsigned long want);
void ramex_store_release_all(void);
void ramex_store_stats(struct ramex_stats *st);

#endif /* RAMEX_STORE_H */
