/*
 * test_http_hostile.c — ramexd's HTTP edge against hostile clients, over raw
 * sockets, with a real ramexd and PostgreSQL (exchange/http_guard.h,
 * docs/operations.md "Slow and greedy clients").
 *
 * Slow clients: connections that send one header line at a time, each in
 * time for the idle timeout (which starts again with every byte), held every
 * connection ramexd had, and every other client was turned away
 * (slowloris). A request must now arrive in full within request_timeout_ms
 * of its connection's start, and one address may hold at most
 * max_connections_per_address connections. The deadline must not cut what
 * is not slow: a kept-alive connection idle between requests, pipelined
 * requests, a request that trickles in within its time.
 *
 * Malformed requests: libmicrohttpd 0.9.75 answers some itself, before
 * ramexd sees them, in HTML (docs/operations.md lists them); each must still
 * get its status, and the server must go on serving. What ramexd answers
 * itself, before libmicrohttpd's limits, is problem+json.
 *
 * Paths no route serves, percent-encoded, not UTF-8, made to break a
 * label: each is counted once in /metrics under route="unmatched", none of
 * their bytes gets into it, and it stays Prometheus' text format.
 *
 * The attackers connect from 127.0.0.2 (any 127.x.y.z is this machine), the
 * client that must be served from 127.0.0.1: two addresses, as over a
 * network.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/integration/ramexd_harness.h"

/* A connection to ramexd from `src` (an address of this machine); -1 when
 * refused. */
static int dial_from(int port, const char *src)
{
	struct sockaddr_in me = {.sin_family = AF_INET}, to = me;
	inet_pton(AF_INET, src, &me.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons((uint16_t)port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		s += w, n -= (size_t)w;
	}
	return true;
}

static bool send_str(int fd, const char *s)
{
	return send_all(fd, s, strlen(s));
}

/* Reads what comes on fd into buf (from *n on) until `done` says enough
 * (1), the server closes it (0) or `end` passes (-1). */
static int read_until(int fd, char *buf, size_t cap, size_t *n,
                      long long end, bool (*done)(char *buf, size_t *n,
                                                  size_t cap))
{
	for (;;) {
		long long left = end - clock_mono_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) != 1)
			return -1;
		ssize_t r = read(fd, buf + *n, cap - 1 - *n);
		if (r <= 0)
			return 0;
		*n += (size_t)r;
		buf[*n] = 0;
		if (done(buf, n, cap))
			return 1;
	}
}

static bool whole_response(char *buf, size_t *n, size_t cap)
{
	char *hend = strstr(buf, "\r\n\r\n"),
	     *cl = strcasestr(buf, "Content-Length: ");
	return (hend && cl && strlen(hend + 4) >= strtoul(cl + 16, NULL, 10)) ||
	       *n >= cap - 1;
}

static bool never(char *buf, size_t *n, size_t cap)
{
	(void)buf;
	if (*n >= cap - 1)
		*n = 0; /* keep reading; only the end matters */
	return false;
}

/* Reads one response (status, with it all in buf) within ms; 0 when the
 * server closed the connection first, -1 on time out. */
static int read_response(int fd, char *buf, size_t cap, int ms)
{
	size_t n = 0;
	buf[0] = 0;
	int rc =
	    read_until(fd, buf, cap, &n, clock_mono_ms() + ms, whole_response);
	return rc == 1 && n < cap - 1 ? atoi(buf + 9) : rc == 0 ? 0 : -1;
}

/* Whether the server closes fd within ms (what came before is in buf). */
static bool closed_within(int fd, char *buf, size_t cap, int ms)
{
	size_t n = 0;
	buf[0] = 0;
	return read_until(fd, buf, cap, &n, clock_mono_ms() + ms, never) == 0;
}

/* GET /healthz from 127.0.0.1 on a new connection, again and again (a
 * refused connection is closed unanswered) until it is answered 200:
 * how long that took in ms, or -1 when not within ms. */
static long long served_within(int port, int ms)
{
	char buf[4096];
	long long t0 = clock_mono_ms();
	while (clock_mono_ms() - t0 < ms) {
		int fd = dial_from(port, "127.0.0.1");
		if (fd >= 0) {
			int st = -1;
			if (send_str(fd, "GET /healthz HTTP/1.1\r\nHost: t\r\n"
			                 "Connection: close\r\n\r\n"))
				st = read_response(fd, buf, sizeof buf, 1000);
			close(fd);
			if (st == 200)
				return clock_mono_ms() - t0;
		}
		usleep(20000);
	}
	return -1;
}

/* The text of /metrics (asked from 127.0.0.1; again while the server,
 * just rid of an attack, still counts connections it is closing). */
