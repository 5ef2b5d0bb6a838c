/*
 * lend_conn.h — one byte stream between two agents: TCP, or TLS over TCP.
 *
 * Owns the socket and, when TLS is configured, the OpenSSL session on it;
 * the lend protocol (lend_proto) is written and read through it whole
 * frames at a time. Also the few socket helpers both sides need (listen on
 * and connect to host:port) and the TLS contexts: a server one from a
 * certificate and key, a client one that verifies the lender's certificate
 * against a CA file. Blocking I/O; callers poll the fd, and must check
 * lend_conn_pending first because TLS may hold decrypted bytes already.
 */
#ifndef RAMEX_LEND_CONN_H
#define RAMEX_LEND_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "node-agent/lend/lend_proto.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

#define LEND_CONN_TLS_BATCH (16u << 10) /* one TLS record's plaintext */

struct lend_conn {
	int fd;
	SSL *ssl;    /* NULL for plain TCP */
	/* TLS: small buffers gathered into one SSL_write (one record, one
	 * send) instead of one each; tls_len bytes of it wait for a retry
	 * after a write that would block (the same buffer, as OpenSSL
	 * wants) */
	uint8_t *tls_buf;
	size_t tls_len;
	int binding; /* 1 when bind[] holds the TLS exporter output */
	uint8_t bind[LEND_BINDING_LEN];
	char err[200]; /* why the last call failed */
};

/* Listens on host:port (port 0 = any free one); *bound gets the port.
 * Returns the fd, or -1 with err set. */
int lend_tcp_listen(const char *host, int port, int *bound, char *err,
                    size_t errlen);
/* Connects to host:port with TCP_NODELAY. Returns the fd or -1. */
int lend_tcp_connect(const char *host, int port, char *err, size_t errlen);

/* A server context from PEM files, or a client one that trusts ca_file.
 * Return NULL with err set. */
SSL_CTX *lend_tls_server_ctx(const char *cert_file, const char *key_file,
                             char *err, size_t errlen);
SSL_CTX *lend_tls_client_ctx(const char *ca_file, char *err, size_t errlen);
void lend_tls_ctx_free(SSL_CTX *ctx);

/*
 * Takes ownership of fd. With a ctx, runs the TLS handshake (as server or
 * client) and exports the channel binding. timeout_ms bounds the handshake
 * and every later read/write that stalls (0 = none). Returns 0, or -1 with
 * c->err set (the fd is then closed).
 */
int lend_conn_open(struct lend_conn *c, int fd, SSL_CTX *ctx, int is_server,
                   int timeout_ms);
/* Exactly n bytes. Return 0, or -1 on error or end of stream (c->err). */
int lend_conn_read(struct lend_conn *c, void *buf, size_t n);
int lend_conn_write(struct lend_conn *c, const void *buf, size_t n);
/*
 * Non-blocking use, for a connection with many requests in flight (a peer
 * that both sends and receives must never block on one direction while
 * the other fills up). After lend_conn_set_nonblock(c, 1), only these move
 * bytes: each moves what it can now and returns the bytes moved, 0 when it
 * would block, or -1 on an error or the end of the stream (c->err). A
 * write that returned 0 must be repeated with the same bytes in front
 * (TLS keeps them gathered). Under TLS, buffers smaller than a record
 * (LEND_CONN_TLS_BATCH) go out together, one record per call, not one
 * SSL_write (a record and a send) each.
 */
int lend_conn_set_nonblock(struct lend_conn *c, int on);
ssize_t lend_conn_read_some(struct lend_conn *c, void *buf, size_t n);
ssize_t lend_conn_writev_some(struct lend_conn *c, const struct iovec *iov,
                              int iovcnt);
/* Blocking writev of everything (the socket is blocking). Returns 0 or -1. */
int lend_conn_writev(struct lend_conn *c, struct iovec *iov, int iovcnt);
/* Bytes already decrypted and waiting (TLS); 0 for plain TCP. */
int lend_conn_pending(const struct lend_conn *c);
/* Changes the stall timeout after the handshake (0 = none). */
void lend_conn_set_timeout(struct lend_conn *c, int timeout_ms);
/* Closes (TLS close_notify first) and resets c to fd -1. */
void lend_conn_close(struct lend_conn *c);

/* The binding for lend_mac: the exporter output, or NULL in plain TCP. */
const uint8_t *lend_conn_binding(const struct lend_conn *c);

#endif
