/*
 * test_simload.c — the sim workload profiles: steady is flat, diurnal
 * follows a sine (checked against libm at many points) with the seed as
 * its phase, bursty is reproducible from its seed, has bursts in about
 * SIMLOAD_BURST_PCT % of its slots, one contiguous burst per slot at most,
 * within the swing; and the refusals of simload_check. Then the two edges
 * that use it: the agent's sim_* settings (config_sim_load) and the sim
 * executor following a profile (exec_sim_advance), which takes offline
 * pages back when the workload grows into them.
 */
#include "node-agent/config.h"
#include "node-agent/core/simload.h"
#include "node-agent/exec.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S  INT64_C(1000000000)
#define MS INT64_C(1000000)

static struct simload_config cfg(enum simload_kind k, rx_pages base,
                                 rx_pages swing, int64_t period_s,
                                 uint64_t seed)
{
	struct simload_config c = {k, 1000000, base, swing, period_s, seed};
	ck_assert_msg(simload_check(&c) == NULL, "%s", simload_check(&c));
	return c;
}

START_TEST(names)
{
	enum simload_kind k;
	ck_assert_int_eq(simload_kind_parse("steady", &k), 0);
	ck_assert_int_eq(k, SIMLOAD_STEADY);
	ck_assert_int_eq(simload_kind_parse("diurnal", &k), 0);
	ck_assert_int_eq(k, SIMLOAD_DIURNAL);
	ck_assert_int_eq(simload_kind_parse("bursty", &k), 0);
	ck_assert_int_eq(k, SIMLOAD_BURSTY);
	ck_assert_str_eq(simload_kind_name(k), "bursty");
	ck_assert_int_eq(simload_kind_parse("Steady", &k), -1);
	ck_assert_int_eq(simload_kind_parse("", &k), -1);
}
END_TEST

START_TEST(refusals)
{
	struct simload_config c = {SIMLOAD_DIURNAL, 1000, 500, 200, 60, 0};
	ck_assert_ptr_null(simload_check(&c));
	c.base = 1001;
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "within"));
	c.base = 500;
	c.swing = 501; /* over the top of the machine */
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "swing"));
	c.base = 300;
	c.swing = 400; /* fits the machine, but goes below zero */
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "below zero"));
	c.kind = SIMLOAD_BURSTY; /* bursts only go up: fine */
	ck_assert_ptr_null(simload_check(&c));
	c.period_s = 0;
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "period"));
	c.period_s = 31536001;
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "period"));
	c.kind = SIMLOAD_STEADY; /* steady has no period nor swing */
	ck_assert_ptr_null(simload_check(&c));
	c.total = 0;
	ck_assert_ptr_nonnull(simload_check(&c));
	c.total = 1000;
	c.kind = (enum simload_kind)7;
	ck_assert_ptr_nonnull(strstr(simload_check(&c), "steady"));
}
END_TEST

START_TEST(steady_is_flat)
{
	struct simload_config c = cfg(SIMLOAD_STEADY, 4242, 0, 1, 9);
	for (int64_t t = 0; t < 1000 * S; t += 7 * S + 13)
		ck_assert_int_eq(simload_pages(&c, t), 4242);
}
END_TEST

START_TEST(diurnal_follows_a_sine)
{
	/* a day of 240 s: 200000 ± 100000 pages */
	struct simload_config c = cfg(SIMLOAD_DIURNAL, 200000, 100000, 240, 0);
	int64_t t0 = INT64_C(1700000160) * S; /* a multiple of the period */
	ck_assert_int_eq(t0 % (240 * S), 0);
	/* the points where the approximation is exact */
	ck_assert_int_eq(simload_pages(&c, t0), 200000);
	ck_assert_int_eq(simload_pages(&c, t0 + 20 * S), 250000); /* 30° */
	ck_assert_int_eq(simload_pages(&c, t0 + 60 * S), 300000); /* 90° */
	ck_assert_int_eq(simload_pages(&c, t0 + 120 * S), 200000);
	ck_assert_int_eq(simload_pages(&c, t0 + 180 * S), 100000);
	ck_assert_int_eq(simload_pages(&c, t0 + 220 * S), 150000); /* 330° */
	/* everywhere else within 0.2 % of the swing of the true sine, and
	 * one period later the same */
	for (int64_t ms = 0; ms < 240000; ms += 997) {
		rx_time_ns t = t0 + ms * MS;
		double want = 200000 + 100000 * sin(2 * M_PI * ms / 240000.0);
		rx_pages got = simload_pages(&c, t);
		ck_assert_msg(fabs(got - want) <= 200, "ms %lld: %lld vs %.0f",
		              (long long)ms, (long long)got, want);
		ck_assert_int_eq(simload_pages(&c, t + 240 * S), got);
	}
	/* the seed is a phase shift in ms: a quarter day starts at the peak */
	struct simload_config d =
	    cfg(SIMLOAD_DIURNAL, 200000, 100000, 240, 60000);
	ck_assert_int_eq(simload_pages(&d, t0), 300000);
	ck_assert_int_eq(simload_pages(&d, t0 + 120 * S), 100000);
}
END_TEST

