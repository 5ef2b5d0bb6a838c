/*
 * test_wsest.c — the working-set estimator on synthetic traces whose
 * working set is known exactly.
 *
 * A page-level simulator touches each page with its own probability per
 * interval, keeps idle ages for every 8th page just as the idle-page
 * sampler does, and counts the true working set (pages touched within the
 * window) over all pages. The estimator sees only the sample.
 */
#include "node-agent/core/wsest.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define DT_NS  INT64_C(10000000000) /* 10 s between samples */
#define STRIDE 8
#define WIN    6 /* 60 s window / 10 s */

struct sim {
	int n;
	double *q; /* touch probability per interval */
	int *last; /* interval of the last touch */
	int *age;  /* idle age in scans, for sampled pages */
	int tick;
	uint64_t rng;
	uint64_t psi_us, refaults;
};

static double rnd(struct sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return (double)(s->rng >> 11) / 9007199254740992.0;
}

static struct sim *sim_new(int n)
{
	struct sim *s = calloc(1, sizeof *s);
	s->n = n;
	s->q = calloc((size_t)n, sizeof *s->q);
	s->last = malloc((size_t)n * sizeof *s->last);
	s->age = malloc((size_t)n * sizeof *s->age);
	for (int i = 0; i < n; i++) {
		s->last[i] = -1000;
		s->age[i] = WSEST_AGE_BUCKETS - 1;
	}
	s->rng = 0x9E3779B97F4A7C15ull;
	return s;
}

static void sim_free(struct sim *s)
{
	free(s->q);
	free(s->last);
	free(s->age);
	free(s);
}

static void sim_set(struct sim *s, int from, int to, double q)
{
	for (int i = from; i < to; i++)
		s->q[i] = q;
}

/* Runs one interval and fills the sample the agent would take after it. */
static void sim_step(struct sim *s, struct wsest_sample *out)
{
	memset(out, 0, sizeof *out);
	s->tick++;
	for (int i = 0; i < s->n; i++) {
		int touched = s->q[i] > 0 && rnd(s) < s->q[i];
		if (touched)
			s->last[i] = s->tick;
		if (i % STRIDE)
			continue;
		if (touched) {
			out->idle.reuse[s->age[i]]++;
			s->age[i] = 0;
		} else if (s->age[i] < WSEST_AGE_BUCKETS - 1) {
			s->age[i]++;
		}
		out->idle.age[s->age[i]]++;
		out->idle.sampled++;
	}
	out->t = (rx_time_ns)s->tick * DT_NS;
	out->has_idle = 1;
	out->idle.population = s->n;
	out->active = s->n;
	out->psi_some_us = s->psi_us;
	out->refaults = s->refaults;
}

static int64_t sim_truth(const struct sim *s)
{
	int64_t n = 0;
	for (int i = 0; i < s->n; i++)
		n += s->tick - s->last[i] < WIN;
	return n;
}

static struct wsest *new_est(void)
{
	struct wsest_config c;
	const char *why = NULL;
	wsest_config_default(&c);
	struct wsest *w = wsest_new(&c, &why);
	ck_assert_msg(w, "wsest_new: %s", why);
	return w;
}

static void feed(struct wsest *w, struct sim *s, struct wsest_estimate *e)
{
	struct wsest_sample smp;
	const char *why = NULL;
	sim_step(s, &smp);
	ck_assert_msg(wsest_update(w, &smp, e, &why) == 0, "update: %s", why);
}

static void assert_within(const struct wsest_estimate *e, int64_t truth,
                          int tick)
{
	int64_t diff = llabs(e->wss - truth);
	ck_assert_msg(diff * 10 <= truth,
	              "tick %d: estimate %lld, truth %lld: error over 10 %%",
	              tick, (long long)e->wss, (long long)truth);
	ck_assert_msg(
	    diff <= e->wss_err, "tick %d: truth %lld outside %lld ± %lld", tick,
	    (long long)truth, (long long)e->wss, (long long)e->wss_err);
}

START_TEST(hot_set)
{
	struct sim *s = sim_new(200000);
	struct wsest *w = new_est();
	struct wsest_estimate e;

	sim_set(s, 0, 40000, 0.95);
	for (int t = 1; t <= 40; t++) {
		feed(w, s, &e);
		if (t >= 10) {
			ck_assert_int_eq(e.source, WSEST_IDLE);
			assert_within(&e, sim_truth(s), t);
		}
	}
	ck_assert(e.stable);
	ck_assert(!e.pressure);
	sim_free(s);
	wsest_free(w);
}
END_TEST

START_TEST(mixed_heat)
{
	struct sim *s = sim_new(200000);
	struct wsest *w = new_est();
	struct wsest_estimate e;

	sim_set(s, 0, 20000, 1.0);
	sim_set(s, 20000, 50000, 0.2);
	sim_set(s, 50000, 200000, 0.002);
	for (int t = 1; t <= 60; t++) {
		feed(w, s, &e);
		if (t >= 15)
			assert_within(&e, sim_truth(s), t);
	}
	sim_free(s);
	wsest_free(w);
}
END_TEST

