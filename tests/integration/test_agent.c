/*
 * test_agent.c — ramex-agent end to end: real ramexd (ramexd_harness.h) on
 * a private PostgreSQL, real ramex-agent processes with the sim backend.
 *
 * - trade: the operator bids on a spot market; agent A sells into it (an
 *   offline contract) and node B buys part of A's resting offer (a lend
 *   contract, B's agent receives it). Both deliver through the contract
 *   API, both report usage; then A's workload grows, A recalls both
 *   contracts (recalling, then ended after the market's notice), B gives
 *   the borrowed pages back; SIGTERM leaves no page out. The page-seconds
 *   the exchange counted per contract and side equal what each agent
 *   metered into its spool, report for report, and the reports' numbers
 *   are each counted once. Where the tree has POST /v1/billing/run, the
 *   invoices' amounts equal page_seconds × price / 31 536 000 with the
 *   carry rule.
 * - outage: ramexd is SIGKILLed for several seconds while an agent
 *   delivers; the agent spools, and after a restart on the same database
 *   every spooled report is counted once.
 * - crash: the agent is SIGKILLed and started again on its spool; nothing
 *   is lost or counted twice. Two reports are added to its spool while it
 *   is down, a valid one and one for a contract that does not exist: the
 *   batch is refused (422), resent one by one, the valid one counted and
 *   the other set aside.
 *
 * Waits poll for a condition with a generous bound: they say that
 * something happens, never how fast (speed is bench/40-agent.sh's).
 */
#include <check.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node-agent/spool.h"
#include "tests/integration/agent_harness.h"
#include "tests/integration/fake_http.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

#define YEAR_S   INT64_C(31536000)
#define OP_PRICE 150000 /* the operator's bid, n$/page-year */

/* Sets up agent `name` (files under the test output) with its node key and
 * the sim machine; `more` are extra --key=value flags. */
static void agent_init(struct agh_agent *a, const char *test, const char *name,
                       int64_t account, const char *key, const char *secret,
                       struct rxh *h, long total, long usage,
                       const char *const *more)
{
	char leaf[200];
	snprintf(leaf, sizeof leaf, "agent-%s-%s", test, name);
	agh_init(a, leaf, key, secret, h->port, total, usage, more);
	snprintf(a->name, sizeof a->name, "%s", name);
	a->account = account;
}

static PGconn *db(struct rxh *h)
{
	return testdb_connect(h->conninfo);
}

static int64_t contracts_in(struct rxh *h, const char *state)
{
	PGconn *c = db(h);
	long n = agh_q(c, "SELECT count(*) FROM contracts WHERE state = '%s'",
	               state);
	PQfinish(c);
	return n;
}

static int64_t usage_rows(struct rxh *h, int64_t node)
{
	PGconn *c = db(h);
	long n =
	    agh_q(c, "SELECT count(*) FROM usage_reports WHERE node_id = %lld",
	          (long long)node);
	PQfinish(c);
	return n;
}

/* What the agent metered, from its spool (read after it stopped): per
 * contract the sum of page-seconds over every report, and the count. */
struct metered {
	int n;
	char contract[64][SPOOL_CONTRACT_LEN];
	int64_t ps[64];
	int reports, acked, set_aside;
};

static void read_spool(const struct agh_agent *a, struct metered *m)
{
	static struct spool_report all[8192];
	char err[512];
	memset(m, 0, sizeof m[0]);
	struct spool *s = spool_open(a->spool, 1, err, sizeof err);
	ck_assert_msg(s, "%s", err);
	int n = spool_reports(s, all, 8192);
	ck_assert_int_le(n, 8192);
	spool_close(s);
	for (int i = 0; i < n; i++) {
		m->reports++;
		m->acked += all[i].acked;
		m->set_aside += all[i].set_aside;
		int k = 0;
		while (k < m->n && strcmp(m->contract[k], all[i].contract))
			k++;
		if (k == m->n) {
			ck_assert_int_lt(m->n, 64);
			snprintf(m->contract[m->n++], SPOOL_CONTRACT_LEN, "%s",
			         all[i].contract);
		}
		if (!all[i].set_aside)
			m->ps[k] += all[i].page_seconds;
	}
}

/* The exchange's counted usage equals what agent `a` metered, contract by
 * contract, and each of its reports is counted exactly once. Returns the
 * page-seconds in all. */
static int64_t check_counted(struct rxh *h, const struct agh_agent *a,
                             int set_aside)
{
	struct metered m;
	read_spool(a, &m);
	ck_assert_msg(m.set_aside == set_aside,
	              "%s set %d reports aside, not %d; see %s", a->name,
	              m.set_aside, set_aside, a->log);
	ck_assert_msg(m.acked + m.set_aside == m.reports,
	              "%s: %d of %d reports acknowledged; see %s", a->name,
	              m.acked, m.reports, a->log);
	PGconn *c = db(h);
	int64_t all = 0;
	for (int i = 0; i < m.n; i++) {
		long ex = agh_q(c,
		                "SELECT coalesce(sum(page_seconds), 0) FROM "
		                "usage_reports WHERE node_id = %lld AND "
		                "contract_id = %s",
		                (long long)a->account, m.contract[i]);
		ck_assert_msg(ex == m.ps[i],
		              "%s contract %s: exchange counted %ld "
		              "page-seconds, agent metered %lld",
		              a->name, m.contract[i], ex, (long long)m.ps[i]);
		all += m.ps[i];
	}
	long rows =
	    agh_q(c, "SELECT count(*) FROM usage_reports WHERE node_id = %lld",
	          (long long)a->account);
	ck_assert_msg(rows == m.reports - m.set_aside,
	              "%s: exchange holds %ld reports, spool has %d counted",
	              a->name, rows, m.reports - m.set_aside);
	PQfinish(c);
	return all;
}

