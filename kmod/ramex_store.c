// SPDX-License-Identifier: GPL-2.0
/*
 * ramex_store.c - take pages away from the OS and give them back.
 *
 * Like a balloon driver: a page is allocated with flags that never sleep
 * forever and never call the OOM killer, marked PageOffline so that dumps
 * and page walkers skip it, and removed from the managed page count so that
 * MemTotal drops. Giving it back undoes the three steps in reverse.
 *
 * Allocation happens outside the lock, in batches, so that the OOM notifier
 * (which only ever takes the spinlock) is never stuck behind an allocation
 * in direct reclaim. A caller first reserves room under max_pages, then
 * allocates, then publishes what it got; so concurrent callers can never
 * push the store past its limit.
 */
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/page-flags.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/version.h>

#include "ramex_store.h"
#include "uapi/ramex.h"

/* No retry loops, no OOM killer, no dipping into emergency reserves. */
#define STORE_GFP (GFP_HIGHUSER | __GFP_NORETRY | __GFP_NOWARN | __GFP_NOMEMALLOC)

/* Pages moved per lock hold; bounds lock hold time and latency. */
#define STORE_BATCH 256

static DEFINE_SPINLOCK(store_lock);
static LIST_HEAD(store_list);      /* offline pages, linked by page->lru */
static unsigned long store_count;  /* pages on store_list */
static unsigned long store_reserved; /* room claimed by offline calls in flight */
static unsigned long store_max;

/* Updated under store_lock with store_count, so a snapshot always adds up. */
static u64 total_offlined;
static u64 total_onlined;
static u64 oom_released;
static u64 oom_events;
static atomic64_t alloc_failures = ATOMIC64_INIT(0);

void ramex_store_init(unsigned long max_pages)
{
	store_max = max_pages;
}

static unsigned long store_reserve(unsigned long want)
{
	unsigned long room;

	spin_lock(&store_lock);
	room = store_max - store_count - store_reserved;
	want = min(want, room);
	store_reserved += want;
	spin_unlock(&store_lock);
	return want;
}

/* Publish @n allocated pages from @pages and give back @unused reservation. */
static void store_publish(struct list_head *pages, unsigned long n,
			  unsigned long unused)
{
	spin_lock(&store_lock);
	list_splice(pages, &store_list);
	store_count += n;
	store_reserved -= n + unused;
	total_offlined += n;
	spin_unlock(&store_lock);
}

/* Pages asked of the bulk allocator at once; the array lives on the stack. */
#define STORE_BULK 64

/* Fills the NULL slots of @arr[0..n); returns how many are filled. */
static unsigned long store_bulk_alloc(unsigned long n, struct page **arr)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 14, 0)
	return alloc_pages_bulk(STORE_GFP, n, arr);
#else
	return alloc_pages_bulk_array(STORE_GFP, n, arr);
#endif
}

/*
 * Allocate up to @want offline pages onto @pages; returns how many. The
 * bulk allocator takes pages from the per-CPU lists in one go and falls
 * back to a single ordinary allocation when they are empty, with the same
 * no-retry, no-OOM flags.
 */
static unsigned long store_alloc_batch(struct list_head *pages,
				       unsigned long want)
{
	struct page *arr[STORE_BULK];
	unsigned long n = 0, got, i, k;

	while (n < want) {
		k = min_t(unsigned long, want - n, STORE_BULK);
		memset(arr, 0, sizeof(arr));
		got = store_bulk_alloc(k, arr);
		for (i = 0; i < got; i++) {
			__SetPageOffline(arr[i]);
			adjust_managed_page_count(arr[i], -1);
			list_add(&arr[i]->lru, pages);
		}
		n += got;
		if (got < k) {
			atomic64_inc(&alloc_failures);
			break;
		}
	}
	return n;
}

static bool store_should_stop(void)
{
	return fatal_signal_pending(current);
}

int ramex_store_offline(u64 want, u64 *done)
{
	unsigned long left, n, batch;
	LIST_HEAD(pages);

	*done = 0;
	if (want > store_max)
		return -E2BIG;
	left = store_reserve(want);
	if (want && !left)
		return -ENOSPC;
	while (left) {
		batch = min_t(unsigned long, left, STORE_BATCH);
		n = store_alloc_batch(&pages, batch);
		left -= n;
		*done += n;
		if (n < batch || store_should_stop()) {
			store_publish(&pages, n, left);
			return 0;
		}
		store_publish(&pages, n, 0);
		INIT_LIST_HEAD(&pages);
		cond_resched();
	}
	return 0;
}

/*
 * Move up to @want pages off the store onto @pages and count them in
 * @counter (total_onlined or oom_released); returns how many.
 */
static unsigned long store_take(struct list_head *pages, unsigned long want,
				u64 *counter)
{
	unsigned long n;
	struct page *page;

	spin_lock(&store_lock);
	for (n = 0; n < want && store_count; n++) {
		page = list_first_entry(&store_list, struct page, lru);
		list_move(&page->lru, pages);
		store_count--;
	}
	*counter += n;
	spin_unlock(&store_lock);
	return n;
}

static void store_free_list(struct list_head *pages)
{
	struct page *page, *next;

	list_for_each_entry_safe(page, next, pages, lru) {
		list_del(&page->lru);
		__ClearPageOffline(page);
		adjust_managed_page_count(page, 1);
		__free_page(page);
	}
}

/* Give back up to @want pages; never sleeps when @may_sleep is false. */
static unsigned long store_give_back(unsigned long want, u64 *counter,
				     bool may_sleep)
{
	unsigned long n, got = 0;
	LIST_HEAD(pages);

	while (got < want) {
		n = store_take(&pages, min_t(unsigned long, want - got,
					     STORE_BATCH), counter);
		if (!n)
			break;
		store_free_list(&pages);
		got += n;
		if (may_sleep)
			cond_resched();
	}
	return got;
}

int ramex_store_online(u64 want, u64 *done)
{
	*done = 0;
	if (want > store_max)
		return -E2BIG;
	*done = store_give_back(want, &total_onlined, true);
	return 0;
}

unsigned long ramex_store_oom_release(unsigned long want)
{
	unsigned long got = store_give_back(want, &oom_released, false);

	if (got) {
		spin_lock(&store_lock);
		oom_events++;
		spin_unlock(&store_lock);
	}
	return got;
}

void ramex_store_release_all(void)
{
	store_give_back(ULONG_MAX, &total_onlined, true);
	WARN_ON(store_count || store_reserved);
}

void ramex_store_stats(struct ramex_stats *st)
{
	spin_lock(&store_lock);
	st->pages_offline = store_count;
	st->total_offlined = total_offlined;
	st->total_onlined = total_onlined;
	st->oom_released = oom_released;
	st->oom_events = oom_events;
	spin_unlock(&store_lock);
	st->alloc_failures += atomic64_read(&alloc_failures);
}
