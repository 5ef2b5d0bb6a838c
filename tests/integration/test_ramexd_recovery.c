/*
 * test_ramexd_recovery.c — a real ramexd on a real private PostgreSQL,
 * over loopback, through what it must survive: a restart that rebuilds
 * the books, kill -9 under load with every acknowledged order kept once,
 * retries that find their first answers after a restart, a database
 * without synchronous commit refused, a database that goes away and comes
 * back; and what operators watch: the event stream and the health
 * endpoint. Split from test_ramexd.c (issue #30); the shared helpers are
 * in ramexd_fixture.h.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tests/integration/ramexd_fixture.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static void book_text(struct rxh *h, const char *tok, char *out, size_t len)
{
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(h, "GET", "/v1/markets/spot/book?depth=50",
	                          tok, NULL, NULL, &r),
	                 200);
	json_object_del(r.json, "seq");
	char *s = json_dumps(r.json, JSON_SORT_KEYS | JSON_COMPACT);
	snprintf(out, len, "%s", s);
	free(s);
	rxh_resp_free(&r);
}

START_TEST(restart_rebuilds_books)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char before[8192], after[8192];
	rxh_start(&h, "ramex_t_rxd_restart", "");
	rxh_world(&h, &w);
	/* two sells at one price: a (first) then b; more levels around */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 512,
	                       105000, NULL, NULL, &r),
	                 201);
	int64_t first = order_id(&r);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_b, "sell", 512,
	                       105000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	for (int i = 0; i < 6; i++) {
		ck_assert_int_eq(
		    place(&h, w.trader_token, i % 2 ? w.node_a : w.node_b,
		          i < 3 ? "sell" : "buy", 256 * (i + 1),
		          i < 3 ? 110000 + 1000 * i : 90000 - 1000 * i, NULL,
		          NULL, &r),
		    201);
		rxh_resp_free(&r);
	}
	/* one reduced, keeps its place */
	ck_assert_int_eq(rxh_status(&h, "POST", "/v1/orders/1/reduce",
	                            w.trader_token, "{\"remaining\":256}",
	                            NULL),
	                 200);
	book_text(&h, w.trader_token, before, sizeof before);

	int st = rxh_kill(&h, SIGTERM);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	              "graceful stop exit status %d", st);
	rxh_restart(&h);
	book_text(&h, w.trader_token, after, sizeof after);
	ck_assert_str_eq(before, after);

	/* time priority survived: the operator's buy hits order 1 first */
	ck_assert_int_eq(place(&h, w.op_token, w.op_account, "buy", 256, 105000,
	                       NULL, NULL, &r),
	                 201);
	json_t *t = json_array_get(json_object_get(r.json, "trades"), 0);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(t, "maker_order_id")), first);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* --- kill -9 in the middle of a stream of orders ----------------------- */

#define KILL_THREADS 4
#define KILL_ORDERS  400

struct loader {
	struct rxh *h;
	struct rxh_world *w;
	int t;
	int sent;                /* orders tried */
	int status[KILL_ORDERS]; /* 0: no answer */
	int64_t id[KILL_ORDERS];
};

static void kill_body(struct loader *l, int i, char *body, size_t len)
{
	int buy = (i + l->t) % 2;
	snprintf(body, len,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":%d,\"client_order_id\":\"t%d-%d\"}",
	         (long long)(buy ? l->w->node_b : l->w->node_a),
	         buy ? "buy" : "sell", 100000 + (i % 5) * 1000, l->t, i);
}

static void *load(void *arg)
{
	struct loader *l = arg;
	char body[256];
	for (int i = 0; i < KILL_ORDERS; i++) {
		struct rxh_resp r;
		kill_body(l, i, body, sizeof body);
		l->sent = i + 1;
		long s = rxh_call(l->h, "POST", "/v1/orders",
		                  l->w->trader_token, body, NULL, &r);
		if (s == 201) {
			l->status[i] = 201;
			l->id[i] = order_id(&r);
		}
		rxh_resp_free(&r);
		if (s < 0)
			break; /* the server is gone */
	}
	return NULL;
}

