/* http1.c — HTTP/1.1 over one keep-alive socket, plain or TLS; see http1.h.
 *
 * This file is HTTP's framing: the request written, the status line and
 * headers parsed, the body decoded. The socket, TLS and deadlines are
 * http1_io.c: its socket is non-blocking and every wait is a poll with the
 * time left to a deadline, so no call can hang past its timeout. The
 * answer is read into one buffer (HTTP1_MAX_HEAD) and the body decoded by
 * a small state machine (length, chunked, until close) that consumes what
 * is buffered and can stop anywhere: the same decoder serves the whole-
 * answer call and the streaming read, which returns between packets.
 */
#include "node-agent/http1.h"
#include "common/clock.h"
#include "node-agent/http1_io.h"

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
			int r = http1_io_fill(c, deadline, err, errlen);
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
		if (reused && (c->bs != B_DONE || !http1_io_still_open(c))) {
			http1_close(c);
			reused = 0;
		}
		if (!reused && (rc = http1_io_connect(c, err, errlen)) < 0)
			break;
		c->bs = B_NONE;
		c->pos = c->len = 0;
		int64_t deadline =
		    clock_mono_ms() +
		    (req->timeout_ms > 0 ? req->timeout_ms : HTTP1_TIMEOUT_MS);
		rc = http1_io_write(c, head, (size_t)n + req->body_len,
		                    deadline, err, errlen);
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
	int64_t deadline =
	    clock_mono_ms() +
	    (req->timeout_ms > 0 ? req->timeout_ms : HTTP1_TIMEOUT_MS);

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
		int f = http1_io_fill(c, deadline, err, errlen);
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
	int64_t deadline = clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);

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
		if (round > 0 && clock_mono_ms() >= deadline)
			return 0;
		/* Wait for the socket only when libssl holds nothing. */
		if (!(c->ssl && SSL_pending(c->ssl) > 0)) {
			struct pollfd p = {c->fd, POLLIN, 0};
			int64_t left = deadline - clock_mono_ms();
			int n = poll(&p, 1, left > 0 ? (int)left : 0);
			if (n == 0)
				return 0;
			if (n < 0 && errno == EINTR)
				continue;
		}
		/* Readable: a short deadline, since a TLS record may take a
		 * second packet; a close shows as EOF at once. */
		int64_t rd = clock_mono_ms() + 1000;
		int f = http1_io_fill(c, rd > deadline ? rd : deadline, err,
		                      errlen);
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
