/*
 * test_book.c — named unit tests of the order book: one per rule and corner
 * case of exchange/core/book.h (validation, each time in force, post-only,
 * self-trade prevention, priority, reduce, expiry, queries). Recovery
 * (book_insert_resting, snapshots) is test_book_recovery.c.
 */
#include "exchange/core/book.h"
#include "tests/unit/book_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(params_valid_and_each_invalid)
{
	char err[256];
	struct book_params p = params();
	ck_assert_int_eq(book_params_check(&p, err, sizeof(err)), 0);
#define BAD(expr, word)                                                        \
	do {                                                                   \
		p = params();                                                  \
		expr;                                                          \
		err[0] = 0;                                                    \
		ck_assert_int_eq(book_params_check(&p, err, sizeof(err)), -1); \
		ck_assert_msg(strstr(err, word), "%s", err);                   \
		ck_assert_ptr_null(book_new(&p, err, sizeof(err)));            \
	} while (0)
	BAD(p.tick = 0, "tick");
	BAD(p.lot = -1, "lot");
	BAD(p.min_pages = 150, "min_pages");
	BAD(p.min_pages = 0, "min_pages");
	BAD(p.max_pages = 50, "max_pages");
	BAD(p.price_min = -10, "price_min");
	BAD(p.price_max = 10005, "price_max");
	BAD(p.price_max = 0, "price_max");
	BAD((p.tick = 1, p.price_max = 10 + BOOK_MAX_TICKS), "ticks");
	BAD((p.max_pages = INT64_MAX / 1000 * 100, p.lot = 100), "overflows");
	BAD(p.capacity = 0, "capacity");
	BAD(p.capacity = BOOK_MAX_CAPACITY + 1, "capacity");
#undef BAD
	/* The largest grid and a product just inside int64 are fine. */
	p = params();
	p.tick = 1;
	p.price_min = 0;
	p.price_max = BOOK_MAX_TICKS - 1;
	p.max_pages = INT64_MAX / p.price_max / 100 * 100;
	p.capacity = 1;
	ck_assert_int_eq(book_params_check(&p, err, sizeof(err)), 0);
}
END_TEST

/* ---- validation ---- */

START_TEST(rejections_carry_reason_and_message)
{
	struct book *b = mk();
	struct {
		struct book_cmd c;
		enum book_reject want;
	} cases[] = {
	    {{.kind = 9, .id = 1}, BOOK_REJ_BAD_KIND},
	    {gtc(0, 1, BOOK_BUY, 100, 100), BOOK_REJ_BAD_ID},
	    {gtc(1, 1, 2, 100, 100), BOOK_REJ_BAD_SIDE},
	    {order(1, 1, BOOK_BUY, 100, 100, 7), BOOK_REJ_BAD_TIF},
	    {gtc(1, 1, BOOK_BUY, 0, 100), BOOK_REJ_PAGES_LOT},
	    {gtc(1, 1, BOOK_BUY, -100, 100), BOOK_REJ_PAGES_LOT},
	    {gtc(1, 1, BOOK_BUY, 150, 100), BOOK_REJ_PAGES_LOT},
	    {gtc(1, 1, BOOK_BUY, 100100, 100), BOOK_REJ_PAGES_MAX},
	    {gtc(1, 1, BOOK_BUY, 100, 105), BOOK_REJ_PRICE_TICK},
	    {gtc(1, 1, BOOK_BUY, 100, 0), BOOK_REJ_PRICE_LOW},
	    {gtc(1, 1, BOOK_BUY, 100, -20), BOOK_REJ_PRICE_LOW},
	    {gtc(1, 1, BOOK_BUY, 100, 10010), BOOK_REJ_PRICE_HIGH},
	    {gtc(1, 1, BOOK_BUY, 100, INT64_MAX - 7), BOOK_REJ_PRICE_HIGH},
	    {order(1, 1, BOOK_BUY, 100, 100, BOOK_GTD), BOOK_REJ_EXPIRES_PAST},
	    {cancel(5), BOOK_REJ_UNKNOWN_ORDER},
	    {cancel(0), BOOK_REJ_UNKNOWN_ORDER},
	    {reduce(5, 100), BOOK_REJ_UNKNOWN_ORDER},
	};
	uint64_t seq = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(run(b, cases[i].c), cases[i].want);
		ck_assert_uint_eq(R.n, 1);
		ck_assert_int_eq(R.ev[0].kind, BOOK_EV_REJECTED);
		ck_assert_int_eq(R.ev[0].reject, cases[i].want);
		ck_assert_int_eq(R.ev[0].cmd, cases[i].c.kind);
		ck_assert_uint_eq(R.ev[0].seq, ++seq);
		ck_assert_msg(strlen(R.ev[0].message) > 10, "%s",
		              R.ev[0].message);
		ck_assert_str_ne(book_reject_name(cases[i].want), "unknown");
		ck_assert_uint_eq(book_count(b), 0);
	}
	/* Messages name the values a person has to fix. */
	run(b, gtc(1, 1, BOOK_BUY, 150, 100));
	ck_assert_str_eq(R.ev[0].message,
	                 "pages 150 is not a positive multiple of the lot of "
	                 "100 pages");
	book_free(b);
}
END_TEST

