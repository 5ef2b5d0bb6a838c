/* lend_server.c — the lender's service loop (see the header). */
#include "node-agent/lend/lend_server.h"
#include "common/clock.h"
#include "common/hostport.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "node-agent/lend/lend_iov.h"
#include "node-agent/lend/lend_nbd.h"

/* a link's cur holds either protocol's request header */
_Static_assert(LEND_NBD_REQ_LEN <= LEND_HDR_LEN, "cur holds an NBD request");

/* What serve_one and serve_nbd_one did with the link's next request. */
enum { ONE_FAIL = -1, ONE_DONE = 0, ONE_PART = 1 };

int lend_server_open(struct lend_server *s, const struct lend_server_config *c,
                     char *err, size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->cfg = *c;
	s->lfd = -1;
	s->wake[0] = s->wake[1] = -1;
	s->done[0] = s->done[1] = -1;
	s->lend.conn.fd = s->data.conn.fd = -1;
	if (c->pages <= 0 || c->pages > LEND_MAX_PAGES) {
		snprintf(err, errlen, "a contract needs 1 to %lld pages",
		         (long long)LEND_MAX_PAGES);
		return -1;
	}
	if (!c->tls && !hostport_is_loopback(c->host)) {
		if (!c->plaintext) {
			snprintf(err, errlen,
			         "plain TCP on %s would carry the borrower's "
			         "pages in clear: give a TLS certificate and "
			         "key, listen on a loopback address, or allow "
			         "plain TCP explicitly",
			         c->host ? c->host : "every address");
			return -1;
		}
		log_warn("plain TCP off loopback, as configured: the "
		         "borrower's pages cross the network in clear",
		         "contract=%llu listen=%s",
		         (unsigned long long)c->contract,
		         c->host ? c->host : "*");
	}
	if (s->cfg.handshake_ms <= 0)
		s->cfg.handshake_ms = 5000;
	if (lend_store_open(&s->store, c->pages, c->store, c->device, err,
	                    errlen) < 0)
		return -1;
	if (lend_meter_init(&s->meter, c->contract, LEND_METER_LENDER, c->pages,
	                    clock_mono_ms()) < 0) {
		snprintf(err, errlen, "could not allocate the meter");
		goto fail;
	}
	s->lend.ib = malloc(LEND_SERVER_IBUF);
	s->data.ib = malloc(LEND_SERVER_IBUF);
	if (!s->lend.ib || !s->data.ib) {
		snprintf(err, errlen, "could not allocate the input buffer");
		goto fail;
	}
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(s->done, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "could not create a pipe: %s",
		         strerror(errno));
		goto fail;
	}
	s->lfd = lend_tcp_listen(c->host, c->port, &s->port, err, errlen);
	if (s->lfd < 0)
		goto fail;
	if (lend_awake_start(&s->awake, c->keep_awake, err, errlen) < 0)
		goto fail;
	/* without the device the lender serves as before (logged) */
	if (c->idle_poll)
		(void)lend_qos_start(&s->qos, NULL);
	log_info("lender holds the contract's pages",
	         "contract=%llu pages=%lld store=%s locked=%d port=%d tls=%d "
	         "keep_awake=%d idle_poll=%d",
	         (unsigned long long)c->contract, (long long)c->pages,
	         lend_store_kind_name(s->store.kind),
	         s->store.kind == LEND_STORE_RAMEX || s->store.locked, s->port,
	         c->tls != NULL, c->keep_awake, c->idle_poll);
	return 0;
fail:
	lend_server_close(s);
	return -1;
}

void lend_server_recall(struct lend_server *s)
{
	char c = 'r';
	(void)!write(s->wake[1], &c, 1);
}

void lend_server_stop(struct lend_server *s)
{
	char c = 's';
	(void)!write(s->wake[1], &c, 1);
}

struct lend_meter_report lend_server_report(struct lend_server *s)
{
	return lend_meter_report(&s->meter, clock_mono_ms());
}

/*
 * Writes all of iov to link l (its socket is non-blocking). While the
 * socket is full it waits for room, LEND_SERVER_STALL_MS at most in all:
 * the replies point into the store and are not queued per link, so this
 * wait holds the loop, and a borrower that reads none of its replies for
 * that long is given up (it has timed them out itself by then). Returns 0,
 * or -1 with l->conn.err set.
 */
