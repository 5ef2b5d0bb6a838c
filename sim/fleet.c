/* fleet.c — the fleet engine; see fleet.h and docs/economics.md. The
 * simulated exchange is exchange.c's; the state both share, engine.h's. */
#include "sim/fleet.h"

#include "sim/engine.h"
#include "sim/exchange.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fleet_config_default(struct fleet_config *c)
{
	memset(c, 0, sizeof *c);
	c->machines = 1000;
	c->days = 7;
	c->seed = 1;
	c->dt_s = 30;
	c->policy = FLEET_MARKET;
	c->threads = 2;
	wl_costs_default(&c->costs);
	/* bench/30-kmod.sh (qemu TCG): 569 747 pages/s offline, 1 461 478
	 * online. bench/50-lending.sh: local O_DIRECT write 22 MiB/s (one
	 * request at a time); NBD through the bridge, streaming with 8
	 * requests in flight as the kernel's nbd driver keeps them, write
	 * 1 956 MiB/s and read 619 MiB/s (bench/notes-lending.md, the whole
	 * run after batching). 1 MiB = 256 pages. */
	c->rates.offline = 569747;
	c->rates.online = 1461478;
	c->rates.swap_write = 22 * 256;
	c->rates.lend_write = 1956 * 256;
	c->rates.lend_read = 619 * 256;
	c->tmo_target = 0.0005;
	c->tick = 1000;
	c->lot = 256;
	c->max_order = 1048576;
	c->notice_s = 3600;
	c->delivery_s = 600;
	c->fee_bps = 100;
	c->operator_price = 100000;
	c->report_s = 3600;
	strategy_config_default(&c->strat);
	c->strat.tick = c->tick;
	c->strat.lot = c->lot;
	c->strat.max_order = c->max_order;
	c->strat.perm_market[0] = 0; /* spot only: see docs/economics.md */
	c->strat.min_offer = 65536;  /* 256 MiB: data-center machines */
	c->chart_s = 600;
	c->stall_value_per_gib = 20000;
	c->pressure_ppm = 5000;
}

void fleet_cost_estimate(const struct fleet_config *c, const int *policies,
                         int npolicies, struct fleet_cost *out)
{
	/* Measured with --threads 1 (sim/README.md, "What a run costs"),
	 * rounded up: CPU seconds a machine-day at the 30 s step, bytes a
	 * machine (its workload, estimator, strategy's state, the book's
	 * share) and a machine-day (the contracts, kept to the end for the
	 * figures: about one a machine every 6 h under market, 4 h under
	 * oracle), at 10 000 machines: smaller fleets cost less a
	 * machine-day, their state fitting better in the caches. */
	static const struct {
		double cpu_md, per_machine, per_md;
	} k[FLEET_NPOLICIES] = {
	    [FLEET_STATIC] = {0.0015, 6e3, 0},
	    [FLEET_TMO] = {0.0018, 6e3, 0},
	    [FLEET_MARKET] = {0.0095, 30e3, 16e3},
	    [FLEET_ORACLE] = {0.0075, 16e3, 24e3},
	};
	double md = c->machines * c->days;
	double steps = 30.0 / (double)(c->dt_s > 0 ? c->dt_s : 30);
	memset(out, 0, sizeof *out);
	for (int i = 0; i < npolicies; i++) {
		int p = policies[i];
		if (p < 0 || p >= FLEET_NPOLICIES)
			continue;
		double bytes =
		    4e6 + k[p].per_machine * c->machines + k[p].per_md * md;
		out->cpu_s += k[p].cpu_md * md * steps;
		if (bytes > out->peak_bytes)
			out->peak_bytes = bytes;
	}
}

const char *fleet_policy_name(enum fleet_policy p)
{
	static const char *n[] = {"static", "tmo", "market", "oracle"};
	return p < FLEET_NPOLICIES ? n[p] : "?";
}

int fleet_policy_parse(const char *s)
{
	for (int p = 0; p < FLEET_NPOLICIES; p++)
		if (!strcmp(s, fleet_policy_name(p)))
			return p;
	return -1;
}

