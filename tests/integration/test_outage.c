/*
 * test_outage.c — PostgreSQL stopped under ramexd while orders stream in
 * (exchange/writer.c: a lost connection, an unknown COMMIT outcome, the
 * answers of an outage, /readyz).
 *
 * The test's own PostgreSQL (tests/run.sh, scripts/pg.sh) is stopped with
 * `pg_ctl stop -m immediate` in the middle of a stream of orders, at
 * different moments, and started again; and, to reach each step of the
 * writer's pipeline every time, ramexd's fault hook (RAMEX_WRITER_FAULT,
 * writer.c) breaks the writer's connection at a chosen step. What must
 * hold each time:
 *
 *   - every order gets an answer within a bound, and the writer thread
 *     does not burn a core while PostgreSQL is away;
 *   - every answer is 201, or 503 with the type its words say:
 *     database-unavailable (not carried out: the order is not in the
 *     database) or outcome-unknown (a retry with the same client order id
 *     or Idempotency-Key tells which); never a 500;
 *   - /readyz says 503 while PostgreSQL is away and 200 once it is back,
 *     and orders are placed again;
 *   - every outcome-unknown order, retried with its client order id or
 *     Idempotency-Key, is in the database exactly once afterwards, and the
 *     retry's answer is the committed one.
 *
 * This stops the PostgreSQL every integration suite shares, so every test
 * starts it first if a failed test before it left it stopped.
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "exchange/db.h"
#include "exchange/pgpipe.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

/* --- the test's PostgreSQL ------------------------------------------------ */

static void pg_stop_now(void)
{
	ck_assert_int_eq(testdb_pg_stop_now(), 0);
}

static void pg_start(void)
{
	ck_assert_msg(testdb_pg_start() == 0,
	              "could not start PostgreSQL again; see %s/log (after "
	              "make check: var/test-output/check-pg.log)",
	              getenv("PGHOST"));
}

/* CPU time (ms) of ramexd's writer thread, found by its name. */
static long writer_cpu_ms(pid_t pid)
{
	char dir[64], path[600], buf[1024];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	ck_assert_msg(d, "no %s", dir);
	struct dirent *e;
	long ms = -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool it = fgets(buf, sizeof buf, f) &&
		          strncmp(buf, "ramexd-writer", 13) == 0;
		fclose(f);
		if (!it)
			continue;
		snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = 0;
		/* utime and stime: fields 14 and 15, after the ")" of comm */
		char *p = strrchr(buf, ')');
		unsigned long ut = 0, st = 0;
		if (p && sscanf(p + 2,
		                "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
		                "%lu %lu",
		                &ut, &st) == 2)
			ms = (long)((ut + st) * 1000 / sysconf(_SC_CLK_TCK));
	}
	closedir(d);
	ck_assert_msg(ms >= 0, "no ramexd-writer thread in %d", (int)pid);
	return ms;
}

static long readyz(struct rxh *h)
{
	struct rxh_resp r;
	long st = rxh_call(h, "GET", "/readyz", NULL, NULL, NULL, &r);
	rxh_resp_free(&r);
	return st;
}

/* Waits up to ms for /readyz to answer `want`. */
static bool readyz_becomes(struct rxh *h, long want, int ms)
{
	int64_t until = clock_mono_ms() + ms;
	do {
		if (readyz(h) == want)
			return true;
		usleep(50000);
	} while (clock_mono_ms() < until);
	return false;
}

/* --- a stream of orders ----------------------------------------------------- */

#define PLACERS 6
#define MAXREC  4000

struct rec {
	char coid[40]; /* its client order id, or its Idempotency-Key */
	bool by_key;   /* placed with an Idempotency-Key, no client order id */
	char body[320];
	long status;
	char type[64];
	bool replayed; /* Idempotent-Replayed: true */
	int64_t took_ms;
};

struct placer {
	struct rxh *h;
	const struct rxh_world *w;
	int i;
	const char *tag;
	volatile int *stop;
	int n;
	struct rec *r;
	int64_t last_answer_ms; /* when the last call returned */
};