/* The buyer's invoice lines for contract `id`, through the API: their
 * amounts summed (role buyer), and their page-seconds. */
static int64_t invoiced(struct rxh *h, int64_t buyer, int64_t id, int64_t *ps)
{
	struct rxh_resp r, d;
	char path[128];
	int64_t sum = 0;
	*ps = 0;
	snprintf(path, sizeof path, "/v1/invoices?account_id=%lld",
	         (long long)buyer);
	ck_assert_int_eq(rxh_call(h, "GET", path, h->admin, NULL, NULL, &r),
	                 200);
	json_t *inv;
	size_t i;
	json_array_foreach(json_object_get(r.json, "items"), i, inv)
	{
		snprintf(
		    path, sizeof path, "/v1/invoices/%lld",
		    (long long)json_integer_value(json_object_get(inv, "id")));
		ck_assert_int_eq(
		    rxh_call(h, "GET", path, h->admin, NULL, NULL, &d), 200);
		json_t *l;
		size_t k;
		json_array_foreach(json_object_get(d.json, "items"), k, l)
		{
			const char *role =
			    json_string_value(json_object_get(l, "role"));
			if (json_integer_value(
			        json_object_get(l, "contract_id")) != id ||
			    !role || strcmp(role, "buyer"))
				continue;
			sum += json_integer_value(json_object_get(l, "amount"));
			*ps += json_integer_value(
			    json_object_get(l, "page_seconds"));
		}
		rxh_resp_free(&d);
	}
	rxh_resp_free(&r);
	return sum;
}

/* Runs billing and checks every contract's charge: the page-seconds
 * billed (the seller's for offline; the lower side's for lend) × price /
 * 31 536 000, rounded down, with the remainder carried (docs/money.md).
 * What bills of a side's reports is their time inside the delivery span
 * (billable_ps): the agent meters from taking the pages, a moment before
 * ramexd stamps the delivery, to giving them back, a moment after the
 * contract ends; that is checked to be all it loses. */
static void check_billing(struct rxh *h)
{
	struct rxh_resp r;
	long st =
	    rxh_call(h, "POST", "/v1/billing/run", h->admin, "{}", NULL, &r);
	ck_assert_msg(st == 200 || st == 201, "billing run: %ld %s", st,
	              r.body);
	rxh_resp_free(&r);
	PGconn *c = db(h);
	PGresult *k = PQexec(
	    c, "SELECT c.id, c.buyer_id, c.price, c.delivery, "
	       "coalesce((SELECT sum(billable_ps) FROM usage_reports u WHERE "
	       "u.contract_id = c.id AND u.side = 'seller'), 0), "
	       "(SELECT sum(billable_ps) FROM usage_reports u WHERE "
	       "u.contract_id = c.id AND u.side = 'buyer') FROM contracts c "
	       "ORDER BY c.id");
	ck_assert_int_eq(PQresultStatus(k), PGRES_TUPLES_OK);
	/* per side: billable <= reported, the invariant, and an honest
	 * agent loses less than 2 s of its pages (the moments above) plus
	 * the page-second its last carry holds */
	ck_assert_int_eq(
	    agh_q(c,
	          "SELECT count(*) FROM usage_totals t JOIN contracts c ON "
	          "c.id = t.contract_id WHERE t.billable_ps > t.reported_ps OR "
	          "t.billable_ps::numeric * 1000000000 > c.pages::numeric * "
	          "(CASE WHEN c.ended_ns > 0 THEN c.ended_ns ELSE "
	          "(extract(epoch FROM clock_timestamp()) * 1e9)::bigint END "
	          "- c.delivered_ns) OR t.reported_ps - t.billable_ps > "
	          "c.pages * 2 + 1"),
	    0);
	PQclear(k);
	k = PQexec(
	    c, "SELECT c.id, c.buyer_id, c.price, c.delivery, "
	       "coalesce((SELECT sum(billable_ps) FROM usage_reports u WHERE "
	       "u.contract_id = c.id AND u.side = 'seller'), 0), "
	       "(SELECT sum(billable_ps) FROM usage_reports u WHERE "
	       "u.contract_id = c.id AND u.side = 'buyer') FROM contracts c "
	       "ORDER BY c.id");
	ck_assert_int_eq(PQresultStatus(k), PGRES_TUPLES_OK);
	int checked = 0;
	for (int i = 0; i < PQntuples(k); i++) {
		int64_t id = strtoll(PQgetvalue(k, i, 0), NULL, 10);
		int64_t buyer = strtoll(PQgetvalue(k, i, 1), NULL, 10);
		int64_t price = strtoll(PQgetvalue(k, i, 2), NULL, 10);
		int lend = !strcmp(PQgetvalue(k, i, 3), "lend");
		int64_t ps = strtoll(PQgetvalue(k, i, 4), NULL, 10);
		if (lend && !PQgetisnull(k, i, 5)) {
			int64_t b = strtoll(PQgetvalue(k, i, 5), NULL, 10);
			if (b < ps)
				ps = b;
		}
		if (ps == 0)
			continue;
		__int128 x = (__int128)ps * price;
		int64_t want = (int64_t)(x / YEAR_S);
		int64_t carry = (int64_t)(x % YEAR_S);
		long moved =
		    agh_q(c,
		          "SELECT coalesce(sum(amount), 0) FROM movements "
		          "WHERE contract_id = %lld",
		          (long long)id);
		ck_assert_msg(
		    moved == want,
		    "contract %lld: billed %ld n$, %lld page-s x %lld "
		    "/ 31536000 = %lld",
		    (long long)id, moved, (long long)ps, (long long)price,
		    (long long)want);
		ck_assert_int_eq(
		    agh_q(c,
		          "SELECT amount_carry FROM billing_contracts "
		          "WHERE contract_id = %lld",
		          (long long)id),
		    carry);
		int64_t line_ps;
		ck_assert_int_eq(invoiced(h, buyer, id, &line_ps), want);
		ck_assert_int_eq(line_ps, ps);
		checked++;
	}
	ck_assert_int_ge(checked, 1);
	PQclear(k);
	PQfinish(c);
}

