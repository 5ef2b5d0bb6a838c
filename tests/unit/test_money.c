/* test_money.c — the money rules of docs/money.md: the brief's worked
 * examples, the carry rule over real months and random splits, overflow,
 * text forms and the billing calendar. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/money.h"

#define Y      RX_SECONDS_PER_YEAR
#define GIB4   (INT64_C(1) << 20) /* 4 GiB in pages */
#define DAY_NS (INT64_C(86400) * MONEY_NS_PER_S)

/* A small deterministic generator, so a failure can be replayed. */
static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static rx_ndollars amount_of(rx_pagesec ps, rx_price price)
{
	rx_ndollars a = -1;
	char err[MONEY_MSG_MAX];
	ck_assert_msg(money_amount(ps, price, &a, err, sizeof err) == 0, "%s",
	              err);
	return a;
}

static const char *cents(rx_ndollars v)
{
	static char buf[MONEY_TEXT_MAX];
	ck_assert_int_gt(money_format_cents(v, buf, sizeof buf), 0);
	return buf;
}

START_TEST(brief_worked_examples)
{
	rx_pagesec ps = GIB4 * Y; /* 4 GiB offline for a whole year */

	ck_assert_int_eq(amount_of(ps, 100000), INT64_C(104857600000));
	ck_assert_str_eq(cents(amount_of(ps, 100000)), "104.86");
	ck_assert_int_eq(amount_of(ps, 200000), INT64_C(209715200000));
	ck_assert_str_eq(cents(amount_of(ps, 200000)), "209.72");
	/* lent at 15/1000 cent: $157.2864, which rounds up to $157.29 */
	ck_assert_int_eq(amount_of(ps, 150000), INT64_C(157286400000));
	ck_assert_str_eq(cents(amount_of(ps, 150000)), "157.29");
}
END_TEST

/* The brief's machine, month by month through 2027 (28-, 30- and 31-day
 * months), bills exactly the annual figure; so does an awkward price whose
 * months all leave a remainder. */
START_TEST(year_of_months_sums_exactly)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30,
	                             31, 31, 30, 31, 30, 31};
	const rx_price prices[] = {100000, 200000, 150000, 7, 99991, 1};
	const rx_pages pages[] = {GIB4, GIB4, GIB4, 3, 12345, 1};
	for (size_t k = 0; k < sizeof prices / sizeof prices[0]; k++) {
		struct money_carry c = {0};
		rx_ndollars sum = 0;
		rx_pagesec total = 0;
		int with_rem = 0;
		for (int m = 1; m <= 12; m++) {
			rx_time_ns len = money_month_start(2027, m + 1) -
			                 money_month_start(2027, m);
			ck_assert_int_eq(len, days[m - 1] * DAY_NS);
			rx_pagesec ps = pages[k] * (len / MONEY_NS_PER_S);
			rx_ndollars a;
			ck_assert_int_eq(
			    money_accrue(&c, ps, prices[k], &a, NULL, 0), 0);
			with_rem += c.rem != 0;
			sum += a;
			total += ps;
		}
		ck_assert_int_eq(total, pages[k] * Y);
		ck_assert_int_eq(sum, amount_of(total, prices[k]));
		ck_assert_int_eq(c.rem, 0); /* a whole year divides exactly */
		if (prices[k] == 7)
			ck_assert_int_gt(with_rem, 0); /* the carry did work */
	}
	/* The same machine's monthly amounts, naively rounded each month,
	 * would not add up: this is what the carry is for. */
	rx_ndollars naive = 0;
	for (int m = 1; m <= 12; m++) {
		rx_pagesec ps = 3 * ((money_month_start(2027, m + 1) -
		                      money_month_start(2027, m)) /
		                     MONEY_NS_PER_S);
		naive += amount_of(ps, 7);
	}
	ck_assert_int_ne(naive, amount_of(3 * Y, 7));
}
END_TEST

/* Property: cutting a usage into random pieces, pricing each with the carry,
 * never changes the total from the amount of the whole. */
