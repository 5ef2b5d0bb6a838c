/* wsest.c — the working-set estimator; the model is in node-agent/README.md.
 */
#include "node-agent/core/wsest.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Calibrated fault costs outside this range are measurement noise (a PSI
 * stall with almost no refaults, or the reverse), not a device. */
#define WSEST_COST_MIN_NS 1000
#define WSEST_COST_MAX_NS 10000000
#define WSEST_YOUNG_MAX   128 /* pages made young, kept within a window */
/* A generation's idle_min, as the estimator predicts it from its clock,
 * and as lru_gen prints it (a jiffies age at the read, merged across
 * lruvecs within a second by mglru.c) differ by this much at most. */
#define WSEST_BIN_TOL_MS 1000
#define WSEST_EP_MAX     64 /* samples remembered within a window */
/* Below this share of the faults seen by the refault counter, evicted
 * pages stay out about as long as a generation lasts or longer: the
 * faults per generation step are then only a floor of the deficit. */
#define WSEST_COUNTED_MIN 0.1
/* What the faults of pages out of memory say is learnt over this horizon
 * (comeback_rate): long against a sample (pages out touched once in three
 * days, 256 MiB of them, fault back 150 times in it), short against the
 * day's swing, which takes warmer pages out at its peak than at night.
 * (ramex-fleet, 200 machines: an hour gave the same figures, 87.2 against
 * 87.3 % of idle given back at 0.088 % stall.) */
#define WSEST_COMEBACK_S 600.0
/* ... and against this much evidence of nothing, in page-seconds out
 * (256 MiB out for the horizon): with no page out, what was learnt fades
 * within ln(pages that were out / 65536) horizons (47 min for 28 GiB
 * out), and the agent tries selling again. */
#define WSEST_COMEBACK_PRIOR (65536.0 * WSEST_COMEBACK_S)

struct wsest {
	struct wsest_config cfg;
	int have_prev;
	struct wsest_sample prev;
	int have_est;
	double wss;     /* smoothed working set, pages */
	double wss_var; /* smoothed variance of the raw estimate over time */
	double cost_ns; /* stall per refault */
	/* Smoothed, per age bucket: pages touched, out of pages that had the
	 * age at the previous scan. Smoothing the counts rather than their
	 * ratio keeps sparse buckets from swinging to 0 or 1. */
	double reuse_n[WSEST_AGE_BUCKETS];
	double base_n[WSEST_AGE_BUCKETS];
	int pressure;
	int stable_run;
	int have_probe;
	double probe_rate; /* refaults a second per probed page, smoothed */
	int have_gens;
	double gens_ws; /* the generations' last reading, pages */
	int have_thrash;
	double fault_rate; /* pages faulted back a second, smoothed */
	double evict_ms;   /* the oldest generation's age, smoothed */
	/* Pages made young without being accessed: those probes could not
	 * evict (reclaim puts them in the youngest generation) and those
	 * khugepaged collapsed out of cold ranges (the walk after sees the
	 * new huge page's entry young). After when they were made (the
	 * walk of the sample before the one that carried them), and the
	 * first walk after that (0: not made yet). */
	int nyoung;
	struct {
		rx_time_ns t, born;
		rx_pages pages;
		int collapsed;
	} young[WSEST_YOUNG_MAX];
	/* Faults of pages out of memory and the page-seconds they were out,
	 * both forgotten over WSEST_COMEBACK_S (comeback_rate). */
	double cb_faults, cb_exposure;
	/* The samples of the last window: faults, those of them the
	 * refault counter did not see, and the oldest generations' steps
	 * (thrash_deficit). */
	int nep;
	struct {
		rx_time_ns t;
		double faults, uncounted, steps;
	} ep[WSEST_EP_MAX];
};

void wsest_config_default(struct wsest_config *c)
{
	memset(c, 0, sizeof *c);
	c->window_ns = INT64_C(60000000000);
	c->fault_cost_ns = 50000;
	c->smooth_pct = 30;
	c->stable_pct = 5;
	c->stable_samples = 6;
	c->min_refaults = 16;
	c->pressure_ppm = 100000;
	c->unpressure_ppm = 20000;
}

struct wsest *wsest_new(const struct wsest_config *c, const char **why)
{
	struct wsest *w;

