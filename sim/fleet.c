/* fleet.c — the fleet engine; see fleet.h and docs/economics.md. */
#include "sim/fleet.h"

#include "common/money.h"
#include "exchange/core/book.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"
#include "node-agent/core/wsest.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS            INT64_C(1000000000)
#define ACCT_OPERATOR 1
#define ACCT_EXCHANGE 2
#define ACCT_NODE0    100
#define GRACE_NS      (INT64_C(3) * 86400 * NS)
/* 2027-01-04 00:00:00 UTC, a Monday: the simulated week starts there. */
#define T0_NS (INT64_C(1798934400) * NS)

/* ---- contracts as the exchange and the two agents see them ---- */

struct fl_contract {
	struct contract k;
	int seller, buyer; /* machine index; buyer -1: the operator */
	rx_pages placed;   /* the seller's pages out for it now */
	rx_pages todo_out; /* still to take out (delivery) */
	rx_pages todo_back; /* still to bring back (after its end) */
	rx_pages data_in;   /* lend: the buyer's pages on the lender */
	rx_pages todo_in, todo_away; /* lend: to move there, and back */
	int recalled, released, closed, watched;
	rx_time_ns moved_at; /* all moved: delivered (and moved in) */
	/* metering and billing */
	rx_pagesec ps, ps_reported;
	rx_time_ns metered_to; /* ps counts the delivery up to here */
	rx_time_ns reported_to;
	int64_t seq;
	int month_y, month_m;
	rx_pagesec month_ps, month_billed;
	struct invoice_contract ic;
};

struct fl_machine {
	int idx;
	int64_t account;
	/* Two streams: the workload's (the same under every policy, so all
	 * policies see the same fleet) and the kernel's sampling noise. */
	struct rng rng, noise;
	struct wl_params wp;
	struct wl_state ws;
	struct wl_now now;
	struct wl_step st;
	struct wsest_sample sample;
	struct wsest *est;
	struct wsest_estimate e;
	/* resident: pages the machine's workload can use; the movers keep
	 * it apart from offline and lent, so the sum is a check. */
	rx_pages installed, resident, offline, lent;
	rx_pages borrowed;
	rx_pages limit; /* tmo: what the workload may hold */
	double stall_s;
	struct strategy_quote quotes[STRATEGY_MAX_QUOTES];
	int nquotes;
	int *ks; /* contract indices where it is a party, oldest first */
	int nks, capks;
	int64_t report_seq;
	int moves; /* some contract of its has pages to move */
	/* The contracts as the strategy sees them, rebuilt when one of them
	 * changes (dirty), not every step. */
	struct strategy_contract *sk;
	int nsk, capsk, dirty;
};

struct fleet {
	const struct fleet_config *c;
	struct fleet_result *r;
	struct fl_machine *m;
	int n;
	struct book *book;
	uint64_t next_order;
	struct fl_contract *k;
	int nk, capk;
	int *live; /* contracts not yet closed, oldest first */
	int nlive, caplive;
	int *watch; /* contracts with a deadline or an end to see to */
	int nwatch, capwatch;
	struct strategy_quote opq[4096];
	int nop, op_want;
	struct contract_market market;
	struct invoice_ledger ledger;
	int64_t movement_id;
	/* the events of the command being applied: a trade is at least a
	 * lot, so at most one a lot of the largest order, and a few more */
	struct book_event *ev;
	int nev, capev;
	rx_time_ns now;
	double *dur, *mv;
	int ndur;
};

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
	 * online. bench/50-lending.sh: local O_DIRECT write 22 MiB/s, NBD
	 * write 35 MiB/s and read 29 MiB/s. 1 MiB = 256 pages. */
	c->rates.offline = 569747;
	c->rates.online = 1461478;
	c->rates.swap_write = 22 * 256;
	c->rates.lend_write = 35 * 256;
	c->rates.lend_read = 29 * 256;
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

/* ---- calendar: the invoice month of an instant ---- */

