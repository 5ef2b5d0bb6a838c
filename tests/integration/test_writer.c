/*
 * test_writer.c — the writer's pipeline of batches (exchange/writer.c)
 * against a real ramexd and PostgreSQL.
 *
 * The writer keeps up to three batches under way: one committing, one open
 * on a second connection (its INSERTs running), one gathering. What would
 * break if a failure were handled as for a batch alone: the open batch
 * could still be committed, or the gathering one sent, on top of books
 * that hold a batch PostgreSQL refused. So a batch is made to fail, slowly,
 * while orders keep coming: every order answered 201 must be in the
 * database once, every order answered otherwise must not be there at all,
 * and afterwards the books must be what the database says.
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static void sql(struct rxh *h, const char *q)
{
	testdb_run(h->conninfo, q);
}

static long place(struct rxh *h, const char *tok, int64_t acct,
                  const char *side, int64_t pages, int64_t price,
                  const char *coid)
{
	char body[512];
	struct rxh_resp r;
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":%lld,\"price\":%lld,\"client_order_id\":\"%s\"}",
	         (long long)acct, side, (long long)pages, (long long)price,
	         coid);
	long st = rxh_call(h, "POST", "/v1/orders", tok, body, NULL, &r);
	rxh_resp_free(&r);
	return st;
}

#define PLACERS 8
#define ORDERS  40 /* each */

struct placer {
	struct rxh *h;
	const struct rxh_world *w;
	int i;
	long status[ORDERS];
};

static void *place_many(void *arg)
{
	struct placer *p = arg;
	for (int k = 0; k < ORDERS; k++) {
		char coid[32];
		snprintf(coid, sizeof coid, "w-%d-%d", p->i, k);
		/* buys and sells over three prices: trades, partly filled
		 * makers (the UPDATEs a batch sends last) and resting orders */
		bool sell = (p->i + k) % 2;
		p->status[k] = place(
		    p->h, p->w->trader_token,
		    sell ? p->w->node_a : p->w->node_b, sell ? "sell" : "buy",
		    256, 100000 + 1000 * ((p->i * 7 + k) % 3), coid);
	}
	return NULL;
}

/* The depth the API shows, one side, as "price:pages,..." */
static void api_side(const json_t *levels, char *out, size_t n)
{
	size_t i;
	json_t *l;
	out[0] = 0;
	json_array_foreach(levels, i, l)
	{
		size_t len = strlen(out);
		snprintf(
		    out + len, n - len, "%lld:%lld,",
		    (long long)json_integer_value(json_object_get(l, "price")),
		    (long long)json_integer_value(json_object_get(l, "pages")));
	}
}

/* The same from the database's open orders. */
static void db_side(PGconn *c, const char *side, char *out, size_t n)
{
	char q[256];
	snprintf(q, sizeof q,
	         "SELECT price, sum(remaining) FROM orders WHERE status = "
	         "'open' AND side = '%s' GROUP BY price ORDER BY price %s",
	         side, strcmp(side, "buy") == 0 ? "DESC" : "ASC");
	PGresult *r = PQexec(c, q);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	out[0] = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		size_t len = strlen(out);
		snprintf(out + len, n - len, "%s:%s,", PQgetvalue(r, i, 0),
		         PQgetvalue(r, i, 1));
	}
	PQclear(r);
}

struct poisoner {
	struct rxh *h;
	const struct rxh_world *w;
	long status;
};

static void *place_poison(void *arg)
{
	struct poisoner *p = arg;
	/* the best ask, large: the buys that come next trade with it, in
	 * the books, until its batch fails */
	p->status = place(p->h, p->w->trader_token, p->w->node_a, "sell",
	                  256 * 64, 100000, "poison");
	return NULL;
}

/* Both ways of keeping batches under way (batch_overlap): by default one
 * batch at a time; with overlap the next one opens while one commits. */
static const char *const overlap_flags[] = {"", "--batch_overlap=1"};

/* The most writer transactions seen open and waiting at once within ms
 * milliseconds: with batch_overlap, a batch whose INSERTs ran while the one
 * before it commits waits in its transaction for the rest of it (its
 * pipeline has no sync yet, so the backend stays 'active', reading). */
static long max_waiting_batches(const char *conninfo, int ms)
{
	PGconn *c = testdb_connect(conninfo);
	long most = 0;
	for (int t = 0; t < ms; t += 10) {
		long n = testdb_scalar(
		    c, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
		       "current_database() AND state = 'active' AND "
		       "wait_event = 'ClientRead' AND backend_xid IS NOT NULL");
		if (n > most)
			most = n;
		usleep(10000);
	}
	PQfinish(c);
	return most;
}

