/* workload.c — the workload model and its kernel signals; see workload.h. */
#include "sim/workload.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#define DAY_S 86400.0

void wl_costs_default(struct wl_costs *c)
{
	memset(c, 0, sizeof *c);
	/* bench/50-lending.sh (bench/notes-lending.md): 4 KiB read p50,
	 * local file O_DIRECT 91 µs, NBD through the bridge to a lender
	 * 71 µs. */
	c->fault_local_s = 91e-6;
	c->fault_remote_s = 71e-6;
	c->window_s = 60;
	c->full_share = 0.5;
	c->idle_stride = 257; /* the agent's default idle_stride */
	c->source = WL_MGLRU; /* a stock kernel: Debian 12's 6.1 */
}

void wl_draw(struct wl_params *p, struct wl_state *s, struct rng *r,
             const struct wl_costs *c, rx_pages installed, double ratio,
             double phase_s, double dt_s)
{
	memset(p, 0, sizeof *p);
	memset(s, 0, sizeof *s);
	p->installed = installed;
	p->ws_mean = (double)installed / ratio;
	p->tail_frac = rng_range(r, 0.01, 0.03);
	p->cold_frac = rng_range(r, 0.1, 0.6);
	p->hot_rate = rng_logrange(r, 0.05, 1.0);
	p->cold_rate = 1.0 / (3 * DAY_S);
	p->amp = rng_range(r, 0.1, 0.4);
	p->phase_s = phase_s;
	p->burst_per_s = 1.0 / DAY_S;
	p->burst_mean_s = 1800;
	p->phase_per_s = 1.0 / (3 * DAY_S);

	p->rate[0] = p->hot_rate;
	for (int j = 0; j < WL_TAIL; j++)
		p->rate[1 + j] = p->hot_rate * exp(-(j + 0.5));
	p->rate[WL_CLASSES - 1] = p->cold_rate;
	/* The agent ages MGLRU's generations at its first sample half a
	 * window after the last walk (agent_sample.c, mglru_sample). */
	p->walk_s = ceil(c->window_s / 2 / dt_s) * dt_s;
	for (int i = 0; i < WL_CLASSES; i++) {
		p->walk_keep[i] = exp(-p->rate[i] * p->walk_s);
		double q = 1 - exp(-p->rate[i] * dt_s), stay = 1;
		for (int k = 0; k < WSEST_AGE_BUCKETS - 1; k++) {
			p->pk[i][k] = q * stay;
			stay *= 1 - q;
		}
		p->pk[i][WSEST_AGE_BUCKETS - 1] = stay;
		p->reuse[i] = q;
		p->active[i] = 1 - (1 - q) * (1 - q);
		p->in_ws[i] = 1 - exp(-p->rate[i] * c->window_s);
	}
	s->level = 1;
	s->since_walk = p->walk_s; /* the first sample walks */
	s->seq = 1;                /* lru_gen's first generation number */
	s->next_burst = rng_exp(r, 1 / p->burst_per_s);
	s->next_phase = rng_exp(r, 1 / p->phase_per_s);
}

void wl_at(const struct wl_params *p, struct wl_state *s, struct rng *r,
           double t, struct wl_now *now)
{
	while (t >= s->next_phase) {
		/* A new job mix: the level moves, within sane bounds. */
		s->level *= rng_logrange(r, 0.75, 1.33);
		if (s->level < 0.5)
			s->level = 0.5;
		if (s->level > 1.5)
			s->level = 1.5;
		s->next_phase += rng_exp(r, 1 / p->phase_per_s);
	}
	if (t >= s->burst_end)
		s->burst_pages = 0;
	while (t >= s->next_burst) {
		s->burst_pages = p->ws_mean * rng_range(r, 0.1, 0.5);
		s->burst_end = s->next_burst + rng_exp(r, p->burst_mean_s);
		s->next_burst += rng_exp(r, 1 / p->burst_per_s);
		if (t >= s->burst_end)
			s->burst_pages = 0;
	}
	double day = sin(2 * M_PI * (t - p->phase_s) / DAY_S);
	double h = p->ws_mean * s->level * (1 + p->amp * day) + s->burst_pages;
	double cold = p->ws_mean * p->cold_frac;
	/* Everything the workload holds fits the machine with 3 % to spare:
	 * the cold pages give way first, then the hot set. */
	double cap = 0.97 * (double)p->installed;
	double per_h = 1 + WL_TAIL * p->tail_frac;
	if (h * per_h + cold > cap)
		cold = cap - h * per_h > 0 ? cap - h * per_h : 0;
	if (h * per_h > cap)
		h = cap / per_h;
	now->size[0] = h;
	for (int j = 0; j < WL_TAIL; j++)
		now->size[1 + j] = h * p->tail_frac;
	now->size[WL_CLASSES - 1] = cold;
	now->footprint = h * per_h + cold;
	now->ws = 0;
	for (int i = 0; i < WL_CLASSES; i++)
		now->ws += now->size[i] * p->in_ws[i];
}

