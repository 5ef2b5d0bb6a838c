/* events.c — the SSE reader over an http1 connection of its own (streaming
 * mode, polled beside the wake descriptor); see events.h.
 *
 * The parser follows the SSE format as ramexd writes it (exchange/events.c):
 * `id:`, `event:` and `data:` lines, a blank line ends an event, lines that
 * start with ':' are keep-alives. The data is not needed: any fill or
 * contract event means "list the contracts again", which is also what
 * keeps the agent correct when an event is lost.
 */
#include "node-agent/events.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EVENTS_LINE_MAX 1024 /* longer lines are data we do not read */
/* No byte (events or keep-alives, every sse_keepalive_s = 15 s by default)
 * for this long means the connection is dead without a reset. */
#define EVENTS_SILENT_S 90L

struct events_stream {
	struct client *cl;
	int wake_fd;
	struct http1_conn *h;
	int up; /* a stream is open and the exchange accepted it (200) */
	int64_t last_byte_ms;
	int64_t opened_ms; /* when the stream last opened */
	int64_t next_try_ms, backoff_ms;
	int64_t last_id; /* -1: none seen */
	char line[EVENTS_LINE_MAX];
	size_t len;
	int overlong; /* the current line did not fit: skip to its end */
	char type[32];
	int pending; /* contract events since the last events_wait returned */
	int64_t received, connects;
	int warned; /* the stream's failure was logged */
};

static void on_line(struct events_stream *s, const char *l)
{
	if (!l[0]) { /* the end of an event */
		if (s->type[0]) {
			s->received++;
			/* Fills and contract moves change what we must hold;
			 * an overflow or an event too large to send means some
			 * were lost, which a fresh listing also repairs. */
			if (!strcmp(s->type, "fill") ||
			    !strcmp(s->type, "contract") ||
			    !strcmp(s->type, "overflow") ||
			    !strcmp(s->type, "too-large"))
				s->pending++;
		}
		s->type[0] = 0;
		return;
	}
	if (l[0] == ':')
		return;
	if (!strncmp(l, "event:", 6)) {
		l += 6;
		l += *l == ' ';
		snprintf(s->type, sizeof s->type, "%s", l);
	} else if (!strncmp(l, "id:", 3)) {
		char *end;
		l += 3;
		l += *l == ' ';
		errno = 0;
		long long id = strtoll(l, &end, 10);
		if (!errno && end != l && !*end && id >= 0)
			s->last_id = id;
	}
}

static int on_data(void *ctx, const char *data, size_t n)
{
	struct events_stream *s = ctx;

	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (c == '\n') {
			if (!s->overlong) {
				if (s->len && s->line[s->len - 1] == '\r')
					s->len--;
				s->line[s->len] = 0;
				on_line(s, s->line);
			}
			s->len = 0;
			s->overlong = 0;
		} else if (!s->overlong) {
			if (s->len + 1 >= sizeof s->line)
				s->overlong = 1;
			else
				s->line[s->len++] = c;
		}
	}
	return 0;
}

/* A stream that stayed open this long was a working one: the next
 * reconnect starts from the shortest wait again. One that ends sooner (an
 * exchange or proxy answering 200 with a body that ends at once) keeps
 * backing off: reopened every second, it was two log lines and a contract
 * listing a second, for ever. */
#define EVENTS_STABLE_MS 10000

static void schedule_retry(struct events_stream *s)
{
	if (s->up && clock_mono_ms() - s->opened_ms >= EVENTS_STABLE_MS)
		s->backoff_ms = EVENTS_BACKOFF_MIN_MS;
	s->next_try_ms = clock_mono_ms() + s->backoff_ms;
	s->backoff_ms *= 2;
	if (s->backoff_ms > EVENTS_BACKOFF_MAX_MS)
		s->backoff_ms = EVENTS_BACKOFF_MAX_MS;
}

static void close_stream(struct events_stream *s)
{
	http1_close(s->h);
	s->up = 0;
	s->len = 0;
	s->overlong = 0;
	s->type[0] = 0;
}

/* Logs why the stream is down, once until it is up again. */
static void stream_down(struct events_stream *s, int status, const char *why)
{
	if (!s->warned)
		log_warn("event stream closed; polling until it is back",
		         "status=%d err=%s", status,
		         log_quote((char[600]){0}, 600, why));
	s->warned = 1;
	schedule_retry(s); /* before close_stream: it looks at s->up */
	close_stream(s);
}

