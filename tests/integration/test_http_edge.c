/*
 * test_http_edge.c — ramexd's HTTP edge (exchange/http.c) against a real
 * ramexd and PostgreSQL: a few HTTP threads, parked connections and a
 * pool of workers instead of a thread per connection.
 *
 * What would break if the edge held a thread per waiting request: with one
 * HTTP thread and one worker, event streams and orders waiting for their
 * batch must still leave room for every other request. What would break if
 * the HTTP thread's first look at credentials had side effects: a signed
 * request whose key is not cached yet goes to a worker, and its nonce must
 * be used up once, there. And a graceful stop must answer every parked
 * order before the process exits: nothing acknowledged is lost, nothing
 * hangs. max_connections holds for the server as a whole, however its
 * HTTP threads share the connections out.
 */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static long place(struct rxh *h, const char *tok, int64_t acct,
                  const char *side, const char *coid, struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":100000%s%s%s}",
	         (long long)acct, side, coid ? ",\"client_order_id\":\"" : "",
	         coid ? coid : "", coid ? "\"" : "");
	return rxh_call(h, "POST", "/v1/orders", tok, body, NULL, r);
}

/* --- event streams -------------------------------------------------------- */

#define STREAMS 6
#define PLACERS 24

struct placer {
	struct rxh *h;
	const struct rxh_world *w;
	int i;
	long status;
};

static void *place_one(void *arg)
{
	struct placer *p = arg;
	struct rxh_resp r;
	char coid[32];
	snprintf(coid, sizeof coid, "edge-%d", p->i);
	/* half sell, half buy at one price: they trade among themselves */
	p->status = place(p->h, p->w->trader_token,
	                  p->i % 2 ? p->w->node_a : p->w->node_b,
	                  p->i % 2 ? "sell" : "buy", coid, &r);
	rxh_resp_free(&r);
	return NULL;
}

START_TEST(streams_and_waiting_orders_hold_no_thread)
{
	struct rxh h;
	struct rxh_world w;
	static struct rxh_sse s[STREAMS];
	pthread_t st[STREAMS], pt[PLACERS];
	struct placer pl[PLACERS];
	/* one HTTP thread and one worker: a thread per stream or per
	 * waiting order would leave none for the rest (max_connections
	 * within what one thread holds, or ramexd starts more) */
	rxh_start(&h, "ramex_t_edge_threads",
	          "--http_threads=1 --http_workers=1 --max_connections=100");
	rxh_world(&h, &w);
	for (int i = 0; i < STREAMS; i++) {
		memset(&s[i], 0, sizeof s[i]);
		s[i].h = &h;
		s[i].token = i % 2 ? w.trader_token : w.op_token;
		s[i].until = "event: contract";
		pthread_create(&st[i], NULL, rxh_sse_run, &s[i]);
	}
	for (int i = 0; i < 500; i++) {
		int all = 1;
		for (int k = 0; k < STREAMS; k++)
			all &=
			    __atomic_load_n(&s[k].connected, __ATOMIC_SEQ_CST);
		if (all)
			break;
		usleep(20000);
	}
	for (int k = 0; k < STREAMS; k++)
		ck_assert_msg(
		    __atomic_load_n(&s[k].connected, __ATOMIC_SEQ_CST),
		    "event stream %d did not start", k);

	/* a worker's route answers while every stream is open */
	ck_assert_int_eq(
	    rxh_status(&h, "GET", "/v1/orders", w.trader_token, NULL, NULL),
	    200);

	for (int i = 0; i < PLACERS; i++) {
		pl[i] = (struct placer){&h, &w, i, 0};
		pthread_create(&pt[i], NULL, place_one, &pl[i]);
	}
	for (int i = 0; i < PLACERS; i++) {
		pthread_join(pt[i], NULL);
		ck_assert_int_eq(pl[i].status, 201);
	}
	/* every stream saw a contract of those trades */
	for (int k = 0; k < STREAMS; k++) {
		pthread_join(st[k], NULL);
		ck_assert_msg(strstr(s[k].buf, "event: fill"), "stream %d: %s",
		              k, s[k].buf);
		ck_assert_msg(strstr(s[k].buf, "event: contract"),
		              "stream %d: %s", k, s[k].buf);
	}
	/* and the database holds each order once */
	PGconn *c = PQconnectdb(h.conninfo);
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                                  "client_order_id LIKE 'edge-%'"),
	                 PLACERS);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades"),
	                 PLACERS / 2);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* --- credentials not cached yet ------------------------------------------ */