/* Irwin-Hall: the sum of four 16-bit uniforms from one draw, a cheap,
 * deterministic near-normal (mean 0, variance 1). */
static double noise(struct rng *r)
{
	uint64_t x = rng_next(r);
	double s = (double)(x & 0xffff) + (double)((x >> 16) & 0xffff) +
	           (double)((x >> 32) & 0xffff) + (double)(x >> 48);
	return (s / 65536.0 - 2) * 1.7320508075688772;
}

static int64_t clamp_count(double x, int64_t hi)
{
	if (x < 0.5)
		return 0;
	int64_t v = (int64_t)(x + 0.5);
	return v > hi ? hi : v;
}

void wl_gens(const struct wl_params *p, const double *res, double walk,
             double since, double fresh, struct wsest_gens *g)
{
	/* Per class, the independent reference model: a walk sees a page
	 * accessed with probability 1 − e^-λw. The youngest-but-one
	 * generation holds what the last walk saw, the next what the walk
	 * before saw and the last did not, the oldest what neither saw. */
	double gen[4] = {fresh, 0, 0, 0};
	for (int i = 0; i < WL_CLASSES; i++) {
		if (res[i] <= 0)
			continue;
		double keep = walk == p->walk_s ? p->walk_keep[i]
		                                : exp(-p->rate[i] * walk);
		gen[1] += res[i] * (1 - keep);
		gen[2] += res[i] * (1 - keep) * keep;
		gen[3] += res[i] * keep * keep;
	}
	/* The pages faulted in since the walk are in the youngest one: they
	 * took the place of pages evicted from the oldest (then the next). */
	for (int k = 3; k >= 1 && fresh > 0; k--) {
		double take = fmin(fresh, gen[k]);
		gen[k] -= take;
		fresh -= take;
	}
	gen[0] -= fresh;
	/* mglru_parse's bins: a generation's pages were last seen accessed
	 * between the next younger one's birth and its own; the oldest's
	 * range is open. Empty generations make no bin. */
	double born[4] = {since, since + walk, since + 2 * walk,
	                  since + 3 * walk};
	memset(g, 0, sizeof *g);
	for (int k = 0; k < 4; k++) {
		int64_t pages = (int64_t)llround(gen[k]);
		if (pages <= 0)
			continue;
		struct wsest_gen_bin *b = &g->bin[g->nbins++];
		b->idle_min_ms = k == 0 ? 0 : llround(born[k - 1] * 1000);
		b->idle_max_ms =
		    k == 3 ? WSEST_GEN_OPEN : llround(born[k] * 1000);
		b->pages = pages;
	}
	if (g->nbins == 0) {
		g->bin[0] = (struct wsest_gen_bin){0, WSEST_GEN_OPEN, 0};
		g->nbins = 1;
	}
	g->walk_age_ms = llround(since * 1000);
}

/* Resident pages a walk every w seconds leaves in the two oldest
 * generations, which reclaim may take: those not accessed within w. */
static double evictable(const struct wl_params *p, const double *res, double w)
{
	double n = 0;
	for (int i = 0; i < WL_CLASSES; i++)
		if (res[i] > 0)
			n += res[i] * (w == p->walk_s ? p->walk_keep[i]
			                              : exp(-p->rate[i] * w));
	return n;
}

double wl_walk_interval(const struct wl_params *p, const double *res,
                        double walk, double evict_ps)
{
	if (evict_ps * walk <= evictable(p, res, walk))
		return walk;
	/* The evictions of an interval grow with it, the pages idle that
	 * long shrink: they meet once. */
	double lo = 0, hi = walk;
	for (int it = 0; it < 40; it++) {
		double mid = (lo + hi) / 2;
		if (evict_ps * mid <= evictable(p, res, mid))
			lo = mid;
		else
			hi = mid;
	}
	return lo > 0.001 ? lo : 0.001;
}

