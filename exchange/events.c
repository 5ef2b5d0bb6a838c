/* events.c — see events.h. */
#include "exchange/events.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "exchange/auth.h"
#include "exchange/metrics.h"

struct event {
	int64_t id; /* 1, 2, ...; 0 = empty slot */
	char type[24];
	int64_t acct[2], team[2];
	char *data;
};

struct events {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* the ticker's sleep; signalled to stop it */
	struct event ring[EVENTS_RING];
	int64_t last; /* id of the newest event */
	int64_t base; /* ids up to it are not this run's (events_new) */
	int clients, max_clients, keepalive_s;
	int closed, stop_ticker;
	struct events_sub *subs; /* every subscriber, for waking */
	pthread_t ticker;
	int ticker_running;
	events_out_fn *out; /* shared: where events_publish sends them */
	void *out_arg;
};

struct events_sub {
	struct events *e;
	unsigned role;
	int64_t account, team;
	int64_t pos;     /* id of the last event handled */
	int unknown;     /* resumed from an id not this run's: say so */
	int hello;       /* the first chunk (retry hint) was sent */
	int ka_due;      /* a keep-alive comment is owed */
	int keepalive_s; /* seconds of quiet before a keep-alive */
	int64_t sent_ns; /* when it last had something to send */
	void (*wake)(void *arg);
	void *wake_arg;
	struct events_sub *prev, *next;
};

static void wake(struct events_sub *s)
{
	if (s->wake)
		s->wake(s->wake_arg);
}

/* Once a second: wakes the subscribers whose keep-alive is due, so that a
 * quiet stream still shows its client (and any proxy) that it is alive. */
static void *ticker(void *arg)
{
	struct events *e = arg;
	pthread_mutex_lock(&e->mu);
	while (!e->stop_ticker) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += 1;
		while (!e->stop_ticker &&
		       pthread_cond_timedwait(&e->cv, &e->mu, &until) !=
		           ETIMEDOUT)
			;
		int64_t now = clock_mono_ns();
		for (struct events_sub *s = e->subs; s; s = s->next)
			if (!s->ka_due &&
			    now - s->sent_ns >=
			        (int64_t)s->keepalive_s * 1000000000) {
				s->ka_due = 1;
				wake(s);
			}
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

struct events *events_new(int max_clients, int keepalive_s)
{
	struct events *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cv, &a);
	pthread_condattr_destroy(&a);
	e->max_clients = max_clients;
	e->keepalive_s = keepalive_s;
	/* A lone ramexd keeps its events in memory, and a restart loses
	 * those not yet sent. Its ids go on from the clock's microseconds
	 * (2^53 is reached in 2255), not from 1 again: a stream resumed with
	 * the last run's Last-Event-ID is then told that what followed it is
	 * not held, and no new event takes an old one's id. Shared, the
	 * database numbers them (events_set_outbox). */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	e->base = e->last = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	if (pthread_create(&e->ticker, NULL, ticker, e) == 0)
		e->ticker_running = 1;
	else
		log_warn("no keep-alive ticker for the event streams",
		         "err=\"out of threads\" effect=\"quiet streams get no "
		         "keep-alive comments\"");
	return e;
}

void events_free(struct events *e)
{
	if (!e)
		return;
	if (e->ticker_running) {
		pthread_mutex_lock(&e->mu);
		e->stop_ticker = 1;
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->ticker, NULL);
	}
	for (int i = 0; i < EVENTS_RING; i++)
		free(e->ring[i].data);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	free(e);
}

static int visible(const struct events_sub *s, const struct event *ev);

