/* lend_client.c — the borrower's connection to its lender (see header). */
#include "node-agent/lend/lend_client.h"

#include <assert.h>
#include <errno.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "node-agent/lend/lend_iov.h"
#include "node-agent/lend/lend_server.h" /* clock_mono_ms */

static void fail_all(struct lend_client *c);
static int flush_out(struct lend_client *c);

static int lose(struct lend_client *c, const char *what)
{
	if (!c->lost)
		log_error("borrower lost its lender",
		          "contract=%llu why=\"%s: %s\" in_flight=%d",
		          (unsigned long long)c->contract, what, c->conn.err,
		          c->inflight);
	snprintf(c->err, sizeof c->err, "%s: %s", what, c->conn.err);
	c->lost = 1;
	c->out_n = c->nheld = 0;
	c->meter.r.lost = 1;
	lend_conn_close(&c->conn);
	fail_all(c);
	return -1;
}

int lend_client_connect(struct lend_client *c, const char *host, int port,
                        SSL_CTX *tls, uint64_t contract,
                        const uint8_t secret[LEND_SECRET_LEN], int timeout_ms)
{
	return lend_client_connect_role(c, host, port, tls, contract, secret,
	                                timeout_ms, LEND_CONN_LEND);
}

int lend_client_connect_role(struct lend_client *c, const char *host,
                             int port, SSL_CTX *tls, uint64_t contract,
                             const uint8_t secret[LEND_SECRET_LEN],
                             int timeout_ms, uint32_t role)
{
	char err[sizeof c->err];
	int fd = lend_tcp_connect(host, port, err, sizeof err);
	if (fd < 0) {
		memset(c, 0, sizeof *c);
		c->conn.fd = -1;
		c->contract = contract;
		c->lost = 1;
		snprintf(c->err, sizeof c->err, "%s", err);
		return -1;
	}
	return lend_client_open_role(c, fd, tls, contract, secret, timeout_ms,
	                             role);
}

int lend_client_open(struct lend_client *c, int fd, SSL_CTX *tls,
                     uint64_t contract, const uint8_t secret[LEND_SECRET_LEN],
                     int timeout_ms)
{
	return lend_client_open_role(c, fd, tls, contract, secret, timeout_ms,
	                             LEND_CONN_LEND);
}

