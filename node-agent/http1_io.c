/* http1_io.c — the transport under http1.c; see http1_io.h.
 *
 * The socket is non-blocking from the start and every wait is a poll with
 * the time left to a deadline, so no call can hang past its timeout.
 */
#include "node-agent/http1_io.h"

#include "common/clock.h"
#include "common/tlserr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int parse_url(struct http1_conn *c, const char *url, char *err,
                     size_t errlen)
{
	const char *p, *h, *hend, *slash;

	if (!strncmp(url, "http://", 7)) {
		p = url + 7;
		snprintf(c->port, sizeof c->port, "80");
	} else if (!strncmp(url, "https://", 8)) {
		p = url + 8;
		c->tls = 1;
		snprintf(c->port, sizeof c->port, "443");
	} else {
		snprintf(err, errlen,
		         "the exchange url %s must start with http:// or "
		         "https://",
		         url);
		return -1;
	}
	slash = p + strcspn(p, "/?#");
	if (*p == '[') { /* an IPv6 literal */
		h = p + 1;
		hend = memchr(h, ']', (size_t)(slash - h));
		if (!hend) {
			snprintf(err, errlen,
			         "the exchange url %s has a '[' without ']'",
			         url);
			return -1;
		}
		p = hend + 1;
	} else {
		h = p;
		hend = memchr(h, ':', (size_t)(slash - h));
		if (!hend)
			hend = slash;
		p = hend;
	}
	if (hend == h || (size_t)(hend - h) >= sizeof c->host) {
		snprintf(err, errlen, "the exchange url %s has %s host", url,
		         hend == h ? "no" : "too long a");
		return -1;
	}
	memcpy(c->host, h, (size_t)(hend - h));
	c->host[hend - h] = 0;
	if (*p == ':') {
		size_t n = (size_t)(slash - p - 1);
		if (n == 0 || n >= sizeof c->port ||
		    strspn(p + 1, "0123456789") != n || atoi(p + 1) <= 0 ||
		    atoi(p + 1) > 65535) {
			snprintf(err, errlen,
			         "the exchange url %s has a bad port (want "
			         "1 to 65535)",
			         url);
			return -1;
		}
		memcpy(c->port, p + 1, n);
		c->port[n] = 0;
	} else if (p != slash) {
		snprintf(err, errlen,
		         "the exchange url %s has something after the host "
		         "that is not a port",
		         url);
		return -1;
	}
	if (*slash == '?' || *slash == '#') {
		snprintf(err, errlen,
		         "the exchange url %s may have a path but no query or "
		         "fragment",
		         url);
		return -1;
	}
	if (snprintf(c->prefix, sizeof c->prefix, "%s", slash) >=
	    (int)sizeof c->prefix) {
		snprintf(err, errlen, "the exchange url %s has too long a path",
		         url);
		return -1;
	}
	size_t pl = strlen(c->prefix);
	while (pl > 0 && c->prefix[pl - 1] == '/')
		c->prefix[--pl] = 0;
	int v6 = strchr(c->host, ':') != NULL;
	int dflt = !strcmp(c->port, c->tls ? "443" : "80");
	snprintf(c->authority, sizeof c->authority, "%s%s%s%s%s", v6 ? "[" : "",
	         c->host, v6 ? "]" : "", dflt ? "" : ":", dflt ? "" : c->port);
	return 0;
}

int http1_url_check(const char *url, char *err, size_t errlen)
{
	struct http1_conn *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = parse_url(c, url, err, errlen);
	free(c);
	return rc;
}

