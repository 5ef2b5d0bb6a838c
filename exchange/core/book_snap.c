/*
 * book_snap.c — a book's whole state as bytes and back; see book.h
 * ("Snapshot"). Built on book.h's interface alone: the orders are written
 * in the order book_foreach gives them and rebuilt with
 * book_insert_resting, so the order path's representation (book.c) can
 * change without touching the layout.
 */
#include "common/err.h"
#include "exchange/core/book.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define SNAP_MAGIC   "RXBOOK01"
#define SNAP_HEADER  (8 + 6 * 8 + 4 + 8 + 8)
#define SNAP_ORDER   (5 * 8 + 4)
#define SNAP_TRAILER 8

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint64_t get64(const uint8_t **p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)(*p)[i] << (8 * i);
	*p += 8;
	return v;
}

static uint32_t get32(const uint8_t **p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)(*p)[i] << (8 * i);
	*p += 4;
	return v;
}

/* FNV-1a: catches a torn or corrupted snapshot, not an adversary. */
static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

size_t book_snapshot_size(const struct book *b)
{
	return SNAP_HEADER + book_count(b) * SNAP_ORDER + SNAP_TRAILER;
}

struct snap_ctx {
	uint8_t *p;
};

static void snap_order(void *ctx, const struct book_order *o)
{
	struct snap_ctx *s = ctx;
	uint8_t *p = s->p;
	p = put64(p, o->id);
	p = put64(p, (uint64_t)o->account);
	p = put64(p, (uint64_t)o->price);
	p = put64(p, (uint64_t)o->pages);
	p = put64(p, (uint64_t)o->expires);
	*p++ = (uint8_t)o->side;
	*p++ = (uint8_t)o->tif;
	*p++ = (uint8_t)o->stp;
	*p++ = (uint8_t)o->post_only;
	s->p = p;
}

size_t book_snapshot(const struct book *b, void *buf, size_t len)
{
	size_t need = book_snapshot_size(b);
	if (len < need)
		return 0;
	uint8_t *p = buf;
	memcpy(p, SNAP_MAGIC, 8);
	p += 8;
	const struct book_params *bp = book_params_of(b);
	p = put64(p, (uint64_t)bp->tick);
	p = put64(p, (uint64_t)bp->lot);
	p = put64(p, (uint64_t)bp->min_pages);
	p = put64(p, (uint64_t)bp->max_pages);
	p = put64(p, (uint64_t)bp->price_min);
	p = put64(p, (uint64_t)bp->price_max);
	p = put32(p, bp->capacity);
	p = put64(p, book_seq(b));
	p = put64(p, book_count(b));
	struct snap_ctx s = {p};
	book_foreach(b, snap_order, &s);
	p = s.p;
	assert((size_t)(p - (uint8_t *)buf) == need - SNAP_TRAILER);
	put64(p, fnv1a(buf, need - SNAP_TRAILER));
	return need;
}

struct book *book_restore(const void *buf, size_t len, char *err, size_t errlen)
{
	const uint8_t *p = buf, *start = buf;
	struct book *b = NULL;
	if (len < SNAP_HEADER + SNAP_TRAILER || memcmp(p, SNAP_MAGIC, 8)) {
		err_set(err, errlen,
		        "not a book snapshot: too short or wrong magic");
		goto fail;
	}
	if (get64(&(const uint8_t *){start + len - SNAP_TRAILER}) !=
	    fnv1a(start, len - SNAP_TRAILER)) {
		err_set(err, errlen,
		        "book snapshot checksum mismatch: it is truncated or "
		        "corrupted");
		goto fail;
	}
	p += 8;
	struct book_params bp;
	bp.tick = (rx_price)get64(&p);
	bp.lot = (rx_pages)get64(&p);
	bp.min_pages = (rx_pages)get64(&p);
	bp.max_pages = (rx_pages)get64(&p);
	bp.price_min = (rx_price)get64(&p);
	bp.price_max = (rx_price)get64(&p);
	bp.capacity = get32(&p);
	uint64_t seq = get64(&p);
	uint64_t count = get64(&p);
	if (count > bp.capacity ||
	    len != SNAP_HEADER + count * SNAP_ORDER + SNAP_TRAILER) {
		err_set(err, errlen,
		        "book snapshot says %llu orders but has room for "
		        "%zu bytes of them",
		        (unsigned long long)count, len);
		goto fail;
	}
	char why[BOOK_MSG_MAX + 64];
	b = book_new(&bp, why, sizeof(why));
	if (!b) {
		err_set(err, errlen, "book snapshot has bad parameters: %s",
		        why);
		goto fail;
	}
	for (uint64_t i = 0; i < count; i++) {
		struct book_order o;
		o.id = get64(&p);
		o.account = (int64_t)get64(&p);
		o.price = (rx_price)get64(&p);
		o.pages = (rx_pages)get64(&p);
		o.expires = (rx_time_ns)get64(&p);
		o.side = (enum book_side) * p++;
		o.tif = (enum book_tif) * p++;
		o.stp = (enum book_stp) * p++;
		uint8_t po = *p++;
		o.post_only = po != 0;
		if (po > 1 || (o.tif != BOOK_GTD && o.expires != 0)) {
			err_set(err, errlen,
			        "book snapshot order %llu has bad flags",
			        (unsigned long long)o.id);
			goto fail;
		}
		if (book_insert_resting(b, &o, why, sizeof(why))) {
			err_set(err, errlen, "book snapshot: %s", why);
			goto fail;
		}
	}
	book_set_seq(b, seq);
	return b;
fail:
	book_free(b);
	return NULL;
}
