/*
 * test_lend_direct.c — the lender's direct path: a DATA connection in
 * NBD's transmission phase (what nbd.ko speaks once handed the socket) and
 * a CONTROL connection beside it, against the real server on 127.0.0.1.
 * Pages written and read back, requests outside the contract refused with
 * NBD errors, the meter, recall over the control connection, the roles'
 * frames, an older lender refused with a message a person can act on, and
 * hostile NBD streams that close only their own connection.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node-agent/lend/lend_bridge.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_server.h"
#include "tests/unit/lend_fixture.h"

#define PG LEND_PAGE_SIZE

/* A DATA connection to the lender of test x: the bare socket. */
static int data_open(struct srv *x)
{
	struct lend_client c;
	int rc = lend_client_connect_role(&c, "127.0.0.1", x->s.port, NULL, 7,
	                                  secret_a, 2000, LEND_CONN_DATA);
	ck_assert_msg(rc == 0, "data connection: %s", c.err);
	ck_assert_int_eq(c.pages, x->s.cfg.pages);
	int fd = lend_client_take_fd(&c);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void ctl_open(struct srv *x, struct lend_client *c)
{
	int rc = lend_client_connect_role(c, "127.0.0.1", x->s.port, NULL, 7,
	                                  secret_a, 2000, LEND_CONN_CONTROL);
	ck_assert_msg(rc == 0, "control connection: %s", c->err);
}

/* One NBD command; the reply's error (-1: the link failed). */
static int64_t cmd(int fd, uint16_t type, uint64_t page, uint32_t pages,
                   const void *w, void *r)
{
	static uint64_t handle = 1;
	uint32_t err = 0;
	if (lend_nbd_client_cmd(fd, type, handle++, page * PG, pages * PG, w, r,
	                        &err) < 0)
		return -1;
	return err;
}

/* Whether the peer closed fd (reads EOF within a second). */
static int closed_by_peer(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 1000) <= 0)
		return 0;
	char b;
	return recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

static struct lend_meter_report lender_meter(struct lend_client *c)
{
	struct lend_meter_report r;
	ck_assert_int_eq(lend_client_lender_meter(c, &r), 0);
	return r;
}

START_TEST(authr_frame_round_trip)
{
	uint8_t b[LEND_AUTHR_LEN];
	struct lend_auth a = {.contract = 42, .role = LEND_CONN_DATA}, a2;
	memset(a.mac, 9, sizeof a.mac);
	ck_assert_uint_eq(lend_auth_encode(&a, b), LEND_AUTHR_LEN);
	ck_assert_int_eq(lend_auth_decode(b, &a2), 1);
	ck_assert_int_eq(lend_auth_role_decode(b + LEND_AUTH_LEN, &a2), 0);
	ck_assert_uint_eq(a2.role, LEND_CONN_DATA);
	ck_assert_uint_eq(a2.contract, 42);
	b[LEND_AUTH_LEN + 3] = 9; /* an unknown role */
	ck_assert_int_eq(lend_auth_role_decode(b + LEND_AUTH_LEN, &a2), -1);
	b[LEND_AUTH_LEN + 3] = LEND_CONN_CONTROL;
	b[LEND_AUTH_LEN + 7] = 1; /* reserved */
	ck_assert_int_eq(lend_auth_role_decode(b + LEND_AUTH_LEN, &a2), -1);
	/* role 0 is the plain AUTH, byte for byte as before */
	a.role = 0;
	ck_assert_uint_eq(lend_auth_encode(&a, b), LEND_AUTH_LEN);
	ck_assert_int_eq(memcmp(b, "RAMXAUTH", 8), 0);
	ck_assert_int_eq(lend_auth_decode(b, &a2), 0);
	ck_assert_uint_eq(a2.role, 0);
}
END_TEST

