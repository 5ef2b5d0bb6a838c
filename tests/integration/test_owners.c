/*
 * test_owners.c — three ramexd on one database, each market served by one
 * of them at a time (exchange/owner.h, docs/operations.md "Several
 * instances").
 *
 *   a serves spot, b perm-2027, c everything nobody else serves (it takes
 *   perm-2028 at start). One test, in three parts, so that the instances
 *   start once:
 *
 *   1. routing: an order, a cancel and a book read sent to an instance
 *      that does not serve the market are answered 307 with the owner's
 *      Location, and followed there they are carried out once; a batch
 *      for markets of two instances is refused (409). The agent's client
 *      (node-agent/client.c, signed) and ramexctl follow the 307.
 *   2. fencing: b's lock session is ended behind its back (b looks at it
 *      only every 60 s), c takes perm-2027; an order b still takes for
 *      perm-2027 must not commit (503: its batch's fence fails), and
 *      followed to c it lands in c's book. Without the fence b commits it
 *      on its stale book and c's book differs from the database.
 *   3. takeover: orders stream to all three (following redirects, retried
 *      with their client_order_id); a is killed with -9; c takes spot
 *      within its poll interval and rebuilds its book. Every order
 *      answered 201 is in the database once with its id, no id is
 *      answered twice, and every book equals its open orders. Prints the
 *      takeover time (docs/operations.md has the figures).
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "node-agent/client.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static struct rxh inst[3]; /* a, b, c */
static volatile int alive[3];
static struct rxh_world w;
static const char *const markets[] = {"spot", "perm-2027", "perm-2028"};

/* One call to instance `entry` that follows the exchange's redirects (at
 * most 3); *hops says how many it followed. */
static long call_follow(int entry, const char *method, const char *path,
                        const char *tok, const char *body, struct rxh_resp *r,
                        int *hops)
{
	struct rxh h = inst[entry];
	*hops = 0;
	for (;;) {
		long st = rxh_call(&h, method, path, tok, body, NULL, r);
		if (st != 307 || *hops == 3)
			return st;
		char loc[512], rest[400];
		int port = 0;
		ck_assert_msg(rxh_header(r, "Location", loc, sizeof loc),
		              "307 without Location");
		ck_assert_msg(
		    sscanf(loc, "http://127.0.0.1:%d%399s", &port, rest) == 2,
		    "Location %s", loc);
		ck_assert_msg(strcmp(rest, path) == 0,
		              "Location %s does not keep the target %s", loc,
		              path);
		rxh_resp_free(r);
		h.port = port;
		(*hops)++;
	}
}

/* The order of client order id coid for market m, as the k-th of a
 * stream: sells by node a, buys by node b (spot) or the operator. */
static void order_body(char *out, size_t len, int m, bool sell, int price,
                       const char *coid)
{
	int64_t acct = sell ? w.node_a : m == 0 ? w.node_b : w.op_account;
	snprintf(out, len,
	         "{\"market\":\"%s\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":%d,\"client_order_id\":\"%s\"}",
	         markets[m], (long long)acct, sell ? "sell" : "buy", price,
	         coid);
}

static const char *order_token(int m, bool sell)
{
	return sell || m == 0 ? w.trader_token : w.op_token;
}

static int64_t order_id(const struct rxh_resp *r)
{
	return json_integer_value(
	    json_object_get(json_object_get(r->json, "order"), "id"));
}

/* The instance (0..2) whose port is `port`, -1 when none. */
static int by_port(int port)
{
	for (int i = 0; i < 3; i++)
		if (inst[i].port == port)
			return i;
	return -1;
}