START_TEST(step_change)
{
	struct sim *s = sim_new(200000);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	int was_stable = 0, unstable_after = 0;

	sim_set(s, 0, 20000, 0.9);
	for (int t = 1; t <= 30; t++)
		feed(w, s, &e);
	was_stable = e.stable;
	assert_within(&e, sim_truth(s), 30);
	sim_set(s, 0, 60000, 0.9);
	for (int t = 31; t <= 60; t++) {
		feed(w, s, &e);
		if (t == 34)
			unstable_after = !e.stable;
		if (t >= 46)
			assert_within(&e, sim_truth(s), t);
	}
	ck_assert_msg(was_stable, "a steady workload must become stable");
	ck_assert_msg(unstable_after, "a growing working set is not stable");
	sim_free(s);
	wsest_free(w);
}
END_TEST

START_TEST(marginal_value_curve)
{
	struct sim *s = sim_new(200000);
	struct wsest *w = new_est();
	struct wsest_estimate e;

	sim_set(s, 0, 20000, 1.0);
	sim_set(s, 20000, 50000, 0.2);
	sim_set(s, 50000, 200000, 0.002);
	for (int t = 1; t <= 80; t++)
		feed(w, s, &e);
	for (int i = 1; i < e.npoints; i++) {
		ck_assert(e.curve[i].size > e.curve[i - 1].size);
		ck_assert(e.curve[i].value <= e.curve[i - 1].value);
	}
	/* One touch per 10 s at 50 µs is 31536000 / 10 * 50 µs per page-year.
	 * The pages touched in the last scan are the 20000 hot ones plus the
	 * warm (6000) and cold (300) ones touched by chance, so the hottest
	 * bucket's reuse is (20000 + 6000 * 0.2 + 300 * 0.002) / 26300. */
	int64_t hot = 157680000;
	int64_t hot_bucket = (int64_t)(hot * (21200.6 / 26300));
	int64_t v_hot = wsest_value_at(&e, 10000);
	int64_t v_warm = wsest_value_at(&e, 35000);
	int64_t v_cold = wsest_value_at(&e, 150000);
	ck_assert_msg(llabs(v_hot - hot_bucket) * 20 <= hot_bucket,
	              "hot %lld want %lld", (long long)v_hot,
	              (long long)hot_bucket);
	ck_assert_msg(v_warm < v_hot / 2 && v_warm > v_cold * 10,
	              "warm %lld hot %lld cold %lld", (long long)v_warm,
	              (long long)v_hot, (long long)v_cold);
	/* dy/dx at the current size is the oldest bucket's value: the cold
	 * pages (q = 0.002, 0.998^15 of them still idle) and the few warm ones
	 * idle for 15 scans (0.8^15 of them). */
	double cold_n = 150000 * 0.97043, warm_n = 30000 * 0.035184;
	int64_t cold = (int64_t)(hot * (cold_n * 0.002 + warm_n * 0.2) /
	                         (cold_n + warm_n));
	ck_assert_msg(llabs(e.dydx - cold) * 100 <= cold * 15,
	              "dydx %lld want %lld", (long long)e.dydx,
	              (long long)cold);
	ck_assert_int_eq(e.dydx_above, e.dydx);
	sim_free(s);
	wsest_free(w);
}
END_TEST

/* PSI stall per refault calibrates the cost of a fault, and with it the
 * value of a page: a dearer device makes every page worth more. */
START_TEST(psi_calibrates_cost)
{
	struct sim *s = sim_new(100000);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	int64_t before = 0;

	sim_set(s, 0, 30000, 1.0);
	sim_set(s, 30000, 100000, 0.01);
	for (int t = 1; t <= 20; t++)
		feed(w, s, &e);
	before = e.dydx;
	ck_assert_int_eq(e.fault_cost_ns, 50000);
	for (int t = 21; t <= 60; t++) {
		s->refaults += 100;
		s->psi_us += 100 * 200; /* 200 µs per refault, 0.2 % stall */
		feed(w, s, &e);
	}
	ck_assert_msg(llabs(e.fault_cost_ns - 200000) < 2000, "cost %lld",
	              (long long)e.fault_cost_ns);
	ck_assert_int_eq(e.stall_ppm, 2000);
	ck_assert_int_eq(e.refault_mps, 10000);
	ck_assert(!e.pressure);
	ck_assert_msg(e.dydx > before * 3 && e.dydx < before * 5,
	              "value %lld before %lld", (long long)e.dydx,
	              (long long)before);
	sim_free(s);
	wsest_free(w);
}
END_TEST

/* Pressure starts at 10 % stall and ends only under 2 %. */
START_TEST(pressure_hysteresis)
{
	struct sim *s = sim_new(10000);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	static const struct {
		uint64_t stall_us; /* per 10 s interval */
		int want;
	} steps[] = {
	    {500000, 0}, {1500000, 1}, {500000, 1},
	    {300000, 1}, {100000, 0},  {900000, 0},
	};

	sim_set(s, 0, 5000, 1.0);
	feed(w, s, &e);
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		s->psi_us += steps[i].stall_us;
		feed(w, s, &e);
		ck_assert_msg(e.pressure == steps[i].want,
		              "step %zu: pressure %d", i, e.pressure);
		ck_assert_int_eq(e.stall_ppm, (int64_t)steps[i].stall_us / 10);
		if (e.pressure)
			ck_assert(!e.stable);
	}
	sim_free(s);
	wsest_free(w);
}
END_TEST

/* Refaulting workload: resident pages are all hot, and 2000 refaults an
 * interval say that up to 2000 more working pages are not resident. */
