/* h_billing.c — invoices, their lines and exports, the usage export, the
 * billing summary, the ledger check and POST /v1/billing/run; see
 * handlers.h and docs/billing-api.md.
 *
 * Reads go through the reports' connections (handlers_report: read_db, a
 * replica when one is set, so they may lag the primary by its replay
 * delay; POST /v1/billing/run is the billing job's), scoped like orders (handlers_scope: a
 * node sees its own account, a trader its team's, an operator its own,
 * finance and admin everything). Money stays integer nanodollars in JSON;
 * page-years are text, since they are not a whole number of page-seconds'
 * worth of decimals (money_format_page_years). */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/money.h"
#include "exchange/app.h"
#include "exchange/billing.h"
#include "exchange/core/invoice.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"

static const char *nz(const char *s)
{
	return s && *s ? s : NULL;
}

/* "YYYY-MM" as year * 12 + month - 1; absent: *key untouched. */
static int q_month(struct http_req *rq, const char *name, int *key)
{
	const char *v = http_query(rq, name);
	int y, m;
	char tail;
	if (!v)
		return 0;
	/* digits where the form has them: sscanf's %d also takes a sign
	 * or a blank ("2026-+3") */
	int digits = strlen(v) == 7;
	for (int i = 0; digits && i < 7; i++)
		digits = i == 4 ? v[i] == '-' : isdigit((unsigned char)v[i]);
	if (!digits || sscanf(v, "%4d-%2d%c", &y, &m, &tail) != 2 ||
	    y < MONEY_YEAR_MIN || y > MONEY_YEAR_MAX || m < 1 || m > 12) {
		http_problem(
		    rq, 400, "invalid-parameter", "invalid parameter",
		    "%s: must be a month as YYYY-MM, e.g. 2025-03", name);
		return -1;
	}
	*key = y * 12 + m - 1;
	return 1;
}

static void iso(rx_time_ns t, char out[32])
{
	int y, mo, d, s;
	money_civil_of(t < 0 ? 0 : t, &y, &mo, &d, &s);
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, s / 3600,
	         s / 60 % 60, s % 60);
}

#define INVOICE_SELECT                                                         \
	"SELECT i.id, i.account_id, a.name AS account, a.kind AS "             \
	"account_kind, t.name AS team, i.year, i.month, i.status, i.total, "   \
	"i.lines, i.payable_cents, i.cents_in, i.cents_out, "                  \
	"i.created_at::text, i.finalized_at::text FROM invoices i JOIN "       \
	"accounts a ON a.id = i.account_id LEFT JOIN teams t ON t.id = "       \
	"a.team_id WHERE ($1::bigint IS NULL OR i.account_id = $1) AND "       \
	"($2::bigint IS NULL OR a.team_id = $2) "

void h_invoice_list(struct http_req *rq)
{
	static const char *const statuses[] = {"draft", "final", NULL};
	char acct[24], team[24], ls[24], bs[24], as[24], ys[24], ms[24];
	int64_t limit = 100, before = INT64_MAX, account = 0, year = 0,
	        month = 0;
	const char *status = NULL;
	if (in_qint(rq, "limit", 1, 500, &limit) < 0 ||
	    in_qint(rq, "before", 1, INT64_MAX, &before) < 0 ||
	    in_qint(rq, "account_id", 1, INT64_MAX, &account) < 0 ||
	    in_qint(rq, "year", MONEY_YEAR_MIN, MONEY_YEAR_MAX, &year) < 0 ||
	    in_qint(rq, "month", 1, 12, &month) < 0 ||
	    in_qenum(rq, "status", statuses, &status) < 0)
		return;
	handlers_scope(rq, 0, acct, team);
	snprintf(ls, sizeof ls, "%" PRId64, limit);
	snprintf(bs, sizeof bs, "%" PRId64, before);
	snprintf(as, sizeof as, "%" PRId64, account);
	snprintf(ys, sizeof ys, "%" PRId64, year);
	snprintf(ms, sizeof ms, "%" PRId64, month);
	const char *pv[] = {nz(acct),
	                    nz(team),
	                    account ? as : NULL,
	                    year ? ys : NULL,
	                    month ? ms : NULL,
	                    status,
	                    bs,
	                    ls};
	handlers_report(rq,
	               INVOICE_SELECT
	               "AND ($3::bigint IS NULL OR i.account_id = $3) AND "
	               "($4::int IS NULL OR i.year = $4) AND ($5::int IS NULL "
	               "OR i.month = $5) AND ($6::text IS NULL OR i.status = "
	               "$6) AND i.id < $7 ORDER BY i.id DESC LIMIT $8",
	               8, pv, 0, limit, "id",
	               "there is no such invoice that you may see");
}