static void setup(struct rxh *h, struct rxh_world *w, const char *db_name)
{
	rxh_start(h, db_name, "");
	rxh_world(h, w);
	/* A recall must end within the test: a short notice on spot (there
	 * is no API to change a market; ramexd reads markets at start). */
	PGconn *c = db(h);
	PGresult *r = PQexec(c, "UPDATE markets SET notice_period_s = 2 "
	                        "WHERE name = 'spot'");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
	              PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	rxh_stop(h);
	rxh_restart(h);
}

static void operator_bid(struct rxh *h, struct rxh_world *w, long pages)
{
	struct rxh_resp r;
	char body[256];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"side\":\"buy\",\"pages\":%ld,"
	         "\"price\":%d,\"tif\":\"gtc\"}",
	         pages, OP_PRICE);
	long st =
	    rxh_call(h, "POST", "/v1/orders", w->op_token, body, NULL, &r);
	ck_assert_msg(st == 201, "operator bid: %ld %s", st, r.body);
	rxh_resp_free(&r);
}

static int usage_endpoint(struct rxh *h, struct rxh_world *w)
{
	struct rxh_resp r;
	long st = rxh_call_signed(h, "POST", "/v1/usage", w->key_c, w->secret_c,
	                          "{\"reports\":[]}", 0, NULL, &r);
	rxh_resp_free(&r);
	return st != 404 && st != 405;
}

/* A seller with plenty of spare memory (64 Ki pages, 8 Ki used) whose
 * idle pages are cheap: it asks its floor, under the operator's bid. */
static const char *const seller_flags[] = {
    "--margin_min_pages=4096", "--spot_floor=100000", "--stall_value=10", NULL};

