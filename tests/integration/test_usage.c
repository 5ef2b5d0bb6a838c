/*
 * test_usage.c — usage reports through a real ramexd on a real PostgreSQL:
 * counted, a retry counted once, a reused number refused (409) and kept in
 * usage_conflicts, invalid reports refused (422) with nothing stored,
 * reports out of order, gaps, both sides of a lend contract, many nodes,
 * a full batch of 1000, a late report for an old period, and who may read
 * what.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/usage_db.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

#define SEC INT64_C(1000000000)

static long count(struct rxh *h, const char *sql)
{
	return testdb_scalar_at(h->conninfo, sql);
}

static void place(struct rxh *h, const char *tok, int64_t acct,
                  const char *side, struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":100000}",
	         (long long)acct, side);
	long s = rxh_call(h, "POST", "/v1/orders", tok, body, NULL, r);
	ck_assert_msg(s == 201, "place: %ld %s", s, r->body);
}

/* `seller` sells 256 pages of spot to `buyer`; returns the contract. When
 * `key` is set the seller's node delivers it at once, and *delivered gets
 * the instant. */
static int64_t contract(struct rxh *h, const char *seller_tok, int64_t seller,
                        const char *buyer_tok, int64_t buyer, const char *key,
                        const char *secret, int64_t *delivered)
{
	struct rxh_resp r;
	char path[96];
	place(h, seller_tok, seller, "sell", &r);
	rxh_resp_free(&r);
	place(h, buyer_tok, buyer, "buy", &r);
	int64_t id = json_integer_value(json_object_get(
	    json_array_get(json_object_get(r.json, "trades"), 0),
	    "contract_id"));
	rxh_resp_free(&r);
	ck_assert_int_gt(id, 0);
	if (!key)
		return id;
	snprintf(path, sizeof path, "/v1/contracts/%lld/deliver",
	         (long long)id);
	ck_assert_int_eq(
	    rxh_call_signed(h, "POST", path, key, secret, "", 0, NULL, &r),
	    200);
	*delivered = rxh_int(&r, "delivered_ns");
	rxh_resp_free(&r);
	return id;
}

/* A growing JSON text of reports. */
struct batch {
	char *s;
	size_t len, cap;
	int n;
};

static void add(struct batch *b, int64_t epoch, int64_t seq, int64_t cid,
                int64_t start, int64_t end, int64_t ps, int64_t kps, int64_t kp)
{
	char one[400];
	int k = snprintf(one, sizeof one,
	                 "%s{\"epoch\":%lld,\"seq\":%lld,\"contract_id\":%lld,"
	                 "\"period_start_ns\":%lld,\"period_end_ns\":%lld,"
	                 "\"page_seconds\":%lld,\"kmod_page_seconds\":%lld,"
	                 "\"kmod_pages\":%lld}",
	                 b->n ? "," : "", (long long)epoch, (long long)seq,
	                 (long long)cid, (long long)start, (long long)end,
	                 (long long)ps, (long long)kps, (long long)kp);
	if (b->len + (size_t)k + 32 > b->cap) {
		b->cap = (b->cap + (size_t)k + 32) * 2;
		b->s = realloc(b->s, b->cap);
		ck_assert_ptr_nonnull(b->s);
	}
	memcpy(b->s + b->len, one, (size_t)k + 1);
	b->len += (size_t)k;
	b->n++;
}

/* The report of period k (1 s each from `base`): 200 page-seconds, the
 * module's counter at 200 * (k + 1). */
static void add_k(struct batch *b, int64_t seq, int64_t cid, int64_t base,
                  int64_t k)
{
	add(b, 1, seq, cid, base + k * SEC, base + (k + 1) * SEC, 200,
	    200 * (k + 1), 256);
}

static long post(struct rxh *h, const char *key, const char *secret,
                 struct batch *b, struct rxh_resp *r)
{
	size_t n = b->len + 32;
	char *body = malloc(n);
	snprintf(body, n, "{\"reports\":[%s]}", b->s ? b->s : "");
	long s = rxh_call_signed(h, "POST", "/v1/usage", key, secret, body, 0,
	                         NULL, r);
	free(body);
	free(b->s);
	memset(b, 0, sizeof *b);
	return s;
}