static void month_of(rx_time_ns t, int *y, int *m)
{
	/* Howard Hinnant's civil_from_days. */
	int64_t z = t / NS / 86400 + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t mm = mp < 10 ? mp + 3 : mp - 9;
	*y = (int)(yoe + era * 400 + (mm <= 2));
	*m = (int)mm;
}

/* ---- the exchange ---- */

static void on_event(void *ctx, const struct book_event *ev)
{
	struct fleet *f = ctx;
	if (f->nev < f->capev)
		f->ev[f->nev++] = *ev;
	else
		f->r->bad_core++;
}

static struct fl_machine *machine_of(struct fleet *f, int64_t account)
{
	if (account < ACCT_NODE0 || account >= ACCT_NODE0 + f->n)
		return NULL;
	return &f->m[account - ACCT_NODE0];
}

static struct strategy_quote *quote_find(struct fleet *f, int64_t account,
                                         uint64_t id, int **count,
                                         struct strategy_quote **arr)
{
	struct fl_machine *m = machine_of(f, account);
	struct strategy_quote *q = m ? m->quotes : f->opq;
	int *n = m ? &m->nquotes : &f->nop;
	*count = n;
	*arr = q;
	for (int i = 0; i < *n; i++)
		if (q[i].id == id)
			return &q[i];
	return NULL;
}

static void quote_set(struct fleet *f, int64_t account, uint64_t id,
                      rx_pages left)
{
	int *n;
	struct strategy_quote *arr, *q = quote_find(f, account, id, &n, &arr);
	if (!q)
		return;
	if (left > 0) {
		q->pages = left;
		return;
	}
	*q = arr[--*n];
}

static void add_party(struct fl_machine *m, int k)
{
	if (m->nks == m->capks) {
		m->capks = m->capks ? m->capks * 2 : 16;
		m->ks = realloc(m->ks, (size_t)m->capks * sizeof *m->ks);
		if (!m->ks)
			abort();
	}
	m->ks[m->nks++] = k;
}

static void push(int **a, int *n, int *cap, int v)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		*a = realloc(*a, (size_t)*cap * sizeof **a);
		if (!*a)
			abort();
	}
	(*a)[(*n)++] = v;
}

/* Something is due on contract k (delivery, notice, an end): watch it. */
static void watch(struct fleet *f, struct fl_contract *x)
{
	if (x->watched)
		return;
	x->watched = 1;
	push(&f->watch, &f->nwatch, &f->capwatch, (int)(x - f->k));
}

/* The agent's meter: page-seconds delivered up to `upto` (the pages out
 * stay the same between two calls; every change of them calls it first). */
static void accrue(struct fl_contract *x, rx_time_ns upto)
{
	rx_time_ns from = x->metered_to, to = upto;
	if (x->k.delivered_at && from < x->k.delivered_at)
		from = x->k.delivered_at;
	if (x->k.ended_at && to > x->k.ended_at)
		to = x->k.ended_at;
	if (x->k.delivered_at && x->placed > 0 && to > from)
		x->ps += (rx_pagesec)((__int128)x->placed * (to - from) / NS);
	if (upto > x->metered_to)
		x->metered_to = upto;
}

static void open_contract(struct fleet *f, const struct book_event *ev)
{
	int64_t buyer = ev->side == BOOK_BUY ? ev->account : ev->maker_account;
	int64_t seller = ev->side == BOOK_BUY ? ev->maker_account : ev->account;
	char err[CONTRACT_MSG_MAX];

	if (f->nk == f->capk) {
		f->capk = f->capk ? f->capk * 2 : 1024;
		f->k = realloc(f->k, (size_t)f->capk * sizeof *f->k);
		if (!f->k)
			abort();
	}
	struct fl_contract *x = &f->k[f->nk];
	memset(x, 0, sizeof *x);
	struct contract_trade t = {.contract_id = f->nk + 1,
	                           .trade_id = f->nk + 1,
	                           .buyer = buyer,
	                           .seller = seller,
	                           .buyer_is_operator = buyer == ACCT_OPERATOR,
	                           .pages = ev->pages,
	                           .price = ev->price,
	                           .now = f->now};
	if (contract_open(&t, &f->market, &x->k, err, sizeof err) < 0) {
		f->r->bad_core++;
		return;
	}
	struct fl_machine *s = machine_of(f, seller), *b = machine_of(f, buyer);
	if (!s) {
		f->r->bad_core++;
		return;
	}
	x->seller = s->idx;
	x->buyer = b ? b->idx : -1;
	x->todo_out = ev->pages;
	x->reported_to = 0;
	x->ic = (struct invoice_contract){.contract_id = x->k.id,
	                                  .buyer = buyer,
	                                  .seller = seller,
	                                  .delivery = x->k.delivery,
	                                  .price = x->k.price,
	                                  .fee_bps = f->c->fee_bps};
	push(&f->live, &f->nlive, &f->caplive, f->nk);
	add_party(s, f->nk);
	s->moves = 1;
	s->dirty = 1;
	if (b) {
		add_party(b, f->nk);
		b->dirty = 1;
	}
	f->nk++;
	watch(f, x);
	f->r->contracts++;
	if (x->k.delivery == CONTRACT_LEND)
		f->r->lend_contracts++;
	else
		f->r->offline_contracts++;
}