static void order_body(struct rec *r, const struct rxh_world *w, int i, int k)
{
	bool sell = (i + k) % 2;
	char coid[64] = "";
	if (!r->by_key)
		snprintf(coid, sizeof coid, ",\"client_order_id\":\"%s\"",
		         r->coid);
	snprintf(r->body, sizeof r->body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":%d%s}",
	         (long long)(sell ? w->node_a : w->node_b),
	         sell ? "sell" : "buy", 100000 + 1000 * ((i * 7 + k) % 3),
	         coid);
}

/* One order: its status and problem type. */
static long send_order(struct rxh *h, const char *tok, struct rec *r,
                       char *answer, size_t alen)
{
	struct rxh_resp resp;
	char hdr[96];
	snprintf(hdr, sizeof hdr, "Idempotency-Key: %s", r->coid);
	long st = rxh_call(h, "POST", "/v1/orders", tok, r->body,
	                   r->by_key ? hdr : NULL, &resp);
	r->type[0] = 0;
	char v[16];
	r->replayed = rxh_header(&resp, "Idempotent-Replayed", v, sizeof v) &&
	              strcmp(v, "true") == 0;
	if (st >= 400 && resp.json) {
		const char *t =
		    json_string_value(json_object_get(resp.json, "type"));
		snprintf(r->type, sizeof r->type, "%s", t ? t : "");
	}
	if (answer)
		snprintf(answer, alen, "%s", resp.body ? resp.body : "");
	rxh_resp_free(&resp);
	return st;
}

static void *place_stream(void *arg)
{
	struct placer *p = arg;
	for (int k = 0; k < MAXREC && !*p->stop; k++) {
		struct rec *r = &p->r[p->n];
		r->by_key = p->i % 2;
		snprintf(r->coid, sizeof r->coid, "%s-%d-%d", p->tag, p->i, k);
		order_body(r, p->w, p->i, k);
		int64_t t0 = clock_mono_ms();
		r->status = send_order(p->h, p->w->trader_token, r, NULL, 0);
		r->took_ms = clock_mono_ms() - t0;
		p->last_answer_ms = clock_mono_ms();
		__atomic_store_n(&p->n, p->n + 1, __ATOMIC_RELEASE);
		/* A 503 says Retry-After: a client waits before the next.
		 * Without a pause a placer ran through its MAXREC records
		 * while PostgreSQL was slow to come back (once its token's
		 * cached credentials expire, 5 s in, each order is answered
		 * 503 at once by the credential lookup), then had no record
		 * left to place an order after the outage with ("placed no
		 * order after the outage", one run in seven on a busy host).
		 * 100 ms keeps a placer under 10 records a second: MAXREC
		 * lasts longer than the test case may (300 s). */
		if (r->status == 503)
			usleep(100000);
	}
	return NULL;
}

/* How many times the order of r is in the database. */
static long stored(PGconn *c, const struct rec *r)
{
	char q[256];
	if (r->by_key)
		snprintf(q, sizeof q,
		         "SELECT count(*) FROM idempotency WHERE key = '%s'",
		         r->coid);
	else
		snprintf(q, sizeof q,
		         "SELECT count(*) FROM orders WHERE client_order_id = "
		         "'%s'",
		         r->coid);
	return testdb_scalar(c, q);
}

#define UNAVAILABLE "urn:ramex:problem:database-unavailable"
#define UNKNOWN     "urn:ramex:problem:outcome-unknown"

struct tally {
	int ok, unavailable, unknown;
	int unknown_committed; /* of those, committed before the retry */
	int64_t slowest_ms;    /* the longest wait for an answer */
	int most_records;      /* the most a placer sent in one outage */
};

/* Checks every answer of the placers against the database, retries the
 * outcome-unknown ones, and counts. */
