/*
 * fuzz_lend_direct.c — libFuzzer target for the lender's direct path: the
 * bytes a borrower's kernel (or whoever holds the contract's secret) sends
 * on a DATA connection, in NBD's transmission phase. One real lender
 * (anonymous pages, 127.0.0.1) runs in a thread for the whole run; each
 * input is written on a fresh authenticated DATA connection, whose writing
 * side is then closed, while a thread drains the replies until the lender
 * hangs up. The lender must answer or close that connection and go on
 * serving: the next input's handshake fails otherwise, and so does this
 * target.
 */
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_server.h"
#include "common/log.h"
#include "tests/fuzz/fuzz_peer.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct lend_server srv;
static const uint8_t secret[LEND_SECRET_LEN] = {1, 2, 3};

static void die(const char *what, const char *why)
{
	fprintf(stderr, "fuzz_lend_direct: %s: %s\n", what, why);
	abort();
}

static void *srv_main(void *arg)
{
	(void)arg;
	enum lend_server_end e = lend_server_run(&srv);
	if (e != LEND_END_STOPPED)
		die("the lender's loop ended", srv.err);
	return NULL;
}

static void start(void)
{
	char err[256];
	struct lend_server_config c = {.contract = 7,
	                               .pages = 64,
	                               .host = "127.0.0.1",
	                               .store = LEND_STORE_ANON,
	                               .notice_ms = 1000};
	memcpy(c.secret, secret, sizeof secret);
	signal(SIGPIPE, SIG_IGN);
	log_init("fuzz", LOG_ERROR);
	pthread_t t;
	if (lend_server_open(&srv, &c, err, sizeof err) < 0)
		die("could not start the lender", err);
	if (pthread_create(&t, NULL, srv_main, NULL) != 0)
		abort();
	pthread_detach(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int started;
	if (!started) {
		start();
		started = 1;
	}
	struct lend_client c;
	if (lend_client_connect_role(&c, "127.0.0.1", srv.port, NULL, 7,
	                             secret, 5000, LEND_CONN_DATA) < 0)
		die("the lender no longer takes a data connection", c.err);
	int fd = lend_client_take_fd(&c);
	if (fd < 0)
		die("no data socket", "lend_client_take_fd");
	int peer_r = dup(fd);
	struct fuzz_feed f = {.fd = fd, .d = data, .n = size};
	pthread_t tf, td;
	if (peer_r < 0 || pthread_create(&tf, NULL, fuzz_feed_main, &f) != 0 ||
	    pthread_create(&td, NULL, fuzz_drain_main, &peer_r) != 0)
		abort();
	/* the drain ends when the lender closes the connection: it must,
	 * once the input is over */
	pthread_join(tf, NULL);
	pthread_join(td, NULL);
	close(fd);
	close(peer_r);
	return 0;
}