	if (c->window_ns <= 0) {
		*why = "the working-set window must be positive";
		return NULL;
	}
	if (c->fault_cost_ns < WSEST_COST_MIN_NS ||
	    c->fault_cost_ns > WSEST_COST_MAX_NS) {
		*why = "the fault cost must be between 1 us and 10 ms";
		return NULL;
	}
	if (c->smooth_pct < 1 || c->smooth_pct > 100) {
		*why = "the smoothing weight must be 1..100 percent";
		return NULL;
	}
	if (c->stable_pct < 1 || c->stable_samples < 1) {
		*why = "the stability limits must be positive";
		return NULL;
	}
	if (c->unpressure_ppm > c->pressure_ppm || c->pressure_ppm > 1000000 ||
	    c->unpressure_ppm < 0) {
		*why = "pressure must end (unpressure) at or below where it "
		       "starts,"
		       " within 0..1000000 ppm";
		return NULL;
	}
	w = calloc(1, sizeof *w);
	if (!w) {
		*why = "out of memory";
		return NULL;
	}
	w->cfg = *c;
	w->cost_ns = (double)c->fault_cost_ns;
	return w;
}

void wsest_free(struct wsest *w)
{
	free(w);
}

static uint64_t delta(uint64_t now, uint64_t before)
{
	/* A counter that went backwards was reset (cgroup recreated): the
	 * interval carries no information, which is not an error. */
	return now >= before ? now - before : 0;
}

/* Stall microseconds per page-year for a page touched `rate` times a
 * second, each touch (if the page were gone) costing `cost_ns`. */
static int64_t value_of(double rate, double cost_ns)
{
	double v = rate * (double)RX_SECONDS_PER_YEAR * cost_ns / 1000.0;
	if (v > 1e18)
		v = 1e18;
	return v > 0 ? (int64_t)llround(v) : 0;
}

static int check_idle(const struct wsest_idle *id, const char **why)
{
	int64_t sum = 0;

	if (id->sampled <= 0 || id->population < id->sampled) {
		*why =
		    "idle sample: sampled pages must be positive and at most "
		    "the population";
		return -1;
	}
	for (int k = 0; k < WSEST_AGE_BUCKETS; k++) {
		if (id->age[k] < 0 || id->reuse[k] < 0) {
			*why = "idle sample: negative page count";
			return -1;
		}
		sum += id->age[k];
	}
	if (sum != id->sampled) {
		*why = "idle sample: the age histogram does not add up to the "
		       "sampled pages";
		return -1;
	}
	return 0;
}

/* Pool-adjacent-violators: the weighted least-squares fit of `p` that
 * never increases. Pages are ordered hottest first, as LRU keeps them, so a
 * colder bucket that looks hotter is sampling noise, pooled with its
 * neighbour rather than clipped (clipping drags every later bucket down). */
static void isotonic_nonincreasing(double *p, const double *wt, int n)
{
	double val[WSEST_AGE_BUCKETS], w[WSEST_AGE_BUCKETS];
	int len[WSEST_AGE_BUCKETS], m = 0;

	for (int i = 0; i < n; i++) {
		val[m] = p[i];
		w[m] = wt[i];
		len[m] = 1;
		m++;
		while (m > 1 && val[m - 2] < val[m - 1]) {
			double ws = w[m - 2] + w[m - 1];
			val[m - 2] =
			    (val[m - 2] * w[m - 2] + val[m - 1] * w[m - 1]) /
			    ws;
			w[m - 2] = ws;
			len[m - 2] += len[m - 1];
			m--;
		}
	}
	for (int b = 0, i = 0; b < m; b++)
		for (int j = 0; j < len[b]; j++)
			p[i++] = val[b];
}

/* Fine estimate from idle ages: pages idle for fewer scans than the window
 * are working; per-age reuse gives the marginal-value curve. */
static double idle_estimate(struct wsest *w, const struct wsest_sample *s,
                            double dt_s, double *var, struct wsest_estimate *e)
{
	const struct wsest_idle *id = &s->idle, *pid = &w->prev.idle;
	double scale = (double)id->population / (double)id->sampled;
	double alpha = w->cfg.smooth_pct / 100.0;
	double win = (double)w->cfg.window_ns / 1e9 / dt_s;
	int W = (int)lround(win);
	int64_t in_ws = 0, cum = 0;

	if (W < 1)
		W = 1;
	if (W > WSEST_AGE_BUCKETS - 1)
		W = WSEST_AGE_BUCKETS - 1;
	for (int k = 0; k < W; k++)
		in_ws += id->age[k];

	double p = (double)in_ws / (double)id->sampled;
	double fpc = 1.0 - (double)id->sampled / (double)id->population;
	*var = (double)id->population * (double)id->population * p * (1 - p) /
	       (double)id->sampled * fpc;

	double p_k[WSEST_AGE_BUCKETS], wt[WSEST_AGE_BUCKETS];
	int nb = 0;
	for (int k = 0; k < WSEST_AGE_BUCKETS; k++) {
		w->reuse_n[k] += alpha * ((double)id->reuse[k] - w->reuse_n[k]);
		w->base_n[k] += alpha * ((double)pid->age[k] - w->base_n[k]);
		if (id->age[k] == 0)
			continue;
		double pk = w->base_n[k] > 0 ? w->reuse_n[k] / w->base_n[k]
		                             : (k == 0 ? 1 : 0);
		p_k[nb] = pk > 1 ? 1 : pk;
		wt[nb] = (double)id->age[k];
		e->curve[nb].size = (rx_pages)llround((double)cum * scale);
		cum += id->age[k];
		nb++;
	}
	isotonic_nonincreasing(p_k, wt, nb);
	for (int i = 0; i < nb; i++)
		e->curve[i].value = value_of(p_k[i] / dt_s, w->cost_ns);
	e->npoints = nb;
	return (double)in_ws * scale;
}