START_TEST(min_pages_and_stp_and_post_only_tif)
{
	char err[256];
	struct book_params p = params();
	p.min_pages = 300;
	struct book *b = book_new(&p, err, sizeof(err));
	ck_assert_int_eq(run(b, gtc(1, 1, BOOK_BUY, 200, 100)),
	                 BOOK_REJ_PAGES_MIN);
	struct book_cmd c = gtc(1, 1, BOOK_BUY, 300, 100);
	c.stp = 3;
	ck_assert_int_eq(run(b, c), BOOK_REJ_BAD_STP);
	c.stp = BOOK_STP_CANCEL_BOTH;
	c.post_only = true;
	c.tif = BOOK_IOC;
	ck_assert_int_eq(run(b, c), BOOK_REJ_POST_ONLY_TIF);
	c.tif = BOOK_FOK;
	ck_assert_int_eq(run(b, c), BOOK_REJ_POST_ONLY_TIF);
	c.tif = BOOK_GTC;
	place(b, c);
	ck_assert_uint_eq(book_count(b), 1);
	book_free(b);
}
END_TEST

START_TEST(duplicate_open_id_rejected_reuse_after_close_ok)
{
	struct book *b = mk();
	place(b, gtc(7, 1, BOOK_BUY, 100, 100));
	ck_assert_int_eq(run(b, gtc(7, 2, BOOK_SELL, 100, 500)),
	                 BOOK_REJ_DUPLICATE_ID);
	place(b, gtc(8, 2, BOOK_SELL, 100, 100));
	ck_assert_uint_eq(book_count(b), 0); /* 7 filled by 8 */
	place(b, gtc(7, 1, BOOK_BUY, 100, 100));
	ck_assert_uint_eq(book_count(b), 1);
	book_free(b);
}
END_TEST

START_TEST(book_full_rejects_new_orders)
{
	char err[256];
	struct book_params p = params();
	p.capacity = 2;
	struct book *b = book_new(&p, err, sizeof(err));
	place(b, gtc(1, 1, BOOK_BUY, 100, 100));
	place(b, gtc(2, 1, BOOK_BUY, 100, 110));
	/* Full even for an order that would trade at once: the rule is
	 * checked before matching so it never depends on the other side. */
	ck_assert_int_eq(run(b, gtc(3, 2, BOOK_SELL, 100, 100)),
	                 BOOK_REJ_BOOK_FULL);
	run(b, cancel(1));
	place(b, gtc(3, 2, BOOK_SELL, 100, 100));
	ck_assert_uint_eq(R.n, 2);
	expect_trade(1, 2, 3, 100, 110, 0, 0);
	book_free(b);
}
END_TEST

/* ---- matching ---- */

START_TEST(gtc_rests_and_is_queryable)
{
	struct book *b = mk();
	place(b, gtc(1, 11, BOOK_BUY, 300, 100));
	ck_assert_uint_eq(R.n, 1);
	ck_assert_int_eq(R.ev[0].pages, 300);
	ck_assert_int_eq(R.ev[0].price, 100);
	ck_assert_int_eq(R.ev[0].now, NOW);
	struct book_order o;
	ck_assert(book_get(b, 1, &o));
	ck_assert_int_eq(o.pages, 300);
	ck_assert_int_eq(o.price, 100);
	ck_assert_int_eq(o.account, 11);
	ck_assert_int_eq(o.side, BOOK_BUY);
	ck_assert_int_eq(o.tif, BOOK_GTC);
	ck_assert(!book_get(b, 2, &o));
	rx_price px;
	rx_pages q;
	ck_assert(book_best_bid(b, &px, &q));
	ck_assert_int_eq(px, 100);
	ck_assert_int_eq(q, 300);
	ck_assert(!book_best_ask(b, &px, &q));
	book_free(b);
}
END_TEST