START_TEST(kill9_keeps_every_acknowledged_order_once)
{
	struct rxh h;
	struct rxh_world w;
	static struct loader l[KILL_THREADS];
	pthread_t th[KILL_THREADS];
	rxh_start(&h, "ramex_t_rxd_kill9", "");
	rxh_world(&h, &w);
	for (int t = 0; t < KILL_THREADS; t++) {
		memset(&l[t], 0, sizeof l[t]);
		l[t].h = &h, l[t].w = &w, l[t].t = t;
		pthread_create(&th[t], NULL, load, &l[t]);
	}
	/* wait until some orders are in, then kill without warning */
	for (int i = 0; i < 400; i++) {
		int acked = 0;
		for (int t = 0; t < KILL_THREADS; t++)
			for (int k = 0; k < l[t].sent; k++)
				acked += l[t].status[k] == 201;
		if (acked > 100)
			break;
		usleep(20000);
	}
	int st = rxh_kill(&h, SIGKILL);
	ck_assert(WIFSIGNALED(st));
	for (int t = 0; t < KILL_THREADS; t++)
		pthread_join(th[t], NULL);

	rxh_restart(&h);
	PGconn *c = testdb_connect(h.conninfo);
	int acked = 0;
	for (int t = 0; t < KILL_THREADS; t++) {
		for (int k = 0; k < l[t].sent; k++) {
			if (l[t].status[k] != 201)
				continue;
			acked++;
			char sql[200];
			snprintf(sql, sizeof sql,
			         "SELECT count(*) FROM orders WHERE "
			         "client_order_id = 't%d-%d' AND id = %lld",
			         t, k, (long long)l[t].id[k]);
			ck_assert_msg(testdb_scalar(c, sql) == 1,
			              "acknowledged order t%d-%d is missing", t,
			              k);
		}
	}
	ck_assert_int_gt(acked, 0);
	/* Retry everything that was sent: acknowledged ones answer with
	 * their first id, the others now go in exactly once. */
	for (int t = 0; t < KILL_THREADS; t++) {
		for (int k = 0; k < l[t].sent; k++) {
			char body[256];
			struct rxh_resp r;
			kill_body(&l[t], k, body, sizeof body);
			long s = rxh_call(&h, "POST", "/v1/orders",
			                  w.trader_token, body, NULL, &r);
			ck_assert_msg(s == 201, "retry t%d-%d: %ld %s", t, k, s,
			              r.body);
			if (l[t].status[k] == 201)
				ck_assert_int_eq(order_id(&r), l[t].id[k]);
			rxh_resp_free(&r);
		}
	}
	long sent = 0;
	for (int t = 0; t < KILL_THREADS; t++)
		sent += l[t].sent;
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), sent);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(DISTINCT client_order_id) FROM "
	                     "orders"),
	    sent);
	/* every trade's contract is there, and the book equals the rows */
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM trades t LEFT JOIN "
	                     "contracts c ON c.trade_id = t.id WHERE c.id IS "
	                     "NULL"),
	    0);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM orders WHERE filled <> "
	                     "(SELECT coalesce(sum(pages), 0) FROM trades t "
	                     "WHERE t.taker_order_id = orders.id OR "
	                     "t.maker_order_id = orders.id)"),
	    0);
	long open_pages = testdb_scalar(
	    c, "SELECT coalesce(sum(remaining), 0) FROM orders WHERE status "
	       "= 'open'");
	PQfinish(c);
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets/spot/book?depth=200",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	long book_pages = 0;
	for (int s = 0; s < 2; s++) {
		size_t i;
		json_t *lv;
		json_array_foreach(json_object_get(r.json, s ? "asks" : "bids"),
		                   i, lv) book_pages +=
		    json_integer_value(json_object_get(lv, "pages"));
	}
	rxh_resp_free(&r);
	ck_assert_int_eq(book_pages, open_pages);
	rxh_stop(&h);
}
END_TEST

/* A counter of /metrics. */
static long metric(struct rxh *h, const char *name)
{
	struct rxh_resp r;
	char pat[96];
	ck_assert_int_eq(rxh_call(h, "GET", "/metrics", NULL, NULL, NULL, &r),
	                 200);
	snprintf(pat, sizeof pat, "\n%s ", name);
	const char *p = strstr(r.body, pat);
	ck_assert_msg(p != NULL, "no %s in /metrics", name);
	long v = strtol(p + strlen(pat), NULL, 10);
	rxh_resp_free(&r);
	return v;
}

/* Waits until the writer's key filter holds the keys of the database's
 * history (its loader thread runs beside the writer). */
static void wait_keys_loaded(struct rxh *h)
{
	for (int i = 0; i < 100; i++) {
		if (metric(h, "ramex_key_filter_loaded") == 1)
			return;
		usleep(50000);
	}
	ck_abort_msg("the key filter was not loaded in 5 s");
}

