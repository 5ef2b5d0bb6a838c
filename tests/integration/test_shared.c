/*
 * test_shared.c — two ramexd on one database behave as one exchange to a
 * client: what each keeps of idempotency keys, nonces and events is shared
 * through PostgreSQL (docs/ARCHITECTURE.md, "Scaling beyond one ramexd").
 *
 * Every test starts instance A on a fresh database, builds the world
 * there, then starts instance B on the same database, both with
 * `shared = 1`, A serving the spot market and B perm-2027 (exchange/
 * owner.h: an order for a market served elsewhere is answered 307), and
 * waits until both have loaded their key filters (so that a key A writes
 * afterwards is one B's filter does not know: the case the database must
 * catch).
 *
 *   an_idempotency_key_replayed_on_the_other_instance_is_one_order:
 *     an order with an Idempotency-Key placed on A; the same request sent
 *     to B is sent on to A (307), which replays it; the key with an order
 *     for B's own market is refused 422 by B (the unique index caught
 *     what B's key filter did not know), one order in the database.
 *   a_client_order_id_replayed_on_the_other_instance_is_one_order: the
 *     same with client_order_id, in one batch of B's among fresh orders,
 *     which are placed once each.
 *   a_nonce_replayed_on_the_other_instance_is_refused: a node's signed
 *     order taken by A, sent again byte for byte to B: 401, one order;
 *     a fresh nonce on B is taken.
 *   b_streams_the_fills_of_a_in_order_and_resumes_on_either: a trader's
 *     stream on B sees the fills of trades made on A, in A's order, with
 *     the ids A's stream has; reconnected with Last-Event-ID to A, and to
 *     B, each goes on after that id with what came meanwhile, nothing
 *     twice and nothing lost; a contract's delivery on B reaches A's
 *     stream.
 *   the_stream_goes_on_through_a_database_restart: PostgreSQL stopped
 *     (-m immediate) under a stream on B: a signed request to B is 503
 *     meanwhile, never taken unchecked; started again, the same stream
 *     gets the next fill made on A. This stops the PostgreSQL every suite
 *     shares, so it starts it again first.
 */
#include <check.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/ramexd_fixture.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

/* Waits up to 20 s for `needle` in h's log. */
static void wait_log(struct rxh *h, const char *needle)
{
	for (int i = 0; i < 400; i++) {
		if (rxh_log_count(h, needle) > 0)
			return;
		sleep_ms(50);
	}
	ck_abort_msg("no '%s' in %s", needle, h->log);
}

/* A node's sell of `pages` at `price` in `market`, as place() does. */
static long place_in(struct rxh *h, const char *market, const char *tok,
                     int64_t acct, int pages, int price, const char *hdr,
                     struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"%s\",\"account_id\":%lld,\"side\":\"sell\","
	         "\"pages\":%d,\"price\":%d}",
	         market, (long long)acct, pages, price);
	return rxh_call(h, "POST", "/v1/orders", tok, body, hdr, r);
}

/* A on a fresh database `db` with the world, B on the same one. */
static void pair(struct rxh *a, struct rxh *b, struct rxh_world *w,
                 const char *db)
{
	char bname[64];
	rxh_start(a, db, "--shared=1 --markets=spot");
	rxh_world(a, w);
	snprintf(bname, sizeof bname, "%s_b", db);
	rxh_start_at(b, bname, a->conninfo, "--shared=1 --markets=perm-2027");
	wait_log(a, "key filter loaded");
	wait_log(b, "key filter loaded");
}

