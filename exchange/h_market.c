/* h_market.c — markets and their public data: depth, trades, candles; see
 * handlers.h. Depth comes from the writer's books (the truth of the
 * moment); trades and candles come from the database, on the reports'
 * connections (handlers_report: a replica when read_db names one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/contracts.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/writer.h"

#define MARKET_SELECT                                                          \
	"SELECT id, name, product, term_end::text, tick, lot, min_pages, "     \
	"max_pages, price_min, price_max, notice_period_s, breach_penalty, "   \
	"delivery_deadline_s FROM markets"

static void query(struct http_req *rq, const char *sql, int n,
                  const char *const *pv, int single, int64_t limit,
                  const char *cursor)
{
	handlers_query(rq, sql, n, pv, single, limit, cursor,
	               "there is no such object, or it is not yours");
}

void h_market_list(struct http_req *rq)
{
	query(rq, MARKET_SELECT " ORDER BY id", 0, NULL, 0, 0, NULL);
}

void h_market_get(struct http_req *rq)
{
	const char *pv[] = {http_param(rq, "name")};
	query(rq, MARKET_SELECT " WHERE name = $1", 1, pv, 1, 0, NULL);
}

void h_market_create(struct http_req *rq)
{
	static const char *const known[] = {"name",
	                                    "tick",
	                                    "lot",
	                                    "min_pages",
	                                    "max_pages",
	                                    "price_min",
	                                    "price_max",
	                                    "notice_period_s",
	                                    "breach_penalty",
	                                    "delivery_deadline_s",
	                                    NULL};
	struct app *a = http_app(rq);
	struct writer_cmd c;
	memset(&c, 0, sizeof c);
	c.kind = WR_MARKET;
	struct writer_market_spec *s = &c.spec;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0 ||
	    in_str(rq, b, "name", true, true, s->name, sizeof s->name) < 0 ||
	    in_int(rq, b, "tick", true, 1, IN_PRICE_MAX, &s->p.tick) < 0 ||
	    in_int(rq, b, "lot", true, 1, IN_PAGES_MAX, &s->p.lot) < 0 ||
	    in_int(rq, b, "min_pages", true, 1, IN_PAGES_MAX,
	           &s->p.min_pages) < 0 ||
	    in_int(rq, b, "max_pages", true, 1, IN_PAGES_MAX,
	           &s->p.max_pages) < 0 ||
	    in_int(rq, b, "price_min", true, 0, IN_PRICE_MAX,
	           &s->p.price_min) < 0 ||
	    in_int(rq, b, "price_max", true, 0, IN_PRICE_MAX,
	           &s->p.price_max) < 0 ||
	    in_int(rq, b, "notice_period_s", true, 0, IN_YEAR_S,
	           &s->notice_period_s) < 0 ||
	    in_int(rq, b, "breach_penalty", true, 0, IN_PRICE_MAX,
	           &s->breach_penalty) < 0 ||
	    in_int(rq, b, "delivery_deadline_s", true, 1, IN_YEAR_S,
	           &s->delivery_deadline_s) < 0)
		goto out;
	/* the penalty comes off a breached contract's price, which is at
	 * most price_max: more would pay the buyer to be breached */
	if (s->breach_penalty > s->p.price_max) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "breach_penalty: must be at most price_max (%lld "
		             "n$/page-year); it comes off a breached "
		             "contract's price",
		             (long long)s->p.price_max);
		goto out;
	}
	if (!in_market_name_ok(s->name)) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "name: must be spot or perm-YYYY (a year from "
		             "%d to %d)",
		             IN_PERM_YEAR_MIN, IN_PERM_YEAR_MAX);
		goto out;
	}
	/* every contract it can make must be billable (docs/money.md,
	 * "Limits"): refused here, not found by the billing job */
	char why[256];
	if (in_market_billable(s->name, s->p.max_pages, s->p.price_max,
	                       contracts_now(), why, sizeof why) < 0) {
		http_problem(rq, 422, "invalid", "market cannot be billed",
		             "%s", why);
		goto out;
	}
	writer_submit(a->writer, &c);
	if (c.retry_after)
		http_add_header(rq, "Retry-After", "2");
	http_reply_raw(rq, c.status,
	               c.status >= 400 ? "application/problem+json"
	                               : "application/json",
	               c.body ? c.body : "{}", c.body ? strlen(c.body) : 2);
	free(c.body);
out:
	json_decref(b);
}