/* The writer looks up only keys that its filter of the keys in the
 * database may hold (exchange/core/keyfilter.h), and fills that filter from
 * the database when it starts (beside the writer, which looks every key up
 * until then): so after a restart every kind of key must
 * still find its first answer, a stored answer (Idempotency-Key), a stored
 * refusal of a client order id and a placed order's client order id; and a
 * fresh key must go in without a lookup. */
START_TEST(retries_after_restart_find_their_first_answers)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r[3], again;
	char buf[16];
	rxh_start(&h, "ramex_t_rxd_known", "");
	rxh_world(&h, &w);
	wait_keys_loaded(&h);
	long filtered = metric(&h, "ramex_idem_keys_filtered_total");
	long looked = metric(&h, "ramex_idem_keys_looked_up_total");
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, NULL, "Idempotency-Key: kr-1", &r[0]),
	                 201);
	/* fresh keys: the filter knew they were new, nothing looked up */
	ck_assert_int_eq(metric(&h, "ramex_idem_keys_filtered_total"),
	                 filtered + 1);
	ck_assert_int_eq(metric(&h, "ramex_idem_keys_looked_up_total"), looked);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 100,
	                       100000, ",\"client_order_id\":\"qr-1\"", NULL,
	                       &r[1]),
	                 422); /* not on the lot: the refusal is stored */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       101000, ",\"client_order_id\":\"pr-1\"", NULL,
	                       &r[2]),
	                 201);
	ck_assert_int_eq(metric(&h, "ramex_idem_keys_filtered_total"),
	                 filtered + 3);
	ck_assert_int_eq(metric(&h, "ramex_key_filter_keys"), 3);

	ck_assert(WIFSIGNALED(rxh_kill(&h, SIGKILL)));
	rxh_restart(&h);
	wait_keys_loaded(&h);
	ck_assert_int_eq(metric(&h, "ramex_key_filter_keys"), 3);
	static const char *const more[3] = {NULL,
	                                    ",\"client_order_id\":\"qr-1\"",
	                                    ",\"client_order_id\":\"pr-1\""};
	static const int pages[3] = {256, 100, 256},
	                 price[3] = {100000, 100000, 101000};
	for (int i = 0; i < 3; i++) {
		long st = place(&h, w.trader_token, w.node_a, "sell", pages[i],
		                price[i], more[i],
		                i ? NULL : "Idempotency-Key: kr-1", &again);
		ck_assert_int_eq(st, r[i].status);
		ck_assert_str_eq(again.body, r[i].body);
		ck_assert_ptr_nonnull(
		    rxh_header(&again, "Idempotent-Replayed", buf, sizeof buf));
		rxh_resp_free(&again);
		rxh_resp_free(&r[i]);
	}
	ck_assert_int_eq(metric(&h, "ramex_idem_keys_looked_up_total"), 3);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM orders"), 2);
	rxh_stop(&h);
}
END_TEST

START_TEST(refuses_database_without_sync)
{
	char bin[512], cmd[1024];
	const char *conninfo = testdb_create("ramex_t_rxd_nosync");
	PGconn *c = testdb_connect(conninfo);
	PQclear(PQexec(c, "ALTER DATABASE ramex_t_rxd_nosync SET "
	                  "synchronous_commit = off"));
	PQfinish(c);
	snprintf(bin, sizeof bin, "%s/san/bin/ramexd",
	         getenv("RAMEX_BUILD") ? getenv("RAMEX_BUILD") : "build");
	snprintf(cmd, sizeof cmd,
	         "ASAN_OPTIONS=detect_leaks=0 %s --db='%s' "
	         "--listen=127.0.0.1:0 2>&1",
	         bin, conninfo);
	FILE *p = popen(cmd, "r");
	char out[8192] = "";
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	int st = pclose(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0,
	              "ramexd started on a database without sync: %s", out);
	ck_assert_msg(strstr(out, "synchronous_commit=off"), "%s", out);
}
END_TEST

/* --- the event stream ----------------------------------------------------- */

