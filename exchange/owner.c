/*
 * owner.c — see owner.h.
 *
 * Two mutexes: `cmu` guards the lock session (the thread's rounds, and a
 * claim from the writer when it creates a market), `mu` the tables the
 * writer and the handlers read (held, map, url). Nothing holds `mu` while
 * it waits for PostgreSQL, so a lookup never waits for a round.
 */
#include "exchange/owner.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exchange/db.h"
#include "exchange/input.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"
#include "exchange/writer.h"

/* the lock session's statements wait at most this long: a take waits for
 * the old owner's batches that passed their fence (schema/0017) */
#define OWNER_STMT_TIMEOUT "10s"
/* the least time between two rounds, however often they are asked for */
#define OWNER_KICK_MS 20

struct owner_market {
	int64_t id, epoch;
	char name[16];
	char url[OWNER_URL_MAX];
	bool owned; /* a row in market_owners */
	bool here;  /* held by this instance */
};

struct owner {
	struct owner_opts o;
	char conninfo[512];
	char instance[64];
	bool all;                         /* markets = all */
	char want[OWNER_MAX_MARKETS][16]; /* else these */
	int nwant;

	pthread_mutex_t cmu; /* the lock session */
	PGconn *c;

	pthread_mutex_t mu; /* what follows */
	struct owner_held held[OWNER_MAX_MARKETS];
	/* held[i]'s lock is held by the lock session now; false after the
	 * session was lost, until it is locked again (relock) */
	bool locked[OWNER_MAX_MARKETS];
	int nheld;
	bool session_down; /* the lock session is lost and not made again */
	struct owner_market map[OWNER_MAX_MARKETS];
	int nmap;
	char url[OWNER_URL_MAX];
	bool url_dirty; /* to write to the rows held */

	struct writer *w;
	pthread_t th;
	bool running;
	pthread_mutex_t smu; /* stop */
	pthread_cond_t scv;
	bool stopping;
	bool kick; /* a round now: the writer found a market fenced */
};

/* --- settings ------------------------------------------------------------ */

/* Splits the list into names (trimmed); -1 with err set on a bad one. */
static int parse_markets(const char *s, char (*out)[16], int *n, bool *all,
                         char *err, size_t errlen)
{
	*n = 0;
	*all = false;
	while (*s == ' ')
		s++;
	if (strcmp(s, "all") == 0) {
		*all = true;
		return 0;
	}
	while (*s) {
		size_t k = strcspn(s, ",");
		char name[32];
		const char *b = s, *e = s + k;
		while (b < e && *b == ' ')
			b++;
		while (e > b && e[-1] == ' ')
			e--;
		if ((size_t)(e - b) >= sizeof name) {
			snprintf(
			    err, errlen,
			    "markets: '%.20s...' is not a market name (spot "
			    "or perm-YYYY)",
			    b);
			return -1;
		}
		memcpy(name, b, (size_t)(e - b));
		name[e - b] = 0;
		if (!in_market_name_ok(name)) {
			snprintf(
			    err, errlen,
			    "markets must be all or a list of market names "
			    "(spot, perm-YYYY with YYYY from %d to %d) "
			    "separated by commas; '%s' is not one",
			    IN_PERM_YEAR_MIN, IN_PERM_YEAR_MAX, name);
			return -1;
		}
		if (*n == OWNER_MAX_MARKETS) {
			snprintf(err, errlen,
			         "markets names more than %d markets",
			         OWNER_MAX_MARKETS);
			return -1;
		}
		memcpy(out[(*n)++], name, strlen(name) + 1); /* name_ok: 9 */
		s += k;
		if (*s == ',')
			s++;
	}
	if (*n == 0) {
		snprintf(err, errlen,
		         "markets is empty: say all, or name the markets this "
		         "instance serves");
		return -1;
	}
	return 0;
}

