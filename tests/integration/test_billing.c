/* test_billing.c — the billing job and its API against a real ramexd and
 * PostgreSQL: contracts of 2025 set up by SQL (trades and contracts rows
 * backdated, delivered), month-by-month usage reports, runs of POST
 * /v1/billing/run as of the end of each month, then the brief's worked
 * examples as invoices, twelve months that sum exactly, the cents paid, a
 * breached perm contract, a late report as an adjustment, the ledger check,
 * the CSV export and who may see what. */
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/usage.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

#define S    MONEY_NS_PER_S
#define DAY  (INT64_C(86400) * S)
#define GIB4 (INT64_C(1) << 20)

/* Runs sql with int64 parameters $1..$n; returns the first value of the
 * first row as an integer (0 when none). */
static int64_t q(PGconn *c, const char *sql, int n, ...)
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

static int64_t node(PGconn *c, int64_t team, const char *name)
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
static int64_t contract(PGconn *c, int64_t market, int perm, int64_t buyer,
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
static void report(PGconn *c, int64_t nodeid, int64_t id, int buyer_side,
                   int64_t from, int64_t to, int64_t ps)
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

static int64_t ms(int y, int m)
{
	return money_month_start(y, m);
}

static int64_t month_ps(int64_t pages, int y, int m)
{
	return pages * ((ms(y, m + 1) - ms(y, m)) / S);
}

static json_t *run(struct rxh *h, int64_t as_of)
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
static json_t *invoices(struct rxh *h, int64_t account)
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

static json_t *invoice(struct rxh *h, int64_t id)
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

static int64_t jint(json_t *o, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(o, k));
}

/* The sum of the lines of contract `cid` on all invoices of `account`
 * in `year` (0: any), and of their totals. */
static void sums(struct rxh *h, int64_t account, int year, int64_t cid,
                 int64_t *lines, int64_t *totals, int64_t *cents, int *n)
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
static void ledger_ok(struct rxh *h)
{
	struct rxh_resp rr;
	ck_assert_int_eq(
	    rxh_call(h, "GET", "/v1/ledger/check", h->admin, NULL, NULL, &rr),
	    200);
	ck_assert_msg(json_is_true(json_object_get(rr.json, "ok")), "%s",
	              rr.body);
	rxh_resp_free(&rr);
}