static int check_gens(const struct wsest_gens *g, const char **why)
{
	if (g->nbins < 1 || g->nbins > WSEST_GEN_BINS || g->walk_age_ms < 0) {
		*why = "generation sample: 1..32 bins and a walk age of 0 or "
		       "more are needed";
		return -1;
	}
	for (int i = 0; i < g->nbins; i++) {
		const struct wsest_gen_bin *b = &g->bin[i];
		if (b->pages < 0 || b->idle_min_ms < 0 ||
		    b->idle_max_ms < b->idle_min_ms) {
			*why =
			    "generation sample: a bin with negative pages or "
			    "an idle range that ends before it starts";
			return -1;
		}
	}
	return 0;
}

/* Appends `pages` worth `v` each to the curve (cum: its size so far, last:
 * its last value): colder pages are never worth more, and past the last
 * point the coldest pages pool with it. */
static void curve_add(struct wsest_estimate *e, int *np, int64_t *cum,
                      int64_t *last, int64_t v, int64_t pages)
{
	if (v > *last)
		v = *last;
	if (pages <= 0)
		return;
	if (*np < WSEST_AGE_BUCKETS && (*np == 0 || v < *last)) {
		e->curve[*np].size = *cum;
		e->curve[*np].value = v;
		(*np)++;
	} else if (*np == WSEST_AGE_BUCKETS) {
		e->curve[*np - 1].value = v; /* pool the coldest tail */
	}
	*last = v;
	*cum += pages;
}

/* The oldest generation holds every page idle longer than its idle_min,
 * from a minute to days, in one count. The curve's rule, a page idle t is
 * worth 1/t a second, is exact for a workload whose pages spread evenly
 * over e-folds of their access rate (then A pages have idle ages in each
 * e-fold, at every age); the bins just younger show how many pages that
 * is here (efold: the last finite bin's pages over the e-folds of age it
 * spans). So in the oldest generation, LRU-ordered, the pages from kA to
 * (k+1)A past its young edge T are idle T·e^k to T·e^(k+1), and worth on
 * average (1 − 1/e)/(T·e^k) a second each. Valuing them all at 1/(2T),
 * as if none were idle much longer than the generation's edge, kept the
 * warm tail and the cold pages as if touched every two minutes
 * (ramex-fleet: 2.8 M pages a machine kept over the operator's bid,
 * against 1.2 M by the true access rates). */
static void open_curve(struct wsest *w, const struct wsest_gen_bin *b,
                       double efold, struct wsest_estimate *e, int *np,
                       int64_t *cum, int64_t *last)
{
	double t = (double)b->idle_min_ms / 1000, left = (double)b->pages;

	if (t < 1)
		t = 1;
	for (int k = 0; left > 0.5; k++) {
		if (*np >= WSEST_AGE_BUCKETS) {
			/* no point left: the rest at the last one's value */
			*cum += (int64_t)llround(left);
			break;
		}
		double step = left < efold ? left : efold;
		int64_t pages = (int64_t)llround(step);
		curve_add(e, np, cum, last,
		          value_of((1 - exp(-1)) / (t * exp(k)), w->cost_ns),
		          pages);
		left -= step;
	}
}

/* Fine estimate from MGLRU generations. A page's generation says when an
 * aging walk last saw it accessed: the bin's idle_min is that walk's age.
 * The working set is every page some walk saw accessed within the window
 * (Denning's, at the walks' resolution: a page touched since the last walk
 * is counted from the next one on, and one no longer touched leaves it
 * once the walk that last saw it is a window old). A walk every half
 * window keeps the oldest, open generation (older ones merged into it)
 * past the window; when it is not, its pages may or may not be working,
 * and they are the error. lo and hi bound the working set as the bins'
 * ranges allow. */
