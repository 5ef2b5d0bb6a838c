/*
 * http1.h — a small HTTP/1.1 client for the agent: one keep-alive
 * connection to one server (http:// over a plain socket, https:// over
 * OpenSSL's libssl), so that the agent needs neither libcurl nor the ~35
 * libraries it pulls in (each costs resident pages; see docs/agent.md).
 *
 * What it does, and no more: IPv4/IPv6 through getaddrinfo; a connect
 * timeout and a per-request deadline (poll on a non-blocking socket);
 * Content-Length, chunked and read-until-close bodies; a size limit on a
 * body; a reused connection that the server closed meanwhile is noticed
 * and the request sent once more on a fresh one (only when not a byte of
 * an answer came back); a streaming mode that hands the body to a callback
 * as it arrives (the event stream). TLS verifies the certificate chain
 * (the system's CAs, or a CA file) and the host name (or IP address), and
 * refuses anything older than TLS 1.2.
 *
 * Not thread-safe: one connection is used by one thread. A connection in
 * streaming mode serves that one stream until it ends or is closed.
 * Writes use MSG_NOSIGNAL; over TLS, libssl writes with write(2), so the
 * process must ignore SIGPIPE (ramex-agent does; http1_new sets SIG_IGN
 * when SIGPIPE still has its default action).
 */
#ifndef RAMEX_HTTP1_H
#define RAMEX_HTTP1_H

#include <stddef.h>
#include <stdint.h>

#define HTTP1_CONNECT_TIMEOUT_MS 3000
#define HTTP1_TIMEOUT_MS         10000
#define HTTP1_MAX_BODY           (4 << 20)
#define HTTP1_MAX_HEAD           16384 /* the status line and headers */

struct http1_conn;

/* `url` is http://host[:port][/prefix] or https://...; a host may be an
 * IPv6 literal in brackets. `ca_file` (NULL or "": the system's CAs) is
 * only used for https. `connect_timeout_ms` <= 0 means
 * HTTP1_CONNECT_TIMEOUT_MS. Nothing is connected yet. Returns NULL with
 * err set. */
struct http1_conn *http1_new(const char *url, const char *ca_file,
                             int connect_timeout_ms, char *err, size_t errlen);
void http1_free(struct http1_conn *c);
/* Whether `url` is one http1_new takes (the same rules, nothing opened):
 * 0, or -1 with err set. For checking a configuration before starting. */
int http1_url_check(const char *url, char *err, size_t errlen);

struct http1_request {
	const char *method;         /* "GET", "POST", ... */
	const char *path;           /* from '/', appended to the prefix */
	const char *const *headers; /* "Name: value", NULL-terminated */
	const char *body;           /* may be NULL */
	size_t body_len;
	int timeout_ms;  /* <= 0: HTTP1_TIMEOUT_MS, from sending to the end */
	size_t max_body; /* 0: HTTP1_MAX_BODY (ignored when streaming) */
};

struct http1_response {
	int status;
	char *body; /* NUL-terminated, NULL when empty; free with _clear */
	size_t body_len;
};

/* One request and its whole answer. Returns 0 when the server answered
 * (any status, see r->status), -1 with err set when it could not be
 * reached, did not answer in time, answered something that is not
 * HTTP/1.x, or sent a body over the limit. */
int http1_request(struct http1_conn *c, const struct http1_request *req,
                  struct http1_response *r, char *err, size_t errlen);
void http1_response_clear(struct http1_response *r);

/* Streaming: sends `req` and reads the answer's headers (within
 * req->timeout_ms), then leaves the body to http1_stream_read. Returns 0
 * with *status set, or -1 with err set. Whatever the status, the
 * connection now belongs to this answer; http1_close ends it early. */
int http1_stream_open(struct http1_conn *c, const struct http1_request *req,
                      int *status, char *err, size_t errlen);

/* Called with each piece of the body as it arrives (chunk framing
 * removed). Returns 0 to go on, nonzero to stop the read. */
typedef int (*http1_chunk_fn)(void *ctx, const char *data, size_t len);

/* Hands what has arrived of the body to `fn`, waiting at most
 * `timeout_ms` (0: do not wait) for more. Returns 1 when some bytes were
 * handed over, 0 when none came in time, -1 with err set when the body
 * ended (the server finished or closed the stream), the connection broke
 * or `fn` asked to stop; the connection is closed then. */
int http1_stream_read(struct http1_conn *c, http1_chunk_fn fn, void *ctx,
                      int timeout_ms, char *err, size_t errlen);

/* The socket to poll for POLLIN while streaming (-1 when not connected),
 * and whether bytes are already buffered (in this module or in libssl)
 * that such a poll would not show: then read at once. */
int http1_fd(const struct http1_conn *c);
int http1_buffered(const struct http1_conn *c);

/* Drops the connection (the next request opens a new one). */
void http1_close(struct http1_conn *c);

/* How many connections were opened so far (keep-alive shows here). */
int64_t http1_connects(const struct http1_conn *c);

/* "host:port" as given, for messages. */
const char *http1_authority(const struct http1_conn *c);

#endif
