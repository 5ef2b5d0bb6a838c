/*
 * test_workload.c — ramex-fleet's kernel signals of one machine
 * (sim/workload.c), the MGLRU generation model: right after the agent's
 * walk the generations are the independent reference model's shares per
 * class (seen by the last walk, by the one before and not since, by
 * neither) with mglru_parse's idle bounds; pages faulted in since a walk
 * sit in the youngest generation in place of evicted old ones; the kernel
 * ages more often than the agent exactly when evictions outrun the pages
 * idle a walk long; wl_step gives generations on a stock kernel (MGLRU)
 * and page_idle ages otherwise; 6.1's refault counter misses the faults of
 * pages out longer than a generation's turn, the major faults do not,
 * and the pages out are in swap, faulting back at their access rate.
 */
#include "sim/workload.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void machine(struct wl_params *p, struct wl_state *s, struct wl_costs *c,
                    enum wl_source src)
{
	struct rng r;
	wl_costs_default(c);
	c->source = src;
	rng_seed(&r, 3, 1);
	wl_draw(p, s, &r, c, (rx_pages)64 * 262144, 4, 0, 30);
}

/* Resident pages per class: the whole workload at its mean, nothing out. */
static void all_resident(const struct wl_params *p, double *res)
{
	for (int i = 0; i < WL_CLASSES; i++)
		res[i] = p->ws_mean * (i == WL_CLASSES - 1 ? p->cold_frac
		                       : i == 0            ? 1
		                                           : p->tail_frac);
}

START_TEST(after_the_agents_walk_generations_are_the_reference_model)
{
	struct wl_params p;
	struct wl_state s;
	struct wl_costs c;
	struct wsest_gens g;
	double res[WL_CLASSES], want[3] = {0, 0, 0}, all = 0;

	machine(&p, &s, &c, WL_MGLRU);
	ck_assert(p.walk_s == 30); /* half the 60 s window */
	all_resident(&p, res);
	for (int i = 0; i < WL_CLASSES; i++) {
		double seen = 1 - exp(-p.rate[i] * 30);
		want[0] += res[i] * seen;
		want[1] += res[i] * (1 - seen) * seen;
		want[2] += res[i] * (1 - seen) * (1 - seen);
		all += res[i];
	}
	wl_gens(&p, res, 30, 0, 0, &g);
	/* The youngest, made by the walk just now, is empty: no bin. */
	ck_assert_int_eq(g.nbins, 3);
	ck_assert_int_eq(g.walk_age_ms, 0);
	ck_assert_int_eq(g.bin[0].idle_min_ms, 0);
	ck_assert_int_eq(g.bin[0].idle_max_ms, 30000);
	ck_assert_int_eq(g.bin[1].idle_min_ms, 30000);
	ck_assert_int_eq(g.bin[1].idle_max_ms, 60000);
	ck_assert_int_eq(g.bin[2].idle_min_ms, 60000);
	ck_assert(g.bin[2].idle_max_ms == WSEST_GEN_OPEN);
	int64_t sum = 0;
	for (int k = 0; k < 3; k++) {
		ck_assert_msg(fabs((double)g.bin[k].pages - want[k]) <= 1,
		              "bin %d: %lld pages, want %.0f", k,
		              (long long)g.bin[k].pages, want[k]);
		sum += g.bin[k].pages;
	}
	ck_assert(fabs((double)sum - all) <= 3);
	/* The warm tail and the cold pages are in the oldest, open bin:
	 * what a stock kernel cannot tell apart. */
	ck_assert(g.bin[2].pages > res[WL_CLASSES - 1]);
}
END_TEST

START_TEST(pages_faulted_in_since_a_walk_are_the_youngest)
{
	struct wl_params p;
	struct wl_state s;
	struct wl_costs c;
	struct wsest_gens g0, g;
	double res[WL_CLASSES];

	machine(&p, &s, &c, WL_MGLRU);
	all_resident(&p, res);
	wl_gens(&p, res, 30, 0, 0, &g0);
	wl_gens(&p, res, 30, 12, 5000, &g);
	ck_assert_int_eq(g.nbins, 4);
	ck_assert_int_eq(g.walk_age_ms, 12000);
	ck_assert_int_eq(g.bin[0].idle_min_ms, 0);
	ck_assert_int_eq(g.bin[0].idle_max_ms, 12000);
	ck_assert_int_eq(g.bin[0].pages, 5000);
	ck_assert_int_eq(g.bin[1].idle_min_ms, 12000);
	ck_assert_int_eq(g.bin[1].idle_max_ms, 42000);
	ck_assert_int_eq(g.bin[3].idle_min_ms, 72000);
	/* taken from the oldest, the others as they were */
	ck_assert_int_eq(g.bin[1].pages, g0.bin[0].pages);
	ck_assert_int_eq(g.bin[2].pages, g0.bin[1].pages);
	ck_assert(llabs(g.bin[3].pages - (g0.bin[2].pages - 5000)) <= 1);
}
END_TEST

