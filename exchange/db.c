/* db.c — see db.h. */
#include "exchange/db.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

static void chomp(char *s)
{
	s[strcspn(s, "\n")] = 0;
}

/* Which server a conninfo names, for messages: host, port, database and
 * user, never the rest (a password in it, or in a URI's user:password@,
 * must not reach a log). -1 when it cannot be read. */
static int conninfo_name(const char *conninfo, char *out, size_t outlen)
{
	static const char *const keep[] = {"host",   "hostaddr", "port",
	                                   "dbname", "user",     NULL};
	size_t n = 0;
	out[0] = 0;
	PQconninfoOption *o = PQconninfoParse(conninfo, NULL);
	if (!o)
		return -1;
	for (int k = 0; keep[k]; k++)
		for (PQconninfoOption *p = o; p->keyword; p++)
			if (strcmp(p->keyword, keep[k]) == 0 && p->val &&
			    p->val[0] && n < outlen)
				n += (size_t)snprintf(out + n, outlen - n,
				                      "%s%s=%s", n ? " " : "",
				                      p->keyword, p->val);
	PQconninfoFree(o);
	return 0;
}

/* Whether the conninfo or the environment bounds the connection attempt. */
static bool has_connect_timeout(const char *conninfo)
{
	const char *e = getenv("PGCONNECT_TIMEOUT");
	if (e && *e)
		return true;
	bool has = false;
	PQconninfoOption *o = PQconninfoParse(conninfo, NULL);
	for (PQconninfoOption *p = o; p && p->keyword; p++)
		if (strcmp(p->keyword, "connect_timeout") == 0 && p->val &&
		    p->val[0])
			has = true;
	PQconninfoFree(o);
	return has;
}

PGconn *db_connect(const char *conninfo, char *err, size_t errlen)
{
	/* libpq waits for a server that accepts and never answers (one
	 * that hangs, a network that drops packets) for ever, and so would
	 * every request that needs a new connection; the conninfo's own
	 * connect_timeout (or PGCONNECT_TIMEOUT) wins over this one */
	PGconn *c;
	if (has_connect_timeout(conninfo)) {
		c = PQconnectdb(conninfo);
	} else {
		static const char *const kw[] = {"dbname", "connect_timeout",
		                                 NULL};
		const char *const val[] = {conninfo, DB_CONNECT_TIMEOUT_S,
		                           NULL};
		c = PQconnectdbParams(kw, val, 1);
	}
	if (PQstatus(c) != CONNECTION_OK) {
		char who[256];
		if (conninfo_name(conninfo, who, sizeof who) < 0)
			/* libpq's text would quote the conninfo */
			snprintf(
			    err, errlen,
			    "could not connect to PostgreSQL: the conninfo "
			    "is neither key=value pairs nor a "
			    "postgresql:// URI");
		else
			snprintf(err, errlen,
			         "could not connect to PostgreSQL (%s): %s",
			         who[0] ? who : "libpq's defaults",
			         PQerrorMessage(c));
		chomp(err);
		PQfinish(c);
		return NULL;
	}
	/* UTF-8 both ways, whatever the database's encoding: what ramexd
	 * sends is UTF-8 (the edge checks it), and what it answers must be */
	PGresult *r = PQexec(c, "SET client_min_messages = warning; "
	                        "SET synchronous_commit = on; "
	                        "SET client_encoding = 'UTF8'; "
	                        "SET TIME ZONE 'UTC'");
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		snprintf(err, errlen, "could not set up the session: %s",
		         PQerrorMessage(c));
		chomp(err);
		PQfinish(c);
		return NULL;
	}
	return c;
}

/* The value a session gets by default, with the settings of the database
 * and role applied (reset_val), not the one this session set. */
static int setting(PGconn *c, const char *name, char *out, size_t outlen,
                   char *err, size_t errlen)
{
	const char *pv[] = {name};
	PGresult *r =
	    db_exec(c, PGRES_TUPLES_OK,
	            "SELECT reset_val FROM pg_settings WHERE name = $1", 1, pv,
	            err, errlen);
	if (!r)
		return -1;
	snprintf(out, outlen, "%s", PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return 0;
}

int db_check_durable(PGconn *c, char *err, size_t errlen)
{
	char v[64];
	if (setting(c, "fsync", v, sizeof v, err, errlen) < 0)
		return -1;
	if (strcmp(v, "on") != 0) {
		snprintf(err, errlen,
		         "the database runs with fsync=%s, so an acknowledged "
		         "order could be lost in a crash; set fsync = on in "
		         "postgresql.conf",
		         v);
		return -1;
	}
	if (setting(c, "synchronous_commit", v, sizeof v, err, errlen) < 0)
		return -1;
	/* every level but off waits for the local WAL flush */
	if (strcmp(v, "off") == 0) {
		snprintf(err, errlen,
		         "the database runs with synchronous_commit=%s, so a "
		         "commit may be acknowledged before it is on disk; set "
		         "synchronous_commit = on (in postgresql.conf, and for "
		         "this database and role)",
		         v);
		return -1;
	}
	return 0;
}

PGresult *db_exec(PGconn *c, ExecStatusType want, const char *sql, int n,
                  const char *const *params, char *err, size_t errlen)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != want) {
		snprintf(err, errlen, "%s", PQerrorMessage(c));
		chomp(err);
		PQclear(r);
		return NULL;
	}
	return r;
}

