/*
 * loadgen.c — load generator for bench/20-ramexd.sh.
 *
 *   loadgen http PORT TOKEN SELL_ACCOUNT BUY_ACCOUNT CONNS SECONDS
 *       CONNS keep-alive connections on 127.0.0.1:PORT, one order in flight
 *       on each (one epoll thread), alternating sells and buys at one price
 *       so that the book stays small and about half the orders trade. Each
 *       order has a fresh client_order_id. Prints acknowledged orders per
 *       second and p50/p99/max latency of acknowledged orders.
 *   loadgen batch PORT TOKEN SELL_ACCOUNT BUY_ACCOUNT CONNS SECONDS N
 *       the same, but each request is POST /v1/orders/batch with N orders
 *       (alternating sides): counts the orders answered 201, and gives
 *       each the latency of its request.
 *   RAMEX_LOADGEN_TARGETS=PORT/MARKET/BUY_ACCOUNT/BUY_TOKEN,... (http)
 *       spreads the connections over several ramexd instead of PORT, one
 *       market each (bench/26-instances.sh): an instance serves the orders
 *       of the markets it owns, and a perm market's buys are the
 *       operator's, so each target names the account and token of its
 *       buys.
 *   loadgen get PORT PATH CONNS SECONDS
 *       the same connections and loop, but GET PATH (a route that does no
 *       work, such as /healthz): what the HTTP edge and this generator
 *       cost without the writer and PostgreSQL.
 *   loadgen pg CONNINFO CONNS SECONDS
 *       the same machine's rate for one transaction per order: CONNS
 *       threads each INSERT one order row and COMMIT (synchronous_commit
 *       on), over and over.
 *
 * Latencies are kept in a fixed array (no allocation while measuring).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define MAX_CONNS   1024
#define MAX_SAMPLES (8 * 1024 * 1024)

static int64_t *lat;
static long nlat;

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, long ok, long bad, double secs)
{
	qsort(lat, (size_t)nlat, sizeof *lat, cmp64);
	double p50 = nlat ? lat[nlat / 2] / 1e6 : 0;
	double p99 = nlat ? lat[(long)(nlat * 0.99)] / 1e6 : 0;
	double mx = nlat ? lat[nlat - 1] / 1e6 : 0;
	/* this process's own CPU: the third share of the two cores */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	             (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	printf("  %-34s %9.0f /s  (%ld in %.1f s, %ld not acknowledged)  "
	       "p50 %.2f ms  p99 %.2f ms  max %.2f ms  (generator %.0f us "
	       "CPU each)\n",
	       what, ok / secs, ok, secs, bad, p50, p99, mx,
	       ok ? cpu * 1e6 / (double)ok : 0);
}

/* --- http ---------------------------------------------------------------- */

struct conn {
	int fd;
	char out[16384];
	size_t outlen, outoff;
	char in[1 << 17];
	size_t inlen;
	int64_t t0;
	long seq;
	int side;
	int t;         /* its target (RAMEX_LOADGEN_TARGETS) */
	bool want_out; /* EPOLLOUT is asked for */
};

static const char *token;
/* where the orders go: one target (PORT, spot, TOKEN) unless
 * RAMEX_LOADGEN_TARGETS names more */
#define MAX_TARGETS 8
static struct target {
	int port;
	char market[16];
	long buy_acct;
	char buy_token[100];
} targets[MAX_TARGETS];
static int ntargets;
static long sell_acct, buy_acct;
static int uniq;
static const char *get_path; /* loadgen get: GET this instead */
static int per_req = 1;      /* orders in each request (loadgen batch) */

