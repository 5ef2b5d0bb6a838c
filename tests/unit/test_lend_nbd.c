/*
 * test_lend_nbd.c — remote lending seen from the borrower's block device:
 * the NBD server and bridge in front of a real lender on 127.0.0.1 (its
 * handshake, requests in flight, a lender that vanishes or falls silent),
 * and the lend client against a fake lender that answers out of order,
 * late, or not at all. Split from test_lend.c (issue #30); the shared
 * fixture is lend_fixture.h.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_awake.h"
#include "node-agent/lend/lend_bridge.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_qos.h"
#include "node-agent/lend/lend_server.h"
#include "tests/unit/lend_fixture.h"

END_TEST

END_TEST

/* ---- NBD ---------------------------------------------------------- */

struct br {
	struct lend_bridge b;
	struct lend_client c;
	pthread_t thr;
	int fd;
	enum lend_bridge_end end;
};

static void *br_main(void *arg)
{
	struct br *x = arg;
	if (lend_bridge_accept(&x->b, x->fd) == 0)
		x->end = lend_bridge_run(&x->b);
	else
		x->end = LEND_BRIDGE_ERROR;
	return NULL;
}

/* A bridge to `port`'s lender whose replies may take up to timeout_ms,
 * with `awake` keep-awake threads, not yet running (options that must be
 * set before it runs go between br_init and br_go). */
static void br_init(struct br *x, int port, int64_t timeout_ms, int awake)
{
	ck_assert_int_eq(lend_client_connect(&x->c, "127.0.0.1", port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	x->c.reply_timeout_ms = timeout_ms;
	ck_assert_int_eq(lend_bridge_init(&x->b, &x->c, "ramex"), 0);
	ck_assert_int_eq(lend_bridge_keep_awake(&x->b, awake), 0);
}

/* Runs the bridge in a thread; returns the NBD client's end. */
static int br_go(struct br *x)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	x->fd = sv[0];
	pthread_create(&x->thr, NULL, br_main, x);
	return sv[1];
}

static int br_start_awake(struct br *x, int port, int64_t timeout_ms, int awake)
{
	br_init(x, port, timeout_ms, awake);
	return br_go(x);
}

static int br_start_timeout(struct br *x, int port, int64_t timeout_ms)
{
	return br_start_awake(x, port, timeout_ms, 0);
}

static int br_start(struct br *x, int port)
{
	return br_start_timeout(x, port, LEND_CLIENT_REPLY_TIMEOUT_MS);
}

static int64_t spins(struct lend_awake *a)
{
	return atomic_load(&a->spins);
}

static enum lend_bridge_end br_join(struct br *x)
{
	pthread_join(x->thr, NULL);
	x->b.fd = -1; /* closed with the bridge below */
	close(x->fd);
	lend_bridge_free(&x->b);
	return x->end;
}

START_TEST(nbd_through_bridge_to_lender)
{
	struct srv x;
	struct br y;
	char err[200];
	uint64_t size = 0;
	uint16_t fl = 0;
	uint32_t e = 99;
	enum { LEN = 2 * LEND_BRIDGE_BUF + 3 * 4096 }; /* several chunks */
	uint8_t *w = malloc(LEN), *r = malloc(LEN);

	srv_start(&x, 7, secret_a, 2048, NULL, 1000);
	int fd = br_start(&y, x.s.port);
	ck_assert_msg(lend_nbd_client_handshake(fd, "ramex", &size, &fl, err,
	                                        sizeof err) == 0,
	              "%s", err);
	ck_assert_uint_eq(size, 2048 * 4096);
	ck_assert(fl & LEND_NBD_FLAG_SEND_TRIM);
	/* room in the NBD socket for all the staging buffer can answer at
	 * once (root may pass net.core.wmem_max, as the attached bridge
	 * does) */
	int sndbuf = 0;
	socklen_t sl = sizeof sndbuf;
	ck_assert_int_eq(getsockopt(y.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl),
	                 0);
	if (geteuid() == 0)
		ck_assert_int_ge(sndbuf, 2 * (int)LEND_BRIDGE_BUF);
	fill(w, LEN / 4096, 9);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 1, 8192,
	                                     LEN, w, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 2, 8192,
	                                     LEN, NULL, r, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_mem_eq(r, w, LEN);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_FLUSH, 3, 0, 0,
	                                     NULL, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	/* a FLUSH's length means nothing: still one flush, and success */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_FLUSH, 3, 0,
	                                     1 << 20, NULL, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	/* a WRITE of nothing is done at once: the lender never sees it
	 * (it would refuse it and end the stream; found by fuzz_bridge) */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 3, 8192, 0,
	                                     w, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	/* nor its offset (the lender takes a FLUSH at page 0 only; found
	 * by fuzz_bridge) */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_FLUSH, 3,
	                                     UINT64_C(1) << 40, 4096, NULL,
	                                     NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_TRIM, 4, 8192,
	                                     4096, NULL, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	/* unaligned, and past the end: EINVAL, the connection survives */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 5, 100,
	                                     4096, NULL, r, &e),
	                 0);
	ck_assert_uint_eq(e, EINVAL);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 6,
	                                     size - 4096, 8192, w, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, EINVAL);
	ck_assert_int_eq(
	    lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 7, 0, 4096, NULL, r, &e),
	    0);
	ck_assert_uint_eq(e, 0);
	/* both meters agree on what moved */
	struct lend_meter_report l = lend_server_report(&x.s);
	struct lend_meter_report b = lend_client_report(&y.c);
	struct lend_recon_result out;
	ck_assert_int_eq(l.page_writes, LEN / 4096);
	ck_assert_int_eq(b.page_writes, l.page_writes);
	ck_assert_int_eq(b.page_reads, l.page_reads);
	ck_assert_int_eq(b.pages_in_use, LEN / 4096 - 1);
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 8, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_DISC);
	close(fd);
	lend_client_close(&y.c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
	free(w);
	free(r);
}
END_TEST