int owner_markets_check(const char *markets, char *err, size_t errlen)
{
	int n;
	bool all;
	char(*tmp)[16] = malloc(OWNER_MAX_MARKETS * sizeof *tmp);
	if (!tmp) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = parse_markets(markets, tmp, &n, &all, err, errlen);
	free(tmp);
	return rc;
}

static bool wanted(const struct owner *ow, const char *name)
{
	if (ow->all)
		return true;
	for (int i = 0; i < ow->nwant; i++)
		if (strcmp(ow->want[i], name) == 0)
			return true;
	return false;
}

/* --- the tables ---------------------------------------------------------- */

static struct owner_market *map_find(struct owner *ow, const char *name,
                                     int64_t id)
{
	for (int i = 0; i < ow->nmap; i++)
		if (name ? strcmp(ow->map[i].name, name) == 0
		         : ow->map[i].id == id)
			return &ow->map[i];
	return NULL;
}

static int held_find(const struct owner *ow, int64_t id)
{
	for (int i = 0; i < ow->nheld; i++)
		if (ow->held[i].id == id)
			return i;
	return -1;
}

static void held_drop(struct owner *ow, int64_t id)
{
	int k = held_find(ow, id);
	if (k >= 0) {
		ow->nheld--;
		ow->held[k] = ow->held[ow->nheld];
		ow->locked[k] = ow->locked[ow->nheld];
	}
	struct owner_market *m = map_find(ow, NULL, id);
	if (m)
		m->here = false;
}

/* Tells the writer (when running) that market id was taken at epoch, or
 * (epoch 0) lost. The command is the writer's until it answers it. */
static void on_done_free(struct writer_cmd *c, void *arg)
{
	(void)arg;
	free(c->body);
	free(c);
}

static void tell_writer(struct owner *ow, int64_t id, int64_t epoch)
{
	if (!ow->w)
		return;
	struct writer_cmd *c = calloc(1, sizeof *c);
	if (!c) {
		log_error("out of memory telling the writer about a market",
		          "market_id=%lld", (long long)id);
		return;
	}
	c->kind = epoch ? WR_OWN : WR_DISOWN;
	c->own_market = id;
	c->own_epoch = epoch;
	writer_submit_async(ow->w, c, on_done_free, NULL);
}

/* --- the lock session ---------------------------------------------------- */

static int connect_lock(struct owner *ow, char *err, size_t errlen)
{
	if (ow->c)
		PQfinish(ow->c);
	ow->c = db_connect(ow->conninfo, err, errlen);
	if (!ow->c)
		return -1;
	/* named, so that an operator sees in pg_stat_activity which
	 * session holds which instance's markets */
	char app[64];
	snprintf(app, sizeof app, "ramexd-owner %.50s", ow->instance);
	const char *pv[] = {app};
	PGresult *r = db_exec(
	    ow->c, PGRES_TUPLES_OK,
	    "SELECT set_config('statement_timeout', '" OWNER_STMT_TIMEOUT
	    "', false), "
	    "set_config('application_name', $1, false)",
	    1, pv, err, errlen);
	if (!r) {
		PQfinish(ow->c);
		ow->c = NULL;
		return -1;
	}
	PQclear(r);
	return 0;
}

/* Tries the lock of every market of the array literal `ids`: the rows of
 * those now held by the session (their ids), or NULL with err set. */
static PGresult *try_locks(struct owner *ow, const char *ids, char *err,
                           size_t errlen)
{
	char cls[16];
	snprintf(cls, sizeof cls, "%d", OWNER_LOCK_CLASS);
	const char *pv[] = {ids, cls};
	if (!ids) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return db_exec(ow->c, PGRES_TUPLES_OK,
	               "SELECT id FROM unnest($1::bigint[]) AS id WHERE "
	               "pg_try_advisory_lock($2::int, id::int)",
	               2, pv, err, errlen);
}

