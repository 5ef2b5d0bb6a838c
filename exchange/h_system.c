/* h_system.c — health, readiness and metrics; see handlers.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/metrics.h"
#include "exchange/writer.h"

void h_healthz(struct http_req *rq)
{
	http_reply_json(rq, 200, json_pack("{s:s}", "status", "ok"));
}

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
	if (!why) {
		PGconn *c = db_acquire(a->pool);
		if (!c) {
			why = "PostgreSQL cannot be reached";
		} else {
			char err[256];
			PGresult *r = db_exec(c, PGRES_TUPLES_OK, "SELECT 1", 0,
			                      NULL, err, sizeof err);
			if (!r)
				why = "PostgreSQL does not answer";
			PQclear(r);
			db_release(a->pool, c);
		}
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

void handlers_db_error(struct http_req *rq, void *conn, const char *err)
{
	if (db_broken(conn))
		http_db_unavailable(rq);
	else
		http_problem(rq, 500, "internal", "query failed", "%s", err);
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

void handlers_query(struct http_req *rq, const char *sql, int n,
                    const char *const *pv, int single, int64_t limit,
                    const char *cursor_col, const char *notfound)
{
	struct app *a = http_app(rq);
	char err[512];
	PGconn *c = db_acquire(a->pool);
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
	db_release(a->pool, c);
}
