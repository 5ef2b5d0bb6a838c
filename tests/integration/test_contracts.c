/*
 * test_contracts.c — contract moves through a real ramexd on a real
 * PostgreSQL: deliver (and its retry), recall with notice and the timer
 * that ends it, a perm recall that breaches, a late delivery breached by
 * the timer, the buyer's end, the admin's breach, wrong parties (403),
 * wrong states (409), the transitions, the list filters and the `contract`
 * events on /v1/events.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "exchange/contracts.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static long count(struct rxh *h, const char *sql)
{
	return testdb_scalar_at(h->conninfo, sql);
}

static void sql(struct rxh *h, const char *q)
{
	testdb_run(h->conninfo, q);
}

static void place(struct rxh *h, const char *tok, const char *market,
                  int64_t acct, const char *side, int pages, int price,
                  struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"%s\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":%d,\"price\":%d}",
	         market, (long long)acct, side, pages, price);
	long s = rxh_call(h, "POST", "/v1/orders", tok, body, NULL, r);
	ck_assert_msg(s == 201, "place: %ld %s", s, r->body);
}

/* node `seller` (through the trader) sells 256 pages on `market` and
 * `buyer` buys them with `buyer_tok`: one trade, one contract. */
static int64_t trade(struct rxh *h, const struct rxh_world *w,
                     const char *market, int64_t seller, int64_t buyer,
                     const char *buyer_tok)
{
	struct rxh_resp r;
	place(h, w->trader_token, market, seller, "sell", 256, 100000, &r);
	rxh_resp_free(&r);
	place(h, buyer_tok, market, buyer, "buy", 256, 100000, &r);
	json_t *t = json_array_get(json_object_get(r.json, "trades"), 0);
	ck_assert_ptr_nonnull(t);
	int64_t id = json_integer_value(json_object_get(t, "contract_id"));
	rxh_resp_free(&r);
	ck_assert_int_gt(id, 0);
	return id;
}

/* POST /v1/contracts/{id}/{verb} with a token (or NULL: node a/b signed
 * with key/secret). */
static long move(struct rxh *h, int64_t id, const char *verb, const char *tok,
                 const char *key, const char *secret, const char *body,
                 struct rxh_resp *r)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/contracts/%lld/%s", (long long)id,
	         verb);
	if (tok)
		return rxh_call(h, "POST", path, tok, body, NULL, r);
	return rxh_call_signed(h, "POST", path, key, secret, body ? body : "",
	                       0, NULL, r);
}

static const char *str(const struct rxh_resp *r, const char *k)
{
	const char *s = json_string_value(json_object_get(r->json, k));
	return s ? s : "";
}

static const char *type_of(const struct rxh_resp *r)
{
	return str(r, "type");
}

static long transitions(struct rxh *h, int64_t id)
{
	char q[128];
	snprintf(q, sizeof q,
	         "SELECT count(*) FROM contract_transitions WHERE "
	         "contract_id = %lld",
	         (long long)id);
	return count(h, q);
}

static void expect_state(struct rxh *h, const char *tok, int64_t id,
                         const char *state)
{
	struct rxh_resp r;
	char path[64];
	snprintf(path, sizeof path, "/v1/contracts/%lld", (long long)id);
	ck_assert_int_eq(rxh_call(h, "GET", path, tok, NULL, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), state);
	rxh_resp_free(&r);
}

/* --- the event stream ---------------------------------------------------- */

/* --- tests --------------------------------------------------------------- */