static int link_writev(struct lend_server_link *l, struct iovec *iov,
                       int iovcnt)
{
	int64_t deadline = 0;
	ssize_t w = 0;
	for (;;) {
		/* drops what was written, and empty buffers (a send of
		 * nothing would say 0, as a full socket does) */
		lend_iov_advance(&iov, &iovcnt, (size_t)w);
		if (iovcnt == 0)
			return 0;
		/* after a 0, the same bytes again (TLS kept them gathered) */
		w = lend_conn_writev_some(&l->conn, iov, iovcnt);
		if (w < 0)
			return -1;
		if (w > 0)
			continue;
		int64_t now = clock_mono_ms();
		if (deadline == 0)
			deadline = now + LEND_SERVER_STALL_MS;
		if (now >= deadline) {
			snprintf(l->conn.err, sizeof l->conn.err,
			         "the borrower left its replies unread for %d "
			         "ms (its socket stayed full)",
			         LEND_SERVER_STALL_MS);
			return -1;
		}
		struct pollfd p = {.fd = l->conn.fd, .events = POLLOUT};
		(void)poll(&p, 1, (int)(deadline - now));
	}
}

static int send_notice(struct lend_server *s)
{
	int64_t left = s->deadline_ms - clock_mono_ms();
	struct lend_hdr n = {.type = LEND_NOTICE,
	                     .extra = (uint64_t)(left > 0 ? left : 0)};
	uint8_t b[LEND_HDR_LEN];
	struct iovec v = {b, sizeof b};
	lend_hdr_encode(&n, 1, b);
	return link_writev(&s->lend, &v, 1);
}

static int out_flush(struct lend_server *s);

static const char *role_name(uint32_t role)
{
	return role == LEND_CONN_DATA      ? "data"
	       : role == LEND_CONN_CONTROL ? "control"
	                                   : "lend";
}

static void drop_link(struct lend_server *s, struct lend_server_link *l,
                      const char *why)
{
	if (l->conn.fd < 0)
		return;
	if (s->ol == l)
		(void)out_flush(s); /* e.g. the reply to a BYE or a refusal */
	l->ib_off = l->ib_len = 0;
	l->got = l->want = 0;
	l->part_ms = 0;
	log_info("borrower connection closed",
	         "contract=%llu role=%s why=\"%s\"",
	         (unsigned long long)s->cfg.contract, role_name(l->role), why);
	lend_conn_close(&l->conn);
}

static void drop_conn(struct lend_server *s, const char *why)
{
	drop_link(s, &s->lend, why);
}

/* The recall deadline, the end of the run: neither connection stays. */
static void drop_both(struct lend_server *s, const char *why)
{
	drop_link(s, &s->lend, why);
	drop_link(s, &s->data, why);
}

/* Serialises a handshake thread's "finished" with the cut at its
 * deadline, so that an authenticated connection is never cut. */
static pthread_mutex_t hs_lock = PTHREAD_MUTEX_INITIALIZER;

/* The handshake of one new connection, on its own thread: reads and
 * writes only its own slot, then reports the slot's index on s->done. */
static void *handshake_main(void *arg)
{
	struct lend_handshake *h = arg;
	struct lend_server *s = h->s;
	struct lend_conn c;
	struct lend_hello hello = {.version = LEND_VERSION,
	                           .flags = LEND_HELLO_ROLES};
	struct lend_auth auth;
	struct lend_welcome w = {.status = LEND_OK};
	uint8_t buf[LEND_AUTHR_LEN], want[LEND_MAC_LEN];
	int more;

	/* the loop cuts the handshake at its deadline; the per-read bound
	 * is only a backstop, twice as long */
	if (lend_conn_open(&c, h->c.fd, s->cfg.tls, 1,
	                   2 * s->cfg.handshake_ms) < 0) {
		log_warn("borrower handshake failed", "why=\"%s\"", c.err);
		h->refused = 1;
		goto out;
	}
	if (RAND_bytes(hello.server_nonce, LEND_NONCE_LEN) != 1) {
		log_error("could not draw a nonce", NULL);
		goto fail;
	}
	lend_hello_encode(&hello, buf);
	if (lend_conn_write(&c, buf, LEND_HELLO_LEN) < 0 ||
	    lend_conn_read(&c, buf, LEND_AUTH_LEN) < 0 ||
	    (more = lend_auth_decode(buf, &auth)) < 0 ||
	    (more && (lend_conn_read(&c, buf + LEND_AUTH_LEN,
	                             LEND_AUTHR_LEN - LEND_AUTH_LEN) < 0 ||
	              lend_auth_role_decode(buf + LEND_AUTH_LEN, &auth) < 0))) {
		log_warn("borrower handshake failed",
		         "why=\"no valid AUTH frame: %s\"", c.err);
		goto refuse;
	}
	lend_mac(LEND_BORROWER, s->cfg.secret, auth.contract,
	         hello.server_nonce, auth.client_nonce, lend_conn_binding(&c),
	         want);
	if (auth.contract != s->cfg.contract)
		w.status = LEND_E_CONTRACT;
	else if (!lend_mac_equal(want, auth.mac))
		w.status = LEND_E_AUTH;
	if (w.status != LEND_OK) {
		lend_welcome_encode(&w, buf);
		(void)lend_conn_write(&c, buf, LEND_WELCOME_LEN);
		log_warn(
		    "borrower refused", "contract=%llu asked=%llu why=\"%s\"",
		    (unsigned long long)s->cfg.contract,
		    (unsigned long long)auth.contract, lend_err_str(w.status));
		goto refuse;
	}
	w.pages = (uint64_t)s->cfg.pages;
	lend_mac(LEND_LENDER, s->cfg.secret, auth.contract, hello.server_nonce,
	         auth.client_nonce, lend_conn_binding(&c), w.mac);
	lend_welcome_encode(&w, buf);
	if (lend_conn_write(&c, buf, LEND_WELCOME_LEN) < 0)
		goto fail;
	lend_conn_set_timeout(&c, 0);
	h->c = c;
	h->role = auth.role;
	h->ok = 1;
	goto out;
refuse:
	h->refused = 1;
fail:
	lend_conn_close(&c);
out:;
	unsigned char idx = (unsigned char)(h - s->hs);
	pthread_mutex_lock(&hs_lock);
	h->deadline_ms = 0; /* finished: never cut */
	pthread_mutex_unlock(&hs_lock);
	(void)!write(s->done[1], &idx, 1);
	return NULL;
}

