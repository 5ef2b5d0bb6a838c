/*
 * ramexctl.c — the command line for engineers and operators: orders, the
 * book, contracts and their moves, usage, invoices and the ledger, markets,
 * and (for admins) teams, accounts, nodes, tokens and the billing job, all
 * through ramexd's HTTP API (exchange/routes.c, docs/billing-api.md).
 *
 * Owns the command table, the option parsing and the human output (aligned
 * tables; money to the cent, prices exact, pages with GiB). With --json it
 * prints the server's JSON unchanged, so scripts see exact integers.
 * Talking to the server is ctl_http.h; unit conversions are ctl_units.h.
 */
#include "exchange/ctl/ctl_http.h"
#include "exchange/ctl/ctl_units.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <time.h>

#define MAX_OPTS 24
#define MAX_POS  4
#define MAX_COLS 16 /* columns of a table made from its rows' keys */

struct opts {
	const char *name[MAX_OPTS], *val[MAX_OPTS];
	int n;
	const char *pos[MAX_POS];
	int npos;
	int help;
};

struct ctx {
	struct ctl_http http;
	int json;
};

struct cmd {
	const char *group, *verb; /* verb NULL: the group is the command */
	const char *usage, *about;
	const char *const *valued; /* options that take a value */
	const char *const *flags;  /* options that take none */
	int npos;                  /* positional arguments it needs */
	int (*run)(struct ctx *, struct opts *);
};

static const char *prog = "ramexctl";

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(try %s --help)\n", prog);
	return CTL_USAGE;
}

static const char *opt(const struct opts *o, const char *name)
{
	for (int i = o->n - 1; i >= 0; i--)
		if (strcmp(o->name[i], name) == 0)
			return o->val[i];
	return NULL;
}

static int in_list(const char *const *l, const char *s)
{
	for (; l && *l; l++)
		if (strcmp(*l, s) == 0)
			return 1;
	return 0;
}

/* Options may come in any order among the positional arguments;
 * "--name=value" and "--name value" both work. */
static int parse_opts(const struct cmd *c, int argc, char **argv,
                      struct opts *o)
{
	memset(o, 0, sizeof *o);
	for (int i = 0; i < argc; i++) {
		char *a = argv[i], name[64];
		const char *val = NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			o->help = 1;
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
			if (o->npos == MAX_POS || o->npos == c->npos)
				return usage_error("unexpected argument \"%s\"",
				                   a);
			o->pos[o->npos++] = a;
			continue;
		}
		const char *eq = strchr(a, '=');
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof name)
			return usage_error("unknown option \"%s\"", a);
		memcpy(name, a, nl);
		name[nl] = 0;
		if (in_list(c->valued, name)) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return usage_error("%s needs a value", name);
		} else if (in_list(c->flags, name) && !eq) {
			val = "";
		} else {
			return usage_error("unknown option \"%s\" for %s%s%s",
			                   a, c->group, c->verb ? " " : "",
			                   c->verb ? c->verb : "");
		}
		if (o->n == MAX_OPTS)
			return usage_error("too many options");
		const char *const *v = c->valued;
		for (; *v && strcmp(*v, name) != 0; v++)
			;
		o->name[o->n] = *v ? *v : name;
		if (!*v) { /* a flag: keep a pointer that outlives `name` */
			const char *const *f = c->flags;
			for (; strcmp(*f, name) != 0; f++)
				;
			o->name[o->n] = *f;
		}
		o->val[o->n++] = val;
	}
	if (!o->help && o->npos < c->npos)
		return usage_error("%s%s%s needs %d argument%s: %s", c->group,
		                   c->verb ? " " : "", c->verb ? c->verb : "",
		                   c->npos, c->npos > 1 ? "s" : "", c->usage);
	return 0;
}

/* ---- output ------------------------------------------------------------ */

enum kind { K_TEXT, K_PRICE, K_MONEY, K_PAGES, K_TIME };

/* How a field is shown to a person, by its name (the server's names are
 * consistent: every price is a price, every page count a page count). */
static enum kind field_kind(const char *key)
{
	static const char *const prices[] = {
	    "price", "tick",  "price_min",      "price_max",  "open", "high",
	    "low",   "close", "breach_penalty", "unit_price", NULL};
	static const char *const money[] = {
	    "amount",  "cost",     "total",  "fee",     "billed",
	    "spend",   "revenue",  "debits", "credits", "offline_credits",
	    "balance", "subtotal", "fees",   NULL};
	size_t n = strlen(key);
	static const char *const pages[] = {"pages",     "remaining", "filled",
	                                    "min_pages", "max_pages", "lot",
	                                    "volume",    NULL};
	if (in_list(prices, key))
		return K_PRICE;
	if (in_list(money, key))
		return K_MONEY;
	if (in_list(pages, key))
		return K_PAGES;
	/* every *_ns is a time since the epoch, except durations */
	if (n > 3 && strcmp(key + n - 3, "_ns") == 0 &&
	    strcmp(key, "recall_notice_ns") != 0)
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

static void show_value(const char *key, json_t *v, char *buf, size_t len)
{
	enum kind k = field_kind(key);
	if (json_is_integer(v) && k == K_PRICE)
		ctl_units_fmt_price(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_MONEY)
		/* the web's rule: cents, under a cent two significant digits;
		 * --json has the exact n$ */
		ctl_units_fmt_amount(json_integer_value(v), 0, buf, len);
	else if (json_is_string(v) && iso_time(json_string_value(v), buf, len))
		;
	else if (json_is_integer(v) && k == K_PAGES)
		ctl_units_fmt_pages(json_integer_value(v), buf, len);
	else if (json_is_integer(v) && k == K_TIME)
		fmt_time(json_integer_value(v), buf, len);
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
static void print_table(json_t *rows, const char *const *cols)
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
static void print_rows(json_t *rows)
{
	const char *cols[MAX_COLS + 1], *k;
	size_t n = 0;
	json_t *v;
	json_object_foreach(json_array_get(rows, 0), k, v)
	{
		if (n < MAX_COLS && !json_is_object(v) && !json_is_array(v))
			cols[n++] = k;
	}
	cols[n] = NULL;
	if (n == 0) {
		printf("(none)\n");
		return;
	}
	print_table(rows, cols);
}

/* One object as "key: value" lines, keys aligned. */
static void print_object(json_t *o)
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

static void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
	if (s)
		puts(s);
	free(s);
}

/* Shows why a call failed on stderr and returns its exit code. */
static int report_failure(enum ctl_exit e, struct ctl_http_resp *r)
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
		if (title)
			fprintf(stderr, "error: %s: %s%s%s%s\n", title,
			        detail ? detail : "(no detail)",
			        reason ? " (reason " : "", reason ? reason : "",
			        reason ? ")" : "");
		else
			fprintf(stderr, "error: the server answered %ld%s%s\n",
			        r->status, r->err[0] ? ": " : "", r->err);
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
static void print_some(json_t *rows, const char *const *cols)
{
	const char *have[MAX_COLS + 1];
	json_t *first = json_array_get(rows, 0);
	size_t n = 0;
	if (!cols || !first) {
		if (cols)
			print_table(rows, cols); /* the header, then (none) */
		else
			print_rows(rows);
		return;
	}
	for (; *cols && n < MAX_COLS; cols++)
		if (json_object_get(first, *cols))
			have[n++] = *cols;
	have[n] = NULL;
	if (n == 0)
		print_rows(rows);
	else
		print_table(rows, have);
}

/* An object: its scalar fields, then each array of objects in it as a
 * table under its name (an invoice's lines, a check's differences). */
static void print_doc(json_t *o, const char *const *line_cols)
{
	const char *k;
	json_t *v;
	print_object(o);
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
		print_some(v, line_cols);
	}
}