/* Which instance market_owners names for market m ("" when none). */
static void owner_of(PGconn *c, int m, char *out, size_t len)
{
	char q[200];
	snprintf(q, sizeof q,
	         "SELECT coalesce((SELECT o.instance FROM market_owners o JOIN "
	         "markets k ON k.id = o.market_id WHERE k.name = '%s'), '')",
	         markets[m]);
	PGresult *r = PQexec(c, q);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(out, len, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

static void wait_owner(PGconn *c, int m, const char *who, int ms)
{
	char o[64] = "";
	int64_t until = clock_mono_ms() + ms;
	do {
		owner_of(c, m, o, sizeof o);
		if (strcmp(o, who) == 0)
			return;
		usleep(20000);
	} while (clock_mono_ms() < until);
	ck_abort_msg("%s is owned by '%s', not %s after %d ms", markets[m], o,
	             who, ms);
}

/* GET the book of market m (from any instance, following) and compare
 * every level with the open orders in the database. */
static void book_equals_db(PGconn *c, int m)
{
	struct rxh_resp r;
	char path[80];
	int hops;
	snprintf(path, sizeof path, "/v1/markets/%s/book?depth=200",
	         markets[m]);
	/* through c, whose table of owners is at most 100 ms old (b reads
	 * its once a minute: it may still send to a killed a) */
	ck_assert_int_eq(
	    call_follow(2, "GET", path, w.trader_token, NULL, &r, &hops), 200);
	char q[400];
	snprintf(
	    q, sizeof q,
	    "SELECT side, price, sum(remaining), count(*) FROM orders WHERE "
	    "status = 'open' AND market_id = (SELECT id FROM markets WHERE "
	    "name = '%s') GROUP BY 1, 2",
	    markets[m]);
	PGresult *d = PQexec(c, q);
	ck_assert_int_eq(PQresultStatus(d), PGRES_TUPLES_OK);
	int levels = 0;
	for (int s = 0; s < 2; s++) {
		json_t *side = json_object_get(r.json, s ? "asks" : "bids");
		ck_assert(json_is_array(side));
		for (size_t i = 0; i < json_array_size(side); i++) {
			json_t *l = json_array_get(side, i);
			int64_t price = json_integer_value(
			            json_object_get(l, "price")),
			        pages = json_integer_value(
			            json_object_get(l, "pages")),
			        n = json_integer_value(
			            json_object_get(l, "orders"));
			bool found = false;
			for (int k = 0; k < PQntuples(d) && !found; k++)
				found = strcmp(PQgetvalue(d, k, 0),
				               s ? "sell" : "buy") == 0 &&
				        atoll(PQgetvalue(d, k, 1)) == price &&
				        atoll(PQgetvalue(d, k, 2)) == pages &&
				        atoll(PQgetvalue(d, k, 3)) == n;
			ck_assert_msg(
			    found,
			    "%s: the book's %s level %lld x %lld (%lld "
			    "orders) is not the database's",
			    markets[m], s ? "ask" : "bid", (long long)price,
			    (long long)pages, (long long)n);
			levels++;
		}
	}
	ck_assert_msg(levels == PQntuples(d),
	              "%s: the book has %d levels, the database %d", markets[m],
	              levels, PQntuples(d));
	PQclear(d);
	rxh_resp_free(&r);
}

/* ramexctl (the sanitizer build when there is one) with argv against
 * instance e; its exit status. */
static int ramexctl(int e, const char *token, const char *const *args)
{
	char bin[512], url[64], tok[120];
	const char *b = getenv("RAMEX_BUILD");
	snprintf(bin, sizeof bin, "%s/san/bin/ramexctl", b && *b ? b : "build");
	if (access(bin, X_OK) != 0)
		snprintf(bin, sizeof bin, "%s/bin/ramexctl",
		         b && *b ? b : "build");
	snprintf(url, sizeof url, "RAMEX_URL=http://127.0.0.1:%d",
	         inst[e].port);
	snprintf(tok, sizeof tok, "RAMEX_TOKEN=%s", token);
	const char *argv[24] = {bin};
	int n = 1;
	for (; args[n - 1] && n < 23; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	char *const envp[] = {url, tok, "HOME=/nonexistent", NULL};
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		execve(bin, (char *const *)argv, envp);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* --- the stream of part 3 ------------------------------------------------ */

#define PLACERS 4
#define MAXREC  4000

struct rec {
	int64_t id, at_ms;
	short status;
	char m;
};

struct placer {
	int i;
	volatile int *stop;
	int n;
	struct rec *r;
};

static void *place_stream(void *arg)
{
	struct placer *p = arg;
	for (int k = 0; k < MAXREC && !*p->stop; k++) {
		char coid[32], body[300];
		struct rec *r = &p->r[k];
		int m = (p->i + k) % 3;
		bool sell = k % 2;
		snprintf(coid, sizeof coid, "st-%d-%d", p->i, k);
		order_body(body, sizeof body, m, sell,
		           100000 + 1000 * ((p->i * 7 + k) % 3), coid);
		r->m = (char)m;
		/* retried with its client order id until answered, as an
		 * agent does: at most 10 s */
		int64_t until = clock_mono_ms() + 10000;
		for (int t = 0;; t++) {
			int e = (p->i + k + t) % 3, hops;
			if (!__atomic_load_n(&alive[e], __ATOMIC_ACQUIRE))
				continue;
			struct rxh_resp rr;
			long st =
			    call_follow(e, "POST", "/v1/orders",
			                order_token(m, sell), body, &rr, &hops);
			r->status = (short)st;
			if (st == 201)
				r->id = order_id(&rr);
			rxh_resp_free(&rr);
			if (st == 201 || clock_mono_ms() > until ||
			    (st != 503 && st != -1))
				break;
			usleep(20000);
		}
		r->at_ms = clock_mono_ms();
		__atomic_store_n(&p->n, k + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

START_TEST(markets_owned_fenced_and_taken_over)
{
	struct rxh_resp r;
	char body[400];
	int hops;
	const char *db = "ramex_t_owners";
	rxh_start(&inst[0], db,
	          "--markets=spot --instance=a --own_poll_ms=100 "
	          "--billing_interval_s=0");
	rxh_world(&inst[0], &w);
	ck_assert_int_eq(
	    rxh_call(&inst[0], "POST", "/v1/markets", w.op_token,
	             "{\"name\":\"perm-2028\",\"tick\":1000,\"lot\":256,"
	             "\"min_pages\":256,\"max_pages\":1048576,\"price_min\":0,"
	             "\"price_max\":1000000000,\"notice_period_s\":0,"
	             "\"breach_penalty\":5000,\"delivery_deadline_s\":600}",
	             NULL, &r),
	    201);
	rxh_resp_free(&r);
	static const char *const extra[3] = {
	    NULL,
	    /* b looks at its lock session once a minute: part 2 needs it
	     * not to notice its loss by itself */
	    "--markets=perm-2027 --instance=b --own_poll_ms=60000 "
	    "--billing_interval_s=0",
	    "--markets=all --instance=c --own_poll_ms=100 "
	    "--billing_interval_s=0"};
	for (int i = 1; i < 3; i++) {
		inst[i] = inst[0];
		inst[i].pid = 0;
		snprintf(inst[i].log, sizeof inst[i].log, "%.500s-%c",
		         inst[0].log, 'a' + i);
		snprintf(inst[i].extra, sizeof inst[i].extra, "%s", extra[i]);
		rxh_restart(&inst[i]);
	}
	for (int i = 0; i < 3; i++)
		alive[i] = 1;
	PGconn *c = testdb_connect(inst[0].conninfo);
	wait_owner(c, 0, "a", 5000);
	wait_owner(c, 1, "b", 5000);
	wait_owner(c, 2, "c", 5000);

	/* every instance knows every owner: a market whose owner it has not
	 * read yet is 503 (and read at once) */
	for (int m = 0; m < 3; m++)
		for (int e = 0; e < 3; e++) {
			char path[80];
			long st;
			snprintf(path, sizeof path, "/v1/markets/%s/book",
			         markets[m]);
			int64_t until = clock_mono_ms() + 5000;
			while ((st = rxh_status(&inst[e], "GET", path,
			                        w.trader_token, NULL, NULL)) ==
			           503 &&
			       clock_mono_ms() < until)
				usleep(20000);
			ck_assert_int_eq(st, e == m ? 200 : 307);
		}

	/* 1. routing: each market's order sent to each instance */
	for (int m = 0; m < 3; m++)
		for (int e = 0; e < 3; e++) {
			char coid[32];
			snprintf(coid, sizeof coid, "route-%d-%d", m, e);
			order_body(body, sizeof body, m, true, 900000, coid);
			long st =
			    rxh_call(&inst[e], "POST", "/v1/orders",
			             order_token(m, true), body, NULL, &r);
			if (e == m) {
				ck_assert_int_eq(st, 201);
			} else {
				char loc[300];
				ck_assert_int_eq(st, 307);
				ck_assert(rxh_is_problem(
				    &r, "urn:ramex:problem:not-owner"));
				ck_assert(rxh_header(&r, "Location", loc,
				                     sizeof loc));
				int port = 0;
				sscanf(loc, "http://127.0.0.1:%d", &port);
				ck_assert_int_eq(by_port(port), m);
			}
			rxh_resp_free(&r);
			st = call_follow(e, "POST", "/v1/orders",
			                 order_token(m, true), body, &r, &hops);
			ck_assert_int_eq(st, 201);
			ck_assert_int_eq(hops, e == m ? 0 : 1);
			int64_t id = order_id(&r);
			rxh_resp_free(&r);
			/* placed once: its retry answers the same order */
			ck_assert_int_eq(
			    call_follow(2 - e, "POST", "/v1/orders",
			                order_token(m, true), body, &r, &hops),
			    e == m ? 201 : 201);
			ck_assert_int_eq(order_id(&r), id);
			rxh_resp_free(&r);
			/* a cancel sent to another instance finds its owner */
			if (e == 2) {
				char path[80];
				snprintf(path, sizeof path, "/v1/orders/%lld",
				         (long long)id);
				int other = (m + 1) % 3;
				long cs = rxh_call(&inst[other], "DELETE", path,
				                   order_token(m, true), NULL,
				                   NULL, &r);
				ck_assert_msg(cs == 307, "cancel at %c: %ld %s",
				              'a' + other, cs, r.body);
				rxh_resp_free(&r);
				ck_assert_int_eq(
				    call_follow(other, "DELETE", path,
				                order_token(m, true), NULL, &r,
				                &hops),
				    200);
				rxh_resp_free(&r);
			}
		}
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id LIKE 'route-%'"),
	                 9);
	/* the agent's client, pointed at c, places a spot sell (a's): it
	 * follows the 307, signed again for a */
	char url[64], err[256];
	snprintf(url, sizeof url, "http://127.0.0.1:%d", inst[2].port);
	struct client *cl =
	    client_new(url, w.key_a, w.secret_a, NULL, err, sizeof err);
	ck_assert_msg(cl, "%s", err);
	json_t *ob = json_pack("{s:s,s:s,s:i,s:i,s:s}", "market", "spot",
	                       "side", "sell", "pages", 256, "price", 910000,
	                       "client_order_id", "agent-1");
	struct client_resp cr;
	ck_assert_msg(client_call(cl, "POST", "/v1/orders", ob, "agent-1-key",
	                          &cr, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_msg(cr.status == 201, "the agent's order: %ld %s", cr.status,
	              cr.detail);
	client_resp_clear(&cr);
	json_decref(ob);
	client_free(cl);
	/* ramexctl, pointed at a, places a perm-2027 sell (b's) */
	char acct[24];
	snprintf(acct, sizeof acct, "%lld", (long long)w.node_a);
	const char *const ctl_args[] = {
	    "orders",    "place",   "--market", "perm-2027", "--side",
	    "sell",      "--pages", "256",      "--price",   "920000",
	    "--account", acct,      NULL};
	ck_assert_int_eq(ramexctl(0, w.trader_token, ctl_args), 0);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM orders o JOIN markets m ON "
	                     "m.id = o.market_id WHERE (m.name = 'spot' AND "
	                     "o.client_order_id = 'agent-1') OR (m.name = "
	                     "'perm-2027' AND o.price = 920000)"),
	    2);

	/* a batch for markets of two instances is refused whole */
	snprintf(body, sizeof body,
	         "{\"orders\":[{\"market\":\"spot\",\"account_id\":%lld,"
	         "\"side\":\"sell\",\"pages\":256,\"price\":900000},"
	         "{\"market\":\"perm-2027\",\"account_id\":%lld,\"side\":"
	         "\"sell\",\"pages\":256,\"price\":900000}]}",
	         (long long)w.node_a, (long long)w.node_a);
	ck_assert_int_eq(rxh_call(&inst[2], "POST", "/v1/orders/batch",
	                          w.trader_token, body, NULL, &r),
	                 409);
	rxh_resp_free(&r);
	for (int m = 0; m < 3; m++)
		book_equals_db(c, m);

	/* 2. fencing: b's lock session ends behind its back; c takes
	 * perm-2027; b's next batch for it must not commit */
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(pg_terminate_backend(pid)) FROM "
	                     "pg_locks WHERE locktype = 'advisory' AND classid "
	                     "= 1381518667 AND objid = (SELECT id FROM markets "
	                     "WHERE name = 'perm-2027') AND granted"),
	    1);
	wait_owner(c, 1, "c", 5000);
	order_body(body, sizeof body, 1, true, 800000, "fenced-1");
	long st = rxh_call(&inst[1], "POST", "/v1/orders", w.trader_token, body,
	                   NULL, &r);
	ck_assert_msg(st == 503 && rxh_is_problem(&r, "urn:ramex:problem:"
	                                              "market-unavailable"),
	              "b, fenced out of perm-2027, answered %ld %s", st,
	              r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&inst[1], "GET", "/metrics", NULL, NULL, NULL, &r), 200);
	ck_assert_msg(strstr(r.body, "\nramex_batches_fenced_total 1\n"),
	              "b's metrics: %s", r.body);
	rxh_resp_free(&r);
	/* the retry reaches c once b has read who owns it now */
	int64_t until = clock_mono_ms() + 5000;
	do {
		usleep(50000);
		st = call_follow(1, "POST", "/v1/orders", w.trader_token, body,
		                 &r, &hops);
		rxh_resp_free(&r);
	} while (st == 503 && clock_mono_ms() < until);
	ck_assert_int_eq(st, 201);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id = 'fenced-1'"),
	                 1);
	book_equals_db(c, 1);

	/* 3. takeover under load: a (spot) killed with -9 */
	static struct placer pl[PLACERS];
	static struct rec recs[PLACERS][MAXREC];
	pthread_t th[PLACERS];
	volatile int stop = 0;
	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){.i = i, .stop = &stop, .r = recs[i]};
		pthread_create(&th[i], NULL, place_stream, &pl[i]);
	}
	usleep(1500000);
	__atomic_store_n(&alive[0], 0, __ATOMIC_RELEASE);
	int64_t t_kill = clock_mono_ms();
	rxh_kill(&inst[0], SIGKILL);
	wait_owner(c, 0, "c", 10000);
	int64_t t_taken = clock_mono_ms();
	/* the first spot order acknowledged after the kill */
	int64_t first = INT64_MAX;
	until = clock_mono_ms() + 10000;
	while (first == INT64_MAX && clock_mono_ms() < until) {
		usleep(5000);
		for (int i = 0; i < PLACERS; i++) {
			int n = __atomic_load_n(&pl[i].n, __ATOMIC_ACQUIRE);
			for (int k = 0; k < n; k++)
				if (recs[i][k].m == 0 &&
				    recs[i][k].status == 201 &&
				    recs[i][k].at_ms > t_taken &&
				    recs[i][k].at_ms < first)
					first = recs[i][k].at_ms;
		}
	}
	usleep(1000000);
	stop = 1;
	for (int i = 0; i < PLACERS; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(first != INT64_MAX,
	              "no spot order acknowledged in 10 s after the takeover");

	/* every order acknowledged, once, with its id */
	int ok = 0, n = 0;
	for (int i = 0; i < PLACERS; i++)
		for (int k = 0; k < pl[i].n; k++) {
			const struct rec *x = &recs[i][k];
			char q[200];
			n++;
			ck_assert_msg(x->status == 201,
			              "st-%d-%d (%s) answered %d at last", i, k,
			              markets[(int)x->m], x->status);
			ok++;
			snprintf(q, sizeof q,
			         "SELECT count(*) FROM orders WHERE id = %lld "
			         "AND client_order_id = 'st-%d-%d'",
			         (long long)x->id, i, k);
			ck_assert_msg(
			    testdb_scalar(c, q) == 1,
			    "st-%d-%d answered 201 as order %lld, not "
			    "in the database",
			    i, k, (long long)x->id);
		}
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id LIKE 'st-%'"),
	                 n);
	/* no id answered for two orders (the table's key says the rest) */
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) - count(DISTINCT "
	                                  "client_order_id) FROM orders WHERE "
	                                  "client_order_id LIKE 'st-%'"),
	                 0);
	for (int m = 0; m < 3; m++)
		book_equals_db(c, m);
	fprintf(stderr,
	        "owners: %d orders acknowledged across 3 instances; spot "
	        "taken over %lld ms after kill -9 of its owner (poll 100 "
	        "ms), first spot order acknowledged %lld ms after the kill\n",
	        ok, (long long)(t_taken - t_kill), (long long)(first - t_kill));
	PQfinish(c);
	for (int i = 0; i < 3; i++)
		rxh_stop(&inst[i]);
}
END_TEST