/* The lock session is gone, and its locks with it. The markets held are
 * kept: nobody can have written to them unless it took them, and a take
 * bumps the epoch, which fails the writer's next batch (its fence) and
 * drops the market here at the next round (refresh). When the session is
 * back and the epochs unchanged, they are locked again (relock), with no
 * rebuild: a lone ramexd whose PostgreSQL restarted goes on as before. */
static void session_lost(struct owner *ow, const char *why)
{
	pthread_mutex_lock(&ow->mu);
	for (int i = 0; i < ow->nheld; i++)
		ow->locked[i] = false;
	bool was = ow->session_down;
	ow->session_down = true;
	int n = ow->nheld;
	pthread_mutex_unlock(&ow->mu);
	if (!was)
		log_error("lock session lost: its markets are locked again "
		          "when it is back, unless another instance took "
		          "them (then this one's batches for them fail)",
		          "markets=%d err=\"%s\"", n, why);
}

/* Locks again the markets held whose lock the session lost; those another
 * session holds are given up (below). -1 when the session failed. */
static int relock(struct owner *ow, char *err, size_t errlen)
{
	struct pgarr a = {0};
	pthread_mutex_lock(&ow->mu);
	int n = 0;
	for (int i = 0; i < ow->nheld; i++)
		if (!ow->locked[i]) {
			pgarr_i64(&a, ow->held[i].id);
			n++;
		}
	pthread_mutex_unlock(&ow->mu);
	if (n == 0) {
		pgarr_free(&a);
		return 0;
	}
	PGresult *r = try_locks(ow, pgarr_text(&a), err, errlen);
	pgarr_free(&a);
	if (!r)
		return -1;
	int64_t gone[OWNER_MAX_MARKETS];
	int ngone = 0;
	pthread_mutex_lock(&ow->mu);
	for (int i = 0; i < PQntuples(r); i++) {
		int k = held_find(ow, db_int(r, i, 0));
		if (k >= 0)
			ow->locked[k] = true;
	}
	/* another session holds the lock: an instance taking the market
	 * over (whose UPDATE of the epoch waits for this one's batches, and
	 * could wait for ever while they keep coming), or this instance's
	 * own old session not yet ended by PostgreSQL. Either way, stop
	 * serving it now; it is taken again once free. */
	for (int i = ow->nheld - 1; i >= 0; i--)
		if (!ow->locked[i]) {
			gone[ngone++] = ow->held[i].id;
			held_drop(ow, ow->held[i].id);
		}
	pthread_mutex_unlock(&ow->mu);
	if (PQntuples(r))
		log_info("markets locked again", "markets=%d", PQntuples(r));
	PQclear(r);
	for (int i = 0; i < ngone; i++) {
		log_error("market locked by another session: given up",
		          "market_id=%lld", (long long)gone[i]);
		tell_writer(ow, gone[i], 0);
	}
	return 0;
}

/* Reads markets and their owners into the routing table. -1 with err. */
static int refresh(struct owner *ow, char *err, size_t errlen)
{
	PGresult *r = db_exec(
	    ow->c, PGRES_TUPLES_OK,
	    "SELECT m.id, m.name, coalesce(o.epoch, 0), coalesce(o.url, ''), "
	    "o.market_id IS NOT NULL FROM markets m LEFT JOIN market_owners "
	    "o ON o.market_id = m.id ORDER BY m.id LIMIT 256",
	    0, NULL, err, errlen);
	if (!r)
		return -1;
	int64_t gone[OWNER_MAX_MARKETS];
	int ngone = 0;
	pthread_mutex_lock(&ow->mu);
	int n = PQntuples(r);
	for (int i = 0; i < n && i < OWNER_MAX_MARKETS; i++) {
		struct owner_market *m = &ow->map[i];
		m->id = db_int(r, i, 0);
		snprintf(m->name, sizeof m->name, "%s", PQgetvalue(r, i, 1));
		m->epoch = db_int(r, i, 2);
		snprintf(m->url, sizeof m->url, "%s", PQgetvalue(r, i, 3));
		m->owned = PQgetvalue(r, i, 4)[0] == 't';
		int k = held_find(ow, m->id);
		/* held here while the row says so; a row with another epoch
		 * means it was taken (the writer's fence says so too) */
		m->here = k >= 0 && ow->held[k].epoch == m->epoch;
		if (k >= 0 && !m->here) {
			gone[ngone++] = m->id;
			held_drop(ow, m->id);
		}
	}
	ow->nmap = n < OWNER_MAX_MARKETS ? n : OWNER_MAX_MARKETS;
	pthread_mutex_unlock(&ow->mu);
	PQclear(r);
	for (int i = 0; i < ngone; i++) {
		log_error("market taken by another instance", "market_id=%lld",
		          (long long)gone[i]);
		tell_writer(ow, gone[i], 0);
	}
	return 0;
}

