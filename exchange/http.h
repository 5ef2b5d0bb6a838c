/*
 * http.h — ramexd's HTTP edge: the libmicrohttpd server, routing through one
 * route table, authentication and the role check, and the replies.
 *
 * Every request goes the same way: the body is collected up to the limit
 * (larger: 413), the path is matched against the route table (no route: 404,
 * wrong method: 405 with Allow), the caller is authenticated unless the route
 * is public (401), its role is checked against the route's roles (403; deny
 * by default: a route that names no role serves nobody), and only then the
 * handler runs. Every error, ours or a handler's, is RFC 9457 problem+json.
 *
 * The server runs one thread per connection, so a handler may block (the
 * order handlers wait for the writer's group commit). The connection limit
 * and the per-connection timeout keep slow clients from starving the rest.
 * The module owns the daemon and each request's state; it does not know
 * what any route does.
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
};

struct http_opts {
	const char *host;
	int port; /* 0: any free port, see http_port */
	int max_connections;
	int timeout_s;
	size_t body_limit;
	const struct http_route *routes;
	size_t nroutes;
	struct auth *auth; /* authenticates callers; see auth.h */
	void *app;         /* handed to handlers through http_app */
};

struct http_server *http_start(const struct http_opts *o, char *err,
                               size_t errlen);
int http_port(const struct http_server *s);
/* Stops accepting new connections; those open go on. */
void http_quiesce(struct http_server *s);
/* Stops accepting, waits for the requests in flight, frees the server. */
void http_stop(struct http_server *s);

/* --- for handlers --------------------------------------------------- */
void *http_app(struct http_req *rq);
const char *http_method(struct http_req *rq);
const char *http_path(struct http_req *rq);   /* without the query */
const char *http_target(struct http_req *rq); /* as sent, with query */
const char *http_param(struct http_req *rq, const char *name); /* {name} */
const char *http_query(struct http_req *rq, const char *name);
const char *http_header(struct http_req *rq, const char *name);
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
/* Adds a header to the reply (before replying), e.g. Retry-After. */
void http_add_header(struct http_req *rq, const char *name, const char *value);
/* The reply of a database that is down: 503 with Retry-After. */
void http_db_unavailable(struct http_req *rq);

/*
 * Streams a reply (Server-Sent Events): `next` is called again and again
 * in the connection's thread and may block; it writes up to `max` bytes
 * into buf and returns how many, 0 to be called again, or -1 to end the
 * stream. `done` is called once when the stream ends.
 */
typedef long (*http_stream_fn)(void *ctx, char *buf, size_t max);
void http_reply_stream(struct http_req *rq, const char *ctype,
                       http_stream_fn next, void (*done)(void *ctx), void *ctx);

/* Whether a request matches one route of the table; for the route tests. */
int http_match(const char *pattern, const char *path);

#endif