/* Applies a command to the book and turns its trades into contracts. */
static void book_do(struct fleet *f, const struct book_cmd *cmd)
{
	f->nev = 0;
	book_apply(f->book, cmd, on_event, f);
	for (int i = 0; i < f->nev; i++) {
		const struct book_event *ev = &f->ev[i];
		switch (ev->kind) {
		case BOOK_EV_ACCEPTED: {
			int *n;
			struct strategy_quote *arr;
			quote_find(f, ev->account, 0, &n, &arr);
			if (*n >= (machine_of(f, ev->account)
			               ? STRATEGY_MAX_QUOTES
			               : (int)(sizeof f->opq / sizeof f->opq[0]))) {
				f->r->bad_core++;
				break;
			}
			arr[(*n)++] = (struct strategy_quote){
			    .id = ev->id,
			    .product = STRATEGY_SPOT,
			    .side = ev->side == BOOK_BUY ? STRATEGY_BUY
			                                 : STRATEGY_SELL,
			    .pages = ev->pages,
			    .price = ev->price};
			break;
		}
		case BOOK_EV_TRADE:
			quote_set(f, ev->account, ev->id, ev->remaining);
			quote_set(f, ev->maker_account, ev->maker_id,
			          ev->maker_remaining);
			open_contract(f, ev);
			break;
		case BOOK_EV_CANCELLED:
		case BOOK_EV_EXPIRED:
			quote_set(f, ev->account, ev->id, 0);
			break;
		default:
			break;
		}
	}
}

static void place(struct fleet *f, int64_t account, enum book_side side,
                  enum book_tif tif, rx_pages pages, rx_price price)
{
	struct book_cmd cmd = {.kind = BOOK_CMD_NEW,
	                       .now = f->now,
	                       .id = ++f->next_order,
	                       .account = account,
	                       .side = side,
	                       .tif = tif,
	                       .stp = BOOK_STP_CANCEL_TAKER,
	                       .pages = pages,
	                       .price = price};
	f->r->orders++;
	book_do(f, &cmd);
}

static void cancel(struct fleet *f, uint64_t id)
{
	struct book_cmd cmd = {.kind = BOOK_CMD_CANCEL, .now = f->now, .id = id};
	f->r->cancels++;
	book_do(f, &cmd);
}

static int apply(struct fleet *f, struct fl_contract *x, enum contract_event ev,
                 enum contract_actor who, rx_time_ns at)
{
	struct contract_cmd cmd = {.event = ev, .actor = who, .now = at};
	struct contract_transition tr;
	char msg[CONTRACT_MSG_MAX];

	if (who == CONTRACT_BY_SELLER)
		cmd.actor_account = x->k.seller;
	else if (who == CONTRACT_BY_BUYER)
		cmd.actor_account = x->k.buyer;
	enum contract_reject rj = contract_apply(&x->k, &cmd, &tr, msg);
	if (rj == CONTRACT_REJ_NONE) {
		f->m[x->seller].dirty = 1;
		if (x->buyer >= 0)
			f->m[x->buyer].dirty = 1;
		return 0;
	}
	/* A recall of a contract still being delivered is the one refusal
	 * an agent meets in practice: the strategy cannot see the state. */
	if (ev == CONTRACT_EV_RECALL && x->k.state == CONTRACT_PENDING_DELIVERY)
		f->r->recall_refused++;
	else
		f->r->refused++;
	return -1;
}

