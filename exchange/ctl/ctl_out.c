/*
 * ctl_out.c — ramexctl's output for people; see ctl_out.h.
 */
#include "exchange/ctl/ctl_out.h"
#include "exchange/ctl/ctl_units.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum kind {
	K_TEXT,
	K_PRICE,
	K_MONEY,
	K_CENTS,
	K_PAGES,
	K_TIME,
	K_DURATION,  /* ns */
	K_DURATION_S /* a market's notice and delivery deadline, s */
};

/* How a field is shown to a person, by its name (the server's names are
 * consistent: every price is a price, every page count a page count). */
static enum kind field_kind(const char *key)
{
	static const char *const prices[] = {
	    "price", "tick",  "price_min",      "price_max",  "open", "high",
	    "low",   "close", "breach_penalty", "unit_price", NULL};
	/* n$; "sum" (the ledger check's) comes as text, an invoice's
	 * "total_shown" as the server's dollars to the cent, cents_in and
	 * cents_out are its sub-cent carries */
	static const char *const money[] = {
	    "amount",    "cost",        "total",  "fee",     "billed",
	    "spend",     "revenue",     "debits", "credits", "offline_credits",
	    "balance",   "subtotal",    "fees",   "sum",     "cents_in",
	    "cents_out", "total_shown", NULL};
	size_t n = strlen(key);
	static const char *const pages[] = {"pages",     "remaining", "filled",
	                                    "min_pages", "max_pages", "lot",
	                                    "volume",    NULL};
	if (ctl_in_list(prices, key))
		return K_PRICE;
	if (ctl_in_list(money, key))
		return K_MONEY;
	if (strcmp(key, "payable_cents") == 0)
		return K_CENTS;
	if (ctl_in_list(pages, key))
		return K_PAGES;
	/* a contract's notice is a duration; every other *_ns a time since
	 * the epoch */
	if (strcmp(key, "recall_notice_ns") == 0)
		return K_DURATION;
	if (strcmp(key, "notice_period_s") == 0 ||
	    strcmp(key, "delivery_deadline_s") == 0)
		return K_DURATION_S;
	if (n > 3 && strcmp(key + n - 3, "_ns") == 0)
		return K_TIME;
	return K_TEXT;
}

/* ns since the epoch as RFC 3339 UTC to the second, as the API's text
 * times are; what is below a second is in --json. */
static void fmt_time(int64_t ns, char *buf, size_t len)
{
	time_t sec = (time_t)(ns / 1000000000 - (ns % 1000000000 < 0));
	struct tm tm;
	if (ns == 0) {
		snprintf(buf, len, "-"); /* not yet: the API's 0 */
		return;
	}
	if (!gmtime_r(&sec, &tm) ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%lld", (long long)ns);
}

/* PostgreSQL's text of a timestamptz in UTC ("2026-12-06 19:00:00+00",
 * maybe with a fraction) as RFC 3339 ("2026-12-06T19:00:00Z"), as every
 * other time ramexctl shows; 0 when s is not one. */
static int iso_time(const char *s, char *buf, size_t len)
{
	int y, mo, d, h, mi, se, n = 0;
	if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se,
	           &n) != 6 ||
	    n != 19)
		return 0;
	const char *t = s + 19;
	if (*t == '.')
		for (t++; *t >= '0' && *t <= '9'; t++)
			;
	if (strcmp(t, "+00") && strcmp(t, "+00:00"))
		return 0;
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi,
	         se);
	return 1;
}

/* Money the server sends as text: whole n$ ("-12") or dollars to the
 * cent ("-0.03"), as n$ in *out; 0 when s is neither. */
static int money_text(const char *s, int64_t *out)
{
	int neg = *s == '-';
	const char *p = s + neg, *dot = strchr(p, '.');
	int64_t whole, cents = 0;
	char w[24];
	size_t wn = dot ? (size_t)(dot - p) : strlen(p);
	if (wn == 0 || wn >= sizeof w)
		return 0;
	memcpy(w, p, wn);
	w[wn] = 0;
	if (ctl_units_parse_int(w, &whole) < 0)
		return 0;
	if (dot) {
		if (strlen(dot + 1) != 2 ||
		    ctl_units_parse_int(dot + 1, &cents) < 0 ||
		    whole > (INT64_MAX - 99 * 10000000) / 1000000000)
			return 0;
		whole = whole * 1000000000 + cents * 10000000;
	}
	*out = neg ? -whole : whole;
	return 1;
}