#define LINE_SELECT                                                            \
	"SELECT p.id AS posting_id, p.movement_id, m.contract_id, mk.name AS " \
	"market, c.delivery, m.kind, p.role, m.usage_year, m.usage_month, "    \
	"m.charge_start_ns, m.charge_end_ns, m.page_seconds, m.unit_price, "   \
	"p.amount, m.fee, m.recon, p.account_id, p.year, p.month FROM "        \
	"postings p JOIN movements m ON m.id = p.movement_id JOIN contracts "  \
	"c ON c.id = m.contract_id JOIN markets mk ON mk.id = c.market_id "    \
	"WHERE p.invoice_id = $1 ORDER BY p.id"

/* Loads the invoice `id` as the caller may see it, and its lines. 0, or -1
 * after replying (404, 503, 500). */
static int load_invoice(struct http_req *rq, PGconn *c, int64_t id,
                        PGresult **inv, PGresult **lines)
{
	char acct[24], team[24], ids[24], err[512];
	handlers_scope(rq, 0, acct, team);
	snprintf(ids, sizeof ids, "%" PRId64, id);
	const char *pv[] = {nz(acct), nz(team), ids};
	*inv = *lines = NULL;
	*inv = db_exec(c, PGRES_TUPLES_OK, INVOICE_SELECT "AND i.id = $3", 3,
	               pv, err, sizeof err);
	if (!*inv) {
		handlers_db_error(rq, c, err);
		return -1;
	}
	if (PQntuples(*inv) == 0) {
		http_problem(rq, 404, "not-found", "not found",
		             "there is no invoice %" PRId64
		             " that you may see; GET /v1/invoices lists yours",
		             id);
		PQclear(*inv);
		*inv = NULL;
		return -1;
	}
	const char *lv[] = {ids};
	*lines =
	    db_exec(c, PGRES_TUPLES_OK, LINE_SELECT, 1, lv, err, sizeof err);
	if (!*lines) {
		handlers_db_error(rq, c, err);
		PQclear(*inv);
		*inv = NULL;
		return -1;
	}
	return 0;
}

static enum invoice_kind kind_parse(const char *s)
{
	for (int k = 0; k < INVOICE_KIND_COUNT_; k++)
		if (strcmp(s, invoice_kind_name((enum invoice_kind)k)) == 0)
			return (enum invoice_kind)k;
	return INVOICE_USAGE;
}

static enum invoice_role role_parse(const char *s)
{
	return strcmp(s, "seller") == 0     ? INVOICE_SELLER
	       : strcmp(s, "exchange") == 0 ? INVOICE_EXCHANGE
	                                    : INVOICE_BUYER;
}

