/* test_billing.c — the billing job and its API against a real ramexd and
 * PostgreSQL: contracts of 2025 set up by SQL (trades and contracts rows
 * backdated, delivered), month-by-month usage reports, runs of POST
 * /v1/billing/run as of the end of each month, then the brief's worked
 * examples as invoices, twelve months that sum exactly, the cents paid, a
 * breached perm contract, a late report as an adjustment, the ledger check,
 * the CSV export and who may see what. The billing job's inputs and
 * faults are test_billing_job.c. */
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/usage.h"
#include "tests/integration/billing_fixture.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

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
				ck_assert_msg(
				    a != w.op_account && a != w.node_c,
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

int main(void)
{
	Suite *s = suite_create("billing");
	TCase *tc = tcase_create("billing");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, billing_end_to_end);
	tcase_add_test(tc, fee_goes_to_the_exchange);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
