/* events_db.c — see events_db.h. */
#include "exchange/events_db.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"

/* Events read per query while catching up. */
#define FETCH_ROWS 1000
/* Events published outside a writer batch waiting to be written: more
 * (PostgreSQL away for long) are dropped, and the log says how many. */
#define OUTBOX_MAX 65536

struct out_event {
	char type[24];
	int64_t a, ta, b, tb;
	char *data;
};

struct events_db {
	struct events *e;
	char conninfo[512];
	PGconn *c;    /* the thread's: LISTEN, reads, the outbox, pruning */
	int64_t last; /* the newest id put into the ring */
	time_t prune_at;
	pthread_t th;
	int wake[2];        /* a byte here: the outbox has events, or stop */
	pthread_mutex_t mu; /* the outbox, stop */
	struct out_event *out;
	size_t nout;
	long dropped;
	int stop;
};

/* Reads every event after d->last into the ring. -1 when the query
 * failed. */
static int fetch(struct events_db *d, char *err, size_t errlen)
{
	for (;;) {
		char from[24], rows[24];
		snprintf(from, sizeof from, "%lld", (long long)d->last);
		snprintf(rows, sizeof rows, "%d", FETCH_ROWS);
		const char *pv[] = {from, rows};
		PGresult *r = db_exec(
		    d->c, PGRES_TUPLES_OK,
		    "SELECT id, type, acct_a, team_a, acct_b, team_b, data "
		    "FROM "
		    "events WHERE id > $1::bigint ORDER BY id LIMIT $2::int",
		    2, pv, err, errlen);
		if (!r)
			return -1;
		int n = PQntuples(r);
		for (int i = 0; i < n; i++) {
			int64_t id = db_int(r, i, 0);
			events_put(d->e, id, PQgetvalue(r, i, 1),
			           db_int(r, i, 2), db_int(r, i, 3),
			           db_int(r, i, 4), db_int(r, i, 5),
			           PQgetvalue(r, i, 6));
			d->last = id;
		}
		PQclear(r);
		metrics_events_read(n);
		if (n < FETCH_ROWS)
			return 0;
	}
}

static void out_free(struct out_event *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].data);
	free(v);
}

/* Writes events v[0..n) on c in one statement (EVENTS_DB_INSERT_SQL).
 * 0, or -1 with err. */
static int insert_events(PGconn *c, const struct out_event *v, size_t n,
                         char *err, size_t errlen)
{
	struct pgarr col[6];
	memset(col, 0, sizeof col);
	for (size_t i = 0; i < n; i++) {
		pgarr_str(&col[0], v[i].type);
		pgarr_i64(&col[1], v[i].a);
		pgarr_i64(&col[2], v[i].ta);
		pgarr_i64(&col[3], v[i].b);
		pgarr_i64(&col[4], v[i].tb);
		pgarr_str(&col[5], v[i].data);
	}
	const char *pv[6];
	int rc = 0;
	for (int k = 0; k < 6; k++)
		if (!(pv[k] = pgarr_text(&col[k])))
			rc = -1;
	if (rc < 0) {
		snprintf(err, errlen, "out of memory for the events");
	} else {
		PGresult *r = db_exec(c, PGRES_COMMAND_OK, EVENTS_DB_INSERT_SQL,
		                      6, pv, err, errlen);
		rc = r ? 0 : -1;
		PQclear(r);
	}
	for (int k = 0; k < 6; k++)
		pgarr_free(&col[k]);
	return rc;
}

/* Writes the outbox's events in one statement. -1 when it failed: they
 * stay in the outbox, before any published since. */