static double gens_estimate(struct wsest *w, const struct wsest_sample *s,
                            double *var, double *lo, double *hi,
                            double *evict_ms, struct wsest_estimate *e)
{
	const struct wsest_gens *g = &s->gens;
	double tau = (double)w->cfg.window_ns / 1e6, in = 0, unsure = 0;
	int order[WSEST_GEN_BINS], n = g->nbins;

	*lo = 0;
	*hi = 0;
	*evict_ms = -1;
	for (int i = 0; i < n; i++) {
		const struct wsest_gen_bin *b = &g->bin[i];
		double p = (double)b->pages;
		/* Reclaim evicts from the oldest generation: its pages were
		 * last seen accessed at least idle_min ago. */
		if (b->idle_max_ms == WSEST_GEN_OPEN && b->pages > 0 &&
		    (*evict_ms < 0 || (double)b->idle_min_ms < *evict_ms))
			*evict_ms = (double)b->idle_min_ms;
		if ((double)b->idle_min_ms < tau) {
			in += p;
			*hi += p;
			if (b->idle_max_ms != WSEST_GEN_OPEN &&
			    (double)b->idle_max_ms <= tau)
				*lo += p;
			if (b->idle_max_ms == WSEST_GEN_OPEN)
				unsure += p;
		}
		order[i] = i;
	}
	/* The open bin's pages taken as ±2σ. */
	*var = (unsure / 4) * (unsure / 4);
	for (int i = 0; i < n; i++)
		if ((double)g->bin[i].idle_min_ms >= tau)
			e->cold_known += g->bin[i].pages;

	/* The curve: bins hottest first. A page last touched t ago is
	 * touched about 1/t times a second (the rate's maximum likelihood
	 * for a Poisson page); within a bin, t is at most its idle_max,
	 * and never under the walk's own age (the histogram's resolution). */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--) {
			const struct wsest_gen_bin *a = &g->bin[order[j - 1]],
			                           *b = &g->bin[order[j]];
			if (a->idle_min_ms < b->idle_min_ms ||
			    (a->idle_min_ms == b->idle_min_ms &&
			     a->idle_max_ms <= b->idle_max_ms))
				break;
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	double floor_ms = g->walk_age_ms > 1000 ? (double)g->walk_age_ms : 1000;
	int64_t cum = 0, last = INT64_MAX;
	int np = 0;
	double efold = 0; /* pages per e-fold of idle age, last finite bin */
	for (int i = 0; i < n; i++) {
		const struct wsest_gen_bin *b = &g->bin[order[i]];
		if (b->idle_max_ms == WSEST_GEN_OPEN && efold > 0) {
			open_curve(w, b, efold, e, &np, &cum, &last);
			continue;
		}
		if (b->idle_max_ms != WSEST_GEN_OPEN && b->idle_min_ms > 0 &&
		    b->idle_max_ms > b->idle_min_ms && b->pages > 0)
			efold = (double)b->pages / log((double)b->idle_max_ms /
			                               (double)b->idle_min_ms);
		double t = b->idle_max_ms == WSEST_GEN_OPEN
		               ? 2 * (double)b->idle_min_ms
		               : (double)b->idle_max_ms;
		if (t < floor_ms)
			t = floor_ms;
		curve_add(e, &np, &cum, &last, value_of(1000 / t, w->cost_ns),
		          b->pages);
	}
	if (np == 0) {
		e->curve[0].size = 0;
		e->curve[0].value = 0;
		np = 1;
	}
	e->npoints = np;
	return in;
}

/* Coarse estimate from list sizes: the active list is working, half the
 * inactive list is, give or take the other half. */
static double lru_estimate(struct wsest *w, const struct wsest_sample *s,
                           double dt_s, double refault_rate, double *var,
                           struct wsest_estimate *e)
{
	double half = (double)s->inactive / 2;
	rx_pages hot = s->active + s->unevictable;
	int64_t v0 = value_of(1 / dt_s, w->cost_ns);
	int64_t v1 =
	    s->inactive > 0
	        ? value_of(refault_rate / (double)s->inactive, w->cost_ns)
	        : 0;

	*var = (half / 2) * (half / 2); /* half-width taken as 2σ */
	e->curve[0].size = 0;
	e->curve[0].value = v0;
	e->curve[1].size = hot;
	e->curve[1].value = v1 < v0 ? v1 : v0;
	e->npoints = 2;
	return (double)hot + half;
}

/* The bin a generation made `age_ms` ago closed: the one whose idle_min
 * is that age (the generation after it was made then). Ties (two bins
 * with the same idle_min: the youngest, [0, its age], and the one a walk
 * made an instant ago closed) go to the younger when `youngest`, else to
 * the older. -1 when no bin is that old: the generation was emptied. */
static int bin_at(const struct wsest_gens *g, double age_ms, int youngest)
{
	int best = -1;
	double best_d = WSEST_BIN_TOL_MS;

	for (int i = 0; i < g->nbins; i++) {
		const struct wsest_gen_bin *b = &g->bin[i];
		double d = fabs((double)b->idle_min_ms - age_ms);
		if (d > best_d)
			continue;
		if (best >= 0 && d == best_d &&
		    (youngest ? b->idle_max_ms >= g->bin[best].idle_max_ms
		              : b->idle_max_ms <= g->bin[best].idle_max_ms))
			continue;
		best = i;
		best_d = d;
	}
	return best;
}