static void check_answers(struct rxh *h, const struct rxh_world *w,
                          struct placer *pl, struct tally *t)
{
	PGconn *c = testdb_connect(h->conninfo);
	for (int i = 0; i < PLACERS; i++)
		for (int k = 0; k < pl[i].n; k++) {
			struct rec *r = &pl[i].r[k];
			long n = stored(c, r);
			if (r->took_ms > t->slowest_ms)
				t->slowest_ms = r->took_ms;
			if (r->status == 201) {
				ck_assert_msg(n == 1, "%s answered 201, stored %ld",
				              r->coid, n);
				t->ok++;
				continue;
			}
			ck_assert_msg(r->status == 503,
			              "%s answered %ld (%s), not 201 or 503",
			              r->coid, r->status, r->type);
			if (strcmp(r->type, UNAVAILABLE) == 0) {
				ck_assert_msg(n == 0,
				              "%s answered 'not carried out' "
				              "but stored %ld times",
				              r->coid, n);
				t->unavailable++;
				continue;
			}
			ck_assert_msg(strcmp(r->type, UNKNOWN) == 0,
			              "%s answered 503 of type '%s'", r->coid,
			              r->type);
			t->unknown++;
			t->unknown_committed += n == 1;
			/* the retry tells which: the first answer when it was
			 * placed, else it is placed now; once either way */
			char again[4096], first[4096];
			struct rec copy = *r;
			long st;
			/* as a client would: again while it is 503 (the fault
			 * hook may break the retry's own batch) */
			for (int tries = 0; tries < 20; tries++) {
				st = send_order(h, w->trader_token, &copy,
				                again, sizeof again);
				if (st != 503)
					break;
				usleep(100000);
			}
			ck_assert_msg(st == 201, "retry of %s: %ld %s", r->coid,
			              st, again);
			ck_assert_msg(copy.replayed == (n == 1),
			              "retry of %s (stored %ld): replayed %d",
			              r->coid, n, copy.replayed);
			ck_assert_int_eq(stored(c, r), 1);
			st = send_order(h, w->trader_token, &copy, first,
			                sizeof first);
			ck_assert_int_eq(st, 201);
			ck_assert_str_eq(first, again);
		}
	PQfinish(c);
}

/* One outage: orders stream, PostgreSQL stops after `after_ms`, stays away
 * `away_ms`, starts again; then everything above is checked. */
static void outage(struct rxh *h, const struct rxh_world *w, const char *tag,
                   int after_ms, struct tally *t)
{
	static struct placer pl[PLACERS];
	static struct rec recs[PLACERS][MAXREC];
	pthread_t th[PLACERS];
	volatile int stop = 0;
	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){.h = h,
		                        .w = w,
		                        .i = i,
		                        .tag = tag,
		                        .stop = &stop,
		                        .r = recs[i],
		                        .last_answer_ms = clock_mono_ms()};
		pthread_create(&th[i], NULL, place_stream, &pl[i]);
	}
	usleep((useconds_t)after_ms * 1000);
	pg_stop_now();
	/* while it is away: every order is answered, /readyz says so, and
	 * the writer thread idles */
	usleep(300000);
	bool down_seen = readyz_becomes(h, 503, 3000);
	long cpu0 = writer_cpu_ms(h->pid);
	usleep(1000000);
	long cpu = writer_cpu_ms(h->pid) - cpu0;
	int64_t now = clock_mono_ms(), stalest = 0;
	for (int i = 0; i < PLACERS; i++)
		if (now - pl[i].last_answer_ms > stalest)
			stalest = now - pl[i].last_answer_ms;
	pg_start();
	ck_assert_msg(down_seen, "/readyz did not say 503 while PostgreSQL "
	                         "was stopped");
	ck_assert_msg(cpu < 500,
	              "the writer thread used %ld ms of CPU in 1 s while "
	              "PostgreSQL was away",
	              cpu);
	ck_assert_msg(stalest < 3000,
	              "a placer waited %lld ms for an answer while PostgreSQL "
	              "was away",
	              (long long)stalest);
	ck_assert_msg(readyz_becomes(h, 200, 30000),
	              "/readyz did not come back after PostgreSQL did");
	/* orders are placed again: each placer gets a 201 after this */
	int base[PLACERS];
	for (int i = 0; i < PLACERS; i++)
		base[i] = __atomic_load_n(&pl[i].n, __ATOMIC_ACQUIRE);
	int64_t until = clock_mono_ms() + 20000;
	for (bool all = false; !all && clock_mono_ms() < until;) {
		usleep(50000);
		all = true;
		for (int i = 0; i < PLACERS; i++) {
			int n = __atomic_load_n(&pl[i].n, __ATOMIC_ACQUIRE);
			bool got = false;
			for (int k = base[i]; k < n && !got; k++)
				got = pl[i].r[k].status == 201;
			all = all && got;
		}
	}
	stop = 1;
	/* a call stuck in a spinning writer would wait for curl's 30 s:
	 * every placer must end well before */
	until = clock_mono_ms() + 10000;
	for (int i = 0; i < PLACERS; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t left = until - clock_mono_ms();
		if (left < 0)
			left = 0;
		ts.tv_sec += left / 1000;
		ts.tv_nsec += (left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		ck_assert_msg(pthread_timedjoin_np(th[i], NULL, &ts) == 0,
		              "an order was not answered within 10 s after "
		              "PostgreSQL came back");
	}
	for (int i = 0; i < PLACERS; i++) {
		bool got = false;
		for (int k = base[i]; k < pl[i].n && !got; k++)
			got = pl[i].r[k].status == 201;
		const struct rec *last = pl[i].n ? &pl[i].r[pl[i].n - 1] : NULL;
		if (pl[i].n > t->most_records)
			t->most_records = pl[i].n;
		ck_assert_msg(got,
		              "placer %d placed no order after the outage (%d "
		              "answers after it, %d of its %d records used; the "
		              "last %s: %ld %s in %lld ms)",
		              i, pl[i].n - base[i], pl[i].n, MAXREC,
		              last ? last->coid : "-", last ? last->status : 0,
		              last ? last->type : "",
		              last ? (long long)last->took_ms : 0LL);
	}
	check_answers(h, w, pl, t);
}

