/* lend_server.c — the lender's service loop (see the header). */
#include "common/hostport.h"
#include "node-agent/lend/lend_server.h"

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

int64_t lend_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lend_server_open(struct lend_server *s, const struct lend_server_config *c,
                     char *err, size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->cfg = *c;
	s->lfd = -1;
	s->wake[0] = s->wake[1] = -1;
	s->done[0] = s->done[1] = -1;
	s->conn.fd = -1;
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
	                    lend_now_ms()) < 0) {
		snprintf(err, errlen, "could not allocate the meter");
		goto fail;
	}
	s->ib = malloc(LEND_SERVER_IBUF);
	if (!s->ib) {
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
	log_info("lender holds the contract's pages",
	         "contract=%llu pages=%lld store=%s locked=%d port=%d tls=%d "
	         "keep_awake=%d",
	         (unsigned long long)c->contract, (long long)c->pages,
	         lend_store_kind_name(s->store.kind),
	         s->store.kind == LEND_STORE_RAMEX || s->store.locked, s->port,
	         c->tls != NULL, c->keep_awake);
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
	return lend_meter_report(&s->meter, lend_now_ms());
}

static int send_reply(struct lend_conn *c, const struct lend_hdr *h)
{
	uint8_t b[LEND_HDR_LEN];
	lend_hdr_encode(h, 1, b);
	return lend_conn_write(c, b, sizeof b);
}

static int send_notice(struct lend_server *s)
{
	int64_t left = s->deadline_ms - lend_now_ms();
	struct lend_hdr n = {.type = LEND_NOTICE,
	                     .extra = (uint64_t)(left > 0 ? left : 0)};
	return send_reply(&s->conn, &n);
}

static int out_flush(struct lend_server *s);