int lend_client_open_role(struct lend_client *c, int fd, SSL_CTX *tls,
                          uint64_t contract,
                          const uint8_t secret[LEND_SECRET_LEN],
                          int timeout_ms, uint32_t role)
{
	uint8_t buf[LEND_AUTHR_LEN], want[LEND_MAC_LEN];
	struct lend_hello hello;
	struct lend_auth auth = {.contract = contract, .role = role};
	struct lend_welcome w;

	memset(c, 0, sizeof *c);
	c->conn.fd = -1;
	c->contract = contract;
	c->lost = 1;
	if (lend_conn_open(&c->conn, fd, tls, 0, timeout_ms) < 0) {
		snprintf(c->err, sizeof c->err, "%s", c->conn.err);
		return -1;
	}
	if (lend_conn_read(&c->conn, buf, LEND_HELLO_LEN) < 0) {
		snprintf(c->err, sizeof c->err, "no HELLO from the lender: %s",
		         c->conn.err);
		goto fail;
	}
	if (lend_hello_decode(buf, &hello) < 0) {
		snprintf(c->err, sizeof c->err,
		         "the peer is not a ramex lender speaking version %d",
		         LEND_VERSION);
		goto fail;
	}
	if (role != LEND_CONN_LEND && !(hello.flags & LEND_HELLO_ROLES)) {
		snprintf(c->err, sizeof c->err,
		         "the lender runs an older ramex-lend-server without "
		         "the direct path (its HELLO offers no connection "
		         "roles): upgrade the lender, or run the borrower "
		         "without the direct path (ramex-lend-nbd without "
		         "--direct, lend_direct = no)");
		goto fail;
	}
	if (RAND_bytes(auth.client_nonce, LEND_NONCE_LEN) != 1) {
		snprintf(c->err, sizeof c->err, "could not draw a nonce");
		goto fail;
	}
	lend_mac(LEND_BORROWER, secret, contract, hello.server_nonce,
	         auth.client_nonce, lend_conn_binding(&c->conn), auth.mac);
	size_t alen = lend_auth_encode(&auth, buf);
	if (lend_conn_write(&c->conn, buf, alen) < 0 ||
	    lend_conn_read(&c->conn, buf, LEND_WELCOME_LEN) < 0) {
		snprintf(c->err, sizeof c->err,
		         "the lender closed the handshake: %s", c->conn.err);
		goto fail;
	}
	lend_welcome_decode(buf, &w);
	if (w.status != LEND_OK) {
		c->last_error = w.status;
		snprintf(c->err, sizeof c->err, "the lender refused: %s",
		         lend_err_str(w.status));
		goto fail;
	}
	lend_mac(LEND_LENDER, secret, contract, hello.server_nonce,
	         auth.client_nonce, lend_conn_binding(&c->conn), want);
	if (!lend_mac_equal(want, w.mac)) {
		snprintf(c->err, sizeof c->err,
		         "the lender could not prove it holds the contract "
		         "secret: an impostor, or the wrong secret here");
		goto fail;
	}
	if (w.pages == 0 || w.pages > (uint64_t)LEND_MAX_PAGES) {
		snprintf(c->err, sizeof c->err,
		         "the lender offers %llu pages, outside 1..%lld",
		         (unsigned long long)w.pages,
		         (long long)LEND_MAX_PAGES);
		goto fail;
	}
	c->pages = (int64_t)w.pages;
	c->rb = malloc(LEND_CLIENT_RBUF);
	if (!c->rb) {
		snprintf(c->err, sizeof c->err, "could not allocate a buffer");
		goto fail;
	}
	if (lend_meter_init(&c->meter, contract, LEND_METER_BORROWER, c->pages,
	                    clock_mono_ms()) < 0) {
		snprintf(c->err, sizeof c->err, "could not allocate the meter");
		goto fail;
	}
	lend_conn_set_timeout(&c->conn, 0);
	if (lend_conn_set_nonblock(&c->conn, 1) < 0) {
		snprintf(c->err, sizeof c->err, "%s", c->conn.err);
		goto fail;
	}
	c->lost = 0;
	c->next_handle = c->oldest = 1;
	c->reply_timeout_ms = LEND_CLIENT_REPLY_TIMEOUT_MS;
	return 0;
fail:
	free(c->rb);
	c->rb = NULL;
	lend_conn_close(&c->conn);
	return -1;
}

static void take_notice(struct lend_client *c, const struct lend_hdr *h)
{
	if (!c->notice)
		log_info("borrower got a recall notice",
		         "contract=%llu notice_ms=%llu",
		         (unsigned long long)c->contract,
		         (unsigned long long)h->extra);
	c->notice = 1;
	c->notice_ms = (int64_t)h->extra;
	c->notice_at_ms = clock_mono_ms();
}

/* Every request in flight completes with LEND_E_LOST (the link failed).
 * Slots are freed before the callbacks run, so a callback sees a client
 * with nothing in flight. */
static void fail_all(struct lend_client *c)
{
	for (int i = 0; i < LEND_CLIENT_SLOTS; i++) {
		struct lend_client_req q = c->req[i];
		if (!q.handle)
			continue;
		c->req[i].handle = 0;
		c->inflight--;
		c->inflight_pages -= q.count;
		if (q.done)
			q.done(q.arg, q.tag, LEND_E_LOST);
	}
	assert(c->inflight == 0 && c->inflight_pages == 0);
}

/* The oldest request in flight, or NULL. Handles grow by one per
 * request, so a cursor that skips the answered ones finds it. */
static const struct lend_client_req *oldest(struct lend_client *c)
{
	while (c->oldest != c->next_handle &&
	       c->req[c->oldest % LEND_CLIENT_SLOTS].handle != c->oldest)
		c->oldest++;
	if (c->oldest == c->next_handle || c->inflight == 0)
		return NULL;
	return &c->req[c->oldest % LEND_CLIENT_SLOTS];
}

int64_t lend_client_deadline_ms(struct lend_client *c)
{
	const struct lend_client_req *q = oldest(c);
	if (!q || c->lost || c->reply_timeout_ms <= 0)
		return -1;
	return q->sent_ms + c->reply_timeout_ms;
}

static const char *type_name(uint16_t t)
{
	switch (t) {
	case LEND_READ: return "READ";
	case LEND_WRITE: return "WRITE";
	case LEND_TRIM: return "TRIM";
	case LEND_FLUSH: return "FLUSH";
	case LEND_METER: return "METER";
	case LEND_RELEASE: return "RELEASE";
	}
	return "request";
}