START_TEST(direct_pages_round_trip_and_meter)
{
	struct srv x;
	struct lend_client c;
	uint8_t *w = malloc(8 * PG), *r = malloc(8 * PG), zero[PG] = {0};
	srv_start(&x, 7, secret_a, 64, NULL, 10000);
	int fd = data_open(&x);
	fill(w, 8, 3);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 10, 8, w, NULL), 0);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 10, 8, NULL, r), 0);
	ck_assert_int_eq(memcmp(w, r, 8 * PG), 0);
	/* the last page of the contract, alone */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 63, 1, w, NULL), 0);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_TRIM, 12, 2, NULL, NULL), 0);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 12, 1, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, zero, PG), 0);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_FLUSH, 0, 0, NULL, NULL), 0);
	/* many requests in flight on one socket, as nbd.ko sends them:
	 * replies carry their handles */
	uint8_t h[LEND_NBD_REQ_LEN], rep[LEND_NBD_REPLY_LEN];
	for (int i = 0; i < 16; i++) {
		lend_nbd_req_encode(h, LEND_NBD_CMD_READ, 100 + (uint64_t)i,
		                    (uint64_t)(10 + i % 2) * PG, PG);
		ck_assert_int_eq(lend_nbd_write_full(fd, h, sizeof h), 0);
	}
	for (int i = 0; i < 16; i++) {
		uint32_t e;
		uint64_t got;
		ck_assert_int_eq(lend_nbd_read_full(fd, rep, sizeof rep), 0);
		ck_assert_int_eq(lend_nbd_reply_decode(rep, &e, &got), 0);
		ck_assert_uint_eq(e, 0);
		ck_assert_uint_eq(got, 100 + (uint64_t)i);
		ck_assert_int_eq(lend_nbd_read_full(fd, r, PG), 0);
		ck_assert_int_eq(memcmp(r, w + (i % 2) * PG, PG), 0);
	}
	/* the same meter events as READ/WRITE/TRIM on the lend protocol */
	ctl_open(&x, &c);
	struct lend_meter_report m = lender_meter(&c);
	ck_assert_int_eq(m.page_writes, 9);
	ck_assert_int_eq(m.page_reads, 8 + 1 + 16);
	ck_assert_int_eq(m.page_trims, 2);
	ck_assert_int_eq(m.pages_in_use, 9 - 2);
	ck_assert_int_eq(m.pages_hosted, 64);
	ck_assert_int_eq(x.s.data_connections, 1);
	/* and the data stays readable over the lend protocol */
	ck_assert_int_eq(lend_client_read(&c, 10, 2, r), 0);
	ck_assert_int_eq(memcmp(r, w, 2 * PG), 0);
	/* NBD_CMD_DISC: the lender closes the data connection alone */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_DISC, 0, 0, NULL, NULL), 0);
	ck_assert(closed_by_peer(fd));
	close(fd);
	ck_assert_int_eq(lend_client_read(&c, 10, 1, r), 0);
	lend_client_close(&c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
	free(w);
	free(r);
}
END_TEST

START_TEST(out_of_contract_requests_are_refused)
{
	struct srv x;
	uint8_t *w = malloc(4 * PG), r[PG];
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	int fd = data_open(&x);
	fill(w, 4, 5);
	/* past the end: a READ or TRIM is EINVAL, a WRITE ENOSPC (its
	 * payload is read and dropped: the stream goes on) */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 16, 1, NULL, r), EINVAL);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 14, 4, NULL, r), EINVAL);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 14, 4, w, NULL), ENOSPC);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_TRIM, 15, 2, NULL, NULL),
	                 EINVAL);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 0, 0, NULL, r), EINVAL);
	/* an offset near 2^64: no wrap lets it through */
	uint32_t e;
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 9,
	                                     UINT64_MAX - PG + 1, PG, NULL, r,
	                                     &e),
	                 0);
	ck_assert_uint_eq(e, EINVAL);
	/* unaligned, and an unknown command */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 9, 512, PG,
	                                     NULL, r, &e),
	                 0);
	ck_assert_uint_eq(e, EINVAL);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, 9, 9, 0, 0, NULL, NULL, &e),
	                 0);
	ck_assert_uint_eq(e, EINVAL);
	ck_assert_int_eq(x.s.nbd_errors, 8);
	/* nothing refused was counted or written; the connection works */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 12, 4, w, NULL), 0);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 15, 1, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, w + 3 * PG, PG), 0);
	struct lend_meter_report m = lend_server_report(&x.s);
	ck_assert_int_eq(m.page_writes, 4);
	ck_assert_int_eq(m.page_reads, 1);
	ck_assert_int_eq(m.page_trims, 0);
	close(fd);
	srv_join(&x, 1);
	lend_server_close(&x.s);
	free(w);
}
END_TEST

