/*
 * fuzz_nbd.c — libFuzzer target for the bridge's NBD server, the bytes the
 * borrower's kernel (or anything that reaches its socket) sends: the input
 * is written into one end of a socket pair, the server's newstyle
 * handshake and then its request loop run on the other against a small
 * in-memory export, and a thread drains the replies. Every request the
 * backend sees must lie inside the export and be block-aligned; the loop
 * must end (DISC, end of input or a refusal) without touching memory
 * outside its buffers.
 */
#include "node-agent/lend/lend_nbd.h"
#include "tests/fuzz/fuzz_peer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXPORT_BLOCKS 64

static uint8_t disk[EXPORT_BLOCKS * LEND_NBD_BLOCK];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_nbd: %s\n", what);
	abort();
}

static void check(uint64_t off, uint32_t len)
{
	if (len == 0 || off % LEND_NBD_BLOCK || len % LEND_NBD_BLOCK ||
	    off > sizeof disk || len > sizeof disk - off)
		die("the backend was handed a request outside the export");
}

static int be_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	(void)ctx;
	check(off, len);
	memcpy(buf, disk + off, len);
	return 0;
}

static int be_write(void *ctx, uint64_t off, uint32_t len, const void *buf)
{
	(void)ctx;
	check(off, len);
	memcpy(disk + off, buf, len);
	return 0;
}

static int be_flush(void *ctx)
{
	(void)ctx;
	return 0;
}

static int be_trim(void *ctx, uint64_t off, uint32_t len)
{
	(void)ctx;
	check(off, len);
	memset(disk + off, 0, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[4 * LEND_NBD_BLOCK];
	int sv[2];
	char err[256];
	struct lend_nbd_export e = {
	    .name = "ramex", .size = sizeof disk, .tflags = LEND_NBD_TFLAGS};
	struct lend_nbd_backend b = {.read = be_read,
	                             .write = be_write,
	                             .flush = be_flush,
	                             .trim = be_trim};
	struct lend_nbd_stats st = {0};
	/* An odd first byte: a correct handshake (fixed newstyle, no
	 * zeroes, NBD_OPT_EXPORT_NAME "ramex") comes first, so that most
	 * inputs reach the request loop; the rest of the input follows. */
	static const uint8_t hello[] = {
	    0,   0,   0,   3, /* client flags */
	    'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0,  0, 0, 1, /* option */
	    0,   0,   0,   5,   'r', 'a', 'm', 'e', 'x'};
	uint8_t *in = malloc(sizeof hello + size + 1);
	size_t n = 0;
	if (!in)
		abort();
	if (size > 0 && (data[0] & 1)) {
		memcpy(in, hello, sizeof hello);
		n = sizeof hello;
		data++;
		size--;
	}
	memcpy(in + n, data, size);
	n += size;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	/* the peer both feeds the input and drains the replies: one thread
	 * each, so neither direction can fill up and stall the server */
	int peer_r = dup(sv[1]);
	struct fuzz_feed f = {.fd = sv[1], .d = in, .n = n};
	pthread_t tf, td;
	if (peer_r < 0 || pthread_create(&tf, NULL, fuzz_feed_main, &f) != 0 ||
	    pthread_create(&td, NULL, fuzz_drain_main, &peer_r) != 0)
		abort();
	int rc = lend_nbd_server_handshake(sv[0], &e, err, sizeof err);
	if (rc < 0 && !err[0])
		die("a refused handshake without a reason");
	while (rc == 0) {
		err[0] = 0;
		rc = lend_nbd_serve_one(sv[0], &e, &b, buf, sizeof buf, &st,
		                        err, sizeof err);
		if (rc < 0 && !err[0])
			die("a dropped connection without a reason");
	}
	close(sv[0]); /* ends the drain, and the feed if it still writes */
	pthread_join(tf, NULL);
	pthread_join(td, NULL);
	close(sv[1]);
	close(peer_r);
	free(in);
	return 0;
}