static void young_add(struct wsest *w, rx_pages pages, int collapsed)
{
	if (pages <= 0)
		return;
	if (w->nyoung == WSEST_YOUNG_MAX) {
		/* full: the two oldest as one, dated the later */
		w->young[1].pages += w->young[0].pages;
		memmove(&w->young[0], &w->young[1],
		        (size_t)(WSEST_YOUNG_MAX - 1) * sizeof w->young[0]);
		w->nyoung--;
	}
	/* carried by this sample, made after the previous one and its walk
	 * (when it had the generations: its youngest was made then) */
	w->young[w->nyoung].t =
	    w->prev.t - (w->prev.has_gens
	                     ? (rx_time_ns)w->prev.gens.walk_age_ms * 1000000
	                     : 0);
	w->young[w->nyoung].born = 0;
	w->young[w->nyoung].pages = pages;
	w->young[w->nyoung].collapsed = collapsed;
	w->nyoung++;
}

/* Pages the generations count as working that no walk saw accessed, this
 * sample's added: those probes could not evict, which reclaim put into
 * the youngest generation, and those khugepaged collapsed out of ranges
 * outside the window (the pages the generations within it gained
 * without a walk, at most the pages collapsed meanwhile: a collapse of a
 * range already within the window gains nothing). Either counts until
 * the generation made after it is a window old: the walk that made that
 * one saw the collapsed huge page's entry young (the collapse makes it
 * so), and is the first that could have seen either accessed. Each is
 * taken off the generation it sits in, never more than that one still
 * holds: a walk that sees them accessed again (a range that turns hot)
 * moves them out, and they count from then on. Sets *collapsed to the
 * collapsed pages' share. */
static double unseen_young(struct wsest *w, const struct wsest_sample *s,
                           double *collapsed)
{
	const struct wsest_gens *g = &s->gens;
	rx_time_ns walk = s->t - (rx_time_ns)g->walk_age_ms * 1000000;
	double tau_ms = (double)w->cfg.window_ns / 1e6;
	double want[WSEST_GEN_BINS] = {0}, col[WSEST_GEN_BINS] = {0}, sum = 0;
	int k = 0;

	young_add(w, s->rejected, 0);
	if (w->prev.has_gens) {
		rx_pages c =
		    (rx_pages)delta(s->thp_collapsed, w->prev.thp_collapsed);
		young_add(w, s->window_gain < c ? s->window_gain : c, 1);
	}
	for (int i = 0; i < w->nyoung; i++) {
		/* the first walk after: the two clocks (the sample's, the
		 * generations' ages) agree within WSEST_BIN_TOL_MS */
		if (!w->young[i].born &&
		    walk > w->young[i].t + WSEST_BIN_TOL_MS * 1000000)
			w->young[i].born = walk;
		if (!w->young[i].born ||
		    s->t < w->young[i].born + w->cfg.window_ns)
			w->young[k++] = w->young[i];
	}
	w->nyoung = k;
	*collapsed = 0;
	for (int i = 0; i < w->nyoung; i++) {
		/* Not yet walked: a rejected page is in the youngest
		 * generation, a collapsed one in the last walk's. */
		rx_time_ns born = w->young[i].born;
		int b = born ? bin_at(g, (double)(s->t - born) / 1e6, 0)
		        : w->young[i].collapsed
		            ? bin_at(g, (double)g->walk_age_ms, 0)
		            : bin_at(g, 0, 1);
		if (b < 0 || (double)g->bin[b].idle_min_ms >= tau_ms)
			continue; /* emptied, or no longer counted */
		want[b] += (double)w->young[i].pages;
		if (w->young[i].collapsed)
			col[b] += (double)w->young[i].pages;
	}
	for (int b = 0; b < g->nbins; b++) {
		double d = want[b] < (double)g->bin[b].pages
		               ? want[b]
		               : (double)g->bin[b].pages;
		sum += d;
		*collapsed += col[b] < d ? col[b] : d;
	}
	return sum;
}

/* Thrashing: pages fault back while the oldest generation, the one
 * reclaim evicts from, is younger than the window, so the pages evicted
 * were touched within it. Each such page stays in the working set, and
 * out of memory, until it faults back or its last touch is a window old:
 * at most the window less its age at eviction. So the working-set pages
 * not resident are at most the fault rate times that (Little's law with
 * the longest stay out). Rate and age are smoothed (reclaim ages
 * generations in bursts). Returns that bound in pages, 0 when not
 * thrashing. */