START_TEST(deliver_retry_parties_states_and_events)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char path[96], hv[16];
	rxh_start(&h, "ramex_t_ctr_moves", "--sse_keepalive_s=1");
	rxh_world(&h, &w);
	int64_t c1 = trade(&h, &w, "spot", w.node_a, w.op_account, w.op_token);
	expect_state(&h, w.op_token, c1, "pending_delivery");

	/* wrong parties: another node, another team's trader, who may not
	 * see the contract, are told what GET tells them (404), not its
	 * parties (a 403 named the seller's account); the seller's trader,
	 * who sees it, may not make the buyer's move */
	char num[24];
	snprintf(num, sizeof num, "account %lld", (long long)w.node_a);
	ck_assert_int_eq(
	    move(&h, c1, "deliver", NULL, w.key_b, w.secret_b, NULL, &r), 404);
	ck_assert_str_eq(type_of(&r), "urn:ramex:problem:not-found");
	ck_assert_msg(!strstr(r.body, num), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c1, "deliver", w.trader2_token, NULL, NULL, NULL, &r),
	    404);
	ck_assert_msg(!strstr(r.body, num), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c1, "end", w.trader_token, NULL, NULL, NULL, &r), 403);
	ck_assert_str_eq(type_of(&r), "urn:ramex:problem:not-party");
	rxh_resp_free(&r);
	/* wrong state: nothing to recall before delivery */
	ck_assert_int_eq(
	    move(&h, c1, "recall", w.trader_token, NULL, NULL, NULL, &r), 409);
	ck_assert_str_eq(type_of(&r), "urn:ramex:problem:wrong-state");
	rxh_resp_free(&r);
	ck_assert_int_eq(transitions(&h, c1), 0);
	/* no such contract */
	ck_assert_int_eq(
	    move(&h, 999999, "deliver", w.trader_token, NULL, NULL, NULL, &r),
	    404);
	rxh_resp_free(&r);

	/* the seller's node delivers, while its team's trader listens */
	struct rxh_sse sub = {.h = &h,
	                      .token = w.trader_token,
	                      .until = "\"event\":\"delivered\""};
	pthread_t th;
	pthread_create(&th, NULL, rxh_sse_run, &sub);
	for (int i = 0; i < 250 && !__atomic_load_n(&sub.connected, 0); i++)
		usleep(20000);
	ck_assert_int_eq(move(&h, c1, "deliver", NULL, w.key_a, w.secret_a,
	                      "{\"note\":\"pages offline\"}", &r),
	                 200);
	ck_assert_str_eq(str(&r, "state"), "active");
	ck_assert_int_gt(rxh_int(&r, "delivered_ns"), 0);
	json_t *t = json_object_get(r.json, "transition");
	ck_assert_str_eq(json_string_value(json_object_get(t, "event")),
	                 "delivered");
	ck_assert_str_eq(json_string_value(json_object_get(t, "actor")),
	                 "seller");
	ck_assert_ptr_nonnull(strstr(
	    json_string_value(json_object_get(t, "why")), "pages offline"));
	ck_assert_ptr_null(
	    rxh_header(&r, "Idempotent-Replayed", hv, sizeof hv));
	int64_t delivered = rxh_int(&r, "delivered_ns");
	rxh_resp_free(&r);
	pthread_join(th, NULL);
	ck_assert_msg(strstr(sub.buf, "event: contract"), "%s", sub.buf);
	ck_assert_msg(strstr(sub.buf, "\"event\":\"delivered\""), "%s",
	              sub.buf);

	/* deliver twice (the trader retries): 200, unchanged */
	ck_assert_int_eq(
	    move(&h, c1, "deliver", w.trader_token, NULL, NULL, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), "active");
	ck_assert_int_eq(rxh_int(&r, "delivered_ns"), delivered);
	ck_assert_ptr_nonnull(
	    rxh_header(&r, "Idempotent-Replayed", hv, sizeof hv));
	rxh_resp_free(&r);
	ck_assert_int_eq(transitions(&h, c1), 1);

	/* the seller may not end it; the operator (its buyer) may */
	ck_assert_int_eq(
	    move(&h, c1, "end", w.trader_token, NULL, NULL, NULL, &r), 403);
	rxh_resp_free(&r);
	ck_assert_int_eq(move(&h, c1, "end", w.op_token, NULL, NULL, NULL, &r),
	                 200);
	ck_assert_str_eq(str(&r, "state"), "ended");
	ck_assert_int_gt(rxh_int(&r, "ended_ns"), delivered - 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c1, "recall", w.trader_token, NULL, NULL, NULL, &r), 409);
	ck_assert_str_eq(type_of(&r), "urn:ramex:problem:wrong-state");
	rxh_resp_free(&r);

	/* the transitions: who, when, why */
	snprintf(path, sizeof path, "/v1/contracts/%lld/transitions",
	         (long long)c1);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", path, w.finance_token, NULL, NULL, &r), 200);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 2);
	json_t *t0 = json_array_get(items, 0), *t1 = json_array_get(items, 1);
	ck_assert_str_eq(json_string_value(json_object_get(t0, "from_state")),
	                 "pending_delivery");
	const char *who = json_string_value(json_object_get(t0, "principal"));
	ck_assert_ptr_nonnull(who);
	ck_assert_int_eq(strncmp(who, "node:", 5), 0);
	ck_assert_ptr_nonnull(strstr(who, w.key_a));
	ck_assert_str_eq(json_string_value(json_object_get(t1, "event")),
	                 "buyer_end");
	ck_assert_str_eq(json_string_value(json_object_get(t1, "actor")),
	                 "buyer");
	ck_assert_int_eq(
	    json_integer_value(json_object_get(t1, "actor_account")),
	    w.op_account);
	rxh_resp_free(&r);
	/* another team's trader does not see it */
	ck_assert_int_eq(
	    rxh_status(&h, "GET", path, w.trader2_token, NULL, NULL), 404);

	/* a lend contract: node b buys from node a; each side its own move */
	int64_t c2 = trade(&h, &w, "spot", w.node_a, w.node_b, w.trader_token);
	ck_assert_int_eq(
	    move(&h, c2, "deliver", NULL, w.key_b, w.secret_b, NULL, &r), 403);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c2, "deliver", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "delivery"), "lend");
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c2, "end", NULL, w.key_a, w.secret_a, NULL, &r), 403);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c2, "end", NULL, w.key_b, w.secret_b, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), "ended");
	rxh_resp_free(&r);

	/* perm: the buyer may not end it, a recall breaches it */
	int64_t c3 =
	    trade(&h, &w, "perm-2027", w.node_a, w.op_account, w.op_token);
	ck_assert_int_eq(
	    move(&h, c3, "deliver", w.trader_token, NULL, NULL, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "product"), "perm");
	ck_assert_int_eq(rxh_int(&r, "perm_year"), 2027);
	rxh_resp_free(&r);
	ck_assert_int_eq(move(&h, c3, "end", w.op_token, NULL, NULL, NULL, &r),
	                 409);
	ck_assert_str_eq(type_of(&r), "urn:ramex:problem:product-rule");
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c3, "recall", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), "breached");
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c3, "recall", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), "breached");
	rxh_resp_free(&r);
	ck_assert_int_eq(transitions(&h, c3), 2);

	/* the admin's breach needs a note and keeps it */
	int64_t c4 = trade(&h, &w, "spot", w.node_a, w.op_account, w.op_token);
	ck_assert_int_eq(
	    move(&h, c4, "deliver", w.trader_token, NULL, NULL, NULL, &r), 200);
	rxh_resp_free(&r);
	ck_assert_int_eq(move(&h, c4, "breach", h.admin, NULL, NULL, "{}", &r),
	                 400);
	rxh_resp_free(&r);
	ck_assert_int_eq(move(&h, c4, "breach", h.admin, NULL, NULL,
	                      "{\"note\":\"metering shows pages back online\"}",
	                      &r),
	                 200);
	ck_assert_str_eq(str(&r, "state"), "breached");
	t = json_object_get(r.json, "transition");
	ck_assert_str_eq(json_string_value(json_object_get(t, "actor")),
	                 "admin");
	ck_assert_ptr_nonnull(strstr(
	    json_string_value(json_object_get(t, "why")), "metering shows"));
	rxh_resp_free(&r);

	/* list filters */
	ck_assert_int_eq(
	    rxh_call_signed(&h, "GET", "/v1/contracts?state=ended&role=seller",
	                    w.key_a, w.secret_a, "", 0, NULL, &r),
	    200);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), 2);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", "/v1/contracts?role=buyer",
	                                 w.key_b, w.secret_b, "", 0, NULL, &r),
	                 200);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_array_get(items, 0), "id")),
	    c2);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/contracts?market=perm-2027",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_array_get(items, 0), "id")),
	    c3);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_status(&h, "GET", "/v1/contracts?role=buyer",
	                            w.finance_token, NULL, NULL),
	                 400);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/contracts", w.trader2_token,
	                          NULL, NULL, &r),
	                 200);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), 0);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* Polls until contract `id` is in `state`: the timer ticks every 100 ms,
 * so this waits for liveness only, with a bound far above it. */