/* Puts an event in the ring as id (> e->last); under e->mu. Takes data. */
static void put_locked(struct events *e, int64_t id, const char *type,
                       int64_t acct_a, int64_t team_a, int64_t acct_b,
                       int64_t team_b, char *data)
{
	/* ids skipped (none from one writer; a gap in the database's) leave
	 * their slots empty, at most a ring's worth */
	int64_t from = e->last + 1 > id - EVENTS_RING + 1
	                   ? e->last + 1
	                   : id - EVENTS_RING + 1;
	for (int64_t k = from; k < id; k++) {
		struct event *gap = &e->ring[k % EVENTS_RING];
		free(gap->data);
		memset(gap, 0, sizeof *gap);
	}
	e->last = id;
	struct event *ev = &e->ring[id % EVENTS_RING];
	free(ev->data);
	ev->id = id;
	snprintf(ev->type, sizeof ev->type, "%s", type);
	ev->acct[0] = acct_a, ev->acct[1] = acct_b;
	ev->team[0] = team_a, ev->team[1] = team_b;
	ev->data = data;
	for (struct events_sub *s = e->subs; s; s = s->next)
		if (visible(s, ev))
			wake(s);
}

void events_publish(struct events *e, const char *type, int64_t acct_a,
                    int64_t team_a, int64_t acct_b, int64_t team_b,
                    const char *data)
{
	if (e->out) { /* shared: the database gives it its id */
		e->out(e->out_arg, type, acct_a, team_a, acct_b, team_b, data);
		return;
	}
	char *copy = strdup(data);
	if (!copy)
		return; /* a lost event is better than a stalled writer */
	pthread_mutex_lock(&e->mu);
	put_locked(e, e->last + 1, type, acct_a, team_a, acct_b, team_b, copy);
	pthread_mutex_unlock(&e->mu);
}

/* The database numbers the events (shared): the ring takes its ids, if
 * it holds none of its own yet. Under e->mu. */
static void db_ids(struct events *e)
{
	if (e->last != e->base || e->base == 0)
		return;
	for (struct events_sub *s = e->subs; s; s = s->next)
		if (s->pos == e->base)
			s->pos = 0; /* waiting for the first: it comes now */
	e->base = e->last = 0;
}

void events_put(struct events *e, int64_t id, const char *type, int64_t acct_a,
                int64_t team_a, int64_t acct_b, int64_t team_b,
                const char *data)
{
	char *copy = strdup(data);
	if (!copy)
		return;
	pthread_mutex_lock(&e->mu);
	db_ids(e);
	if (id > e->last)
		put_locked(e, id, type, acct_a, team_a, acct_b, team_b, copy);
	else
		free(copy);
	pthread_mutex_unlock(&e->mu);
}

void events_set_outbox(struct events *e, events_out_fn *out, void *arg)
{
	pthread_mutex_lock(&e->mu);
	if (out)
		db_ids(e);
	e->out = out;
	e->out_arg = arg;
	pthread_mutex_unlock(&e->mu);
}

bool events_shared(const struct events *e)
{
	return e && e->out;
}

struct events_sub *events_subscribe(struct events *e, unsigned role,
                                    int64_t account, int64_t team,
                                    int64_t last_id)
{
	struct events_sub *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	pthread_mutex_lock(&e->mu);
	if (e->clients >= e->max_clients || e->closed) {
		pthread_mutex_unlock(&e->mu);
		free(s);
		return NULL;
	}
	e->clients++;
	s->e = e, s->role = role, s->account = account, s->team = team;
	/* shared, a client may come from an instance that read further */
	int64_t ahead = e->out ? EVENTS_RING : 0;
	bool ours = last_id >= e->base && last_id <= e->last + ahead;
	s->pos = last_id >= 0 && ours ? last_id : e->last;
	s->unknown = last_id >= 0 && !ours;
	s->sent_ns = clock_mono_ns();
	s->keepalive_s = e->keepalive_s;
	s->next = e->subs;
	if (e->subs)
		e->subs->prev = s;
	e->subs = s;
	pthread_mutex_unlock(&e->mu);
	metrics_sse_clients(1);
	return s;
}