START_TEST(nbd_lender_vanishes_gives_eio)
{
	struct srv x;
	struct br y;
	char err[200];
	uint64_t size;
	uint16_t fl;
	uint32_t e = 0;
	uint8_t p[4096] = {3};

	srv_start(&x, 7, secret_a, 64, NULL, 1000);
	int fd = br_start(&y, x.s.port);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 1, 0, 4096,
	                                     p, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	srv_join(&x, 1);
	lend_server_close(&x.s); /* the lender and its memory are gone */
	/* the bridge notices, answers EIO at once and ends: lost */
	int got_eio = 0;
	for (int i = 0; i < 50 && !got_eio; i++) {
		if (lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 2, 0, 4096, NULL,
		                        p, &e) < 0)
			break;
		got_eio = e == EIO;
	}
	ck_assert_int_eq(got_eio, 1);
	/* and keeps answering EIO until the client leaves */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 3, 0, 4096,
	                                     p, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, EIO);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 4, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_LOST);
	ck_assert_int_eq(lend_client_report(&y.c).lost, 1);
	close(fd);
	lend_client_close(&y.c);
}
END_TEST

static void opt(int fd, uint32_t o, const void *d, uint32_t len)
{
	uint8_t h[16] = {'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T'};
	h[8] = (uint8_t)(o >> 24), h[9] = (uint8_t)(o >> 16);
	h[10] = (uint8_t)(o >> 8), h[11] = (uint8_t)o;
	h[12] = (uint8_t)(len >> 24), h[13] = (uint8_t)(len >> 16);
	h[14] = (uint8_t)(len >> 8), h[15] = (uint8_t)len;
	ck_assert_int_eq(write(fd, h, 16), 16);
	if (len)
		ck_assert_int_eq(write(fd, d, len), (ssize_t)len);
}

static uint32_t opt_reply_type(int fd)
{
	uint8_t r[20], d[64];
	ck_assert_int_eq(read_full(fd, r, 20), 0);
	uint32_t len = (uint32_t)r[16] << 24 | r[17] << 16 | r[18] << 8 | r[19];
	ck_assert_uint_le(len, sizeof d);
	ck_assert_int_eq(read_full(fd, d, len), 0);
	return (uint32_t)r[12] << 24 | r[13] << 16 | r[14] << 8 | r[15];
}

static void *nbd_srv_main(void *arg)
{
	int fd = *(int *)arg;
	char err[200];
	struct lend_nbd_export e = {
	    .name = "ramex", .size = 1 << 20, .tflags = LEND_NBD_TFLAGS};
	*(int *)arg = lend_nbd_server_handshake(fd, &e, err, sizeof err);
	return NULL;
}

