/* lend_mem.c — keeping a swap-serving process out of reclaim (see header). */
#include "node-agent/lend/lend_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57 /* Linux 5.6; older headers lack it */
#endif

int lend_mem_io_flusher(int on)
{
	return prctl(PR_SET_IO_FLUSHER, on ? 1UL : 0UL, 0UL, 0UL, 0UL) == 0
	           ? 0
	           : -1;
}

static void note(char *why, size_t whylen, const char *step, int e)
{
	size_t n = strlen(why);
	if (n < whylen)
		snprintf(why + n, whylen - n, "%s%s: %s", n ? "; " : "", step,
		         strerror(e));
}

/* Under MCL_FUTURE every thread's stack is locked whole, and glibc's
 * default stack is RLIMIT_STACK (8 MiB): the bridge's three threads
 * (attach, swapon, swapoff) made each ramex-lend-nbd hold 26 MiB, and a
 * borrower with five contracts ran a 256 MiB guest out of memory (seen in
 * tests/lendagent). Threads created from here on get LEND_MEM_STACK. */
static void small_stacks(void)
{
	pthread_attr_t at;
	size_t sz = 0;
	if (pthread_getattr_default_np(&at) != 0)
		return;
	if (pthread_attr_getstacksize(&at, &sz) == 0 && sz > LEND_MEM_STACK &&
	    pthread_attr_setstacksize(&at, LEND_MEM_STACK) == 0)
		(void)pthread_setattr_default_np(&at);
	pthread_attr_destroy(&at);
}

int lend_mem_guard(char *why, size_t whylen)
{
	int got = 0, fd;

	if (whylen)
		why[0] = '\0';
	small_stacks();
	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0)
		got |= LEND_MEM_LOCKED;
	else
		note(why, whylen,
		     "mlockall (needs CAP_IPC_LOCK or a large "
		     "RLIMIT_MEMLOCK)",
		     errno);
	if (lend_mem_io_flusher(1) == 0)
		got |= LEND_MEM_IO_FLUSHER;
	else
		note(why, whylen,
		     "PR_SET_IO_FLUSHER (needs CAP_SYS_RESOURCE "
		     "and Linux 5.6)",
		     errno);
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0 && write(fd, "-1000\n", 6) == 6)
		got |= LEND_MEM_OOM_EXEMPT;
	else
		note(why, whylen,
		     "oom_score_adj -1000 (needs "
		     "CAP_SYS_RESOURCE)",
		     errno);
	if (fd >= 0)
		close(fd);
	return got;
}
