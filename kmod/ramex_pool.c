// SPDX-License-Identifier: GPL-2.0
/*
 * ramex_pool.c - the lending pool and its mmap().
 *
 * Lent pages hold another node's data, so the OS must not have them
 * (they leave the managed count, like offline pages) but user space must
 * reach them. They are mapped as raw PFNs (VM_PFNMAP): no rmap, no page
 * cache, no refcount games, and the page is never seen by reclaim.
 * Because the pool is frozen while mapped, mmap() can insert every PTE up
 * front and no fault handler is needed.
 *
 * The pool is zeroed when it grows and when it shrinks, so a buyer's data
 * never reaches the next user of the page.
 */
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/version.h>

#include "ramex_pool.h"
#include "uapi/ramex.h"

#define POOL_GFP (GFP_HIGHUSER | __GFP_ZERO | __GFP_NORETRY | __GFP_NOWARN | \
		  __GFP_NOMEMALLOC)

static DEFINE_MUTEX(pool_lock);
static struct page **pool_pages; /* pool_pages[i] is mapped at offset i */
static unsigned long pool_count;
static unsigned long pool_max;
static atomic_t pool_maps = ATOMIC_INIT(0);
static atomic64_t pool_failures = ATOMIC64_INIT(0);

int ramex_pool_init(unsigned long max_pages)
{
	pool_max = max_pages;
	if (!pool_max)
		return 0;
	pool_pages = kvcalloc(pool_max, sizeof(*pool_pages), GFP_KERNEL);
	return pool_pages ? 0 : -ENOMEM;
}

static void pool_shrink(unsigned long to)
{
	struct page *page;

	while (pool_count > to) {
		WRITE_ONCE(pool_count, pool_count - 1);
		page = pool_pages[pool_count];
		pool_pages[pool_count] = NULL;
		clear_highpage(page);
		adjust_managed_page_count(page, 1);
		__free_page(page);
	}
}

static void pool_grow(unsigned long to)
{
	struct page *page;

	while (pool_count < to) {
		page = alloc_page(POOL_GFP);
		if (!page) {
			atomic64_inc(&pool_failures);
			return;
		}
		adjust_managed_page_count(page, -1);
		pool_pages[pool_count] = page;
		WRITE_ONCE(pool_count, pool_count + 1);
	}
}

void ramex_pool_exit(void)
{
	mutex_lock(&pool_lock);
	WARN_ON(atomic_read(&pool_maps));
	pool_shrink(0);
	mutex_unlock(&pool_lock);
	kvfree(pool_pages);
	pool_pages = NULL;
}

int ramex_pool_set(u64 want, u64 *done)
{
	int ret = 0;

	if (want > pool_max)
		return -E2BIG;
	mutex_lock(&pool_lock);
	if (atomic_read(&pool_maps)) {
		ret = -EBUSY;
		goto out;
	}
	if (want < pool_count)
		pool_shrink(want);
	else
		pool_grow(want);
out:
	*done = pool_count;
	mutex_unlock(&pool_lock);
	return ret;
}

/* Splits, forks and mremap()s make new VMAs; each holds the pool frozen. */
static void pool_vm_open(struct vm_area_struct *vma)
{
	atomic_inc(&pool_maps);
}

static void pool_vm_close(struct vm_area_struct *vma)
{
	atomic_dec(&pool_maps);
}

static const struct vm_operations_struct pool_vm_ops = {
	.open = pool_vm_open,
	.close = pool_vm_close,
};

static void pool_set_vm_flags(struct vm_area_struct *vma)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
#else
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
#endif
}

static int pool_map_pages(struct vm_area_struct *vma)
{
	unsigned long i, addr = vma->vm_start;
	int ret;

	for (i = 0; i < vma_pages(vma); i++, addr += PAGE_SIZE) {
		ret = remap_pfn_range(vma, addr,
				      page_to_pfn(pool_pages[vma->vm_pgoff + i]),
				      PAGE_SIZE, vma->vm_page_prot);
		if (ret)
			return ret;
	}
	return 0;
}

int ramex_pool_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long off = vma->vm_pgoff, len = vma_pages(vma);
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	mutex_lock(&pool_lock);
	ret = -EINVAL;
	if (off >= pool_count || len > pool_count - off)
		goto out;
	pool_set_vm_flags(vma);
	ret = pool_map_pages(vma);
	if (ret)
		goto out;
	vma->vm_ops = &pool_vm_ops;
	atomic_inc(&pool_maps);
out:
	mutex_unlock(&pool_lock);
	return ret;
}

void ramex_pool_stats(struct ramex_stats *st)
{
	/* No lock: a growing pool may hold it through a slow allocation. */
	st->pages_pool = READ_ONCE(pool_count);
	st->pool_mappings = atomic_read(&pool_maps);
	st->alloc_failures += atomic64_read(&pool_failures);
}