static double thrash_bound(struct wsest *w, double faults, double dt_s,
                           double evict_ms, struct wsest_estimate *e)
{
	double alpha = w->cfg.smooth_pct / 100.0;
	double tau_ms = (double)w->cfg.window_ns / 1e6;

	if (faults < (double)w->cfg.min_refaults || evict_ms < 0) {
		w->have_thrash = 0; /* nothing came back: over at once */
		return 0;
	}
	if (!w->have_thrash) {
		w->fault_rate = faults / dt_s;
		w->evict_ms = evict_ms;
		w->have_thrash = 1;
	} else {
		w->fault_rate += alpha * (faults / dt_s - w->fault_rate);
		w->evict_ms += alpha * (evict_ms - w->evict_ms);
	}
	e->evict_age_ms = (int64_t)llround(w->evict_ms);
	if (w->evict_ms >= tau_ms)
		return 0;
	double bound = w->fault_rate * (tau_ms - w->evict_ms) / 1000;
	e->thrashing = 1;
	e->thrash_hi = (rx_pages)llround(bound);
	return bound;
}

/* How long evicted pages really stay out, from what MGLRU's refault
 * counter misses. On 6.1 a fault counts in workingset_refault only while
 * the generation its page was evicted from is still the oldest. Pages are
 * evicted all through a generation's turn as the oldest (G seconds); one
 * that stays out W < G is counted unless fewer than W seconds of the turn
 * were left, so a share W/G of the λG pages evicted in a turn is missed:
 * λW a turn, which by Little's law is the pages out, the deficit. Over
 * the window's samples, then: faults not counted / steps of the oldest
 * generation. When the counter saw almost none (W ≥ G), that is only a
 * floor. `bound` (thrash_bound) caps it. Sets *mid and *half (the deficit
 * lies in mid ± half); with no step in the window, the bound's middle. */
static void thrash_deficit(struct wsest *w, const struct wsest_sample *s,
                           double dref_raw, double dmaj, double bound,
                           double *mid, double *half)
{
	double steps = 0;
	int k = 0;

	if (s->has_gens && w->prev.has_gens)
		steps = (double)delta(s->gens.min_seq_sum,
		                      w->prev.gens.min_seq_sum);
	for (int i = 0; i < w->nep; i++)
		if (w->ep[i].t > s->t - w->cfg.window_ns)
			w->ep[k++] = w->ep[i];
	w->nep = k;
	if (w->nep == WSEST_EP_MAX) {
		memmove(&w->ep[0], &w->ep[1],
		        (size_t)(WSEST_EP_MAX - 1) * sizeof w->ep[0]);
		w->nep--;
	}
	double faults = dmaj > dref_raw ? dmaj : dref_raw;
	w->ep[w->nep].t = s->t;
	w->ep[w->nep].faults = faults;
	w->ep[w->nep].uncounted = dmaj > dref_raw ? dmaj - dref_raw : 0;
	w->ep[w->nep].steps = steps;
	w->nep++;

	*mid = bound / 2;
	*half = bound / 2;
	double f = 0, u = 0, st = 0;
	for (int i = 0; i < w->nep; i++) {
		f += w->ep[i].faults;
		u += w->ep[i].uncounted;
		st += w->ep[i].steps;
	}
	if (bound <= 0 || st < 1 || f <= 0)
		return;
	double d = u / st;
	if (d > bound)
		d = bound;
	if (1 - u / f >= WSEST_COUNTED_MIN) {
		/* Reclaim evicts and ages in bursts, not evenly: which
		 * faults that hides from the counter the model cannot see
		 * (in the guest: 25 MiB against 45 missing), so the bar
		 * reaches from none to twice that. */
		*mid = d;
		*half = d;
	} else {
		*mid = (d + bound) / 2;
		*half = (bound - d) / 2;
	}
}

/* How often the pages out of memory come back, each, a second. Pages
 * given back take the workload's coldest pages out of memory, into swap
 * (s->swapped); when it touches one again it is a major fault, however
 * long it was out (MGLRU's refault counter on 6.1 sees only those out
 * less than a generation's turn, and the generations say of the pages
 * still in memory only "idle a minute or more"). So the faults over the
 * page-seconds out are the rate at which those pages are touched, the
 * maximum likelihood of a Poisson rate per page. The LRU keeps the
 * hottest pages: any page still kept is touched at least as often as the
 * average page out, and giving back more would cost at least that. What
 * the rate does not learn from:
 *  - the workload's own shortage: under pressure or thrashing the faults
 *    are working pages', which the deficit answers at once; those
 *    intervals teach nothing here (a burst's faults would otherwise read
 *    as pages sold that come back, for hours);
 *  - faults with nothing out (first reads);
 *  - a page touched more than once a window, which the working set holds
 *    (and the thrashing estimate when it is out): capped at 1/window.
 * Faults and exposure are both forgotten over WSEST_COMEBACK_S, so the
 * rate follows a workload that changes within the hour, and weighed
 * against the prior's page-seconds of nothing, so that a while after
 * nothing is out (nothing to learn from) it fades and the agent sells
 * again: the pages, if they still come back, teach it again. Major
 * faults of file pages count too, while swap holds only anonymous pages:
 * where evicted file pages come back the rate is too high, which keeps
 * more memory, never less. Returns the rate. */