START_TEST(trade_at_maker_price)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 200, 100));
	place(b, gtc(2, 2, BOOK_BUY, 200, 150));
	ck_assert_uint_eq(R.n, 2);
	expect_trade(1, 1, 2, 200, 100, 0, 0);
	ck_assert_int_eq(R.ev[1].maker_account, 1);
	ck_assert_int_eq(R.ev[1].account, 2);
	ck_assert_int_eq(R.ev[1].side, BOOK_BUY);
	ck_assert_uint_eq(book_count(b), 0);
	/* and a selling taker gets the bid's price */
	place(b, gtc(3, 1, BOOK_BUY, 100, 300));
	place(b, gtc(4, 2, BOOK_SELL, 100, 200));
	expect_trade(1, 3, 4, 100, 300, 0, 0);
	ck_assert_int_eq(R.ev[1].side, BOOK_SELL);
	book_free(b);
}
END_TEST

START_TEST(partial_fill_taker_rests_at_its_limit)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 2, BOOK_BUY, 500, 120));
	ck_assert_uint_eq(R.n, 2);
	expect_trade(1, 1, 2, 100, 100, 0, 400);
	ck_assert_int_eq(remaining(b, 2), 400);
	rx_price px;
	ck_assert(book_best_bid(b, &px, NULL));
	ck_assert_int_eq(px, 120);
	ck_assert(!book_best_ask(b, NULL, NULL));
	book_free(b);
}
END_TEST

START_TEST(partial_fill_maker_keeps_its_place)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 500, 100));
	place(b, gtc(2, 1, BOOK_SELL, 500, 100));
	place(b, gtc(3, 2, BOOK_BUY, 200, 100));
	expect_trade(1, 1, 3, 200, 100, 300, 0);
	place(b, gtc(4, 2, BOOK_BUY, 400, 100));
	ck_assert_uint_eq(R.n, 3);
	expect_trade(1, 1, 4, 300, 100, 0, 100);
	expect_trade(2, 2, 4, 100, 100, 400, 0);
	book_free(b);
}
END_TEST

START_TEST(price_priority_before_time)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 120));
	place(b, gtc(2, 1, BOOK_SELL, 100, 110));
	place(b, gtc(3, 1, BOOK_SELL, 100, 130));
	place(b, gtc(4, 2, BOOK_BUY, 300, 130));
	ck_assert_uint_eq(R.n, 4);
	expect_trade(1, 2, 4, 100, 110, 0, 200);
	expect_trade(2, 1, 4, 100, 120, 0, 100);
	expect_trade(3, 3, 4, 100, 130, 0, 0);
	book_free(b);
}
END_TEST

START_TEST(time_priority_fifo_within_level)
{
	struct book *b = mk();
	for (uint64_t id = 1; id <= 5; id++)
		place(b, gtc(id, (int64_t)id, BOOK_BUY, 100, 200));
	place(b, gtc(9, 99, BOOK_SELL, 500, 200));
	ck_assert_uint_eq(R.n, 6);
	for (uint64_t id = 1; id <= 5; id++)
		expect_trade(id, id, 9, 100, 200, 0, 500 - 100 * (int64_t)id);
	book_free(b);
}
END_TEST

START_TEST(taker_stops_at_its_limit)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 1, BOOK_SELL, 100, 200));
	place(b, gtc(3, 2, BOOK_BUY, 300, 150));
	ck_assert_uint_eq(R.n, 2);
	expect_trade(1, 1, 3, 100, 100, 0, 200);
	rx_price bid, ask;
	ck_assert(book_best_bid(b, &bid, NULL));
	ck_assert(book_best_ask(b, &ask, NULL));
	ck_assert_int_eq(bid, 150);
	ck_assert_int_eq(ask, 200);
	book_free(b);
}
END_TEST

START_TEST(ioc_partial_remainder_cancelled)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, order(2, 2, BOOK_BUY, 300, 100, BOOK_IOC));
	ck_assert_uint_eq(R.n, 3);
	expect_trade(1, 1, 2, 100, 100, 0, 200);
	expect_cancel(2, 2, 200, BOOK_CANCEL_IOC);
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

