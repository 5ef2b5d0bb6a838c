/*
 * test_lend.c — remote lending: wire format, contract authentication and
 * its refusals, TLS, recall, the meters and their reconciliation, all over
 * 127.0.0.1 against the real server (anonymous-memory store: the host
 * cannot load ramex.ko). The NBD bridge and the fake-lender tests are in
 * test_lend_nbd.c; what both use is in lend_fixture.h.
 */
#include <check.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hostport.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_bridge.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_iov.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_server.h"
#include "tests/unit/lend_fixture.h"

/* ---- wire format -------------------------------------------------- */

START_TEST(header_round_trip)
{
	uint8_t b[LEND_HDR_LEN];
	struct lend_hdr q = {.type = LEND_WRITE,
	                     .handle = 0x0102030405060708u,
	                     .page = 77,
	                     .count = 3},
	                r;
	lend_hdr_encode(&q, 0, b);
	ck_assert_int_eq(b[0], 'R');
	ck_assert_int_eq(lend_hdr_decode(b, 0, &r), 0);
	ck_assert_uint_eq(r.type, LEND_WRITE);
	ck_assert_uint_eq(r.handle, q.handle);
	ck_assert_uint_eq(r.page, 77);
	ck_assert_uint_eq(r.count, 3);
	/* a request is not a reply */
	ck_assert_int_eq(lend_hdr_decode(b, 1, &r), -1);
	q.extra = 1234;
	q.error = LEND_E_RANGE;
	lend_hdr_encode(&q, 1, b);
	ck_assert_int_eq(lend_hdr_decode(b, 1, &r), 0);
	ck_assert_uint_eq(r.extra, 1234);
	ck_assert_uint_eq(r.error, LEND_E_RANGE);
}
END_TEST

START_TEST(header_check_limits)
{
	struct lend_hdr h = {.type = LEND_READ, .page = 0, .count = 1};
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_OK);
	h.page = 9;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_OK);
	h.count = 2;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_RANGE);
	h.page = UINT64_MAX; /* page + count would wrap */
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_RANGE);
	h.page = 0;
	h.count = 0;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_INVAL);
	h.count = LEND_MAX_REQ_PAGES + 1;
	ck_assert_int_eq(lend_hdr_check(&h, 1 << 20), LEND_E_INVAL);
	h.count = 1;
	h.flags = 1;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_INVAL);
	h.flags = 0;
	h.type = 99;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_UNSUPPORTED);
	h.type = LEND_FLUSH;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_E_INVAL);
	h.count = 0;
	ck_assert_int_eq(lend_hdr_check(&h, 10), LEND_OK);
}
END_TEST

START_TEST(hello_and_auth_frames)
{
	uint8_t b[LEND_AUTHR_LEN];
	struct lend_hello h = {.version = LEND_VERSION}, h2;
	memset(h.server_nonce, 7, sizeof h.server_nonce);
	lend_hello_encode(&h, b);
	ck_assert_int_eq(lend_hello_decode(b, &h2), 0);
	ck_assert_mem_eq(h2.server_nonce, h.server_nonce, LEND_NONCE_LEN);
	h.version = 2;
	lend_hello_encode(&h, b);
	ck_assert_int_eq(lend_hello_decode(b, &h2), -1);
	struct lend_auth a = {.contract = 42}, a2;
	memset(a.mac, 9, sizeof a.mac);
	lend_auth_encode(&a, b);
	ck_assert_int_eq(lend_auth_decode(b, &a2), 0);
	ck_assert_uint_eq(a2.contract, 42);
	ck_assert_mem_eq(a2.mac, a.mac, LEND_MAC_LEN);
	b[0] = 'X';
	ck_assert_int_eq(lend_auth_decode(b, &a2), -1);
}
END_TEST

START_TEST(secret_parse)
{
	uint8_t s[LEND_SECRET_LEN];
	memset(s, 0xee, sizeof s);
	ck_assert_int_eq(lend_secret_parse(hex_a, s), 0);
	ck_assert_int_eq(s[1], 0x11);
	ck_assert_int_eq(s[31], 0xff);
	ck_assert_int_eq(lend_secret_parse("00", s), -1);
	char bad[65];
	memcpy(bad, hex_a, 65);
	bad[10] = 'g';
	ck_assert_int_eq(lend_secret_parse(bad, s), -1);
	ck_assert_int_eq(lend_secret_parse(NULL, s), -1);
}
END_TEST

START_TEST(mac_binds_everything)
{
	uint8_t sn[LEND_NONCE_LEN] = {1}, cn[LEND_NONCE_LEN] = {2};
	uint8_t bind[LEND_BINDING_LEN] = {3};
	uint8_t m0[32], m[32];
	lend_mac(LEND_BORROWER, secret_a, 5, sn, cn, NULL, m0);
	lend_mac(LEND_BORROWER, secret_a, 5, sn, cn, NULL, m);
	ck_assert(lend_mac_equal(m0, m));
	lend_mac(LEND_LENDER, secret_a, 5, sn, cn, NULL, m);
	ck_assert(!lend_mac_equal(m0, m));
	lend_mac(LEND_BORROWER, secret_b, 5, sn, cn, NULL, m);
	ck_assert(!lend_mac_equal(m0, m));
	lend_mac(LEND_BORROWER, secret_a, 6, sn, cn, NULL, m);
	ck_assert(!lend_mac_equal(m0, m));
	lend_mac(LEND_BORROWER, secret_a, 5, cn, sn, NULL, m);
	ck_assert(!lend_mac_equal(m0, m));
	lend_mac(LEND_BORROWER, secret_a, 5, sn, cn, bind, m);
	ck_assert(!lend_mac_equal(m0, m));
}
END_TEST

/* ---- meter -------------------------------------------------------- */

