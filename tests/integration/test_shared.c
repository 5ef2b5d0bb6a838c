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
 *   a_stream_follows_its_account_across_a_takeover: three instances of
 *     their own (a spot, b perm-2027, c the rest, polling for markets
 *     without an owner every 100 ms). The trader's stream is open on a
 *     while spot trades go on one after another; a is killed with -9
 *     among them, its stream cut; the trades go on, retried with their
 *     client order ids, on c once it took spot. The client comes back
 *     late, after c's first trades, to b, with the last id it saw. The
 *     two streams together are the account's fills of the events table,
 *     in id order, each once, and those are the trades answered, each
 *     with its trade id; the same Last-Event-ID on c gives the same.
 *     Prints the takeover time.
 */
#include <check.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
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
			snprintf(
			    bodies[i], sizeof bodies[i],
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
	snprintf(
	    body, sizeof body,
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
 * `want` fill events (atomic: it may be lowered while it reads), the
 * server ends it, or budget_s (20 when 0) pass. */
#define SSE_MAX 256
struct sse {
	struct rxh *h;
	const char *token;
	int64_t last_id; /* Last-Event-ID to send; -1: none */
	int want;
	const char *type; /* the events counted; NULL: fill */
	int budget_s;     /* how long it reads at most; 0: 20 s */
	int connected;    /* atomic: the answer's head came */
	int nfill;
	int64_t id[SSE_MAX];    /* the fills' ids */
	int64_t price[SSE_MAX]; /* and prices */
	int64_t trade[SSE_MAX]; /* and trade ids */
	int64_t last_seen;      /* the id of the last whole event of any type */
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
	static __thread char buf[262144];
	size_t len = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (x->nfill < __atomic_load_n(&x->want, __ATOMIC_ACQUIRE) &&
	       len + 1 < sizeof buf) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > (x->budget_s ? x->budget_s : 20))
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
			char *end = strstr(p, "\n\n");
			if (!end)
				break;
			x->last_seen = id;
			char fill[64];
			int fl = snprintf(
			    fill, sizeof fill,
			    "\nevent: %s\ndata: ", x->type ? x->type : "fill");
			if (strncmp(p, fill, (size_t)fl) != 0)
				continue;
			char *pr = strstr(p, "\"price\":");
			char *tr = strstr(p, "\"trade_id\":");
			if (!pr || pr > end || x->nfill == SSE_MAX)
				break;
			x->id[x->nfill] = id;
			x->trade[x->nfill] =
			    tr && tr < end ? strtoll(tr + 11, NULL, 10) : 0;
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
	struct sse on_b = {
	    .h = &b, .token = w.trader_token, .last_id = -1, .want = 3};
	struct sse on_a = {
	    .h = &a, .token = w.trader_token, .last_id = -1, .want = 3};
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
	struct sse back_a = {
	    .h = &a, .token = w.trader_token, .last_id = on_b.id[2], .want = 2};
	/* and one that saw only the first fill, to B */
	struct sse back_b = {
	    .h = &b, .token = w.trader_token, .last_id = on_b.id[0], .want = 4};
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
	struct sse move = {.h = &a,
	                   .token = w.trader_token,
	                   .last_id = back_a.id[1],
	                   .want = 1,
	                   .type = "contract"};
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
	/* PostgreSQL's stop and start took 32 s under load 14: the stream is
	 * read through it, not timed */
	struct sse on_b = {.h = &b,
	                   .token = w.trader_token,
	                   .last_id = -1,
	                   .want = 2,
	                   .budget_s = 120};
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

/* --- a stream across a takeover ------------------------------------------ */

/* Trades on spot one after another, each a sell of node_a's and the
 * operator's buy, both with client order ids and retried with them (as an
 * agent does, at most 10 s) on a while it lives, else on c, until `stop`. */
#define TRADES_MAX 200
struct trader {
	struct rxh *a, *c;
	const struct rxh_world *w;
	int a_alive, stop; /* atomic */
	int n;             /* atomic: trades answered so far */
	int64_t trade[TRADES_MAX];
	char on_c[TRADES_MAX]; /* answered by c */
	char err[256];
};

/* One order of trade k, retried until 201; its trade id when it is the
 * buy, 0 for the sell, -1 (and t->err) when it was refused. */
static int64_t trader_order(struct trader *t, int k, bool buy, char *on_c)
{
	char more[64];
	snprintf(more, sizeof more, ",\"client_order_id\":\"tk-%c-%d\"",
	         buy ? 'b' : 's', k);
	int64_t until = clock_mono_ms() + 10000;
	for (;;) {
		int alive = __atomic_load_n(&t->a_alive, __ATOMIC_ACQUIRE);
		struct rxh *h = alive ? t->a : t->c;
		struct rxh_resp r;
		long st = place(h, buy ? t->w->op_token : t->w->trader_token,
		                buy ? t->w->op_account : t->w->node_a,
		                buy ? "buy" : "sell", 256,
		                90000 + 1000 * (k % 7), more, NULL, &r);
		int64_t id = 0;
		if (st == 201 && buy)
			id = json_integer_value(json_object_get(
			    json_array_get(json_object_get(r.json, "trades"),
			                   0),
			    "trade_id"));
		else if (st != 201 && st >= 400 && st < 500)
			snprintf(t->err, sizeof t->err, "tk-%d: %ld %s", k, st,
			         r.body ? r.body : "");
		rxh_resp_free(&r);
		if (st == 201) {
			*on_c = !alive;
			return buy && id <= 0 ? -1 : id;
		}
		/* 307 or 503 while nobody owns spot, or a dead a */
		if (t->err[0] || clock_mono_ms() > until)
			return -1;
		sleep_ms(20);
	}
}

static void *trader_run(void *arg)
{
	struct trader *t = arg;
	for (int k = 0;
	     k < TRADES_MAX && !__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE);
	     k++) {
		char c1 = 0;
		if (trader_order(t, k, false, &c1) < 0 ||
		    (t->trade[k] = trader_order(t, k, true, &t->on_c[k])) < 0) {
			if (!t->err[0])
				snprintf(t->err, sizeof t->err,
				         "tk-%d not answered 201 in 10 s", k);
			break;
		}
		__atomic_store_n(&t->n, k + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Waits up to `ms` for the trader's count to reach n. */
static void wait_trades(struct trader *t, int n, int ms)
{
	int64_t until = clock_mono_ms() + ms;
	while (__atomic_load_n(&t->n, __ATOMIC_ACQUIRE) < n &&
	       clock_mono_ms() < until && !t->err[0])
		sleep_ms(10);
	ck_assert_msg(t->n >= n, "%d trades of %d in %d ms: %s", t->n, n, ms,
	              t->err);
}

static void wait_owner(struct rxh *h, const char *market, const char *who,
                       int ms)
{
	char q[256];
	snprintf(q, sizeof q,
	         "SELECT count(*) FROM market_owners o JOIN markets k ON k.id "
	         "= o.market_id WHERE k.name = '%s' AND o.instance = '%s'",
	         market, who);
	int64_t until = clock_mono_ms() + ms;
	while (count(h, q) != 1) {
		ck_assert_msg(clock_mono_ms() < until,
		              "%s not owned by %s in %d ms", market, who, ms);
		sleep_ms(20);
	}
}

START_TEST(a_stream_follows_its_account_across_a_takeover)
{
	/* a serves spot, b perm-2027, c what nobody serves (poll 100 ms) */
	struct rxh a, b, c;
	struct rxh_world w;
	rxh_start(&a, "shared_takeover",
	          "--shared=1 --markets=spot --instance=a --own_poll_ms=100 "
	          "--billing_interval_s=0");
	rxh_world(&a, &w);
	rxh_start_at(&b, "shared_takeover_b", a.conninfo,
	             "--shared=1 --markets=perm-2027 --instance=b "
	             "--billing_interval_s=0");
	wait_owner(&a, "perm-2027", "b", 5000);
	rxh_start_at(&c, "shared_takeover_c", a.conninfo,
	             "--shared=1 --markets=all --instance=c --own_poll_ms=100 "
	             "--billing_interval_s=0");
	wait_owner(&a, "spot", "a", 5000);

	/* the trader's stream on a, the owner of its market */
	static struct sse s1, s2;
	s1 = (struct sse){
	    .h = &a, .token = w.trader_token, .last_id = -1, .want = SSE_MAX};
	pthread_t t1, t2, tt;
	sse_start(&s1, &t1);
	static struct trader t;
	t = (struct trader){.a = &a, .c = &c, .w = &w, .a_alive = 1};
	ck_assert_int_eq(pthread_create(&tt, NULL, trader_run, &t), 0);
	wait_trades(&t, 5, 10000);
	/* a dies while the trades go on: its stream ends */
	__atomic_store_n(&t.a_alive, 0, __ATOMIC_RELEASE);
	int64_t t_kill = clock_mono_ms();
	rxh_kill(&a, SIGKILL);
	pthread_join(t1, NULL);
	int on_a = __atomic_load_n(&t.n, __ATOMIC_ACQUIRE);
	wait_owner(&b, "spot", "c", 10000);
	int64_t t_taken = clock_mono_ms();
	/* the client comes back late, to b, after c's first trades: what
	 * came meanwhile it gets from Last-Event-ID alone */
	wait_trades(&t, on_a + 3, 10000);
	s2 = (struct sse){.h = &b,
	                  .token = w.trader_token,
	                  .last_id = s1.last_seen,
	                  .want = SSE_MAX};
	sse_start(&s2, &t2);
	int resumed = __atomic_load_n(&t.n, __ATOMIC_ACQUIRE);
	wait_trades(&t, resumed + 3, 10000);
	__atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
	pthread_join(tt, NULL);
	ck_assert_msg(!t.err[0], "%s", t.err);

	/* the account's fills as the database has them, in id order */
	PGconn *db = testdb_connect(b.conninfo);
	char q[300];
	snprintf(q, sizeof q,
	         "SELECT id, (data::json->>'trade_id')::bigint FROM events "
	         "WHERE type = 'fill' AND (acct_a = %lld OR acct_b = %lld) "
	         "ORDER BY id",
	         (long long)w.node_a, (long long)w.node_a);
	PGresult *r = PQexec(db, q);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = PQntuples(r);
	ck_assert_int_le(n, SSE_MAX);
	/* the trades answered are those, and every trade made has its fill */
	ck_assert_int_eq(n, t.n);
	ck_assert_int_eq(testdb_scalar(db, "SELECT count(*) FROM trades"), n);
	for (int k = 0; k < t.n; k++)
		ck_assert_msg(atoll(PQgetvalue(r, k, 1)) == t.trade[k],
		              "fill %d is of trade %s, trade %d was answered "
		              "as %lld",
		              k, PQgetvalue(r, k, 1), k, (long long)t.trade[k]);
	/* the second stream reads until it has the rest */
	__atomic_store_n(&s2.want, n - s1.nfill, __ATOMIC_RELEASE);
	pthread_join(t2, NULL);
	ck_assert_msg(s1.nfill + s2.nfill == n,
	              "the streams saw %d + %d fills, the database has %d",
	              s1.nfill, s2.nfill, n);
	for (int k = 0; k < n; k++) {
		const struct sse *s = k < s1.nfill ? &s1 : &s2;
		int i = k < s1.nfill ? k : k - s1.nfill;
		ck_assert_msg(s->id[i] == atoll(PQgetvalue(r, k, 0)) &&
		                  s->trade[i] == atoll(PQgetvalue(r, k, 1)),
		              "fill %d on the stream%s is event %lld of trade "
		              "%lld, the database's is event %s of trade %s",
		              k, k < s1.nfill ? " on a" : " resumed on b",
		              (long long)s->id[i], (long long)s->trade[i],
		              PQgetvalue(r, k, 0), PQgetvalue(r, k, 1));
	}
	/* the same Last-Event-ID on c, the new owner, gives the same */
	static struct sse s3;
	s3 = (struct sse){.h = &c,
	                  .token = w.trader_token,
	                  .last_id = s1.last_seen,
	                  .want = n - s1.nfill};
	pthread_t t3;
	sse_start(&s3, &t3);
	pthread_join(t3, NULL);
	ck_assert_int_eq(s3.nfill, s2.nfill);
	for (int i = 0; i < s3.nfill; i++)
		ck_assert_int_eq(s3.id[i], s2.id[i]);
	int n_c = 0;
	for (int k = 0; k < t.n; k++)
		n_c += t.on_c[k];
	ck_assert_int_gt(n_c, 0);
	ck_assert_int_gt(s1.nfill, 0);
	fprintf(stderr,
	        "shared: %d fills (%d on a's stream, %d resumed on b from "
	        "event %lld; %d trades answered by c), spot taken over %lld "
	        "ms after kill -9 of a\n",
	        n, s1.nfill, s2.nfill, (long long)s1.last_seen, n_c,
	        (long long)(t_taken - t_kill));
	PQclear(r);
	PQfinish(db);
	rxh_stop(&c);
	rxh_stop(&b);
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
	tcase_add_test(t, a_stream_follows_its_account_across_a_takeover);
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
