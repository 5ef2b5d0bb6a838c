/* h_events.c — GET /v1/events, the Server-Sent Events stream; see
 * handlers.h and events.h. The stream never blocks: events_poll says when
 * there is nothing, and the events module wakes the parked connection
 * (http_stream_wake) when there may be. An event larger than what
 * libmicrohttpd asks for at once is handed out in pieces. */
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/events.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"

#define EV_BUF 16384

struct stream {
	struct events_sub *sub;
	char buf[EV_BUF];
	size_t len, off;
};

static long next(void *ctx, char *out, size_t max)
{
	struct stream *s = ctx;
	if (s->off == s->len) {
		long n = events_poll(s->sub, s->buf, sizeof s->buf);
		if (n <= 0)
			return n;
		s->len = (size_t)n, s->off = 0;
	}
	size_t k = s->len - s->off < max ? s->len - s->off : max;
	memcpy(out, s->buf + s->off, k);
	s->off += k;
	return (long)k;
}

static void wake(void *hs)
{
	http_stream_wake(hs);
}

static void done(void *ctx)
{
	struct stream *s = ctx;
	events_unsubscribe(s->sub);
	free(s);
}

void h_events(struct http_req *rq)
{
	struct app *a = http_app(rq);
	const struct auth_principal *p = http_principal(rq);
	int64_t last = -1;
	const char *lid = http_header(rq, "Last-Event-ID");
	if (lid && (in_parse_i64(lid, &last) < 0 || last < 0)) {
		http_problem(rq, 400, "invalid-header", "invalid Last-Event-ID",
		             "Last-Event-ID must be the id of an event");
		return;
	}
	/* ?keepalive_s=N: this stream's keep-alive interval (the web pages
	 * ask for a short one, to show a frozen exchange promptly) */
	int64_t ka = 0;
	if (in_qint(rq, "keepalive_s", 1, EVENTS_KEEPALIVE_MAX_S, &ka) < 0)
		return;
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		return;
	}
	s->sub = events_subscribe(a->events, p->role, p->account_id, p->team_id,
	                          last);
	if (!s->sub) {
		free(s);
		http_add_header(rq, "Retry-After", "5");
		http_problem(rq, 503, "too-many-streams", "too many streams",
		             "the exchange serves at most %d event streams at "
		             "once; retry later",
		             a->cfg.sse_max_clients);
		return;
	}
	struct events_sub *sub = s->sub;
	if (ka)
		events_set_keepalive(sub, (int)ka);
	struct http_stream *hs =
	    http_reply_stream(rq, "text/event-stream", next, done, s);
	/* Nothing is read before this handler returns, and what is published
	 * before the wake is set is in the ring for the first read. */
	if (hs)
		events_set_wake(sub, wake, hs);
}