START_TEST(refaults_widen_the_estimate)
{
	struct sim *s = sim_new(50000);
	struct wsest *w = new_est();
	struct wsest_estimate e;

	sim_set(s, 0, 50000, 1.0);
	for (int t = 1; t <= 20; t++) {
		s->refaults += 2000;
		s->psi_us += 2000 * 100;
		feed(w, s, &e);
	}
	ck_assert_int_eq(e.deficit, 1000);
	ck_assert(e.wss >= 50000 + 900 && e.wss <= 50000 + 1100);
	/* Whatever the true deficit in [0, 2000], it lies in the interval. */
	ck_assert(e.wss - e.wss_err <= 50000);
	ck_assert(e.wss + e.wss_err >= 52000);
	ck_assert_msg(e.dydx_above >= e.dydx, "above %lld at %lld",
	              (long long)e.dydx_above, (long long)e.dydx);
	ck_assert_int_eq(wsest_value_at(&e, e.resident + 10), e.dydx_above);
	sim_free(s);
	wsest_free(w);
}
END_TEST

/* Without idle-page tracking the active list is working and the inactive
 * list is uncertain: the estimate is wide but contains the truth. */
START_TEST(lru_fallback)
{
	struct wsest *w = new_est();
	struct wsest_estimate e;
	struct wsest_sample smp;
	const char *why;

	for (int t = 0; t < 10; t++) {
		memset(&smp, 0, sizeof smp);
		smp.t = t * DT_NS;
		smp.active = 30000;
		smp.inactive = 20000;
		smp.unevictable = 1000;
		ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	}
	ck_assert_int_eq(e.source, WSEST_LRU);
	ck_assert_int_eq(e.wss, 41000);
	ck_assert_int_eq(e.wss_err, 10000);
	ck_assert_int_eq(e.resident, 51000);
	ck_assert(!e.stable); /* ±24 % is no basis for a long-term sale */
	ck_assert(wsest_value_at(&e, 100) > wsest_value_at(&e, 40000));
	wsest_free(w);
}
END_TEST

START_TEST(bad_samples)
{
	struct wsest *w = new_est();
	struct wsest_estimate e;
	struct wsest_sample smp;
	const char *why = NULL;

	memset(&smp, 0, sizeof smp);
	smp.t = 100 * DT_NS;
	smp.active = 10;
	smp.psi_some_us = 5000000;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert_int_eq(e.source, WSEST_NONE);
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	ck_assert_str_eq(
	    why, "sample time did not advance; samples must come in order");

	smp.t += DT_NS;
	smp.has_idle = 1;
	smp.idle.sampled = 10;
	smp.idle.population = 100;
	smp.idle.age[0] = 9;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	ck_assert(strstr(why, "does not add up"));
	smp.idle.population = 5;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);

	/* A counter reset (cgroup recreated) is not pressure, not an error. */
	smp.has_idle = 0;
	smp.psi_some_us = 10;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert_int_eq(e.stall_ppm, 0);
	wsest_free(w);
}
END_TEST

/*
 * MGLRU, modelled as the kernel keeps it: at most 4 generations; the agent
 * ages every `aging` intervals, when the walk moves every page touched
 * since the last walk into the youngest generation, a new (empty) youngest
 * is made and, with 4 already, the two oldest merge. Each page's last touch
 * is known to the model, so the truth is exact; the estimator sees only
 * generation sizes and ages, as the agent's edge (mglru.c) gives them.
 */
#define MG_GENS 4

struct mg {
	struct sim *s;
	int *gen;     /* sequence number of each page's generation */
	int *touched; /* since the last walk */
	int max_seq, min_seq;
	int born[64]; /* tick each generation was made (by seq % 64) */
	int aging;    /* intervals between walks */
};

static struct mg *mg_new(int n, int aging)
{
	struct mg *m = calloc(1, sizeof *m);
	m->s = sim_new(n);
	m->gen = calloc((size_t)n, sizeof *m->gen);
	m->touched = calloc((size_t)n, sizeof *m->touched);
	m->max_seq = MG_GENS - 1;
	m->aging = aging;
	return m;
}

static void mg_free(struct mg *m)
{
	sim_free(m->s);
	free(m->gen);
	free(m->touched);
	free(m);
}

static void mg_step(struct mg *m, struct wsest_sample *out, int64_t dt_ms)
{
	struct sim *s = m->s;
	memset(out, 0, sizeof *out);
	s->tick++;
	for (int i = 0; i < s->n; i++)
		if (s->q[i] > 0 && rnd(s) < s->q[i]) {
			s->last[i] = s->tick;
			m->touched[i] = 1;
		}
	if (s->tick % m->aging == 0) {
		for (int i = 0; i < s->n; i++) {
			if (m->touched[i])
				m->gen[i] = m->max_seq;
			m->touched[i] = 0;
		}
		m->max_seq++;
		m->born[m->max_seq % 64] = s->tick;
		if (m->max_seq - m->min_seq + 1 > MG_GENS) {
			m->min_seq++;
			for (int i = 0; i < s->n; i++)
				if (m->gen[i] < m->min_seq)
					m->gen[i] = m->min_seq;
		}
	}
	/* Bins as mglru.c makes them: youngest [0, its age), each older one
	 * from the next younger one's age to its own, the oldest open. */
	int64_t cnt[MG_GENS] = {0};
	for (int i = 0; i < s->n; i++) {
		int g = m->gen[i] < m->min_seq ? m->min_seq : m->gen[i];
		cnt[m->max_seq - g]++;
	}
	int ng = m->max_seq - m->min_seq + 1;
	out->has_gens = 1;
	out->gens.nbins = ng;
	for (int k = 0; k < ng; k++) {
		int seq = m->max_seq - k;
		int64_t age = (int64_t)(s->tick - m->born[seq % 64]) * dt_ms;
		out->gens.bin[k].idle_min_ms =
		    k == 0
		        ? 0
		        : (int64_t)(s->tick - m->born[(seq + 1) % 64]) * dt_ms;
		out->gens.bin[k].idle_max_ms =
		    k == ng - 1 ? WSEST_GEN_OPEN : age;
		out->gens.bin[k].pages = cnt[k];
		if (k == 0)
			out->gens.walk_age_ms = age;
	}
	out->t = (rx_time_ns)s->tick * DT_NS;
	out->active = s->n;
	out->psi_some_us = s->psi_us;
	out->refaults = s->refaults;
}