void wl_step(const struct wl_params *p, struct wl_state *s, struct rng *r,
             const struct wl_costs *c, const struct wl_now *now, double mem,
             double remote, double dt_s, struct wl_step *out,
             struct wsest_sample *sample)
{
	double res[WL_CLASSES], out_rate[WL_CLASSES], start = 0, used = 0;
	double act = 0, f_local = 0, f_remote = 0;

	for (int i = 0; i < WL_CLASSES; i++) {
		double n = now->size[i], end = start + n;
		double in_mem = fmin(fmax(mem - start, 0), n);
		double in_far = fmin(fmax(mem + remote - start, 0), n) - in_mem;
		res[i] = in_mem;
		used += in_mem;
		act += in_mem * p->active[i];
		f_remote += in_far * p->rate[i];
		f_local += (n - in_mem - in_far) * p->rate[i];
		out_rate[i] = (n - in_mem) * p->rate[i];
		start = end;
	}
	double share =
	    f_local * c->fault_local_s + f_remote * c->fault_remote_s;
	double faults = f_local + f_remote;
	if (share > 1) {
		/* A workload stalled all the time makes fewer accesses. */
		faults /= share;
		share = 1;
	}
	out->stall_s = share * dt_s;
	out->faults = faults * dt_s;
	out->used = used;
	out->active = (rx_pages)llround(act);
	out->inactive = (rx_pages)llround(used) - out->active;
	if (out->inactive < 0)
		out->inactive = 0;

	/* Counters: PSI in µs; refaults whole, with the fraction carried. */
	uint64_t some = (uint64_t)llround(out->stall_s * 1e6);
	s->psi_some_us += some;
	s->psi_full_us += (uint64_t)llround((double)some * c->full_share);
	double rf = out->faults + s->frac_refault;
	uint64_t whole = (uint64_t)floor(rf);
	s->frac_refault = rf - (double)whole;
	s->majfaults += whole;
	double counted = out->faults, w = p->walk_s;
	if (c->source == WL_MGLRU) {
		/* Evictions make room for what faults in: when the two
		 * oldest generations do not hold them, the kernel ages the
		 * generations itself, more often than the agent does. */
		w = wl_walk_interval(p, res, p->walk_s, faults);
		double age = s->since_walk + dt_s, walks = 0;
		if (w < p->walk_s) {
			walks = dt_s / w;
			age = fmod(age, w);
		}
		if (age >= p->walk_s - 1e-9) {
			age = 0; /* the agent's walk at this sample */
			walks += 1;
		}
		s->since_walk = age;
		s->seq += walks;
		/* 6.1 counts a refault only while the generation its page
		 * was evicted from is still the oldest, a turn of w: a page
		 * evicted at a uniform time in it and out for Exp(λ) is
		 * counted with probability 1 − (1 − e^-λw)/(λw). */
		double all = 0, seen = 0;
		for (int i = 0; i < WL_CLASSES; i++) {
			double x = p->rate[i] * w;
			if (out_rate[i] <= 0 || x <= 0)
				continue;
			all += out_rate[i];
			seen += out_rate[i] *
			        (x < 1e-6 ? x / 2 : 1 - (1 - exp(-x)) / x);
		}
		counted = all > 0 ? out->faults * seen / all : 0;
	}
	double rc = counted + s->frac_counted;
	uint64_t cwhole = (uint64_t)floor(rc);
	s->frac_counted = rc - (double)cwhole;
	s->refaults += cwhole;

	if (!sample)
		return; /* no agent reads it: the counters are all */
	memset(sample, 0, sizeof *sample);
	sample->psi_some_us = s->psi_some_us;
	sample->psi_full_us = s->psi_full_us;
	sample->refaults = s->refaults;
	sample->majfaults = s->majfaults;
	/* Every page of the workload not in local memory was written out
	 * (to local storage, or to a lender's memory behind the same swap
	 * device): what meminfo's swap figures show, and each of its
	 * faults above is one of these coming back. */
	sample->swapped = (rx_pages)llround(now->footprint - used);
	sample->active = out->active;
	sample->inactive = out->inactive;

