/*
 * test_ramexctl_units.c — ramexctl's exact unit conversions
 * (exchange/ctl/ctl_units.h): prices in n$ or $, pages or sizes, and what
 * a person sees. A pure unit test; it lives beside test_ramexctl.c
 * because ramexctl owns only these test paths.
 */
#include <check.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "exchange/ctl/ctl_units.h"

static int64_t price(const char *s)
{
	int64_t v = -1;
	char err[256];
	ck_assert_msg(ctl_units_parse_price(s, &v, err, sizeof err) == 0,
	              "%s: %s", s, err);
	return v;
}

static int price_bad(const char *s)
{
	int64_t v;
	char err[256] = "";
	int rc = ctl_units_parse_price(s, &v, err, sizeof err);
	return rc == -1 && err[0] != 0;
}

static int64_t pages(const char *s)
{
	int64_t v = -1;
	char err[256];
	ck_assert_msg(ctl_units_parse_pages(s, &v, err, sizeof err) == 0,
	              "%s: %s", s, err);
	return v;
}

static int pages_bad(const char *s)
{
	int64_t v;
	char err[256] = "";
	return ctl_units_parse_pages(s, &v, err, sizeof err) == -1 && err[0];
}

START_TEST(parse_prices)
{
	ck_assert_int_eq(price("100000"), 100000);
	ck_assert_int_eq(price("0"), 0);
	ck_assert_int_eq(price("$0.0001"), 100000); /* 1/100 cent */
	ck_assert_int_eq(price("$0.00015"), 150000);
	ck_assert_int_eq(price("$1"), 1000000000);
	ck_assert_int_eq(price("$1."), 1000000000);
	ck_assert_int_eq(price("$.5"), 500000000);
	ck_assert_int_eq(price("$0.000000001"), 1);
	ck_assert_int_eq(price("$0.0000000010"), 1); /* trailing zero ok */
	ck_assert_int_eq(price("$9223372036.854775807"), INT64_MAX);
	ck_assert(price_bad("$9223372036.854775808"));
	ck_assert(price_bad("$0.0000000001")); /* below a nanodollar */
	ck_assert(price_bad("9223372036854775808"));
	ck_assert(price_bad("$"));
	ck_assert(price_bad("$."));
	ck_assert(price_bad("-5"));
	ck_assert(price_bad("$-1"));
	ck_assert(price_bad("1.5"));
	ck_assert(price_bad("$1.2x"));
	ck_assert(price_bad(""));
}
END_TEST

START_TEST(parse_pages)
{
	ck_assert_int_eq(pages("256"), 256);
	ck_assert_int_eq(pages("4GiB"), 1048576);
	ck_assert_int_eq(pages("1MiB"), 256);
	ck_assert_int_eq(pages("8KiB"), 2);
	ck_assert_int_eq(pages("1TiB"), 268435456);
	ck_assert(pages_bad("6KiB")); /* a page and a half */
	ck_assert(pages_bad("1KiB"));
	ck_assert(pages_bad("1.5GiB"));
	ck_assert(pages_bad("GiB"));
	ck_assert(pages_bad("4GB"));
	ck_assert(pages_bad("99999999999TiB"));
	ck_assert(pages_bad("-1"));
	ck_assert(pages_bad(""));
}
END_TEST

START_TEST(format)
{
	char b[64];
	/* the brief's worked example: 4 GiB offline a year at 1/100 cent */
	ctl_units_fmt_money(104857600000, b, sizeof b);
	ck_assert_str_eq(b, "$104.86");
	ctl_units_fmt_money(209715200000, b, sizeof b);
	ck_assert_str_eq(b, "$209.72");
	ctl_units_fmt_money(157286400000, b, sizeof b);
	ck_assert_str_eq(b, "$157.29");
	ctl_units_fmt_money(4999999, b, sizeof b);
	ck_assert_str_eq(b, "$0.00");
	ctl_units_fmt_money(5000000, b, sizeof b); /* half a cent rounds up */
	ck_assert_str_eq(b, "$0.01");
	ctl_units_fmt_money(-4999999, b, sizeof b); /* no "-$0.00" */
	ck_assert_str_eq(b, "$0.00");
	ctl_units_fmt_money(-5000000, b, sizeof b);
	ck_assert_str_eq(b, "-$0.01");
	ctl_units_fmt_money(INT64_MIN, b, sizeof b);
	ck_assert_str_eq(b, "-$9223372036.85");
	ctl_units_fmt_price(100000, b, sizeof b);
	ck_assert_str_eq(b, "$0.0001");
	ctl_units_fmt_price(1000000000, b, sizeof b);
	ck_assert_str_eq(b, "$1.00");
	ctl_units_fmt_price(1, b, sizeof b);
	ck_assert_str_eq(b, "$0.000000001");
	ctl_units_fmt_pages(1048576, b, sizeof b);
	ck_assert_str_eq(b, "1048576 (4.00 GiB)");
	/* the web's rule: halves away from zero, MiB and KiB below 0.01 GiB */
	ctl_units_fmt_pages(262143, b, sizeof b);
	ck_assert_str_eq(b, "262143 (1.00 GiB)");
	ctl_units_fmt_pages(256, b, sizeof b); /* a lot, not "0.00 GiB" */
	ck_assert_str_eq(b, "256 (1.00 MiB)");
	ctl_units_fmt_pages(INT64_MAX, b, sizeof b);
	ck_assert_str_eq(b,
	                 "9223372036854775807 (35,184,372,088,832.00 GiB)");
}
END_TEST