static void mg_feed(struct wsest *w, struct mg *m, struct wsest_estimate *e)
{
	struct wsest_sample smp;
	const char *why = NULL;
	mg_step(m, &smp, DT_NS / 1000000);
	ck_assert_msg(wsest_update(w, &smp, e, &why) == 0, "update: %s", why);
	ck_assert(e->source == WSEST_MGLRU || e->source == WSEST_NONE);
}

/* Hot set 20 %, then 50 %, then 5 % of the pages, each phase touched every
 * interval; cold pages never. Aged every 3 intervals (30 s, half the 60 s
 * window): by the end of each phase the estimate is within 10 % and the
 * truth within its error bar; a growth is seen within one aging. */
START_TEST(mglru_follows_phases)
{
	struct mg *m = mg_new(100000, 3);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	static const int hot[] = {20000, 50000, 5000};

	sim_set(m->s, 0, 100000, 1.0); /* everything touched once */
	mg_feed(w, m, &e);
	for (int p = 0; p < 3; p++) {
		sim_set(m->s, 0, 100000, 0);
		sim_set(m->s, 0, hot[p], 1.0);
		int seen = 0;
		for (int t = 1; t <= 15; t++) {
			mg_feed(w, m, &e);
			int64_t truth = sim_truth(m->s);
			if (!seen && llabs(e.wss - hot[p]) * 10 <= hot[p])
				seen = t;
			if (t >= 12)
				assert_within(&e, truth, t);
		}
		/* growth: one walk (≤3 intervals); shrink: the window (6)
		 * plus one walk */
		ck_assert_msg(seen && seen <= (p == 1 ? 4 : 10),
		              "phase %d: within 10 %% after %d intervals", p,
		              seen);
		ck_assert(e.wss_lo <= hot[p] && hot[p] <= e.wss_hi);
		/* the pages known idle a window are cold ones, most of them */
		ck_assert_msg(e.cold_known <= 100000 - hot[p] &&
		                  e.cold_known * 2 >= 100000 - hot[p],
		              "phase %d: %lld pages known idle", p,
		              (long long)e.cold_known);
	}
	wsest_free(w);
	mg_free(m);
}
END_TEST

/* Every page touched once, then a hot set of 5 % for 15 intervals: the
 * estimate has settled on it. */
static void mg_settle(struct mg *m, struct wsest *w, struct wsest_estimate *e)
{
	sim_set(m->s, 0, 100000, 1.0);
	mg_feed(w, m, e);
	sim_set(m->s, 0, 100000, 0);
	sim_set(m->s, 0, 5000, 1.0);
	for (int t = 0; t < 15; t++)
		mg_feed(w, m, e);
	ck_assert_int_le(llabs(e->wss - 5000), 500);
}

/* A probe that reclaim could not fully carry out: MGLRU puts the pages it
 * could not evict into the youngest generation, unaccessed (seen in the
 * guest after thrashing: 5 518 of 8 434 pages scanned went there, and the
 * estimate of a 50 MiB hot set rose to 86). The agent measures them; they
 * are taken off the working set for a window, after which the generations
 * they sit in are past it anyway. */
START_TEST(mglru_probe_rejected)
{
	struct mg *m = mg_new(100000, 3);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	struct wsest_sample smp;
	const char *why = NULL;

	mg_settle(m, w, &e);
	for (int t = 0; t < 12; t++) {
		/* a probe each interval: 2 000 cold pages rejected */
		int64_t rej = 0;
		for (int i = 50000 + t * 2000; i < 50000 + (t + 1) * 2000;
		     i++) {
			m->gen[i] = m->max_seq;
			rej++;
		}
		mg_step(m, &smp, DT_NS / 1000000);
		smp.rejected = rej;
		ck_assert_msg(wsest_update(w, &smp, &e, &why) == 0, "%s", why);
		ck_assert_msg(llabs(e.wss - 5000) <= 500,
		              "interval %d: estimate %lld for a hot set of "
		              "5000 (rejected pages taken off: %lld)",
		              t, (long long)e.wss, (long long)e.rejected);
	}
	smp.rejected = -1;
	ck_assert_int_eq(wsest_update(w, &smp, &e, &why), -1);
	wsest_free(w);
	mg_free(m);
}
END_TEST

/* khugepaged collapses `n` pages from `from` into a huge page: a new folio
 * that 6.1 puts into the last walk's generation, its page-table entry made
 * young, so the next walk sees it accessed. Returns what the generations
 * within the window gained (mglru_window_gain): the pages that came from
 * generations outside it. */
