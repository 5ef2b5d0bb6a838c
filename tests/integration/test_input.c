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
#include "exchange/routes.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

#define SUITE_DIR "tests/integration/fixtures/JSONTestSuite/test_parsing"

/* --- checking answers ------------------------------------------------------ */

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
	static const char *const words[] = {
	    "violates", "constraint", "duplicate key", "ERROR:", "DETAIL:",
	    "SQLSTATE", "relation \"", "syntax error at", "invalid input",
	    "out of range for type", NULL};
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
	ck_assert_msg(status >= 200 && status < 500, "%s: %ld %s", what,
	              status, body);
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
	ck_assert_msg(j && json_is_object(j), "%s: not a JSON object: %s",
	              what, body);
	const char *detail = json_string_value(json_object_get(j, "detail"));
	ck_assert_msg(detail && *detail, "%s: no detail: %s", what, body);
	ck_assert_msg(json_integer_value(json_object_get(j, "status")) ==
	                  status,
	              "%s: status %ld, in the body %lld", what, status,
	              (long long)json_integer_value(
	                  json_object_get(j, "status")));
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
	static const char *const gets[] = {
	    "/v1/markets/%FF",
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

int main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	Suite *s = suite_create("input");
	TCase *tc = tcase_create("input");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, json_test_suite_gets_4xx_in_utf8);
	tcase_add_test(tc, long_keys_are_cut_on_character_boundaries);
	tcase_add_test(tc, targets_that_are_not_utf8_are_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