static int flush(struct events_db *d, char *err, size_t errlen)
{
	pthread_mutex_lock(&d->mu);
	struct out_event *v = d->out;
	size_t n = d->nout;
	long dropped = d->dropped;
	d->out = NULL, d->nout = 0, d->dropped = 0;
	pthread_mutex_unlock(&d->mu);
	if (dropped)
		log_error("events dropped: PostgreSQL away too long",
		          "events=%ld", dropped);
	if (n == 0)
		return 0;
	int rc = insert_events(d->c, v, n, err, errlen);
	if (rc == 0) {
		out_free(v, n);
		return 0;
	}
	/* put them back in front of what came meanwhile */
	pthread_mutex_lock(&d->mu);
	struct out_event *all = realloc(v, (n + d->nout) * sizeof *all);
	if (all) {
		memcpy(all + n, d->out, d->nout * sizeof *all);
		free(d->out);
		d->out = all, d->nout += n;
	} else {
		d->dropped += (long)n;
		out_free(v, n);
	}
	pthread_mutex_unlock(&d->mu);
	return -1;
}

/* Deletes the events older than the newest EVENTS_DB_KEEP, every
 * EVENTS_DB_PRUNE_S. Whichever instance does it, it is the same. */
static int prune(struct events_db *d, char *err, size_t errlen)
{
	time_t now = time(NULL);
	if (now < d->prune_at)
		return 0;
	d->prune_at = now + EVENTS_DB_PRUNE_S;
	char keep[24];
	snprintf(keep, sizeof keep, "%d", EVENTS_DB_KEEP);
	const char *pv[] = {keep};
	PGresult *r =
	    db_exec(d->c, PGRES_COMMAND_OK,
	            "DELETE FROM events WHERE id <= (SELECT last FROM "
	            "event_head) - $1::bigint",
	            1, pv, err, errlen);
	PQclear(r);
	return r ? 0 : -1;
}

/* A connection that listens, and the ring caught up from d->last. */
static int connect_listen(struct events_db *d, char *err, size_t errlen)
{
	if (d->c)
		PQfinish(d->c);
	d->c = db_connect(d->conninfo, err, errlen);
	if (!d->c)
		return -1;
	PGresult *r = db_exec(d->c, PGRES_COMMAND_OK, "LISTEN ramex_events", 0,
	                      NULL, err, errlen);
	if (r && d->last == INT64_MAX) { /* the first time: where to start */
		PQclear(r);
		r = db_exec(d->c, PGRES_TUPLES_OK,
		            "SELECT last FROM event_head", 0, NULL, err,
		            errlen);
		int64_t head = r && PQntuples(r) == 1 ? db_int(r, 0, 0) : 0;
		d->last = head > EVENTS_RING ? head - EVENTS_RING : 0;
	}
	if (!r || fetch(d, err, errlen) < 0) {
		PQclear(r);
		PQfinish(d->c);
		d->c = NULL;
		return -1;
	}
	PQclear(r);
	return 0;
}

static void *follow(void *arg)
{
	struct events_db *d = arg;
	bool said = false;
	for (;;) {
		char err[512] = "";
		pthread_mutex_lock(&d->mu);
		int stop = d->stop;
		pthread_mutex_unlock(&d->mu);
		if (stop)
			break;
		if (!d->c && connect_listen(d, err, sizeof err) < 0) {
			if (!said)
				log_error("event stream: database unavailable",
				          "err=\"%s\"", err);
			said = true;
			poll(&(struct pollfd){d->wake[0], POLLIN, 0}, 1, 1000);
			char b[64];
			while (read(d->wake[0], b, sizeof b) > 0)
				;
			continue;
		}
		if (said)
			log_info("event stream: database reconnected", NULL);
		said = false;
		if (flush(d, err, sizeof err) < 0 ||
		    fetch(d, err, sizeof err) < 0 ||
		    prune(d, err, sizeof err) < 0) {
			if (db_broken(d->c)) {
				PQfinish(d->c);
				d->c = NULL;
			} else {
				/* the connection works, the query not: wait
				 * rather than spin on it */
				log_warn("event stream: a query failed",
				         "err=\"%s\"", err);
				poll(&(struct pollfd){d->wake[0], POLLIN, 0}, 1,
				     1000);
			}
			continue;
		}
		struct pollfd pf[2] = {{PQsocket(d->c), POLLIN, 0},
		                       {d->wake[0], POLLIN, 0}};
		/* a notification, the outbox, or once a second anyway */
		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			continue;
		if (pf[1].revents) {
			char b[64];
			while (read(d->wake[0], b, sizeof b) > 0)
				;
		}
		if (pf[0].revents && !PQconsumeInput(d->c)) {
			PQfinish(d->c);
			d->c = NULL;
			continue;
		}
		PGnotify *n;
		while ((n = PQnotifies(d->c)))
			PQfreemem(n);
	}
	return NULL;
}

