/*
 * http_req.h — the request and the server as http.c and http_req.c both
 * see them. Private to those two files: everyone else goes through
 * http.h, whose struct http_req stays opaque.
 *
 * http.c owns the server and each request's life (threads, routing,
 * authentication, deferral, the hand-over of the reply to libmicrohttpd);
 * http_req.c owns what a handler does with its request (read it, answer
 * it). The reply a handler builds waits in rq->resp until an HTTP thread
 * queues it (http.c's flush).
 */
#ifndef RAMEX_HTTP_REQ_H
#define RAMEX_HTTP_REQ_H

#include "common/sign.h"
#include "exchange/auth.h"
#include "exchange/http.h"
#include "exchange/http_guard.h"
#include "exchange/target.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

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
	struct http_guard *guard; /* per-address limit, request deadline */
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
	struct http_guard_conn *gc; /* the connection's record (http_guard) */
	const char *method;
	char *body;
	size_t len, cap;
	int too_big;
	int too_long; /* the target is longer than SIGN_TARGET_MAX */
	const char *bad_target; /* why the target cannot be read, or NULL */
	const char *bad_framing; /* http_req_framing's answer, or NULL */
	const char *framing_type;
	int framing_status;
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

/* Whether the head frames the body unambiguously and sends each header
 * of one value once: NULL, or why not with the status and problem type
 * to answer. 400 ambiguous-framing: Content-Length twice, or beside
 * Transfer-Encoding, which a proxy in front may read otherwise than
 * libmicrohttpd, which takes one of them in silence, or a transfer coding
 * other than chunked; 400 ambiguous-header: Content-Type, Idempotency-Key
 * or Last-Event-ID twice (libmicrohttpd gives the first, a proxy may read
 * the last); 415 unsupported-content-encoding: a Content-Encoding other
 * than identity, whose body would be read as if it were not encoded. */
const char *http_req_framing(struct MHD_Connection *conn, int *status,
                             const char **type);

#endif