START_TEST(failed_batch_fails_the_batches_after_it)
{
	struct rxh h;
	struct rxh_world w;
	pthread_t th[PLACERS];
	static struct placer pl[PLACERS];
	bool overlap = _i == 1;
	rxh_start(&h, "ramex_t_writer_fail", overlap_flags[_i]);
	rxh_world(&h, &w);
	/* PostgreSQL refuses one order, after a second: meanwhile the orders
	 * that keep coming gather into the next batch (with batch_overlap,
	 * open it and gather the one after) */
	sql(&h, "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS "
	        "$$ BEGIN IF NEW.client_order_id = 'poison' THEN PERFORM "
	        "pg_sleep(1); RAISE EXCEPTION 'poisoned order'; END IF; "
	        "RETURN NEW; END $$");
	sql(&h, "CREATE TRIGGER poison BEFORE INSERT ON orders FOR EACH ROW "
	        "EXECUTE FUNCTION poison()");

	pthread_t pt;
	struct poisoner po = {&h, &w, 0};
	pthread_create(&pt, NULL, place_poison, &po);
	usleep(200000); /* the poisoned order goes first, alone */
	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){.h = &h, .w = &w, .i = i};
		pthread_create(&th[i], NULL, place_many, &pl[i]);
	}
	/* while the poisoned batch sleeps, the orders that came meanwhile
	 * are open in a second transaction only with batch_overlap */
	long waiting = max_waiting_batches(h.conninfo, 500);
	ck_assert_msg(overlap ? waiting >= 1 : waiting == 0,
	              "batch_overlap %d: %ld batches waited open", overlap,
	              waiting);
	pthread_join(pt, NULL);
	for (int i = 0; i < PLACERS; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(po.status, 500);

	/* 201: in the database once; anything else: not there at all */
	PGconn *c = testdb_connect(h.conninfo);
	int failed = 0;
	for (int i = 0; i < PLACERS; i++)
		for (int k = 0; k < ORDERS; k++) {
			char q[160];
			snprintf(q, sizeof q,
			         "SELECT count(*) FROM orders WHERE "
			         "client_order_id = 'w-%d-%d'",
			         i, k);
			long n = testdb_scalar(c, q);
			long st = pl[i].status[k];
			ck_assert_msg(st == 201 || st == 500,
			              "order w-%d-%d: status %ld", i, k, st);
			ck_assert_msg(n == (st == 201),
			              "order w-%d-%d answered %ld, in the "
			              "database %ld times",
			              i, k, st, n);
			failed += st != 201;
		}
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id = 'poison'"),
	                 0);
	/* the orders that came during the poisoned batch's second were in
	 * the batches after it, and failed with it */
	ck_assert_msg(failed > 0, "no order failed with the poisoned batch");
	ck_assert_int_ge(rxh_log_count(&h, "batch not committed"), 2);
	/* every trade's orders are there (a trade of a rolled-back batch
	 * would name an order that is not) */
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM trades t WHERE NOT EXISTS "
	                     "(SELECT 1 FROM orders o WHERE o.id = "
	                     "t.taker_order_id) OR NOT EXISTS (SELECT 1 FROM "
	                     "orders o WHERE o.id = t.maker_order_id)"),
	    0);
	ck_assert_int_gt(testdb_scalar(c, "SELECT count(*) FROM trades"), 0);

	/* the books were rebuilt from the database: they show what it holds,
	 * level by level */
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets/spot/book?depth=200",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	char api[2][1024], db[2][1024];
	api_side(json_object_get(r.json, "bids"), api[0], sizeof api[0]);
	api_side(json_object_get(r.json, "asks"), api[1], sizeof api[1]);
	rxh_resp_free(&r);
	db_side(c, "buy", db[0], sizeof db[0]);
	db_side(c, "sell", db[1], sizeof db[1]);
	ck_assert_str_eq(api[0], db[0]);
	ck_assert_str_eq(api[1], db[1]);
	ck_assert_msg(api[0][0] || api[1][0], "nothing rests on the book");
	PQfinish(c);

	/* and it trades on: a crossing pair placed now trades */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, "after-sell"),
	                 201);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_b, "buy", 256, 102000,
	                       "after-buy"),
	                 201);
	rxh_stop(&h);
}
END_TEST

/* A GTD order expires on the writer's idle tick, in a transaction of its
 * own between batches; the batches after it must still commit (the tick
 * shares a batch's bookkeeping with them). */
