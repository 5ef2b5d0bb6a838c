/*
 * http.c — see http.h.
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

#define HTTP_MAX_PARAMS     4
#define HTTP_MAX_PARAM_LEN  128
#define HTTP_MAX_HEADERS    6
#define HTTP_JSON_MAX_DEPTH 16 /* our bodies are two levels deep */
#define HTTP_CONN_MEMORY    (8 * 1024)
/*
 * The most connections one HTTP thread holds. A thread polls all of its
 * connections each time it wakes, so that cost grows with them; 125 keeps
 * it small. (With epoll, which ramexd used before, 125 connections, the
 * listening socket and the wake-up pipe also stayed under the 128 events
 * libmicrohttpd 0.9.75 takes from one epoll_wait: at exactly 128 it waited
 * again with a stale timeout, up to connection_timeout_s, before handling
 * any.) A thread at its limit leaves the listening socket to the others;
 * http_start starts as many threads as max_connections needs.
 */
#define HTTP_THREAD_CONNS 125

enum { RQ_RUNNING, RQ_SUSPENDED, RQ_READY };

struct http_server {
	struct MHD_Daemon *d;
	struct http_opts o;
	int port;
	atomic_int draining; /* set by http_stop: new requests get 503 */
	atomic_int conns;    /* open connections, all HTTP threads together */
	atomic_llong refused_log_s; /* when a refusal was last logged */
	pthread_mutex_t mu;
	pthread_cond_t work; /* a request was queued, or stopping */
	pthread_cond_t idle; /* inflight fell to 0 */
	struct http_req *qhead, *qtail;
	int inflight; /* requests off the HTTP threads, not yet replied */
	bool stopping;
	int nworkers;
	pthread_t *workers;
};

struct http_req {
	struct http_server *srv;
	struct MHD_Connection *conn;
	const char *method;
	char *body;
	size_t len, cap;
	int too_big;
	int too_long; /* the target is longer than SIGN_TARGET_MAX */
	const char *bad_target; /* why the target cannot be read, or NULL */
	int fresh;    /* made by on_uri, not set up by on_request yet */
	int replied;
	int status;
	int route_idx;
	const struct http_route *route;
	int nparams;
	int nhdr;
	int authed;
	char detail_prefix[32]; /* http_problem_prefix */
	struct timespec t0;
	struct MHD_Response
	    *resp;    /* the reply, until an HTTP thread queues it */
	int counted;  /* in srv->inflight */
	int deferred; /* http_defer: `then` replies */
	void (*then)(struct http_req *rq, void *arg);
	void *then_arg;
	atomic_int state; /* RQ_*: who resumes the connection (above) */
	struct http_req *qnext;
	/* Below: read only up to nparams, nhdr or authed, or written before
	 * they are read; not zeroed for each request (they are 8 KiB). */
	struct auth_principal principal;
	char target[SIGN_TARGET_MAX + 1]; /* as sent: what is signed */
	struct target tg; /* read from target: what the handlers see */
	char pname[HTTP_MAX_PARAMS][32];
	char pval[HTTP_MAX_PARAMS][HTTP_MAX_PARAM_LEN];
	char hname[HTTP_MAX_HEADERS][32];
	/* room for the web pages' Content-Security-Policy (static.c) */
	char hval[HTTP_MAX_HEADERS][512];
};

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

/* --- replies --------------------------------------------------------- */

static void queue(struct http_req *rq, int status, const char *ctype,
                  struct MHD_Response *r)
{
	assert(!rq->replied);
	rq->replied = 1;
	rq->status = status;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	/* API answers are never cached; a handler that says otherwise (the
	 * web pages revalidate with their ETag) replaces the default, since
	 * two Cache-Control headers would combine to no-store. */
	int own_cache = 0;
	for (int i = 0; i < rq->nhdr; i++) {
		MHD_add_response_header(r, rq->hname[i], rq->hval[i]);
		own_cache |= strcasecmp(rq->hname[i], "Cache-Control") == 0;
	}
	if (!own_cache)
		MHD_add_response_header(r, "Cache-Control", "no-store");
	rq->resp = r;
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

void http_reply_raw(struct http_req *rq, int status, const char *ctype,
                    const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    len, (void *)body, MHD_RESPMEM_MUST_COPY);
	queue(rq, status, ctype, r);
}