START_TEST(the_kernel_ages_itself_only_when_evictions_need_it)
{
	struct wl_params p;
	struct wl_state s;
	struct wl_costs c;
	double res[WL_CLASSES], idle30 = 0;

	machine(&p, &s, &c, WL_MGLRU);
	all_resident(&p, res);
	for (int i = 0; i < WL_CLASSES; i++)
		idle30 += res[i] * exp(-p.rate[i] * 30);
	ck_assert(wl_walk_interval(&p, res, 30, 0) == 30);
	/* evictions the pages idle 30 s cover: the agent's walks are all */
	ck_assert(wl_walk_interval(&p, res, 30, 0.99 * idle30 / 30) == 30);
	/* more: the kernel walks so often that the pages idle that long
	 * hold what is evicted in between */
	double ev = 4 * idle30 / 30;
	double w = wl_walk_interval(&p, res, 30, ev);
	ck_assert_msg(w > 0 && w < 30, "w %f", w);
	double idle_w = 0;
	for (int i = 0; i < WL_CLASSES; i++)
		idle_w += res[i] * exp(-p.rate[i] * w);
	ck_assert_msg(fabs(ev * w - idle_w) <= 1e-6 * idle_w + 1,
	              "evicted %f, idle %f", ev * w, idle_w);
}
END_TEST

/* Steps with `mem` pages for the workload; returns the last sample. */
static void steps(struct wl_params *p, struct wl_state *s,
                  const struct wl_costs *c, double mem, int n,
                  struct wsest_sample *smp, struct wl_step *st)
{
	struct rng r;
	struct wl_now now;
	rng_seed(&r, 9, 9);
	for (int i = 0; i < n; i++) {
		wl_at(p, s, &r, 0, &now);
		wl_step(p, s, &r, c, &now, mem, 0, 30, st, smp);
	}
}

START_TEST(a_stock_kernel_gives_generations_and_undercounts_refaults)
{
	struct wl_params p;
	struct wl_state s;
	struct wl_costs c;
	struct wsest_sample smp;
	struct wl_step st;

	machine(&p, &s, &c, WL_MGLRU);
	/* Half the cold pages out: they fault back once in three days,
	 * long after the generation they left turned over. */
	double cold = p.ws_mean * p.cold_frac;
	double foot = p.ws_mean * (1 + WL_TAIL * p.tail_frac) + cold;
	steps(&p, &s, &c, foot - cold / 2, 40, &smp, &st);
	ck_assert(smp.has_gens && !smp.has_idle);
	ck_assert(smp.gens.min_seq_sum == 41); /* one walk a sample */
	ck_assert(st.faults > 0);
	ck_assert_msg(smp.majfaults >= (uint64_t)(40 * st.faults) - 1,
	              "majfaults %llu", (unsigned long long)smp.majfaults);
	/* counted: about λw/2 of them, a few in a million */
	ck_assert_msg(smp.refaults * 1000 < smp.majfaults,
	              "refaults %llu of %llu", (unsigned long long)smp.refaults,
	              (unsigned long long)smp.majfaults);
	/* The pages out are in swap, as meminfo shows them, and the major
	 * faults over the page-seconds out are their access rate: what the
	 * agent learns the worth of the pages it gave back from. */
	ck_assert_msg(fabs((double)smp.swapped - cold / 2) <= cold * 0.005,
	              "swapped %lld, out %.0f", (long long)smp.swapped,
	              cold / 2);
	double rate = (double)smp.majfaults / ((double)smp.swapped * 40 * 30);
	ck_assert_msg(fabs(rate - p.cold_rate) <= p.cold_rate * 0.02,
	              "%g faults a page-second, the cold pages' rate %g", rate,
	              p.cold_rate);

	machine(&p, &s, &c, WL_PAGE_IDLE);
	steps(&p, &s, &c, foot - cold / 2, 40, &smp, &st);
	ck_assert(smp.has_idle && !smp.has_gens);
	ck_assert(smp.refaults == smp.majfaults && smp.refaults > 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("workload");
	TCase *t = tcase_create("mglru");
	tcase_add_test(
	    t, after_the_agents_walk_generations_are_the_reference_model);
	tcase_add_test(t, pages_faulted_in_since_a_walk_are_the_youngest);
	tcase_add_test(t, the_kernel_ages_itself_only_when_evictions_need_it);
	tcase_add_test(
	    t, a_stock_kernel_gives_generations_and_undercounts_refaults);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