static void drop_conn(struct lend_server *s, const char *why)
{
	if (s->conn.fd < 0)
		return;
	(void)out_flush(s); /* e.g. the reply to a BYE or a refusal */
	s->ib_off = s->ib_len = 0;
	log_info("borrower connection closed", "contract=%llu why=\"%s\"",
	         (unsigned long long)s->cfg.contract, why);
	lend_conn_close(&s->conn);
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
	struct lend_hello hello = {.version = LEND_VERSION};
	struct lend_auth auth;
	struct lend_welcome w = {.status = LEND_OK};
	uint8_t buf[LEND_AUTH_LEN], want[LEND_MAC_LEN];

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
	    lend_auth_decode(buf, &auth) < 0) {
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
	h->deadline_ms = lend_now_ms() + s->cfg.handshake_ms;
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
 * authenticated connection becomes s->conn. */
static void handshake_finish(struct lend_server *s, struct lend_handshake *h)
{
	pthread_join(h->thr, NULL);
	close(h->watch);
	h->used = 0;
	if (h->refused)
		s->auth_failures++;
	if (!h->ok)
		return;
	if (s->conn.fd >= 0)
		drop_conn(s, "replaced by a new authenticated connection");
	s->conn = h->c;
	s->connections++;
	log_info("borrower authenticated", "contract=%llu tls=%d",
	         (unsigned long long)s->cfg.contract, s->conn.ssl != NULL);
	if (s->recalling && send_notice(s) < 0)
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
	lend_meter_release(&s->meter, lend_now_ms());
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
	if (s->ov_n > 0 && s->conn.fd >= 0) {
		rc = lend_conn_writev(&s->conn, s->ov, s->ov_n);
		s->batches++;
		s->batched_replies += s->oh_n;
	}
	s->ov_n = s->oh_n = 0;
	s->out_reads = 0;
	return rc;
}

/* Holds back a reply, and its payload (may be NULL). Returns 0 or -1. */
static int out_reply(struct lend_server *s, const struct lend_hdr *h,
                     const void *data, size_t len)
{
	if (s->oh_n == LEND_SERVER_BATCH && out_flush(s) < 0)
		return -1;
	lend_hdr_encode(h, 1, s->oh[s->oh_n]);
	s->ov[s->ov_n++] = (struct iovec){s->oh[s->oh_n++], LEND_HDR_LEN};
	if (len)
		s->ov[s->ov_n++] = (struct iovec){(void *)data, len};
	return 0;
}

/* Whether a request's bytes are here already (read ahead, decrypted, or
 * in the socket), so that serving it cannot block. */
static int in_ready(struct lend_server *s)
{
	if (s->ib_len > s->ib_off || lend_conn_pending(&s->conn) > 0)
		return 1;
	if (s->conn.ssl) {
		struct pollfd p = {.fd = s->conn.fd, .events = POLLIN};
		return poll(&p, 1, 0) > 0;
	}
	/* plain TCP: one recv both asks and reads ahead */
	s->ib_off = s->ib_len = 0;
	ssize_t r = recv(s->conn.fd, s->ib, LEND_SERVER_IBUF, MSG_DONTWAIT);
	if (r > 0) {
		s->ib_len = (size_t)r;
		return 1;
	}
	/* the end of the stream or an error: let the next read say so */
	return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Reads more into the read-ahead buffer, blocking; the replies held back
 * go first, since the borrower may wait for them before it sends more. */
static int in_fill(struct lend_server *s)
{
	size_t had = s->ib_len - s->ib_off;
	if (in_ready(s)) {
		if (s->ib_len - s->ib_off > had)
			return 0; /* in_ready read ahead */
	} else if (out_flush(s) < 0) {
		return -1;
	}
	if (s->ib_off == s->ib_len)
		s->ib_off = s->ib_len = 0;
	if (s->ib_off > 0 && s->ib_len == LEND_SERVER_IBUF) {
		memmove(s->ib, s->ib + s->ib_off, s->ib_len - s->ib_off);
		s->ib_len -= s->ib_off;
		s->ib_off = 0;
	}
	for (;;) {
		size_t room = LEND_SERVER_IBUF - s->ib_len;
		ssize_t r;
		if (s->conn.ssl) {
			size_t got = 0;
			if (SSL_read_ex(s->conn.ssl, s->ib + s->ib_len, room,
			                &got) != 1) {
				snprintf(s->conn.err, sizeof s->conn.err,
				         "the borrower closed the connection");
				ERR_clear_error();
				return -1;
			}
			r = (ssize_t)got;
		} else {
			r = recv(s->conn.fd, s->ib + s->ib_len, room, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				snprintf(s->conn.err, sizeof s->conn.err, "%s",
				         r == 0 ? "the borrower closed the "
				                  "connection"
				                : strerror(errno));
				return -1;
			}
		}
		s->ib_len += (size_t)r;
		return 0;
	}
}

/* Exactly n bytes of the stream into dst: what was read ahead first; a
 * long rest goes straight into dst (a WRITE's pages: no copy). */
static int in_read(struct lend_server *s, void *dst, size_t n)
{
	uint8_t *p = dst;
	while (n > 0) {
		size_t have = s->ib_len - s->ib_off;
		if (have > 0) {
			size_t k = have < n ? have : n;
			memcpy(p, s->ib + s->ib_off, k);
			s->ib_off += k;
			p += k;
			n -= k;
			continue;
		}
		if (n >= LEND_PAGE_SIZE && lend_conn_pending(&s->conn) == 0) {
			if (in_ready(s)) {
				if (s->ib_len > s->ib_off)
					continue; /* it read ahead: take that */
			} else if (out_flush(s) < 0) {
				return -1;
			}
			return lend_conn_read(&s->conn, p, n);
		}
		if (in_fill(s) < 0)
			return -1;
	}
	return 0;
}

/* Serves one request. Returns 0, or -1 when the connection must close. */
static int serve_one(struct lend_server *s)
{
	struct lend_conn *c = &s->conn;
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr q, r;

	if (in_read(s, b, sizeof b) < 0)
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
	int64_t now = lend_now_ms();
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
		if (in_read(s, lend_store_page(&s->store, (int64_t)q.page),
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

/* Serves the requests that have arrived, a batch at a time, and sends
 * their replies. Returns 0, or -1 when the connection must close. */
static int serve(struct lend_server *s)
{
	/* bounded, so that a borrower streaming without pause does not
	 * keep the loop from a recall, a stop or a handshake */
	int n = 0;
	do {
		if (serve_one(s) < 0)
			return -1;
	} while (++n < 4 * LEND_SERVER_BATCH && in_ready(s));
	return out_flush(s);
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
	int64_t next_tick = lend_now_ms() + 1000;
	enum lend_server_end end;
	for (;;) {
		int64_t now = lend_now_ms();
		if (now >= next_tick) {
			tick(s);
			next_tick = now + 1000;
		}
		if (s->recalling && !s->released && now >= s->deadline_ms) {
			drop_conn(s, "the recall deadline passed");
			free_pages(s, "the recall deadline passed before the "
			              "borrower released them");
			end = LEND_END_DEADLINE;
			break;
		}
		if (s->released && s->conn.fd < 0) {
			end = LEND_END_RELEASED;
			break;
		}
		if (s->conn.fd >= 0 && (lend_conn_pending(&s->conn) > 0 ||
		                        s->ib_len > s->ib_off)) {
			lend_awake_busy(&s->awake);
			if (serve(s) < 0)
				drop_conn(s, s->conn.err);
			continue;
		}
		int64_t wait = next_tick - now;
		if (s->recalling && !s->released && s->deadline_ms - now < wait)
			wait = s->deadline_ms - now;
		wait = handshake_cut(s, now, 0, wait);
		struct pollfd p[4] = {{.fd = s->wake[0], .events = POLLIN},
		                      {.fd = s->lfd, .events = POLLIN},
		                      {.fd = s->conn.fd, .events = POLLIN},
		                      {.fd = s->done[0], .events = POLLIN}};
		int n = poll(p, 4, (int)(wait > 0 ? wait : 0));
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
					    lend_now_ms() + s->cfg.notice_ms;
					log_info(
					    "lender recalls the pages",
					    "contract=%llu notice_ms=%lld",
					    (unsigned long long)s->cfg.contract,
					    (long long)s->cfg.notice_ms);
					if (s->conn.fd >= 0 &&
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
		if (s->conn.fd >= 0 && p[2].fd == s->conn.fd &&
		    (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			/* a borrower is at work: its next requests come
			 * soon; keep a core awake for their wakeup */
			lend_awake_busy(&s->awake);
			if (serve(s) < 0)
				drop_conn(s, s->conn.err);
		}
	}
	/* no handshake outlives the run: cut them, take what they say */
	handshake_cut(s, lend_now_ms(), 1, 0);
	handshake_reap(s, 1);
	tick(s);
	return end;
}

void lend_server_close(struct lend_server *s)
{
	if (s->done[0] >= 0) {
		handshake_cut(s, lend_now_ms(), 1, 0);
		handshake_reap(s, 1);
	}
	drop_conn(s, "the lender is shutting down");
	lend_awake_stop(&s->awake);
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
	free(s->ib);
	s->ib = NULL;
}