START_TEST(random_splits_never_change_the_total)
{
	rng_state = 0x9e3779b97f4a7c15u;
	for (int round = 0; round < 2000; round++) {
		rx_pagesec whole = (rx_pagesec)(rng() % (UINT64_C(1) << 45));
		rx_price price = (rx_price)(rng() % 5000000);
		int pieces = 1 + (int)(rng() % 40);
		struct money_carry c = {0};
		rx_ndollars sum = 0;
		rx_pagesec left = whole;
		for (int i = 0; i < pieces; i++) {
			rx_pagesec ps =
			    i == pieces - 1
			        ? left
			        : (rx_pagesec)(rng() % (uint64_t)(left + 1));
			left -= ps;
			rx_ndollars a;
			ck_assert_int_eq(
			    money_accrue(&c, ps, price, &a, NULL, 0), 0);
			ck_assert_int_ge(a, 0);
			sum += a;
		}
		ck_assert_int_eq(left, 0);
		ck_assert_int_eq(sum, amount_of(whole, price));
		ck_assert_int_eq(c.rem,
		                 (int64_t)(((__int128)whole * price) % Y));
	}
}
END_TEST

/* A correction (negative page-seconds) undoes exactly what it corrects,
 * carry included. */
START_TEST(corrections_are_exact_inverses)
{
	struct money_carry c = {0};
	rx_ndollars a, b, d;
	ck_assert_int_eq(money_accrue(&c, 1000, 7, &a, NULL, 0), 0);
	ck_assert_int_eq(money_accrue(&c, 777777, 33333, &b, NULL, 0), 0);
	ck_assert_int_eq(money_accrue(&c, -777777, 33333, &d, NULL, 0), 0);
	ck_assert_int_eq(d, -b);
	ck_assert_int_eq(c.rem, 7000);
	ck_assert_int_eq(money_accrue(&c, -1000, 7, &d, NULL, 0), 0);
	ck_assert_int_eq(d, -a);
	ck_assert_int_eq(c.rem, 0);
}
END_TEST

START_TEST(overflow_is_an_error_not_a_wrap)
{
	char err[MONEY_MSG_MAX] = "";
	struct money_carry c = {1234};
	rx_ndollars a = 42;
	/* 2^62 page-seconds at 2^62 n$/page-year is ~2^99 n$ */
	ck_assert_int_eq(money_accrue(&c, INT64_C(1) << 62, INT64_C(1) << 62,
	                              &a, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "does not fit"), "%s", err);
	ck_assert_int_eq(a, 42);       /* outputs untouched */
	ck_assert_int_eq(c.rem, 1234); /* carry untouched */
	ck_assert_int_eq(money_accrue(&c, INT64_MIN, INT64_MAX, &a, NULL, 0),
	                 -1);
	/* largest that fits: INT64_MAX page-seconds at one year's price */
	ck_assert_int_eq(money_amount(INT64_MAX, Y, &a, NULL, 0), 0);
	ck_assert_int_eq(a, INT64_MAX);
	ck_assert_int_eq(money_amount(INT64_MAX, Y + 1, &a, NULL, 0), -1);
	ck_assert_int_eq(money_amount(5, -1, &a, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "negative"), "%s", err);

	int64_t r = 9;
	ck_assert(!money_add(INT64_MAX, 1, &r));
	ck_assert(!money_sub(INT64_MIN, 1, &r));
	ck_assert(!money_mul(INT64_C(1) << 32, INT64_C(1) << 31, &r));
	ck_assert_int_eq(r, 9);
	ck_assert(money_add(INT64_MAX - 1, 1, &r) && r == INT64_MAX);
	ck_assert(money_mul(-(INT64_C(1) << 31), INT64_C(1) << 32, &r) &&
	          r == INT64_MIN);
}
END_TEST