struct http1_conn *http1_new(const char *url, const char *ca_file,
                             int connect_timeout_ms, char *err, size_t errlen)
{
	struct http1_conn *c = calloc(1, sizeof *c);
	char why[256];
	struct sigaction sa;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->fd = -1;
	c->connect_timeout_ms = connect_timeout_ms > 0
	                            ? connect_timeout_ms
	                            : HTTP1_CONNECT_TIMEOUT_MS;
	if (parse_url(c, url, err, errlen) < 0)
		goto fail;
	/* A write to a socket the server closed must be an error, not the
	 * end of the process; libssl's writes cannot pass MSG_NOSIGNAL. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
	if (c->tls) {
		/* Only https loads libssl's state: over http its pages stay
		 * on disk (the agent's RSS is what this module is for). */
		c->ctx = SSL_CTX_new(TLS_client_method());
		if (!c->ctx) {
			snprintf(err, errlen, "could not set up TLS: %s",
			         tlserr_reason(why, sizeof why, "out of memory"));
			goto fail;
		}
		SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_mode(c->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
		                             SSL_MODE_AUTO_RETRY);
		if (ca_file && ca_file[0]) {
			if (SSL_CTX_load_verify_locations(c->ctx, ca_file,
			                                  NULL) != 1) {
				snprintf(
				    err, errlen,
				    "could not load the CA file %s (want "
				    "PEM certificates): %s",
				    ca_file,
				    tlserr_reason(why, sizeof why, "unreadable"));
				goto fail;
			}
		} else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
			snprintf(err, errlen,
			         "could not load the system's CA certificates "
			         "(set ca_file): %s",
			         tlserr_reason(why, sizeof why, "unknown error"));
			goto fail;
		}
	}
	return c;
fail:
	http1_free(c);
	return NULL;
}

void http1_close(struct http1_conn *c)
{
	if (c->ssl) {
		/* No close_notify exchange: the server may be gone, and the
		 * request framing already tells where answers end. */
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->pos = c->len = 0;
	c->bs = B_NONE;
	c->line_len = 0;
	c->keep_alive = 0;
}

void http1_free(struct http1_conn *c)
{
	if (!c)
		return;
	http1_close(c);
	if (c->ctx)
		SSL_CTX_free(c->ctx);
	free(c);
}

int http1_fd(const struct http1_conn *c)
{
	return c->fd;
}

int http1_buffered(const struct http1_conn *c)
{
	return c->fd >= 0 &&
	       (c->pos < c->len || (c->ssl && SSL_pending(c->ssl) > 0));
}

int64_t http1_connects(const struct http1_conn *c)
{
	return c->connects;
}

const char *http1_authority(const struct http1_conn *c)
{
	return c->authority;
}

/* Waits for `events` on the socket until `deadline`. 1 ready, IO_TIMEOUT,
 * or IO_ERR with err set. */
static int wait_fd(struct http1_conn *c, short events, int64_t deadline,
                   const char *what, char *err, size_t errlen)
{
	for (;;) {
		int64_t left = deadline - clock_mono_ms();
		if (left <= 0) {
			snprintf(err, errlen, "%s %s timed out", what,
			         c->authority);
			return IO_TIMEOUT;
		}
		struct pollfd p = {c->fd, events, 0};
		int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, "%s %s failed: poll: %s", what,
			         c->authority, strerror(errno));
			return IO_ERR;
		}
	}
}

