/*
 * test_failover.c — ramexd on a primary with a synchronous standby
 * (scripts/pg.sh standby): reports read off the standby, and a failover
 * under load that loses no acknowledged order.
 *
 * main() makes one pair for the whole suite, in the test output directory:
 * a primary and a streaming replica named in its synchronous_standby_names,
 * each on its own 127.0.0.1 port. The tests run in order, the failover
 * last, since it leaves only the promoted standby.
 *
 *   reports_read_off_the_replica: ramexd with read_db at the replica.
 *     Every report route answers from it (replay paused there, a new trade
 *     is in the primary's orders but not in the reports; resumed, it is),
 *     and every write still lands on the primary (a replica refuses any).
 *   failover_loses_no_acknowledged_order: ramexd with the multi-host
 *     conninfo (target_session_attrs=read-write); orders stream from a few
 *     clients of the test's own, each answer kept; the primary is killed
 *     (-9, with its processes), the standby promoted (pg_ctl promote);
 *     ramexd reconnects by itself, and every order answered 201 is in the
 *     promoted database exactly once, with the id it was answered with.
 *     Prints how long after the promotion the first order was acknowledged
 *     (docs/operations.md has the figures).
 */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static char pair_dir[512];
static int primary_port, standby_port;

static int pg_sh(const char *cmd)
{
	char line[1200];
	snprintf(line, sizeof line, "bash scripts/pg.sh %s '%s' >>'%s.log' 2>&1",
	         cmd, pair_dir, pair_dir);
	return system(line);
}

static int read_port(const char *path)
{
	int port = 0;
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &port) != 1)
			port = 0;
		fclose(f);
	}
	return port;
}

static const char *pguser(void)
{
	const char *u = getenv("PGUSER");
	return u && *u ? u : "postgres";
}

/* A conninfo of one server of the pair (port), database db. */
static const char *at(int port, const char *db)
{
	static __thread char s[256];
	snprintf(s, sizeof s, "host=127.0.0.1 port=%d user=%s dbname=%s", port,
	         pguser(), db);
	return s;
}

/* Makes database `db` on the primary (it replicates to the standby). */
static void make_db(const char *db)
{
	char sql[128];
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
	testdb_run(at(primary_port, "postgres"), sql);
	snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
	testdb_run(at(primary_port, "postgres"), sql);
}

static long get(struct rxh *h, const char *path, const char *tok,
                json_t **out)
{
	struct rxh_resp r;
	long st = rxh_call(h, "GET", path, tok, NULL, NULL, &r);
	if (out)
		*out = r.json ? json_incref(r.json) : NULL;
	rxh_resp_free(&r);
	return st;
}

/* POST /v1/orders; the order's id when 201 (0 else). */
static int64_t place(struct rxh *h, const struct rxh_world *w, bool sell,
                     int price, const char *coid, long *status)
{
	char body[256];
	struct rxh_resp r;
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":%d,\"client_order_id\":\"%s\"}",
	         (long long)(sell ? w->node_a : w->node_b),
	         sell ? "sell" : "buy", price, coid);
	*status = rxh_call(h, "POST", "/v1/orders", w->trader_token, body, NULL,
	                   &r);
	int64_t id = 0;
	if (*status == 201 && r.json)
		id = json_integer_value(
		    json_object_get(json_object_get(r.json, "order"), "id"));
	rxh_resp_free(&r);
	return id;
}

/* How many trades GET /v1/markets/spot/trades shows. */
static size_t trades_shown(struct rxh *h, const char *tok)
{
	json_t *j = NULL;
	ck_assert_int_eq(get(h, "/v1/markets/spot/trades?limit=1000", tok, &j),
	                 200);
	size_t n = json_array_size(json_object_get(j, "items"));
	json_decref(j);
	return n;
}

