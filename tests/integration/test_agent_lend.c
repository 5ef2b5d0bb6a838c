/*
 * test_agent_lend.c — the data path of a lend contract against a real
 * ramexd (ramexd_harness.h) on a private PostgreSQL.
 *
 * - endpoints: POST /v1/contracts/{id}/lend by the seller stores the
 *   lender's endpoint and draws the contract secret once; GET by either
 *   party reads both back; the buyer may not register, a third node, the
 *   other team's trader, finance and the operator may not read; endpoints
 *   that are not HOST:PORT are 400; an offline contract is 409 not-lend and
 *   an ended one 409 wrong-state.
 */
#include <check.h>
#include <ctype.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

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

/* `seller` sells 256 pages of spot to `buyer`; returns the contract. */
static int64_t contract(struct rxh *h, const char *seller_tok, int64_t seller,
                        const char *buyer_tok, int64_t buyer)
{
	struct rxh_resp r;
	place(h, seller_tok, seller, "sell", &r);
	rxh_resp_free(&r);
	place(h, buyer_tok, buyer, "buy", &r);
	int64_t id = json_integer_value(json_object_get(
	    json_array_get(json_object_get(r.json, "trades"), 0),
	    "contract_id"));
	rxh_resp_free(&r);
	ck_assert_int_gt(id, 0);
	return id;
}

static const char *str(const struct rxh_resp *r, const char *key)
{
	const char *s = json_string_value(json_object_get(r->json, key));
	return s ? s : "";
}

static int is_secret(const char *s)
{
	if (strlen(s) != 64)
		return 0;
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
			return 0;
	return 1;
}

/* A signed call by node a, b or c of the world. */
static long node_call(struct rxh *h, struct rxh_world *w, char node,
                      const char *method, const char *path, const char *body,
                      struct rxh_resp *r)
{
	const char *key = node == 'a'   ? w->key_a
	                  : node == 'b' ? w->key_b
	                                : w->key_c;
	const char *sec = node == 'a'   ? w->secret_a
	                  : node == 'b' ? w->secret_b
	                                : w->secret_c;
	return rxh_call_signed(h, method, path, key, sec, body, 0, NULL, r);
}

/* The status of one call whose body is not needed. */
static long status_of(long st, struct rxh_resp *r)
{
	rxh_resp_free(r);
	return st;
}

static int problem_is(const struct rxh_resp *r, const char *slug)
{
	char want[96];
	snprintf(want, sizeof want, "urn:ramex:problem:%s", slug);
	return strcmp(str(r, "type"), want) == 0;
}

