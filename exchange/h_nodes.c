/* h_nodes.c — nodes as the people who trade for them see them: the list
 * (names, teams, whether their automation is paused) and pausing and
 * resuming a node's automation; see handlers.h.
 *
 * A paused node's agent keeps delivering and metering its contracts and
 * stops trading: it withdraws the quotes it placed and places none until a
 * person resumes it (docs/agent.md, "People and the agent"). The state is
 * in accounts (0014_people.sql); the agent reads it from GET /v1/whoami and
 * hears of a change on its event stream, as an "automation" event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"

/* The principal's name as GET /v1/orders shows placed_by_name. */
#define WHO_NAME(col)                                                          \
	"CASE WHEN " col " LIKE 'tok:%' THEN (SELECT t.name || ' (' || "       \
	"t.role || ')' FROM api_tokens t WHERE t.id::text = substr(" col       \
	", 5)) WHEN " col " LIKE 'node:%' THEN (SELECT 'agent of ' || "         \
	"na.name FROM node_keys k JOIN accounts na ON na.id = k.account_id "   \
	"WHERE k.key_id = substr(" col ", 6)) END"

#define NODE_SELECT                                                            \
	"SELECT a.id, a.name, a.team_id, t.name AS team_name, "                \
	"a.trading_paused_at IS NOT NULL AS trading_paused, "                  \
	"to_char(a.trading_paused_at AT TIME ZONE 'UTC', "                     \
	"'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS trading_paused_at, "             \
	"a.trading_paused_by, " WHO_NAME("a.trading_paused_by")                \
	" AS trading_paused_by_name, a.trading_pause_note FROM accounts a "    \
	"LEFT JOIN teams t ON t.id = a.team_id WHERE a.kind = 'node' "

void h_node_list(struct http_req *rq)
{
	char acct[24], team[24];
	handlers_scope(rq, 1, acct, team);
	const char *pv[] = {acct[0] ? acct : NULL, team[0] ? team : NULL};
	handlers_query(rq,
	               NODE_SELECT "AND ($1::bigint IS NULL OR a.id = $1) AND "
	                           "($2::bigint IS NULL OR a.team_id = $2) "
	                           "ORDER BY t.name, a.name",
	               2, pv, 0, 0, NULL, NULL);
}

/* POST /v1/nodes/{id}/pause and /resume, with an optional {"note": "why"}
 * (pause only). A trader pauses its team's nodes, the admin any. */
static void set_paused(struct http_req *rq, bool pause)
{
	static const char *const known_pause[] = {"note", NULL};
	static const char *const known_resume[] = {NULL};
	struct app *a = http_app(rq);
	const struct auth_principal *p = http_principal(rq);
	char note[IN_NOTE_BUF] = "", ids[24], team[24] = "", err[512];
	int64_t id;
	size_t blen = 0;
	json_t *b = NULL;
	if (in_pid(rq, "id", &id) < 0)
		return;
	http_body(rq, &blen);
	if (blen > 0) {
		if (!(b = http_body_object(rq)))
			return;
		if (in_known(rq, b, pause ? known_pause : known_resume) < 0 ||
		    in_note(rq, b, note) < 0)
			goto out;
	}
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	if (p->role == AUTH_TRADER)
		snprintf(team, sizeof team, "%lld", (long long)p->team_id);
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		goto out;
	}
	const char *pv[] = {ids, team[0] ? team : NULL, p->scope,
	                    note[0] ? note : NULL};
	/* pausing a paused node keeps when and by whom it was paused */
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    pause ? "UPDATE accounts SET trading_paused_by = CASE WHEN "
	            "trading_paused_at IS NULL THEN $3 ELSE trading_paused_by "
	            "END, trading_pause_note = CASE WHEN trading_paused_at IS "
	            "NULL THEN $4 ELSE coalesce($4, trading_pause_note) END, "
	            "trading_paused_at = coalesce(trading_paused_at, now()) "
	            "WHERE id = $1 AND kind = 'node' AND ($2::bigint IS NULL "
	            "OR team_id = $2) RETURNING id"
	          : "UPDATE accounts SET trading_paused_at = NULL, "
	            "trading_paused_by = NULL, trading_pause_note = NULL WHERE "
	            "id = $1 AND kind = 'node' AND ($2::bigint IS NULL OR "
	            "team_id = $2) RETURNING id",
	    pause ? 4 : 2, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		db_release(a->pool, c);
		goto out;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		db_release(a->pool, c);
		http_problem(rq, 404, "not-found", "no such node",
		             "there is no node %lld that you may trade for; GET "
		             "/v1/nodes lists yours",
		             (long long)id);
		goto out;
	}
	PQclear(r);
	const char *pv2[] = {ids};
	r = db_exec(c, PGRES_TUPLES_OK, NODE_SELECT "AND a.id = $1", 1, pv2,
	            err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		db_release(a->pool, c);
		goto out;
	}
	db_release(a->pool, c);
	json_t *rows = db_rows_json(r);
	json_t *node = json_array_get(rows, 0);
	json_t *t = json_object_get(node, "team_id");
	char *text = json_dumps(node, JSON_COMPACT);
	if (text)
		events_publish(a->events, "automation", id,
		               json_is_integer(t) ? json_integer_value(t) : 0, 0,
		               0, text);
	free(text);
	http_reply_json(rq, 200, json_incref(node));
	json_decref(rows);
	PQclear(r);
out:
	json_decref(b);
}

void h_node_pause(struct http_req *rq)
{
	set_paused(rq, true);
}

void h_node_resume(struct http_req *rq)
{
	set_paused(rq, false);
}

/* Who the caller is, by name: its role, its token's or node's name, its
 * account and team (ids and names) and, for a node, whether a person
 * paused its automation (the agent reads this). */
void h_whoami(struct http_req *rq)
{
	struct app *a = http_app(rq);
	const struct auth_principal *p = http_principal(rq);
	char acct[24], team[24], err[512];
	json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:s}", "role",
	                      auth_role_name(p->role), "name", p->name, "id",
	                      (json_int_t)p->id, "account_id",
	                      (json_int_t)p->account_id, "team_id",
	                      (json_int_t)p->team_id, "scope", p->scope);
	snprintf(acct, sizeof acct, "%lld", (long long)p->account_id);
	snprintf(team, sizeof team, "%lld", (long long)p->team_id);
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		json_decref(o);
		http_db_unavailable(rq);
		return;
	}
	const char *pv[] = {acct, team};
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT (SELECT name FROM accounts WHERE id = $1) AS "
	    "account_name, (SELECT kind FROM accounts WHERE id = $1) AS "
	    "account_kind, (SELECT name FROM teams WHERE id = $2) AS team_name, "
	    "(SELECT trading_paused_at IS NOT NULL FROM accounts WHERE id = $1 "
	    "AND kind = 'node') AS trading_paused, (SELECT trading_pause_note "
	    "FROM accounts WHERE id = $1) AS trading_pause_note",
	    2, pv, err, sizeof err);
	if (!r) {
		json_decref(o);
		handlers_db_error(rq, c, err);
		db_release(a->pool, c);
		return;
	}
	db_release(a->pool, c);
	json_t *rows = db_rows_json(r);
	json_t *row = json_array_get(rows, 0);
	const char *k;
	json_t *v;
	json_object_foreach(row, k, v)
	{
		/* trading_* only for a node: a person has no automation */
		if (strncmp(k, "trading_", 8) || p->role == AUTH_NODE)
			json_object_set(o, k, v);
	}
	json_decref(rows);
	PQclear(r);
	http_reply_json(rq, 200, o);
}