/* A page of a list ({"items": [...], "next": cursor}); says how to get
 * the next page when there is one. cols NULL: the rows' own keys. */
static void print_list(json_t *j, const char *const *cols)
{
	json_t *items = json_object_get(j, "items");
	json_t *next = json_object_get(j, "next");
	print_some(items, cols);
	if (json_is_integer(next))
		printf("(more: --before %lld)\n",
		       (long long)json_integer_value(next));
	else if (json_is_string(next)) /* a cursor: usage's NODE:EPOCH:SEQ */
		printf("(more: --after %s)\n", json_string_value(next));
}

/* Makes a call; on success leaves the JSON in *out (caller decrefs). */
static int call(struct ctx *x, const char *method, const char *path,
                json_t *body, json_t **out)
{
	struct ctl_http_resp r;
	char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	enum ctl_exit e = ctl_http_call(&x->http, method, path, b, &r);
	free(b);
	if (e != CTL_OK) {
		report_failure(e, &r);
		ctl_http_resp_free(&r);
		return e;
	}
	*out = r.json ? json_incref(r.json) : json_object();
	ctl_http_resp_free(&r);
	return CTL_OK;
}

/* Call, then print: JSON as it came, or a table of .items, or an object. */
static int call_show(struct ctx *x, const char *method, const char *path,
                     json_t *body, const char *const *cols)
{
	json_t *j = NULL;
	int rc = call(x, method, path, body, &j);
	json_decref(body);
	if (rc != CTL_OK)
		return rc;
	if (x->json)
		print_json(j);
	else if (json_is_array(json_object_get(j, "items")))
		print_list(j, cols);
	else if (cols && json_is_array(j))
		print_table(j, cols);
	else
		print_object(j);
	json_decref(j);
	return CTL_OK;
}

/* ---- paths ------------------------------------------------------------- */

/* Appends "&k=v" (or "?k=v") with v URL-escaped. */
static void add_query(char *p, size_t len, const char *k, const char *v)
{
	if (!v)
		return;
	char *e = curl_easy_escape(NULL, v, 0);
	size_t n = strlen(p);
	snprintf(p + n, len - n, "%c%s=%s", strchr(p, '?') ? '&' : '?', k,
	         e ? e : "");
	curl_free(e);
}

/* A path segment from the command line: names and ids only, so nothing a
 * person types can walk to another route. */
static int segment_ok(const char *s)
{
	if (!*s || strlen(s) > 64)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

static int path1(char *p, size_t len, const char *fmt, const char *seg)
{
	if (!segment_ok(seg))
		return usage_error("\"%s\" is not a name or id", seg);
	snprintf(p, len, fmt, seg);
	return 0;
}

static int int_opt(const struct opts *o, const char *name, json_t *body,
                   const char *key, int required)
{
	const char *v = opt(o, name);
	int64_t n;
	if (!v)
		return required ? usage_error("%s is required", name) : 0;
	if (ctl_units_parse_int(v, &n) < 0)
		return usage_error("%s \"%s\" is not a whole number", name, v);
	json_object_set_new(body, key, json_integer(n));
	return 0;
}

static int price_opt(const struct opts *o, const char *name, json_t *body,
                     const char *key, int required)
{
	const char *v = opt(o, name);
	char err[256];
	int64_t n;
	if (!v)
		return required ? usage_error("%s is required", name) : 0;
	if (ctl_units_parse_price(v, &n, err, sizeof err) < 0)
		return usage_error("%s: %s", name, err);
	json_object_set_new(body, key, json_integer(n));
	return 0;
}

static int pages_opt(const struct opts *o, const char *name, json_t *body,
                     const char *key, int required)
{
	const char *v = opt(o, name);
	char err[256];
	int64_t n;
	if (!v)
		return required ? usage_error("%s is required", name) : 0;
	if (ctl_units_parse_pages(v, &n, err, sizeof err) < 0)
		return usage_error("%s: %s", name, err);
	json_object_set_new(body, key, json_integer(n));
	return 0;
}

/* ---- commands ---------------------------------------------------------- */

static int c_whoami(struct ctx *x, struct opts *o)
{
	(void)o;
	return call_show(x, "GET", "/v1/whoami", NULL, NULL);
}

static const char *const market_cols[] = {
    "id", "name", "product", "tick", "lot", "min_pages", "max_pages", NULL};

static int c_markets_list(struct ctx *x, struct opts *o)
{
	(void)o;
	return call_show(x, "GET", "/v1/markets", NULL, market_cols);
}

static int c_markets_show(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/markets/%s", o->pos[0]))
		return CTL_USAGE;
	return call_show(x, "GET", p, NULL, NULL);
}

static int c_markets_create(struct ctx *x, struct opts *o)
{
	json_t *b = json_pack("{s:s}", "name", o->pos[0]);
	/* defaults that make a usable market; every one can be overridden */
	static const struct {
		const char *opt, *key, *def;
		int kind; /* 0 int, 1 price, 2 pages */
	} f[] = {{"--tick", "tick", NULL, 1},
	         {"--lot", "lot", "256", 2},
	         {"--min", "min_pages", NULL, 2},
	         {"--max", "max_pages", "1048576", 2},
	         {"--price-min", "price_min", "0", 1},
	         {"--price-max", "price_max", NULL, 1},
	         {"--notice", "notice_period_s", "3600", 0},
	         {"--penalty", "breach_penalty", "0", 1},
	         {"--deadline", "delivery_deadline_s", "600", 0}};
	struct opts d = *o;
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		const char *def = f[i].def;
		if (!def && strcmp(f[i].key, "min_pages") == 0)
			def = opt(o, "--lot") ? opt(o, "--lot") : "256";
		if (!def && strcmp(f[i].key, "price_max") == 0)
			def = "1000000000";
		if (!opt(&d, f[i].opt) && def && d.n < MAX_OPTS) {
			d.name[d.n] = f[i].opt;
			d.val[d.n++] = def;
		}
		int rc = f[i].kind == 0 ? int_opt(&d, f[i].opt, b, f[i].key, 1)
		         : f[i].kind == 1
		             ? price_opt(&d, f[i].opt, b, f[i].key, 1)
		             : pages_opt(&d, f[i].opt, b, f[i].key, 1);
		if (rc) {
			json_decref(b);
			return rc;
		}
	}
	return call_show(x, "POST", "/v1/markets", b, NULL);
}

static int c_book(struct ctx *x, struct opts *o)
{
	char p[256];
	int64_t depth;
	json_t *j = NULL;
	if (path1(p, sizeof p, "/v1/markets/%s/book", o->pos[0]))
		return CTL_USAGE;
	if (opt(o, "--depth") &&
	    ctl_units_parse_int(opt(o, "--depth"), &depth) < 0)
		return usage_error("--depth must be a whole number");
	add_query(p, sizeof p, "depth", opt(o, "--depth"));
	int rc = call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json) {
		print_json(j);
	} else {
		/* asks from the highest down to the best, then bids from the
		 * best down: the spread sits in the middle, as on a screen */
		json_t *rows = json_array(), *asks = json_object_get(j, "asks");
		for (size_t i = json_array_size(asks); i-- > 0;) {
			json_t *r = json_copy(json_array_get(asks, i));
			json_object_set_new(r, "side", json_string("ask"));
			json_array_append_new(rows, r);
		}
		json_t *bids = json_object_get(j, "bids");
		for (size_t i = 0; i < json_array_size(bids); i++) {
			json_t *r = json_copy(json_array_get(bids, i));
			json_object_set_new(r, "side", json_string("bid"));
			json_array_append_new(rows, r);
		}
		static const char *const cols[] = {"side", "price", "pages",
		                                   "orders", NULL};
		printf(
		    "market %s (seq %lld)\n",
		    json_string_value(json_object_get(j, "market")),
		    (long long)json_integer_value(json_object_get(j, "seq")));
		print_table(rows, cols);
		json_decref(rows);
	}
	json_decref(j);
	return CTL_OK;
}

