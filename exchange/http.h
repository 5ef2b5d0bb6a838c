/*
 * http.h — ramexd's HTTP edge: the libmicrohttpd server, routing through one
 * route table, authentication and the role check, and the replies.
 *
 * Every request goes the same way: the target is read from the bytes as
 * sent (the URI log callback's copy, never libmicrohttpd's decoding), since
 * they are what a node signs: longer than SIGN_TARGET_MAX is 414, one that
 * does not decode one way (target.h: %00, an encoded '/', a bad escape, a
 * repeated query parameter) is 400; the body is collected up to the limit
 * (larger: 413), the path is matched against the route table (no route: 404,
 * wrong method: 405 with Allow), the caller is authenticated unless the route
 * is public (401), its role is checked against the route's roles (403; deny
 * by default: a route that names no role serves nobody), and only then the
 * handler runs. Every error, ours or a handler's, is RFC 9457 problem+json.
 *
 * A few HTTP threads serve every connection and never block. A handler
 * runs on a worker thread, where it may block (on PostgreSQL), unless its
 * route is marked HTTP_INLINE: then it runs on the HTTP thread and must
 * not block; one that waits for another thread (the order handlers wait
 * for the writer's group commit) parks its request with http_defer, and
 * the connection holds no thread meanwhile. The connection limits (all,
 * and per client address), the idle timeout and the deadline for a
 * request to arrive in full (http_guard.h) keep slow or greedy clients
 * from starving the rest. The
 * module owns the daemon, its workers and each request's state; it does
 * not know what any route does.
 *
 * http depends on auth, never the reverse: to authenticate it hands
 * auth_authenticate a view of the request (struct auth_request: method,
 * target, credential headers, body) and acts on the verdict. The server
 * decides when a caller is checked (before the handler, once, on a
 * worker when the credentials are not cached); auth decides who it is.
 */
#ifndef RAMEX_HTTP_H
#define RAMEX_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct http_req;
struct http_server;
struct auth_principal;

typedef void (*http_handler)(struct http_req *rq);

struct http_route {
	const char *method;  /* "GET", "POST", "DELETE", ... */
	const char *pattern; /* "/v1/orders/{id}": {name} matches one segment */
	http_handler fn;
	unsigned roles; /* AUTH_* bits (auth.h) that may call it */
	const char *summary;
	unsigned flags; /* HTTP_INLINE */
};

/* The query parameters one route reads, as api/openapi.yaml lists them.
 * Any other is refused with 400, so that a misspelt filter
 * ("?acount_id=") is not taken for no filter; a route with no entry takes
 * none. */
struct http_route_query {
	const char *method, *pattern;
	const char *names; /* space-separated; "*": any (the web pages read
	                      theirs in the browser) */
};

/* The handler never blocks (it may defer, see http_defer): it runs on the
 * HTTP thread, saving the hop to a worker. */
#define HTTP_INLINE 0x1u

struct http_opts {
	const char *host;
	int port; /* 0: any free port, see http_port */
	int max_connections;
	int per_address;        /* most connections of one address; 0: any */
	int timeout_s;          /* idle: libmicrohttpd's, reset by each byte */
	int request_timeout_ms; /* a request in full (http_guard.h); 0: none */
	int threads; /* HTTP threads; 0: one per core, or enough */
	int workers; /* threads for handlers that may block */
	size_t body_limit;
	const struct http_route *routes;
	size_t nroutes;
	const struct http_route_query *queries; /* NULL: not checked */
	size_t nqueries;
	struct auth *auth; /* authenticates callers; see auth.h */
	void *app;         /* handed to handlers through http_app */
};

struct http_server *http_start(const struct http_opts *o, char *err,
                               size_t errlen);
int http_port(const struct http_server *s);
/* Stops accepting new connections; those open go on. */
void http_quiesce(struct http_server *s);
/* Answers new requests 503, waits for those in flight (the writer must
 * still run: deferred ones wait for it), stops, frees the server. */
void http_stop(struct http_server *s);

/* --- for handlers --------------------------------------------------- */
void *http_app(struct http_req *rq);
const char *http_method(struct http_req *rq);
const char *http_path(struct http_req *rq);   /* without the query */
const char *http_target(struct http_req *rq); /* as sent, with query */
const char *http_param(struct http_req *rq, const char *name); /* {name} */
const char *http_query(struct http_req *rq, const char *name);
const char *http_header(struct http_req *rq, const char *name);
/* The first of names (at most HTTP_REPEAT_MAX, matched without case) that
 * the request carries more than once, or NULL. A header that must be one
 * value (a credential) sent twice is ambiguous: http_header would read the
 * first, a proxy in front might have read the last. */
#define HTTP_REPEAT_MAX 8
const char *http_header_repeated(struct http_req *rq, const char *const *names,
                                 int n);
const char *http_body(struct http_req *rq, size_t *len);
const struct auth_principal *http_principal(struct http_req *rq);
const struct http_route *http_route_of(struct http_req *rq);

/* Parses the body as a JSON object (depth <= 16, no duplicate keys); on
 * failure replies 400 and returns NULL. The caller owns the result. */
json_t *http_body_object(struct http_req *rq);

/* Replies; each request gets exactly one reply. `body` is stolen. */
void http_reply_json(struct http_req *rq, int status, json_t *body);
/* Copies `len` bytes of `body`. */
void http_reply_raw(struct http_req *rq, int status, const char *ctype,
                    const char *body, size_t len);
/* RFC 9457: type urn:ramex:problem:<slug>, title, status, detail. */
void http_problem(struct http_req *rq, int status, const char *slug,
                  const char *title, const char *detail_fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Starts every later problem's detail with `prefix` (NULL: none), e.g.
 * "orders[3]: " while one element of a batch is checked. */
void http_problem_prefix(struct http_req *rq, const char *prefix);
/* Adds a header to the reply (before replying), e.g. Retry-After. */
void http_add_header(struct http_req *rq, const char *name, const char *value);
/* The reply of a database that is down: 503 with Retry-After. */
void http_db_unavailable(struct http_req *rq);

/*
 * Parks the request: the handler returns without replying, and some other
 * thread calls http_resume(rq) once the answer is in; `then` runs on an
 * HTTP thread after that and replies (http_reply_*, as a handler does).
 * rq stays valid until `then` has run. Only inline routes defer.
 */
void http_defer(struct http_req *rq,
                void (*then)(struct http_req *rq, void *arg), void *arg);
/* From any thread, once, after http_defer. */
void http_resume(struct http_req *rq);

/*
 * Streams a reply (Server-Sent Events): `next` is called on an HTTP
 * thread whenever the connection can take more, and must not block; it
 * writes up to `max` bytes into buf and returns how many, 0 when it has
 * nothing now, or -1 to end the stream. After a 0 the stream is parked
 * until http_stream_wake (from any thread; call it whenever there may be
 * something new, including the end). `done` is called once when the
 * stream ends, after which the stream must not be woken. Returns NULL
 * after replying 503 (and calling done) when it could not start.
 */
struct http_stream;
typedef long (*http_stream_fn)(void *ctx, char *buf, size_t max);
struct http_stream *http_reply_stream(struct http_req *rq, const char *ctype,
                                      http_stream_fn next,
                                      void (*done)(void *ctx), void *ctx);
void http_stream_wake(struct http_stream *s);

/* Whether a request matches one route of the table; for the route tests. */
int http_match(const char *pattern, const char *path);

#endif