START_TEST(nbd_handshake_options)
{
	int sv[2];
	pthread_t t;
	uint8_t b[18 + 134];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int arg = sv[0];
	pthread_create(&t, NULL, nbd_srv_main, &arg);
	ck_assert_int_eq(read_full(sv[1], b, 18), 0);
	ck_assert_mem_eq(b, "NBDMAGICIHAVEOPT", 16);
	ck_assert_int_eq(b[17] & 1, 1); /* fixed newstyle */
	uint8_t cf[4] = {0, 0, 0, 1};   /* fixed newstyle, with zeroes */
	ck_assert_int_eq(write(sv[1], cf, 4), 4);
	opt(sv[1], 3, NULL, 0);                      /* LIST */
	ck_assert_uint_eq(opt_reply_type(sv[1]), 2); /* REP_SERVER */
	ck_assert_uint_eq(opt_reply_type(sv[1]), 1); /* ACK */
	opt(sv[1], 5, NULL, 0);                      /* STARTTLS: not here */
	ck_assert_uint_eq(opt_reply_type(sv[1]), (UINT32_C(1) << 31) | 1);
	uint8_t go[4 + 5 + 2] = {0, 0, 0, 5, 'o', 't', 'h', 'e', 'r', 0, 0};
	opt(sv[1], 7, go, sizeof go); /* GO for an unknown export */
	ck_assert_uint_eq(opt_reply_type(sv[1]), (UINT32_C(1) << 31) | 6);
	opt(sv[1], 1, "ramex", 5); /* EXPORT_NAME: size, flags, 124 zeroes */
	ck_assert_int_eq(read_full(sv[1], b, 10 + 124), 0);
	ck_assert_int_eq(b[5], 0x10); /* 1 MiB, big-endian */
	ck_assert_int_eq(b[133], 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(arg, 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- many requests in flight ------------------------------------- */

/* A scripted lender that knows the secret: it reads `nreq` requests, then
 * answers them as `mode` says. The pages of a READ reply are filled with
 * the page number, so that a reply matched to the wrong request shows. */
enum fake_mode {
	FAKE_REVERSE,
	FAKE_BAD_HANDLE,
	FAKE_CLOSE,
	FAKE_SILENT,    /* takes the requests, never answers, stays */
	FAKE_HALF_HDR,  /* half of the first reply's header, then silence */
	FAKE_HALF_DATA, /* its header and half its page, then silence */
};
struct fake {
	int lfd, port, nreq, got;
	enum fake_mode mode;
	pthread_t thr;
};

static void fake_reply(int fd, const struct lend_hdr *q, uint64_t handle)
{
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr r = {.type = q->type, .handle = handle,
	                     .count = q->count};
	lend_hdr_encode(&r, 1, b);
	ck_assert_int_eq(write(fd, b, sizeof b), (ssize_t)sizeof b);
	for (uint32_t i = 0; q->type == LEND_READ && i < q->count; i++) {
		uint8_t page[LEND_PAGE_SIZE];
		memset(page, (int)((q->page + i) & 0xff), sizeof page);
		ck_assert_int_eq(write(fd, page, sizeof page),
		                 (ssize_t)sizeof page);
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	uint8_t b[LEND_AUTH_LEN];
	struct lend_hello h = {.version = LEND_VERSION};
	struct lend_auth a;
	struct lend_welcome w = {.status = LEND_OK, .pages = 4096};
	struct lend_hdr q[64];
	memset(h.server_nonce, 0x11, LEND_NONCE_LEN);
	lend_hello_encode(&h, b);
	ck_assert_int_eq(write(fd, b, LEND_HELLO_LEN), LEND_HELLO_LEN);
	ck_assert_int_eq(read_full(fd, b, LEND_AUTH_LEN), 0);
	ck_assert_int_eq(lend_auth_decode(b, &a), 0);
	lend_mac(LEND_LENDER, secret_a, a.contract, h.server_nonce,
	         a.client_nonce, NULL, w.mac);
	lend_welcome_encode(&w, b);
	ck_assert_int_eq(write(fd, b, LEND_WELCOME_LEN), LEND_WELCOME_LEN);
	/* every request is read before any is answered: they were all in
	 * flight at once */
	int quiet = f->mode == FAKE_SILENT || f->mode == FAKE_HALF_HDR ||
	            f->mode == FAKE_HALF_DATA;
	for (f->got = 0; f->got < f->nreq; f->got++) {
		/* a silent lender's borrower may give up before it sent all:
		 * on a busy machine its timeout can come first */
		if (quiet && read_full(fd, b, LEND_HDR_LEN) < 0)
			break;
		if (!quiet)
			ck_assert_int_eq(read_full(fd, b, LEND_HDR_LEN), 0);
		ck_assert_int_eq(lend_hdr_decode(b, 0, &q[f->got]), 0);
		ck_assert_uint_eq(q[f->got].type, LEND_READ);
	}
	if (f->mode == FAKE_REVERSE)
		for (int i = f->nreq - 1; i >= 0; i--)
			fake_reply(fd, &q[i], q[i].handle);
	if (f->mode == FAKE_BAD_HANDLE) {
		fake_reply(fd, &q[0], q[0].handle);
		fake_reply(fd, &q[1], 987654321);
	}
	if ((f->mode == FAKE_HALF_HDR || f->mode == FAKE_HALF_DATA) &&
	    f->got > 0) {
		struct lend_hdr r = {.type = q[0].type,
		                     .handle = q[0].handle,
		                     .count = q[0].count};
		uint8_t page[LEND_PAGE_SIZE] = {0};
		lend_hdr_encode(&r, 1, b);
		size_t n = f->mode == FAKE_HALF_HDR ? LEND_HDR_LEN / 2
		                                    : LEND_HDR_LEN;
		/* the borrower may be gone already: no SIGPIPE, no check */
		(void)!send(fd, b, n, MSG_NOSIGNAL);
		if (f->mode == FAKE_HALF_DATA)
			(void)!send(fd, page, sizeof page / 2, MSG_NOSIGNAL);
	}
	/* FAKE_CLOSE: the lender dies with every request unanswered; else
	 * it stays until the borrower hangs up (the silent ones too: their
	 * connection looks alive to the borrower) */
	if (f->mode != FAKE_CLOSE)
		while (read(fd, b, sizeof b) > 0)
			;
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f, enum fake_mode mode, int nreq)
{
	char err[200];
	f->mode = mode;
	f->nreq = nreq;
	f->lfd = lend_tcp_listen("127.0.0.1", 0, &f->port, err, sizeof err);
	ck_assert_int_ge(f->lfd, 0);
	pthread_create(&f->thr, NULL, fake_main, f);
}

static void fake_join(struct fake *f)
{
	pthread_join(f->thr, NULL);
	close(f->lfd);
}

struct done_log {
	int n;
	uint64_t tag[64];
	uint32_t err[64];
};

static void log_done(void *arg, uint64_t tag, uint32_t error)
{
	struct done_log *d = arg;
	d->tag[d->n] = tag;
	d->err[d->n++] = error;
}

/* Starts a fake lender in `mode`, connects c to it and sends n one-page
 * READs (page i into buf[i], tag i, completions logged in d) without
 * waiting for any reply. */
static void fake_reads(struct fake *f, enum fake_mode mode,
                       struct lend_client *c, int n, struct done_log *d,
                       uint8_t (*buf)[LEND_PAGE_SIZE], struct iovec *v)
{
	fake_start(f, mode, n);
	ck_assert_int_eq(lend_client_connect(c, "127.0.0.1", f->port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	for (int i = 0; i < n; i++) {
		v[i] = (struct iovec){buf[i], LEND_PAGE_SIZE};
		ck_assert_int_eq(lend_client_submit(c, LEND_READ, (uint64_t)i,
		                                    1, &v[i], 1, log_done, d,
		                                    (uint64_t)i),
		                 0);
	}
}

START_TEST(client_matches_replies_to_handles)
{
	enum { N = 8 };
	struct fake f;
	struct lend_client c;
	struct done_log d = {0};
	static uint8_t buf[N][2 * LEND_PAGE_SIZE];
	struct iovec v[N];
	fake_start(&f, FAKE_REVERSE, N);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", f.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	/* N requests sent before any reply is read */
	for (int i = 0; i < N; i++) {
		v[i] = (struct iovec){buf[i], sizeof buf[i]};
		ck_assert_int_eq(lend_client_submit(&c, LEND_READ, 10 * i + 1,
		                                    2, &v[i], 1, log_done, &d,
		                                    (uint64_t)i),
		                 0);
	}
	ck_assert_int_eq(c.inflight, N);
	ck_assert_int_eq(c.inflight_pages, 2 * N);
	while (d.n < N)
		ck_assert_int_ge(lend_client_pump(&c, -1), 0);
	/* answered last to first; each request got its own pages */
	for (int i = 0; i < N; i++) {
		ck_assert_uint_eq(d.tag[i], N - 1 - i);
		ck_assert_uint_eq(d.err[i], LEND_OK);
		ck_assert_int_eq(buf[i][0], 10 * i + 1);
		ck_assert_int_eq(buf[i][LEND_PAGE_SIZE], 10 * i + 2);
	}
	ck_assert_int_eq(c.inflight, 0);
	ck_assert_int_eq(lend_client_report(&c).page_reads, 2 * N);
	lend_client_close(&c);
	fake_join(&f);
}
END_TEST

START_TEST(reply_to_no_request_loses_the_lender)
{
	enum { N = 4 };
	struct fake f;
	struct lend_client c;
	struct done_log d = {0};
	static uint8_t buf[N][LEND_PAGE_SIZE];
	struct iovec v[N];
	fake_reads(&f, FAKE_BAD_HANDLE, &c, N, &d, buf, v);
	while (!c.lost)
		(void)lend_client_pump(&c, -1);
	/* the first was answered; the reply to handle 987654321 broke the
	 * link, and every other request failed with it, once each */
	ck_assert_int_eq(d.n, N);
	ck_assert_uint_eq(d.tag[0], 0);
	ck_assert_uint_eq(d.err[0], LEND_OK);
	for (int i = 1; i < N; i++)
		ck_assert_uint_eq(d.err[i], LEND_E_LOST);
	ck_assert_ptr_nonnull(strstr(c.err, "not in flight"));
	ck_assert_int_eq(c.inflight, 0);
	ck_assert_int_eq(lend_client_report(&c).lost, 1);
	ck_assert_int_eq(lend_client_submit(&c, LEND_READ, 0, 1, &v[0], 1,
	                                    log_done, &d, 0),
	                 -1);
	ck_assert_int_eq(d.n, N);
	lend_client_close(&c);
	fake_join(&f);
}
END_TEST

/* Sends an NBD request without waiting for its reply. */
static void nbd_send(int fd, uint16_t type, uint64_t handle, uint64_t off,
                     uint32_t len, const void *data)
{
	uint8_t h[LEND_NBD_REQ_LEN];
	lend_nbd_req_encode(h, type, handle, off, len);
	ck_assert_int_eq(lend_nbd_write_full(fd, h, sizeof h), 0);
	if (data)
		ck_assert_int_eq(lend_nbd_write_full(fd, data, len), 0);
}

/* Reads one NBD simple reply: its handle, and error. */
static uint64_t nbd_recv(int fd, uint32_t *error)
{
	uint8_t r[LEND_NBD_REPLY_LEN];
	uint64_t h = 0;
	ck_assert_int_eq(lend_nbd_read_full(fd, r, sizeof r), 0);
	ck_assert_int_eq(lend_nbd_reply_decode(r, error, &h), 0);
	return h;
}

START_TEST(nbd_many_requests_in_flight)
{
	enum { N = 48 };
	struct srv x;
	struct br y;
	char err[200];
	uint64_t size;
	uint16_t fl;
	uint32_t e;
	static uint8_t w[N][64 * 1024], r[64 * 1024];
	int seen[2 * N] = {0};

	srv_start_awake(&x, 7, secret_a, 2048, NULL, 1000, _i);
	int fd = br_start_awake(&y, x.s.port, LEND_CLIENT_REPLY_TIMEOUT_MS, _i);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	/* writes of 4 to 64 KiB, all sent before any reply is read; request
	 * i at page 16 i */
	for (int i = 0; i < N; i++) {
		uint32_t len = (uint32_t)(1 + i % 16) * 4096;
		fill(w[i], len / 4096, (unsigned)i);
		nbd_send(fd, LEND_NBD_CMD_WRITE, 1000 + i, (uint64_t)i * 65536,
		         len, w[i]);
	}
	for (int i = 0; i < N; i++) {
		uint64_t h = nbd_recv(fd, &e);
		ck_assert_uint_eq(e, 0);
		ck_assert(h >= 1000 && h < 1000 + N && !seen[h - 1000]);
		seen[h - 1000] = 1;
	}
	/* and read back the same way: each reply carries its own data */
	for (int i = 0; i < N; i++)
		nbd_send(fd, LEND_NBD_CMD_READ, 2000 + i, (uint64_t)i * 65536,
		         (uint32_t)(1 + i % 16) * 4096, NULL);
	for (int i = 0; i < N; i++) {
		uint64_t h = nbd_recv(fd, &e);
		ck_assert_uint_eq(e, 0);
		ck_assert(h >= 2000 && h < 2000 + N && !seen[N + h - 2000]);
		seen[N + h - 2000] = 1;
		uint32_t len = (uint32_t)(1 + (h - 2000) % 16) * 4096;
		ck_assert_int_eq(read_full(fd, r, len), 0);
		ck_assert_mem_eq(r, w[h - 2000], len);
	}
	/* the bridge really kept several in flight */
	ck_assert_int_gt(y.b.slots_peak, 1);
	/* and, asked to, armed the keep-awake threads meanwhile (whether
	 * they got a core is the scheduler's: SCHED_IDLE runs only on time
	 * nobody else wants, which a loaded test machine may not have) */
	ck_assert_int_eq(atomic_load(&y.b.awake.until_ns) > 0, _i > 0);
	/* the lender likewise while the requests came */
	ck_assert_int_eq(atomic_load(&x.s.awake.until_ns) > 0, _i > 0);
	struct lend_meter_report l = lend_server_report(&x.s);
	struct lend_meter_report b = lend_client_report(&y.c);
	struct lend_recon_result out;
	ck_assert_int_eq(b.page_writes, l.page_writes);
	ck_assert_int_eq(b.page_reads, l.page_reads);
	ck_assert_int_eq(b.page_reads, b.page_writes);
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 9, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_DISC);
	close(fd);
	lend_client_close(&y.c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(nbd_lender_lost_mid_flight_fails_all)
{
	enum { N = 16 };
	struct fake f;
	struct br y;
	char err[200];
	uint64_t size;
	uint16_t fl;
	uint32_t e;
	int seen[N] = {0};
	uint8_t p[4096] = {0};

	/* the lender takes N reads and dies without answering any */
	fake_start(&f, FAKE_CLOSE, N);
	int fd = br_start(&y, f.port);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	for (int i = 0; i < N; i++)
		nbd_send(fd, LEND_NBD_CMD_READ, 100 + i, (uint64_t)i * 4096,
		         4096, NULL);
	/* every one of them is answered, with EIO, and no data follows */
	for (int i = 0; i < N; i++) {
		uint64_t h = nbd_recv(fd, &e);
		ck_assert_uint_eq(e, EIO);
		ck_assert(h >= 100 && h < 100 + N && !seen[h - 100]);
		seen[h - 100] = 1;
	}
	ck_assert_int_eq(f.got, N);
	/* and so is every later one, at once */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 200, 0,
	                                     4096, p, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, EIO);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 201, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_LOST);
	ck_assert_int_eq(lend_client_report(&y.c).lost, 1);
	close(fd);
	lend_client_close(&y.c);
	fake_join(&f);
}
END_TEST

/* A lender that stops answering without closing (silent after taking
 * the requests, or silent halfway through a reply's header or data) is
 * lost once the oldest request has waited the reply timeout: every
 * request completes with LEND_E_LOST instead of the borrower waiting
 * forever (before the bound, lend_client_pump(-1) never returned). */
START_TEST(silent_lender_times_out)
{
	enum { N = 4 };
	static const enum fake_mode modes[] = {FAKE_SILENT, FAKE_HALF_HDR,
	                                       FAKE_HALF_DATA};
	static uint8_t buf[N][LEND_PAGE_SIZE];
	for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		struct fake f;
		struct lend_client c;
		struct done_log d = {0};
		struct iovec v[N];
		fake_reads(&f, modes[m], &c, N, &d, buf, v);
		ck_assert_int_eq(c.reply_timeout_ms,
		                 LEND_CLIENT_REPLY_TIMEOUT_MS);
		c.reply_timeout_ms = 200; /* sub-second bounds are allowed */
		ck_assert_int_gt(lend_client_deadline_ms(&c), 0);
		while (!c.lost)
			(void)lend_client_pump(&c, -1);
		ck_assert_int_eq(d.n, N);
		for (int i = 0; i < N; i++)
			ck_assert_uint_eq(d.err[i], LEND_E_LOST);
		ck_assert_msg(strstr(c.err, "within 200 ms"), "%s", c.err);
		ck_assert_int_eq(c.inflight, 0);
		ck_assert_int_eq(lend_client_deadline_ms(&c), -1);
		ck_assert_int_eq(lend_client_report(&c).lost, 1);
		lend_client_close(&c); /* the fake sees the hang-up and ends */
		fake_join(&f);
	}
}
END_TEST

/* A reply that came but was not read before the deadline (the borrower
 * was slow, not the lender) is taken, not counted as a loss. */
START_TEST(late_but_arrived_reply_is_no_loss)
{
	enum { N = 2 };
	struct fake f;
	struct lend_client c;
	struct done_log d = {0};
	static uint8_t buf[N][LEND_PAGE_SIZE];
	struct iovec v[N];
	fake_reads(&f, FAKE_REVERSE, &c, N, &d, buf, v);
	c.reply_timeout_ms = 1; /* long passed once the replies are in */
	/* both replies whole in the borrower's socket (written is not yet
	 * readable: loopback delivers in a softirq) */
	int avail = 0;
	while (avail < N * (LEND_HDR_LEN + LEND_PAGE_SIZE)) {
		usleep(1000);
		ck_assert_int_eq(ioctl(c.conn.fd, FIONREAD, &avail), 0);
	}
	int64_t dl = lend_client_deadline_ms(&c);
	ck_assert_int_gt(dl, 0);
	while (clock_mono_ms() <= dl)
		usleep(1000);
	ck_assert_msg(lend_client_expire(&c, clock_mono_ms()) == 0, "%s",
	              c.err);
	ck_assert_int_eq(c.lost, 0);
	ck_assert_int_eq(d.n, N);
	ck_assert_uint_eq(d.err[0], LEND_OK);
	ck_assert_uint_eq(d.err[1], LEND_OK);
	ck_assert_int_eq(lend_client_deadline_ms(&c), -1);
	lend_client_close(&c);
	fake_join(&f);
}
END_TEST

/* Requests held while corked start their reply clock when sent: held
 * past the timeout and then sent, they are answered, not lost. */
START_TEST(held_requests_time_from_sending)
{
	struct fake f;
	struct lend_client c;
	struct done_log d = {0};
	static uint8_t buf[1][LEND_PAGE_SIZE];
	struct iovec v[1];
	fake_start(&f, FAKE_REVERSE, 1);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", f.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	c.reply_timeout_ms = 2000;
	lend_client_cork(&c);
	v[0] = (struct iovec){buf[0], LEND_PAGE_SIZE};
	ck_assert_int_eq(lend_client_submit(&c, LEND_READ, 3, 1, v, 1,
	                                    log_done, &d, 0),
	                 0);
	usleep(2100 * 1000); /* held longer than the bound */
	ck_assert_int_eq(lend_client_uncork(&c), 0);
	while (d.n < 1)
		ck_assert_msg(lend_client_pump(&c, -1) >= 0, "%s", c.err);
	ck_assert_uint_eq(d.err[0], LEND_OK);
	ck_assert_int_eq(buf[0][0], 3);
	lend_client_close(&c);
	fake_join(&f);
}
END_TEST

/* Through the bridge: NBD reads to a lender that went silent are all
 * answered EIO, later ones at once, and the bridge ends "lender lost"
 * (it used to wait forever, and the kernel's nbd driver with it). */
START_TEST(nbd_silent_lender_gives_eio)
{
	enum { N = 16 };
	static const enum fake_mode modes[] = {FAKE_SILENT, FAKE_HALF_DATA};
	for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		struct fake f;
		struct br y;
		char err[200];
		uint64_t size;
		uint16_t fl;
		uint32_t e;
		int seen[N] = {0};
		uint8_t p[4096] = {0};

		fake_start(&f, modes[m], N);
		int fd = br_start_timeout(&y, f.port, 300);
		ck_assert_int_eq(lend_nbd_client_handshake(fd, "", &size, &fl,
		                                           err, sizeof err),
		                 0);
		for (int i = 0; i < N; i++)
			nbd_send(fd, LEND_NBD_CMD_READ, 100 + i,
			         (uint64_t)i * 4096, 4096, NULL);
		for (int i = 0; i < N; i++) {
			uint64_t h = nbd_recv(fd, &e);
			ck_assert_uint_eq(e, EIO);
			ck_assert(h >= 100 && h < 100 + N && !seen[h - 100]);
			seen[h - 100] = 1;
		}
		ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE,
		                                     200, 0, 4096, p, NULL, &e),
		                 0);
		ck_assert_uint_eq(e, EIO);
		lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 201, 0, 0, NULL,
		                    NULL, &e);
		ck_assert_int_eq(br_join(&y), LEND_BRIDGE_LOST);
		ck_assert_int_eq(lend_client_report(&y.c).lost, 1);
		ck_assert_msg(strstr(y.c.err, "within 300 ms"), "%s", y.c.err);
		close(fd);
		lend_client_close(&y.c);
		fake_join(&f);
	}
}
END_TEST