START_TEST(first_signed_order_uses_its_nonce_once)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char body[256];
	rxh_start(&h, "ramex_t_edge_nonce", "");
	rxh_world(&h, &w);
	/* a fresh process: node a's key is in no cache */
	int st = rxh_kill(&h, SIGTERM);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "stop: %d", st);
	rxh_restart(&h);
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,"
	         "\"price\":100000}");
	ck_assert_int_eq(rxh_status_signed(&h, "POST", "/v1/orders", w.key_a,
	                                   w.secret_a, body, 0,
	                                   "0123456789abcdef0123456789abcdef"),
	                 201);
	/* the same nonce again: refused, and the order is not placed twice */
	ck_assert_int_eq(
	    rxh_call_signed(&h, "POST", "/v1/orders", w.key_a, w.secret_a, body,
	                    0, "0123456789abcdef0123456789abcdef", &r),
	    401);
	ck_assert_msg(strstr(r.body, "nonce"), "%s", r.body);
	rxh_resp_free(&r);
	/* a bearer token on a cold cache, on an inline route, too */
	ck_assert_int_eq(place(&h, w.trader_token, w.node_b, "buy", NULL, &r),
	                 201);
	rxh_resp_free(&r);
	PGconn *c = PQconnectdb(h.conninfo);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 2);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* --- a graceful stop under load ------------------------------------------ */

#define STOPPERS 16

struct stopper {
	struct rxh *h;
	const struct rxh_world *w;
	int t;
	int acked; /* orders answered 201 */
	int other; /* answered otherwise: 503, or no answer (closed) */
	int stop;
};

static void *keep_placing(void *arg)
{
	struct stopper *s = arg;
	for (int i = 0; !__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST); i++) {
		struct rxh_resp r;
		char coid[48];
		snprintf(coid, sizeof coid, "stop-%d-%d", s->t, i);
		long st = place(s->h, s->w->trader_token,
		                s->t % 2 ? s->w->node_a : s->w->node_b,
		                s->t % 2 ? "sell" : "buy", coid, &r);
		rxh_resp_free(&r);
		if (st == 201) {
			s->acked++;
		} else {
			s->other++;
			if (st != 503)
				break; /* the server is gone */
		}
	}
	return NULL;
}

START_TEST(graceful_stop_answers_parked_orders)
{
	struct rxh h;
	struct rxh_world w;
	pthread_t th[STOPPERS];
	static struct stopper s[STOPPERS];
	rxh_start(&h, "ramex_t_edge_stop", "");
	rxh_world(&h, &w);
	for (int t = 0; t < STOPPERS; t++) {
		s[t] = (struct stopper){&h, &w, t, 0, 0, 0};
		pthread_create(&th[t], NULL, keep_placing, &s[t]);
	}
	int acked = 0;
	for (int i = 0; i < 300 && acked < 200; i++) {
		usleep(10000);
		acked = 0;
		for (int t = 0; t < STOPPERS; t++)
			acked += __atomic_load_n(&s[t].acked, __ATOMIC_SEQ_CST);
	}
	ck_assert_msg(acked > 0, "no order was acknowledged before the stop");
	int st = rxh_kill(&h, SIGTERM);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	              "graceful stop exit status %d", st);
	for (int t = 0; t < STOPPERS; t++) {
		__atomic_store_n(&s[t].stop, 1, __ATOMIC_SEQ_CST);
		pthread_join(th[t], NULL);
	}
	acked = 0;
	for (int t = 0; t < STOPPERS; t++)
		acked += s[t].acked;
	/* every acknowledged order is there; any other row is an order whose
	 * answer was lost with the connection (committed, not acknowledged) */
	PGconn *c = PQconnectdb(h.conninfo);
	long rows = testdb_scalar(c, "SELECT count(*) FROM orders WHERE "
	                             "client_order_id LIKE 'stop-%'");
	for (int t = 0; t < STOPPERS; t++)
		for (int i = 0; i < s[t].acked; i++) {
			char sql[160];
			snprintf(sql, sizeof sql,
			         "SELECT count(*) FROM orders WHERE "
			         "client_order_id = 'stop-%d-%d'",
			         t, i);
			ck_assert_msg(
			    testdb_scalar(c, sql) == 1,
			    "acknowledged order stop-%d-%d is missing", t, i);
		}
	PQfinish(c);
	ck_assert_msg(rows >= acked, "%ld rows for %d acknowledged orders",
	              rows, acked);
	rxh_stop(&h);
}
END_TEST

