/*
 * fuzz_peer.h — the far end of a socket pair for the fuzz targets that
 * drive a server with the input (fuzz_nbd, fuzz_bridge): one thread feeds
 * the input and then closes its writing side, another drains whatever the
 * server answers, so that neither direction can fill up and stall the
 * server. Header-only test code; owns nothing.
 */
#ifndef RAMEX_FUZZ_PEER_H
#define RAMEX_FUZZ_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node-agent/lend/lend_nbd.h" /* lend_nbd_write_full */

struct fuzz_feed {
	int fd;
	const uint8_t *d;
	size_t n;
};

/* Writes the input (until the server hangs up), then ends the stream. */
static inline void *fuzz_feed_main(void *arg)
{
	struct fuzz_feed *f = arg;
	(void)lend_nbd_write_full(f->fd, f->d, f->n);
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

/* Reads and drops everything until the end of the stream; arg: the fd. */
static inline void *fuzz_drain_main(void *arg)
{
	int fd = *(int *)arg;
	static __thread char b[65536];
	while (read(fd, b, sizeof b) > 0)
		;
	return NULL;
}

#endif