/* Starts the handshake of an accepted connection, or closes it when
 * LEND_HANDSHAKES are under way already. */
static void handshake_start(struct lend_server *s, int fd)
{
	struct lend_handshake *h = NULL;
	for (int i = 0; i < LEND_HANDSHAKES && !h; i++)
		if (!s->hs[i].used)
			h = &s->hs[i];
	if (!h) {
		close(fd);
		if (s->handshakes_busy++ % 100 == 0)
			log_warn("refused a connection: too many handshakes "
			         "under way",
			         "contract=%llu under_way=%d refused=%lld",
			         (unsigned long long)s->cfg.contract,
			         LEND_HANDSHAKES,
			         (long long)s->handshakes_busy);
		return;
	}
	memset(h, 0, sizeof *h);
	h->s = s;
	h->c.fd = fd;
	h->watch = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	h->deadline_ms = clock_mono_ms() + s->cfg.handshake_ms;
	/* a small stack: with --mlock (MCL_FUTURE) every byte of a
	 * thread's stack is locked, and the default is 8 MiB */
	pthread_attr_t attr;
	int started = 0;
	if (h->watch >= 0 && pthread_attr_init(&attr) == 0) {
		pthread_attr_setstacksize(&attr, 256 * 1024);
		started =
		    pthread_create(&h->thr, &attr, handshake_main, h) == 0;
		pthread_attr_destroy(&attr);
	}
	if (!started) {
		log_warn("could not start a handshake", "why=\"%s\"",
		         strerror(errno));
		if (h->watch >= 0)
			close(h->watch);
		close(fd);
		return;
	}
	h->used = 1;
}

/* Cuts the handshakes whose deadline has passed (all of them when
 * `all`): their threads fail at once and report. Returns the time until
 * the next deadline (or `cap`). */
static int64_t handshake_cut(struct lend_server *s, int64_t now, int all,
                             int64_t cap)
{
	pthread_mutex_lock(&hs_lock);
	for (int i = 0; i < LEND_HANDSHAKES; i++) {
		struct lend_handshake *h = &s->hs[i];
		if (!h->used || h->deadline_ms <= 0)
			continue; /* finished (0), or cut already (-1) */
		if (all || now >= h->deadline_ms) {
			shutdown(h->watch, SHUT_RDWR);
			if (!all) {
				s->handshakes_timed_out++;
				log_warn("cut a borrower handshake at its "
				         "deadline",
				         "contract=%llu handshake_ms=%d",
				         (unsigned long long)s->cfg.contract,
				         s->cfg.handshake_ms);
			}
			h->deadline_ms = -1; /* cut: wait for its report */
		} else if (h->deadline_ms - now < cap) {
			cap = h->deadline_ms - now;
		}
	}
	pthread_mutex_unlock(&hs_lock);
	return cap;
}

/* Joins a handshake thread that reported and takes its outcome: an
 * authenticated connection becomes s->lend or s->data. */