/* A WRITE refused at the bridge (unaligned) that comes in the same read
 * as a good WRITE: its payload is dropped without touching the staging
 * page the good one's data waits in to be sent (with both sides batched,
 * dropping it through that page sent the refused bytes to the lender). */
START_TEST(nbd_refused_write_spares_staged_data)
{
	struct srv x;
	struct br y;
	char err[200];
	uint64_t size;
	uint16_t fl;
	uint32_t e;
	static uint8_t two[2 * (LEND_NBD_REQ_LEN + 4096)], r[4096];
	uint8_t *p = two;

	srv_start(&x, 7, secret_a, 64, NULL, 1000);
	int fd = br_start(&y, x.s.port);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	lend_nbd_req_encode(p, LEND_NBD_CMD_WRITE, 1, 0, 4096);
	memset(p + LEND_NBD_REQ_LEN, 0xaa, 4096);
	p += LEND_NBD_REQ_LEN + 4096;
	lend_nbd_req_encode(p, LEND_NBD_CMD_WRITE, 2, 100, 4096);
	memset(p + LEND_NBD_REQ_LEN, 0xee, 4096);
	/* one write: the bridge takes both with one recv */
	ck_assert_int_eq(lend_nbd_write_full(fd, two, sizeof two), 0);
	int ok = 0, einval = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t h = nbd_recv(fd, &e);
		ok += h == 1 && e == 0;
		einval += h == 2 && e == EINVAL;
	}
	ck_assert_int_eq(ok, 1);
	ck_assert_int_eq(einval, 1);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 3, 0, 4096,
	                                     NULL, r, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_int_eq(r[0], 0xaa);
	ck_assert_int_eq(r[4095], 0xaa);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 4, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_DISC);
	close(fd);
	lend_client_close(&y.c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

/* ---- keep-awake --------------------------------------------------- */

/* Keeps `a` busy until a spinner has counted rounds past `past` (under
 * SCHED_IDLE on a loaded machine, getting a core may take a while). */
static void busy_until_spun(struct lend_awake *a, int64_t past)
{
	for (int i = 0; i < 10000 && spins(a) == past; i++) {
		lend_awake_busy(a);
		usleep(1000);
	}
	ck_assert_int_gt(spins(a), past);
}

START_TEST(keep_awake_spins_only_while_busy)
{
	struct lend_awake a;
	char err[120];
	ck_assert_int_eq(lend_awake_start(&a, LEND_AWAKE_MAX_THREADS + 1, err,
	                                  sizeof err),
	                 -1);
	ck_assert_ptr_nonnull(strstr(err, "0..8"));
	/* off: nothing runs, busy is a no-op */
	ck_assert_int_eq(lend_awake_start(&a, 0, err, sizeof err), 0);
	lend_awake_busy(&a);
	ck_assert_int_eq(spins(&a), 0);
	lend_awake_stop(&a);

	ck_assert_int_eq(lend_awake_start(&a, 2, err, sizeof err), 0);
	for (int i = 0; i < 1000 && atomic_load(&a.idle_policy) < 2; i++)
		usleep(1000);
	/* both threads run under SCHED_IDLE: they never take a core from
	 * a task that wants it */
	ck_assert_int_eq(atomic_load(&a.idle_policy), 2);
	/* nothing in flight: they sleep */
	int64_t s0 = spins(&a);
	usleep(20000);
	ck_assert_int_eq(spins(&a), s0);
	/* busy: they spin, and stop a linger after the last busy */
	busy_until_spun(&a, s0);
	for (int i = 0; i < 10000 && atomic_load(&a.on); i++)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&a.on), 0);
	int64_t s1 = spins(&a);
	usleep(20000);
	ck_assert_int_eq(spins(&a), s1);
	/* and wake again */
	busy_until_spun(&a, s1);
	lend_awake_stop(&a);
	lend_awake_stop(&a); /* twice is harmless */
}
END_TEST