START_TEST(trade_deliver_recall_report)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;

	setup(&h, &w, "agent_trade");
	ck_assert_msg(usage_endpoint(&h, &w),
	              "ramexd has no POST /v1/usage: the agents' reports "
	              "cannot be counted");
	operator_bid(&h, &w, 8192);
	agent_init(&A, "trade", "a", w.node_a, w.key_a, w.secret_a, &h, 65536,
	           8192, seller_flags);
	/* B's workload needs more than its 16 Ki pages (12000 used plus a
	 * margin of 8 Ki): it bids for the difference. */
	/* B does without the event stream: it finds its contracts by
	 * listing them every sample, the fallback of a stream that is down.
	 * A serves no lend data path (no lend_listen), so B runs none either:
	 * the lend is the executors' alone, and a borrower whose data path
	 * never came up bills nothing (test_agent_lend). */
	static const char *const b_flags[] = {"--margin_min_pages=8192",
	                                      "--events=no",
	                                      "--lend_borrow_mode=off", NULL};
	agent_init(&B, "trade", "b", w.node_b, w.key_b, w.secret_b, &h, 16384,
	           12000, b_flags);
	agh_start(&A);
	agh_start(&B);

	/* A sells into the operator's bid and delivers. */
	AGH_WAIT_FOR(contracts_in(&h, "active") >= 1,
	             "A's sale was not delivered; see %s", A.log);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_offline_pages") == 8192,
	             "A does not hold the offline pages; see %s", A.log);
	/* It follows the event stream (fills, contract moves). */
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_events_up") == 1 &&
	                 agh_metric(&A, "ramex_agent_events_total") > 0,
	             "A does not read the event stream; see %s", A.log);

	/* B is short of memory and buys from A's resting offer: a lend
	 * contract, delivered by A and received by B. */
	PGconn *c = db(&h);
	AGH_WAIT_FOR(
	    agh_q(c,
	          "SELECT count(*) FROM contracts WHERE state = 'active' AND "
	          "delivery = 'lend' AND seller_id = %lld AND buyer_id = %lld",
	          (long long)w.node_a, (long long)w.node_b) == 1,
	    "no lend contract from A to B was delivered; see %s and %s", A.log,
	    B.log);
	long lent =
	    agh_q(c, "SELECT pages FROM contracts WHERE state = 'active' AND "
	             "delivery = 'lend'");
	ck_assert_int_gt(lent, 0);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_lent_pages") == lent,
	             "A does not lend; see %s", A.log);
	AGH_WAIT_FOR(agh_metric(&B, "ramex_agent_borrowed_held_pages") == lent,
	             "B does not receive; see %s", B.log);

	/* Usage flows from both sides of the lend and the offline seller. */
	AGH_WAIT_FOR(
	    agh_q(c, "SELECT count(*) FROM (SELECT contract_id, side FROM "
	             "usage_reports GROUP BY contract_id, side HAVING "
	             "count(*) >= 3 AND sum(page_seconds) > 0) s") == 3,
	    "usage of three contract sides not counted; see %s and %s", A.log,
	    B.log);

	/* A's workload grows: it takes its pages back and recalls. */
	agh_write_file(A.usage, "60000\n");
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_offline_pages") == 0 &&
	                 agh_metric(&A, "ramex_agent_lent_pages") == 0,
	             "A did not take its pages back; see %s", A.log);
	AGH_WAIT_FOR(
	    agh_q(c,
	          "SELECT count(*) FROM contract_transitions t JOIN contracts "
	          "k ON k.id = t.contract_id WHERE t.to_state = 'recalling'") ==
	        2,
	    "A did not recall both contracts; see %s", A.log);
	AGH_WAIT_FOR(contracts_in(&h, "ended") == 2,
	             "the recalled contracts did not end; see ramexd's log %s",
	             h.log);
	AGH_WAIT_FOR(agh_metric(&B, "ramex_agent_borrowed_held_pages") == 0,
	             "B still holds borrowed pages; see %s", B.log);

	/* SIGTERM: nothing left out, nothing left to send. */
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_offline_pages"), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_lent_pages"), 0);
	ck_assert_int_eq(agh_metric(&B, "ramex_agent_borrowed_held_pages"), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_reports_pending"), 0);
	ck_assert_int_eq(agh_metric(&B, "ramex_agent_reports_pending"), 0);

	int64_t a_ps = check_counted(&h, &A, 0);
	int64_t b_ps = check_counted(&h, &B, 0);
	ck_assert_int_gt(a_ps, 0);
	ck_assert_int_gt(b_ps, 0);
	check_billing(&h);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* A alone, selling to the operator; returns once its contract is active
 * and some usage was counted. */
static void one_seller(struct rxh *h, struct rxh_world *w, struct agh_agent *A,
                       const char *test)
{
	setup(h, w, test);
	ck_assert_msg(usage_endpoint(h, w), "ramexd has no POST /v1/usage");
	operator_bid(h, w, 8192);
	agent_init(A, test, "a", w->node_a, w->key_a, w->secret_a, h, 65536,
	           8192, seller_flags);
	agh_start(A);
	AGH_WAIT_FOR(contracts_in(h, "active") == 1,
	             "A's sale was not delivered; see %s", A->log);
	AGH_WAIT_FOR(usage_rows(h, w->node_a) >= 3,
	             "A's usage is not counted; see %s", A->log);
}

START_TEST(exchange_outage)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A;

	one_seller(&h, &w, &A, "agent_outage");
	/* The same port again after the restart, as a real deployment. */
	snprintf(h.extra, sizeof h.extra, "--listen=127.0.0.1:%d", h.port);
	rxh_kill(&h, SIGKILL);
	int64_t before = usage_rows(&h, w.node_a);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_reports_pending") >= 3 &&
	                 agh_metric(&A, "ramex_agent_exchange_up") == 0,
	             "A does not spool while the exchange is down; see %s",
	             A.log);
	agh_sleep_ms(3000);
	ck_assert_int_eq(usage_rows(&h, w.node_a), before);
	rxh_restart(&h);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_reports_pending") == 0 &&
	                 usage_rows(&h, w.node_a) > before + 3,
	             "A's spooled reports did not reach the exchange; see %s",
	             A.log);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_events_up") == 1,
	             "A's event stream did not come back; see %s", A.log);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_offline_pages"), 0);
	ck_assert_int_gt(check_counted(&h, &A, 0), 0);
	rxh_stop(&h);
}
END_TEST

/* While A is down, two more reports go into its spool, as if it had
 * metered them: one period more of its contract (valid), and one for a
 * contract that does not exist (the exchange refuses it). They travel in
 * one batch, refused as a whole; resent one by one, the valid one is
 * counted and the other set aside. */
static void inject(struct rxh *h, const struct agh_agent *a)
{
	char err[512], id[32];
	struct spool_report last, v, bad;
	struct timespec now;
	PGconn *c = db(h);
	snprintf(id, sizeof id, "%ld",
	         agh_q(c, "SELECT id FROM contracts WHERE state = 'active'"));
	PQfinish(c);
	struct spool *s = spool_open(a->spool, 1, err, sizeof err);
	ck_assert_msg(s, "%s", err);
	ck_assert_int_eq(spool_last(s, id, &last), 0);
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t t = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	memset(&v, 0, sizeof v);
	snprintf(v.contract, sizeof v.contract, "%s", id);
	v.start = last.end;
	v.end = last.end + 1000000000 < t ? last.end + 1000000000 : t;
	ck_assert_int_gt(v.end, v.start);
	v.page_seconds = last.pages_at_end * (v.end - v.start) / 1000000000;
	v.carry_pns = last.carry_pns;
	v.cum_page_seconds = last.cum_page_seconds + v.page_seconds;
	v.pages_at_end = last.pages_at_end;
	ck_assert_msg(spool_append(s, &v, err, sizeof err) == 0, "%s", err);
	memset(&bad, 0, sizeof bad);
	snprintf(bad.contract, sizeof bad.contract, "999999");
	bad.start = t - 2000000000;
	bad.end = t - 1000000000;
	bad.page_seconds = bad.cum_page_seconds = 1;
	bad.pages_at_end = 1;
	ck_assert_msg(spool_append(s, &bad, err, sizeof err) == 0, "%s", err);
	spool_close(s);
}