START_TEST(events_reach_the_right_subscribers)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct rxh_sse mine = {0}, other = {0}, op = {0};
	pthread_t t1, t2, t3;
	rxh_start(&h, "ramex_t_rxd_sse", "--sse_keepalive_s=1");
	rxh_world(&h, &w);
	mine.h = other.h = op.h = &h;
	mine.token = w.trader_token; /* team of node a */
	mine.until = other.until = op.until = "event: contract";
	other.token = w.trader2_token; /* another team */
	op.token = w.op_token;
	pthread_create(&t1, NULL, rxh_sse_run, &mine);
	pthread_create(&t2, NULL, rxh_sse_run, &other);
	pthread_create(&t3, NULL, rxh_sse_run, &op);
	for (int i = 0; i < 200 && !(__atomic_load_n(&mine.connected, 0) &&
	                             __atomic_load_n(&other.connected, 0) &&
	                             __atomic_load_n(&op.connected, 0));
	     i++)
		usleep(20000);
	/* an order of node a that a person closes with a note: its team's
	 * trader sees it, the operator does not (GET /v1/orders does not
	 * show it another account's order either), though it sees the
	 * fill and contract below */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       900000, NULL, NULL, &r),
	                 201);
	char path[64];
	snprintf(path, sizeof path, "/v1/orders/%lld",
	         (long long)json_integer_value(json_object_get(
	             json_object_get(r.json, "order"), "id")));
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "DELETE", path, w.trader_token,
	                          "{\"note\":\"kept-for-the-team\"}", NULL, &r),
	                 200);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.op_token, w.op_account, "buy", 256, 100000,
	                       NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	pthread_join(t1, NULL);
	pthread_join(t3, NULL);
	ck_assert_msg(strstr(mine.buf, "event: fill"), "%s", mine.buf);
	ck_assert_msg(strstr(mine.buf, "event: contract"), "%s", mine.buf);
	ck_assert_msg(strstr(mine.buf, "kept-for-the-team"), "%s", mine.buf);
	ck_assert_msg(strstr(op.buf, "event: contract"), "%s", op.buf);
	ck_assert_msg(!strstr(op.buf, "kept-for-the-team"), "%s", op.buf);
	/* the other team's trader sees keep-alives, never this fill */
	sleep(2);
	rxh_stop(&h); /* ends the streams */
	pthread_join(t2, NULL);
	ck_assert_msg(strstr(other.buf, "keep-alive"), "%s", other.buf);
	ck_assert_msg(!strstr(other.buf, "event: fill"), "%s", other.buf);
}
END_TEST

/* The id of the last event of `type` in a stream's text, or -1. */
static long long last_id_of(const char *text, const char *type)
{
	long long id = -1, cur = -1;
	char want[48];
	snprintf(want, sizeof want, "event: %s\n", type);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p += !!p) {
		if (strncmp(p, "id: ", 4) == 0)
			cur = atoll(p + 4);
		else if (strncmp(p, want, strlen(want)) == 0)
			id = cur;
	}
	return id;
}

/* A lone ramexd keeps its events in memory: after a restart, a stream
 * resumed with a Last-Event-ID of the run before is told that what came
 * after it is not held (an overflow event, first), and no event of the
 * new run has an id the old run gave. The ids began at 1 again at every
 * start: the resumed stream got the new run's events as if they followed
 * its id, with no word of the events it missed across the restart (found
 * from outside: a fill's id 2 before a kill -9, and again after it). */
START_TEST(events_resumed_across_a_restart_say_what_is_lost)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct rxh_sse first = {0};
	pthread_t t;
	rxh_start(&h, "ramex_t_rxd_sse_restart", "");
	rxh_world(&h, &w);
	first.h = &h;
	first.token = w.trader_token;
	first.until = "event: contract";
	pthread_create(&t, NULL, rxh_sse_run, &first);
	for (int i = 0; i < 200 && !__atomic_load_n(&first.connected, 0); i++)
		usleep(20000);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.op_token, w.op_account, "buy", 256, 100000,
	                       NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	pthread_join(t, NULL);
	long long seen = last_id_of(first.buf, "fill");
	ck_assert_msg(seen > 0, "no fill: %s", first.buf);

	rxh_kill(&h, SIGKILL);
	rxh_restart(&h);
	int fd = rxh_dial(h.port);
	ck_assert_int_ge(fd, 0);
	char rq[512];
	int n =
	    snprintf(rq, sizeof rq,
	             "GET /v1/events HTTP/1.1\r\nHost: t\r\n"
	             "Authorization: Bearer %s\r\nLast-Event-ID: %lld\r\n\r\n",
	             w.trader_token, seen);
	ck_assert(write(fd, rq, (size_t)n) == n);
	usleep(300000); /* subscribed before the trade below */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.op_token, w.op_account, "buy", 256, 100000,
	                       NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	static char buf[32768];
	size_t got = 0;
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	while (got < sizeof buf - 1 && !strstr(buf, "event: fill")) {
		ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		buf[got] = 0;
	}
	close(fd);
	const char *over = strstr(buf, "event: overflow");
	const char *fill = strstr(buf, "event: fill");
	ck_assert_msg(fill, "no fill after the restart: %s", buf);
	ck_assert_msg(over && over < fill,
	              "no overflow before the new run's events: %s", buf);
	ck_assert_msg(last_id_of(buf, "fill") > seen,
	              "the new run's fill has id %lld, the old run's %lld: %s",
	              last_id_of(buf, "fill"), seen, buf);
	rxh_stop(&h);
}
END_TEST