/* Runs a shell command; its output (both streams if the command says
 * 2>&1) into out, and its wait status. */
static int run_out(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = 0;
	return pclose(p);
}

/* ramex-lend-nbd serves NBD, which has no authentication, so its --listen
 * is loopback only (found from outside: --listen 0.0.0.0:PORT served the
 * borrowed pages to the whole network). A usage error, exit 2, that says
 * why; nothing listens. */
START_TEST(nbd_listen_off_loopback_is_refused)
{
	static const char *const at[] = {"0.0.0.0:0", "[::]:0",
	                                 "192.0.2.7:10809"};
	const char *b = getenv("RAMEX_BUILD");
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		char cmd[1200], out[4096];
		snprintf(cmd, sizeof cmd,
		         "%s/san/bin/ramex-lend-nbd --lender 127.0.0.1:9 "
		         "--contract 7 --secret-file /nonexistent --listen "
		         "'%s' 2>&1",
		         b && *b ? b : "build", at[i]);
		int st = run_out(cmd, out, sizeof out);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2,
		              "--listen %s: status %d: %s", at[i], st, out);
		ck_assert_msg(strstr(out, "must be a loopback address"),
		              "--listen %s: %s", at[i], out);
	}
}
END_TEST

/* Whether --help's list of options (after "options:") has an entry for
 * `opt`: a line "  OPT ARG" or "  OPT   text", as args_usage writes it. */