static int64_t errors_index(const struct rxh_resp *r, size_t i)
{
	return json_integer_value(json_object_get(
	    json_array_get(json_object_get(r->json, "errors"), i), "index"));
}

static size_t items(const struct rxh_resp *r)
{
	return json_array_size(json_object_get(r->json, "items"));
}

START_TEST(counted_retried_conflicting_invalid)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct batch b = {0};
	int64_t d, d3;
	rxh_start(&h, "ramex_t_usage_rules", "");
	rxh_world(&h, &w);
	int64_t c1 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, w.key_a, w.secret_a, &d);
	int64_t base = d - 50 * SEC; /* inside the clock slack, in the past */

	/* three new reports */
	for (int k = 0; k < 3; k++)
		add_k(&b, k + 1, c1, base, k);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 3);
	ck_assert_int_eq(rxh_int(&r, "duplicates"), 0);
	rxh_resp_free(&r);

	/* the same batch again: duplicates, counted once */
	for (int k = 0; k < 3; k++)
		add_k(&b, k + 1, c1, base, k);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 0);
	ck_assert_int_eq(rxh_int(&r, "duplicates"), 3);
	json_t *res = json_array_get(json_object_get(r.json, "results"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(res, "status")),
	                 "duplicate");
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 3);

	/* a new one beside a retry, and the same new one twice in a batch */
	add_k(&b, 4, c1, base, 3);
	add_k(&b, 2, c1, base, 1);
	add_k(&b, 4, c1, base, 3);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	ck_assert_int_eq(rxh_int(&r, "duplicates"), 2);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 4);

	/* a retry far below a new number (the numbers looked up one by one)
	 * and a retry with another body there: refused */
	add_k(&b, 60, c1, base, 7);
	add_k(&b, 1, c1, base, 0);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	ck_assert_int_eq(rxh_int(&r, "duplicates"), 1);
	rxh_resp_free(&r);
	add_k(&b, 61, c1, base, 8);
	add(&b, 1, 1, c1, base, base + SEC, 199, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 5);
	ck_assert_int_eq(count(&h, "WITH d AS (DELETE FROM usage_conflicts "
	                           "RETURNING 1) SELECT count(*) FROM d"),
	                 1);
	ck_assert_int_eq(count(&h,
	                       "WITH d AS (DELETE FROM usage_reports WHERE "
	                       "seq = 60 RETURNING 1) SELECT count(*) FROM d"),
	                 1);

	/* seq 3 again with another body, beside a valid new one: 409, the
	 * new one is not stored, the conflicting body is kept */
	add_k(&b, 5, c1, base, 4);
	add(&b, 1, 3, c1, base + 2 * SEC, base + 3 * SEC, 150, 600, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
	ck_assert_int_eq(errors_index(&r, 0), 1);
	ck_assert_ptr_nonnull(
	    strstr(r.body, "urn:ramex:problem:usage-conflict"));
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 4);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_conflicts WHERE "
	                           "seq = 3 AND (body ->> 'page_seconds') = "
	                           "'150' AND principal LIKE 'node:%'"),
	                 1);

	/* the same conflicting body again is kept once, and a number keeps
	 * at most USAGE_DB_CONFLICTS_KEPT bodies however many a node sends:
	 * each retry of one, or a batch of a thousand variants, added a row
	 * (found from outside: 5 retries, 5 rows; a batch, 256) */
	for (int k = 0; k < 3; k++) {
		add(&b, 1, 3, c1, base + 2 * SEC, base + 3 * SEC, 150, 600,
		    256);
		ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
		rxh_resp_free(&r);
	}
	ck_assert_int_eq(
	    count(&h, "SELECT count(*) FROM usage_conflicts WHERE seq = 3"), 1);
	for (int k = 0; k < 30; k++)
		add(&b, 1, 3, c1, base + 2 * SEC, base + 3 * SEC, 100 + k, 600,
		    256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    count(&h, "SELECT count(*) FROM usage_conflicts WHERE seq = 3"),
	    USAGE_DB_CONFLICTS_KEPT);

	/* invalid, each beside a valid report: nothing stored, 422 */
	int64_t c3 = contract(&h, w.trader_token, w.node_b, w.op_token,
	                      w.op_account, w.key_b, w.secret_b, &d3);
	int64_t c4 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, NULL, NULL, NULL);
	struct {
		int64_t cid, start, end, ps, kps;
		const char *why;
	} bad[] = {
	    /* more than 256 pages x 1 s */
	    {c1, base + 5 * SEC, base + 6 * SEC, 257, 2000, "more than"},
	    /* node b's contract */
	    {c3, base + 5 * SEC, base + 6 * SEC, 10, 10, "not a party"},
	    /* not delivered */
	    {c4, base + 5 * SEC, base + 6 * SEC, 10, 10, "not been deliv"},
	    /* before delivery, beyond the clock slack */
	    {c1, d - 90 * SEC, d - 89 * SEC, 10, 10, "outside"},
	    /* overlaps stored seq 2 */
	    {c1, base + SEC + SEC / 2, base + 2 * SEC + SEC / 2, 10, 5000,
	     "overlap"},
	    /* no such contract */
	    {999999, base, base + SEC, 1, 1, "no contract"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		add_k(&b, 10, c1, base, 5);
		add(&b, 1, 11, bad[i].cid, bad[i].start, bad[i].end, bad[i].ps,
		    bad[i].kps, 1);
		ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
		ck_assert_int_eq(errors_index(&r, 0), 1);
		ck_assert_msg(strstr(r.body, bad[i].why), "case %zu: %s", i,
		              r.body);
		rxh_resp_free(&r);
	}
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 4);

	/* two new reports of the same time in one batch, and one that falls
	 * between two stored ones but overlaps the later */
	add(&b, 1, 20, c1, base + 10 * SEC, base + 11 * SEC, 10, 5000, 1);
	add(&b, 1, 21, c1, base + 10 * SEC + SEC / 2, base + 12 * SEC, 10, 6000,
	    1);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	ck_assert_ptr_nonnull(strstr(r.body, "overlaps"));
	rxh_resp_free(&r);
	/* (1 page-second: the most 256 pages admit in 2 ns) */
	add(&b, 1, 22, c1, base + 2 * SEC - 1, base + 2 * SEC + 1, 1, 5000, 1);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	ck_assert_ptr_nonnull(strstr(r.body, "overlaps"));
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 4);

	/* a wrong shape is 400 and names the report and field */
	ck_assert_int_eq(
	    rxh_call_signed(&h, "POST", "/v1/usage", w.key_a, w.secret_a,
	                    "{\"reports\":[{\"epoch\":1}]}", 0, NULL, &r),
	    400);
	ck_assert_ptr_nonnull(strstr(r.body, "reports[0].seq"));
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call_signed(&h, "POST", "/v1/usage", w.key_a,
	                                 w.secret_a, "{\"reports\":[]}", 0,
	                                 NULL, &r),
	                 400);
	rxh_resp_free(&r);
	for (int k = 0; k < 1001; k++)
		add(&b, 2, k + 1, c1, base, base + 1, 0, 0, 0);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 400);
	rxh_resp_free(&r);

	/* who reads what */
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/usage", w.finance_token, NULL, NULL, &r),
	    200);
	ck_assert_int_eq(items(&r), 4);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/usage?limit=3",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	ck_assert_int_eq(items(&r), 3);
	char after[160];
	snprintf(after, sizeof after, "/v1/usage?limit=3&after=%s",
	         json_string_value(json_object_get(r.json, "next")));
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", after, w.trader_token, NULL, NULL, &r), 200);
	ck_assert_int_eq(items(&r), 1); /* the fourth */
	ck_assert_int_eq(
	    json_integer_value(json_object_get(
	        json_array_get(json_object_get(r.json, "items"), 0), "seq")),
	    4);
	ck_assert(json_is_null(json_object_get(r.json, "next")));
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/usage?after=1:2",
	                          w.trader_token, NULL, NULL, &r),
	                 400);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/usage", w.trader2_token, NULL, NULL, &r),
	    200);
	ck_assert_int_eq(items(&r), 0);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", "/v1/usage", w.key_b,
	                                 w.secret_b, "", 0, NULL, &r),
	                 200);
	ck_assert_int_eq(items(&r), 0);
	rxh_resp_free(&r);
	char path[128];
	snprintf(path, sizeof path, "/v1/usage?contract_id=%lld&from=%lld",
	         (long long)c1, (long long)(base + 2 * SEC));
	ck_assert_int_eq(rxh_call_signed(&h, "GET", path, w.key_a, w.secret_a,
	                                 "", 0, NULL, &r),
	                 200);
	ck_assert_int_eq(items(&r), 2); /* periods 2 and 3 */
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

