/*
 * http1_io.h — the transport under http1.c, internal to it: what a
 * connection is (struct http1_conn: the server from the URL, the socket,
 * libssl's state, and the one buffer the answer is read into with the body
 * decoder's state), and the I/O on it: connect (getaddrinfo, a
 * non-blocking connect, the TLS handshake with certificate and host-name
 * checks) within the connect timeout, write all of a request and read
 * more of an answer until a deadline, tell whether a kept-alive socket is
 * still usable. The connection's life (http1_new, http1_close,
 * http1_free and the accessors of http1.h) is here too. Knows nothing of
 * HTTP's framing; http1.c does.
 */
#ifndef RAMEX_HTTP1_IO_H
#define RAMEX_HTTP1_IO_H

#include "node-agent/http1.h"

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_LINE_MAX 256 /* a chunk-size or trailer line */

enum body_state {
	B_NONE,  /* no answer being read */
	B_LEN,   /* Content-Length: `left` bytes to go */
	B_EOF,   /* until the server closes */
	B_CSIZE, /* a chunk-size line */
	B_CDATA, /* `left` bytes of a chunk */
	B_CCRLF, /* the CRLF after a chunk */
	B_TRAIL, /* trailer lines up to the empty one */
	B_DONE,
};

struct http1_conn {
	char host[256]; /* without brackets */
	char port[8];
	char authority[300]; /* for the Host header and messages */
	char prefix[256];    /* path prefix from the URL, no trailing '/' */
	int tls;
	int connect_timeout_ms;
	SSL_CTX *ctx;
	SSL *ssl;
	int fd;
	int keep_alive; /* the current answer allows reuse */
	int64_t connects;
	/* The answer being read. */
	char buf[HTTP1_MAX_HEAD];
	size_t pos, len;
	enum body_state bs;
	int64_t left;
	char line[HTTP1_LINE_MAX];
	size_t line_len;
};

/* Internal results of the I/O helpers. */
#define IO_EOF     0
#define IO_ERR     (-1)
#define IO_TIMEOUT (-2)
#define IO_STALE   (-3) /* reset or EOF on a reused connection, nothing read */

/* Connects c afresh (closing what was open) within its connect timeout;
 * 0, or IO_ERR/IO_TIMEOUT with err set. */
int http1_io_connect(struct http1_conn *c, char *err, size_t errlen);

/* 1 when a kept-alive connection looks usable: nothing buffered or
 * readable while no answer is due (else the server closed it, or sent
 * stray bytes). */
int http1_io_still_open(struct http1_conn *c);

/* Writes all n bytes by deadline; 0, or IO_STALE (the server had closed a
 * reused connection), IO_TIMEOUT or IO_ERR with err set. */
int http1_io_write(struct http1_conn *c, const char *p, size_t n,
                   int64_t deadline, char *err, size_t errlen);

/* Reads more into the buffer, waiting until deadline. Returns the bytes
 * read, IO_EOF, IO_TIMEOUT, or IO_ERR (err set; a reset is IO_EOF with
 * err set, since both mean the server is gone). */
int http1_io_fill(struct http1_conn *c, int64_t deadline, char *err,
                  size_t errlen);

#endif
