/* lend_mem.c — keeping a swap-serving process out of reclaim (see header). */
#include "node-agent/lend/lend_mem.h"

#include <errno.h>
#include <fcntl.h>
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

int lend_mem_guard(char *why, size_t whylen)
{
	int got = 0, fd;

	if (whylen)
		why[0] = '\0';
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