START_TEST(billing_end_to_end)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	int64_t perm = q(c,
	                 "INSERT INTO markets (name, product, term_end, tick, "
	                 "lot, min_pages, max_pages, price_min, price_max, "
	                 "notice_period_s, breach_penalty, "
	                 "delivery_deadline_s) VALUES ('perm-2025', 'perm', "
	                 "'2026-01-01', 1000, 256, 256, 1073741824, 1000, "
	                 "100000000, 0, 20000, 3600) RETURNING id",
	                 0);
	int64_t perm_seller = node(c, w.team, "perm-seller");
	int64_t breacher = node(c, w.team, "breacher");
	int64_t late = node(c, w.team, "late");
	int64_t straddler = node(c, w.team, "straddler");
	int64_t lend_s = node(c, w.team, "lend-seller"),
	        lend_b = node(c, w.team, "lend-buyer");
	int64_t created = ms(2024, 12) + 30 * DAY, y0 = ms(2025, 1),
	        y1 = ms(2026, 1);
	/* the brief's three machines, all of 2025 */
	int64_t k_spot = contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4,
	                          100000, 0, created, y0, "ended", y1, 0);
	int64_t k_perm =
	    contract(c, perm, 1, w.op_account, perm_seller, 0, GIB4, 200000,
	             20000, created, y0, "ended", y1 + 500000000, y1);
	int64_t k_lend = contract(c, spot, 0, w.node_c, w.node_b, 1, GIB4,
	                          150000, 0, created, y0, "ended", y1, 0);
	/* perm at 200 000, breached on 1 July; spot traded at 150 000 */
	int64_t k_breach =
	    contract(c, perm, 1, w.op_account, breacher, 0, GIB4, 200000, 20000,
	             created, y0, "breached", ms(2025, 7), y1);
	contract(c, spot, 0, w.op_account, late, 0, 4096, 150000, 0,
	         ms(2025, 3) + DAY, 0, "ended", 0, 0);
	/* delivered in March only; its report comes a year late */
	int64_t k_late =
	    contract(c, spot, 0, w.op_account, late, 0, 4096, 100000, 0,
	             created, ms(2025, 3), "ended", ms(2025, 4), 0);

	/* lent for January; the buyer reports 10 % less: flagged, the
	 * lower figure bills */
	int64_t k_flag = contract(c, spot, 0, lend_b, lend_s, 1, 1024, 150000,
	                          0, created, y0, "ended", ms(2025, 2), 0);
	/* node A's own late contract, reported through the signed API */
	int64_t k_late_a =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, 4096, 100000, 0,
	             created, ms(2025, 5), "ended", ms(2025, 6), 0);

	/* 20 February to the recall on 16 March, one report across the
	 * month boundary */
	int64_t str_from = ms(2025, 2) + 19 * DAY,
	        str_to = ms(2025, 3) + 15 * DAY;
	int64_t k_str =
	    contract(c, spot, 0, w.op_account, straddler, 0, 777777, 100003, 0,
	             created, str_from, "ended", str_to, 0);

	for (int mo = 1; mo <= 12; mo++) {
		int64_t f = ms(2025, mo), t = ms(2025, mo + 1);
		int64_t ps = month_ps(GIB4, 2025, mo);
		report(c, w.node_a, k_spot, 0, f, t, ps);
		report(c, perm_seller, k_perm, 0, f, t, ps);
		report(c, w.node_b, k_lend, 0, f, t, ps);
		report(c, w.node_c, k_lend, 1, f, t, ps);
		if (mo <= 6)
			report(c, breacher, k_breach, 0, f, t, ps);
		if (mo == 1) {
			report(c, lend_s, k_flag, 0, f, t,
			       month_ps(1024, 2025, 1));
			report(c, lend_b, k_flag, 1, f, t,
			       month_ps(1024, 2025, 1) / 10 * 9);
		}
		if (mo == 2)
			report(c, straddler, k_str, 0, str_from, str_to,
			       777777 * ((str_to - str_from) / S) - 12345);
		json_t *res = run(&h, t - 3600 * S);
		ck_assert_int_ge(jint(res, "movements"), 3);
		if (mo == 7)
			ck_assert_int_eq(jint(res, "settled"), 1);
		json_decref(res);
	}
	/* a run back in time is refused */
	{
		struct rxh_resp r;
		long s = rxh_call(&h, "POST", "/v1/billing/run", h.admin,
		                  "{\"as_of_ns\": 1}", NULL, &r);
		ck_assert_int_eq(s, 409);
		rxh_resp_free(&r);
	}
	/* the differing lend month: flagged, and the buyer's lower figure
	 * billed */
	ck_assert_int_eq(q(c,
	                   "SELECT count(*) FROM billing_months WHERE "
	                   "contract_id = $1 AND recon = 'differ'",
	                   1, k_flag),
	                 1);
	ck_assert_int_eq(q(c,
	                   "SELECT page_seconds FROM movements WHERE "
	                   "contract_id = $1",
	                   1, k_flag),
	                 month_ps(1024, 2025, 1) / 10 * 9);

	/* 10 January 2026: every month of 2025 is final */
	json_decref(run(&h, ms(2026, 1) + 9 * DAY));
	ck_assert_int_eq(q(c,
	                   "SELECT count(*) FROM invoices WHERE year = 2025 "
	                   "AND status = 'draft'",
	                   0),
	                 0);

	int64_t lines, totals, cents;
	int n;
	rx_ndollars want;
	char err[MONEY_MSG_MAX];
	/* spot offline: the operator pays $104.857 600 000 over twelve
	 * invoices, node A is credited the same and paid 10 485 cents */
	sums(&h, w.op_account, 2025, k_spot, &lines, &totals, &cents, &n);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(lines, INT64_C(104857600000));
	sums(&h, w.node_a, 2025, k_spot, &lines, &totals, &cents, &n);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(lines, -INT64_C(104857600000));
	ck_assert_int_eq(totals, -INT64_C(104857600000));
	ck_assert_int_eq(cents, -10486); /* a credit rounds down, away from 0 */
	/* perm to its term end: $209.7152 */
	sums(&h, perm_seller, 2025, k_perm, &lines, &totals, &cents, &n);
	ck_assert_int_eq(totals, -INT64_C(209715200000));
	/* lend: node C pays node B $157.2864 */
	sums(&h, w.node_c, 2025, k_lend, &lines, &totals, &cents, &n);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(totals, INT64_C(157286400000));
	ck_assert_int_eq(cents, 15728);
	sums(&h, w.node_b, 2025, k_lend, &lines, &totals, &cents, &n);
	ck_assert_int_eq(totals, -INT64_C(157286400000));
	/* every month of the spot contract alone, exact */
	ck_assert_int_eq(q(c,
	                   "SELECT count(*) FROM movements WHERE contract_id = "
	                   "$1 AND kind = 'usage'",
	                   1, k_spot),
	                 12);

	/* the report across February and March bills on both invoices,
	 * together exactly its amount */
	sums(&h, straddler, 2025, k_str, &lines, &totals, &cents, &n);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(
	    money_amount(777777 * ((str_to - str_from) / S) - 12345, 100003,
	                 &want, err, sizeof err),
	    0);
	ck_assert_int_eq(totals, -want);

	/* the breach: the delivered half-year at min(200 000, 150 000) less
	 * 20 000 = 130 000, so the operator gets back what it paid above */
	int64_t half = 0;
	for (int mo = 1; mo <= 6; mo++)
		half += month_ps(GIB4, 2025, mo);
	ck_assert_int_eq(money_amount(half, 130000, &want, err, sizeof err), 0);
	sums(&h, breacher, 0, k_breach, &lines, &totals, &cents, &n);
	ck_assert_int_eq(totals, -want);
	ck_assert_int_eq(q(c,
	                   "SELECT settle_price FROM billing_contracts WHERE "
	                   "contract_id = $1",
	                   1, k_breach),
	                 130000);
	ck_assert_int_eq(q(c,
	                   "SELECT count(*) FROM movements WHERE contract_id = "
	                   "$1 AND kind = 'settlement' AND amount < 0",
	                   1, k_breach),
	                 1);

	/* the late report: March 2025 is final; it bills as an adjustment
	 * on the late node's January 2026 invoice */
	report(c, late, k_late, 0, ms(2025, 3), ms(2025, 4),
	       month_ps(4096, 2025, 3));
	/* and node A's, a year late, through POST /v1/usage */
	{
		char body[512];
		struct rxh_resp ur;
		int64_t ps = month_ps(4096, 2025, 5);
		snprintf(body, sizeof body,
		         "{\"reports\": [{\"epoch\": 7, \"seq\": 1, "
		         "\"contract_id\": %" PRId64
		         ", \"period_start_ns\": %" PRId64
		         ", \"period_end_ns\": %" PRId64
		         ", \"page_seconds\": %" PRId64
		         ", \"kmod_page_seconds\": %" PRId64
		         ", \"kmod_pages\": 4096}]}",
		         k_late_a, ms(2025, 5), ms(2025, 6), ps, ps);
		long st = rxh_call_signed(&h, "POST", "/v1/usage", w.key_a,
		                          w.secret_a, body, 0, NULL, &ur);
		ck_assert_msg(st == 200, "POST /v1/usage: %ld %s", st, ur.body);
		rxh_resp_free(&ur);
	}
	json_t *res = run(&h, ms(2026, 1) + 11 * DAY);
	ck_assert_int_eq(jint(res, "movements"), 2);
	ck_assert_int_eq(q(c,
	                   "SELECT count(*) FROM movements WHERE contract_id = "
	                   "$1 AND kind = 'adjustment' AND year = 2026 AND "
	                   "month = 1 AND usage_month = 5",
	                   1, k_late_a),
	                 1);
	json_decref(res);
	json_t *li = invoices(&h, late);
	ck_assert_int_eq(json_array_size(li), 1);
	json_t *lv = invoice(&h, jint(json_array_get(li, 0), "id"));
	ck_assert_int_eq(jint(lv, "year"), 2026);
	ck_assert_int_eq(jint(lv, "month"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(lv, "status")),
	                 "draft");
	json_t *line = json_array_get(json_object_get(lv, "items"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(line, "kind")),
	                 "adjustment");
	ck_assert_str_eq(
	    json_string_value(json_object_get(line, "usage_month")), "2025-03");
	ck_assert_int_eq(money_amount(month_ps(4096, 2025, 3), 100000, &want,
	                              err, sizeof err),
	                 0);
	ck_assert_int_eq(jint(line, "amount"), -want);
	ck_assert_str_eq(json_string_value(json_object_get(line, "page_years")),
	                 "347.879452");
	json_decref(lv);
	json_decref(li);

	/* final invoices and postings cannot change, even by SQL */
	PGresult *r = PQexec(c, "UPDATE invoices SET total = 0 WHERE year = "
	                        "2025");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);
	r = PQexec(c, "INSERT INTO postings (movement_id, invoice_id, "
	              "account_id, contract_id, year, month, role, amount) "
	              "SELECT p.movement_id, p.invoice_id, p.account_id, "
	              "p.contract_id, p.year, p.month, p.role, 1 FROM postings "
	              "p JOIN invoices i ON i.id = p.invoice_id WHERE i.status "
	              "= 'final' LIMIT 1");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	ck_assert_msg(strstr(PQerrorMessage(c), "cannot go on invoice"), "%s",
	              PQerrorMessage(c));
	PQclear(r);
	r = PQexec(c, "DELETE FROM postings");
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	PQclear(r);

	/* the ledger balances and every invoice equals its postings */
	struct rxh_resp rr;
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/ledger/check",
	                          w.finance_token, NULL, NULL, &rr),
	                 200);
	ck_assert_msg(json_is_true(json_object_get(rr.json, "ok")), "%s",
	              rr.body);
	ck_assert_str_eq(json_string_value(json_object_get(rr.json, "sum")),
	                 "0");
	/* 12 x 3 monthly, 6 before the breach, 2 settlements, 2 late, 2
	 * across February and March, 1 lend month flagged */
	ck_assert_int_eq(jint(rr.json, "movements"), 49);
	rxh_resp_free(&rr);

	/* the CSV export of node A's January: FOCUS columns, one row */
	json_t *ai = invoices(&h, w.node_a);
	int64_t jan = 0;
	size_t i;
	json_t *v;
	json_array_foreach(ai, i, v) if (jint(v, "month") == 1 &&
	                                 jint(v, "year") == 2025) jan =
	    jint(v, "id");
	json_decref(ai);
	ck_assert_int_gt(jan, 0);
	char path[128], hb[256];
	snprintf(path, sizeof path, "/v1/invoices/%" PRId64 "/export", jan);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", path, w.finance_token, NULL, NULL, &rr), 200);
	ck_assert_ptr_nonnull(rxh_header(&rr, "Content-Type", hb, sizeof hb));
	ck_assert_msg(strncmp(hb, "text/csv", 8) == 0, "%s", hb);
	ck_assert_ptr_nonnull(
	    rxh_header(&rr, "Content-Disposition", hb, sizeof hb));
	ck_assert_msg(strstr(hb, "attachment"), "%s", hb);
	ck_assert_msg(strncmp(rr.body,
	                      "BillingAccountId,SubAccountName,"
	                      "BillingPeriodStart,BillingPeriodEnd,"
	                      "ChargePeriodStart,ChargePeriodEnd,ResourceId,",
	                      100) == 0,
	              "%s", rr.body);
	char want_row[128];
	snprintf(want_row, sizeof want_row,
	         ",\"blue\",2025-01-01T00:00:00Z,2025-02-01T00:00:00Z,"
	         "2025-01-01T00:00:00Z,2025-02-01T00:00:00Z,contract-%" PRId64
	         ",memory,Usage,",
	         k_spot);
	ck_assert_msg(strstr(rr.body, want_row), "%s", rr.body);
	ck_assert_msg(strstr(rr.body, ",seller\n"), "%s", rr.body);
	rxh_resp_free(&rr);
	snprintf(path, sizeof path,
	         "/v1/invoices/%" PRId64 "/export?format=json", jan);
	ck_assert_int_eq(rxh_call(&h, "GET", path, h.admin, NULL, NULL, &rr),
	                 200);
	json_t *row = json_array_get(json_object_get(rr.json, "items"), 0);
	ck_assert_str_eq(
	    json_string_value(json_object_get(row, "ConsumedUnit")),
	    "PageSecond");
	ck_assert_str_eq(json_string_value(json_object_get(row, "x_Role")),
	                 "seller");
	rxh_resp_free(&rr);

	/* finance reads billing, not trading */
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/invoices", w.finance_token,
	                          NULL, NULL, &rr),
	                 200);
	rxh_resp_free(&rr);
	ck_assert_int_eq(rxh_call(&h, "GET",
	                          "/v1/billing/summary?from=2025-"
	                          "01&to=2025-12&by=team",
	                          w.finance_token, NULL, NULL, &rr),
	                 200);
	ck_assert_int_gt(json_array_size(json_object_get(rr.json, "items")), 0);
	rxh_resp_free(&rr);
	/* each customer its own summary: the operator its account, a trader
	 * its team's nodes (blue); finance sees more rows than either */
	struct {
		const char *tok;
		int64_t account, team;
	} own[] = {{w.op_token, w.op_account, 0}, {w.trader_token, 0, w.team}};
	ck_assert_int_eq(rxh_call(&h, "GET",
	                          "/v1/billing/summary?from=2025-01&to=2025-12",
	                          w.finance_token, NULL, NULL, &rr),
	                 200);
	size_t all_rows = json_array_size(json_object_get(rr.json, "items"));
	rxh_resp_free(&rr);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(rxh_call(&h, "GET",
		                          "/v1/billing/summary?from=2025-01&to="
		                          "2025-12",
		                          own[k].tok, NULL, NULL, &rr),
		                 200);
		json_t *items = json_object_get(rr.json, "items"), *it;
		size_t ix;
		ck_assert_int_gt(json_array_size(items), 0);
		ck_assert_int_lt(json_array_size(items), all_rows);
		json_array_foreach(items, ix, it)
		{
			int64_t a = json_integer_value(
			    json_object_get(it, "account_id"));
			if (own[k].account)
				ck_assert_int_eq(a, own[k].account);
			else
				/* the team's nodes: not the operator's
				 * account, nor team red's node */
				ck_assert_msg(a != w.op_account && a != w.node_c,
				              "%lld: %.300s", (long long)a, rr.body);
		}
		rxh_resp_free(&rr);
	}
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/usage/export?from=2025-01",
	                          w.finance_token, NULL, NULL, &rr),
	                 200);
	ck_assert_msg(strstr(rr.body, ",agree\n"), "%s", rr.body);
	rxh_resp_free(&rr);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/orders", w.finance_token, NULL, NULL, &rr),
	    403);
	rxh_resp_free(&rr);
	/* it reads the market its spend comes from */
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets", w.finance_token,
	                          NULL, NULL, &rr),
	                 200);
	rxh_resp_free(&rr);
	ck_assert_int_eq(rxh_call(&h, "POST", "/v1/billing/run",
	                          w.finance_token, "{}", NULL, &rr),
	                 403);
	rxh_resp_free(&rr);

	/* a node sees its own invoices only */
	ck_assert_int_eq(rxh_call_signed(&h, "GET", "/v1/invoices?limit=500",
	                                 w.key_a, w.secret_a, NULL, 0, NULL,
	                                 &rr),
	                 200);
	json_t *items = json_object_get(rr.json, "items");
	ck_assert_int_ge(json_array_size(items), 12);
	json_array_foreach(items, i, v)
	    ck_assert_int_eq(jint(v, "account_id"), w.node_a);
	rxh_resp_free(&rr);
	json_t *oi = invoices(&h, w.op_account);
	snprintf(path, sizeof path, "/v1/invoices/%" PRId64,
	         jint(json_array_get(oi, 0), "id"));
	json_decref(oi);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", path, w.key_a, w.secret_a,
	                                 NULL, 0, NULL, &rr),
	                 404);
	rxh_resp_free(&rr);

	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* With a fee of 2.5 % the exchange's account is made and credited; every
 * movement has three postings and the ledger still balances. */