START_TEST(recall_notice_on_control_and_release)
{
	struct srv x;
	struct lend_client c;
	uint8_t w[PG], r[PG];
	srv_start(&x, 7, secret_a, 64, NULL, 10000);
	int fd = data_open(&x);
	ctl_open(&x, &c);
	fill(w, 1, 9);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 5, 1, w, NULL), 0);
	lend_server_recall(&x.s);
	for (int i = 0; i < 200 && !c.notice; i++) {
		usleep(10000);
		ck_assert_int_ge(lend_client_poll(&c), 0);
	}
	ck_assert_int_eq(c.notice, 1);
	ck_assert_int_gt(c.notice_ms, 0);
	ck_assert_int_le(c.notice_ms, 10000);
	/* during the notice the kernel still reads its pages back */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 5, 1, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	ck_assert_int_eq(lend_client_release(&c), 0);
	/* freed: the data connection answers EIO, nothing is read */
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 5, 1, NULL, r), EIO);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 5, 1, w, NULL), EIO);
	struct lend_meter_report m = lender_meter(&c);
	ck_assert_int_eq(m.pages_hosted, 0);
	ck_assert_int_eq(m.page_reads, 1);
	lend_client_close(&c);
	ck_assert_int_eq(srv_join(&x, 0), LEND_END_RELEASED);
	ck_assert_ptr_null(x.s.store.base);
	/* the end of the run closed the data connection too */
	ck_assert(closed_by_peer(fd));
	close(fd);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(recall_deadline_closes_both)
{
	struct srv x;
	struct lend_client c;
	uint8_t w[PG] = {1};
	srv_start(&x, 7, secret_a, 64, NULL, 100);
	int fd = data_open(&x);
	ctl_open(&x, &c);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_WRITE, 5, 1, w, NULL), 0);
	lend_server_recall(&x.s);
	ck_assert_int_eq(srv_join(&x, 0), LEND_END_DEADLINE);
	ck_assert_ptr_null(x.s.store.base);
	ck_assert(closed_by_peer(fd));
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 5, 1, NULL, w), -1);
	ck_assert_int_eq(lend_client_read(&c, 5, 1, w), -1);
	ck_assert_int_eq(c.lost, 1);
	close(fd);
	lend_client_close(&c);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(one_data_connection_at_a_time)
{
	struct srv x;
	uint8_t w[PG] = {7}, r[PG];
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	int a = data_open(&x);
	ck_assert_int_eq(cmd(a, LEND_NBD_CMD_WRITE, 1, 1, w, NULL), 0);
	int b = data_open(&x);
	/* the newer replaces the older (the borrower reattached) */
	ck_assert_int_eq(cmd(b, LEND_NBD_CMD_READ, 1, 1, NULL, r), 0);
	ck_assert_int_eq(r[0], 7);
	ck_assert(closed_by_peer(a));
	ck_assert_int_eq(x.s.data_connections, 2);
	close(a);
	close(b);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(old_style_client_beside_the_direct_path)
{
	struct srv x;
	struct lend_client c;
	uint8_t w[PG], r[PG];
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	/* an AUTH without a role: the lend protocol as it always was */
	ck_assert_int_eq(lend_client_connect(&c, "127.0.0.1", x.s.port, NULL,
	                                     7, secret_a, 2000),
	                 0);
	fill(w, 1, 4);
	ck_assert_int_eq(lend_client_write(&c, 2, 1, w), 0);
	int fd = data_open(&x);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 2, 1, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	ck_assert_int_eq(lend_client_read(&c, 2, 1, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	/* a wrong secret on a DATA connection: refused like any other */
	struct lend_client bad;
	ck_assert_int_eq(lend_client_connect_role(&bad, "127.0.0.1",
	                                          x.s.port, NULL, 7, secret_b,
	                                          2000, LEND_CONN_DATA),
	                 -1);
	ck_assert_uint_eq(bad.last_error, LEND_E_AUTH);
	lend_client_close(&c);
	close(fd);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(older_lender_is_refused_with_a_reason)
{
	/* a lender whose HELLO offers no roles (flags 0) */
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct lend_hello h = {.version = LEND_VERSION, .flags = 0};
	uint8_t b[LEND_HELLO_LEN];
	lend_hello_encode(&h, b);
	ck_assert_int_eq(write(sv[1], b, sizeof b), (ssize_t)sizeof b);
	struct lend_client c;
	ck_assert_int_eq(lend_client_open_role(&c, sv[0], NULL, 7, secret_a,
	                                       1000, LEND_CONN_DATA),
	                 -1);
	ck_assert_msg(strstr(c.err, "older ramex-lend-server") &&
	                  strstr(c.err, "without --direct"),
	              "%s", c.err);
	/* nothing to hand to an NBD client, and it says why */
	ck_assert_int_eq(lend_client_take_fd(&c), -1);
	ck_assert_msg(strstr(c.err, "lost"), "%s", c.err);
	/* and it sent nothing: the old lender never sees an AUTHR */
	ck_assert_int_eq(recv(sv[1], b, sizeof b, MSG_DONTWAIT), 0);
	close(sv[1]);
}
END_TEST

START_TEST(new_lender_says_it_takes_roles)
{
	struct srv x;
	uint8_t b[LEND_HELLO_LEN];
	struct lend_hello h;
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	int fd = raw_connect(x.s.port);
	ck_assert_int_eq(read_full(fd, b, sizeof b), 0);
	ck_assert_int_eq(lend_hello_decode(b, &h), 0);
	ck_assert_uint_eq(h.flags, LEND_HELLO_ROLES);
	/* an AUTHR with an unknown role: no WELCOME, closed */
	struct lend_auth a = {.contract = 7, .role = LEND_CONN_DATA};
	lend_mac(LEND_BORROWER, secret_a, 7, h.server_nonce, a.client_nonce,
	         NULL, a.mac);
	uint8_t ab[LEND_AUTHR_LEN];
	lend_auth_encode(&a, ab);
	ab[LEND_AUTH_LEN + 3] = 77;
	ck_assert_int_eq(write(fd, ab, sizeof ab), (ssize_t)sizeof ab);
	ck_assert(closed_by_peer(fd));
	close(fd);
	srv_join(&x, 1);
	ck_assert_int_eq(x.s.data_connections, 0);
	ck_assert_int_eq(x.s.auth_failures, 1);
	lend_server_close(&x.s);
}
END_TEST

/* A hostile request on a fresh DATA connection: the lender closes it
 * (close_expected) or refuses it, and the control connection and the
 * pages are untouched either way. */
static void hostile(struct srv *x, struct lend_client *c, const void *bytes,
                    size_t n, int then_close, int close_expected)
{
	int64_t before = __atomic_load_n(&x->s.data_connections, __ATOMIC_SEQ_CST);
	int fd = data_open(x);
	/* the loop has taken the connection: a peer that closes at once
	 * must not go before the handshake thread handed it over, or its
	 * bytes never reach the loop under test */
	for (int i = 0; i < 1000 && __atomic_load_n(&x->s.data_connections,
	                                            __ATOMIC_SEQ_CST) == before;
	     i++)
		usleep(10000);
	ck_assert_int_eq(lend_nbd_write_full(fd, bytes, n), 0);
	if (then_close) {
		close(fd);
	} else {
		ck_assert_int_eq(closed_by_peer(fd), close_expected);
		close(fd);
	}
	uint8_t r[PG];
	ck_assert_int_eq(lend_client_read(c, 3, 1, r), 0);
	ck_assert_int_eq(r[0], 0x33);
}

START_TEST(hostile_nbd_stream_closes_only_its_connection)
{
	struct srv x;
	struct lend_client c;
	uint8_t w[PG], h[LEND_NBD_REQ_LEN];
	memset(w, 0x33, sizeof w);
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	ctl_open(&x, &c);
	ck_assert_int_eq(lend_client_write(&c, 3, 1, w), 0);
	/* half a header, then gone */
	lend_nbd_req_encode(h, LEND_NBD_CMD_READ, 1, 0, PG);
	hostile(&x, &c, h, 10, 1, 0);
	/* a bad magic */
	uint8_t junk[LEND_NBD_REQ_LEN];
	memset(junk, 0xa5, sizeof junk);
	hostile(&x, &c, junk, sizeof junk, 0, 1);
	/* a WRITE of 4 GiB - 4 KiB: nobody reads that much to drop it */
	lend_nbd_req_encode(h, LEND_NBD_CMD_WRITE, 1, 0, UINT32_MAX - PG + 1);
	hostile(&x, &c, h, sizeof h, 0, 1);
	/* a WRITE that announces 8 pages and sends one, then stops */
	uint8_t part[LEND_NBD_REQ_LEN + PG];
	lend_nbd_req_encode(part, LEND_NBD_CMD_WRITE, 1, 0, 8 * PG);
	memset(part + LEND_NBD_REQ_LEN, 0x44, PG);
	hostile(&x, &c, part, sizeof part, 1, 0);
	/* a READ of the whole 32 MiB limit past the end: refused, open */
	lend_nbd_req_encode(h, LEND_NBD_CMD_READ, 1, 0, LEND_NBD_MAX_REQ);
	hostile(&x, &c, h, sizeof h, 0, 0);
	/* after all that, a well-behaved data connection works */
	int fd = data_open(&x);
	uint8_t r[PG];
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 3, 1, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	close(fd);
	ck_assert_int_eq(x.s.data_connections, 6);
	lend_client_close(&c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

/* Whether fd is still open at the lender's end: nothing to read, no EOF. */
static int open_at_lender(int fd)
{
	char b;
	return recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Whether the lender closes fd within ms (EOF; anything else read before
 * it is dropped). */
static int closed_within(int fd, int ms)
{
	char b[512];
	for (int i = 0; i < ms / 100; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) == 1) {
			ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno == ECONNRESET))
				return 1;
		}
	}
	return 0;
}

/* A borrower holding the secret sends an NBD WRITE's header and half its
 * page on the DATA connection, then nothing. The loop must not wait for
 * the rest: the recall's notice still goes out on the CONTROL connection
 * (while the DATA one is still open: the notice did not wait for its
 * drop), the CONTROL connection and a new handshake are still served, and
 * the stalled connection is dropped at its own deadline. */
START_TEST(half_write_on_data_stalls_nobody)
{
	struct srv x;
	struct lend_client c, c2;
	uint8_t w[PG], r[PG];
	srv_start(&x, 7, secret_a, 64, NULL, 30000);
	ctl_open(&x, &c);
	fill(w, 1, 6);
	ck_assert_int_eq(lend_client_write(&c, 2, 1, w), 0);
	int fd = data_open(&x);
	uint8_t half[LEND_NBD_REQ_LEN + PG / 2];
	lend_nbd_req_encode(half, LEND_NBD_CMD_WRITE, 1, 5 * PG, PG);
	memset(half + LEND_NBD_REQ_LEN, 0x5a, PG / 2);
	ck_assert_int_eq(lend_nbd_write_full(fd, half, sizeof half), 0);
	usleep(300000); /* the loop has taken the half */
	lend_server_recall(&x.s);
	for (int i = 0; i < 1000 && !c.notice; i++) {
		usleep(10000);
		ck_assert_int_ge(lend_client_poll(&c), 0);
	}
	ck_assert_msg(c.notice,
	              "no recall notice while the DATA connection was "
	              "mid-WRITE: the lender's loop waits for its rest");
	ck_assert(open_at_lender(fd));
	/* the CONTROL connection is served, and a new one's handshake is
	 * taken (it replaces the old: the borrower reconnected) */
	ck_assert_int_eq(lend_client_read(&c, 2, 1, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	ctl_open(&x, &c2);
	ck_assert_int_eq(lend_client_read(&c2, 2, 1, r), 0);
	ck_assert_int_eq(memcmp(r, w, PG), 0);
	lend_client_close(&c);
	/* the stalled DATA connection goes at its deadline */
	ck_assert_msg(closed_within(fd, 20000),
	              "the stalled DATA connection was never dropped");
	close(fd);
	ck_assert_int_eq(lend_client_release(&c2), 0);
	lend_client_close(&c2);
	ck_assert_int_eq(srv_join_within(&x, 0, 10000), 0);
	ck_assert_int_eq(x.end, LEND_END_RELEASED);
	ck_assert_int_eq(x.s.stalled, 1);
	lend_server_close(&x.s);
}
END_TEST

/* A request that arrives in pieces, with pauses between: the loop keeps
 * what came (the header in the link, the pages in the store) and serves
 * it whole once the rest is in. */
START_TEST(a_write_in_pieces_is_served)
{
	struct srv x;
	uint8_t q[LEND_NBD_REQ_LEN + 2 * PG], r[2 * PG];
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	int fd = data_open(&x);
	lend_nbd_req_encode(q, LEND_NBD_CMD_WRITE, 1, 4 * PG, 2 * PG);
	fill(q + LEND_NBD_REQ_LEN, 2, 8);
	/* half the header; the rest of it and part of a page; the rest */
	const size_t cut[] = {0, 10, LEND_NBD_REQ_LEN + 3000, sizeof q};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(
		    lend_nbd_write_full(fd, q + cut[i], cut[i + 1] - cut[i]),
		    0);
		usleep(100000);
	}
	uint8_t rep[LEND_NBD_REPLY_LEN];
	uint32_t e;
	uint64_t h;
	ck_assert_int_eq(lend_nbd_read_full(fd, rep, sizeof rep), 0);
	ck_assert_int_eq(lend_nbd_reply_decode(rep, &e, &h), 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_uint_eq(h, 1);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 4, 2, NULL, r), 0);
	ck_assert_int_eq(memcmp(r, q + LEND_NBD_REQ_LEN, 2 * PG), 0);
	ck_assert_int_eq(lend_server_report(&x.s).page_writes, 2);
	close(fd);
	srv_join(&x, 1);
	ck_assert_int_eq(x.s.stalled, 0);
	lend_server_close(&x.s);
}
END_TEST

/* The pages go (RELEASE on the CONTROL connection) while a WRITE's pages
 * are half in on the DATA one: its rest is dropped, not written where the
 * pages were, and the WRITE is answered EIO. */
START_TEST(release_while_a_write_is_half_in)
{
	struct srv x;
	struct lend_client c;
	uint8_t q[LEND_NBD_REQ_LEN + PG], r[PG];
	srv_start(&x, 7, secret_a, 16, NULL, 10000);
	ctl_open(&x, &c);
	int fd = data_open(&x);
	lend_nbd_req_encode(q, LEND_NBD_CMD_WRITE, 1, 2 * PG, PG);
	memset(q + LEND_NBD_REQ_LEN, 0x77, PG);
	ck_assert_int_eq(lend_nbd_write_full(fd, q, LEND_NBD_REQ_LEN + PG / 2),
	                 0);
	usleep(200000); /* the loop has taken the half */
	lend_server_recall(&x.s);
	for (int i = 0; i < 1000 && !c.notice; i++) {
		usleep(10000);
		ck_assert_int_ge(lend_client_poll(&c), 0);
	}
	ck_assert_int_eq(c.notice, 1);
	ck_assert_int_eq(lend_client_release(&c), 0);
	ck_assert_ptr_null(x.s.store.base);
	ck_assert_int_eq(
	    lend_nbd_write_full(fd, q + LEND_NBD_REQ_LEN + PG / 2, PG / 2), 0);
	uint8_t rep[LEND_NBD_REPLY_LEN];
	uint32_t e;
	uint64_t h;
	ck_assert_int_eq(lend_nbd_read_full(fd, rep, sizeof rep), 0);
	ck_assert_int_eq(lend_nbd_reply_decode(rep, &e, &h), 0);
	ck_assert_uint_eq(e, EIO);
	ck_assert_int_eq(cmd(fd, LEND_NBD_CMD_READ, 2, 1, NULL, r), EIO);
	struct lend_meter_report m = lender_meter(&c);
	ck_assert_int_eq(m.page_writes, 0);
	lend_client_close(&c);
	close(fd);
	ck_assert_int_eq(srv_join(&x, 0), LEND_END_RELEASED);
	lend_server_close(&x.s);
}
END_TEST

START_TEST(direct_meter_counts_the_device)
{
	/* direct: the borrower's counts are the device's, from
	 * /sys/block/nbdX/stat (sectors / 8), plus what the control
	 * connection moved; hosted time is the control connection's */
	struct srv x;
	struct lend_client c;
	struct lend_bridge b;
	uint8_t w[PG] = {1};
	char path[] = "/tmp/ramex-test-stat-XXXXXX";
	srv_start(&x, 7, secret_a, 64, NULL, 10000);
	ctl_open(&x, &c);
	ck_assert_int_eq(lend_client_write(&c, 0, 1, w), 0); /* swap header */
	ck_assert_int_eq(lend_bridge_init(&b, &c, "ramex"), 0);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	/* reads 100 I/Os 800 sectors, writes 6 I/Os 48 sectors, discards
	 * 2 I/Os 16 sectors (Documentation/block/stat.rst) */
	const char *line = "     100        0      800       12        6        "
	                   "0       48        3        0       20       15"
	                   "        2        0       16        1\n";
	ck_assert_int_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	close(fd);
	b.direct = 1;
	snprintf(b.stat_path, sizeof b.stat_path, "%s", path);
	struct lend_meter_report r = lend_bridge_report(&b);
	ck_assert_int_eq(r.page_reads, 100);
	ck_assert_int_eq(r.page_writes, 6 + 1);
	ck_assert_int_eq(r.page_trims, 2);
	ck_assert_int_eq(r.pages_hosted, 64);
	/* a device an earlier contract used: its stat counts since the
	 * device exists, and the attach took those as the base (what
	 * lend_bridge_attach_direct reads before the kernel has the socket) */
	b.dev_base[0] = 60;
	b.dev_base[1] = 4;
	b.dev_base[2] = 2;
	r = lend_bridge_report(&b);
	ck_assert_int_eq(r.page_reads, 40);
	ck_assert_int_eq(r.page_writes, 2 + 1);
	ck_assert_int_eq(r.page_trims, 0);
	/* the device gone (stat unreadable): the last counts stay */
	unlink(path);
	r = lend_bridge_report(&b);
	ck_assert_int_eq(r.page_reads, 40);
	ck_assert_int_eq(r.page_writes, 3);
	/* not direct: the client's meter alone */
	b.direct = 0;
	r = lend_bridge_report(&b);
	ck_assert_int_eq(r.page_reads, 0);
	ck_assert_int_eq(r.page_writes, 1);
	lend_bridge_free(&b);
	lend_client_close(&c);
	srv_join(&x, 1);
	lend_server_close(&x.s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("lend_direct");
	TCase *t = tcase_create("direct");
	tcase_set_timeout(t, 30);
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, authr_frame_round_trip);
	tcase_add_test(t, direct_pages_round_trip_and_meter);
	tcase_add_test(t, out_of_contract_requests_are_refused);
	tcase_add_test(t, recall_notice_on_control_and_release);
	tcase_add_test(t, recall_deadline_closes_both);
	tcase_add_test(t, one_data_connection_at_a_time);
	tcase_add_test(t, old_style_client_beside_the_direct_path);
	tcase_add_test(t, older_lender_is_refused_with_a_reason);
	tcase_add_test(t, new_lender_says_it_takes_roles);
	tcase_add_test(t, hostile_nbd_stream_closes_only_its_connection);
	tcase_add_test(t, direct_meter_counts_the_device);
	tcase_add_test(t, half_write_on_data_stalls_nobody);
	tcase_add_test(t, a_write_in_pieces_is_served);
	tcase_add_test(t, release_while_a_write_is_half_in);
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