static double comeback_rate(struct wsest *w, const struct wsest_sample *s,
                            double faults, double dt_s,
                            const struct wsest_estimate *e)
{
	double keep = exp(-dt_s / WSEST_COMEBACK_S);
	double out = ((double)w->prev.swapped + (double)s->swapped) / 2;

	w->cb_faults *= keep;
	w->cb_exposure *= keep;
	if (out > 0 && !e->pressure && !e->thrashing) {
		w->cb_faults += faults;
		w->cb_exposure += out * dt_s;
	}
	double r = w->cb_faults / (w->cb_exposure + WSEST_COMEBACK_PRIOR);
	double cap = 1e9 / (double)w->cfg.window_ns;
	return r < cap ? r : cap;
}

int wsest_update(struct wsest *w, const struct wsest_sample *s,
                 struct wsest_estimate *e, const char **why)
{
	memset(e, 0, sizeof *e);
	if (s->active < 0 || s->inactive < 0 || s->unevictable < 0 ||
	    s->probed < 0 || s->rejected < 0 || s->window_gain < 0 ||
	    s->swapped < 0) {
		*why = "negative list size in sample";
		return -1;
	}
	if (s->has_idle && check_idle(&s->idle, why) < 0)
		return -1;
	if (s->has_gens && check_gens(&s->gens, why) < 0)
		return -1;
	if (!w->have_prev) {
		w->prev = *s;
		w->have_prev = 1;
		e->source = WSEST_NONE;
		e->fault_cost_ns = (int64_t)w->cost_ns;
		return 0;
	}
	if (s->t <= w->prev.t) {
		*why =
		    "sample time did not advance; samples must come in order";
		return -1;
	}

	double dt_s = (double)(s->t - w->prev.t) / 1e9;
	double dsome = (double)delta(s->psi_some_us, w->prev.psi_some_us);
	double dref = (double)delta(s->refaults, w->prev.refaults);
	double dmaj = (double)delta(s->majfaults, w->prev.majfaults);
	double dref_raw = dref;
	double alpha = w->cfg.smooth_pct / 100.0;
	/* Pages that came back: the refault counter, or the major faults
	 * where they count more (MGLRU's refault counter misses most of a
	 * thrashing workload's, see wsest.h). */
	if (dmaj > dref)
		dref = dmaj;
	double refault_rate = dref / dt_s;

	e->stall_ppm = (int64_t)llround(dsome / (dt_s * 1e6) * 1e6);
	if (e->stall_ppm > 1000000)
		e->stall_ppm = 1000000;
	e->refault_mps = (int64_t)llround(refault_rate * 1000);

	if (dref >= (double)w->cfg.min_refaults && dsome > 0) {
		double c = dsome * 1000 / dref;
		if (c < WSEST_COST_MIN_NS)
			c = WSEST_COST_MIN_NS;
		if (c > WSEST_COST_MAX_NS)
			c = WSEST_COST_MAX_NS;
		w->cost_ns += alpha * (c - w->cost_ns);
	}
	e->fault_cost_ns = (int64_t)llround(w->cost_ns);

	if (!w->pressure && e->stall_ppm >= w->cfg.pressure_ppm)
		w->pressure = 1;
	else if (w->pressure && e->stall_ppm < w->cfg.unpressure_ppm)
		w->pressure = 0;
	e->pressure = w->pressure;

	e->resident = s->active + s->inactive + s->unevictable;

	/* Refaults in the interval bound the working-set pages that are not
	 * resident: each such page touched in the interval refaulted at least
	 * once. Take the middle of [0, bound] and its half-width as error. */
	double def_mid = dref / 2, def_half = dref / 2;
	double var_samp, raw, lo = 0, hi = 0, keep = alpha;
	if (s->has_gens) {
		/* The generations already integrate over the window: a
		 * further average would only add lag. */
		double evict_ms;
		e->source = WSEST_MGLRU;
		raw = gens_estimate(w, s, &var_samp, &lo, &hi, &evict_ms, e);
		raw += (double)s->unevictable;
		lo += (double)s->unevictable;
		hi += (double)s->unevictable;
		keep = 1;
		double col, rej = unseen_young(w, s, &col);
		e->collapsed = (rx_pages)llround(col);
		e->rejected = (rx_pages)llround(rej - col);
		raw -= rej;
		lo -= rej;
		hi -= rej;
		if (raw < 0)
			raw = 0;
		if (lo < 0)
			lo = 0;
		if (hi < raw)
			hi = raw;
		/* The generations say the working set lies in [lo, hi]; where
		 * that leaves room (a generation that straddles the window,
		 * or the oldest, open one younger than it), the last reading
		 * stands if it is still inside. Reclaim that ages several
		 * times in a row merges working pages into the oldest
		 * generation with cold ones, which widens the range without
		 * anything having been touched or left alone; the walk after
		 * it moves the working ones out again. */
		if (w->have_gens && w->gens_ws >= lo && w->gens_ws < raw)
			raw = w->gens_ws;
		w->gens_ws = raw;
		w->have_gens = 1;
		double th = thrash_bound(w, dref, dt_s, evict_ms, e);
		double tmid, thalf;
		thrash_deficit(w, s, dref_raw, dmaj, th, &tmid, &thalf);
		if (th > 0) {
			def_mid = tmid;
			def_half = thalf;
		}
	} else if (s->has_idle && w->prev.has_idle) {
		e->source = WSEST_IDLE;
		raw = idle_estimate(w, s, dt_s, &var_samp, e);
	} else {
		e->source = WSEST_LRU;
		raw = lru_estimate(w, s, dt_s, refault_rate, &var_samp, e);
	}
	raw += def_mid;