/* Says in conn.err which request went unanswered too long. */
static void overdue(struct lend_client *c)
{
	const struct lend_client_req *q = oldest(c);
	assert(q);
	snprintf(c->conn.err, sizeof c->conn.err,
	         "no answer to a %s of %u pages at page %llu within %lld ms "
	         "(the reply timeout); the lender is taken as lost",
	         type_name(q->type), q->count, (unsigned long long)q->page,
	         (long long)c->reply_timeout_ms);
}

/*
 * Waits until the connection is readable (or writable too), at most
 * wait_ms (-1: no bound of the caller's) and never past the oldest
 * request's reply deadline. Returns 0 (the caller reads or retries: also
 * when wait_ms passed), or -1 when poll failed or the deadline passed
 * with nothing to read.
 */
static int wait_fd(struct lend_client *c, short events, int wait_ms)
{
	if (events & POLLIN && lend_conn_pending(&c->conn) > 0)
		return 0;
	int64_t dl = lend_client_deadline_ms(c);
	int t = wait_ms;
	if (dl >= 0) {
		int64_t left = dl - clock_mono_ms();
		left = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : left;
		if (t < 0 || t > left)
			t = (int)left;
	}
	struct pollfd p = {.fd = c->conn.fd, .events = events};
	int n = poll(&p, 1, t);
	if (n < 0 && errno != EINTR) {
		snprintf(c->conn.err, sizeof c->conn.err, "poll: %s",
		         strerror(errno));
		return -1;
	}
	/* late but readable: what came is read first, the bound is
	 * applied to what is still missing after that */
	if (n == 0 && dl >= 0 && clock_mono_ms() >= dl) {
		overdue(c);
		return -1;
	}
	return 0;
}

/* Reads exactly the bytes of iov, waiting as needed: the lender writes
 * each reply whole, so once its header is here the rest is on its way. */
static int read_iov(struct lend_client *c, const struct iovec *iov,
                    int iovcnt)
{
	for (int i = 0; i < iovcnt; i++) {
		uint8_t *p = iov[i].iov_base;
		size_t n = iov[i].iov_len;
		size_t have = c->rb_len - c->rb_off;
		if (have > 0) {
			size_t k = have < n ? have : n;
			memcpy(p, c->rb + c->rb_off, k);
			c->rb_off += k;
			p += k;
			n -= k;
		}
		while (n > 0) {
			ssize_t r = lend_conn_read_some(&c->conn, p, n);
			if (r < 0)
				return -1;
			if (r == 0) {
				if (wait_fd(c, POLLIN, -1) < 0)
					return -1;
				continue;
			}
			p += r;
			n -= (size_t)r;
		}
	}
	return 0;
}

/* Skips payload bytes nobody asked for a place for. */
static int skip(struct lend_client *c, size_t n)
{
	uint8_t junk[4096];
	while (n > 0) {
		size_t k = n < sizeof junk ? n : sizeof junk;
		struct iovec v = {junk, k};
		if (read_iov(c, &v, 1) < 0)
			return -1;
		n -= k;
	}
	return 0;
}

