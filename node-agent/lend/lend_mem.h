/*
 * lend_mem.h — keeping a process that serves swap out of memory reclaim.
 *
 * The borrower's bridge (and a lender that shares a kernel with its
 * borrower, as in the qemu suite) sits inside the kernel's swap-out path:
 * a page is only freed once the bridge has carried it to the lender. If
 * the bridge itself needs reclaim to make progress (its own pages swapped
 * out, or an allocation whose reclaim writes more pages to the very device
 * it serves) the machine deadlocks. lend_mem_guard applies what Linux
 * offers user space against that, the way `nbd-client -swap` does:
 *
 *  - mlockall(MCL_CURRENT | MCL_FUTURE): no page of ours is ever swapped
 *    (so serving a swap-in never waits on a swap-in of our own code);
 *    threads created after the call get stacks of LEND_MEM_STACK, which
 *    are locked whole (glibc's default of 8 MiB each would be);
 *  - prctl(PR_SET_IO_FLUSHER) (Linux >= 5.6): our allocations reclaim
 *    without starting I/O (PF_MEMALLOC_NOIO) and are throttled only on our
 *    own writeback, so they never wait on the device we serve;
 *  - oom_score_adj -1000: the OOM killer never picks the process that
 *    holds every swapped page.
 *
 * Owns nothing; each step that fails is reported, none is fatal (the
 * caller decides). Threads created after the call inherit the I/O-flusher
 * flag; lend_mem_io_flusher(0) takes it off one thread again (the bridge's
 * swapoff thread, whose reclaim must be able to write to local swap).
 */
#ifndef RAMEX_LEND_MEM_H
#define RAMEX_LEND_MEM_H

#include <stddef.h>

/* The stack of a thread started after lend_mem_guard: the lend programs'
 * threads call little more than a system call, log lines and, in a
 * lender's handshake, OpenSSL. */
#define LEND_MEM_STACK (512u << 10)

enum {
	LEND_MEM_LOCKED = 1,     /* mlockall succeeded */
	LEND_MEM_IO_FLUSHER = 2, /* PR_SET_IO_FLUSHER succeeded */
	LEND_MEM_OOM_EXEMPT = 4, /* oom_score_adj is -1000 */
};

/*
 * Applies the three steps. Returns the LEND_MEM_* bits that took effect;
 * `why` gets a readable list of the steps that failed and why ("" when
 * none did).
 */
int lend_mem_guard(char *why, size_t whylen);
/* Sets (on != 0) or clears the calling thread's I/O-flusher flag. 0 or -1. */
int lend_mem_io_flusher(int on);

#endif