START_TEST(ioc_without_liquidity_cancelled_whole)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 200));
	place(b, order(2, 2, BOOK_BUY, 300, 100, BOOK_IOC));
	ck_assert_uint_eq(R.n, 2);
	expect_cancel(1, 2, 300, BOOK_CANCEL_IOC);
	ck_assert_uint_eq(book_count(b), 1);
	book_free(b);
}
END_TEST

START_TEST(ioc_filled_exactly_has_no_cancel)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 300, 100));
	place(b, order(2, 2, BOOK_BUY, 300, 100, BOOK_IOC));
	ck_assert_uint_eq(R.n, 2);
	expect_trade(1, 1, 2, 300, 100, 0, 0);
	book_free(b);
}
END_TEST

START_TEST(fok_fills_across_levels)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 1, BOOK_SELL, 200, 110));
	place(b, order(3, 2, BOOK_BUY, 300, 110, BOOK_FOK));
	ck_assert_uint_eq(R.n, 3);
	expect_trade(1, 1, 3, 100, 100, 0, 200);
	expect_trade(2, 2, 3, 200, 110, 0, 0);
	book_free(b);
}
END_TEST

START_TEST(fok_short_by_one_lot_kills_without_trading)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 1, BOOK_SELL, 200, 110));
	place(b, gtc(3, 1, BOOK_SELL, 500, 120)); /* beyond the limit */
	place(b, order(4, 2, BOOK_BUY, 400, 110, BOOK_FOK));
	ck_assert_uint_eq(R.n, 2);
	expect_cancel(1, 4, 400, BOOK_CANCEL_FOK);
	ck_assert_int_eq(remaining(b, 1), 100);
	ck_assert_int_eq(remaining(b, 2), 200);
	ck_assert_uint_eq(book_count(b), 3);
	book_free(b);
}
END_TEST

START_TEST(fok_self_trade_policies)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 2, BOOK_SELL, 100, 100));
	/* cancel-taker: account 1's own order is first, the FOK cannot
	 * fill, and nothing changes (not even the own order) */
	struct book_cmd c = order(3, 1, BOOK_BUY, 100, 100, BOOK_FOK);
	place(b, c);
	ck_assert_uint_eq(R.n, 2);
	expect_cancel(1, 3, 100, BOOK_CANCEL_FOK);
	c.stp = BOOK_STP_CANCEL_BOTH;
	place(b, c);
	expect_cancel(1, 3, 100, BOOK_CANCEL_FOK);
	ck_assert_uint_eq(book_count(b), 2);
	/* cancel-maker: the own order goes and the next one fills it */
	c.stp = BOOK_STP_CANCEL_MAKER;
	place(b, c);
	ck_assert_uint_eq(R.n, 3);
	expect_cancel(1, 1, 100, BOOK_CANCEL_SELF_TRADE);
	expect_trade(2, 2, 3, 100, 100, 0, 0);
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

START_TEST(post_only_rests_or_cancels)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	struct book_cmd c = gtc(2, 2, BOOK_BUY, 100, 90);
	c.post_only = true;
	place(b, c);
	ck_assert_uint_eq(R.n, 1);
	ck_assert_int_eq(remaining(b, 2), 100);
	c.id = 3;
	c.price = 100; /* would take */
	place(b, c);
	ck_assert_uint_eq(R.n, 2);
	expect_cancel(1, 3, 100, BOOK_CANCEL_POST_ONLY);
	ck_assert_int_eq(remaining(b, 1), 100);
	/* even against its own account's order: it would take */
	c.id = 4;
	c.account = 1;
	place(b, c);
	expect_cancel(1, 4, 100, BOOK_CANCEL_POST_ONLY);
	struct book_order o;
	ck_assert(book_get(b, 2, &o));
	ck_assert(o.post_only);
	book_free(b);
}
END_TEST

/* ---- self-trade prevention ---- */

START_TEST(stp_cancel_taker_keeps_maker)
{
	struct book *b = mk();
	place(b, gtc(1, 2, BOOK_SELL, 100, 100));
	place(b, gtc(2, 1, BOOK_SELL, 100, 100));
	place(b, gtc(3, 2, BOOK_SELL, 100, 100));
	place(b, gtc(4, 1, BOOK_BUY, 300, 100)); /* stp 0 = cancel taker */
	ck_assert_uint_eq(R.n, 3);
	expect_trade(1, 1, 4, 100, 100, 0, 200);
	expect_cancel(2, 4, 200, BOOK_CANCEL_SELF_TRADE);
	ck_assert_int_eq(remaining(b, 2), 100);
	ck_assert_int_eq(remaining(b, 3), 100);
	ck_assert_int_eq(remaining(b, 4), -1);
	book_free(b);
}
END_TEST

