/* http1.c — HTTP/1.1 over one keep-alive socket, plain or TLS; see http1.h.
 *
 * The socket is non-blocking from the start and every wait is a poll with
 * the time left to a deadline, so no call can hang past its timeout. The
 * answer is read into one buffer (HTTP1_MAX_HEAD) and the body decoded by
 * a small state machine (length, chunked, until close) that consumes what
 * is buffered and can stop anywhere: the same decoder serves the whole-
 * answer call and the streaming read, which returns between packets.
 */
#include "node-agent/http1.h"

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

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The last OpenSSL error as text, or `dflt`. */
static const char *ssl_reason(char *buf, size_t len, const char *dflt)
{
	unsigned long e = ERR_get_error(), next;
	if (!e) {
		snprintf(buf, len, "%s", dflt);
		return buf;
	}
	while ((next = ERR_get_error()))
		e = next; /* the last one is the most specific here */
	ERR_error_string_n(e, buf, len);
	return buf;
}

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
			         ssl_reason(why, sizeof why, "out of memory"));
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
				    ssl_reason(why, sizeof why, "unreadable"));
				goto fail;
			}
		} else if (SSL_CTX_set_default_verify_paths(c->ctx) != 1) {
			snprintf(err, errlen,
			         "could not load the system's CA certificates "
			         "(set ca_file): %s",
			         ssl_reason(why, sizeof why, "unknown error"));
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
		int64_t left = deadline - now_ms();
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
		         ssl_reason(why, sizeof why, "out of memory"));
		return IO_ERR;
	}
	/* The name (or address) the certificate must carry; SNI only for
	 * names, as RFC 6066 wants. */
	if (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
	                                       c->host) != 1
	       : (SSL_set_tlsext_host_name(c->ssl, c->host) != 1 ||
	          SSL_set1_host(c->ssl, c->host) != 1)) {
		snprintf(err, errlen, "could not set up TLS for %s: %s",
		         c->host, ssl_reason(why, sizeof why, "bad host"));
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
			         ssl_reason(why, sizeof why,
			                    e == SSL_ERROR_SYSCALL && errno
			                        ? strerror(errno)
			                        : "connection closed"));
		return IO_ERR;
	}
}

static int do_connect(struct http1_conn *c, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL, *ai;
	int64_t deadline = now_ms() + c->connect_timeout_ms;
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
static int still_open(struct http1_conn *c)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	if (c->pos < c->len || (c->ssl && SSL_pending(c->ssl) > 0))
		return 0;
	return poll(&p, 1, 0) == 0;
}