START_TEST(fee_goes_to_the_exchange)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_fee",
	          "--billing_interval_s=0 --fee_bps=250");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	int64_t k =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4, 100000, 0,
	             ms(2024, 12), ms(2025, 1), "ended", ms(2025, 2), 0);
	int64_t ps = month_ps(GIB4, 2025, 1);
	report(c, w.node_a, k, 0, ms(2025, 1), ms(2025, 2), ps);
	json_t *res = run(&h, ms(2025, 2) - 3600 * S);
	ck_assert_int_eq(jint(res, "movements"), 1);
	ck_assert_int_eq(jint(res, "postings"), 3);
	json_decref(res);
	rx_ndollars amount, fee;
	char err[MONEY_MSG_MAX];
	ck_assert_int_eq(money_amount(ps, 100000, &amount, err, sizeof err), 0);
	fee = (rx_ndollars)((__int128)amount * 250 / 10000);
	int64_t exch =
	    q(c, "SELECT id FROM accounts WHERE kind = 'exchange'", 0);
	ck_assert_int_gt(exch, 0);
	ck_assert_int_eq(
	    q(c, "SELECT total FROM invoices WHERE account_id = $1", 1, exch),
	    -fee);
	ck_assert_int_eq(q(c,
	                   "SELECT total FROM invoices WHERE account_id = $1",
	                   1, w.node_a),
	                 -(amount - fee));
	ck_assert_int_eq(q(c,
	                   "SELECT total FROM invoices WHERE account_id = $1",
	                   1, w.op_account),
	                 amount);
	ck_assert_int_eq(q(c,
	                   "SELECT fee_bps FROM billing_contracts WHERE "
	                   "contract_id = $1",
	                   1, k),
	                 250);
	struct rxh_resp rr;
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/ledger/check", h.admin, NULL, NULL, &rr),
	    200);
	ck_assert_msg(json_is_true(json_object_get(rr.json, "ok")), "%s",
	              rr.body);
	ck_assert_int_eq(jint(rr.json, "postings"), 3);
	rxh_resp_free(&rr);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* Runs sql, which must fail; returns PostgreSQL's message (static). */
