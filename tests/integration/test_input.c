/*
 * test_input.c — what ramexd's edge makes of hostile input, against a real
 * ramexd and PostgreSQL: every answer to a bad request is a 4xx
 * problem+json in valid UTF-8 that says what was wrong in the exchange's
 * own words, and changes nothing.
 *
 * What would break without each part: a problem detail that quotes
 * jansson's error text, or a key cut inside a multibyte character, is not
 * valid UTF-8, json_pack refuses it and the answer was a 500 without a
 * detail (JSONTestSuite, tests/integration/fixtures/JSONTestSuite, sent to
 * every JSON route); a name the database's CHECK refuses reached the
 * client as PostgreSQL's constraint text in a 500 or 422; `null` for a
 * typed optional field was taken as absent, and integers far outside what
 * makes sense (2^63-1 as a price or a penalty above the market's price_max)
 * were accepted.
 */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/routes.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

#define SUITE_DIR "tests/integration/fixtures/JSONTestSuite/test_parsing"

/* --- checking answers ------------------------------------------------------
 */

/* RFC 3629, written apart from ramexd's own check: shortest forms only, no
 * surrogates, nothing above U+10FFFF. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t len;
		unsigned min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			len = 2, min = 0x80, c &= 0x1F;
		else if ((c & 0xF0) == 0xE0)
			len = 3, min = 0x800, c &= 0x0F;
		else if ((c & 0xF8) == 0xF0)
			len = 4, min = 0x10000, c &= 0x07;
		else
			return false;
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			c = c << 6 | (s[i + k] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

/* Text PostgreSQL puts in its errors: none of it may reach a client. */
static const char *pg_words(const char *body)
{
	static const char *const words[] = {"violates",
	                                    "constraint",
	                                    "duplicate key",
	                                    "ERROR:",
	                                    "DETAIL:",
	                                    "SQLSTATE",
	                                    "relation \"",
	                                    "syntax error at",
	                                    "invalid input",
	                                    "out of range for type",
	                                    NULL};
	for (const char *const *w = words; *w; w++)
		if (strstr(body, *w))
			return *w;
	return NULL;
}

struct ans {
	long status;
	char ctype[128];
	char *body;
	size_t len;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct ans *a = ud;
	char *b = realloc(a->body, a->len + sz * n + 1);
	if (!b)
		return 0;
	memcpy(b + a->len, p, sz * n);
	a->body = b;
	a->len += sz * n;
	b[a->len] = 0;
	return sz * n;
}

/* One call with a body of `len` bytes (NUL bytes too) and a bearer token. */
static long send_raw(struct rxh *h, const char *method, const char *path,
                     const char *token, const char *body, size_t len,
                     struct ans *a)
{
	char url[4096], auth[160];
	struct curl_slist *hl = NULL;
	memset(a, 0, sizeof *a);
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", h->port, path);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
	}
	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		hl = curl_slist_append(hl, auth);
	}
	hl = curl_slist_append(hl, "Expect:");
	hl = curl_slist_append(hl, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	if (curl_easy_perform(c) == CURLE_OK) {
		char *ct = NULL;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(a->ctype, sizeof a->ctype, "%s", ct ? ct : "");
	} else {
		a->status = -1;
	}
	curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	if (!a->body)
		a->body = strdup("");
	return a->status;
}

/* A 4xx answer must be problem+json in valid UTF-8 whose status is the
 * HTTP status and whose detail is there; `what` names the request. */
static void check_problem(const char *what, long status, const char *ctype,
                          const char *body, size_t len)
{
	ck_assert_msg(status >= 200 && status < 500, "%s: %ld %s", what, status,
	              body);
	ck_assert_msg(utf8_ok((const unsigned char *)body, len),
	              "%s: the answer is not valid UTF-8", what);
	const char *pg = pg_words(body);
	ck_assert_msg(!pg, "%s: PostgreSQL's words (%s) in %s", what, pg, body);
	if (status < 400)
		return;
	ck_assert_msg(strncmp(ctype, "application/problem+json", 24) == 0,
	              "%s: %ld with content type %s", what, status, ctype);
	json_error_t e;
	json_t *j = json_loadb(body, len, 0, &e);
	ck_assert_msg(j && json_is_object(j), "%s: not a JSON object: %s", what,
	              body);
	const char *detail = json_string_value(json_object_get(j, "detail"));
	ck_assert_msg(detail && *detail, "%s: no detail: %s", what, body);
	ck_assert_msg(
	    json_integer_value(json_object_get(j, "status")) == status,
	    "%s: status %ld, in the body %lld", what, status,
	    (long long)json_integer_value(json_object_get(j, "status")));
	json_decref(j);
}