static int64_t mg_collapse(struct mg *m, int from, int n, int64_t dt_ms)
{
	int64_t gain = 0;
	for (int i = from; i < from + n; i++) {
		int g = m->gen[i] < m->min_seq ? m->min_seq : m->gen[i];
		/* generation g's pages have been idle since g + 1 was made */
		int64_t idle_ms =
		    g == m->max_seq
		        ? 0
		        : (int64_t)(m->s->tick - m->born[(g + 1) % 64]) * dt_ms;
		if (g != m->max_seq - 1 && idle_ms >= WIN * DT_NS / 1000000)
			gain++;
		m->gen[i] = m->max_seq - 1;
		m->touched[i] = 1;
	}
	return gain;
}

/* Collapses of cold ranges (from a generation outside the window into the
 * last walk's) make 512 pages an interval look accessed that the workload
 * never touched: seen in the guest, a 50 MiB hot set read 77. What the
 * window's generations gained, at most the pages collapsed, is taken off.
 * Collapses of the hot set itself gain nothing and take nothing off; and
 * a collapsed range that turns hot counts as soon as a walk sees it
 * accessed again, not a window later. */
START_TEST(mglru_collapsed_cold_ranges)
{
	struct mg *m = mg_new(100000, 3);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	struct wsest_sample smp;
	const char *why = NULL;
	uint64_t collapsed = 0;
	int64_t dt_ms = DT_NS / 1000000;

	mg_settle(m, w, &e);
	for (int t = 0; t < 12; t++) {
		/* cold ranges for 6 intervals, then the hot set; the cold
		 * ranges collapsed last are touched from then on */
		int from = t < 6 ? 50000 + t * 512 : (t - 6) * 512;
		int64_t gain = mg_collapse(m, from, 512, dt_ms);
		collapsed += 512;
		if (t == 6)
			sim_set(m->s, 50000 + 3 * 512, 50000 + 6 * 512, 1.0);
		mg_step(m, &smp, dt_ms);
		smp.thp_collapsed = collapsed;
		smp.window_gain = gain;
		ck_assert_msg(wsest_update(w, &smp, &e, &why) == 0, "%s", why);
		ck_assert_int_eq(gain, t < 6 ? 512 : 0);
		/* a walk every 3 intervals: the ranges turned hot are
		 * seen at the first after */
		if (t >= 6 && t < 9)
			continue;
		int64_t truth = sim_truth(m->s);
		ck_assert_msg(llabs(e.wss - truth) * 10 <= truth,
		              "interval %d: estimate %lld for a working set "
		              "of %lld (collapsed pages taken off: %lld)",
		              t, (long long)e.wss, (long long)truth,
		              (long long)e.collapsed);
	}
	smp.window_gain = -1;
	ck_assert_int_eq(wsest_update(w, &smp, &e, &why), -1);
	wsest_free(w);
	mg_free(m);
}
END_TEST

/* Pages touched with mixed probabilities: some every interval, some every
 * few, some rarely. The window cuts generations; the error bar must hold
 * the truth, and dy/dx falls from the hottest pages to the coldest. */
START_TEST(mglru_mixed_heat)
{
	struct mg *m = mg_new(100000, 3);
	struct wsest *w = new_est();
	struct wsest_estimate e;
	int held = 0, n = 0;

	sim_set(m->s, 0, 20000, 1.0);
	sim_set(m->s, 20000, 40000, 0.3);
	sim_set(m->s, 40000, 60000, 0.02);
	for (int t = 1; t <= 60; t++) {
		mg_feed(w, m, &e);
		if (t < 12)
			continue;
		int64_t truth = sim_truth(m->s), unseen = 0;
		/* Touched since the last walk after a window's idleness: the
		 * histogram cannot know them until the next walk (a lag of at
		 * most one aging interval, which the bar does not cover). */
		for (int i = 0; i < m->s->n; i++)
			unseen += m->touched[i] && m->gen[i] < m->max_seq - 2;
		n++;
		held += llabs(e.wss - truth) <= e.wss_err + unseen;
		ck_assert_msg(llabs(e.wss - truth) * 100 <= truth * 15,
		              "t %d: estimate %lld truth %lld", t,
		              (long long)e.wss, (long long)truth);
	}
	ck_assert_msg(held * 10 >= n * 9, "truth inside the bar %d of %d", held,
	              n);
	ck_assert(e.npoints >= 2);
	for (int i = 1; i < e.npoints; i++) {
		ck_assert(e.curve[i].size > e.curve[i - 1].size);
		ck_assert(e.curve[i].value <= e.curve[i - 1].value);
	}
	ck_assert(e.curve[0].value > e.curve[e.npoints - 1].value);
	wsest_free(w);
	mg_free(m);
}
END_TEST

START_TEST(mglru_bad_bins)
{
	struct wsest *w = new_est();
	struct wsest_sample smp;
	struct wsest_estimate e;
	const char *why = NULL;

	memset(&smp, 0, sizeof smp);
	smp.t = 1;
	smp.has_gens = 1;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	ck_assert(strstr(why, "bins"));
	smp.gens.nbins = 1;
	smp.gens.bin[0] = (struct wsest_gen_bin){5000, 1000, 10};
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	ck_assert(strstr(why, "ends before"));
	smp.gens.bin[0] = (struct wsest_gen_bin){0, 1000, -1};
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	smp.gens.nbins = WSEST_GEN_BINS + 1;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	ck_assert_str_eq(wsest_source_name(WSEST_MGLRU), "mglru");
	ck_assert_str_eq(wsest_source_name(WSEST_NONE), "none");
	wsest_free(w);
}
END_TEST