START_TEST(an_idempotency_key_replayed_on_the_other_instance_is_one_order)
{
	struct rxh a, b;
	struct rxh_world w;
	struct rxh_resp r1, r2, r3;
	pair(&a, &b, &w, "shared_idem");
	const char *hdr = "Idempotency-Key: shared-k1";
	ck_assert_int_eq(place(&a, w.trader_token, w.node_a, "sell", 256, 90000,
	                       NULL, hdr, &r1),
	                 201);
	int64_t id = order_id(&r1);
	ck_assert_int_gt(id, 0);
	/* the same request on B: sent on to A, whose answer is the order */
	ck_assert_int_eq(place(&b, w.trader_token, w.node_a, "sell", 256, 90000,
	                       NULL, hdr, &r2),
	                 307);
	char buf[256], want[64];
	ck_assert_ptr_nonnull(rxh_header(&r2, "Location", buf, sizeof buf));
	snprintf(want, sizeof want, ":%d/v1/orders", a.port);
	ck_assert_msg(strstr(buf, want), "Location %s is not A's", buf);
	rxh_resp_free(&r2);
	ck_assert_int_eq(place(&a, w.trader_token, w.node_a, "sell", 256, 90000,
	                       NULL, hdr, &r2),
	                 201);
	ck_assert_int_eq(order_id(&r2), id);
	ck_assert_ptr_nonnull(
	    rxh_header(&r2, "Idempotent-Replayed", buf, sizeof buf));
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 1);
	/* the key with an order for B's own market: B's key filter does not
	 * know it, the unique index does: refused, nothing placed */
	ck_assert_int_eq(place_in(&b, "perm-2027", w.trader_token, w.node_a,
	                          512, 90000, hdr, &r3),
	                 422);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 1);
	/* B goes on placing fresh orders */
	rxh_resp_free(&r3);
	ck_assert_int_eq(place_in(&b, "perm-2027", w.trader_token, w.node_b,
	                          256, 91000, NULL, &r3),
	                 201);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 2);
	rxh_resp_free(&r1);
	rxh_resp_free(&r2);
	rxh_resp_free(&r3);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

/* Sends `n` orders at once (one thread each) to h, so that they share a
 * batch; bodies[i] are their JSON bodies, statuses and ids come back. */
struct shot {
	struct rxh *h;
	const char *tok, *body;
	long status;
	int64_t id;
};

static void *fire(void *arg)
{
	struct shot *s = arg;
	struct rxh_resp r;
	s->status =
	    rxh_call(s->h, "POST", "/v1/orders", s->tok, s->body, NULL, &r);
	s->id = order_id(&r);
	rxh_resp_free(&r);
	return NULL;
}

START_TEST(a_client_order_id_replayed_on_the_other_instance_is_one_order)
{
	struct rxh a, b;
	struct rxh_world w;
	struct rxh_resp r1, r2;
	pair(&a, &b, &w, "shared_coid");
	char body[256];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"sell\","
	         "\"pages\":256,\"price\":95000,\"client_order_id\":\"c-1\"}",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&a, "POST", "/v1/orders", w.trader_token, body, NULL, &r1),
	    201);
	int64_t id = order_id(&r1);
	/* on B, for B's market, with fresh orders around it in the same
	 * batch: the id is taken (422), the others placed once each */
	enum { N = 8 };
	struct shot s[N];
	pthread_t th[N];
	char bodies[N][256];
	for (int i = 0; i < N; i++) {
		if (i == N / 2)
			snprintf(bodies[i], sizeof bodies[i],
			         "{\"market\":\"perm-2027\",\"account_id\":"
			         "%lld,\"side\":\"sell\",\"pages\":256,"
			         "\"price\":95000,\"client_order_id\":\"c-1\"}",
			         (long long)w.node_a);
		else
			snprintf(bodies[i], sizeof bodies[i],
			         "{\"market\":\"perm-2027\",\"account_id\":%lld,"
			         "\"side\":\"sell\",\"pages\":256,\"price\":"
			         "96000,\"client_order_id\":\"f-%d\"}",
			         (long long)w.node_b, i);
		s[i] = (struct shot){&b, w.trader_token, bodies[i], 0, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, fire, &s[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(s[i].status, i == N / 2 ? 422 : 201);
		if (i != N / 2)
			ck_assert_int_ne(s[i].id, id);
	}
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), N);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders WHERE "
	                           "client_order_id = 'c-1'"),
	                 1);
	/* the id for another order, on B: refused, nothing placed */
	snprintf(body, sizeof body,
	         "{\"market\":\"perm-2027\",\"account_id\":%lld,\"side\":\"sell\","
	         "\"pages\":512,\"price\":95000,\"client_order_id\":\"c-1\"}",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&b, "POST", "/v1/orders", w.trader_token, body, NULL, &r2),
	    422);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), N);
	/* (B's log says "batch lost a key race": its key filter did not know
	 * c-1, but for a false positive of the filter, one in about a
	 * thousand, which looks the key up at once; so it is not asserted) */
	rxh_resp_free(&r1);
	rxh_resp_free(&r2);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