static int write_all(struct http1_conn *c, const char *p, size_t n,
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
				    ssl_reason(why, sizeof why,
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
static int fill(struct http1_conn *c, int64_t deadline, char *err,
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
			         ssl_reason(why, sizeof why, "TLS error"));
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

/* One line of the chunked framing (CR stripped). */
static int chunk_line(struct http1_conn *c, char *err, size_t errlen)
{
	char *l = c->line;
	if (c->line_len && l[c->line_len - 1] == '\r')
		c->line_len--;
	l[c->line_len] = 0;
	c->line_len = 0;
	switch (c->bs) {
	case B_CSIZE: {
		int64_t v = 0;
		size_t i = 0;
		for (; l[i] && strchr("0123456789abcdefABCDEF", l[i]); i++) {
			if (v > (INT64_MAX >> 4))
				goto bad;
			int d = l[i] <= '9'   ? l[i] - '0'
			        : l[i] <= 'F' ? l[i] - 'A' + 10
			                      : l[i] - 'a' + 10;
			v = v * 16 + d;
		}
		if (i == 0 ||
		    (l[i] && l[i] != ';' && l[i] != ' ' && l[i] != '\t'))
			goto bad;
		c->left = v;
		c->bs = v ? B_CDATA : B_TRAIL;
		return 0;
	}
	case B_CCRLF:
		if (l[0])
			goto bad;
		c->bs = B_CSIZE;
		return 0;
	case B_TRAIL:
		if (!l[0])
			c->bs = B_DONE;
		return 0; /* trailer fields are not used */
	default:
		goto bad;
	}
bad:
	snprintf(err, errlen, "%s sent a malformed chunked body", c->authority);
	return IO_ERR;
}

/* Decodes what is buffered, handing body bytes to `fn`. Returns the body
 * bytes handed over, IO_ERR (err set), or -4 when `fn` asked to stop. */
#define DECODE_STOP (-4)
static int64_t decode(struct http1_conn *c, http1_chunk_fn fn, void *ctx,
                      char *err, size_t errlen)
{
	int64_t out = 0;

	while (c->bs != B_DONE &&
	       (c->pos < c->len || (c->bs == B_LEN && c->left == 0))) {
		char *p = c->buf + c->pos;
		size_t avail = c->len - c->pos;
		switch (c->bs) {
		case B_LEN:
		case B_CDATA:
		case B_EOF: {
			size_t n = avail;
			if (c->bs != B_EOF && (int64_t)n > c->left)
				n = (size_t)c->left;
			if (n && fn(ctx, p, n))
				return DECODE_STOP;
			c->pos += n;
			out += (int64_t)n;
			if (c->bs != B_EOF && (c->left -= (int64_t)n) == 0)
				c->bs = c->bs == B_LEN ? B_DONE : B_CCRLF;
			break;
		}
		case B_CSIZE:
		case B_CCRLF:
		case B_TRAIL: {
			char *nl = memchr(p, '\n', avail);
			size_t n = nl ? (size_t)(nl - p) : avail;
			if (c->line_len + n >= sizeof c->line) {
				snprintf(err, errlen,
				         "%s sent a chunk line over %d bytes",
				         c->authority, HTTP1_LINE_MAX);
				return IO_ERR;
			}
			memcpy(c->line + c->line_len, p, n);
			c->line_len += n;
			c->pos += n + (nl != NULL);
			if (nl && chunk_line(c, err, errlen) < 0)
				return IO_ERR;
			break;
		}
		default:
			snprintf(err, errlen, "no answer is being read");
			return IO_ERR;
		}
	}
	return out;
}

/* Does the comma-separated header value `v` hold `token`? */
static int has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);
	while (*v) {
		v += strspn(v, " \t,");
		size_t n = strcspn(v, ",");
		size_t m = n;
		while (m > 0 && (v[m - 1] == ' ' || v[m - 1] == '\t'))
			m--;
		if (m == tl && !strncasecmp(v, token, tl))
			return 1;
		v += n;
	}
	return 0;
}

/* Reads the status line and headers (skipping 1xx answers) and sets up
 * the body decoder. `reused`: a close before any byte means the
 * server had dropped the idle connection (IO_STALE). */
static int read_head(struct http1_conn *c, const char *method, int64_t deadline,
                     int reused, int *status, char *err, size_t errlen)
{
	for (;;) {
		char *start, *end;
		size_t hl;
		for (;;) {
			start = c->buf + c->pos;
			end = memmem(start, c->len - c->pos, "\r\n\r\n", 4);
			if (end) {
				hl = (size_t)(end - start) + 4;
				break;
			}
			size_t had = c->len - c->pos;
			int r = fill(c, deadline, err, errlen);
			if (r == IO_EOF && reused && had == 0)
				return IO_STALE;
			if (r == IO_EOF) {
				snprintf(err, errlen,
				         "%s closed the connection before "
				         "answering",
				         c->authority);
				return IO_ERR;
			}
			if (r < 0)
				return r;
		}
		/* Parse in place: the block ends at its first CR of CRLFCRLF
		 * and each line at its CR. */
		start[hl - 4] = 0;
		char *line = start, *next = strstr(line, "\r\n");
		if (next)
			*next = 0;
		int minor, code;
		char sp;
		if (sscanf(line, "HTTP/1.%1d %3d%c", &minor, &code, &sp) < 2 ||
		    code < 100 || code > 599) {
			snprintf(err, errlen,
			         "%s did not answer in HTTP/1.x (is it the "
			         "exchange, and is the url's scheme right?)",
			         c->authority);
			return IO_ERR;
		}
		int64_t clen = -1;
		int chunked = 0, close_ = minor == 0;
		while (next) {
			line = next + 2;
			if ((next = strstr(line, "\r\n")))
				*next = 0;
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = 0;
			char *v = colon + 1;
			v += strspn(v, " \t");
			if (!strcasecmp(line, "content-length")) {
				char *e;
				errno = 0;
				long long len = strtoll(v, &e, 10);
				if (errno || e == v || len < 0 ||
				    (*e && *e != ' ' && *e != '\t')) {
					snprintf(err, errlen,
					         "%s sent a bad Content-Length",
					         c->authority);
					return IO_ERR;
				}
				clen = len;
			} else if (!strcasecmp(line, "transfer-encoding")) {
				chunked = has_token(v, "chunked");
			} else if (!strcasecmp(line, "connection")) {
				if (has_token(v, "close"))
					close_ = 1;
				else if (has_token(v, "keep-alive"))
					close_ = 0;
			}
		}
		c->pos += hl;
		if (code < 200)
			continue; /* 100 Continue and the like: not the answer
			           */
		*status = code;
		c->keep_alive = !close_;
		c->line_len = 0;
		if (!strcmp(method, "HEAD") || code == 204 || code == 304) {
			c->bs = B_DONE;
		} else if (chunked) {
			c->bs = B_CSIZE;
		} else if (clen >= 0) {
			c->bs = B_LEN;
			c->left = clen;
		} else {
			c->bs = B_EOF;
			c->keep_alive = 0;
		}
		return 0;
	}
}