START_TEST(database_away_gives_503_then_recovers)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char buf[16];
	rxh_start(&h, "ramex_t_rxd_dbdown", "");
	rxh_world(&h, &w);
	PGconn *c = testdb_connect("dbname=postgres");
	PQclear(PQexec(c, "ALTER DATABASE ramex_t_rxd_dbdown ALLOW_CONNECTIONS "
	                  "false"));
	PQclear(PQexec(c, "SELECT pg_terminate_backend(pid) FROM "
	                  "pg_stat_activity WHERE datname = "
	                  "'ramex_t_rxd_dbdown'"));
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, ",\"client_order_id\":\"d-1\"", NULL,
	                       &r),
	                 503);
	ck_assert_ptr_nonnull(rxh_header(&r, "Retry-After", buf, sizeof buf));
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_status(&h, "GET", "/readyz", NULL, NULL, NULL),
	                 503);
	ck_assert_int_eq(
	    rxh_status(&h, "GET", "/v1/orders", w.trader_token, NULL, NULL),
	    503);

	PQclear(PQexec(c, "ALTER DATABASE ramex_t_rxd_dbdown ALLOW_CONNECTIONS "
	                  "true"));
	PQfinish(c);
	long s = 0;
	for (int i = 0; i < 100 && s != 201; i++) {
		s = place(&h, w.trader_token, w.node_a, "sell", 256, 100000,
		          ",\"client_order_id\":\"d-1\"", NULL, &r);
		rxh_resp_free(&r);
		if (s != 201)
			usleep(100000);
	}
	ck_assert_int_eq(s, 201);
	ck_assert_int_eq(rxh_status(&h, "GET", "/readyz", NULL, NULL, NULL),
	                 200);
	ck_assert_int_eq(count(&h, "SELECT count(*) FROM orders"), 1);
	rxh_stop(&h);
}
END_TEST

START_TEST(health_metrics_and_limits)
{
	struct rxh h;
	struct rxh_resp r;
	rxh_start(&h, "ramex_t_rxd_metrics", "");
	ck_assert_int_eq(rxh_status(&h, "GET", "/healthz", NULL, NULL, NULL),
	                 200);
	ck_assert_int_eq(rxh_call(&h, "GET", "/nowhere", NULL, NULL, NULL, &r),
	                 404);
	ck_assert_ptr_nonnull(r.json);
	ck_assert_int_eq(rxh_int(&r, "status"), 404);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "PATCH", "/v1/orders", h.admin, NULL, NULL, &r), 405);
	char allow[64];
	ck_assert_ptr_nonnull(rxh_header(&r, "Allow", allow, sizeof allow));
	ck_assert_ptr_nonnull(strstr(allow, "POST"));
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/metrics", NULL, NULL, NULL, &r),
	                 200);
	ck_assert_ptr_nonnull(strstr(r.body, "ramex_http_requests_total{"));
	ck_assert_ptr_nonnull(strstr(r.body, "ramex_database_up 1"));
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* A market stored with limits its book cannot hold (a price grid past
 * BOOK_MAX_TICKS: a market made by an older version, or by hand) stopped
 * ramexd at start ("could not rebuild the books"), every market with it.
 * It starts, names that market in the log with what to do, refuses its
 * orders and book with a problem naming it and the fix, serves the
 * others, and serves it once its limits are fixed. Limits changed under
 * an open order hold it too. */
