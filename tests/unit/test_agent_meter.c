/*
 * test_agent_meter.c — page-second integration: exact sums, the carry
 * between periods, resuming after a restart, and bad input.
 */
#include "node-agent/core/meter.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#define S INT64_C(1000000000)

static const char *why;

START_TEST(constant_and_steps)
{
	struct meter *m = meter_new();
	struct meter_period p;

	ck_assert_int_eq(meter_start(m, "c1", 100 * S, 1000, 0, &why), 0);
	ck_assert_int_eq(meter_cut(m, "c1", 160 * S, &p, &why), 0);
	ck_assert_str_eq(p.contract, "c1");
	ck_assert_int_eq(p.start, 100 * S);
	ck_assert_int_eq(p.end, 160 * S);
	ck_assert_int_eq(p.page_seconds, 60000);
	ck_assert_int_eq(p.carry_pns, 0);

	/* 1000 pages for 10 s, then a partial recall to 400 for 50 s */
	ck_assert_int_eq(meter_set(m, "c1", 170 * S, 400, &why), 0);
	ck_assert_int_eq(meter_pages(m, "c1"), 400);
	ck_assert_int_eq(meter_cut(m, "c1", 220 * S, &p, &why), 0);
	ck_assert_int_eq(p.start, 160 * S);
	ck_assert_int_eq(p.page_seconds, 10000 + 20000);
	ck_assert_int_eq(meter_stop(m, "c1", 230 * S, &p, &why), 0);
	ck_assert_int_eq(p.page_seconds, 4000);
	ck_assert_int_eq(meter_count(m), 0);
	ck_assert_int_eq(meter_pages(m, "c1"), -1);
	meter_free(m);
}
END_TEST

/* Three pages for 1.5 s per period: 4.5 page-seconds a period. The carry
 * makes the reports add up to the exact floor of the total. */
START_TEST(carry_loses_nothing)
{
	struct meter *m = meter_new();
	struct meter_period p;
	int64_t sum = 0;

	meter_start(m, "c", 0, 3, 0, &why);
	for (int i = 1; i <= 101; i++) {
		ck_assert_int_eq(meter_cut(m, "c", i * 1500000000LL, &p, &why),
		                 0);
		sum += p.page_seconds;
		ck_assert(p.page_seconds == 4 || p.page_seconds == 5);
		ck_assert(p.carry_pns >= 0 && p.carry_pns < S);
	}
	/* 101 * 4.5 = 454.5 page-seconds */
	ck_assert_int_eq(sum, 454);
	ck_assert_int_eq(p.carry_pns, 500000000);
	meter_free(m);
}
END_TEST

/* A restart between two periods resumes from the spooled end and carry;
 * the totals equal an uninterrupted run. */
START_TEST(resume_after_restart)
{
	struct meter *a = meter_new(), *b = meter_new();
	struct meter_period p;
	int64_t whole = 0, split = 0;

	meter_start(a, "c", 0, 7, 0, &why);
	meter_start(b, "c", 0, 7, 0, &why);
	for (int i = 1; i <= 10; i++) {
		meter_cut(a, "c", i * 333333333LL, &p, &why);
		whole += p.page_seconds;
	}
	for (int i = 1; i <= 5; i++) {
		meter_cut(b, "c", i * 333333333LL, &p, &why);
		split += p.page_seconds;
	}
	meter_free(b); /* crash */
	b = meter_new();
	ck_assert_int_eq(meter_start(b, "c", p.end, 7, p.carry_pns, &why), 0);
	for (int i = 6; i <= 10; i++) {
		meter_cut(b, "c", i * 333333333LL, &p, &why);
		split += p.page_seconds;
	}
	ck_assert_int_eq(whole, split);
	ck_assert_int_eq(whole, 23); /* 7 * 3.33333333 s */
	meter_free(a);
	meter_free(b);
}
END_TEST

/* A year of a 4 TiB node's pages overflows 64-bit page-ns; the meter
 * does not. */
/* A period whose report could not be spooled (a full disk) is put back:
 * the next cut spans both periods and holds both sums, with the carry;
 * the last period of a stopped contract comes back with the pages given. */
