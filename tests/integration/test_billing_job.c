/* test_billing_job.c — the billing job (exchange/billing.c,
 * billing_batch.c, billing_store.c) against a real ramexd and PostgreSQL,
 * at its inputs and faults: month sums of random usage reports exactly
 * usage_share's, only delivered ends queued, the ledger's keys checked by
 * the database, and a contract the arithmetic cannot bill that does not
 * stop a run. The invoices end to end are test_billing.c. */
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/usage.h"
#include "tests/integration/billing_fixture.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

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
 * of the batch are billed, and the next run bills nothing twice. No
 * invoice is made for it (it left an empty draft on its seller's month,
 * which no DELETE may remove). */
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
		/* the third's seller has nothing else that month */
		int64_t seller = i < 2 ? w.node_a : w.node_b;
		big[i] = contract(c, spot, 0, w.op_account, seller, 0, pages,
		                  price, 0, ms(2024, 12), ms(2025, 1), "ended",
		                  ms(2025, 2), 0);
		report(c, seller, big[i], 0, ms(2025, 1), ms(2025, 2),
		       month_ps(pages, 2025, 1));
	}
	good = contract(c, spot, 0, w.node_a, w.node_c, 0, GIB4, 100000, 0,
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
		/* no invoice without a posting: the unbilled contract's
		 * seller gets none (invoices cannot be deleted) */
		ck_assert_int_eq(q(c,
		                   "SELECT count(*) FROM invoices WHERE "
		                   "lines = 0 OR account_id = $1",
		                   1, w.node_b),
		                 0);
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
	Suite *s = suite_create("billing_job");
	TCase *tc = tcase_create("billing_job");
	tcase_set_timeout(tc, 300);
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