START_TEST(agent_crash)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A;

	one_seller(&h, &w, &A, "agent_crash");
	int st = agh_signal(&A, SIGKILL);
	ck_assert(WIFSIGNALED(st));
	int64_t before = usage_rows(&h, w.node_a);
	inject(&h, &A);
	agh_start(&A); /* the same spool, the same flags */
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_offline_pages") == 8192 &&
	                 agh_metric(&A, "ramex_agent_reports_set_aside") == 1 &&
	                 usage_rows(&h, w.node_a) >= before + 3,
	             "A did not resume delivering and reporting; see %s",
	             A.log);
	ck_assert_int_eq(contracts_in(&h, "active"), 1);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_offline_pages"), 0);
	ck_assert_int_eq(agh_metric(&A, "ramex_agent_reports_pending"), 0);
	/* every report this run took (found pending in the spool, or
	 * spooled) is acknowledged, set aside or pending, once: the reports
	 * found in the spool were acked without being counted, so
	 * acked_total passed reports_total */
	int64_t took = agh_metric(&A, "ramex_agent_reports_total"),
	        acked = agh_metric(&A, "ramex_agent_reports_acked_total");
	ck_assert_msg(took == acked + 1, "reports_total %lld, acked %lld",
	              (long long)took, (long long)acked);
	ck_assert_int_gt(check_counted(&h, &A, 1), 0);
	rxh_stop(&h);
}
END_TEST

/* The open orders of node `acct` that `by` placed ('node:%' for its
 * agent, 'tok:%' for people). */
/* The spool's disk full for a few seconds (RLIMIT_FSIZE at the spool's
 * size: its appends fail with EFBIG as on a full disk with ENOSPC): the
 * periods metered meanwhile go into the next report once it can be
 * written, so the contract's reports still cover its delivery without a
 * gap. They were dropped ("the meter keeps nothing back"): pages
 * delivered and never billed. */
START_TEST(full_disk_loses_no_period)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A;
	struct stat st;

	/* exceeding the limit must fail the write, not kill the agent; an
	 * ignored signal stays ignored across exec */
	signal(SIGXFSZ, SIG_IGN);
	one_seller(&h, &w, &A, "agent_disk_full");
	ck_assert_int_eq(stat(A.spool, &st), 0);
	struct rlimit full = {(rlim_t)st.st_size, RLIM_INFINITY},
	              room = {RLIM_INFINITY, RLIM_INFINITY};
	ck_assert_int_eq(prlimit(A.pid, RLIMIT_FSIZE, &full, NULL), 0);
	int64_t before = usage_rows(&h, w.node_a);
	agh_sleep_ms(4000); /* four report rounds */
	ck_assert_int_eq(prlimit(A.pid, RLIMIT_FSIZE, &room, NULL), 0);
	AGH_WAIT_FOR(usage_rows(&h, w.node_a) >= before + 3,
	             "A's reports did not resume; see %s", A.log);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	PGconn *c = db(&h);
	long gaps = agh_q(
	    c, "SELECT count(*) FROM (SELECT period_start_ns, lag(period_end_ns) "
	       "OVER (PARTITION BY contract_id, side ORDER BY period_start_ns) "
	       "AS prev FROM usage_reports WHERE node_id = %lld) x WHERE prev "
	       "IS NOT NULL AND prev <> period_start_ns",
	    (long long)w.node_a);
	long spans = agh_q(c,
	                   "SELECT count(*) FROM usage_reports WHERE node_id = "
	                   "%lld AND period_end_ns - period_start_ns > "
	                   "2000000000",
	                   (long long)w.node_a);
	PQfinish(c);
	ck_assert_msg(gaps == 0,
	              "%ld periods missing from A's reports; see %s", gaps,
	              A.log);
	ck_assert_msg(spans >= 1, "no report spans the full disk; see %s",
	              A.log);
	rxh_stop(&h);
}
END_TEST

static long open_by(PGconn *c, int64_t acct, const char *by)
{
	return agh_q(c,
	             "SELECT count(*) FROM orders WHERE account_id = %lld AND "
	             "status = 'open' AND placed_by LIKE '%s'",
	             (long long)acct, by);
}

/* Waits until agent `a` took `n` more samples (each one decides). */
static void samples(struct agh_agent *a, int n)
{
	int64_t s0 = agh_metric(a, "ramex_agent_samples_total");
	AGH_WAIT_FOR(agh_metric(a, "ramex_agent_samples_total") >= s0 + n,
	             "%s takes no samples; see %s", a->name, a->log);
}

/*
 * A person and the agent on one node (issue: an engineer's manual bid was
 * cancelled by the agent ~2 s later as "no longer short"):
 * - a trader's bid for node A, which has spare memory, survives the
 *   agent's next samples, and so does a trader's offer; the agent's own
 *   quote is recorded as placed by its key, the trader's by its token;
 * - the trader pauses A: the agent withdraws its own quote (who and why
 *   kept with the order) and places nothing while paused; the trader's
 *   orders stand; the pause is refused for another team's node;
 * - resumed, the agent quotes again.
 */