	if (c->source == WL_MGLRU) {
		wl_gens(p, res, w, s->since_walk,
		        fmin(faults * s->since_walk, used), &sample->gens);
		sample->gens.min_seq_sum = (uint64_t)s->seq;
		sample->has_gens = 1;
		return;
	}

	/* page_idle: every stride-th resident page, aged in scans of dt. */
	rx_pages pop = out->active + out->inactive;
	int64_t sampled = pop / c->idle_stride;
	if (sampled < 64) {
		s->have_prev = 0;
		return; /* too few pages to sample: LRU sizes only */
	}
	double e[WSEST_AGE_BUCKETS] = {0}, ru[WSEST_AGE_BUCKETS] = {0};
	for (int i = 0; i < WL_CLASSES; i++) {
		if (res[i] <= 0)
			continue;
		for (int k = 0; k < WSEST_AGE_BUCKETS; k++) {
			double n = res[i] * p->pk[i][k];
			e[k] += n;
			ru[k] += n * p->reuse[i];
		}
	}
	struct wsest_idle *id = &sample->idle;
	int64_t sum = 0;
	int big = 0;
	for (int k = 0; k < WSEST_AGE_BUCKETS; k++) {
		double pr = used > 0 ? e[k] / used : 0;
		double mu = pr * (double)sampled;
		double sd = sqrt(mu * (1 - pr));
		id->age[k] = clamp_count(mu + sd * noise(r), sampled);
		sum += id->age[k];
		if (id->age[k] > id->age[big])
			big = k;
	}
	/* The multinomial's sum is exact: the largest bucket absorbs the
	 * rounding (it is far larger than the correction). */
	id->age[big] += sampled - sum;
	if (id->age[big] < 0) {
		memset(id->age, 0, sizeof id->age);
		id->age[WSEST_AGE_BUCKETS - 1] = sampled;
	}
	for (int k = 0; k < WSEST_AGE_BUCKETS; k++) {
		int64_t before = s->have_prev ? s->prev_age[k] : id->age[k];
		double q = e[k] > 0 ? ru[k] / e[k] : 0;
		double mu = (double)before * q;
		double sd = sqrt(mu * (1 - q));
		id->reuse[k] = clamp_count(mu + sd * noise(r), before);
	}
	id->sampled = sampled;
	id->population = pop;
	sample->has_idle = 1;
	memcpy(s->prev_age, id->age, sizeof s->prev_age);
	s->have_prev = 1;
}

void wl_oracle(const struct wl_params *p, const struct wl_costs *c,
               const struct wl_now *now, const struct wl_step *st, double mem,
               double dt_s, int64_t pressure_ppm, struct wsest_estimate *e)
{
	double start = 0, missing = 0;
	int n = 0;

	memset(e, 0, sizeof *e);
	e->source = WSEST_IDLE;
	e->wss = (rx_pages)llround(now->ws);
	e->resident = (rx_pages)llround(st->used);
	for (int i = 0; i < WL_CLASSES && n < WSEST_AGE_BUCKETS; i++) {
		if (now->size[i] <= 0)
			continue;
		double v = p->rate[i] * (double)RX_SECONDS_PER_YEAR *
		           c->fault_local_s * 1e6;
		if (start < mem) {
			e->curve[n].size = (rx_pages)llround(start);
			e->curve[n].value = (int64_t)llround(v);
			n++;
		} else if (e->dydx_above == 0) {
			e->dydx_above = (int64_t)llround(v);
		}
		double over = start + now->size[i] - mem;
		if (over > 0)
			missing += fmin(over, now->size[i]) * p->in_ws[i];
		start += now->size[i];
	}
	if (n == 0) {
		e->curve[0].size = 0;
		e->curve[0].value = 0;
		n = 1;
	}
	e->npoints = n;
	e->deficit = (rx_pages)llround(missing);
	e->stall_ppm = (int64_t)llround(st->stall_s / dt_s * 1e6);
	e->fault_cost_ns = (int64_t)llround(c->fault_local_s * 1e9);
	e->refault_mps = (int64_t)llround(st->faults / dt_s * 1000);
	e->dydx = e->resident > 0 ? wsest_value_at(e, e->resident - 1) : 0;
	if (e->dydx_above < e->dydx)
		e->dydx_above = e->dydx;
	e->pressure = e->stall_ppm >= pressure_ppm;
	e->stable = 1;
}