/* ---- billing: the agent's usage report, checked and invoiced ---- */

static void post(struct fleet *f, const struct invoice_movement *mv)
{
	char err[INVOICE_MSG_MAX];
	f->r->movements++;
	for (int i = 0; i < mv->n; i++) {
		const struct invoice_posting *p = &mv->p[i];
		if (invoice_ledger_add(&f->ledger, p, err, sizeof err) < 0)
			f->r->bad_balance++;
		f->r->postings++;
		if (p->account == ACCT_OPERATOR)
			f->r->operator_spend += p->amount;
		else if (p->account == ACCT_EXCHANGE)
			f->r->fees -= p->amount;
		else if (p->role == INVOICE_SELLER)
			f->r->seller_revenue -= p->amount;
		else
			f->r->buyer_spend += p->amount;
		f->r->ledger_sum += p->amount;
	}
}

/* Reports and bills the contract's metered usage up to `to`. */
static void report(struct fleet *f, struct fl_contract *x, rx_time_ns to)
{
	rx_time_ns from = x->reported_to;
	char err[USAGE_MSG_MAX];

	accrue(x, to);
	rx_pagesec ps = x->ps - x->ps_reported;

	if (!x->k.delivered_at)
		return;
	if (from < x->k.delivered_at)
		from = x->k.delivered_at;
	if (to <= from)
		return;
	struct fl_machine *s = &f->m[x->seller];
	struct usage_report u = {.node = s->account,
	                         .epoch = 1,
	                         .seq = ++s->report_seq,
	                         .contract_id = x->k.id,
	                         .period_start = from,
	                         .period_end = to,
	                         .page_seconds = ps,
	                         .kmod_page_seconds = x->ps,
	                         .kmod_pages = x->placed};
	struct usage_contract uc = {.id = x->k.id,
	                            .buyer = x->k.buyer,
	                            .seller = x->k.seller,
	                            .lend = x->k.delivery == CONTRACT_LEND,
	                            .pages = x->k.pages,
	                            .delivered_at = x->k.delivered_at,
	                            .ended_at = x->k.ended_at};
	enum usage_side side;
	f->r->usage_reports++;
	if (usage_check(&u, &uc, f->now, &side, err, sizeof err) < 0) {
		f->r->usage_refused++;
		f->r->bad_billing++;
		return;
	}
	x->ps_reported = x->ps;
	x->reported_to = to;

	int y, mo;
	month_of(from, &y, &mo);
	if (y != x->month_y || mo != x->month_m) {
		x->month_y = y, x->month_m = mo;
		x->month_ps = x->month_billed = 0;
	}
	x->month_ps += ps;
	struct invoice_due due;
	invoice_plan(x->month_ps, x->month_billed, y, mo, f->now, GRACE_NS,
	             &due);
	if (due.ps == 0)
		return;
	struct invoice_movement mv;
	char ierr[INVOICE_MSG_MAX];
	if (invoice_charge(&x->ic, &due, from, to, ++f->movement_id,
	                   ACCT_EXCHANGE, &mv, ierr, sizeof ierr) < 0) {
		f->r->bad_billing++;
		return;
	}
	x->month_billed += due.ps;
	post(f, &mv);
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
	int w = 0, more = 0;

	if (!m->moves)
		return;
	for (int i = 0; i < m->nks; i++)
		if (!f->k[m->ks[i]].closed)
			m->ks[w++] = m->ks[i];
	m->nks = w;
	for (int i = 0; i < m->nks; i++) {
		struct fl_contract *x = &f->k[m->ks[i]];
		if (x->seller == m->idx && (x->todo_back || x->todo_out))
			accrue(x, t0);
		if (x->seller == m->idx) {
			if (x->todo_back > 0) {
				rx_pages n = take(&kb, x->todo_back, rt->online);
				x->todo_back -= n, x->placed -= n;
				m->resident += n;
				if (x->k.delivery == CONTRACT_LEND)
					m->lent -= n;
				else
					m->offline -= n;
				moved(f, n);
			}
			if (x->todo_out > 0) {
				/* Free pages go at the module's rate; pages that
				 * hold data are written out first. */
				rx_pages avail = m->resident;
				rx_pages free = avail -
				                (rx_pages)llround(m->st.used);
				if (free < 0)
					free = 0;
				rx_pages n = take(&kb,
				                  x->todo_out < free ? x->todo_out
				                                     : free,
				                  rt->offline);
				rx_pages d = take(&kb, x->todo_out - n,
				                  rt->swap_write);
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
					if (apply(f, x, CONTRACT_EV_DELIVERED,
					          CONTRACT_BY_SELLER, at) < 0)
						f->r->bad_core++;
					if (x->k.delivery == CONTRACT_LEND) {
						x->todo_in = x->k.pages;
						f->m[x->buyer].moves = 1;
					} else
						x->moved_at = at;
				}
			}
		}
		if (x->buyer == m->idx) {
			if (x->todo_in > 0) {
				rx_pages n = take(&lb, x->todo_in, rt->lend_write);
				x->todo_in -= n, x->data_in += n;
				m->borrowed += n;
				moved(f, n);
				if (x->todo_in == 0)
					x->moved_at =
					    t0 + (rx_time_ns)((dt - lb) * 1e9);
			}
			if (x->todo_away > 0) {
				rx_pages n = take(&lb, x->todo_away, rt->lend_read);
				x->todo_away -= n, x->data_in -= n;
				m->borrowed -= n;
				moved(f, n);
			}
		}
		if ((x->seller == m->idx && (x->todo_back || x->todo_out)) ||
		    (x->buyer == m->idx && (x->todo_in || x->todo_away)))
			more = 1;
	}
	m->moves = more;
}

