/*
 * http.c — see http.h. This file owns the server and each request's life
 * (set-up, routing, authentication, the hops between threads, the reply's
 * hand-over); the handler's half of http.h, reading a request and
 * answering it, is http_req.c. The two share http_req.h.
 *
 * libmicrohttpd calls the access handler several times per request: once
 * with no body (we set up the request's state), once per body chunk, and a
 * last time with no data, when we route and reply. The completion callback
 * frees the state. A reply is made exactly once; a handler that forgets to
 * reply is a bug and answers 500.
 *
 * The daemon runs a few HTTP threads (http_threads) that never block, each
 * polling its connections with poll(2). Not epoll: libmicrohttpd takes a
 * suspended connection out of its epoll set and puts it back on resume,
 * two epoll_ctl calls for every order that waits for its batch, which cost
 * more than polling a thread's few connections (docs/ARCHITECTURE.md,
 * round eight). A
 * request leaves them in one of two ways, and its connection is suspended
 * meanwhile, holding no thread:
 *   - to a worker thread (http_workers), for a handler that may block
 *     (every route not marked HTTP_INLINE, and an inline route whose
 *     credentials are not cached yet);
 *   - by http_defer, for an inline handler whose answer comes from another
 *     thread (the writer's group commit).
 * A reply is built wherever the handler runs and kept in the request; only
 * an HTTP thread hands it to libmicrohttpd (MHD_queue_response must be
 * called from the access handler), after MHD_resume_connection.
 *
 * rq->state says who resumes the connection. RUNNING: a thread is in the
 * handler and will see to it when the handler returns; SUSPENDED: the
 * connection is parked, and whoever finishes the work resumes it; READY:
 * the work is done (by http_resume, or by the worker). Every change is one
 * atomic exchange or compare-and-swap, so that an answer that comes back
 * before the handler returned is neither lost nor resumed twice.
 */
#include "exchange/http.h"
#include "exchange/http_req.h"

#include <arpa/inet.h>
#include <assert.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "common/sign.h"
#include "exchange/auth.h"
#include "exchange/input.h"
#include "exchange/metrics.h"
#include "exchange/target.h"

static int64_t elapsed_ns(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 +
	       (t.tv_nsec - t0->tv_nsec);
}

/* --- matching -------------------------------------------------------- */

/* Matches and, when rq is given, captures {name} segments. */
static int match(const char *pat, const char *path, struct http_req *rq)
{
	int np = 0;
	while (*pat && *path) {
		if (*pat != '/' || *path != '/')
			return 0;
		pat++, path++;
		const char *pe = strchr(pat, '/'), *se = strchr(path, '/');
		size_t pl = pe ? (size_t)(pe - pat) : strlen(pat);
		size_t sl = se ? (size_t)(se - path) : strlen(path);
		if (pl > 2 && pat[0] == '{' && pat[pl - 1] == '}') {
			if (sl == 0 || sl >= HTTP_MAX_PARAM_LEN ||
			    np >= HTTP_MAX_PARAMS)
				return 0;
			if (rq) {
				snprintf(rq->pname[np], sizeof rq->pname[np],
				         "%.*s", (int)(pl - 2), pat + 1);
				snprintf(rq->pval[np], sizeof rq->pval[np],
				         "%.*s", (int)sl, path);
			}
			np++;
		} else if (pl != sl || memcmp(pat, path, pl) != 0) {
			return 0;
		}
		pat += pl, path += sl;
	}
	if (*pat || *path)
		return 0;
	if (rq)
		rq->nparams = np;
	return 1;
}

int http_match(const char *pattern, const char *path)
{
	return match(pattern, path, NULL);
}

/* Hands the reply to libmicrohttpd; only in the access handler. */
static void flush(struct http_req *rq)
{
	struct http_server *srv = rq->srv;
	if (rq->resp) {
		MHD_queue_response(rq->conn, (unsigned)rq->status, rq->resp);
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
	}
	if (rq->counted) {
		rq->counted = 0;
		pthread_mutex_lock(&srv->mu);
		if (--srv->inflight == 0)
			pthread_cond_broadcast(&srv->idle);
		pthread_mutex_unlock(&srv->mu);
	}
}