static int help_lists(const char *out, const char *opt)
{
	const char *list = strstr(out, "\noptions:\n");
	char entry[64];
	snprintf(entry, sizeof entry, "\n  %s ", opt);
	return list && strstr(list, entry) != NULL;
}

/* Each lending program's --help says how to call it (found from outside:
 * ramex-lend-bench --help said "options: see node-agent/lend/lend_bench.c",
 * a file a person who installed it does not have). The options' list is
 * made from the program's table: each option has its entry, so does every
 * option the usage lines name (they are still written by hand), and an
 * unknown option is named and sends the reader to --help. */
START_TEST(lend_programs_help_names_their_options)
{
	static const struct {
		const char *prog, *must[8];
	} progs[] = {
	    {"ramex-lend-bench",
	     {"--lender", "--nbd-unix", "--nbd-direct", "--blockdev",
	      "--wakeup-floor", "--idle-poll", "--gap-us", "--keep-awake"}},
	    {"ramex-lend-nbd",
	     {"--lender", "--attach", "--listen-unix", "--secret-file",
	      "--direct", "--idle-poll", "--keep-awake", "--reply-timeout-ms"}},
	    {"ramex-lend-server",
	     {"--contract", "--pages", "--listen", "--secret-file",
	      "--idle-poll", "--keep-awake", "--notice-ms", "--tls-cert"}},
	    {"ramex-lend-ublk",
	     {"--lender", "--contract", "--secret-file", "--tls-ca",
	      "--plaintext", "--mlock", "--reply-timeout-ms",
	      "--swap-priority"}},
	};
	const char *b = getenv("RAMEX_BUILD");
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		const char *prog = progs[i].prog;
		char cmd[1024], out[8192], want[128];
		snprintf(cmd, sizeof cmd, "%s/san/bin/%s --help 2>&1",
		         b && *b ? b : "build", prog);
		int st = run_out(cmd, out, sizeof out);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		              "%s --help: status %d", prog, st);
		for (int k = 0; k < 8; k++)
			ck_assert_msg(help_lists(out, progs[i].must[k]),
			              "%s --help has no entry for %s: %.700s",
			              prog, progs[i].must[k], out);
		ck_assert_msg(help_lists(out, "-h,"), "%s --help: %.700s", prog,
		              out);
		/* every option of the usage lines has its entry */
		const char *end = strstr(out, "\noptions:\n");
		ck_assert_ptr_nonnull(end);
		for (const char *p = strstr(out, "--"); p && p < end;
		     p = strstr(p + 2, "--")) {
			char opt[48];
			size_t n =
			    2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
			ck_assert_uint_lt(n, sizeof opt);
			memcpy(opt, p, n);
			opt[n] = '\0';
			ck_assert_msg(
			    help_lists(out, opt),
			    "%s: the usage lines name %s, which has no "
			    "entry: %.700s",
			    prog, opt, out);
		}
		snprintf(cmd, sizeof cmd, "%s/san/bin/%s --no-such-option 2>&1",
		         b && *b ? b : "build", prog);
		st = run_out(cmd, out, sizeof out);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2,
		              "%s --no-such-option: status %d", prog, st);
		snprintf(
		    want, sizeof want,
		    "%s: unknown option \"--no-such-option\" (see --help)\n",
		    prog);
		ck_assert_msg(strncmp(out, want, strlen(want)) == 0,
		              "%s --no-such-option: %.700s", prog, out);
	}
}
END_TEST

