/*
 * lend_store.h — the memory a lender holds for a borrower's pages.
 *
 * Owns one contiguous run of `pages` pages and where they came from:
 *
 *  - LEND_STORE_RAMEX: the lending pool of ramex.ko, sized with
 *    RAMEX_IOC_POOL_SET and mapped MAP_SHARED from /dev/ramex. The pages have
 *    left the lender's OS (out of MemTotal), so its kernel can neither swap
 *    nor reclaim them: this is the production store.
 *  - LEND_STORE_ANON: anonymous memory, locked with mlock. Only for hosts
 *    that cannot load ramex.ko (unit tests, benchmarks); it is labelled so in
 *    every log line and meter, because the OS still counts these pages.
 *
 * Releasing returns the pages (pool size 0, or munmap).
 */
#ifndef RAMEX_LEND_STORE_H
#define RAMEX_LEND_STORE_H

#include <stddef.h>
#include <stdint.h>

enum lend_store_kind { LEND_STORE_AUTO, LEND_STORE_RAMEX, LEND_STORE_ANON };

struct lend_store {
	enum lend_store_kind kind; /* RAMEX or ANON once open */
	uint8_t *base;
	int64_t pages;
	int fd;     /* /dev/ramex, or -1 */
	int locked; /* ANON: 1 when mlock succeeded */
};

/*
 * AUTO takes ramex.ko's pool when /dev/ramex exists, else anonymous memory.
 * The pages read as zeros. Returns 0, or -1 with err set (nothing held).
 */
int lend_store_open(struct lend_store *s, int64_t pages,
                    enum lend_store_kind kind, const char *device, char *err,
                    size_t errlen);
static inline uint8_t *lend_store_page(const struct lend_store *s, int64_t i)
{
	return s->base + (size_t)i * 4096;
}
/* Zeros pages (TRIM), so no old data of the borrower stays readable. */
void lend_store_zero(struct lend_store *s, int64_t page, int64_t count);
/* Gives every page back. Safe to call twice. */
void lend_store_release(struct lend_store *s);
const char *lend_store_kind_name(enum lend_store_kind k);

#endif