/* Both ways of keeping batches under way (writer.c, batch_overlap). */
static const char *const overlap_flags[] = {"", "--batch_overlap=1"};

/* PostgreSQL stopped at once, many times, at different moments of the
 * stream: whichever step of a batch it hits. */
START_TEST(immediate_stops_under_load)
{
	struct rxh h;
	struct rxh_world w;
	struct tally t = {0};
	char db[64];
	snprintf(db, sizeof db, "ramex_t_outage%d", _i);
	pg_start();
	rxh_start(&h, db, overlap_flags[_i]);
	rxh_world(&h, &w);
	for (int round = 0; round < 6; round++) {
		char tag[16];
		snprintf(tag, sizeof tag, "s%d", round);
		outage(&h, &w, tag, 150 + 97 * round, &t);
	}
	ck_assert_int_gt(t.ok, 0);
	ck_assert_int_gt(t.unavailable, 0);
	fprintf(stderr,
	        "immediate stops (overlap %d): %d placed, %d not carried "
	        "out, %d outcome unknown; a placer used at most %d of its %d "
	        "records in one outage\n",
	        _i, t.ok, t.unavailable, t.unknown, t.most_records, MAXREC);
	rxh_stop(&h);
}
END_TEST

/* The fault hook breaks the writer's connection at one step of every 5th
 * batch, while PostgreSQL stays up: each step is hit many times. What the
 * answers must be depends on the step: before the COMMIT went out, not
 * carried out; right after it went out, unknown (and then committed, as
 * PostgreSQL had it all before the connection broke); after the first
 * result came, whatever the rest of the results say (PostgreSQL sends them
 * together at the sync, so they are usually all there: committed, and the
 * next batch finds the connection broken before it is sent). */
enum expect { NOT_SENT, UNKNOWN_COMMITTED, EITHER };
static const struct {
	const char *fault;
	enum expect expect;
} steps[] = {
    {"idle:5", NOT_SENT},
    {"open:5", NOT_SENT},
    {"close:5", UNKNOWN_COMMITTED},
    {"result:5", EITHER},
};

