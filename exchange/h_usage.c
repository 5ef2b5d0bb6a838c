/* h_usage.c — usage reports over HTTP: POST /v1/usage (a node's batch,
 * all or nothing), GET /v1/usage and GET /v1/usage/gaps; see handlers.h
 * and docs/billing-api.md.
 *
 * The body is read strictly here (a wrong shape is 400 and names the
 * report and field); what a report means is judged by usage_db.h against
 * the database, which answers per report: counted, duplicate, conflict
 * (409) or invalid (422). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/contracts.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/usage_db.h"

static const char *nz(const char *s)
{
	return s && *s ? s : NULL;
}

struct field {
	const char *name;
	int64_t min, max; /* as api/openapi.yaml's UsageReport says */
	size_t off;
};

#define F(n, lo, hi, f)                                                        \
	{                                                                      \
		n, lo, hi, offsetof(struct usage_report, f)                    \
	}
static const struct field fields[] = {
    F("epoch", 1, USAGE_NUMBER_MAX, epoch),
    F("seq", 1, USAGE_NUMBER_MAX, seq),
    F("contract_id", 1, USAGE_NUMBER_MAX, contract_id),
    F("period_start_ns", 0, USAGE_TIME_MAX - 1, period_start),
    F("period_end_ns", 1, USAGE_TIME_MAX, period_end),
    F("page_seconds", 0, USAGE_COUNTER_MAX, page_seconds),
    F("kmod_page_seconds", 0, USAGE_COUNTER_MAX, kmod_page_seconds),
    F("kmod_pages", 0, USAGE_NUMBER_MAX, kmod_pages),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Reads report i; replies 400 and returns -1 when its shape is wrong. */
static int read_report(struct http_req *rq, size_t i, json_t *o,
                       struct usage_report *r)
{
	if (!json_is_object(o)) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "reports[%zu]: must be an object", i);
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		size_t k = 0;
		while (k < NFIELDS && strcmp(fields[k].name, key) != 0)
			k++;
		if (k == NFIELDS) {
			http_problem(rq, 400, "invalid-field", "invalid field",
			             "reports[%zu].%.*s: unknown field; a "
			             "report has epoch, seq, contract_id, "
			             "period_start_ns, period_end_ns, "
			             "page_seconds, kmod_page_seconds and "
			             "kmod_pages",
			             i, in_utf8_cut(key, 64), key);
			return -1;
		}
	}
	for (size_t k = 0; k < NFIELDS; k++) {
		v = json_object_get(o, fields[k].name);
		if (!v || !json_is_integer(v) ||
		    json_integer_value(v) < fields[k].min ||
		    json_integer_value(v) > fields[k].max) {
			http_problem(
			    rq, 400, "invalid-field", "invalid field",
			    "reports[%zu].%s: %s an integer from "
			    "%lld to %lld",
			    i, fields[k].name, v ? "must be" : "is required:",
			    (long long)fields[k].min, (long long)fields[k].max);
			return -1;
		}
		*(int64_t *)((char *)r + fields[k].off) = json_integer_value(v);
	}
	return 0;
}

/* 409/422: problem+json with one entry per refused report. */
static void reply_refused(struct http_req *rq, int status,
                          const struct usage_db_item *items, size_t n)
{
	json_t *errors = json_array();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct usage_db_item *it = &items[i];
		if (!it->invalid && it->verdict != USAGE_CONFLICT)
			continue;
		k++;
		json_array_append_new(
		    errors,
		    json_pack("{s:I,s:I,s:I,s:s}", "index", (json_int_t)i,
		              "epoch", (json_int_t)it->r.epoch, "seq",
		              (json_int_t)it->r.seq, "detail", it->err));
	}
	char detail[512];
	const char *first = "";
	for (size_t i = 0; i < n && !*first; i++)
		if (items[i].invalid || items[i].verdict == USAGE_CONFLICT)
			first = items[i].err;
	snprintf(detail, sizeof detail,
	         "%zu of %zu reports %s, so none was stored; the first: %s. "
	         "Resend the others alone and set the refused aside",
	         k, n,
	         status == 409 ? "reuse a number with another body or are "
	                         "invalid"
	                       : "are invalid",
	         first);
	json_t *p = json_pack("{s:s,s:s,s:i,s:s,s:s,s:o}", "type",
	                      status == 409 ? "urn:ramex:problem:usage-conflict"
	                                    : "urn:ramex:problem:usage-invalid",
	                      "title",
	                      status == 409 ? "report number reused"
	                                    : "invalid usage report",
	                      "status", status, "detail", detail, "instance",
	                      http_path(rq), "errors", errors);
	char *s = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	if (!s) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		return;
	}
	http_reply_raw(rq, status, "application/problem+json", s, strlen(s));
	free(s);
}