/* ---- the agents' side: moving pages ---- */

static rx_pages take(double *budget, rx_pages want, double rate)
{
	rx_pages n = (rx_pages)floor(*budget * rate);
	if (n > want)
		n = want;
	if (n < 0)
		n = 0;
	*budget -= (double)n / rate;
	return n;
}

static void moved(struct fleet *f, rx_pages n)
{
	f->r->pages_moved += (double)n;
}

/* One step of a machine's two movers: kmod (out and back, its own pages)
 * and the lending link (its data to lenders and back). */
static void move_machine(struct fleet *f, struct fl_machine *m, double dt)
{
	const struct fleet_rates *rt = &f->c->rates;
	double kb = dt, lb = dt;
	rx_time_ns t0 = f->now;
	int w = 0;

	/* m->mv, not every contract of m: the others have nothing to move,
	 * and looking at them all was a third of the market's CPU. */
	for (int i = 0; i < m->nmv; i++) {
		struct fl_contract *x = &f->k[m->mv[i]];
		if (x->seller == m->idx && (x->todo_back || x->todo_out))
			sx_accrue(x, t0);
		if (x->seller == m->idx) {
			if (x->todo_back > 0) {
				rx_pages n =
				    take(&kb, x->todo_back, rt->online);
				x->todo_back -= n, x->placed -= n;
				m->resident += n;
				if (x->k.delivery == CONTRACT_LEND)
					m->lent -= n;
				else
					m->offline -= n;
				moved(f, n);
			}
			if (x->todo_out > 0) {
				/* Free pages go at the module's rate; pages
				 * that hold data are written out first. */
				rx_pages avail = m->resident;
				rx_pages free =
				    avail - (rx_pages)llround(m->st.used);
				if (free < 0)
					free = 0;
				rx_pages n = take(
				    &kb,
				    x->todo_out < free ? x->todo_out : free,
				    rt->offline);
				rx_pages d =
				    take(&kb, x->todo_out - n, rt->swap_write);
				if (n + d > avail)
					d = avail - n > 0 ? avail - n : 0;
				x->todo_out -= n + d, x->placed += n + d;
				m->resident -= n + d;
				if (x->k.delivery == CONTRACT_LEND)
					m->lent += n + d;
				else
					m->offline += n + d;
				moved(f, n + d);
				if (x->todo_out == 0 &&
				    x->k.state == CONTRACT_PENDING_DELIVERY) {
					rx_time_ns at =
					    t0 + (rx_time_ns)((dt - kb) * 1e9);
					if (at <= x->k.changed_at)
						at = x->k.changed_at + 1;
					if (sx_apply(
					        f, x, CONTRACT_EV_DELIVERED,
					        CONTRACT_BY_SELLER, at) < 0)
						f->r->bad_core++;
					if (x->k.delivery == CONTRACT_LEND) {
						x->todo_in = x->k.pages;
						sx_moving(f, &f->m[x->buyer],
						          x);
					} else
						x->moved_at = at;
				}
			}
		}
		if (x->buyer == m->idx) {
			if (x->todo_in > 0) {
				rx_pages n =
				    take(&lb, x->todo_in, rt->lend_write);
				x->todo_in -= n, x->data_in += n;
				m->borrowed += n;
				moved(f, n);
				if (x->todo_in == 0)
					x->moved_at =
					    t0 + (rx_time_ns)((dt - lb) * 1e9);
			}
			if (x->todo_away > 0) {
				rx_pages n =
				    take(&lb, x->todo_away, rt->lend_read);
				x->todo_away -= n, x->data_in -= n;
				m->borrowed -= n;
				moved(f, n);
			}
		}
		if ((x->seller == m->idx && (x->todo_back || x->todo_out)) ||
		    (x->buyer == m->idx && (x->todo_in || x->todo_away)))
			m->mv[w++] = m->mv[i];
	}
	m->nmv = w;
}