START_TEST(broken_connection_at_each_step)
{
	struct rxh h;
	struct rxh_world w;
	struct tally t = {0};
	static struct placer pl[PLACERS];
	static struct rec recs[PLACERS][MAXREC];
	pthread_t th[PLACERS];
	volatile int stop = 0;
	int step = _i / 2;
	pg_start();
	char db[64];
	snprintf(db, sizeof db, "ramex_t_outage_step%d", _i);
	setenv("RAMEX_WRITER_FAULT", steps[step].fault, 1);
	rxh_start(&h, db, overlap_flags[_i % 2]);
	unsetenv("RAMEX_WRITER_FAULT");
	rxh_world(&h, &w);
	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){.h = &h,
		                        .w = &w,
		                        .i = i,
		                        .tag = "f",
		                        .stop = &stop,
		                        .r = recs[i],
		                        .last_answer_ms = clock_mono_ms()};
		pthread_create(&th[i], NULL, place_stream, &pl[i]);
	}
	usleep(2500000);
	stop = 1;
	for (int i = 0; i < PLACERS; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(rxh_log_count(&h, "writer connection lost") +
	                      rxh_log_count(&h, "lost before") >=
	                  2,
	              "the fault %s was not hit twice", steps[step].fault);
	ck_assert_msg(readyz_becomes(&h, 200, 10000),
	              "/readyz did not come back after the fault");
	check_answers(&h, &w, pl, &t);
	fprintf(stderr,
	        "fault %s (overlap %d): %d placed, %d not carried out, %d "
	        "outcome unknown (%d of them committed), slowest answer "
	        "%lld ms\n",
	        steps[step].fault, _i % 2, t.ok, t.unavailable, t.unknown,
	        t.unknown_committed, (long long)t.slowest_ms);
	ck_assert_int_gt(t.ok, 0);
	if (steps[step].expect == UNKNOWN_COMMITTED) {
		ck_assert_int_gt(t.unknown, 0);
		/* PostgreSQL had the whole batch: it committed it */
		ck_assert_int_eq(t.unknown_committed, t.unknown);
	} else if (steps[step].expect == NOT_SENT) {
		ck_assert_int_gt(t.unavailable, 0);
		ck_assert_int_eq(t.unknown, 0);
	} else {
		ck_assert_int_gt(t.unavailable + t.unknown, 0);
	}
	ck_assert_msg(t.slowest_ms < 5000, "an answer took %lld ms",
	              (long long)t.slowest_ms);
	/* and the books are what the database says (rebuilt after each) */
	struct rxh_resp r;
	ck_assert_int_eq(rxh_call(&h, "GET", "/v1/markets/spot/book?depth=200",
	                          w.trader_token, NULL, NULL, &r),
	                 200);
	json_t *bids = json_object_get(r.json, "bids");
	json_t *asks = json_object_get(r.json, "asks");
	long api = 0, i;
	json_t *l;
	json_array_foreach(bids, i, l) api +=
	    json_integer_value(json_object_get(l, "pages"));
	json_array_foreach(asks, i, l) api +=
	    json_integer_value(json_object_get(l, "pages"));
	rxh_resp_free(&r);
	ck_assert_int_eq(api, testdb_scalar_at(h.conninfo,
	                                       "SELECT coalesce(sum(remaining), "
	                                       "0) FROM orders WHERE status = "
	                                       "'open'"));
	rxh_stop(&h);
}
END_TEST

/* A batch that does not land (here PostgreSQL sleeps in it) while orders
 * wait: /readyz says so after a few seconds, and 200 again once it
 * lands. */
static void *place_one(void *arg)
{
	struct placer *p = arg;
	struct rec *r = &p->r[0];
	snprintf(r->coid, sizeof r->coid, "%s-%d", p->tag, p->i);
	order_body(r, p->w, p->i, 0);
	r->status = send_order(p->h, p->w->trader_token, r, NULL, 0);
	p->n = 1;
	return NULL;
}

START_TEST(readyz_sees_a_writer_that_makes_no_progress)
{
	struct rxh h;
	struct rxh_world w;
	static struct rec recs[3][4];
	struct placer pl[3];
	pthread_t th[3];
	pg_start();
	rxh_start(&h, "ramex_t_outage_stall", "");
	rxh_world(&h, &w);
	testdb_run(h.conninfo,
	           "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
	           "$$ BEGIN IF NEW.client_order_id = 'slow-0' THEN PERFORM "
	           "pg_sleep(9); END IF; RETURN NEW; END $$");
	testdb_run(h.conninfo, "CREATE TRIGGER slow BEFORE INSERT ON orders "
	                       "FOR EACH ROW EXECUTE FUNCTION slow()");
	ck_assert_int_eq(readyz(&h), 200);
	for (int i = 0; i < 3; i++) {
		pl[i] = (struct placer){
		    .h = &h, .w = &w, .i = i, .tag = "slow", .r = recs[i]};
		pthread_create(&th[i], NULL, place_one, &pl[i]);
		usleep(200000); /* slow-0 first, the others wait behind it */
	}
	ck_assert_msg(readyz_becomes(&h, 503, 8000),
	              "/readyz said 200 while orders waited behind a batch "
	              "that made no progress");
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(recs[i][0].status, 201);
	ck_assert_msg(readyz_becomes(&h, 200, 3000),
	              "/readyz did not come back once the batch landed");
	rxh_stop(&h);
}
END_TEST