/* Handles the reply whose header is next in c->rb. Returns 0 or -1. */
static int take_reply(struct lend_client *c)
{
	struct lend_hdr r;
	int bad = lend_hdr_decode(c->rb + c->rb_off, 1, &r) < 0;
	c->rb_off += LEND_HDR_LEN;
	if (bad) {
		snprintf(c->conn.err, sizeof c->conn.err, "bad reply magic");
		return lose(c, "the lender broke the protocol");
	}
	if (r.type == LEND_NOTICE) {
		take_notice(c, &r);
		return 0;
	}
	struct lend_client_req *slot = &c->req[r.handle % LEND_CLIENT_SLOTS];
	if (r.handle == 0 || slot->handle != r.handle || slot->type != r.type) {
		snprintf(c->conn.err, sizeof c->conn.err,
		         "a reply of type %u to handle %llu, which is not in "
		         "flight",
		         r.type, (unsigned long long)r.handle);
		return lose(c, "the lender broke the protocol");
	}
	struct lend_client_req q = *slot;
	if (r.error == LEND_OK && q.type == LEND_READ &&
	    read_iov(c, q.iov, q.iovcnt) < 0)
		return lose(c, "the lender's data did not arrive");
	if (r.error == LEND_OK && q.type == LEND_METER) {
		if (r.extra != LEND_METER_WIRE) {
			snprintf(c->conn.err, sizeof c->conn.err,
			         "meter of %llu bytes",
			         (unsigned long long)r.extra);
			return lose(c, "the lender broke the protocol");
		}
		if ((q.iov ? read_iov(c, q.iov, q.iovcnt)
		           : skip(c, LEND_METER_WIRE)) < 0)
			return lose(c, "the lender's meter did not arrive");
	}
	slot->handle = 0;
	c->inflight--;
	c->inflight_pages -= q.count;
	if (r.error == LEND_OK) {
		int64_t now = clock_mono_ms();
		if (q.type == LEND_READ)
			lend_meter_read(&c->meter, q.count, now);
		else if (q.type == LEND_WRITE)
			lend_meter_write(&c->meter, q.page, q.count, now);
		else if (q.type == LEND_TRIM)
			lend_meter_trim(&c->meter, q.page, q.count, now);
		else if (q.type == LEND_RELEASE) {
			lend_meter_release(&c->meter, now);
			c->released = 1;
		}
	} else {
		c->last_error = r.error;
	}
	if (q.done)
		q.done(q.arg, q.tag, r.error);
	/* the lender closes after a refused WRITE: its payload could not
	 * be told from the next request */
	if (r.error != LEND_OK && q.type == LEND_WRITE) {
		snprintf(c->conn.err, sizeof c->conn.err,
		         "the lender refused a write: %s",
		         lend_err_str(r.error));
		return lose(c, "the lender closed the stream");
	}
	return 0;
}

int lend_client_pump(struct lend_client *c, int wait_ms)
{
	int taken = 0, drained = 0;
	if (c->lost)
		return -1;
	/* held requests first: their replies may be what we wait for */
	if (wait_ms != 0 && c->out_n > 0 && flush_out(c) < 0)
		return -1;
	if (wait_ms != 0 && wait_fd(c, POLLIN, wait_ms) < 0)
		return lose(c, "no reply from the lender");
	for (;;) {
		if (c->rb_len - c->rb_off >= LEND_HDR_LEN) {
			if (take_reply(c) < 0)
				return -1;
			taken++;
			continue;
		}
		/* keep a partial header, make room behind it */
		memmove(c->rb, c->rb + c->rb_off, c->rb_len - c->rb_off);
		c->rb_len -= c->rb_off;
		c->rb_off = 0;
		size_t room = LEND_CLIENT_RBUF - c->rb_len;
		if (drained && lend_conn_pending(&c->conn) == 0)
			return taken;
		ssize_t r =
		    lend_conn_read_some(&c->conn, c->rb + c->rb_len, room);
		if (r < 0)
			return lose(c, "no reply from the lender");
		if (r == 0)
			return taken;
		c->rb_len += (size_t)r;
		/* a short read took all there was: the frames it brought
		 * are taken, and the next recv, which would only say
		 * EAGAIN, is left to the caller's next poll */
		drained = (size_t)r < room && !c->conn.ssl;
	}
}

/* Sends every byte of iov; while the socket is full, reads replies, so
 * that the lender, blocked on sending them, can read on. */
static int send_iov(struct lend_client *c, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		if (iov->iov_len == 0) {
			iov++, iovcnt--;
			continue;
		}
		ssize_t w = lend_conn_writev_some(&c->conn, iov, iovcnt);
		if (w < 0)
			return lose(c, "could not send to the lender");
		if (w == 0) {
			if (wait_fd(c, POLLIN | POLLOUT, -1) < 0 ||
			    lend_client_pump(c, 0) < 0)
				return lose(c, "could not send to the lender");
			continue;
		}
		lend_iov_advance(&iov, &iovcnt, (size_t)w);
	}
	return 0;
}

/* Sends the requests held while corked. */
static int flush_out(struct lend_client *c)
{
	int n = c->out_n;
	int64_t now = clock_mono_ms();
	for (int i = 0; i < c->nheld; i++)
		c->req[c->held[i]].sent_ms = now;
	c->out_n = c->nheld = 0;
	return n > 0 ? send_iov(c, c->out, n) : 0;
}

void lend_client_cork(struct lend_client *c)
{
	c->corked = 1;
}

int lend_client_uncork(struct lend_client *c)
{
	c->corked = 0;
	if (c->lost)
		return -1;
	return flush_out(c);
}

