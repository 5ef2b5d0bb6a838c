/*
 * fuzz_bridge.c — libFuzzer target for the borrower's bridge between its
 * two untrusted streams: the NBD requests it reads ahead (lend_bridge) and
 * the lender's replies it parses (lend_client: headers read ahead, payloads
 * matched to requests by handle, notices between them).
 *
 * The input is split in two: the NBD stream the kernel side writes (after
 * a correct newstyle handshake, which fuzz_nbd already covers), and a
 * script for a fake lender. The fake lender authenticates properly, then
 * for every request the bridge sends it takes a script byte that says how
 * to answer: as a lender should, with an error code, after a recall
 * notice, after raw script bytes (a broken stream), with a handle nobody
 * asked for, held back and answered after the next one (out of order), or
 * not at all (it closes). When the script ends it closes.
 *
 * Checked besides memory safety (ASan, UBSan) and the modules' own
 * assertions: every request the bridge sends the lender is a valid frame
 * inside the contract (the bridge must refuse the rest itself), and the
 * bridge ends once both streams have ended, whatever came.
 */
#include "node-agent/lend/lend_bridge.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_proto.h"
#include "tests/fuzz/fuzz_peer.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAGES    1024 /* 4 MiB: longer than the staging buffer */
#define CONTRACT 77

static const uint8_t secret[LEND_SECRET_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_bridge: %s\n", what);
	abort();
}

static void die_req(const char *what, const struct lend_hdr *q)
{
	fprintf(stderr,
	        "fuzz_bridge: %s: type %u flags %u page %llu count %u\n", what,
	        q->type, q->flags, (unsigned long long)q->page, q->count);
	abort();
}

/* ---- the fake lender ------------------------------------------------ */

struct lender {
	int fd;
	const uint8_t *s; /* script */
	size_t n, at;
	uint8_t *page; /* READ payloads, and WRITE payloads dropped */
	size_t page_len;
	/* a reply held back to go after the next one */
	int held;
	struct lend_hdr hh;
};

static int script(struct lender *l, uint8_t *b)
{
	if (l->at >= l->n)
		return -1;
	*b = l->s[l->at++];
	return 0;
}

/* A reply as a lender sends it: header, and a READ's pages or a METER's
 * bytes when it succeeded. */
static int send_reply(struct lender *l, const struct lend_hdr *r)
{
	uint8_t h[LEND_HDR_LEN];
	struct lend_hdr x = *r;
	if (x.type == LEND_METER && x.error == LEND_OK)
		x.extra = LEND_METER_WIRE;
	lend_hdr_encode(&x, 1, h);
	if (lend_nbd_write_full(l->fd, h, sizeof h) < 0)
		return -1;
	if (x.error != LEND_OK)
		return 0;
	if (x.type == LEND_READ)
		return lend_nbd_write_full(l->fd, l->page,
		                           (size_t)x.count * LEND_PAGE_SIZE);
	if (x.type == LEND_METER) {
		uint8_t m[LEND_METER_WIRE] = {0};
		return lend_nbd_write_full(l->fd, m, sizeof m);
	}
	return 0;
}

static int handshake(struct lender *l)
{
	uint8_t b[LEND_AUTH_LEN];
	struct lend_hello hello = {.version = LEND_VERSION};
	struct lend_auth auth;
	struct lend_welcome w = {.status = LEND_OK, .pages = PAGES};
	memset(hello.server_nonce, 0x42, sizeof hello.server_nonce);
	lend_hello_encode(&hello, b);
	if (lend_nbd_write_full(l->fd, b, LEND_HELLO_LEN) < 0 ||
	    lend_nbd_read_full(l->fd, b, LEND_AUTH_LEN) < 0 ||
	    lend_auth_decode(b, &auth) < 0)
		return -1;
	lend_mac(LEND_LENDER, secret, auth.contract, hello.server_nonce,
	         auth.client_nonce, NULL, w.mac);
	lend_welcome_encode(&w, b);
	return lend_nbd_write_full(l->fd, b, LEND_WELCOME_LEN);
}

