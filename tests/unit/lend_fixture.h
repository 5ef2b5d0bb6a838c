/*
 * lend_fixture.h — what the two lending suites (test_lend, test_lend_nbd)
 * share: the two contract secrets and the checked fixture that parses them,
 * a real lend server on 127.0.0.1 run in a thread (srv_start/srv_join), a
 * page pattern (fill) and raw socket helpers (raw_connect, read_full).
 * Test code only; the names are kept short as the suites' bodies use them.
 */
#ifndef RAMEX_TESTS_LEND_FIXTURE_H
#define RAMEX_TESTS_LEND_FIXTURE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_server.h"

/* contract 7's secret (secret_a) and another's (secret_b), parsed from
 * hex_a and hex_b by setup() */
extern uint8_t secret_a[LEND_SECRET_LEN], secret_b[LEND_SECRET_LEN];
extern const char *hex_a, *hex_b;

/* the checked fixture: SIGPIPE ignored, the secrets parsed */
void setup(void);

struct srv {
	struct lend_server s;
	pthread_t thr;
	enum lend_server_end end;
};

/* The server's thread: runs x->s until it ends, keeps the end in x->end
 * (for a test that opens the server itself). */
void *srv_main(void *arg);
/* Opens a lender of `pages` anonymous pages for `contract` on 127.0.0.1
 * (an ephemeral port, x->s.port) and runs it in a thread. */
void srv_start(struct srv *x, uint64_t contract, const uint8_t *secret,
               int64_t pages, SSL_CTX *tls, int64_t notice_ms);
/* The same with `awake` keep-awake threads (lend_awake.h). */
void srv_start_awake(struct srv *x, uint64_t contract, const uint8_t *secret,
                     int64_t pages, SSL_CTX *tls, int64_t notice_ms,
                     int awake);
/* Waits for the server's thread (stopping it first if `stop`); its end. */
enum lend_server_end srv_join(struct srv *x, int stop);
/* The same, giving up after ms (a loop that never acts on the stop would
 * otherwise hang the test until check's timeout, which says nothing):
 * 0 when the thread ended (its end in x->end), -1 when it did not. */
int srv_join_within(struct srv *x, int stop, int ms);

/* A pattern over `pages` pages that differs by seed and by page. */
void fill(uint8_t *p, size_t pages, unsigned seed);

/* A plain TCP connection to 127.0.0.1:port (fails the test if none). */
int raw_connect(int port);
/* Reads exactly n bytes; -1 on EOF or error. */
int read_full(int fd, void *b, size_t n);

#endif