/* --- POST /v1/orders/batch ---------------------------------------------- */

static long batch(struct rxh *h, const char *tok, const char *orders,
                  const char *hdr, struct rxh_resp *r)
{
	char body[8192];
	snprintf(body, sizeof body, "{\"orders\":[%s]}", orders);
	return rxh_call(h, "POST", "/v1/orders/batch", tok, body, hdr, r);
}

static long result_status(const struct rxh_resp *r, int i)
{
	json_t *e = json_array_get(json_object_get(r->json, "results"), i);
	return (long)json_integer_value(json_object_get(e, "status"));
}

START_TEST(batch_places_checks_and_replays)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char four[2048], o[4][300];
	rxh_start(&h, "ramex_t_edge_batch", "");
	rxh_world(&h, &w);
	PGconn *c = PQconnectdb(h.conninfo);
	for (int i = 0; i < 4; i++)
		snprintf(o[i], sizeof o[i],
		         "{\"market\":\"spot\",\"account_id\":%lld,"
		         "\"side\":\"%s\",\"pages\":256,\"price\":100000,"
		         "\"client_order_id\":\"b-%d\"}",
		         (long long)(i < 2 ? w.node_a : w.node_b),
		         i < 2 ? "sell" : "buy", i);
	snprintf(four, sizeof four, "%s,%s,%s,%s", o[0], o[1], o[2], o[3]);

	/* one bad order refuses the batch, naming it; nothing is placed */
	char bad[2048];
	snprintf(bad, sizeof bad,
	         "%s,%s,{\"market\":\"spot\",\"side\":\"buy\","
	         "\"pages\":0,\"price\":1}",
	         o[0], o[1]);
	ck_assert_int_eq(batch(&h, w.trader_token, bad, NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "orders[2]: pages"), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 0);

	/* four orders: two sells, then two buys that trade with them */
	ck_assert_int_eq(batch(&h, w.trader_token, four, NULL, &r), 200);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(result_status(&r, i) == 201, "%d: %s", i, r.body);
	json_t *last = json_object_get(
	    json_array_get(json_object_get(r.json, "results"), 3), "body");
	ck_assert_int_eq(json_array_size(json_object_get(last, "trades")), 1);
	rxh_resp_free(&r);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 4);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades"), 2);

	/* the same batch again: every order answered from its first answer */
	ck_assert_int_eq(batch(&h, w.trader_token, four, NULL, &r), 200);
	for (int i = 0; i < 4; i++) {
		json_t *e = json_array_get(json_object_get(r.json, "results"),
		                           (size_t)i);
		ck_assert_int_eq(result_status(&r, i), 201);
		ck_assert(json_is_true(json_object_get(e, "replayed")));
	}
	rxh_resp_free(&r);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 4);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades"), 2);

	/* a node acts only for itself, order by order */
	char mixed[1024];
	snprintf(mixed, sizeof mixed,
	         "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,"
	         "\"price\":200000},{\"market\":\"spot\",\"account_id\":"
	         "%lld,\"side\":\"sell\",\"pages\":256,\"price\":200000}",
	         (long long)w.node_b);
	char body[1200];
	snprintf(body, sizeof body, "{\"orders\":[%s]}", mixed);
	ck_assert_int_eq(rxh_call_signed(&h, "POST", "/v1/orders/batch",
	                                 w.key_a, w.secret_a, body, 0, NULL,
	                                 &r),
	                 200);
	ck_assert_int_eq(result_status(&r, 0), 201);
	ck_assert_int_eq(result_status(&r, 1), 403);
	rxh_resp_free(&r);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 5);

	/* no Idempotency-Key, at most 100 orders, at least one */
	ck_assert_int_eq(
	    batch(&h, w.trader_token, o[0], "Idempotency-Key: k1", &r), 400);
	rxh_resp_free(&r);
	ck_assert_int_eq(batch(&h, w.trader_token, "", NULL, &r), 400);
	rxh_resp_free(&r);
	static char many[101 * 8];
	many[0] = 0;
	for (int i = 0; i < 101; i++)
		strcat(many, i ? ",{}" : "{}");
	ck_assert_int_eq(batch(&h, w.trader_token, many, NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "1 to 100"), "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM orders"), 5);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* --- max_connections ----------------------------------------------------- */