START_TEST(order_gaps_lend_many_nodes_late)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct batch b = {0};
	int64_t d, d2;
	rxh_start(&h, "ramex_t_usage_flow", "");
	rxh_world(&h, &w);
	int64_t c1 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, w.key_a, w.secret_a, &d);
	int64_t base = d - 55 * SEC;

	/* out of order: 3 then 1; seq 2 is a gap until it comes */
	add_k(&b, 3, c1, base, 2);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	rxh_resp_free(&r);
	add_k(&b, 1, c1, base, 0);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/usage/gaps", w.finance_token,
	                          NULL, NULL, &r),
	                 200);
	ck_assert_int_eq(items(&r), 1);
	json_t *g = json_array_get(json_object_get(r.json, "items"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(g, "node_id")),
	                 w.node_a);
	ck_assert_int_eq(json_integer_value(json_object_get(g, "first")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(g, "last")), 2);
	rxh_resp_free(&r);
	add_k(&b, 2, c1, base, 1);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/usage/gaps", h.admin, NULL, NULL, &r),
	    200);
	ck_assert_int_eq(items(&r), 0);
	rxh_resp_free(&r);

	/* lend: both sides report the same period */
	int64_t c2 = contract(&h, w.trader_token, w.node_a, w.trader_token,
	                      w.node_b, w.key_a, w.secret_a, &d2);
	add(&b, 1, 4, c2, d2 - 10 * SEC, d2 - 9 * SEC, 256, 256, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	rxh_resp_free(&r);
	add(&b, 7, 1, c2, d2 - 10 * SEC, d2 - 9 * SEC, 250, 250, 256);
	ck_assert_int_eq(post(&h, w.key_b, w.secret_b, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h,
	                       "SELECT count(DISTINCT side) FROM "
	                       "usage_reports WHERE contract_id IN (SELECT "
	                       "id FROM contracts WHERE delivery = 'lend')"),
	                 2);

	/* many nodes, each its own contract and batch */
	enum { NODES = 6 };
	for (int i = 0; i < NODES; i++) {
		char body[128], key[24], secret[80], tok[96];
		snprintf(body, sizeof body,
		         "{\"name\":\"node-m%d\",\"team_id\":%lld}", i,
		         (long long)w.team);
		ck_assert_int_eq(
		    rxh_call(&h, "POST", "/v1/nodes", h.admin, body, NULL, &r),
		    201);
		snprintf(key, sizeof key, "%s",
		         json_string_value(json_object_get(r.json, "key_id")));
		snprintf(secret, sizeof secret, "%s",
		         json_string_value(json_object_get(r.json, "secret")));
		int64_t id = json_integer_value(
		    json_object_get(json_object_get(r.json, "account"), "id"));
		rxh_resp_free(&r);
		snprintf(tok, sizeof tok, "%s", w.trader_token);
		int64_t dm;
		int64_t cm = contract(&h, tok, id, w.op_token, w.op_account,
		                      key, secret, &dm);
		for (int k = 0; k < 20; k++)
			add_k(&b, k + 1, cm, dm - 40 * SEC, k);
		ck_assert_int_eq(post(&h, key, secret, &b, &r), 200);
		ck_assert_int_eq(rxh_int(&r, "counted"), 20);
		rxh_resp_free(&r);
	}
	ck_assert_int_eq(count(&h, "SELECT count(DISTINCT node_id) FROM "
	                           "usage_reports"),
	                 2 + NODES);

	/* a full batch of 1000 (50 ms periods), in a new epoch */
	for (int k = 0; k < 1000; k++)
		add(&b, 2, k + 1, c1, base + 3 * SEC + k * (SEC / 20),
		    base + 3 * SEC + (k + 1) * (SEC / 20), 10,
		    600 + 10 * (k + 1), 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1000);
	rxh_resp_free(&r);

	/* the buyer ends c1; a late report for an old period (before the
	 * end, behind everything counted so far) is still counted */
	char path[96];
	snprintf(path, sizeof path, "/v1/contracts/%lld/end", (long long)c1);
	ck_assert_int_eq(rxh_call(&h, "POST", path, w.op_token, NULL, NULL, &r),
	                 200);
	rxh_resp_free(&r);
	add(&b, 3, 1, c1, d - 59 * SEC, d - 58 * SEC, 100, 100, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"),
	                 3 + 2 + NODES * 20 + 1000 + 1);
	rxh_stop(&h);
}
END_TEST

