/* contracts.c — contract moves in PostgreSQL and the deadline timer; see
 * contracts.h. */
#include "exchange/contracts.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/events_db.h"

rx_time_ns contracts_now(void)
{
	return clock_wall_ns();
}

static int col_i64(const PGresult *r, int row, int col, int64_t *out)
{
	if (PQgetisnull(r, row, col))
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(PQgetvalue(r, row, col), &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int contracts_load(const PGresult *r, int row, int col, struct contract *out,
                   char *err, size_t errlen)
{
	struct contract k;
	int64_t v[CONTRACTS_LOAD_NCOLS];
	memset(&k, 0, sizeof k);
	if (PQnfields(r) < col + CONTRACTS_LOAD_NCOLS)
		goto bad;
	/* text columns: product (3), delivery (5), state (12) */
	for (int i = 0; i < CONTRACTS_LOAD_NCOLS; i++)
		if (i != 3 && i != 5 && i != 12 &&
		    col_i64(r, row, col + i, &v[i]) < 0)
			goto bad;
	const char *product = PQgetvalue(r, row, col + 3);
	const char *delivery = PQgetvalue(r, row, col + 5);
	int state = contract_state_parse(PQgetvalue(r, row, col + 12));
	if (strcmp(product, "spot") == 0)
		k.product = CONTRACT_SPOT;
	else if (strcmp(product, "perm") == 0)
		k.product = CONTRACT_PERM;
	else
		goto bad;
	if (strcmp(delivery, "offline") == 0)
		k.delivery = CONTRACT_OFFLINE;
	else if (strcmp(delivery, "lend") == 0)
		k.delivery = CONTRACT_LEND;
	else
		goto bad;
	if (state < 0)
		goto bad;
	k.id = v[0], k.trade_id = v[1], k.market_id = v[2];
	k.perm_year = (int)v[4];
	k.buyer = v[6], k.seller = v[7], k.pages = v[8], k.price = v[9];
	k.breach_penalty = v[10], k.recall_notice = v[11];
	k.state = (enum contract_state)state;
	k.created = v[13], k.delivery_deadline = v[14], k.term_end = v[15];
	k.delivered_at = v[16], k.notice_end = v[17], k.ended_at = v[18];
	k.changed_at = v[19];
	*out = k;
	return 0;
bad:
	snprintf(err, errlen,
	         "contract row %s has a column that contract.h cannot read "
	         "(unknown product, delivery or state, or a NULL time)",
	         PQnfields(r) > col ? PQgetvalue(r, row, col) : "?");
	return -1;
}

/* --- one move ------------------------------------------------------------ */

static enum contracts_status set(struct contracts_result *o,
                                 enum contracts_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum contracts_status set(struct contracts_result *o,
                                 enum contracts_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->msg, sizeof o->msg, fmt, ap);
	va_end(ap);
	o->status = s;
	return s;
}

static enum contracts_status db_fail(PGconn *c, struct contracts_result *o,
                                     const char *err)
{
	return set(o, db_broken(c) ? CONTRACTS_UNAVAILABLE : CONTRACTS_FAILED,
	           "%s", err);
}

static void rollback(PGconn *c)
{
	PQclear(PQexec(c, "ROLLBACK"));
}

/* Which side an event speaks for, and whether `who` may speak for it:
 * a node for itself, a trader for its team's nodes, the operator for its
 * own account (it only ever buys). */
/* Whether the caller may see contract k at all: as GET /v1/contracts/{id}
 * (h_contracts.c's SCOPE), a node its own, a trader its team's, everyone
 * else (operator, finance, admin, the exchange's timer) every one. */
static bool sees(const struct contracts_caller *who, const struct contract *k,
                 int64_t buyer_team, int64_t seller_team)
{
	switch (who->role) {
	case AUTH_NODE:
		return who->account == k->buyer || who->account == k->seller;
	case AUTH_TRADER:
		return who->team != 0 &&
		       (who->team == buyer_team || who->team == seller_team);
	default:
		return true;
	}
}

#define NOT_SEEN                                                               \
	"there is no contract %lld that you may see; list yours with GET "     \
	"/v1/contracts"

static int party(const struct contracts_caller *who, enum contract_event e,
                 const struct contract *k, int64_t buyer_team,
                 int64_t seller_team, enum contract_actor *actor,
                 int64_t *actor_account)
{
	int64_t acct, team;
	switch (e) {
	case CONTRACT_EV_DELIVERED:
	case CONTRACT_EV_RECALL:
		*actor = CONTRACT_BY_SELLER;
		acct = k->seller, team = seller_team;
		break;
	case CONTRACT_EV_BUYER_END:
		*actor = CONTRACT_BY_BUYER;
		acct = k->buyer, team = buyer_team;
		break;
	case CONTRACT_EV_BREACH:
		*actor_account = 0;
		if (who->role == AUTH_ADMIN) {
			*actor = CONTRACT_BY_ADMIN;
			return 0;
		}
		*actor = CONTRACT_BY_EXCHANGE;
		return who->role == 0 ? 0 : -1;
	default: /* the deadlines: ramexd's own */
		*actor = CONTRACT_BY_EXCHANGE;
		*actor_account = 0;
		return who->role == 0 ? 0 : -1;
	}
	*actor_account = acct;
	switch (who->role) {
	case AUTH_NODE:
	case AUTH_OPERATOR:
		return who->account == acct ? 0 : -1;
	case AUTH_TRADER:
		return who->team != 0 && who->team == team ? 0 : -1;
	default:
		return -1;
	}
}

static json_t *first_row(const PGresult *r)
{
	json_t *rows = db_rows_json(r);
	json_t *row = json_incref(json_array_get(rows, 0));
	json_decref(rows);
	return row;
}

/* The contract's public view with `transition` set, on connection c. */
static json_t *view(PGconn *c, const char *ids, json_t *transition, char *err,
                    size_t errlen)
{
	const char *pv[] = {ids};
	PGresult *r =
	    db_exec(c, PGRES_TUPLES_OK, CONTRACTS_VIEW "WHERE c.id = $1", 1, pv,
	            err, errlen);
	if (!r) {
		json_decref(transition);
		return NULL;
	}
	json_t *o = PQntuples(r) == 1 ? first_row(r) : NULL;
	PQclear(r);
	if (!o) {
		snprintf(err, errlen, "contract %s vanished", ids);
		json_decref(transition);
		return NULL;
	}
	json_object_set_new(o, "transition",
	                    transition ? transition : json_null());
	return o;
}

/* The parties' teams, as a trader sees them: only a node is its team's
 * (0 for any other kind, whatever a row from before schema 0012 says). */
static const char *sql_lock =
    "SELECT " CONTRACTS_LOAD_COLS ", CASE WHEN b.kind = 'node' THEN "
    "coalesce(b.team_id, 0) ELSE 0 END, CASE WHEN s.kind = 'node' THEN "
    "coalesce(s.team_id, 0) ELSE 0 END FROM contracts c JOIN accounts b ON "
    "b.id = c.buyer_id JOIN accounts s ON s.id = c.seller_id WHERE c.id = "
    "$1 FOR UPDATE OF c";

static const char *sql_last =
    CONTRACTS_TRANSITION_VIEW "WHERE contract_id = $1 ORDER BY id DESC "
                              "LIMIT 1";

static const char *sql_update =
    "UPDATE contracts SET state = $2, changed_ns = $3, delivered_ns = $4, "
    "notice_end_ns = $5, ended_ns = $6, updated_at = 'epoch'::timestamptz "
    "+ ($3::bigint / 1000) * interval '1 microsecond' WHERE id = $1";

static const char *sql_insert =
    "INSERT INTO contract_transitions (contract_id, from_state, to_state, "
    "event, actor, actor_account, at_ns, why, principal) VALUES ($1, $2, "
    "$3, $4, $5, $6, $7, $8, $9) RETURNING " CONTRACTS_TRANSITION_COLS;

enum contracts_status contracts_move(PGconn *c, struct events *ev,
                                     const struct contracts_caller *who,
                                     int64_t id, enum contract_event event,
                                     const char *note, rx_time_ns now,
                                     struct contracts_result *out)
{
	char err[512], ids[24];
	PGresult *r = NULL;
	memset(out, 0, sizeof *out);
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *pv1[] = {ids};

	r = db_exec(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL, err, sizeof err);
	if (!r)
		return db_fail(c, out, err);
	PQclear(r);
	r = db_exec(c, PGRES_TUPLES_OK, sql_lock, 1, pv1, err, sizeof err);
	if (!r)
		goto dbfail;
	if (PQntuples(r) == 0) {
		PQclear(r);
		rollback(c);
		return set(out, CONTRACTS_NOT_FOUND, NOT_SEEN, (long long)id);
	}
	struct contract k;
	int64_t buyer_team = 0, seller_team = 0;
	if (contracts_load(r, 0, 0, &k, err, sizeof err) < 0 ||
	    col_i64(r, 0, CONTRACTS_LOAD_NCOLS, &buyer_team) < 0 ||
	    col_i64(r, 0, CONTRACTS_LOAD_NCOLS + 1, &seller_team) < 0) {
		PQclear(r);
		rollback(c);
		return set(out, CONTRACTS_FAILED, "%s", err);
	}
	PQclear(r);
	r = NULL;

	struct contract_cmd cmd = {.event = event, .now = now, .note = note};
	if (party(who, event, &k, buyer_team, seller_team, &cmd.actor,
	          &cmd.actor_account) < 0) {
		rollback(c);
		/* one who may not see the contract learns neither that it
		 * exists nor its parties (GET /v1/contracts/{id} is 404) */
		if (!sees(who, &k, buyer_team, seller_team))
			return set(out, CONTRACTS_NOT_FOUND, NOT_SEEN,
			           (long long)id);
		const char *need = event == CONTRACT_EV_BUYER_END ? "buyer"
		                   : event == CONTRACT_EV_BREACH  ? "admin"
		                                                  : "seller";
		return set(out, CONTRACTS_FORBIDDEN,
		           "%s of contract %lld must come from its %s (account "
		           "%lld: the node itself or a trader of its team)",
		           contract_event_name(event), (long long)id, need,
		           (long long)(event == CONTRACT_EV_BUYER_END
		                           ? k.buyer
		                           : k.seller));
	}
	if (who->role == 0 && now == 0) {
		enum contract_event due;
		if (!contract_due(&k, &due, &cmd.now) || due != event) {
			rollback(c);
			return set(out, CONTRACTS_UNCHANGED,
			           "contract %lld no longer waits for %s",
			           (long long)id, contract_event_name(event));
		}
	}

	/* A retry: the last move was made by this very event. The state
	 * machine has no cycles, so an event moves a contract at most once. */
	r = db_exec(c, PGRES_TUPLES_OK, sql_last, 1, pv1, err, sizeof err);
	if (!r)
		goto dbfail;
	if (PQntuples(r) == 1 &&
	    strcmp(PQgetvalue(r, 0, 4), contract_event_name(event)) == 0) {
		json_t *t = first_row(r);
		PQclear(r);
		r = NULL;
		out->body = view(c, ids, t, err, sizeof err);
		if (!out->body)
			goto dbfail;
		rollback(c);
		return set(out, CONTRACTS_UNCHANGED,
		           "contract %lld: %s was already made", (long long)id,
		           contract_event_name(event));
	}
	PQclear(r);
	r = NULL;

	struct contract_transition tr;
	char msg[CONTRACT_MSG_MAX];
	enum contract_reject rej = contract_apply(&k, &cmd, &tr, msg);
	if (rej != CONTRACT_REJ_NONE) {
		rollback(c);
		out->reject = rej;
		return set(out, CONTRACTS_REFUSED, "%s", msg);
	}

	char st[6][24], aa[24];
	snprintf(st[0], 24, "%lld", (long long)k.changed_at);
	snprintf(st[1], 24, "%lld", (long long)k.delivered_at);
	snprintf(st[2], 24, "%lld", (long long)k.notice_end);
	snprintf(st[3], 24, "%lld", (long long)k.ended_at);
	const char *pu[] = {
	    ids, contract_state_name(k.state), st[0], st[1], st[2], st[3]};
	r = db_exec(c, PGRES_COMMAND_OK, sql_update, 6, pu, err, sizeof err);
	if (!r)
		goto dbfail;
	PQclear(r);
	snprintf(aa, sizeof aa, "%lld", (long long)tr.actor_account);
	snprintf(st[4], 24, "%lld", (long long)tr.at);
	const char *pi[] = {ids,
	                    contract_state_name(tr.from),
	                    contract_state_name(tr.to),
	                    contract_event_name(tr.event),
	                    contract_actor_name(tr.actor),
	                    tr.actor_account ? aa : NULL,
	                    st[4],
	                    tr.why,
	                    who->principal};
	r = db_exec(c, PGRES_TUPLES_OK, sql_insert, 9, pi, err, sizeof err);
	if (!r)
		goto dbfail;
	json_t *t = first_row(r);
	PQclear(r);
	r = NULL;
	out->body = view(c, ids, t, err, sizeof err);
	if (!out->body)
		goto dbfail;
	char *data = ev ? json_dumps(out->body, JSON_COMPACT) : NULL;
	/* several instances: the event is written with the move, so that it
	 * exists iff the move does (events_db.h) */
	if (data && events_shared(ev) &&
	    events_db_write(c, "contract", k.buyer, buyer_team, k.seller,
	                    seller_team, data, err, sizeof err) < 0) {
		free(data);
		goto dbfail;
	}
	r = db_exec(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL, err, sizeof err);
	if (!r) {
		free(data);
		goto dbfail;
	}
	PQclear(r);
	r = NULL;

	if (data && !events_shared(ev))
		events_publish(ev, "contract", k.buyer, buyer_team, k.seller,
		               seller_team, data);
	free(data);
	out->status = CONTRACTS_MOVED;
	snprintf(out->msg, sizeof out->msg, "%s", tr.why);
	return CONTRACTS_MOVED;

dbfail:
	PQclear(r);
	json_decref(out->body);
	out->body = NULL;
	if (!db_broken(c))
		rollback(c);
	return db_fail(c, out, err);
}

/* --- the timer ----------------------------------------------------------- */

struct contracts_timer {
	char conninfo[512];
	int tick_ms;
	struct events *ev;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	PGconn *c;
	int64_t history_due_ns; /* next db_history_ahead; 0: at the first tick */
};

/* The history partitions ahead (db.h), once a day: a month is made three
 * months before its first row, so a day late costs nothing. */
static void timer_history(struct contracts_timer *t, int64_t now_ns)
{
	char err[512], q[600];
	if (now_ns < t->history_due_ns)
		return;
	int made = db_history_ahead(t->c, err, sizeof err);
	if (made < 0) {
		log_warn("cannot make the history partitions ahead; retrying "
		         "in an hour",
		         "err=%s", log_quote(q, sizeof q, err));
		t->history_due_ns = now_ns + (int64_t)3600 * 1000000000;
		return;
	}
	if (made > 0)
		log_info("history partitions made", "tables=%d", made);
	t->history_due_ns = now_ns + (int64_t)86400 * 1000000000;
}

/* At most this many deadlines per tick: the rest wait for the next one, so
 * a backlog never holds up a shutdown for long. */
#define TIMER_BATCH 1000

static int timer_stopping(struct contracts_timer *t)
{
	pthread_mutex_lock(&t->mu);
	int s = t->stop;
	pthread_mutex_unlock(&t->mu);
	return s;
}

/* One tick: applies what is due. */
static void timer_tick(struct contracts_timer *t)
{
	char err[512], nows[24];
	if (!t->c) {
		t->c = db_connect(t->conninfo, err, sizeof err);
		if (!t->c)
			return; /* logged once per outage by the caller */
		log_info("contract timer connected", NULL);
	}
	snprintf(nows, sizeof nows, "%lld", (long long)contracts_now());
	const char *pv[] = {nows};
	PGresult *r = db_exec(t->c, PGRES_TUPLES_OK, CONTRACTS_DUE_SQL, 1, pv,
	                      err, sizeof err);
	if (!r)
		goto fail;
	struct contracts_caller self = {0};
	for (int i = 0; i < PQntuples(r) && i < TIMER_BATCH; i++) {
		if (timer_stopping(t))
			break;
		int64_t id = 0;
		col_i64(r, i, 0, &id);
		int e = contract_event_parse(PQgetvalue(r, i, 1));
		struct contracts_result res;
		contracts_move(t->c, t->ev, &self, id, (enum contract_event)e,
		               NULL, 0, &res);
		json_decref(res.body);
		if (res.status == CONTRACTS_MOVED) {
			log_info("contract deadline applied",
			         "contract=%lld event=%s", (long long)id,
			         contract_event_name((enum contract_event)e));
		} else if (res.status == CONTRACTS_UNAVAILABLE) {
			snprintf(err, sizeof err, "%s", res.msg);
			PQclear(r);
			goto fail;
		} else if (res.status != CONTRACTS_UNCHANGED) {
			char q[300];
			log_error("contract deadline not applied",
			          "contract=%lld event=%s err=%s",
			          (long long)id,
			          contract_event_name((enum contract_event)e),
			          log_quote(q, sizeof q, res.msg));
		}
	}
	PQclear(r);
	timer_history(t, contracts_now());
	return;
fail:
	if (db_broken(t->c)) {
		char q[600];
		log_warn("contract timer lost the database; reconnecting",
		         "err=%s", log_quote(q, sizeof q, err));
		PQfinish(t->c);
		t->c = NULL;
	} else {
		char q[600];
		log_error("contract timer query failed", "err=%s",
		          log_quote(q, sizeof q, err));
	}
}

static void *timer_main(void *arg)
{
	struct contracts_timer *t = arg;
	int down_logged = 0;
	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		pthread_mutex_unlock(&t->mu);
		int had = t->c != NULL;
		timer_tick(t);
		if (!t->c && !had && !down_logged) {
			log_warn("contract timer cannot reach the database; "
			         "retrying every tick",
			         NULL);
			down_logged = 1;
		} else if (t->c) {
			down_logged = 0;
		}
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		long long ns = until.tv_nsec + (long long)t->tick_ms * 1000000;
		until.tv_sec += ns / 1000000000;
		until.tv_nsec = ns % 1000000000;
		pthread_mutex_lock(&t->mu);
		while (!t->stop &&
		       pthread_cond_timedwait(&t->cv, &t->mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

struct contracts_timer *contracts_timer_start(const char *conninfo, int tick_ms,
                                              struct events *ev, char *err,
                                              size_t errlen)
{
	struct contracts_timer *t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(t->conninfo, sizeof t->conninfo, "%s", conninfo);
	t->tick_ms = tick_ms > 0 ? tick_ms : 1000;
	t->ev = ev;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	int rc = pthread_create(&t->thread, NULL, timer_main, t);
	if (rc) {
		snprintf(err, errlen, "cannot start the contract timer: %s",
		         strerror(rc));
		pthread_mutex_destroy(&t->mu);
		pthread_cond_destroy(&t->cv);
		free(t);
		return NULL;
	}
	return t;
}

void contracts_timer_stop(struct contracts_timer *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	if (t->c)
		PQfinish(t->c);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}