	if (!w->have_est) {
		w->wss = raw;
		w->wss_var = 0;
		w->have_est = 1;
	} else {
		double d = raw - w->wss;
		w->wss += keep * d;
		w->wss_var = (1 - alpha) * (w->wss_var + alpha * d * d);
	}

	double err = sqrt(4 * var_samp + 4 * w->wss_var + def_half * def_half);
	e->wss = (rx_pages)llround(w->wss);
	e->wss_err = (rx_pages)llround(ceil(err));
	e->deficit = (rx_pages)llround(def_mid);
	if (e->source == WSEST_MGLRU) {
		e->wss_lo = (rx_pages)llround(lo);
		e->wss_hi = (rx_pages)llround(hi + def_mid + def_half);
	}

	double drift = w->wss > 0 ? fabs(raw - w->wss) / w->wss : 1;
	double rel = w->wss > 0 ? err / w->wss : 1;
	if (!w->pressure && drift * 100 <= w->cfg.stable_pct &&
	    rel * 100 <= w->cfg.stable_pct)
		w->stable_run++;
	else
		w->stable_run = 0;
	e->stable = w->stable_run >= w->cfg.stable_samples;

	/* A floor under the curve: no page kept is worth less than the
	 * pages out of memory that come back (comeback_rate). The max of a
	 * non-increasing curve and a constant is still non-increasing. */
	double cb = comeback_rate(w, s, dref, dt_s, e);
	e->comeback_nps = (int64_t)llround(cb * 1e9);
	e->comeback_value = e->comeback_nps > 0 ? value_of(cb, w->cost_ns) : 0;
	for (int i = 0; i < e->npoints; i++)
		if (e->curve[i].value < e->comeback_value)
			e->curve[i].value = e->comeback_value;

	e->dydx = e->resident > 0 ? wsest_value_at(e, e->resident - 1) : 0;
	if (s->probed > 0) {
		/* The probe took the coldest pages: each refault of the
		 * interval is one of them, or a working page it pushed out. */
		double r = refault_rate / (double)s->probed;
		w->probe_rate =
		    w->have_probe ? w->probe_rate + alpha * (r - w->probe_rate)
		                  : r;
		w->have_probe = 1;
		e->probed = s->probed;
	}
	if (w->have_probe) {
		e->probe_dydx = value_of(w->probe_rate, w->cost_ns);
		if (e->probe_dydx > e->dydx)
			e->dydx = e->probe_dydx;
	}
	e->dydx_above = e->dydx;
	if (e->comeback_value > e->dydx_above)
		e->dydx_above = e->comeback_value;
	if (def_mid >= 1) {
		/* Each missing page is needed (refault_rate / missing) times a
		 * second; one more page of memory saves that. */
		int64_t v = value_of(refault_rate / def_mid, w->cost_ns);
		if (v > e->dydx_above)
			e->dydx_above = v;
	}
	assert(e->npoints >= 1 && e->npoints <= WSEST_AGE_BUCKETS);
	assert(e->wss >= 0 && e->wss_err >= 0);
	w->prev = *s;
	return 0;
}

const char *wsest_source_name(enum wsest_source s)
{
	switch (s) {
	case WSEST_LRU:
		return "lru";
	case WSEST_IDLE:
		return "page_idle";
	case WSEST_MGLRU:
		return "mglru";
	case WSEST_NONE:
		break;
	}
	return "none";
}

int64_t wsest_value_at(const struct wsest_estimate *e, rx_pages x)
{
	int64_t v = 0;

	if (e->npoints == 0)
		return 0;
	if (x >= e->resident)
		return e->dydx_above;
	v = e->curve[0].value;
	for (int i = 1; i < e->npoints && e->curve[i].size <= x; i++)
		v = e->curve[i].value;
	return v;
}