static int valid_header(const char *h)
{
	return h[strcspn(h, "\r\n")] == 0 && strchr(h, ':') != NULL;
}

/* Opens a connection if needed and sends `req`, then reads the answer's
 * headers; once more on a fresh connection when a reused one turns out
 * to be closed. */
static int send_and_head(struct http1_conn *c, const struct http1_request *req,
                         int *status, char *err, size_t errlen)
{
	size_t cap = strlen(req->method) + strlen(c->prefix) +
	             strlen(req->path) + strlen(c->authority) + 128;
	int rc = IO_ERR;
	char *head = NULL;

	if (!req->path || req->path[0] != '/' ||
	    req->path[strcspn(req->path, " \r\n")]) {
		snprintf(err, errlen,
		         "bad request path (want '/' and no spaces)");
		return IO_ERR;
	}
	for (int i = 0; req->headers && req->headers[i]; i++) {
		if (!valid_header(req->headers[i])) {
			snprintf(err, errlen,
			         "bad request header (want one 'Name: value' "
			         "line)");
			return IO_ERR;
		}
		cap += strlen(req->headers[i]) + 2;
	}
	if (!(head = malloc(cap + req->body_len))) {
		snprintf(err, errlen, "out of memory");
		return IO_ERR;
	}
	int n = snprintf(head, cap, "%s %s%s HTTP/1.1\r\nHost: %s\r\n",
	                 req->method, c->prefix, req->path, c->authority);
	if (req->body || strcmp(req->method, "GET"))
		n += snprintf(head + n, cap - (size_t)n,
		              "Content-Length: %zu\r\n", req->body_len);
	for (int i = 0; req->headers && req->headers[i]; i++)
		n += snprintf(head + n, cap - (size_t)n, "%s\r\n",
		              req->headers[i]);
	n += snprintf(head + n, cap - (size_t)n, "\r\n");
	if (req->body_len)
		memcpy(head + n, req->body, req->body_len);

	for (int attempt = 0; attempt < 2; attempt++) {
		int reused = c->fd >= 0;
		if (reused && (c->bs != B_DONE || !still_open(c))) {
			http1_close(c);
			reused = 0;
		}
		if (!reused && (rc = do_connect(c, err, errlen)) < 0)
			break;
		c->bs = B_NONE;
		c->pos = c->len = 0;
		int64_t deadline =
		    now_ms() +
		    (req->timeout_ms > 0 ? req->timeout_ms : HTTP1_TIMEOUT_MS);
		rc = write_all(c, head, (size_t)n + req->body_len, deadline,
		               err, errlen);
		if (rc == 0)
			rc = read_head(c, req->method, deadline, reused, status,
			               err, errlen);
		if (rc == 0)
			break;
		http1_close(c);
		if (rc == IO_STALE && reused)
			continue; /* the server had closed it: once more */
		if (rc == IO_STALE)
			rc = IO_ERR;
		break;
	}
	free(head);
	return rc < 0 ? IO_ERR : 0;
}

struct collect {
	char *p;
	size_t n, cap, max;
	int oom;
};