/* The live contracts of m as its strategy sees them. */
static void list_contracts(struct fleet *f, struct fl_machine *m)
{
	int nk = 0;

	if (m->capsk < m->nks) {
		m->capsk = m->nks;
		m->sk = realloc(m->sk, (size_t)m->capsk * sizeof *m->sk);
		if (!m->sk)
			abort();
	}
	int w = 0;
	for (int i = 0; i < m->nks; i++) {
		struct fl_contract *x = &f->k[m->ks[i]];
		if (!x->closed) /* closed: over, and nothing to move */
			m->ks[w++] = m->ks[i];
		if (x->k.state != CONTRACT_PENDING_DELIVERY &&
		    x->k.state != CONTRACT_ACTIVE)
			continue;
		int sell = x->seller == m->idx && !x->recalled;
		int buy = x->buyer == m->idx && !x->released;
		if (!sell && !buy)
			continue;
		m->sk[nk++] = (struct strategy_contract){
		    (uint64_t)x->k.id, STRATEGY_SPOT,
		    sell ? STRATEGY_SELL : STRATEGY_BUY, x->k.pages};
	}
	m->nks = w;
	m->nsk = nk;
}

static void decide(struct fleet *f, struct fl_machine *m,
                   const struct wsest_estimate *e)
{
	struct strategy_action *acts = f->acts;
	struct strategy_view v;
	const char *why;

	if (m->dirty) {
		list_contracts(f, m);
		m->dirty = 0;
	}
	struct strategy_input in = {.est = e,
	                            .total = m->installed,
	                            .quotes = m->quotes,
	                            .nquotes = m->nquotes,
	                            .contracts = m->sk,
	                            .ncontracts = m->nsk};
	rx_pages p;
	if (!book_best_bid(f->book, &in.top[STRATEGY_SPOT].best_bid, &p))
		in.top[STRATEGY_SPOT].best_bid = 0;
	if (!book_best_ask(f->book, &in.top[STRATEGY_SPOT].best_ask, &p))
		in.top[STRATEGY_SPOT].best_ask = 0;
	struct strategy_config sc = f->c->strat;
	if (f->c->stall_value_per_gib > 0)
		sc.stall_value =
		    f->c->stall_value_per_gib * (m->installed / 262144);
	int n = strategy_decide(&sc, &in, acts, &v, &why);
	if (n < 0) {
		f->r->bad_core++;
		return;
	}
	double truth = m->now.ws;
	f->r->decisions++;
	f->r->above += (double)(m->resident + m->borrowed) - truth;
	f->r->bias += (double)e->wss - truth;
	f->r->err += (double)e->wss_err;
	f->r->margin += (double)(v.need - e->wss - e->wss_err);
	f->r->valued += (double)v.valued;
	for (int i = 0; i < n; i++) {
		const struct strategy_action *a = &acts[i];
		struct fl_contract *x;
		switch (a->kind) {
		case STRATEGY_CANCEL:
			sx_cancel(f, a->id);
			break;
		case STRATEGY_PLACE:
			if (a->product != STRATEGY_SPOT)
				break;
			sx_place(f, m->account,
			         a->side == STRATEGY_BUY ? BOOK_BUY : BOOK_SELL,
			         a->tif == STRATEGY_IOC ? BOOK_IOC : BOOK_GTC,
			         a->pages, a->price);
			break;
		case STRATEGY_RECALL:
			/* Whole contracts, as the agent does: pages first,
			 * then the exchange. */
			x = sx_find_contract(f, a->id);
			if (!x || x->recalled || x->seller != m->idx)
				break;
			if (sx_apply(f, x, CONTRACT_EV_RECALL,
			             CONTRACT_BY_SELLER, f->now) < 0)
				break;
			x->recalled = 1;
			m->dirty = 1;
			f->r->recalls++;
			if (x->k.delivery == CONTRACT_LEND) {
				sx_vacate(f, x);
			} else {
				x->todo_back += x->placed;
				x->todo_out = 0;
				sx_moving(f, m, x);
				sx_watch(f, x);
			}
			break;
		case STRATEGY_RELEASE:
			x = sx_find_contract(f, a->id);
			if (!x || x->released || x->buyer != m->idx)
				break;
			x->released = 1;
			m->dirty = 1;
			f->r->releases++;
			sx_vacate(f, x);
			if (x->k.state == CONTRACT_PENDING_DELIVERY &&
			    sx_apply(f, x, CONTRACT_EV_BUYER_END,
			             CONTRACT_BY_BUYER, f->now) == 0) {
				/* Nothing moved in yet: it ends now, and the
				 * seller stops delivering and takes back what
				 * it placed, as its agent does with a contract
				 * no longer pending or active. (It went on
				 * delivering pages nobody would bring back:
				 * a 16 GiB seller of the 10 000-machine fleet
				 * lost 4.5 GiB so and stalled 16.5 % of the
				 * week, borrowing 180 GiB.) */
				sx_end(f, x);
			}
			break;
		}
	}
}

