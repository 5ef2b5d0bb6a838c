/* billing.c — the billing job; see billing.h and docs/money.md.
 *
 * One run: take the advisory lock, then, batch by batch, take dirty
 * contracts out of billing_dirty, load their contract rows, billing state,
 * the month sums of their usage reports and what each month has billed,
 * price what is new with invoice_plan/invoice_charge (and invoice_settle
 * for perm contracts that are over), and store movements, postings, invoice
 * totals and the new billing state with a handful of set-based statements
 * (unnest of arrays) in the batch's one transaction. Then finalize the
 * invoices whose grace is over, one account after another in month order
 * so that the cents carry runs in order, and record the run. */
#include "exchange/billing.h"
#include "common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/money.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"
#include "exchange/db.h"
#include "exchange/pgarr.h"

/* The advisory lock key: one billing run per database at a time. */
#define BILLING_LOCK "7234100542"

struct billing {
	struct billing_opts o;
	char conninfo[512];
	PGconn *conn;
	pthread_mutex_t mu; /* one run at a time in this process */
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	int stopping;
	int has_thread;
	pthread_t thread;
};

static rx_time_ns now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (rx_time_ns)ts.tv_sec * MONEY_NS_PER_S + ts.tv_nsec;
}

/* ---- where a run's time goes ---- */

/* The phases of a run, timed on the monotonic clock and logged at the end
 * of every run (log level info), so that a slow run says where it spent
 * its time without a profiler (bench/46-billing.sh prints them). */
enum phase {
	PH_TAKE,      /* BEGIN, take dirty contracts out of billing_dirty */
	PH_CONTRACTS, /* contract rows and billing state */
	PH_USAGE,     /* month sums of the reports, billed so far */
	PH_PRICE,     /* invoice_plan/charge/settle, in C */
	PH_INVOICES,  /* make and load the invoices the movements land on */
	PH_LEDGER,    /* movements, postings, invoice totals */
	PH_STATE,     /* billing_contracts, billing_months, later runs */
	PH_COMMIT,
	PH_FINALIZE, /* final invoices and the cents carry */
	PH_N
};

static const char *const phase_name[PH_N] = {"take",  "contracts", "usage",
                                             "price", "invoices",  "ledger",
                                             "state", "commit",    "finalize"};

struct phases {
	int64_t us[PH_N];
	int64_t batches;
	struct timespec at; /* the end of the last lap */
};

static void lap_start(struct phases *ph)
{
	clock_gettime(CLOCK_MONOTONIC, &ph->at);
}

/* Adds the time since the last lap to phase p. */
static void lap(struct phases *ph, enum phase p)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	ph->us[p] += (t.tv_sec - ph->at.tv_sec) * 1000000 +
	             (t.tv_nsec - ph->at.tv_nsec) / 1000;
	ph->at = t;
}

/* ---- the contracts of one batch ---- */

struct month {
	int key; /* year * 12 + month - 1 */
	rx_pagesec seller, buyer;
	bool seller_rep, buyer_rep;
	rx_pagesec billed; /* billed for this month so far */
	bool touched;      /* billed_ps or the reconciliation changed */
	enum usage_recon_flag recon;
	bool offline;
};

struct bc {
	struct contract k;
	struct invoice_contract ic;
	struct month *m;
	int nm, capm;
	bool changed; /* billing state to store */
	rx_price settle_price, spot_ref;
	bool has_settle;
	bool spans; /* its reports span more than one month */
	bool later; /* has reports for a later run (start >= as_of) */
};

struct mv {
	struct invoice_movement m;
	int usage_key; /* -1: settlement */
	const char *recon;
};

struct inv_key {
	int64_t account;
	int key;
	int64_t id;
	struct invoice inv;
	bool changed;
};

struct batch {
	struct bc *c;
	int nc;
	struct mv *mv;
	int nmv, capmv;
	struct inv_key *inv;
	int ninv, capinv;
};

static void batch_free(struct batch *b)
{
	for (int i = 0; i < b->nc; i++)
		free(b->c[i].m);
	free(b->c);
	free(b->mv);
	free(b->inv);
	memset(b, 0, sizeof *b);
}

static int key_of(int year, int month)
{
	return year * 12 + month - 1;
}

static struct month *month_get(struct bc *c, int key)
{
	for (int i = 0; i < c->nm; i++)
		if (c->m[i].key == key)
			return &c->m[i];
	if (c->nm == c->capm) {
		int cap = c->capm ? c->capm * 2 : 4;
		struct month *m = realloc(c->m, (size_t)cap * sizeof *m);
		if (!m)
			return NULL;
		c->m = m;
		c->capm = cap;
	}
	struct month *m = &c->m[c->nm++];
	memset(m, 0, sizeof *m);
	m->key = key;
	m->recon = USAGE_RECON_NONE;
	return m;
}

static int month_cmp(const void *a, const void *b)
{
	const struct month *x = a, *y = b;
	return (x->key > y->key) - (x->key < y->key);
}