START_TEST(stp_cancel_maker_goes_on_matching)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 100));
	place(b, gtc(2, 2, BOOK_SELL, 100, 100));
	place(b, gtc(3, 1, BOOK_SELL, 100, 110));
	place(b, gtc(4, 2, BOOK_SELL, 100, 110));
	struct book_cmd c = gtc(5, 1, BOOK_BUY, 300, 110);
	c.stp = BOOK_STP_CANCEL_MAKER;
	place(b, c);
	ck_assert_uint_eq(R.n, 5);
	expect_cancel(1, 1, 100, BOOK_CANCEL_SELF_TRADE);
	ck_assert_int_eq(R.ev[1].account, 1);
	expect_trade(2, 2, 5, 100, 100, 0, 200);
	expect_cancel(3, 3, 100, BOOK_CANCEL_SELF_TRADE);
	expect_trade(4, 4, 5, 100, 110, 0, 100);
	ck_assert_int_eq(remaining(b, 5), 100);
	ck_assert_uint_eq(book_count(b), 1);
	book_free(b);
}
END_TEST

START_TEST(stp_cancel_both)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 500, 100));
	place(b, gtc(2, 2, BOOK_SELL, 100, 100));
	struct book_cmd c = gtc(3, 1, BOOK_BUY, 300, 100);
	c.stp = BOOK_STP_CANCEL_BOTH;
	place(b, c);
	ck_assert_uint_eq(R.n, 3);
	expect_cancel(1, 1, 500, BOOK_CANCEL_SELF_TRADE);
	expect_cancel(2, 3, 300, BOOK_CANCEL_SELF_TRADE);
	ck_assert_uint_eq(book_count(b), 1);
	ck_assert_int_eq(remaining(b, 2), 100);
	book_free(b);
}
END_TEST

START_TEST(stp_own_orders_apart_never_trade)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 100, 200));
	place(b, gtc(2, 1, BOOK_BUY, 100, 100)); /* no cross: both rest */
	ck_assert_uint_eq(book_count(b), 2);
	book_free(b);
}
END_TEST

/* ---- cancel and reduce ---- */

START_TEST(cancel_removes_and_second_cancel_rejected)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_BUY, 300, 100));
	place(b, gtc(2, 1, BOOK_BUY, 200, 100));
	ck_assert_int_eq(run(b, cancel(1)), BOOK_REJ_NONE);
	expect_cancel(0, 1, 300, BOOK_CANCEL_USER);
	ck_assert_int_eq(R.ev[0].price, 100);
	rx_pages q;
	ck_assert(book_best_bid(b, NULL, &q));
	ck_assert_int_eq(q, 200);
	ck_assert_int_eq(run(b, cancel(1)), BOOK_REJ_UNKNOWN_ORDER);
	run(b, cancel(2));
	ck_assert(!book_best_bid(b, NULL, NULL));
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

START_TEST(reduce_keeps_priority)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 500, 100));
	place(b, gtc(2, 1, BOOK_SELL, 500, 100));
	ck_assert_int_eq(run(b, reduce(1, 200)), BOOK_REJ_NONE);
	ck_assert_uint_eq(R.n, 1);
	ck_assert_int_eq(R.ev[0].kind, BOOK_EV_REDUCED);
	ck_assert_int_eq(R.ev[0].pages, 200);
	ck_assert_int_eq(R.ev[0].remaining, 500);
	rx_pages q;
	ck_assert(book_best_ask(b, NULL, &q));
	ck_assert_int_eq(q, 700);
	place(b, gtc(3, 2, BOOK_BUY, 300, 100));
	expect_trade(1, 1, 3, 200, 100, 0, 100);
	expect_trade(2, 2, 3, 100, 100, 400, 0);
	book_free(b);
}
END_TEST

