/* input.c — see input.h. */
#include "exchange/input.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/invoice.h"
#include "exchange/http.h"

int in_parse_i64(const char *s, int64_t *out)
{
	char *end;
	if (!s || !*s || strlen(s) > 20)
		return -1;
	/* digits, a '-' before them at most: strtoll would also take
	 * leading blanks and a '+' (" 5", "+5" in a query or a path) */
	if (!isdigit((unsigned char)s[s[0] == '-']))
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* Bytes of the valid character at s (at most n bytes there), 0 when none
 * begins there. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	unsigned c = s[0], lo = 0x80, hi = 0xBF;
	size_t len;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		return 0; /* a continuation byte, an overlong lead, or > F4 */
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

bool in_utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_char(u + i, n - i);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

int in_utf8_cut(const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, max + 4), i = 0;
	while (i < n) {
		size_t k = utf8_char(u + i, n - i);
		if (k == 0)
			k = 1; /* not ours to repair; in_utf8_clean does */
		if (i + k > max)
			break;
		i += k;
	}
	return (int)i;
}

size_t in_utf8_clean(char *dst, size_t cap, const char *src, size_t n)
{
	const unsigned char *u = (const unsigned char *)src;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t k = u[i] ? utf8_char(u + i, n - i) : 0;
		const char *piece = k ? src + i : "\xEF\xBF\xBD"; /* U+FFFD */
		size_t pl = k ? k : 3;
		if (o + pl + 1 > cap)
			break;
		memcpy(dst + o, piece, pl);
		o += pl;
		i += k ? k : 1;
	}
	dst[o] = 0;
	return o;
}

static void bad(struct http_req *rq, const char *key, const char *why)
{
	http_problem(rq, 400, "invalid-field", "invalid field", "%s: %s", key,
	             why);
}

/* Absent or null: 0 when absent and optional; -1 after replying when
 * required, or null; 1 when there is a value. */
static int present(struct http_req *rq, json_t *v, const char *key,
                   bool required, const char *what)
{
	char why[160];
	if (v && !json_is_null(v))
		return 1;
	if (!v && !required)
		return 0;
	if (!v)
		snprintf(why, sizeof why, "is required: %s", what);
	else
		snprintf(why, sizeof why, "must be %s, not null%s", what,
		         required ? ""
		                  : " (leave the field out to take its "
		                    "default)");
	bad(rq, key, why);
	return -1;
}

int in_known(struct http_req *rq, json_t *o, const char *const *known)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		int ok = 0;
		for (const char *const *p = known; *p && !ok; p++)
			ok = strcmp(*p, k) == 0;
		if (!ok) {
			char list[512] = "";
			for (const char *const *p = known; *p; p++) {
				size_t n = strlen(list);
				snprintf(list + n, sizeof list - n, "%s%s",
				         n ? ", " : "", *p);
			}
			http_problem(
			    rq, 400, "invalid-field", "unknown field",
			    "'%.*s' is not a field of this request; the "
			    "fields are: %s",
			    in_utf8_cut(k, 64), k, list);
			return -1;
		}
	}
	return 0;
}

int in_int(struct http_req *rq, json_t *o, const char *key, bool required,
           int64_t min, int64_t max, int64_t *out)
{
	json_t *v = json_object_get(o, key);
	char why[160];
	int p = present(rq, v, key, required, "an integer");
	if (p <= 0)
		return p;
	if (!json_is_integer(v)) {
		bad(rq, key,
		    "must be an integer (JSON number without fraction)");
		return -1;
	}
	json_int_t x = json_integer_value(v);
	if (x < min || x > max) {
		snprintf(why, sizeof why, "must be between %lld and %lld",
		         (long long)min, (long long)max);
		bad(rq, key, why);
		return -1;
	}
	*out = x;
	return 1;
}

int in_note(struct http_req *rq, json_t *o, char out[IN_NOTE_BUF])
{
	json_t *v = json_object_get(o, "note");
	int p = present(rq, v, "note", false, "a string");
	if (p <= 0)
		return p;
	if (!json_is_string(v)) {
		bad(rq, "note", "must be a string");
		return -1;
	}
	const char *s = json_string_value(v);
	size_t n = json_string_length(v), chars = 0;
	/* jansson has checked the UTF-8: count the bytes that start a
	 * character */
	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)s[i] & 0xC0) != 0x80;
	if (n == 0 || strlen(s) != n || chars > IN_NOTE_CHARS) {
		bad(rq, "note", "must be 1 to 200 characters");
		return -1;
	}
	assert(n < IN_NOTE_BUF);
	memcpy(out, s, n + 1);
	return 1;
}