/* The oldest generation: a minute's idleness or days of it, one count.
 * Right after the agent's walk (every 30 s, window 60 s) a workload whose
 * pages spread evenly over e-folds of their access rate shows A pages per
 * e-fold of idle age: the bin [30 s, 60 s] holds A·ln 2. The oldest bin's
 * pages are then idle 60 s·e^k to 60 s·e^(k+1), A of them each, worth
 * (1 − 1/e)/(60 s·e^k) a second on average; all of them at once at 1/(2 ×
 * 60 s) (the rule before) kept pages touched once a week as if touched
 * every two minutes. The working set and its bar do not change. */
START_TEST(mglru_oldest_generation_spreads_over_idle_ages)
{
	const int64_t A = 100000, hot = 1000000, old = 1400000;
	struct wsest *w = new_est();
	struct wsest_sample smp;
	struct wsest_estimate e;
	const char *why = NULL;

	memset(&smp, 0, sizeof smp);
	smp.has_gens = 1;
	smp.gens.nbins = 3;
	smp.gens.bin[0] = (struct wsest_gen_bin){0, 30000, hot};
	smp.gens.bin[1] = (struct wsest_gen_bin){
	    30000, 60000, (int64_t)llround((double)A * log(2))};
	smp.gens.bin[2] = (struct wsest_gen_bin){60000, WSEST_GEN_OPEN, old};
	int64_t all = hot + smp.gens.bin[1].pages + old;
	smp.active = all;
	for (int i = 0; i < 2; i++) {
		smp.t += INT64_C(30000000000);
		ck_assert_msg(wsest_update(w, &smp, &e, &why) == 0, "%s", why);
	}
	int64_t edge = hot + smp.gens.bin[1].pages;
	ck_assert_int_eq(e.wss, edge);
	ck_assert_int_eq(e.wss_err, 0);
	double cost = (double)e.fault_cost_ns;
	for (int k = 0; k < 5; k++) {
		double rate = (1 - exp(-1)) / (60 * exp(k));
		double want = rate * (double)RX_SECONDS_PER_YEAR * cost / 1000;
		int64_t got = wsest_value_at(&e, edge + k * A + A / 2);
		ck_assert_msg(fabs((double)got - want) <= want * 1e-6 + 1,
		              "e-fold %d: %lld, want %.0f", k, (long long)got,
		              want);
	}
	/* The coldest page, 14 e-folds out (60 s·e^13: 26 days idle). */
	int64_t coldest = wsest_value_at(&e, all - 1);
	int64_t edge_v = wsest_value_at(&e, edge);
	ck_assert_msg(coldest * 100000 < edge_v, "coldest %lld, edge %lld",
	              (long long)coldest, (long long)edge_v);
	for (int i = 1; i < e.npoints; i++) {
		ck_assert(e.curve[i].size > e.curve[i - 1].size);
		ck_assert(e.curve[i].value <= e.curve[i - 1].value);
	}
	wsest_free(w);
}
END_TEST

/* Pages given back that come back. A machine's coldest pages are all
 * touched once in three days (λ): the generations say only "idle a minute
 * or more", and the spreading over e-folds of idle age values them as if
 * idle months (ramex-fleet's machine 564, which sold them and stalled
 * 0.47 % of its time). The agent gives G of them back; they fault back at
 * λG a second, major faults the refault counter does not see (out far
 * longer than a generation's turn). Each interval of 30 s. */
static void comeback_feed(struct wsest *w, struct wsest_sample *smp,
                          rx_pages given, uint64_t faults, uint64_t stall_us,
                          struct wsest_estimate *e)
{
	const char *why = NULL;

	smp->t += INT64_C(30000000000);
	smp->swapped = given;
	smp->majfaults += faults;
	smp->psi_some_us += stall_us;
	ck_assert_msg(wsest_update(w, smp, e, &why) == 0, "%s", why);
}

