/*
 * ctl_args.c — ramexctl's option parsing, typed options and request
 * paths; see ctl_args.h.
 */
#include "exchange/ctl/ctl_args.h"
#include "exchange/ctl/ctl_units.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const ctl_prog = "ramexctl";

int ctl_usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", ctl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(try %s --help)\n", ctl_prog);
	return CTL_USAGE;
}

const char *ctl_opt(const struct ctl_opts *o, const char *name)
{
	for (int i = o->n - 1; i >= 0; i--)
		if (strcmp(o->name[i], name) == 0)
			return o->val[i];
	return NULL;
}

int ctl_in_list(const char *const *l, const char *s)
{
	for (; l && *l; l++)
		if (strcmp(*l, s) == 0)
			return 1;
	return 0;
}

/* Options may come in any order among the positional arguments;
 * "--name=value" and "--name value" both work. */
int ctl_parse_opts(const struct ctl_cmd *c, int argc, char **argv,
                   struct ctl_opts *o)
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
			if (o->npos == CTL_MAX_POS || o->npos == c->npos)
				return ctl_usage_error(
				    "unexpected argument \"%s\"", a);
			o->pos[o->npos++] = a;
			continue;
		}
		const char *eq = strchr(a, '=');
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof name)
			return ctl_usage_error("unknown option \"%s\"", a);
		memcpy(name, a, nl);
		name[nl] = 0;
		if (ctl_in_list(c->valued, name)) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return ctl_usage_error("%s needs a value",
				                       name);
		} else if (ctl_in_list(c->flags, name) && !eq) {
			val = "";
		} else {
			return ctl_usage_error(
			    "unknown option \"%s\" for %s%s%s", a, c->group,
			    c->verb ? " " : "", c->verb ? c->verb : "");
		}
		if (o->n == CTL_MAX_OPTS)
			return ctl_usage_error("too many options");
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
		return ctl_usage_error("%s%s%s needs %d argument%s: %s",
		                       c->group, c->verb ? " " : "",
		                       c->verb ? c->verb : "", c->npos,
		                       c->npos > 1 ? "s" : "", c->usage);
	return 0;
}

/* A signed offset like "+90s", "-15m", "+2h", "-7d" (at most 100 years)
 * as ns since the epoch: now plus or minus it. -1 when it is not one. */
int ctl_parse_offset(const char *s, int64_t *ns)
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

static int parse_when(const char *s, int64_t unit_ns, char buf[32])
{
	int64_t v;
	if (s[0] != '-') {
		if (ctl_units_parse_int(s, &v) < 0)
			return -1;
	} else {
		if (ctl_parse_offset(s, &v) < 0)
			return -1;
		v = v < 0 ? 0 : v / unit_ns;
	}
	snprintf(buf, 32, "%lld", (long long)v);
	return 0;
}

int ctl_from_to(struct ctl_opts *o, int64_t unit_ns, char f[32], char t[32],
                const char **from, const char **to)
{
	*from = ctl_opt(o, "--from");
	*to = ctl_opt(o, "--to");
	if ((*from && parse_when(*from, unit_ns, f) < 0) ||
	    (*to && parse_when(*to, unit_ns, t) < 0))
		return ctl_usage_error(
		    "--from and --to are %s since the epoch, or -N followed "
		    "by s, m, h or d (that long ago, at most 100 years)",
		    unit_ns == 1 ? "ns" : "seconds");
	return 0;
}

/* ---- paths ------------------------------------------------------------- */