/* Line `i` of LINE_SELECT as a movement with its one posting. */
static void line_movement(const PGresult *r, int i, struct invoice_movement *m)
{
	memset(m, 0, sizeof *m);
	m->movement_id = db_int(r, i, 1);
	m->contract_id = db_int(r, i, 2);
	m->kind = kind_parse(PQgetvalue(r, i, 5));
	m->year = (int)db_int(r, i, 17);
	m->month = (int)db_int(r, i, 18);
	m->charge_start = db_int(r, i, 9);
	m->charge_end = db_int(r, i, 10);
	m->page_seconds = db_int(r, i, 11);
	m->unit_price = db_int(r, i, 12);
	m->fee = db_int(r, i, 14);
	m->n = 1;
	m->p[0] =
	    (struct invoice_posting){.movement_id = m->movement_id,
	                             .account = db_int(r, i, 16),
	                             .contract_id = m->contract_id,
	                             .year = m->year,
	                             .month = m->month,
	                             .role = role_parse(PQgetvalue(r, i, 6)),
	                             .amount = db_int(r, i, 13)};
	m->amount = m->p[0].amount;
}

static json_t *line_json(const PGresult *r, int i)
{
	struct invoice_movement m;
	char py[MONEY_TEXT_MAX], cs[32], ce[32], amt[MONEY_TEXT_MAX];
	line_movement(r, i, &m);
	money_format_page_years(m.page_seconds, py, sizeof py);
	money_format_exact(m.amount, amt, sizeof amt);
	iso(m.charge_start, cs);
	iso(m.charge_end, ce);
	json_t *o = json_object();
	json_object_set_new(o, "posting_id", json_integer(db_int(r, i, 0)));
	json_object_set_new(o, "movement_id", json_integer(m.movement_id));
	json_object_set_new(o, "contract_id", json_integer(m.contract_id));
	json_object_set_new(o, "market", json_string(PQgetvalue(r, i, 3)));
	json_object_set_new(o, "delivery", json_string(PQgetvalue(r, i, 4)));
	json_object_set_new(o, "kind", json_string(PQgetvalue(r, i, 5)));
	json_object_set_new(o, "role", json_string(PQgetvalue(r, i, 6)));
	if (PQgetisnull(r, i, 7)) {
		json_object_set_new(o, "usage_month", json_null());
	} else {
		char um[16];
		snprintf(um, sizeof um, "%04d-%02d", (int)db_int(r, i, 7),
		         (int)db_int(r, i, 8));
		json_object_set_new(o, "usage_month", json_string(um));
	}
	json_object_set_new(o, "charge_start_ns", json_integer(m.charge_start));
	json_object_set_new(o, "charge_end_ns", json_integer(m.charge_end));
	json_object_set_new(o, "charge_start", json_string(cs));
	json_object_set_new(o, "charge_end", json_string(ce));
	json_object_set_new(o, "page_seconds", json_integer(m.page_seconds));
	json_object_set_new(o, "page_years", json_string(py));
	json_object_set_new(o, "unit_price", json_integer(m.unit_price));
	json_object_set_new(o, "amount", json_integer(m.amount));
	json_object_set_new(o, "amount_usd", json_string(amt));
	json_object_set_new(o, "recon",
	                    PQgetisnull(r, i, 15)
	                        ? json_null()
	                        : json_string(PQgetvalue(r, i, 15)));
	return o;
}

void h_invoice_get(struct http_req *rq)
{
	struct app *a = http_app(rq);
	int64_t id;
	PGresult *inv, *lines;
	if (in_pid(rq, "id", &id) < 0)
		return;
	PGconn *c = db_acquire(a->reports);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	if (load_invoice(rq, c, id, &inv, &lines) == 0) {
		json_t *rows = db_rows_json(inv);
		json_t *o = json_incref(json_array_get(rows, 0));
		json_decref(rows);
		char shown[MONEY_TEXT_MAX];
		money_format_cents(db_int(inv, 0, 8), shown, sizeof shown);
		json_object_set_new(o, "total_shown", json_string(shown));
		json_t *items = json_array();
		for (int i = 0; i < PQntuples(lines); i++)
			json_array_append_new(items, line_json(lines, i));
		json_object_set_new(o, "items", items);
		http_reply_json(rq, 200, o);
		PQclear(inv);
		PQclear(lines);
	}
	db_release(a->reports, c);
}