START_TEST(people_and_the_agent)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct agh_agent A;
	char path[128], body[256];

	setup(&h, &w, "agent_people");
	agent_init(&A, "people", "a", w.node_a, w.key_a, w.secret_a, &h,
	           65536, 8192, seller_flags);
	agh_start(&A);
	PGconn *c = db(&h);
	/* A has spare memory: it offers on spot, and bids for nothing */
	AGH_WAIT_FOR(open_by(c, w.node_a, "node:%") == 1,
	             "A does not quote; see %s", A.log);

	/* a trader bids for A by hand, under A's ask (no self-trade) */
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":"
	         "\"buy\",\"pages\":1024,\"price\":1000}",
	         (long long)w.node_a);
	long st = rxh_call(&h, "POST", "/v1/orders", w.trader_token, body,
	                   NULL, &r);
	ck_assert_msg(st == 201, "trader bid: %ld %s", st, r.body);
	int64_t bid = json_integer_value(json_object_get(
	    json_object_get(r.json, "order"), "id"));
	rxh_resp_free(&r);
	/* and offers 256 pages of A far above the market */
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":"
	         "\"sell\",\"pages\":256,\"price\":900000000}",
	         (long long)w.node_a);
	st = rxh_call(&h, "POST", "/v1/orders", w.trader_token, body, NULL,
	              &r);
	ck_assert_msg(st == 201, "trader offer: %ld %s", st, r.body);
	rxh_resp_free(&r);

	samples(&A, 5);
	ck_assert_msg(open_by(c, w.node_a, "tok:%") == 2,
	              "the agent cancelled a person's order; see %s", A.log);
	ck_assert_int_eq(agh_q(c,
	                       "SELECT count(*) FROM orders WHERE placed_by "
	                       "LIKE 'tok:%%' AND cancelled_by IS NOT NULL"),
	                 0);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_others_buy_pages") == 1024 &&
	                 agh_metric(&A, "ramex_agent_others_sell_pages") ==
	                     256,
	             "A does not plan around the trader's orders; see %s",
	             A.log);

	/* the API says who placed what, by name */
	snprintf(path, sizeof path, "/v1/orders/%lld", (long long)bid);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", path, w.trader_token, NULL, NULL, &r), 200);
	ck_assert_msg(!json_is_true(json_object_get(r.json, "by_agent")) &&
	                  strstr(json_string_value(json_object_get(
	                             r.json, "placed_by_name")),
	                         "(trader)"),
	              "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/orders?status=open&side=sell",
	             w.trader_token, NULL, NULL, &r),
	    200);
	int agents = 0;
	json_t *o;
	size_t i;
	json_array_foreach(json_object_get(r.json, "items"), i, o)
	{
		if (!json_is_true(json_object_get(o, "by_agent")))
			continue;
		agents++;
		ck_assert_str_eq(
		    json_string_value(json_object_get(o, "placed_by_name")),
		    "agent of node-a");
	}
	ck_assert_int_eq(agents, 1);
	rxh_resp_free(&r);

	/* pause: refused for another team's node, and to finance */
	snprintf(path, sizeof path, "/v1/nodes/%lld/pause",
	         (long long)w.node_c);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", path, w.trader_token, "{}", NULL, &r), 404);
	rxh_resp_free(&r);
	snprintf(path, sizeof path, "/v1/nodes/%lld/pause",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", path, w.finance_token, "{}", NULL, &r), 403);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "POST", path, w.trader_token,
	                          "{\"note\":\"hand trading this week\"}",
	                          NULL, &r),
	                 200);
	ck_assert(json_is_true(json_object_get(r.json, "trading_paused")));
	rxh_resp_free(&r);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_paused") == 1 &&
	                 open_by(c, w.node_a, "node:%") == 0,
	             "paused, A still quotes; see %s", A.log);
	/* its quote went with who and why */
	ck_assert_int_ge(agh_q(c,
	                       "SELECT count(*) FROM orders WHERE placed_by "
	                       "LIKE 'node:%%' AND cancelled_by = placed_by "
	                       "AND cancel_note = 'automation paused by a "
	                       "person'"),
	                 1);
	long placed = agh_q(c, "SELECT count(*) FROM orders WHERE placed_by "
	                       "LIKE 'node:%%'");
	samples(&A, 5);
	ck_assert_msg(agh_q(c, "SELECT count(*) FROM orders WHERE placed_by "
	                       "LIKE 'node:%%'") == placed,
	              "paused, A placed an order; see %s", A.log);
	ck_assert_int_eq(open_by(c, w.node_a, "tok:%"), 2);

	/* resume: A quotes again */
	snprintf(path, sizeof path, "/v1/nodes/%lld/resume",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", path, w.trader_token, NULL, NULL, &r), 200);
	ck_assert(!json_is_true(json_object_get(r.json, "trading_paused")));
	rxh_resp_free(&r);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_paused") == 0 &&
	                 open_by(c, w.node_a, "node:%") == 1,
	             "resumed, A does not quote; see %s", A.log);
	ck_assert_int_eq(open_by(c, w.node_a, "tok:%"), 2);

	/* paused again without a note (`ramexctl nodes pause NODE`): the
	 * note is null, and the agent logged it through a NULL pointer */
	snprintf(path, sizeof path, "/v1/nodes/%lld/pause",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", path, w.trader_token, NULL, NULL, &r), 200);
	rxh_resp_free(&r);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_paused") == 1,
	             "paused without a note, A did not say so; see %s", A.log);

	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* A status file that cannot be written (its folder is missing) is said
 * in the log, once, not passed over in silence (the node's monitoring
 * would show stale figures and nothing say why). No exchange is needed:
 * the agent runs on without one. */
