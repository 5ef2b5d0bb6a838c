/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ramex_pool.h - the lending pool: a small set of pages user space maps.
 *
 * Owns the pool pages (zeroed, removed from the managed page count, not
 * PageOffline because they are mapped), the number of live mappings, and
 * the rule that the pool cannot be resized while any mapping exists, so a
 * mapping never points at a page the pool has given back.
 */
#ifndef RAMEX_POOL_H
#define RAMEX_POOL_H

#include <linux/types.h>

struct file;
struct ramex_stats;
struct vm_area_struct;

int ramex_pool_init(unsigned long max_pages);
void ramex_pool_exit(void);
int ramex_pool_set(u64 want, u64 *done);
int ramex_pool_mmap(struct file *file, struct vm_area_struct *vma);
void ramex_pool_stats(struct ramex_stats *st);

#endif /* RAMEX_POOL_H */