START_TEST(gtd_expiry_then_orders_go_on)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct timespec now;
	char body[512];
	rxh_start(&h, "ramex_t_writer_gtd", "");
	rxh_world(&h, &w);
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t at =
	    (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + INT64_C(500000000);
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"buy\","
	         "\"pages\":256,\"price\":90000,\"tif\":\"gtd\","
	         "\"expires_ns\":%lld,\"client_order_id\":\"gtd-1\"}",
	         (long long)w.node_b, (long long)at);
	ck_assert_int_eq(
	    rxh_call(&h, "POST", "/v1/orders", w.trader_token, body, NULL, &r),
	    201);
	int64_t id = json_integer_value(
	    json_object_get(json_object_get(r.json, "order"), "id"));
	rxh_resp_free(&r);
	char q[160];
	snprintf(q, sizeof q,
	         "SELECT count(*) FROM orders WHERE id = %lld AND status = "
	         "'expired'",
	         (long long)id);
	long expired = 0;
	for (int i = 0; i < 100 && !expired; i++) {
		usleep(100000);
		expired = testdb_scalar_at(h.conninfo, q);
	}
	ck_assert_msg(expired == 1, "the GTD order did not expire");
	/* and then orders are placed, trade and commit as before */
	for (int k = 0; k < 3; k++) {
		char coid[32];
		snprintf(coid, sizeof coid, "after-gtd-%d", k);
		ck_assert_int_eq(
		    place(&h, w.trader_token, k % 2 ? w.node_b : w.node_a,
		          k % 2 ? "buy" : "sell", 256, 100000, coid),
		    201);
	}
	ck_assert_int_eq(testdb_scalar_at(h.conninfo,
	                                  "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id LIKE 'after-gtd-%'"),
	                 3);
	rxh_stop(&h);
}
END_TEST

/* --- many kinds of commands at once --------------------------------------- */

#define MIXERS 6
#define ROUNDS 30

struct mixer {
	struct rxh *h;
	const struct rxh_world *w;
	int i;
	int bad; /* answers that are not what any order of events allows */
	char why[256];
	volatile int *stop;
};

/* Rests orders, cancels and reduces them, and now and then sells into the
 * bids: fills of makers from earlier batches, cancels and reduces of
 * orders whose batch may not have committed yet, all UPDATEs of the close
 * part of a batch. */
static void *mix(void *arg)
{
	struct mixer *m = arg;
	for (int k = 0; k < ROUNDS; k++) {
		char body[512], path[64], coid[32];
		struct rxh_resp r;
		bool buy = (m->i + k) % 2;
		snprintf(coid, sizeof coid, "mix-%d-%d", m->i, k);
		snprintf(body, sizeof body,
		         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":"
		         "\"%s\",\"pages\":1024,\"price\":%d,"
		         "\"client_order_id\":\"%s\"}",
		         (long long)(buy ? m->w->node_b : m->w->node_a),
		         buy ? "buy" : "sell",
		         buy ? 90000 + 1000 * (k % 3) : 110000 + 1000 * (k % 3),
		         coid);
		long st = rxh_call(m->h, "POST", "/v1/orders",
		                   m->w->trader_token, body, NULL, &r);
		int64_t id = json_integer_value(
		    json_object_get(json_object_get(r.json, "order"), "id"));
		rxh_resp_free(&r);
		if (st != 201) {
			m->bad++;
			snprintf(m->why, sizeof m->why, "place %s: %ld", coid,
			         st);
			continue;
		}
		snprintf(path, sizeof path, "/v1/orders/%lld", (long long)id);
		if (k % 3 == 0) {
			st = rxh_call(m->h, "DELETE", path, m->w->trader_token,
			              NULL, NULL, &r);
		} else if (k % 3 == 1) {
			strcat(path, "/reduce");
			st = rxh_call(m->h, "POST", path, m->w->trader_token,
			              "{\"remaining\":256}", NULL, &r);
		} else {
			st = 200;
			memset(&r, 0, sizeof r);
		}
		rxh_resp_free(&r);
		/* 409: a sell below filled it first */
		if (st != 200 && st != 409) {
			m->bad++;
			snprintf(m->why, sizeof m->why, "%s %s: %ld",
			         k % 3 ? "reduce" : "cancel", coid, st);
		}
		if (k % 5 == 4) { /* into the bids */
			snprintf(body, sizeof body,
			         "{\"market\":\"spot\",\"account_id\":%lld,"
			         "\"side\":\"sell\",\"pages\":512,\"price\":"
			         "88000,\"tif\":\"ioc\",\"client_order_id\":"
			         "\"%s-x\"}",
			         (long long)m->w->node_a, coid);
			st = rxh_call(m->h, "POST", "/v1/orders",
			              m->w->trader_token, body, NULL, &r);
			rxh_resp_free(&r);
			if (st != 201) {
				m->bad++;
				snprintf(m->why, sizeof m->why,
				         "sell into the bids %s: %ld", coid,
				         st);
			}
		}
	}
	return NULL;
}

