/*
 * tickset.h — a set of tick indices (the non-empty price levels of one
 * side of a book) that finds the next member above or below an index in a
 * few word operations: a bit per index, then a bit per non-zero word of
 * the tier below, up to a single word (at most TICKSET_MAX_TIERS tiers, so
 * 64^4 = 2^24 indices, above BOOK_MAX_TICKS). Pure: no clock, no I/O.
 *
 * Memory is taken by tickset_init and given back by tickset_release; the
 * operations never allocate. They are inline because they sit on the
 * order path (every order that rests, leaves the last place of a level or
 * walks to the next level calls one; bench/10-book.sh).
 */
#ifndef RAMEX_TICKSET_H
#define RAMEX_TICKSET_H

#include <stdint.h>

#define TICKSET_MAX_TIERS 4

struct tickset {
	uint64_t *w[TICKSET_MAX_TIERS];
	uint32_t nw[TICKSET_MAX_TIERS];
	int tiers;
};

/* An empty set of indices [0, n), 1 <= n <= 2^24; 0, or -1 when out of
 * memory (then tickset_release frees what was taken). */
int tickset_init(struct tickset *bs, uint64_t n);
void tickset_release(struct tickset *bs);

static inline void tickset_set(struct tickset *bs, uint64_t i)
{
	for (int t = 0; t < bs->tiers; t++) {
		bs->w[t][i >> 6] |= UINT64_C(1) << (i & 63);
		i >>= 6;
	}
}

static inline void tickset_clear(struct tickset *bs, uint64_t i)
{
	for (int t = 0; t < bs->tiers; t++) {
		uint64_t *w = &bs->w[t][i >> 6];
		*w &= ~(UINT64_C(1) << (i & 63));
		if (*w)
			return;
		i >>= 6;
	}
}

/* Smallest member >= i, or -1. */
static inline int64_t tickset_next(const struct tickset *bs, uint64_t i)
{
	int t = 0;
	for (;;) {
		uint64_t wi = i >> 6;
		if (wi >= bs->nw[t])
			return -1;
		uint64_t m = bs->w[t][wi] & (~UINT64_C(0) << (i & 63));
		if (m) {
			i = (wi << 6) + (uint64_t)__builtin_ctzll(m);
			break;
		}
		if (++t == bs->tiers)
			return -1;
		i = wi + 1;
	}
	while (t-- > 0)
		i = (i << 6) + (uint64_t)__builtin_ctzll(bs->w[t][i]);
	return (int64_t)i;
}

/* Largest member <= si, or -1 (also when si < 0). */
static inline int64_t tickset_prev(const struct tickset *bs, int64_t si)
{
	if (si < 0)
		return -1;
	uint64_t i = (uint64_t)si;
	int t = 0;
	for (;;) {
		uint64_t wi = i >> 6;
		uint64_t m = bs->w[t][wi] & (~UINT64_C(0) >> (63 - (i & 63)));
		if (m) {
			i = (wi << 6) + 63 - (uint64_t)__builtin_clzll(m);
			break;
		}
		if (wi == 0 || ++t == bs->tiers)
			return -1;
		i = wi - 1;
	}
	while (t-- > 0)
		i = (i << 6) + 63 - (uint64_t)__builtin_clzll(bs->w[t][i]);
	return (int64_t)i;
}

#endif