static const char *metrics_text(int port)
{
	static char buf[65536];
	int st = 0;
	for (long long t0 = clock_mono_ms();
	     st != 200 && clock_mono_ms() - t0 < 5000;) {
		int fd = dial_from(port, "127.0.0.1");
		ck_assert_int_ge(fd, 0);
		if (send_str(fd, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"))
			st = read_response(fd, buf, sizeof buf, 5000);
		close(fd);
		if (st != 200)
			usleep(20000);
	}
	ck_assert_int_eq(st, 200);
	const char *body = strstr(buf, "\r\n\r\n");
	ck_assert_ptr_nonnull(body);
	/* from the line end before it, so that "\nNAME " finds the first
	 * line too */
	return body + 3;
}

/* A counter of /metrics. */
static long metric(int port, const char *name)
{
	char key[128];
	snprintf(key, sizeof key, "\n%s ", name);
	const char *p = strstr(metrics_text(port), key);
	ck_assert_msg(p, "no %s in /metrics", name);
	return strtol(p + strlen(key), NULL, 10);
}

/* --- slowloris --------------------------------------------------------- */

#define SLOW_MAX 128

/* Holds up to n connections from 127.0.0.2, each sending the head of a
 * request one line every line_ms (interval_ms when 0) and never its end,
 * looking at them every interval_ms; with reconnect, a connection closed is
 * opened again then. */
struct slowloris {
	int port, n, interval_ms, line_ms;
	bool reconnect;
	int stop;          /* atomic: set to end it */
	int ready;         /* atomic: the first n connections were tried */
	int got_408;       /* atomic: 408 problem+json answers read */
	int closed;        /* atomic: connections the server closed */
	char first_408[2048];
};

static int slow_open(const struct slowloris *s)
{
	int fd = dial_from(s->port, "127.0.0.2");
	if (fd >= 0 &&
	    !send_str(fd, "GET /healthz HTTP/1.1\r\nHost: t\r\n")) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static void *slowloris_run(void *arg)
{
	struct slowloris *s = arg;
	int fd[SLOW_MAX];
	char buf[2048];
	long long next_line = 0;
	for (int i = 0; i < s->n; i++)
		fd[i] = slow_open(s);
	__atomic_store_n(&s->ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
		usleep((useconds_t)s->interval_ms * 1000);
		bool line = clock_mono_ms() >= next_line;
		if (line)
			next_line = clock_mono_ms() +
			            (s->line_ms ? s->line_ms : s->interval_ms);
		for (int i = 0; i < s->n; i++) {
			if (fd[i] < 0) {
				if (s->reconnect)
					fd[i] = slow_open(s);
				continue;
			}
			ssize_t r = read(fd[i], buf, sizeof buf - 1);
			if (r > 0) {
				buf[r] = 0;
				if (strstr(buf, " 408 ") &&
				    strstr(buf, "application/problem+json") &&
				    strstr(buf, "request-timeout") &&
				    __atomic_fetch_add(&s->got_408, 1,
				                       __ATOMIC_SEQ_CST) == 0)
					snprintf(s->first_408,
					         sizeof s->first_408, "%s", buf);
			}
			bool gone = r == 0 || (r < 0 && errno != EAGAIN);
			if (!gone && line)
				gone = !send_str(fd[i], "X-Slow: 1\r\n");
			if (gone) {
				close(fd[i]);
				fd[i] = s->reconnect ? slow_open(s) : -1;
				__atomic_fetch_add(&s->closed, 1,
				                   __ATOMIC_SEQ_CST);
			}
		}
	}
	for (int i = 0; i < s->n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return NULL;
}

static void slowloris_start(struct slowloris *s, pthread_t *t)
{
	pthread_create(t, NULL, slowloris_run, s);
	while (!__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST))
		usleep(5000);
	usleep(200000); /* the server took in every one it could */
}

static void slowloris_stop(struct slowloris *s, pthread_t t)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
}

/* 60 connections that trickle their heads, against 40 connections at most
 * and no limit per address: without a deadline they hold all 40 for as
 * long as they trickle (the idle timeout never comes). With one, each is
 * answered 408 and closed within request_timeout_ms of its start, and the
 * server serves others again. */
START_TEST(slow_heads_are_closed_at_their_deadline)
{
	struct rxh h;
	pthread_t t;
	rxh_start(&h, "ramex_t_hostile_slow",
	          "--max_connections=40 --max_connections_per_address=0 "
	          "--request_timeout_ms=500 --connection_timeout_s=5");
	struct slowloris s = {.port = h.port, .n = 60, .interval_ms = 50};
	long long t0 = clock_mono_ms();
	slowloris_start(&s, &t);
	/* 20 refused at once, 40 at their deadline */
	while (__atomic_load_n(&s.closed, __ATOMIC_SEQ_CST) < 60 &&
	       clock_mono_ms() - t0 < 5000)
		usleep(10000);
	long long took = clock_mono_ms() - t0;
	slowloris_stop(&s, t);
	ck_assert_msg(s.closed == 60,
	              "%d of 60 slow connections closed in 5 s", s.closed);
	ck_assert_msg(took >= 400, "closed after %lld ms, before the deadline",
	              took);
	ck_assert_int_ge(s.got_408, 40);
	ck_assert_msg(strstr(s.first_408, "request_timeout_ms"), "%s",
	              s.first_408);
	ck_assert_msg(served_within(h.port, 2000) >= 0,
	              "a client was not served after the slow ones");
	ck_assert_int_ge(metric(h.port, "ramex_http_request_timeouts_total"),
	                 40);
	rxh_stop(&h);
	ck_assert_int_ge(rxh_log_count(&h, "request not received in time"), 1);
}
END_TEST

/* Slow clients that reconnect as soon as they are closed: the deadline
 * alone frees their connections only to give them back to them, sooner
 * than anyone else can take one. At max_connections, a new connection takes
 * the place of the one that has waited longest for its request. */
START_TEST(slow_clients_that_reconnect_make_room)
{
	struct rxh h;
	pthread_t t;
	rxh_start(&h, "ramex_t_hostile_churn",
	          "--max_connections=40 --max_connections_per_address=0 "
	          "--request_timeout_ms=500 --connection_timeout_s=5");
	/* a kept-alive connection, idle: the longest waiting, it goes
	 * first, and without a 408 (its client could be sending a request
	 * that would read it as its answer) */
	char buf[4096];
	int idle = dial_from(h.port, "127.0.0.1");
	ck_assert(send_str(idle, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
	ck_assert_int_eq(read_response(idle, buf, sizeof buf, 5000), 200);
	struct slowloris s = {.port = h.port,
	                      .n = 120,
	                      .interval_ms = 2,
	                      .line_ms = 200,
	                      .reconnect = true};
	slowloris_start(&s, &t);
	ck_assert(closed_within(idle, buf, sizeof buf, 3000));
	ck_assert_msg(buf[0] == 0, "the idle connection got: %s", buf);
	close(idle);
	for (int i = 0; i < 5; i++) {
		long long ms = served_within(h.port, 3000);
		ck_assert_msg(ms >= 0,
		              "round %d: a client was not served in 3 s while "
		              "slow clients reconnected without end",
		              i);
	}
	slowloris_stop(&s, t);
	ck_assert_int_gt(metric(h.port, "ramex_http_connections_evicted_total"),
	                 0);
	rxh_stop(&h);
	ck_assert_int_ge(rxh_log_count(&h, "slow connection closed for a new "
	                                   "one"),
	                 1);
}
END_TEST

/* One address that opens connection after connection, each slow, with no
 * deadline: at most max_connections_per_address are its, and the rest of
 * the server serves everyone else. A client that dies with its connections
 * half-sent (kill -9) gives its address's count back. */
START_TEST(one_address_cannot_take_every_connection)
{
	struct rxh h;
	pthread_t t;
	rxh_start(&h, "ramex_t_hostile_greedy",
	          "--max_connections=40 --max_connections_per_address=20 "
	          "--request_timeout_ms=0 --connection_timeout_s=30");
	/* (a line each 100 ms: much faster, and libmicrohttpd ends each
	 * connection itself within a few seconds, its head past 8 KiB) */
	struct slowloris s = {
	    .port = h.port, .n = 60, .interval_ms = 100, .reconnect = true};
	slowloris_start(&s, &t);
	for (int i = 0; i < 5; i++)
		ck_assert_msg(served_within(h.port, 5000) >= 0,
		              "round %d: a client was not served while one "
		              "address opened connections without end",
		              i);
	ck_assert_int_gt(
	    metric(h.port, "ramex_http_connections_refused_per_address_total"),
	    0);
	ck_assert_int_eq(metric(h.port, "ramex_http_connections_refused_total"),
	                 0);
	slowloris_stop(&s, t);

	/* a process killed with its 20 requests half-sent */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (int i = 0; i < 20; i++) {
			int fd = dial_from(h.port, "127.0.0.2");
			if (fd >= 0)
				send_str(fd, "POST /v1/orders HTTP/1.1\r\n"
				             "Host: t\r\nContent-Length: 50\r\n"
				             "\r\n{\"mar");
		}
		pause();
		_exit(0);
	}
	usleep(300000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* its address gets all of its 20 again, and no more */
	int fd[21];
	char buf[4096];
	long long t0 = clock_mono_ms();
	for (int i = 0; i < 20; i++) {
		int st = 0;
		while (st != 200 && clock_mono_ms() - t0 < 5000) {
			fd[i] = dial_from(h.port, "127.0.0.2");
			ck_assert_int_ge(fd[i], 0);
			ck_assert(send_str(fd[i], "GET /healthz HTTP/1.1\r\n"
			                          "Host: t\r\n\r\n"));
			st = read_response(fd[i], buf, sizeof buf, 2000);
			if (st != 200) { /* a count not given back yet */
				close(fd[i]);
				usleep(20000);
			}
		}
		ck_assert_msg(st == 200, "connection %d of 127.0.0.2 refused",
		              i);
	}
	fd[20] = dial_from(h.port, "127.0.0.2");
	ck_assert_int_ge(fd[20], 0);
	send_str(fd[20], "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
	ck_assert_int_eq(read_response(fd[20], buf, sizeof buf, 2000), 0);
	for (int i = 0; i < 21; i++)
		close(fd[i]);
	rxh_stop(&h);
	ck_assert_int_ge(
	    rxh_log_count(&h, "at max_connections_per_address"), 1);
}
END_TEST

/* What the deadline must leave alone, and how it ends what it cuts. */
START_TEST(the_deadline_cuts_only_what_is_late)
{
	struct rxh h;
	char buf[16384];
	rxh_start(&h, "ramex_t_hostile_deadline",
	          "--request_timeout_ms=500 --connection_timeout_s=5");
	const char *get = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

	/* a kept-alive connection idle longer than the deadline between its
	 * requests: idle time is connection_timeout_s's */
	int fd = dial_from(h.port, "127.0.0.1");
	ck_assert(send_str(fd, get));
	ck_assert_int_eq(read_response(fd, buf, sizeof buf, 5000), 200);
	usleep(1200000);
	ck_assert(send_str(fd, get));
	ck_assert_int_eq(read_response(fd, buf, sizeof buf, 5000), 200);

	/* twenty requests pipelined in one write */
	char many[20 * 64] = "";
	for (int i = 0; i < 20; i++)
		strcat(many, get);
	ck_assert(send_str(fd, many));
	int answered = 0;
	size_t n = 0;
	for (long long end = clock_mono_ms() + 5000;
	     answered < 20 && clock_mono_ms() < end;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) != 1)
			continue;
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
		ck_assert_int_gt(r, 0);
		n += (size_t)r;
		buf[n] = 0;
		answered = 0;
		for (char *q = buf; (q = strstr(q, "HTTP/1.1 200 ")); q++)
			answered++;
		ck_assert_uint_lt(n, sizeof buf - 1);
	}
	ck_assert_msg(answered == 20, "%d of 20 pipelined requests answered",
	              answered);
	close(fd);

	/* a head that trickles in, in time */
	fd = dial_from(h.port, "127.0.0.1");
	const char *lines[] = {"GET /healthz HTTP/1.1\r\n", "Host: t\r\n",
	                       "X-A: 1\r\n", "X-B: 2\r\n", "\r\n"};
	for (int i = 0; i < 5; i++) {
		ck_assert(send_str(fd, lines[i]));
		usleep(30000);
	}
	ck_assert_int_eq(read_response(fd, buf, sizeof buf, 5000), 200);
	close(fd);

	/* a body that trickles past the deadline: 408 problem+json, closed */
	fd = dial_from(h.port, "127.0.0.1");
	ck_assert(send_str(fd, "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	                       "Content-Type: application/json\r\n"
	                       "Content-Length: 100\r\n\r\n"));
	int st = 0;
	for (int i = 0; i < 40 && st == 0; i++) {
		if (!send_str(fd, "{ "))
			break;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) == 1)
			st = read_response(fd, buf, sizeof buf, 2000);
	}
	ck_assert_msg(st == 408, "a late body: %d %s", st, buf);
	ck_assert_msg(strstr(buf, "application/problem+json") &&
	                  strstr(buf, "urn:ramex:problem:request-timeout") &&
	                  strstr(buf, "Connection: close"),
	              "%s", buf);
	ck_assert(closed_within(fd, buf, sizeof buf, 2000));
	close(fd);

	/* a head whose body never comes after "100 Continue": closed (a
	 * 408 there could cross the 100 Continue on the wire) */
	fd = dial_from(h.port, "127.0.0.1");
	ck_assert(send_str(fd, "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	                       "Content-Type: application/json\r\n"
	                       "Expect: 100-continue\r\n"
	                       "Content-Length: 100\r\n\r\n"));
	ck_assert(closed_within(fd, buf, sizeof buf, 3000));
	close(fd);

	/* a connection that says nothing: 408 at its deadline */
	fd = dial_from(h.port, "127.0.0.1");
	long long t0 = clock_mono_ms();
	ck_assert_int_eq(read_response(fd, buf, sizeof buf, 3000), 408);
	ck_assert_int_ge(clock_mono_ms() - t0, 400);
	close(fd);
	rxh_stop(&h);
}
END_TEST

/* A deadline below 100 ms is refused at start, with what to set. */
START_TEST(a_deadline_too_short_is_refused_at_start)
{
	char log[512];
	snprintf(log, sizeof log, "%s/ramexd-hostile-start.log",
	         getenv("RAMEX_TEST_OUTPUT") ? getenv("RAMEX_TEST_OUTPUT")
	                                     : "/tmp");
	unlink(log);
	char bin[512];
	snprintf(bin, sizeof bin, "%s/san/bin/ramexd",
	         getenv("RAMEX_BUILD") ? getenv("RAMEX_BUILD") : "build");
	char *argv[] = {"ramexd", "--request_timeout_ms=50",
	                "--db=dbname=ramex_t_hostile_none", NULL};
	pid_t pid = rxh_spawn(bin, argv, log);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	FILE *f = fopen(log, "r");
	ck_assert_ptr_nonnull(f);
	char line[1024];
	bool seen = false;
	while (fgets(line, sizeof line, f))
		seen |= strstr(line, "request_timeout_ms must be 0") != NULL;
	fclose(f);
	ck_assert_msg(seen, "no actionable error in %s", log);
}
END_TEST

/* --- malformed requests ------------------------------------------------ */

struct malformed {
	const char *what;
	const char *rq; /* NULL: built in the test */
	int status;
	bool problem; /* problem+json (ramexd's), or libmicrohttpd's HTML */
};

/* Each gets its status on its own connection, and the server serves the
 * next client. Those libmicrohttpd answers are listed in
 * docs/operations.md ("What libmicrohttpd answers itself"): if one of them
 * changes (another libmicrohttpd), that list must too. */
START_TEST(malformed_requests_get_their_status)
{
	struct rxh h;
	static char buf[65536], big[12000];
	rxh_start(&h, "ramex_t_hostile_malformed", "--body_limit=1024");
	const struct malformed m[] = {
	    /* ramexd's own, ahead of libmicrohttpd's limits */
	    {"a target over 2048 bytes", NULL, 414, true},
	    {"a body announced over body_limit",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Length: 5000\r\n\r\n",
	     413, true},
	    {"a chunked body over body_limit", NULL, 413, true},
	    /* a body framed two ways, which a proxy in front may read the
	     * other way (request smuggling): libmicrohttpd took one of them
	     * in silence, and an order was placed (found from outside) */
	    {"two Content-Lengths",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\n"
	     "Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
	     400, true},
	    {"Content-Length beside chunked",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\nContent-Length: 7\r\n"
	     "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
	     400, true},
	    /* libmicrohttpd answered nothing until the deadline */
	    {"a transfer coding other than chunked",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\n"
	     "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
	     400, true},
	    /* a header of one value sent twice: libmicrohttpd gave the
	     * first, a proxy may read the last (found from outside: an
	     * order was placed under the first of two Idempotency-Keys) */
	    {"two Idempotency-Keys",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\nIdempotency-Key: a\r\n"
	     "Idempotency-Key: b\r\nContent-Length: 2\r\n\r\n{}",
	     400, true},
	    {"two Content-Types",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\nContent-Type: text/plain\r\n"
	     "Content-Length: 2\r\n\r\n{}",
	     400, true},
	    {"two Last-Event-IDs",
	     "GET /v1/events HTTP/1.1\r\nHost: t\r\nLast-Event-ID: 1\r\n"
	     "Last-Event-ID: 2\r\n\r\n",
	     400, true},
	    /* it was read as if it were not compressed */
	    {"a compressed body",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
	     "Content-Length: 2\r\n\r\n{}",
	     415, true},
	    /* libmicrohttpd's */
	    {"HTTP/2.0", "GET /healthz HTTP/2.0\r\nHost: t\r\n\r\n", 505,
	     false},
	    {"HTTP/0.9", "GET /healthz HTTP/0.9\r\nHost: t\r\n\r\n", 505,
	     false},
	    {"no version", "GET /healthz\r\nHost: t\r\n\r\n", 400, false},
	    {"a bad version", "GET /healthz HTXP/1.1\r\nHost: t\r\n\r\n", 400,
	     false},
	    {"a header line without a colon",
	     "GET /healthz HTTP/1.1\r\nHost: t\r\nnocolon\r\n\r\n", 400,
	     false},
	    {"a Content-Length that is not a number",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Length: abc\r\n\r\n",
	     400, false},
	    {"a Content-Length past 2^64",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Content-Length: 99999999999999999999999\r\n\r\n",
	     413, false},
	    {"a malformed chunk",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
	     400, false},
	    {"a chunk size past 2^64",
	     "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
	     "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFFFF\r\n",
	     413, false},
	    {"a request line over 8 KiB", NULL, 414, false},
	    {"a head over 8 KiB", NULL, 431, false},
	};
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
		const char *rq = m[i].rq;
		if (!rq && strstr(m[i].what, "target over")) {
			int n = snprintf(big, sizeof big, "GET /healthz?a=");
			memset(big + n, 'a', 3000);
			strcpy(big + n + 3000, " HTTP/1.1\r\nHost: t\r\n\r\n");
			rq = big;
		} else if (!rq && strstr(m[i].what, "chunked")) {
			int n = snprintf(big, sizeof big,
			                 "POST /v1/orders HTTP/1.1\r\nHost: t\r\n"
			                 "Transfer-Encoding: chunked\r\n\r\n");
			for (int k = 0; k < 4; k++) {
				n += snprintf(big + n, sizeof big - (size_t)n,
				              "200\r\n");
				memset(big + n, ' ', 512);
				n += 512;
				n += snprintf(big + n, sizeof big - (size_t)n,
				              "\r\n");
			}
			snprintf(big + n, sizeof big - (size_t)n, "0\r\n\r\n");
			rq = big;
		} else if (!rq && strstr(m[i].what, "request line")) {
			int n = snprintf(big, sizeof big, "GET /healthz?a=");
			memset(big + n, 'a', 9000);
			strcpy(big + n + 9000, " HTTP/1.1\r\nHost: t\r\n\r\n");
			rq = big;
		} else if (!rq) {
			int n = snprintf(big, sizeof big,
			                 "GET /healthz HTTP/1.1\r\nHost: t\r\n"
			                 "X-Big: ");
			memset(big + n, 'a', 9000);
			strcpy(big + n + 9000, "\r\n\r\n");
			rq = big;
		}
		int fd = dial_from(h.port, "127.0.0.1");
		ck_assert_int_ge(fd, 0);
		ck_assert(send_str(fd, rq));
		int st = read_response(fd, buf, sizeof buf, 5000);
		ck_assert_msg(st == m[i].status, "%s: %d, not %d: %.300s",
		              m[i].what, st, m[i].status, buf);
		bool problem = strstr(buf, "application/problem+json") != NULL;
		ck_assert_msg(problem == m[i].problem, "%s: %s problem+json",
		              m[i].what, problem ? "is" : "is not");
		if (m[i].problem && m[i].status == 400)
			ck_assert_msg(strstr(buf, "Connection: close"),
			              "%s: the connection is kept: %.300s",
			              m[i].what, buf);
		close(fd);
		ck_assert_msg(served_within(h.port, 5000) >= 0,
		              "after %s, the next client was not served",
		              m[i].what);
	}
	rxh_stop(&h);
}
END_TEST