/* Ends contract `cid` through the API, then moves its delivery to `span`
 * before its end, to the nanosecond. Returns the delivery instant. */
static int64_t end_after(struct rxh *h, const struct rxh_world *w, int64_t cid,
                         int64_t span)
{
	struct rxh_resp r;
	char path[96], sql[256];
	snprintf(path, sizeof path, "/v1/contracts/%lld/end", (long long)cid);
	ck_assert_int_eq(rxh_call(h, "POST", path, w->op_token, NULL, NULL, &r),
	                 200);
	rxh_resp_free(&r);
	snprintf(sql, sizeof sql,
	         "WITH u AS (UPDATE contracts SET delivered_ns = ended_ns - "
	         "%lld WHERE id = %lld RETURNING delivered_ns) SELECT "
	         "delivered_ns FROM u",
	         (long long)span, (long long)cid);
	return count(h, sql);
}

/* The page-seconds billed for contract `cid`, after a billing run. */
static long billed(struct rxh *h, int64_t cid)
{
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(h, "POST", "/v1/billing/run", h->admin, "{}",
	                          NULL, &r),
	                 200);
	rxh_resp_free(&r);
	char sql[160];
	snprintf(sql, sizeof sql,
	         "SELECT coalesce(sum(page_seconds), 0) FROM movements WHERE "
	         "contract_id = %lld",
	         (long long)cid);
	return count(h, sql);
}