/* --- the JSON routes ------------------------------------------------------ */

struct target {
	const struct http_route *rt;
	char path[128];
	const char *token; /* NULL: signed as node a */
};

/* Every route that reads a JSON body, with a caller its roles allow. */
static int json_routes(const struct rxh *h, const struct rxh_world *w,
                       struct target *t, int max)
{
	int n = 0;
	for (size_t i = 0; i < routes_count && n < max; i++) {
		const struct http_route *rt = &routes_table[i];
		if (strcmp(rt->method, "POST") != 0)
			continue;
		t[n].rt = rt;
		const char *p = rt->pattern, *brace = strchr(p, '{');
		if (brace)
			snprintf(t[n].path, sizeof t[n].path, "%.*s1%s",
			         (int)(brace - p), p, strchr(brace, '}') + 1);
		else
			snprintf(t[n].path, sizeof t[n].path, "%s", p);
		unsigned r = rt->roles;
		t[n].token = r & AUTH_ADMIN      ? h->admin
		             : r & AUTH_TRADER   ? w->trader_token
		             : r & AUTH_OPERATOR ? w->op_token
		             : r & AUTH_FINANCE  ? w->finance_token
		                                 : NULL;
		n++;
	}
	return n;
}

static long send_to(struct rxh *h, const struct rxh_world *w,
                    const struct target *t, const char *body, size_t len,
                    struct ans *a)
{
	if (t->token)
		return send_raw(h, "POST", t->path, t->token, body, len, a);
	/* a node's route: signed, so the body is a C string (no NUL) */
	struct rxh_resp r;
	rxh_call_signed(h, "POST", t->path, w->key_a, w->secret_a, body, 0,
	                NULL, &r);
	memset(a, 0, sizeof *a);
	a->status = r.status;
	char ct[128];
	snprintf(a->ctype, sizeof a->ctype, "%s",
	         rxh_header(&r, "Content-Type", ct, sizeof ct) ? ct : "");
	a->body = r.body;
	a->len = strlen(r.body);
	r.body = NULL;
	rxh_resp_free(&r);
	return a->status;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "%s: cannot open", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	ck_assert_int_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* Every n_ and i_ file of JSONTestSuite, as the body and as the value of a
 * field, to every JSON route: never a 5xx, never invalid UTF-8. */
START_TEST(json_test_suite_gets_4xx_in_utf8)
{
	struct rxh h;
	struct rxh_world w;
	struct target t[32];
	rxh_start(&h, "ramex_t_input_jts", "");
	rxh_world(&h, &w);
	int nt = json_routes(&h, &w, t, 32);
	ck_assert_int_ge(nt, 16);
	static const char rows_sql[] =
	    "SELECT (SELECT count(*) FROM teams) + (SELECT count(*) FROM "
	    "accounts) * 10 + (SELECT count(*) FROM api_tokens) * 100 + "
	    "(SELECT count(*) FROM node_keys) * 1000 + (SELECT count(*) FROM "
	    "markets) * 10000 + (SELECT count(*) FROM orders) * 100000 + "
	    "(SELECT count(*) FROM usage_reports) * 1000000";
	long rows = testdb_scalar_at(h.conninfo, rows_sql);
	DIR *d = opendir(SUITE_DIR);
	ck_assert_msg(d, "%s not found (run from the repo root)", SUITE_DIR);
	struct dirent *e;
	int files = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "n_", 2) && strncmp(e->d_name, "i_", 2))
			continue;
		char path[512];
		size_t len;
		snprintf(path, sizeof path, "%s/%s", SUITE_DIR, e->d_name);
		char *doc = slurp(path, &len);
		bool has_nul = memchr(doc, 0, len) != NULL;
		/* the document as the value of a field the route reads */
		char *wrapped = malloc(len + 32);
		memcpy(wrapped, "{\"name\":", 8);
		memcpy(wrapped + 8, doc, len);
		wrapped[8 + len] = '}';
		wrapped[9 + len] = 0;
		for (int i = 0; i < nt; i++) {
			if (!t[i].token && has_nul)
				continue;
			for (int k = 0; k < 2; k++) {
				struct ans a;
				char what[400];
				snprintf(what, sizeof what, "%s %s (%s)",
				         e->d_name, t[i].path,
				         k ? "as a field" : "as the body");
				send_to(&h, &w, &t[i], k ? wrapped : doc,
				        k ? len + 9 : len, &a);
				check_problem(what, a.status, a.ctype, a.body,
				              a.len);
				free(a.body);
			}
		}
		free(wrapped);
		free(doc);
		files++;
	}
	closedir(d);
	ck_assert_int_gt(files, 200);
	/* and none of it changed anything */
	ck_assert_int_eq(testdb_scalar_at(h.conninfo, rows_sql), rows);
	rxh_stop(&h);
}
END_TEST

