/* usage_db.c — a batch of usage reports into PostgreSQL; see usage_db.h. */
#include "exchange/usage_db.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "exchange/db.h"
#include "exchange/pgarr.h"

/* --- helpers ------------------------------------------------------------- */

static int64_t val(const PGresult *r, int row, int col)
{
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* A stored report from columns col.. of: node_id, epoch, seq, contract_id,
 * period_start_ns, period_end_ns, page_seconds, kmod_page_seconds,
 * kmod_pages. */
#define REPORT_COLS                                                            \
	"u.node_id, u.epoch, u.seq, u.contract_id, u.period_start_ns, "        \
	"u.period_end_ns, u.page_seconds, u.kmod_page_seconds, u.kmod_pages"

static void report_of(const PGresult *r, int row, int col,
                      struct usage_report *out)
{
	out->node = val(r, row, col);
	out->epoch = val(r, row, col + 1);
	out->seq = val(r, row, col + 2);
	out->contract_id = val(r, row, col + 3);
	out->period_start = val(r, row, col + 4);
	out->period_end = val(r, row, col + 5);
	out->page_seconds = val(r, row, col + 6);
	out->kmod_page_seconds = val(r, row, col + 7);
	out->kmod_pages = val(r, row, col + 8);
}

static int cmp_contract(const void *a, const void *b)
{
	const struct usage_contract *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* By number (epoch, seq); all reports compared are the same node's. */
static int cmp_number(const void *a, const void *b)
{
	const struct usage_report *x = a, *y = b;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_i64(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;
	return (*x > *y) - (*x < *y);
}

/* Sorting the new reports by (contract, side, period start) for the
 * neighbour check inside the batch (qsort_r: handlers run in parallel). */
struct sorted {
	const struct usage_db_item *items;
	const enum usage_side *side;
};

static int cmp_period(const void *a, const void *b, void *ctx)
{
	const struct sorted *sc = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const struct usage_report *x = &sc->items[i].r, *y = &sc->items[j].r;
	if (x->contract_id != y->contract_id)
		return x->contract_id < y->contract_id ? -1 : 1;
	if (sc->side[i] != sc->side[j])
		return sc->side[i] < sc->side[j] ? -1 : 1;
	if (x->period_start != y->period_start)
		return x->period_start < y->period_start ? -1 : 1;
	return (i > j) - (i < j);
}

static const char *side_name(enum usage_side s)
{
	return s == USAGE_BUYER ? "buyer" : "seller";
}

/* --- SQL ----------------------------------------------------------------- */

static const char *sql_lock_node =
    "SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE";

static const char *sql_contracts =
    "SELECT id, buyer_id, seller_id, delivery = 'lend', pages, "
    "delivered_ns, ended_ns, term_end_ns, CASE WHEN state = 'recalling' "
    "THEN notice_end_ns ELSE 0 END FROM contracts WHERE id = ANY "
    "($1::bigint[]) ORDER BY id FOR NO KEY UPDATE";

/* What the contract sides of the batch have counted so far (their rows
 * are locked with the contracts above). */
static const char *sql_totals =
    "SELECT contract_id, side = 'buyer', reported_ps, delivered_ns, "
    "billable_ps FROM usage_totals WHERE contract_id = ANY ($1::bigint[])";

static const char *sql_totals_put =
    "INSERT INTO usage_totals (contract_id, side, reported_ps, "
    "delivered_ns, billable_ps, pages) SELECT * FROM unnest($1::bigint[], "
    "$2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) "
    "ON CONFLICT "
    "(contract_id, side) DO UPDATE SET reported_ps = EXCLUDED.reported_ps, "
    "delivered_ns = EXCLUDED.delivered_ns, billable_ps = "
    "EXCLUDED.billable_ps";

/* The stored reports with the batch's numbers: per epoch of the batch
 * whose numbers are dense, one range of the primary key ($2 epoch, $3
 * first, $4 last: a fresh batch reads one index entry, not a thousand);
 * the numbers of sparse epochs one by one ($5 epoch, $6 seq), so that an
 * old retry beside new reports never scans what lies between them. */
static const char *sql_same_numbers =
    "SELECT " REPORT_COLS " FROM unnest($2::bigint[], $3::bigint[], "
    "$4::bigint[]) AS g (epoch, lo, hi) JOIN usage_reports u ON u.node_id "
    "= $1 AND u.epoch = g.epoch AND u.seq BETWEEN g.lo AND g.hi UNION ALL "
    "SELECT " REPORT_COLS " FROM unnest($5::bigint[], $6::bigint[]) AS b "
    "(epoch, seq) JOIN usage_reports u ON u.node_id = $1 AND u.epoch = "
    "b.epoch AND u.seq = b.seq";

/* Per group ($1 contract, $2 side, $3 first start, $4 last start): the
 * stored report just before, those within, and the one just after. */
static const char *sql_neighbours =
    "SELECT g.i - 1, " REPORT_COLS " FROM unnest($1::bigint[], $2::text[], "
    "$3::bigint[], $4::bigint[]) WITH ORDINALITY AS g (cid, side, lo, hi, "
    "i) CROSS JOIN LATERAL ((SELECT * FROM usage_reports x WHERE "
    "x.contract_id = g.cid AND x.side = g.side AND x.period_start_ns < g.lo "
    "ORDER BY x.period_start_ns DESC LIMIT 1) UNION ALL (SELECT * FROM "
    "usage_reports x WHERE x.contract_id = g.cid AND x.side = g.side AND "
    "x.period_start_ns >= g.lo AND x.period_start_ns <= g.hi) UNION ALL "
    "(SELECT * FROM usage_reports x WHERE x.contract_id = g.cid AND x.side "
    "= g.side AND x.period_start_ns > g.hi ORDER BY x.period_start_ns "
    "LIMIT 1)) u ORDER BY g.i, u.period_start_ns";

static const char *sql_insert =
    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, side, "
    "period_start_ns, period_end_ns, page_seconds, kmod_page_seconds, "
    "kmod_pages, body_hash, delivered_ns, billable_ps) SELECT $1, * FROM "
    "unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::text[], "
    "$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], "
    "$11::bigint[], $12::bigint[], $13::bigint[])";

/* Each distinct body once per number, and at most USAGE_DB_CONFLICTS_KEPT
 * bodies a number (those kept before first, then the batch's in body
 * order); the index usage_conflicts_node finds a number's rows. */
#define STR_(x) #x
#define STR(x)  STR_(x)
static const char *sql_conflicts =
    "WITH n AS (SELECT DISTINCT x, (x ->> 'epoch')::bigint AS e, "
    "(x ->> 'seq')::bigint AS s FROM jsonb_array_elements($2::jsonb) AS x), "
    "f AS (SELECT n.*, row_number() OVER (PARTITION BY e, s ORDER BY x) "
    "AS rn, (SELECT count(*) FROM usage_conflicts u WHERE u.node_id = "
    "$1::bigint AND u.epoch = n.e AND u.seq = n.s) AS had FROM n "
    "WHERE NOT EXISTS (SELECT 1 FROM usage_conflicts u WHERE u.node_id = "
    "$1::bigint AND u.epoch = n.e AND u.seq = n.s AND u.body = n.x)) "
    "INSERT INTO usage_conflicts (node_id, epoch, seq, body, principal) "
    "SELECT $1::bigint, e, s, x, $3 FROM f WHERE had + rn <= " STR(
        USAGE_DB_CONFLICTS_KEPT);

/* --- the batch ------------------------------------------------------------ */

static enum usage_db_status failed(PGconn *c, char *err, size_t errlen,
                                   const char *why)
{
	if (why != err)
		snprintf(err, errlen, "%s", why);
	if (db_broken(c))
		return USAGE_DB_UNAVAILABLE;
	PQclear(PQexec(c, "ROLLBACK"));
	return USAGE_DB_FAILED;
}

/* Keeps the conflicting bodies, outside the refused batch's transaction. */
static void keep_conflicts(PGconn *c, int64_t node, const char *principal,
                           const struct usage_db_item *items, size_t n,
                           json_t *const *bodies, const char *nodes)
{
	char err[512], q[600];
	json_t *all = json_array();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (items[i].verdict != USAGE_CONFLICT || items[i].invalid)
			continue;
		json_array_append(all, bodies[i]);
		if (k++ < 10)
			log_warn(
			    "usage report number reused with another body; "
			    "refused",
			    "node=%lld epoch=%lld seq=%lld contract=%lld",
			    (long long)node, (long long)items[i].r.epoch,
			    (long long)items[i].r.seq,
			    (long long)items[i].r.contract_id);
	}
	if (k > 10)
		log_warn("more usage report conflicts in the same batch",
		         "node=%lld count=%zu", (long long)node, k);
	char *text = json_dumps(all, JSON_COMPACT);
	json_decref(all);
	if (!text)
		return;
	const char *pv[] = {nodes, text, principal};
	PGresult *r =
	    db_exec(c, PGRES_COMMAND_OK, sql_conflicts, 3, pv, err, sizeof err);
	if (!r)
		log_error("cannot keep conflicting usage reports", "err=%s",
		          log_quote(q, sizeof q, err));
	PQclear(r);
	free(text);
}

/*
 * Checks each new report (items[order[0..nnew)]) against its neighbours in
 * period order among the stored reports of its contract and side and the
 * other new ones. One query for the whole batch: per (contract, side) group
 * of the batch, the stored report just before its first start, those
 * starting within its starts, and the one just after its last start (stored
 * reports never overlap, so nothing else can neighbour a new one). The
 * usual batch — the periods that follow what is stored — reads two index
 * entries per group, not two per report.
 */
static enum usage_db_status neighbours(PGconn *c, struct usage_db_item *items,
                                       const enum usage_side *side,
                                       const size_t *order, size_t nnew,
                                       size_t *nbad, char *err, size_t errlen)
{
	enum usage_db_status st = USAGE_DB_FAILED;
	struct pgarr a[4];
	memset(a, 0, sizeof a);
	PGresult *r = NULL;
	size_t *idx = calloc(nnew, sizeof *idx);
	size_t *gstart = calloc(nnew + 1, sizeof *gstart);
	struct usage_report *sr = NULL;
	size_t *rgroup = NULL;
	if (!idx || !gstart) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	memcpy(idx, order, nnew * sizeof *idx);
	struct sorted sc = {items, side};
	qsort_r(idx, nnew, sizeof *idx, cmp_period, &sc);
	size_t ng = 0;
	for (size_t s = 0; s < nnew; s++) {
		size_t i = idx[s];
		bool fresh =
		    s == 0 ||
		    items[idx[s - 1]].r.contract_id != items[i].r.contract_id ||
		    side[idx[s - 1]] != side[i];
		if (fresh)
			gstart[ng++] = s;
	}
	gstart[ng] = nnew;
	for (size_t g = 0; g < ng; g++) {
		const struct usage_report *first = &items[idx[gstart[g]]].r;
		const struct usage_report *last =
		    &items[idx[gstart[g + 1] - 1]].r;
		pgarr_i64(&a[0], first->contract_id);
		pgarr_addf(&a[1], "%s", side_name(side[idx[gstart[g]]]));
		pgarr_i64(&a[2], first->period_start);
		pgarr_i64(&a[3], last->period_start);
	}
	const char *pv[4];
	if (pgarr_params(a, 4, pv) < 0) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	r = db_exec(c, PGRES_TUPLES_OK, sql_neighbours, 4, pv, err, errlen);
	if (!r) {
		st = failed(c, err, errlen, err);
		goto out;
	}
	size_t nr = (size_t)PQntuples(r);
	sr = calloc(nr ? nr : 1, sizeof *sr);
	rgroup = calloc(nr ? nr : 1, sizeof *rgroup);
	if (!sr || !rgroup) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < nr; k++) {
		rgroup[k] = (size_t)val(r, (int)k, 0);
		report_of(r, (int)k, 1, &sr[k]);
	}
	/* rows come ordered by group, then period start */
	size_t p = 0;
	for (size_t g = 0; g < ng; g++) {
		while (p < nr && rgroup[p] < g)
			p++;
		size_t s0 = p, s1 = p;
		while (s1 < nr && rgroup[s1] == g)
			s1++;
		size_t q = s0;
		for (size_t s = gstart[g]; s < gstart[g + 1]; s++) {
			struct usage_db_item *it = &items[idx[s]];
			while (q < s1 &&
			       sr[q].period_start < it->r.period_start)
				q++;
			const struct usage_report *prev =
			    q > s0 ? &sr[q - 1] : NULL;
			const struct usage_report *next =
			    q < s1 ? &sr[q] : NULL;
			if (s > gstart[g]) {
				const struct usage_report *o =
				    &items[idx[s - 1]].r;
				if (!prev ||
				    o->period_start >= prev->period_start)
					prev = o;
			}
			if (s + 1 < gstart[g + 1]) {
				const struct usage_report *o =
				    &items[idx[s + 1]].r;
				if (!next ||
				    o->period_start <= next->period_start)
					next = o;
			}
			if (usage_check_neighbours(&it->r, prev, next, it->err,
			                           sizeof it->err) < 0) {
				it->invalid = true;
				(*nbad)++;
			}
		}
		p = s1;
	}
	st = USAGE_DB_OK;
out:
	PQclear(r);
	for (int k = 0; k < 4; k++)
		pgarr_free(&a[k]);
	free(idx);
	free(gstart);
	free(sr);
	free(rgroup);
	return st;
}

/*
 * What each new report (items[order[0..nnew)]) bills: its nanoseconds
 * inside its contract's delivery span at `now` into dns[i], and what it adds
 * to its contract side's usage_total into billable[i] (docs/money.md, "What
 * a report bills"). The totals are read from usage_totals and written back.
 * A report the totals refuse is marked invalid (*nbad).
 */
static enum usage_db_status count_totals(PGconn *c, struct usage_db_item *items,
                                         const enum usage_side *side,
                                         const size_t *order, size_t nnew,
                                         const struct usage_contract *cs,
                                         size_t ncs, int64_t now,
                                         int64_t *dns, int64_t *billable,
                                         size_t *nbad, char *err,
                                         size_t errlen)
{
	enum usage_db_status st = USAGE_DB_FAILED;
	struct pgarr a[6];
	memset(a, 0, sizeof a);
	PGresult *r = NULL;
	/* tot[2k + side] for contract cs[k]; touched: to write back */
	struct usage_total *tot = calloc(2 * ncs, sizeof *tot);
	bool *touched = calloc(2 * ncs, sizeof *touched);
	if (!tot || !touched) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < ncs; k++)
		pgarr_i64(&a[0], cs[k].id);
	const char *pc[] = {pgarr_text(&a[0])};
	if (!pc[0]) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	r = db_exec(c, PGRES_TUPLES_OK, sql_totals, 1, pc, err, errlen);
	if (!r) {
		st = failed(c, err, errlen, err);
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct usage_contract key = {.id = val(r, i, 0)};
		const struct usage_contract *k =
		    bsearch(&key, cs, ncs, sizeof *cs, cmp_contract);
		if (!k)
			continue;
		struct usage_total *t =
		    &tot[2 * (size_t)(k - cs) +
		         (PQgetvalue(r, i, 1)[0] == 't' ? USAGE_BUYER
		                                        : USAGE_SELLER)];
		t->reported = val(r, i, 2);
		t->delivered = val(r, i, 3);
		t->billable = val(r, i, 4);
	}
	PQclear(r);
	r = NULL;
	pgarr_free(&a[0]);
	for (size_t q = 0; q < nnew; q++) {
		size_t i = order[q];
		struct usage_db_item *it = &items[i];
		struct usage_contract key = {.id = it->r.contract_id};
		const struct usage_contract *k =
		    bsearch(&key, cs, ncs, sizeof *cs, cmp_contract);
		rx_time_ns from, to;
		/* usage_check passed: the contract is there and delivered */
		if (!k || !usage_span(k, now, &from, &to)) {
			st = failed(c, err, errlen,
			            "a checked report lost its contract");
			goto out;
		}
		size_t ti = 2 * (size_t)(k - cs) + side[i];
		dns[i] = usage_delivered_ns(&it->r, from, to);
		if (usage_total_add(&tot[ti], k->pages, to - from,
		                    it->r.page_seconds, dns[i], &billable[i],
		                    it->err, sizeof it->err) < 0) {
			it->invalid = true;
			(*nbad)++;
			continue;
		}
		touched[ti] = true;
	}
	if (*nbad == 0) {
		for (size_t ti = 0; ti < 2 * ncs; ti++) {
			if (!touched[ti])
				continue;
			pgarr_i64(&a[0], cs[ti / 2].id);
			pgarr_addf(&a[1], "%s",
			           side_name((enum usage_side)(ti % 2)));
			pgarr_i64(&a[2], tot[ti].reported);
			pgarr_i64(&a[3], tot[ti].delivered);
			pgarr_i64(&a[4], tot[ti].billable);
			pgarr_i64(&a[5], cs[ti / 2].pages);
		}
		const char *pv[6];
		if (pgarr_params(a, 6, pv) < 0) {
			st = failed(c, err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(c, PGRES_COMMAND_OK, sql_totals_put, 6, pv, err,
		            errlen);
		if (!r) {
			st = failed(c, err, errlen, err);
			goto out;
		}
	}
	st = USAGE_DB_OK;
out:
	PQclear(r);
	for (int k = 0; k < 6; k++)
		pgarr_free(&a[k]);
	free(tot);
	free(touched);
	return st;
}

enum usage_db_status usage_db_ingest(PGconn *c, int64_t node,
                                     const char *principal,
                                     struct usage_db_item *items, size_t n,
                                     json_t *const *bodies, int64_t now,
                                     size_t *counted, size_t *duplicates,
                                     char *err, size_t errlen)
{
	enum usage_db_status st = USAGE_DB_FAILED;
	char nodes[24];
	PGresult *r = NULL;
	struct pgarr a[12];
	memset(a, 0, sizeof a);
	int64_t *ids = calloc(n, sizeof *ids);
	int64_t *dns = calloc(n, sizeof *dns);
	int64_t *billable = calloc(n, sizeof *billable);
	struct usage_contract *cs = calloc(n, sizeof *cs);
	struct usage_report *stored = calloc(n, sizeof *stored);
	const struct usage_report **sp = calloc(n, sizeof *sp);
	enum usage_verdict *verdicts = calloc(n, sizeof *verdicts);
	enum usage_side *side = calloc(n, sizeof *side);
	size_t *order = calloc(n, sizeof *order);
	size_t ncs = 0, nnew = 0, ndup = 0, nbad = 0, nconf = 0;
	*counted = *duplicates = 0;
	if (!ids || !dns || !billable || !cs || !stored || !sp || !verdicts ||
	    !side || !order) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(nodes, sizeof nodes, "%lld", (long long)node);

	r = db_exec(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL, err, errlen);
	if (!r) {
		st = failed(c, err, errlen, err);
		goto out;
	}
	PQclear(r);
	const char *p1[] = {nodes};
	r = db_exec(c, PGRES_TUPLES_OK, sql_lock_node, 1, p1, err, errlen);
	if (!r)
		goto dbfail;
	PQclear(r);

	/* the contracts, locked in id order */
	for (size_t i = 0; i < n; i++)
		ids[i] = items[i].r.contract_id;
	qsort(ids, n, sizeof *ids, cmp_i64);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || ids[i] != ids[i - 1])
			pgarr_i64(&a[0], ids[i]);
	const char *pc[] = {pgarr_text(&a[0])};
	if (!pc[0]) {
		snprintf(err, errlen, "out of memory");
		st = failed(c, err, errlen, err);
		goto out;
	}
	r = db_exec(c, PGRES_TUPLES_OK, sql_contracts, 1, pc, err, errlen);
	if (!r)
		goto dbfail;
	for (int i = 0; i < PQntuples(r); i++) {
		struct usage_contract *k = &cs[ncs++];
		k->id = val(r, i, 0);
		k->buyer = val(r, i, 1);
		k->seller = val(r, i, 2);
		k->lend = PQgetvalue(r, i, 3)[0] == 't';
		k->pages = val(r, i, 4);
		k->delivered_at = val(r, i, 5);
		k->ended_at = val(r, i, 6);
		k->term_end = val(r, i, 7);
		k->notice_end = val(r, i, 8);
	}
	PQclear(r);
	pgarr_free(&a[0]);

	/* the stored reports with the batch's numbers */
	struct usage_report *num = calloc(n, sizeof *num);
	if (!num) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		num[i] = items[i].r;
	qsort(num, n, sizeof *num, cmp_number);
	for (size_t i = 0, j; i < n; i = j) {
		size_t distinct = 1;
		for (j = i + 1; j < n && num[j].epoch == num[i].epoch; j++)
			distinct += num[j].seq != num[j - 1].seq;
		int64_t lo = num[i].seq, hi = num[j - 1].seq;
		/* dense: the range holds at most 4 numbers per report */
		if ((uint64_t)(hi - lo) < 4 * (uint64_t)distinct) {
			pgarr_i64(&a[0], num[i].epoch);
			pgarr_i64(&a[1], lo);
			pgarr_i64(&a[2], hi);
		} else {
			for (size_t k = i; k < j; k++) {
				pgarr_i64(&a[3], num[k].epoch);
				pgarr_i64(&a[4], num[k].seq);
			}
		}
	}
	free(num);
	const char *ps[6] = {nodes};
	if (pgarr_params(a, 5, ps + 1) < 0) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	r = db_exec(c, PGRES_TUPLES_OK, sql_same_numbers, 6, ps, err, errlen);
	if (!r)
		goto dbfail;
	size_t nst = (size_t)PQntuples(r);
	struct usage_report *found = calloc(nst ? nst : 1, sizeof *found);
	if (!found) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < nst; k++)
		report_of(r, (int)k, 0, &found[k]);
	PQclear(r);
	r = NULL;
	qsort(found, nst, sizeof *found, cmp_number);
	for (size_t i = 0; i < n; i++) {
		const struct usage_report *f =
		    bsearch(&items[i].r, found, nst, sizeof *found, cmp_number);
		if (f) {
			stored[i] = *f;
			sp[i] = &stored[i];
		}
	}
	free(found);
	for (int k = 0; k < 5; k++)
		pgarr_free(&a[k]);

	/* retries, conflicts, and the checks of the new ones */
	struct usage_report *batch = calloc(n, sizeof *batch);
	if (!batch) {
		st = failed(c, err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		batch[i] = items[i].r;
	usage_classify_batch(batch, n, sp, order, verdicts);
	free(batch);
	/* a conflicting report is judged like a new one first: only a
	 * plausible one (its contract, the node's, sane values) is kept as
	 * evidence in usage_conflicts, garbage is refused as invalid */
	for (size_t i = 0; i < n; i++) {
		struct usage_db_item *it = &items[i];
		it->verdict = verdicts[i];
		it->invalid = false;
		it->err[0] = 0;
		if (it->verdict == USAGE_DUPLICATE) {
			ndup++;
			continue;
		}
		struct usage_contract key = {.id = it->r.contract_id};
		const struct usage_contract *k =
		    bsearch(&key, cs, ncs, sizeof *cs, cmp_contract);
		if (!k) {
			it->invalid = true;
			snprintf(it->err, sizeof it->err,
			         "there is no contract %lld",
			         (long long)it->r.contract_id);
		} else if (usage_check(&it->r, k, now, &side[i], it->err,
		                       sizeof it->err) < 0) {
			it->invalid = true;
		}
		if (it->invalid) {
			nbad++;
		} else if (it->verdict == USAGE_CONFLICT) {
			nconf++;
			snprintf(
			    it->err, sizeof it->err,
			    "number (epoch %lld, seq %lld) was already used "
			    "for another report; start a new epoch",
			    (long long)it->r.epoch, (long long)it->r.seq);
		} else {
			order[nnew++] = i;
		}
	}

	/* the neighbours in period order: stored, and within the batch */
	if (nnew > 0 && nconf == 0) {
		st =
		    neighbours(c, items, side, order, nnew, &nbad, err, errlen);
		if (st != USAGE_DB_OK)
			goto out;
	}

	if (nconf > 0) {
		PQclear(PQexec(c, "ROLLBACK"));
		keep_conflicts(c, node, principal, items, n, bodies, nodes);
		st = db_broken(c) ? USAGE_DB_UNAVAILABLE : USAGE_DB_CONFLICT;
		goto out;
	}
	/* what each bills, within its contract's delivery span */
	if (nnew > 0 && nbad == 0) {
		st = count_totals(c, items, side, order, nnew, cs, ncs, now,
		                  dns, billable, &nbad, err, errlen);
		if (st != USAGE_DB_OK)
			goto out;
	}
	if (nbad > 0) {
		PQclear(PQexec(c, "ROLLBACK"));
		st = USAGE_DB_INVALID;
		goto out;
	}

	/* ONE insert of every new report */
	if (nnew > 0) {
		for (size_t k = 0; k < nnew; k++) {
			const struct usage_db_item *it = &items[order[k]];
			pgarr_i64(&a[0], it->r.epoch);
			pgarr_i64(&a[1], it->r.seq);
			pgarr_i64(&a[2], it->r.contract_id);
			pgarr_addf(&a[3], "%s", side_name(side[order[k]]));
			pgarr_i64(&a[4], it->r.period_start);
			pgarr_i64(&a[5], it->r.period_end);
			pgarr_i64(&a[6], it->r.page_seconds);
			pgarr_i64(&a[7], it->r.kmod_page_seconds);
			pgarr_i64(&a[8], it->r.kmod_pages);
			pgarr_i64(&a[9], (int64_t)usage_body_hash(&it->r));
			pgarr_i64(&a[10], dns[order[k]]);
			pgarr_i64(&a[11], billable[order[k]]);
		}
		const char *pi[13] = {nodes};
		if (pgarr_params(a, 12, pi + 1) < 0) {
			st = failed(c, err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(c, PGRES_COMMAND_OK, sql_insert, 13, pi, err,
		            errlen);
		if (!r)
			goto dbfail;
		PQclear(r);
	}
	r = db_exec(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL, err, errlen);
	if (!r)
		goto dbfail;
	PQclear(r);
	r = NULL;
	*counted = nnew;
	*duplicates = ndup;
	st = USAGE_DB_OK;
	goto out;

dbfail:
	st = failed(c, err, errlen, err);
out:
	for (int i = 0; i < 12; i++)
		pgarr_free(&a[i]);
	free(ids);
	free(dns);
	free(billable);
	free(cs);
	free(stored);
	free(sp);
	free(verdicts);
	free(side);
	free(order);
	return st;
}