/* The slots of `c` over n periods that hold a burst; checks on the way
 * that a burst is one contiguous run within its slot, at one height
 * between half the swing and the swing. */
static int count_bursts(const struct simload_config *c, rx_time_ns t0, int n)
{
	int bursts = 0;
	for (int k = 0; k < n; k++) {
		rx_pages high = -1;
		int runs = 0, in = 0;
		for (int i = 0; i < 40; i++) { /* 40 samples per slot */
			rx_time_ns t =
			    t0 + k * c->period_s * S + i * c->period_s * S / 40;
			rx_pages p = simload_pages(c, t);
			ck_assert_int_ge(p, c->base);
			ck_assert_int_le(p, c->base + c->swing);
			if (p > c->base) {
				if (high >= 0)
					ck_assert_int_eq(p, high);
				high = p;
				runs += !in;
				in = 1;
			} else {
				in = 0;
			}
		}
		ck_assert_int_le(runs, 1);
		if (runs) {
			ck_assert_int_ge(high - c->base, c->swing / 2);
			bursts++;
		}
	}
	return bursts;
}

START_TEST(bursty_is_reproducible)
{
	struct simload_config a = cfg(SIMLOAD_BURSTY, 100000, 400000, 30, 1);
	struct simload_config b = a, other = a;
	other.seed = 2;
	rx_time_ns t0 = INT64_C(1800000000) * S;
	int same = 0, n = 0;
	for (int64_t t = t0; t < t0 + 3000 * S; t += 700 * MS, n++) {
		ck_assert_int_eq(simload_pages(&a, t), simload_pages(&b, t));
		same += simload_pages(&a, t) == simload_pages(&other, t);
	}
	ck_assert_msg(same < n, "seeds 1 and 2 gave the same workload");

	int bursts = count_bursts(&a, t0, 2000);
	ck_assert_msg(bursts > 2000 * (SIMLOAD_BURST_PCT - 5) / 100 &&
	                  bursts < 2000 * (SIMLOAD_BURST_PCT + 5) / 100,
	              "%d bursts in 2000 slots", bursts);
	/* and not all at one height */
	rx_pages seen[2] = {-1, -1};
	for (int64_t t = t0; t < t0 + 6000 * S && seen[1] < 0; t += 1 * S) {
		rx_pages p = simload_pages(&a, t);
		if (p == a.base)
			continue;
		if (seen[0] < 0)
			seen[0] = p;
		else if (p != seen[0])
			seen[1] = p;
	}
	ck_assert_int_ge(seen[1], 0);
}
END_TEST

START_TEST(stays_within_the_machine)
{
	/* the widest legal settings of each kind */
	struct simload_config c[] = {
	    {SIMLOAD_DIURNAL, 1000, 500, 500, 7, 3},
	    {SIMLOAD_BURSTY, 1000, 0, 1000, 3, 5},
	    {SIMLOAD_BURSTY, 1000, 1000, 0, 3, 5},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		ck_assert_ptr_null(simload_check(&c[i]));
		for (int64_t t = 0; t < 100 * S; t += 37 * MS) {
			rx_pages p = simload_pages(&c[i], t);
			ck_assert_int_ge(p, 0);
			ck_assert_int_le(p, 1000);
		}
	}
	/* times before 1970 are still on the curve */
	struct simload_config d = cfg(SIMLOAD_DIURNAL, 200000, 100000, 240, 0);
	ck_assert_int_eq(simload_pages(&d, -180 * S), 300000);
	struct simload_config b = cfg(SIMLOAD_BURSTY, 100000, 400000, 30, 1);
	for (int64_t t = -60 * S; t < 0; t += 250 * MS) {
		rx_pages p = simload_pages(&b, t);
		ck_assert_int_ge(p, b.base);
		ck_assert_int_le(p, b.base + b.swing);
	}
}
END_TEST