void h_usage_post(struct http_req *rq)
{
	struct app *a = http_app(rq);
	const struct auth_principal *p = http_principal(rq);
	static const char *const known[] = {"reports", NULL};
	struct usage_db_item *items = NULL;
	json_t **bodies = NULL;
	char err[512];
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0)
		goto out;
	json_t *reports = json_object_get(b, "reports");
	size_t n = json_array_size(reports);
	if (!json_is_array(reports) || n < 1 || n > USAGE_DB_BATCH_MAX) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "reports: must be an array of 1 to %d reports",
		             USAGE_DB_BATCH_MAX);
		goto out;
	}
	items = calloc(n, sizeof *items);
	bodies = calloc(n, sizeof *bodies);
	if (!items || !bodies) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later, or send smaller batches");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		bodies[i] = json_array_get(reports, i);
		if (read_report(rq, i, bodies[i], &items[i].r) < 0)
			goto out;
		items[i].r.node = p->account_id;
	}
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		goto out;
	}
	size_t counted, dups;
	enum usage_db_status st =
	    usage_db_ingest(c, p->account_id, p->scope, items, n, bodies,
	                    contracts_now(), &counted, &dups, err, sizeof err);
	db_release(a->pool, c);
	switch (st) {
	case USAGE_DB_OK: {
		json_t *res = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(
			    res, json_pack("{s:I,s:I,s:s}", "epoch",
			                   (json_int_t)items[i].r.epoch, "seq",
			                   (json_int_t)items[i].r.seq, "status",
			                   items[i].verdict == USAGE_NEW
			                       ? "counted"
			                       : "duplicate"));
		http_reply_json(rq, 200,
		                json_pack("{s:I,s:I,s:o}", "counted",
		                          (json_int_t)counted, "duplicates",
		                          (json_int_t)dups, "results", res));
		break;
	}
	case USAGE_DB_CONFLICT:
		reply_refused(rq, 409, items, n);
		break;
	case USAGE_DB_INVALID:
		reply_refused(rq, 422, items, n);
		break;
	case USAGE_DB_UNAVAILABLE:
		http_db_unavailable(rq);
		break;
	default:
		handlers_internal(rq, "the reports could not be stored", err);
		break;
	}
out:
	free(items);
	free(bodies);
	json_decref(b);
}

/* The `after` cursor of GET /v1/usage: "NODE:EPOCH:SEQ" of the last report
 * of the previous page. Reports are listed in number order — the primary
 * key — so that paging costs one index range and the table needs no
 * serial column of its own (which would cost every ingest). */
static int parse_after(struct http_req *rq, int64_t v[3])
{
	const char *s = http_query(rq, "after");
	if (!s)
		return 0;
	char buf[80];
	snprintf(buf, sizeof buf, "%s", s);
	char *save = NULL, *t = strtok_r(buf, ":", &save);
	for (int i = 0; i < 3; i++, t = strtok_r(NULL, ":", &save))
		if (!t || in_parse_i64(t, &v[i]) < 0 || v[i] < 1)
			goto bad;
	if (t)
		goto bad;
	return 1;
bad:
	http_problem(rq, 400, "invalid-parameter", "invalid parameter",
	             "after must be NODE:EPOCH:SEQ, the `next` of the previous "
	             "page");
	return -1;
}