/* Issue 25: a seller billed time it did not deliver. A 256-page contract
 * delivered for 2.003 s, reported with the 60 s clock slack on both sides,
 * was billed 15 872 page-seconds; 1000 back-to-back 1 ms reports each
 * claimed a whole second. */
START_TEST(only_delivered_time_bills)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct batch b = {0};
	int64_t d;
	rxh_start(&h, "ramex_t_usage_bound", "");
	rxh_world(&h, &w);

	int64_t c1 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, w.key_a, w.secret_a, &d);
	d = end_after(&h, &w, c1, 2003 * (SEC / 1000));
	add(&b, 1, 1, c1, d - 60 * SEC, d + 2003 * (SEC / 1000) + 60 * SEC,
	    15872, 15872, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1); /* admitted */
	rxh_resp_free(&r);
	long ps = billed(&h, c1);
	ck_assert_msg(ps <= 513, "billed %ld page-seconds for 2.003 s", ps);
	ck_assert_int_eq(ps, 512); /* floor(256 x 2.003) */

	/* 1 ms periods: a whole second each is refused outright, the one
	 * page-second an agent's carry may add is admitted but not billed
	 * beyond the 256 page-seconds of the second delivered */
	int64_t c2 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, w.key_a, w.secret_a, &d);
	d = end_after(&h, &w, c2, SEC);
	for (int k = 0; k < 1000; k++)
		add(&b, 2, k + 1, c2, d + k * (SEC / 1000),
		    d + (k + 1) * (SEC / 1000), 256, 256 * (k + 1), 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	ck_assert_msg(strstr(r.body, "256 pages can deliver in 1000000 ns"),
	              "%s", r.body);
	rxh_resp_free(&r);
	for (int k = 0; k < 1000; k++)
		add(&b, 2, k + 1, c2, d + k * (SEC / 1000),
		    d + (k + 1) * (SEC / 1000), 1, k + 1, 256);
	ck_assert_msg(post(&h, w.key_a, w.secret_a, &b, &r) == 200, "%s",
	              r.body);
	ck_assert_int_eq(rxh_int(&r, "counted"), 1000);
	rxh_resp_free(&r);
	ps = billed(&h, c2);
	ck_assert_msg(ps <= 256, "billed %ld page-seconds for 1 s", ps);
	ck_assert_int_eq(ps, 256);
	rxh_stop(&h);
}
END_TEST

/* Issue 25, item 7 (usage): 2^63 - 1 was accepted for epoch, seq and
 * kmod_page_seconds, and a report answered 409 was kept in
 * usage_conflicts unchecked (a 2^63 - 1 contract id, another node's
 * contract). */