START_TEST(uncut_period_goes_with_the_next)
{
	struct meter *m = meter_new();
	struct meter_period p, q;

	meter_start(m, "c", 0, 3, 0, &why);
	ck_assert_int_eq(meter_cut(m, "c", 1500000000LL, &p, &why), 0);
	ck_assert_int_eq(p.page_seconds, 4);
	ck_assert_int_eq(meter_uncut(m, &p, 3, &why), 0);
	ck_assert_int_eq(meter_uncut(m, &p, 3, &why), -1); /* once */
	ck_assert_int_eq(meter_set(m, "c", 2 * S, 2, &why), 0);
	ck_assert_int_eq(meter_cut(m, "c", 3 * S, &q, &why), 0);
	ck_assert_int_eq(q.start, 0);
	ck_assert_int_eq(q.end, 3 * S);
	ck_assert_int_eq(q.page_seconds, 3 * 2 + 2 * 1); /* 8, none lost */
	ck_assert_int_eq(q.carry_pns, 0);

	/* stopped, then put back: metered again, 0 pages, the sum kept */
	ck_assert_int_eq(meter_stop(m, "c", 4500000000LL, &p, &why), 0);
	ck_assert_int_eq(p.page_seconds, 3);
	ck_assert_int_eq(p.carry_pns, 0);
	ck_assert_int_eq(meter_count(m), 0);
	ck_assert_int_eq(meter_uncut(m, &p, 0, &why), 0);
	ck_assert_int_eq(meter_pages(m, "c"), 0);
	ck_assert_int_eq(meter_stop(m, "c", 9 * S, &q, &why), 0);
	ck_assert_int_eq(q.start, 3 * S);
	ck_assert_int_eq(q.page_seconds, 3);
	meter_free(m);
}
END_TEST

START_TEST(large_values)
{
	struct meter *m = meter_new();
	struct meter_period p;
	rx_pages pages = INT64_C(1) << 30;

	meter_start(m, "big", 0, pages, 0, &why);
	ck_assert_int_eq(meter_cut(m, "big", RX_SECONDS_PER_YEAR * S, &p, &why),
	                 0);
	ck_assert_int_eq(p.page_seconds, pages * RX_SECONDS_PER_YEAR);
	meter_free(m);
}
END_TEST

START_TEST(bad_input)
{
	struct meter *m = meter_new();
	struct meter_period p;
	char id[METER_ID_LEN + 1];

	ck_assert_int_eq(meter_start(m, "c", 10 * S, 5, 0, &why), 0);
	ck_assert_int_eq(meter_start(m, "c", 10 * S, 5, 0, &why), -1);
	ck_assert_str_eq(why, "contract is already metered");
	ck_assert_int_eq(meter_set(m, "c", 5 * S, 5, &why), -1);
	ck_assert(strstr(why, "backwards"));
	ck_assert_int_eq(meter_set(m, "c", 11 * S, -1, &why), -1);
	ck_assert_int_eq(meter_cut(m, "nope", 11 * S, &p, &why), -1);
	ck_assert_int_eq(meter_start(m, "d", 0, 1, S, &why), -1);
	memset(id, 'x', METER_ID_LEN);
	id[METER_ID_LEN] = 0;
	ck_assert_int_eq(meter_start(m, id, 0, 1, 0, &why), -1);
	for (int i = 1; i < METER_MAX_CONTRACTS; i++) {
		char name[16];
		snprintf(name, sizeof name, "k%d", i);
		ck_assert_int_eq(meter_start(m, name, 0, 1, 0, &why), 0);
	}
	ck_assert_int_eq(meter_start(m, "full", 0, 1, 0, &why), -1);
	ck_assert_str_eq(meter_id(m, 0), "c");
	meter_free(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("meter");
	TCase *tc = tcase_create("meter");
	tcase_add_test(tc, constant_and_steps);
	tcase_add_test(tc, carry_loses_nothing);
	tcase_add_test(tc, resume_after_restart);
	tcase_add_test(tc, uncut_period_goes_with_the_next);
	tcase_add_test(tc, large_values);
	tcase_add_test(tc, bad_input);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