/* Splits one CSV line (quotes understood) into `n` fields of `f`. */
static int csv_fields(const char *line, char f[][160], int max)
{
	int n = 0, q = 0;
	size_t o = 0;
	for (const char *p = line; *p && *p != '\n' && n < max; p++) {
		if (q && *p == '"' && p[1] == '"') {
			if (o < 159)
				f[n][o++] = '"';
			p++;
		} else if (*p == '"') {
			q = !q;
		} else if (!q && *p == ',') {
			f[n][o] = 0;
			n++;
			o = 0;
		} else if (o < 159) {
			f[n][o++] = *p;
		}
	}
	if (n < max)
		f[n++][o] = 0;
	return n;
}

/* A growing text buffer for exports. */
struct text {
	char *p;
	size_t n, cap;
	int oom;
};

static void text_add(struct text *t, const char *s, size_t k)
{
	if (t->oom)
		return;
	if (t->n + k + 1 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		while (cap < t->n + k + 1)
			cap *= 2;
		char *p = realloc(t->p, cap);
		if (!p) {
			t->oom = 1;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->n, s, k);
	t->n += k;
	t->p[t->n] = 0;
}

void h_invoice_export(struct http_req *rq)
{
	static const char *const formats[] = {"csv", "json", NULL};
	struct app *a = http_app(rq);
	const char *format = "csv";
	int64_t id;
	PGresult *inv, *lines;
	if (in_pid(rq, "id", &id) < 0 ||
	    in_qenum(rq, "format", formats, &format) < 0)
		return;
	if (!format)
		format = "csv";
	PGconn *c = db_acquire(a->reports);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	if (load_invoice(rq, c, id, &inv, &lines) < 0) {
		db_release(a->reports, c);
		return;
	}
	const char *team = PQgetisnull(inv, 0, 4) ? PQgetvalue(inv, 0, 2)
	                                          : PQgetvalue(inv, 0, 4);
	char buf[INVOICE_CSV_MAX];
	char(*row)[160] = calloc(32, 160);
	struct text t = {0};
	json_t *items = json_array();
	int nh = invoice_csv_header(buf, sizeof buf);
	if (!row || nh < 0) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		goto out;
	}
	int ncol = 0;
	char hd[32][160];
	ncol = csv_fields(buf, hd, 32);
	text_add(&t, buf, (size_t)nh);
	for (int i = 0; i < PQntuples(lines); i++) {
		struct invoice_movement m;
		line_movement(lines, i, &m);
		int n = invoice_csv_row(&m, 0, team, buf, sizeof buf);
		if (n < 0) {
			http_problem(rq, 500, "internal", "export failed",
			             "line %d of invoice %" PRId64
			             " does not fit a CSV row",
			             i, id);
			goto out;
		}
		text_add(&t, buf, (size_t)n);
		int nf = csv_fields(buf, row, 32);
		json_t *o = json_object();
		for (int k = 0; k < nf && k < ncol; k++)
			json_object_set_new(o, hd[k], json_string(row[k]));
		json_array_append_new(items, o);
	}
	if (t.oom) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		goto out;
	}
	if (strcmp(format, "csv") == 0) {
		char cd[128];
		snprintf(cd, sizeof cd,
		         "attachment; filename=\"invoice-%" PRId64
		         "-%04d-%02d.csv\"",
		         id, (int)db_int(inv, 0, 5), (int)db_int(inv, 0, 6));
		http_add_header(rq, "Content-Disposition", cd);
		http_reply_raw(rq, 200, "text/csv; charset=utf-8", t.p, t.n);
	} else {
		json_t *o = json_object();
		json_object_set_new(o, "invoice_id", json_integer(id));
		json_object_set_new(o, "items", items);
		items = NULL;
		http_reply_json(rq, 200, o);
	}
