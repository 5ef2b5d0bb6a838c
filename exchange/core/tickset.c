/*
 * tickset.c — the tiered bitmap's memory; the operations are inline in
 * tickset.h.
 */
#include "exchange/core/tickset.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int tickset_init(struct tickset *bs, uint64_t n)
{
	memset(bs, 0, sizeof(*bs));
	do {
		uint64_t words = (n + 63) / 64;
		assert(bs->tiers < TICKSET_MAX_TIERS);
		bs->w[bs->tiers] = calloc(words, sizeof(uint64_t));
		if (!bs->w[bs->tiers])
			return -1;
		bs->nw[bs->tiers] = (uint32_t)words;
		bs->tiers++;
		n = words;
	} while (n > 1);
	return 0;
}

void tickset_release(struct tickset *bs)
{
	for (int t = 0; t < bs->tiers; t++)
		free(bs->w[t]);
}
