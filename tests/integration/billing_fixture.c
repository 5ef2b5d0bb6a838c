/*
 * billing_fixture.c — what the billing suites share
 * (tests/integration/billing_fixture.h).
 */
#include "tests/integration/billing_fixture.h"

#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs sql with int64 parameters $1..$n; returns the first value of the
 * first row as an integer (0 when none). */
int64_t q(PGconn *c, const char *sql, int n, ...)
{
	char vals[16][24];
	const char *pv[16];
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		snprintf(vals[i], sizeof vals[i], "%" PRId64,
		         va_arg(ap, int64_t));
		pv[i] = vals[i];
	}
	va_end(ap);
	PGresult *r = PQexecParams(c, sql, n, NULL, pv, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
	                  PQresultStatus(r) == PGRES_TUPLES_OK,
	              "%s: %s", sql, PQerrorMessage(c));
	int64_t v = 0;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
	    !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

int64_t node(PGconn *c, int64_t team, const char *name)
{
	char t[24];
	snprintf(t, sizeof t, "%" PRId64, team);
	const char *pv2[] = {name, t};
	PGresult *r = PQexecParams(c,
	                           "INSERT INTO accounts (name, kind, team_id) "
	                           "VALUES ($1, 'node', $2) RETURNING id",
	                           2, NULL, pv2, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s",
	              PQerrorMessage(c));
	int64_t id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return id;
}

static int64_t next_id = 900000;

/* A trade and its contract, as the writer would have made them, moved by
 * SQL to `state` with the given instants. Returns the contract id. */
int64_t contract(PGconn *c, int64_t market, int perm, int64_t buyer,
                 int64_t seller, int lend, int64_t pages, int64_t price,
                 int64_t penalty, int64_t created, int64_t delivered,
                 const char *state, int64_t ended, int64_t term_end)
{
	int64_t buy = next_id++, sell = next_id++, trade = next_id++,
	        id = next_id++;
	const char *order =
	    "INSERT INTO orders (id, market_id, account_id, side, tif, stp, "
	    "post_only, price, pages, remaining, filled, status, priority, "
	    "created_ns, updated_ns, placed_by) VALUES ($1, $2, $3, "
	    "CASE WHEN $4 = 1 THEN 'buy' ELSE 'sell' END, 'gtc', "
	    "'cancel_taker', false, $5, $6, 0, $6, 'filled', $1, $7, $7, "
	    "'test')";
	q(c, order, 7, buy, market, buyer, INT64_C(1), price, pages, created);
	q(c, order, 7, sell, market, seller, INT64_C(0), price, pages, created);
	q(c,
	  "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	  "maker_order_id, buyer_id, seller_id, taker_side, price, pages, "
	  "ts_ns) VALUES ($1, $2, $1, $3, $4, $5, $6, 'buy', $7, $8, $9)",
	  9, trade, market, buy, sell, buyer, seller, price, pages, created);
	int64_t code = strcmp(state, "active") == 0     ? 1
	               : strcmp(state, "ended") == 0    ? 3
	               : strcmp(state, "breached") == 0 ? 4
	                                                : 0;
	q(c,
	  "INSERT INTO contracts (id, trade_id, market_id, buyer_id, "
	  "seller_id, delivery, pages, price, state, deliver_by, term_end, "
	  "notice_period_s, created_at, updated_at, product, perm_year, "
	  "breach_penalty, recall_notice_ns, created_ns, deliver_by_ns, "
	  "term_end_ns, delivered_ns, ended_ns, changed_ns) VALUES "
	  "($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint, CASE "
	  "WHEN $6::int = 1 THEN 'lend' ELSE 'offline' END, $7::bigint, "
	  "$8::bigint, (ARRAY['pending_delivery', 'active', 'recalling', "
	  "'ended', 'breached'])[$9::int + 1], to_timestamp(($10::bigint + "
	  "86400000000000) / 1000000000), CASE WHEN $13::bigint > 0 THEN "
	  "to_timestamp($13::bigint / 1000000000) END, 0, "
	  "to_timestamp($10::bigint / 1000000000), to_timestamp($10::bigint / "
	  "1000000000), CASE WHEN $14::int = 1 THEN 'perm' ELSE 'spot' END, "
	  "CASE WHEN $14::int = 1 THEN 2025 ELSE 0 END, $11::bigint, 0, "
	  "$10::bigint, $10::bigint + 86400000000000, $13::bigint, "
	  "$12::bigint, $15::bigint, $10::bigint)",
	  15, id, trade, market, buyer, seller, (int64_t)lend, pages, price,
	  code, created, penalty, delivered, term_end, (int64_t)perm, ended);
	return id;
}