static int dial(int port)
{
	int fd = rxh_dial(port);
	ck_assert_int_ge(fd, 0);
	return fd;
}

/* Reads one response from fd: its status, with the body in buf; 0 when
 * the server closed the connection, -1 after 10 s of nothing */
static int raw_read(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 10000) != 1)
			return -1;
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			return 0;
		n += (size_t)r;
		buf[n] = 0;
		char *end = strstr(buf, "\r\n\r\n"),
		     *cl = strstr(buf, "Content-Length: ");
		if (end && cl && strlen(end + 4) >= strtoul(cl + 16, NULL, 10))
			return atoi(buf + 9);
		ck_assert_uint_lt(n, cap - 1);
	}
}

/* Sends GET `path` on a kept-alive connection: 0 when refused already */
static int raw_send(int fd, const char *path)
{
	char rq[256];
	int k =
	    snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
	return write(fd, rq, (size_t)k) == k;
}

/* GET `path` on a kept-alive connection, as raw_read answers */
static int raw_get(int fd, const char *path, char *buf, size_t cap)
{
	if (!raw_send(fd, path))
		return 0; /* refused and reset already */
	return raw_read(fd, buf, cap);
}

static long metric(int fd, const char *name)
{
	static char buf[65536];
	char key[96];
	ck_assert_int_eq(raw_get(fd, "/metrics", buf, sizeof buf), 200);
	snprintf(key, sizeof key, "\n%s ", name);
	char *p = strstr(buf, key);
	ck_assert_msg(p, "no %s in /metrics", name);
	return strtol(p + strlen(key), NULL, 10);
}

#define MAXC 8

START_TEST(max_connections_holds_across_threads)
{
	struct rxh h;
	char buf[4096];
	int fd[MAXC];
	/* two HTTP threads: libmicrohttpd's own limit, split between them,
	 * turned connections away while the server had room */
	rxh_start(&h, "ramex_t_edge_maxconn",
	          "--http_threads=2 --max_connections=8");
	/* the harness's readiness probes closed their connections, but the
	 * server may not have seen that yet: wait until only ours is open, or
	 * a probe still counted turns the last of ours away (seen under load)
	 */
	fd[0] = dial(h.port);
	for (int i = 0; i < 500 && metric(fd[0], "ramex_http_connections") != 1;
	     i++)
		usleep(10000);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections"), 1);
	/* one at a time, each answered before the next, so that no two are
	 * accepted at once (the count may pass the limit by one then) */
	for (int i = 0; i < MAXC; i++) {
		if (i > 0)
			fd[i] = dial(h.port);
		ck_assert_int_eq(raw_get(fd[i], "/healthz", buf, sizeof buf),
		                 200);
	}
	for (int i = 0; i < MAXC; i++)
		ck_assert_int_eq(raw_get(fd[i], "/healthz", buf, sizeof buf),
		                 200);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections"), MAXC);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections_refused_total"),
	                 0);

	/* one more is closed at once, unanswered, and counted */
	int extra = dial(h.port);
	ck_assert_int_eq(raw_get(extra, "/healthz", buf, sizeof buf), 0);
	close(extra);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections_refused_total"),
	                 1);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections"), MAXC);

	/* a closed connection makes room again */
	close(fd[MAXC - 1]);
	for (int i = 0;
	     i < 500 && metric(fd[0], "ramex_http_connections") != MAXC - 1;
	     i++)
		usleep(10000);
	ck_assert_int_eq(metric(fd[0], "ramex_http_connections"), MAXC - 1);
	fd[MAXC - 1] = dial(h.port);
	ck_assert_int_eq(raw_get(fd[MAXC - 1], "/healthz", buf, sizeof buf),
	                 200);
	for (int i = 0; i < MAXC; i++)
		close(fd[i]);
	rxh_stop(&h);

	/* and the refusal was logged, with what to do about it */
	FILE *f = fopen(h.log, "r");
	ck_assert_ptr_nonnull(f);
	int seen = 0;
	while (fgets(buf, sizeof buf, f))
		seen |= strstr(buf, "at max_connections") &&
		        strstr(buf, "raise max_connections");
	fclose(f);
	ck_assert_msg(seen, "no refusal in %s", h.log);
}
END_TEST