START_TEST(status_file_unwritable_is_logged)
{
	struct agh_agent A;
	char line[1024];
	agh_init(&A, "agent-status-missing", "nk_0000000000000000",
	         "rxs_0000000000000000", 1, 65536, 8192, NULL);
	for (int i = 0; i < A.nargs; i++)
		if (!strncmp(A.args[i], "--status_file=", 14))
			snprintf(A.args[i], sizeof A.args[i],
			         "--status_file=%s/missing/status.prom", A.dir);
	agh_start(&A);
	int n = 0;
	for (int t = 0; t < 50 && n == 0; t++) {
		agh_sleep_ms(100);
		FILE *f = fopen(A.log, "r");
		n = 0;
		while (f && fgets(line, sizeof line, f))
			n += strstr(line, "could not write the status file") &&
			     strstr(line, "missing/status.prom") != NULL;
		if (f)
			fclose(f);
	}
	ck_assert_msg(n == 1, "the log does not say so; see %s", A.log);
	agh_sleep_ms(2500); /* more samples: said once, not each */
	FILE *f = fopen(A.log, "r");
	n = 0;
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, "could not write the status file") != NULL;
	if (f)
		fclose(f);
	ck_assert_msg(n == 1, "said %d times; see %s", n, A.log);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
}
END_TEST

/* Runs ramex-agent (sim) on this url, secret file and spool until it
 * exits, as a shell would; its output in out, its wait status back. */
static int agent_once(const char *url, const char *secret, const char *spool,
                      char *out, size_t len)
{
	char bin[512], cmd[2400];
	agh_bin_dir(bin, sizeof bin);
	snprintf(cmd, sizeof cmd,
	         "%s/ramex-agent '--exchange_url=%s' --key_id=k "
	         "--secret_file=%s --backend=sim --spool=%s 2>&1",
	         bin, url, secret, spool);
	FILE *p = popen(cmd, "r");
	ck_assert(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = 0;
	return pclose(p);
}

/* A node secret that cannot be read says why (found from outside:
 * secret_file=/etc said "is empty"), and an empty one says that; the agent
 * does not start either way. */
START_TEST(secret_file_errors_say_why)
{
	char out[8192], empty[700], spool[700];
	snprintf(empty, sizeof empty, "%s/secret-empty", agh_out_dir());
	snprintf(spool, sizeof spool, "%s/secret-spool", agh_out_dir());
	agh_write_file(empty, "");
	const char *const secret[] = {"/", empty};
	static const char *const want[] = {
	    "could not read the node secret /: Is a directory",
	    "is empty"};
	for (int i = 0; i < 2; i++) {
		int st = agent_once("http://127.0.0.1:9", secret[i], spool, out,
		                    sizeof out);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s", out);
		ck_assert_msg(strstr(out, want[i]), "%s: %s", secret[i], out);
	}
}
END_TEST

/* An exchange_url the agent cannot use is a configuration error: exit 2
 * and the URL's fault, as every other bad setting (it was 1, "could not
 * start", as for a failure while running). */
START_TEST(bad_exchange_url_is_a_config_error)
{
	char out[8192], secret[700], spool[700];
	snprintf(secret, sizeof secret, "%s/url-secret", agh_out_dir());
	snprintf(spool, sizeof spool, "%s/url-spool", agh_out_dir());
	agh_write_file(secret, "00112233445566778899aabbccddeeff");
	static const char *const url[] = {
	    "http://127.0.0.1:99999", "http://127.0.0.1:", "http://:8080",
	    "http://127.0.0.1:80x",   "https://[::1:8080", "http://h?q=1"};
	static const char *const want[] = {"bad port",    "bad port",
	                                   "no host",     "bad port",
	                                   "without ']'", "no query"};
	for (size_t i = 0; i < sizeof url / sizeof *url; i++) {
		int st = agent_once(url[i], secret, spool, out, sizeof out);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2,
		              "%s: exit %d: %s", url[i],
		              WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
		ck_assert_msg(strstr(out, want[i]), "%s: %s", url[i], out);
	}
}
END_TEST

/* An exchange that answers whoami with something other than 401 or 403:
 * a 503 (ramexd while its PostgreSQL is away, a proxy during a restart) or
 * a 200 that names no account (exchange_url at another web server). Found
 * from outside: the agent exited at start ("the exchange refused this
 * node's key (503 ...): check key_id and secret_file"), or asked again
 * every sample in silence. It must keep running, say once what it got,
 * and stop cleanly. The fake exchange answers every request alike. */
static int log_count(const char *path, const char *what)
{
	char line[2048];
	int n = 0;
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

START_TEST(whoami_unanswered_is_no_refusal)
{
	static const char *const answers[] = {
	    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
	    "application/problem+json\r\nContent-Length: 45\r\nConnection: "
	    "close\r\n\r\n{\"title\":\"database unavailable\",\"status\":503}",
	    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
	    "22\r\nConnection: close\r\n\r\n<html>not ramex</html>"};
	static const char *const leaf[] = {"agent-whoami-503",
	                                   "agent-whoami-html"};
	for (int i = 0; i < 2; i++) {
		struct fake_http f;
		struct agh_agent A;
		fake_http_start(&f, answers[i]);
		agh_init(&A, leaf[i], "nk_0000000000000000",
		         "rxs_0000000000000000", f.port, 65536, 8192, NULL);
		agh_start(&A);
		AGH_WAIT_FOR(log_count(A.log, "did not say who this node is"),
		             "%s: not said; see %s", leaf[i], A.log);
		agh_sleep_ms(2500); /* more samples: still running, said once */
		ck_assert_msg(log_count(A.log, "did not say who this node is") ==
		                  1,
		              "%s: said more than once; see %s", leaf[i], A.log);
		ck_assert_msg(!log_count(A.log, "refused this node"),
		              "%s: taken for a refusal; see %s", leaf[i], A.log);
		int st = agh_signal(&A, SIGTERM);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		              "%s: the agent did not run on (status %d); see %s",
		              leaf[i], st, A.log);
		fake_http_stop(&f);
	}
}
END_TEST

/* An event stream that the exchange (or a proxy) answers 200 and ends at
 * once is reopened after 1, 2, 4 ... s, not every second: found from
 * outside, the agent reopened it every second for ever, two log lines and
 * a contract listing each time. Over 8 s: at most 5 opens (1+2+4 s of
 * waits between the first four), not 8. */
START_TEST(event_stream_that_ends_backs_off)
{
	struct fake_http f;
	struct agh_agent A;
	fake_http_start(&f, "HTTP/1.1 200 OK\r\nContent-Type: "
	                    "text/event-stream\r\nContent-Length: 0\r\n"
	                    "Connection: close\r\n\r\n");
	agh_init(&A, "agent-events-end", "nk_0000000000000000",
	         "rxs_0000000000000000", f.port, 65536, 8192, NULL);
	agh_start(&A);
	AGH_WAIT_FOR(log_count(A.log, "event stream open"),
	             "the stream never opened; see %s", A.log);
	agh_sleep_ms(8000);
	int n = log_count(A.log, "event stream open");
	ck_assert_msg(n >= 2 && n <= 5, "opened %d times in 8 s; see %s", n,
	              A.log);
	int st = agh_signal(&A, SIGTERM);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d; see %s",
	              st, A.log);
	fake_http_stop(&f);
}
END_TEST