PGresult *db_exec_state(PGconn *c, ExecStatusType want, const char *sql, int n,
                        const char *const *params, char *err, size_t errlen,
                        char state[6])
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	state[0] = 0;
	if (PQresultStatus(r) != want) {
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		snprintf(state, 6, "%s", st ? st : "");
		snprintf(err, errlen, "%s", PQerrorMessage(c));
		chomp(err);
		PQclear(r);
		return NULL;
	}
	return r;
}

PGresult *db_exec_fail(PGconn *c, ExecStatusType want, const char *sql, int n,
                       const char *const *params, struct db_fail *f)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) == want)
		return r;
	const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *cn = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME);
	snprintf(f->state, sizeof f->state, "%s", st ? st : "");
	snprintf(f->constraint, sizeof f->constraint, "%s", cn ? cn : "");
	snprintf(f->text, sizeof f->text, "%s", PQerrorMessage(c));
	chomp(f->text);
	PQclear(r);
	return NULL;
}

bool db_broken(PGconn *c)
{
	return !c || PQstatus(c) != CONNECTION_OK;
}

bool db_alive(PGconn *c)
{
	/* A server that ends an idle session (a restart, a fast shutdown,
	 * pg_terminate_backend) sends FATAL, then closes. libpq takes the
	 * FATAL of an idle session as a notice and stays CONNECTION_OK; one
	 * PQconsumeInput reads it, and only the next read sees the end of
	 * file. So read while there is something to read (a few times at
	 * most: an idle session gets little, a NOTIFY or a parameter). */
	for (int i = 0; i < 8; i++) {
		if (!c || PQstatus(c) != CONNECTION_OK)
			return false;
		struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
		if (p.fd < 0)
			return false;
		if (poll(&p, 1, 0) <= 0)
			return true; /* nothing waits: as alive as it can tell */
		if (!PQconsumeInput(c))
			return false;
	}
	return PQstatus(c) == CONNECTION_OK;
}

int db_ping(PGconn *c, int timeout_ms, char *err, size_t errlen)
{
	int64_t until = clock_mono_ms() + timeout_ms;
	if (db_broken(c) || !PQsendQuery(c, "SELECT 1")) {
		snprintf(err, errlen, "%s",
		         c ? PQerrorMessage(c) : "no connection");
		chomp(err);
		return -1;
	}
	while (PQisBusy(c)) {
		int64_t left = until - clock_mono_ms();
		struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
		int n = left > 0 ? poll(&p, 1, (int)left) : 0;
		if (n == 0) {
			/* The query is under way and its answer may still
			 * come: the connection cannot serve another. Shut
			 * it down, so that its results below end at once
			 * and the pool makes a new one. */
			shutdown(PQsocket(c), SHUT_RDWR);
			PGresult *r;
			while ((r = PQgetResult(c)))
				PQclear(r);
			snprintf(err, errlen,
			         "PostgreSQL did not answer SELECT 1 within "
			         "%d ms",
			         timeout_ms);
			return -2;
		}
		if (n > 0 && !PQconsumeInput(c))
			break; /* the connection broke: PQgetResult says why */
	}
	int ok = 0;
	PGresult *r;
	while ((r = PQgetResult(c))) {
		if (PQresultStatus(r) != PGRES_TUPLES_OK && ok == 0) {
			snprintf(err, errlen, "%s", PQerrorMessage(c));
			chomp(err);
			ok = -1;
		}
		PQclear(r);
	}
	if (ok == 0 && db_broken(c)) {
		snprintf(err, errlen, "%s", PQerrorMessage(c));
		chomp(err);
		ok = -1;
	}
	return ok;
}

bool db_state_lost(const char *s)
{
	if (!s || !s[0])
		return true;
	return strncmp(s, "08", 2) == 0 || strncmp(s, "57", 2) == 0 ||
	       strncmp(s, "53", 2) == 0;
}

bool db_result_lost(PGconn *c, const PGresult *r)
{
	return db_broken(c) || !r ||
	       db_state_lost(PQresultErrorField(r, PG_DIAG_SQLSTATE));
}

int64_t db_int(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col)
	           ? 0
	           : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

int db_history_ahead(PGconn *c, char *err, size_t errlen)
{
	char months[16];
	snprintf(months, sizeof months, "%d", DB_HISTORY_AHEAD_MONTHS);
	const char *pv[] = {months};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT ramex_history_ahead($1::int)", 1, pv, err,
	                      errlen);
	if (!r)
		return -1;
	int made = (int)db_int(r, 0, 0);
	PQclear(r);
	return made;
}