void h_usage_list(struct http_req *rq)
{
	struct app *a = http_app(rq);
	char acct[24], team[24], q[9][24], err[512];
	int64_t limit = 100, contract = 0, node = 0, epoch = 0, from = 0,
	        to = 0, after[3] = {0, 0, 0};
	int has_from, has_to, has_after;
	if (in_qint(rq, "limit", 1, 1000, &limit) < 0 ||
	    in_qint(rq, "contract_id", 1, INT64_MAX, &contract) < 0 ||
	    in_qint(rq, "node_id", 1, INT64_MAX, &node) < 0 ||
	    in_qint(rq, "epoch", 1, INT64_MAX, &epoch) < 0 ||
	    (has_from = in_qint(rq, "from", 0, INT64_MAX, &from)) < 0 ||
	    (has_to = in_qint(rq, "to", 0, INT64_MAX, &to)) < 0 ||
	    (has_after = parse_after(rq, after)) < 0)
		return;
	if (has_from && has_to && from >= to) {
		http_problem(rq, 400, "invalid-parameter", "invalid parameter",
		             "from must be before to: the reports listed are "
		             "those whose period overlaps [from, to)");
		return;
	}
	handlers_scope(rq, 0, acct, team);
	int64_t v[9] = {contract, node,     epoch,    from, to,
	                after[0], after[1], after[2], limit};
	for (int i = 0; i < 9; i++)
		snprintf(q[i], sizeof q[i], "%lld", (long long)v[i]);
	const char *pv[] = {nz(acct),
	                    nz(team),
	                    contract ? q[0] : NULL,
	                    node ? q[1] : NULL,
	                    epoch ? q[2] : NULL,
	                    has_from ? q[3] : NULL,
	                    has_to ? q[4] : NULL,
	                    has_after ? q[5] : "0",
	                    q[6],
	                    q[7],
	                    q[8]};
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	/* from/to (ns) select the reports whose period overlaps [from, to) */
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT node_id, epoch, seq, contract_id, side, period_start_ns, "
	    "period_end_ns, page_seconds, kmod_page_seconds, kmod_pages, "
	    "delivered_ns, billable_ps, received_at::text FROM usage_reports u "
	    "WHERE ($1::bigint IS NULL "
	    "OR u.node_id = $1) AND ($2::bigint IS NULL OR u.node_id IN "
	    "(SELECT id FROM accounts WHERE team_id = $2)) AND ($3::bigint IS "
	    "NULL OR u.contract_id = $3) AND ($4::bigint IS NULL OR u.node_id "
	    "= $4) AND ($5::bigint IS NULL OR u.epoch = $5) AND ($6::bigint IS "
	    "NULL OR u.period_end_ns > $6) AND ($7::bigint IS NULL OR "
	    "u.period_start_ns < $7) AND (u.node_id, u.epoch, u.seq) > "
	    "($8::bigint, $9::bigint, $10::bigint) ORDER BY u.node_id, "
	    "u.epoch, u.seq LIMIT $11",
	    11, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		db_release(a->pool, c);
		return;
	}
	json_t *items = db_rows_json(r);
	json_t *next = json_null();
	int n = PQntuples(r);
	if (items && n == limit) {
		char cur[80];
		snprintf(cur, sizeof cur, "%s:%s:%s", PQgetvalue(r, n - 1, 0),
		         PQgetvalue(r, n - 1, 1), PQgetvalue(r, n - 1, 2));
		next = json_string(cur);
	}
	PQclear(r);
	db_release(a->pool, c);
	if (!items) {
		json_decref(next);
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later with a smaller limit");
		return;
	}
	http_reply_json(rq, 200,
	                json_pack("{s:o,s:o}", "items", items, "next", next));
}

void h_usage_gaps(struct http_req *rq)
{
	char q[3][24];
	int64_t node = 0, epoch = 0, limit = 1000;
	if (in_qint(rq, "node_id", 1, INT64_MAX, &node) < 0 ||
	    in_qint(rq, "epoch", 1, INT64_MAX, &epoch) < 0 ||
	    in_qint(rq, "limit", 1, 10000, &limit) < 0)
		return;
	snprintf(q[0], sizeof q[0], "%lld", (long long)node);
	snprintf(q[1], sizeof q[1], "%lld", (long long)epoch);
	snprintf(q[2], sizeof q[2], "%lld", (long long)limit);
	const char *pv[] = {node ? q[0] : NULL, epoch ? q[1] : NULL, q[2]};
	/* A gap is a run of numbers between two that arrived (or before the
	 * first: numbering starts at 1), found with one pass over the
	 * primary key. */
	handlers_report(
	    rq,
	    "SELECT node_id, epoch, prev + 1 AS first, seq - 1 AS last, seq - "
	    "prev - 1 AS missing FROM (SELECT node_id, epoch, seq, lag(seq, 1, "
	    "0::bigint) OVER (PARTITION BY node_id, epoch ORDER BY seq) AS "
	    "prev "
	    "FROM usage_reports WHERE ($1::bigint IS NULL OR node_id = $1) AND "
	    "($2::bigint IS NULL OR epoch = $2)) s WHERE seq > prev + 1 ORDER "
	    "BY node_id, epoch, first LIMIT $3",
	    3, pv, 0, 0, NULL, NULL);
}