/* 128 connections whose requests are all ready at once must all be
 * answered. With epoll, libmicrohttpd 0.9.75 took at most 128 events from
 * one epoll_wait and, when it got exactly 128, waited again with a stale
 * timeout before handling any: every one sat until the connection timeout
 * (30 s). Here one thread is asked for, the server is stopped while 128
 * connections each send a request, and every request must be answered
 * once it runs again. */
#define BURST 128

START_TEST(a_burst_of_128_ready_connections_is_answered)
{
	struct rxh h;
	char buf[4096];
	static int fd[BURST];
	/* (all from 127.0.0.1: no limit per address) */
	rxh_start(&h, "ramex_t_edge_burst",
	          "--http_threads=1 --max_connections_per_address=0");
	for (int i = 0; i < BURST; i++) {
		fd[i] = dial(h.port);
		ck_assert_int_eq(raw_get(fd[i], "/healthz", buf, sizeof buf),
		                 200);
	}
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(kill(h.pid, SIGSTOP), 0);
		for (int i = 0; i < BURST; i++)
			ck_assert(raw_send(fd[i], "/healthz"));
		usleep(100000); /* every request reaches its socket */
		ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
		for (int i = 0; i < BURST; i++)
			ck_assert_msg(raw_read(fd[i], buf, sizeof buf) == 200,
			              "round %d: connection %d unanswered",
			              round, i);
	}
	for (int i = 0; i < BURST; i++)
		close(fd[i]);
	rxh_stop(&h);
}
END_TEST

/* How many HTTP threads ramexd runs: libmicrohttpd names them MHD-... */
static int http_threads(pid_t pid)
{
	char path[320];
	int n = 0;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		char comm[64] = "";
		snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid,
		         e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f) && !strncmp(comm, "MHD-", 4))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* By default one HTTP thread a core, or one per 125 connections when that
 * is more, without a word in the log; a number set by hand that is too few
 * for max_connections is raised, and the log says so. */
START_TEST(http_threads_follow_cores_and_connections)
{
	static const struct {
		const char *flags;
		int set, need; /* http_threads given (0: none); 125 a thread */
		bool logged;
	} cases[] = {
	    {"--max_connections=100", 0, 1, false},
	    {"--max_connections=600", 0, 5, false},
	    {"--http_threads=1 --max_connections=300", 1, 3, true},
	    {"--http_threads=3 --max_connections=100", 3, 1, false},
	};
	int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct rxh h;
		int want = cases[i].set ? cases[i].set : cores;
		if (want < cases[i].need)
			want = cases[i].need;
		rxh_start(&h, "ramex_t_edge_threads", cases[i].flags);
		ck_assert_msg(http_threads(h.pid) == want,
		              "%s: %d HTTP threads, want %d", cases[i].flags,
		              http_threads(h.pid), want);
		ck_assert_msg((rxh_log_count(&h, "more HTTP threads") > 0) ==
		                  cases[i].logged,
		              "%s: log says \"more HTTP threads\": %d",
		              cases[i].flags, !cases[i].logged);
		rxh_stop(&h);
	}
}
END_TEST

/* A body announced larger than body_limit is refused at once, from its
 * Content-Length, before the client sends it: the 413 problem came only
 * after the whole body (a gigabyte read to be thrown away) or, from a
 * client that waits for an answer first, after connection_timeout_s. */