static void count(struct http_req *rq)
{
	pthread_mutex_lock(&rq->srv->mu);
	rq->srv->inflight++;
	pthread_mutex_unlock(&rq->srv->mu);
	rq->counted = 1;
}

/* --- the request's life ---------------------------------------------- */

/* Replies 400 and returns -1 when the query names a parameter the route
 * does not read (http_route_query): a misspelt filter would have been
 * ignored, and a list read whole taken for the filtered one. */
static int unknown_query(struct http_req *rq)
{
	const struct http_opts *o = &rq->srv->o;
	const char *known = NULL;
	if (rq->tg.nquery == 0 || !o->queries)
		return 0;
	for (size_t i = 0; i < o->nqueries && !known; i++)
		if (strcmp(o->queries[i].method, rq->method) == 0 &&
		    strcmp(o->queries[i].pattern, rq->route->pattern) == 0)
			known = o->queries[i].names;
	if (known && strcmp(known, "*") == 0)
		return 0;
	for (int i = 0; i < rq->tg.nquery; i++) {
		const char *q = rq->tg.qname[i];
		size_t n = strlen(q);
		const char *k = known;
		while (k && *k) {
			size_t len = strcspn(k, " ");
			if (len == n && strncmp(k, q, n) == 0)
				break;
			k += len;
			k += strspn(k, " ");
		}
		if (k && *k)
			continue;
		if (known)
			http_problem(rq, 400, "unknown-parameter",
			             "unknown query parameter",
			             "%s %s takes no query parameter \"%.*s\"; "
			             "it takes: %s",
			             rq->method, rq->route->pattern,
			             in_utf8_cut(q, 64), q, known);
		else
			http_problem(
			    rq, 400, "unknown-parameter",
			    "unknown query parameter",
			    "%s %s takes no query parameters (\"%.*s\" "
			    "was given)",
			    rq->method, rq->route->pattern, in_utf8_cut(q, 64),
			    q);
		return -1;
	}
	return 0;
}

/* Matches the route; replies 404, 405, 400 (an unknown query parameter)
 * or 413 and returns -1 when none. */
static int route(struct http_req *rq)
{
	const struct http_opts *o = &rq->srv->o;
	char allow[128] = "";
	int path_known = 0;

	if (rq->bad_framing) {
		/* where this body ends may not be known: nothing after it
		 * on the connection can be read as a request */
		http_add_header(rq, "Connection", "close");
		http_problem(rq, rq->framing_status, rq->framing_type,
		             rq->framing_status == 415 ? "compressed body"
		             : strcmp(rq->framing_type, "ambiguous-header") == 0
		                 ? "header sent twice"
		                 : "request framing refused",
		             "%s", rq->bad_framing);
		return -1;
	}
	if (rq->too_long) {
		http_problem(rq, 414, "target-too-long",
		             "request target too long",
		             "the target (path and query) is longer than %d "
		             "bytes, the most that is signed and read; send "
		             "fewer or shorter query parameters",
		             SIGN_TARGET_MAX);
		return -1;
	}
	if (rq->bad_target) {
		http_problem(rq, 400, "bad-target", "malformed request target",
		             "%s", rq->bad_target);
		return -1;
	}
	/* Every name and value of ramex is UTF-8 (most are ASCII): a target
	 * that is not, once percent-decoded, is refused here, before a
	 * handler quotes it or hands it to PostgreSQL (which refuses it as
	 * an "invalid byte sequence"). */
	int not_utf8 = !in_utf8_valid(rq->tg.path, strlen(rq->tg.path));
	for (int i = 0; i < rq->tg.nquery && !not_utf8; i++)
		not_utf8 =
		    !in_utf8_valid(rq->tg.qname[i], strlen(rq->tg.qname[i])) ||
		    !in_utf8_valid(rq->tg.qval[i], strlen(rq->tg.qval[i]));
	if (not_utf8) {
		http_problem(
		    rq, 400, "invalid-target", "request target not UTF-8",
		    "the path or the query string holds bytes that are "
		    "not UTF-8 once percent-decoded (such as %%FF); "
		    "ramex paths and parameters are UTF-8");
		return -1;
	}

	for (size_t i = 0; i < o->nroutes; i++) {
		const struct http_route *r = &o->routes[i];
		if (!match(r->pattern, rq->tg.path, NULL))
			continue;
		path_known = 1;
		if (strcmp(r->method, rq->method) != 0) {
			size_t n = strlen(allow);
			snprintf(allow + n, sizeof allow - n, "%s%s",
			         n ? ", " : "", r->method);
			continue;
		}
		rq->route = r;
		rq->route_idx = (int)i;
		match(r->pattern, rq->tg.path, rq);
		break;
	}
	if (!rq->route) {
		if (path_known) {
			http_add_header(rq, "Allow", allow);
			http_problem(rq, 405, "method-not-allowed",
			             "method not allowed",
			             "%s is not served on %s; use %s",
			             rq->method, rq->tg.path, allow);
		} else {
			http_problem(
			    rq, 404, "not-found", "no such route",
			    "nothing is served at %s; the routes are "
			    "listed in api/openapi.yaml of ramex's "
			    "source and in docs/operations.md (Routes)",
			    rq->tg.path);
		}
		return -1;
	}
	if (unknown_query(rq) < 0)
		return -1;
	if (rq->too_big) {
		http_problem(rq, 413, "body-too-large",
		             "request body too large",
		             "the body is larger than the limit of %zu bytes",
		             o->body_limit);
		return -1;
	}
	return 0;
}