static int c_trades(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"id",         "price", "pages",
	                                   "taker_side", "ts_ns", NULL};
	char p[256];
	if (path1(p, sizeof p, "/v1/markets/%s/trades", o->pos[0]))
		return CTL_USAGE;
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	add_query(p, sizeof p, "before", opt(o, "--before"));
	return call_show(x, "GET", p, NULL, cols);
}

static int c_candles(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"start", "open",   "high",   "low",
	                                   "close", "volume", "trades", NULL};
	char p[256];
	if (path1(p, sizeof p, "/v1/markets/%s/candles", o->pos[0]))
		return CTL_USAGE;
	add_query(p, sizeof p, "interval", opt(o, "--interval"));
	add_query(p, sizeof p, "from", opt(o, "--from"));
	add_query(p, sizeof p, "to", opt(o, "--to"));
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	return call_show(x, "GET", p, NULL, cols);
}

static const char *const order_cols[] = {
    "id",     "market", "account_name",   "side",   "price",
    "pages",  "filled", "status",         "reason", "placed_by_name",
    "cancelled_by_name", NULL};

/* A signed offset like "+90s", "-15m", "+2h", "-7d" (at most 100 years)
 * as ns since the epoch: now plus or minus it. -1 when it is not one. */
static int parse_offset(const char *s, int64_t *ns)
{
	int64_t v, mul;
	char num[32];
	size_t n = strlen(s);
	if ((s[0] != '+' && s[0] != '-') || n < 3 || n - 1 >= sizeof num)
		return -1;
	switch (s[n - 1]) {
	case 's':
		mul = 1;
		break;
	case 'm':
		mul = 60;
		break;
	case 'h':
		mul = 3600;
		break;
	case 'd':
		mul = 86400;
		break;
	default:
		return -1;
	}
	memcpy(num, s + 1, n - 2);
	num[n - 2] = 0;
	if (ctl_units_parse_int(num, &v) < 0 || v > 100LL * 365 * 86400 / mul)
		return -1;
	if (s[0] == '-')
		v = -v;
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	*ns = ((int64_t)t.tv_sec + v * mul) * 1000000000 + t.tv_nsec;
	return 0;
}

/* "+90s", "+15m", "+2h", "+7d" from now, or seconds since the epoch. */
static int parse_expiry(const char *s, int64_t *ns)
{
	int64_t v;
	if (s[0] != '+')
		return ctl_units_parse_int(s, &v) < 0 ||
		               v > INT64_MAX / 1000000000
		           ? -1
		           : (*ns = v * 1000000000, 0);
	return parse_offset(s, ns);
}

/* A key for a write that has none: "ctl-" and 24 random hex digits. */
static void fresh_key(char out[32])
{
	unsigned char r[12];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		/* no randomness: time and pid are still unique enough for
		 * one person's commands */
		snprintf(out, 32, "ctl-%llx-%x", (long long)time(NULL),
		         (unsigned)getpid());
		return;
	}
	memcpy(out, "ctl-", 4);
	for (int k = 0; k < 12; k++)
		snprintf(out + 4 + 2 * k, 3, "%02x", r[k]);
}

/* A write sent under `key` got no answer, or a 5xx (the exchange lost
 * PostgreSQL: outcome-unknown or database-unavailable): the same command
 * with the same key tells what became of it, and never does it twice. */
static void retry_hint(int rc, const char *what, const char *opt_name,
                       const char *key)
{
	if (rc == CTL_UNREACHABLE)
		fprintf(stderr,
		        "hint: the %s may or may not have been carried out; "
		        "run the same command again with %s %s to learn "
		        "which (it is never carried out twice)\n",
		        what, opt_name, key);
}

static int c_orders_place(struct ctx *x, struct opts *o)
{
	json_t *b = json_object(), *j = NULL;
	const char *side = opt(o, "--side"), *tif = opt(o, "--tif");
	int rc = CTL_USAGE;
	if (!opt(o, "--market")) {
		rc = usage_error("--market is required");
		goto fail;
	}
	if (!side || (strcmp(side, "buy") && strcmp(side, "sell"))) {
		rc = usage_error("--side must be buy or sell");
		goto fail;
	}
	json_object_set_new(b, "market", json_string(opt(o, "--market")));
	json_object_set_new(b, "side", json_string(side));
	if ((rc = pages_opt(o, "--pages", b, "pages", 1)) ||
	    (rc = price_opt(o, "--price", b, "price", 1)) ||
	    (rc = int_opt(o, "--account", b, "account_id", 0)))
		goto fail;
	if (tif) {
		static const char *const tifs[] = {"gtc", "ioc", "fok", "gtd",
		                                   NULL};
		if (!in_list(tifs, tif)) {
			rc = usage_error("--tif must be gtc, ioc, fok or gtd");
			goto fail;
		}
		json_object_set_new(b, "tif", json_string(tif));
	}
	if (opt(o, "--expires")) {
		int64_t ns;
		if (parse_expiry(opt(o, "--expires"), &ns) < 0) {
			rc = usage_error("--expires is seconds since the epoch "
			                 "or +N followed by s, m, h or d");
			goto fail;
		}
		json_object_set_new(b, "expires_ns", json_integer(ns));
	}
	if (opt(o, "--stp"))
		json_object_set_new(b, "stp", json_string(opt(o, "--stp")));
	if (opt(o, "--post-only"))
		json_object_set_new(b, "post_only", json_true());
	/* always a client order id, sent as the Idempotency-Key too: after
	 * a lost answer or a 503 the same command with it tells whether the
	 * order was placed (docs/operations.md, "Outages and retries") */
	char key[32];
	if (opt(o, "--client-order-id"))
		snprintf(key, sizeof key, "%.31s", opt(o, "--client-order-id"));
	else
		fresh_key(key);
	const char *coid =
	    opt(o, "--client-order-id") ? opt(o, "--client-order-id") : key;
	json_object_set_new(b, "client_order_id", json_string(coid));
	x->http.idem_key = coid;
	rc = call(x, "POST", "/v1/orders", b, &j);
	x->http.idem_key = NULL;
	retry_hint(rc, "order", "--client-order-id", coid);
	if (rc)
		goto fail;
	if (x->json) {
		print_json(j);
	} else {
		print_object(json_object_get(j, "order"));
		json_t *t = json_object_get(j, "trades");
		if (json_array_size(t) > 0) {
			static const char *const cols[] = {"price", "pages",
			                                   NULL};
			printf("\ntrades\n");
			print_table(t, cols);
		}
	}
fail:
	json_decref(j);
	json_decref(b);
	return rc;
}