int in_str(struct http_req *rq, json_t *o, const char *key, bool required,
           bool ident, char *out, size_t outlen)
{
	json_t *v = json_object_get(o, key);
	char why[160];
	int p = present(rq, v, key, required, "a string");
	if (p <= 0)
		return p;
	if (!json_is_string(v)) {
		bad(rq, key, "must be a string");
		return -1;
	}
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (n == 0 || n >= outlen || strlen(s) != n) {
		snprintf(why, sizeof why, "must be 1 to %zu characters",
		         outlen - 1);
		bad(rq, key, why);
		return -1;
	}
	for (size_t i = 0; ident && i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == ':' || c == '-')) {
			bad(rq, key, "may hold only A-Z a-z 0-9 . _ : -");
			return -1;
		}
	}
	memcpy(out, s, n + 1);
	return 1;
}

int in_bool(struct http_req *rq, json_t *o, const char *key, bool *out)
{
	json_t *v = json_object_get(o, key);
	int p = present(rq, v, key, false, "true or false");
	if (p <= 0)
		return p;
	if (!json_is_boolean(v)) {
		bad(rq, key, "must be true or false");
		return -1;
	}
	*out = json_is_true(v);
	return 1;
}

int in_name(struct http_req *rq, json_t *o, const char *key, char *out,
            size_t outlen)
{
	static const char rule[] =
	    "must be 1 to 63 characters of a-z 0-9 . _ -, starting with a "
	    "letter or digit";
	char buf[64];
	int p = in_str(rq, o, key, true, false, buf, sizeof buf);
	if (p <= 0)
		return p < 0 ? -1 : 0;
	for (size_t i = 0; buf[i]; i++) {
		char c = buf[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) {
			bad(rq, key, rule);
			return -1;
		}
	}
	if (strlen(buf) >= outlen) {
		bad(rq, key, rule);
		return -1;
	}
	memcpy(out, buf, strlen(buf) + 1);
	return 1;
}

int in_qint(struct http_req *rq, const char *name, int64_t min, int64_t max,
            int64_t *out)
{
	const char *s = http_query(rq, name);
	int64_t v;
	if (!s)
		return 0;
	if (in_parse_i64(s, &v) < 0 || v < min || v > max) {
		http_problem(rq, 400, "invalid-parameter", "invalid parameter",
		             "%s must be an integer between %lld and %lld",
		             name, (long long)min, (long long)max);
		return -1;
	}
	*out = v;
	return 1;
}

int in_pid(struct http_req *rq, const char *name, int64_t *out)
{
	const char *s = http_param(rq, name);
	if (in_parse_i64(s, out) < 0 || *out <= 0) {
		http_problem(rq, 400, "invalid-parameter", "invalid id",
		             "%s in the path must be a positive integer", name);
		return -1;
	}
	return 0;
}

int in_no_fields(struct http_req *rq)
{
	size_t blen = 0;
	http_body(rq, &blen);
	if (blen == 0)
		return 0;
	json_t *b = http_body_object(rq);
	if (!b)
		return -1; /* answered */
	size_t n = json_object_size(b);
	json_decref(b);
	if (n) {
		http_problem(rq, 400, "invalid-field", "unknown field",
		             "this request takes no fields: send no body, or "
		             "{}");
		return -1;
	}
	return 0;
}

int in_qenum(struct http_req *rq, const char *name, const char *const *allowed,
             const char **out)
{
	const char *s = http_query(rq, name);
	if (!s)
		return 0;
	char list[256] = "";
	for (const char *const *p = allowed; *p; p++) {
		if (strcmp(*p, s) == 0) {
			*out = *p;
			return 1;
		}
		size_t n = strlen(list);
		snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *p);
	}
	http_problem(rq, 400, "invalid-parameter", "invalid parameter",
	             "%s may not be '%.*s'; it may be: %s", name,
	             in_utf8_cut(s, 32), s, list);
	return -1;
}

bool in_market_name_ok(const char *n)
{
	if (strcmp(n, "spot") == 0)
		return true;
	if (strlen(n) != 9 || strncmp(n, "perm-", 5) != 0)
		return false;
	for (int i = 5; i < 9; i++)
		if (n[i] < '0' || n[i] > '9')
			return false;
	/* its term ends with its year: at most IN_TIME_NS_MAX, the end of
	 * the exchange's time range (and of the billing calendar's
	 * nanoseconds in int64) */
	int year = atoi(n + 5);
	return year >= IN_PERM_YEAR_MIN && year <= IN_PERM_YEAR_MAX;
}

int in_market_billable(const char *name, int64_t max_pages, int64_t price_max,
                       int64_t now_ns, char *err, size_t errlen)
{
	/* the longest a contract of it runs: to its term's end (perm), or
	 * to the end of the exchange's time range (spot) */
	int64_t until = IN_TIME_NS_MAX;
	if (strncmp(name, "perm-", 5) == 0 && in_market_name_ok(name))
		until = money_month_start(atoi(name + 5) + 1, 1);
	return invoice_market_check(max_pages, price_max, now_ns, until, err,
	                            errlen);
}
