/* h_system.c — health, readiness and metrics; see handlers.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/metrics.h"
#include "exchange/owner.h"
#include "exchange/writer.h"

void h_healthz(struct http_req *rq)
{
	http_reply_json(rq, 200, json_pack("{s:s}", "status", "ok"));
}

/* How long /readyz waits for a connection of the pool, and then for its
 * answer: a probe must answer while PostgreSQL hangs. */
#define READYZ_WAIT_MS 2000

/* Ready = not stopping, the writer reaches PostgreSQL and makes progress
 * (writer_ready), and a pooled connection reaches it right now. */
void h_readyz(struct http_req *rq)
{
	struct app *a = http_app(rq);
	const char *why = NULL;
	if (a->stopping)
		why = "the exchange is shutting down";
	else if (!writer_ready(a->writer))
		why = "the writer cannot reach PostgreSQL, or commands wait "
		      "and it has landed no batch for 5 s";
	/* A pooled connection learns that its server is gone (a restart, a
	 * failover) only when a query fails on it; the pool replaces it on
	 * the next acquire. So one that broke here is tried once more, on a
	 * fresh connection, before the exchange says it is not ready. A
	 * server that hangs is not waited for: the probe answers within
	 * READYZ_WAIT_MS for a free connection, the same for SELECT 1, and
	 * db_connect's timeout for a new connection. */
	for (int attempt = 0; !why && attempt < 2; attempt++) {
		bool busy;
		PGconn *c = db_acquire_within(a->pool, READYZ_WAIT_MS, &busy);
		if (!c) {
			why = busy
			          ? "every connection of the query pool stayed "
			            "busy for 2 s: PostgreSQL answers slowly "
			            "or not at all (or raise db_pool)"
			          : "PostgreSQL cannot be reached";
			break;
		}
		char err[256];
		int rc = db_ping(c, READYZ_WAIT_MS, err, sizeof err);
		bool broke = rc == -1 && db_broken(c);
		db_release(a->pool, c);
		if (rc == 0)
			break;
		if (rc == -2)
			why = "PostgreSQL did not answer SELECT 1 within 2 s";
		else if (!broke || attempt == 1)
			why = "PostgreSQL does not answer";
	}
	if (why) {
		http_add_header(rq, "Retry-After", "2");
		http_problem(rq, 503, "not-ready", "not ready", "%s", why);
		return;
	}
	http_reply_json(rq, 200, json_pack("{s:s}", "status", "ready"));
}

void h_metrics(struct http_req *rq)
{
	size_t n;
	char *s = metrics_render(&n);
	if (!s) {
		http_problem(rq, 500, "internal", "out of memory",
		             "could not render the metrics");
		return;
	}
	http_reply_raw(rq, 200, "text/plain; version=0.0.4", s, n);
	free(s);
}

/* --- shared helpers of the handlers ------------------------------------ */

void handlers_scope(struct http_req *rq, int all_for_operator, char account[24],
                    char team[24])
{
	const struct auth_principal *p = http_principal(rq);
	account[0] = team[0] = 0;
	switch (p->role) {
	case AUTH_NODE:
		snprintf(account, 24, "%lld", (long long)p->account_id);
		break;
	case AUTH_TRADER:
		snprintf(team, 24, "%lld", (long long)p->team_id);
		break;
	case AUTH_OPERATOR:
		if (!all_for_operator)
			snprintf(account, 24, "%lld", (long long)p->account_id);
		break;
	default:
		break;
	}
}

void handlers_internal(struct http_req *rq, const char *what, const char *err)
{
	char qw[200], qp[300], qe[600];
	log_error("request failed inside the exchange",
	          "what=%s path=%s err=%s", log_quote(qw, sizeof qw, what),
	          log_quote(qp, sizeof qp, http_path(rq)),
	          log_quote(qe, sizeof qe, err));
	http_problem(rq, 500, "internal", what,
	             "the exchange could not carry out this request (%s). "
	             "The fault is the exchange's, not the request's: its log "
	             "(\"request failed inside the exchange\") says why",
	             what);
}

void handlers_db_error(struct http_req *rq, void *conn, const char *err)
{
	if (db_broken(conn))
		http_db_unavailable(rq);
	else
		handlers_internal(rq, "a query failed", err);
}

/* The rules of the schema a request can break, in the exchange's words:
 * the field and what it must be. A constraint not listed here is still
 * answered 409 or 422, by its SQLSTATE, with its name (it is ours, in
 * schema/). */
#define NAME_RULE                                                              \
	"must be 1 to 63 characters of a-z 0-9 . _ -, starting with a "       \
	"letter or digit"