/* --- /metrics under hostile paths ------------------------------------- */

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*; a label name: no colon) at
 * *p: true, and *p past it. */
static bool prom_name(const char **p, bool colon)
{
	const char *s = *p;
	for (;; s++) {
		char c = *s;
		bool letter = (c >= 'a' && c <= 'z') ||
		              (c >= 'A' && c <= 'Z') || c == '_' ||
		              (colon && c == ':');
		if (!letter && !(s > *p && c >= '0' && c <= '9'))
			break;
	}
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* Whether s[0..n) is UTF-8: no stray continuation byte, no overlong
 * form, no surrogate, nothing past U+10FFFF. */
static bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned c = u[i], k = c < 0x80                ? 0
		                       : c >= 0xC2 && c < 0xE0 ? 1
		                       : c >= 0xE0 && c < 0xF0 ? 2
		                       : c >= 0xF0 && c < 0xF5 ? 3
		                                               : 9;
		if (k == 9 || i + k >= n)
			return false;
		unsigned cp = k == 0 ? c : c & (0x3F >> k);
		for (unsigned j = 1; j <= k; j++) {
			if ((u[i + j] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (u[i + j] & 0x3F);
		}
		if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
		    (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
			return false;
		i += k + 1;
	}
	return true;
}

/* Whether `text` is Prometheus' text format (0.0.4) as a scraper reads
 * it: names and label names of its alphabet, label values quoted with
 * only \\, \" and \n escaped and UTF-8, a number after each sample, a
 * family's TYPE once and before its samples, no series twice. NULL, or
 * what is wrong and where. */
static const char *prom_invalid(const char *text)
{
	static char why[256];
	enum { MAXS = 1024, MAXF = 128 };
	static char series[MAXS][160], typed[MAXF][96], sampled[MAXF][96];
	size_t ns = 0, nt = 0, nsam = 0;
	const char *line = text;
	for (int ln = 1; *line; ln++) {
		const char *end = strchr(line, '\n');
		if (!end) {
			snprintf(why, sizeof why, "line %d has no line end",
			         ln);
			return why;
		}
		char l[1024];
		size_t len = (size_t)(end - line);
		ck_assert_uint_lt(len, sizeof l);
		memcpy(l, line, len);
		l[len] = 0;
		line = end + 1;
		if (!l[0])
			continue;
		if (!strncmp(l, "# TYPE ", 7) || !strncmp(l, "# HELP ", 7)) {
			const char *p = l + 7, *n0 = p;
			if (!prom_name(&p, true) || *p != ' ')
				goto bad;
			if (l[2] == 'H')
				continue;
			if (strcmp(p + 1, "counter") &&
			    strcmp(p + 1, "gauge") &&
			    strcmp(p + 1, "histogram") &&
			    strcmp(p + 1, "summary") &&
			    strcmp(p + 1, "untyped"))
				goto bad;
			char fam[96];
			snprintf(fam, sizeof fam, "%.*s", (int)(p - n0), n0);
			for (size_t i = 0; i < nt; i++)
				if (!strcmp(typed[i], fam))
					goto bad; /* typed twice */
			for (size_t i = 0; i < nsam; i++)
				if (!strcmp(sampled[i], fam))
					goto bad; /* typed after its samples */
			ck_assert_uint_lt(nt, MAXF);
			snprintf(typed[nt++], sizeof typed[0], "%s", fam);
			continue;
		}
		if (l[0] == '#')
			continue;
		const char *p = l;
		if (!prom_name(&p, true))
			goto bad;
		char name[96];
		snprintf(name, sizeof name, "%.*s", (int)(p - l), l);
		if (*p == '{') {
			p++;
			while (*p != '}') {
				if (!prom_name(&p, false) || *p++ != '=' ||
				    *p++ != '"')
					goto bad;
				const char *v = p;
				for (; *p && *p != '"'; p++)
					if (*p == '\\' &&
					    (!*++p || !strchr("\\\"n", *p)))
						goto bad;
				if (*p != '"' ||
				    !utf8_valid(v, (size_t)(p - v)))
					goto bad;
				p++;
				if (*p == ',')
					p++;
				else if (*p != '}')
					goto bad;
			}
			p++;
		}
		char key[160];
		snprintf(key, sizeof key, "%.*s", (int)(p - l), l);
		if (*p++ != ' ')
			goto bad;
		char *num_end;
		if (strcmp(p, "+Inf") && strcmp(p, "-Inf") &&
		    strcmp(p, "NaN") &&
		    (strtod(p, &num_end), *num_end || num_end == p))
			goto bad;
		for (size_t i = 0; i < ns; i++)
			if (!strcmp(series[i], key))
				goto bad; /* a series twice */
		ck_assert_uint_lt(ns, MAXS);
		snprintf(series[ns++], sizeof series[0], "%s", key);
		/* its family: a histogram's _bucket, _sum and _count are its */
		static const char *const sfx[] = {"_bucket", "_sum", "_count"};
		for (size_t k = 0; k < 3; k++) {
			size_t a = strlen(name), b = strlen(sfx[k]);
			if (a > b && !strcmp(name + a - b, sfx[k]))
				for (size_t i = 0; i < nt; i++)
					if (strlen(typed[i]) == a - b &&
					    !strncmp(typed[i], name, a - b))
						name[a - b] = 0;
		}
		bool seen = false;
		for (size_t i = 0; i < nsam && !seen; i++)
			seen = !strcmp(sampled[i], name);
		if (!seen) {
			ck_assert_uint_lt(nsam, MAXF);
			snprintf(sampled[nsam++], sizeof sampled[0], "%s",
			         name);
		}
		continue;
	bad:
		snprintf(why, sizeof why, "line %d: %.200s", ln, l);
		return why;
	}
	return NULL;
}

/* The requests of /metrics' route="unmatched" series, whatever their
 * status class. */
static long unmatched(const char *text)
{
	long n = 0;
	for (const char *p = text; (p = strstr(p, "route=\"unmatched\"")); p++)
		n += strtol(strstr(p, "} ") + 2, NULL, 10);
	return n;
}

/* /metrics once its unmatched count reached `want` (at most 5 s): a
 * request is counted when libmicrohttpd reports it completed, which may
 * be after its client read the answer. A count past `want` shows. */
static const char *metrics_settled(int port, long want)
{
	const char *t = metrics_text(port);
	for (int i = 0; i < 500 && unmatched(t) < want; i++) {
		usleep(10000);
		t = metrics_text(port);
	}
	return t;
}

/* A request no route serves (404; 405, a known path with another method;
 * 400 or 414, a target refused before routing) is counted under one
 * label, route="unmatched" with method="", never its path or method: a
 * client cannot add series to /metrics with paths of its own (how many
 * there are is bounded by the route table), nor break its format with the
 * bytes it sends. Each of these is counted once and /metrics stays
 * Prometheus' text format. */
START_TEST(unmatched_requests_are_counted_under_one_label)
{
	struct rxh h;
	static char buf[65536];
	static const struct {
		const char *line;
		int status;
	} m[] = {
	    {"GET /%FF%FE HTTP/1.1", 400},      /* not UTF-8 once decoded */
	    {"GET /\xff\xfe/x HTTP/1.1", 400},  /* not UTF-8 as sent */
	    {"GET /caf\xc3\xa9 HTTP/1.1", 400}, /* raw UTF-8: not a URL */
	    {"GET /%22%7D%20fake_metric%201%0A HTTP/1.1", 400},
	    {"GET /\"}fake_metric HTTP/1.1", 404},
	    {"GET /a%00b HTTP/1.1", 400},
	    {"GET /a%zz HTTP/1.1", 400},
	    {"GET /v1/%E2%80%AE%E2%80%AEevil HTTP/1.1", 404},
	    {"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1", 404},
	    {"GET http://evil.example/x HTTP/1.1", 404},
	    {"FOO /evil HTTP/1.1", 404},
	    {"G\xffT /evil HTTP/1.1", 404},
	    {"PATCH /v1/orders HTTP/1.1", 405},
	};
	const size_t n = sizeof m / sizeof m[0];
	/* the check of the format tells what a scraper refuses */
	ck_assert_ptr_null(
	    prom_invalid("# TYPE a histogram\na_bucket{le=\"+Inf\"} 1\n"
	                 "a_count 1\nb{r=\"x\\\"y\",} 2.5\n\n"));
	static const char *const refused[] = {
	    "a{r=\"x\"y\"} 1\n",
	    "a 1\na 1\n",
	    "a{r=\"\xff\"} 1\n",
	    "a 1\n# TYPE a gauge\n",
	    "a x\n",
	    "a 1",
	    "a{r=\"\\x\"} 1\n",
	    "a{r=\"x\\\n",
	    "a{r=\"x\"}1\n",
	    "1a 1\n",
	    "# TYPE a gauge\n# TYPE a gauge\n"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		ck_assert_msg(prom_invalid(refused[i]), "taken: %s",
		              refused[i]);
	rxh_start(&h, "ramex_t_hostile_unmatched", "");

	/* one 404: one more under the label, in the 4xx class */
	const char *t = metrics_text(h.port);
	ck_assert_msg(!prom_invalid(t), "%s", prom_invalid(t));
	long before = unmatched(t);
	ck_assert_int_eq(rxh_status(&h, "GET", "/nowhere", NULL, NULL, NULL),
	                 404);
	t = metrics_settled(h.port, before + 1);
	ck_assert_int_eq(unmatched(t), before + 1);
	ck_assert_msg(strstr(t, "ramex_http_requests_total{method=\"\",route="
	                        "\"unmatched\",code=\"4xx\"} "),
	              "%s", t);
	before++;

	for (size_t i = 0; i < n; i++) {
		char rq[512];
		snprintf(rq, sizeof rq,
		         "%s\r\nHost: t\r\nConnection: close\r\n\r\n",
		         m[i].line);
		int fd = dial_from(h.port, "127.0.0.2");
		ck_assert_int_ge(fd, 0);
		ck_assert(send_str(fd, rq));
		int st = read_response(fd, buf, sizeof buf, 5000);
		close(fd);
		ck_assert_msg(st == m[i].status, "%s: %d, not %d: %.300s",
		              m[i].line, st, m[i].status, buf);
	}
	t = metrics_settled(h.port, before + (long)n);
	const char *why = prom_invalid(t);
	ck_assert_msg(!why, "/metrics after hostile paths: %s", why);
	ck_assert_int_eq(unmatched(t), before + (long)n);
	/* nothing of what they sent */
	static const char *const sent[] = {
	    "fake_metric", "evil", "passwd", "\xff", "\xc3", "FOO", "PATCH"};
	for (size_t i = 0; i < sizeof sent / sizeof sent[0]; i++)
		ck_assert_msg(!strstr(t, sent[i]), "\"%s\" in /metrics",
		              sent[i]);
	/* every route label is a route's pattern, or the one label */
	for (const char *p = t; (p = strstr(p, "route=\"")); p++)
		ck_assert_msg(p[7] == '/' || !strncmp(p + 7, "unmatched\"", 10),
		              "a route label %.40s", p);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	Suite *s = suite_create("http_hostile");
	TCase *tc = tcase_create("http_hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, slow_heads_are_closed_at_their_deadline);
	tcase_add_test(tc, slow_clients_that_reconnect_make_room);
	tcase_add_test(tc, one_address_cannot_take_every_connection);
	tcase_add_test(tc, the_deadline_cuts_only_what_is_late);
	tcase_add_test(tc, a_deadline_too_short_is_refused_at_start);
	tcase_add_test(tc, malformed_requests_get_their_status);
	tcase_add_test(tc, unmatched_requests_are_counted_under_one_label);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