int lend_client_submit(struct lend_client *c, uint16_t type, uint64_t page,
                       uint32_t count, const struct iovec *iov, int iovcnt,
                       lend_client_done_fn done, void *arg, uint64_t tag)
{
	assert(count <= LEND_MAX_REQ_PAGES && iovcnt >= 0 && iovcnt < 1024);
	for (;;) {
		if (c->lost) {
			snprintf(c->err, sizeof c->err,
			         "the lender is lost; its pages cannot be "
			         "reached");
			return -1;
		}
		if (c->inflight < LEND_CLIENT_SLOTS &&
		    c->inflight_pages + count <= LEND_CLIENT_WINDOW &&
		    !c->req[c->next_handle % LEND_CLIENT_SLOTS].handle)
			break;
		/* nothing in flight leaves every slot free and the whole
		 * window open: waiting could never end */
		assert(c->inflight > 0);
		(void)lend_client_pump(c, -1);
	}
	uint64_t h = c->next_handle++;
	if (c->next_handle == 0)
		c->next_handle = 1;
	struct lend_client_req *q = &c->req[h % LEND_CLIENT_SLOTS];
	*q = (struct lend_client_req){.handle = h,
	                              .type = type,
	                              .page = page,
	                              .count = count,
	                              .iov = iov,
	                              .iovcnt = iovcnt,
	                              .done = done,
	                              .arg = arg,
	                              .tag = tag,
	                              .sent_ms = clock_mono_ms()};
	c->inflight++;
	c->inflight_pages += count;
	struct lend_hdr hd = {
	    .type = type, .handle = h, .page = page, .count = count};
	lend_hdr_encode(&hd, 0, q->hdr);
	int need = 1 + (type == LEND_WRITE ? iovcnt : 0);
	if (c->corked && need <= LEND_CLIENT_OUTV) {
		/* lost while sending: fail_all completed it, like every
		 * other */
		if (c->out_n + need > LEND_CLIENT_OUTV && flush_out(c) < 0)
			return 0;
		assert(c->nheld < LEND_CLIENT_SLOTS);
		c->held[c->nheld++] = (int)(h % LEND_CLIENT_SLOTS);
		c->out[c->out_n++] = (struct iovec){q->hdr, LEND_HDR_LEN};
		for (int i = 1; i < need; i++)
			c->out[c->out_n++] = iov[i - 1];
		return 0;
	}
	if (c->out_n > 0 && flush_out(c) < 0)
		return 0; /* in order: what was held goes first */
	struct iovec v[1 + 1024];
	int n = 1;
	v[0] = (struct iovec){q->hdr, LEND_HDR_LEN};
	if (type == LEND_WRITE)
		for (int i = 0; i < iovcnt; i++)
			v[n++] = iov[i];
	(void)send_iov(c, v, n);
	return 0;
}

/* A synchronous call's pieces, all in flight together. */
struct sync {
	int left;
	uint32_t error; /* the first piece that failed */
};

static void sync_done(void *arg, uint64_t tag, uint32_t error)
{
	(void)tag;
	struct sync *s = arg;
	s->left--;
	if (error != LEND_OK && s->error == LEND_OK)
		s->error = error;
}

static int sync_wait(struct lend_client *c, struct sync *s)
{
	while (s->left > 0)
		if (lend_client_pump(c, -1) < 0)
			break;
	if (s->left > 0 || s->error == LEND_E_LOST) {
		if (!c->lost)
			(void)lose(c, "the link failed");
		return -1;
	}
	if (s->error != LEND_OK) {
		c->last_error = s->error;
		snprintf(c->err, sizeof c->err, "the lender refused: %s",
		         lend_err_str(s->error));
		return -1;
	}
	return 0;
}

static int paged(struct lend_client *c, uint16_t type, uint64_t page,
                 uint32_t count, const uint8_t *out, uint8_t *in)
{
	enum { MAXP = 64 };
	struct sync s = {0};
	struct iovec v[MAXP];
	int nv = 0;
	if (c->lost) {
		snprintf(c->err, sizeof c->err,
		         "the lender is lost; its pages cannot be reached");
		return -1;
	}
	while (count > 0) {
		uint32_t n =
		    count < LEND_CLIENT_CHUNK ? count : LEND_CLIENT_CHUNK;
		uint8_t *p = out ? (uint8_t *)out : in;
		/* the iovecs must live until the replies: wait for the
		 * pieces so far when the array is full */
		if (nv == MAXP) {
			if (sync_wait(c, &s) < 0)
				return -1;
			nv = 0;
		}
		v[nv] = (struct iovec){p, p ? (size_t)n * LEND_PAGE_SIZE : 0};
		s.left++;
		if (lend_client_submit(c, type, page, n, p ? &v[nv] : NULL,
		                       p ? 1 : 0, sync_done, &s, 0) < 0) {
			s.left--;
			if (s.error == LEND_OK)
				s.error = LEND_E_LOST;
			break;
		}
		nv++;
		page += n;
		count -= n;
		if (out)
			out += (size_t)n * LEND_PAGE_SIZE;
		if (in)
			in += (size_t)n * LEND_PAGE_SIZE;
	}
	return sync_wait(c, &s);
}