static int c_orders_cancel(struct ctx *x, struct opts *o)
{
	char p[256];
	const char *note = opt(o, "--note");
	if (path1(p, sizeof p, "/v1/orders/%s", o->pos[0]))
		return CTL_USAGE;
	if (note && (strlen(note) == 0 || strlen(note) > 200))
		return usage_error("--note has %zu characters; 1 to 200",
		                   strlen(note));
	json_t *j = NULL, *b = note ? json_pack("{s:s}", "note", note) : NULL;
	char key[32];
	const char *k = opt(o, "--idempotency-key");
	if (!k)
		fresh_key(key), k = key;
	x->http.idem_key = k;
	int rc = call(x, "DELETE", p, b, &j);
	x->http.idem_key = NULL;
	json_decref(b);
	retry_hint(rc, "cancel", "--idempotency-key", k);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_object(json_object_get(j, "order")
		                 ? json_object_get(j, "order")
		                 : j);
	json_decref(j);
	return CTL_OK;
}

static int c_orders_reduce(struct ctx *x, struct opts *o)
{
	char p[256];
	json_t *b = json_object();
	int rc;
	if (path1(p, sizeof p, "/v1/orders/%s/reduce", o->pos[0]) ||
	    (rc = pages_opt(o, "--pages", b, "remaining", 1))) {
		json_decref(b);
		return CTL_USAGE;
	}
	json_t *j = NULL;
	char key[32];
	const char *k = opt(o, "--idempotency-key");
	if (!k)
		fresh_key(key), k = key;
	x->http.idem_key = k;
	rc = call(x, "POST", p, b, &j);
	x->http.idem_key = NULL;
	retry_hint(rc, "reduce", "--idempotency-key", k);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_object(json_object_get(j, "order")
		                 ? json_object_get(j, "order")
		                 : j);
	json_decref(j);
	return CTL_OK;
}

static int c_orders_list(struct ctx *x, struct opts *o)
{
	char p[512] = "/v1/orders";
	add_query(p, sizeof p, "market", opt(o, "--market"));
	add_query(p, sizeof p, "status", opt(o, "--status"));
	add_query(p, sizeof p, "side", opt(o, "--side"));
	add_query(p, sizeof p, "account_id", opt(o, "--account"));
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	add_query(p, sizeof p, "before", opt(o, "--before"));
	return call_show(x, "GET", p, NULL, order_cols);
}

static int c_orders_show(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/orders/%s", o->pos[0]))
		return CTL_USAGE;
	return call_show(x, "GET", p, NULL, NULL);
}

static const char *const contract_cols[] = {
    "id",    "market", "buyer_name", "seller_name", "delivery",
    "pages", "price",  "state",      "deliver_by",  NULL};
static const char *const transition_cols[] = {
    "at_ns", "from_state", "to_state", "event", "actor", "why", NULL};

static int c_contracts_list(struct ctx *x, struct opts *o)
{
	const char *role = opt(o, "--role");
	char p[512] = "/v1/contracts";
	if (role && strcmp(role, "buyer") && strcmp(role, "seller"))
		return usage_error("--role must be buyer or seller");
	add_query(p, sizeof p, "state", opt(o, "--state"));
	add_query(p, sizeof p, "market", opt(o, "--market"));
	add_query(p, sizeof p, "role", role);
	add_query(p, sizeof p, "account_id", opt(o, "--account"));
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	add_query(p, sizeof p, "before", opt(o, "--before"));
	return call_show(x, "GET", p, NULL, contract_cols);
}

/* The contract, then (for a person) every move it made. --json prints
 * the contract as the server sent it; `contracts transitions` has the
 * moves as JSON. */
static int c_contracts_show(struct ctx *x, struct opts *o)
{
	char p[256], t[256];
	json_t *c = NULL, *tr = NULL;
	if (path1(p, sizeof p, "/v1/contracts/%s", o->pos[0]) ||
	    path1(t, sizeof t, "/v1/contracts/%s/transitions", o->pos[0]))
		return CTL_USAGE;
	int rc = call(x, "GET", p, NULL, &c);
	if (rc)
		return rc;
	if (x->json) {
		print_json(c);
		goto out;
	}
	print_object(c);
	if ((rc = call(x, "GET", t, NULL, &tr)))
		goto out;
	printf("\ntransitions\n");
	print_some(json_object_get(tr, "items"), transition_cols);
out:
	json_decref(c);
	json_decref(tr);
	return rc;
}

static int c_contracts_transitions(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/contracts/%s/transitions", o->pos[0]))
		return CTL_USAGE;
	return call_show(x, "GET", p, NULL, transition_cols);
}

/* deliver, recall, end, breach: POST with an optional note, then the
 * contract as it is now and the move that was made. */
static int contract_move(struct ctx *x, struct opts *o, const char *verb)
{
	char p[256];
	const char *note = opt(o, "--note");
	json_t *b = NULL, *j = NULL;
	char fmt[64];
	snprintf(fmt, sizeof fmt, "/v1/contracts/%%s/%s", verb);
	if (path1(p, sizeof p, fmt, o->pos[0]))
		return CTL_USAGE;
	if (note && strlen(note) > 200)
		return usage_error("--note has %zu characters; at most 200",
		                   strlen(note));
	if (!note && strcmp(verb, "breach") == 0)
		return usage_error("contracts breach needs --note: say why the "
		                   "contract is in breach");
	b = note ? json_pack("{s:s}", "note", note) : json_object();
	int rc = call(x, "POST", p, b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json) {
		print_json(j);
	} else {
		json_t *t = json_object_get(j, "transition");
		print_object(j);
		if (json_is_object(t))
			printf(
			    "\nmoved %s -> %s (%s)\n",
			    json_string_value(json_object_get(t, "from_state")),
			    json_string_value(json_object_get(t, "to_state")),
			    json_string_value(json_object_get(t, "event")));
	}
	json_decref(j);
	return CTL_OK;
}

static int c_contracts_deliver(struct ctx *x, struct opts *o)
{
	return contract_move(x, o, "deliver");
}

static int c_contracts_recall(struct ctx *x, struct opts *o)
{
	return contract_move(x, o, "recall");
}

static int c_contracts_end(struct ctx *x, struct opts *o)
{
	return contract_move(x, o, "end");
}

static int c_contracts_breach(struct ctx *x, struct opts *o)
{
	return contract_move(x, o, "breach");
}

/* ---- usage, invoices, ledger, billing ---------------------------------- */

static const char *const usage_cols[] = {
    "id",   "node_id",         "epoch",         "seq",          "contract_id",
    "side", "period_start_ns", "period_end_ns", "page_seconds", NULL};

/* A time for --from/--to: ns since the epoch, or "-90s", "-15m", "-2h",
 * "-7d" before now; as ns text into buf. -1 when it is neither. */
static int parse_when(const char *s, char *buf, size_t len)
{
	int64_t v;
	if (s[0] != '-') {
		if (ctl_units_parse_int(s, &v) < 0)
			return -1;
		snprintf(buf, len, "%lld", (long long)v);
		return 0;
	}
	if (parse_offset(s, &v) < 0)
		return -1;
	snprintf(buf, len, "%lld", (long long)(v < 0 ? 0 : v));
	return 0;
}

static int c_usage_list(struct ctx *x, struct opts *o)
{
	char p[512] = "/v1/usage", f[32], t[32];
	const char *from = opt(o, "--from"), *to = opt(o, "--to");
	if ((from && parse_when(from, f, sizeof f) < 0) ||
	    (to && parse_when(to, t, sizeof t) < 0))
		return usage_error("--from and --to are ns since the epoch, "
		                   "or -N followed by s, m, h or d (that long "
		                   "ago)");
	add_query(p, sizeof p, "contract_id", opt(o, "--contract"));
	add_query(p, sizeof p, "node_id", opt(o, "--node"));
	add_query(p, sizeof p, "epoch", opt(o, "--epoch"));
	add_query(p, sizeof p, "from", from ? f : NULL);
	add_query(p, sizeof p, "to", to ? t : NULL);
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	add_query(p, sizeof p, "after", opt(o, "--after"));
	return call_show(x, "GET", p, NULL, usage_cols);
}

