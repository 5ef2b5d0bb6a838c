/* lend_server.c — the lender's service loop (see the header). */
#include "node-agent/lend/lend_server.h"
#include "common/clock.h"
#include "common/hostport.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
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
#include "node-agent/lend/lend_nbd.h"

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

static int send_reply(struct lend_conn *c, const struct lend_hdr *h)
{
	uint8_t b[LEND_HDR_LEN];
	lend_hdr_encode(h, 1, b);
	return lend_conn_write(c, b, sizeof b);
}

static int send_notice(struct lend_server *s)
{
	int64_t left = s->deadline_ms - clock_mono_ms();
	struct lend_hdr n = {.type = LEND_NOTICE,
	                     .extra = (uint64_t)(left > 0 ? left : 0)};
	return send_reply(&s->lend.conn, &n);
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
		rc = lend_conn_writev(&s->ol->conn, s->ov, s->ov_n);
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

/* Reads more into the read-ahead buffer, blocking; the replies held back
 * go first, since the borrower may wait for them before it sends more. */
static int in_fill(struct lend_server *s, struct lend_server_link *l)
{
	size_t had = l->ib_len - l->ib_off;
	if (in_ready(l)) {
		if (l->ib_len - l->ib_off > had)
			return 0; /* in_ready read ahead */
	} else if (out_flush(s) < 0) {
		return -1;
	}
	if (l->ib_off == l->ib_len)
		l->ib_off = l->ib_len = 0;
	if (l->ib_off > 0 && l->ib_len == LEND_SERVER_IBUF) {
		memmove(l->ib, l->ib + l->ib_off, l->ib_len - l->ib_off);
		l->ib_len -= l->ib_off;
		l->ib_off = 0;
	}
	for (;;) {
		size_t room = LEND_SERVER_IBUF - l->ib_len;
		ssize_t r;
		if (l->conn.ssl) {
			size_t got = 0;
			if (SSL_read_ex(l->conn.ssl, l->ib + l->ib_len, room,
			                &got) != 1) {
				snprintf(l->conn.err, sizeof l->conn.err,
				         "the borrower closed the connection");
				ERR_clear_error();
				return -1;
			}
			r = (ssize_t)got;
		} else {
			r = recv(l->conn.fd, l->ib + l->ib_len, room, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				snprintf(l->conn.err, sizeof l->conn.err, "%s",
				         r == 0 ? "the borrower closed the "
				                  "connection"
				                : strerror(errno));
				return -1;
			}
		}
		l->ib_len += (size_t)r;
		return 0;
	}
}

/* Exactly n bytes of the stream into dst: what was read ahead first; a
 * long rest goes straight into dst (a WRITE's pages: no copy). */
static int in_read(struct lend_server *s, struct lend_server_link *l,
                   void *dst, size_t n)
{
	uint8_t *p = dst;
	while (n > 0) {
		size_t have = l->ib_len - l->ib_off;
		if (have > 0) {
			size_t k = have < n ? have : n;
			memcpy(p, l->ib + l->ib_off, k);
			l->ib_off += k;
			p += k;
			n -= k;
			continue;
		}
		if (n >= LEND_PAGE_SIZE && lend_conn_pending(&l->conn) == 0) {
			if (in_ready(l)) {
				if (l->ib_len > l->ib_off)
					continue; /* it read ahead: take that */
			} else if (out_flush(s) < 0) {
				return -1;
			}
			return lend_conn_read(&l->conn, p, n);
		}
		if (in_fill(s, l) < 0)
			return -1;
	}
	return 0;
}

/* Serves one request. Returns 0, or -1 when the connection must close. */
static int serve_one(struct lend_server *s)
{
	struct lend_server_link *l = &s->lend;
	struct lend_conn *c = &l->conn;
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr q, r;

	if (in_read(s, l, b, sizeof b) < 0)
		return -1;
	if (lend_hdr_decode(b, 0, &q) < 0) {
		snprintf(c->err, sizeof c->err, "a request with a bad magic");
		return -1;
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
			return -1;
		snprintf(c->err, sizeof c->err, "refused a request: %s",
		         lend_err_str(r.error));
		return q.type == LEND_WRITE ? -1 : 0;
	}
	/* a pending READ reply points into the store: send it before the
	 * pages change or go */
	if (s->out_reads &&
	    (q.type == LEND_WRITE || q.type == LEND_TRIM ||
	     q.type == LEND_RELEASE) &&
	    out_flush(s) < 0)
		return -1;
	int64_t now = clock_mono_ms();
	size_t len = (size_t)q.count * LEND_PAGE_SIZE;
	switch (q.type) {
	case LEND_READ:
		lend_meter_read(&s->meter, q.count, now);
		s->out_reads = 1;
		return out_reply(s, &r,
		                 lend_store_page(&s->store, (int64_t)q.page),
		                 len);
	case LEND_WRITE:
		/* straight into the held pages */
		if (in_read(s, l, lend_store_page(&s->store, (int64_t)q.page),
		            len) < 0)
			return -1;
		lend_meter_write(&s->meter, q.page, q.count, now);
		return out_reply(s, &r, NULL, 0);
	case LEND_TRIM:
		lend_store_zero(&s->store, (int64_t)q.page, q.count);
		lend_meter_trim(&s->meter, q.page, q.count, now);
		return out_reply(s, &r, NULL, 0);
	case LEND_FLUSH:
		return out_reply(s, &r, NULL, 0);
	case LEND_METER: {
		struct lend_meter_report rep = lend_server_report(s);
		/* one meter buffer: send what holds it first */
		if (out_flush(s) < 0)
			return -1;
		lend_meter_encode(&rep, s->om);
		r.extra = LEND_METER_WIRE;
		return out_reply(s, &r, s->om, LEND_METER_WIRE);
	}
	case LEND_RELEASE:
		free_pages(s, s->recalling ? "the borrower released them "
		                             "after the recall notice"
		                           : "the borrower released them");
		return out_reply(s, &r, NULL, 0);
	case LEND_BYE:
		(void)out_reply(s, &r, NULL, 0);
		snprintf(c->err, sizeof c->err, "the borrower said goodbye");
		return -1;
	}
	assert(0 && "lend_hdr_check let an unknown type through");
	return -1;
}

/* Serves one NBD request of the DATA connection: the same store, meter
 * and batches as serve_one. Returns 0, or -1 when that connection must
 * close. */
static int serve_nbd_one(struct lend_server *s)
{
	struct lend_server_link *l = &s->data;
	struct lend_conn *c = &l->conn;
	uint8_t b[LEND_NBD_REQ_LEN];
	struct lend_nbd_req q;
	const struct lend_nbd_export e = {
	    .size = (uint64_t)s->cfg.pages * LEND_PAGE_SIZE,
	    .tflags = LEND_NBD_TFLAGS};

	if (in_read(s, l, b, sizeof b) < 0)
		return -1;
	if (lend_nbd_req_decode(b, &q) < 0) {
		snprintf(c->err, sizeof c->err,
		         "an NBD request with a bad magic");
		return -1;
	}
	if (q.type == LEND_NBD_CMD_DISC) {
		snprintf(c->err, sizeof c->err,
		         "the borrower's NBD client disconnected");
		return -1;
	}
	int rc = lend_nbd_req_check(&e, &q);
	if (rc < 0) {
		snprintf(c->err, sizeof c->err,
		         "an NBD WRITE of %u bytes, longer than %u",
		         (unsigned)q.len, (unsigned)LEND_NBD_MAX_REQ);
		return -1;
	}
	/* NBD's rule: a WRITE past the end is ENOSPC */
	if (rc == EINVAL && q.type == LEND_NBD_CMD_WRITE &&
	    (q.off > e.size || q.len > e.size - q.off))
		rc = ENOSPC;
	if (rc == 0 && s->released && q.type != LEND_NBD_CMD_FLUSH)
		rc = EIO; /* freed after the recall: nothing to read or keep */
	if (rc != 0) {
		/* a refused WRITE's payload is still in the stream */
		uint8_t junk[LEND_PAGE_SIZE];
		for (uint32_t left = q.type == LEND_NBD_CMD_WRITE ? q.len : 0;
		     left > 0;) {
			uint32_t k = left < sizeof junk ? left : sizeof junk;
			if (in_read(s, l, junk, k) < 0)
				return -1;
			left -= k;
		}
		s->nbd_errors++;
		return out_nbd(s, (uint32_t)rc, q.handle, NULL, 0);
	}
	/* a pending READ reply points into the store: send it before the
	 * pages change */
	if (s->out_reads &&
	    (q.type == LEND_NBD_CMD_WRITE || q.type == LEND_NBD_CMD_TRIM) &&
	    out_flush(s) < 0)
		return -1;
	int64_t now = clock_mono_ms();
	uint64_t page = q.off / LEND_PAGE_SIZE;
	uint32_t count = q.len / LEND_PAGE_SIZE;
	switch (q.type) {
	case LEND_NBD_CMD_READ:
		lend_meter_read(&s->meter, count, now);
		s->out_reads = 1;
		return out_nbd(s, 0, q.handle,
		               lend_store_page(&s->store, (int64_t)page), q.len);
	case LEND_NBD_CMD_WRITE:
		if (count > 0) {
			if (in_read(s, l,
			            lend_store_page(&s->store, (int64_t)page),
			            q.len) < 0)
				return -1;
			lend_meter_write(&s->meter, page, count, now);
		}
		return out_nbd(s, 0, q.handle, NULL, 0);
	case LEND_NBD_CMD_TRIM:
		if (count > 0) {
			lend_store_zero(&s->store, (int64_t)page, count);
			lend_meter_trim(&s->meter, page, count, now);
		}
		return out_nbd(s, 0, q.handle, NULL, 0);
	case LEND_NBD_CMD_FLUSH: /* the pages are in RAM: nothing to do */
		return out_nbd(s, 0, q.handle, NULL, 0);
	}
	assert(0 && "lend_nbd_req_check let an unknown type through");
	return -1;
}

/* Serves the requests that have arrived on link l, a batch at a time,
 * and sends their replies. Returns 0, or -1 when l must close. */
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
		if (one(s) < 0)
			return -1;
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