static void handshake_finish(struct lend_server *s, struct lend_handshake *h)
{
	pthread_join(h->thr, NULL);
	close(h->watch);
	h->used = 0;
	if (h->refused)
		s->auth_failures++;
	if (!h->ok)
		return;
	struct lend_server_link *l =
	    h->role == LEND_CONN_DATA ? &s->data : &s->lend;
	if (l->conn.fd >= 0)
		drop_link(s, l, "replaced by a new authenticated connection");
	l->conn = h->c;
	l->role = h->role;
	/* the loop never waits on one link (lend_server.h) */
	if (lend_conn_set_nonblock(&l->conn, 1) < 0) {
		drop_link(s, l, l->conn.err);
		return;
	}
	if (l == &s->data)
		s->data_connections++;
	else
		s->connections++;
	log_info("borrower authenticated", "contract=%llu role=%s tls=%d",
	         (unsigned long long)s->cfg.contract, role_name(l->role),
	         l->conn.ssl != NULL);
	if (l == &s->lend && s->recalling && send_notice(s) < 0)
		drop_conn(s, "could not send the recall notice");
}

/* Takes the reports waiting on s->done; with `all`, waits for every
 * handshake under way (after handshake_cut(..., all)). */
static void handshake_reap(struct lend_server *s, int all)
{
	for (;;) {
		unsigned char idx;
		ssize_t n = read(s->done[0], &idx, 1);
		if (n == 1) {
			if (idx < LEND_HANDSHAKES && s->hs[idx].used)
				handshake_finish(s, &s->hs[idx]);
			continue;
		}
		int left = 0;
		for (int i = 0; i < LEND_HANDSHAKES; i++)
			left += s->hs[i].used;
		if (!all || !left)
			return;
		struct pollfd p = {.fd = s->done[0], .events = POLLIN};
		(void)poll(&p, 1, 1000);
	}
}

static void free_pages(struct lend_server *s, const char *why)
{
	if (s->released)
		return;
	lend_meter_release(&s->meter, clock_mono_ms());
	lend_store_release(&s->store);
	s->released = 1;
	log_info("lender freed the contract's pages",
	         "contract=%llu why=\"%s\"",
	         (unsigned long long)s->cfg.contract, why);
}

/* Sends the replies held back. Returns 0, or -1 (c->err). */
static int out_flush(struct lend_server *s)
{
	int rc = 0;
	if (s->ov_n > 0 && s->ol && s->ol->conn.fd >= 0) {
		rc = link_writev(s->ol, s->ov, s->ov_n);
		s->batches++;
		s->batched_replies += s->oh_n;
	}
	s->ov_n = s->oh_n = 0;
	s->out_reads = 0;
	return rc;
}

/* Room for one more reply, its header's bytes. Returns NULL when sending
 * the batch failed. */
static uint8_t *out_slot(struct lend_server *s)
{
	if (s->oh_n == LEND_SERVER_BATCH && out_flush(s) < 0)
		return NULL;
	return s->oh[s->oh_n];
}

/* Adds the header in out_slot (hlen bytes) and its payload (may be
 * NULL). */
static void out_add(struct lend_server *s, size_t hlen, const void *data,
                    size_t len)
{
	s->ov[s->ov_n++] = (struct iovec){s->oh[s->oh_n++], hlen};
	if (len)
		s->ov[s->ov_n++] = (struct iovec){(void *)data, len};
}

/* Holds back a reply, and its payload (may be NULL). Returns 0 or -1. */
static int out_reply(struct lend_server *s, const struct lend_hdr *h,
                     const void *data, size_t len)
{
	uint8_t *b = out_slot(s);
	if (!b)
		return -1;
	lend_hdr_encode(h, 1, b);
	out_add(s, LEND_HDR_LEN, data, len);
	return 0;
}

/* The same for an NBD simple reply on the DATA connection. */
static int out_nbd(struct lend_server *s, uint32_t error, uint64_t handle,
                   const void *data, size_t len)
{
	uint8_t *b = out_slot(s);
	if (!b)
		return -1;
	lend_nbd_reply_encode(b, error, handle);
	out_add(s, LEND_NBD_REPLY_LEN, data, len);
	return 0;
}

/* Whether a request's bytes are here already (read ahead, decrypted, or
 * in the socket), so that serving it cannot block. */