static const char *dur(int64_t ns)
{
	static char b[64];
	ctl_units_fmt_duration(ns, b, sizeof b);
	return b;
}

START_TEST(durations)
{
	const int64_t S = 1000000000;
	ck_assert_str_eq(dur(0), "0 s");
	ck_assert_str_eq(dur(30 * S), "30 s");
	ck_assert_str_eq(dur(120 * S), "2 min");
	ck_assert_str_eq(dur(90 * S), "1 min 30 s");
	ck_assert_str_eq(dur(3600 * S), "1 h");
	ck_assert_str_eq(dur(5400 * S), "1 h 30 min");
	ck_assert_str_eq(dur(3601 * S), "1 h 1 s");
	ck_assert_str_eq(dur(90000 * S), "1 d 1 h");
	/* under a second in ms, exact to the ns */
	ck_assert_str_eq(dur(250000000), "250 ms");
	ck_assert_str_eq(dur(500000), "0.5 ms");
	ck_assert_str_eq(dur(1), "0.000001 ms");
	ck_assert_str_eq(dur(999999999), "999.999999 ms");
	/* a fraction beside whole seconds: in the seconds, exact */
	ck_assert_str_eq(dur(1500000000), "1.5 s");
	ck_assert_str_eq(dur(60 * S + 250000000), "1 min 0.25 s");
	ck_assert_str_eq(dur(S + 1), "1.000000001 s");
	/* no contract has a negative notice (core/contract.c refuses it);
	 * shown with its sign, not as a wrapped huge number */
	ck_assert_str_eq(dur(-30 * S), "-30 s");
	ck_assert_str_eq(dur(-250000000), "-250 ms");
	ck_assert_str_eq(dur(INT64_MAX), "106751 d 23 h 47 min 16.854775807 s");
	ck_assert_str_eq(dur(INT64_MIN),
	                 "-106751 d 23 h 47 min 16.854775808 s");
	/* a short buffer is cut, never overrun, and ends */
	char small[8];
	memset(small, 'x', sizeof small);
	ctl_units_fmt_duration(5400 * S + 1, small, 6);
	ck_assert_uint_lt(strlen(small), 6);
	ck_assert_int_eq(small[6], 'x');
	ctl_units_fmt_duration(5400 * S, small, 0);
	ck_assert_int_eq(small[0], '1'); /* untouched */
}
END_TEST

START_TEST(round_trip)
{
	/* every price printed exactly parses back to itself */
	static const int64_t v[] = {
	    0, 1, 999, 100000, 150000, 1000000000, 123456789012, INT64_MAX};
	char b[64];
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		ctl_units_fmt_price(v[i], b, sizeof b);
		ck_assert_int_eq(price(b), v[i]);
	}
}
END_TEST

/* The table the web pages are checked against too (fmt_test.mjs): one
 * rounding rule for both. Run from the repository root, as make check does. */
START_TEST(same_text_as_the_web)
{
	FILE *f = fopen("tests/unit/fixtures/units.tsv", "r");
	char line[256], b[96];
	int n = 0;
	ck_assert_msg(f, "tests/unit/fixtures/units.tsv not found (run from the "
	                 "repository root)");
	while (fgets(line, sizeof line, f)) {
		char fn[32], want[96];
		long long v;
		line[strcspn(line, "\n")] = 0;
		if (line[0] == '#' || !line[0])
			continue;
		ck_assert_msg(sscanf(line, "%31[^\t]\t%lld\t%95[^\n]", fn, &v,
		                     want) == 3,
		              "bad line \"%s\"", line);
		if (!strcmp(fn, "money"))
			ctl_units_fmt_money(v, b, sizeof b);
		else if (!strcmp(fn, "price"))
			ctl_units_fmt_price(v, b, sizeof b);
		else if (!strcmp(fn, "bytes"))
			ctl_units_fmt_bytes(v, b, sizeof b);
		else if (!strcmp(fn, "amount"))
			ctl_units_fmt_amount(v, 0, b, sizeof b);
		else if (!strcmp(fn, "amount_exact"))
			ctl_units_fmt_amount(v, 1, b, sizeof b);
		else
			ck_abort_msg("unknown function %s", fn);
		ck_assert_msg(!strcmp(b, want), "%s(%lld) = \"%s\", the web says \"%s\"",
		              fn, v, b, want);
		n++;
	}
	fclose(f);
	ck_assert_int_ge(n, 30);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ramexctl_units");
	TCase *tc = tcase_create("units");
	tcase_add_test(tc, parse_prices);
	tcase_add_test(tc, parse_pages);
	tcase_add_test(tc, format);
	tcase_add_test(tc, durations);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, same_text_as_the_web);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
