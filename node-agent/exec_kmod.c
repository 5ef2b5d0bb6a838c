/* exec_kmod.c — the /dev/ramex executor backend (see exec.h and
 * kmod/uapi/ramex.h). Offline pages map to RAMEX_IOC_OFFLINE/ONLINE, lent
 * pages to the lending pool (RAMEX_IOC_POOL_SET); borrowing needs a remote
 * memory path the module does not offer, so it is refused. The module owns
 * the pages, so after a restart RAMEX_IOC_STATS tells what is still out
 * and exec_adopt re-attaches contracts to it.
 */
#include "node-agent/exec.h"

#include "kmod/uapi/ramex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct km {
	int fd;
};

static int km_stats(struct km *k, struct exec_totals *now, char *err,
                    size_t errlen)
{
	struct ramex_stats st;

	memset(&st, 0, sizeof st);
	if (ioctl(k->fd, RAMEX_IOC_STATS, &st) < 0) {
		snprintf(err, errlen, "RAMEX_IOC_STATS failed: %s",
		         strerror(errno));
		return -1;
	}
	memset(now, 0, sizeof *now);
	now->pages[EXEC_OFFLINE] = (rx_pages)st.pages_offline;
	now->pages[EXEC_LEND] = (rx_pages)st.pages_pool;
	return 0;
}

static int km_move(struct km *k, unsigned long req, const char *name,
                   rx_pages pages, rx_pages *done, char *err, size_t errlen)
{
	struct ramex_pages rp;

	memset(&rp, 0, sizeof rp);
	rp.pages = (__u64)pages;
	if (ioctl(k->fd, req, &rp) < 0) {
		snprintf(err, errlen, "%s of %lld pages failed: %s", name,
		         (long long)pages, strerror(errno));
		return -1;
	}
	*done = (rx_pages)rp.done;
	return 0;
}

static int km_apply(void *impl, const struct exec_totals *want,
                    struct exec_totals *got, char *err, size_t errlen)
{
	struct km *k = impl;
	struct exec_totals now;
	rx_pages done;

	if (want->pages[EXEC_BORROW] > 0) {
		snprintf(err, errlen,
		         "the kmod backend cannot borrow pages: "
		         "use the cgroup or sim backend to buy");
		return -1;
	}
	if (km_stats(k, &now, err, errlen) < 0)
		return -1;
	rx_pages d = want->pages[EXEC_OFFLINE] - now.pages[EXEC_OFFLINE];
	if (d > 0 &&
	    km_move(k, RAMEX_IOC_OFFLINE, "offline", d, &done, err, errlen) < 0)
		return -1;
	if (d < 0 &&
	    km_move(k, RAMEX_IOC_ONLINE, "online", -d, &done, err, errlen) < 0)
		return -1;
	if (want->pages[EXEC_LEND] != now.pages[EXEC_LEND] &&
	    km_move(k, RAMEX_IOC_POOL_SET, "pool resize",
	            want->pages[EXEC_LEND], &done, err, errlen) < 0)
		return -1;
	/* The stats, not the replies, are the truth (an OOM give-back may
	 * have run in between). */
	if (km_stats(k, got, err, errlen) < 0)
		return -1;
	return 0;
}

static int km_read(void *impl, struct exec_totals *now, char *err,
                   size_t errlen)
{
	return km_stats(impl, now, err, errlen);
}

static void km_close(void *impl)
{
	struct km *k = impl;
	close(k->fd);
	free(k);
}

static const struct exec_ops kmod_ops = {"kmod", km_apply, km_read, km_close};

struct exec *exec_kmod_new(const char *device, char *err, size_t errlen)
{
	struct km *k = calloc(1, sizeof *k);
	struct ramex_info info;

	if (!k) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	k->fd = open(device, O_RDWR | O_CLOEXEC);
	if (k->fd < 0) {
		snprintf(err, errlen,
		         "could not open %s: %s (is ramex.ko "
		         "loaded?)",
		         device, strerror(errno));
		goto fail;
	}
	memset(&info, 0, sizeof info);
	if (ioctl(k->fd, RAMEX_IOC_INFO, &info) < 0) {
		snprintf(err, errlen, "%s is not a ramex device: %s", device,
		         strerror(errno));
		goto fail;
	}
	if (info.abi_version != RAMEX_ABI_VERSION ||
	    info.page_size != RX_PAGE_SIZE) {
		snprintf(err, errlen,
		         "%s speaks ABI %llu with %llu-byte pages; this agent "
		         "needs ABI %d with %d-byte pages",
		         device, (unsigned long long)info.abi_version,
		         (unsigned long long)info.page_size, RAMEX_ABI_VERSION,
		         RX_PAGE_SIZE);
		goto fail;
	}
	struct exec *e = exec_new(&kmod_ops, k);
	if (!e)
		snprintf(err, errlen, "out of memory");
	return e;
fail:
	if (k->fd >= 0)
		close(k->fd);
	free(k);
	return NULL;
}
