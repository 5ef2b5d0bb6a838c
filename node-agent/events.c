/* events.c — the SSE reader over libcurl's multi interface; see events.h.
 *
 * The parser follows the SSE format as ramexd writes it (exchange/events.c):
 * `id:`, `event:` and `data:` lines, a blank line ends an event, lines that
 * start with ':' are keep-alives. The data is not needed: any fill or
 * contract event means "list the contracts again", which is also what
 * keeps the agent correct when an event is lost.
 */
#include "node-agent/events.h"

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
	CURLM *multi;
	CURL *easy;
	struct curl_slist *hl;
	int active; /* a transfer is running */
	int up;     /* ... and the exchange accepted it (200) */
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

int64_t events_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct events_stream *s = ctx;
	size_t n = size * nmemb;

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
	return n;
}

/* The end of the headers: accepted when the status is 200. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct events_stream *s = ctx;
	size_t n = size * nmemb;
	long status = 0;

	if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status == 200) {
			s->up = 1;
			s->backoff_ms = EVENTS_BACKOFF_MIN_MS;
			s->connects++;
			s->warned = 0;
			/* Whatever happened while the stream was down is
			 * unknown here: have the caller look. */
			s->pending++;
			log_info("event stream open", "last_id=%" PRId64,
			         s->last_id);
		}
	}
	return n;
}

static void schedule_retry(struct events_stream *s)
{
	s->next_try_ms = events_now_ms() + s->backoff_ms;
	s->backoff_ms *= 2;
	if (s->backoff_ms > EVENTS_BACKOFF_MAX_MS)
		s->backoff_ms = EVENTS_BACKOFF_MAX_MS;
}

static void close_stream(struct events_stream *s)
{
	if (s->active) {
		curl_multi_remove_handle(s->multi, s->easy);
		s->active = 0;
	}
	curl_slist_free_all(s->hl);
	s->hl = NULL;
	s->up = 0;
	s->len = 0;
	s->overlong = 0;
	s->type[0] = 0;
}

static void open_stream(struct events_stream *s)
{
	char err[512], lid[64];
	const char *extra[3] = {"Accept: text/event-stream", NULL, NULL};

	if (s->last_id >= 0) {
		snprintf(lid, sizeof lid, "Last-Event-ID: %" PRId64,
		         s->last_id);
		extra[1] = lid;
	}
	curl_easy_reset(s->easy);
	if (client_prepare(s->cl, s->easy, "GET", "/v1/events", extra, &s->hl,
	                   err, sizeof err) < 0) {
		log_error("could not open the event stream", "err=%s",
		          log_quote((char[600]){0}, 600, err));
		schedule_retry(s);
		return;
	}
	curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(s->easy, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, EVENTS_SILENT_S);
	if (curl_multi_add_handle(s->multi, s->easy) != CURLM_OK) {
		curl_slist_free_all(s->hl);
		s->hl = NULL;
		schedule_retry(s);
		return;
	}
	s->active = 1;
}

struct events_stream *events_new(struct client *cl, int wake_fd)
{
	struct events_stream *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cl = cl;
	s->wake_fd = wake_fd;
	s->last_id = -1;
	s->backoff_ms = EVENTS_BACKOFF_MIN_MS;
	if (!(s->multi = curl_multi_init()) || !(s->easy = curl_easy_init())) {
		events_free(s);
		return NULL;
	}
	return s;
}

void events_free(struct events_stream *s)
{
	if (!s)
		return;
	if (s->multi && s->easy)
		close_stream(s);
	if (s->easy)
		curl_easy_cleanup(s->easy);
	if (s->multi)
		curl_multi_cleanup(s->multi);
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

/* Reads what the transfer did; a finished transfer means the stream is
 * over (the exchange stopped, refused us, or the connection broke). */
static void collect(struct events_stream *s)
{
	CURLMsg *m;
	int left, running;

	curl_multi_perform(s->multi, &running);
	while ((m = curl_multi_info_read(s->multi, &left))) {
		if (m->msg != CURLMSG_DONE || m->easy_handle != s->easy)
			continue;
		long status = 0;
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
		if (!s->warned)
			log_warn(
			    "event stream closed; polling until it is back",
			    "status=%ld err=%s", status,
			    log_quote((char[300]){0}, 300,
			              curl_easy_strerror(m->data.result)));
		s->warned = 1;
		close_stream(s);
		schedule_retry(s);
		return;
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
		int64_t now = events_now_ms();
		if (!s->active && now >= s->next_try_ms)
			open_stream(s);
		if (s->active)
			collect(s);
		if (s->pending) {
			int n = s->pending;
			s->pending = 0;
			return n;
		}
		if (now >= deadline_ms || drain_wake(s))
			return 0;
		int64_t wait = deadline_ms - now;
		if (!s->active && s->next_try_ms - now < wait)
			wait = s->next_try_ms - now;
		if (wait < 1)
			wait = 1;
		if (s->active) {
			struct curl_waitfd w = {s->wake_fd, CURL_WAIT_POLLIN,
			                        0};
			curl_multi_poll(s->multi, s->wake_fd >= 0 ? &w : NULL,
			                s->wake_fd >= 0 ? 1 : 0, (int)wait,
			                NULL);
		} else {
			struct pollfd p = {s->wake_fd, POLLIN, 0};
			poll(s->wake_fd >= 0 ? &p : NULL,
			     s->wake_fd >= 0 ? 1 : 0, (int)wait);
		}
	}
}