/* Takes those of ids[0..n) whose lock is free: the lock, then a new epoch
 * each. Those taken go into held (and are told to the writer). How many
 * were taken, -1 when the session failed. */
static int take(struct owner *ow, const int64_t *ids, int n, char *err,
                size_t errlen)
{
	struct pgarr a = {0};
	for (int i = 0; i < n; i++)
		pgarr_i64(&a, ids[i]);
	PGresult *r = try_locks(ow, pgarr_text(&a), err, errlen);
	pgarr_free(&a);
	if (!r)
		return -1;
	int got = PQntuples(r);
	if (got == 0) {
		PQclear(r);
		return 0;
	}
	struct pgarr g = {0};
	for (int i = 0; i < got; i++)
		pgarr_raw(&g, PQgetvalue(r, i, 0));
	PQclear(r);
	char url[OWNER_URL_MAX];
	pthread_mutex_lock(&ow->mu);
	snprintf(url, sizeof url, "%s", ow->url);
	pthread_mutex_unlock(&ow->mu);
	const char *gp = pgarr_text(&g);
	const char *pv2[] = {gp, ow->instance, url};
	/* waits for the old owner's batches that passed their fence */
	r = gp ? db_exec(ow->c, PGRES_TUPLES_OK,
	                 "INSERT INTO market_owners (market_id, epoch, "
	                 "instance, url) SELECT id, 1, $2, $3 FROM "
	                 "unnest($1::bigint[]) AS id ON CONFLICT (market_id) "
	                 "DO UPDATE SET epoch = market_owners.epoch + 1, "
	                 "instance = EXCLUDED.instance, url = EXCLUDED.url, "
	                 "since = now() RETURNING market_id, epoch",
	                 3, pv2, err, errlen)
	       : NULL;
	if (!r) {
		/* not taken after all: let the locks go (when the session
		 * still works) so that another may */
		char cls[16];
		snprintf(cls, sizeof cls, "%d", OWNER_LOCK_CLASS);
		const char *pv3[] = {gp ? gp : "{}", cls};
		char e2[256];
		PGresult *u =
		    db_exec(ow->c, PGRES_TUPLES_OK,
		            "SELECT pg_advisory_unlock($2::int, id::int) "
		            "FROM unnest($1::bigint[]) AS id",
		            2, pv3, e2, sizeof e2);
		PQclear(u);
		pgarr_free(&g);
		return -1;
	}
	pgarr_free(&g);
	int n2 = PQntuples(r);
	for (int i = 0; i < n2; i++) {
		int64_t id = db_int(r, i, 0), ep = db_int(r, i, 1);
		pthread_mutex_lock(&ow->mu);
		if (ow->nheld < OWNER_MAX_MARKETS && held_find(ow, id) < 0) {
			ow->locked[ow->nheld] = true;
			ow->held[ow->nheld++] = (struct owner_held){id, ep};
		}
		struct owner_market *m = map_find(ow, NULL, id);
		if (m) {
			m->epoch = ep;
			m->owned = m->here = true;
			snprintf(m->url, sizeof m->url, "%s", url);
		}
		pthread_mutex_unlock(&ow->mu);
		log_info("market taken", "market_id=%lld epoch=%lld",
		         (long long)id, (long long)ep);
		metrics_market_taken();
		tell_writer(ow, id, ep);
	}
	PQclear(r);
	return n2;
}