static const struct {
	const char *constraint, *field, *rule;
} db_rules[] = {
    {"teams_name_key", "name", "a team of this name exists already"},
    {"teams_name_check", "name", NAME_RULE},
    {"accounts_name_key", "name",
     "an account of this name exists already (nodes are accounts too)"},
    {"accounts_name_check", "name", NAME_RULE},
    {"accounts_kind_check", "kind", "must be node, operator or exchange"},
    {"accounts_team_id_fkey", "team_id",
     "there is no such team (GET /v1/teams lists them)"},
    {"accounts_check", "team_id", "a node account needs a team"},
    {"api_tokens_name_check", "name", "must be 1 to 64 characters"},
    {"api_tokens_role_check", "role",
     "must be trader, operator, finance or admin"},
    {"api_tokens_team_id_fkey", "team_id",
     "there is no such team (GET /v1/teams lists them)"},
    {"api_tokens_account_id_fkey", "account_id",
     "there is no such account (GET /v1/accounts lists them)"},
    {"api_tokens_check", "team_id", "a trader token needs a team"},
    {"api_tokens_check1", "account_id",
     "an operator token needs its operator account"},
    {"node_keys_account_id_fkey", "id", "there is no such node"},
    {"lend_sessions_endpoint_check", "endpoint",
     "must be 3 to 255 characters"},
};

void handlers_db_refused(struct http_req *rq, void *conn,
                         const struct db_fail *f)
{
	char q[600];
	if (db_broken(conn) || !f->state[0]) {
		http_db_unavailable(rq);
		return;
	}
	/* class 23: integrity constraints; 22: a value the column cannot
	 * take (too long, out of range, not UTF-8) */
	bool unique = strcmp(f->state, "23505") == 0;
	if (strncmp(f->state, "23", 2) != 0 && strncmp(f->state, "22", 2) != 0) {
		handlers_db_error(rq, conn, f->text);
		return;
	}
	char qp[300];
	log_info("request refused by a rule of the schema",
	         "path=%s state=%s constraint=%s err=%s",
	         log_quote(qp, sizeof qp, http_path(rq)),
	         f->state, f->constraint[0] ? f->constraint : "-",
	         log_quote(q, sizeof q, f->text));
	for (size_t i = 0; i < sizeof db_rules / sizeof db_rules[0]; i++)
		if (strcmp(db_rules[i].constraint, f->constraint) == 0) {
			http_problem(rq, unique ? 409 : 422,
			             unique ? "conflict" : "invalid",
			             unique ? "already exists" : "invalid field",
			             "%s: %s", db_rules[i].field,
			             db_rules[i].rule);
			return;
		}
	if (unique)
		http_problem(rq, 409, "conflict", "already exists",
		             "an object with these unique values exists "
		             "already (rule %s)",
		             f->constraint);
	else if (f->constraint[0])
		http_problem(rq, 422, "invalid", "invalid field",
		             "a value breaks the rule %s of the exchange's "
		             "schema (schema/*.sql); correct it and retry",
		             f->constraint);
	else
		http_problem(rq, 422, "invalid", "invalid field",
		             "a value is out of the range or the form its field "
		             "takes; correct it and retry");
}

void handlers_reply_rows(struct http_req *rq, void *res, int64_t limit,
                         const char *cursor_col)
{
	PGresult *r = res;
	json_t *items = db_rows_json(r);
	json_t *next = json_null();
	size_t n = json_array_size(items);
	if (cursor_col && limit > 0 && n == (size_t)limit) {
		json_t *last = json_array_get(items, n - 1);
		json_decref(next);
		next = json_copy(json_object_get(last, cursor_col));
	}
	http_reply_json(rq, 200,
	                json_pack("{s:o,s:o}", "items", items, "next", next));
}

static void query_on(struct db_pool *pool, struct http_req *rq,
                     const char *sql, int n, const char *const *pv,
                     int single, int64_t limit, const char *cursor_col,
                     const char *notfound)
{
	char err[512];
	PGconn *c = db_acquire(pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	PGresult *r = db_exec(c, PGRES_TUPLES_OK, sql, n, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
	} else if (single) {
		json_t *rows = db_rows_json(r);
		if (json_array_size(rows) == 0)
			http_problem(rq, 404, "not-found", "not found", "%s",
			             notfound);
		else
			http_reply_json(rq, 200,
			                json_incref(json_array_get(rows, 0)));
		json_decref(rows);
	} else {
		handlers_reply_rows(rq, r, limit, cursor_col);
	}
	PQclear(r);
	db_release(pool, c);
}

void handlers_query(struct http_req *rq, const char *sql, int n,
                    const char *const *pv, int single, int64_t limit,
                    const char *cursor_col, const char *notfound)
{
	struct app *a = http_app(rq);
	query_on(a->pool, rq, sql, n, pv, single, limit,
	         cursor_col, notfound);
}

void handlers_report(struct http_req *rq, const char *sql, int n,
                     const char *const *pv, int single, int64_t limit,
                     const char *cursor_col, const char *notfound)
{
	struct app *a = http_app(rq);
	query_on(a->reports, rq, sql, n, pv, single, limit,
	         cursor_col, notfound);
}

void handlers_redirect(struct http_req *rq, const char *base)
{
	char loc[OWNER_URL_MAX + 2048];
	snprintf(loc, sizeof loc, "%s%s", base, http_target(rq));
	http_add_header(rq, "Location", loc);
}