static const char *q_fails(PGconn *c, const char *sql)
{
	static char msg[1024];
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR,
	              "%s: should have been refused", sql);
	snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
	PQclear(r);
	return msg;
}

/* A small deterministic generator (the test must fail the same way on
 * every machine): xorshift64*. */
static uint64_t rnd_state = 0x46b111;
static int64_t rnd(int64_t lo, int64_t hi)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	uint64_t v = rnd_state * UINT64_C(2685821657736338717);
	return lo + (int64_t)(v % (uint64_t)(hi - lo + 1));
}

#define SUM_K      48 /* contracts */
#define SUM_MONTHS 8  /* January to August 2025 */
#define SUM_REP    40 /* reports per contract and side, at most */

struct sum_rep {
	int64_t from, to, ps;
};

/* What billing_months must say for contract k, side b (1: buyer), of the
 * reports that start before as_of: usage_share of each report per month,
 * summed in C. reported[m]: some such report touches month m. */
static void sum_expect(const struct sum_rep *r, int n, int64_t as_of,
                       int64_t *ps, int *reported)
{
	memset(ps, 0, SUM_MONTHS * sizeof *ps);
	memset(reported, 0, SUM_MONTHS * sizeof *reported);
	for (int i = 0; i < n; i++) {
		if (r[i].from >= as_of)
			continue;
		struct usage_report u = {.period_start = r[i].from,
		                         .period_end = r[i].to,
		                         .page_seconds = r[i].ps};
		for (int m = 0; m < SUM_MONTHS; m++) {
			int64_t f = ms(2025, m + 1), t = ms(2025, m + 2);
			if (r[i].to <= f || r[i].from >= t)
				continue;
			ps[m] += usage_share(&u, f, t);
			reported[m] = 1;
		}
	}
}