static struct bc *find_contract(struct batch *b, int64_t id)
{
	int lo = 0, hi = b->nc - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (b->c[mid].k.id == id)
			return &b->c[mid];
		if (b->c[mid].k.id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* Loads the contract rows and billing state of `ids`.
 *
 * Here and in every statement below that joins a batch's keys to a table
 * that grows during a run (billing_contracts, invoices), the keys are
 * also given as = ANY(array) on that table's own index: without it the
 * planner, whose statistics are from before the run, hash-joined a seq
 * scan of the whole table, batch after batch (EXPLAIN ANALYZE at 40 000
 * contracts: the contract load grew from 1 to 9 ms a batch). */
static int load_contracts(PGconn *db, const char *ids, int fee_bps,
                          struct batch *b, char *err, size_t errlen)
{
	static const char *sql =
	    "SELECT c.id, c.product, c.perm_year, c.delivery, c.buyer_id, "
	    "c.seller_id, c.pages, c.price, c.breach_penalty, c.state, "
	    "c.created_ns, c.deliver_by_ns, c.term_end_ns, c.delivered_ns, "
	    "c.notice_end_ns, c.ended_ns, c.market_id, c.recall_notice_ns, "
	    "c.trade_id, bs.contract_id IS NOT NULL, bs.fee_bps, "
	    "bs.amount_carry, bs.fee_carry, bs.billed_ps, bs.billed, bs.fees, "
	    "bs.settled FROM contracts c LEFT JOIN billing_contracts bs ON "
	    "bs.contract_id = c.id AND bs.contract_id = ANY($1::bigint[]) "
	    "WHERE c.id = ANY($1::bigint[]) ORDER BY c.id";
	const char *pv[] = {ids};
	PGresult *r = db_exec(db, PGRES_TUPLES_OK, sql, 1, pv, err, errlen);
	if (!r)
		return -1;
	int n = PQntuples(r);
	b->c = calloc((size_t)(n ? n : 1), sizeof *b->c);
	if (!b->c) {
		PQclear(r);
		return err_set(err, errlen, "out of memory for %d contracts",
		               n);
	}
	b->nc = n;
	for (int i = 0; i < n; i++) {
		struct bc *c = &b->c[i];
		struct contract *k = &c->k;
		k->id = db_int(r, i, 0);
		k->product = strcmp(PQgetvalue(r, i, 1), "perm") == 0
		                 ? CONTRACT_PERM
		                 : CONTRACT_SPOT;
		k->perm_year = (int)db_int(r, i, 2);
		k->delivery = strcmp(PQgetvalue(r, i, 3), "lend") == 0
		                  ? CONTRACT_LEND
		                  : CONTRACT_OFFLINE;
		k->buyer = db_int(r, i, 4);
		k->seller = db_int(r, i, 5);
		k->pages = db_int(r, i, 6);
		k->price = db_int(r, i, 7);
		k->breach_penalty = db_int(r, i, 8);
		int st = contract_state_parse(PQgetvalue(r, i, 9));
		k->state = st < 0 ? CONTRACT_PENDING_DELIVERY
		                  : (enum contract_state)st;
		k->created = db_int(r, i, 10);
		k->delivery_deadline = db_int(r, i, 11);
		k->term_end = db_int(r, i, 12);
		k->delivered_at = db_int(r, i, 13);
		k->notice_end = db_int(r, i, 14);
		k->ended_at = db_int(r, i, 15);
		k->market_id = db_int(r, i, 16);
		k->recall_notice = db_int(r, i, 17);
		k->trade_id = db_int(r, i, 18);
		struct invoice_contract *ic = &c->ic;
		ic->contract_id = k->id;
		ic->buyer = k->buyer;
		ic->seller = k->seller;
		ic->delivery = k->delivery;
		ic->price = k->price;
		if (strcmp(PQgetvalue(r, i, 19), "t") == 0) {
			ic->fee_bps = (int)db_int(r, i, 20);
			ic->amount_carry.rem = db_int(r, i, 21);
			ic->fee_carry.rem = db_int(r, i, 22);
			ic->billed_ps = db_int(r, i, 23);
			ic->billed = db_int(r, i, 24);
			ic->fees = db_int(r, i, 25);
			ic->settled = strcmp(PQgetvalue(r, i, 26), "t") == 0;
		} else {
			ic->fee_bps = fee_bps; /* fixed at the first billing */
			c->changed = true;
		}
	}
	PQclear(r);
	return 0;
}

/* The month starts of the whole calendar as an SQL array, for
 * width_bucket: bucket i (1-based) is the month with key
 * MONEY_YEAR_MIN * 12 + i - 1. A binary search on integers is several
 * times cheaper than timestamp arithmetic per report. Built once. */
static pthread_once_t bounds_once = PTHREAD_ONCE_INIT;
static char *bounds_text;

static void bounds_build(void)
{
	struct pgarr a = {0};
	for (int y = MONEY_YEAR_MIN; y <= MONEY_YEAR_MAX; y++)
		for (int m = 1; m <= 12; m++)
			pgarr_i64(&a, money_month_start(y, m));
	const char *t = pgarr_text(&a);
	bounds_text = t ? strdup(t) : NULL;
	pgarr_free(&a);
}

static void add_usage(struct bc *c, bool buyer_side, int key, rx_pagesec ps,
                      bool *oom)
{
	struct month *m = month_get(c, key);
	if (!m) {
		*oom = true;
		return;
	}
	if (buyer_side) {
		m->buyer += ps;
		m->buyer_rep = true;
	} else {
		m->seller += ps;
		m->seller_rep = true;
	}
}

/* Adds the reports of the contracts `ids` to their months: the sums of
 * reports inside one month from SQL (month by width_bucket over the
 * calendar), the reports that cross a month boundary whole, split here by
 * usage_share. */
static int usage_by_month(PGconn *db, const char *ids, const char *asof,
                          struct batch *b, bool *oom, char *err, size_t errlen)
{
	/* one pass over the reports: the sums of those inside one month,
	 * and those that cross a month boundary whole (cross = true) */
	static const char *sql =
	    "WITH r AS MATERIALIZED (SELECT contract_id, side = 'buyer' AS b, "
	    "period_start_ns AS s, period_end_ns AS e, billable_ps AS ps, "
	    "width_bucket(period_start_ns, $3::bigint[]) AS sk, "
	    "width_bucket(period_end_ns - 1, $3::bigint[]) AS ek FROM "
	    "usage_reports WHERE contract_id = ANY($1::bigint[]) AND "
	    "period_start_ns < $2::bigint) SELECT contract_id, b, sk, "
	    "sum(ps)::bigint, 0::bigint, 0::bigint, false FROM r WHERE sk = ek "
	    "GROUP BY 1, 2, 3 UNION ALL SELECT contract_id, b, sk, ps, s, e, "
	    "true FROM r WHERE sk <> ek";
	pthread_once(&bounds_once, bounds_build);
	if (!bounds_text)
		return err_set(err, errlen, "out of memory for the calendar");
	const char *pv[] = {ids, asof, bounds_text};
	PGresult *r = db_exec(db, PGRES_TUPLES_OK, sql, 3, pv, err, errlen);
	if (!r)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		struct bc *c = find_contract(b, db_int(r, i, 0));
		if (!c)
			continue;
		bool buyer = PQgetvalue(r, i, 1)[0] == 't';
		if (PQgetvalue(r, i, 6)[0] != 't') {
			add_usage(c, buyer,
			          MONEY_YEAR_MIN * 12 + (int)db_int(r, i, 2) -
			              1,
			          db_int(r, i, 3), oom);
			continue;
		}
		struct usage_report u = {.contract_id = c->k.id,
		                         .period_start = db_int(r, i, 4),
		                         .period_end = db_int(r, i, 5),
		                         .page_seconds = db_int(r, i, 3)};
		int y, mo;
		money_month_of(u.period_start, &y, &mo);
		while (money_month_start(y, mo) < u.period_end) {
			rx_pagesec s =
			    usage_share(&u, money_month_start(y, mo),
			                money_month_start(y, mo + 1));
			add_usage(c, buyer, key_of(y, mo), s, oom);
			if (++mo > 12) {
				mo = 1;
				y++;
			}
		}
	}
	PQclear(r);
	return 0;
}

/* Loads the usage of the batch per contract, side and month, and what each
 * month has billed so far; marks the contracts with reports that start at
 * or after as_of (c->later: for a later run).
 *
 * Most contracts of a run have all their reports inside one month (a
 * month's daily or hourly reports, billed in that month or just after).
 * For them, one sum per contract and side, with the earliest start and
 * the latest end, is the month's sum: an aggregate in index order, about
 * three times cheaper than giving every report its month in SQL and
 * sorting by it (EXPLAIN ANALYZE, 500 contracts x 39 reports: 13 against
 * 45 ms). The contracts whose reports span more than one month go through
 * usage_by_month, so the rounding of a report across a month boundary is
 * always usage_share's, in C. */
static int load_usage(PGconn *db, const char *ids, rx_time_ns as_of,
                      struct batch *b, char *err, size_t errlen)
{
	static const char *sql =
	    "SELECT contract_id, side = 'buyer', sum(billable_ps) FILTER "
	    "(WHERE period_start_ns < $2::bigint)::bigint, "
	    "min(period_start_ns) "
	    "FILTER (WHERE period_start_ns < $2::bigint), max(period_end_ns) "
	    "FILTER (WHERE period_start_ns < $2::bigint), bool_or("
	    "period_start_ns >= $2::bigint) FROM usage_reports WHERE "
	    "contract_id = ANY($1::bigint[]) GROUP BY 1, 2";
	char asof[24];
	snprintf(asof, sizeof asof, "%" PRId64, as_of);
	const char *pv[] = {ids, asof};
	bool oom = false;
	struct pgarr spans = {0};
	int rc = -1;
	PGresult *r = db_exec(db, PGRES_TUPLES_OK, sql, 2, pv, err, errlen);
	if (!r)
		return -1;
	int n = PQntuples(r);
	/* first the contracts with a side whose reports span months */
	for (int i = 0; i < n; i++) {
		struct bc *c = find_contract(b, db_int(r, i, 0));
		if (!c)
			continue;
		if (PQgetvalue(r, i, 5)[0] == 't')
			c->later = true;
		if (PQgetisnull(r, i, 2))
			continue; /* every report is for a later run */
		int y0, m0, y1, m1;
		money_month_of(db_int(r, i, 3), &y0, &m0);
		money_month_of(db_int(r, i, 4) - 1, &y1, &m1);
		if ((y0 != y1 || m0 != m1) && !c->spans) {
			c->spans = true;
			pgarr_i64(&spans, c->k.id);
		}
	}
	for (int i = 0; i < n; i++) {
		struct bc *c = find_contract(b, db_int(r, i, 0));
		if (!c || c->spans || PQgetisnull(r, i, 2))
			continue;
		int y, mo;
		money_month_of(db_int(r, i, 3), &y, &mo);
		add_usage(c, PQgetvalue(r, i, 1)[0] == 't', key_of(y, mo),
		          db_int(r, i, 2), &oom);
	}
	PQclear(r);
	r = NULL;
	if (spans.count > 0) {
		const char *st = pgarr_text(&spans);
		if (!st) {
			err_set(err, errlen, "out of memory loading usage");
			goto out;
		}
		if (usage_by_month(db, st, asof, b, &oom, err, errlen) < 0)
			goto out;
	}
	static const char *billed =
	    "SELECT contract_id, year, month, billed_ps FROM billing_months "
	    "WHERE contract_id = ANY($1::bigint[])";
	r = db_exec(db, PGRES_TUPLES_OK, billed, 1, pv, err, errlen);
	if (!r)
		goto out;
	for (int i = 0; i < PQntuples(r); i++) {
		struct bc *c = find_contract(b, db_int(r, i, 0));
		if (!c)
			continue;
		struct month *m = month_get(
		    c, key_of((int)db_int(r, i, 1), (int)db_int(r, i, 2)));
		if (!m) {
			oom = true;
			break;
		}
		m->billed = db_int(r, i, 3);
	}
	if (oom) {
		err_set(err, errlen, "out of memory loading usage");
		goto out;
	}
	rc = 0;
out:
	PQclear(r);
	pgarr_free(&spans);
	return rc;
}

/* The volume-weighted price of offline spot trades (an operator bought)
 * over [from, to): the spot reference of a breached perm contract. false
 * when there were none. */
static int spot_reference(PGconn *db, rx_time_ns from, rx_time_ns to,
                          rx_price *out, bool *found, char *err, size_t errlen)
{
	static const char *sql =
	    "SELECT floor(sum(t.price::numeric * t.pages) / sum(t.pages))"
	    "::bigint FROM trades t JOIN markets m ON m.id = t.market_id AND "
	    "m.product = 'spot' JOIN accounts a ON a.id = t.buyer_id AND "
	    "a.kind = 'operator' WHERE t.ts_ns >= $1::bigint AND t.ts_ns < "
	    "$2::bigint";
	char f[24], t[24];
	snprintf(f, sizeof f, "%" PRId64, from);
	snprintf(t, sizeof t, "%" PRId64, to);
	const char *pv[] = {f, t};
	PGresult *r = db_exec(db, PGRES_TUPLES_OK, sql, 2, pv, err, errlen);
	if (!r)
		return -1;
	*found = !PQgetisnull(r, 0, 0);
	*out = *found ? db_int(r, 0, 0) : 0;
	PQclear(r);
	return 0;
}

static struct mv *mv_new(struct batch *b)
{
	if (b->nmv == b->capmv) {
		int cap = b->capmv ? b->capmv * 2 : 64;
		struct mv *m = realloc(b->mv, (size_t)cap * sizeof *m);
		if (!m)
			return NULL;
		b->mv = m;
		b->capmv = cap;
	}
	struct mv *m = &b->mv[b->nmv];
	memset(m, 0, sizeof *m);
	return m;
}

/* Prices what is new for contract c; appends its movements to b. */
static int bill_contract(PGconn *db, struct batch *b, struct bc *c,
                         rx_time_ns as_of, rx_time_ns grace, int64_t exchange,
                         struct billing_result *res, char *err, size_t errlen)
{
	char why[INVOICE_MSG_MAX];
	if (c->nm > 1)
		qsort(c->m, (size_t)c->nm, sizeof *c->m, month_cmp);
	rx_time_ns span_from = 0, span_to = 0;
	bool spanned =
	    contract_delivery_span(&c->k, as_of, &span_from, &span_to);
	rx_pagesec delivered = 0;
	for (int i = 0; i < c->nm; i++) {
		struct month *m = &c->m[i];
		rx_pagesec usage;
		enum usage_recon_flag before = m->recon;
		if (c->k.delivery == CONTRACT_LEND) {
			struct usage_recon rc =
			    usage_reconcile(c->k.pages, m->seller_rep,
			                    m->seller, m->buyer_rep, m->buyer);
			usage = rc.billed;
			m->recon = rc.flag;
			if (rc.flag == USAGE_RECON_DIFFER ||
			    rc.flag == USAGE_RECON_ONE_SIDED)
				res->flagged++;
		} else {
			usage = m->seller; /* the operator does not report */
			m->offline = true;
			m->recon = m->seller_rep ? USAGE_RECON_AGREE
			                         : USAGE_RECON_NONE;
		}
		m->touched = m->touched || m->recon != before ||
		             m->seller_rep || m->buyer_rep;
		delivered += usage;
		if (c->ic.settled)
			continue; /* a settled perm contract re-settles below */
		int y = m->key / 12, mo = m->key % 12 + 1;
		struct invoice_due due;
		invoice_plan(usage, m->billed, y, mo, as_of, grace, &due);
		if (due.ps == 0)
			continue;
		rx_time_ns from = money_month_start(y, mo),
		           to = money_month_start(y, mo + 1);
		if (spanned) {
			if (from < span_from)
				from = span_from;
			if (to > span_to)
				to = span_to;
			if (from >= to) {
				from = money_month_start(y, mo);
				to = money_month_start(y, mo + 1);
			}
		}
		struct mv *v = mv_new(b);
		if (!v)
			return err_set(err, errlen,
			               "out of memory for movements");
		if (invoice_charge(&c->ic, &due, from, to, 0, exchange, &v->m,
		                   why, sizeof why) < 0)
			return err_set(err, errlen, "contract %" PRId64 ": %s",
			               c->k.id, why);
		v->usage_key = m->key;
		v->recon = c->k.delivery == CONTRACT_LEND
		               ? usage_recon_name(m->recon)
		               : NULL;
		b->nmv++;
		m->billed += due.ps;
		m->touched = true;
		c->changed = true;
	}
	/* A perm contract that is over settles (docs/money.md). */
	if (contract_rules_of(c->k.product)->settle == CONTRACT_SETTLE_TERM &&
	    c->k.delivered_at > 0 && c->k.ended_at > 0 &&
	    c->k.ended_at <= as_of &&
	    (c->k.state == CONTRACT_ENDED || c->k.state == CONTRACT_BREACHED)) {
		rx_price ref = c->k.price;
		bool found = false;
		if (c->k.state == CONTRACT_BREACHED &&
		    spot_reference(db, c->k.delivered_at, c->k.ended_at, &ref,
		                   &found, err, errlen) < 0)
			return -1;
		if (!found)
			ref =
			    c->k.price; /* no spot trades: the contract price */
		struct mv *v = mv_new(b);
		if (!v)
			return err_set(err, errlen,
			               "out of memory for movements");
		bool was = c->ic.settled;
		rx_price at;
		if (invoice_settle(&c->ic, &c->k, delivered, ref, as_of, grace,
		                   0, exchange, &at, &v->m, why,
		                   sizeof why) < 0)
			return err_set(err, errlen, "contract %" PRId64 ": %s",
			               c->k.id, why);
		c->settle_price = at;
		c->spot_ref = ref;
		c->has_settle = true;
		c->changed = true;
		if (!was)
			res->settled++;
		if (v->m.amount != 0 || !was) {
			v->usage_key = -1;
			b->nmv++;
		}
		for (int i = 0; i < c->nm; i++)
			c->m[i].touched = true;
	}
	return 0;
}

static int inv_cmp(const void *a, const void *b)
{
	const struct inv_key *x = a, *y = b;
	if (x->account != y->account)
		return x->account < y->account ? -1 : 1;
	return (x->key > y->key) - (x->key < y->key);
}

static struct inv_key *inv_find(struct batch *b, int64_t account, int key)
{
	struct inv_key k = {.account = account, .key = key};
	return bsearch(&k, b->inv, (size_t)b->ninv, sizeof *b->inv, inv_cmp);
}

/* Makes sure every invoice the movements land on exists; loads them. */
static int load_invoices(PGconn *db, struct batch *b, char *err, size_t errlen)
{
	int want = 0;
	for (int i = 0; i < b->nmv; i++)
		want += b->mv[i].m.n;
	b->inv = calloc((size_t)(want ? want : 1), sizeof *b->inv);
	if (!b->inv)
		return err_set(err, errlen, "out of memory for invoices");
	for (int i = 0; i < b->nmv; i++)
		for (int p = 0; p < b->mv[i].m.n; p++) {
			struct invoice_posting *ps = &b->mv[i].m.p[p];
			b->inv[b->ninv].account = ps->account;
			b->inv[b->ninv].key = key_of(ps->year, ps->month);
			b->ninv++;
		}
	qsort(b->inv, (size_t)b->ninv, sizeof *b->inv, inv_cmp);
	int u = 0;
	for (int i = 0; i < b->ninv; i++)
		if (u == 0 || inv_cmp(&b->inv[u - 1], &b->inv[i]) != 0)
			b->inv[u++] = b->inv[i];
	b->ninv = u;
	if (u == 0)
		return 0;
	struct pgarr col[3] = {{0}}; /* account, year, month */
	for (int i = 0; i < u; i++) {
		pgarr_i64(&col[0], b->inv[i].account);
		pgarr_i64(&col[1], b->inv[i].key / 12);
		pgarr_i64(&col[2], b->inv[i].key % 12 + 1);
	}
	const char *pv[3];
	int rc = -1;
	PGresult *r = NULL;
	if (pgarr_params(col, 3, pv) < 0) {
		err_set(err, errlen, "out of memory for invoices");
		goto out;
	}
	r = db_exec(db, PGRES_COMMAND_OK,
	            "INSERT INTO invoices (account_id, year, month) SELECT * "
	            "FROM unnest($1::bigint[], $2::int[], $3::int[]) ON "
	            "CONFLICT (account_id, year, month) DO NOTHING",
	            3, pv, err, errlen);
	if (!r)
		goto out;
	PQclear(r);
	r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "SELECT i.id, i.account_id, i.year, i.month, i.status, "
	    "i.total, i.lines FROM invoices i JOIN unnest($1::bigint[], "
	    "$2::int[], $3::int[]) x(a, y, m) ON i.account_id = x.a AND "
	    "i.year = x.y AND i.month = x.m WHERE i.account_id = "
	    "ANY($1::bigint[])",
	    3, pv, err, errlen);
	if (!r)
		goto out;
	for (int i = 0; i < PQntuples(r); i++) {
		struct inv_key *k = inv_find(
		    b, db_int(r, i, 1),
		    key_of((int)db_int(r, i, 2), (int)db_int(r, i, 3)));
		if (!k)
			continue;
		k->id = db_int(r, i, 0);
		k->inv = (struct invoice){
		    .id = k->id,
		    .account = k->account,
		    .year = k->key / 12,
		    .month = k->key % 12 + 1,
		    .status = strcmp(PQgetvalue(r, i, 4), "final") == 0
		                  ? INVOICE_FINAL
		                  : INVOICE_DRAFT,
		    .total = db_int(r, i, 5),
		    .lines = db_int(r, i, 6)};
	}
	rc = 0;
out:
	PQclear(r);
	for (int i = 0; i < 3; i++)
		pgarr_free(&col[i]);
	return rc;
}