static void show_value(const char *key, json_t *v, char *buf, size_t len)
{
	enum kind k = field_kind(key);
	int64_t n;
	if (json_is_integer(v) && k == K_PRICE)
		ctl_units_fmt_price(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_MONEY)
		/* the web's rule: cents, under a cent two significant digits;
		 * --json has the exact n$ */
		ctl_units_fmt_amount(json_integer_value(v), 0, buf, len);
	else if (json_is_string(v) && k == K_MONEY &&
	         money_text(json_string_value(v), &n))
		ctl_units_fmt_amount(n, 0, buf, len);
	else if (json_is_integer(v) && k == K_CENTS &&
	         json_integer_value(v) <= INT64_MAX / 10000000 &&
	         json_integer_value(v) >= -(INT64_MAX / 10000000))
		ctl_units_fmt_amount(json_integer_value(v) * 10000000, 0, buf,
		                     len);
	else if (json_is_string(v) && iso_time(json_string_value(v), buf, len))
		;
	else if (json_is_integer(v) && k == K_PAGES)
		ctl_units_fmt_pages(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_TIME)
		fmt_time(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_DURATION)
		ctl_units_fmt_duration(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_DURATION_S &&
	         json_integer_value(v) <= INT64_MAX / 1000000000 &&
	         json_integer_value(v) >= -(INT64_MAX / 1000000000))
		ctl_units_fmt_duration(json_integer_value(v) * 1000000000, buf,
		                       len);
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_true(v))
		snprintf(buf, len, "yes");
	else if (json_is_false(v))
		snprintf(buf, len, "no");
	else if (!v || json_is_null(v))
		snprintf(buf, len, "-");
	else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		snprintf(buf, len, "%s", s ? s : "?");
		free(s);
	}
}

#define CELL 96

/* An aligned table of `rows` (an array of objects) with these columns. */
void ctl_print_table(json_t *rows, const char *const *cols)
{
	size_t nc = 0, nr = json_array_size(rows);
	while (cols[nc])
		nc++;
	size_t w[32] = {0};
	char cell[CELL];
	for (size_t c = 0; c < nc && c < 32; c++)
		w[c] = strlen(cols[c]);
	for (size_t r = 0; r < nr; r++)
		for (size_t c = 0; c < nc && c < 32; c++) {
			show_value(
			    cols[c],
			    json_object_get(json_array_get(rows, r), cols[c]),
			    cell, sizeof cell);
			if (strlen(cell) > w[c])
				w[c] = strlen(cell);
		}
	for (size_t c = 0; c < nc && c < 32; c++)
		printf("%-*s%s", c + 1 < nc ? (int)w[c] : 0, cols[c],
		       c + 1 < nc ? "  " : "\n");
	for (size_t r = 0; r < nr; r++)
		for (size_t c = 0; c < nc && c < 32; c++) {
			json_t *v =
			    json_object_get(json_array_get(rows, r), cols[c]);
			show_value(cols[c], v, cell, sizeof cell);
			/* numbers right-aligned, text left */
			int right = json_is_integer(v);
			int last = c + 1 == nc;
			printf(right ? "%*s%s" : "%-*s%s",
			       last && !right ? 0 : (int)w[c], cell,
			       last ? "\n" : "  ");
		}
	if (nr == 0)
		printf("(none)\n");
}

/* The scalar keys of the first row, for tables whose columns the server
 * decides (invoice lines, usage reports, summaries). */
void ctl_print_rows(json_t *rows)
{
	const char *cols[CTL_MAX_COLS + 1], *k;
	size_t n = 0;
	json_t *v;
	json_object_foreach(json_array_get(rows, 0), k, v)
	{
		if (n < CTL_MAX_COLS && !json_is_object(v) && !json_is_array(v))
			cols[n++] = k;
	}
	cols[n] = NULL;
	if (n == 0) {
		printf("(none)\n");
		return;
	}
	ctl_print_table(rows, cols);
}

/* One object as "key: value" lines, keys aligned. */
void ctl_print_object(json_t *o)
{
	const char *k;
	json_t *v;
	size_t w = 0;
	char cell[512];
	json_object_foreach(o, k, v) if (strlen(k) > w) w = strlen(k);
	json_object_foreach(o, k, v)
	{
		if (json_is_object(v) ||
		    (json_is_array(v) &&
		     (json_is_object(json_array_get(v, 0)) ||
		      json_is_string(json_array_get(v, 0)))))
			continue; /* printed by callers (print_doc) */
		show_value(k, v, cell, sizeof cell);
		printf("%-*s  %s\n", (int)w + 1, k, cell);
	}
}

void ctl_print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
	if (s)
		puts(s);
	free(s);
}