static int tls_handshake(struct http1_conn *c, int64_t deadline, char *err,
                         size_t errlen)
{
	char why[256];
	struct in6_addr a6;
	struct in_addr a4;
	int ip = inet_pton(AF_INET, c->host, &a4) == 1 ||
	         inet_pton(AF_INET6, c->host, &a6) == 1;

	ERR_clear_error();
	if (!(c->ssl = SSL_new(c->ctx)) || SSL_set_fd(c->ssl, c->fd) != 1) {
		snprintf(err, errlen, "could not set up TLS: %s",
		         tlserr_reason(why, sizeof why, "out of memory"));
		return IO_ERR;
	}
	/* The name (or address) the certificate must carry; SNI only for
	 * names, as RFC 6066 wants. */
	if (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
	                                       c->host) != 1
	       : (SSL_set_tlsext_host_name(c->ssl, c->host) != 1 ||
	          SSL_set1_host(c->ssl, c->host) != 1)) {
		snprintf(err, errlen, "could not set up TLS for %s: %s",
		         c->host, tlserr_reason(why, sizeof why, "bad host"));
		return IO_ERR;
	}
	for (;;) {
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		int e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			int w = wait_fd(
			    c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
			    deadline, "the TLS handshake with", err, errlen);
			if (w < 0)
				return w;
			continue;
		}
		long v = SSL_get_verify_result(c->ssl);
		if (v != X509_V_OK)
			snprintf(
			    err, errlen,
			    "the certificate of %s is not accepted: %s "
			    "(check the url's host name, or set ca_file to "
			    "the CA that signed it)",
			    c->authority, X509_verify_cert_error_string(v));
		else
			snprintf(err, errlen,
			         "the TLS handshake with %s failed (is it an "
			         "https server?): %s",
			         c->authority,
			         tlserr_reason(why, sizeof why,
			                    e == SSL_ERROR_SYSCALL && errno
			                        ? strerror(errno)
			                        : "connection closed"));
		return IO_ERR;
	}
}

int http1_io_connect(struct http1_conn *c, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	int64_t deadline = clock_mono_ms() + c->connect_timeout_ms;
	char last[200] = "no address";
	int rc;

	http1_close(c);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	rc = getaddrinfo(c->host, c->port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "could not resolve %s: %s", c->host,
		         rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return IO_ERR;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family,
		                ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		                ai->ai_protocol);
		if (fd < 0) {
			snprintf(last, sizeof last, "socket: %s",
			         strerror(errno));
			continue;
		}
		c->fd = fd;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			if (errno != EINPROGRESS) {
				snprintf(last, sizeof last, "%s",
				         strerror(errno));
				close(fd);
				c->fd = -1;
				continue;
			}
			char terr[300];
			if (wait_fd(c, POLLOUT, deadline, "connecting to", terr,
			            sizeof terr) < 0) {
				snprintf(last, sizeof last,
				         "no answer within %d ms",
				         c->connect_timeout_ms);
				close(fd);
				c->fd = -1;
				break; /* the time for every address is up */
			}
			int so = 0;
			socklen_t sl = sizeof so;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) <
			        0 ||
			    so != 0) {
				snprintf(last, sizeof last, "%s",
				         strerror(so ? so : errno));
				close(fd);
				c->fd = -1;
				continue;
			}
		}
		break;
	}
	freeaddrinfo(res);
	if (c->fd < 0) {
		snprintf(err, errlen,
		         "could not connect to %s: %s (is the exchange running "
		         "and the url right?)",
		         c->authority, last);
		return IO_ERR;
	}
	/* A request goes out in one write and waits for its answer:
	 * Nagle's delay would only add latency. */
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (c->tls && (rc = tls_handshake(c, deadline, err, errlen)) < 0) {
		http1_close(c);
		return rc;
	}
	c->connects++;
	return 0;
}

/* A kept-alive connection that the server closed (or that has stray
 * bytes) shows as readable while no answer is due: it cannot be used. */
int http1_io_still_open(struct http1_conn *c)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	if (c->pos < c->len || (c->ssl && SSL_pending(c->ssl) > 0))
		return 0;
	return poll(&p, 1, 0) == 0;
}

