/*
 * book_fixture.c — what the order book's named suites share
 * (tests/unit/book_fixture.h).
 */
#include "tests/unit/book_fixture.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

static void record(void *ctx, const struct book_event *ev)
{
	struct rec *r = ctx;
	ck_assert_uint_lt(r->n, MAXEV);
	r->ev[r->n] = *ev;
	if (ev->message) {
		snprintf(r->msg[r->n], BOOK_MSG_MAX, "%s", ev->message);
		r->ev[r->n].message = r->msg[r->n];
	}
	r->n++;
}

struct book_params params(void)
{
	struct book_params p = {
	    .tick = 10,
	    .lot = 100,
	    .min_pages = 100,
	    .max_pages = 100000,
	    .price_min = 10,
	    .price_max = 10000,
	    .capacity = 64,
	};
	return p;
}

struct book *mk(void)
{
	char err[256];
	struct book_params p = params();
	struct book *b = book_new(&p, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	return b;
}

struct rec R;
const rx_time_ns NOW = 1000;

enum book_reject run(struct book *b, struct book_cmd c)
{
	memset(&R, 0, sizeof(R));
	if (!c.now)
		c.now = NOW;
	return book_apply(b, &c, record, &R);
}

struct book_cmd order(uint64_t id, int64_t acct, enum book_side side,
                      rx_pages pages, rx_price price, enum book_tif tif)
{
	struct book_cmd c = {.kind = BOOK_CMD_NEW,
	                     .id = id,
	                     .account = acct,
	                     .side = side,
	                     .pages = pages,
	                     .price = price,
	                     .tif = tif};
	return c;
}

struct book_cmd gtc(uint64_t id, int64_t acct, enum book_side side,
                    rx_pages pages, rx_price price)
{
	return order(id, acct, side, pages, price, BOOK_GTC);
}

struct book_cmd cancel(uint64_t id)
{
	struct book_cmd c = {.kind = BOOK_CMD_CANCEL, .id = id};
	return c;
}

struct book_cmd reduce(uint64_t id, rx_pages pages)
{
	struct book_cmd c = {.kind = BOOK_CMD_REDUCE, .id = id, .pages = pages};
	return c;
}

void place(struct book *b, struct book_cmd c)
{
	ck_assert_int_eq(run(b, c), BOOK_REJ_NONE);
	size_t i = 0;
	while (i < R.n && R.ev[i].kind == BOOK_EV_EXPIRED)
		i++; /* expiries due run first */
	ck_assert_uint_lt(i, R.n);
	ck_assert_int_eq(R.ev[i].kind, BOOK_EV_ACCEPTED);
}

void expect_trade(size_t i, uint64_t maker, uint64_t taker, rx_pages pages,
                  rx_price price, rx_pages mrem, rx_pages trem)
{
	ck_assert_uint_lt(i, R.n);
	const struct book_event *e = &R.ev[i];
	ck_assert_int_eq(e->kind, BOOK_EV_TRADE);
	ck_assert_uint_eq(e->maker_id, maker);
	ck_assert_uint_eq(e->id, taker);
	ck_assert_int_eq(e->pages, pages);
	ck_assert_int_eq(e->price, price);
	ck_assert_int_eq(e->maker_remaining, mrem);
	ck_assert_int_eq(e->remaining, trem);
}

void expect_cancel(size_t i, uint64_t id, rx_pages pages, enum book_cancel why)
{
	ck_assert_uint_lt(i, R.n);
	ck_assert_int_eq(R.ev[i].kind, BOOK_EV_CANCELLED);
	ck_assert_uint_eq(R.ev[i].id, id);
	ck_assert_int_eq(R.ev[i].pages, pages);
	ck_assert_int_eq(R.ev[i].cancel, why);
}

rx_pages remaining(struct book *b, uint64_t id)
{
	struct book_order o;
	return book_get(b, id, &o) ? o.pages : -1;
}

/* ---- params ---- */