/* A `markets` or `advertise_url` that cannot be used stops ramexd at
 * start, saying which (before it touches the database). */
START_TEST(bad_ownership_settings_stop_ramexd)
{
	static const char *const bad[][2] = {
	    {"--markets=spot,fish", "'fish' is not one"},
	    {"--markets=", "markets is empty"},
	    {"--markets=perm-27", "'perm-27' is not one"},
	    /* its term would end past the exchange's time range (2200),
	     * where a contract's nanoseconds and amounts run out */
	    {"--markets=spot,perm-2300", "'perm-2300' is not one"},
	    {"--advertise_url=10.0.0.5:8080", "advertise_url must start"},
	};
	const char *b = getenv("RAMEX_BUILD");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char cmd[1024], out[8192] = "";
		snprintf(cmd, sizeof cmd,
		         "ASAN_OPTIONS=detect_leaks=0 %s/san/bin/ramexd "
		         "--db='dbname=ramex_t_none host=/nonexistent' "
		         "--listen=127.0.0.1:0 '%s' 2>&1",
		         b && *b ? b : "build", bad[i][0]);
		FILE *p = popen(cmd, "r");
		size_t n = fread(out, 1, sizeof out - 1, p);
		out[n] = 0;
		int st = pclose(p);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0,
		              "%s: ramexd started: %s", bad[i][0], out);
		ck_assert_msg(strstr(out, bad[i][1]), "%s: %s", bad[i][0], out);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("owners");
	TCase *tc = tcase_create("owners");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, bad_ownership_settings_stop_ramexd);
	tcase_add_test(tc, markets_owned_fenced_and_taken_over);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