START_TEST(reports_read_off_the_replica)
{
	struct rxh h;
	struct rxh_world w;
	char extra[400];
	const char *db = "ramex_t_fo_reads";
	make_db(db);
	/* the URI form of a conninfo, as a flag has no spaces; named so that
	 * the replica's pg_stat_activity shows whose sessions they are */
	snprintf(extra, sizeof extra,
	         "--read_db=postgresql://%s@127.0.0.1:%d/%s?application_name="
	         "ramex_reports --billing_interval_s=0",
	         pguser(), standby_port, db);
	rxh_start_at(&h, db, at(primary_port, db), extra);
	rxh_world(&h, &w);

	/* a trade, and the reports once the replica has replayed it */
	long st;
	ck_assert(place(&h, &w, true, 100000, "r-s1", &st) > 0);
	ck_assert(place(&h, &w, false, 100000, "r-b1", &st) > 0);
	int64_t until = clock_mono_ms() + 10000;
	while (trades_shown(&h, w.trader_token) < 1 && clock_mono_ms() < until)
		usleep(20000);
	ck_assert_int_eq(trades_shown(&h, w.trader_token), 1);
	/* writes go to the primary: a billing run (admin), usage-free */
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(&h, "POST", "/v1/billing/run", h.admin, "{}",
	                          NULL, &r),
	                 200);
	rxh_resp_free(&r);
	/* every report route answers from the replica */
	static const char *const reports[] = {
	    "/v1/invoices",
	    "/v1/usage/export?from=2026-01&to=2027-12&format=json",
	    "/v1/billing/summary?from=2026-01&to=2027-12",
	    "/v1/ledger/check",
	    "/v1/usage/gaps",
	    "/v1/markets/spot/candles?interval=60",
	    "/v1/markets/spot/trades",
	};
	for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++) {
		json_t *j = NULL;
		st = get(&h, reports[i], w.finance_token, &j);
		ck_assert_msg(st == 200, "%s: %ld %s", reports[i], st,
		              j ? json_dumps(j, 0) : "");
		json_decref(j);
	}
	long on_replica = testdb_scalar_at(
	    at(standby_port, "postgres"),
	    "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
	    "'ramex_reports'");
	long on_primary = testdb_scalar_at(
	    at(primary_port, "postgres"),
	    "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
	    "'ramex_reports'");
	ck_assert_int_gt(on_replica, 0);
	ck_assert_int_eq(on_primary, 0);

	/* replay paused on the replica: a new trade is acknowledged (the
	 * standby has its WAL on disk) and in the primary's rows, but the
	 * reports, which read the replica, do not show it yet */
	testdb_scalar_at(at(standby_port, "postgres"),
	                 "SELECT pg_wal_replay_pause()");
	ck_assert(place(&h, &w, true, 100000, "r-s2", &st) > 0);
	ck_assert(place(&h, &w, false, 100000, "r-b2", &st) > 0);
	ck_assert_int_eq(testdb_scalar_at(at(primary_port, db),
	                                  "SELECT count(*) FROM trades"),
	                 2);
	usleep(300000);
	ck_assert_int_eq(trades_shown(&h, w.trader_token), 1);
	/* ... while what a caller reads back after its own write is the
	 * primary's: its orders */
	json_t *j = NULL;
	ck_assert_int_eq(get(&h, "/v1/orders?limit=100", w.trader_token, &j),
	                 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "items")), 4);
	json_decref(j);
	testdb_scalar_at(at(standby_port, "postgres"),
	                 "SELECT pg_wal_replay_resume()");
	until = clock_mono_ms() + 10000;
	while (trades_shown(&h, w.trader_token) < 2 && clock_mono_ms() < until)
		usleep(20000);
	ck_assert_int_eq(trades_shown(&h, w.trader_token), 2);
	rxh_stop(&h);

	/* read_db at the primary: its sessions are read-only all the same,
	 * and the reports still answer */
	snprintf(extra, sizeof extra,
	         "--read_db=postgresql://%s@127.0.0.1:%d/%s?application_name="
	         "ramex_reports_rw --billing_interval_s=0",
	         pguser(), primary_port, db);
	snprintf(h.extra, sizeof h.extra, "%s", extra);
	rxh_restart(&h);
	ck_assert_int_eq(trades_shown(&h, w.trader_token), 2);
	ck_assert_int_eq(get(&h, "/v1/ledger/check", w.finance_token, NULL),
	                 200);
	ck_assert_int_eq(
	    testdb_scalar_at(at(primary_port, "postgres"),
	                     "SELECT count(*) FROM pg_stat_activity WHERE "
	                     "application_name = 'ramex_reports_rw'"),
	    1);
	PGconn *c = testdb_connect(at(primary_port, db));
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 4);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* --- failover ----------------------------------------------------------- */

#define PLACERS 4
#define MAXREC  20000

struct rec {
	int64_t id;      /* the order's id when answered 201 */
	int64_t at_ms;   /* when the answer came */
	short status;
};

struct placer {
	struct rxh *h;
	const struct rxh_world *w;
	int i;
	volatile int *stop;
	int n;
	struct rec *r;
};

static void coid_of(char *out, size_t len, int i, int k)
{
	snprintf(out, len, "fo-%d-%d", i, k);
}

static void *place_stream(void *arg)
{
	struct placer *p = arg;
	for (int k = 0; k < MAXREC && !*p->stop; k++) {
		char coid[32];
		long st;
		coid_of(coid, sizeof coid, p->i, k);
		struct rec *r = &p->r[k];
		r->id = place(p->h, p->w, (p->i + k) % 2,
		              100000 + 1000 * ((p->i * 7 + k) % 3), coid, &st);
		r->status = (short)st;
		r->at_ms = clock_mono_ms();
		__atomic_store_n(&p->n, k + 1, __ATOMIC_RELEASE);
		if (st != 201)
			usleep(20000); /* as a client would, a little later */
	}
	return NULL;
}