/* ---- one agent's decision ---- */

static struct fl_contract *find_contract(struct fleet *f, uint64_t id)
{
	return id >= 1 && id <= (uint64_t)f->nk ? &f->k[id - 1] : NULL;
}

/* The buyer moves its data back from the lender (release or recall). */
static void vacate(struct fleet *f, struct fl_contract *x)
{
	x->todo_away = x->data_in;
	x->todo_in = 0;
	f->m[x->buyer].moves = 1;
	watch(f, x);
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
	for (int i = 0; i < m->nks; i++) {
		struct fl_contract *x = &f->k[m->ks[i]];
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
	m->nsk = nk;
}

static void decide(struct fleet *f, struct fl_machine *m,
                   const struct wsest_estimate *e)
{
	static __thread struct strategy_action acts[STRATEGY_MAX_ACTIONS];
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
		sc.stall_value = f->c->stall_value_per_gib *
		                 (m->installed / 262144);
	int n = strategy_decide(&sc, &in, acts, &v, &why);
	if (n < 0) {
		f->r->bad_core++;
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct strategy_action *a = &acts[i];
		struct fl_contract *x;
		switch (a->kind) {
		case STRATEGY_CANCEL:
			cancel(f, a->id);
			break;
		case STRATEGY_PLACE:
			if (a->product != STRATEGY_SPOT)
				break;
			place(f, m->account,
			      a->side == STRATEGY_BUY ? BOOK_BUY : BOOK_SELL,
			      a->tif == STRATEGY_IOC ? BOOK_IOC : BOOK_GTC,
			      a->pages, a->price);
			break;
		case STRATEGY_RECALL:
			/* Whole contracts, as the agent does: pages first,
			 * then the exchange. */
			x = find_contract(f, a->id);
			if (!x || x->recalled || x->seller != m->idx)
				break;
			if (apply(f, x, CONTRACT_EV_RECALL, CONTRACT_BY_SELLER,
			          f->now) < 0)
				break;
			x->recalled = 1;
			m->dirty = 1;
			f->r->recalls++;
			if (x->k.delivery == CONTRACT_LEND) {
				vacate(f, x);
			} else {
				x->todo_back += x->placed;
				x->todo_out = 0;
				m->moves = 1;
				watch(f, x);
			}
			break;
		case STRATEGY_RELEASE:
			x = find_contract(f, a->id);
			if (!x || x->released || x->buyer != m->idx)
				break;
			x->released = 1;
			m->dirty = 1;
			f->r->releases++;
			vacate(f, x);
			if (x->k.state == CONTRACT_PENDING_DELIVERY) {
				/* Nothing moved yet: end it now. */
				apply(f, x, CONTRACT_EV_BUYER_END,
				      CONTRACT_BY_BUYER, f->now);
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
		          c->pressure_ppm > 0 ? c->pressure_ppm : 100000, &m->e);
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
	int th = f->c->threads < 1 ? 1 : f->c->threads > 64 ? 64 : f->c->threads;
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

static void end_contract(struct fleet *f, struct fl_contract *x)
{
	struct fl_machine *s = &f->m[x->seller];
	/* The seller gets its pages back: lent pages after the buyer moved
	 * out (or gave up its data at the notice's end). */
	if (x->buyer >= 0 && x->data_in > 0) {
		f->m[x->buyer].borrowed -= x->data_in;
		x->data_in = 0;
	}
	x->todo_in = x->todo_away = 0;
	x->todo_out = 0;
	x->todo_back = x->placed;
	s->moves = 1;
}

static void deadlines(struct fleet *f, rx_time_ns upto)
{
	int w = 0;
	for (int i = 0; i < f->nwatch; i++) {
		struct fl_contract *x = &f->k[f->watch[i]];
		if (x->closed || (x->k.state == CONTRACT_ACTIVE &&
		                  !x->recalled && !x->released))
			x->watched = 0; /* nothing due any more */
		else
			f->watch[w++] = f->watch[i];
	}
	f->nwatch = w;
	for (int i = 0; i < f->nwatch; i++) {
		struct fl_contract *x = &f->k[f->watch[i]];
		enum contract_event ev;
		rx_time_ns at;
		if (x->k.state == CONTRACT_ENDED ||
		    x->k.state == CONTRACT_BREACHED) {
			/* Final report once the pages are back. */
			if (x->todo_back == 0 && x->placed == 0) {
				report(f, x, x->k.ended_at);
				x->closed = 1;
				double d = (double)(x->k.ended_at -
				                    (x->k.delivered_at
				                         ? x->k.delivered_at
				                         : x->k.created)) /
				           1e9;
				double mv = x->moved_at
				                ? (double)(x->moved_at -
				                           x->k.created) /
				                      1e9
				                : 0;
				if (x->k.delivered_at) {
					f->dur[f->ndur] = d;
					f->mv[f->ndur++] = mv;
				}
			}
			continue;
		}
		/* A lend contract whose buyer has moved out ends now. */
		if (x->k.delivery == CONTRACT_LEND &&
		    (x->recalled || x->released) && x->todo_away == 0 &&
		    x->k.delivered_at && x->k.state != CONTRACT_PENDING_DELIVERY) {
			rx_time_ns t = upto - 1;
			if (t <= x->k.changed_at)
				t = x->k.changed_at + 1;
			if (!contract_due(&x->k, &ev, &at) || at > t) {
				if (apply(f, x, CONTRACT_EV_BUYER_END,
				          CONTRACT_BY_BUYER, t) == 0) {
					end_contract(f, x);
					continue;
				}
			}
		}
		if (!contract_due(&x->k, &ev, &at) || at > upto)
			continue;
		if (apply(f, x, ev, CONTRACT_BY_EXCHANGE, at) < 0) {
			f->r->bad_core++;
			continue;
		}
		if (ev == CONTRACT_EV_DELIVERY_LATE) {
			f->r->late_deliveries++;
			f->r->breaches++;
		}
		end_contract(f, x);
	}
}

/* Drops closed contracts from the live list. */
static void compact_live(struct fleet *f)
{
	int w = 0;
	for (int i = 0; i < f->nlive; i++)
		if (!f->k[f->live[i]].closed)
			f->live[w++] = f->live[i];
	f->nlive = w;
}

static void operator_bids(struct fleet *f)
{
	rx_pages open = 0;
	for (int i = 0; i < f->nop; i++)
		open += f->opq[i].pages;
	while (f->nop < f->op_want &&
	       f->nop < (int)(sizeof f->opq / sizeof f->opq[0]) - 1)
		place(f, ACCT_OPERATOR, BOOK_BUY, BOOK_GTC, f->c->max_order,
		      f->c->operator_price);
	(void)open;
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
			f->c->probe(f->c->probe_ctx,
			            &(struct fleet_probe){
			                (double)(f->now - T0_NS) / NS + f->c->dt_s,
			                i, m->installed, m->resident, m->offline,
			                m->lent, m->borrowed});
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
	if (c->machines < 1 || c->days <= 0 || c->dt_s < 1 || c->lot < 1 ||
	    c->max_order < c->lot ||
	    3600 % c->dt_s != 0 || c->report_s % c->dt_s != 0) {
		snprintf(err, errlen,
		         "machines, days and the lot must be positive, the "
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
	struct book_params bp = {.tick = c->tick,
	                         .lot = c->lot,
	                         .min_pages = c->lot,
	                         .max_pages = c->max_order,
	                         .price_min = 0,
	                         .price_max = 1000 * c->tick * 1000,
	                         .capacity = (uint32_t)(f->n * 4 + 8192)};
	char berr[160];
	f->book = book_new(&bp, berr, sizeof berr);
	if (!f->m || !f->ev || !f->book) {
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
		rng_seed(&m->rng, c->seed, (uint64_t)i + 1);
		rng_seed(&m->noise, c->seed ^ UINT64_C(0x5eed5eed5eed5eed),
		         (uint64_t)i + 1);
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
		deadlines(f, t);
		if (c->policy == FLEET_TMO) {
			for (int i = 0; i < f->n; i++)
				tmo_one(f, &f->m[i]);
		} else if (c->policy == FLEET_MARKET ||
		           c->policy == FLEET_ORACLE) {
			operator_bids(f);
			/* A different agent goes first each step. */
			int first = (int)(step % f->n);
			for (int j = 0; j < f->n; j++) {
				struct fl_machine *m = &f->m[(first + j) % f->n];
				if (m->e.source != WSEST_NONE)
					decide(f, m, &m->e);
			}
			for (int i = 0; i < f->n; i++)
				move_machine(f, &f->m[i], dt);
			if ((step + 1) % (c->report_s / c->dt_s) == 0)
				compact_live(f);
			if ((step + 1) % (c->report_s / c->dt_s) == 0)
				for (int i = 0; i < f->nlive; i++) {
					struct fl_contract *x =
					    &f->k[f->live[i]];
					if (!x->closed &&
					    x->k.state != CONTRACT_ENDED &&
					    x->k.state != CONTRACT_BREACHED)
						report(f, x, t1);
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
	}
	/* The end: every live contract reports what it delivered. */
	f->now = T0_NS + steps * c->dt_s * NS;
	for (int i = 0; i < f->nk; i++) {
		struct fl_contract *x = &f->k[i];
		if (x->closed)
			continue;
		rx_time_ns end = x->k.ended_at ? x->k.ended_at : f->now;
		report(f, x, end);
		if (x->ps_reported != x->ps)
			r->bad_billing++;
		if (x->k.delivered_at) {
			f->dur[f->ndur] = (double)(end - x->k.delivered_at) / 1e9;
			f->mv[f->ndur++] =
			    x->moved_at ? (double)(x->moved_at - x->k.created) / 1e9
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
		if (sh > r->worst_stall_share)
			r->worst_stall_share = sh;
	}
	/* Durations against moving times. */
	double *ratio = malloc(((size_t)f->ndur + 1) * sizeof *ratio);
	if (!ratio)
		abort();
	for (int i = 0; i < f->ndur; i++)
		ratio[i] = f->dur[i] / (f->mv[i] > dt / 10 ? f->mv[i] : dt / 10);
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
		free(f->m[i].sk);
	}
	free(f->m);
	free(f->ev);
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