out:
	json_decref(items);
	free(t.p);
	free(row);
	PQclear(inv);
	PQclear(lines);
	db_release(a->reports, c);
}

/* The range of months [from, to] of the query; defaults: everything. */
static int q_range(struct http_req *rq, char from[16], char to[16])
{
	int f = 0, t = MONEY_YEAR_MAX * 12 + 11;
	if (q_month(rq, "from", &f) < 0 || q_month(rq, "to", &t) < 0)
		return -1;
	if (f > t) {
		http_problem(rq, 400, "invalid-parameter", "invalid parameter",
		             "from must not be after to");
		return -1;
	}
	snprintf(from, 16, "%d", f);
	snprintf(to, 16, "%d", t);
	return 0;
}

void h_usage_export(struct http_req *rq)
{
	static const char *const formats[] = {"csv", "json", NULL};
	static const char *cols =
	    "contract_id,market,delivery,buyer_id,seller_id,year,month,"
	    "seller_page_seconds,buyer_page_seconds,billed_page_seconds,"
	    "billed_page_years,recon\n";
	struct app *a = http_app(rq);
	const char *format = NULL;
	char from[16], to[16], err[512];
	if (in_qenum(rq, "format", formats, &format) < 0 ||
	    q_range(rq, from, to) < 0)
		return;
	if (!format)
		format = "csv";
	PGconn *c = db_acquire(a->reports);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	const char *pv[] = {from, to};
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT b.contract_id, mk.name, c.delivery, c.buyer_id, "
	    "c.seller_id, b.year, b.month, b.seller_ps, b.buyer_ps, "
	    "b.billed_ps, b.recon FROM billing_months b JOIN contracts c ON "
	    "c.id = b.contract_id JOIN markets mk ON mk.id = c.market_id "
	    "WHERE b.year * 12 + b.month - 1 BETWEEN $1::int AND $2::int "
	    "ORDER BY b.year, b.month, b.contract_id",
	    2, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		db_release(a->reports, c);
		return;
	}
	struct text t = {0};
	json_t *items = json_array();
	text_add(&t, cols, strlen(cols));
	for (int i = 0; i < PQntuples(r); i++) {
		char py[MONEY_TEXT_MAX], line[512];
		money_format_page_years(db_int(r, i, 9), py, sizeof py);
		int n = snprintf(line, sizeof line,
		                 "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
		                 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		                 PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
		                 PQgetvalue(r, i, 4), PQgetvalue(r, i, 5),
		                 PQgetvalue(r, i, 6), PQgetvalue(r, i, 7),
		                 PQgetvalue(r, i, 8), PQgetvalue(r, i, 9), py,
		                 PQgetvalue(r, i, 10));
		text_add(&t, line, (size_t)n);
		json_t *o = json_object();
		json_object_set_new(o, "contract_id",
		                    json_integer(db_int(r, i, 0)));
		json_object_set_new(o, "market",
		                    json_string(PQgetvalue(r, i, 1)));
		json_object_set_new(o, "delivery",
		                    json_string(PQgetvalue(r, i, 2)));
		json_object_set_new(o, "buyer_id",
		                    json_integer(db_int(r, i, 3)));
		json_object_set_new(o, "seller_id",
		                    json_integer(db_int(r, i, 4)));
		json_object_set_new(o, "year", json_integer(db_int(r, i, 5)));
		json_object_set_new(o, "month", json_integer(db_int(r, i, 6)));
		json_object_set_new(o, "seller_page_seconds",
		                    PQgetisnull(r, i, 7)
		                        ? json_null()
		                        : json_integer(db_int(r, i, 7)));
		json_object_set_new(o, "buyer_page_seconds",
		                    PQgetisnull(r, i, 8)
		                        ? json_null()
		                        : json_integer(db_int(r, i, 8)));
		json_object_set_new(o, "billed_page_seconds",
		                    json_integer(db_int(r, i, 9)));
		json_object_set_new(o, "billed_page_years", json_string(py));
		json_object_set_new(o, "recon",
		                    json_string(PQgetvalue(r, i, 10)));
		json_array_append_new(items, o);
	}
	PQclear(r);
	db_release(a->reports, c);
	if (t.oom) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
	} else if (strcmp(format, "csv") == 0) {
		http_add_header(rq, "Content-Disposition",
		                "attachment; filename=\"usage.csv\"");
		http_reply_raw(rq, 200, "text/csv; charset=utf-8", t.p, t.n);
	} else {
		json_t *o = json_object();
		json_object_set_new(o, "items", items);
		items = NULL;
		http_reply_json(rq, 200, o);
	}
	json_decref(items);
	free(t.p);
}