static int acked(struct placer *pl, int64_t after_ms, int64_t *first_ms)
{
	int n = 0;
	*first_ms = INT64_MAX;
	for (int i = 0; i < PLACERS; i++) {
		int m = __atomic_load_n(&pl[i].n, __ATOMIC_ACQUIRE);
		for (int k = 0; k < m; k++)
			if (pl[i].r[k].status == 201 &&
			    pl[i].r[k].at_ms > after_ms) {
				n++;
				if (pl[i].r[k].at_ms < *first_ms)
					*first_ms = pl[i].r[k].at_ms;
			}
	}
	return n;
}

START_TEST(failover_loses_no_acknowledged_order)
{
	struct rxh h;
	struct rxh_world w;
	static struct placer pl[PLACERS];
	static struct rec recs[PLACERS][MAXREC];
	pthread_t th[PLACERS];
	volatile int stop = 0;
	char conninfo[256];
	const char *db = "ramex_t_fo";
	make_db(db);
	snprintf(conninfo, sizeof conninfo,
	         "host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=%s "
	         "target_session_attrs=read-write connect_timeout=2",
	         primary_port, standby_port, pguser(), db);
	rxh_start_at(&h, db, conninfo, "");
	rxh_world(&h, &w);

	int64_t t0 = clock_mono_ms(), first;
	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){
		    .h = &h, .w = &w, .i = i, .stop = &stop, .r = recs[i]};
		pthread_create(&th[i], NULL, place_stream, &pl[i]);
	}
	while (acked(pl, 0, &first) < 300 && clock_mono_ms() - t0 < 8000)
		usleep(20000);
	int before = acked(pl, 0, &first);
	ck_assert_int_gt(before, 0);

	int64_t t_kill = clock_mono_ms();
	ck_assert_int_eq(pg_sh("kill"), 0);
	usleep(300000);
	ck_assert_int_eq(pg_sh("promote"), 0);
	int64_t t_prom = clock_mono_ms();
	/* ramexd reconnects by itself: the first acknowledged order */
	while (acked(pl, t_prom, &first) == 0 &&
	       clock_mono_ms() - t_prom < 30000)
		usleep(5000);
	ck_assert_msg(acked(pl, t_prom, &first) > 0,
	              "no order acknowledged in 30 s after the promotion");
	int64_t first_ms = first - t_prom;
	/* and orders keep coming for a while */
	usleep(1000000);
	stop = 1;
	for (int i = 0; i < PLACERS; i++)
		pthread_join(th[i], NULL);

	/* every answer is 201 or 503 (database unavailable or outcome
	 * unknown); each 201 is in the promoted database exactly once */
	int ok = 0, unavailable = 0;
	PGconn *c = testdb_connect(at(standby_port, db));
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM (SELECT "
	                                  "client_order_id FROM orders GROUP "
	                                  "BY 1 HAVING count(*) > 1) d"),
	                 0);
	for (int i = 0; i < PLACERS; i++)
		for (int k = 0; k < pl[i].n; k++) {
			const struct rec *r = &pl[i].r[k];
			char coid[32], q[200];
			coid_of(coid, sizeof coid, i, k);
			ck_assert_msg(r->status == 201 || r->status == 503,
			              "%s answered %d", coid, r->status);
			if (r->status != 201) {
				unavailable++;
				continue;
			}
			ok++;
			snprintf(q, sizeof q,
			         "SELECT count(*) FROM orders WHERE id = %lld "
			         "AND client_order_id = '%s'",
			         (long long)r->id, coid);
			ck_assert_msg(testdb_scalar(c, q) == 1,
			              "%s was answered 201 as order %lld, but "
			              "the promoted database does not hold it",
			              coid, (long long)r->id);
		}
	PQfinish(c);
	fprintf(stderr,
	        "failover: %d orders acknowledged (%d before the kill), %d "
	        "answered 503; promoted %lld ms after the kill; first "
	        "order acknowledged %lld ms after the promotion\n",
	        ok, before, unavailable, (long long)(t_prom - t_kill),
	        (long long)first_ms);
	/* ramexd is ready again */
	ck_assert_int_eq(get(&h, "/readyz", NULL, NULL), 200);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	const char *out = getenv("RAMEX_TEST_OUTPUT");
	snprintf(pair_dir, sizeof pair_dir, "%s/failover-pg",
	         out && *out ? out : "var");
	char path[600];
	pg_sh("destroy");
	if (pg_sh("start") != 0 || pg_sh("standby") != 0) {
		fprintf(stderr, "could not make a primary and standby; see "
		                "%s.log\n",
		        pair_dir);
		pg_sh("destroy");
		return 1;
	}
	snprintf(path, sizeof path, "%s/port", pair_dir);
	primary_port = read_port(path);
	snprintf(path, sizeof path, "%s/standby/port", pair_dir);
	standby_port = read_port(path);

	Suite *s = suite_create("failover");
	TCase *tc = tcase_create("reads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, reports_read_off_the_replica);
	suite_add_tcase(s, tc);
	/* last: it leaves the promoted standby alone */
	tc = tcase_create("failover");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, failover_loses_no_acknowledged_order);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pg_sh("destroy");
	return failed ? 1 : 0;
}