/* Authenticates the caller and checks its role: 0, -1 after replying, or
 * -2 (only when !may_block) when that needs the database. */
static int authorize(struct http_req *rq, int may_block)
{
	const struct http_opts *o = &rq->srv->o;
	if (rq->route->roles & AUTH_PUBLIC)
		return 0;
	if (!rq->authed) {
		char why[256];
		int status = 401;
		size_t blen;
		const char *body = http_body(rq, &blen);
		/* auth's view of the request (auth.h: auth knows no server).
		 * A lookup walks the header list: a signature's other
		 * headers are looked up only when a key is named, as many
		 * lookups as before the view (the order path's cost). */
		struct auth_request view = {
		    .method = rq->method,
		    .target = http_target(rq),
		    .authorization = http_header(rq, "Authorization"),
		    .key = http_header(rq, SIGN_HDR_KEY),
		    .body = body,
		    .body_len = blen,
		};
		if (view.key) {
			view.timestamp = http_header(rq, SIGN_HDR_TIMESTAMP);
			view.nonce = http_header(rq, SIGN_HDR_NONCE);
			view.signature = http_header(rq, SIGN_HDR_SIGNATURE);
		}
		/* one credential, or none: a credential header sent twice
		 * is refused, never read one way here and another way by
		 * a proxy in front */
		static const char *const cred[] = {
		    "Authorization", SIGN_HDR_KEY, SIGN_HDR_TIMESTAMP,
		    SIGN_HDR_NONCE, SIGN_HDR_SIGNATURE};
		const char *twice = http_header_repeated(
		    rq, cred, (int)(sizeof cred / sizeof cred[0]));
		if (twice) {
			http_problem(
			    rq, 400, "ambiguous-credentials",
			    "credential sent twice",
			    "the %s header is sent more than once; send "
			    "each credential header once",
			    twice);
			return -1;
		}
		int rc = auth_authenticate(o->auth, &view, &rq->principal,
		                           &status, why, sizeof why, may_block);
		if (rc == -2)
			return -2;
		if (rc < 0) {
			if (status == 401)
				http_add_header(rq, "WWW-Authenticate",
				                "Bearer realm=\"ramex\"");
			if (status == 503)
				http_add_header(rq, "Retry-After", "2");
			/* the type always says what the status says */
			http_problem(rq, status,
			             status == 401   ? "unauthenticated"
			             : status == 503 ? "database-unavailable"
			             : status == 403 ? "forbidden"
			                             : "internal",
			             status == 401   ? "authentication failed"
			             : status >= 500 ? "could not authenticate"
			                             : "request refused",
			             "%s", why);
			return -1;
		}
		rq->authed = 1;
	}
	if (!(rq->route->roles & rq->principal.role)) {
		http_problem(rq, 403, "forbidden", "role not allowed",
		             "the %s role may not call %s %s",
		             auth_role_name(rq->principal.role), rq->method,
		             rq->route->pattern);
		return -1;
	}
	return 0;
}

static void no_reply(struct http_req *rq)
{
	http_problem(rq, 500, "internal", "internal error",
	             "the handler for %s %s gave no answer; this is a bug in "
	             "ramexd",
	             rq->method, rq->route->pattern);
}