START_TEST(agent_settings)
{
	struct agent_config c;
	struct simload_config l;
	char err[512];
	char *argv[] = {"ramex-agent",
	                "--backend=sim",
	                "--sim_total_pages=1000",
	                "--sim_usage_pages=400",
	                "--sim_profile=bursty",
	                "--sim_period_s=30",
	                "--sim_seed=7",
	                NULL};
	ck_assert_int_eq(config_args(&c, 7, argv, err, sizeof err), 0);
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(config_sim_load(&c, &l, err, sizeof err), 0);
	ck_assert_int_eq(l.kind, SIMLOAD_BURSTY);
	ck_assert_int_eq(l.total, 1000);
	ck_assert_int_eq(l.base, 400);
	ck_assert_int_eq(l.swing, 300); /* half the free pages */
	ck_assert_int_eq(l.period_s, 30);
	ck_assert_int_eq(l.seed, 7);
	/* a diurnal default swing may not take the sine below zero */
	ck_assert_int_eq(
	    config_set(&c, "sim_profile", "diurnal", err, sizeof err), 0);
	ck_assert_int_eq(
	    config_set(&c, "sim_usage_pages", "100", err, sizeof err), 0);
	ck_assert_int_eq(config_sim_load(&c, &l, err, sizeof err), 0);
	ck_assert_int_eq(l.swing, 100);
	/* an explicit swing that does not fit is refused, naming it */
	ck_assert_int_eq(
	    config_set(&c, "sim_swing_pages", "950", err, sizeof err), 0);
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "sim_swing_pages"), "%s", err);
	ck_assert_int_eq(
	    config_set(&c, "sim_profile", "spiky", err, sizeof err), 0);
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "steady, diurnal or bursty"), "%s", err);
	/* other backends do not care about the sim's settings */
	ck_assert_int_eq(config_set(&c, "backend", "kmod", err, sizeof err), 0);
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
}
END_TEST

START_TEST(executor_follows_the_load)
{
	char err[512];
	struct exec *e = exec_sim_new(1000, 200);
	struct simload_config l = {SIMLOAD_DIURNAL, 1000, 500, 400, 240, 0};
	struct simload_config wrong = l;
	rx_pages got;
	rx_time_ns t0 = INT64_C(1700000160) * S; /* the sine's zero */
	struct exec_loss lost[EXEC_MAX_CONTRACTS];

	/* without a profile the usage stays as it was set */
	ck_assert_int_eq(exec_sim_advance(e, t0), 200);
	wrong.total = 999;
	ck_assert_int_eq(exec_sim_set_load(e, &wrong, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "another size"), "%s", err);
	wrong = l;
	wrong.swing = 600;
	ck_assert_int_eq(exec_sim_set_load(e, &wrong, err, sizeof err), -1);
	ck_assert_int_eq(exec_sim_set_load(e, &l, err, sizeof err), 0);

	/* at the trough (100 used) 900 are free: 500 offline, 200 lent */
	ck_assert_int_eq(exec_sim_advance(e, t0 + 180 * S), 100);
	ck_assert_int_eq(
	    exec_take(e, "off", EXEC_OFFLINE, 500, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 500);
	ck_assert_int_eq(
	    exec_take(e, "lend", EXEC_LEND, 200, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 200);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 0);

	/* back at the mean (500 used): 200 more than is free; the kernel
	 * takes them from the offline contract, the lent pages stay */
	ck_assert_int_eq(exec_sim_advance(e, t0 + 240 * S), 500);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 1);
	ck_assert_str_eq(lost[0].id, "off");
	ck_assert_int_eq(lost[0].pages, 200);
	ck_assert_int_eq(exec_held(e, "off"), 300);
	ck_assert_int_eq(exec_held(e, "lend"), 200);
	/* at the peak (900 used) even all offline pages are not enough */
	ck_assert_int_eq(exec_sim_advance(e, t0 + 300 * S), 900);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 1);
	ck_assert_int_eq(exec_held(e, "off"), -1);
	ck_assert_int_eq(exec_held(e, "lend"), 200);
	/* and nothing more can be given while it lasts */
	ck_assert_int_eq(
	    exec_take(e, "more", EXEC_OFFLINE, 10, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 0);
	exec_close(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("simload");
	TCase *tc = tcase_create("simload");
	tcase_add_test(tc, names);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, steady_is_flat);
	tcase_add_test(tc, diurnal_follows_a_sine);
	tcase_add_test(tc, bursty_is_reproducible);
	tcase_add_test(tc, stays_within_the_machine);
	tcase_add_test(tc, agent_settings);
	tcase_add_test(tc, executor_follows_the_load);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
