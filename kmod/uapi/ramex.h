/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ramex.h - the one contract between ramex.ko and user space (the agent).
 *
 * /dev/ramex takes whole 4096-byte pages away from the OS and gives them
 * back, the way balloon drivers do. Two kinds of pages leave the OS:
 *
 *  - offline pages: allocated by the module, marked PageOffline and removed
 *    from the managed page count, so MemTotal and MemAvailable drop by
 *    exactly that many pages. Nothing may touch them. This is what the
 *    operator buys ("keep pages powered off").
 *  - pool pages: a small pool held by the module that user space maps with
 *    mmap(MAP_SHARED) on /dev/ramex, for lent pages that hold a buyer's
 *    data. They also leave the managed count (the OS cannot have them).
 *
 * Ownership: every page belongs to the module, not to the open file, so an
 * agent that restarts (closes and reopens /dev/ramex) finds its pages still
 * offline and reads them back with RAMEX_IOC_STATS. Unloading the module
 * returns every page to the OS.
 *
 * Recall by the kernel: when the kernel runs out of memory, an OOM notifier
 * gives offline pages back (never pool pages, which may hold data). Each
 * such event bumps oom_events and oom_released in the stats, and makes
 * poll() on any open /dev/ramex report EPOLLPRI until that file next reads
 * RAMEX_IOC_STATS. The agent reports the loss to the exchange as a recall.
 *
 * Every field is a fixed-size __u64 so the layout is the same on every ABI;
 * flags and reserved fields must be zero (EINVAL otherwise) so that they can
 * gain a meaning later without breaking old callers.
 */
#ifndef _UAPI_RAMEX_H
#define _UAPI_RAMEX_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* Bumped on any incompatible change; compare with ramex_info.abi_version. */
#define RAMEX_ABI_VERSION 1

#define RAMEX_DEVICE "/dev/ramex"
#define RAMEX_SYSFS_DIR "/sys/kernel/ramex"
#define RAMEX_PAGE_SIZE 4096

/*
 * One request for a number of pages: offline, online or pool size.
 *
 * pages: in, how many pages the caller wants (RAMEX_IOC_POOL_SET: the pool
 *        size wanted, 0 empties it).
 * done:  out, how many pages the call moved (RAMEX_IOC_POOL_SET: the pool
 *        size now). Offline may get fewer than asked when memory is short:
 *        allocation never sleeps forever and never invokes the OOM killer.
 */
struct ramex_pages {
	__u64 pages;
	__u64 done;
	__u64 flags;    /* must be 0 */
	__u64 reserved; /* must be 0 */
};

/* What the module is and its limits, fixed at load time. */
struct ramex_info {
	__u64 abi_version;    /* RAMEX_ABI_VERSION of the module */
	__u64 page_size;      /* bytes per page, always RAMEX_PAGE_SIZE */
	__u64 max_pages;      /* most pages offline at once (module param) */
	__u64 pool_max_pages; /* largest pool (module param) */
	__u64 oom_pages;      /* pages given back per OOM event (param) */
	__u64 reserved[3];
};

/*
 * Counters. pages_offline and pages_pool are the current state; the totals
 * only grow, so an agent can meter page-seconds from two readings.
 */
struct ramex_stats {
	__u64 abi_version;
	__u64 pages_offline;  /* now offline (PageOffline, out of MemTotal) */
	__u64 pages_pool;     /* now in the lending pool (out of MemTotal) */
	__u64 pool_mappings;  /* live mmap()s of the pool */
	__u64 total_offlined; /* pages ever taken offline */
	__u64 total_onlined;  /* pages ever given back on request or unload */
	__u64 alloc_failures; /* page allocations that failed (each stops a call) */
	__u64 oom_released;   /* pages ever given back by the OOM notifier */
	__u64 oom_events;     /* OOM notifier calls that gave pages back */
	__u64 reserved[7];
};

#define RAMEX_IOC_MAGIC 0xB7

/* Read the module's ABI version and limits. */
#define RAMEX_IOC_INFO _IOR(RAMEX_IOC_MAGIC, 0x00, struct ramex_info)
/* Take up to .pages pages offline; .done says how many were taken. */
#define RAMEX_IOC_OFFLINE _IOWR(RAMEX_IOC_MAGIC, 0x01, struct ramex_pages)
/* Give up to .pages offline pages back; .done says how many. */
#define RAMEX_IOC_ONLINE _IOWR(RAMEX_IOC_MAGIC, 0x02, struct ramex_pages)
/* Read the counters; also clears this file's pending EPOLLPRI. */
#define RAMEX_IOC_STATS _IOR(RAMEX_IOC_MAGIC, 0x03, struct ramex_stats)
/*
 * Resize the lending pool to .pages pages (EBUSY while it is mapped).
 * Growing may stop short like offline; .done is the size reached.
 * mmap(MAP_SHARED) of /dev/ramex then maps pool page i at offset i * 4096.
 */
#define RAMEX_IOC_POOL_SET _IOWR(RAMEX_IOC_MAGIC, 0x04, struct ramex_pages)

#endif /* _UAPI_RAMEX_H */