static void run(struct http_req *rq)
{
	rq->route->fn(rq);
	if (!rq->replied && !rq->deferred)
		no_reply(rq);
}

/* A deferred request's answer is in: its handler's second half replies. */
static void then_reply(struct http_req *rq)
{
	rq->then(rq, rq->then_arg);
	if (!rq->replied)
		no_reply(rq);
}

void http_defer(struct http_req *rq,
                void (*then)(struct http_req *rq, void *arg), void *arg)
{
	assert(!rq->replied && !rq->deferred);
	rq->deferred = 1;
	rq->then = then, rq->then_arg = arg;
	if (!rq->counted)
		count(rq);
}

void http_resume(struct http_req *rq)
{
	struct MHD_Connection *c = rq->conn;
	if (atomic_exchange(&rq->state, RQ_READY) == RQ_SUSPENDED)
		MHD_resume_connection(c);
}

static void *worker(void *arg)
{
	struct http_server *srv = arg;
	pthread_mutex_lock(&srv->mu);
	for (;;) {
		while (!srv->qhead && !srv->stopping)
			pthread_cond_wait(&srv->work, &srv->mu);
		struct http_req *rq = srv->qhead;
		if (!rq)
			break;
		srv->qhead = rq->qnext;
		if (!srv->qhead)
			srv->qtail = NULL;
		pthread_mutex_unlock(&srv->mu);

		/* The connection is suspended: nothing else touches rq until
		 * it is resumed, the last thing done with it here. */
		atomic_store(&rq->state, RQ_RUNNING);
		if (authorize(rq, 1) == 0)
			run(rq);
		struct MHD_Connection *c = rq->conn;
		int expect = RQ_RUNNING;
		if (!rq->deferred) {
			atomic_store(&rq->state, RQ_READY);
			MHD_resume_connection(c);
		} else if (!atomic_compare_exchange_strong(&rq->state, &expect,
		                                           RQ_SUSPENDED)) {
			MHD_resume_connection(c); /* answered already */
		}
		pthread_mutex_lock(&srv->mu);
	}
	pthread_mutex_unlock(&srv->mu);
	return NULL;
}

/* Parks the connection and gives the request to a worker. */
static void to_worker(struct http_req *rq)
{
	struct http_server *srv = rq->srv;
	count(rq);
	atomic_store(&rq->state, RQ_SUSPENDED);
	MHD_suspend_connection(rq->conn);
	rq->qnext = NULL;
	pthread_mutex_lock(&srv->mu);
	if (srv->qtail)
		srv->qtail->qnext = rq;
	else
		srv->qhead = rq;
	srv->qtail = rq;
	pthread_cond_signal(&srv->work);
	pthread_mutex_unlock(&srv->mu);
}

/* The request is complete: route it, and answer it here (an inline
 * route), or park it for a worker or for its deferred answer. */
static void start(struct http_req *rq)
{
	struct http_server *srv = rq->srv;
	if (atomic_load(&srv->draining)) {
		http_add_header(rq, "Retry-After", "2");
		http_add_header(rq, "Connection", "close");
		http_problem(rq, 503, "shutting-down", "shutting down",
		             "the exchange is shutting down; retry in a few "
		             "seconds");
		flush(rq);
		return;
	}
	if (route(rq) < 0) {
		flush(rq);
		return;
	}
	int inl = (rq->route->flags & HTTP_INLINE) != 0;
	int rc = authorize(rq, 0);
	if (rc == -1) {
		flush(rq);
		return;
	}
	if (rc == -2 || !inl) {
		to_worker(rq);
		return;
	}
	atomic_store(&rq->state, RQ_RUNNING);
	run(rq);
	if (!rq->deferred) {
		flush(rq);
		return;
	}
	if (atomic_load(&rq->state) == RQ_READY) { /* answered already */
		then_reply(rq);
		flush(rq);
		return;
	}
	MHD_suspend_connection(rq->conn);
	int expect = RQ_RUNNING;
	if (!atomic_compare_exchange_strong(&rq->state, &expect, RQ_SUSPENDED))
		MHD_resume_connection(rq->conn); /* answered meanwhile */
}