START_TEST(meter_counts_and_integrates)
{
	struct lend_meter m;
	ck_assert_int_eq(lend_meter_init(&m, 9, LEND_METER_LENDER, 100, 0), 0);
	lend_meter_write(&m, 10, 5, 1000); /* 100 hosted for 1 s */
	lend_meter_write(&m, 12, 5, 2000); /* overlaps: 7 pages in use */
	ck_assert_int_eq(m.r.pages_in_use, 7);
	ck_assert_int_eq(m.r.page_writes, 10);
	lend_meter_trim(&m, 0, 11, 3000); /* page 10 freed */
	ck_assert_int_eq(m.r.pages_in_use, 6);
	lend_meter_read(&m, 4, 4000);
	struct lend_meter_report r = lend_meter_report(&m, 5000);
	ck_assert_int_eq(r.hosted_page_s, 500);
	/* 0 for 1 s, 5 for 1 s, 7 for 1 s, 6 for 2 s */
	ck_assert_int_eq(r.used_page_s, 5 + 7 + 12);
	ck_assert_int_eq(r.page_reads, 4);
	ck_assert_int_eq(r.page_trims, 11);
	lend_meter_release(&m, 6000);
	r = lend_meter_report(&m, 9000);
	ck_assert_int_eq(r.pages_hosted, 0);
	ck_assert_int_eq(r.pages_in_use, 0);
	ck_assert_int_eq(r.hosted_page_s, 600);
	ck_assert_int_eq(r.used_page_s, 30);

	char line[512];
	struct lend_meter_report p;
	ck_assert_int_gt(lend_meter_format(&r, line, sizeof line), 0);
	ck_assert_int_eq(lend_meter_parse(line, &p), 0);
	ck_assert_mem_eq(&p, &r, sizeof r);
	ck_assert_int_eq(lend_meter_parse("role=x contract=1", &p), -1);
	uint8_t w[LEND_METER_WIRE];
	lend_meter_encode(&r, w);
	lend_meter_decode(w, &p);
	ck_assert_mem_eq(&p, &r, sizeof r);
	lend_meter_free(&m);
}
END_TEST

static struct lend_meter_report rep(int role, int64_t writes, int64_t used)
{
	struct lend_meter_report r = {.contract = 3,
	                              .role = (uint64_t)role,
	                              .pages_hosted = 1000,
	                              .page_writes = writes,
	                              .page_reads = 10,
	                              .hosted_page_s = 100000,
	                              .used_page_s = used};
	return r;
}

START_TEST(reconcile_rules)
{
	struct lend_recon_result out;
	struct lend_meter_report l = rep(LEND_METER_LENDER, 500, 50000);
	struct lend_meter_report b = rep(LEND_METER_BORROWER, 500, 49900);
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	ck_assert_int_eq(out.used_page_s, 49900);
	/* lender ahead by the replies lost in flight: still agreed */
	l.page_writes = 500 + LEND_WINDOW_PAGES;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	l.page_writes = 501 + LEND_WINDOW_PAGES;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out),
	                 LEND_RECON_DISPUTE);
	ck_assert_ptr_nonnull(strstr(out.why, "writes"));
	/* borrower claims more than the lender served */
	l.page_writes = 499;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out),
	                 LEND_RECON_DISPUTE);
	l.page_writes = 500;
	/* page-seconds beyond 1 % + 2 s per page */
	b.used_page_s = 50000 - 500 - 2000 - 1;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out),
	                 LEND_RECON_DISPUTE);
	ck_assert_int_eq(out.used_page_s, b.used_page_s);
	b.used_page_s = 50000 - 500 - 2000;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	/* two lenders' reports are not a pair */
	ck_assert_int_eq(lend_meter_reconcile(&l, &l, &out),
	                 LEND_RECON_DISPUTE);
	b.contract = 4;
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out),
	                 LEND_RECON_DISPUTE);
}
END_TEST

/* ---- a real server on 127.0.0.1 ----------------------------------- */

static void data_round_trip(struct lend_client *c)
{
	enum { N = 300 }; /* more than one request's worth */
	uint8_t *w = malloc(N * LEND_PAGE_SIZE),
	        *r = malloc(N * LEND_PAGE_SIZE);
	fill(w, N, 5);
	ck_assert_int_eq(lend_client_write(c, 100, N, w), 0);
	memset(r, 0, N * LEND_PAGE_SIZE);
	ck_assert_int_eq(lend_client_read(c, 100, N, r), 0);
	ck_assert_mem_eq(r, w, N * LEND_PAGE_SIZE);
	/* trimmed pages read as zeros: nothing old stays readable */
	ck_assert_int_eq(lend_client_trim(c, 100, 1), 0);
	ck_assert_int_eq(lend_client_read(c, 100, 1, r), 0);
	for (int i = 0; i < LEND_PAGE_SIZE; i++)
		ck_assert_int_eq(r[i], 0);
	ck_assert_int_eq(lend_client_flush(c), 0);
	free(w);
	free(r);
}

static void count_done(void *arg, uint64_t tag, uint32_t error)
{
	(void)tag;
	int *left = arg;
	ck_assert_uint_eq(error, LEND_OK);
	(*left)--;
}

/* READs and WRITEs of 64 pages in flight together, rounds of them: the
 * lender's read data fills the borrower's socket while the borrower still
 * sends write data, and neither may wait for the other. Uses pages
 * 0..511. */