void h_billing_summary(struct http_req *rq)
{
	static const char *const bys[] = {"account", "team", NULL};
	struct app *a = http_app(rq);
	const char *by = NULL;
	char from[16], to[16], err[512];
	if (in_qenum(rq, "by", bys, &by) < 0 || q_range(rq, from, to) < 0)
		return;
	int team = by && strcmp(by, "team") == 0;
	char sql[2048];
	snprintf(
	    sql, sizeof sql,
	    "SELECT p.year, p.month, %s, sum(p.amount) FILTER (WHERE p.role "
	    "= 'buyer')::bigint AS spend, (-sum(p.amount) FILTER (WHERE "
	    "p.role = 'seller'))::bigint AS revenue, (-sum(p.amount) FILTER "
	    "(WHERE p.role = 'seller' AND c.delivery = 'offline'))::bigint AS "
	    "offline_credits, (-sum(p.amount) FILTER (WHERE p.role = "
	    "'exchange'))::bigint AS fees, sum(m.page_seconds) FILTER (WHERE "
	    "p.role = 'buyer' AND m.kind <> 'settlement')::bigint AS "
	    "bought_page_seconds, sum(m.page_seconds) FILTER (WHERE p.role = "
	    "'seller' AND m.kind <> 'settlement')::bigint AS "
	    "sold_page_seconds FROM postings p JOIN movements m ON m.id = "
	    "p.movement_id JOIN contracts c ON c.id = p.contract_id JOIN "
	    "accounts a ON a.id = p.account_id LEFT JOIN teams t ON t.id = "
	    "a.team_id WHERE p.year * 12 + p.month - 1 BETWEEN $1::int AND "
	    "$2::int AND ($3::bigint IS NULL OR p.account_id = $3) AND "
	    "($4::bigint IS NULL OR a.team_id = $4) GROUP BY 1, 2, 3%s "
	    "ORDER BY 1, 2, 3",
	    team ? "t.name AS team" : "p.account_id, a.name AS account",
	    team ? "" : ", 4");
	PGconn *c = db_acquire(a->reports);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	/* each customer its own: the operator its account, a trader its
	 * team's nodes; finance and admin everything */
	char acct[24], tm[24];
	handlers_scope(rq, 0, acct, tm);
	const char *pv[] = {from, to, nz(acct), nz(tm)};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK, sql, 4, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		db_release(a->reports, c);
		return;
	}
	json_t *items = db_rows_json(r);
	PQclear(r);
	db_release(a->reports, c);
	size_t i;
	json_t *o;
	json_array_foreach(items, i, o)
	{
		static const char *ps[] = {"bought_page_seconds",
		                           "sold_page_seconds"};
		static const char *py[] = {"bought_page_years",
		                           "sold_page_years"};
		for (int k = 0; k < 2; k++) {
			char b[MONEY_TEXT_MAX];
			json_int_t v =
			    json_integer_value(json_object_get(o, ps[k]));
			money_format_page_years((rx_pagesec)v, b, sizeof b);
			json_object_set_new(o, py[k], json_string(b));
		}
	}
	json_t *res = json_object();
	json_object_set_new(res, "by", json_string(team ? "team" : "account"));
	json_object_set_new(res, "items", items);
	http_reply_json(rq, 200, res);
}

