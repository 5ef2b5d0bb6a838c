/*
 * fuzz_book.c — libFuzzer target for the order book: decodes the input into
 * a market shape and a stream of commands, applies each to the book and to
 * the reference model (tests/unit/book_ref.c), and aborts on the first
 * difference in events or observable state, on a crossed book, or when a
 * snapshot taken at the end does not restore to the same book.
 *
 * Input: byte 0 picks the shape; then 8 bytes per command (kind, id,
 * account, side/tif/stp/post-only bits, price, pages, time step, expiry).
 */
#include "exchange/core/book.h"
#include "tests/unit/book_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV 4096

struct evbuf {
	struct book_event ev[MAXEV];
	size_t n;
};

static void collect(void *ctx, const struct book_event *ev)
{
	struct evbuf *e = ctx;
	if (e->n >= MAXEV)
		abort();
	e->ev[e->n] = *ev;
	if (ev->message)
		e->ev[e->n].message = ev->message[0] ? "x" : "";
	e->n++;
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_book: %s\n", what);
	abort();
}

static const struct book_params shapes[4] = {
    {1, 1, 1, 8, 1, 16, 8},
    {10, 100, 200, 1500, 100, 400, 32},
    {5, 1, 1, 255, 0, 5 * 300, 64},
    {1, 2, 2, 40, 1, 4, 4},
};

static struct evbuf EA, EB;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const struct book_params *p = &shapes[data[0] & 3];
	char err[600];
	struct book *b = book_new(p, err, sizeof(err));
	struct book_ref *r = book_ref_new(p);
	if (!b || !r)
		die("could not create the book");
	int64_t ticks = (p->price_max - p->price_min) / p->tick + 1;
	rx_time_ns now = 100;
	uint64_t next_id = 0;
	for (size_t off = 1; off + 8 <= size; off += 8) {
		const uint8_t *d = data + off;
		struct book_cmd c = {0};
		now += d[6] & 15;
		if ((d[6] & 0xf0) == 0xf0)
			now -= 3;
		c.now = now;
		c.kind = (enum book_cmd_kind)(d[0] % 5);
		if (c.kind == BOOK_CMD_NEW && !(d[1] & 0x80))
			c.id = ++next_id;
		else
			c.id = next_id - (d[1] & 0x3f);
		c.account = d[2] & 3;
		c.side = (enum book_side)(d[3] & 1);
		c.tif = (enum book_tif)((d[3] >> 1) & 3);
		c.stp = (enum book_stp)((d[3] >> 3) % 3);
		c.post_only = (d[3] >> 5) & 1;
		int64_t k = (int64_t)d[4] % (ticks + 2) - 1;
		c.price = p->price_min + k * p->tick + ((d[3] & 0xc0) == 0xc0);
		c.pages = (int64_t)d[5] * p->lot / 4 - p->lot;
		if (c.kind == BOOK_CMD_REDUCE)
			c.pages = (int64_t)(d[5] & 7) * p->lot;
		c.expires = now + (int64_t)d[7] - 8;
		EA.n = EB.n = 0;
		enum book_reject ra = book_apply(b, &c, collect, &EA);
		enum book_reject rb = book_ref_apply(r, &c, collect, &EB);
		if (ra != rb || EA.n != EB.n)
			die("book and model disagree on a command");
		for (size_t i = 0; i < EA.n; i++)
			if (book_ref_event_cmp(&EA.ev[i], &EB.ev[i], err,
			                       sizeof(err)))
				die(err);
		rx_price bid, ask;
		if (book_best_bid(b, &bid, NULL) &&
		    book_best_ask(b, &ask, NULL) && bid >= ask)
			die("crossed book");
		if (book_ref_compare(r, b, err, sizeof(err)))
			die(err);
	}
	size_t len = book_snapshot_size(b);
	unsigned char *snap = malloc(len), *again = malloc(len);
	if (!snap || !again || book_snapshot(b, snap, len) != len)
		die("snapshot failed");
	struct book *c = book_restore(snap, len, err, sizeof(err));
	if (!c)
		die(err);
	if (book_snapshot(c, again, len) != len || memcmp(snap, again, len))
		die("restored book differs");
	book_free(c);
	free(snap);
	free(again);
	book_ref_free(r);
	book_free(b);
	return 0;
}