static void reads_and_writes_in_flight(struct lend_client *c)
{
	enum { P = 64, N = 4, ROUNDS = 4 };
	uint8_t *src = malloc(N * P * LEND_PAGE_SIZE),
	        *dst = malloc(N * P * LEND_PAGE_SIZE),
	        *w = malloc(N * P * LEND_PAGE_SIZE);
	/* a small send buffer: the borrower's sends stop short while the
	 * lender's read data comes back (a receive buffer shrunk after the
	 * connection only stalls TCP itself) */
	int small = 16 * 1024;
	setsockopt(c->conn.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	fill(src, N * P, 3);
	fill(w, N * P, 4);
	ck_assert_int_eq(lend_client_write(c, 0, N * P, src), 0);
	for (int round = 0; round < ROUNDS; round++) {
		struct iovec rv[N], wv[N];
		int left = 2 * N;
		memset(dst, 0, N * P * LEND_PAGE_SIZE);
		for (int i = 0; i < N; i++) {
			size_t off = (size_t)i * P * LEND_PAGE_SIZE;
			rv[i] = (struct iovec){dst + off, P * LEND_PAGE_SIZE};
			wv[i] = (struct iovec){w + off, P * LEND_PAGE_SIZE};
			ck_assert_int_eq(
			    lend_client_submit(c, LEND_READ, (uint64_t)i * P, P,
			                       &rv[i], 1, count_done, &left, 0),
			    0);
			ck_assert_int_eq(lend_client_submit(
			                     c, LEND_WRITE, (uint64_t)(N + i) * P,
			                     P, &wv[i], 1, count_done, &left, 0),
			                 0);
		}
		while (left > 0)
			ck_assert_int_ge(lend_client_pump(c, -1), 0);
		ck_assert_mem_eq(dst, src, N * P * LEND_PAGE_SIZE);
	}
	ck_assert_int_eq(lend_client_read(c, N * P, N * P, dst), 0);
	ck_assert_mem_eq(dst, w, N * P * LEND_PAGE_SIZE);
	free(src);
	free(dst);
	free(w);
}

START_TEST(plain_round_trip_and_meters_agree)
{
	struct srv x;
	struct lend_client c;
	srv_start(&x, 7, secret_a, 512, NULL, 1000);
	ck_assert_msg(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                  secret_a, 2000) == 0,
	              "%s", c.err);
	ck_assert_int_eq(c.pages, 512);
	reads_and_writes_in_flight(&c);
	data_round_trip(&c);
	/* outside the contract: refused, connection kept */
	uint8_t page[LEND_PAGE_SIZE];
	ck_assert_int_eq(lend_client_read(&c, 512, 1, page), -1);
	ck_assert_uint_eq(c.last_error, LEND_E_RANGE);
	ck_assert_int_eq(c.lost, 0);
	struct lend_meter_report l, b = lend_client_report(&c);
	struct lend_recon_result out;
	ck_assert_int_eq(lend_client_lender_meter(&c, &l), 0);
	ck_assert_int_eq(l.role, LEND_METER_LENDER);
	/* 256 + 4 rounds x 256 in flight, then 300; every page of the 512
	 * written, one trimmed */
	ck_assert_int_eq(l.page_writes, 256 + 4 * 256 + 300);
	ck_assert_int_eq(l.pages_in_use, 511);
	ck_assert_int_eq(b.page_writes, l.page_writes);
	ck_assert_int_eq(b.page_reads, l.page_reads);
	ck_assert_int_eq(b.pages_in_use, l.pages_in_use);
	ck_assert_int_eq(lend_meter_reconcile(&l, &b, &out), LEND_RECON_AGREE);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.auth_failures, 0);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(wrong_secret_is_refused)
{
	struct srv x;
	struct lend_client c;
	srv_start(&x, 7, secret_a, 16, NULL, 1000);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                     secret_b, 2000),
	                 -1);
	ck_assert_uint_eq(c.last_error, LEND_E_AUTH);
	ck_assert_ptr_nonnull(strstr(c.err, "wrong secret"));
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.auth_failures, 1);
	ck_assert_int_eq(x.s.meter.r.page_reads + x.s.meter.r.page_writes, 0);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(another_contract_is_refused)
{
	struct srv x;
	struct lend_client c;
	srv_start(&x, 7, secret_a, 16, NULL, 1000);
	/* contract 8's borrower, with contract 8's own secret */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 8,
	                                     secret_b, 2000),
	                 -1);
	ck_assert_uint_eq(c.last_error, LEND_E_CONTRACT);
	lend_client_close(&c);
	/* even with this lender's secret, another contract id is refused */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 8,
	                                     secret_a, 2000),
	                 -1);
	ck_assert_uint_eq(c.last_error, LEND_E_CONTRACT);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.auth_failures, 2);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(no_request_without_auth_and_no_replay)
{
	struct srv x;
	uint8_t b[LEND_AUTH_LEN], saved[LEND_AUTHR_LEN];
	struct lend_hello h;
	srv_start(&x, 7, secret_a, 16, NULL, 1000);

	/* a READ instead of AUTH: the server hangs up, sends no page */
	int fd = raw_connect(x.s.port);
	ck_assert_int_eq(read_full(fd, b, LEND_HELLO_LEN), 0);
	struct lend_hdr q = {.type = LEND_READ, .count = 1};
	uint8_t qb[LEND_HDR_LEN];
	lend_hdr_encode(&q, 0, qb);
	memset(b, 0, sizeof b);
	memcpy(b, qb, sizeof qb);
	ck_assert_int_eq(write(fd, b, LEND_AUTH_LEN), LEND_AUTH_LEN);
	ck_assert_int_eq(read(fd, b, sizeof b), 0);
	close(fd);

	/* a correct AUTH works once ... */
	fd = raw_connect(x.s.port);
	ck_assert_int_eq(read_full(fd, b, LEND_HELLO_LEN), 0);
	ck_assert_int_eq(lend_hello_decode(b, &h), 0);
	struct lend_auth a = {.contract = 7};
	memset(a.client_nonce, 0x5a, LEND_NONCE_LEN);
	lend_mac(LEND_BORROWER, secret_a, 7, h.server_nonce, a.client_nonce,
	         NULL, a.mac);
	lend_auth_encode(&a, saved);
	ck_assert_int_eq(write(fd, saved, LEND_AUTH_LEN), LEND_AUTH_LEN);
	struct lend_welcome w;
	ck_assert_int_eq(read_full(fd, b, LEND_WELCOME_LEN), 0);
	lend_welcome_decode(b, &w);
	ck_assert_uint_eq(w.status, LEND_OK);
	close(fd);
	/* ... and replayed on a new connection (new server nonce) fails */
	fd = raw_connect(x.s.port);
	ck_assert_int_eq(read_full(fd, b, LEND_HELLO_LEN), 0);
	ck_assert_int_eq(write(fd, saved, LEND_AUTH_LEN), LEND_AUTH_LEN);
	ck_assert_int_eq(read_full(fd, b, LEND_WELCOME_LEN), 0);
	lend_welcome_decode(b, &w);
	ck_assert_uint_eq(w.status, LEND_E_AUTH);
	close(fd);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.auth_failures, 2);
	lend_server_close(&x.s);
}
END_TEST