/* What http.c keeps with a connection (its socket context, made by
 * on_connection): its record in http_guard, and the request on_uri began
 * until on_completed ends it. libmicrohttpd 0.9.75 never reports the end
 * of a request it answered itself after our URI callback ran (a header
 * line it cannot read: its own 400): the connection closes with no
 * on_completed, and that request is freed with the connection. */
struct http_conn {
	struct http_guard_conn *gc;
	struct http_req *rq;
};

static struct http_conn *conn_ctx(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* The connection's record in http_guard. */
static struct http_guard_conn *conn_guard(struct MHD_Connection *conn)
{
	struct http_conn *hc = conn_ctx(conn);
	return hc ? hc->gc : NULL;
}

static void req_free(struct http_req *rq)
{
	if (rq->resp) { /* never queued: the connection went first */
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
	}
	free(rq->body);
	free(rq);
}

/* libmicrohttpd's URI log callback: the only place that sees the target
 * as it came, before libmicrohttpd decodes it. What it returns becomes the
 * request's state (*req_cls) in on_request. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	struct http_req *rq = malloc(sizeof *rq);
	if (!rq)
		return NULL;
	memset(rq, 0, offsetof(struct http_req, principal));
	struct http_conn *hc = conn_ctx(conn);
	if (hc) {
		/* one request at a time on a connection: one still here
		 * was never ended by libmicrohttpd (struct http_conn) */
		if (hc->rq)
			req_free(hc->rq);
		hc->rq = rq;
	}
	rq->gc = hc ? hc->gc : NULL;
	rq->fresh = 1;
	rq->method = ""; /* until on_request: the request may end before */
	rq->route_idx = -1;
	rq->tg.path[0] = 0;
	rq->tg.nquery = 0;
	clock_gettime(CLOCK_MONOTONIC, &rq->t0);
	size_t n = strlen(uri);
	if (n > SIGN_TARGET_MAX) {
		rq->too_long = 1;
		rq->target[0] = 0;
	} else {
		memcpy(rq->target, uri, n + 1);
	}
	return rq;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_size, void **req_cls)
{
	struct http_server *srv = cls;
	struct http_req *rq = *req_cls;
	(void)version;

	(void)url; /* decoded by libmicrohttpd: rq->target is what was sent */
	if (!rq)   /* on_uri could not allocate */
		return MHD_NO;
	if (rq->fresh) {
		/* the head is in: past its deadline, the sweep has it */
		if (!http_guard_head_in(rq->gc))
			return MHD_NO;
		rq->fresh = 0;
		rq->srv = srv;
		rq->conn = conn;
		rq->method = method;
		rq->route_idx = -1;
		atomic_init(&rq->state, RQ_RUNNING);
		rq->tg.nquery = 0;
		if (!rq->too_long &&
		    target_parse(rq->target, &rq->tg, &rq->bad_target) < 0)
			rq->tg.path[0] =
			    0; /* nothing of it is read or logged */
		rq->bad_framing = http_req_framing(conn, &rq->framing_status,
		                                   &rq->framing_type);
		const char *cl = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (rq->bad_framing ||
		    (cl && strtoull(cl, NULL, 10) > srv->o.body_limit)) {
			/* Answered now (413, or the route's 404 or 405), not
			 * after a body that would be thrown away: a client
			 * that waits for an answer before it sends (Expect:
			 * 100-continue) gets one, and libmicrohttpd closes the
			 * connection after it rather than read the body. So is
			 * a body whose framing is refused. */
			rq->too_big = 1;
			if (!http_guard_serving(rq->gc))
				return MHD_NO;
			route(rq);
			flush(rq);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		http_guard_body_in(rq->gc);
		if (!rq->too_big && rq->len + *upload_size > srv->o.body_limit)
			rq->too_big = 1;
		if (!rq->too_big) {
			if (rq->len + *upload_size + 1 > rq->cap) {
				size_t cap = (rq->len + *upload_size + 1) * 2;
				if (cap > srv->o.body_limit + 1)
					cap = srv->o.body_limit + 1;
				char *b = realloc(rq->body, cap);
				if (!b)
					return MHD_NO;
				rq->body = b, rq->cap = cap;
			}
			memcpy(rq->body + rq->len, upload_data, *upload_size);
			rq->len += *upload_size;
			rq->body[rq->len] = 0;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->replied) { /* resumed after a worker replied */
		flush(rq);
		return MHD_YES;
	}
	if (rq->deferred) { /* resumed: the deferred answer is in */
		then_reply(rq);
		flush(rq);
		return MHD_YES;
	}
	/* all of it is in: in time, or the sweep is closing it */
	if (!http_guard_serving(rq->gc))
		return MHD_NO;
	start(rq);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_req *rq = *req_cls;
	(void)cls, (void)toe;
	/* the next request's deadline starts (a kept-alive connection) */
	http_guard_done(rq ? rq->gc : conn_guard(conn));
	if (!rq)
		return;
	struct http_conn *hc = conn_ctx(conn);
	if (hc && hc->rq == rq)
		hc->rq = NULL;
	if (rq->resp) { /* never queued: the connection went first */
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
	}
	flush(rq);        /* (uncounts it) */
	if (!rq->fresh) { /* (fresh: it ended before its headers were in) */
		metrics_http(rq->route_idx, rq->status, elapsed_ns(&rq->t0));
		log_debug("request", "method=%s path=%s status=%d", rq->method,
		          rq->tg.path, rq->status);
	}
	req_free(rq);
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512], q[600];
	(void)cls;
	vsnprintf(line, sizeof line, fmt, ap);
	line[strcspn(line, "\n")] = 0;
	/* A client gone in the middle of its request says nothing of the
	 * server, and many slow clients closed at their deadline
	 * (http_guard.h) would be a line each: debug, not warn. */
	static const char *const client_gone[] = {
	    "closed when reading request", "closed by remote side",
	    "disconnected when reading request"};
	for (size_t i = 0; i < sizeof client_gone / sizeof *client_gone; i++)
		if (strstr(line, client_gone[i])) {
			log_debug("libmicrohttpd", "detail=%s",
			          log_quote(q, sizeof q, line));
			return;
		}
	log_warn("libmicrohttpd", "detail=%s", log_quote(q, sizeof q, line));
}

/* max_connections is ours to enforce, across the HTTP threads:
 * libmicrohttpd splits its own limit evenly among the threads of its
 * pool, but the threads do not take the new connections evenly (whichever
 * wakes first accepts a whole burst), so with its limit one thread turned
 * connections away, closing them unanswered and logging nothing, while
 * the server as a whole was at half its limit. Counted at the start and
 * close of each connection; two threads that accept at the same instant
 * may both pass, so the count can exceed the limit by http_threads - 1.
 * At the limit, a connection that waited long for its request may be
 * ended to let the new one in (http_guard_evict); until its thread has
 * closed it, the count is one over. The per-address limit comes first:
 * an address at its share evicts nobody. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
                                 socklen_t addrlen)
{
	struct http_server *s = cls;
	(void)addrlen;
	if (!http_guard_admit(s->guard, addr))
		return MHD_NO; /* (its address holds its share) */
	if (atomic_load(&s->conns) < s->o.max_connections)
		return MHD_YES;
	/* full: one that has waited long for its request makes room (the
	 * count passes the limit until libmicrohttpd closed it) */
	if (http_guard_evict(s->guard))
		return MHD_YES;
	metrics_http_refused();
	/* once a second at most: a flood of refusals is one line a second */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long last = atomic_load(&s->refused_log_s);
	if (ts.tv_sec > last &&
	    atomic_compare_exchange_strong(&s->refused_log_s, &last,
	                                   (long long)ts.tv_sec))
		log_warn("connection refused: at max_connections",
		         "max_connections=%d hint=\"%s\"", s->o.max_connections,
		         "raise max_connections, or make clients reuse "
		         "their connections");
	return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = cls;
	int d = code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
	if (d > 0) {
		const union MHD_ConnectionInfo *fd = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *peer = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		struct http_conn *hc = calloc(1, sizeof *hc);
		if (hc)
			hc->gc = fd ? http_guard_opened(
			                  s->guard, fd->connect_fd,
			                  peer ? peer->client_addr : NULL)
			            : NULL;
		*socket_ctx = hc;
	} else {
		struct http_conn *hc = *socket_ctx;
		if (hc) {
			if (hc->rq) /* begun, never ended (struct http_conn) */
				req_free(hc->rq);
			http_guard_closed(s->guard, hc->gc);
			free(hc);
		}
		*socket_ctx = NULL;
	}
	atomic_fetch_add(&s->conns, d);
	metrics_http_connections(d);
}