START_TEST(an_announced_body_too_large_is_refused_before_it_comes)
{
	struct rxh h;
	char buf[4096];
	rxh_start(&h, "ramex_t_edge_413", "");
	int fd = dial(h.port);
	const char *rq = "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	                 "Content-Type: application/json\r\n"
	                 "Content-Length: 1000000000\r\n\r\n{\"market\"";
	ck_assert_int_eq(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	ck_assert_int_eq(raw_read(fd, buf, sizeof buf), 413);
	ck_assert_msg(strstr(buf, "application/problem+json") &&
	                  strstr(buf, "body-too-large"),
	              "%s", buf);
	close(fd);
	/* the route is still checked first */
	fd = dial(h.port);
	rq = "POST /v1/nowhere HTTP/1.1\r\nHost: t\r\n"
	     "Content-Length: 1000000000\r\n\r\n";
	ck_assert_int_eq(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	ck_assert_int_eq(raw_read(fd, buf, sizeof buf), 404);
	close(fd);
	/* and a body within the limit is read as before */
	fd = dial(h.port);
	ck_assert_int_eq(raw_get(fd, "/healthz", buf, sizeof buf), 200);
	close(fd);
	rxh_stop(&h);
}
END_TEST

/* A body is JSON only when it says so: Content-Type application/json (any
 * case, with parameters; a charset, if given, UTF-8). Anything else is 415
 * problem+json and changes nothing; text/plain and a form's type were
 * parsed as JSON and carried out. */
static int post_as(int port, const char *token, const char *ctype,
                   const char *body, char *buf, size_t cap)
{
	char rq[1024];
	int n =
	    snprintf(rq, sizeof rq,
	             "POST /v1/teams HTTP/1.1\r\nHost: t\r\n"
	             "Authorization: Bearer %s\r\n%s%s%s"
	             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
	             token, ctype ? "Content-Type: " : "", ctype ? ctype : "",
	             ctype ? "\r\n" : "", strlen(body), body);
	int fd = dial(port);
	ck_assert_int_eq(write(fd, rq, (size_t)n), n);
	int st = raw_read(fd, buf, cap);
	close(fd);
	return st;
}

START_TEST(a_body_that_is_not_said_to_be_json_is_415)
{
	struct rxh h;
	char buf[4096];
	rxh_start(&h, "ramex_t_edge_415", "");
	static const char *const refused[] = {
	    "text/plain", "application/x-www-form-urlencoded", NULL,
	    "application/json; charset=latin1", "application/jsonp"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		ck_assert_msg(
		    post_as(h.port, h.admin, refused[i], "{\"name\":\"t415\"}",
		            buf, sizeof buf) == 415,
		    "%s: %s", refused[i] ? refused[i] : "(none)", buf);
		ck_assert_msg(strstr(buf, "application/problem+json") &&
		                  strstr(buf, "unsupported-media-type"),
		              "%s", buf);
	}
	ck_assert_int_eq(testdb_scalar_at(h.conninfo,
	                                  "SELECT count(*) FROM teams WHERE "
	                                  "name = 't415'"),
	                 0);
	static const char *const taken[] = {
	    "application/json", "Application/JSON; charset=UTF-8",
	    "application/json;charset=\"utf-8\""};
	for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
		char body[64];
		snprintf(body, sizeof body, "{\"name\":\"t415-%zu\"}", i);
		ck_assert_msg(post_as(h.port, h.admin, taken[i], body, buf,
		                      sizeof buf) == 201,
		              "%s: %s", taken[i], buf);
	}
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	Suite *s = suite_create("http_edge");
	TCase *tc = tcase_create("http_edge");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, streams_and_waiting_orders_hold_no_thread);
	tcase_add_test(tc, first_signed_order_uses_its_nonce_once);
	tcase_add_test(tc, graceful_stop_answers_parked_orders);
	tcase_add_test(tc, batch_places_checks_and_replays);
	tcase_add_test(tc, max_connections_holds_across_threads);
	tcase_add_test(tc, a_burst_of_128_ready_connections_is_answered);
	tcase_add_test(tc, http_threads_follow_cores_and_connections);
	tcase_add_test(tc,
	               an_announced_body_too_large_is_refused_before_it_comes);
	tcase_add_test(tc, a_body_that_is_not_said_to_be_json_is_415);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