/* A peer that trickles its AUTH frame a byte at a time, each byte well
 * inside the per-read timeout. */
struct trickle {
	int port, sent, cut;
};

static void *trickle_main(void *arg)
{
	struct trickle *t = arg;
	uint8_t b[LEND_AUTH_LEN];
	int fd = raw_connect(t->port);
	if (read_full(fd, b, LEND_HELLO_LEN) == 0) {
		memset(b, 0x33, sizeof b);
		for (t->sent = 0; t->sent < LEND_AUTH_LEN; t->sent++) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			/* the lender hung up: cut at its deadline */
			if (poll(&p, 1, 100) == 1) {
				t->cut = 1;
				break;
			}
			if (write(fd, b + t->sent, 1) != 1) {
				t->cut = 1;
				break;
			}
		}
	}
	close(fd);
	return NULL;
}

/* One slow peer must not hold the lender's loop: the authenticated
 * borrower is served while it trickles, and its handshake is cut at one
 * overall deadline, not after a per-read timeout that each byte resets. */
START_TEST(slow_peer_stalls_nobody)
{
	struct srv x;
	struct lend_client c;
	struct trickle t = {0};
	pthread_t thr;
	char err[256];
	struct lend_server_config cfg = {.contract = 7,
	                                 .pages = 512,
	                                 .host = "127.0.0.1",
	                                 .store = LEND_STORE_ANON,
	                                 .notice_ms = 1000,
	                                 .handshake_ms = 1500};
	memcpy(cfg.secret, secret_a, LEND_SECRET_LEN);
	ck_assert_msg(lend_server_open(&x.s, &cfg, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(pthread_create(&x.thr, NULL, srv_main, &x), 0);
	ck_assert_msg(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                  secret_a, 2000) == 0,
	              "%s", c.err);
	t.port = x.s.port;
	ck_assert_int_eq(pthread_create(&thr, NULL, trickle_main, &t), 0);
	usleep(300000); /* the peer is mid-AUTH */
	/* the borrower's 1 s timeout would fail these while the loop
	 * waited on the peer (80 bytes at 100 ms: 8 s) */
	lend_conn_set_timeout(&c.conn, 1000);
	data_round_trip(&c);
	pthread_join(thr, NULL);
	ck_assert_msg(t.cut && t.sent < LEND_AUTH_LEN,
	              "the trickling peer sent %d bytes uncut", t.sent);
	data_round_trip(&c);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.handshakes_timed_out, 1);
	ck_assert_int_eq(x.s.auth_failures, 1);
	lend_server_close(&x.s);
}
END_TEST

/* Sends n raw bytes of a request on a borrower's connection (TLS: one
 * record), outside lend_client: a borrower that stops mid-request. */
static void send_part(struct lend_conn *c, const void *b, size_t n)
{
	struct iovec v = {(void *)b, n};
	ck_assert_int_eq(lend_conn_writev(c, &v, 1), 0);
}

/* A WRITE of one page at `page`: its header, then its page. */
static void write_request(uint8_t *b, uint64_t page)
{
	struct lend_hdr q = {
	    .type = LEND_WRITE, .handle = 99, .page = page, .count = 1};
	lend_hdr_encode(&q, 0, b);
	memset(b + LEND_HDR_LEN, 0x5a, LEND_PAGE_SIZE);
}

/* Half a request, then silence, on the lend connection: half a header,
 * or a header and half its page. The loop must still act on a stop (it
 * used to wait for the rest in recv, with no timeout after the
 * handshake), before the stalled connection's own deadline. */
START_TEST(half_request_then_silence_stops)
{
	static const size_t part[] = {LEND_HDR_LEN / 2,
	                              LEND_HDR_LEN + LEND_PAGE_SIZE / 2};
	uint8_t b[LEND_HDR_LEN + LEND_PAGE_SIZE];
	for (size_t v = 0; v < sizeof part / sizeof part[0]; v++) {
		struct srv x;
		struct lend_client c;
		srv_start(&x, 7, secret_a, 64, NULL, 10000);
		ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port,
		                                     NULL, 7, secret_a, 2000),
		                 0);
		write_request(b, 3);
		ck_assert_int_eq(lend_client_write(&c, 3, 1, b + LEND_HDR_LEN),
		                 0);
		send_part(&c.conn, b, part[v]);
		usleep(300000); /* the loop has taken the part */
		ck_assert_msg(srv_join_within(&x, 1, 10000) == 0,
		              "the lender did not stop while %zu bytes of a "
		              "request were in",
		              part[v]);
		ck_assert_int_eq(x.end, LEND_END_STOPPED);
		/* the stop came first, not the stalled link's deadline */
		ck_assert_int_eq(x.s.stalled, 0);
		lend_client_close(&c);
		lend_server_close(&x.s);
	}
}
END_TEST

/* A borrower that asks for pages and reads none of the replies: the
 * lender's socket fills, and its loop, which writes replies whole, waits
 * for room only LEND_SERVER_STALL_MS, then drops the connection and goes
 * on (a reconnected borrower is served). */