START_TEST(endpoints)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char path[96], secret[80];
	long st;

	rxh_start(&h, "agent_lend_endpoints", "");
	rxh_world(&h, &w);
	/* A (seller) lends to B (buyer); both are in the trader's team */
	int64_t id =
	    contract(&h, w.trader_token, w.node_a, w.trader_token, w.node_b);
	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)id);

	st = node_call(&h, &w, 'b', "GET", path, NULL, &r);
	ck_assert_msg(st == 404 && problem_is(&r, "not-registered"),
	              "GET before the lender registered: %ld %s", st, r.body);
	rxh_resp_free(&r);

	/* only the seller registers */
	st = node_call(&h, &w, 'b', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 403 && problem_is(&r, "not-party"),
	              "the buyer registered: %ld %s", st, r.body);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'c', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 403, "a third node registered: %ld %s", st, r.body);
	rxh_resp_free(&r);

	/* endpoints that are not HOST:PORT */
	static const char *const bad[] = {
	    "{\"endpoint\":\"127.0.0.1\"}",
	    "{\"endpoint\":\"127.0.0.1:0\"}",
	    "{\"endpoint\":\"127.0.0.1:65536\"}",
	    "{\"endpoint\":\"127.0.0.1:70x\"}",
	    "{\"endpoint\":\":7100\"}",
	    "{\"endpoint\":\"-lender:7100\"}",
	    "{\"endpoint\":\"len der:7100\"}",
	    "{\"endpoint\":\"a..b:7100\"}",
	    "{\"endpoint\":\"[::1:7100\"}",
	    "{\"endpoint\":\"[not-v6]:7100\"}",
	    "{\"endpoint\":7100}",
	    "{}",
	    "{\"endpoint\":\"127.0.0.1:7100\",\"secret\":\"00\"}",
	    NULL};
	for (int i = 0; bad[i]; i++) {
		st = node_call(&h, &w, 'a', "POST", path, bad[i], &r);
		ck_assert_msg(st == 400, "%s: %ld %s", bad[i], st, r.body);
		ck_assert_msg(strstr(str(&r, "detail"), "endpoint") ||
		                  strstr(str(&r, "detail"), "secret"),
		              "%s: the detail does not name the field: %s",
		              bad[i], r.body);
		rxh_resp_free(&r);
	}
	char longer[400];
	snprintf(longer, sizeof longer, "{\"endpoint\":\"%0250d.ex:7100\"}", 0);
	memset(longer + 13, 'a', 250);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'a', "POST", path, longer, &r), &r),
	    400);

	/* the seller registers: the secret is drawn */
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 200, "register: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "endpoint"), "127.0.0.1:7100");
	ck_assert_msg(is_secret(str(&r, "secret")), "secret %s",
	              str(&r, "secret"));
	ck_assert_int_eq(rxh_int(&r, "contract_id"), id);
	snprintf(secret, sizeof secret, "%s", str(&r, "secret"));
	rxh_resp_free(&r);

	/* again, by the team's trader, elsewhere: same secret, new place */
	st = rxh_call(&h, "POST", path, w.trader_token,
	              "{\"endpoint\":\"lender-7.example:7200\"}", NULL, &r);
	ck_assert_msg(st == 200, "re-register: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	ck_assert_str_eq(str(&r, "endpoint"), "lender-7.example:7200");
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"[::1]:7300\"}", &r);
	ck_assert_msg(st == 200, "IPv6: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);

	/* both parties read it */
	st = node_call(&h, &w, 'b', "GET", path, NULL, &r);
	ck_assert_msg(st == 200, "buyer GET: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "endpoint"), "[::1]:7300");
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "GET", path, NULL, &r);
	ck_assert_msg(st == 200, "seller GET: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, w.trader_token, NULL, NULL, &r),
	              &r),
	    200);

	/* nobody else */
	st = node_call(&h, &w, 'c', "GET", path, NULL, &r);
	ck_assert_msg(st == 403 && problem_is(&r, "not-party") &&
	                  !strstr(r.body, secret),
	              "a third node: %ld %s", st, r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(
	        rxh_call(&h, "GET", path, w.trader2_token, NULL, NULL, &r), &r),
	    403);
	ck_assert_int_eq(
	    status_of(
	        rxh_call(&h, "GET", path, w.finance_token, NULL, NULL, &r), &r),
	    403);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, w.op_token, NULL, NULL, &r),
	              &r),
	    403);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, h.admin, NULL, NULL, &r), &r),
	    403);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'b', "GET",
	                        "/v1/contracts/987654321/lend", NULL, &r),
	              &r),
	    404);

	/* the secret is stored once, as drawn */
	PGconn *c = testdb_connect(h.conninfo);
	char sql[160];
	snprintf(sql, sizeof sql,
	         "SELECT count(*) FROM lend_sessions WHERE contract_id = %lld "
	         "AND secret = '%s'",
	         (long long)id, secret);
	ck_assert_int_eq(testdb_scalar(c, sql), 1);
	PQfinish(c);

	/* an ended contract takes no endpoint, but its parties still read
	 * the last one (the lender's agent may be draining) */
	snprintf(sql, sizeof sql, "/v1/contracts/%lld/end", (long long)id);
	st = node_call(&h, &w, 'b', "POST", sql, NULL, &r);
	ck_assert_msg(st == 200, "end: %ld %s", st, r.body);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 409 && problem_is(&r, "wrong-state"),
	              "ended: %ld %s", st, r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'b', "GET", path, NULL, &r), &r), 200);

	/* an offline contract has no data path */
	int64_t off =
	    contract(&h, w.trader_token, w.node_a, w.op_token, w.op_account);
	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)off);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 409 && problem_is(&r, "not-lend"),
	              "offline: %ld %s", st, r.body);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_lend");
	TCase *t = tcase_create("lend");
	tcase_set_timeout(t, 400);
	tcase_add_test(t, endpoints);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