/* Appends "&k=v" (or "?k=v") with v URL-escaped. */
void ctl_add_query(char *p, size_t len, const char *k, const char *v)
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
int ctl_segment_ok(const char *s)
{
	if (!*s || strlen(s) > 64)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

int ctl_path1(char *p, size_t len, const char *fmt, const char *seg)
{
	if (!ctl_segment_ok(seg))
		return ctl_usage_error("\"%s\" is not a name or id", seg);
	snprintf(p, len, fmt, seg);
	return 0;
}

int ctl_path_id(char *p, size_t len, const char *fmt, const char *seg,
                const char *what)
{
	int64_t id;
	if (ctl_units_parse_int(seg, &id) < 0 || id < 1)
		return ctl_usage_error("\"%s\" is not %s (a whole number from "
		                       "1)",
		                       seg, what);
	snprintf(p, len, fmt, seg);
	return 0;
}

int ctl_add_int_query(char *p, size_t len, const char *k,
                      const struct ctl_opts *o, const char *name)
{
	const char *v = ctl_opt(o, name);
	int64_t n;
	if (v && ctl_units_parse_int(v, &n) < 0)
		return ctl_usage_error("%s \"%s\" is not a whole number", name,
		                       v);
	ctl_add_query(p, len, k, v);
	return 0;
}

int ctl_add_paging(char *p, size_t len, const struct ctl_opts *o)
{
	if (ctl_add_int_query(p, len, "limit", o, "--limit") ||
	    ctl_add_int_query(p, len, "before", o, "--before"))
		return CTL_USAGE;
	return 0;
}

int ctl_int_opt(const struct ctl_opts *o, const char *name, json_t *body,
                const char *key, int required)
{
	const char *v = ctl_opt(o, name);
	int64_t n;
	if (!v)
		return required ? ctl_usage_error("%s is required", name) : 0;
	if (ctl_units_parse_int(v, &n) < 0)
		return ctl_usage_error("%s \"%s\" is not a whole number", name,
		                       v);
	json_object_set_new(body, key, json_integer(n));
	return 0;
}

/* An option in a unit that parse reads (a price, a page count), set as
 * body[key]. */
static int unit_opt(const struct ctl_opts *o, const char *name, json_t *body,
                    const char *key, int required,
                    int (*parse)(const char *, int64_t *, char *, size_t))
{
	const char *v = ctl_opt(o, name);
	char err[256];
	int64_t n;
	if (!v)
		return required ? ctl_usage_error("%s is required", name) : 0;
	if (parse(v, &n, err, sizeof err) < 0)
		return ctl_usage_error("%s: %s", name, err);
	json_object_set_new(body, key, json_integer(n));
	return 0;
}

int ctl_price_opt(const struct ctl_opts *o, const char *name, json_t *body,
                  const char *key, int required)
{
	return unit_opt(o, name, body, key, required, ctl_units_parse_price);
}

int ctl_pages_opt(const struct ctl_opts *o, const char *name, json_t *body,
                  const char *key, int required)
{
	return unit_opt(o, name, body, key, required, ctl_units_parse_pages);
}

/* The API's names for what options become where they differ from the
 * option's own name; the others are the option's name with '_' for '-'. */
static const struct {
	const char *api, *flag;
} renamed[] = {
    {"account_id", "--account"},
    {"team_id", "--team"},
    {"contract_id", "--contract"},
    {"node_id", "--node"},
    {"min_pages", "--min"},
    {"max_pages", "--max"},
    {"notice_period_s", "--notice"},
    {"breach_penalty", "--penalty"},
    {"delivery_deadline_s", "--deadline"},
    {"expires_ns", "--expires"},
    {"remaining", "--pages"}, /* orders reduce */
    {"year", "--month"},      /* invoices list --month YYYY-MM */
    {"month", "--month"},
};

const char *ctl_flag_for(const struct ctl_cmd *c, const char *name, size_t n,
                         char *buf, size_t len)
{
	if (!c || n == 0 || n + 3 > len)
		return NULL;
	for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++)
		if (strlen(renamed[i].api) == n &&
		    strncmp(renamed[i].api, name, n) == 0 &&
		    (ctl_in_list(c->valued, renamed[i].flag) ||
		     ctl_in_list(c->flags, renamed[i].flag))) {
			snprintf(buf, len, "%s", renamed[i].flag);
			return buf;
		}
	buf[0] = buf[1] = '-';
	for (size_t i = 0; i < n; i++)
		buf[2 + i] = name[i] == '_' ? '-' : name[i];
	buf[2 + n] = 0;
	if (ctl_in_list(c->valued, buf) || ctl_in_list(c->flags, buf))
		return buf;
	return NULL;
}

static int name_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_';
}

void ctl_flags_in(const struct ctl_cmd *c, const char *in, char *out,
                  size_t len)
{
	size_t o = 0;
	if (len == 0)
		return;
	for (size_t i = 0; in[i] && o + 1 < len;) {
		if (!name_char(in[i]) ||
		    (i > 0 && (name_char(in[i - 1]) || in[i - 1] == '-' ||
		               in[i - 1] == '/' || in[i - 1] == '.'))) {
			out[o++] = in[i++];
			continue;
		}
		size_t n = 0;
		while (name_char(in[i + n]))
			n++;
		char flag[72];
		const char *f = NULL;
		int opens = i == 0 && (in[n] == ':' || in[n] == ' ');
		if (memchr(in + i, '_', n) || opens)
			f = ctl_flag_for(c, in + i, n, flag, sizeof flag);
		const char *w = f ? f : in + i;
		size_t wn = f ? strlen(f) : n;
		for (size_t k = 0; k < wn && o + 1 < len; k++)
			out[o++] = w[k];
		i += n;
	}
	out[o] = 0;
}