/* ---- the step ---- */

struct sense_job {
	struct fleet *f;
	int from, to;
	double t_s;
};

static void sense_one(struct fleet *f, struct fl_machine *m, double t_s)
{
	const struct fleet_config *c = f->c;
	double dt = (double)c->dt_s;

	wl_at(&m->wp, &m->ws, &m->rng, t_s, &m->now);
	double mem = (double)m->resident;
	wl_step(&m->wp, &m->ws, &m->noise, &c->costs, &m->now, mem,
	        (double)m->borrowed, dt, &m->st,
	        c->policy == FLEET_MARKET ? &m->sample : NULL);
	m->sample.t = f->now;
	m->stall_s += m->st.stall_s;
	if (c->policy == FLEET_MARKET) {
		struct wsest_estimate e;
		const char *why;
		if (wsest_update(m->est, &m->sample, &e, &why) == 0)
			m->e = e;
	} else if (c->policy == FLEET_ORACLE) {
		wl_oracle(&m->wp, &c->costs, &m->now, &m->st, mem, dt,
		          c->pressure_ppm > 0 ? c->pressure_ppm : 100000,
		          &m->e);
	}
}

static void *sense_thread(void *arg)
{
	struct sense_job *j = arg;
	for (int i = j->from; i < j->to; i++)
		sense_one(j->f, &j->f->m[i], j->t_s);
	return NULL;
}

static void sense_all(struct fleet *f, double t_s)
{
	int th = f->c->threads < 1    ? 1
	         : f->c->threads > 64 ? 64
	                              : f->c->threads;
	struct sense_job j[64];
	pthread_t tid[64];
	int started = 0;

	for (int i = 0; i < th; i++)
		j[i] = (struct sense_job){f, f->n * i / th, f->n * (i + 1) / th,
		                          t_s};
	for (int i = 1; i < th; i++)
		if (pthread_create(&tid[i], NULL, sense_thread, &j[i]) == 0)
			started |= 1 << (i & 31);
		else
			sense_thread(&j[i]);
	sense_thread(&j[0]);
	for (int i = 1; i < th; i++)
		if (started & (1 << (i & 31)))
			pthread_join(tid[i], NULL);
}

/* tmo: Senpai's loop, one machine alone: lower the limit while PSI stays
 * under the target, let refaults raise it again when it does not. */
static void tmo_one(struct fleet *f, struct fl_machine *m)
{
	double dt = (double)f->c->dt_s;
	double share = m->st.stall_s / dt;
	double target = f->c->tmo_target;
	rx_pages lim = m->limit;

	if (share < target) {
		double cut = (double)lim * 0.0005 * dt * (1 - share / target);
		lim -= (rx_pages)cut;
	} else {
		lim += (rx_pages)llround(m->st.faults) + m->installed / 100;
	}
	rx_pages floor_ = (rx_pages)llround(m->st.used * 0.0);
	if (lim < floor_)
		lim = floor_;
	if (lim > m->installed)
		lim = m->installed;
	lim = lim / f->c->lot * f->c->lot;
	m->limit = lim;
	/* What it frees could go offline; nobody pays for it. */
	rx_pages off = m->installed - lim;
	f->r->pages_moved += (double)llabs(off - m->offline);
	m->resident += m->offline - off;
	m->offline = off;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, int n, double p)
{
	if (n == 0)
		return 0;
	int i = (int)floor(p * (n - 1) + 0.5);
	return v[i];
}