/* The reader of a pipeline (exchange/pgpipe.c) against PostgreSQL itself:
 * the results in order and the sync; past the sync, where PQgetResult
 * answers NULL forever on a good connection (the writer's old loop waited
 * there for a sync and spun), it returns at once saying nothing more will
 * come; and on a connection that broke under it (the fault hook's
 * shutdown), the same. */
START_TEST(pipeline_reader_never_loops)
{
	pg_start();
	PGconn *c = testdb_connect(testdb_create("ramex_t_outage_pipe"));
	ck_assert(PQenterPipelineMode(c));
	ck_assert(PQsendQueryParams(c, "SELECT 1", 0, NULL, NULL, NULL, NULL,
	                            0));
	ck_assert(PQsendQueryParams(c, "SELECT 2", 0, NULL, NULL, NULL, NULL,
	                            0));
	ck_assert(PQpipelineSync(c));
	bool lost = false;
	for (int i = 1; i <= 2; i++) {
		PGresult *r = pgpipe_result(c, &lost);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
		ck_assert_int_eq(atoi(PQgetvalue(r, 0, 0)), i);
		PQclear(r);
	}
	PGresult *r = pgpipe_result(c, &lost);
	ck_assert_int_eq(PQresultStatus(r), PGRES_PIPELINE_SYNC);
	PQclear(r);
	ck_assert(!lost);
	/* past the sync: nothing will come; PQgetResult says NULL forever */
	ck_assert_ptr_null(PQgetResult(c));
	ck_assert_ptr_null(PQgetResult(c));
	int64_t t0 = clock_mono_ms();
	ck_assert_ptr_null(pgpipe_result(c, &lost));
	ck_assert(lost);
	ck_assert_int_lt(clock_mono_ms() - t0, 1000);
	ck_assert(PQexitPipelineMode(c));

	/* a connection broken under libpq, results still to come */
	ck_assert(PQenterPipelineMode(c));
	ck_assert(PQsendQueryParams(c, "SELECT pg_sleep(0.2)", 0, NULL, NULL,
	                            NULL, NULL, 0));
	ck_assert(PQpipelineSync(c));
	struct pgpipe_fault f;
	ck_assert_int_eq(pgpipe_fault_parse(&f, "result:1"), 0);
	ck_assert(pgpipe_fault_hit(&f, PGPIPE_RESULT, 7, c));
	lost = false;
	t0 = clock_mono_ms();
	ck_assert_ptr_null(pgpipe_result(c, &lost));
	ck_assert(lost);
	ck_assert_int_lt(clock_mono_ms() - t0, 5000);
	ck_assert(!db_alive(c));
	PQfinish(c);

	/* an idle session the server ended (as a restart does): FATAL, then
	 * end of file, both waiting; libpq takes the FATAL for a notice and
	 * stays CONNECTION_OK after reading it, so db_alive must read on */
	const char *ci = testdb_create("ramex_t_outage_pipe");
	c = testdb_connect(ci);
	ck_assert(db_alive(c));
	char q[128];
	snprintf(q, sizeof q, "SELECT pg_terminate_backend(%d, 5000)::int",
	         PQbackendPID(c));
	ck_assert_int_eq(testdb_scalar_at(ci, q), 1);
	usleep(100000);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK); /* libpq cannot know */
	ck_assert(!db_alive(c));
	PQfinish(c);

	/* the hook's setting: STEP:N, nothing else */
	const char *bad[] = {"close", "close:", "close:0", "close:-1",
	                     "shut:3", "close:2x", ":4"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(pgpipe_fault_parse(&f, bad[i]) < 0, "%s", bad[i]);
	ck_assert_int_eq(pgpipe_fault_parse(&f, NULL), 0);
	ck_assert_int_eq(f.step, PGPIPE_NONE);
	ck_assert_int_eq(pgpipe_fault_parse(&f, "idle:3"), 0);
	ck_assert(f.step == PGPIPE_IDLE && f.every == 3);
	ck_assert(!pgpipe_fault_hit(&f, PGPIPE_IDLE, 4, NULL));
}
END_TEST