/* Writes the URL to the rows of the markets held (under cmu, with the
 * session up); left to the next round when that fails. */
static void write_url(struct owner *ow)
{
	char err[256], url[OWNER_URL_MAX];
	struct pgarr held = {0};
	pthread_mutex_lock(&ow->mu);
	for (int i = 0; i < ow->nheld; i++)
		pgarr_i64(&held, ow->held[i].id);
	snprintf(url, sizeof url, "%s", ow->url);
	ow->url_dirty = false;
	pthread_mutex_unlock(&ow->mu);
	const char *pv[] = {pgarr_text(&held), url, ow->instance};
	PGresult *r = pv[0] ? db_exec(ow->c, PGRES_COMMAND_OK,
	                              "UPDATE market_owners SET url = $2 WHERE "
	                              "market_id = ANY($1::bigint[]) AND "
	                              "instance = $3",
	                              3, pv, err, sizeof err)
	                    : NULL;
	if (!r) {
		pthread_mutex_lock(&ow->mu);
		ow->url_dirty = true;
		pthread_mutex_unlock(&ow->mu);
	}
	PQclear(r);
	pgarr_free(&held);
}

/* One round: the session checked (and made again after a loss), the
 * routing table read, the URL written, the free markets wanted taken.
 * Under cmu. */
static void round_once(struct owner *ow)
{
	char err[512];
	if (!ow->c || PQstatus(ow->c) != CONNECTION_OK) {
		session_lost(ow, "the connection is broken");
		if (connect_lock(ow, err, sizeof err) < 0)
			return; /* said by session_lost; next round */
		log_info("lock session connected", NULL);
	}
	if (refresh(ow, err, sizeof err) < 0 ||
	    relock(ow, err, sizeof err) < 0) {
		session_lost(ow, err);
		PQfinish(ow->c);
		ow->c = NULL;
		return;
	}
	pthread_mutex_lock(&ow->mu);
	ow->session_down = false;
	pthread_mutex_unlock(&ow->mu);
	pthread_mutex_lock(&ow->mu);
	bool dirty = ow->url_dirty && ow->nheld > 0;
	int64_t ids[OWNER_MAX_MARKETS];
	int n = 0;
	for (int i = 0; i < ow->nmap; i++)
		if (!ow->map[i].here && held_find(ow, ow->map[i].id) < 0 &&
		    wanted(ow, ow->map[i].name))
			ids[n++] = ow->map[i].id;
	pthread_mutex_unlock(&ow->mu);
	if (dirty)
		write_url(ow);
	if (n && take(ow, ids, n, err, sizeof err) < 0) {
		log_warn("could not take markets", "err=\"%s\"", err);
		if (db_broken(ow->c)) {
			session_lost(ow, err);
			PQfinish(ow->c);
			ow->c = NULL;
		}
	}
}

static void *owner_main(void *arg)
{
	struct owner *ow = arg;
	for (;;) {
		/* rounds asked for (kick) come at most this often */
		usleep(OWNER_KICK_MS * 1000);
		pthread_mutex_lock(&ow->smu);
		if (!ow->stopping && !ow->kick) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			/* a lost session is made again sooner */
			int ms = ow->o.poll_ms;
			pthread_mutex_lock(&ow->mu);
			if (ow->session_down && ms > 100)
				ms = 100;
			pthread_mutex_unlock(&ow->mu);
			int64_t ns = until.tv_nsec + (int64_t)ms * 1000000;
			until.tv_sec += ns / 1000000000;
			until.tv_nsec = ns % 1000000000;
			pthread_cond_timedwait(&ow->scv, &ow->smu, &until);
		}
		bool stop = ow->stopping;
		ow->kick = false;
		pthread_mutex_unlock(&ow->smu);
		if (stop)
			break;
		pthread_mutex_lock(&ow->cmu);
		round_once(ow);
		pthread_mutex_unlock(&ow->cmu);
	}
	return NULL;
}