static int c_usage_gaps(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"node_id", "epoch",   "first",
	                                   "last",    "missing", NULL};
	char p[256] = "/v1/usage/gaps";
	add_query(p, sizeof p, "node_id", opt(o, "--node"));
	add_query(p, sizeof p, "epoch", opt(o, "--epoch"));
	return call_show(x, "GET", p, NULL, cols);
}

static const char *const invoice_cols[] = {
    "id", "account", "team", "year", "month", "status", "lines", "total", NULL};
static const char *const line_cols[] = {
    "contract_id", "market",       "kind",       "role",
    "usage_month", "charge_start", "charge_end", "page_seconds",
    "unit_price",  "amount",       NULL};

/* "2026-12" or "2026": a year and maybe a month, checked here so that a
 * typo is a usage error and not a surprising empty list */
static int month_ok(const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++)
		if (!(i == 4 ? s[i] == '-' : s[i] >= '0' && s[i] <= '9'))
			return 0;
	if (n == 4)
		return 1;
	return n == 7 &&
	       ((s[5] == '0' && s[6] >= '1') || (s[5] == '1' && s[6] <= '2'));
}

static int c_invoices_list(struct ctx *x, struct opts *o)
{
	const char *status = opt(o, "--status"), *m = opt(o, "--month");
	char p[512] = "/v1/invoices", y[8], mo[4];
	if (status && strcmp(status, "draft") && strcmp(status, "final"))
		return usage_error("--status must be draft or final");
	add_query(p, sizeof p, "account_id", opt(o, "--account"));
	if (m) {
		/* --month 2026-12 for one month, --month 2026 for a year */
		if (!month_ok(m))
			return usage_error("--month must be YYYY-MM or YYYY, "
			                   "not \"%s\"",
			                   m);
		snprintf(y, sizeof y, "%.4s", m);
		add_query(p, sizeof p, "year", y);
		if (strlen(m) == 7) {
			snprintf(mo, sizeof mo, "%d", atoi(m + 5));
			add_query(p, sizeof p, "month", mo);
		}
	}
	add_query(p, sizeof p, "status", status);
	add_query(p, sizeof p, "limit", opt(o, "--limit"));
	add_query(p, sizeof p, "before", opt(o, "--before"));
	return call_show(x, "GET", p, NULL, invoice_cols);
}

static int c_invoices_show(struct ctx *x, struct opts *o)
{
	char p[256];
	json_t *j = NULL;
	if (path1(p, sizeof p, "/v1/invoices/%s", o->pos[0]))
		return CTL_USAGE;
	int rc = call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_doc(j, line_cols);
	json_decref(j);
	return CTL_OK;
}

/* Writes `len` bytes to `path` through a temporary file renamed into
 * place, so a reader never sees half an export. */
static int write_file(const char *path, const char *data, size_t len)
{
	char tmp[1100];
	if (snprintf(tmp, sizeof tmp, "%s.part", path) >= (int)sizeof tmp) {
		fprintf(stderr, "%s: the file name is too long\n", prog);
		return CTL_USAGE;
	}
	FILE *f = fopen(tmp, "w");
	if (!f)
		goto fail;
	if (fwrite(data, 1, len, f) != len || fflush(f) != 0) {
		fclose(f);
		goto fail_unlink;
	}
	if (fclose(f) != 0)
		goto fail_unlink;
	if (rename(tmp, path) != 0)
		goto fail_unlink;
	return CTL_OK;
fail_unlink:
	fprintf(stderr, "%s: could not write %s: %s\n", prog, path,
	        strerror(errno));
	remove(tmp);
	return CTL_USAGE;
fail:
	fprintf(stderr, "%s: could not write %s: %s\n", prog, path,
	        strerror(errno));
	return CTL_USAGE;
}

/* An export as the server makes it (path p, room for its query): CSV to
 * stdout or to `out`; with --json the same rows as JSON. */
static int export(struct ctx *x, char *p, size_t plen, const char *out)
{
	struct ctl_http h = x->http;
	struct ctl_http_resp r;
	if (out && !*out)
		return usage_error("--output needs a file name");
	add_query(p, plen, "format", x->json ? "json" : "csv");
	h.accept = x->json ? NULL : "text/csv";
	enum ctl_exit e = ctl_http_call(&h, "GET", p, NULL, &r);
	int rc = e;
	if (e != CTL_OK) {
		report_failure(e, &r);
		goto out;
	}
	if (out) {
		rc = write_file(out, r.body ? r.body : "", r.len);
		if (rc == CTL_OK && !x->json) {
			size_t rows = 0;
			for (size_t i = 0; i < r.len; i++)
				rows += r.body[i] == '\n';
			printf("wrote %s: %zu line%s\n", out, rows,
			       rows == 1 ? "" : "s");
		}
	} else if (r.len > 0 && fwrite(r.body, 1, r.len, stdout) != r.len) {
		rc = CTL_USAGE;
	}
out:
	ctl_http_resp_free(&r);
	return rc;
}

/* The FOCUS-style export of one invoice. */
static int c_invoices_csv(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/invoices/%s/export", o->pos[0]))
		return CTL_USAGE;
	return export(x, p, sizeof p, opt(o, "--output"));
}

/* Billed usage per contract and month (finance, admin). */
static int c_usage_export(struct ctx *x, struct opts *o)
{
	const char *f = opt(o, "--from"), *t = opt(o, "--to");
	char p[256] = "/v1/usage/export";
	if ((f && (!month_ok(f) || strlen(f) != 7)) ||
	    (t && (!month_ok(t) || strlen(t) != 7)))
		return usage_error("--from and --to are months: YYYY-MM");
	add_query(p, sizeof p, "from", f);
	add_query(p, sizeof p, "to", t);
	return export(x, p, sizeof p, opt(o, "--output"));
}

/* Exit 5 when the check ran and found the books wrong, so that a cron job
 * or a test can act on it; the differences are on stdout. */
static int c_ledger_check(struct ctx *x, struct opts *o)
{
	json_t *j = NULL;
	(void)o;
	int rc = call(x, "GET", "/v1/ledger/check", NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_doc(j, NULL);
	static const char *const verdicts[] = {"ok", "balanced", NULL};
	for (const char *const *v = verdicts; *v; v++)
		if (json_is_false(json_object_get(j, *v))) {
			fprintf(stderr, "error: the ledger check failed: see "
			                "the differences above\n");
			rc = CTL_CHECK_FAILED;
		}
	json_decref(j);
	return rc;
}

static int c_billing_run(struct ctx *x, struct opts *o)
{
	json_t *j = NULL, *b = json_object();
	(void)o;
	int rc = call(x, "POST", "/v1/billing/run", b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_doc(j, NULL);
	json_decref(j);
	return CTL_OK;
}

static int c_billing_summary(struct ctx *x, struct opts *o)
{
	const char *by = opt(o, "--by"), *f = opt(o, "--from"),
	           *t = opt(o, "--to");
	char p[512] = "/v1/billing/summary";
	json_t *j = NULL;
	if (by && strcmp(by, "account") && strcmp(by, "team"))
		return usage_error("--by must be account or team");
	if ((f && (!month_ok(f) || strlen(f) != 7)) ||
	    (t && (!month_ok(t) || strlen(t) != 7)))
		return usage_error("--from and --to are months: YYYY-MM");
	add_query(p, sizeof p, "from", f);
	add_query(p, sizeof p, "to", t);
	add_query(p, sizeof p, "by", by);
	int rc = call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else if (json_is_array(json_object_get(j, "items")))
		print_list(j, NULL);
	else
		print_doc(j, NULL);
	json_decref(j);
	return CTL_OK;
}

static int c_teams_create(struct ctx *x, struct opts *o)
{
	return call_show(x, "POST", "/v1/teams",
	                 json_pack("{s:s}", "name", o->pos[0]), NULL);
}

static int c_teams_list(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"id", "name", NULL};
	(void)o;
	return call_show(x, "GET", "/v1/teams", NULL, cols);
}

static int c_accounts_create(struct ctx *x, struct opts *o)
{
	const char *kind = opt(o, "--kind");
	if (!kind)
		return usage_error("--kind is required (operator or exchange)");
	json_t *b = json_pack("{s:s,s:s}", "name", o->pos[0], "kind", kind);
	return call_show(x, "POST", "/v1/accounts", b, NULL);
}

static int c_accounts_list(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"id", "name", "kind", "team_id",
	                                   NULL};
	char p[256] = "/v1/accounts";
	add_query(p, sizeof p, "kind", opt(o, "--kind"));
	return call_show(x, "GET", p, NULL, cols);
}