/* ---- idle polling ------------------------------------------------- */

/* The system's latency limit before a test holds any: the kernel's "no
 * limit" unless another program holds one. Another holder at 0 µs (a
 * bench on a shared machine) would hide ours: wait a while for it to go,
 * else say so and return -1, the test then checks our own state only. */
static int64_t qos_baseline(void)
{
	int64_t v = lend_qos_system_us(NULL);
	for (int i = 0; i < 100 && v == 0; i++) {
		usleep(100000);
		v = lend_qos_system_us(NULL);
	}
	ck_assert_int_ge(v, 0);
	if (v == 0) {
		fprintf(stderr, "test_lend_nbd: another program holds the CPU "
		                "latency limit at 0 us; only the bridge's own "
		                "state is checked\n");
		return -1;
	}
	return v;
}

/* Polls the system's limit until it reads `want` (at most ~3 s). */
static int64_t qos_wait_for(int64_t want)
{
	int64_t v = lend_qos_system_us(NULL);
	for (int i = 0; i < 3000 && v != want; i++) {
		usleep(1000);
		v = lend_qos_system_us(NULL);
	}
	return v;
}

static int have_qos_device(void)
{
	struct stat st;
	if (stat(LEND_QOS_PATH, &st) == 0)
		return 1;
	fprintf(stderr, "test_lend_nbd: no %s on this kernel: idle polling "
	                "not tested here\n",
	        LEND_QOS_PATH);
	return 0;
}

/* With --idle-poll the bridge holds the CPU latency limit at 0 µs while
 * NBD requests are in flight (a lender that takes them and stays silent
 * keeps them so), and gives it back once nothing is in flight (the lender
 * timed out, its requests failed), while it still runs: one hold, one
 * release, not one per request. */
START_TEST(idle_poll_held_only_while_in_flight)
{
	enum { N = 8 };
	struct fake f;
	struct br y;
	char err[200];
	uint64_t size;
	uint16_t fl;
	uint32_t e;
	if (!have_qos_device())
		return;
	int64_t before = qos_baseline();
	fake_start(&f, FAKE_SILENT, N);
	br_init(&y, f.port, 1500, 0);
	ck_assert_msg(lend_bridge_idle_poll(&y.b, NULL) == 0, "%s",
	              y.b.qos.err);
	int fd = br_go(&y);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	/* idle so far: nothing asked */
	if (before > 0)
		ck_assert_int_eq(lend_qos_system_us(NULL), before);
	for (int i = 0; i < N; i++)
		nbd_send(fd, LEND_NBD_CMD_READ, 100 + i, (uint64_t)i * 4096,
		         4096, NULL);
	/* in flight: every idle core is to poll */
	ck_assert_int_eq(qos_wait_for(0), 0);
	/* the lender is lost at the reply timeout: all fail, nothing is in
	 * flight, and a linger later the limit is what it was, the bridge
	 * still serving its NBD client */
	for (int i = 0; i < N; i++) {
		(void)nbd_recv(fd, &e);
		ck_assert_uint_eq(e, EIO);
	}
	if (before > 0)
		ck_assert_int_eq(qos_wait_for(before), before);
	else
		for (int i = 0; i < 3000 && y.b.qos.held; i++)
			usleep(1000);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 201, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_LOST);
	ck_assert_int_eq(y.b.qos.holds, 1);
	ck_assert_int_eq(y.b.qos.held, 0);
	ck_assert_int_eq(y.b.qos.open, 0); /* freed with the bridge */
	close(fd);
	lend_client_close(&y.c);
	fake_join(&f);
}
END_TEST

/* The lender's side (--idle-poll of ramex-lend-server): held while a
 * borrower's requests come, back to what it was when they stop. */