static int collect_fn(void *ctx, const char *data, size_t len)
{
	struct collect *b = ctx;
	if (b->n + len > b->max)
		return 1;
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return 1;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
	b->p[b->n] = 0;
	return 0;
}

int http1_request(struct http1_conn *c, const struct http1_request *req,
                  struct http1_response *r, char *err, size_t errlen)
{
	struct collect b = {.max =
	                        req->max_body ? req->max_body : HTTP1_MAX_BODY};
	int64_t deadline = now_ms() + (req->timeout_ms > 0 ? req->timeout_ms
	                                                   : HTTP1_TIMEOUT_MS);

	memset(r, 0, sizeof *r);
	if (send_and_head(c, req, &r->status, err, errlen) < 0)
		return -1;
	for (;;) {
		int64_t d = decode(c, collect_fn, &b, err, errlen);
		if (d == DECODE_STOP) {
			if (b.oom)
				snprintf(
				    err, errlen,
				    "out of memory reading the answer of %s",
				    c->authority);
			else
				snprintf(err, errlen,
				         "the answer of %s is larger than %zu "
				         "bytes",
				         c->authority, b.max);
			goto fail;
		}
		if (d < 0)
			goto fail;
		if (c->bs == B_DONE)
			break;
		int f = fill(c, deadline, err, errlen);
		if (f == IO_EOF && c->bs == B_EOF) {
			c->bs = B_DONE;
			break;
		}
		if (f == IO_EOF) {
			snprintf(err, errlen,
			         "%s closed the connection in the middle of "
			         "its answer",
			         c->authority);
			goto fail;
		}
		if (f < 0)
			goto fail;
	}
	/* Bytes past the answer were never asked for: do not trust the
	 * connection with the next request. */
	if (!c->keep_alive || c->pos < c->len)
		http1_close(c);
	r->body = b.p;
	r->body_len = b.n;
	return 0;
fail:
	http1_close(c);
	free(b.p);
	r->status = 0;
	return -1;
}

void http1_response_clear(struct http1_response *r)
{
	free(r->body);
	memset(r, 0, sizeof *r);
}

int http1_stream_open(struct http1_conn *c, const struct http1_request *req,
                      int *status, char *err, size_t errlen)
{
	/* A stream is never sent twice on a stale connection: start from
	 * a fresh one, which is what a long-lived stream wants anyway. */
	http1_close(c);
	return send_and_head(c, req, status, err, errlen);
}

int http1_stream_read(struct http1_conn *c, http1_chunk_fn fn, void *ctx,
                      int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);

	if (c->fd < 0 || c->bs == B_NONE) {
		snprintf(err, errlen, "no stream is open");
		return -1;
	}
	for (int round = 0;; round++) {
		int64_t d = decode(c, fn, ctx, err, errlen);
		if (d == DECODE_STOP) {
			snprintf(err, errlen, "the reader stopped the stream");
			goto fail;
		}
		if (d < 0)
			goto fail;
		if (c->bs == B_DONE) {
			snprintf(err, errlen, "%s ended the stream",
			         c->authority);
			goto fail;
		}
		if (d > 0)
			return 1;
		if (round > 0 && now_ms() >= deadline)
			return 0;
		/* Wait for the socket only when libssl holds nothing. */
		if (!(c->ssl && SSL_pending(c->ssl) > 0)) {
			struct pollfd p = {c->fd, POLLIN, 0};
			int64_t left = deadline - now_ms();
			int n = poll(&p, 1, left > 0 ? (int)left : 0);
			if (n == 0)
				return 0;
			if (n < 0 && errno == EINTR)
				continue;
		}
		/* Readable: a short deadline, since a TLS record may take a
		 * second packet; a close shows as EOF at once. */
		int64_t rd = now_ms() + 1000;
		int f = fill(c, rd > deadline ? rd : deadline, err, errlen);
		if (f == IO_EOF) {
			snprintf(err, errlen,
			         c->bs == B_EOF ? "%s ended the stream"
			                        : "%s closed the connection in "
			                          "the middle of the stream",
			         c->authority);
			goto fail;
		}
		if (f == IO_TIMEOUT)
			return 0;
		if (f < 0)
			goto fail;
	}
fail:
	http1_close(c);
	return -1;
}