START_TEST(reduce_invalid_quantities_rejected)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 500, 100));
	ck_assert_int_eq(run(b, reduce(1, 500)), BOOK_REJ_REDUCE_NOT_LESS);
	ck_assert_int_eq(run(b, reduce(1, 600)), BOOK_REJ_REDUCE_NOT_LESS);
	ck_assert_int_eq(run(b, reduce(1, 0)), BOOK_REJ_REDUCE_NOT_LESS);
	ck_assert_int_eq(run(b, reduce(1, -100)), BOOK_REJ_REDUCE_NOT_LESS);
	ck_assert_int_eq(run(b, reduce(1, 250)), BOOK_REJ_REDUCE_LOT);
	ck_assert_ptr_nonnull(strstr(R.ev[0].message, "lot"));
	ck_assert_int_eq(remaining(b, 1), 500);
	/* down to one lot is fine, even below min_pages */
	ck_assert_int_eq(run(b, reduce(1, 100)), BOOK_REJ_NONE);
	ck_assert_int_eq(remaining(b, 1), 100);
	book_free(b);
}
END_TEST

/* ---- GTD ---- */

START_TEST(gtd_expires_at_its_time)
{
	struct book *b = mk();
	struct book_cmd c = order(1, 1, BOOK_BUY, 100, 100, BOOK_GTD);
	c.now = 1000;
	c.expires = 5000;
	place(b, c);
	struct book_cmd e = {.kind = BOOK_CMD_EXPIRE, .now = 4999};
	ck_assert_int_eq(run(b, e), BOOK_REJ_NONE);
	ck_assert_uint_eq(R.n, 0);
	ck_assert_int_eq(remaining(b, 1), 100);
	e.now = 5000; /* exclusive: gone at its expiry time */
	run(b, e);
	ck_assert_uint_eq(R.n, 1);
	ck_assert_int_eq(R.ev[0].kind, BOOK_EV_EXPIRED);
	ck_assert_uint_eq(R.ev[0].id, 1);
	ck_assert_int_eq(R.ev[0].pages, 100);
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

START_TEST(gtd_expired_order_never_trades)
{
	struct book *b = mk();
	struct book_cmd c = order(1, 1, BOOK_SELL, 100, 100, BOOK_GTD);
	c.now = 1000;
	c.expires = 2000;
	place(b, c);
	struct book_cmd t = gtc(2, 2, BOOK_BUY, 100, 100);
	t.now = 2500;
	run(b, t);
	/* expiry comes first, with its own sequence number */
	ck_assert_uint_eq(R.n, 2);
	ck_assert_int_eq(R.ev[0].kind, BOOK_EV_EXPIRED);
	ck_assert_int_eq(R.ev[1].kind, BOOK_EV_ACCEPTED);
	ck_assert_uint_eq(R.ev[1].seq, R.ev[0].seq + 1);
	ck_assert_int_eq(remaining(b, 2), 100);
	book_free(b);
}
END_TEST

START_TEST(gtd_expiry_order_by_time_then_id)
{
	struct book *b = mk();
	rx_time_ns exp[] = {3000, 2000, 3000, 2500};
	uint64_t ids[] = {9, 5, 4, 7};
	for (int i = 0; i < 4; i++) {
		struct book_cmd c =
		    order(ids[i], 1, BOOK_BUY, 100, 100, BOOK_GTD);
		c.now = 1000;
		c.expires = exp[i];
		place(b, c);
	}
	struct book_cmd e = {.kind = BOOK_CMD_EXPIRE, .now = 10000};
	run(b, e);
	ck_assert_uint_eq(R.n, 4);
	uint64_t want[] = {5, 7, 4, 9};
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(R.ev[i].id, want[i]);
	book_free(b);
}
END_TEST

START_TEST(gtd_cancel_and_fill_leave_no_expiry)
{
	struct book *b = mk();
	struct book_cmd c = order(1, 1, BOOK_BUY, 100, 100, BOOK_GTD);
	c.expires = NOW + 10;
	place(b, c);
	c.id = 2;
	place(b, c);
	run(b, cancel(1));
	place(b, gtc(3, 2, BOOK_SELL, 100, 100)); /* fills 2 */
	struct book_cmd e = {.kind = BOOK_CMD_EXPIRE, .now = NOW + 100};
	run(b, e);
	ck_assert_uint_eq(R.n, 0);
	/* a GTC carries no expiry even when one is given */
	struct book_cmd g = gtc(4, 1, BOOK_BUY, 100, 100);
	g.expires = 5;
	place(b, g);
	struct book_order o;
	ck_assert(book_get(b, 4, &o));
	ck_assert_int_eq(o.expires, 0);
	book_free(b);
}
END_TEST

START_TEST(gtd_partly_filled_expires_with_what_is_left)
{
	struct book *b = mk();
	struct book_cmd c = order(1, 1, BOOK_SELL, 500, 100, BOOK_GTD);
	c.expires = NOW + 100;
	place(b, c);
	place(b, gtc(2, 2, BOOK_BUY, 200, 100));
	ck_assert_int_eq(run(b, reduce(1, 100)), BOOK_REJ_NONE);
	/* a rejected command still runs the expiries due before it */
	struct book_cmd bad = cancel(77);
	bad.now = NOW + 100;
	ck_assert_int_eq(run(b, bad), BOOK_REJ_UNKNOWN_ORDER);
	ck_assert_uint_eq(R.n, 2);
	ck_assert_int_eq(R.ev[0].kind, BOOK_EV_EXPIRED);
	ck_assert_int_eq(R.ev[0].pages, 100);
	ck_assert_int_eq(R.ev[0].price, 100);
	ck_assert_int_eq(R.ev[1].kind, BOOK_EV_REJECTED);
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

START_TEST(ioc_and_fok_ignore_expiry_and_never_rest)
{
	struct book *b = mk();
	struct book_cmd c = order(1, 1, BOOK_BUY, 100, 100, BOOK_IOC);
	c.expires = 1; /* in the past, but only GTD reads it */
	place(b, c);
	expect_cancel(1, 1, 100, BOOK_CANCEL_IOC);
	c.tif = BOOK_FOK;
	place(b, c);
	expect_cancel(1, 1, 100, BOOK_CANCEL_FOK);
	ck_assert_uint_eq(book_count(b), 0);
	book_free(b);
}
END_TEST

/* ---- events and queries ---- */

static uint64_t all_seq[256];
static size_t all_n;
static void seq_only(void *ctx, const struct book_event *ev)
{
	(void)ctx;
	all_seq[all_n++] = ev->seq;
}

START_TEST(sequence_numbers_have_no_gaps)
{
	struct book *b = mk();
	struct book_cmd cs[] = {
	    gtc(1, 1, BOOK_SELL, 100, 100),
	    gtc(2, 1, BOOK_SELL, 100, 110),
	    gtc(3, 2, BOOK_BUY, 300, 110),
	    cancel(42),
	    reduce(3, 50),
	    cancel(3),
	};
	all_n = 0;
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		cs[i].now = NOW;
		book_apply(b, &cs[i], seq_only, NULL);
	}
	ck_assert_uint_eq(all_n, 8);
	for (size_t i = 0; i < all_n; i++)
		ck_assert_uint_eq(all_seq[i], i + 1);
	ck_assert_uint_eq(book_seq(b), 8);
	book_free(b);
}
END_TEST

START_TEST(depth_aggregates_levels_best_first)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_BUY, 100, 100));
	place(b, gtc(2, 2, BOOK_BUY, 200, 100));
	place(b, gtc(3, 1, BOOK_BUY, 300, 90));
	place(b, gtc(4, 1, BOOK_BUY, 400, 10));
	place(b, gtc(5, 1, BOOK_SELL, 500, 10000));
	place(b, gtc(6, 1, BOOK_SELL, 600, 120));
	struct book_level lv[8];
	ck_assert_uint_eq(book_depth(b, BOOK_BUY, lv, 8), 3);
	ck_assert_int_eq(lv[0].price, 100);
	ck_assert_int_eq(lv[0].pages, 300);
	ck_assert_uint_eq(lv[0].orders, 2);
	ck_assert_int_eq(lv[1].price, 90);
	ck_assert_int_eq(lv[2].price, 10);
	ck_assert_uint_eq(book_depth(b, BOOK_BUY, lv, 2), 2);
	ck_assert_uint_eq(book_depth(b, BOOK_SELL, lv, 8), 2);
	ck_assert_int_eq(lv[0].price, 120);
	ck_assert_int_eq(lv[1].price, 10000);
	ck_assert_uint_eq(book_depth(b, BOOK_SELL, lv, 0), 0);
	ck_assert_uint_eq(book_count(b), 6);
	book_free(b);
}
END_TEST