static void wait_state(struct rxh *h, const char *tok, int64_t id,
                       const char *state, struct rxh_resp *out)
{
	char path[64];
	snprintf(path, sizeof path, "/v1/contracts/%lld", (long long)id);
	for (int i = 0; i < 600; i++) {
		ck_assert_int_eq(rxh_call(h, "GET", path, tok, NULL, NULL, out),
		                 200);
		if (strcmp(str(out, "state"), state) == 0)
			return;
		rxh_resp_free(out);
		usleep(100000);
	}
	ck_abort_msg("contract %lld never became %s", (long long)id, state);
}

START_TEST(timer_applies_deadlines)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char path[96];
	rxh_start(&h, "ramex_t_ctr_timer", "--contract_tick_ms=100");
	rxh_world(&h, &w);
	/* a market with 1 s of notice, another with 1 s to deliver; the
	 * writer reads the markets' terms when it starts */
	sql(&h, "UPDATE markets SET notice_period_s = 1 WHERE name = 'spot'");
	sql(&h, "UPDATE markets SET delivery_deadline_s = 1 WHERE name = "
	        "'perm-2027'");
	rxh_kill(&h, SIGTERM);
	rxh_restart(&h);

	/* spot: delivered, recalled, ended by the timer at the notice's end */
	int64_t c1 = trade(&h, &w, "spot", w.node_a, w.op_account, w.op_token);
	ck_assert_int_eq(
	    move(&h, c1, "deliver", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c1, "recall", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	ck_assert_str_eq(str(&r, "state"), "recalling");
	int64_t at = json_integer_value(
	    json_object_get(json_object_get(r.json, "transition"), "at_ns"));
	int64_t notice_end = rxh_int(&r, "notice_end_ns");
	ck_assert_int_eq(notice_end, at + INT64_C(1000000000));
	rxh_resp_free(&r);
	wait_state(&h, w.op_token, c1, "ended", &r);
	ck_assert_int_eq(rxh_int(&r, "ended_ns"), notice_end);
	rxh_resp_free(&r);
	snprintf(path, sizeof path, "/v1/contracts/%lld/transitions",
	         (long long)c1);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", path, w.trader_token, NULL, NULL, &r), 200);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 3);
	json_t *last = json_array_get(items, 2);
	ck_assert_str_eq(json_string_value(json_object_get(last, "event")),
	                 "notice_ended");
	ck_assert_str_eq(json_string_value(json_object_get(last, "actor")),
	                 "exchange");
	ck_assert(json_is_null(json_object_get(last, "principal")));
	rxh_resp_free(&r);

	/* perm with 1 s to deliver: not delivered, breached by the timer at
	 * the deadline; a delivery after it is refused */
	int64_t c2 =
	    trade(&h, &w, "perm-2027", w.node_a, w.op_account, w.op_token);
	wait_state(&h, w.op_token, c2, "breached", &r);
	ck_assert_int_eq(rxh_int(&r, "ended_ns"), rxh_int(&r, "deliver_by_ns"));
	ck_assert_int_eq(rxh_int(&r, "delivered_ns"), 0);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c2, "deliver", NULL, w.key_a, w.secret_a, NULL, &r), 409);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM contract_transitions "
	                           "WHERE event = 'delivery_late' AND actor = "
	                           "'exchange'"),
	                 1);
	rxh_stop(&h);
}
END_TEST