START_TEST(pages_given_back_that_come_back_are_worth_their_rate)
{
	const int64_t hot = 1000000, old = 1400000, G = 2592000;
	const double lambda = 1.0 / 259200; /* once in three days */
	struct wsest *w = new_est();
	struct wsest_sample smp;
	struct wsest_estimate e;

	memset(&smp, 0, sizeof smp);
	smp.has_gens = 1;
	smp.gens.nbins = 3;
	smp.gens.bin[0] = (struct wsest_gen_bin){0, 30000, hot};
	smp.gens.bin[1] = (struct wsest_gen_bin){30000, 60000, 69315};
	smp.gens.bin[2] = (struct wsest_gen_bin){60000, WSEST_GEN_OPEN, old};
	smp.active = hot + 69315 + old;
	comeback_feed(w, &smp, 0, 0, 0, &e);
	comeback_feed(w, &smp, 0, 0, 0, &e);
	/* Nothing given back: the coldest page is worth next to nothing,
	 * and faults of the workload's own teach nothing about sales. */
	int64_t before = wsest_value_at(&e, smp.active - 1);
	double want = lambda * (double)RX_SECONDS_PER_YEAR * 50000 / 1000;
	ck_assert_msg(before * 10 < (int64_t)want, "coldest %lld, want %.0f",
	              (long long)before, want);
	comeback_feed(w, &smp, 0, 5000, 0, &e);
	ck_assert_int_eq(e.comeback_nps, 0);
	ck_assert_int_eq(e.comeback_value, 0);

	/* G given back, λG faults a second (300 an interval): within six
	 * hours the rate is λ within 10 % (the prior's page-seconds of
	 * nothing weigh 6 % against an hour's), and every page kept is worth
	 * at least that. */
	for (int i = 0; i < 6 * 120; i++)
		comeback_feed(w, &smp, G, 300, 0, &e);
	ck_assert_msg(fabs((double)e.comeback_nps - lambda * 1e9) <=
	                  lambda * 1e9 * 0.1,
	              "rate %lld n/s, want %.0f", (long long)e.comeback_nps,
	              lambda * 1e9);
	ck_assert_int_ge(e.comeback_value, (int64_t)(want * 0.9));
	ck_assert_int_ge(wsest_value_at(&e, smp.active - 1), e.comeback_value);
	ck_assert_int_ge(e.dydx, e.comeback_value);
	ck_assert_int_ge(e.dydx_above, e.comeback_value);
	for (int i = 1; i < e.npoints; i++)
		ck_assert(e.curve[i].value <= e.curve[i - 1].value);
	int64_t learnt = e.comeback_nps;

	/* A burst: 100 times the faults under pressure (10 % stall) for
	 * half an hour. They are the working set's, not the pages sold:
	 * the rate does not rise, and within an hour after it is what it
	 * was. */
	for (int i = 0; i < 60; i++) {
		comeback_feed(w, &smp, G, 30000, 3000000, &e);
		ck_assert(e.pressure);
		ck_assert_int_le(e.comeback_nps, learnt);
	}
	for (int i = 0; i < 120; i++)
		comeback_feed(w, &smp, G, 300, 0, &e);
	ck_assert(!e.pressure);
	ck_assert_int_ge(e.comeback_nps, learnt * 9 / 10);

	/* The pages stop coming back (the workload left them): within
	 * three hours the rate is under half what it was (within minutes). */
	for (int i = 0; i < 3 * 120; i++)
		comeback_feed(w, &smp, G, 0, 0, &e);
	ck_assert_int_lt(e.comeback_nps * 2, learnt);

	/* Learnt again, then nothing given back for long: what was learnt
	 * fades against the prior, so the agent tries selling again. */
	for (int i = 0; i < 6 * 120; i++)
		comeback_feed(w, &smp, G, 300, 0, &e);
	ck_assert_int_ge(e.comeback_nps, learnt * 9 / 10);
	for (int i = 0; i < 30; i++)
		comeback_feed(w, &smp, 0, 0, 0, &e);
	ck_assert_int_ge(e.comeback_nps, learnt / 2); /* no news yet */
	for (int i = 0; i < 4 * 120; i++)
		comeback_feed(w, &smp, 0, 0, 0, &e);
	ck_assert_int_lt(e.comeback_nps * 10, learnt);

	/* Given back pages that come back faster than once a window are
	 * the working set's (the thrashing estimate answers them): the rate
	 * is never taken past 1/window. */
	for (int i = 0; i < 240; i++)
		comeback_feed(w, &smp, 100000, 150000, 0, &e);
	ck_assert(!e.thrashing);
	ck_assert_int_eq(e.comeback_nps, 16666667); /* 1/60 s, rounded */
	smp.swapped = -1;
	smp.t += INT64_C(30000000000);
	const char *why = NULL;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	wsest_free(w);
}
END_TEST

/* Thrashing in a cgroup at its limit: R pages resident, all seen accessed
 * within the window, and the oldest generation (the one reclaim evicts
 * from) 3 s old against a 20 s window. Evicted pages stay out W seconds
 * before they fault back at λ a second, and the oldest generation takes
 * a step every G = 2 s. MGLRU on 6.1 counts a fault as a refault only
 * while the page's generation is still the oldest: a share 1 - W/G of
 * them. The deficit is λW (Little's law); the working set R + λW. */
static void thrash_feed(struct wsest *w, struct wsest_sample *smp,
                        int64_t resident, double lambda, double wout,
                        struct wsest_estimate *e)
{
	const double dt = 2, g = 2;
	const char *why = NULL;

	smp->t += 2000000000;
	smp->majfaults += (uint64_t)llround(lambda * dt);
	if (wout < g)
		smp->refaults +=
		    (uint64_t)llround(lambda * dt * (1 - wout / g));
	smp->gens.min_seq_sum += 1; /* one step of 2 s */
	smp->has_gens = 1;
	smp->gens.nbins = 2;
	smp->gens.walk_age_ms = 1000;
	smp->gens.bin[0] = (struct wsest_gen_bin){0, 3000, resident - 1000};
	smp->gens.bin[1] = (struct wsest_gen_bin){3000, WSEST_GEN_OPEN, 1000};
	smp->active = resident;
	ck_assert_msg(wsest_update(w, smp, e, &why) == 0, "%s", why);
}