/* The node's secret is shown once: the server keeps only what it needs to
 * check signatures and cannot show it again. */
static int show_secret(struct ctx *x, const char *path, json_t *b)
{
	json_t *j = NULL;
	int rc = call(x, "POST", path, b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json) {
		print_json(j);
	} else {
		json_t *a = json_object_get(j, "account");
		if (a)
			print_object(a);
		print_object(j);
	}
	json_decref(j);
	return CTL_OK;
}

static const char *const node_cols[] = {
    "id",     "name", "team_name", "trading_paused", "trading_paused_by_name",
    "trading_paused_at", "trading_pause_note", NULL};

static int c_nodes_list(struct ctx *x, struct opts *o)
{
	(void)o;
	return call_show(x, "GET", "/v1/nodes", NULL, node_cols);
}

/* A node by id or by name (GET /v1/nodes lists the ones the caller may
 * trade for); 0 with *id set, else an exit code after saying why. */
static int node_id(struct ctx *x, const char *arg, char *id, size_t len)
{
	int64_t v;
	json_t *j = NULL, *n;
	size_t i;
	if (ctl_units_parse_int(arg, &v) == 0 && v > 0) {
		snprintf(id, len, "%lld", (long long)v);
		return 0;
	}
	int rc = call(x, "GET", "/v1/nodes", NULL, &j);
	if (rc)
		return rc;
	rc = CTL_REFUSED;
	json_array_foreach(json_object_get(j, "items"), i, n)
	{
		const char *name = json_string_value(json_object_get(n, "name"));
		if (name && !strcmp(name, arg)) {
			snprintf(id, len, "%lld",
			         (long long)json_integer_value(
			             json_object_get(n, "id")));
			rc = 0;
			break;
		}
	}
	json_decref(j);
	if (rc)
		fprintf(stderr,
		        "error: no node named \"%s\" that you may see (%s "
		        "nodes list shows them)\n",
		        arg, prog);
	return rc;
}

static int node_move(struct ctx *x, struct opts *o, const char *verb)
{
	char p[256], id[24];
	const char *note = opt(o, "--note");
	if (!segment_ok(o->pos[0]))
		return usage_error("\"%s\" is not a node name or id",
		                   o->pos[0]);
	if (note && (strlen(note) == 0 || strlen(note) > 200))
		return usage_error("--note has %zu characters; 1 to 200",
		                   strlen(note));
	int rc = node_id(x, o->pos[0], id, sizeof id);
	if (rc)
		return rc;
	snprintf(p, sizeof p, "/v1/nodes/%s/%s", id, verb);
	return call_show(x, "POST", p,
	                 note ? json_pack("{s:s}", "note", note) : NULL, NULL);
}

static int c_nodes_pause(struct ctx *x, struct opts *o)
{
	return node_move(x, o, "pause");
}

static int c_nodes_resume(struct ctx *x, struct opts *o)
{
	return node_move(x, o, "resume");
}

static int c_nodes_create(struct ctx *x, struct opts *o)
{
	json_t *b = json_pack("{s:s}", "name", o->pos[0]);
	int rc = int_opt(o, "--team", b, "team_id", 1);
	if (rc) {
		json_decref(b);
		return rc;
	}
	return show_secret(x, "/v1/nodes", b);
}

static int c_keys_create(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/nodes/%s/keys", o->pos[0]))
		return CTL_USAGE;
	return show_secret(x, p, json_object());
}

static int c_keys_revoke(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/keys/%s", o->pos[0]))
		return CTL_USAGE;
	return call_show(x, "DELETE", p, NULL, NULL);
}

