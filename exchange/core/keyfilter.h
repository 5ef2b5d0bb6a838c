/*
 * keyfilter.h — a set of 64-bit key hashes that answers "maybe" or "no":
 * "no" only for a key never added, "maybe" for every key added and, rarely,
 * for one that was not (a blocked Bloom filter). ramexd's writer keeps the
 * idempotency keys and client order ids that the database holds in one, so
 * that a batch of fresh keys, the usual case, needs no lookup query at all;
 * a "maybe" costs the lookup it would have cost anyway.
 *
 * It grows by itself: when the newest filter holds as many keys as it was
 * made for, another of twice its size takes the new keys, and a query asks
 * them all. So the false "maybe"s stay near the rate of one full filter
 * (about 0.1 % at 16 bits a key) times the few filters there are. It owns
 * its memory, 2 bytes a key it was made for; out of memory is reported, and
 * the set stays valid (keys then go into the filters it has: more "maybe"s,
 * never a wrong "no").
 *
 * Pure: no clock, no I/O, no globals, no locks (one thread owns a set).
 */
#ifndef RAMEX_KEYFILTER_H
#define RAMEX_KEYFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct keyfilter;

/* A set made for `keys` keys at first (at least 4 096); NULL when out of
 * memory. */
struct keyfilter *keyfilter_new(size_t keys);
void keyfilter_free(struct keyfilter *kf);

/* Adds key hash h. Returns 0, or -1 when a filter to grow into could not
 * be allocated (h is then in an older, fuller one: still found). */
int keyfilter_add(struct keyfilter *kf, uint64_t h);

/* false: h was never added. true: it may have been. */
bool keyfilter_maybe(const struct keyfilter *kf, uint64_t h);

struct keyfilter_stats {
	size_t keys;  /* added, less those already "maybe" when added */
	size_t bytes; /* memory of the filters */
	int filters;  /* how many it grew into */
};
void keyfilter_stats(const struct keyfilter *kf, struct keyfilter_stats *s);

#endif
