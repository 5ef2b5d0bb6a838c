/* ctl_units.c — exact unit conversions for ramexctl; see ctl_units.h. */
#include "exchange/ctl/ctl_units.h"

#include <stdio.h>
#include <string.h>

#define PAGE_BYTES 4096

int ctl_units_parse_int(const char *s, int64_t *out)
{
	int64_t v = 0;
	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (INT64_MAX - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

int ctl_units_parse_price(const char *s, int64_t *out, char *err, size_t len)
{
	if (s && s[0] != '$') {
		if (ctl_units_parse_int(s, out) == 0)
			return 0;
		snprintf(
		    err, len,
		    "price \"%s\" is neither a whole number of n$/page-year "
		    "nor dollars like $0.0001",
		    s);
		return -1;
	}
	if (!s)
		goto bad;
	const char *p = s + 1;
	int64_t whole = 0, frac = 0;
	int digits = 0, fd = 0;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (whole > (INT64_MAX / 1000000000 - (*p - '0')) / 10)
			goto big;
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, fd++) {
			if (fd == 9) {
				if (*p != '0') {
					snprintf(
					    err, len,
					    "price \"%s\" has more than 9 "
					    "decimals: a nanodollar is the "
					    "smallest unit",
					    s);
					return -1;
				}
				continue;
			}
			frac = frac * 10 + (*p - '0');
		}
	}
	if (*p || (digits == 0 && fd == 0))
		goto bad;
	for (int i = fd < 9 ? fd : 9; i < 9; i++)
		frac *= 10;
	if (whole * 1000000000 > INT64_MAX - frac)
		goto big;
	*out = whole * 1000000000 + frac;
	return 0;
big:
	snprintf(err, len, "price \"%s\" is too large", s);
	return -1;
bad:
	snprintf(err, len, "price \"%s\" is not dollars like $0.0001",
	         s ? s : "");
	return -1;
}

int ctl_units_parse_pages(const char *s, int64_t *out, char *err, size_t len)
{
	static const struct {
		const char *suffix;
		int64_t bytes;
	} units[] = {{"KiB", 1LL << 10},
	             {"MiB", 1LL << 20},
	             {"GiB", 1LL << 30},
	             {"TiB", 1LL << 40}};
	char num[32];
	size_t n = s ? strlen(s) : 0;
	if (ctl_units_parse_int(s, out) == 0)
		return 0;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t sl = strlen(units[i].suffix);
		if (n <= sl || n - sl >= sizeof num ||
		    strcmp(s + n - sl, units[i].suffix) != 0)
			continue;
		memcpy(num, s, n - sl);
		num[n - sl] = 0;
		int64_t v;
		if (ctl_units_parse_int(num, &v) < 0)
			break;
		if (v > INT64_MAX / units[i].bytes) {
			snprintf(err, len, "pages \"%s\" is too large", s);
			return -1;
		}
		int64_t bytes = v * units[i].bytes;
		if (bytes % PAGE_BYTES) {
			snprintf(err, len,
			         "\"%s\" is not a whole number of 4096-byte "
			         "pages",
			         s);
			return -1;
		}
		*out = bytes / PAGE_BYTES;
		return 0;
	}
	snprintf(err, len,
	         "pages \"%s\" is neither a whole number of pages nor a size "
	         "like 4GiB or 256MiB",
	         s ? s : "");
	return -1;
}

void ctl_units_fmt_money(int64_t nd, char *buf, size_t len)
{
	/* work on the magnitude as unsigned so INT64_MIN is fine */
	uint64_t m = nd < 0 ? (uint64_t)0 - (uint64_t)nd : (uint64_t)nd;
	uint64_t cents = m / 10000000 + (m % 10000000 >= 5000000);
	/* a debit or credit that rounds to nothing is $0.00, not -$0.00 */
	snprintf(buf, len, "%s$%llu.%02llu", nd < 0 && cents ? "-" : "",
	         (unsigned long long)(cents / 100),
	         (unsigned long long)(cents % 100));
}

void ctl_units_fmt_price(int64_t nd, char *buf, size_t len)
{
	uint64_t m = nd < 0 ? (uint64_t)0 - (uint64_t)nd : (uint64_t)nd;
	char frac[16];
	snprintf(frac, sizeof frac, "%09llu",
	         (unsigned long long)(m % 1000000000));
	for (int i = 8; i >= 2 && frac[i] == '0'; i--)
		frac[i] = 0;
	snprintf(buf, len, "%s$%llu.%s", nd < 0 ? "-" : "",
	         (unsigned long long)(m / 1000000000), frac);
}

/* "1234567" -> "1,234,567" (digits only) */
static void group(const char *digits, char *out, size_t len)
{
	size_t n = strlen(digits), k = 0;
	for (size_t i = 0; i < n && k + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			out[k++] = ',';
		out[k++] = digits[i];
	}
	out[k] = 0;
}