static void teardown(struct http_server *s);

struct http_server *http_start(const struct http_opts *o, char *err,
                               size_t errlen)
{
	struct sockaddr_in a4;
	struct http_server *s = calloc(1, sizeof *s);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->o = *o;
	memset(&a4, 0, sizeof a4);
	a4.sin_family = AF_INET;
	a4.sin_port = htons((uint16_t)o->port);
	if (inet_pton(AF_INET, o->host, &a4.sin_addr) != 1) {
		snprintf(err, errlen,
		         "listen address '%s' is not an IPv4 address such as "
		         "127.0.0.1",
		         o->host);
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->idle, NULL);
	atomic_init(&s->draining, 0);
	atomic_init(&s->conns, 0);
	atomic_init(&s->refused_log_s, 0);
	unsigned need = ((unsigned)o->max_connections + HTTP_THREAD_CONNS - 1) /
	                HTTP_THREAD_CONNS;
	unsigned nt = (unsigned)o->threads;
	if (nt == 0) { /* the default: as many as the cores, or as needed */
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		nt = cores < 1 ? 1 : cores > 64 ? 64 : (unsigned)cores;
	}
	struct http_guard_opts go = {
	    .per_address = o->per_address,
	    .deadline_ms = o->request_timeout_ms,
	    .keepalive_ms = o->timeout_s * 1000,
	    /* libmicrohttpd's own limit, which the open connections never
	     * pass (nt only grows below) */
	    .capacity = HTTP_THREAD_CONNS * (int)(need > nt ? need : nt),
	};
	s->guard = http_guard_start(&go, err, errlen);
	if (!s->guard)
		goto fail;
	int nw = o->workers > 0 ? o->workers : 1;
	s->workers = calloc((size_t)nw, sizeof *s->workers);
	if (!s->workers) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (; s->nworkers < nw; s->nworkers++)
		if (pthread_create(&s->workers[s->nworkers], NULL, worker, s)) {
			snprintf(err, errlen, "could not start HTTP workers");
			goto fail;
		}
	if (need > nt) {
		if (o->threads > 0) /* a number set by hand: say why it grew */
			log_info("more HTTP threads than http_threads",
			         "http_threads=%u threads=%u "
			         "max_connections=%d why=\"one thread holds at "
			         "most %d connections\"",
			         nt, need, o->max_connections,
			         HTTP_THREAD_CONNS);
		nt = need;
	}
	s->d = MHD_start_daemon(
	    MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	        MHD_USE_ERROR_LOG,
	    (uint16_t)o->port, on_accept, s, on_request, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&a4,
	    /* split evenly: HTTP_THREAD_CONNS a thread; on_accept keeps the
	     * total */
	    MHD_OPTION_CONNECTION_LIMIT, HTTP_THREAD_CONNS * nt,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
	    /* a connection's memory, zeroed for each request: the default
	     * 32 KiB costs a memset of 32 KiB per order; our requests' heads
	     * need a few hundred bytes, a browser's one or two KiB (bodies are
	     * collected in rq) */
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    /* one HTTP thread is no pool: the option wants 2 or more */
	    nt > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, nt,
	    MHD_OPTION_END);
	if (!s->d) {
		snprintf(err, errlen,
		         "could not listen on %s:%d (is the port in use?)",
		         o->host, o->port);
		goto fail;
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : o->port;
	return s;
fail:
	teardown(s);
	return NULL;
}

int http_port(const struct http_server *s)
{
	return s->port;
}

void http_quiesce(struct http_server *s)
{
	MHD_quiesce_daemon(s->d);
}

/* Stops the workers (after the queue is empty) and frees the server. */
static void teardown(struct http_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	http_guard_stop(s->guard); /* (the daemon is stopped: no callback) */
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->idle);
	free(s);
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	/* Every parked request is answered first (the writer and the workers
	 * still run): libmicrohttpd would close their connections, and free
	 * their state under the thread that is about to answer. */
	atomic_store(&s->draining, 1);
	pthread_mutex_lock(&s->mu);
	while (s->inflight > 0)
		pthread_cond_wait(&s->idle, &s->mu);
	pthread_mutex_unlock(&s->mu);
	MHD_stop_daemon(s->d);
	teardown(s);
}