START_TEST(unread_replies_hold_the_loop_a_bounded_time)
{
	struct srv x;
	struct lend_client c, d;
	uint8_t b[64 * LEND_HDR_LEN], r[LEND_PAGE_SIZE] = {1};
	srv_start(&x, 7, secret_a, 512, NULL, 10000);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	ck_assert_int_eq(lend_client_write(&c, 9, 1, r), 0);
	/* 64 READs of 1 MiB: more than both sockets' buffers hold */
	for (int i = 0; i < 64; i++) {
		struct lend_hdr q = {.type = LEND_READ,
		                     .handle = 1000 + (uint64_t)i,
		                     .count = LEND_MAX_REQ_PAGES};
		lend_hdr_encode(&q, 0, b + i * LEND_HDR_LEN);
	}
	send_part(&c.conn, b, sizeof b);
	usleep(300000); /* the lender's socket is full */
	/* accepted, and served, once the loop gave up on c: d's own
	 * timeouts are longer */
	ck_assert_msg(
	    lend_client_connect(&d, "127.0.0.1", x.s.port, NULL, 7, secret_a,
	                        3 * LEND_SERVER_STALL_MS) == 0,
	    "a borrower whose replies go unread holds the loop: %s", d.err);
	d.reply_timeout_ms = 3 * LEND_SERVER_STALL_MS;
	memset(r, 0, sizeof r);
	ck_assert_msg(lend_client_read(&d, 9, 1, r) == 0,
	              "a borrower whose replies go unread holds the loop: %s",
	              d.err);
	ck_assert_int_eq(r[0], 1);
	/* c was closed: what was sent, then the end */
	ssize_t got = 1;
	for (int i = 0; i < 100 && got != 0; i++) {
		static uint8_t sink[1 << 20];
		struct pollfd p = {.fd = c.conn.fd, .events = POLLIN};
		if (poll(&p, 1, 100) == 1)
			got = recv(c.conn.fd, sink, sizeof sink, 0);
	}
	ck_assert_int_eq(got, 0);
	lend_client_close(&c);
	lend_client_close(&d);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	lend_server_close(&x.s);
}
END_TEST

/* At most LEND_HANDSHAKES handshakes run at once; more connections are
 * closed at once and counted, and the slots free again at the deadline. */
START_TEST(handshakes_are_bounded)
{
	struct srv x;
	struct lend_client c;
	char err[256];
	uint8_t b[LEND_HELLO_LEN];
	int fd[LEND_HANDSHAKES + 2];
	struct lend_server_config cfg = {.contract = 7,
	                                 .pages = 16,
	                                 .host = "127.0.0.1",
	                                 .store = LEND_STORE_ANON,
	                                 .notice_ms = 1000,
	                                 .handshake_ms = 1000};
	memcpy(cfg.secret, secret_a, LEND_SECRET_LEN);
	ck_assert_msg(lend_server_open(&x.s, &cfg, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(pthread_create(&x.thr, NULL, srv_main, &x), 0);
	for (int i = 0; i < LEND_HANDSHAKES; i++) {
		fd[i] = raw_connect(x.s.port);
		ck_assert_int_eq(read_full(fd[i], b, LEND_HELLO_LEN), 0);
	}
	for (int i = LEND_HANDSHAKES; i < LEND_HANDSHAKES + 2; i++) {
		fd[i] = raw_connect(x.s.port);
		ck_assert_int_eq(read(fd[i], b, sizeof b), 0); /* closed */
	}
	/* the silent ones are cut at their deadline ... */
	for (int i = 0; i < LEND_HANDSHAKES; i++)
		ck_assert_int_le(read(fd[i], b, sizeof b), 0);
	for (int i = 0; i < LEND_HANDSHAKES + 2; i++)
		close(fd[i]);
	/* ... and the borrower gets in again */
	ck_assert_msg(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                  secret_a, 2000) == 0,
	              "%s", c.err);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.handshakes_busy, 2);
	ck_assert_int_eq(x.s.handshakes_timed_out, LEND_HANDSHAKES);
	lend_server_close(&x.s);
}
END_TEST

/* Plain TCP carries pages in clear: only on loopback, or when told. */
START_TEST(plain_tcp_only_on_loopback)
{
	struct lend_server s;
	char err[256];
	struct lend_server_config cfg = {.contract = 7,
	                                 .pages = 16,
	                                 .host = "0.0.0.0",
	                                 .store = LEND_STORE_ANON};
	memcpy(cfg.secret, secret_a, LEND_SECRET_LEN);
	ck_assert_int_eq(lend_server_open(&s, &cfg, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "in clear"), "%s", err);
	cfg.host = NULL;
	ck_assert_int_eq(lend_server_open(&s, &cfg, err, sizeof err), -1);
	ck_assert(hostport_is_loopback("127.0.0.1"));
	ck_assert(hostport_is_loopback("127.3.2.1"));
	ck_assert(hostport_is_loopback("::1"));
	ck_assert(hostport_is_loopback("localhost"));
	ck_assert(!hostport_is_loopback("0.0.0.0"));
	ck_assert(!hostport_is_loopback("::"));
	ck_assert(!hostport_is_loopback("10.0.0.7"));
	ck_assert(!hostport_is_loopback("128.0.0.1"));
	ck_assert(!hostport_is_loopback("lender.example"));
	ck_assert(!hostport_is_loopback("::ffff:10.0.0.1"));
	ck_assert(!hostport_is_loopback(""));
}
END_TEST

/* A fake lender that does not know the secret. */
static void *impostor_main(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
	uint8_t b[LEND_AUTH_LEN];
	struct lend_hello h = {.version = LEND_VERSION};
	struct lend_welcome w = {.status = LEND_OK, .pages = 1 << 20};
	lend_hello_encode(&h, b);
	(void)!write(fd, b, LEND_HELLO_LEN);
	if (read_full(fd, b, LEND_AUTH_LEN) == 0) {
		memset(w.mac, 0xab, LEND_MAC_LEN);
		lend_welcome_encode(&w, b);
		(void)!write(fd, b, LEND_WELCOME_LEN);
	}
	usleep(100000);
	close(fd);
	return NULL;
}

START_TEST(impostor_lender_is_refused)
{
	char err[200];
	int port;
	int lfd = lend_tcp_listen("127.0.0.1", 0, &port, err, sizeof err);
	pthread_t t;
	struct lend_client c;
	ck_assert_int_ge(lfd, 0);
	pthread_create(&t, NULL, impostor_main, &lfd);
	ck_assert_int_eq(
	    lend_client_connect(&c, "127.0.0.1", port, NULL, 7, secret_a, 2000),
	    -1);
	ck_assert_ptr_nonnull(strstr(c.err, "could not prove"));
	pthread_join(t, NULL);
	lend_client_close(&c);
	close(lfd);
}
END_TEST

/* ---- TLS ---------------------------------------------------------- */

static char tlsdir[256];