START_TEST(idle_poll_lender_holds_while_requests_come)
{
	struct srv x;
	struct lend_client c;
	char err[256];
	uint8_t page[LEND_PAGE_SIZE];
	if (!have_qos_device())
		return;
	int64_t before = qos_baseline();
	struct lend_server_config cfg = {.contract = 7,
	                                 .pages = 64,
	                                 .host = "127.0.0.1",
	                                 .store = LEND_STORE_ANON,
	                                 .notice_ms = 1000,
	                                 .handshake_ms = 2000,
	                                 .idle_poll = 1};
	memcpy(cfg.secret, secret_a, LEND_SECRET_LEN);
	ck_assert_msg(lend_server_open(&x.s, &cfg, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_msg(x.s.qos.open, "%s", x.s.qos.err);
	ck_assert_int_eq(pthread_create(&x.thr, NULL, srv_main, &x), 0);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	/* a borrower at work: each reply comes within the lender's linger
	 * of the request, so right after one the limit reads 0 (a test
	 * thread that loses its core for a millisecond reads too late:
	 * it tries again) */
	int64_t seen = -1;
	for (int i = 0; i < 200 && seen != 0; i++) {
		ck_assert_int_eq(lend_client_read(&c, (uint64_t)(i % 64), 1, page),
		                 0);
		seen = lend_qos_system_us(NULL);
	}
	ck_assert_int_eq(seen, 0);
	if (before > 0)
		ck_assert_int_eq(qos_wait_for(before), before);
	lend_client_close(&c);
	srv_join(&x, 1);
	ck_assert_int_ge(x.s.qos.holds, 1);
	lend_server_close(&x.s);
	ck_assert_int_eq(x.s.qos.open, 0);
}
END_TEST

/* A latency device that cannot be opened (no such file; not root) turns
 * idle polling off with a reason a person can act on, logged once, and
 * the bridge serves as before. */
START_TEST(idle_poll_unavailable_is_reported_not_fatal)
{
	struct srv x;
	struct br y;
	char err[200], log[4096] = {0};
	uint64_t size;
	uint16_t fl;
	uint32_t e;
	uint8_t w[4096], r[4096];
	char tmpl[] = "/tmp/test_lend_nbd_log.XXXXXX";
	int lfd = mkstemp(tmpl);
	ck_assert_int_ge(lfd, 0);
	unlink(tmpl);

	srv_start(&x, 7, secret_a, 64, NULL, 1000);
	br_init(&y, x.s.port, LEND_CLIENT_REPLY_TIMEOUT_MS, 0);
	/* the log (stderr) into a file while the bridge is asked */
	fflush(stderr);
	int saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(lfd, 2), 2);
	int rc = lend_bridge_idle_poll(&y.b, "/nonexistent/cpu_dma_latency");
	dup2(saved, 2);
	close(saved);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(y.b.qos.open, 0);
	ck_assert_msg(strstr(y.b.qos.err, "idle polling is off") &&
	                  strstr(y.b.qos.err, "/nonexistent/cpu_dma_latency"),
	              "%s", y.b.qos.err);
	ck_assert_int_gt(pread(lfd, log, sizeof log - 1, 0), 0);
	close(lfd);
	char *at = strstr(log, "level=warn");
	ck_assert_msg(at && strstr(at, "idle polling is off") &&
	                  strstr(at, "hint="),
	              "%s", log);
	ck_assert_msg(!strstr(at + 1, "level=warn"), "logged twice: %s", log);
	/* and the bridge works on without it */
	int fd = br_go(&y);
	ck_assert_int_eq(
	    lend_nbd_client_handshake(fd, "", &size, &fl, err, sizeof err), 0);
	fill(w, 1, 5);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 1, 4096,
	                                     4096, w, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 2, 4096,
	                                     4096, NULL, r, &e),
	                 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_mem_eq(r, w, 4096);
	ck_assert_int_eq(y.b.qos.holds, 0);
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 3, 0, 0, NULL, NULL, &e);
	ck_assert_int_eq(br_join(&y), LEND_BRIDGE_DISC);
	close(fd);
	lend_client_close(&y.c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

/* A lender told to write its port where it cannot does not run on
 * without it (whoever waits for the port would wait for ever), and a
 * meter file it cannot write is said, once: the agent reports usage from
 * it (found from outside: both were passed over in silence). */
START_TEST(lender_files_it_cannot_write_are_said)
{
	char secret[600], cmd[2400], out[16384];
	const char *b = getenv("RAMEX_BUILD");
	snprintf(secret, sizeof secret, "%s/lend-cli-secret.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd = mkstemp(secret);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "ab", 2), 2);
	for (int i = 0; i < 31; i++)
		ck_assert_int_eq(write(fd, "ab", 2), 2);
	close(fd);
	static const struct {
		const char *args, *says;
		int status, times;
	} cases[] = {
	    {"--port-file /nonexistent/port", "could not write /nonexistent",
	     1, 1},
	    {"--meter-file /nonexistent/meter", "could not write the meter",
	     124, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(cmd, sizeof cmd,
		         "timeout -s TERM 3 %s/san/bin/ramex-lend-server "
		         "--contract 7 --secret-file %s --pages 1 --store anon "
		         "--listen 127.0.0.1:0 %s 2>&1",
		         b && *b ? b : "build", secret, cases[i].args);
		int st = run_out(cmd, out, sizeof out);
		int times = 0;
		for (const char *q = out; (q = strstr(q, cases[i].says)); q++)
			times++;
		ck_assert_msg(WIFEXITED(st) &&
		                  WEXITSTATUS(st) == cases[i].status &&
		                  times == cases[i].times,
		              "%s: status %d, said %d times: %s", cases[i].args,
		              st, times, out);
	}
	unlink(secret);
}
END_TEST

/* A number out of range names the range (found from outside: --notice-ms
 * 99999999999999999 said "must be >= 0"). */
START_TEST(lender_numbers_name_their_range)
{
	char cmd[1200], out[4096];
	const char *b = getenv("RAMEX_BUILD");
	snprintf(cmd, sizeof cmd,
	         "%s/san/bin/ramex-lend-server --contract 7 --secret-file "
	         "/nonexistent --pages 1 --notice-ms 99999999999999999 2>&1",
	         b && *b ? b : "build");
	int st = run_out(cmd, out, sizeof out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
	                  strstr(out, "--notice-ms is 0..2147483647"),
	              "status %d: %s", st, out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lend_nbd");
	TCase *t = tcase_create("loopback");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, nbd_through_bridge_to_lender);
	tcase_add_test(t, nbd_lender_vanishes_gives_eio);
	tcase_add_test(t, nbd_handshake_options);
	tcase_add_test(t, client_matches_replies_to_handles);
	tcase_add_test(t, reply_to_no_request_loses_the_lender);
	/* _i: the bridge's keep-awake threads */
	tcase_add_loop_test(t, nbd_many_requests_in_flight, 0, 2);
	tcase_add_test(t, nbd_lender_lost_mid_flight_fails_all);
	tcase_add_test(t, silent_lender_times_out);
	tcase_add_test(t, late_but_arrived_reply_is_no_loss);
	tcase_add_test(t, held_requests_time_from_sending);
	tcase_add_test(t, nbd_silent_lender_gives_eio);
	tcase_add_test(t, nbd_refused_write_spares_staged_data);
	tcase_add_test(t, keep_awake_spins_only_while_busy);
	tcase_add_test(t, idle_poll_held_only_while_in_flight);
	tcase_add_test(t, idle_poll_lender_holds_while_requests_come);
	tcase_add_test(t, idle_poll_unavailable_is_reported_not_fatal);
	tcase_add_test(t, nbd_listen_off_loopback_is_refused);
	tcase_add_test(t, lend_programs_help_names_their_options);
	tcase_add_test(t, lender_files_it_cannot_write_are_said);
	tcase_add_test(t, lender_numbers_name_their_range);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