static void open_stream(struct events_stream *s)
{
	char err[512], lid[64];
	const char *extra[3] = {"Accept: text/event-stream", NULL, NULL};
	int status = 0;

	if (s->last_id >= 0) {
		snprintf(lid, sizeof lid, "Last-Event-ID: %" PRId64,
		         s->last_id);
		extra[1] = lid;
	}
	if (client_stream_open(s->cl, s->h, "GET", "/v1/events", extra, &status,
	                       err, sizeof err) < 0) {
		stream_down(s, 0, err);
		return;
	}
	if (status != 200) {
		snprintf(err, sizeof err,
		         "the exchange refused the stream (HTTP %d)", status);
		stream_down(s, status, err);
		return;
	}
	s->up = 1;
	s->last_byte_ms = s->opened_ms = clock_mono_ms();
	s->connects++;
	s->warned = 0;
	/* Whatever happened while the stream was down is unknown here:
	 * have the caller look. */
	s->pending++;
	log_info("event stream open", "last_id=%" PRId64, s->last_id);
}

struct events_stream *events_new(struct client *cl, int wake_fd)
{
	char err[512];
	struct events_stream *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cl = cl;
	s->wake_fd = wake_fd;
	s->last_id = -1;
	s->backoff_ms = EVENTS_BACKOFF_MIN_MS;
	/* client_new checked the same URL and CA file: only memory can
	 * fail here. */
	if (!(s->h = client_conn_new(cl, err, sizeof err))) {
		free(s);
		return NULL;
	}
	return s;
}

void events_free(struct events_stream *s)
{
	if (!s)
		return;
	http1_free(s->h);
	free(s);
}

int events_up(const struct events_stream *s)
{
	return s->up;
}

int64_t events_received(const struct events_stream *s)
{
	return s->received;
}

int64_t events_connects(const struct events_stream *s)
{
	return s->connects;
}

/* Reads what has arrived, without waiting. A stream that ends or
 * breaks, or stays silent past EVENTS_SILENT_S (a connection dead without
 * a reset), is over: polling until it is opened again. */
static void collect(struct events_stream *s)
{
	char err[512];
	int r;

	while ((r = http1_stream_read(s->h, on_data, s, 0, err, sizeof err)) ==
	       1)
		s->last_byte_ms = clock_mono_ms();
	if (r < 0) {
		stream_down(s, 200, err);
	} else if (clock_mono_ms() - s->last_byte_ms >=
	           EVENTS_SILENT_S * 1000) {
		snprintf(err, sizeof err, "no byte for %ld s", EVENTS_SILENT_S);
		stream_down(s, 200, err);
	}
}

static int drain_wake(struct events_stream *s)
{
	char buf[64];
	int woke = 0;
	struct pollfd p = {s->wake_fd, POLLIN, 0};

	while (s->wake_fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) &&
	       read(s->wake_fd, buf, sizeof buf) > 0)
		woke = 1;
	return woke;
}

int events_wait(struct events_stream *s, int64_t deadline_ms)
{
	for (;;) {
		int64_t now = clock_mono_ms();
		if (!s->up && now >= s->next_try_ms)
			open_stream(s);
		if (s->up)
			collect(s);
		if (s->pending) {
			int n = s->pending;
			s->pending = 0;
			return n;
		}
		now = clock_mono_ms();
		if (now >= deadline_ms || drain_wake(s))
			return 0;
		int64_t wait = deadline_ms - now;
		if (!s->up && s->next_try_ms - now < wait)
			wait = s->next_try_ms - now;
		/* Wake in time to notice a silent stream. */
		if (s->up &&
		    s->last_byte_ms + EVENTS_SILENT_S * 1000 - now < wait)
			wait = s->last_byte_ms + EVENTS_SILENT_S * 1000 - now;
		if (wait < 1)
			wait = 1;
		struct pollfd p[2];
		nfds_t n = 0;
		if (s->wake_fd >= 0)
			p[n++] = (struct pollfd){s->wake_fd, POLLIN, 0};
		if (s->up) {
			if (http1_buffered(s->h))
				continue; /* libssl holds bytes: read them */
			p[n++] = (struct pollfd){http1_fd(s->h), POLLIN, 0};
		}
		poll(n ? p : NULL, n, (int)wait);
	}
}