int events_db_write(PGconn *c, const char *type, int64_t acct_a, int64_t team_a,
                    int64_t acct_b, int64_t team_b, const char *data, char *err,
                    size_t errlen)
{
	struct out_event ev = {.a = acct_a,
	                       .ta = team_a,
	                       .b = acct_b,
	                       .tb = team_b,
	                       .data = strdup(data)};
	snprintf(ev.type, sizeof ev.type, "%s", type);
	int rc = ev.data ? insert_events(c, &ev, 1, err, errlen) : -1;
	if (!ev.data)
		snprintf(err, errlen, "out of memory for the event");
	free(ev.data);
	return rc;
}

/* events_publish, shared: into the outbox, for the thread to write. */
static void outbox(void *arg, const char *type, int64_t a, int64_t ta,
                   int64_t b, int64_t tb, const char *data)
{
	struct events_db *d = arg;
	char *copy = strdup(data);
	pthread_mutex_lock(&d->mu);
	struct out_event *v = NULL;
	if (copy && d->nout < OUTBOX_MAX &&
	    (v = realloc(d->out, (d->nout + 1) * sizeof *v))) {
		d->out = v;
		struct out_event *o = &v[d->nout++];
		snprintf(o->type, sizeof o->type, "%s", type);
		o->a = a, o->ta = ta, o->b = b, o->tb = tb;
		o->data = copy;
	} else {
		free(copy);
		d->dropped++;
	}
	pthread_mutex_unlock(&d->mu);
	if (write(d->wake[1], "", 1) < 0) {
		/* full: the thread is awake already */
	}
}

struct events_db *events_db_start(struct events *e, const char *conninfo,
                                  char *err, size_t errlen)
{
	struct events_db *d = calloc(1, sizeof *d);
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->e = e;
	snprintf(d->conninfo, sizeof d->conninfo, "%s", conninfo);
	pthread_mutex_init(&d->mu, NULL);
	d->wake[0] = d->wake[1] = -1;
	if (pipe2(d->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		snprintf(err, errlen, "could not make a pipe: %s",
		         strerror(errno));
		goto fail;
	}
	/* the ring starts with the newest events of the table: the head
	 * read on the connection that listens, before it reads them, so
	 * that none committed meanwhile is missed */
	d->last = INT64_MAX;
	if (connect_listen(d, err, errlen) < 0)
		goto fail;
	events_set_outbox(e, outbox, d);
	if (pthread_create(&d->th, NULL, follow, d) != 0) {
		events_set_outbox(e, NULL, NULL);
		snprintf(err, errlen, "could not start the event thread");
		goto fail;
	}
	pthread_setname_np(d->th, "ramexd-events");
	log_info("event stream shared through PostgreSQL", "last=%lld",
	         (long long)d->last);
	return d;
fail:
	if (d->c)
		PQfinish(d->c);
	for (int i = 0; i < 2; i++)
		if (d->wake[i] >= 0)
			close(d->wake[i]);
	pthread_mutex_destroy(&d->mu);
	free(d);
	return NULL;
}

void events_db_stop(struct events_db *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_mutex_unlock(&d->mu);
	if (write(d->wake[1], "", 1) < 0) {
		/* full: it wakes all the same */
	}
	pthread_join(d->th, NULL);
	char err[256];
	if (d->c && flush(d, err, sizeof err) < 0)
		log_warn("events not written at shutdown", "err=\"%s\"", err);
	pthread_mutex_lock(&d->mu);
	if (d->nout)
		log_warn("events not written at shutdown", "events=%zu",
		         d->nout);
	out_free(d->out, d->nout);
	d->out = NULL, d->nout = 0;
	pthread_mutex_unlock(&d->mu);
	if (d->c)
		PQfinish(d->c);
	close(d->wake[0]);
	close(d->wake[1]);
	pthread_mutex_destroy(&d->mu);
	free(d);
}