static void reply_dump(struct http_req *rq, int status, const char *ctype,
                       json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!s) {
		/* No body (a json_pack that failed) or out of memory: say so
		 * without allocating, and never without a detail. */
		static const char fail[] =
		    "{\"type\":\"urn:ramex:problem:internal\",\"title\":"
		    "\"answer not built\",\"status\":500,\"detail\":\"the "
		    "exchange could not build the answer to this request (out "
		    "of memory, or a bug in ramexd); what the request changed "
		    "is unknown: read it back, or retry with the same "
		    "Idempotency-Key\"}";
		log_error("answer not built", "status=%d path=%s", status,
		          rq->tg.path);
		http_reply_raw(rq, 500, "application/problem+json", fail,
		               sizeof fail - 1);
		return;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    strlen(s), s, MHD_RESPMEM_MUST_FREE);
	queue(rq, status, ctype, r);
}

void http_reply_json(struct http_req *rq, int status, json_t *body)
{
	reply_dump(rq, status, "application/json", body);
}

/*
 * The detail and the instance are made valid UTF-8 here, whatever they
 * quote (a key of the body, a query value, a header, a library's message):
 * jansson refuses a string that is not, and the answer would be lost. A
 * detail longer than its buffer is cut on a character boundary.
 */
void http_problem(struct http_req *rq, int status, const char *slug,
                  const char *title, const char *fmt, ...)
{
	char raw[1024], detail[1024], inst[SIGN_TARGET_MAX + 1], type[96];
	va_list ap;
	size_t k = strlen(rq->detail_prefix);
	memcpy(raw, rq->detail_prefix, k + 1);
	va_start(ap, fmt);
	int n = vsnprintf(raw + k, sizeof raw - k, fmt, ap);
	va_end(ap);
	size_t len = strlen(raw);
	if (n > 0 && (size_t)n >= sizeof raw - k)
		len = (size_t)in_utf8_cut(raw, len);
	in_utf8_clean(detail, sizeof detail, raw, len);
	in_utf8_clean(inst, sizeof inst, rq->tg.path, strlen(rq->tg.path));
	snprintf(type, sizeof type, "urn:ramex:problem:%s", slug);
	json_t *p =
	    json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title,
	              "status", status, "detail", detail, "instance", inst);
	if (status >= 500)
		log_warn("request failed", "status=%d path=%s type=%s", status,
		         inst, slug);
	if (!p) { /* out of memory: the same problem, without allocating */
		char s[512];
		snprintf(s, sizeof s,
		         "{\"type\":\"%s\",\"title\":\"%s\",\"status\":%d,"
		         "\"detail\":\"the exchange ran short of memory while "
		         "writing this answer\"}",
		         type, title, status);
		http_reply_raw(rq, status, "application/problem+json", s,
		               strlen(s));
		return;
	}
	reply_dump(rq, status, "application/problem+json", p);
}

void http_problem_prefix(struct http_req *rq, const char *prefix)
{
	snprintf(rq->detail_prefix, sizeof rq->detail_prefix, "%s",
	         prefix ? prefix : "");
}

void http_add_header(struct http_req *rq, const char *name, const char *value)
{
	/* A cut header is worse than none (a truncated CSP is refused with
	 * a console error): drop it and say so. */
	if (rq->nhdr >= HTTP_MAX_HEADERS ||
	    strlen(name) >= sizeof rq->hname[0] ||
	    strlen(value) >= sizeof rq->hval[0]) {
		log_warn("reply header dropped", "name=%s path=%s", name,
		         rq->tg.path);
		return;
	}
	snprintf(rq->hname[rq->nhdr], sizeof rq->hname[0], "%s", name);
	snprintf(rq->hval[rq->nhdr], sizeof rq->hval[0], "%s", value);
	rq->nhdr++;
}

void http_db_unavailable(struct http_req *rq)
{
	http_add_header(rq, "Retry-After", "2");
	http_problem(rq, 503, "database-unavailable", "database unavailable",
	             "the exchange cannot reach PostgreSQL; nothing was "
	             "changed, retry after a few seconds");
}

/* A streamed reply. Its reader runs on an HTTP thread and must not block:
 * with nothing to send it parks the connection (the pattern microhttpd.h
 * gives for a content reader with no data yet), and http_stream_wake,
 * from any thread, resumes it. `state` works as rq->state does. */
struct http_stream {
	http_stream_fn next;
	void (*done)(void *);
	void *ctx;
	struct MHD_Connection *conn;
	atomic_int state; /* ST_* */
};