/* Reads the book the whole time: a read waits until no batch is in
 * flight, between the others. */
static void *read_book(void *arg)
{
	struct mixer *m = arg;
	while (!*m->stop) {
		struct rxh_resp r;
		long st = rxh_call(m->h, "GET", "/v1/markets/spot/book",
		                   m->w->trader_token, NULL, NULL, &r);
		rxh_resp_free(&r);
		if (st != 200) {
			m->bad++;
			snprintf(m->why, sizeof m->why, "book: %ld", st);
		}
		usleep(5000);
	}
	return NULL;
}

START_TEST(mixed_commands_keep_books_and_database_equal)
{
	struct rxh h;
	struct rxh_world w;
	pthread_t th[MIXERS + 1];
	static struct mixer mx[MIXERS + 1];
	volatile int stop = 0;
	rxh_start(&h, "ramex_t_writer_mix", overlap_flags[_i]);
	rxh_world(&h, &w);
	for (int i = 0; i <= MIXERS; i++) {
		mx[i] = (struct mixer){.h = &h, .w = &w, .i = i, .stop = &stop};
		pthread_create(&th[i], NULL, i < MIXERS ? mix : read_book,
		               &mx[i]);
	}
	for (int i = 0; i < MIXERS; i++)
		pthread_join(th[i], NULL);
	stop = 1;
	pthread_join(th[MIXERS], NULL);
	for (int i = 0; i <= MIXERS; i++)
		ck_assert_msg(mx[i].bad == 0, "%d unexpected answers, e.g. %s",
		              mx[i].bad, mx[i].why);

	/* every order's filled pages are its trades' */
	PGconn *c = testdb_connect(h.conninfo);
	ck_assert_int_gt(testdb_scalar(c, "SELECT count(*) FROM trades"), 0);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM orders o WHERE o.filled <> "
	                     "coalesce((SELECT sum(t.pages) FROM trades t "
	                     "WHERE t.taker_order_id = o.id OR "
	                     "t.maker_order_id = o.id), 0)"),
	    0);
	/* an order's state fits its pages */
	PGresult *bad = PQexec(
	    c, "SELECT id, status, pages, remaining, filled, tif FROM orders "
	       "WHERE (status = 'open' AND remaining = 0) OR (status = "
	       "'filled' AND remaining <> 0) OR filled + remaining > pages "
	       "LIMIT 1");
	ck_assert_int_eq(PQresultStatus(bad), PGRES_TUPLES_OK);
	ck_assert_msg(PQntuples(bad) == 0,
	              "order %s: %s, %s pages, %s remaining, %s filled, %s",
	              PQgetvalue(bad, 0, 0), PQgetvalue(bad, 0, 1),
	              PQgetvalue(bad, 0, 2), PQgetvalue(bad, 0, 3),
	              PQgetvalue(bad, 0, 4), PQgetvalue(bad, 0, 5));
	PQclear(bad);
	ck_assert_int_gt(
	    testdb_scalar(c, "SELECT count(*) FROM orders WHERE status = "
	                     "'cancelled' AND client_order_id LIKE 'mix-%'"),
	    0);
	ck_assert_int_gt(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "status = 'open' AND remaining = 256 "
	                                  "AND pages = 1024"),
	                 0);
	/* and the books are what the database says, level by level */
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets/spot/book?depth=200",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	char api[2][1024], db[2][1024];
	api_side(json_object_get(r.json, "bids"), api[0], sizeof api[0]);
	api_side(json_object_get(r.json, "asks"), api[1], sizeof api[1]);
	rxh_resp_free(&r);
	db_side(c, "buy", db[0], sizeof db[0]);
	db_side(c, "sell", db[1], sizeof db[1]);
	ck_assert_str_eq(api[0], db[0]);
	ck_assert_str_eq(api[1], db[1]);
	PQfinish(c);
	/* a restart rebuilds the same books */
	rxh_kill(&h, SIGTERM);
	rxh_restart(&h);
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets/spot/book?depth=200",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	char again[2][1024];
	api_side(json_object_get(r.json, "bids"), again[0], sizeof again[0]);
	api_side(json_object_get(r.json, "asks"), again[1], sizeof again[1]);
	rxh_resp_free(&r);
	ck_assert_str_eq(again[0], api[0]);
	ck_assert_str_eq(again[1], api[1]);
	rxh_stop(&h);
}
END_TEST

