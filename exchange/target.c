/* target.c — see target.h. */
#include "exchange/target.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* Percent-decodes src[0..n) into out (NUL-terminated). In the query
 * (`query`), '+' is a space, as HTML forms send it; in the path an encoded
 * '/' is refused, since it would make one segment look like two. Returns
 * the length, or -1 with *why set: a bad escape, or a control character
 * (%00 included), which no name or value of ours contains and which C
 * strings would cut short. */
static long pct_decode(const char *src, size_t n, char *out, int query,
                       const char **why)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (c == '%') {
			int hi = i + 2 < n ? hexval(src[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(src[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*why = "a '%' in the target is not followed by "
				       "two hex digits";
				return -1;
			}
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
			if (c == '/' && !query) {
				*why = "the path encodes a '/' (%2F); no path "
				       "segment of ramex contains one";
				return -1;
			}
		} else if (c == '+' && query) {
			c = ' ';
		}
		if (c < 0x20 || c == 0x7f) {
			*why = "the target encodes a control character (such "
			       "as %00); no name or value of ramex has one";
			return -1;
		}
		out[o++] = (char)c;
	}
	out[o] = 0;
	return (long)o;
}

static int parse(const char *t, struct target *tg, const char **why)
{
	tg->nquery = 0;
	tg->path[0] = 0;
	if (strlen(t) > SIGN_TARGET_MAX) {
		*why = "the target is longer than the most that is signed";
		return -1;
	}
	for (const char *c = t; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
			*why = "the target has a byte that is not printable "
			       "ASCII; percent-encode it";
			return -1;
		}
	const char *q = strchr(t, '?');
	size_t plen = q ? (size_t)(q - t) : strlen(t);
	if (pct_decode(t, plen, tg->path, 0, why) < 0) {
		tg->path[0] = 0;
		return -1;
	}
	if (!q)
		return 0;
	char *o = tg->qbuf;
	const char *p = q + 1;
	while (*p) {
		const char *amp = strchr(p, '&');
		size_t n = amp ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		size_t kl = eq ? (size_t)(eq - p) : n;
		if (n == 0 || kl == 0) {
			*why = "the query has an empty parameter (\"&&\", "
			       "\"&=\" or a trailing '&')";
			return -1;
		}
		if (tg->nquery >= TARGET_MAX_QUERY) {
			*why = "the query has more than 16 parameters";
			return -1;
		}
		/* room for this name and value (decoding only shortens) */
		assert((size_t)(o - tg->qbuf) + n + 2 <= sizeof tg->qbuf);
		long l = pct_decode(p, kl, o, 1, why);
		if (l < 0)
			return -1;
		const char *name = o;
		o += l + 1;
		l = eq ? pct_decode(eq + 1, n - kl - 1, o, 1, why)
		       : (*o = 0, 0);
		if (l < 0)
			return -1;
		for (int i = 0; i < tg->nquery; i++)
			if (strcmp(tg->qname[i], name) == 0) {
				*why = "a query parameter is given twice; send "
				       "each once";
				return -1;
			}
		tg->qname[tg->nquery] = name;
		tg->qval[tg->nquery++] = o;
		o += l + 1;
		p += n + (amp ? 1 : 0);
		if (amp && !*p) {
			*why = "the query has an empty parameter (\"&&\", "
			       "\"&=\" or a trailing '&')";
			return -1;
		}
	}
	return 0;
}

int target_parse(const char *raw, struct target *tg, const char **why)
{
	if (parse(raw, tg, why) == 0)
		return 0;
	tg->nquery = 0;
	tg->path[0] = 0;
	return -1;
}

const char *target_query(const struct target *tg, const char *name)
{
	for (int i = 0; i < tg->nquery; i++)
		if (strcmp(tg->qname[i], name) == 0)
			return tg->qval[i];
	return NULL;
}
