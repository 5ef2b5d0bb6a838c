/* auth_nonces.c — see auth_nonces.h. */
#include "exchange/auth_nonces.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"

/* One thread's nonce, waiting for its group. */
struct waiter {
	struct waiter *next;
	const char *key_id, *nonce;
	int64_t expires;
	int rc;     /* PENDING until its group is written; under mu */
	int result; /* the group's writer's, copied to rc under mu */
};
#define PENDING 2

struct auth_nonces {
	char conninfo[512];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct waiter *queue; /* asked for, not taken into a group yet */
	bool writing;         /* a thread is writing a group */
	/* the writer's, whichever thread it is (only one at a time) */
	PGconn *c;
	time_t prune_at;
	bool said; /* the database's failure was logged */
};

struct auth_nonces *auth_nonces_new(const char *conninfo)
{
	struct auth_nonces *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	snprintf(s->conninfo, sizeof s->conninfo, "%s", conninfo);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

void auth_nonces_free(struct auth_nonces *s)
{
	if (!s)
		return;
	if (s->c)
		PQfinish(s->c);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

/* The writer's connection, made when missing; NULL with err. */
static PGconn *conn(struct auth_nonces *s, char *err, size_t errlen)
{
	if (s->c && db_alive(s->c)) /* idle between groups: a restart */
		return s->c;
	if (s->c)
		PQfinish(s->c);
	s->c = db_connect(s->conninfo, err, errlen);
	if (!s->c)
		return NULL;
	/* a nonce is only as durable as the replay window is long: no
	 * fsync waited for (auth_nonces.h) */
	PGresult *r =
	    db_exec(s->c, PGRES_COMMAND_OK, "SET synchronous_commit = off", 0,
	            NULL, err, errlen);
	if (!r) {
		PQfinish(s->c);
		s->c = NULL;
		return NULL;
	}
	PQclear(r);
	/* prepared: planned once, not for every group (about half of what a
	 * group cost PostgreSQL when it was planned each time) */
	r = PQprepare(s->c, "nonce_take",
	              "INSERT INTO auth_nonces (key_id, nonce, expires) "
	              "SELECT * FROM unnest($1::text[], $2::text[], "
	              "$3::bigint[]) ON CONFLICT DO NOTHING RETURNING key_id, "
	              "nonce",
	              3, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		snprintf(err, errlen, "could not prepare: %s",
		         PQerrorMessage(s->c));
		err[strcspn(err, "\n")] = 0;
		PQclear(r);
		PQfinish(s->c);
		s->c = NULL;
		return NULL;
	}
	PQclear(r);
	return s->c;
}

/* Writes one group: sets each waiter's result. Without s->mu. */
static void write_group(struct auth_nonces *s, struct waiter *g)
{
	char err[512] = "";
	struct pgarr col[3];
	memset(col, 0, sizeof col);
	int n = 0;
	for (struct waiter *w = g; w; w = w->next, n++) {
		pgarr_str(&col[0], w->key_id);
		pgarr_str(&col[1], w->nonce);
		pgarr_i64(&col[2], w->expires);
	}
	const char *pv[3] = {pgarr_text(&col[0]), pgarr_text(&col[1]),
	                     pgarr_text(&col[2])};
	PGresult *r = NULL;
	PGconn *c = pv[0] && pv[1] && pv[2] ? conn(s, err, sizeof err) : NULL;
	if (!pv[0] || !pv[1] || !pv[2])
		snprintf(err, sizeof err, "out of memory for the nonces");
	if (c) {
		r = PQexecPrepared(c, "nonce_take", 3, pv, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			snprintf(err, sizeof err, "%s", PQerrorMessage(c));
			err[strcspn(err, "\n")] = 0;
			PQclear(r);
			r = NULL;
		}
	}
	for (struct waiter *w = g; w; w = w->next) {
		w->result = r ? 0 : -1; /* not returned: taken before */
		for (int i = 0; r && i < PQntuples(r); i++)
			if (strcmp(PQgetvalue(r, i, 1), w->nonce) == 0 &&
			    strcmp(PQgetvalue(r, i, 0), w->key_id) == 0) {
				w->result = 1;
				break;
			}
	}
	PQclear(r);
	for (int k = 0; k < 3; k++)
		pgarr_free(&col[k]);
	metrics_nonce_group(n, r != NULL);
	if (!r && !s->said)
		log_error("could not check nonces in PostgreSQL",
		          "err=\"%s\" effect=\"signed requests get 503\"", err);
	s->said = !r;
	/* the expired ones, now and then */
	time_t now = time(NULL);
	if (r && now >= s->prune_at) {
		s->prune_at = now + AUTH_NONCES_PRUNE_S;
		char t[24];
		snprintf(t, sizeof t, "%lld", (long long)now);
		const char *pt[] = {t};
		PGresult *d = db_exec(s->c, PGRES_COMMAND_OK,
		                      "DELETE FROM auth_nonces WHERE expires < "
		                      "$1::bigint",
		                      1, pt, err, sizeof err);
		if (!d)
			log_warn("could not delete expired nonces",
			         "err=\"%s\"", err);
		PQclear(d);
	}
}

int auth_nonces_take(struct auth_nonces *s, const char *key_id,
                     const char *nonce, int64_t expires)
{
	struct waiter me = {NULL, key_id, nonce, expires, PENDING, 0};
	pthread_mutex_lock(&s->mu);
	me.next = s->queue;
	s->queue = &me;
	while (me.rc == PENDING) {
		if (s->writing) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		/* this thread writes everything asked for so far */
		struct waiter *g = s->queue;
		s->queue = NULL;
		s->writing = true;
		pthread_mutex_unlock(&s->mu);
		write_group(s, g);
		pthread_mutex_lock(&s->mu);
		for (struct waiter *w = g; w; w = w->next)
			w->rc = w->result;
		s->writing = false;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return me.rc;
}