START_TEST(wide_grid_finds_far_levels)
{
	char err[256];
	struct book_params p = params();
	p.tick = 1;
	p.lot = 1;
	p.min_pages = 1;
	p.price_min = 0;
	p.price_max = BOOK_MAX_TICKS - 1;
	struct book *b = book_new(&p, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	rx_price bids[] = {0, 64, 4095, 4096, 262143, 262144, 500000};
	for (uint64_t i = 0; i < 7; i++)
		place(b, gtc(i + 1, 1, BOOK_BUY, 1, bids[i]));
	place(b, gtc(100, 1, BOOK_SELL, 1, BOOK_MAX_TICKS - 1));
	place(b, gtc(101, 1, BOOK_SELL, 1, 500001));
	for (int i = 6; i >= 0; i--) {
		rx_price px;
		ck_assert(book_best_bid(b, &px, NULL));
		ck_assert_int_eq(px, bids[i]);
		run(b, cancel((uint64_t)i + 1));
	}
	ck_assert(!book_best_bid(b, NULL, NULL));
	/* one sell sweeps from the top of the grid to its bottom */
	place(b, gtc(200, 2, BOOK_BUY, 1, BOOK_MAX_TICKS - 1));
	expect_trade(1, 101, 200, 1, 500001, 0, 0);
	rx_price ask;
	ck_assert(book_best_ask(b, &ask, NULL));
	ck_assert_int_eq(ask, BOOK_MAX_TICKS - 1);
	book_free(b);
}
END_TEST

START_TEST(big_values_do_not_overflow)
{
	char err[256];
	struct book_params p = params();
	p.tick = INT64_C(1) << 40;
	p.price_min = p.tick;
	p.price_max = p.tick * 1000;
	p.lot = 1;
	p.min_pages = 1;
	p.max_pages = INT64_MAX / p.price_max;
	p.capacity = 4;
	struct book *b = book_new(&p, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	for (uint64_t i = 1; i <= 4; i++)
		place(b,
		      gtc(i, (int64_t)i, BOOK_SELL, p.max_pages, p.price_max));
	rx_pages q;
	ck_assert(book_best_ask(b, NULL, &q));
	ck_assert_int_eq(q, 4 * p.max_pages);
	book_free(b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("book");
	TCase *t = tcase_create("rules");
	tcase_add_test(t, params_valid_and_each_invalid);
	tcase_add_test(t, rejections_carry_reason_and_message);
	tcase_add_test(t, min_pages_and_stp_and_post_only_tif);
	tcase_add_test(t, duplicate_open_id_rejected_reuse_after_close_ok);
	tcase_add_test(t, book_full_rejects_new_orders);
	tcase_add_test(t, gtc_rests_and_is_queryable);
	tcase_add_test(t, trade_at_maker_price);
	tcase_add_test(t, partial_fill_taker_rests_at_its_limit);
	tcase_add_test(t, partial_fill_maker_keeps_its_place);
	tcase_add_test(t, price_priority_before_time);
	tcase_add_test(t, time_priority_fifo_within_level);
	tcase_add_test(t, taker_stops_at_its_limit);
	tcase_add_test(t, ioc_partial_remainder_cancelled);
	tcase_add_test(t, ioc_without_liquidity_cancelled_whole);
	tcase_add_test(t, ioc_filled_exactly_has_no_cancel);
	tcase_add_test(t, fok_fills_across_levels);
	tcase_add_test(t, fok_short_by_one_lot_kills_without_trading);
	tcase_add_test(t, fok_self_trade_policies);
	tcase_add_test(t, post_only_rests_or_cancels);
	tcase_add_test(t, stp_cancel_taker_keeps_maker);
	tcase_add_test(t, stp_cancel_maker_goes_on_matching);
	tcase_add_test(t, stp_cancel_both);
	tcase_add_test(t, stp_own_orders_apart_never_trade);
	tcase_add_test(t, cancel_removes_and_second_cancel_rejected);
	tcase_add_test(t, reduce_keeps_priority);
	tcase_add_test(t, reduce_invalid_quantities_rejected);
	tcase_add_test(t, gtd_expires_at_its_time);
	tcase_add_test(t, gtd_expired_order_never_trades);
	tcase_add_test(t, gtd_expiry_order_by_time_then_id);
	tcase_add_test(t, gtd_cancel_and_fill_leave_no_expiry);
	tcase_add_test(t, gtd_partly_filled_expires_with_what_is_left);
	tcase_add_test(t, ioc_and_fok_ignore_expiry_and_never_rest);
	tcase_add_test(t, sequence_numbers_have_no_gaps);
	tcase_add_test(t, depth_aggregates_levels_best_first);
	tcase_add_test(t, wide_grid_finds_far_levels);
	tcase_add_test(t, big_values_do_not_overflow);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