/* A key of 'a' and 40 two-byte characters: 81 bytes, so that a cut at 64
 * bytes falls inside a character. */
START_TEST(long_keys_are_cut_on_character_boundaries)
{
	struct rxh h;
	struct rxh_world w;
	struct target t[32];
	char body[256] = "{\"a";
	rxh_start(&h, "ramex_t_input_keys", "");
	rxh_world(&h, &w);
	for (int i = 0; i < 40; i++)
		strcat(body, "\xc3\xa9");
	strcat(body, "\":1}");
	int nt = json_routes(&h, &w, t, 32);
	for (int i = 0; i < nt; i++) {
		struct ans a;
		send_to(&h, &w, &t[i], body, strlen(body), &a);
		check_problem(t[i].path, a.status, a.ctype, a.body, a.len);
		/* (a new node key takes no body) */
		ck_assert_msg(a.status == 400 ||
		                  strstr(t[i].rt->pattern, "/keys"),
		              "%s: %ld %s", t[i].path, a.status, a.body);
		free(a.body);
	}
	/* the same key in a usage report */
	char rep[512];
	snprintf(rep, sizeof rep, "{\"reports\":[%s]}", body);
	struct rxh_resp r;
	rxh_call_signed(&h, "POST", "/v1/usage", w.key_a, w.secret_a, rep, 0,
	                NULL, &r);
	check_problem("usage report key", r.status, "application/problem+json",
	              r.body, strlen(r.body));
	ck_assert_int_eq(r.status, 400);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* Bytes that are not UTF-8 in the path or the query string: 400 or 404,
 * never the database's "invalid byte sequence" as a 500. */
START_TEST(targets_that_are_not_utf8_are_refused)
{
	struct rxh h;
	struct rxh_world w;
	static const char *const gets[] = {"/v1/markets/%FF",
	                                   "/v1/markets/%C3",
	                                   "/v1/markets/spot%ED%A0%80/trades",
	                                   "/v1/orders?market=%FF",
	                                   "/v1/orders?market=%C3%28",
	                                   "/v1/contracts?market=%F0%9F%8C",
	                                   "/v1/orders?%FF=1",
	                                   "/v1/nothing/%FF%FE",
	                                   NULL};
	rxh_start(&h, "ramex_t_input_target", "");
	rxh_world(&h, &w);
	for (const char *const *g = gets; *g; g++) {
		struct ans a;
		send_raw(&h, "GET", *g, w.trader_token, NULL, 0, &a);
		check_problem(*g, a.status, a.ctype, a.body, a.len);
		ck_assert_msg(a.status == 400 || a.status == 404, "%s: %ld %s",
		              *g, a.status, a.body);
		free(a.body);
	}
	rxh_stop(&h);
}
END_TEST

/* --- the database's refusals, in the exchange's words ----------------------
 */

struct expect {
	const char *path, *body;
	long status;
	const char *field; /* the detail names it */
};

static void expect_all(struct rxh *h, const char *token, const struct expect *x,
                       int n)
{
	for (int i = 0; i < n; i++) {
		struct ans a;
		char what[300];
		snprintf(what, sizeof what, "POST %s %s", x[i].path, x[i].body);
		send_raw(h, "POST", x[i].path, token, x[i].body,
		         strlen(x[i].body), &a);
		check_problem(what, a.status, a.ctype, a.body, a.len);
		ck_assert_msg(a.status == x[i].status, "%s: %ld, not %ld: %s",
		              what, a.status, x[i].status, a.body);
		if (x[i].field) {
			char name[80];
			snprintf(name, sizeof name, "%s:", x[i].field);
			ck_assert_msg(strstr(a.body, name),
			              "%s: the detail does not name %s: %s",
			              what, x[i].field, a.body);
		}
		free(a.body);
	}
}

START_TEST(database_refusals_are_in_our_words)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_input_db", "");
	rxh_world(&h, &w);
	char node_hx[128];
	snprintf(node_hx, sizeof node_hx, "{\"name\":\"HX\",\"team_id\":%lld}",
	         (long long)w.team);
	/* a token of a role that acts for no account, given a real one: it
	 * was stored, whoami named the account, and the finance token read
	 * every account's billing all the same */
	char fin_acct[128], trader_acct[160], keys_path[64];
	snprintf(keys_path, sizeof keys_path, "/v1/nodes/%lld/keys",
	         (long long)w.node_a);
	snprintf(fin_acct, sizeof fin_acct,
	         "{\"name\":\"f\",\"role\":\"finance\",\"account_id\":%lld}",
	         (long long)w.op_account);
	snprintf(trader_acct, sizeof trader_acct,
	         "{\"name\":\"t\",\"role\":\"trader\",\"team_id\":%lld,"
	         "\"account_id\":%lld}",
	         (long long)w.team, (long long)w.node_a);
	const struct expect x[] = {
	    /* the schema's name rule, checked at the edge */
	    {"/v1/nodes", node_hx, 400, "name"},
	    {"/v1/teams", "{\"name\":\"HX\"}", 400, "name"},
	    {"/v1/teams", "{\"name\":\"-x\"}", 400, "name"},
	    {"/v1/accounts", "{\"name\":\"Op\",\"kind\":\"operator\"}", 400,
	     "name"},
	    /* unique and foreign keys, found by the database */
	    {"/v1/teams", "{\"name\":\"blue\"}", 409, "name"},
	    {"/v1/accounts", "{\"name\":\"node-a\",\"kind\":\"operator\"}", 409,
	     "name"},
	    {"/v1/nodes", "{\"name\":\"n9\",\"team_id\":999999}", 422,
	     "team_id"},
	    /* and an operator belongs to no team at all */
	    {"/v1/accounts",
	     "{\"name\":\"op9\",\"kind\":\"operator\",\"team_id\":999999}", 400,
	     "team_id"},
	    {"/v1/tokens",
	     "{\"name\":\"t\",\"role\":\"trader\",\"team_id\":999999}", 422,
	     "team_id"},
	    {"/v1/tokens",
	     "{\"name\":\"t\",\"role\":\"finance\",\"account_id\":999999}", 422,
	     "account_id"},
	    {"/v1/tokens", fin_acct, 422, "account_id"},
	    {"/v1/tokens", trader_acct, 422, "account_id"},
	    /* a request that takes no fields reads its body all the same:
	     * malformed JSON or a field made a key (201) */
	    {keys_path, "{\"x\":1}", 400, NULL},
	    {keys_path, "[1", 400, NULL},
	};
	long keys = testdb_scalar_at(h.conninfo, "SELECT count(*) FROM node_keys");
	expect_all(&h, h.admin, x, (int)(sizeof x / sizeof x[0]));
	ck_assert_int_eq(testdb_scalar_at(h.conninfo,
	                                  "SELECT count(*) FROM node_keys"),
	                 keys);

	/* a query that fails inside the exchange: a 500 that says so, with
	 * PostgreSQL's text in the log only */
	testdb_run(h.conninfo, "ALTER TABLE teams RENAME TO teams_gone");
	struct ans a;
	send_raw(&h, "GET", "/v1/teams", h.admin, NULL, 0, &a);
	ck_assert_msg(a.status == 500, "%ld %s", a.status, a.body);
	ck_assert_msg(!pg_words(a.body), "PostgreSQL's words: %s", a.body);
	ck_assert_msg(strstr(a.body, "\"detail\""), "%s", a.body);
	free(a.body);
	send_raw(&h, "POST", "/v1/teams", h.admin, "{\"name\":\"green\"}", 16,
	         &a);
	ck_assert_msg(a.status == 500 && !pg_words(a.body), "%ld %s", a.status,
	              a.body);
	free(a.body);
	testdb_run(h.conninfo, "ALTER TABLE teams_gone RENAME TO teams");
	ck_assert_int_ge(rxh_log_count(&h, "teams"), 1);
	rxh_stop(&h);
}
END_TEST