/* The timer's question (CONTRACTS_DUE_SQL) reads only the contracts that
 * are due, through contracts_due, earliest first; before 0011 it read every
 * live contract each tick. */
START_TEST(timer_query_reads_only_due_contracts)
{
	struct rxh h;
	/* one tick at the start, with no contracts, then none for a minute:
	 * the timer must not move the rows below */
	rxh_start(&h, "ramex_t_ctr_due", "--contract_tick_ms=60000");
	/* 20 000 live contracts due in the far future, among them one of
	 * each kind that is due at 500 ns, and some that never are */
	sql(&h, "INSERT INTO contracts (id, trade_id, market_id, buyer_id, "
	        "seller_id, delivery, pages, price, state, deliver_by, "
	        "notice_period_s, created_at, updated_at, deliver_by_ns, "
	        "term_end_ns, notice_end_ns) SELECT g, g, 1, 1, 2, 'offline', "
	        "256, 1000, (ARRAY['pending_delivery', 'active', "
	        "'recalling'])[g % 3 + 1], now(), 3600, now(), now(), "
	        "4000000000000000000, CASE WHEN g % 2 = 0 THEN "
	        "4000000000000000000 ELSE 0 END, 4000000000000000000 FROM "
	        "generate_series(1, 20000) g");
	sql(&h, "INSERT INTO contracts (id, trade_id, market_id, buyer_id, "
	        "seller_id, delivery, pages, price, state, deliver_by, "
	        "notice_period_s, created_at, updated_at, deliver_by_ns, "
	        "term_end_ns, notice_end_ns) SELECT id, id, 1, 1, 2, "
	        "'offline', 256, 1000, st, now(), 3600, now(), now(), d, t, n "
	        "FROM (VALUES (20001, 'pending_delivery', 100, 0, 0), (20002, "
	        "'recalling', 4000000000000000000, 0, 200), (20003, 'active', "
	        "4000000000000000000, 50, 0), (20004, 'active', 10, 0, 10), "
	        "(20005, 'ended', 10, 10, 10), (20006, 'pending_delivery', "
	        "501, 0, 0), (20007, 'breached', 10, 10, 10)) AS v(id, st, d, "
	        "t, n)");
	sql(&h, "ANALYZE contracts");

	PGconn *c = testdb_connect(h.conninfo);
	const char *pv[] = {"500"};
	PGresult *r = PQexecParams(c, "EXPLAIN " CONTRACTS_DUE_SQL, 1, NULL, pv,
	                           NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	char plan[4096] = "";
	for (int i = 0; i < PQntuples(r); i++) {
		strncat(plan, PQgetvalue(r, i, 0),
		        sizeof plan - strlen(plan) - 2);
		strcat(plan, "\n");
	}
	PQclear(r);
	ck_assert_msg(strstr(plan, "contracts_due") &&
	                  !strstr(plan, "Seq Scan") && !strstr(plan, "Sort"),
	              "the timer's query does not use contracts_due:\n%s",
	              plan);

	r = PQexecParams(c, CONTRACTS_DUE_SQL, 1, NULL, pv, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	const char *want[][2] = {{"20003", "term_ended"},
	                         {"20001", "delivery_late"},
	                         {"20002", "notice_ended"}};
	ck_assert_int_eq(PQntuples(r), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_str_eq(PQgetvalue(r, i, 0), want[i][0]);
		ck_assert_str_eq(PQgetvalue(r, i, 1), want[i][1]);
	}
	PQclear(r);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* Issue 25, item 10: an operator account made with a team_id let that
 * team's trader end the operator's contract. Only nodes belong to a team,
 * and a move checks the kind of the account a trader speaks for. */
START_TEST(operators_belong_to_no_team)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char body[160];
	rxh_start(&h, "ramex_t_ctr_teamless", "");
	rxh_world(&h, &w);

	/* refused at creation, with what to do instead; nothing made */
	snprintf(body, sizeof body,
	         "{\"name\":\"op-teamed\",\"kind\":\"operator\",\"team_id\":"
	         "%lld}",
	         (long long)w.team);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", "/v1/accounts", h.admin, body, NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "belong to no team") &&
	                  strstr(r.body, "POST /v1/nodes"),
	              "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM accounts WHERE name "
	                           "= 'op-teamed'"),
	                 0);
	static const char *roles[] = {"admin", "finance", "operator"};
	for (int i = 0; i < 3; i++) {
		snprintf(body, sizeof body,
		         "{\"name\":\"t\",\"role\":\"%s\",\"team_id\":%lld,"
		         "\"account_id\":%lld}",
		         roles[i], (long long)w.team, (long long)w.op_account);
		ck_assert_int_eq(rxh_call(&h, "POST", "/v1/tokens", h.admin,
		                          body, NULL, &r),
		                 422);
		ck_assert_msg(strstr(r.body, "only a trader token belongs to "
		                             "a team"),
		              "%s", r.body);
		rxh_resp_free(&r);
	}
	/* and the database refuses it too */
	PGconn *c = PQconnectdb(h.conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	char q[160];
	snprintf(q, sizeof q, "UPDATE accounts SET team_id = %lld WHERE id = %lld",
	         (long long)w.team, (long long)w.op_account);
	PGresult *pr = PQexec(c, q);
	ck_assert_int_eq(PQresultStatus(pr), PGRES_FATAL_ERROR);
	ck_assert_str_eq(PQresultErrorField(pr, PG_DIAG_SQLSTATE), "23514");
	PQclear(pr);
	PQfinish(c);

	/* a row from before that check (dropped here to make one): the
	 * team's trader still may not move the operator's side */
	sql(&h, "ALTER TABLE accounts DROP CONSTRAINT "
	        "accounts_team_is_a_nodes");
	sql(&h, q);
	int64_t c1 = trade(&h, &w, "spot", w.node_a, w.op_account, w.op_token);
	ck_assert_int_eq(
	    move(&h, c1, "deliver", NULL, w.key_a, w.secret_a, NULL, &r), 200);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    move(&h, c1, "end", w.trader_token, NULL, NULL, NULL, &r), 403);
	rxh_resp_free(&r);
	expect_state(&h, w.op_token, c1, "active");
	ck_assert_int_eq(move(&h, c1, "end", w.op_token, NULL, NULL, NULL, &r),
	                 200);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("contracts");
	TCase *tc = tcase_create("contracts");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, deliver_retry_parties_states_and_events);
	tcase_add_test(tc, timer_applies_deadlines);
	tcase_add_test(tc, timer_query_reads_only_due_contracts);
	tcase_add_test(tc, operators_belong_to_no_team);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
