/* lend_conn.c — TCP and TLS byte streams for the lend protocol. */
#include "node-agent/lend/lend_conn.h"

#include "common/err.h"
#include "common/tlserr.h"
#include "node-agent/lend/lend_iov.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Why an OpenSSL call failed (common/tlserr.h), after what was done and,
 * where there is one, the file it read. */
static void tls_err_file(char *err, size_t errlen, const char *what,
                         const char *file)
{
	char why[160];
	tlserr_reason(why, sizeof why, "no detail");
	err_set(err, errlen, "%s%s%s: %s", what, file ? " " : "",
	        file ? file : "", why);
}

static void tls_err(char *err, size_t errlen, const char *what)
{
	tls_err_file(err, errlen, what, NULL);
}

static int resolve(const char *host, int port, int passive,
                   struct addrinfo **res, char *err, size_t errlen)
{
	char ps[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = passive ? AI_PASSIVE : 0};
	snprintf(ps, sizeof ps, "%d", port);
	int rc = getaddrinfo(host, ps, &hints, res);
	if (rc != 0) {
		snprintf(err, errlen, "could not resolve %s: %s", host,
		         gai_strerror(rc));
		return -1;
	}
	return 0;
}

int lend_tcp_listen(const char *host, int port, int *bound, char *err,
                    size_t errlen)
{
	struct addrinfo *res = NULL;
	int fd = -1, one = 1;
	if (resolve(host, port, 1, &res, err, errlen) < 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 8) < 0)
		goto fail;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	if (bound)
		*bound = ntohs(ss.ss_family == AF_INET6
		                   ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                   : ((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(res);
	return fd;
fail:
	snprintf(err, errlen, "could not listen on %s:%d: %s", host, port,
	         strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return -1;
}

int lend_tcp_connect(const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo *res = NULL;
	int fd = -1, one = 1;
	if (resolve(host, port, 0, &res, err, errlen) < 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		snprintf(err, errlen,
		         "could not connect to the lender at %s:%d: %s", host,
		         port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	freeaddrinfo(res);
	return fd;
}

SSL_CTX *lend_tls_server_ctx(const char *cert_file, const char *key_file,
                             char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		tls_err(err, errlen, "could not create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		tls_err_file(err, errlen, "could not load the TLS certificate",
		             cert_file);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tls_err_file(err, errlen,
		             "could not load the TLS key (or it does not match "
		             "the certificate)",
		             key_file);
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *lend_tls_client_ctx(const char *ca_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		tls_err(err, errlen, "could not create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
		tls_err_file(err, errlen, "could not load the TLS CA file",
		             ca_file);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

void lend_tls_ctx_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

void lend_conn_set_timeout(struct lend_conn *c, int timeout_ms)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
	                     .tv_usec = (timeout_ms % 1000) * 1000};
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int lend_conn_open(struct lend_conn *c, int fd, SSL_CTX *ctx, int is_server,
                   int timeout_ms)
{
	memset(c, 0, sizeof *c);
	c->fd = fd;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	lend_conn_set_timeout(c, timeout_ms);
	if (!ctx)
		return 0;
	c->ssl = SSL_new(ctx);
	c->tls_buf = malloc(LEND_CONN_TLS_BATCH);
	if (!c->ssl || !c->tls_buf || SSL_set_fd(c->ssl, fd) != 1) {
		tls_err(c->err, sizeof c->err, "could not start TLS");
		goto fail;
	}
	int rc = is_server ? SSL_accept(c->ssl) : SSL_connect(c->ssl);
	if (rc != 1) {
		tls_err(c->err, sizeof c->err, "TLS handshake failed");
		goto fail;
	}
	if (SSL_export_keying_material(c->ssl, c->bind, sizeof c->bind,
	                               LEND_TLS_LABEL, strlen(LEND_TLS_LABEL),
	                               NULL, 0, 0) != 1) {
		tls_err(c->err, sizeof c->err,
		        "could not export the TLS channel binding");
		goto fail;
	}
	c->binding = 1;
	return 0;
fail:
	if (c->ssl)
		SSL_free(c->ssl);
	c->ssl = NULL;
	free(c->tls_buf);
	c->tls_buf = NULL;
	close(fd);
	c->fd = -1;
	return -1;
}

int lend_conn_read(struct lend_conn *c, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r;
		if (c->ssl) {
			size_t got = 0;
			if (SSL_read_ex(c->ssl, p, n, &got) != 1) {
				int e = SSL_get_error(c->ssl, 0);
				snprintf(c->err, sizeof c->err, "%s",
				         e == SSL_ERROR_ZERO_RETURN
				             ? "the peer closed the connection"
				             : "TLS read failed");
				ERR_clear_error();
				return -1;
			}
			r = (ssize_t)got;
		} else {
			r = recv(c->fd, p, n, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				snprintf(c->err, sizeof c->err, "%s",
				         r == 0
				             ? "the peer closed the connection"
				             : strerror(errno));
				return -1;
			}
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int lend_conn_write(struct lend_conn *c, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t w;
		if (c->ssl) {
			size_t put = 0;
			if (SSL_write_ex(c->ssl, p, n, &put) != 1) {
				snprintf(c->err, sizeof c->err,
				         "TLS write failed");
				ERR_clear_error();
				return -1;
			}
			w = (ssize_t)put;
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				snprintf(c->err, sizeof c->err, "%s",
				         strerror(errno));
				return -1;
			}
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int lend_conn_set_nonblock(struct lend_conn *c, int on)
{
	int fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 ||
	    fcntl(c->fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0) {
		snprintf(c->err, sizeof c->err, "fcntl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

ssize_t lend_conn_read_some(struct lend_conn *c, void *buf, size_t n)
{
	if (c->ssl) {
		size_t got = 0;
		if (SSL_read_ex(c->ssl, buf, n, &got) == 1)
			return (ssize_t)got;
		int e = SSL_get_error(c->ssl, 0);
		ERR_clear_error();
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return 0;
		snprintf(c->err, sizeof c->err, "%s",
		         e == SSL_ERROR_ZERO_RETURN
		             ? "the peer closed the connection"
		             : "TLS read failed");
		return -1;
	}
	for (;;) {
		ssize_t r = recv(c->fd, buf, n, 0);
		if (r > 0)
			return r;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		snprintf(c->err, sizeof c->err, "%s",
		         r == 0 ? "the peer closed the connection"
		                : strerror(errno));
		return -1;
	}
}

/*
 * OpenSSL has no writev. A buffer of a record or more is written as it
 * is; smaller ones are gathered, up to a record, into tls_buf and written
 * with one SSL_write: a batch of 32-byte request headers, or of headers
 * and 4 KiB pages, becomes one record and one send instead of one of each
 * per buffer. A write that would block keeps what it gathered (OpenSSL
 * wants the retry to pass the same buffer); the caller's retry brings the
 * same bytes in front, which are then not gathered again.
 */
static ssize_t tls_writev_some(struct lend_conn *c, const struct iovec *iov,
                               int iovcnt)
{
	const void *p;
	size_t n, put = 0;
	while (iovcnt > 0 && iov->iov_len == 0)
		iov++, iovcnt--;
	if (c->tls_len > 0) {
		p = c->tls_buf; /* a retry: the same bytes as last time */
		n = c->tls_len;
	} else if (iovcnt == 0) {
		return 0;
	} else if (iov->iov_len >= LEND_CONN_TLS_BATCH) {
		p = iov->iov_base;
		n = iov->iov_len;
	} else {
		for (n = 0; iovcnt > 0 && n < LEND_CONN_TLS_BATCH;
		     iov++, iovcnt--) {
			size_t k = iov->iov_len < LEND_CONN_TLS_BATCH - n
			               ? iov->iov_len
			               : LEND_CONN_TLS_BATCH - n;
			memcpy(c->tls_buf + n, iov->iov_base, k);
			n += k;
		}
		p = c->tls_buf;
	}
	if (SSL_write_ex(c->ssl, p, n, &put) == 1) {
		c->tls_len = 0;
		return (ssize_t)put;
	}
	int e = SSL_get_error(c->ssl, 0);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		if (p == c->tls_buf)
			c->tls_len = n;
		return 0;
	}
	c->tls_len = 0;
	snprintf(c->err, sizeof c->err, "TLS write failed");
	return -1;
}

ssize_t lend_conn_writev_some(struct lend_conn *c, const struct iovec *iov,
                              int iovcnt)
{
	if (c->ssl)
		return tls_writev_some(c, iov, iovcnt);
	struct msghdr m = {.msg_iov = (struct iovec *)iov,
	                   .msg_iovlen = (size_t)(iovcnt < IOV_MAX ? iovcnt
	                                                           : IOV_MAX)};
	for (;;) {
		ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (w >= 0)
			return w;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		snprintf(c->err, sizeof c->err, "%s", strerror(errno));
		return -1;
	}
}

int lend_conn_writev(struct lend_conn *c, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		if (iov->iov_len == 0) {
			iov++, iovcnt--;
			continue;
		}
		ssize_t w = lend_conn_writev_some(c, iov, iovcnt);
		if (w < 0)
			return -1;
		if (w == 0) {
			/* a blocking socket does not say EAGAIN unless its
			 * SO_SNDTIMEO passed */
			snprintf(c->err, sizeof c->err, "write timed out");
			return -1;
		}
		lend_iov_advance(&iov, &iovcnt, (size_t)w);
	}
	return 0;
}

int lend_conn_pending(const struct lend_conn *c)
{
	return c->ssl ? SSL_pending(c->ssl) : 0;
}

void lend_conn_close(struct lend_conn *c)
{
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	free(c->tls_buf);
	c->tls_buf = NULL;
	c->tls_len = 0;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

const uint8_t *lend_conn_binding(const struct lend_conn *c)
{
	return c->binding ? c->bind : NULL;
}
