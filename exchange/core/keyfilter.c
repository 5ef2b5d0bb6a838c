/*
 * keyfilter.c — see keyfilter.h.
 *
 * Each filter is an array of 64-byte blocks (one cache line); a key sets 8
 * bits in one block, chosen by its hash. One block per key makes an add or
 * a query cost one cache miss, not eight, which matters when ramexd loads
 * millions of keys at start; at 16 bits a key the false "maybe"s are about
 * 0.1 % (against 0.05 % for a plain Bloom filter of the same size).
 */
#include "exchange/core/keyfilter.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum {
	BITS_PER_KEY = 16,
	BLOCK_BITS = 512,
	PROBES = 8,
	MAX_FILTERS = 40, /* 4 096 << 40 keys: never reached */
	MIN_KEYS = 4096,
};

struct filter {
	uint64_t *w;    /* nblocks * 8 words */
	size_t nblocks; /* a power of two */
	size_t cap, n;  /* keys it was made for, and holds */
};

struct keyfilter {
	struct filter f[MAX_FILTERS];
	int nf;
};

/* splitmix64's finaliser: callers' hashes (FNV-1a of short keys) have weak
 * low bits, and a block and its 8 bits must look independent. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9u;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x;
}

static int filter_init(struct filter *f, size_t keys)
{
	size_t blocks = 1;
	while (blocks * BLOCK_BITS < keys * BITS_PER_KEY)
		blocks *= 2;
	f->w = aligned_alloc(64, blocks * 64);
	if (!f->w)
		return -1;
	memset(f->w, 0, blocks * 64);
	f->nblocks = blocks;
	f->cap = blocks * BLOCK_BITS / BITS_PER_KEY;
	f->n = 0;
	return 0;
}

/* The block of x in f, and x's 8 bits in it (as 9-bit positions). */
static uint64_t *block_of(const struct filter *f, uint64_t x)
{
	return f->w + ((x >> 32) & (f->nblocks - 1)) * 8;
}

static bool filter_has(const struct filter *f, uint64_t x, uint64_t y)
{
	const uint64_t *b = block_of(f, x);
	for (int i = 0; i < PROBES; i++) {
		unsigned p = (unsigned)((i < 7 ? y >> (9 * i) : x) & 511);
		if (!(b[p >> 6] & (1ull << (p & 63))))
			return false;
	}
	return true;
}

static void filter_set(struct filter *f, uint64_t x, uint64_t y)
{
	uint64_t *b = block_of(f, x);
	for (int i = 0; i < PROBES; i++) {
		unsigned p = (unsigned)((i < 7 ? y >> (9 * i) : x) & 511);
		b[p >> 6] |= 1ull << (p & 63);
	}
	f->n++;
}

struct keyfilter *keyfilter_new(size_t keys)
{
	struct keyfilter *kf = calloc(1, sizeof *kf);
	if (!kf)
		return NULL;
	if (filter_init(&kf->f[0], keys < MIN_KEYS ? MIN_KEYS : keys) < 0) {
		free(kf);
		return NULL;
	}
	kf->nf = 1;
	return kf;
}

void keyfilter_free(struct keyfilter *kf)
{
	if (!kf)
		return;
	for (int i = 0; i < kf->nf; i++)
		free(kf->f[i].w);
	free(kf);
}

bool keyfilter_maybe(const struct keyfilter *kf, uint64_t h)
{
	uint64_t x = mix(h), y = mix(x);
	/* newest first: it holds the most recent keys, the likeliest asked */
	for (int i = kf->nf - 1; i >= 0; i--)
		if (filter_has(&kf->f[i], x, y))
			return true;
	return false;
}

int keyfilter_add(struct keyfilter *kf, uint64_t h)
{
	uint64_t x = mix(h), y = mix(x);
	int rc = 0;
	for (int i = kf->nf - 1; i >= 0; i--)
		if (filter_has(&kf->f[i], x, y))
			return 0;
	struct filter *f = &kf->f[kf->nf - 1];
	if (f->n >= f->cap) {
		if (kf->nf < MAX_FILTERS &&
		    filter_init(&kf->f[kf->nf], f->cap * 2) == 0) {
			f = &kf->f[kf->nf++];
		} else {
			/* fill this one further: more "maybe"s, and try to
			 * grow again when it holds twice as many */
			f->cap *= 2;
			rc = -1;
		}
	}
	filter_set(f, x, y);
	assert(keyfilter_maybe(kf, h));
	return rc;
}

void keyfilter_stats(const struct keyfilter *kf, struct keyfilter_stats *s)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < kf->nf; i++) {
		s->keys += kf->f[i].n;
		s->bytes += kf->f[i].nblocks * 64;
	}
	s->filters = kf->nf;
}