static void make_cert(const char *dir, const char *name)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
	         "openssl req -x509 -newkey ec -pkeyopt "
	         "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "
	         "/CN=localhost -keyout %s/%s.key -out %s/%s.crt "
	         ">/dev/null 2>&1",
	         dir, name, dir, name);
	ck_assert_int_eq(system(cmd), 0);
}

static void tls_setup(void)
{
	setup();
	snprintf(tlsdir, sizeof tlsdir, "%s/test_lend_tls.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tlsdir));
	make_cert(tlsdir, "lender");
	make_cert(tlsdir, "other");
}

static void tls_teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tlsdir);
	(void)!system(cmd);
}

static SSL_CTX *server_ctx(void)
{
	char c[300], k[300], err[256];
	snprintf(c, sizeof c, "%s/lender.crt", tlsdir);
	snprintf(k, sizeof k, "%s/lender.key", tlsdir);
	SSL_CTX *ctx = lend_tls_server_ctx(c, k, err, sizeof err);
	ck_assert_msg(ctx != NULL, "%s", err);
	return ctx;
}

static SSL_CTX *client_ctx(const char *name)
{
	char c[300], err[256];
	snprintf(c, sizeof c, "%s/%s.crt", tlsdir, name);
	SSL_CTX *ctx = lend_tls_client_ctx(c, err, sizeof err);
	ck_assert_msg(ctx != NULL, "%s", err);
	return ctx;
}

START_TEST(tls_round_trip_and_refusals)
{
	struct srv x;
	struct lend_client c;
	SSL_CTX *sctx = server_ctx(), *good = client_ctx("lender"),
	        *other = client_ctx("other");
	srv_start(&x, 11, secret_a, 512, sctx, 1000);
	ck_assert_msg(lend_client_connect(&c, "127.0.0.1", x.s.port, good, 11,
	                                  secret_a, 2000) == 0,
	              "%s", c.err);
	ck_assert_ptr_nonnull(c.conn.ssl);
	ck_assert_int_eq(c.conn.binding, 1);
	reads_and_writes_in_flight(&c);
	data_round_trip(&c);
	lend_client_close(&c);
	/* TLS does not replace the contract secret */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, good,
	                                     11, secret_b, 2000),
	                 -1);
	ck_assert_uint_eq(c.last_error, LEND_E_AUTH);
	lend_client_close(&c);
	/* a lender certificate we do not trust */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, other,
	                                     11, secret_a, 2000),
	                 -1);
	ck_assert_ptr_nonnull(strstr(c.err, "TLS"));
	lend_client_close(&c);
	/* plain TCP against a TLS lender */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL,
	                                     11, secret_a, 2000),
	                 -1);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 1), LEND_END_STOPPED);
	ck_assert_int_eq(x.s.auth_failures, 3);
	lend_server_close(&x.s);
	lend_tls_ctx_free(sctx);
	lend_tls_ctx_free(good);
	lend_tls_ctx_free(other);
}
END_TEST

/* A TLS reader for tls_small_writes_are_batched: takes the connection,
 * waits for `go`, then reads everything and keeps it. */
struct tls_reader {
	int lfd, go[2];
	SSL_CTX *ctx;
	uint8_t *got;
	size_t want;
	int ok;
};

static void *tls_reader_main(void *arg)
{
	struct tls_reader *r = arg;
	struct lend_conn c;
	char b;
	int fd = accept(r->lfd, NULL, NULL);
	if (fd < 0 || lend_conn_open(&c, fd, r->ctx, 1, 5000) < 0)
		return NULL;
	if (read(r->go[0], &b, 1) == 1)
		r->ok = lend_conn_read(&c, r->got, r->want) == 0;
	lend_conn_close(&c);
	return NULL;
}

/* Small buffers (request headers, a page) go out together under TLS: one
 * call moves many, not only the first; and a write that would block,
 * retried with the same bytes in front, sends each byte exactly once. */