static void build(struct conn *c)
{
	if (get_path) {
		c->outlen = (size_t)snprintf(c->out, sizeof c->out,
		                             "GET %s HTTP/1.1\r\nHost: "
		                             "127.0.0.1\r\n\r\n",
		                             get_path);
		c->outoff = 0;
		c->inlen = 0;
		c->t0 = clock_mono_ns();
		return;
	}
	char body[16000];
	int bl = 0;
	if (per_req > 1)
		bl = snprintf(body, sizeof body, "{\"orders\":[");
	for (int i = 0; i < per_req; i++) {
		int buy = c->side;
		bl += snprintf(body + bl, sizeof body - (size_t)bl,
		               "%s{\"market\":\"%s\",\"account_id\":%ld,"
		               "\"side\":\"%s\",\"pages\":256,\"price\":"
		               "100000,\"client_order_id\":\"lg%d-%d-%ld\"}",
		               i ? "," : "", targets[c->t].market,
		               buy ? targets[c->t].buy_acct : sell_acct,
		               buy ? "buy" : "sell", uniq, c->fd, c->seq++);
		if (per_req > 1)
			c->side = !c->side;
	}
	if (per_req > 1)
		bl += snprintf(body + bl, sizeof body - (size_t)bl, "]}");
	c->outlen = (size_t)snprintf(
	    c->out, sizeof c->out,
	    "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
	    "Bearer %s\r\nContent-Type: application/json\r\nContent-Length: "
	    "%d\r\n\r\n%s",
	    per_req > 1 ? "/v1/orders/batch" : "/v1/orders",
	    per_req == 1 && c->side ? targets[c->t].buy_token : token, bl,
	    body);
	c->outoff = 0;
	c->inlen = 0;
	if (per_req == 1)
		c->side = !c->side;
	c->t0 = clock_mono_ns();
}

/* Returns the status when a whole response is in c->in, else 0. */
static int complete(struct conn *c)
{
	c->in[c->inlen] = 0;
	char *end = strstr(c->in, "\r\n\r\n");
	if (!end)
		return 0;
	char *cl = strcasestr(c->in, "Content-Length:");
	long len = cl && cl < end ? strtol(cl + 15, NULL, 10) : 0;
	if ((size_t)(end + 4 - c->in) + (size_t)len > c->inlen)
		return 0;
	return atoi(c->in + 9);
}

static int dial(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("loadgen: connect");
		exit(1);
	}
	/* a write never blocks the one loop of all the connections */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Writes what is left of c's request. The socket is almost always
 * writable, so the request goes out at once, with no epoll_ctl: the
 * generator shares the cores with what it measures, and every system call
 * it saves is CPU the exchange gets. Only a request the socket could not
 * take whole waits for EPOLLOUT. */