/* Pages through postings for h_ledger_check's cursor. */
#define LEDGER_CHECK_PAGE "10000"

static void ledger_page(struct invoice_ledger *l, const PGresult *r,
                        json_t *problems)
{
	char why[INVOICE_MSG_MAX];
	for (int i = 0; i < PQntuples(r); i++) {
		struct invoice_posting p = {.movement_id = db_int(r, i, 0),
		                            .account = db_int(r, i, 1),
		                            .contract_id = db_int(r, i, 2),
		                            .year = (int)db_int(r, i, 3),
		                            .month = (int)db_int(r, i, 4),
		                            .amount = db_int(r, i, 5)};
		if (invoice_ledger_add(l, &p, why, sizeof why) < 0) {
			if (json_array_size(problems) < 20)
				json_array_append_new(problems,
				                      json_string(why));
			/* report it and go on with this posting's movement */
			l->movement = p.movement_id;
			l->movement_sum = p.amount;
			l->total += p.amount;
			l->postings++;
			l->movements++;
		}
	}
}

void h_ledger_check(struct http_req *rq)
{
	struct app *a = http_app(rq);
	char err[512], why[INVOICE_MSG_MAX];
	PGconn *c = db_acquire(a->reports);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	json_t *problems = json_array();
	struct invoice_ledger l;
	invoice_ledger_init(&l);
	int64_t invoices = 0;
	/* one snapshot for both questions */
	PGresult *r = db_exec(c, PGRES_COMMAND_OK,
	                      "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
	                      0, NULL, err, sizeof err);
	if (!r)
		goto dberr;
	PQclear(r);
	/* every posting, a page at a time: a year of a fleet's postings does
	 * not fit in one result */
	r = db_exec(c, PGRES_COMMAND_OK,
	            "DECLARE ledger_check NO SCROLL CURSOR FOR SELECT "
	            "movement_id, account_id, contract_id, year, month, amount "
	            "FROM postings ORDER BY movement_id, id",
	            0, NULL, err, sizeof err);
	if (!r)
		goto dberr;
	PQclear(r);
	for (;;) {
		r = db_exec(c, PGRES_TUPLES_OK,
		            "FETCH " LEDGER_CHECK_PAGE " FROM ledger_check", 0,
		            NULL, err, sizeof err);
		if (!r)
			goto dberr;
		if (PQntuples(r) == 0)
			break;
		ledger_page(&l, r, problems);
		PQclear(r);
	}
	PQclear(r);
	if (invoice_ledger_finish(&l, why, sizeof why) < 0 &&
	    json_array_size(problems) < 20)
		json_array_append_new(problems, json_string(why));
	/* every invoice equals its postings; every movement's amount is
	 * its buyer's posting */
	r = db_exec(c, PGRES_TUPLES_OK, "SELECT count(*) FROM invoices", 0,
	            NULL, err, sizeof err);
	if (!r)
		goto dberr;
	invoices = db_int(r, 0, 0);
	PQclear(r);
	r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT i.id, i.total, i.lines, coalesce(sum(p.amount), "
	    "0)::text, count(p.id) FROM invoices i LEFT JOIN postings p "
	    "ON p.invoice_id = i.id GROUP BY i.id HAVING i.total::numeric "
	    "<> coalesce(sum(p.amount), 0) OR i.lines <> count(p.id) "
	    "ORDER BY i.id LIMIT 20",
	    0, NULL, err, sizeof err);
	if (!r)
		goto dberr;
	for (int i = 0; i < PQntuples(r); i++) {
		char b[256];
		snprintf(b, sizeof b,
		         "invoice %s says %s n$ in %s lines but its postings "
		         "sum to %s n$ in %s",
		         PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		         PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
		         PQgetvalue(r, i, 4));
		json_array_append_new(problems, json_string(b));
	}
	PQclear(r);
	r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT m.id, m.amount, p.amount FROM movements m LEFT JOIN "
	    "postings p ON p.movement_id = m.id AND p.role = 'buyer' "
	    "WHERE p.amount IS DISTINCT FROM m.amount ORDER BY m.id "
	    "LIMIT 20",
	    0, NULL, err, sizeof err);
	if (!r)
		goto dberr;
	for (int i = 0; i < PQntuples(r); i++) {
		char b[256];
		snprintf(
		    b, sizeof b,
		    "movement %s charges %s n$ but its buyer posting is %s",
		    PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		    PQgetisnull(r, i, 2) ? "missing" : PQgetvalue(r, i, 2));
		json_array_append_new(problems, json_string(b));
	}
	PQclear(r);
	r = PQexec(c, "COMMIT");
	PQclear(r);
	json_t *o = json_object();
	json_object_set_new(o, "ok",
	                    json_boolean(json_array_size(problems) == 0));
	json_object_set_new(o, "movements", json_integer(l.movements));
	json_object_set_new(o, "postings", json_integer(l.postings));
	json_object_set_new(o, "invoices", json_integer(invoices));
	char sum[48];
	snprintf(sum, sizeof sum, "%lld", (long long)l.total);
	json_object_set_new(o, "sum", json_string(sum));
	json_object_set_new(o, "problems", problems);
	http_reply_json(rq, 200, o);
	db_release(a->reports, c);
	return;