/* --- null and ranges -------------------------------------------------------
 */

START_TEST(null_and_out_of_range_values_are_400)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_input_null", "");
	rxh_world(&h, &w);
	char o[6][256];
	const char *fields[] = {"tif",        "stp",        "post_only",
	                        "account_id", "expires_ns", "client_order_id"};
	for (int i = 0; i < 6; i++)
		snprintf(o[i], sizeof o[i],
		         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":"
		         "\"sell\",\"pages\":256,\"price\":100000,\"%s\":"
		         "null}",
		         (long long)w.node_a, fields[i]);
	/* account_id twice is a duplicate key: put the null one alone */
	snprintf(o[3], sizeof o[3],
	         "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,"
	         "\"price\":100000,\"account_id\":null}");
	const struct expect orders[] = {
	    {"/v1/orders", o[0], 400, "tif"},
	    {"/v1/orders", o[1], 400, "stp"},
	    {"/v1/orders", o[2], 400, "post_only"},
	    {"/v1/orders", o[3], 400, "account_id"},
	    {"/v1/orders", o[4], 400, "expires_ns"},
	    {"/v1/orders", o[5], 400, "client_order_id"},
	    {"/v1/orders",
	     "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":"
	     "9223372036854775807,\"price\":100000}",
	     400, "pages"},
	    {"/v1/orders",
	     "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,\"price\":"
	     "9223372036854775807}",
	     400, "price"},
	    {"/v1/orders",
	     "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,\"price\":"
	     "1000,\"tif\":\"gtd\",\"expires_ns\":9223372036854775807}",
	     400, "expires_ns"},
	    {"/v1/orders/1/reduce", "{\"remaining\":9223372036854775807}", 400,
	     "remaining"},
	    {"/v1/contracts/1/end", "{\"note\":null}", 400, "note"},
	};
	expect_all(&h, w.trader_token, orders,
	           (int)(sizeof orders / sizeof orders[0]));
	const struct expect admin[] = {
	    {"/v1/billing/run", "{\"as_of_ns\":null}", 400, "as_of_ns"},
	    {"/v1/billing/run", "{\"as_of_ns\":9223372036854775807}", 400,
	     "as_of_ns"},
	    {"/v1/teams", "{\"name\":null}", 400, "name"},
	    {"/v1/accounts",
	     "{\"name\":\"x1\",\"kind\":\"exchange\",\"team_id\":null}", 400,
	     "team_id"},
	};
	expect_all(&h, h.admin, admin, (int)(sizeof admin / sizeof admin[0]));