static int64_t seq_no = 0;

/* One usage report of `side` for [from, to), as POST /v1/usage stores it. */
void report(PGconn *c, int64_t nodeid, int64_t id, int buyer_side, int64_t from,
            int64_t to, int64_t ps)
{
	seq_no++;
	q(c,
	  "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, side, "
	  "period_start_ns, period_end_ns, page_seconds, kmod_page_seconds, "
	  "kmod_pages, body_hash, delivered_ns, billable_ps) VALUES ($1, 1, "
	  "$2, $3, CASE WHEN $4 = 1 THEN 'buyer' ELSE 'seller' END, $5, $6, "
	  "$7, $7, 0, $2, $6::bigint - $5::bigint, $7)",
	  7, nodeid, seq_no, id, (int64_t)buyer_side, from, to, ps);
}

int64_t ms(int y, int m)
{
	return money_month_start(y, m);
}

int64_t month_ps(int64_t pages, int y, int m)
{
	return pages * ((ms(y, m + 1) - ms(y, m)) / S);
}

json_t *run(struct rxh *h, int64_t as_of)
{
	char body[64];
	struct rxh_resp r;
	snprintf(body, sizeof body, "{\"as_of_ns\": %" PRId64 "}", as_of);
	long s =
	    rxh_call(h, "POST", "/v1/billing/run", h->admin, body, NULL, &r);
	ck_assert_msg(s == 200, "billing run: %ld %s", s, r.body);
	json_t *j = json_incref(r.json);
	rxh_resp_free(&r);
	return j;
}

/* The invoices of `account` (admin), as a JSON array. */
json_t *invoices(struct rxh *h, int64_t account)
{
	char path[128];
	struct rxh_resp r;
	snprintf(path, sizeof path,
	         "/v1/invoices?account_id=%" PRId64 "&limit=500", account);
	long s = rxh_call(h, "GET", path, h->admin, NULL, NULL, &r);
	ck_assert_msg(s == 200, "%s: %ld %s", path, s, r.body);
	json_t *items = json_incref(json_object_get(r.json, "items"));
	rxh_resp_free(&r);
	return items;
}

json_t *invoice(struct rxh *h, int64_t id)
{
	char path[64];
	struct rxh_resp r;
	snprintf(path, sizeof path, "/v1/invoices/%" PRId64, id);
	long s = rxh_call(h, "GET", path, h->admin, NULL, NULL, &r);
	ck_assert_msg(s == 200, "%s: %ld %s", path, s, r.body);
	json_t *j = json_incref(r.json);
	rxh_resp_free(&r);
	return j;
}

int64_t jint(json_t *o, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(o, k));
}

/* The sum of the lines of contract `cid` on all invoices of `account`
 * in `year` (0: any), and of their totals. */
void sums(struct rxh *h, int64_t account, int year, int64_t cid, int64_t *lines,
          int64_t *totals, int64_t *cents, int *n)
{
	json_t *all = invoices(h, account);
	size_t i;
	json_t *v;
	*lines = *totals = *cents = 0;
	*n = 0;
	json_array_foreach(all, i, v)
	{
		if (year && jint(v, "year") != year)
			continue;
		(*n)++;
		*totals += jint(v, "total");
		*cents += jint(v, "payable_cents");
		json_t *inv = invoice(h, jint(v, "id"));
		size_t k;
		json_t *l;
		json_array_foreach(json_object_get(inv, "items"), k, l)
		{
			if (jint(l, "contract_id") == cid)
				*lines += jint(l, "amount");
		}
		json_decref(inv);
	}
	json_decref(all);
}

/* GET /v1/ledger/check answers ok. */
void ledger_ok(struct rxh *h)
{
	struct rxh_resp rr;
	ck_assert_int_eq(
	    rxh_call(h, "GET", "/v1/ledger/check", h->admin, NULL, NULL, &rr),
	    200);
	ck_assert_msg(json_is_true(json_object_get(rr.json, "ok")), "%s",
	              rr.body);
	rxh_resp_free(&rr);
}