int http1_io_write(struct http1_conn *c, const char *p, size_t n,
                   int64_t deadline, char *err, size_t errlen)
{
	while (n > 0) {
		ssize_t w;
		int e;
		if (c->ssl) {
			ERR_clear_error();
			int r = SSL_write(c->ssl, p,
			                  n > INT32_MAX ? INT32_MAX : (int)n);
			if (r > 0) {
				w = r;
			} else {
				e = SSL_get_error(c->ssl, r);
				if (e == SSL_ERROR_WANT_READ ||
				    e == SSL_ERROR_WANT_WRITE) {
					int rc = wait_fd(
					    c,
					    e == SSL_ERROR_WANT_READ ? POLLIN
					                             : POLLOUT,
					    deadline, "sending to", err,
					    errlen);
					if (rc < 0)
						return rc;
					continue;
				}
				char why[256];
				snprintf(
				    err, errlen, "could not send to %s: %s",
				    c->authority,
				    tlserr_reason(why, sizeof why,
				               errno ? strerror(errno)
				                     : "connection closed"));
				return (e == SSL_ERROR_SYSCALL &&
				        (errno == EPIPE || errno == ECONNRESET))
				           ? IO_STALE
				           : IO_ERR;
			}
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					int rc =
					    wait_fd(c, POLLOUT, deadline,
					            "sending to", err, errlen);
					if (rc < 0)
						return rc;
					continue;
				}
				e = errno;
				snprintf(err, errlen,
				         "could not send to %s: %s",
				         c->authority, strerror(e));
				return e == EPIPE || e == ECONNRESET ? IO_STALE
				                                     : IO_ERR;
			}
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads more into the buffer, waiting until `deadline`. Returns the bytes
 * read, IO_EOF, IO_TIMEOUT, or IO_ERR (err set; a reset is IO_EOF with
 * err set, since both mean the server is gone). */
int http1_io_fill(struct http1_conn *c, int64_t deadline, char *err,
                  size_t errlen)
{
	if (c->pos == c->len) {
		c->pos = c->len = 0;
	} else if (c->len == sizeof c->buf && c->pos > 0) {
		memmove(c->buf, c->buf + c->pos, c->len - c->pos);
		c->len -= c->pos;
		c->pos = 0;
	}
	if (c->len == sizeof c->buf) {
		snprintf(err, errlen,
		         "the answer of %s has headers over %d bytes",
		         c->authority, HTTP1_MAX_HEAD);
		return IO_ERR;
	}
	char *p = c->buf + c->len;
	size_t room = sizeof c->buf - c->len;
	for (;;) {
		if (c->ssl) {
			ERR_clear_error();
			int r = SSL_read(c->ssl, p, (int)room);
			if (r > 0) {
				c->len += (size_t)r;
				return r;
			}
			int e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ ||
			    e == SSL_ERROR_WANT_WRITE) {
				int rc = wait_fd(
				    c,
				    e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
				    deadline, "waiting for the answer of", err,
				    errlen);
				if (rc < 0)
					return rc;
				continue;
			}
			if (e == SSL_ERROR_ZERO_RETURN ||
			    e == SSL_ERROR_SYSCALL) {
				snprintf(err, errlen,
				         "%s closed the connection",
				         c->authority);
				return IO_EOF;
			}
			char why[256];
			/* OpenSSL 3 reports a close without close_notify
			 * as SSL_ERROR_SSL; for us it is the same EOF. */
			unsigned long le = ERR_peek_last_error();
			if (ERR_GET_REASON(le) ==
			    SSL_R_UNEXPECTED_EOF_WHILE_READING) {
				ERR_clear_error();
				snprintf(err, errlen,
				         "%s closed the connection",
				         c->authority);
				return IO_EOF;
			}
			snprintf(err, errlen, "could not read from %s: %s",
			         c->authority,
			         tlserr_reason(why, sizeof why, "TLS error"));
			return IO_ERR;
		}
		ssize_t r = recv(c->fd, p, room, 0);
		if (r > 0) {
			c->len += (size_t)r;
			return (int)r;
		}
		if (r == 0 || errno == ECONNRESET) {
			snprintf(err, errlen, "%s closed the connection",
			         c->authority);
			return IO_EOF;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int rc =
			    wait_fd(c, POLLIN, deadline,
			            "waiting for the answer of", err, errlen);
			if (rc < 0)
				return rc;
			continue;
		}
		snprintf(err, errlen, "could not read from %s: %s",
		         c->authority, strerror(errno));
		return IO_ERR;
	}
}