int lend_client_read(struct lend_client *c, uint64_t page, uint32_t count,
                     void *buf)
{
	return paged(c, LEND_READ, page, count, NULL, buf);
}

int lend_client_write(struct lend_client *c, uint64_t page, uint32_t count,
                      const void *buf)
{
	return paged(c, LEND_WRITE, page, count, buf, NULL);
}

int lend_client_trim(struct lend_client *c, uint64_t page, uint32_t count)
{
	return paged(c, LEND_TRIM, page, count, NULL, NULL);
}

/* One request without pages, waited for. */
static int simple(struct lend_client *c, uint16_t type, void *in, size_t len)
{
	struct sync s = {.left = 1};
	struct iovec v = {in, len};
	if (lend_client_submit(c, type, 0, 0, in ? &v : NULL, in ? 1 : 0,
	                       sync_done, &s, 0) < 0)
		return -1;
	return sync_wait(c, &s);
}

int lend_client_flush(struct lend_client *c)
{
	return simple(c, LEND_FLUSH, NULL, 0);
}

int lend_client_lender_meter(struct lend_client *c,
                             struct lend_meter_report *rep)
{
	uint8_t m[LEND_METER_WIRE];
	if (simple(c, LEND_METER, m, sizeof m) < 0)
		return -1;
	lend_meter_decode(m, rep);
	return 0;
}

int lend_client_release(struct lend_client *c)
{
	return simple(c, LEND_RELEASE, NULL, 0);
}

int lend_client_expire(struct lend_client *c, int64_t now_ms)
{
	int64_t dl = lend_client_deadline_ms(c);
	if (c->lost)
		return -1;
	if (dl < 0 || now_ms < dl)
		return 0;
	/* take what has come first: a late reply is no lost lender */
	if (lend_client_pump(c, 0) < 0)
		return -1;
	dl = lend_client_deadline_ms(c);
	if (dl < 0 || clock_mono_ms() < dl)
		return 0;
	overdue(c);
	return lose(c, "the lender stopped answering");
}

int lend_client_poll(struct lend_client *c)
{
	int before = c->notice;
	if (lend_client_pump(c, 0) < 0)
		return -1;
	return c->notice && !before;
}

struct lend_meter_report lend_client_report(struct lend_client *c)
{
	return lend_meter_report(&c->meter, clock_mono_ms());
}

int lend_client_take_fd(struct lend_client *c)
{
	if (c->lost || c->conn.fd < 0 || c->conn.ssl ||
	    lend_conn_set_nonblock(&c->conn, 0) < 0) {
		snprintf(c->err, sizeof c->err, "%s",
		         c->conn.ssl ? "a TLS connection cannot be handed to "
		                       "an NBD client (it speaks plain TCP)"
		         : c->lost   ? "the connection to the lender is lost"
		                     : c->conn.err);
		return -1;
	}
	int fd = c->conn.fd;
	c->conn.fd = -1;
	lend_conn_close(&c->conn);
	lend_meter_free(&c->meter);
	free(c->rb);
	c->rb = NULL;
	c->lost = 1;
	return fd;
}

void lend_client_close(struct lend_client *c)
{
	if (!c->lost && c->conn.fd >= 0) {
		uint8_t b[LEND_HDR_LEN];
		struct lend_hdr q = {.type = LEND_BYE,
		                     .handle = c->next_handle++};
		lend_hdr_encode(&q, 0, b);
		/* best effort, without waiting: the lender treats a close
		 * like a BYE */
		struct iovec v = {b, sizeof b};
		(void)lend_conn_writev_some(&c->conn, &v, 1);
	}
	lend_conn_close(&c->conn);
	lend_meter_free(&c->meter);
	free(c->rb);
	c->rb = NULL;
	c->lost = 1;
}
