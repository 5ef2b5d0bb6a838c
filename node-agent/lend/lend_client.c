/* lend_client.c — the borrower's connection to its lender (see header). */
#include "node-agent/lend/lend_client.h"

#include <errno.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "node-agent/lend/lend_server.h" /* lend_now_ms */

static int lose(struct lend_client *c, const char *what)
{
	if (!c->lost)
		log_error("borrower lost its lender",
		          "contract=%llu why=\"%s: %s\"",
		          (unsigned long long)c->contract, what, c->conn.err);
	snprintf(c->err, sizeof c->err, "%s: %s", what, c->conn.err);
	c->lost = 1;
	c->meter.r.lost = 1;
	lend_conn_close(&c->conn);
	return -1;
}

int lend_client_connect(struct lend_client *c, const char *host, int port,
                        SSL_CTX *tls, uint64_t contract,
                        const uint8_t secret[LEND_SECRET_LEN], int timeout_ms)
{
	uint8_t buf[LEND_AUTH_LEN], want[LEND_MAC_LEN];
	struct lend_hello hello;
	struct lend_auth auth = {.contract = contract};
	struct lend_welcome w;

	memset(c, 0, sizeof *c);
	c->conn.fd = -1;
	c->contract = contract;
	c->lost = 1;
	int fd = lend_tcp_connect(host, port, c->err, sizeof c->err);
	if (fd < 0)
		return -1;
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
	if (RAND_bytes(auth.client_nonce, LEND_NONCE_LEN) != 1) {
		snprintf(c->err, sizeof c->err, "could not draw a nonce");
		goto fail;
	}
	lend_mac(LEND_BORROWER, secret, contract, hello.server_nonce,
	         auth.client_nonce, lend_conn_binding(&c->conn), auth.mac);
	lend_auth_encode(&auth, buf);
	if (lend_conn_write(&c->conn, buf, LEND_AUTH_LEN) < 0 ||
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
	if (lend_meter_init(&c->meter, contract, LEND_METER_BORROWER, c->pages,
	                    lend_now_ms()) < 0) {
		snprintf(c->err, sizeof c->err, "could not allocate the meter");
		goto fail;
	}
	lend_conn_set_timeout(&c->conn, 0);
	c->lost = 0;
	c->next_handle = 1;
	return 0;
fail:
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
	c->notice_at_ms = lend_now_ms();
}

/* Reads frames until the reply to `handle`; notices in between are kept. */
static int read_reply(struct lend_client *c, uint64_t handle,
                      struct lend_hdr *r)
{
	uint8_t b[LEND_HDR_LEN];
	for (;;) {
		if (lend_conn_read(&c->conn, b, sizeof b) < 0)
			return lose(c, "no reply from the lender");
		if (lend_hdr_decode(b, 1, r) < 0) {
			snprintf(c->conn.err, sizeof c->conn.err,
			         "bad reply magic");
			return lose(c, "the lender broke the protocol");
		}
		if (r->type == LEND_NOTICE) {
			take_notice(c, r);
			continue;
		}
		if (r->handle != handle) {
			snprintf(c->conn.err, sizeof c->conn.err,
			         "reply to %llu while waiting for %llu",
			         (unsigned long long)r->handle,
			         (unsigned long long)handle);
			return lose(c, "the lender broke the protocol");
		}
		return 0;
	}
}

/* One request of at most LEND_MAX_REQ_PAGES pages. */
static int request(struct lend_client *c, uint16_t type, uint64_t page,
                   uint32_t count, const void *out, void *in,
                   struct lend_hdr *r)
{
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr q = {.type = type,
	                     .handle = c->next_handle++,
	                     .page = page,
	                     .count = count};
	if (c->lost) {
		snprintf(c->err, sizeof c->err,
		         "the lender is lost; its pages cannot be reached");
		return -1;
	}
	lend_hdr_encode(&q, 0, b);
	if (lend_conn_write(&c->conn, b, sizeof b) < 0)
		return lose(c, "could not send to the lender");
	if (out &&
	    lend_conn_write(&c->conn, out, (size_t)count * LEND_PAGE_SIZE) < 0)
		return lose(c, "could not send to the lender");
	if (read_reply(c, q.handle, r) < 0)
		return -1;
	if (r->error != LEND_OK) {
		c->last_error = r->error;
		snprintf(c->err, sizeof c->err, "the lender refused: %s",
		         lend_err_str(r->error));
		/* the lender closes after a refused WRITE */
		if (type == LEND_WRITE)
			return lose(c, c->err);
		return -1;
	}
	if (in &&
	    lend_conn_read(&c->conn, in, (size_t)count * LEND_PAGE_SIZE) < 0)
		return lose(c, "the lender's data did not arrive");
	return 0;
}

static int paged(struct lend_client *c, uint16_t type, uint64_t page,
                 uint32_t count, const uint8_t *out, uint8_t *in)
{
	struct lend_hdr r;
	while (count > 0) {
		uint32_t n =
		    count < LEND_MAX_REQ_PAGES ? count : LEND_MAX_REQ_PAGES;
		if (request(c, type, page, n, out, in, &r) < 0)
			return -1;
		int64_t now = lend_now_ms();
		if (type == LEND_READ)
			lend_meter_read(&c->meter, n, now);
		else if (type == LEND_WRITE)
			lend_meter_write(&c->meter, page, n, now);
		else
			lend_meter_trim(&c->meter, page, n, now);
		page += n;
		count -= n;
		if (out)
			out += (size_t)n * LEND_PAGE_SIZE;
		if (in)
			in += (size_t)n * LEND_PAGE_SIZE;
	}
	return 0;
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

int lend_client_flush(struct lend_client *c)
{
	struct lend_hdr r;
	return request(c, LEND_FLUSH, 0, 0, NULL, NULL, &r);
}

int lend_client_lender_meter(struct lend_client *c,
                             struct lend_meter_report *rep)
{
	struct lend_hdr r;
	uint8_t m[LEND_METER_WIRE];
	if (request(c, LEND_METER, 0, 0, NULL, NULL, &r) < 0)
		return -1;
	if (r.extra != LEND_METER_WIRE) {
		snprintf(c->conn.err, sizeof c->conn.err, "meter of %llu bytes",
		         (unsigned long long)r.extra);
		return lose(c, "the lender broke the protocol");
	}
	if (lend_conn_read(&c->conn, m, sizeof m) < 0)
		return lose(c, "the lender's meter did not arrive");
	lend_meter_decode(m, rep);
	return 0;
}

int lend_client_release(struct lend_client *c)
{
	struct lend_hdr r;
	if (request(c, LEND_RELEASE, 0, 0, NULL, NULL, &r) < 0)
		return -1;
	lend_meter_release(&c->meter, lend_now_ms());
	c->released = 1;
	return 0;
}

int lend_client_poll(struct lend_client *c)
{
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr h;
	if (c->lost)
		return -1;
	if (lend_conn_pending(&c->conn) == 0) {
		struct pollfd p = {.fd = c->conn.fd, .events = POLLIN};
		if (poll(&p, 1, 0) <= 0)
			return 0;
	}
	if (lend_conn_read(&c->conn, b, sizeof b) < 0)
		return lose(c, "the lender closed the connection");
	if (lend_hdr_decode(b, 1, &h) < 0 || h.type != LEND_NOTICE) {
		snprintf(c->conn.err, sizeof c->conn.err,
		         "an unasked-for frame of type %u", h.type);
		return lose(c, "the lender broke the protocol");
	}
	take_notice(c, &h);
	return 1;
}

struct lend_meter_report lend_client_report(struct lend_client *c)
{
	return lend_meter_report(&c->meter, lend_now_ms());
}

void lend_client_close(struct lend_client *c)
{
	if (!c->lost && c->conn.fd >= 0) {
		uint8_t b[LEND_HDR_LEN];
		struct lend_hdr q = {.type = LEND_BYE,
		                     .handle = c->next_handle++};
		lend_hdr_encode(&q, 0, b);
		/* best effort: the lender treats a close like a BYE */
		(void)lend_conn_write(&c->conn, b, sizeof b);
	}
	lend_conn_close(&c->conn);
	lend_meter_free(&c->meter);
	c->lost = 1;
}
