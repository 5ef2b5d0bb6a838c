/*
 * test_book_recovery.c — named unit tests of rebuilding an order book
 * (exchange/core/book.h): book_insert_resting from the stored orders, and
 * the snapshot (exchange/core/book_snap.c) written and restored, refused
 * whole when truncated or damaged.
 */
#include "exchange/core/book.h"
#include "tests/unit/book_fixture.h"
#include "tests/unit/book_ref.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- recovery ---- */

static void reinsert(void *ctx, const struct book_order *o)
{
	char err[256];
	ck_assert_msg(book_insert_resting(ctx, o, err, sizeof(err)) == 0, "%s",
	              err);
}

static struct book *sample(void)
{
	struct book *b = mk();
	place(b, gtc(1, 1, BOOK_SELL, 500, 120));
	place(b, gtc(2, 2, BOOK_SELL, 300, 120));
	place(b, gtc(3, 1, BOOK_BUY, 300, 100));
	struct book_cmd c = order(4, 3, BOOK_BUY, 200, 100, BOOK_GTD);
	c.expires = NOW + 500;
	c.post_only = true;
	c.stp = BOOK_STP_CANCEL_BOTH;
	place(b, c);
	place(b, gtc(5, 2, BOOK_BUY, 100, 110));
	return b;
}

static void same_book(struct book *a, struct book *b)
{
	size_t na = book_snapshot_size(a), nb = book_snapshot_size(b);
	ck_assert_uint_eq(na, nb);
	unsigned char *x = malloc(na), *y = malloc(nb);
	ck_assert_uint_eq(book_snapshot(a, x, na), na);
	ck_assert_uint_eq(book_snapshot(b, y, nb), nb);
	ck_assert(memcmp(x, y, na) == 0);
	free(x);
	free(y);
}

START_TEST(insert_resting_rebuilds_same_book)
{
	struct book *a = sample();
	struct book *b = mk();
	book_foreach(a, reinsert, b);
	book_set_seq(b, book_seq(a));
	same_book(a, b);
	/* the same next command gives the same events */
	struct rec ra;
	run(a, gtc(9, 9, BOOK_SELL, 700, 100));
	ra = R;
	run(b, gtc(9, 9, BOOK_SELL, 700, 100));
	ck_assert_uint_eq(R.n, ra.n);
	char err[512];
	for (size_t i = 0; i < R.n; i++)
		ck_assert_msg(book_ref_event_cmp(&R.ev[i], &ra.ev[i], err,
		                                 sizeof(err)) == 0,
		              "%s", err);
	book_free(a);
	book_free(b);
}
END_TEST

START_TEST(insert_resting_refuses_bad_orders)
{
	char err[256];
	struct book *b = sample();
	struct book_order o = {.id = 50,
	                       .account = 1,
	                       .side = BOOK_BUY,
	                       .tif = BOOK_GTC,
	                       .price = 120,
	                       .pages = 100};
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cross"));
	o.price = 105;
	o.id = 1;
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), -1);
	o.id = 50;
	o.tif = BOOK_IOC;
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), -1);
	o.tif = BOOK_GTC;
	o.pages = 150;
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), -1);
	o.pages = 100;
	o.price = 107;
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), -1);
	o.price = 110;
	ck_assert_msg(book_insert_resting(b, &o, err, sizeof(err)) == 0, "%s",
	              err);
	/* pages below min_pages are fine: a partly filled order */
	ck_assert_uint_eq(book_count(b), 6);
	book_free(b);
}
END_TEST

START_TEST(insert_resting_gtd_past_expiry_expires_next)
{
	char err[256];
	struct book *b = mk();
	struct book_order o = {.id = 3,
	                       .account = 1,
	                       .side = BOOK_SELL,
	                       .tif = BOOK_GTD,
	                       .price = 200,
	                       .pages = 100,
	                       .expires = NOW - 1};
	ck_assert_int_eq(book_insert_resting(b, &o, err, sizeof(err)), 0);
	ck_assert_uint_eq(book_count(b), 1);
	place(b, gtc(4, 2, BOOK_BUY, 100, 200));
	ck_assert_uint_eq(R.n, 2); /* expired, accepted: no trade */
	ck_assert_int_eq(R.ev[0].kind, BOOK_EV_EXPIRED);
	ck_assert_uint_eq(R.ev[0].id, 3);
	ck_assert_int_eq(run(b, cancel(4)), BOOK_REJ_NONE);
	book_free(b);
}
END_TEST

START_TEST(snapshot_restore_round_trip)
{
	char err[256];
	struct book *a = sample();
	size_t n = book_snapshot_size(a);
	unsigned char *buf = malloc(n);
	ck_assert_uint_eq(book_snapshot(a, buf, n - 1), 0);
	ck_assert_uint_eq(book_snapshot(a, buf, n), n);
	struct book *b = book_restore(buf, n, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	ck_assert_uint_eq(book_seq(b), book_seq(a));
	ck_assert_uint_eq(book_count(b), 5);
	same_book(a, b);
	struct book_order o;
	ck_assert(book_get(b, 4, &o));
	ck_assert(o.post_only);
	ck_assert_int_eq(o.stp, BOOK_STP_CANCEL_BOTH);
	ck_assert_int_eq(o.expires, NOW + 500);
	book_free(b);

	/* every truncation and every flipped byte is refused */
	for (size_t len = 0; len < n; len++)
		ck_assert_ptr_null(book_restore(buf, len, err, sizeof(err)));
	for (size_t i = 0; i < n; i++) {
		buf[i] ^= 0x40;
		ck_assert_ptr_null(book_restore(buf, n, err, sizeof(err)));
		ck_assert(err[0]);
		buf[i] ^= 0x40;
	}
	free(buf);
	book_free(a);
}
END_TEST

START_TEST(snapshot_of_empty_book)
{
	char err[256];
	struct book *a = mk();
	unsigned char buf[256];
	size_t n = book_snapshot(a, buf, sizeof(buf));
	ck_assert_uint_gt(n, 0);
	struct book *b = book_restore(buf, n, err, sizeof(err));
	ck_assert_msg(b, "%s", err);
	ck_assert_uint_eq(book_count(b), 0);
	ck_assert_int_eq(book_params_of(b)->tick, 10);
	book_free(a);
	book_free(b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("book_recovery");
	TCase *t = tcase_create("recovery");
	tcase_add_test(t, insert_resting_rebuilds_same_book);
	tcase_add_test(t, insert_resting_refuses_bad_orders);
	tcase_add_test(t, insert_resting_gtd_past_expiry_expires_next);
	tcase_add_test(t, snapshot_restore_round_trip);
	tcase_add_test(t, snapshot_of_empty_book);
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