enum { ST_RUNNING, ST_SUSPENDED, ST_WOKEN };

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_stream *s = cls;
	(void)pos;
	for (;;) {
		atomic_store(&s->state, ST_RUNNING);
		long n = s->next(s->ctx, buf, max);
		if (n < 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (n > 0)
			return (ssize_t)n;
		if (atomic_load(&s->state) == ST_WOKEN)
			continue; /* something came while we looked */
		MHD_suspend_connection(s->conn);
		int expect = ST_RUNNING;
		if (!atomic_compare_exchange_strong(&s->state, &expect,
		                                    ST_SUSPENDED))
			MHD_resume_connection(s->conn); /* woken meanwhile */
		return 0;
	}
}

void http_stream_wake(struct http_stream *s)
{
	if (atomic_exchange(&s->state, ST_WOKEN) == ST_SUSPENDED)
		MHD_resume_connection(s->conn);
}

static void stream_free(void *cls)
{
	struct http_stream *s = cls;
	if (s->done)
		s->done(s->ctx);
	free(s);
}

struct http_stream *http_reply_stream(struct http_req *rq, const char *ctype,
                                      http_stream_fn next,
                                      void (*done)(void *ctx), void *ctx)
{
	struct http_stream *s = malloc(sizeof *s);
	if (!s) {
		if (done)
			done(ctx);
		http_problem(rq, 503, "overloaded", "overloaded",
		             "out of memory for a new stream; retry later");
		return NULL;
	}
	s->next = next, s->done = done, s->ctx = ctx, s->conn = rq->conn;
	atomic_init(&s->state, ST_RUNNING);
	struct MHD_Response *r = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 4096, stream_reader, s, stream_free);
	if (!r) {
		stream_free(s);
		http_problem(rq, 503, "overloaded", "overloaded",
		             "could not start a stream; retry later");
		return NULL;
	}
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	queue(rq, 200, ctype, r);
	return s;
}

/* --- accessors ------------------------------------------------------- */

void *http_app(struct http_req *rq)
{
	return rq->srv->o.app;
}
const char *http_method(struct http_req *rq)
{
	return rq->method;
}
const char *http_path(struct http_req *rq)
{
	return rq->tg.path;
}
const char *http_target(struct http_req *rq)
{
	return rq->target;
}
const struct http_route *http_route_of(struct http_req *rq)
{
	return rq->route;
}

const char *http_param(struct http_req *rq, const char *name)
{
	for (int i = 0; i < rq->nparams; i++)
		if (strcmp(rq->pname[i], name) == 0)
			return rq->pval[i];
	return NULL;
}

const char *http_query(struct http_req *rq, const char *name)
{
	return target_query(&rq->tg, name);
}

const char *http_header(struct http_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *http_body(struct http_req *rq, size_t *len)
{
	*len = rq->len;
	return rq->body ? rq->body : "";
}

const struct auth_principal *http_principal(struct http_req *rq)
{
	return rq->authed ? &rq->principal : NULL;
}

/* Refuses nesting deeper than our bodies ever need before jansson sees
 * it, so that a hostile body cannot make the parser recurse deeply. */
static int too_deep(const char *s, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > HTTP_JSON_MAX_DEPTH)
				return 1;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return 0;
}

/* jansson's error, in our words: its own text may quote the body's bytes,
 * cut anywhere (even inside a character), so it is only added cleaned. */
static const char *json_why(const json_error_t *e)
{
	switch (json_error_code(e)) {
	case json_error_invalid_utf8:
		return "the body is not valid UTF-8";
	case json_error_premature_end_of_input:
		return "the body ends inside a JSON value";
	case json_error_end_of_input_expected:
		return "there is more after the JSON value";
	case json_error_null_character:
	case json_error_null_byte_in_key:
		return "a string holds \\u0000, which no ramex field takes";
	case json_error_duplicate_key:
		return "an object has the same key twice";
	case json_error_numeric_overflow:
		return "a number does not fit in 64 bits";
	case json_error_stack_overflow:
		return "the body nests too deeply";
	default:
		return "the body is not valid JSON";
	}
}

json_t *http_body_object(struct http_req *rq)
{
	json_error_t e;
	if (rq->len == 0) {
		http_problem(rq, 400, "bad-json", "request body required",
		             "this route takes a JSON object as its body");
		return NULL;
	}
	if (too_deep(rq->body, rq->len)) {
		http_problem(rq, 400, "bad-json", "JSON nested too deeply",
		             "the body nests deeper than %d levels; no ramex "
		             "request needs that",
		             HTTP_JSON_MAX_DEPTH);
		return NULL;
	}
	json_t *j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &e);
	if (!j) {
		char text[sizeof e.text * 3];
		in_utf8_clean(text, sizeof text, e.text, strlen(e.text));
		http_problem(rq, 400, "bad-json", "malformed JSON",
		             "%s (%s), at line %d column %d, byte %d",
		             json_why(&e), text, e.line, e.column, e.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		http_problem(rq, 400, "bad-json", "JSON object expected",
		             "the body must be a JSON object");
		return NULL;
	}
	return j;
}

