/*
 * http_req.c — the handler's half of http.h: reading a request (its route
 * parameters, query, headers, caller and JSON body) and answering it
 * (JSON, raw bytes, RFC 9457 problem+json, a stream). Split from http.c,
 * which keeps the server and each request's life; the two share
 * http_req.h.
 *
 * A reply is built wherever the handler runs (an HTTP thread or a
 * worker) and kept in rq->resp; only an HTTP thread hands it to
 * libmicrohttpd (http.c).
 */
#include "exchange/http_req.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "exchange/input.h"

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
	json_t *p = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title",
	                      title, "status", status, "detail", detail);
	/* the instance is the request's path as read, or absent: a target
	 * that could not be read (bad, too long) has none, and a path that
	 * is not UTF-8 would be named with replacement characters */
	if (p && rq->tg.path[0] == '/' &&
	    in_utf8_valid(rq->tg.path, strlen(rq->tg.path)))
		json_object_set_new(p, "instance", json_string(inst));
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

struct repeat_scan {
	const char *const *names;
	int n, seen[HTTP_REPEAT_MAX];
	const char *repeated;
};

static enum MHD_Result repeat_cb(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value)
{
	struct repeat_scan *s = cls;
	(void)kind;
	(void)value;
	for (int i = 0; i < s->n; i++)
		if (strcasecmp(key, s->names[i]) == 0 && ++s->seen[i] > 1) {
			s->repeated = s->names[i];
			return MHD_NO; /* one is enough to refuse */
		}
	return MHD_YES;
}

const char *http_header_repeated(struct http_req *rq, const char *const *names,
                                 int n)
{
	struct repeat_scan s = {.names = names,
	                        .n = n < HTTP_REPEAT_MAX ? n : HTTP_REPEAT_MAX};
	MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, repeat_cb, &s);
	return s.repeated;
}

/* Headers that carry one value, and what a second copy is told. */
static const char *const single[][2] = {
    {"Content-Type", "Content-Type is sent more than once; send it once"},
    {"Idempotency-Key", "Idempotency-Key is sent more than once; send one "
                        "key (the retry of a request sends the same one)"},
    {"Last-Event-ID",
     "Last-Event-ID is sent more than once; send the id of the last event "
     "received"},
};
#define NSINGLE (sizeof single / sizeof single[0])

struct framing_scan {
	int lengths, codings, seen[NSINGLE];
	bool not_chunked, encoded;
	const char *twice;
};

static enum MHD_Result framing_cb(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value)
{
	struct framing_scan *f = cls;
	(void)kind;
	if (strcasecmp(key, "Content-Length") == 0) {
		f->lengths++;
	} else if (strcasecmp(key, "Transfer-Encoding") == 0) {
		f->codings++;
		f->not_chunked |= !value || strcasecmp(value, "chunked") != 0;
	} else if (strcasecmp(key, "Content-Encoding") == 0) {
		f->encoded |= !value || strcasecmp(value, "identity") != 0;
	} else {
		for (size_t i = 0; i < NSINGLE; i++)
			if (strcasecmp(key, single[i][0]) == 0 &&
			    ++f->seen[i] > 1 && !f->twice)
				f->twice = single[i][1];
	}
	return MHD_YES;
}

const char *http_req_framing(struct MHD_Connection *conn, int *status,
                             const char **type)
{
	struct framing_scan f = {0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_cb, &f);
	*status = 400;
	*type = "ambiguous-framing";
	if (f.lengths > 1)
		return "Content-Length is sent more than once; send it once";
	if (f.lengths && f.codings)
		return "both Content-Length and Transfer-Encoding are sent; "
		       "send one of them";
	/* RFC 9112 suggests 501; a 5xx says the exchange failed, and
	 * here the request is what cannot be read */
	if (f.codings > 1 || f.not_chunked)
		return "the only Transfer-Encoding served is chunked, sent "
		       "once";
	*type = "ambiguous-header";
	if (f.twice)
		return f.twice;
	*status = 415;
	*type = "unsupported-content-encoding";
	if (f.encoded)
		return "the body must not be compressed: send it without "
		       "Content-Encoding (or as identity)";
	return NULL;
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

/* Whether a Content-Type says JSON: application/json in any case, with
 * parameters, a charset among them (if any) UTF-8. */
static bool json_media(const char *ct)
{
	static const char want[] = "application/json";
	if (!ct || strncasecmp(ct, want, sizeof want - 1) != 0)
		return false;
	const char *p = ct + sizeof want - 1;
	p += strspn(p, " \t");
	if (*p == 0)
		return true;
	if (*p != ';')
		return false;
	const char *cs = strcasestr(p, "charset=");
	if (!cs)
		return true;
	cs += strlen("charset=");
	cs += *cs == '"';
	return strncasecmp(cs, "utf-8", 5) == 0 &&
	       strchr("\"; \t", cs[5]) != NULL;
}

json_t *http_body_object(struct http_req *rq)
{
	json_error_t e;
	if (rq->len == 0) {
		http_problem(rq, 400, "bad-json", "request body required",
		             "this route takes a JSON object as its body");
		return NULL;
	}
	/* a body in another media type is not read as JSON by guesswork */
	const char *ct = http_header(rq, "Content-Type");
	if (!json_media(ct)) {
		char shown[96];
		in_utf8_clean(shown, sizeof shown, ct ? ct : "",
		              ct ? strnlen(ct, 64) : 0);
		http_problem(rq, 415, "unsupported-media-type",
		             "the body is not said to be JSON",
		             "send the body with Content-Type: "
		             "application/json (UTF-8); it came as %s%s%s",
		             ct ? "\"" : "no Content-Type", shown,
		             ct ? "\"" : "");
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