dberr:
	handlers_db_error(rq, c, err);
	r = PQexec(c, "ROLLBACK");
	PQclear(r);
	json_decref(problems);
	db_release(a->reports, c);
}

void h_billing_run(struct http_req *rq)
{
	static const char *const known[] = {"as_of_ns", NULL};
	struct app *a = http_app(rq);
	int64_t as_of = 0;
	size_t blen;
	json_t *b = NULL;
	http_body(rq, &blen);
	if (blen > 0) {
		if (!(b = http_body_object(rq)))
			return;
		if (in_known(rq, b, known) < 0 ||
		    in_int(rq, b, "as_of_ns", false, 1, IN_TIME_NS_MAX, &as_of) <
		        0)
			goto out;
	}
	struct billing_result res;
	char err[BILLING_MSG_MAX];
	int rc = billing_run(a->billing, as_of, 1, &res, err, sizeof err);
	if (rc == -2) {
		http_problem(rq, 409, "billing-refused", "billing run refused",
		             "%s", err);
	} else if (rc < 0) {
		/* err may hold PostgreSQL's text: the log has it */
		char q[BILLING_MSG_MAX + 64];
		log_warn("billing run failed", "api=1 err=%s",
		         log_quote(q, sizeof q, err));
		http_add_header(rq, "Retry-After", "5");
		http_problem(rq, 503, "billing-failed", "billing run failed",
		             "the billing run stopped part-way (its log line "
		             "\"billing run failed\" says why); what committed "
		             "before stays billed, and the next run goes on "
		             "from there");
	} else {
		json_t *o = json_object();
		json_object_set_new(o, "run_id", json_integer(res.run_id));
		json_object_set_new(o, "as_of_ns", json_integer(res.as_of));
		json_object_set_new(o, "contracts",
		                    json_integer(res.contracts));
		json_object_set_new(o, "movements",
		                    json_integer(res.movements));
		json_object_set_new(o, "postings", json_integer(res.postings));
		json_object_set_new(o, "settled", json_integer(res.settled));
		json_object_set_new(o, "finalized",
		                    json_integer(res.finalized));
		json_object_set_new(o, "flagged", json_integer(res.flagged));
		json_object_set_new(o, "unbilled", json_integer(res.unbilled));
		json_object_set_new(o, "elapsed_ms",
		                    json_integer(res.elapsed_ms));
		http_reply_json(rq, 200, o);
	}
out:
	json_decref(b);
}