/* --- the request's life ---------------------------------------------- */

/* Matches the route; replies 404, 405 or 413 and returns -1 when none. */
static int route(struct http_req *rq)
{
	const struct http_opts *o = &rq->srv->o;
	char allow[128] = "";
	int path_known = 0;

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
		not_utf8 = !in_utf8_valid(rq->tg.qname[i],
		                          strlen(rq->tg.qname[i])) ||
		           !in_utf8_valid(rq->tg.qval[i],
		                          strlen(rq->tg.qval[i]));
	if (not_utf8) {
		http_problem(rq, 400, "invalid-target",
		             "request target not UTF-8",
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
			http_problem(rq, 404, "not-found", "no such route",
			             "nothing is served at %s; see "
			             "/v1/openapi.yaml for the routes",
			             rq->tg.path);
		}
		return -1;
	}
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
		/* auth's view of the request (auth.h: auth knows no server) */
		struct auth_request view = {
		    .method = rq->method,
		    .target = http_target(rq),
		    .authorization = http_header(rq, "Authorization"),
		    .key = http_header(rq, SIGN_HDR_KEY),
		    .timestamp = http_header(rq, SIGN_HDR_TIMESTAMP),
		    .nonce = http_header(rq, SIGN_HDR_NONCE),
		    .signature = http_header(rq, SIGN_HDR_SIGNATURE),
		    .body = body,
		    .body_len = blen,
		};
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

/* libmicrohttpd's URI log callback: the only place that sees the target
 * as it came, before libmicrohttpd decodes it. What it returns becomes the
 * request's state (*req_cls) in on_request. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls, (void)conn;
	struct http_req *rq = malloc(sizeof *rq);
	if (!rq)
		return NULL;
	memset(rq, 0, offsetof(struct http_req, principal));
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
	if (!rq) /* on_uri could not allocate */
		return MHD_NO;
	if (rq->fresh) {
		rq->fresh = 0;
		rq->srv = srv;
		rq->conn = conn;
		rq->method = method;
		rq->route_idx = -1;
		atomic_init(&rq->state, RQ_RUNNING);
		rq->tg.nquery = 0;
		if (!rq->too_long && target_parse(rq->target, &rq->tg,
		                                  &rq->bad_target) < 0)
			rq->tg.path[0] = 0; /* nothing of it is read or logged */
		const char *cl = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > srv->o.body_limit)
			rq->too_big = 1;
		return MHD_YES;
	}
	if (*upload_size) {
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
	start(rq);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_req *rq = *req_cls;
	(void)cls, (void)conn, (void)toe;
	if (!rq)
		return;
	if (rq->resp) { /* never queued: the connection went first */
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
	}
	flush(rq); /* (uncounts it) */
	if (!rq->fresh) { /* (fresh: it ended before its headers were in) */
		metrics_http(rq->route_idx, rq->status, elapsed_ns(&rq->t0));
		log_debug("request", "method=%s path=%s status=%d", rq->method,
		          rq->tg.path, rq->status);
	}
	free(rq->body);
	free(rq);
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512], q[600];
	(void)cls;
	vsnprintf(line, sizeof line, fmt, ap);
	line[strcspn(line, "\n")] = 0;
	log_warn("libmicrohttpd", "detail=%s", log_quote(q, sizeof q, line));
}

/* max_connections is ours to enforce, across the HTTP threads:
 * libmicrohttpd splits its own limit evenly among the threads of its
 * pool, but the threads do not take the new connections evenly (whichever
 * wakes first accepts a whole burst), so with its limit one thread turned
 * connections away, closing them unanswered and logging nothing, while
 * the server as a whole was at half its limit. Counted at the start and
 * close of each connection; two threads that accept at the same instant
 * may both pass, so the count can exceed the limit by http_threads - 1. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
                                 socklen_t addrlen)
{
	struct http_server *s = cls;
	(void)addr;
	(void)addrlen;
	if (atomic_load(&s->conns) < s->o.max_connections)
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
	(void)conn;
	(void)socket_ctx;
	int d = code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
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
	unsigned need = ((unsigned)o->max_connections + HTTP_THREAD_CONNS - 1) /
	                HTTP_THREAD_CONNS;
	unsigned nt = (unsigned)o->threads;
	if (nt == 0) { /* the default: as many as the cores, or as needed */
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		nt = cores < 1 ? 1 : cores > 64 ? 64 : (unsigned)cores;
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