/* An order placed through h: its id, or minus the status when refused.
 * `market` spot or perm-2027; the trades' ids go to *trade (0: none). */
static int64_t place_id(struct rxh *h, const char *tok, const char *market,
                        int64_t acct, const char *side, int64_t price,
                        int64_t *trade)
{
	char body[256];
	struct rxh_resp r;
	snprintf(body, sizeof body,
	         "{\"market\":\"%s\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":%lld}",
	         market, (long long)acct, side, (long long)price);
	long st = rxh_call(h, "POST", "/v1/orders", tok, body, NULL, &r);
	int64_t id = -st;
	if (st == 201) {
		json_t *o = json_object_get(r.json, "order");
		json_t *t = json_array_get(json_object_get(r.json, "trades"), 0);
		id = json_integer_value(json_object_get(o, "id"));
		*trade = t ? json_integer_value(json_object_get(t, "trade_id"))
		           : 0;
	}
	rxh_resp_free(&r);
	return id;
}

/* Ids come from the database in blocks (0016_id_blocks.sql), not from
 * max(id) + 1 read at start: a second ramexd started on the database of a
 * running one hands out no id the first has handed out or will (before,
 * it started at the first's next id: its orders were refused, 500, a
 * unique violation), and a restart keeps ids going up. The two trade in
 * markets of their own (a serves spot, b perm-2027: exchange/owner.h). */
START_TEST(two_ramexd_on_one_database_share_no_id)
{
	struct rxh a, b;
	struct rxh_world w;
	int64_t ids[64], trades[64], t;
	int n = 0, nt = 0;
	rxh_start(&a, "ramex_t_writer_ids", "--markets=spot");
	rxh_world(&a, &w);
	ids[n++] = place_id(&a, w.trader_token, "spot", w.node_b, "buy",
	                    100000, &t);
	b = a;
	b.pid = 0;
	b.port = 0;
	snprintf(b.log, sizeof b.log, "%.500s-b", a.log);
	snprintf(b.extra, sizeof b.extra, "--markets=perm-2027");
	rxh_restart(&b);
	for (int k = 0; k < 6; k++) {
		/* a: a sell that trades with a's resting buy, and a new buy */
		ids[n++] = place_id(&a, w.trader_token, "spot", w.node_a,
		                    "sell", 100000, &t);
		trades[nt++] = t;
		ids[n++] = place_id(&a, w.trader_token, "spot", w.node_b,
		                    "buy", 100000, &t);
		/* b: an operator's perm buy and a node's sell that takes it */
		ids[n++] = place_id(&b, w.op_token, "perm-2027", w.op_account,
		                    "buy", 100000, &t);
		ids[n++] = place_id(&b, w.trader_token, "perm-2027", w.node_a,
		                    "sell", 100000, &t);
		trades[nt++] = t;
	}
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ids[i] > 0, "order %d refused: %lld", i,
		              (long long)-ids[i]);
		for (int j = 0; j < i; j++)
			ck_assert_msg(ids[i] != ids[j], "order id %lld twice",
			              (long long)ids[i]);
	}
	for (int i = 0; i < nt; i++) {
		ck_assert_msg(trades[i] > 0, "trade %d did not happen", i);
		for (int j = 0; j < i; j++)
			ck_assert_int_ne(trades[i], trades[j]);
	}
	rxh_stop(&b);
	/* a restart takes a new block: every id above those before */
	int64_t top = 0, ttop = 0;
	for (int i = 0; i < n; i++)
		top = ids[i] > top ? ids[i] : top;
	for (int i = 0; i < nt; i++)
		ttop = trades[i] > ttop ? trades[i] : ttop;
	rxh_stop(&a);
	rxh_restart(&a);
	int64_t after = place_id(&a, w.trader_token, "spot", w.node_a, "sell",
	                         100000, &t);
	ck_assert_msg(after > top, "order id %lld after a restart, %lld before",
	              (long long)after, (long long)top);
	ck_assert_msg(t > ttop, "trade id %lld after a restart, %lld before",
	              (long long)t, (long long)ttop);
	rxh_stop(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("writer");
	TCase *tc = tcase_create("writer");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, failed_batch_fails_the_batches_after_it, 0, 2);
	tcase_add_test(tc, gtd_expiry_then_orders_go_on);
	tcase_add_loop_test(tc, mixed_commands_keep_books_and_database_equal, 0,
	                    2);
	tcase_add_test(tc, two_ramexd_on_one_database_share_no_id);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
