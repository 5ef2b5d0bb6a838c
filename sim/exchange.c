/* exchange.c — ramex-fleet's simulated exchange; see exchange.h. */
#include "sim/exchange.h"

#include "exchange/core/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static struct fl_machine *sx_machine_of(struct fleet *f, int64_t account)
{
	if (account < ACCT_NODE0 || account >= ACCT_NODE0 + f->n)
		return NULL;
	return &f->m[account - ACCT_NODE0];
}

static struct strategy_quote *quote_find(struct fleet *f, int64_t account,
                                         uint64_t id, int **count,
                                         struct strategy_quote **arr)
{
	struct fl_machine *m = sx_machine_of(f, account);
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

void sx_moving(struct fleet *f, struct fl_machine *m,
               const struct fl_contract *x)
{
	int k = (int)(x - f->k), lo = 0, hi = m->nmv;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (m->mv[mid] < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->nmv && m->mv[lo] == k)
		return;
	if (m->nmv == m->capmv) {
		m->capmv = m->capmv ? m->capmv * 2 : 16;
		m->mv = realloc(m->mv, (size_t)m->capmv * sizeof *m->mv);
		if (!m->mv)
			abort();
	}
	memmove(&m->mv[lo + 1], &m->mv[lo],
	        (size_t)(m->nmv - lo) * sizeof *m->mv);
	m->mv[lo] = k;
	m->nmv++;
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
void sx_watch(struct fleet *f, struct fl_contract *x)
{
	if (x->watched)
		return;
	x->watched = 1;
	push(&f->watch, &f->nwatch, &f->capwatch, (int)(x - f->k));
}

/* The agent's meter: page-seconds delivered up to `upto` (the pages out
 * stay the same between two calls; every change of them calls it first). */
void sx_accrue(struct fl_contract *x, rx_time_ns upto)
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
	struct fl_machine *s = sx_machine_of(f, seller),
	                  *b = sx_machine_of(f, buyer);
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
	sx_moving(f, s, x);
	s->dirty = 1;
	if (b) {
		add_party(b, f->nk);
		b->dirty = 1;
	}
	f->nk++;
	sx_watch(f, x);
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
			if (*n >=
			    (sx_machine_of(f, ev->account)
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

void sx_place(struct fleet *f, int64_t account, enum book_side side,
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

void sx_cancel(struct fleet *f, uint64_t id)
{
	struct book_cmd cmd = {
	    .kind = BOOK_CMD_CANCEL, .now = f->now, .id = id};
	f->r->cancels++;
	book_do(f, &cmd);
}

int sx_apply(struct fleet *f, struct fl_contract *x, enum contract_event ev,
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
		/* Delivered (pending to active): the strategy's list of the
		 * parties' contracts holds both states alike, so it stays. */
		if (tr.from == CONTRACT_PENDING_DELIVERY &&
		    tr.to == CONTRACT_ACTIVE)
			return 0;
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
void sx_report(struct fleet *f, struct fl_contract *x, rx_time_ns to)
{
	rx_time_ns from = x->reported_to;
	char err[USAGE_MSG_MAX];

	sx_accrue(x, to);
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

/* ---- contracts the agents end ---- */

struct fl_contract *sx_find_contract(struct fleet *f, uint64_t id)
{
	return id >= 1 && id <= (uint64_t)f->nk ? &f->k[id - 1] : NULL;
}

/* The buyer moves its data back from the lender (release or recall). */
void sx_vacate(struct fleet *f, struct fl_contract *x)
{
	x->todo_away = x->data_in;
	x->todo_in = 0;
	sx_moving(f, &f->m[x->buyer], x);
	sx_watch(f, x);
}

void sx_end(struct fleet *f, struct fl_contract *x)
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
	sx_moving(f, s, x);
}

void sx_deadlines(struct fleet *f, rx_time_ns upto)
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
			/* Pages out for a contract that is over must be on
			 * their way back (the agent takes back the pages of
			 * every contract it no longer sees pending or
			 * active); else they are lost to their machine. */
			if ((x->todo_out > 0 || x->placed > x->todo_back) &&
			    !x->stranded) {
				x->stranded = 1;
				f->r->bad_balance++;
			}
			/* Final report once the pages are back. */
			if (x->todo_back == 0 && x->placed == 0) {
				sx_report(f, x, x->k.ended_at);
				x->closed = 1;
				double d = (double)(x->k.ended_at -
				                    (x->k.delivered_at
				                         ? x->k.delivered_at
				                         : x->k.created)) /
				           1e9;
				double mv =
				    x->moved_at
				        ? (double)(x->moved_at - x->k.created) /
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
		    x->k.delivered_at &&
		    x->k.state != CONTRACT_PENDING_DELIVERY) {
			rx_time_ns t = upto - 1;
			if (t <= x->k.changed_at)
				t = x->k.changed_at + 1;
			if (!contract_due(&x->k, &ev, &at) || at > t) {
				if (sx_apply(f, x, CONTRACT_EV_BUYER_END,
				             CONTRACT_BY_BUYER, t) == 0) {
					sx_end(f, x);
					continue;
				}
			}
		}
		if (!contract_due(&x->k, &ev, &at) || at > upto)
			continue;
		if (sx_apply(f, x, ev, CONTRACT_BY_EXCHANGE, at) < 0) {
			f->r->bad_core++;
			continue;
		}
		if (ev == CONTRACT_EV_DELIVERY_LATE) {
			f->r->late_deliveries++;
			f->r->breaches++;
		}
		sx_end(f, x);
	}
}

/* Drops closed contracts from the live list. */
void sx_compact_live(struct fleet *f)
{
	int w = 0;
	for (int i = 0; i < f->nlive; i++)
		if (!f->k[f->live[i]].closed)
			f->live[w++] = f->live[i];
	f->nlive = w;
}

void sx_operator_bids(struct fleet *f)
{
	rx_pages open = 0;
	for (int i = 0; i < f->nop; i++)
		open += f->opq[i].pages;
	while (f->nop < f->op_want &&
	       f->nop < (int)(sizeof f->opq / sizeof f->opq[0]) - 1)
		sx_place(f, ACCT_OPERATOR, BOOK_BUY, BOOK_GTC, f->c->max_order,
		         f->c->operator_price);
	(void)open;
}