START_TEST(a_nonce_replayed_on_the_other_instance_is_refused)
{
	struct rxh a, b;
	struct rxh_world w;
	struct rxh_resp r;
	pair(&a, &b, &w, "shared_nonce");
	char body[256];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":"
	         "\"sell\",\"pages\":256,\"price\":97000}",
	         (long long)w.node_a);
	int64_t ts = (int64_t)time(NULL);
	ck_assert_int_eq(rxh_status_signed(&a, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, ts,
	                                   "nonce-one-0123456789"),
	                 201);
	/* the same request, to B */
	ck_assert_int_eq(rxh_call_signed(&b, "POST", "/v1/orders", w.key_a,
	                                 w.secret_a, body, ts,
	                                 "nonce-one-0123456789", &r),
	                 401);
	ck_assert_ptr_nonnull(strstr(r.body, "nonce was already used"));
	rxh_resp_free(&r);
	/* and to A again */
	ck_assert_int_eq(rxh_status_signed(&a, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, ts,
	                                   "nonce-one-0123456789"),
	                 401);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 1);
	/* a fresh nonce is taken by B, for its own market */
	snprintf(body, sizeof body,
	         "{\"market\":\"perm-2027\",\"account_id\":%lld,\"side\":"
	         "\"sell\",\"pages\":256,\"price\":97000}",
	         (long long)w.node_a);
	ck_assert_int_eq(rxh_status_signed(&b, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, ts,
	                                   "nonce-two-0123456789"),
	                 201);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 2);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM auth_nonces"), 2);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

/* An event stream read by hand (HTTP/1.0: no chunks), until it holds
 * `want` fill events or 20 s pass. */
struct sse {
	struct rxh *h;
	const char *token;
	int64_t last_id; /* Last-Event-ID to send; -1: none */
	int want;
	const char *type; /* the events counted; NULL: fill */
	int connected;    /* atomic: the answer's head came */
	int nfill;
	int64_t id[32];    /* the fills' ids */
	int64_t price[32]; /* and prices */
};

static void *sse_read(void *arg)
{
	struct sse *x = arg;
	int fd = rxh_dial(x->h->port);
	ck_assert_int_ge(fd, 0);
	char req[512], lid[64] = "";
	if (x->last_id >= 0)
		snprintf(lid, sizeof lid, "Last-Event-ID: %lld\r\n",
		         (long long)x->last_id);
	int n = snprintf(req, sizeof req,
	                 "GET /v1/events HTTP/1.0\r\nHost: 127.0.0.1\r\n"
	                 "Authorization: Bearer %s\r\n%s\r\n",
	                 x->token, lid);
	ck_assert_int_eq(write(fd, req, (size_t)n), n);
	static __thread char buf[65536];
	size_t len = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (x->nfill < x->want && len + 1 < sizeof buf) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t k = read(fd, buf + len, sizeof buf - 1 - len);
		if (k <= 0)
			break;
		len += (size_t)k;
		buf[len] = 0;
		if (strstr(buf, "\r\n\r\n"))
			__atomic_store_n(&x->connected, 1, __ATOMIC_RELEASE);
		/* every complete fill event so far */
		x->nfill = 0;
		for (char *p = buf; (p = strstr(p, "\nid: "));) {
			long long id = strtoll(p + 5, &p, 10);
			char fill[64];
			int fl = snprintf(
			    fill, sizeof fill,
			    "\nevent: %s\ndata: ", x->type ? x->type : "fill");
			if (strncmp(p, fill, (size_t)fl) != 0)
				continue;
			char *end = strstr(p, "\n\n");
			char *pr = strstr(p, "\"price\":");
			if (!end || !pr || pr > end || x->nfill == 32)
				break;
			x->id[x->nfill] = id;
			x->price[x->nfill++] = strtoll(pr + 8, NULL, 10);
		}
	}
	close(fd);
	return NULL;
}