/* The month sums of random reports (inside one month, across month
 * boundaries, some for a later run) are exactly usage_share's, whichever
 * way billing.c loads them (one sum per contract and side when all its
 * reports lie in one month, report by report otherwise), on both sides of
 * lend contracts; reports that start after as_of wait in billing_dirty
 * and count in the next run. */
START_TEST(month_sums_are_usage_share)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_sums", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	static struct sum_rep rep[SUM_K][2][SUM_REP];
	int nrep[SUM_K][2] = {{0}};
	int64_t ids[SUM_K], pages[SUM_K];
	int lend[SUM_K];
	int64_t as_of = ms(2025, 5) + 10 * DAY + 1234567;
	int spanning = 0, one_month = 0;
	for (int k = 0; k < SUM_K; k++) {
		lend[k] = k % 3 == 0;
		pages[k] = rnd(1, 300000);
		ids[k] = lend[k]
		             ? contract(c, spot, 0, w.node_c, w.node_b, 1,
		                        pages[k], 150000, 0, ms(2024, 12),
		                        ms(2025, 1), "active", 0, 0)
		             : contract(c, spot, 0, w.op_account, w.node_a, 0,
		                        pages[k], 100000 + k, 0, ms(2024, 12),
		                        ms(2025, 1), "active", 0, 0);
		/* mode 0: reports inside one month; 1: any lengths, across
		 * boundaries; 2: like 1 and going on past as_of */
		int mode = (int)(k % 4 == 3 ? 0 : rnd(0, 2));
		for (int b = 0; b <= lend[k]; b++) {
			int mo = (int)rnd(1, 5);
			int64_t t = mode == 0 ? ms(2025, mo) + rnd(0, 5) * DAY
			                      : ms(2025, 1) + rnd(0, 60) * DAY +
			                            rnd(0, 86399) * S;
			int64_t end = mode == 0   ? ms(2025, mo + 1)
			              : mode == 1 ? as_of - rnd(1, 20) * DAY
			                          : ms(2025, 8) - DAY;
			while (nrep[k][b] < SUM_REP && t < end) {
				int64_t len = mode == 0
				                  ? rnd(1, 3 * 86400) * S
				                  : rnd(1, 45 * 86400) * S +
				                        rnd(0, 999999999);
				if (t + len > end)
					len = end - t;
				struct sum_rep *r = &rep[k][b][nrep[k][b]++];
				r->from = t;
				r->to = t + len;
				/* up to full delivery, in page-seconds */
				r->ps = rnd(0, pages[k] * (len / S));
				report(c, b ? w.node_c : w.node_b, ids[k], b,
				       r->from, r->to, r->ps);
				t += len + (rnd(0, 3) == 0 ? rnd(1, DAY) : 0);
			}
			int64_t first = rep[k][b][0].from,
			        last = rep[k][b][nrep[k][b] - 1].to;
			int y0, m0, y1, m1;
			money_month_of(first, &y0, &m0);
			money_month_of(last - 1, &y1, &m1);
			if (y0 == y1 && m0 == m1)
				one_month++;
			else
				spanning++;
		}
	}
	ck_assert_int_gt(one_month, 5);
	ck_assert_int_gt(spanning, 5);

	for (int pass = 0; pass < 2; pass++) {
		int64_t at = pass == 0 ? as_of : ms(2025, 9);
		/* the second run looks only at the contracts left dirty */
		int64_t looked = 0;
		for (int k = 0; k < SUM_K; k++) {
			int waits = pass == 0;
			for (int b = 0; b <= lend[k]; b++)
				for (int i = 0; i < nrep[k][b]; i++)
					waits |= rep[k][b][i].from >= as_of;
			looked += waits;
		}
		json_t *res = run(&h, at);
		ck_assert_int_eq(jint(res, "contracts"), looked);
		json_decref(res);
		for (int k = 0; k < SUM_K; k++) {
			int later = 0;
			for (int b = 0; b <= lend[k]; b++) {
				int64_t want[SUM_MONTHS];
				int seen[SUM_MONTHS];
				sum_expect(rep[k][b], nrep[k][b], at, want,
				           seen);
				for (int i = 0; i < nrep[k][b]; i++)
					later |= rep[k][b][i].from >= at;
				for (int m = 0; m < SUM_MONTHS; m++) {
					const char *sql =
					    b ? "SELECT coalesce(buyer_ps, -1) "
					        "FROM billing_months WHERE "
					        "contract_id = $1 AND year = "
					        "2025 AND month = $2"
					      : "SELECT coalesce(seller_ps, "
					        "-1) "
					        "FROM billing_months WHERE "
					        "contract_id = $1 AND year = "
					        "2025 AND month = $2";
					int64_t got = q(c, sql, 2, ids[k],
					                (int64_t)m + 1);
					int64_t exp = seen[m] ? want[m] : 0;
					if (!seen[m] && got == -1)
						got =
						    0; /* no row or no report */
					ck_assert_msg(
					    got == exp,
					    "pass %d contract %d (%s, side %d) "
					    "2025-%02d: billing_months says "
					    "%" PRId64 ", usage_share %" PRId64,
					    pass, k,
					    lend[k] ? "lend" : "offline", b,
					    m + 1, got, exp);
				}
			}
			ck_assert_int_eq(q(c,
			                   "SELECT count(*) FROM billing_dirty "
			                   "WHERE contract_id = $1",
			                   1, ids[k]),
			                 later);
		}
	}
	ledger_ok(&h);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* contracts_dirty queues a contract for billing only when it ends or is
 * breached after delivery: a new contract (the writer inserts one per
 * trade) or one that ends undelivered has nothing to bill. (The test sits
 * in billing_mark_contract, not in a WHEN on the trigger: measured, the
 * WHEN made the writer's batches cost PostgreSQL more; docs/ARCHITECTURE.) */
START_TEST(only_delivered_ends_are_queued)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_dirty", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	const char *dirty =
	    "SELECT count(*) FROM billing_dirty WHERE contract_id = $1";
	int64_t fresh = contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4,
	                         100000, 0, ms(2025, 1), 0, "pending", 0, 0);
	int64_t undelivered =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4, 100000, 0,
	             ms(2025, 1), 0, "pending", 0, 0);
	int64_t born_ended = contract(
	    c, spot, 0, w.op_account, w.node_a, 0, GIB4, 100000, 0, ms(2025, 1),
	    ms(2025, 1) + DAY, "ended", ms(2025, 1) + 2 * DAY, 0);
	ck_assert_int_eq(q(c, dirty, 1, fresh), 0);
	ck_assert_int_eq(q(c, dirty, 1, undelivered), 0);
	ck_assert_int_eq(q(c, dirty, 1, born_ended), 1);
	/* delivered: active, not yet billable */
	q(c,
	  "UPDATE contracts SET state = 'active', delivered_ns = $2 "
	  "WHERE id = $1",
	  2, fresh, ms(2025, 1) + DAY);
	ck_assert_int_eq(q(c, dirty, 1, fresh), 0);
	q(c,
	  "UPDATE contracts SET state = 'ended', ended_ns = $2 WHERE id = $1",
	  2, fresh, ms(2025, 1) + 2 * DAY);
	ck_assert_int_eq(q(c, dirty, 1, fresh), 1);
	q(c,
	  "UPDATE contracts SET state = 'breached', ended_ns = $2 "
	  "WHERE id = $1",
	  2, undelivered, ms(2025, 1) + 2 * DAY);
	ck_assert_int_eq(q(c, dirty, 1, undelivered), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* The ledger's keys, checked once per statement since schema 0008: a
 * posting of a movement or on an invoice that does not exist, and a
 * movement or billing state of a contract that does not exist, are
 * refused with a message that says what is missing. */
START_TEST(ledger_keys_are_checked)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_keys", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	int64_t k =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4, 100000, 0,
	             ms(2024, 12), ms(2025, 1), "active", 0, 0);
	report(c, w.node_a, k, 0, ms(2025, 1), ms(2025, 2),
	       month_ps(GIB4, 2025, 1));
	json_t *res = run(&h, ms(2025, 2) + DAY);
	ck_assert_int_eq(jint(res, "movements"), 1);
	json_decref(res);
	int64_t mv =
	    q(c, "SELECT id FROM movements WHERE contract_id = $1", 1, k);
	int64_t inv = q(c,
	                "SELECT id FROM invoices WHERE account_id = $1 AND "
	                "year = 2025 AND month = 1",
	                1, w.node_a);
	ck_assert_int_gt(mv, 0);
	ck_assert_int_gt(inv, 0);
	char sql[512];
	/* a posting that would be fine with an existing movement ... */
	snprintf(sql, sizeof sql,
	         "INSERT INTO postings (movement_id, invoice_id, account_id, "
	         "contract_id, year, month, role, amount) VALUES (%" PRId64
	         ", %" PRId64 ", %" PRId64 ", %" PRId64
	         ", 2025, 1, 'seller', 0)",
	         mv + 1000, inv, w.node_a, k);
	const char *e = q_fails(c, sql);
	ck_assert_msg(strstr(e, "does not exist") != NULL, "%s", e);
	/* ... or an existing invoice */
	snprintf(sql, sizeof sql,
	         "INSERT INTO postings (movement_id, invoice_id, account_id, "
	         "contract_id, year, month, role, amount) VALUES (%" PRId64
	         ", %" PRId64 ", %" PRId64 ", %" PRId64
	         ", 2025, 1, 'seller', 0)",
	         mv, inv + 1000, w.node_a, k);
	e = q_fails(c, sql);
	ck_assert_msg(strstr(e, "(missing)") != NULL, "%s", e);
	e = q_fails(c, "INSERT INTO movements (contract_id, kind, year, month, "
	               "charge_start_ns, charge_end_ns, page_seconds, "
	               "unit_price, amount, fee) VALUES (987654321, 'usage', "
	               "2025, 1, 0, 1, 0, 0, 0, 0)");
	ck_assert_msg(strstr(e, "contract 987654321, which does not exist") !=
	                  NULL,
	              "%s", e);
	e = q_fails(c, "INSERT INTO billing_months (contract_id, year, month, "
	               "billed_ps, recon) VALUES (987654321, 2025, 1, 0, "
	               "'none')");
	ck_assert_msg(strstr(e, "does not exist") != NULL, "%s", e);
	e = q_fails(c, "INSERT INTO billing_contracts (contract_id, fee_bps) "
	               "VALUES (987654321, 0)");
	ck_assert_msg(strstr(e, "does not exist") != NULL, "%s", e);
	/* the same posting with both keys right goes in */
	snprintf(sql, sizeof sql,
	         "INSERT INTO postings (movement_id, invoice_id, account_id, "
	         "contract_id, year, month, role, amount) VALUES (%" PRId64
	         ", %" PRId64 ", %" PRId64 ", %" PRId64
	         ", 2025, 1, 'seller', 0)",
	         mv, inv, w.node_a, k);
	q(c, sql, 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* A contract the arithmetic cannot bill (the API's largest pages at its
 * highest price: a month's amount is past int64) is left unbilled and
 * counted in the run's answer; it does not stop the run, so the other
 * contracts of its batch and of later batches are billed, and the next
 * run bills nothing twice (found from outside: such a contract made every
 * run fail, for every account, for good). */
START_TEST(an_unbillable_contract_does_not_stop_billing)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_poison", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	int64_t huge = INT64_C(1) << 36, top = INT64_C(1000000000000000);
	int64_t bad =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, huge, top, 0,
	             ms(2024, 12), ms(2025, 1), "ended", ms(2025, 2), 0);
	int64_t good =
	    contract(c, spot, 0, w.op_account, w.node_a, 0, GIB4, 100000, 0,
	             ms(2024, 12), ms(2025, 1), "ended", ms(2025, 2), 0);
	report(c, w.node_a, bad, 0, ms(2025, 1), ms(2025, 2),
	       month_ps(huge, 2025, 1));
	report(c, w.node_a, good, 0, ms(2025, 1), ms(2025, 2),
	       month_ps(GIB4, 2025, 1));
	rx_ndollars amount;
	char err[MONEY_MSG_MAX];
	ck_assert_int_eq(money_amount(month_ps(GIB4, 2025, 1), 100000, &amount,
	                              err, sizeof err),
	                 0);
	for (int pass = 0; pass < 2; pass++) {
		json_t *res = run(&h, ms(2025, 2) + DAY);
		ck_assert_int_eq(jint(res, "movements"), pass == 0 ? 1 : 0);
		ck_assert_int_eq(jint(res, "unbilled"), 1);
		json_decref(res);
		ck_assert_int_eq(q(c,
		                   "SELECT coalesce(sum(amount), 0) FROM "
		                   "movements WHERE contract_id = $1",
		                   1, good),
		                 amount);
		ck_assert_int_eq(q(c,
		                   "SELECT count(*) FROM movements WHERE "
		                   "contract_id = $1",
		                   1, bad),
		                 0);
		/* it stays queued, for a run after someone fixed it */
		ck_assert_int_eq(q(c,
		                   "SELECT count(*) FROM billing_dirty WHERE "
		                   "contract_id = $1",
		                   1, bad),
		                 1);
	}
	ledger_ok(&h);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* Market limits a contract's 64-bit totals cannot bill are refused where
 * they come in (found from outside: such a market made contracts that the
 * billing job could only leave unbilled): POST /v1/markets answers 422
 * with the largest price_max allowed, and that value is then accepted; a
 * perm market past the exchange's time range is not a market name; and a
 * market stored before the rule is named in the log at start. */
START_TEST(unbillable_market_limits_are_refused)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	rxh_start(&h, "ramex_t_billing_limits", "--billing_interval_s=0");
	rxh_world(&h, &w);
	/* 2^30 pages x 8e9 n$/page-year fits one order (the book's rule)
	 * but not 173 years of it */
	const char *fmt =
	    "{\"name\":\"%s\",\"tick\":10000,\"lot\":256,\"min_pages\":256,"
	    "\"max_pages\":1073741824,\"price_min\":0,\"price_max\":%lld,"
	    "\"notice_period_s\":0,\"breach_penalty\":0,"
	    "\"delivery_deadline_s\":600}";
	char body[512];
	snprintf(body, sizeof body, fmt, "perm-2199", 8000000000LL);
	long st = rxh_call(&h, "POST", "/v1/markets", w.op_token, body, NULL,
	                   &r);
	ck_assert_msg(st == 422, "%ld %s", st, r.body);
	ck_assert(rxh_is_problem(&r, "urn:ramex:problem:invalid"));
	const char *d =
	    json_string_value(json_object_get(r.json, "detail"));
	const char *at = d ? strstr(d, "price_max may be at most ") : NULL;
	ck_assert_msg(at, "%s", r.body);
	long long top = atoll(at + strlen("price_max may be at most "));
	ck_assert_int_gt(top, 0);
	ck_assert_int_lt(top, 8000000000LL);
	rxh_resp_free(&r);
	/* the largest value it named (on the tick) is a market */
	snprintf(body, sizeof body, fmt, "perm-2199", top / 10000 * 10000);
	st = rxh_call(&h, "POST", "/v1/markets", w.op_token, body, NULL, &r);
	ck_assert_msg(st == 201, "%ld %s", st, r.body);
	rxh_resp_free(&r);
	/* a term past 2200-01-01 */
	snprintf(body, sizeof body, fmt, "perm-2200", 10000LL);
	st = rxh_call(&h, "POST", "/v1/markets", w.op_token, body, NULL, &r);
	ck_assert_msg(st == 400 && strstr(r.body, "2000 to 2199"), "%ld %s",
	              st, r.body);
	rxh_resp_free(&r);
	/* stored before the rule: named at start, the exchange still runs */
	testdb_run(h.conninfo,
	           "INSERT INTO markets (name, product, term_end, tick, lot, "
	           "min_pages, max_pages, price_min, price_max, "
	           "notice_period_s, breach_penalty, delivery_deadline_s) "
	           "VALUES ('perm-2150', 'perm', '2151-01-01', 10000, 256, 256, "
	           "1073741824, 0, 8000000000, 0, 0, 600)");
	rxh_kill(&h, SIGTERM);
	rxh_restart(&h);
	ck_assert_int_eq(rxh_log_count(&h, "market limits past what billing "
	                                   "can hold"),
	                 1);
	ck_assert_int_eq(rxh_log_count(&h, "market=perm-2150"), 1);
	rxh_stop(&h);
}
END_TEST