static void *lender_main(void *arg)
{
	struct lender *l = arg;
	uint8_t b[LEND_HDR_LEN], op, x;
	if (handshake(l) < 0)
		goto out;
	for (;;) {
		struct lend_hdr q, r;
		if (lend_nbd_read_full(l->fd, b, sizeof b) < 0)
			break;
		if (lend_hdr_decode(b, 0, &q) < 0)
			die("the bridge sent a request with a bad magic");
		if (lend_hdr_check(&q, PAGES) != LEND_OK)
			die_req("the bridge sent a request outside the "
			        "contract",
			        &q);
		if (q.type == LEND_WRITE) {
			size_t left = (size_t)q.count * LEND_PAGE_SIZE;
			while (left > 0) {
				size_t k =
				    left < l->page_len ? left : l->page_len;
				if (lend_nbd_read_full(l->fd, l->page, k) < 0)
					goto out;
				left -= k;
			}
		}
		if (q.type == LEND_BYE || script(l, &op) < 0)
			break;
		r = (struct lend_hdr){
		    .type = q.type, .handle = q.handle, .count = q.count};
		switch (op & 7) {
		case 3: /* refused, with any code */
			if (script(l, &x) < 0)
				goto out;
			r.error = x % 16;
			break;
		case 4: { /* a recall notice first */
			struct lend_hdr n = {.type = LEND_NOTICE};
			if (script(l, &x) < 0)
				goto out;
			n.extra = (uint64_t)x * 100;
			if (send_reply(l, &n) < 0)
				goto out;
			break;
		}
		case 5: /* raw bytes: a broken stream, or a forged frame */
			if (script(l, &x) < 0)
				goto out;
			x %= 64;
			if (l->n - l->at < x)
				goto out;
			if (lend_nbd_write_full(l->fd, l->s + l->at, x) < 0)
				goto out;
			l->at += x;
			break;
		case 6: /* a handle nobody asked for */
			r.handle += 1 + (op >> 4);
			break;
		case 7: /* no answer: the lender goes */
			goto out;
		}
		if ((op & 8) && !l->held) { /* answered after the next */
			l->held = 1;
			l->hh = r;
			continue;
		}
		if (send_reply(l, &r) < 0)
			break;
		if (l->held) {
			l->held = 0;
			if (send_reply(l, &l->hh) < 0)
				break;
		}
	}
out:
	shutdown(l->fd, SHUT_RDWR);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a correct handshake: fixed newstyle, no zeroes, NBD_OPT_GO for
	 * "ramex" without info requests */
	static const uint8_t hello[] = {
	    0, 0, 0, 3,  'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0,   0, 0, 7,
	    0, 0, 0, 11, 0,   0,   0,   5,   'r', 'a', 'm', 'e', 'x', 0, 0};
	static uint8_t page[PAGES * LEND_PAGE_SIZE / 16]; /* 256 KiB */
	int ln[2], nb[2];
	if (size < 2)
		return 0;
	signal(SIGPIPE, SIG_IGN);
	/* the first two bytes: how much of the rest is the NBD stream */
	size_t split = ((size_t)data[0] << 8 | data[1]) % (size - 1);
	data += 2;
	size -= 2;
	uint8_t *in = malloc(sizeof hello + split + 1);
	if (!in)
		abort();
	memcpy(in, hello, sizeof hello);
	memcpy(in + sizeof hello, data, split);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ln) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nb) < 0)
		abort();
	memset(page, 0x5a, sizeof page);
	struct lender l = {.fd = ln[1],
	                   .s = data + split,
	                   .n = size - split,
	                   .page = page,
	                   .page_len = sizeof page};
	struct fuzz_feed f = {.fd = nb[1], .d = in, .n = sizeof hello + split};
	int peer_r = dup(nb[1]);
	pthread_t tl, tf, td;
	if (peer_r < 0 || pthread_create(&tl, NULL, lender_main, &l) != 0 ||
	    pthread_create(&tf, NULL, fuzz_feed_main, &f) != 0 ||
	    pthread_create(&td, NULL, fuzz_drain_main, &peer_r) != 0)
		abort();

	struct lend_client c;
	static struct lend_bridge b;
	if (lend_client_open(&c, ln[0], NULL, CONTRACT, secret, 2000) < 0)
		die("the fake lender's handshake failed");
	/* a lender that stops answering is lost soon, not in 5 s */
	c.reply_timeout_ms = 50;
	if (lend_bridge_init(&b, &c, "ramex") < 0)
		abort();
	if (lend_bridge_accept(&b, nb[0]) == 0)
		(void)lend_bridge_run(&b);
	lend_bridge_free(&b);  /* closes nb[0]: ends the feed and the drain */
	lend_client_close(&c); /* ends the lender */
	pthread_join(tl, NULL);
	pthread_join(tf, NULL);
	pthread_join(td, NULL);
	close(ln[1]);
	close(nb[1]);
	close(peer_r);
	free(in);
	return 0;
}