static int in_ready(struct lend_server_link *l)
{
	if (l->ib_len > l->ib_off || lend_conn_pending(&l->conn) > 0)
		return 1;
	if (l->conn.ssl) {
		struct pollfd p = {.fd = l->conn.fd, .events = POLLIN};
		return poll(&p, 1, 0) > 0;
	}
	/* plain TCP: one recv both asks and reads ahead */
	l->ib_off = l->ib_len = 0;
	ssize_t r = recv(l->conn.fd, l->ib, LEND_SERVER_IBUF, MSG_DONTWAIT);
	if (r > 0) {
		l->ib_len = (size_t)r;
		return 1;
	}
	/* the end of the stream or an error: let the next read say so */
	return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Reads what has arrived into the (empty) read-ahead buffer, without
 * waiting. Returns 1 when it read some, 0 when nothing had arrived, -1 on
 * an error or the end of the stream (l->conn.err). */
static int in_fill(struct lend_server_link *l)
{
	l->ib_off = l->ib_len = 0;
	ssize_t r = lend_conn_read_some(&l->conn, l->ib, LEND_SERVER_IBUF);
	if (r > 0)
		l->ib_len = (size_t)r;
	return r < 0 ? -1 : r > 0;
}

/*
 * Takes the request's bytes that have arrived, up to its byte `end`, into
 * dst (where its byte l->got goes): what was read ahead first; a long
 * rest goes straight into dst (a WRITE's pages: no copy). Never waits.
 * Returns 1 when l->got reached end, 0 when the rest has not arrived yet
 * (l->got says how far it got), -1 when the link failed (l->conn.err).
 */
static int in_take(struct lend_server_link *l, uint8_t *dst, size_t end)
{
	while (l->got < end) {
		size_t n = end - l->got, have = l->ib_len - l->ib_off, k;
		if (have > 0) {
			k = have < n ? have : n;
			memcpy(dst, l->ib + l->ib_off, k);
			l->ib_off += k;
		} else if (n >= LEND_PAGE_SIZE) {
			ssize_t r = lend_conn_read_some(&l->conn, dst, n);
			if (r <= 0)
				return (int)r;
			k = (size_t)r;
		} else {
			int r = in_fill(l);
			if (r <= 0)
				return r;
			continue;
		}
		dst += k;
		l->got += k;
	}
	return 1;
}

/* in_take's answer as serve_one's: 0 (the rest has not arrived) is
 * ONE_PART. */
static int take_rc(int r)
{
	return r < 0 ? ONE_FAIL : ONE_PART;
}

/* Serves the lend link's next request, or as much of it as has arrived
 * (called again with the rest, it takes up where it stopped). */
static int serve_one(struct lend_server *s)
{
	struct lend_server_link *l = &s->lend;
	struct lend_conn *c = &l->conn;
	struct lend_hdr q, r;
	int t;

	if (l->got < LEND_HDR_LEN &&
	    (t = in_take(l, l->cur + l->got, LEND_HDR_LEN)) <= 0)
		return take_rc(t);
	if (lend_hdr_decode(l->cur, 0, &q) < 0) {
		snprintf(c->err, sizeof c->err, "a request with a bad magic");
		return ONE_FAIL;
	}
	r = (struct lend_hdr){
	    .type = q.type, .handle = q.handle, .count = q.count};
	r.error = lend_hdr_check(&q, (uint64_t)s->cfg.pages);
	if (r.error == LEND_OK && s->released &&
	    (q.type == LEND_READ || q.type == LEND_WRITE ||
	     q.type == LEND_TRIM))
		r.error = LEND_E_RELEASED;
	if (r.error != LEND_OK) {
		/* the stream cannot be trusted after a bad WRITE header */
		if (out_reply(s, &r, NULL, 0) < 0)
			return ONE_FAIL;
		snprintf(c->err, sizeof c->err, "refused a request: %s",
		         lend_err_str(r.error));
		return q.type == LEND_WRITE ? ONE_FAIL : ONE_DONE;
	}
	/* a pending READ reply points into the store: send it before the
	 * pages change or go */
	if (s->out_reads &&
	    (q.type == LEND_WRITE || q.type == LEND_TRIM ||
	     q.type == LEND_RELEASE) &&
	    out_flush(s) < 0)
		return ONE_FAIL;
	size_t len = (size_t)q.count * LEND_PAGE_SIZE;
	if (q.type == LEND_WRITE) {
		/* straight into the held pages */
		uint8_t *p = lend_store_page(&s->store, (int64_t)q.page);
		l->want = LEND_HDR_LEN + len;
		t = in_take(l, p + (l->got - LEND_HDR_LEN), l->want);
		if (t <= 0)
			return take_rc(t);
	}
	int64_t now = clock_mono_ms();
	int rc;
	switch (q.type) {
	case LEND_READ:
		lend_meter_read(&s->meter, q.count, now);
		s->out_reads = 1;
		rc = out_reply(
		    s, &r, lend_store_page(&s->store, (int64_t)q.page), len);
		break;
	case LEND_WRITE:
		lend_meter_write(&s->meter, q.page, q.count, now);
		rc = out_reply(s, &r, NULL, 0);
		break;
	case LEND_TRIM:
		lend_store_zero(&s->store, (int64_t)q.page, q.count);
		lend_meter_trim(&s->meter, q.page, q.count, now);
		rc = out_reply(s, &r, NULL, 0);
		break;
	case LEND_FLUSH:
		rc = out_reply(s, &r, NULL, 0);
		break;
	case LEND_METER: {
		struct lend_meter_report rep = lend_server_report(s);
		/* one meter buffer: send what holds it first */
		if (out_flush(s) < 0)
			return ONE_FAIL;
		lend_meter_encode(&rep, s->om);
		r.extra = LEND_METER_WIRE;
		rc = out_reply(s, &r, s->om, LEND_METER_WIRE);
		break;
	}
	case LEND_RELEASE:
		free_pages(s, s->recalling ? "the borrower released them "
		                             "after the recall notice"
		                           : "the borrower released them");
		rc = out_reply(s, &r, NULL, 0);
		break;
	case LEND_BYE:
		(void)out_reply(s, &r, NULL, 0);
		snprintf(c->err, sizeof c->err, "the borrower said goodbye");
		return ONE_FAIL;
	default:
		assert(0 && "lend_hdr_check let an unknown type through");
		return ONE_FAIL;
	}
	return rc < 0 ? ONE_FAIL : ONE_DONE;
}

/* Serves one NBD request of the DATA connection, or as much of it as has
 * arrived, as serve_one: the same store, meter and batches. */
static int serve_nbd_one(struct lend_server *s)
{
	struct lend_server_link *l = &s->data;
	struct lend_conn *c = &l->conn;
	struct lend_nbd_req q;
	const struct lend_nbd_export e = {
	    .size = (uint64_t)s->cfg.pages * LEND_PAGE_SIZE,
	    .tflags = LEND_NBD_TFLAGS};
	int t;

	if (l->got < LEND_NBD_REQ_LEN &&
	    (t = in_take(l, l->cur + l->got, LEND_NBD_REQ_LEN)) <= 0)
		return take_rc(t);
	if (lend_nbd_req_decode(l->cur, &q) < 0) {
		snprintf(c->err, sizeof c->err,
		         "an NBD request with a bad magic");
		return ONE_FAIL;
	}
	if (q.type == LEND_NBD_CMD_DISC) {
		snprintf(c->err, sizeof c->err,
		         "the borrower's NBD client disconnected");
		return ONE_FAIL;
	}
	int rc = lend_nbd_req_check(&e, &q);
	if (rc < 0) {
		snprintf(c->err, sizeof c->err,
		         "an NBD WRITE of %u bytes, longer than %u",
		         (unsigned)q.len, (unsigned)LEND_NBD_MAX_REQ);
		return ONE_FAIL;
	}
	/* NBD's rule: a WRITE past the end is ENOSPC */
	if (rc == EINVAL && q.type == LEND_NBD_CMD_WRITE &&
	    (q.off > e.size || q.len > e.size - q.off))
		rc = ENOSPC;
	/* freed after the recall: nothing to read or keep (also when the
	 * pages went while this WRITE's were still coming: the rest is
	 * dropped) */
	if (rc == 0 && s->released && q.type != LEND_NBD_CMD_FLUSH)
		rc = EIO;
	l->want = LEND_NBD_REQ_LEN +
	          (q.type == LEND_NBD_CMD_WRITE ? (size_t)q.len : 0);
	if (rc != 0) {
		/* a refused WRITE's payload is still in the stream */
		uint8_t junk[LEND_PAGE_SIZE];
		while (l->got < l->want) {
			size_t end = l->want - l->got < sizeof junk
			                 ? l->want
			                 : l->got + sizeof junk;
			if ((t = in_take(l, junk, end)) <= 0)
				return take_rc(t);
		}
		s->nbd_errors++;
		return out_nbd(s, (uint32_t)rc, q.handle, NULL, 0) < 0
		           ? ONE_FAIL
		           : ONE_DONE;
	}
	/* a pending READ reply points into the store: send it before the
	 * pages change */
	if (s->out_reads &&
	    (q.type == LEND_NBD_CMD_WRITE || q.type == LEND_NBD_CMD_TRIM) &&
	    out_flush(s) < 0)
		return ONE_FAIL;
	uint64_t page = q.off / LEND_PAGE_SIZE;
	uint32_t count = q.len / LEND_PAGE_SIZE;
	uint8_t *p =
	    (q.type == LEND_NBD_CMD_READ || q.type == LEND_NBD_CMD_WRITE) &&
	            count > 0
	        ? lend_store_page(&s->store, (int64_t)page)
	        : NULL;
	if (q.type == LEND_NBD_CMD_WRITE && count > 0 &&
	    (t = in_take(l, p + (l->got - LEND_NBD_REQ_LEN), l->want)) <= 0)
		return take_rc(t);
	int64_t now = clock_mono_ms();
	switch (q.type) {
	case LEND_NBD_CMD_READ:
		lend_meter_read(&s->meter, count, now);
		s->out_reads = 1;
		rc = out_nbd(s, 0, q.handle, p, q.len);
		break;
	case LEND_NBD_CMD_WRITE:
		if (count > 0)
			lend_meter_write(&s->meter, page, count, now);
		rc = out_nbd(s, 0, q.handle, NULL, 0);
		break;
	case LEND_NBD_CMD_TRIM:
		if (count > 0) {
			lend_store_zero(&s->store, (int64_t)page, count);
			lend_meter_trim(&s->meter, page, count, now);
		}
		rc = out_nbd(s, 0, q.handle, NULL, 0);
		break;
	case LEND_NBD_CMD_FLUSH: /* the pages are in RAM: nothing to do */
		rc = out_nbd(s, 0, q.handle, NULL, 0);
		break;
	default:
		assert(0 && "lend_nbd_req_check let an unknown type through");
		return ONE_FAIL;
	}
	return rc < 0 ? ONE_FAIL : ONE_DONE;
}

/* Whether link l holds part of a request: bytes of it taken, or part of
 * a TLS record that has not been decrypted. */
static int link_mid_request(const struct lend_server_link *l)
{
	return l->got > 0 || (l->conn.ssl && SSL_has_pending(l->conn.ssl));
}

/* Serves the requests that have arrived on link l, a batch at a time,
 * and sends their replies; a request that has only partly arrived stays
 * in l for the next time. Returns 0, or -1 when l must close. */
static int serve(struct lend_server *s, struct lend_server_link *l)
{
	int (*one)(struct lend_server *) =
	    l == &s->data ? serve_nbd_one : serve_one;
	/* replies go to l; what the other link had waiting goes first */
	if (s->ol != l) {
		(void)out_flush(s);
		s->ol = l;
	}
	/* bounded, so that a borrower streaming without pause does not
	 * keep the loop from a recall, a stop, a handshake or the other
	 * connection */
	int n = 0;
	do {
		int rc = one(s);
		if (rc == ONE_FAIL)
			return -1;
		if (rc == ONE_PART) {
			/* the rest comes later: the loop polls for it with
			 * everything else, until the link's deadline (none
			 * while nothing of a request is held: a TLS record
			 * that carried none) */
			if (!link_mid_request(l))
				l->part_ms = 0;
			else if (l->part_ms == 0)
				l->part_ms = clock_mono_ms();
			break;
		}
		l->got = l->want = 0;
		l->part_ms = 0;
	} while (++n < 4 * LEND_SERVER_BATCH && in_ready(l));
	return out_flush(s);
}

/* Serves link l, closing it when it fails. */
static void serve_link(struct lend_server *s, struct lend_server_link *l)
{
	lend_awake_busy(&s->awake);
	lend_qos_busy(&s->qos);
	if (serve(s, l) < 0)
		drop_link(s, l, l->conn.err);
}

/* Whether link l has request bytes read ahead or decrypted. */
static int link_pending(const struct lend_server_link *l)
{
	return l->conn.fd >= 0 &&
	       (lend_conn_pending(&l->conn) > 0 || l->ib_len > l->ib_off);
}

/* Drops link l when it has been mid-request LEND_SERVER_STALL_MS; else
 * returns the time left to that (or `cap`, whichever is sooner). */
static int64_t stall_cut(struct lend_server *s, struct lend_server_link *l,
                         int64_t now, int64_t cap)
{
	if (l->conn.fd < 0 || l->part_ms == 0)
		return cap;
	int64_t left = l->part_ms + LEND_SERVER_STALL_MS - now;
	if (left > 0)
		return left < cap ? left : cap;
	size_t hdr = l == &s->data ? LEND_NBD_REQ_LEN : LEND_HDR_LEN;
	s->stalled++;
	log_warn(
	    "dropped a borrower connection that stopped mid-request: the "
	    "borrower's end hung or the network lost the rest (see the "
	    "borrower's ramex-lend-nbd log); it must reconnect",
	    "contract=%llu role=%s request=\"%s\" arrived=%zu of=%zu "
	    "tls_record_part=%d stalled_ms=%d",
	    (unsigned long long)s->cfg.contract, role_name(l->role),
	    l->want > hdr ? (l == &s->data ? "NBD WRITE" : "WRITE") : "header",
	    l->got, l->want > hdr ? l->want : hdr,
	    l->conn.ssl && SSL_has_pending(l->conn.ssl), LEND_SERVER_STALL_MS);
	drop_link(s, l, "stopped mid-request");
	return cap;
}

static void tick(struct lend_server *s)
{
	if (s->cfg.on_tick) {
		struct lend_meter_report r = lend_server_report(s);
		s->cfg.on_tick(&r, s->cfg.arg);
	}
}

enum lend_server_end lend_server_run(struct lend_server *s)
{
	/* a meter file from the start: the agent bills from it once there */
	int64_t next_tick = clock_mono_ms();
	enum lend_server_end end;
	for (;;) {
		int64_t now = clock_mono_ms();
		if (now >= next_tick) {
			tick(s);
			next_tick = now + 1000;
		}
		if (s->recalling && !s->released && now >= s->deadline_ms) {
			drop_both(s, "the recall deadline passed");
			free_pages(s, "the recall deadline passed before the "
			              "borrower released them");
			end = LEND_END_DEADLINE;
			break;
		}
		if (s->released && s->lend.conn.fd < 0) {
			drop_both(s, "the pages were released");
			end = LEND_END_RELEASED;
			break;
		}
		stall_cut(s, &s->lend, now, 0);
		stall_cut(s, &s->data, now, 0);
		if (link_pending(&s->lend) || link_pending(&s->data)) {
			if (link_pending(&s->data))
				serve_link(s, &s->data);
			if (link_pending(&s->lend))
				serve_link(s, &s->lend);
			continue;
		}
		int64_t wait = next_tick - now;
		if (s->recalling && !s->released && s->deadline_ms - now < wait)
			wait = s->deadline_ms - now;
		wait = handshake_cut(s, now, 0, wait);
		wait = stall_cut(s, &s->lend, now, wait);
		wait = stall_cut(s, &s->data, now, wait);
		/* idle polling ends a linger after the last request */
		int64_t rel = lend_qos_idle(&s->qos);
		if (rel >= 0 && rel < wait)
			wait = rel;
		struct pollfd p[5] = {{.fd = s->wake[0], .events = POLLIN},
		                      {.fd = s->lfd, .events = POLLIN},
		                      {.fd = s->lend.conn.fd, .events = POLLIN},
		                      {.fd = s->done[0], .events = POLLIN},
		                      {.fd = s->data.conn.fd, .events = POLLIN}};
		int n = poll(p, 5, (int)(wait > 0 ? wait : 0));
		if (n < 0 && errno != EINTR) {
			snprintf(s->err, sizeof s->err, "poll failed: %s",
			         strerror(errno));
			end = LEND_END_ERROR;
			break;
		}
		if (n <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			char c;
			int stop = 0;
			while (read(s->wake[0], &c, 1) == 1) {
				if (c == 's')
					stop = 1;
				if (c == 'r' && !s->recalling && !s->released) {
					s->recalling = 1;
					s->deadline_ms =
					    clock_mono_ms() + s->cfg.notice_ms;
					log_info(
					    "lender recalls the pages",
					    "contract=%llu notice_ms=%lld",
					    (unsigned long long)s->cfg.contract,
					    (long long)s->cfg.notice_ms);
					if (s->lend.conn.fd >= 0 &&
					    send_notice(s) < 0)
						drop_conn(s,
						          "could not send the "
						          "recall notice");
				}
			}
			if (stop) {
				end = LEND_END_STOPPED;
				break;
			}
		}
		if (p[3].revents & POLLIN)
			handshake_reap(s, 0);
		if (p[1].revents & POLLIN) {
			int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				handshake_start(s, fd);
		}
		/* a borrower is at work: its next requests come soon;
		 * serve_link keeps a core awake for their wakeup */
		const short ev = POLLIN | POLLHUP | POLLERR;
		if (s->data.conn.fd >= 0 && p[4].fd == s->data.conn.fd &&
		    (p[4].revents & ev))
			serve_link(s, &s->data);
		if (s->lend.conn.fd >= 0 && p[2].fd == s->lend.conn.fd &&
		    (p[2].revents & ev))
			serve_link(s, &s->lend);
	}
	/* no handshake outlives the run: cut them, take what they say */
	handshake_cut(s, clock_mono_ms(), 1, 0);
	handshake_reap(s, 1);
	tick(s);
	return end;
}

void lend_server_close(struct lend_server *s)
{
	if (s->done[0] >= 0) {
		handshake_cut(s, clock_mono_ms(), 1, 0);
		handshake_reap(s, 1);
	}
	drop_both(s, "the lender is shutting down");
	lend_awake_stop(&s->awake);
	lend_qos_stop(&s->qos);
	if (s->lfd >= 0)
		close(s->lfd);
	for (int i = 0; i < 2; i++) {
		if (s->wake[i] >= 0)
			close(s->wake[i]);
		if (s->done[i] >= 0)
			close(s->done[i]);
	}
	s->lfd = s->wake[0] = s->wake[1] = s->done[0] = s->done[1] = -1;
	lend_store_release(&s->store);
	lend_meter_free(&s->meter);
	free(s->lend.ib);
	free(s->data.ib);
	s->lend.ib = s->data.ib = NULL;
}