/* Stores the batch's movements, postings, invoice totals and state. */
static int store_batch(PGconn *db, struct batch *b, struct phases *ph,
                       struct billing_result *res, char *err, size_t errlen)
{
	char why[INVOICE_MSG_MAX], n[24];
	int rc = -1;
	PGresult *r = NULL;
	enum {
		M_ID,
		M_C,
		M_KIND,
		M_Y,
		M_M,
		M_UY,
		M_UM,
		M_FROM,
		M_TO,
		M_PS,
		M_PRICE,
		M_AMT,
		M_FEE,
		M_RECON,
		M_N
	};
	enum { P_MV, P_INV, P_ACC, P_C, P_Y, P_M, P_ROLE, P_AMT, P_N };
	struct pgarr ma[M_N] = {{0}}, pa[P_N] = {{0}}, ia[3] = {{0}};
	struct pgarr ca[10] = {{0}}, mo[7] = {{0}};

	if (b->nmv > 0) {
		if (load_invoices(db, b, err, errlen) < 0)
			goto out;
		lap(ph, PH_INVOICES);
		snprintf(n, sizeof n, "%d", b->nmv);
		const char *pv[] = {n};
		r = db_exec(db, PGRES_TUPLES_OK,
		            "SELECT nextval('movements_id_seq') FROM "
		            "generate_series(1, $1::int)",
		            1, pv, err, errlen);
		if (!r)
			goto out;
		for (int i = 0; i < b->nmv; i++) {
			struct invoice_movement *m = &b->mv[i].m;
			m->movement_id = db_int(r, i, 0);
			for (int p = 0; p < m->n; p++)
				m->p[p].movement_id = m->movement_id;
		}
		PQclear(r);
		r = NULL;
	}
	for (int i = 0; i < b->nmv; i++) {
		struct mv *v = &b->mv[i];
		struct invoice_movement *m = &v->m;
		pgarr_i64(&ma[M_ID], m->movement_id);
		pgarr_i64(&ma[M_C], m->contract_id);
		pgarr_raw(&ma[M_KIND], invoice_kind_name(m->kind));
		pgarr_i64(&ma[M_Y], m->year);
		pgarr_i64(&ma[M_M], m->month);
		if (v->usage_key >= 0) {
			pgarr_i64(&ma[M_UY], v->usage_key / 12);
			pgarr_i64(&ma[M_UM], v->usage_key % 12 + 1);
		} else {
			pgarr_raw(&ma[M_UY], "NULL");
			pgarr_raw(&ma[M_UM], "NULL");
		}
		pgarr_i64(&ma[M_FROM], m->charge_start);
		pgarr_i64(&ma[M_TO], m->charge_end);
		pgarr_i64(&ma[M_PS], m->page_seconds);
		pgarr_i64(&ma[M_PRICE], m->unit_price);
		pgarr_i64(&ma[M_AMT], m->amount);
		pgarr_i64(&ma[M_FEE], m->fee);
		pgarr_raw(&ma[M_RECON], v->recon ? v->recon : "NULL");
		for (int p = 0; p < m->n; p++) {
			struct invoice_posting *ps = &m->p[p];
			struct inv_key *k = inv_find(
			    b, ps->account, key_of(ps->year, ps->month));
			if (!k || !k->id) {
				err_set(err, errlen,
				        "no invoice for account %" PRId64
				        " %04d-%02d",
				        ps->account, ps->year, ps->month);
				goto out;
			}
			if (invoice_add(&k->inv, ps, why, sizeof why) < 0) {
				err_set(err, errlen, "contract %" PRId64 ": %s",
				        m->contract_id, why);
				goto out;
			}
			k->changed = true;
			pgarr_i64(&pa[P_MV], ps->movement_id);
			pgarr_i64(&pa[P_INV], k->id);
			pgarr_i64(&pa[P_ACC], ps->account);
			pgarr_i64(&pa[P_C], ps->contract_id);
			pgarr_i64(&pa[P_Y], ps->year);
			pgarr_i64(&pa[P_M], ps->month);
			pgarr_raw(&pa[P_ROLE], invoice_role_name(ps->role));
			pgarr_i64(&pa[P_AMT], ps->amount);
			res->postings++;
		}
		res->movements++;
	}
	if (b->nmv > 0) {
		const char *pv[M_N];
		if (pgarr_params(ma, M_N, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO movements (id, contract_id, kind, year, "
		    "month, usage_year, usage_month, charge_start_ns, "
		    "charge_end_ns, page_seconds, unit_price, amount, "
		    "fee, recon) SELECT * FROM unnest($1::bigint[], "
		    "$2::bigint[], $3::text[], $4::int[], $5::int[], "
		    "$6::int[], $7::int[], $8::bigint[], $9::bigint[], "
		    "$10::bigint[], $11::bigint[], $12::bigint[], "
		    "$13::bigint[], $14::text[])",
		    M_N, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		const char *qv[P_N];
		if (pgarr_params(pa, P_N, qv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO postings (movement_id, invoice_id, "
		    "account_id, contract_id, year, month, role, amount) "
		    "SELECT * FROM unnest($1::bigint[], $2::bigint[], "
		    "$3::bigint[], $4::bigint[], $5::int[], $6::int[], "
		    "$7::text[], $8::bigint[])",
		    P_N, qv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		for (int i = 0; i < b->ninv; i++) {
			if (!b->inv[i].changed)
				continue;
			pgarr_i64(&ia[0], b->inv[i].id);
			pgarr_i64(&ia[1], b->inv[i].inv.total);
			pgarr_i64(&ia[2], b->inv[i].inv.lines);
		}
		const char *iv[3];
		if (pgarr_params(ia, 3, iv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "UPDATE invoices i SET total = x.t, lines = x.l FROM "
		    "unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
		    "x(id, t, l) WHERE i.id = x.id AND i.id = "
		    "ANY($1::bigint[])",
		    3, iv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	lap(ph, PH_LEDGER);
	/* the billing state of each contract and month */
	int nchanged = 0, nmonths = 0;
	for (int i = 0; i < b->nc; i++) {
		struct bc *c = &b->c[i];
		for (int k = 0; k < c->nm; k++) {
			struct month *m = &c->m[k];
			if (!m->touched)
				continue;
			pgarr_i64(&mo[0], c->k.id);
			pgarr_i64(&mo[1], m->key / 12);
			pgarr_i64(&mo[2], m->key % 12 + 1);
			pgarr_i64(&mo[3], m->billed);
			if (m->seller_rep)
				pgarr_i64(&mo[4], m->seller);
			else
				pgarr_raw(&mo[4], "NULL");
			if (m->buyer_rep)
				pgarr_i64(&mo[5], m->buyer);
			else
				pgarr_raw(&mo[5], "NULL");
			pgarr_raw(&mo[6], m->offline
			                      ? "seller_only"
			                      : usage_recon_name(m->recon));
			nmonths++;
		}
		if (!c->changed)
			continue;
		struct invoice_contract *ic = &c->ic;
		pgarr_i64(&ca[0], c->k.id);
		pgarr_i64(&ca[1], ic->fee_bps);
		pgarr_i64(&ca[2], ic->amount_carry.rem);
		pgarr_i64(&ca[3], ic->fee_carry.rem);
		pgarr_i64(&ca[4], ic->billed_ps);
		pgarr_i64(&ca[5], ic->billed);
		pgarr_i64(&ca[6], ic->fees);
		pgarr_raw(&ca[7], ic->settled ? "true" : "false");
		if (c->has_settle) {
			pgarr_i64(&ca[8], c->settle_price);
			pgarr_i64(&ca[9], c->spot_ref);
		} else {
			pgarr_raw(&ca[8], "NULL");
			pgarr_raw(&ca[9], "NULL");
		}
		nchanged++;
	}
	if (nchanged) {
		const char *pv[10];
		if (pgarr_params(ca, 10, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_contracts (contract_id, fee_bps, "
		    "amount_carry, fee_carry, billed_ps, billed, fees, "
		    "settled, "
		    "settle_price, spot_reference) SELECT * FROM "
		    "unnest($1::bigint[], $2::int[], $3::bigint[], "
		    "$4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
		    "$8::boolean[], $9::bigint[], $10::bigint[]) ON CONFLICT "
		    "(contract_id) DO UPDATE SET amount_carry = "
		    "EXCLUDED.amount_carry, fee_carry = EXCLUDED.fee_carry, "
		    "billed_ps = EXCLUDED.billed_ps, billed = EXCLUDED.billed, "
		    "fees = EXCLUDED.fees, settled = EXCLUDED.settled, "
		    "settle_price = coalesce(EXCLUDED.settle_price, "
		    "billing_contracts.settle_price), spot_reference = "
		    "coalesce(EXCLUDED.spot_reference, "
		    "billing_contracts.spot_reference), updated_at = now()",
		    10, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	if (nmonths) {
		const char *pv[7];
		if (pgarr_params(mo, 7, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_months (contract_id, year, month, "
		    "billed_ps, seller_ps, buyer_ps, recon) SELECT * FROM "
		    "unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], "
		    "$5::bigint[], $6::bigint[], $7::text[]) ON CONFLICT "
		    "(contract_id, year, month) DO UPDATE SET billed_ps = "
		    "EXCLUDED.billed_ps, seller_ps = EXCLUDED.seller_ps, "
		    "buyer_ps = EXCLUDED.buyer_ps, recon = EXCLUDED.recon, "
		    "updated_at = now()",
		    7, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	rc = 0;
out:
	PQclear(r);
	for (int i = 0; i < M_N; i++)
		pgarr_free(&ma[i]);
	for (int i = 0; i < P_N; i++)
		pgarr_free(&pa[i]);
	for (int i = 0; i < 3; i++)
		pgarr_free(&ia[i]);
	for (int i = 0; i < 10; i++)
		pgarr_free(&ca[i]);
	for (int i = 0; i < 7; i++)
		pgarr_free(&mo[i]);
	return rc;
}

static int exec_simple(PGconn *db, const char *sql, char *err, size_t errlen)
{
	PGresult *r = db_exec(db, PGRES_COMMAND_OK, sql, 0, NULL, err, errlen);
	if (!r)
		return -1;
	PQclear(r);
	return 0;
}

/* One batch in one transaction. *taken: how many dirty contracts it took
 * (0: nothing left to do). */
static int exchange_account(PGconn *db, int64_t *id, char *err, size_t errlen);

static int run_batch(struct billing *bl, rx_time_ns as_of, int64_t *exchange,
                     struct phases *ph, int64_t *after,
                     struct billing_result *res, int *taken, char *err,
                     size_t errlen)
{
	PGconn *db = bl->conn;
	struct batch b = {0};
	PGresult *r = NULL;
	struct pgarr ids = {0}, later = {0};
	char lim[24], aft[24];
	int rc = -1;
	*taken = 0;
	lap_start(ph);
	if (exec_simple(db, "BEGIN", err, errlen) < 0)
		return -1;
	snprintf(lim, sizeof lim, "%d", bl->o.batch);
	snprintf(aft, sizeof aft, "%" PRId64, *after);
	const char *pv[] = {lim, aft};
	/* In id order from after the last batch's: the index scan starts
	 * past the entries this run has deleted (a scan from the start walked
	 * over all of them, batch after batch), and a contract put back for a
	 * later run is not taken again by this one. = ANY(ARRAY(...)) deletes
	 * by the key: with IN (...) PostgreSQL scanned the whole table into a
	 * hash join (EXPLAIN ANALYZE: 4-6 ms a batch at 40 000 contracts). */
	r = db_exec(db, PGRES_TUPLES_OK,
	            "DELETE FROM billing_dirty WHERE contract_id = ANY(ARRAY("
	            "SELECT contract_id FROM billing_dirty WHERE contract_id > "
	            "$2::bigint ORDER BY contract_id LIMIT $1::int FOR UPDATE "
	            "SKIP LOCKED)) RETURNING contract_id",
	            2, pv, err, errlen);
	if (!r)
		goto out;
	*taken = PQntuples(r);
	for (int i = 0; i < *taken; i++) {
		int64_t id = db_int(r, i, 0);
		pgarr_i64(&ids, id);
		if (id > *after)
			*after = id;
	}
	PQclear(r);
	r = NULL;
	lap(ph, PH_TAKE);
	if (*taken == 0) {
		rc = exec_simple(db, "COMMIT", err, errlen);
		lap(ph, PH_COMMIT);
		goto done;
	}
	ph->batches++;
	const char *idt = pgarr_text(&ids);
	if (!idt) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	rx_time_ns grace = bl->o.grace_s * MONEY_NS_PER_S;
	if (load_contracts(db, idt, bl->o.fee_bps, &b, err, errlen) < 0)
		goto out;
	lap(ph, PH_CONTRACTS);
	if (load_usage(db, idt, as_of, &b, err, errlen) < 0)
		goto out;
	lap(ph, PH_USAGE);
	for (int i = 0; i < b.nc; i++) {
		/* a contract keeps the fee of its first billing, even when the
		 * setting is 0 now */
		if (b.c[i].ic.fee_bps > 0 && *exchange == 0 &&
		    exchange_account(db, exchange, err, errlen) < 0)
			goto out;
		if (bill_contract(db, &b, &b.c[i], as_of, grace, *exchange, res,
		                  err, errlen) < 0)
			goto out;
		res->contracts++;
	}
	lap(ph, PH_PRICE);
	if (store_batch(db, &b, ph, res, err, errlen) < 0)
		goto out;
	/* Reports that start at or after as_of, and perm contracts that end
	 * after it (a run as of the past), are for a later run. */
	for (int i = 0; i < b.nc; i++) {
		const struct contract *k = &b.c[i].k;
		if (b.c[i].later ||
		    (k->product == CONTRACT_PERM && k->delivered_at > 0 &&
		     (k->state == CONTRACT_ENDED ||
		      k->state == CONTRACT_BREACHED) &&
		     k->ended_at > as_of))
			pgarr_i64(&later, k->id);
	}
	if (later.count > 0) {
		const char *rv[] = {pgarr_text(&later)};
		if (!rv[0]) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(db, PGRES_COMMAND_OK,
		            "INSERT INTO billing_dirty (contract_id) SELECT "
		            "unnest($1::bigint[]) ON CONFLICT DO NOTHING",
		            1, rv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	lap(ph, PH_STATE);
	rc = exec_simple(db, "COMMIT", err, errlen);
	lap(ph, PH_COMMIT);
	goto done;
out:
	PQclear(r);
	{
		PGresult *rb = PQexec(db, "ROLLBACK");
		PQclear(rb);
	}
done:
	pgarr_free(&ids);
	pgarr_free(&later);
	batch_free(&b);
	return rc;
}

/* Finalizes every draft invoice whose month and grace are over at as_of,
 * in account and month order, carrying each account's sub-cent part. */
static int finalize(struct billing *bl, rx_time_ns as_of,
                    struct billing_result *res, char *err, size_t errlen)
{
	PGconn *db = bl->conn;
	rx_time_ns grace = bl->o.grace_s * MONEY_NS_PER_S;
	if (as_of - grace < 0)
		return 0;
	int y, mo;
	money_month_of(as_of - grace, &y, &mo);
	char cut[24];
	snprintf(cut, sizeof cut, "%d", key_of(y, mo));
	struct pgarr a[5] = {{0}}, ca[2] = {{0}};
	int rc = -1;
	PGresult *r = NULL;
	if (exec_simple(db, "BEGIN", err, errlen) < 0)
		return -1;
	const char *pv[] = {cut};
	r = db_exec(db, PGRES_TUPLES_OK,
	            "SELECT i.id, i.account_id, i.year, i.month, i.total, "
	            "i.lines, coalesce(c.rem, 0) FROM invoices i LEFT JOIN "
	            "billing_cents c ON c.account_id = i.account_id WHERE "
	            "i.status = 'draft' AND i.year * 12 + i.month - 1 < "
	            "$1::int ORDER BY i.account_id, i.year, i.month FOR UPDATE "
	            "OF i",
	            1, pv, err, errlen);
	if (!r)
		goto out;
	int n = PQntuples(r);
	struct money_carry carry = {0};
	for (int i = 0; i < n; i++) {
		int64_t acct = db_int(r, i, 1);
		if (i == 0 || acct != db_int(r, i - 1, 1))
			carry.rem = db_int(r, i, 6);
		struct invoice inv = {.id = db_int(r, i, 0),
		                      .account = acct,
		                      .year = (int)db_int(r, i, 2),
		                      .month = (int)db_int(r, i, 3),
		                      .status = INVOICE_DRAFT,
		                      .total = db_int(r, i, 4),
		                      .lines = db_int(r, i, 5)};
		char why[INVOICE_MSG_MAX];
		if (invoice_finalize(&inv, &carry, as_of, grace, why,
		                     sizeof why) < 0) {
			err_set(err, errlen, "%s", why);
			goto out;
		}
		pgarr_i64(&a[0], inv.id);
		pgarr_i64(&a[1], inv.payable_cents);
		pgarr_i64(&a[2], inv.cents_in.rem);
		pgarr_i64(&a[3], inv.cents_out.rem);
		if (i + 1 == n || db_int(r, i + 1, 1) != acct) {
			pgarr_i64(&ca[0], acct);
			pgarr_i64(&ca[1], carry.rem);
		}
		res->finalized++;
	}
	PQclear(r);
	r = NULL;
	if (n > 0) {
		const char *iv[4], *cv[2];
		if (pgarr_params(a, 4, iv) < 0 || pgarr_params(ca, 2, cv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "UPDATE invoices i SET status = 'final', "
		    "payable_cents = x.c, cents_in = x.ci, cents_out = "
		    "x.co, finalized_at = now() FROM unnest($1::bigint[], "
		    "$2::bigint[], $3::bigint[], $4::bigint[]) x(id, c, "
		    "ci, co) WHERE i.id = x.id",
		    4, iv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_cents (account_id, rem) SELECT * "
		    "FROM unnest($1::bigint[], $2::bigint[]) ON CONFLICT "
		    "(account_id) DO UPDATE SET rem = EXCLUDED.rem",
		    2, cv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	rc = exec_simple(db, "COMMIT", err, errlen);
	goto done;
out:
	PQclear(r);
	{
		PGresult *rb = PQexec(db, "ROLLBACK");
		PQclear(rb);
	}
done:
	for (int i = 0; i < 5; i++)
		pgarr_free(&a[i]);
	for (int i = 0; i < 2; i++)
		pgarr_free(&ca[i]);
	return rc;
}

/* The exchange's account, made when a fee needs one. */
static int exchange_account(PGconn *db, int64_t *id, char *err, size_t errlen)
{
	PGresult *r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "WITH made AS (INSERT INTO accounts (name, kind) SELECT "
	    "'exchange', 'exchange' WHERE NOT EXISTS (SELECT 1 FROM accounts "
	    "WHERE kind = 'exchange') ON CONFLICT (name) DO NOTHING RETURNING "
	    "id) SELECT id FROM made UNION ALL (SELECT id FROM accounts WHERE "
	    "kind = 'exchange' ORDER BY id LIMIT 1)",
	    0, NULL, err, errlen);
	if (!r)
		return -1;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(
		    err, errlen,
		    "no account of kind exchange, and the name "
		    "'exchange' is taken by another kind; create one "
		    "with POST /v1/accounts");
	}
	*id = db_int(r, 0, 0);
	PQclear(r);
	return 0;
}

static int run_locked(struct billing *bl, rx_time_ns as_of, int api,
                      struct billing_result *out, char *err, size_t errlen)
{
	char e[BILLING_MSG_MAX];
	if (bl->conn && db_broken(bl->conn)) {
		PQfinish(bl->conn);
		bl->conn = NULL;
	}
	if (!bl->conn && !(bl->conn = db_connect(bl->conninfo, e, sizeof e)))
		return err_set(err, errlen, "%s", e);
	PGconn *db = bl->conn;
	rx_time_ns real = now_ns();
	if (as_of == 0)
		as_of = real;
	if (as_of > real) {
		err_set(err, errlen,
		        "as_of_ns %" PRId64
		        " is in the future; billing runs as "
		        "of now or a past instant",
		        as_of);
		return -2;
	}
	PGresult *r = db_exec(db, PGRES_TUPLES_OK,
	                      "SELECT pg_try_advisory_lock(" BILLING_LOCK ")",
	                      0, NULL, e, sizeof e);
	if (!r)
		return err_set(err, errlen, "%s", e);
	bool locked = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!locked) {
		err_set(err, errlen,
		        "another billing run holds the lock now; retry when it "
		        "is done");
		return -2;
	}
	int rc = -1;
	struct billing_result res = {.as_of = as_of};
	struct phases ph;
	memset(&ph, 0, sizeof ph);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = db_exec(db, PGRES_TUPLES_OK,
	            "SELECT coalesce(max(as_of_ns), 0) FROM billing_runs", 0,
	            NULL, e, sizeof e);
	if (!r) {
		err_set(err, errlen, "%s", e);
		goto out;
	}
	int64_t last = db_int(r, 0, 0);
	PQclear(r);
	if (as_of < last) {
		err_set(err, errlen,
		        "as_of_ns %" PRId64
		        " is before the last run's (%" PRId64
		        "); billing never goes back in time",
		        as_of, last);
		rc = -2;
		goto out;
	}
	int64_t exch = 0;
	if (bl->o.fee_bps > 0 && exchange_account(db, &exch, e, sizeof e) < 0) {
		err_set(err, errlen, "%s", e);
		goto out;
	}
	int64_t after = 0; /* the highest contract id taken so far */
	for (;;) {
		int taken;
		if (run_batch(bl, as_of, &exch, &ph, &after, &res, &taken, e,
		              sizeof e) < 0) {
			err_set(err, errlen, "billing stopped: %s", e);
			goto out;
		}
		if (taken < bl->o.batch)
			break;
	}
	lap_start(&ph);
	if (finalize(bl, as_of, &res, e, sizeof e) < 0) {
		err_set(err, errlen, "finalizing invoices: %s", e);
		goto out;
	}
	lap(&ph, PH_FINALIZE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res.elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	                 (t1.tv_nsec - t0.tv_nsec) / 1000000;
	char v[9][24];
	int64_t vals[9] = {as_of,         res.elapsed_ms, res.contracts,
	                   res.movements, res.postings,   res.settled,
	                   res.finalized, res.flagged,    0};
	for (int i = 0; i < 8; i++)
		snprintf(v[i], sizeof v[i], "%" PRId64, vals[i]);
	const char *pv[] = {v[0], v[1], v[2],
	                    v[3], v[4], v[5],
	                    v[6], v[7], api ? "api" : "timer"};
	r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "INSERT INTO billing_runs (as_of_ns, elapsed_ms, contracts, "
	    "movements, postings, settled, finalized, flagged, trigger) "
	    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
	    9, pv, e, sizeof e);
	if (!r) {
		err_set(err, errlen, "recording the run: %s", e);
		goto out;
	}
	res.run_id = db_int(r, 0, 0);
	PQclear(r);
	*out = res;
	rc = 0;
	if (res.contracts > 0 || res.finalized > 0) {
		char t[PH_N * 32];
		size_t k = 0;
		for (int i = 0; i < PH_N && k < sizeof t; i++)
			k += (size_t)snprintf(
			    t + k, sizeof t - k, "%s%s_ms=%" PRId64 ".%" PRId64,
			    i ? " " : "", phase_name[i], ph.us[i] / 1000,
			    ph.us[i] % 1000 / 100);
		log_info("billing run phases",
		         "run=%" PRId64 " contracts=%" PRId64
		         " batches=%" PRId64 " ms=%" PRId64 " %s",
		         res.run_id, res.contracts, ph.batches, res.elapsed_ms,
		         t);
	}
out:
	r = PQexec(db, "SELECT pg_advisory_unlock(" BILLING_LOCK ")");
	PQclear(r);
	return rc;
}

int billing_run(struct billing *b, rx_time_ns as_of, int api,
                struct billing_result *out, char *err, size_t errlen)
{
	pthread_mutex_lock(&b->mu);
	int rc = run_locked(b, as_of, api, out, err, errlen);
	pthread_mutex_unlock(&b->mu);
	return rc;
}

static void *loop(void *arg)
{
	struct billing *b = arg;
	pthread_mutex_lock(&b->stop_mu);
	while (!b->stopping) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += b->o.interval_s;
		while (!b->stopping &&
		       pthread_cond_timedwait(&b->stop_cv, &b->stop_mu,
		                              &until) != ETIMEDOUT)
			;
		if (b->stopping)
			break;
		pthread_mutex_unlock(&b->stop_mu);
		struct billing_result res;
		char err[BILLING_MSG_MAX];
		if (billing_run(b, 0, 0, &res, err, sizeof err) < 0)
			log_warn("billing run failed", "err=\"%s\"", err);
		else if (res.movements || res.finalized)
			log_info("billed",
			         "contracts=%" PRId64 " movements=%" PRId64
			         " settled=%" PRId64 " finalized=%" PRId64
			         " flagged=%" PRId64 " ms=%" PRId64,
			         res.contracts, res.movements, res.settled,
			         res.finalized, res.flagged, res.elapsed_ms);
		pthread_mutex_lock(&b->stop_mu);
	}
	pthread_mutex_unlock(&b->stop_mu);
	return NULL;
}

struct billing *billing_start(const struct billing_opts *o, char *err,
                              size_t errlen)
{
	struct billing *b = calloc(1, sizeof *b);
	if (!b) {
		err_set(err, errlen, "out of memory");
		return NULL;
	}
	b->o = *o;
	if (b->o.batch <= 0)
		b->o.batch = 500;
	snprintf(b->conninfo, sizeof b->conninfo, "%s", o->conninfo);
	b->o.conninfo = b->conninfo;
	pthread_mutex_init(&b->mu, NULL);
	pthread_mutex_init(&b->stop_mu, NULL);
	pthread_cond_init(&b->stop_cv, NULL);
	if (o->interval_s > 0) {
		if (pthread_create(&b->thread, NULL, loop, b) != 0) {
			err_set(err, errlen, "cannot start the billing thread");
			free(b);
			return NULL;
		}
		b->has_thread = 1;
	}
	return b;
}

void billing_stop(struct billing *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->stop_mu);
	b->stopping = 1;
	pthread_cond_broadcast(&b->stop_cv);
	pthread_mutex_unlock(&b->stop_mu);
	if (b->has_thread)
		pthread_join(b->thread, NULL);
	if (b->conn)
		PQfinish(b->conn);
	pthread_mutex_destroy(&b->mu);
	pthread_mutex_destroy(&b->stop_mu);
	pthread_cond_destroy(&b->stop_cv);
	free(b);
}