START_TEST(help_is_complete)
{
	char bin[512], cmd[700], out[65536];
	agh_bin_dir(bin, sizeof bin);
	snprintf(cmd, sizeof cmd, "%s/ramex-agent --help", bin);
	FILE *p = popen(cmd, "r");
	ck_assert(p);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	ck_assert_int_eq(pclose(p), 0);
	static const char *const must[] = {"--config",      "--exchange_url",
	                                   "--key_id",      "--secret_file",
	                                   "--backend",     "--spool",
	                                   "--status_file", "--sample_s",
	                                   "--report_s",    "--events",
	                                   "--poll_s",      "--sim_usage_file",
	                                   "SIGTERM",       NULL};
	for (int i = 0; must[i]; i++)
		ck_assert_msg(strstr(out, must[i]),
		              "--help does not mention %s", must[i]);
}
END_TEST

/* The key of the first order A's log says was in doubt ("" when none),
 * and whether a later line says that key was placed. */
static int doubt_then_placed(const struct agh_agent *a, char *key, size_t len)
{
	FILE *f = fopen(a->log, "r");
	char line[2048];
	int placed = 0;
	key[0] = 0;
	while (f && fgets(line, sizeof line, f)) {
		const char *k = strstr(line, " key=");
		if (!k)
			continue;
		char this[80];
		if (sscanf(k, " key=%79s", this) != 1)
			continue;
		if (!key[0] && strstr(line, "msg=\"order not known to be placed"))
			snprintf(key, len, "%s", this);
		else if (key[0] && strstr(line, "msg=\"placed\"") &&
		         strcmp(this, key) == 0)
			placed = 1;
	}
	if (f)
		fclose(f);
	return placed;
}

/* The exchange loses its connection to PostgreSQL right after every
 * batch's COMMIT goes out (the writer's fault hook), so A's sale is
 * answered 503 outcome-unknown, though it was placed and traded. A must
 * send the same order again under the same key, before placing anything
 * new, and learn that it was placed: never place it twice. */
START_TEST(order_in_doubt_is_retried_with_its_key)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A;
	char key[80];

	setup(&h, &w, "agent_doubt");
	operator_bid(&h, &w, 8192);
	rxh_stop(&h);
	setenv("RAMEX_WRITER_FAULT", "close:1", 1);
	rxh_restart(&h);
	unsetenv("RAMEX_WRITER_FAULT");
	agent_init(&A, "doubt", "a", w.node_a, w.key_a, w.secret_a, &h, 65536,
	           8192, seller_flags);
	agh_start(&A);
	AGH_WAIT_FOR(doubt_then_placed(&A, key, sizeof key),
	             "A did not learn what became of its order in doubt (%s); "
	             "see %s",
	             key[0] ? key : "none seen", A.log);
	PGconn *c = db(&h);
	ck_assert_int_eq(agh_q(c,
	                       "SELECT count(*) FROM orders WHERE "
	                       "client_order_id = '%s'",
	                       key),
	                 1);
	/* it traded once with the operator's bid: one contract */
	ck_assert_int_eq(agh_q(c, "SELECT count(*) FROM contracts"), 1);
	PQfinish(c);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent");
	TCase *t = tcase_create("end to end");
	tcase_set_timeout(t, 400);
	tcase_add_test(t, help_is_complete);
	tcase_add_test(t, secret_file_errors_say_why);
	tcase_add_test(t, bad_exchange_url_is_a_config_error);
	tcase_add_test(t, whoami_unanswered_is_no_refusal);
	tcase_add_test(t, event_stream_that_ends_backs_off);
	tcase_add_test(t, status_file_unwritable_is_logged);
	tcase_add_test(t, trade_deliver_recall_report);
	tcase_add_test(t, people_and_the_agent);
	tcase_add_test(t, exchange_outage);
	tcase_add_test(t, order_in_doubt_is_retried_with_its_key);
	tcase_add_test(t, agent_crash);
	tcase_add_test(t, full_disk_loses_no_period);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