/* Shows why a call failed on stderr and returns its exit code. */
int ctl_report_failure(const struct ctl_ctx *x, enum ctl_exit e,
                       struct ctl_http_resp *r)
{
	if (r->status == 0) {
		fprintf(stderr, "error: %s\n", r->err);
	} else {
		const char *title =
		    json_string_value(json_object_get(r->json, "title"));
		const char *detail =
		    json_string_value(json_object_get(r->json, "detail"));
		const char *reason =
		    json_string_value(json_object_get(r->json, "reason"));
		/* the person typed options, not the API's fields */
		char said[2048];
		ctl_flags_in(x->cmd, detail ? detail : "(no detail)", said,
		             sizeof said);
		if (title)
			fprintf(stderr, "error: %s: %s%s%s%s\n", title, said,
			        reason ? " (reason " : "", reason ? reason : "",
			        reason ? ")" : "");
		else
			fprintf(stderr, "error: the server answered %ld%s%s\n",
			        r->status, r->err[0] ? ": " : "", r->err);
		/* a problem with a list of them: each one's detail */
		size_t i;
		json_t *v;
		json_array_foreach(json_object_get(r->json, "errors"), i, v)
		{
			const char *d =
			    json_string_value(json_object_get(v, "detail"));
			if (!d)
				continue;
			ctl_flags_in(x->cmd, d, said, sizeof said);
			fprintf(stderr, "  - %s\n", said);
		}
		if (e == CTL_AUTH && r->status == 401)
			fprintf(stderr,
			        "hint: check the token (--token, RAMEX_TOKEN "
			        "or ~/.config/ramex/ctl.conf)\n");
	}
	return e;
}

/* A table with those of `cols` that the rows have (a server that adds or
 * renames a field costs a column, not the command); the rows' own keys
 * when none of them is there, or cols is NULL. */
void ctl_print_some(json_t *rows, const char *const *cols)
{
	const char *have[CTL_MAX_COLS + 1];
	json_t *first = json_array_get(rows, 0);
	size_t n = 0;
	if (!cols || !first) {
		if (cols)
			ctl_print_table(rows,
			                cols); /* the header, then (none) */
		else
			ctl_print_rows(rows);
		return;
	}
	for (; *cols && n < CTL_MAX_COLS; cols++)
		if (json_object_get(first, *cols))
			have[n++] = *cols;
	have[n] = NULL;
	if (n == 0)
		ctl_print_rows(rows);
	else
		ctl_print_table(rows, have);
}

/* An object: its scalar fields, then each array of objects in it as a
 * table under its name (an invoice's lines, a check's differences). */
void ctl_print_doc(json_t *o, const char *const *line_cols)
{
	const char *k;
	json_t *v;
	ctl_print_object(o);
	json_object_foreach(o, k, v)
	{
		if (!json_is_array(v) || json_array_size(v) == 0)
			continue;
		if (json_is_string(json_array_get(v, 0))) {
			/* a list of sentences, e.g. a check's problems */
			printf("\n%s\n", k);
			for (size_t i = 0; i < json_array_size(v); i++)
				printf("  - %s\n",
				       json_string_value(json_array_get(v, i)));
			continue;
		}
		if (!json_is_object(json_array_get(v, 0)))
			continue;
		/* an invoice's "items" are its lines */
		printf("\n%s\n", strcmp(k, "items") == 0 ? "lines" : k);
		ctl_print_some(v, line_cols);
	}
}

/* A page of a list ({"items": [...], "next": cursor}); says how to get
 * the next page when there is one. cols NULL: the rows' own keys. */
void ctl_print_list(json_t *j, const char *const *cols)
{
	json_t *items = json_object_get(j, "items");
	json_t *next = json_object_get(j, "next");
	ctl_print_some(items, cols);
	if (json_is_integer(next))
		printf("(more: --before %lld)\n",
		       (long long)json_integer_value(next));
	else if (json_is_string(next)) /* a cursor: usage's NODE:EPOCH:SEQ */
		printf("(more: --after %s)\n", json_string_value(next));
}

/* Makes a call; on success leaves the JSON in *out (caller decrefs). */
int ctl_call(struct ctl_ctx *x, const char *method, const char *path,
             json_t *body, json_t **out)
{
	struct ctl_http_resp r;
	char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	enum ctl_exit e = ctl_http_call(&x->http, method, path, b, &r);
	free(b);
	if (e != CTL_OK) {
		ctl_report_failure(x, e, &r);
		ctl_http_resp_free(&r);
		return e;
	}
	*out = r.json ? json_incref(r.json) : json_object();
	ctl_http_resp_free(&r);
	return CTL_OK;
}

/* Call, then print: JSON as it came, or a table of .items, or an object. */
int ctl_call_show(struct ctl_ctx *x, const char *method, const char *path,
                  json_t *body, const char *const *cols)
{
	json_t *j = NULL;
	int rc = ctl_call(x, method, path, body, &j);
	json_decref(body);
	if (rc != CTL_OK)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else if (json_is_array(json_object_get(j, "items")))
		ctl_print_list(j, cols);
	else if (cols && json_is_array(j))
		ctl_print_table(j, cols);
	else
		ctl_print_object(j);
	json_decref(j);
	return CTL_OK;
}