/* A round now rather than at the next poll (at most one each
 * OWNER_KICK_MS). */
static void kick(struct owner *ow)
{
	pthread_mutex_lock(&ow->smu);
	ow->kick = true;
	pthread_cond_signal(&ow->scv);
	pthread_mutex_unlock(&ow->smu);
}

/* --- interface ----------------------------------------------------------- */

struct owner *owner_new(const struct owner_opts *o, char *err, size_t errlen)
{
	struct owner *ow = calloc(1, sizeof *ow);
	if (!ow) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ow->o = *o;
	snprintf(ow->conninfo, sizeof ow->conninfo, "%s", o->conninfo);
	if (o->instance && o->instance[0]) {
		snprintf(ow->instance, sizeof ow->instance, "%s", o->instance);
	} else {
		char host[48] = "ramexd";
		gethostname(host, sizeof host);
		host[sizeof host - 1] = 0;
		snprintf(ow->instance, sizeof ow->instance, "%s:%d", host,
		         (int)getpid());
	}
	if (parse_markets(o->markets, ow->want, &ow->nwant, &ow->all, err,
	                  errlen) < 0) {
		free(ow);
		return NULL;
	}
	pthread_mutex_init(&ow->cmu, NULL);
	pthread_mutex_init(&ow->mu, NULL);
	pthread_mutex_init(&ow->smu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ow->scv, &a);
	pthread_condattr_destroy(&a);
	if (connect_lock(ow, err, errlen) < 0 || refresh(ow, err, errlen) < 0) {
		owner_free(ow);
		return NULL;
	}
	int64_t ids[OWNER_MAX_MARKETS];
	int n = 0;
	for (int i = 0; i < ow->nmap; i++)
		if (wanted(ow, ow->map[i].name))
			ids[n++] = ow->map[i].id;
	if (n && take(ow, ids, n, err, errlen) < 0) {
		owner_free(ow);
		return NULL;
	}
	log_info("markets", "instance=%s wanted=%s held=%d of=%d", ow->instance,
	         o->markets, ow->nheld, ow->nmap);
	return ow;
}

int owner_held(struct owner *ow, struct owner_held *out, int max)
{
	pthread_mutex_lock(&ow->mu);
	int n = ow->nheld < max ? ow->nheld : max;
	memcpy(out, ow->held, sizeof *out * (size_t)n);
	pthread_mutex_unlock(&ow->mu);
	return n;
}

int owner_run(struct owner *ow, struct writer *w, char *err, size_t errlen)
{
	ow->w = w;
	if (pthread_create(&ow->th, NULL, owner_main, ow) != 0) {
		snprintf(err, errlen, "could not start the owner thread");
		return -1;
	}
	pthread_setname_np(ow->th, "ramexd-owner");
	ow->running = true;
	return 0;
}

void owner_set_url(struct owner *ow, const char *url)
{
	pthread_mutex_lock(&ow->mu);
	snprintf(ow->url, sizeof ow->url, "%s", url);
	for (int i = 0; i < ow->nmap; i++)
		if (ow->map[i].here)
			snprintf(ow->map[i].url, sizeof ow->map[i].url, "%s",
			         url);
	ow->url_dirty = true;
	pthread_mutex_unlock(&ow->mu);
	/* written now rather than at the next round: until then the other
	 * instances cannot send anyone here */
	pthread_mutex_lock(&ow->cmu);
	if (ow->c && PQstatus(ow->c) == CONNECTION_OK)
		write_url(ow);
	pthread_mutex_unlock(&ow->cmu);
}