#define MKT(name, extra)                                                       \
	"{\"name\":\"" name "\",\"tick\":1000,\"lot\":256,\"min_pages\":256,"  \
	"\"max_pages\":1048576,\"price_min\":0,\"notice_period_s\":3600,"      \
	"\"delivery_deadline_s\":600," extra "}"
	const struct expect markets[] = {
	    {"/v1/markets",
	     MKT("perm-2031",
	         "\"price_max\":1000000,\"breach_penalty\":1001000"),
	     400, "breach_penalty"},
	    {"/v1/markets",
	     MKT("perm-2032",
	         "\"price_max\":9223372036854775807,\"breach_penalty\":0"),
	     400, "price_max"},
	    {"/v1/markets",
	     MKT("perm-2033", "\"price_max\":1000000,\"breach_penalty\":"
	                      "9223372036854775807"),
	     400, "breach_penalty"},
	};
	expect_all(&h, w.op_token, markets,
	           (int)(sizeof markets / sizeof markets[0]));
	/* nothing of it was kept */
	ck_assert_int_eq(
	    testdb_scalar_at(h.conninfo, "SELECT count(*) FROM orders"), 0);
	ck_assert_int_eq(testdb_scalar_at(h.conninfo,
	                                  "SELECT count(*) FROM markets WHERE "
	                                  "name LIKE 'perm-203%'"),
	                 0);
	rxh_stop(&h);
}
END_TEST

/* Every integer a request carries (a body's field, a path or query
 * parameter, a header) has a minimum and a maximum in api/openapi.yaml.
 */
START_TEST(openapi_integers_have_ranges)
{
	FILE *f = fopen("api/openapi.yaml", "r");
	char line[2048], schema[64] = "";
	int checked = 0, in_schemas = 0;
	static const char *const requests[] = {
	    "NewTeam",  "NewAccount", "NewNode",      "NewToken", "NewMarket",
	    "NewOrder", "MoveNote",   "LendEndpoint", "UsageReport", NULL};
	ck_assert_msg(f, "api/openapi.yaml not found (run from the repo root)");
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "  schemas:") == 0)
			in_schemas = 1;
		if (in_schemas && strncmp(line, "    ", 4) == 0 &&
		    line[4] != ' ')
			snprintf(schema, sizeof schema, "%.*s",
			         (int)strcspn(line + 4, ":"), line + 4);
		int request = 0;
		for (const char *const *r = requests; *r && in_schemas; r++)
			request |= strcmp(*r, schema) == 0;
		/* parameters and inline request bodies carry "in:" or sit
		 * under requestBody/properties outside components/schemas */
		int param = strstr(line, " in: query") ||
		            strstr(line, " in: path") ||
		            strstr(line, " in: header");
		int inline_body =
		    !in_schemas && (strstr(line, "requestBody:") ||
		                    strstr(line, "properties: {"));
		if (!strstr(line, "type: integer") ||
		    !(request || param || inline_body))
			continue;
		if (strstr(line, "enum:"))
			continue;
		ck_assert_msg(strstr(line, "minimum:") &&
		                  strstr(line, "maximum:"),
		              "api/openapi.yaml: an integer without its range "
		              "(%s): %s",
		              schema[0] ? schema : "path", line);
		checked++;
	}
	fclose(f);
	ck_assert_int_gt(checked, 30);
}
END_TEST

