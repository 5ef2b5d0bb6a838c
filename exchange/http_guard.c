/*
 * http_guard.c — see http_guard.h.
 *
 * The records of the open connections are a list under one mutex, taken when
 * a connection opens or closes and by the sweep: never per request. The
 * sweep holds the mutex while it shuts a socket down, and a record leaves the
 * list (http_guard_closed, called by libmicrohttpd before it closes the
 * socket) under the same mutex, so the socket the sweep shuts down is still
 * the connection's, never a number already given to another one.
 *
 * The 408 is written by the sweep itself, on its thread: libmicrohttpd has
 * nothing to say to a request it has not handed to the access handler. It is
 * written only while libmicrohttpd cannot be writing: the head still coming
 * (HEAD), or the body (BODY: after its first bytes, so that a "100 Continue"
 * is already out). Between the head and the first byte of the body (HEADERS)
 * a "100 Continue" may be on its way, and the connection is only closed.
 * A kept-alive connection in HEAD is closed without it too: it may be idle,
 * and a request its client sends at that moment would read the 408 as its
 * answer; a connection closed unanswered is one it retries. (libmicrohttpd's
 * own error answers, for a head it cannot parse, are written in HEAD: a
 * deadline passing during those few hundred bytes could mix the two; the
 * connection is closed either way.)
 */
#include "exchange/http_guard.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "exchange/metrics.h"

enum { PH_HEAD, PH_HEADERS, PH_BODY, PH_SERVING, PH_CLOSING };

struct http_guard_conn {
	struct http_guard_conn *prev, *next; /* g->conns, under g->mu */
	struct http_guard *g;
	int fd;
	uint32_t addr; /* IPv4, host order; 0: not IPv4 */
	bool has_addr; /* counted in g->slots */
	atomic_int phase;
	atomic_llong deadline_ms; /* CLOCK_MONOTONIC_COARSE */
	atomic_llong since_ms;    /* accepted, or the last answer sent */
	atomic_bool kept;         /* answered once: kept alive since */
};

struct addr_slot {
	uint32_t addr;
	int n; /* open connections; 0: the slot is free */
};

struct http_guard {
	struct http_guard_opts o;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* stopping */
	bool stopping;
	bool has_sweep;
	pthread_t sweep;
	struct http_guard_conn *conns;
	struct addr_slot *slots;
	size_t mask;
	long long refused_log_s, closed_log_s, evicted_log_s;
	char resp[768]; /* the 408, whole */
	size_t resp_len;
};

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* --- connections per address (open addressing, under g->mu) ------------ */

static size_t slot_home(const struct http_guard *g, uint32_t a)
{
	return (size_t)((a * 2654435761u) >> 7) & g->mask;
}

static size_t slot_find(const struct http_guard *g, uint32_t a)
{
	size_t i = slot_home(g, a);
	while (g->slots[i].n && g->slots[i].addr != a)
		i = (i + 1) & g->mask;
	return i;
}

/* Frees slot i and moves back the entries of its run that would no longer
 * be found (linear probing's deletion, no tombstones). */
static void slot_free(struct http_guard *g, size_t i)
{
	size_t j = i;
	for (;;) {
		j = (j + 1) & g->mask;
		if (!g->slots[j].n)
			break;
		size_t k = slot_home(g, g->slots[j].addr);
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		g->slots[i] = g->slots[j];
		i = j;
	}
	g->slots[i].n = 0;
}

static bool ipv4_of(const struct sockaddr *sa, uint32_t *a)
{
	if (!sa || sa->sa_family != AF_INET)
		return false; /* ramexd listens on IPv4 only */
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
	*a = ntohl(in->sin_addr.s_addr);
	return true;
}