/* --- pool -------------------------------------------------------------- */

struct db_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char conninfo[512];
	int n, nfree;
	PGconn **all;
	bool *busy;
	bool up;
	bool readonly;
};

struct db_pool *db_pool_new(const char *conninfo, int n)
{
	struct db_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->all = calloc((size_t)n, sizeof *p->all);
	p->busy = calloc((size_t)n, sizeof *p->busy);
	if (!p->all || !p->busy) {
		free(p->all), free(p->busy), free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(p->conninfo, sizeof p->conninfo, "%s", conninfo);
	p->n = p->nfree = n;
	p->up = true;
	return p;
}

struct db_pool *db_pool_new_readonly(const char *conninfo, int n)
{
	struct db_pool *p = db_pool_new(conninfo, n);
	if (p)
		p->readonly = true;
	return p;
}

/* A new connection of the pool, read-only when the pool is. */
static PGconn *pool_connect(struct db_pool *p, char *err, size_t errlen)
{
	PGconn *c = db_connect(p->conninfo, err, errlen);
	if (!c || !p->readonly)
		return c;
	PGresult *r = PQexec(c, "SET default_transaction_read_only = on");
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		snprintf(err, errlen, "could not make the session read-only: %s",
		         PQerrorMessage(c));
		chomp(err);
		PQfinish(c);
		return NULL;
	}
	return c;
}

void db_pool_free(struct db_pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		if (p->all[i])
			PQfinish(p->all[i]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->all), free(p->busy), free(p);
}

PGconn *db_acquire(struct db_pool *p)
{
	return db_acquire_within(p, -1, NULL);
}

PGconn *db_acquire_within(struct db_pool *p, int timeout_ms, bool *busy)
{
	int i;
	char err[512];
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	if (timeout_ms >= 0) {
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000)
			until.tv_sec++, until.tv_nsec -= 1000000000;
	}
	if (busy)
		*busy = false;
	pthread_mutex_lock(&p->mu);
	while (p->nfree == 0) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&p->cv, &p->mu);
		} else if (pthread_cond_timedwait(&p->cv, &p->mu, &until) &&
		           p->nfree == 0) {
			pthread_mutex_unlock(&p->mu);
			if (busy)
				*busy = true;
			return NULL;
		}
	}
	for (i = 0; i < p->n && p->busy[i]; i++)
		;
	p->busy[i] = true;
	p->nfree--;
	pthread_mutex_unlock(&p->mu);

	/* an idle connection the server closed meanwhile (a restart) is
	 * made again here, not found dead by the caller's query */
	PGconn *c = p->all[i];
	if (!db_alive(c)) {
		if (c)
			PQfinish(c);
		c = p->all[i] = pool_connect(p, err, sizeof err);
		if (!c) {
			if (__atomic_exchange_n(&p->up, false,
			                        __ATOMIC_RELAXED))
				log_warn("database unreachable", "err=\"%s\"",
				         p->readonly ? err
				                     : "see the writer's log");
			pthread_mutex_lock(&p->mu);
			p->busy[i] = false;
			p->nfree++;
			pthread_cond_signal(&p->cv);
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
	}
	__atomic_store_n(&p->up, true, __ATOMIC_RELAXED);
	return c;
}

void db_release(struct db_pool *p, PGconn *c)
{
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->n; i++) {
		if (p->all[i] == c && p->busy[i]) {
			if (db_broken(c))
				__atomic_store_n(&p->up, false,
				                 __ATOMIC_RELAXED);
			p->busy[i] = false;
			p->nfree++;
			break;
		}
	}
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

bool db_pool_up(struct db_pool *p)
{
	return __atomic_load_n(&p->up, __ATOMIC_RELAXED);
}

#include <jansson.h>

json_t *db_rows_json(const PGresult *r)
{
	json_t *a = json_array();
	int nf = PQnfields(r);
	for (int i = 0; a && i < PQntuples(r); i++) {
		json_t *o = json_object();
		for (int f = 0; f < nf; f++) {
			const char *v = PQgetvalue(r, i, f);
			json_t *x;
			Oid t = PQftype(r, f);
			if (PQgetisnull(r, i, f))
				x = json_null();
			else if (t == 20 || t == 21 || t == 23) /* int8/2/4 */
				x = json_integer(strtoll(v, NULL, 10));
			else if (t == 16) /* bool */
				x = json_boolean(v[0] == 't');
			else if (t == 114 || t == 3802) /* json, jsonb */
				x = json_loads(v, JSON_DECODE_ANY, NULL);
			else
				x = json_string(v);
			json_object_set_new(o, PQfname(r, f),
			                    x ? x : json_null());
		}
		json_array_append_new(a, o);
	}
	return a;
}