START_TEST(a_market_without_a_book_is_held_not_fatal)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	rxh_start(&h, "ramex_t_rxd_held", "");
	rxh_world(&h, &w);
	/* tick 1000 from 0 to 8e9: 8 000 001 ticks */
	testdb_run(h.conninfo,
	           "INSERT INTO markets (name, product, term_end, tick, lot, "
	           "min_pages, max_pages, price_min, price_max, "
	           "notice_period_s, breach_penalty, delivery_deadline_s) "
	           "VALUES ('perm-2150', 'perm', '2151-01-01', 1000, 256, 256, "
	           "1048576, 0, 8000000000, 0, 0, 600)");
	ck_assert_int_eq(rxh_kill(&h, SIGTERM), 0);
	rxh_restart(&h);
	ck_assert_int_eq(rxh_log_count(&h, "market held: its book cannot be "
	                                   "built"),
	                 1);
	ck_assert_int_eq(rxh_log_count(&h, "market=perm-2150"), 1);
	const char *sell =
	    "{\"market\":\"perm-2150\",\"account_id\":%lld,\"side\":\"sell\","
	    "\"pages\":256,\"price\":110000}";
	char body[256];
	snprintf(body, sizeof body, sell, (long long)w.node_a);
	long st =
	    rxh_call(&h, "POST", "/v1/orders", w.trader_token, body, NULL, &r);
	ck_assert_msg(st == 409, "%ld %s", st, r.body);
	ck_assert(rxh_is_problem(&r, "urn:ramex:problem:market-held"));
	const char *d = json_string_value(json_object_get(r.json, "detail"));
	ck_assert_msg(d && strstr(d, "perm-2150") && strstr(d, "tick") &&
	                  strstr(d, "UPDATE markets"),
	              "%s", r.body);
	rxh_resp_free(&r);
	st = rxh_call(&h, "GET", "/v1/markets/perm-2150/book", w.trader_token,
	              NULL, NULL, &r);
	ck_assert_msg(st == 409 &&
	                  rxh_is_problem(&r, "urn:ramex:problem:market-held"),
	              "%ld %s", st, r.body);
	rxh_resp_free(&r);
	/* the other markets trade */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_a, "sell", 256,
	                       100000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_status(&h, "GET", "/v1/markets/spot/book",
	                            w.trader_token, NULL, NULL),
	                 200);
	/* fixed as the log says: served after a restart */
	testdb_run(h.conninfo, "UPDATE markets SET tick = 10000 WHERE name = "
	                       "'perm-2150'");
	ck_assert_int_eq(rxh_kill(&h, SIGTERM), 0);
	rxh_restart(&h);
	st = rxh_call(&h, "POST", "/v1/orders", w.trader_token, body, NULL, &r);
	ck_assert_msg(st == 201, "%ld %s", st, r.body);
	int64_t id = order_id(&r);
	rxh_resp_free(&r);
	/* limits changed under an open order (110 000 is off a 20 000
	 * grid): held again, and so is the cancel of that order */
	testdb_run(h.conninfo, "UPDATE markets SET tick = 20000 WHERE name = "
	                       "'perm-2150'");
	ck_assert_int_eq(rxh_kill(&h, SIGTERM), 0);
	rxh_restart(&h);
	ck_assert_int_eq(rxh_log_count(&h, "market held: its book cannot be "
	                                   "built"),
	                 2);
	char path[64];
	snprintf(path, sizeof path, "/v1/orders/%lld", (long long)id);
	st = rxh_call(&h, "DELETE", path, w.trader_token, NULL, NULL, &r);
	ck_assert_msg(st == 409 &&
	                  rxh_is_problem(&r, "urn:ramex:problem:market-held"),
	              "%ld %s", st, r.body);
	d = json_string_value(json_object_get(r.json, "detail"));
	ck_assert_msg(d && strstr(d, "open order"), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(place(&h, w.trader_token, w.node_b, "sell", 256,
	                       100000, NULL, NULL, &r),
	                 201);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ramexd_recovery");
	TCase *tc = tcase_create("ramexd_recovery");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, restart_rebuilds_books);
	tcase_add_test(tc, kill9_keeps_every_acknowledged_order_once);
	tcase_add_test(tc, retries_after_restart_find_their_first_answers);
	tcase_add_test(tc, refuses_database_without_sync);
	tcase_add_test(tc, events_reach_the_right_subscribers);
	tcase_add_test(tc, events_resumed_across_a_restart_say_what_is_lost);
	tcase_add_test(tc, database_away_gives_503_then_recovers);
	tcase_add_test(tc, health_metrics_and_limits);
	tcase_add_test(tc, a_market_without_a_book_is_held_not_fatal);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