/* The range of field `field` as api/openapi.yaml gives it, in schema
 * `schema` (NULL: the first line that gives `field:` an integer range). */
static void yaml_range(const char *schema, const char *field, long long *min,
                       long long *max)
{
	FILE *f = fopen("api/openapi.yaml", "r");
	char line[2048], want[96], head[96];
	int in = schema == NULL;
	ck_assert_ptr_nonnull(f);
	snprintf(want, sizeof want, "%s: {type: integer, minimum: ", field);
	snprintf(head, sizeof head, "    %s:", schema ? schema : "");
	while (fgets(line, sizeof line, f)) {
		if (schema && strncmp(line, "    ", 4) == 0 && line[4] != ' ')
			in = strncmp(line, head, strlen(head)) == 0;
		const char *p = strstr(line, want);
		if (!in || !p)
			continue;
		p += strlen(want);
		*min = strtoll(p, NULL, 10);
		const char *m = strstr(p, "maximum: ");
		ck_assert_msg(m, "%s.%s has no maximum", schema, field);
		*max = strtoll(m + 9, NULL, 10);
		fclose(f);
		return;
	}
	fclose(f);
	ck_abort_msg("%s.%s not found in api/openapi.yaml", schema, field);
}

/* Each integer field just outside the range api/openapi.yaml gives it is a
 * 400 that names the field and that range: the documentation and the edge
 * hold the same numbers. */
START_TEST(ranges_are_the_documented_ones)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_input_ranges", "");
	rxh_world(&h, &w);
	static const char market[] =
	    "{\"name\":\"perm-2040\",\"tick\":1,\"lot\":1,\"min_pages\":1,"
	    "\"max_pages\":1,\"price_min\":0,\"price_max\":1000,"
	    "\"notice_period_s\":0,\"breach_penalty\":0,"
	    "\"delivery_deadline_s\":1}";
	static const char order[] =
	    "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,\"price\":"
	    "1000,\"tif\":\"gtd\",\"expires_ns\":1}";
	const struct {
		const char *path, *base, *schema, *field;
		int who; /* 0 admin, 1 operator, 2 trader */
	} cases[] = {
	    {"/v1/markets", market, "NewMarket", "tick", 1},
	    {"/v1/markets", market, "NewMarket", "lot", 1},
	    {"/v1/markets", market, "NewMarket", "min_pages", 1},
	    {"/v1/markets", market, "NewMarket", "max_pages", 1},
	    {"/v1/markets", market, "NewMarket", "price_min", 1},
	    {"/v1/markets", market, "NewMarket", "price_max", 1},
	    {"/v1/markets", market, "NewMarket", "notice_period_s", 1},
	    {"/v1/markets", market, "NewMarket", "breach_penalty", 1},
	    {"/v1/markets", market, "NewMarket", "delivery_deadline_s", 1},
	    {"/v1/orders", order, "NewOrder", "pages", 2},
	    {"/v1/orders", order, "NewOrder", "price", 2},
	    {"/v1/orders", order, "NewOrder", "expires_ns", 2},
	    {"/v1/orders", order, "NewOrder", "account_id", 2},
	    {"/v1/orders/1/reduce", "{\"remaining\":1}", NULL, "remaining", 2},
	    {"/v1/billing/run", "{\"as_of_ns\":1}", NULL, "as_of_ns", 0},
	    {"/v1/tokens", "{\"name\":\"t\",\"role\":\"trader\",\"team_id\":1}",
	     "NewToken", "team_id", 0},
	    {"/v1/nodes", "{\"name\":\"n9\",\"team_id\":1}", "NewNode",
	     "team_id", 0},
	};
	const char *tokens[] = {h.admin, w.op_token, w.trader_token};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long long min, max;
		yaml_range(cases[i].schema, cases[i].field, &min, &max);
		char range[80];
		snprintf(range, sizeof range, "between %lld and %lld", min,
		         max);
		for (int k = 0; k < 2; k++) {
			if (k && max == INT64_MAX)
				continue; /* 2^63 is no int64: bad JSON, 400 */
			long long v = k ? max + 1 : min - 1;
			json_t *b = json_loads(cases[i].base, 0, NULL);
			json_object_set_new(b, cases[i].field,
			                    json_integer((json_int_t)v));
			char *body = json_dumps(b, JSON_COMPACT);
			json_decref(b);
			struct ans a;
			send_raw(&h, "POST", cases[i].path,
			         tokens[cases[i].who], body, strlen(body), &a);
			check_problem(body, a.status, a.ctype, a.body, a.len);
			ck_assert_msg(
			    a.status == 400 && strstr(a.body, cases[i].field) &&
			        strstr(a.body, range),
			    "%s %s: %ld %s (want 400, %s)", cases[i].path, body,
			    a.status, a.body, range);
			free(a.body);
			free(body);
		}
	}
	rxh_stop(&h);
}
END_TEST