/* PostgreSQL restarted (`pg_ctl restart -m fast`, as an operator does)
 * while ramexd idles: its connections were all closed by the server, and
 * the next order must not pay for it. Each round: the restart, then orders
 * at once; in rounds 2 and 3 after the credential cache (5 s) has expired,
 * so that the query pool's connections are the ones found dead; in rounds
 * 1 and 3 PostgreSQL stays away 4 s, so that the idle writer failed to
 * reconnect several times and is backing off (up to 2 s) when it is back.
 * Every order is 201, none 503. */
START_TEST(idle_restart_is_invisible)
{
	struct rxh h;
	struct rxh_world w;
	struct rec r = {0};
	pg_start();
	rxh_start(&h, "ramex_t_outage_idle", "");
	rxh_world(&h, &w);
	char answer[2048];
	for (int round = 0; round < 4; round++) {
		snprintf(r.coid, sizeof r.coid, "idle-%d-a", round);
		order_body(&r, &w, 0, round);
		ck_assert_int_eq(send_order(&h, w.trader_token, &r, answer,
		                            sizeof answer),
		                 201);
		/* rounds 2 and 3: idle past the credential cache */
		if (round >= 2)
			usleep(5500000);
		ck_assert_int_eq(testdb_pg_ctl("-m fast -w stop"), 0);
		if (round % 2)
			usleep(4000000);
		pg_start();
		for (int k = 0; k < 3; k++) {
			snprintf(r.coid, sizeof r.coid, "idle-%d-%d", round, k);
			r.by_key = k == 1;
			order_body(&r, &w, 1, k);
			long st = send_order(&h, w.trader_token, &r, answer,
			                     sizeof answer);
			ck_assert_msg(st == 201,
			              "round %d, order %d after the restart: %ld "
			              "%s",
			              round, k, st, answer);
		}
		r.by_key = false;
		/* a read on the query pool, too */
		struct rxh_resp g;
		long st = rxh_call(&h, "GET", "/v1/orders?limit=1",
		                   w.trader_token, NULL, NULL, &g);
		ck_assert_msg(st == 200, "round %d, GET /v1/orders: %ld %s",
		              round, st, g.body ? g.body : "");
		rxh_resp_free(&g);
	}
	ck_assert_int_eq(rxh_log_count(&h, "batch not committed"), 0);
	rxh_stop(&h);
}
END_TEST

/* --- a PostgreSQL that stops answering ------------------------------------ */

/* A TCP relay between ramexd and the test's PostgreSQL that can be frozen:
 * then it reads, writes and accepts nothing, as a server that hangs (a
 * stopped postmaster, a stalled disk, a network that drops packets) looks
 * to its client: connections stay open, the kernel takes new ones into the
 * listen backlog, and no answer comes. */
struct relay {
	int lfd, port, pg_port;
	int fd[64][2]; /* ramexd's end, PostgreSQL's end; -1 when closed */
	int n;
	volatile int frozen, stop;
	pthread_t th;
};