void h_book(struct http_req *rq)
{
	struct app *a = http_app(rq);
	struct writer_cmd c;
	int64_t depth = 20;
	if (in_qint(rq, "depth", 1, 200, &depth) < 0)
		return;
	memset(&c, 0, sizeof c);
	c.kind = WR_DEPTH;
	c.depth = (int)depth;
	snprintf(c.market, sizeof c.market, "%s", http_param(rq, "name"));
	if (strlen(http_param(rq, "name")) >= sizeof c.market) {
		http_problem(rq, 404, "not-found", "no such market",
		             "market names are spot or perm-YYYY");
		return;
	}
	writer_submit(a->writer, &c);
	if (c.retry_after)
		http_add_header(rq, "Retry-After", "2");
	if (c.status == 307)
		handlers_redirect(rq, c.redirect);
	http_reply_raw(rq, c.status,
	               c.status >= 300 ? "application/problem+json"
	                               : "application/json",
	               c.body ? c.body : "{}", c.body ? strlen(c.body) : 2);
	free(c.body);
}

/* 404 when market {name} does not exist; else its id into out. */
static int market_id(struct http_req *rq, char out[24])
{
	struct app *a = http_app(rq);
	struct db_pool *pool = a->reports;
	char err[512];
	PGconn *c = db_acquire(pool);
	if (!c) {
		http_db_unavailable(rq);
		return -1;
	}
	const char *pv[] = {http_param(rq, "name")};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT id FROM markets WHERE name = $1", 1, pv,
	                      err, sizeof err);
	int rc = -1;
	if (!r)
		handlers_db_error(rq, c, err);
	else if (PQntuples(r) == 0)
		http_problem(rq, 404, "not-found", "no such market",
		             "there is no market named %.*s",
		             in_utf8_cut(pv[0], 32), pv[0]);
	else {
		snprintf(out, 24, "%s", PQgetvalue(r, 0, 0));
		rc = 0;
	}
	PQclear(r);
	db_release(pool, c);
	return rc;
}

/* A market's history: off the primary when read_db says so. */
static void report(struct http_req *rq, const char *sql, int n,
                   const char *const *pv, int64_t limit, const char *cursor)
{
	handlers_report(rq, sql, n, pv, 0, limit, cursor,
	                "there is no such object, or it is not yours");
}

void h_trades(struct http_req *rq)
{
	int64_t limit = 100, before = INT64_MAX;
	char mid[24], ls[24], bs[24];
	if (in_qint(rq, "limit", 1, 1000, &limit) < 0 ||
	    in_qint(rq, "before", 1, INT64_MAX, &before) < 0 ||
	    market_id(rq, mid) < 0)
		return;
	snprintf(ls, sizeof ls, "%lld", (long long)limit);
	snprintf(bs, sizeof bs, "%lld", (long long)before);
	const char *pv[] = {mid, bs, ls};
	report(rq,
	       "SELECT id, price, pages, taker_side, ts_ns FROM trades WHERE "
	       "market_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
	       3, pv, limit, "id");
}

void h_candles(struct http_req *rq)
{
	int64_t interval = 3600, from = 0, to = INT64_MAX / 1000000000,
	        limit = 500;
	char mid[24], is[24], fs[24], ts[24], ls[24];
	const char *iv = http_query(rq, "interval");
	if (in_qint(rq, "from", 0, INT64_MAX / 1000000000, &from) < 0 ||
	    in_qint(rq, "to", 0, INT64_MAX / 1000000000, &to) < 0 ||
	    in_qint(rq, "limit", 1, 1000, &limit) < 0)
		return;
	if (from >= to) {
		http_problem(rq, 400, "invalid-parameter", "invalid parameter",
		             "from must be before to: the candles are those of "
		             "the trades in [from, to)");
		return;
	}
	/* one of four, said so whatever came (a range's words for 0 or
	 * "abc" sent the caller to values that are refused too) */
	if (iv && (in_parse_i64(iv, &interval) < 0 ||
	           (interval != 60 && interval != 300 && interval != 3600 &&
	            interval != 86400))) {
		http_problem(rq, 400, "invalid-parameter", "invalid parameter",
		             "interval must be 60, 300, 3600 or 86400 seconds");
		return;
	}
	if (market_id(rq, mid) < 0)
		return;
	snprintf(is, sizeof is, "%lld", (long long)interval * 1000000000);
	snprintf(fs, sizeof fs, "%lld", (long long)from * 1000000000);
	snprintf(ts, sizeof ts, "%lld", (long long)to * 1000000000);
	snprintf(ls, sizeof ls, "%lld", (long long)limit);
	const char *pv[] = {mid, is, fs, ts, ls};
	report(rq,
	      "SELECT (ts_ns / $2::bigint) * ($2::bigint / 1000000000) AS "
	      "start, (array_agg(price ORDER BY id))[1] AS open, max(price) AS "
	      "high, min(price) AS low, (array_agg(price ORDER BY id DESC))[1] "
	      "AS close, sum(pages)::bigint AS volume, count(*)::bigint AS "
	      "trades FROM trades WHERE market_id = $1 AND ts_ns >= $3 AND "
	      "ts_ns < $4 GROUP BY 1 ORDER BY 1 DESC LIMIT $5",
	      5, pv, 0, NULL);
}