enum owner_where owner_where(struct owner *ow, const char *name, int64_t id,
                             char *url, size_t urllen)
{
	pthread_mutex_lock(&ow->mu);
	struct owner_market *m = map_find(ow, name, id);
	/* never sent to itself: a row still naming this instance is one it
	 * lost (fenced) before the round reads the new owner */
	enum owner_where wh =
	    !m        ? OWNER_UNKNOWN
	    : m->here ? OWNER_HERE
	    : !m->owned || !m->url[0] || !strcmp(m->url, ow->url)
	        ? OWNER_NOBODY
	        : OWNER_ELSEWHERE;
	if (wh == OWNER_ELSEWHERE && url)
		snprintf(url, urllen, "%s", m->url);
	pthread_mutex_unlock(&ow->mu);
	if (wh == OWNER_NOBODY)
		kick(ow); /* who owns it may be known by now: read it */
	return wh;
}

bool owner_holds_all(struct owner *ow)
{
	pthread_mutex_lock(&ow->mu);
	bool all = true;
	for (int i = 0; i < ow->nmap && all; i++)
		all = ow->map[i].here;
	pthread_mutex_unlock(&ow->mu);
	return all;
}

int owner_claim(struct owner *ow, int64_t id, const char *name, int64_t *epoch)
{
	if (!wanted(ow, name))
		return 0;
	char err[512];
	int rc = 0;
	pthread_mutex_lock(&ow->cmu);
	pthread_mutex_lock(&ow->mu);
	if (ow->nmap < OWNER_MAX_MARKETS && !map_find(ow, NULL, id)) {
		struct owner_market *m = &ow->map[ow->nmap++];
		memset(m, 0, sizeof *m);
		m->id = id;
		snprintf(m->name, sizeof m->name, "%s", name);
	}
	struct writer *w = ow->w;
	ow->w = NULL; /* the writer asks: it is told by the answer */
	pthread_mutex_unlock(&ow->mu);
	if (ow->c && PQstatus(ow->c) == CONNECTION_OK) {
		rc = take(ow, &id, 1, err, sizeof err);
		if (rc < 0)
			log_warn("could not take a new market", "err=\"%s\"",
			         err);
	} else {
		rc = -1;
	}
	pthread_mutex_lock(&ow->mu);
	ow->w = w;
	int k = held_find(ow, id);
	if (rc > 0 && k >= 0)
		*epoch = ow->held[k].epoch;
	pthread_mutex_unlock(&ow->mu);
	pthread_mutex_unlock(&ow->cmu);
	return rc > 0 && k >= 0 ? 1 : rc < 0 ? -1 : 0;
}

void owner_lost(struct owner *ow, int64_t id)
{
	pthread_mutex_lock(&ow->mu);
	held_drop(ow, id);
	/* its owner is not known until the round reads it: nobody */
	struct owner_market *m = map_find(ow, NULL, id);
	if (m)
		m->url[0] = 0;
	pthread_mutex_unlock(&ow->mu);
	/* the lock session is gone, or it would not have been taken: the
	 * round notices and reads the new owners */
	kick(ow);
}

void owner_stop(struct owner *ow)
{
	if (!ow || !ow->running)
		return;
	pthread_mutex_lock(&ow->smu);
	ow->stopping = true;
	pthread_cond_signal(&ow->scv);
	pthread_mutex_unlock(&ow->smu);
	pthread_join(ow->th, NULL);
	ow->running = false;
}

void owner_free(struct owner *ow)
{
	if (!ow)
		return;
	owner_stop(ow);
	if (ow->c)
		PQfinish(ow->c);
	pthread_mutex_destroy(&ow->cmu);
	pthread_mutex_destroy(&ow->mu);
	pthread_mutex_destroy(&ow->smu);
	pthread_cond_destroy(&ow->scv);
	free(ow);
}