START_TEST(ranges_and_conflicts_are_checked)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct batch b = {0};
	int64_t d, d3;
	rxh_start(&h, "ramex_t_usage_ranges", "");
	rxh_world(&h, &w);
	int64_t c1 = contract(&h, w.trader_token, w.node_a, w.op_token,
	                      w.op_account, w.key_a, w.secret_a, &d);
	int64_t c3 = contract(&h, w.trader_token, w.node_b, w.op_token,
	                      w.op_account, w.key_b, w.secret_b, &d3);
	/* every integer at its bounds' wrong side: 400, naming the field */
	static const struct {
		const char *field;
		const char *value;
	} out[] = {
	    {"epoch", "9223372036854775807"},
	    {"epoch", "9007199254740992"},
	    {"seq", "9223372036854775807"},
	    {"contract_id", "9223372036854775807"},
	    {"period_start_ns", "-1"},
	    {"period_end_ns", "7289654400000000001"},
	    {"page_seconds", "4611686018427387905"},
	    {"kmod_page_seconds", "9223372036854775807"},
	    {"kmod_pages", "9007199254740992"},
	};
	for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
		char report[512], body[600];
		snprintf(report, sizeof report,
		         "{\"epoch\":1,\"seq\":1,\"contract_id\":%lld,"
		         "\"period_start_ns\":%lld,\"period_end_ns\":%lld,"
		         "\"page_seconds\":1,\"kmod_page_seconds\":1,"
		         "\"kmod_pages\":1}",
		         (long long)c1, (long long)d, (long long)(d + SEC));
		/* replace the field's value */
		char *at = strstr(report, out[i].field);
		ck_assert_ptr_nonnull(at);
		at += strlen(out[i].field) + 2;
		char *end = at + strcspn(at, ",}");
		snprintf(body, sizeof body, "{\"reports\":[%.*s%s%s]}",
		         (int)(at - report), report, out[i].value, end);
		ck_assert_msg(rxh_call_signed(&h, "POST", "/v1/usage", w.key_a,
		                              w.secret_a, body, 0, NULL,
		                              &r) == 400,
		              "%s: %ld %s", body, r.status, r.body);
		char want[64];
		/* a sentence (it read "must be, an integer from") */
		snprintf(want, sizeof want, "reports[0].%s: must be an integer",
		         out[i].field);
		ck_assert_msg(strstr(r.body, want) && strstr(r.body, " to "),
		              "%s", r.body);
		rxh_resp_free(&r);
	}
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_reports"), 0);

	/* one report counted, then its number reused */
	add(&b, 1, 1, c1, d, d + SEC, 200, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 200);
	rxh_resp_free(&r);
	/* ... with garbage: refused as invalid, not kept */
	add(&b, 1, 1, 9007199254740991LL, d, d + SEC, 200, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	ck_assert_msg(strstr(r.body, "no contract"), "%s", r.body);
	rxh_resp_free(&r);
	add(&b, 1, 1, c3, d3, d3 + SEC, 200, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	ck_assert_msg(strstr(r.body, "not a party"), "%s", r.body);
	rxh_resp_free(&r);
	add(&b, 1, 1, c1, d, d + SEC, 257 * 1000, 257 * 1000, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 422);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_conflicts"), 0);
	/* ... with a plausible other body: 409, kept as evidence */
	add(&b, 1, 1, c1, d, d + SEC, 199, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
	rxh_resp_free(&r);
	/* ... both in one batch: 409, only the plausible one kept */
	add(&b, 1, 1, c1, d, d + SEC, 198, 200, 256);
	add(&b, 1, 1, c3, d3, d3 + SEC, 200, 200, 256);
	ck_assert_int_eq(post(&h, w.key_a, w.secret_a, &b, &r), 409);
	ck_assert_msg(strstr(r.body, "not a party"), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_conflicts"), 2);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM usage_conflicts "
	                           "WHERE (body ->> 'contract_id')::bigint <> "
	                           "(SELECT min(contract_id) FROM "
	                           "usage_reports)"),
	                 0);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("usage");
	TCase *tc = tcase_create("usage");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, counted_retried_conflicting_invalid);
	tcase_add_test(tc, order_gaps_lend_many_nodes_late);
	tcase_add_test(tc, only_delivered_time_bills);
	tcase_add_test(tc, ranges_and_conflicts_are_checked);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