START_TEST(mglru_thrash_deficit)
{
	struct wsest_config c;
	struct wsest_sample smp;
	struct wsest_estimate e;
	const char *why = NULL;
	const int64_t res = 65000; /* 254 MiB at a 256 MiB limit */

	wsest_config_default(&c);
	c.window_ns = INT64_C(20000000000);
	/* Out 1 s, 11 776 faults a second: 46 MiB missing. The bound
	 * λ(τ - E) alone is 17 times that. */
	struct wsest *w = wsest_new(&c, &why);
	memset(&smp, 0, sizeof smp);
	for (int i = 0; i < 15; i++) {
		thrash_feed(w, &smp, res, 11776, 1, &e);
		if (i < 10)
			continue;
		int64_t truth = res + 11776;
		ck_assert_msg(
		    e.thrashing && llabs(e.wss - truth) * 10 <= truth &&
		        llabs(e.wss - truth) <= e.wss_err &&
		        e.wss_err * 100 <= truth * 20,
		    "sample %d: estimate %lld ± %lld for %lld (deficit "
		    "%lld, bound %lld)",
		    i, (long long)e.wss, (long long)e.wss_err, (long long)truth,
		    (long long)e.deficit, (long long)e.thrash_hi);
	}
	/* The faults stop: the deficit goes at once. */
	smp.t += 2000000000;
	smp.gens.min_seq_sum += 1;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert(!e.thrashing && e.deficit == 0);
	ck_assert_int_le(llabs(e.wss - res), res / 10);
	wsest_free(w);

	/* Out 3 s, longer than a generation's turn: the counter sees none,
	 * the faults a step (λG) are only a floor; the bar still holds the
	 * truth, between that floor and the bound. */
	w = wsest_new(&c, &why);
	memset(&smp, 0, sizeof smp);
	for (int i = 0; i < 15; i++) {
		thrash_feed(w, &smp, res, 4000, 3, &e);
		if (i < 10)
			continue;
		int64_t truth = res + 12000;
		ck_assert_msg(
		    e.thrashing && llabs(e.wss - truth) <= e.wss_err &&
		        e.wss_lo <= truth && truth <= e.wss_hi,
		    "sample %d: estimate %lld ± %lld [%lld, %lld] for "
		    "%lld",
		    i, (long long)e.wss, (long long)e.wss_err,
		    (long long)e.wss_lo, (long long)e.wss_hi, (long long)truth);
		ck_assert_int_ge(e.deficit, 8000); /* at least λG */
		ck_assert_int_eq(e.cold_known, 0); /* oldest 3 s old */
	}
	wsest_free(w);
}
END_TEST

/* Probing: pages taken away whose refaults follow measure dy/dx at the
 * margin; an interval without a probe keeps the last measurement. */
START_TEST(probe_measures_dydx)
{
	struct wsest *w = new_est();
	struct wsest_sample smp;
	struct wsest_estimate e;
	const char *why = NULL;

	memset(&smp, 0, sizeof smp);
	smp.active = 100000;
	smp.t = DT_NS;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	smp.t += DT_NS;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert_int_eq(e.probe_dydx, 0);
	int64_t before = e.dydx;
	/* 1000 pages taken, 100 refaults in the 10 s after: each taken page
	 * is wanted 0.01 times a second */
	smp.t += DT_NS;
	smp.probed = 1000;
	smp.refaults = 100;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert_int_eq(e.probed, 1000);
	ck_assert_int_eq(e.probe_dydx,
	                 (int64_t)(0.01 * RX_SECONDS_PER_YEAR * 50000 / 1000));
	ck_assert_int_ge(e.dydx, e.probe_dydx);
	ck_assert_int_ge(e.dydx, before);
	smp.t += DT_NS;
	smp.probed = 0;
	ck_assert(wsest_update(w, &smp, &e, &why) == 0);
	ck_assert_int_eq(e.probed, 0);
	ck_assert_int_gt(e.probe_dydx, 0);
	smp.t += DT_NS;
	smp.probed = -1;
	ck_assert(wsest_update(w, &smp, &e, &why) == -1);
	wsest_free(w);
}
END_TEST

START_TEST(bad_config)
{
	struct wsest_config c;
	const char *why = NULL;

	wsest_config_default(&c);
	c.window_ns = 0;
	ck_assert(!wsest_new(&c, &why) && strstr(why, "window"));
	wsest_config_default(&c);
	c.unpressure_ppm = c.pressure_ppm + 1;
	ck_assert(!wsest_new(&c, &why) && strstr(why, "pressure"));
	wsest_config_default(&c);
	c.fault_cost_ns = 1;
	ck_assert(!wsest_new(&c, &why) && strstr(why, "fault cost"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wsest");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hot_set);
	tcase_add_test(tc, mixed_heat);
	tcase_add_test(tc, step_change);
	tcase_add_test(tc, marginal_value_curve);
	tcase_add_test(tc, psi_calibrates_cost);
	tcase_add_test(tc, pressure_hysteresis);
	tcase_add_test(tc, refaults_widen_the_estimate);
	tcase_add_test(tc, lru_fallback);
	tcase_add_test(tc, bad_samples);
	tcase_add_test(tc, bad_config);
	tcase_add_test(tc, mglru_follows_phases);
	tcase_add_test(tc, mglru_mixed_heat);
	tcase_add_test(tc, mglru_bad_bins);
	tcase_add_test(tc, mglru_probe_rejected);
	tcase_add_test(tc, mglru_collapsed_cold_ranges);
	tcase_add_test(tc, mglru_thrash_deficit);
	tcase_add_test(tc, mglru_oldest_generation_spreads_over_idle_ages);
	tcase_add_test(tc, probe_measures_dydx);
	tcase_add_test(tc,
	               pages_given_back_that_come_back_are_worth_their_rate);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