static void relay_close(struct relay *r, int i)
{
	close(r->fd[i][0]), close(r->fd[i][1]);
	r->fd[i][0] = r->fd[i][1] = -1;
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	char buf[65536];
	while (!r->stop) {
		if (r->frozen) {
			usleep(10000);
			continue;
		}
		struct pollfd p[129];
		int np = 0;
		p[np++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
		for (int i = 0; i < r->n; i++)
			for (int k = 0; k < 2; k++)
				p[np++] = (struct pollfd){.fd = r->fd[i][k],
				                          .events = POLLIN};
		if (poll(p, (nfds_t)np, 10) <= 0)
			continue;
		if (r->frozen)
			continue;
		if ((p[0].revents & POLLIN) && r->n < 64) {
			int c = accept(r->lfd, NULL, NULL);
			int s = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in a = {.sin_family = AF_INET,
			                        .sin_port = htons(r->pg_port),
			                        .sin_addr.s_addr =
			                            htonl(INADDR_LOOPBACK)};
			if (c >= 0 && s >= 0 &&
			    connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
				r->fd[r->n][0] = c, r->fd[r->n][1] = s;
				r->n++;
			} else {
				close(c), close(s);
			}
		}
		for (int i = 0, j = 1; i < r->n; i++)
			for (int k = 0; k < 2; k++, j++) {
				if (r->fd[i][k] < 0 ||
				    !(p[j].revents &
				      (POLLIN | POLLHUP | POLLERR)))
					continue;
				ssize_t got =
				    read(r->fd[i][k], buf, sizeof buf);
				if (got <= 0 || write(r->fd[i][!k], buf,
				                      (size_t)got) != got)
					relay_close(r, i);
			}
	}
	return NULL;
}

static void relay_start(struct relay *r)
{
	memset(r, 0, sizeof *r);
	const char *pg = getenv("PGPORT");
	ck_assert_msg(pg && *pg, "PGPORT is not set (run through make check)");
	r->pg_port = atoi(pg);
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	ck_assert_int_eq(bind(r->lfd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(r->lfd, 64), 0);
	ck_assert_int_eq(getsockname(r->lfd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	ck_assert_int_eq(pthread_create(&r->th, NULL, relay_run, r), 0);
}

static void relay_stop(struct relay *r)
{
	r->stop = 1;
	pthread_join(r->th, NULL);
	for (int i = 0; i < r->n; i++)
		if (r->fd[i][0] >= 0)
			relay_close(r, i);
	close(r->lfd);
}

/* /readyz while PostgreSQL hangs (it neither answers nor closes): it is
 * answered, 503 not-ready with Retry-After, each time it is asked, and
 * 200 again once PostgreSQL answers. It waited for SELECT 1 for as long as
 * PostgreSQL hung, each probe holding an HTTP worker and a connection of
 * the query pool (found from outside with the postmaster and its backends
 * SIGSTOPped: curl gave up after 20 s). The 30 s of the harness's client
 * are the bound; the exchange answers within a few seconds. */
START_TEST(readyz_answers_while_postgresql_hangs)
{
	struct rxh h;
	struct relay r;
	char conninfo[256];
	pg_start();
	relay_start(&r);
	const char *db = testdb_create_schema("ramex_t_outage_hang");
	snprintf(conninfo, sizeof conninfo, "%s host=127.0.0.1 port=%d", db,
	         r.port);
	rxh_start_at(&h, "ramex_t_outage_hang", conninfo, "");
	ck_assert_int_eq(readyz(&h), 200);
	r.frozen = 1;
	/* the first probe finds the pool's connection hung, the next ones
	 * find it must be made again, and PostgreSQL does not answer that */
	for (int i = 0; i < 3; i++) {
		struct rxh_resp g;
		char ra[32];
		long st = rxh_call(&h, "GET", "/readyz", NULL, NULL, NULL, &g);
		ck_assert_msg(st == 503,
		              "probe %d while PostgreSQL hangs: %ld (-1: no "
		              "answer in 30 s) %s",
		              i, st, g.body ? g.body : "");
		ck_assert(rxh_is_problem(&g, "urn:ramex:problem:not-ready"));
		ck_assert(rxh_header(&g, "Retry-After", ra, sizeof ra));
		rxh_resp_free(&g);
	}
	ck_assert_int_eq(rxh_status(&h, "GET", "/healthz", NULL, NULL, NULL),
	                 200);
	r.frozen = 0;
	ck_assert_msg(readyz_becomes(&h, 200, 30000),
	              "/readyz did not come back once PostgreSQL answered");
	rxh_stop(&h);
	relay_stop(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("outage");
	/* CK_RUN_CASE=stops (or steps, stall) runs one */
	TCase *tc = tcase_create("stops");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, immediate_stops_under_load, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("steps");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, broken_connection_at_each_step, 0, 8);
	suite_add_tcase(s, tc);
	tc = tcase_create("pipe");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, pipeline_reader_never_loops);
	suite_add_tcase(s, tc);
	tc = tcase_create("idle");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, idle_restart_is_invisible);
	suite_add_tcase(s, tc);
	tc = tcase_create("stall");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, readyz_sees_a_writer_that_makes_no_progress);
	suite_add_tcase(s, tc);
	tc = tcase_create("hang");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, readyz_answers_while_postgresql_hangs);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