static void send_some(int ep, struct conn *c)
{
	ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
	if (w > 0)
		c->outoff += (size_t)w;
	bool more = c->outoff < c->outlen;
	if (more != c->want_out) {
		struct epoll_event ev = {
		    .events = EPOLLIN | (more ? EPOLLOUT : 0u), .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_out = more;
	}
}

/* The targets: PORT, spot and TOKEN, or RAMEX_LOADGEN_TARGETS (single
 * orders only: a batch has one token for both sides). -1 after saying
 * why. */
static int parse_targets(int port, bool single_target)
{
	const char *e = getenv("RAMEX_LOADGEN_TARGETS");
	ntargets = 0;
	if (!e || !*e || single_target) {
		targets[0].port = port;
		snprintf(targets[0].market, sizeof targets[0].market, "spot");
		targets[0].buy_acct = buy_acct;
		snprintf(targets[0].buy_token, sizeof targets[0].buy_token,
		         "%s", token ? token : "");
		ntargets = 1;
		return 0;
	}
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", e);
	for (char *sv, *t = strtok_r(buf, ",", &sv); t;
	     t = strtok_r(NULL, ",", &sv)) {
		struct target *x = &targets[ntargets];
		if (ntargets == MAX_TARGETS ||
		    sscanf(t, "%d/%15[^/]/%ld/%99s", &x->port, x->market,
		           &x->buy_acct, x->buy_token) != 4) {
			fprintf(
			    stderr,
			    "loadgen: RAMEX_LOADGEN_TARGETS is up to %d "
			    "PORT/MARKET/BUY_ACCOUNT/BUY_TOKEN separated by "
			    "commas\n",
			    MAX_TARGETS);
			return -1;
		}
		ntargets++;
	}
	return ntargets ? 0 : -1;
}

static int run_http(int argc, char **argv)
{
	bool get = strcmp(argv[1], "get") == 0;
	bool bat = strcmp(argv[1], "batch") == 0;
	if (argc != (get ? 6 : bat ? 9 : 8)) {
		fprintf(stderr, "usage: loadgen http PORT TOKEN SELL BUY CONNS "
		                "SECONDS | loadgen batch PORT TOKEN SELL BUY "
		                "CONNS SECONDS N | loadgen get PORT PATH CONNS "
		                "SECONDS\n");
		return 2;
	}
	if (bat) {
		per_req = atoi(argv[8]);
		if (per_req < 2 || per_req > 100) {
			fprintf(stderr, "loadgen: N must be 2 to 100\n");
			return 2;
		}
	}
	int port = atoi(argv[2]);
	int n;
	double secs;
	if (get) {
		get_path = argv[3];
		n = atoi(argv[4]);
		secs = atof(argv[5]);
	} else {
		token = argv[3];
		sell_acct = atol(argv[4]);
		buy_acct = atol(argv[5]);
		n = atoi(argv[6]);
		secs = atof(argv[7]);
	}
	int ok_status = get ? 200 : bat ? 200 : 201;
	if (parse_targets(port, get || bat) < 0)
		return 2;
	uniq = (int)getpid();
	if (n < 1 || n > MAX_CONNS)
		return 2;
	static struct conn conns[MAX_CONNS];
	int ep = epoll_create1(0);
	long ok = 0, bad = 0;
	for (int i = 0; i < n; i++) {
		conns[i].t = i % ntargets;
		conns[i].fd = dial(targets[conns[i].t].port);
		conns[i].side = i % 2;
		struct epoll_event ev = {.events = EPOLLIN,
		                         .data.ptr = &conns[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
	}
	int64_t start = clock_mono_ns(), stop = start + (int64_t)(secs * 1e9);
	for (int i = 0; i < n; i++) {
		build(&conns[i]);
		send_some(ep, &conns[i]);
	}
	int active = n;
	struct epoll_event evs[256];
	while (active > 0) {
		int k = epoll_wait(ep, evs, 256, 1000);
		int64_t t = clock_mono_ns();
		/* a request unanswered this long after the end counts as not
		 * acknowledged, instead of holding the whole run open */
		if (t > stop + 5000000000LL) {
			fprintf(stderr,
			        "loadgen: %d connections had no answer 5 s "
			        "after the end\n",
			        active);
			bad += (long)active * (bat ? per_req : 1);
			break;
		}
		for (int i = 0; i < k; i++) {
			struct conn *c = evs[i].data.ptr;
			if (evs[i].events & EPOLLOUT)
				send_some(ep, c);
			if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
				continue;
			ssize_t r = read(c->fd, c->in + c->inlen,
			                 sizeof c->in - 1 - c->inlen);
			if (r < 0 && errno == EAGAIN)
				continue;
			if (r <= 0) {
				/* its request in flight is lost */
				fprintf(stderr, "loadgen: connection closed\n");
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				active--;
				bad += bat ? per_req : 1;
				continue;
			}
			c->inlen += (size_t)r;
			int st = complete(c);
			if (!st)
				continue;
			int good = st == ok_status;
			if (good && bat) { /* the orders answered 201 */
				int placed = 0;
				for (char *q = strstr(c->in, "\r\n\r\n");
				     (q = strstr(q, "{\"status\":")); q += 10)
					if (strncmp(q + 10, "201", 3) == 0)
						placed++;
				for (int j = 0; j < placed; j++)
					if (nlat < MAX_SAMPLES)
						lat[nlat++] = t - c->t0;
				ok += placed;
				bad += per_req - placed;
			} else if (good) {
				ok++;
				if (nlat < MAX_SAMPLES)
					lat[nlat++] = t - c->t0;
			} else {
				bad++;
				if (bad < 5)
					fprintf(stderr, "loadgen: %d %s\n", st,
					        strstr(c->in, "\r\n\r\n"));
			}
			if (t >= stop) {
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				active--;
				continue;
			}
			build(c);
			send_some(ep, c);
		}
	}
	double took = (clock_mono_ns() - start) / 1e9;
	char what[64];
	if (bat)
		snprintf(what, sizeof what,
		         "ramexd HTTP, batches of %d, %d conns:", per_req, n);
	else
		snprintf(what, sizeof what, "%s, %d connections:",
		         get ? "GET (no work)" : "ramexd HTTP", n);
	report(what, ok, bad, took);
	return 0;
}

/* --- one transaction per order ----------------------------------------- */

static const char *conninfo;
static volatile int stop_pg;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long pg_ok;

static void *pg_worker(void *arg)
{
	long id = (long)arg * 100000000L;
	PGconn *c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "loadgen: %s", PQerrorMessage(c));
		exit(1);
	}
	PQclear(PQexec(c, "SET synchronous_commit = on"));
	while (!stop_pg) {
		char ids[24];
		snprintf(ids, sizeof ids, "%ld", ++id);
		char coid[32];
		snprintf(coid, sizeof coid, "c%ld", id);
		const char *pv[] = {ids, coid};
		int64_t t0 = clock_mono_ns();
		PGresult *r = PQexecParams(
		    c,
		    "INSERT INTO bench_orders (id, account_id, side, pages, "
		    "price, client_order_id) VALUES ($1, 1, 'buy', 256, "
		    "100000, "
		    "$2)",
		    2, NULL, pv, NULL, NULL, 0);
		int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
		int64_t t = clock_mono_ns() - t0;
		pthread_mutex_lock(&mu);
		if (ok) {
			pg_ok++;
			if (nlat < MAX_SAMPLES)
				lat[nlat++] = t;
		}
		pthread_mutex_unlock(&mu);
	}
	PQfinish(c);
	return NULL;
}

static int run_pg(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: loadgen pg CONNINFO CONNS SECONDS\n");
		return 2;
	}
	conninfo = argv[2];
	int n = atoi(argv[3]);
	double secs = atof(argv[4]);
	PGconn *c = PQconnectdb(conninfo);
	PQclear(PQexec(c, "SET client_min_messages = warning; DROP TABLE IF "
	                  "EXISTS bench_orders; CREATE TABLE "
	                  "bench_orders (id bigint PRIMARY KEY, account_id "
	                  "bigint, side text, pages bigint, price bigint, "
	                  "client_order_id text UNIQUE)"));
	PQfinish(c);
	pthread_t th[MAX_CONNS];
	int64_t start = clock_mono_ns();
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], NULL, pg_worker, (void *)i);
	struct timespec ts = {(time_t)secs, (long)((secs - (long)secs) * 1e9)};
	nanosleep(&ts, NULL);
	stop_pg = 1;
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double took = (clock_mono_ns() - start) / 1e9;
	char what[64];
	snprintf(what, sizeof what, "1 transaction/order, %d conns:", n);
	report(what, pg_ok, 0, took);
	return 0;
}

int main(int argc, char **argv)
{
	lat = malloc(MAX_SAMPLES * sizeof *lat);
	if (!lat)
		return 1;
	if (argc > 1 &&
	    (strcmp(argv[1], "http") == 0 || strcmp(argv[1], "get") == 0 ||
	     strcmp(argv[1], "batch") == 0))
		return run_http(argc, argv);
	if (argc > 1 && strcmp(argv[1], "pg") == 0)
		return run_pg(argc, argv);
	fprintf(stderr, "usage: loadgen http ... | loadgen batch ... | loadgen "
	                "get ... | loadgen pg ...\n");
	return 2;
}