/* A database that cannot be reached is named by its host, port, database
 * and user, never by the whole conninfo: a password in --db (or a URI's
 * user:password@) must not reach the log (db_connect's text did). */
START_TEST(connect_errors_name_no_password)
{
	static const char *const bad[] = {
	    "host=127.0.0.1 port=1 dbname=ramex_nodb user=nobody "
	    "password=sekrit-pw connect_timeout=2",
	    "postgresql://nobody:sekrit-pw@127.0.0.1:1/ramex_nodb"
	    "?connect_timeout=2",
	    "host=127.0.0.1 port=1 password=sekrit-pw dbname",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char err[1024] = "";
		PGconn *c = db_connect(bad[i], err, sizeof err);
		ck_assert_ptr_null(c);
		ck_assert_msg(strstr(err, "sekrit") == NULL, "%s", err);
		ck_assert_msg(strstr(err, "PostgreSQL") != NULL, "%s", err);
		if (i < 2)
			ck_assert_msg(strstr(err, "host=127.0.0.1 port=1 "
			                          "dbname=ramex_nodb "
			                          "user=nobody") != NULL,
			              "%s", err);
	}
}
END_TEST

/* A query parameter the route does not read is refused, naming the ones it
 * does: "?acount_id=5" on a finance export answered every account, as if
 * no filter had been asked. The web pages take any (they read theirs in
 * the browser). */
START_TEST(unknown_query_parameters_are_400)
{
	struct rxh h;
	struct rxh_resp r;
	rxh_start(&h, "ramex_t_input_query", "");
	long s = rxh_call(&h, "GET", "/v1/invoices?acount_id=5", h.admin, NULL,
	                  NULL, &r);
	ck_assert_int_eq(s, 400);
	ck_assert(rxh_is_problem(&r, "urn:ramex:problem:unknown-parameter"));
	ck_assert_msg(strstr(r.body, "unknown-parameter") &&
	                  strstr(r.body, "acount_id") &&
	                  strstr(r.body, "account_id"),
	              "%s", r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/markets?x=1", h.admin, NULL, NULL, &r),
	    400);
	ck_assert_msg(strstr(r.body, "takes no query parameters"), "%s",
	              r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET",
	                          "/v1/invoices?account_id=5&limit=2", h.admin,
	                          NULL, NULL, &r),
	                 200);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call(&h, "GET", "/healthz", NULL, NULL, NULL, &r),
	                 200);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* A 404 that points somewhere points at something that is there: it named
 * GET /v1/openapi.yaml, which was a 404 itself. */