static const char *addr_text(uint32_t a, char *buf, size_t len)
{
	struct in_addr in = {.s_addr = htonl(a)};
	if (!inet_ntop(AF_INET, &in, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* Whether now is a second in which nothing was logged yet (*last). */
static bool log_due(long long *last)
{
	long long s = now_ms() / 1000;
	if (s <= *last)
		return false;
	*last = s;
	return true;
}

bool http_guard_admit(struct http_guard *g, const struct sockaddr *addr)
{
	uint32_t a;
	if (g->o.per_address <= 0 || !ipv4_of(addr, &a))
		return true;
	pthread_mutex_lock(&g->mu);
	size_t i = slot_find(g, a);
	int n = g->slots[i].n;
	bool ok = n < g->o.per_address;
	bool say = !ok && log_due(&g->refused_log_s);
	pthread_mutex_unlock(&g->mu);
	if (ok)
		return true;
	metrics_http_refused_per_address();
	if (say) {
		char at[INET_ADDRSTRLEN];
		log_warn("connection refused: at max_connections_per_address",
		         "addr=%s open=%d max_connections_per_address=%d "
		         "hint=\"%s\"",
		         addr_text(a, at, sizeof at), n, g->o.per_address,
		         "one address holds that many connections: a client "
		         "that opens too many, or a proxy in front (then every "
		         "client has its address: set "
		         "max_connections_per_address=0 and limit clients in "
		         "the proxy)");
	}
	return false;
}

struct http_guard_conn *http_guard_opened(struct http_guard *g, int fd,
                                          const struct sockaddr *addr)
{
	struct http_guard_conn *c = calloc(1, sizeof *c);
	if (!c) {
		log_warn("connection closed: out of memory", "fd=%d", fd);
		shutdown(fd, SHUT_RDWR);
		return NULL;
	}
	c->g = g;
	c->fd = fd;
	atomic_init(&c->phase, PH_HEAD);
	long long now = now_ms();
	atomic_init(&c->since_ms, now);
	atomic_init(&c->kept, false);
	atomic_init(&c->deadline_ms, now + g->o.deadline_ms);
	bool v4 = ipv4_of(addr, &c->addr); /* (kept for the log) */
	pthread_mutex_lock(&g->mu);
	if (g->o.per_address > 0 && v4) {
		size_t i = slot_find(g, c->addr);
		if (!g->slots[i].n)
			g->slots[i].addr = c->addr;
		g->slots[i].n++;
		c->has_addr = true;
	}
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	pthread_mutex_unlock(&g->mu);
	return c;
}

void http_guard_closed(struct http_guard *g, struct http_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->has_addr) {
		size_t i = slot_find(g, c->addr);
		assert(g->slots[i].n > 0 && g->slots[i].addr == c->addr);
		if (--g->slots[i].n == 0)
			slot_free(g, i);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&g->mu);
	free(c);
}

/* --- a request's phases ------------------------------------------------ */

bool http_guard_head_in(struct http_guard_conn *c)
{
	int ph = PH_HEAD;
	return !c ||
	       atomic_compare_exchange_strong(&c->phase, &ph, PH_HEADERS) ||
	       ph != PH_CLOSING;
}

void http_guard_body_in(struct http_guard_conn *c)
{
	int ph = PH_HEADERS;
	if (c && atomic_load_explicit(&c->phase, memory_order_relaxed) == ph)
		atomic_compare_exchange_strong(&c->phase, &ph, PH_BODY);
}

bool http_guard_serving(struct http_guard_conn *c)
{
	if (!c)
		return true;
	int ph = atomic_load(&c->phase);
	while (ph != PH_CLOSING && ph != PH_SERVING)
		if (atomic_compare_exchange_weak(&c->phase, &ph, PH_SERVING))
			return true;
	return ph != PH_CLOSING;
}

void http_guard_done(struct http_guard_conn *c)
{
	if (!c)
		return;
	const struct http_guard *g = c->g;
	long long now = now_ms();
	atomic_store_explicit(&c->since_ms, now, memory_order_relaxed);
	atomic_store_explicit(&c->kept, true, memory_order_relaxed);
	atomic_store_explicit(&c->deadline_ms,
	                      now + g->o.keepalive_ms + g->o.deadline_ms,
	                      memory_order_relaxed);
	int ph = atomic_load(&c->phase);
	while (ph != PH_CLOSING)
		if (atomic_compare_exchange_weak(&c->phase, &ph, PH_HEAD))
			break;
}

/* --- the sweep --------------------------------------------------------- */

/* Ends connection c, whose phase was ph (now CLOSING): the 408 where it
 * cannot cross another answer (the top of this file), and the socket shut
 * down; libmicrohttpd sees the client gone and closes it. Under g->mu. */
static void cut(const struct http_guard *g, const struct http_guard_conn *c,
                int ph)
{
	if (ph == PH_BODY || (ph == PH_HEAD && !atomic_load(&c->kept)))
		(void)send(c->fd, g->resp, g->resp_len,
		           MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(c->fd, SHUT_RDWR);
}

/* Closes the connections past their deadline; under g->mu. Returns how many,
 * and the address and phase of one of them, for the log. */
static int sweep_once(struct http_guard *g, uint32_t *addr, int *phase)
{
	long long now = now_ms();
	int n = 0;
	for (struct http_guard_conn *c = g->conns; c; c = c->next) {
		int ph = atomic_load(&c->phase);
		if (ph >= PH_SERVING || now < atomic_load(&c->deadline_ms))
			continue;
		if (!atomic_compare_exchange_strong(&c->phase, &ph,
		                                    PH_CLOSING))
			continue; /* served or answered meanwhile */
		cut(g, c, ph);
		*addr = c->addr;
		*phase = ph;
		n++;
	}
	return n;
}

bool http_guard_evict(struct http_guard *g)
{
	if (g->o.deadline_ms <= 0)
		return false;
	long long now = now_ms();
	/* never one that came in the last 100 ms (a tenth of the deadline
	 * when that is less): a request sent at once is in by then */
	long long floor = g->o.deadline_ms / 10 < 100 ? g->o.deadline_ms / 10
	                                              : 100;
	struct http_guard_conn *old = NULL;
	long long old_since = 0;
	int old_ph = 0;
	bool say = false;
	pthread_mutex_lock(&g->mu);
	for (int tries = 0; tries < 3; tries++) {
		old = NULL;
		for (struct http_guard_conn *c = g->conns; c; c = c->next) {
			int ph = atomic_load(&c->phase);
			long long since = atomic_load(&c->since_ms);
			if (ph >= PH_SERVING || now - since < floor)
				continue;
			if (!old || since < old_since)
				old = c, old_since = since, old_ph = ph;
		}
		if (!old || atomic_compare_exchange_strong(&old->phase, &old_ph,
		                                           PH_CLOSING))
			break;
		old = NULL; /* it moved on meanwhile: look again */
	}
	if (old) {
		cut(g, old, old_ph);
		say = log_due(&g->evicted_log_s);
	}
	uint32_t addr = old ? old->addr : 0;
	pthread_mutex_unlock(&g->mu);
	if (!old)
		return false;
	metrics_http_evicted();
	if (say) {
		char at[INET_ADDRSTRLEN];
		log_warn("slow connection closed for a new one: at "
		         "max_connections",
		         "addr=%s waiting_ms=%lld hint=\"%s\"",
		         addr_text(addr, at, sizeof at), now - old_since,
		         "every connection is taken, and the oldest one "
		         "that had not sent its request in full made room; "
		         "many of them are slow clients (slowloris) or idle "
		         "ones: raise max_connections if they are real");
	}
	return true;
}

static void *sweep(void *arg)
{
	struct http_guard *g = arg;
	long tick = g->o.deadline_ms / 4;
	tick = tick < 10 ? 10 : tick > 1000 ? 1000 : tick;
	int pending = 0; /* closed since the last log line */
	uint32_t addr = 0; /* and the last of them */
	int phase = PH_HEAD;
	pthread_mutex_lock(&g->mu);
	while (!g->stopping) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += tick * 1000000;
		t.tv_sec += t.tv_nsec / 1000000000;
		t.tv_nsec %= 1000000000;
		while (!g->stopping &&
		       pthread_cond_timedwait(&g->wake, &g->mu, &t) != ETIMEDOUT)
			;
		if (g->stopping)
			break;
		int n = sweep_once(g, &addr, &phase);
		if (n == 0 && pending == 0)
			continue;
		pending += n;
		bool say = log_due(&g->closed_log_s);
		pthread_mutex_unlock(&g->mu);
		metrics_http_deadline_closed(n);
		if (say) {
			char at[INET_ADDRSTRLEN];
			log_warn("request not received in time: connection closed",
			         "closed=%d addr=%s phase=%s "
			         "request_timeout_ms=%d hint=\"%s\"",
			         pending, addr_text(addr, at, sizeof at),
			         phase == PH_HEAD      ? "head"
			         : phase == PH_HEADERS ? "body-not-begun"
			                               : "body",
			         g->o.deadline_ms,
			         "a client sends its requests too slowly, or "
			         "holds connections open without finishing a "
			         "request (slowloris); raise request_timeout_ms "
			         "only if real clients are this slow");
			pending = 0;
		}
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void build_408(struct http_guard *g)
{
	char body[512];
	int bl = snprintf(
	    body, sizeof body,
	    "{\"type\":\"urn:ramex:problem:request-timeout\",\"title\":"
	    "\"request not received in time\",\"status\":408,\"detail\":"
	    "\"the request's head and body did not arrive in full within %d "
	    "ms (request_timeout_ms) of the connection's start, or of the "
	    "previous answer and %d s of idle time; send each request whole "
	    "and at once\"}",
	    g->o.deadline_ms, g->o.keepalive_ms / 1000);
	assert(bl > 0 && (size_t)bl < sizeof body);
	int n = snprintf(g->resp, sizeof g->resp,
	                 "HTTP/1.1 408 Request Timeout\r\n"
	                 "Connection: close\r\n"
	                 "Content-Type: application/problem+json\r\n"
	                 "Cache-Control: no-store\r\n"
	                 "Content-Length: %d\r\n\r\n%s",
	                 bl, body);
	assert(n > 0 && (size_t)n < sizeof g->resp);
	g->resp_len = (size_t)n;
}

struct http_guard *http_guard_start(const struct http_guard_opts *o, char *err,
                                    size_t errlen)
{
	struct http_guard *g = calloc(1, sizeof *g);
	size_t n = 16;
	while (n < 2 * (size_t)(o->capacity > 0 ? o->capacity : 1))
		n *= 2;
	if (g)
		g->slots = calloc(n, sizeof *g->slots);
	if (!g || !g->slots) {
		free(g);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->o = *o;
	g->mask = n - 1;
	build_408(g);
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (o->deadline_ms > 0) {
		if (pthread_create(&g->sweep, NULL, sweep, g)) {
			snprintf(err, errlen,
			         "could not start the HTTP deadline thread");
			http_guard_stop(g);
			return NULL;
		}
		g->has_sweep = true;
	}
	return g;
}

void http_guard_stop(struct http_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stopping = true;
	pthread_cond_broadcast(&g->wake);
	pthread_mutex_unlock(&g->mu);
	if (g->has_sweep)
		pthread_join(g->sweep, NULL);
	/* records of connections libmicrohttpd never reported closed */
	while (g->conns) {
		struct http_guard_conn *c = g->conns;
		g->conns = c->next;
		free(c);
	}
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->wake);
	free(g->slots);
	free(g);
}
