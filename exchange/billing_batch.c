/*
 * billing_batch.c — loading and pricing one batch of the billing job; see
 * billing_batch.h and docs/money.md.
 */
#include "exchange/billing_batch.h"
#include "common/err.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/money.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"
#include "exchange/db.h"
#include "exchange/pgarr.h"

const char *const billing_phase_name[PH_N] = {"take",  "contracts", "usage",
                                              "price", "invoices",  "ledger",
                                              "state", "commit",    "finalize"};

void billing_lap_start(struct billing_phases *ph)
{
	clock_gettime(CLOCK_MONOTONIC, &ph->at);
}

/* Adds the time since the last lap to phase p. */
void billing_lap(struct billing_phases *ph, enum billing_phase p)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	ph->us[p] += (t.tv_sec - ph->at.tv_sec) * 1000000 +
	             (t.tv_nsec - ph->at.tv_nsec) / 1000;
	ph->at = t;
}

/* ---- the contracts of one batch ---- */

void billing_batch_free(struct billing_batch *b)
{
	for (int i = 0; i < b->nc; i++)
		free(b->c[i].m);
	free(b->c);
	free(b->mv);
	free(b->inv);
	memset(b, 0, sizeof *b);
}

int billing_month_key(int year, int month)
{
	return year * 12 + month - 1;
}

static struct billing_month *month_get(struct billing_ctr *c, int key)
{
	for (int i = 0; i < c->nm; i++)
		if (c->m[i].key == key)
			return &c->m[i];
	if (c->nm == c->capm) {
		int cap = c->capm ? c->capm * 2 : 4;
		struct billing_month *m =
		    realloc(c->m, (size_t)cap * sizeof *m);
		if (!m)
			return NULL;
		c->m = m;
		c->capm = cap;
	}
	struct billing_month *m = &c->m[c->nm++];
	memset(m, 0, sizeof *m);
	m->key = key;
	m->recon = USAGE_RECON_NONE;
	return m;
}

static int month_cmp(const void *a, const void *b)
{
	const struct billing_month *x = a, *y = b;
	return (x->key > y->key) - (x->key < y->key);
}

static struct billing_ctr *find_contract(struct billing_batch *b, int64_t id)
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
int billing_load_contracts(PGconn *db, const char *ids, int fee_bps,
                           struct billing_batch *b, char *err, size_t errlen)
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
		struct billing_ctr *c = &b->c[i];
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

static void add_usage(struct billing_ctr *c, bool buyer_side, int key,
                      rx_pagesec ps, bool *oom)
{
	struct billing_month *m = month_get(c, key);
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
                          struct billing_batch *b, bool *oom, char *err,
                          size_t errlen)
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
		struct billing_ctr *c = find_contract(b, db_int(r, i, 0));
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
			add_usage(c, buyer, billing_month_key(y, mo), s, oom);
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
int billing_load_usage(PGconn *db, const char *ids, rx_time_ns as_of,
                       struct billing_batch *b, char *err, size_t errlen)
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
		struct billing_ctr *c = find_contract(b, db_int(r, i, 0));
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
		struct billing_ctr *c = find_contract(b, db_int(r, i, 0));
		if (!c || c->spans || PQgetisnull(r, i, 2))
			continue;
		int y, mo;
		money_month_of(db_int(r, i, 3), &y, &mo);
		add_usage(c, PQgetvalue(r, i, 1)[0] == 't',
		          billing_month_key(y, mo), db_int(r, i, 2), &oom);
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
		struct billing_ctr *c = find_contract(b, db_int(r, i, 0));
		if (!c)
			continue;
		struct billing_month *m =
		    month_get(c, billing_month_key((int)db_int(r, i, 1),
		                                   (int)db_int(r, i, 2)));
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
static int billing_spot_reference(PGconn *db, rx_time_ns from, rx_time_ns to,
                                  rx_price *out, bool *found, char *err,
                                  size_t errlen)
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

static struct billing_mv *mv_new(struct billing_batch *b)
{
	if (b->nmv == b->capmv) {
		int cap = b->capmv ? b->capmv * 2 : 64;
		struct billing_mv *m = realloc(b->mv, (size_t)cap * sizeof *m);
		if (!m)
			return NULL;
		b->mv = m;
		b->capmv = cap;
	}
	struct billing_mv *m = &b->mv[b->nmv];
	memset(m, 0, sizeof *m);
	return m;
}

/* Prices what is new for contract c; appends its movements to b. */
static int price(PGconn *db, struct billing_batch *b, struct billing_ctr *c,
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
		struct billing_month *m = &c->m[i];
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
		struct billing_mv *v = mv_new(b);
		if (!v)
			return err_set(err, errlen,
			               "out of memory for movements");
		if (invoice_charge(&c->ic, &due, from, to, 0, exchange, &v->m,
		                   why, sizeof why) < 0) {
			err_set(err, errlen, "contract %" PRId64 ": %s",
			        c->k.id, why);
			return BILLING_PRICE_REFUSED;
		}
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
		    billing_spot_reference(db, c->k.delivered_at, c->k.ended_at,
		                           &ref, &found, err, errlen) < 0)
			return -1;
		if (!found)
			ref =
			    c->k.price; /* no spot trades: the contract price */
		struct billing_mv *v = mv_new(b);
		if (!v)
			return err_set(err, errlen,
			               "out of memory for movements");
		bool was = c->ic.settled;
		rx_price at;
		if (invoice_settle(&c->ic, &c->k, delivered, ref, as_of, grace,
		                   0, exchange, &at, &v->m, why,
		                   sizeof why) < 0) {
			err_set(err, errlen, "contract %" PRId64 ": %s",
			        c->k.id, why);
			return BILLING_PRICE_REFUSED;
		}
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

void billing_unprice(struct billing_ctr *c, struct billing_result *res)
{
	res->flagged -= c->flagged;
	res->settled -= c->settled;
	c->flagged = c->settled = 0;
	c->changed = false;
	c->has_settle = false;
	for (int i = 0; i < c->nm; i++)
		c->m[i].touched = false;
}

int billing_price_contract(PGconn *db, struct billing_batch *b,
                           struct billing_ctr *c, rx_time_ns as_of,
                           rx_time_ns grace, int64_t exchange,
                           struct billing_result *res, char *err, size_t errlen)
{
	int nmv = b->nmv;
	int64_t flagged = res->flagged, settled = res->settled;
	int rc = price(db, b, c, as_of, grace, exchange, res, err, errlen);
	c->flagged = (int)(res->flagged - flagged);
	c->settled = (int)(res->settled - settled);
	if (rc == BILLING_PRICE_REFUSED) {
		/* the batch goes on as if the contract were not in it: its
		 * movements (the tail of b's) and its state are not stored */
		b->nmv = nmv;
		billing_unprice(c, res);
	}
	return rc;
}