static int check_machines(struct fleet *f)
{
	int bad = 0;
	for (int i = 0; i < f->n; i++) {
		struct fl_machine *m = &f->m[i];
		rx_pages resident = m->resident;
		if (f->c->probe)
			f->c->probe(
			    f->c->probe_ctx,
			    &(struct fleet_probe){
			        (double)(f->now - T0_NS) / NS + f->c->dt_s, i,
			        m->installed, m->resident, m->offline, m->lent,
			        m->borrowed});
		if (resident < 0 || m->offline < 0 || m->lent < 0 ||
		    resident + m->offline + m->lent != m->installed ||
		    m->borrowed < 0)
			bad++;
		if (f->c->policy == FLEET_STATIC &&
		    (m->offline != 0 || m->lent != 0))
			bad++;
	}
	return bad;
}

int fleet_run(const struct fleet_config *c, struct fleet_result *r, char *err,
              size_t errlen)
{
	struct fleet F, *f = &F;
	static const int gib[] = {16, 32, 64, 128, 256, 512, 1024};
	static const int weight[] = {20, 25, 20, 15, 10, 6, 4};
	const char *why;
	int rc = -1;

	memset(r, 0, sizeof *r);
	memset(f, 0, sizeof *f);
	if (c->machines < 1 || c->first < 0 || !(c->days > 0) || c->dt_s < 1 ||
	    c->lot < 1 || c->max_order < c->lot || 3600 % c->dt_s != 0 ||
	    c->report_s % c->dt_s != 0) {
		snprintf(err, errlen,
		         "machines, days and the lot must be positive, the "
		         "first machine not negative, the "
		         "largest order at least a lot, and the step must "
		         "divide an hour and the report interval");
		return -1;
	}
	if ((why = strategy_config_check(&c->strat))) {
		snprintf(err, errlen, "strategy: %s", why);
		return -1;
	}
	f->c = c;
	f->r = r;
	f->n = c->machines;
	r->policy = c->policy;
	r->machines = c->machines;
	r->days = c->days;
	f->m = calloc((size_t)f->n, sizeof *f->m);
	f->capev = (int)(c->max_order / c->lot) + 8;
	f->ev = calloc((size_t)f->capev, sizeof *f->ev);
	f->acts = calloc(STRATEGY_MAX_ACTIONS, sizeof *f->acts);
	struct book_params bp = {.tick = c->tick,
	                         .lot = c->lot,
	                         .min_pages = c->lot,
	                         .max_pages = c->max_order,
	                         .price_min = 0,
	                         .price_max = 1000 * c->tick * 1000,
	                         .capacity = (uint32_t)(f->n * 4 + 8192)};
	char berr[160];
	f->book = book_new(&bp, berr, sizeof berr);
	if (!f->m || !f->ev || !f->acts || !f->book) {
		snprintf(err, errlen, "cannot set up the fleet: %s",
		         f->book ? "out of memory" : berr);
		goto out;
	}
	f->market = (struct contract_market){
	    .market_id = 1,
	    .product = CONTRACT_SPOT,
	    .delivery_window = c->delivery_s * NS,
	    .recall_notice = c->notice_s * NS,
	};
	f->op_want = f->n / 4 > 16 ? f->n / 4 : 16;
	if (f->op_want > 4000)
		f->op_want = 4000;
	invoice_ledger_init(&f->ledger);

	/* The fleet: sizes, ratios, and diurnal groups that peak together. */
	struct rng g;
	rng_seed(&g, c->seed, 0);
	double group_phase[8];
	group_phase[0] = 14 * 3600.0; /* most machines: the business day */
	for (int i = 1; i < 8; i++)
		group_phase[i] = rng_range(&g, 0, 86400);
	struct wsest_config wc;
	wsest_config_default(&wc);
	if (c->pressure_ppm > 0) {
		wc.pressure_ppm = c->pressure_ppm;
		wc.unpressure_ppm = c->pressure_ppm / 5;
	}
	for (int i = 0; i < f->n; i++) {
		struct fl_machine *m = &f->m[i];
		m->idx = i;
		m->account = ACCT_NODE0 + i;
		uint64_t id = (uint64_t)c->first + (uint64_t)i;
		rng_seed(&m->rng, c->seed, id + 1);
		rng_seed(&m->noise, c->seed ^ UINT64_C(0x5eed5eed5eed5eed),
		         id + 1);
		int w = (int)(rng_unit(&m->rng) * 100), s = 0;
		while (s < 6 && w >= weight[s])
			w -= weight[s++];
		m->installed = (rx_pages)gib[s] * 262144;
		double ratio = rng_logrange(&m->rng, 2, 10);
		int grp = rng_unit(&m->rng) < 0.5
		              ? 0
		              : 1 + (int)(rng_unit(&m->rng) * 7);
		double ph = group_phase[grp] + rng_range(&m->rng, -3600, 3600);
		wl_draw(&m->wp, &m->ws, &m->rng, &c->costs, m->installed, ratio,
		        ph, (double)c->dt_s);
		m->limit = m->installed;
		m->resident = m->installed;
		m->dirty = 1;
		if (c->policy == FLEET_MARKET) {
			m->est = wsest_new(&wc, &why);
			if (!m->est) {
				snprintf(err, errlen, "wsest: %s", why);
				goto out;
			}
		}
	}

	int64_t steps = (int64_t)llround(c->days * 86400 / (double)c->dt_s);
	int64_t every = c->chart_s / c->dt_s > 0 ? c->chart_s / c->dt_s : 1;
	r->timeline = calloc((size_t)(steps / every + 2), sizeof *r->timeline);
	size_t dcap = 1024;
	f->dur = malloc(dcap * sizeof *f->dur);
	f->mv = malloc(dcap * sizeof *f->mv);
	if (!r->timeline || !f->dur || !f->mv) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	double dt = (double)c->dt_s;
	for (int64_t step = 0; step < steps; step++) {
		rx_time_ns t = T0_NS + step * c->dt_s * NS;
		rx_time_ns t1 = t + c->dt_s * NS;
		f->now = t;
		/* What each machine's workload did in the last interval, and
		 * what its agent makes of it. */
		sense_all(f, (double)step * dt);
		if ((size_t)f->nk + 1 > dcap) {
			dcap = (size_t)f->nk * 2 + 1;
			f->dur = realloc(f->dur, dcap * sizeof *f->dur);
			f->mv = realloc(f->mv, dcap * sizeof *f->mv);
			if (!f->dur || !f->mv)
				abort();
		}
		sx_deadlines(f, t);
		if (c->policy == FLEET_TMO) {
			for (int i = 0; i < f->n; i++)
				tmo_one(f, &f->m[i]);
		} else if (c->policy == FLEET_MARKET ||
		           c->policy == FLEET_ORACLE) {
			sx_operator_bids(f);
			/* A different agent goes first each step. */
			int first = (int)(step % f->n);
			for (int j = 0; j < f->n; j++) {
				struct fl_machine *m =
				    &f->m[(first + j) % f->n];
				if (m->e.source != WSEST_NONE)
					decide(f, m, &m->e);
			}
			for (int i = 0; i < f->n; i++)
				move_machine(f, &f->m[i], dt);
			if ((step + 1) % (c->report_s / c->dt_s) == 0)
				sx_compact_live(f);
			if ((step + 1) % (c->report_s / c->dt_s) == 0)
				for (int i = 0; i < f->nlive; i++) {
					struct fl_contract *x =
					    &f->k[f->live[i]];
					if (!x->closed &&
					    x->k.state != CONTRACT_ENDED &&
					    x->k.state != CONTRACT_BREACHED)
						sx_report(f, x, t1);
				}
		}
		r->bad_balance += check_machines(f);

		/* The figures of the interval just simulated. */
		double ws = 0, used = 0, inst = 0, off = 0, lent = 0;
		for (int i = 0; i < f->n; i++) {
			struct fl_machine *m = &f->m[i];
			ws += m->now.ws;
			used += m->st.used;
			inst += (double)m->installed;
			off += (double)m->offline;
			lent += (double)m->lent;
		}
		r->installed_ps += inst * dt;
		r->offline_ps += off * dt;
		r->lent_ps += lent * dt;
		r->ws_ps += ws * dt;
		r->idle_ps += (inst - ws) * dt;
		r->machine_s += f->n * dt;
		if (step % every == 0) {
			r->timeline[r->npoints++] = (struct fleet_point){
			    (double)step * dt, inst, ws, used, off, lent};
		}
		if (c->progress && (step + 1) % (3600 / c->dt_s) == 0)
			c->progress(c->progress_ctx,
			            (double)(step + 1) / (double)steps);
	}
	/* The end: every live contract reports what it delivered. */
	f->now = T0_NS + steps * c->dt_s * NS;
	for (int i = 0; i < f->nk; i++) {
		struct fl_contract *x = &f->k[i];
		if (x->closed)
			continue;
		rx_time_ns end = x->k.ended_at ? x->k.ended_at : f->now;
		sx_report(f, x, end);
		if (x->ps_reported != x->ps)
			r->bad_billing++;
		if (x->k.delivered_at) {
			f->dur[f->ndur] =
			    (double)(end - x->k.delivered_at) / 1e9;
			f->mv[f->ndur++] =
			    x->moved_at
			        ? (double)(x->moved_at - x->k.created) / 1e9
			        : (double)(end - x->k.created) / 1e9;
		}
	}
	for (int i = 0; i < f->nk; i++)
		if (f->k[i].ic.billed_ps != f->k[i].ps)
			r->bad_billing++;
	if (invoice_ledger_finish(&f->ledger, berr, sizeof berr) < 0)
		r->bad_balance++;

	for (int i = 0; i < f->n; i++) {
		double sh = f->m[i].stall_s / (steps * dt);
		r->stall_s += f->m[i].stall_s;
		if (sh > r->worst_stall_share) {
			r->worst_stall_share = sh;
			r->worst_machine = c->first + i;
		}
	}
	/* Durations against moving times. */
	double *ratio = malloc(((size_t)f->ndur + 1) * sizeof *ratio);
	if (!ratio)
		abort();
	for (int i = 0; i < f->ndur; i++)
		ratio[i] =
		    f->dur[i] / (f->mv[i] > dt / 10 ? f->mv[i] : dt / 10);
	qsort(f->dur, (size_t)f->ndur, sizeof *f->dur, cmp_double);
	qsort(f->mv, (size_t)f->ndur, sizeof *f->mv, cmp_double);
	qsort(ratio, (size_t)f->ndur, sizeof *ratio, cmp_double);
	r->dur_median_s = pct(f->dur, f->ndur, 0.5);
	r->dur_p10_s = pct(f->dur, f->ndur, 0.1);
	r->move_median_s = pct(f->mv, f->ndur, 0.5);
	r->ratio_median = pct(ratio, f->ndur, 0.5);
	r->ratio_p10 = pct(ratio, f->ndur, 0.1);
	free(ratio);
	rc = 0;
out:
	for (int i = 0; f->m && i < f->n; i++) {
		wsest_free(f->m[i].est);
		free(f->m[i].ks);
		free(f->m[i].mv);
		free(f->m[i].sk);
	}
	free(f->m);
	free(f->ev);
	free(f->acts);
	free(f->k);
	free(f->live);
	free(f->watch);
	free(f->dur);
	free(f->mv);
	if (f->book)
		book_free(f->book);
	return rc;
}

void fleet_result_free(struct fleet_result *r)
{
	free(r->timeline);
	r->timeline = NULL;
}