/* An invoice whose total would pass int64 across several contracts, each
 * billable alone (found from outside: it failed its whole billing batch,
 * for every account in it, at every run): the contract whose postings
 * would take it over is left out whole, queued, logged and counted in the
 * run's `unbilled` and in /metrics; the contracts before it and the rest
 * of the batch are billed, and the next run bills nothing twice. */
START_TEST(an_overflowing_invoice_leaves_one_contract_unbilled)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_billing_invoice", "--billing_interval_s=0");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect(h.conninfo);
	int64_t spot = q(c, "SELECT id FROM markets WHERE name = 'spot'", 0);
	/* January 2025 of 2^30 pages at 4e10 n$/page-year: 3.6e18 n$ each,
	 * so two fit on one invoice and a third does not */
	int64_t pages = INT64_C(1) << 30, price = INT64_C(40000000000);
	int64_t big[3], good;
	for (int i = 0; i < 3; i++) {
		big[i] = contract(c, spot, 0, w.op_account, w.node_a, 0, pages,
		                  price, 0, ms(2024, 12), ms(2025, 1), "ended",
		                  ms(2025, 2), 0);
		report(c, w.node_a, big[i], 0, ms(2025, 1), ms(2025, 2),
		       month_ps(pages, 2025, 1));
	}
	good = contract(c, spot, 0, w.node_b, w.node_c, 0, GIB4, 100000, 0,
	                ms(2024, 12), ms(2025, 1), "ended", ms(2025, 2), 0);
	report(c, w.node_c, good, 0, ms(2025, 1), ms(2025, 2),
	       month_ps(GIB4, 2025, 1));
	rx_ndollars one;
	char err[MONEY_MSG_MAX];
	ck_assert_int_eq(money_amount(month_ps(pages, 2025, 1), price, &one,
	                              err, sizeof err),
	                 0);
	for (int pass = 0; pass < 2; pass++) {
		json_t *res = run(&h, ms(2025, 2) + DAY);
		ck_assert_int_eq(jint(res, "movements"), pass == 0 ? 3 : 0);
		ck_assert_int_eq(jint(res, "unbilled"), 1);
		json_decref(res);
		for (int i = 0; i < 3; i++)
			ck_assert_int_eq(q(c,
			                   "SELECT count(*) FROM movements "
			                   "WHERE contract_id = $1",
			                   1, big[i]),
			                 i < 2 ? 1 : 0);
		ck_assert_int_eq(q(c,
		                   "SELECT count(*) FROM movements WHERE "
		                   "contract_id = $1",
		                   1, good),
		                 1);
		ck_assert_int_eq(q(c,
		                   "SELECT total FROM invoices WHERE "
		                   "account_id = $1 AND year = 2025 AND month = "
		                   "1",
		                   1, w.op_account),
		                 2 * one);
		ck_assert_int_eq(q(c,
		                   "SELECT count(*) FROM billing_dirty WHERE "
		                   "contract_id = $1",
		                   1, big[2]),
		                 1);
	}
	ck_assert_int_ge(rxh_log_count(&h, "contract not billed"), 2);
	struct rxh_resp m;
	ck_assert_int_eq(rxh_call(&h, "GET", "/metrics", NULL, NULL, NULL, &m),
	                 200);
	ck_assert_msg(strstr(m.body, "\nramex_billing_unbilled_contracts 1\n"),
	              "%s", m.body);
	rxh_resp_free(&m);
	ledger_ok(&h);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("billing");
	TCase *tc = tcase_create("billing");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, billing_end_to_end);
	tcase_add_test(tc, fee_goes_to_the_exchange);
	tcase_add_test(tc, month_sums_are_usage_share);
	tcase_add_test(tc, ledger_keys_are_checked);
	tcase_add_test(tc, only_delivered_ends_are_queued);
	tcase_add_test(tc, an_unbillable_contract_does_not_stop_billing);
	tcase_add_test(tc, unbillable_market_limits_are_refused);
	tcase_add_test(tc, an_overflowing_invoice_leaves_one_contract_unbilled);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