static int visible(const struct events_sub *s, const struct event *ev)
{
	if (s->role & AUTH_ADMIN)
		return 1;
	/* An operator sees every fill and contract, as its REST calls do;
	 * of the orders only its own account's, as GET /v1/orders shows it
	 * (an order event is a close: another operator's bids, a node's
	 * quotes, a person's cancel note were streamed to every operator). */
	if (s->role & AUTH_OPERATOR)
		return strcmp(ev->type, "order") != 0 ||
		       (s->account &&
		        (ev->acct[0] == s->account || ev->acct[1] == s->account));
	for (int i = 0; i < 2; i++) {
		if (s->role == AUTH_NODE && ev->acct[i] &&
		    ev->acct[i] == s->account)
			return 1;
		if (s->role == AUTH_TRADER && ev->team[i] &&
		    ev->team[i] == s->team)
			return 1;
	}
	return 0;
}

void events_set_wake(struct events_sub *s, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&s->e->mu);
	s->wake = fn, s->wake_arg = arg;
	pthread_mutex_unlock(&s->e->mu);
}

void events_set_keepalive(struct events_sub *s, int keepalive_s)
{
	assert(keepalive_s >= 1 && keepalive_s <= EVENTS_KEEPALIVE_MAX_S);
	pthread_mutex_lock(&s->e->mu);
	s->keepalive_s = keepalive_s;
	pthread_mutex_unlock(&s->e->mu);
}

long events_poll(struct events_sub *s, char *buf, size_t max)
{
	struct events *e = s->e;
	long n = 0;

	pthread_mutex_lock(&e->mu);
	if (e->closed) {
		n = -1;
	} else if (!s->hello) {
		s->hello = 1;
		/* the interval, so that a client can tell a silent stream
		 * (a frozen or unreachable exchange) from a quiet one */
		n = snprintf(buf, max,
		             "retry: 2000\n: ramex events, keep-alive every %d "
		             "s\n\n",
		             s->keepalive_s);
	} else if (s->unknown) {
		/* An id this run did not give (it restarted since): what
		 * came after it may be lost, and how much is not known. */
		s->unknown = 0;
		n = snprintf(buf, max,
		             "event: overflow\ndata: {\"lost\":null}\n\n");
	} else if (s->pos < e->last - EVENTS_RING + 1) {
		/* Fell behind the ring: say so, go on from the oldest. */
		int64_t lost = e->last - EVENTS_RING + 1 - s->pos;
		s->pos = e->last - EVENTS_RING;
		n = snprintf(buf, max,
		             "event: overflow\ndata: {\"lost\":%lld}\n\n",
		             (long long)lost);
	} else {
		while (s->pos < e->last) {
			struct event *ev = &e->ring[(s->pos + 1) % EVENTS_RING];
			s->pos++;
			if (ev->id != s->pos || !visible(s, ev))
				continue; /* a gap, or not its to see */
			int k = snprintf(buf, max,
			                 "id: %lld\nevent: %s\ndata: %s\n\n",
			                 (long long)ev->id, ev->type, ev->data);
			if (k < 0 ||
			    (size_t)k >= max) /* too big: skip, say so */
				k = snprintf(
				    buf, max,
				    "id: %lld\nevent: too-large\ndata: "
				    "{}\n\n",
				    (long long)ev->id);
			n = k;
			break;
		}
		if (n == 0 && s->ka_due)
			n = snprintf(buf, max, ": keep-alive\n\n");
	}
	if (n > 0) {
		s->ka_due = 0;
		s->sent_ns = clock_mono_ns();
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

void events_unsubscribe(struct events_sub *s)
{
	if (!s)
		return;
	struct events *e = s->e;
	pthread_mutex_lock(&e->mu);
	e->clients--;
	if (s->prev)
		s->prev->next = s->next;
	else
		e->subs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&e->mu);
	metrics_sse_clients(-1);
	free(s);
}

void events_close(struct events *e)
{
	pthread_mutex_lock(&e->mu);
	e->closed = 1;
	for (struct events_sub *s = e->subs; s; s = s->next)
		wake(s);
	pthread_mutex_unlock(&e->mu);
}