START_TEST(fees_and_cents_carry)
{
	struct money_carry fc = {0}, cc = {0};
	rx_ndollars fees = 0, total = 0;
	int64_t paid = 0;
	rng_state = 42;
	for (int i = 0; i < 1000; i++) {
		rx_ndollars a = (rx_ndollars)(rng() % 100000000), f;
		int64_t ct;
		ck_assert_int_eq(money_fee(&fc, a, 25, &f, NULL, 0), 0);
		ck_assert_int_eq(money_to_cents(&cc, a, &ct, NULL, 0), 0);
		fees += f;
		total += a;
		paid += ct;
	}
	ck_assert_int_eq(fees, (total * 25) / 10000);
	ck_assert_int_eq(fees * 10000 + fc.rem, total * 25);
	ck_assert_int_eq(paid * RX_NANODOLLARS_PER_CENT + cc.rem, total);

	char err[MONEY_MSG_MAX];
	rx_ndollars f;
	ck_assert_int_eq(money_fee(&fc, 5, 10001, &f, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "basis points"), "%s", err);
}
END_TEST

START_TEST(format_cents_rounds_half_away_from_zero)
{
	static const struct {
		rx_ndollars v;
		const char *s;
	} cases[] = {
	    {0, "0.00"},
	    {1, "0.00"},
	    {4999999, "0.00"},
	    {5000000, "0.01"},
	    {-4999999, "0.00"},
	    {-5000000, "-0.01"},
	    {10000000, "0.01"},
	    {1000000000, "1.00"},
	    {-1234567890, "-1.23"},
	    {INT64_C(104857600000), "104.86"},
	    {INT64_MAX, "9223372036.85"},
	    {INT64_MIN, "-9223372036.85"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_str_eq(cents(cases[i].v), cases[i].s);
	char small[4];
	ck_assert_int_eq(money_format_cents(100000000, small, sizeof small),
	                 -1);
}
END_TEST

START_TEST(format_exact_and_page_years)
{
	char b[MONEY_TEXT_MAX];
	ck_assert_int_gt(money_format_exact(INT64_C(104857600000), b, sizeof b),
	                 0);
	ck_assert_str_eq(b, "104.857600000");
	money_format_exact(-1, b, sizeof b);
	ck_assert_str_eq(b, "-0.000000001");
	money_format_exact(INT64_MIN, b, sizeof b);
	ck_assert_str_eq(b, "-9223372036.854775808");
	money_format_page_years(GIB4 * Y, b, sizeof b);
	ck_assert_str_eq(b, "1048576.000000");
	money_format_page_years(Y / 2, b, sizeof b);
	ck_assert_str_eq(b, "0.500000");
	money_format_page_years(31, b, sizeof b); /* 0.00000098 */
	ck_assert_str_eq(b, "0.000001");
}
END_TEST

START_TEST(parse_accepts_plain_decimals)
{
	static const struct {
		const char *s;
		rx_ndollars v;
	} ok[] = {
	    {"0", 0},
	    {"-0", 0},
	    {"104.86", INT64_C(104860000000)},
	    {"0.000000001", 1},
	    {"-3", INT64_C(-3000000000)},
	    {"007.5", INT64_C(7500000000)},
	    {"9223372036.854775807", INT64_MAX},
	    {"-9223372036.854775808", INT64_MIN},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		rx_ndollars v = 12345;
		char err[MONEY_MSG_MAX] = "";
		ck_assert_msg(money_parse(ok[i].s, &v, err, sizeof err) == 0,
		              "%s: %s", ok[i].s, err);
		ck_assert_int_eq(v, ok[i].v);
	}
}
END_TEST

START_TEST(parse_refuses_everything_else)
{
	static const struct {
		const char *s;
		const char *why;
	} bad[] = {
	    {"", "empty"},
	    {"-", "start with a digit"},
	    {".5", "start with a digit"},
	    {"+1", "start with a digit"},
	    {" 1", "start with a digit"},
	    {"$1", "start with a digit"},
	    {"1.", "digit after the decimal point"},
	    {"1.0000000001", "nine decimals"},
	    {"1e3", "unexpected character"},
	    {"1,000", "unexpected character"},
	    {"1.5 ", "unexpected character"},
	    {"1.2.3", "unexpected character"},
	    {"9223372036.854775808", "outside"},
	    {"-9223372036.854775809", "outside"},
	    {"99999999999999999999999999999999", "too large"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rx_ndollars v = 777;
		char err[MONEY_MSG_MAX] = "";
		ck_assert_msg(money_parse(bad[i].s, &v, err, sizeof err) == -1,
		              "accepted \"%s\"", bad[i].s);
		ck_assert_msg(strstr(err, bad[i].why), "\"%s\": %s", bad[i].s,
		              err);
		ck_assert_int_eq(v, 777);
	}
	ck_assert_int_eq(money_parse(NULL, &(rx_ndollars){0}, NULL, 0), -1);
}
END_TEST

START_TEST(parse_and_format_exact_round_trip)
{
	rng_state = 7;
	for (int i = 0; i < 5000; i++) {
		rx_ndollars v = (rx_ndollars)rng(), back;
		char b[MONEY_TEXT_MAX];
		ck_assert_int_gt(money_format_exact(v, b, sizeof b), 0);
		ck_assert_int_eq(money_parse(b, &back, NULL, 0), 0);
		ck_assert_int_eq(back, v);
	}
}
END_TEST

START_TEST(calendar_matches_libc)
{
	ck_assert_int_eq(money_month_start(1970, 1), 0);
	ck_assert_int_eq(money_month_start(2027, 13),
	                 money_month_start(2028, 1));
	/* 2028 is a leap year, 2100 is not */
	ck_assert_int_eq(money_month_start(2028, 3) -
	                     money_month_start(2028, 2),
	                 29 * DAY_NS);
	ck_assert_int_eq(money_month_start(2100, 3) -
	                     money_month_start(2100, 2),
	                 28 * DAY_NS);
	ck_assert_int_eq(money_month_start(2028, 1) -
	                     money_month_start(2027, 1),
	                 365 * DAY_NS);
	for (int y = 1970; y <= 2200; y++) {
		for (int m = 1; m <= 12; m++) {
			struct tm tm = {
			    .tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = 1};
			rx_time_ns s = money_month_start(y, m);
			ck_assert_int_eq(s,
			                 (int64_t)timegm(&tm) * MONEY_NS_PER_S);
			int yy, mm;
			money_month_of(s, &yy, &mm);
			ck_assert(yy == y && mm == m);
			money_month_of(money_month_start(y, m + 1) - 1, &yy,
			               &mm);
			ck_assert(yy == y && mm == m);
		}
	}
	rng_state = 99;
	for (int i = 0; i < 10000; i++) {
		rx_time_ns t =
		    (rx_time_ns)(rng() % (uint64_t)money_month_start(2200, 12));
		time_t secs = (time_t)(t / MONEY_NS_PER_S);
		struct tm tm;
		gmtime_r(&secs, &tm);
		int yy, mm, dd, ss;
		money_month_of(t, &yy, &mm);
		ck_assert_int_eq(yy, tm.tm_year + 1900);
		ck_assert_int_eq(mm, tm.tm_mon + 1);
		money_civil_of(t, &yy, &mm, &dd, &ss);
		ck_assert_int_eq(yy, tm.tm_year + 1900);
		ck_assert_int_eq(mm, tm.tm_mon + 1);
		ck_assert_int_eq(dd, tm.tm_mday);
		ck_assert_int_eq(ss, tm.tm_hour * 3600 + tm.tm_min * 60 +
		                         tm.tm_sec);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("money");
	TCase *tc = tcase_create("money");
	tcase_add_test(tc, brief_worked_examples);
	tcase_add_test(tc, year_of_months_sums_exactly);
	tcase_add_test(tc, random_splits_never_change_the_total);
	tcase_add_test(tc, corrections_are_exact_inverses);
	tcase_add_test(tc, overflow_is_an_error_not_a_wrap);
	tcase_add_test(tc, fees_and_cents_carry);
	tcase_add_test(tc, format_cents_rounds_half_away_from_zero);
	tcase_add_test(tc, format_exact_and_page_years);
	tcase_add_test(tc, parse_accepts_plain_decimals);
	tcase_add_test(tc, parse_refuses_everything_else);
	tcase_add_test(tc, parse_and_format_exact_round_trip);
	tcase_add_test(tc, calendar_matches_libc);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
