/* lend_store.c — ramex.ko pool or locked anonymous memory (see header). */
#include "node-agent/lend/lend_store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kmod/uapi/ramex.h"

static int open_ramex(struct lend_store *s, int64_t pages, const char *dev,
                      char *err, size_t errlen)
{
	struct ramex_info info;
	struct ramex_pages req = {.pages = (__u64)pages};
	size_t len = (size_t)pages * RAMEX_PAGE_SIZE;

	s->fd = open(dev, O_RDWR | O_CLOEXEC);
	if (s->fd < 0) {
		snprintf(err, errlen,
		         "could not open %s: %s (is ramex.ko loaded?)", dev,
		         strerror(errno));
		return -1;
	}
	memset(&info, 0, sizeof info);
	if (ioctl(s->fd, RAMEX_IOC_INFO, &info) < 0 ||
	    info.abi_version != RAMEX_ABI_VERSION) {
		snprintf(err, errlen,
		         "%s speaks another ABI (want %d): rebuild the agent "
		         "against this kmod/uapi/ramex.h",
		         dev, RAMEX_ABI_VERSION);
		goto fail;
	}
	if ((uint64_t)pages > info.pool_max_pages) {
		snprintf(err, errlen,
		         "the contract needs %lld pages but ramex.ko's pool "
		         "holds at most %llu; load it with a larger pool limit",
		         (long long)pages,
		         (unsigned long long)info.pool_max_pages);
		goto fail;
	}
	if (ioctl(s->fd, RAMEX_IOC_POOL_SET, &req) < 0 ||
	    req.done != (__u64)pages) {
		snprintf(err, errlen,
		         "ramex.ko could only pool %llu of %lld pages: %s",
		         (unsigned long long)req.done, (long long)pages,
		         strerror(errno));
		goto fail_pool;
	}
	s->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		snprintf(err, errlen, "could not map the ramex pool: %s",
		         strerror(errno));
		goto fail_pool;
	}
	s->kind = LEND_STORE_RAMEX;
	/* a pool reused after an agent restart may hold old data */
	memset(s->base, 0, len);
	return 0;
fail_pool:
	req.pages = 0;
	ioctl(s->fd, RAMEX_IOC_POOL_SET, &req);
fail:
	close(s->fd);
	s->fd = -1;
	return -1;
}

int lend_store_open(struct lend_store *s, int64_t pages,
                    enum lend_store_kind kind, const char *device, char *err,
                    size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->fd = -1;
	s->pages = pages;
	if (!device)
		device = RAMEX_DEVICE;
	if (pages <= 0) {
		snprintf(err, errlen, "a store needs at least one page");
		return -1;
	}
	if (kind == LEND_STORE_RAMEX ||
	    (kind == LEND_STORE_AUTO && access(device, F_OK) == 0))
		return open_ramex(s, pages, device, err, errlen);

	size_t len = (size_t)pages * RAMEX_PAGE_SIZE, huge = 2u << 20;
	/* huge pages where the kernel gives them (THP in madvise mode):
	 * borrowers read pages at random, and with 4 KiB pages every read
	 * of a large store missed the TLB (ramex.ko's pool is in the
	 * kernel's direct map, on huge pages already). So the area is
	 * aligned to 2 MiB and marked before any page is present: mapped
	 * inaccessible first, since a process under mlockall(MCL_FUTURE)
	 * (--mlock) would get 4 KiB pages populated at once by mmap. */
	uint8_t *raw = mmap(NULL, len + huge, PROT_NONE,
	                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) {
		s->base = NULL;
		snprintf(err, errlen, "could not map %lld anonymous pages: %s",
		         (long long)pages, strerror(errno));
		return -1;
	}
	size_t head = (huge - (uintptr_t)raw % huge) % huge;
	if (head)
		munmap(raw, head);
	munmap(raw + head + len, huge - head);
	s->base = raw + head;
	(void)madvise(s->base, len, MADV_HUGEPAGE);
	if (mprotect(s->base, len, PROT_READ | PROT_WRITE) < 0) {
		snprintf(err, errlen, "could not map %lld anonymous pages: %s",
		         (long long)pages, strerror(errno));
		munmap(s->base, len);
		s->base = NULL;
		return -1;
	}
	/* every page present now, not at the borrower's first write */
	if (madvise(s->base, len, MADV_POPULATE_WRITE) < 0)
		for (size_t off = 0; off < len; off += RAMEX_PAGE_SIZE)
			((volatile uint8_t *)s->base)[off] = 0;
	/* the borrower swaps to these pages: they must never be swapped
	 * themselves, or the lender would page on behalf of its borrower */
	s->locked = mlock(s->base, len) == 0;
	s->kind = LEND_STORE_ANON;
	return 0;
}

void lend_store_zero(struct lend_store *s, int64_t page, int64_t count)
{
	assert(page >= 0 && count >= 0 && page + count <= s->pages);
	memset(lend_store_page(s, page), 0, (size_t)count * RAMEX_PAGE_SIZE);
}

void lend_store_release(struct lend_store *s)
{
	if (s->base)
		munmap(s->base, (size_t)s->pages * RAMEX_PAGE_SIZE);
	s->base = NULL;
	if (s->fd >= 0) {
		struct ramex_pages req = {.pages = 0};
		ioctl(s->fd, RAMEX_IOC_POOL_SET, &req);
		close(s->fd);
		s->fd = -1;
	}
}

const char *lend_store_kind_name(enum lend_store_kind k)
{
	switch (k) {
	case LEND_STORE_RAMEX:
		return "ramex-pool";
	case LEND_STORE_ANON:
		return "anonymous-memory-test-only";
	default:
		return "auto";
	}
}