START_TEST(a_404_points_at_nothing_missing)
{
	struct rxh h;
	struct rxh_resp r;
	rxh_start(&h, "ramex_t_input_404", "");
	ck_assert_int_eq(
	    rxh_call(&h, "GET", "/v1/nowhere", h.admin, NULL, NULL, &r), 404);
	ck_assert(rxh_is_problem(&r, "urn:ramex:problem:not-found"));
	const char *d = json_string_value(json_object_get(r.json, "detail"));
	ck_assert_ptr_nonnull(d);
	for (const char *p = d; (p = strstr(p, " /"));) {
		char path[128];
		p++;
		size_t n = strcspn(p, " ;,)");
		snprintf(path, sizeof path, "%.*s", (int)n, p);
		p += n;
		if (strcmp(path, "/v1/nowhere") == 0)
			continue;
		ck_assert_msg(
		    rxh_status(&h, "GET", path, h.admin, NULL, NULL) != 404,
		    "the 404 points at %s, itself a 404: %s", path, d);
	}
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* A body on DELETE has no meaning of its own (RFC 9110): each DELETE route
 * reads the body api/openapi.yaml gives it, or takes none, and a body it
 * cannot read is a 400 that changes nothing (found: DELETE /v1/keys/{id}
 * and /v1/tokens/{id} never looked at theirs, so {"x":1} or "nope"
 * revoked). No body, or {}, is what a route with no fields takes (as
 * POST /v1/nodes/{id}/keys). Every DELETE route of the table is tried. */
START_TEST(delete_routes_read_their_body_or_refuse_it)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char path[128], sql[256];
	rxh_start(&h, "ramex_t_input_delete", "");
	rxh_world(&h, &w);
	static const char *const bad[] = {"{\"x\":1}", "[]", "nope", "\"\"",
	                                  "{\"note\":\"\"}"};
	int routes = 0;
	for (size_t i = 0; i < routes_count; i++) {
		const struct http_route *rt = &routes_table[i];
		if (strcmp(rt->method, "DELETE") != 0)
			continue;
		/* something for it to delete, and how to see it is there */
		int64_t id = 0;
		const char *still = NULL;
		if (strcmp(rt->pattern, "/v1/keys/{key_id}") == 0) {
			snprintf(path, sizeof path, "/v1/nodes/%lld/keys",
			         (long long)w.node_b);
			ck_assert_int_eq(
			    rxh_call(&h, "POST", path, h.admin, NULL, NULL, &r),
			    201);
			const char *k = json_string_value(
			    json_object_get(r.json, "key_id"));
			ck_assert_ptr_nonnull(k);
			snprintf(path, sizeof path, "/v1/keys/%s", k);
			snprintf(
			    sql, sizeof sql,
			    "SELECT count(*) FROM node_keys WHERE key_id = "
			    "'%s' AND revoked_at IS NULL",
			    k);
			rxh_resp_free(&r);
		} else if (strcmp(rt->pattern, "/v1/tokens/{id}") == 0) {
			ck_assert_int_eq(
			    rxh_call(&h, "POST", "/v1/tokens", h.admin,
			             "{\"name\":\"gone\",\"role\":\"finance\"}",
			             NULL, &r),
			    201);
			id = rxh_int(&r, "id");
			rxh_resp_free(&r);
			snprintf(path, sizeof path, "/v1/tokens/%lld",
			         (long long)id);
			snprintf(
			    sql, sizeof sql,
			    "SELECT count(*) FROM api_tokens WHERE id = %lld "
			    "AND revoked_at IS NULL",
			    (long long)id);
		} else if (strcmp(rt->pattern, "/v1/orders/{id}") == 0) {
			char body[200];
			snprintf(body, sizeof body,
			         "{\"market\":\"spot\",\"account_id\":%lld,"
			         "\"side\":\"sell\",\"pages\":256,"
			         "\"price\":110000}",
			         (long long)w.node_a);
			ck_assert_int_eq(rxh_call(&h, "POST", "/v1/orders",
			                          w.trader_token, body, NULL,
			                          &r),
			                 201);
			id = json_integer_value(json_object_get(
			    json_object_get(r.json, "order"), "id"));
			rxh_resp_free(&r);
			snprintf(path, sizeof path, "/v1/orders/%lld",
			         (long long)id);
			snprintf(
			    sql, sizeof sql,
			    "SELECT count(*) FROM orders WHERE id = %lld AND "
			    "status = 'open'",
			    (long long)id);
		} else {
			ck_abort_msg("DELETE %s: no case in this test",
			             rt->pattern);
		}
		still = sql;
		const char *tok =
		    rt->roles & AUTH_ADMIN ? h.admin : w.trader_token;
		for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
			long st =
			    rxh_call(&h, "DELETE", path, tok, bad[b], NULL, &r);
			ck_assert_msg(st == 400 && r.json &&
			                  json_object_get(r.json, "type"),
			              "DELETE %s with %s: %ld %s", rt->pattern,
			              bad[b], st, r.body);
			rxh_resp_free(&r);
			ck_assert_msg(testdb_scalar_at(h.conninfo, still) == 1,
			              "DELETE %s with %s deleted", rt->pattern,
			              bad[b]);
		}
		long st = rxh_call(&h, "DELETE", path, tok, "{}", NULL, &r);
		ck_assert_msg(st == 200, "DELETE %s with {}: %ld %s",
		              rt->pattern, st, r.body);
		rxh_resp_free(&r);
		ck_assert_int_eq(testdb_scalar_at(h.conninfo, still), 0);
		routes++;
	}
	ck_assert_int_eq(routes, 3);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	Suite *s = suite_create("input");
	TCase *tc = tcase_create("input");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, json_test_suite_gets_4xx_in_utf8);
	tcase_add_test(tc, long_keys_are_cut_on_character_boundaries);
	tcase_add_test(tc, targets_that_are_not_utf8_are_refused);
	tcase_add_test(tc, database_refusals_are_in_our_words);
	tcase_add_test(tc, null_and_out_of_range_values_are_400);
	tcase_add_test(tc, openapi_integers_have_ranges);
	tcase_add_test(tc, ranges_are_the_documented_ones);
	tcase_add_test(tc, connect_errors_name_no_password);
	tcase_add_test(tc, unknown_query_parameters_are_400);
	tcase_add_test(tc, a_404_points_at_nothing_missing);
	tcase_add_test(tc, delete_routes_read_their_body_or_refuse_it);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