static void sse_start(struct sse *x, pthread_t *th)
{
	ck_assert_int_eq(pthread_create(th, NULL, sse_read, x), 0);
	for (int i = 0;
	     i < 200 && !__atomic_load_n(&x->connected, __ATOMIC_ACQUIRE); i++)
		sleep_ms(25);
	ck_assert_msg(x->connected, "the event stream did not answer");
}

/* A trade on A's spot market at `price`: node_a sells, the operator buys.
 * Its contract's id. The sell is retried, with its key, while it is
 * answered 503: the first batch after PostgreSQL came back may find the
 * writer's connection gone (not carried out; a client retries). */
static int64_t trade(struct rxh *a, const struct rxh_world *w, int price)
{
	struct rxh_resp r;
	char key[64];
	snprintf(key, sizeof key, "Idempotency-Key: trade-sell-%d", price);
	long st = 0;
	for (int i = 0; i < 100; i++) {
		st = place(a, w->trader_token, w->node_a, "sell", 256, price,
		           NULL, key, &r);
		if (st != 503)
			break;
		rxh_resp_free(&r);
		sleep_ms(100);
	}
	ck_assert_int_eq(st, 201);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(a, w->op_token, w->op_account, "buy", 256, price,
	                       NULL, NULL, &r),
	                 201);
	json_t *t = json_object_get(r.json, "trades");
	ck_assert_int_eq(json_array_size(t), 1);
	int64_t id = json_integer_value(
	    json_object_get(json_array_get(t, 0), "contract_id"));
	rxh_resp_free(&r);
	ck_assert_int_gt(id, 0);
	return id;
}

START_TEST(b_streams_the_fills_of_a_in_order_and_resumes_on_either)
{
	struct rxh a, b;
	struct rxh_world w;
	pair(&a, &b, &w, "shared_events");
	static const int price[5] = {90000, 93000, 91000, 95000, 92000};
	/* a stream on each instance */
	struct sse on_b = {&b, w.trader_token, -1, 3, NULL, 0, 0, {0}, {0}};
	struct sse on_a = {&a, w.trader_token, -1, 3, NULL, 0, 0, {0}, {0}};
	pthread_t tb, ta;
	sse_start(&on_b, &tb);
	sse_start(&on_a, &ta);
	int64_t first = 0;
	for (int i = 0; i < 3; i++) {
		int64_t k = trade(&a, &w, price[i]);
		first = first ? first : k;
	}
	pthread_join(tb, NULL);
	pthread_join(ta, NULL);
	ck_assert_int_eq(on_b.nfill, 3);
	ck_assert_int_eq(on_a.nfill, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(on_b.price[i], price[i]);
		ck_assert_int_eq(on_b.id[i], on_a.id[i]); /* one stream */
		if (i)
			ck_assert_int_gt(on_b.id[i], on_b.id[i - 1]);
	}
	/* two more while nobody listens */
	for (int i = 3; i < 5; i++)
		trade(&a, &w, price[i]);
	/* the client of B comes back to A after its last fill */
	struct sse back_a = {&a, w.trader_token, on_b.id[2], 2, NULL, 0, 0, {0},
	                     {0}};
	/* and one that saw only the first fill, to B */
	struct sse back_b = {&b, w.trader_token, on_b.id[0], 4, NULL, 0, 0, {0},
	                     {0}};
	sse_start(&back_a, &ta);
	sse_start(&back_b, &tb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_int_eq(back_a.nfill, 2);
	ck_assert_int_eq(back_a.price[0], price[3]);
	ck_assert_int_eq(back_a.price[1], price[4]);
	ck_assert_int_gt(back_a.id[0], on_b.id[2]);
	ck_assert_int_eq(back_b.nfill, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(back_b.price[i], price[i + 1]);
	ck_assert_int_eq(back_b.id[1], on_b.id[2]);
	ck_assert_int_eq(back_b.id[2], back_a.id[0]);
	/* the database holds the stream, ids dense from 1 */
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM events WHERE type = "
	                           "'fill'"),
	                 5);
	ck_assert_int_eq(count(&a, "SELECT max(id) - count(*) FROM events"), 0);
	/* a contract move on B (its delivery) reaches A's stream, after the
	 * fills */
	struct sse move = {
	    &a, w.trader_token, back_a.id[1], 1, "contract", 0, 0, {0}, {0}};
	sse_start(&move, &ta);
	char path[64];
	snprintf(path, sizeof path, "/v1/contracts/%lld/deliver",
	         (long long)first);
	ck_assert_int_eq(rxh_status_signed(&b, "POST", path, w.key_a,
	                                   w.secret_a, "", 0, NULL),
	                 200);
	pthread_join(ta, NULL);
	ck_assert_int_eq(move.nfill, 1);
	ck_assert_int_gt(move.id[0], back_a.id[1]);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM events WHERE type = "
	                           "'contract' AND data LIKE '%\"active\"%'"),
	                 1);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