/* n / d rounded to the nearest, halves away from zero (d > 0) */
static __int128 round_div(__int128 n, __int128 d)
{
	__int128 a = n < 0 ? -n : n;
	__int128 q = (a * 2 + d) / (2 * d);
	return n < 0 ? -q : q;
}

/* a count of hundredths as "[-]1,234.56" */
static void hundredths(__int128 h, char *buf, size_t len)
{
	char d[24], g[40];
	__int128 a = h < 0 ? -h : h;
	snprintf(d, sizeof d, "%llu", (unsigned long long)(a / 100));
	group(d, g, sizeof g);
	snprintf(buf, len, "%s%s.%02u", h < 0 ? "-" : "", g,
	         (unsigned)(a % 100));
}

void ctl_units_fmt_bytes(int64_t pages, char *buf, size_t len)
{
	__int128 v = pages, a = v < 0 ? -v : v;
	char h[96], d[24], g[40];
	if (a >= 262144 / 100) {
		hundredths(round_div(v * 100, 262144), h, sizeof h);
		snprintf(buf, len, "%s GiB", h);
	} else if (a >= 256) {
		hundredths(round_div(v * 100, 256), h, sizeof h);
		snprintf(buf, len, "%s MiB", h);
	} else {
		snprintf(d, sizeof d, "%lld", (long long)(a * 4));
		group(d, g, sizeof g);
		snprintf(buf, len, "%s%s KiB", v < 0 ? "-" : "", g);
	}
}

void ctl_units_fmt_pages(int64_t pages, char *buf, size_t len)
{
	char b[112];
	ctl_units_fmt_bytes(pages, b, sizeof b);
	snprintf(buf, len, "%lld (%s)", (long long)pages, b);
}

void ctl_units_fmt_amount(int64_t nd, int exact, char *buf, size_t len)
{
	uint64_t m = nd < 0 ? (uint64_t)0 - (uint64_t)nd : (uint64_t)nd;
	const char *sign = nd < 0 ? "-" : "";
	if (exact) {
		snprintf(buf, len, "%s$%llu.%09llu", sign,
		         (unsigned long long)(m / 1000000000),
		         (unsigned long long)(m % 1000000000));
		return;
	}
	if (m == 0 || m >= 10000000) {
		ctl_units_fmt_money(nd, buf, len);
		return;
	}
	/* m < 10^7: two significant digits of nine decimals */
	uint64_t drop = 1;
	for (uint64_t x = m; x >= 100; x /= 10)
		drop *= 10;
	uint64_t r = (m / drop + (m % drop * 2 >= drop)) * drop;
	if (r >= 10000000) {
		ctl_units_fmt_money(nd, buf, len);
		return;
	}
	char frac[16];
	snprintf(frac, sizeof frac, "%09llu", (unsigned long long)r);
	for (int i = 8; i >= 0 && frac[i] == '0'; i--)
		frac[i] = 0;
	snprintf(buf, len, "%s$0.%s", sign, frac);
}

/* digits (at most 9, with leading zeros) of a fraction without its
 * trailing zeros: 250000000 of 9 digits is "25" */
static void fraction(uint64_t f, int digits, char *buf, size_t len)
{
	snprintf(buf, len, "%0*llu", digits, (unsigned long long)f);
	for (size_t n = strlen(buf); n > 0 && buf[n - 1] == '0'; n--)
		buf[n - 1] = 0;
}

void ctl_units_fmt_duration(int64_t ns, char *buf, size_t len)
{
	static const struct {
		uint64_t s;
		const char *unit;
	} units[] = {{86400, "d"}, {3600, "h"}, {60, "min"}, {1, "s"}};
	/* the magnitude as unsigned: INT64_MIN has none as int64_t */
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	uint64_t sec = a / 1000000000u, frac = a % 1000000000u;
	char f[16];
	size_t n = 0;
	int k;
	if (len == 0)
		return;
	if (a == 0) {
		snprintf(buf, len, "0 s");
		return;
	}
	buf[0] = 0;
	if (ns < 0)
		n = (size_t)snprintf(buf, len, "-");
	if (sec == 0) {
		fraction(frac % 1000000u, 6, f, sizeof f);
		snprintf(buf + n, len - n, "%llu%s%s ms",
		         (unsigned long long)(frac / 1000000u), f[0] ? "." : "",
		         f);
		return;
	}
	fraction(frac, 9, f, sizeof f);
	size_t start = n; /* after the sign */
	for (size_t i = 0; i < sizeof units / sizeof units[0] && n < len; i++) {
		uint64_t q = sec / units[i].s;
		sec %= units[i].s;
		int last = units[i].s == 1;
		if (q == 0 && !(last && f[0]))
			continue;
		k = snprintf(buf + n, len - n, "%s%llu%s%s %s",
		             n > start ? " " : "", (unsigned long long)q,
		             last && f[0] ? "." : "", last ? f : "",
		             units[i].unit);
		if (k < 0)
			return;
		n += (size_t)k;
	}
}
