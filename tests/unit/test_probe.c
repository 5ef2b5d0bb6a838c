/*
 * test_probe.c — the active probing decision (node-agent/core/probe.c): a
 * share of the cold pages, within its bounds; nothing near the PSI ceiling,
 * under pressure, while refaulting or before an estimate; with MGLRU no
 * more than the generations know idle; and a back-off after pressure
 * before the next probe.
 */
#include "node-agent/core/probe.h"

#include <check.h>
#include <string.h>

static struct wsest_estimate est(rx_pages resident, rx_pages wss, rx_pages err,
                                 int64_t stall_ppm)
{
	struct wsest_estimate e;
	memset(&e, 0, sizeof e);
	e.source = WSEST_MGLRU;
	e.resident = resident;
	e.wss = wss;
	e.wss_err = err;
	e.stall_ppm = stall_ppm;
	e.cold_known = resident; /* every page outside the set idle long */
	return e;
}

START_TEST(share_of_cold)
{
	struct probe_config c;
	struct probe p = {0};
	probe_config_default(&c);

	struct wsest_estimate e = est(150000, 40000, 1000, 0);
	ck_assert_int_eq(probe_next(&c, &p, &e), 10900); /* 10 % of 109000 */
	e = est(1000000, 40000, 0, 0);
	ck_assert_int_eq(probe_next(&c, &p, &e), c.step_max);
	e = est(42000, 40000, 0, 0);
	ck_assert_int_eq(probe_next(&c, &p, &e), c.step_min);
	/* fewer cold pages than the smallest step: nothing */
	e = est(40200, 40000, 0, 0);
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
	/* the error bar is never probed into */
	e = est(50000, 40000, 10000, 0);
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
	e = est(150000, 40000, 1000, 0);
	e.source = WSEST_NONE;
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
	e = est(150000, 40000, 1000, 0);
	e.deficit = 1;
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
}
END_TEST

/* MGLRU: no more than the generations know idle a window, which reclaim
 * takes first; none when the oldest generation is younger than that
 * (reclaim would age to find pages, merging working ones into it). The
 * coarse sources know no generations. */
START_TEST(only_pages_known_idle)
{
	struct probe_config c;
	struct probe p = {0};
	probe_config_default(&c);

	struct wsest_estimate e = est(150000, 40000, 1000, 0);
	e.cold_known = 50000;
	ck_assert_int_eq(probe_next(&c, &p, &e), 5000);
	e.cold_known = 0;
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
	e.cold_known = c.step_min - 1;
	ck_assert_int_eq(probe_next(&c, &p, &e), 0);
	e.source = WSEST_LRU;
	ck_assert_int_eq(probe_next(&c, &p, &e), 10900);
}
END_TEST

START_TEST(backs_off_under_pressure)
{
	struct probe_config c;
	struct probe p = {0};
	probe_config_default(&c);
	c.backoff_samples = 3;

	struct wsest_estimate calm = est(150000, 40000, 0, 2499);
	ck_assert_int_gt(probe_next(&c, &p, &calm), 0);
	/* half the 0.5 % ceiling is where probing stops, at once */
	struct wsest_estimate hot = est(150000, 40000, 0, 2500);
	ck_assert_int_eq(probe_next(&c, &p, &hot), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(probe_next(&c, &p, &calm), 0);
	ck_assert_int_gt(probe_next(&c, &p, &calm), 0);
	/* pressure by the estimator's hysteresis, whatever the share */
	hot = est(150000, 40000, 0, 0);
	hot.pressure = 1;
	ck_assert_int_eq(probe_next(&c, &p, &hot), 0);
	ck_assert_int_eq(p.cooldown, 3);
}
END_TEST

START_TEST(bad_config)
{
	struct probe_config c;
	probe_config_default(&c);
	ck_assert_ptr_null(probe_config_check(&c));
	c.ceiling_ppm = 0;
	ck_assert_ptr_nonnull(probe_config_check(&c));
	probe_config_default(&c);
	c.step_pct = 101;
	ck_assert_ptr_nonnull(probe_config_check(&c));
	probe_config_default(&c);
	c.step_max = c.step_min - 1;
	ck_assert_ptr_nonnull(strstr(probe_config_check(&c), "largest"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, share_of_cold);
	tcase_add_test(tc, only_pages_known_idle);
	tcase_add_test(tc, backs_off_under_pressure);
	tcase_add_test(tc, bad_config);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