START_TEST(the_stream_goes_on_through_a_database_restart)
{
	struct rxh a, b;
	struct rxh_world w;
	ck_assert_int_eq(testdb_pg_start(), 0);
	pair(&a, &b, &w, "shared_restart");
	struct sse on_b = {&b, w.trader_token, -1, 2, NULL, 0, 0, {0}, {0}};
	pthread_t tb;
	sse_start(&on_b, &tb);
	trade(&a, &w, 90000);
	for (int i = 0;
	     i < 200 && __atomic_load_n(&on_b.nfill, __ATOMIC_RELAXED) < 1; i++)
		sleep_ms(25);
	char body[256];
	snprintf(body, sizeof body,
	         "{\"market\":\"perm-2027\",\"account_id\":%lld,\"side\":"
	         "\"sell\",\"pages\":256,\"price\":99000}",
	         (long long)w.node_a);
	ck_assert_int_eq(rxh_status_signed(&b, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, 0, NULL),
	                 201);
	ck_assert_int_eq(testdb_pg_stop_now(), 0);
	/* the nonce cannot be checked: refused, not taken */
	ck_assert_int_eq(rxh_status_signed(&b, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, 0, NULL),
	                 503);
	ck_assert_int_eq(testdb_pg_start(), 0);
	long st = 0;
	for (int i = 0; i < 300 && st != 200; i++) {
		st = rxh_status(&a, "GET", "/readyz", NULL, NULL, NULL);
		if (st != 200)
			sleep_ms(100);
	}
	ck_assert_int_eq(st, 200);
	trade(&a, &w, 91000);
	pthread_join(tb, NULL);
	ck_assert_int_eq(on_b.nfill, 2);
	ck_assert_int_eq(on_b.price[0], 90000);
	ck_assert_int_eq(on_b.price[1], 91000);
	ck_assert_int_eq(on_b.id[1], on_b.id[0] + 2); /* fill, contract, fill */
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("shared");
	TCase *t = tcase_create("two instances");
	tcase_set_timeout(t, 120);
	tcase_add_test(
	    t, an_idempotency_key_replayed_on_the_other_instance_is_one_order);
	tcase_add_test(
	    t, a_client_order_id_replayed_on_the_other_instance_is_one_order);
	tcase_add_test(t, a_nonce_replayed_on_the_other_instance_is_refused);
	tcase_add_test(t,
	               b_streams_the_fills_of_a_in_order_and_resumes_on_either);
	tcase_add_test(t, the_stream_goes_on_through_a_database_restart);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