START_TEST(tls_small_writes_are_batched)
{
	enum { N = 4096 };
	static uint8_t src[N * 32 + N / 4 * 4096];
	struct tls_reader r = {.ctx = server_ctx(), .want = 0};
	SSL_CTX *cctx = client_ctx("lender");
	char err[256];
	int port = 0;
	struct iovec v[N], *iov = v;
	size_t total = 0;
	for (int i = 0; i < N; i++) {
		/* 32-byte headers and an odd size among them */
		size_t len = i % 4 == 3 ? 4096 + 7 : 32;
		if (total + len > sizeof src)
			len = 32;
		v[i] = (struct iovec){src + total, len};
		total += len;
	}
	for (size_t i = 0; i < total; i++)
		src[i] = (uint8_t)(i * 131 + (i >> 9));
	r.want = total;
	r.got = malloc(total);
	ck_assert_ptr_nonnull(r.got);
	r.lfd = lend_tcp_listen("127.0.0.1", 0, &port, err, sizeof err);
	ck_assert_int_ge(r.lfd, 0);
	/* small socket buffers: the writer must block before the end */
	int small = 32 << 10;
	setsockopt(r.lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	ck_assert_int_eq(pipe(r.go), 0);
	pthread_t t;
	pthread_create(&t, NULL, tls_reader_main, &r);
	struct lend_conn c;
	int fd = lend_tcp_connect("127.0.0.1", port, err, sizeof err);
	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	ck_assert_int_eq(lend_conn_open(&c, fd, cctx, 0, 5000), 0);
	ck_assert_int_eq(lend_conn_set_nonblock(&c, 1), 0);
	int n = N, blocked = 0;
	size_t sent = 0;
	ssize_t w = lend_conn_writev_some(&c, iov, n);
	ck_assert_int_gt(w, 32 * 64); /* one record of many, not the first */
	ck_assert_int_le(w, LEND_CONN_TLS_BATCH);
	for (;;) {
		if (w < 0)
			ck_abort_msg("TLS write failed: %s", c.err);
		sent += (size_t)w;
		lend_iov_advance(&iov, &n, (size_t)w);
		if (n == 0)
			break;
		if (w == 0) {
			/* the reader has not started: the socket is full */
			if (!blocked++)
				ck_assert_int_eq(write(r.go[1], "g", 1), 1);
			struct pollfd p = {.fd = c.fd, .events = POLLOUT};
			(void)poll(&p, 1, 1000);
		}
		w = lend_conn_writev_some(&c, iov, n);
	}
	ck_assert_int_gt(blocked, 0); /* the retry was taken */
	ck_assert_uint_eq(sent, total);
	pthread_join(t, NULL);
	ck_assert_msg(r.ok, "the reader did not get every byte");
	ck_assert_msg(!memcmp(r.got, src, total),
	              "the bytes arrived changed or out of order");
	lend_conn_close(&c);
	close(r.lfd);
	close(r.go[0]);
	close(r.go[1]);
	free(r.got);
	lend_tls_ctx_free(r.ctx);
	lend_tls_ctx_free(cctx);
}
END_TEST

/* Half of the TLS record that carries b: what a peer whose sending stops
 * mid-record leaves in the lender's socket (SSL_read on a blocking socket
 * waits for the whole record, even after poll said readable). */
static void send_half_record(struct lend_conn *c, const void *b, size_t n)
{
	BIO *sock = SSL_get_wbio(c->ssl), *mem = BIO_new(BIO_s_mem());
	char *rec;
	size_t put;
	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(BIO_up_ref(sock), 1);
	SSL_set0_wbio(c->ssl, mem);
	ck_assert_int_eq(SSL_write_ex(c->ssl, b, n, &put), 1);
	long len = BIO_get_mem_data(mem, &rec);
	ck_assert_int_gt(len, 1);
	ck_assert_int_eq(write(c->fd, rec, (size_t)len / 2), len / 2);
	SSL_set0_wbio(c->ssl, sock); /* frees mem */
}

/* The same as half_request_then_silence_stops and
 * test_lend_direct's half_write_on_data_stalls_nobody, over TLS: a record
 * holding half a request (SSL_pending is 0 after it), then half a record.
 * The recall's notice still goes out on the stalled connection itself, a
 * new connection's handshake is taken, and a stop still ends the run. */
START_TEST(tls_half_request_stalls_nobody)
{
	struct srv x;
	struct lend_client c, d;
	SSL_CTX *sctx = server_ctx(), *good = client_ctx("lender");
	uint8_t b[LEND_HDR_LEN + LEND_PAGE_SIZE], r[LEND_PAGE_SIZE];
	srv_start(&x, 11, secret_a, 64, sctx, 30000);
	ck_assert_msg(lend_client_connect(&c, "127.0.0.1", x.s.port, good, 11,
	                                  secret_a, 2000) == 0,
	              "%s", c.err);
	write_request(b, 3);
	ck_assert_int_eq(lend_client_write(&c, 3, 1, b + LEND_HDR_LEN), 0);
	send_part(&c.conn, b, LEND_HDR_LEN + LEND_PAGE_SIZE / 2);
	usleep(300000); /* the loop has taken the part */
	lend_server_recall(&x.s);
	for (int i = 0; i < 1000 && !c.notice; i++) {
		usleep(10000);
		ck_assert_int_ge(lend_client_poll(&c), 0);
	}
	ck_assert_msg(c.notice, "no recall notice while the connection was "
	                        "mid-request: the lender's loop waits for "
	                        "its rest");
	/* the borrower reconnects: the new connection replaces the stalled
	 * one, is served, and stops mid-record */
	ck_assert_msg(lend_client_connect(&d, "127.0.0.1", x.s.port, good, 11,
	                                  secret_a, 2000) == 0,
	              "%s", d.err);
	ck_assert_int_eq(lend_client_read(&d, 3, 1, r), 0);
	ck_assert_int_eq(memcmp(r, b + LEND_HDR_LEN, LEND_PAGE_SIZE), 0);
	send_half_record(&d.conn, b, LEND_HDR_LEN + LEND_PAGE_SIZE);
	/* nothing of the request was decrypted: the half record alone makes
	 * the link mid-request, dropped at its deadline */
	ssize_t got = 1;
	for (int i = 0; i < 15 && got > 0; i++) {
		/* its close_notify, then the end */
		struct pollfd p = {.fd = d.conn.fd, .events = POLLIN};
		if (poll(&p, 1, 1000) == 1)
			got = recv(d.conn.fd, r, sizeof r, 0);
	}
	ck_assert_msg(got <= 0, "the half-record link was never dropped");
	/* and one more half record: a stop still ends the run */
	struct lend_client e;
	ck_assert_msg(lend_client_connect(&e, "127.0.0.1", x.s.port, good, 11,
	                                  secret_a, 2000) == 0,
	              "%s", e.err);
	send_half_record(&e.conn, b, LEND_HDR_LEN);
	usleep(300000);
	ck_assert_msg(srv_join_within(&x, 1, 10000) == 0,
	              "the lender did not stop while half a TLS record of a "
	              "request was in");
	ck_assert_int_eq(x.end, LEND_END_STOPPED);
	ck_assert_int_eq(x.s.stalled, 1);
	lend_client_close(&c);
	lend_client_close(&d);
	lend_client_close(&e);
	lend_server_close(&x.s);
	lend_tls_ctx_free(sctx);
	lend_tls_ctx_free(good);
}
END_TEST

/* ---- recall ------------------------------------------------------- */

START_TEST(recall_release_frees_pages)
{
	struct srv x;
	struct lend_client c;
	uint8_t p[LEND_PAGE_SIZE] = {1};
	srv_start(&x, 7, secret_a, 64, NULL, 10000);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	ck_assert_int_eq(lend_client_write(&c, 3, 1, p), 0);
	lend_server_recall(&x.s);
	for (int i = 0; i < 200 && !c.notice; i++) {
		usleep(10000);
		ck_assert_int_ge(lend_client_poll(&c), 0);
	}
	ck_assert_int_eq(c.notice, 1);
	ck_assert_int_gt(c.notice_ms, 0);
	ck_assert_int_le(c.notice_ms, 10000);
	/* the borrower still reads its pages during the notice */
	ck_assert_int_eq(lend_client_read(&c, 3, 1, p), 0);
	ck_assert_int_eq(p[0], 1);
	ck_assert_int_eq(lend_client_release(&c), 0);
	/* freed: nothing can be read any more */
	ck_assert_int_eq(lend_client_read(&c, 3, 1, p), -1);
	ck_assert_uint_eq(c.last_error, LEND_E_RELEASED);
	struct lend_meter_report l;
	ck_assert_int_eq(lend_client_lender_meter(&c, &l), 0);
	ck_assert_int_eq(l.pages_hosted, 0);
	ck_assert_int_eq(l.pages_in_use, 0);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 0), LEND_END_RELEASED);
	ck_assert_ptr_null(x.s.store.base);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(recall_deadline_frees_pages_anyway)
{
	struct srv x;
	struct lend_client c;
	uint8_t p[LEND_PAGE_SIZE] = {1};
	srv_start(&x, 7, secret_a, 64, NULL, 100);
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL, 7,
	                                     secret_a, 2000),
	                 0);
	ck_assert_int_eq(lend_client_write(&c, 3, 1, p), 0);
	lend_server_recall(&x.s);
	ck_assert_int_eq(srv_join(&x, 0), LEND_END_DEADLINE);
	ck_assert_ptr_null(x.s.store.base);
	/* the borrower ignored the notice: its pages are gone */
	ck_assert_int_eq(lend_client_read(&c, 3, 1, p), -1);
	ck_assert_int_eq(c.lost, 1);
	ck_assert_int_eq(lend_client_report(&c).lost, 1);
	lend_client_close(&c);
	lend_server_close(&x.s);
}
START_TEST(hostport_forms)
{
	char host[64];
	int port = -1;
	ck_assert_int_eq(
	    hostport_split("127.0.0.1:7100", host, sizeof host, &port), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_int_eq(port, 7100);
	ck_assert_int_eq(
	    hostport_split("lender-3.dc1:0", host, sizeof host, &port), 0);
	ck_assert_str_eq(host, "lender-3.dc1");
	ck_assert_int_eq(port, 0);
	/* the exchange stores IPv6 endpoints in brackets */
	ck_assert_int_eq(
	    hostport_split("[2001:db8::7]:7100", host, sizeof host, &port), 0);
	ck_assert_str_eq(host, "2001:db8::7");
	ck_assert_int_eq(port, 7100);
	ck_assert_int_eq(hostport_split("[::1]:9", host, sizeof host, &port),
	                 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_int_eq(port, 9);
	const char *bad[] = {"7100",      ":7100",   "host:",    "host:65536",
	                     "host:-1",   "host:7x", "::1:7100", "[::1]",
	                     "[::1]7100", "[]:7100", "[::1:7100"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(hostport_split(bad[i], host, sizeof host, &port) <
		                  0,
		              "%s was taken", bad[i]);
	/* a host that does not fit is refused, not cut */
	char small[4];
	ck_assert_int_lt(hostport_split("lender:1", small, sizeof small, &port),
	                 0);
}
END_TEST

/* A certificate, key or CA file that cannot be used says which and why in
 * words (found from outside: "error:0480006C:PEM routines::no start line"
 * for a file that is not PEM, with no file named). */
START_TEST(tls_file_errors_name_the_file)
{
	char notpem[300], missing[300], err[300];
	snprintf(notpem, sizeof notpem, "%s/not-a.pem", tlsdir);
	snprintf(missing, sizeof missing, "%s/missing.pem", tlsdir);
	FILE *f = fopen(notpem, "w");
	ck_assert_ptr_nonnull(f);
	fputs("just words\n", f);
	fclose(f);
	ck_assert_ptr_null(lend_tls_server_ctx(notpem, notpem, err, sizeof err));
	ck_assert_msg(strstr(err, notpem) && strstr(err, "no PEM block") &&
	                  !strstr(err, "error:"),
	              "%s", err);
	ck_assert_ptr_null(lend_tls_client_ctx(missing, err, sizeof err));
	ck_assert_msg(strstr(err, missing) && !strstr(err, "error:"), "%s",
	              err);
	char crt[300];
	snprintf(crt, sizeof crt, "%s/lender.crt", tlsdir);
	ck_assert_ptr_null(lend_tls_server_ctx(crt, notpem, err, sizeof err));
	ck_assert_msg(strstr(err, "TLS key") && strstr(err, notpem), "%s", err);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lend");
	TCase *t = tcase_create("proto");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, header_round_trip);
	tcase_add_test(t, header_check_limits);
	tcase_add_test(t, hello_and_auth_frames);
	tcase_add_test(t, secret_parse);
	tcase_add_test(t, hostport_forms);
	tcase_add_test(t, mac_binds_everything);
	tcase_add_test(t, meter_counts_and_integrates);
	tcase_add_test(t, reconcile_rules);
	suite_add_tcase(s, t);
	t = tcase_create("loopback");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, plain_round_trip_and_meters_agree);
	tcase_add_test(t, wrong_secret_is_refused);
	tcase_add_test(t, another_contract_is_refused);
	tcase_add_test(t, no_request_without_auth_and_no_replay);
	tcase_add_test(t, impostor_lender_is_refused);
	tcase_add_test(t, slow_peer_stalls_nobody);
	tcase_add_test(t, handshakes_are_bounded);
	tcase_add_test(t, plain_tcp_only_on_loopback);
	tcase_add_test(t, recall_release_frees_pages);
	tcase_add_test(t, recall_deadline_frees_pages_anyway);
	tcase_add_test(t, half_request_then_silence_stops);
	tcase_add_test(t, unread_replies_hold_the_loop_a_bounded_time);
	suite_add_tcase(s, t);
	t = tcase_create("tls");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, tls_setup, tls_teardown);
	tcase_add_test(t, tls_round_trip_and_refusals);
	tcase_add_test(t, tls_small_writes_are_batched);
	tcase_add_test(t, tls_file_errors_name_the_file);
	tcase_add_test(t, tls_half_request_stalls_nobody);
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
