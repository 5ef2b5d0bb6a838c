/*
 * lend_fixture.c — the lending suites' shared fixture (see lend_fixture.h).
 */
#include "tests/unit/lend_fixture.h"

#include <check.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node-agent/lend/lend_conn.h"

uint8_t secret_a[LEND_SECRET_LEN], secret_b[LEND_SECRET_LEN];
const char *hex_a =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const char *hex_b =
    "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(lend_secret_parse(hex_a, secret_a), 0);
	ck_assert_int_eq(lend_secret_parse(hex_b, secret_b), 0);
}

void *srv_main(void *arg)
{
	struct srv *x = arg;
	x->end = lend_server_run(&x->s);
	return NULL;
}

void srv_start(struct srv *x, uint64_t contract, const uint8_t *secret,
               int64_t pages, SSL_CTX *tls, int64_t notice_ms)
{
	srv_start_awake(x, contract, secret, pages, tls, notice_ms, 0);
}

void srv_start_awake(struct srv *x, uint64_t contract, const uint8_t *secret,
                     int64_t pages, SSL_CTX *tls, int64_t notice_ms,
                     int awake)
{
	char err[256];
	struct lend_server_config c = {.contract = contract,
	                               .pages = pages,
	                               .host = "127.0.0.1",
	                               .tls = tls,
	                               .store = LEND_STORE_ANON,
	                               .notice_ms = notice_ms,
	                               .handshake_ms = 2000,
	                               .keep_awake = awake};
	memcpy(c.secret, secret, LEND_SECRET_LEN);
	ck_assert_msg(lend_server_open(&x->s, &c, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(x->s.store.kind, LEND_STORE_ANON);
	ck_assert_int_eq(pthread_create(&x->thr, NULL, srv_main, x), 0);
}

enum lend_server_end srv_join(struct srv *x, int stop)
{
	if (stop)
		lend_server_stop(&x->s);
	pthread_join(x->thr, NULL);
	return x->end;
}

int srv_join_within(struct srv *x, int stop, int ms)
{
	struct timespec t;
	if (stop)
		lend_server_stop(&x->s);
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return pthread_timedjoin_np(x->thr, NULL, &t) == 0 ? 0 : -1;
}

void fill(uint8_t *p, size_t pages, unsigned seed)
{
	for (size_t i = 0; i < pages * LEND_PAGE_SIZE; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12) * 7);
}

int raw_connect(int port)
{
	char err[200];
	int fd = lend_tcp_connect("127.0.0.1", port, err, sizeof err);
	ck_assert_msg(fd >= 0, "%s", err);
	return fd;
}

int read_full(int fd, void *b, size_t n)
{
	uint8_t *p = b;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