static int c_tokens_create(struct ctx *x, struct opts *o)
{
	const char *role = opt(o, "--role");
	if (!role)
		return usage_error("--role is required (node, trader, "
		                   "operator, finance or admin)");
	json_t *b = json_pack("{s:s,s:s}", "name", o->pos[0], "role", role);
	int rc;
	if ((rc = int_opt(o, "--team", b, "team_id", 0)) ||
	    (rc = int_opt(o, "--account", b, "account_id", 0))) {
		json_decref(b);
		return rc;
	}
	json_t *j = NULL;
	rc = call(x, "POST", "/v1/tokens", b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		print_json(j);
	else
		print_object(j); /* the server's note says it is shown once */
	json_decref(j);
	return CTL_OK;
}

static int c_tokens_list(struct ctx *x, struct opts *o)
{
	static const char *const cols[] = {"id",         "name",       "role",
	                                   "team_id",    "account_id", "prefix",
	                                   "revoked_at", NULL};
	(void)o;
	return call_show(x, "GET", "/v1/tokens", NULL, cols);
}

static int c_tokens_revoke(struct ctx *x, struct opts *o)
{
	char p[256];
	if (path1(p, sizeof p, "/v1/tokens/%s", o->pos[0]))
		return CTL_USAGE;
	return call_show(x, "DELETE", p, NULL, NULL);
}

/* ---- the table of commands --------------------------------------------- */

static const char *const none[] = {NULL};
static const char *const o_create_market[] = {
    "--tick",      "--lot",    "--min",     "--max",      "--price-min",
    "--price-max", "--notice", "--penalty", "--deadline", NULL};
static const char *const o_depth[] = {"--depth", NULL};
static const char *const o_page[] = {"--limit", "--before", NULL};
static const char *const o_candles[] = {"--interval", "--from", "--to",
                                        "--limit", NULL};
static const char *const o_place[] = {
    "--market",  "--side", "--pages",           "--price",   "--tif",
    "--expires", "--stp",  "--client-order-id", "--account", NULL};
static const char *const o_post_only[] = {"--post-only", NULL};
static const char *const o_pages[] = {"--pages", "--idempotency-key", NULL};
static const char *const o_olist[] = {
    "--market", "--status", "--side", "--account", "--limit", "--before", NULL};
static const char *const o_clist[] = {
    "--state", "--market", "--role", "--account", "--limit", "--before", NULL};
static const char *const o_note[] = {"--note", NULL};
static const char *const o_cnote[] = {"--note", "--idempotency-key", NULL};
static const char *const o_ulist[] = {"--contract", "--node", "--epoch",
                                      "--from",     "--to",   "--limit",
                                      "--after",    NULL};
static const char *const o_gaps[] = {"--node", "--epoch", NULL};
static const char *const o_ilist[] = {"--account", "--month",  "--status",
                                      "--limit",   "--before", NULL};
static const char *const o_output[] = {"--output", NULL};
static const char *const o_uexport[] = {"--from", "--to", "--output", NULL};
static const char *const o_summary[] = {"--from", "--to", "--by", NULL};
static const char *const o_kind[] = {"--kind", NULL};
static const char *const o_team[] = {"--team", NULL};
static const char *const o_token[] = {"--role", "--team", "--account", NULL};

static const struct cmd cmds[] = {
    {"whoami", NULL, "whoami", "who the token belongs to", none, none, 0,
     c_whoami},
    {"markets", "list", "markets list", "list markets", none, none, 0,
     c_markets_list},
    {"markets", "show", "markets show NAME", "one market", none, none, 1,
     c_markets_show},
    {"markets", "create",
     "markets create NAME --tick PRICE [--lot PAGES] [--min PAGES] [--max "
     "PAGES] [--price-min P] [--price-max P] [--notice S] [--penalty P] "
     "[--deadline S]",
     "create a market (operator)", o_create_market, none, 1, c_markets_create},
    {"book", NULL, "book MARKET [--depth N]", "the order book", o_depth, none,
     1, c_book},
    {"trades", NULL, "trades MARKET [--limit N] [--before ID]", "recent trades",
     o_page, none, 1, c_trades},
    {"candles", NULL,
     "candles MARKET [--interval S] [--from T] [--to T] [--limit N]",
     "price history (OHLC)", o_candles, none, 1, c_candles},
    {"orders", "place",
     "orders place --market M --side buy|sell --pages N --price P [--tif "
     "gtc|ioc|fok|gtd] [--expires T|+Nh] [--post-only] [--stp POLICY] "
     "[--client-order-id ID] [--account ID]",
     "place a limit order", o_place, o_post_only, 0, c_orders_place},
    {"orders", "cancel", "orders cancel ID [--note TEXT] [--idempotency-key K]",
     "cancel an order; the note (why) is kept with it beside who cancelled "
     "it",
     o_cnote, none, 1, c_orders_cancel},
    {"orders", "reduce", "orders reduce ID --pages N [--idempotency-key K]",
     "reduce what remains of an order, keeping its priority", o_pages, none, 1,
     c_orders_reduce},
    {"orders", "list",
     "orders list [--market M] [--status S] [--side S] [--account ID] "
     "[--limit N] [--before ID]",
     "list orders", o_olist, none, 0, c_orders_list},
    {"orders", "show", "orders show ID", "one order", none, none, 1,
     c_orders_show},
    {"contracts", "list",
     "contracts list [--state S] [--market M] [--role buyer|seller] "
     "[--account ID] [--limit N] [--before ID]",
     "list contracts", o_clist, none, 0, c_contracts_list},
    {"contracts", "show", "contracts show ID",
     "one contract and every move it made", none, none, 1, c_contracts_show},
    {"contracts", "transitions", "contracts transitions ID",
     "every move of a contract: who, when, why", none, none, 1,
     c_contracts_transitions},
    {"contracts", "deliver", "contracts deliver ID [--note TEXT]",
     "the seller confirms delivery: active", o_note, none, 1,
     c_contracts_deliver},
    {"contracts", "recall", "contracts recall ID [--note TEXT]",
     "the seller takes its pages back (spot: after the notice; perm: a "
     "breach)",
     o_note, none, 1, c_contracts_recall},
    {"contracts", "end", "contracts end ID [--note TEXT]",
     "the buyer releases the pages: ended", o_note, none, 1, c_contracts_end},
    {"contracts", "breach", "contracts breach ID --note TEXT",
     "declare a contract in breach (admin)", o_note, none, 1,
     c_contracts_breach},
    {"usage", "list",
     "usage list [--contract ID] [--node ID] [--epoch E] [--from T] [--to T] "
     "[--limit N] [--after NODE:EPOCH:SEQ]",
     "usage reports in number order; T: ns since the epoch or -2h (ago)",
     o_ulist, none, 0, c_usage_list},
    {"usage", "gaps", "usage gaps [--node ID] [--epoch E]",
     "missing report numbers per node and epoch (finance, admin)", o_gaps, none,
     0, c_usage_gaps},
    {"usage", "export",
     "usage export [--from YYYY-MM] [--to YYYY-MM] [--output FILE]",
     "billed usage per contract and month, CSV (--json: JSON rows) "
     "(finance, admin)",
     o_uexport, none, 0, c_usage_export},
    {"invoices", "list",
     "invoices list [--account ID] [--month YYYY-MM|YYYY] "
     "[--status draft|final] [--limit N] [--before ID]",
     "list invoices", o_ilist, none, 0, c_invoices_list},
    {"invoices", "show", "invoices show ID", "one invoice with its lines", none,
     none, 1, c_invoices_show},
    {"invoices", "csv", "invoices csv ID [--output FILE]",
     "an invoice's FOCUS-style export: CSV to stdout or FILE (--json: "
     "JSON rows)",
     o_output, none, 1, c_invoices_csv},
    {"ledger", "check", "ledger check",
     "the ledger sums to zero and every invoice equals its postings "
     "(finance, admin); exit 5 when not",
     none, none, 0, c_ledger_check},
    {"billing", "run", "billing run", "run the billing job now (admin)", none,
     none, 0, c_billing_run},
    {"billing", "summary",
     "billing summary [--from YYYY-MM] [--to YYYY-MM] [--by account|team]",
     "spend, revenue and page-years per month (finance, admin)", o_summary,
     none, 0, c_billing_summary},
    {"teams", "create", "teams create NAME", "create a team (admin)", none,
     none, 1, c_teams_create},
    {"teams", "list", "teams list", "list teams (admin, finance)", none, none,
     0, c_teams_list},
    {"accounts", "create",
     "accounts create NAME --kind operator|exchange",
     "create an account (admin; nodes: nodes create)", o_kind, none, 1, c_accounts_create},
    {"accounts", "list", "accounts list [--kind K]", "list accounts", o_kind,
     none, 0, c_accounts_list},
    {"nodes", "list", "nodes list",
     "the nodes you may see, by team and name, and whether a person paused "
     "their automation",
     none, none, 0, c_nodes_list},
    {"nodes", "pause", "nodes pause NODE [--note TEXT]",
     "pause a node's automation (NODE: name or id; trader, admin): its "
     "agent keeps delivering and metering, withdraws its own quotes and "
     "places none; people's orders stand",
     o_note, none, 1, c_nodes_pause},
    {"nodes", "resume", "nodes resume NODE",
     "resume a node's automation (trader, admin)", none, none, 1,
     c_nodes_resume},
    {"nodes", "create", "nodes create NAME --team ID",
     "create a node and its first key; prints the secret once (admin)", o_team,
     none, 1, c_nodes_create},
    {"keys", "create", "keys create NODE_ID",
     "another key for a node; prints the secret once (admin)", none, none, 1,
     c_keys_create},
    {"keys", "revoke", "keys revoke KEY_ID", "revoke a node key (admin)", none,
     none, 1, c_keys_revoke},
    {"tokens", "create",
     "tokens create NAME --role R [--team ID] [--account ID]",
     "create a bearer token; prints it once (admin)", o_token, none, 1,
     c_tokens_create},
    {"tokens", "list", "tokens list", "list tokens (admin)", none, none, 0,
     c_tokens_list},
    {"tokens", "revoke", "tokens revoke ID", "revoke a token (admin)", none,
     none, 1, c_tokens_revoke},
};

#define NCMDS (sizeof cmds / sizeof cmds[0])

static void help(FILE *f, const char *group)
{
	fprintf(f,
	        "usage: %s [--url URL] [--token TOKEN] [--config FILE] "
	        "[--json] COMMAND ...\n\n"
	        "The command line of the ramex exchange.\n\ncommands:\n",
	        prog);
	for (size_t i = 0; i < NCMDS; i++)
		if (!group || strcmp(group, cmds[i].group) == 0)
			fprintf(f, "  %s\n      %s\n", cmds[i].usage,
			        cmds[i].about);
	fprintf(f,
	        "\nunits: prices are n$/page-year as a whole number "
	        "(100000) or\n"
	        "dollars with a $ prefix ($0.0001); pages are a whole number "
	        "or a size\n"
	        "with KiB/MiB/GiB/TiB that is a whole number of 4096-byte "
	        "pages (4GiB).\n\n"
	        "server and token: --url/--token win over RAMEX_URL/"
	        "RAMEX_TOKEN, which\n"
	        "win over ~/.config/ramex/ctl.conf (lines \"url = ...\", "
	        "\"token = ...\").\n"
	        "The default URL is http://127.0.0.1:8080.\n\n"
	        "columns (the server's field names; --json shows them exact):\n"
	        "  id, *_id          ids; *_name, account, team: names\n"
	        "  price, tick, unit_price, price_min/max, open/high/low/close,\n"
	        "                    breach_penalty: $ per page-year, exact\n"
	        "  amount, total, spend, revenue, fees, offline_credits, ...:\n"
	        "                    money to the cent (halves away from zero);\n"
	        "                    under a cent, two significant digits "
	        "($0.0041)\n"
	        "  pages, remaining, filled, lot, min/max_pages, volume: pages of\n"
	        "                    4096 bytes, with the size (GiB to two "
	        "decimals,\n"
	        "                    halves away from zero; MiB, KiB below 0.01 "
	        "GiB)\n"
	        "  *_ns, *_at, deliver_by, term_end: UTC times, RFC 3339 to the\n"
	        "                    second (recall_notice_ns is a duration)\n"
	        "  page_seconds, *_page_years: usage (a page-year is one page "
	        "for\n"
	        "                    365 days)\n"
	        "  status, state, reason: an order's or contract's state and why;\n"
	        "                    cancelled_by/_name and cancel_note: who "
	        "cancelled\n"
	        "                    an order and the note they gave\n"
	        "  placed_by, placed_by_name, by_agent: who placed an order (a\n"
	        "                    node's agent, node:KEY, or a person's "
	        "token, tok:ID)\n"
	        "  trading_paused*: a person paused the node's automation\n"
	        "  payable_cents, cents_in, cents_out: what a final invoice "
	        "charges\n"
	        "                    in whole cents and the sub-cent carries; "
	        "\"-\"\n"
	        "                    (null) while it is a draft\n"
	        "  -                 no value (null) or not yet (a time of 0)\n\n"
	        "exit codes:\n"
	        "  0  done\n"
	        "  1  the server refused the request (4xx, e.g. a validation "
	        "error)\n"
	        "  2  usage error (the command line is wrong)\n"
	        "  3  the server could not be reached, or failed (5xx)\n"
	        "  4  authentication or permission refused (401, 403)\n"
	        "  5  a check found a problem (ledger check)\n");
}

/* Reads "key = value" lines; '#' starts a comment. A missing file is
 * fine (the default one is optional); an unreadable named one is not. */
static int read_config(const char *path, int must, char *url, size_t ul,
                       char *tok, size_t tl)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int n = 0;
	if (!f) {
		if (!must && errno == ENOENT)
			return 0;
		fprintf(stderr, "%s: could not read %s: %s\n", prog, path,
		        strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		n++;
		char *s = line, *eq, *k, *v, *e;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || *s == 0)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "%s: %s:%d: expected key = value\n",
			        prog, path, n);
			fclose(f);
			return -1;
		}
		for (e = eq; e > s && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*e = 0;
		k = s;
		for (v = eq + 1; *v == ' ' || *v == '\t'; v++)
			;
		for (e = v + strlen(v);
		     e > v && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' ||
		               e[-1] == '\r');
		     e--)
			;
		*e = 0;
		if (strcmp(k, "url") == 0)
			snprintf(url, ul, "%s", v);
		else if (strcmp(k, "token") == 0)
			snprintf(tok, tl, "%s", v);
		else {
			fprintf(stderr,
			        "%s: %s:%d: unknown key \"%s\" (url, token)\n",
			        prog, path, n, k);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	static char url[1024] = "http://127.0.0.1:8080", tok[512];
	const char *flag_url = NULL, *flag_tok = NULL, *config = NULL;
	struct ctx x = {0};
	char cfg[1024];
	int i = 1;
	for (; i < argc && strncmp(argv[i], "-", 1) == 0; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			help(stdout, NULL);
			return CTL_OK;
		} else if (strcmp(a, "--json") == 0) {
			x.json = 1;
		} else if ((strcmp(a, "--url") == 0 ||
		            strcmp(a, "--token") == 0 ||
		            strcmp(a, "--config") == 0)) {
			if (i + 1 >= argc)
				return usage_error("%s needs a value", a);
			const char **dst = a[2] == 'u'   ? &flag_url
			                   : a[2] == 't' ? &flag_tok
			                                 : &config;
			*dst = argv[++i];
		} else {
			return usage_error("unknown option \"%s\"", a);
		}
	}
	if (i >= argc)
		return usage_error("a command is needed");
	const char *home = getenv("HOME");
	if (config) {
		if (read_config(config, 1, url, sizeof url, tok, sizeof tok))
			return CTL_USAGE;
	} else if (home && *home) {
		snprintf(cfg, sizeof cfg, "%s/.config/ramex/ctl.conf", home);
		if (read_config(cfg, 0, url, sizeof url, tok, sizeof tok))
			return CTL_USAGE;
	}
	if (getenv("RAMEX_URL") && *getenv("RAMEX_URL"))
		snprintf(url, sizeof url, "%s", getenv("RAMEX_URL"));
	if (getenv("RAMEX_TOKEN") && *getenv("RAMEX_TOKEN"))
		snprintf(tok, sizeof tok, "%s", getenv("RAMEX_TOKEN"));
	if (flag_url)
		snprintf(url, sizeof url, "%s", flag_url);
	if (flag_tok)
		snprintf(tok, sizeof tok, "%s", flag_tok);
	x.http.url = url;
	x.http.token = tok;

	const char *group = argv[i++];
	const char *verb = i < argc ? argv[i] : NULL;
	const struct cmd *c = NULL;
	int group_known = 0;
	for (size_t k = 0; k < NCMDS; k++) {
		if (strcmp(cmds[k].group, group) != 0)
			continue;
		group_known = 1;
		if (!cmds[k].verb ||
		    (verb && strcmp(cmds[k].verb, verb) == 0)) {
			c = &cmds[k];
			break;
		}
	}
	if (!group_known)
		return usage_error("unknown command \"%s\"", group);
	if (!c) {
		if (verb &&
		    (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)) {
			help(stdout, group);
			return CTL_OK;
		}
		return usage_error("%s needs one of its commands%s%s%s", group,
		                   verb ? " (not \"" : "", verb ? verb : "",
		                   verb ? "\")" : "");
	}
	if (c->verb)
		i++;
	struct opts o;
	if (parse_opts(c, argc - i, argv + i, &o))
		return CTL_USAGE;
	if (o.help) {
		printf("usage: %s %s\n  %s\n", prog, c->usage, c->about);
		return CTL_OK;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = c->run(&x, &o);
	curl_global_cleanup();
	return rc;
}
