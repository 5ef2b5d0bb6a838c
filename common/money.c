/* money.c — checked money arithmetic, the carry rule, text forms and the
 * billing calendar; see money.h and docs/money.md. */
#include "common/money.h"
#include "common/err.h"

#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

bool money_add(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}

bool money_sub(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}

bool money_mul(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}

int money_muldiv_carry(struct money_carry *c, int64_t a, int64_t b, int64_t den,
                       int64_t *out, char *err, size_t errlen)
{
	assert(den > 0);
	assert(c->rem >= 0 && c->rem < den);
	/* |a * b| < 2^126 and rem < 2^63: the sum cannot overflow 128 bits. */
	i128 num = (i128)a * b + c->rem;
	i128 q = num / den, r = num % den;
	if (r < 0) { /* C truncates towards zero; the rule is floor */
		q -= 1;
		r += den;
	}
	if (q > INT64_MAX || q < INT64_MIN)
		return err_set(err, errlen,
		               "amount does not fit in 64 bits of nanodollars "
		               "(%lld x %lld / %lld); split the period",
		               (long long)a, (long long)b, (long long)den);
	assert(r >= 0 && r < den);
	c->rem = (int64_t)r;
	*out = (int64_t)q;
	return 0;
}

int money_accrue(struct money_carry *c, rx_pagesec ps, rx_price price,
                 rx_ndollars *amount, char *err, size_t errlen)
{
	if (price < 0)
		return err_set(err, errlen,
		               "price %lld n$/page-year is negative",
		               (long long)price);
	return money_muldiv_carry(c, ps, price, RX_SECONDS_PER_YEAR, amount,
	                          err, errlen);
}

int money_amount(rx_pagesec ps, rx_price price, rx_ndollars *amount, char *err,
                 size_t errlen)
{
	struct money_carry c = {0};
	return money_accrue(&c, ps, price, amount, err, errlen);
}

int64_t money_price_bound(rx_pagesec ps)
{
	if (ps < 0)
		return -1;
	if (ps == 0)
		return INT64_MAX;
	/* floor(ps * price / Y) <= INT64_MAX  <=>  ps * price < (2^63) * Y */
	i128 lim = (((i128)INT64_MAX + 1) * RX_SECONDS_PER_YEAR - 1) / ps;
	return lim > INT64_MAX ? INT64_MAX : (int64_t)lim;
}

int money_fee(struct money_carry *c, rx_ndollars amount, int bps,
              rx_ndollars *fee, char *err, size_t errlen)
{
	if (bps < 0 || bps > MONEY_BPS_DENOM)
		return err_set(err, errlen,
		               "fee of %d basis points is outside 0..10000",
		               bps);
	return money_muldiv_carry(c, amount, bps, MONEY_BPS_DENOM, fee, err,
	                          errlen);
}

int money_to_cents(struct money_carry *c, rx_ndollars amount, int64_t *cents,
                   char *err, size_t errlen)
{
	return money_muldiv_carry(c, amount, 1, RX_NANODOLLARS_PER_CENT, cents,
	                          err, errlen);
}

/* Writes |v| / unit rounded half away from zero as "I.F" with `decimals`
 * digits of F, where unit = 10^decimals of the scale below. */
static int format_fixed(i128 v, i128 scale, int decimals, char *buf, size_t len)
{
	bool neg = v < 0;
	unsigned __int128 m =
	    neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
	unsigned __int128 whole = m / (unsigned __int128)scale;
	unsigned __int128 frac = m % (unsigned __int128)scale;
	char digits[64];
	int n = 0;
	do {
		digits[n++] = (char)('0' + (int)(whole % 10));
		whole /= 10;
	} while (whole);
	char out[96];
	int o = 0;
	/* "-0.00" would be a lie about a value that rounds to zero. */
	if (neg && (m != 0))
		out[o++] = '-';
	while (n)
		out[o++] = digits[--n];
	if (decimals) {
		out[o++] = '.';
		char f[40];
		for (int i = decimals - 1; i >= 0; i--) {
			f[i] = (char)('0' + (int)(frac % 10));
			frac /= 10;
		}
		memcpy(out + o, f, (size_t)decimals);
		o += decimals;
	}
	out[o] = 0;
	if ((size_t)o + 1 > len)
		return -1;
	memcpy(buf, out, (size_t)o + 1);
	return o;
}

/* Rounds v / div to the nearest integer, halves away from zero. */
static i128 round_div(i128 v, i128 div)
{
	i128 q = v / div, r = v % div;
	if (r < 0)
		r = -r;
	if (2 * r >= div)
		q += v < 0 ? -1 : 1;
	return q;
}

int money_format_cents(rx_ndollars v, char *buf, size_t len)
{
	return format_fixed(round_div(v, RX_NANODOLLARS_PER_CENT), 100, 2, buf,
	                    len);
}

int money_format_exact(rx_ndollars v, char *buf, size_t len)
{
	return format_fixed(v, RX_NANODOLLARS_PER_DOLLAR, 9, buf, len);
}

int money_format_page_years(rx_pagesec ps, char *buf, size_t len)
{
	i128 micro = round_div((i128)ps * 1000000, RX_SECONDS_PER_YEAR);
	return format_fixed(micro, 1000000, 6, buf, len);
}

int money_parse(const char *s, rx_ndollars *out, char *err, size_t errlen)
{
	if (!s || !*s)
		return err_set(err, errlen, "amount is empty");
	const char *p = s;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	/* Accumulate as a negative number so INT64_MIN parses too. */
	i128 acc = 0;
	int intdigits = 0, fracdigits = 0;
	for (; *p >= '0' && *p <= '9'; p++, intdigits++) {
		acc = acc * 10 - (*p - '0');
		if (acc < -(i128)INT64_MAX * 10)
			break; /* far out of range; reported below */
	}
	if (intdigits == 0)
		return err_set(
		    err, errlen,
		    "amount \"%.40s\" must start with a digit (after an "
		    "optional '-')",
		    s);
	if (*p >= '0' && *p <= '9')
		return err_set(err, errlen, "amount \"%.40s\" is too large", s);
	acc *= RX_NANODOLLARS_PER_DOLLAR;
	if (*p == '.') {
		p++;
		i128 scale = RX_NANODOLLARS_PER_DOLLAR / 10;
		for (; *p >= '0' && *p <= '9'; p++, fracdigits++) {
			if (fracdigits == 9)
				return err_set(
				    err, errlen,
				    "amount \"%.40s\" has more than nine "
				    "decimals; the smallest unit is one "
				    "nanodollar (0.000000001)",
				    s);
			acc -= (*p - '0') * scale;
			scale /= 10;
		}
		if (fracdigits == 0)
			return err_set(
			    err, errlen,
			    "amount \"%.40s\" needs a digit after the "
			    "decimal point",
			    s);
	}
	if (*p)
		return err_set(
		    err, errlen,
		    "amount \"%.40s\" has an unexpected character '%c'; "
		    "write plain decimal dollars such as 104.86",
		    s, *p);
	i128 v = neg ? acc : -acc;
	if (v > INT64_MAX || v < INT64_MIN)
		return err_set(
		    err, errlen,
		    "amount \"%.40s\" is outside the +-9223372036.854775807 "
		    "dollars an int64 of nanodollars holds",
		    s);
	*out = (int64_t)v;
	return 0;
}

/* Howard Hinnant's days_from_civil / civil_from_days: exact for the
 * proleptic Gregorian calendar, no tables, no time zone. */
int64_t money_days_from_civil(int year, int month, int day)
{
	assert(month >= 1 && month <= 12 && day >= 1 && day <= 31);
	int64_t y = year - (month <= 2);
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t mp = (month + 9) % 12; /* March = 0 */
	int64_t doy = (153 * mp + 2) / 5 + day - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

rx_time_ns money_month_start(int year, int month)
{
	assert(month >= 1 && month <= 13);
	if (month == 13) {
		year++;
		month = 1;
	}
	assert(year >= MONEY_YEAR_MIN && year <= MONEY_YEAR_MAX + 1);
	return money_days_from_civil(year, month, 1) * 86400 * MONEY_NS_PER_S;
}

void money_civil_of(rx_time_ns t, int *year, int *month, int *day, int *second)
{
	assert(t >= 0);
	int64_t secs = t / MONEY_NS_PER_S;
	int64_t z = secs / 86400 + 719468;
	int64_t era = z / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	*year = (int)(yoe + era * 400 + (m <= 2));
	*month = (int)m;
	*day = (int)(doy - (153 * mp + 2) / 5 + 1);
	*second = (int)(secs % 86400);
}

void money_month_of(rx_time_ns t, int *year, int *month)
{
	int day, second;
	money_civil_of(t, year, month, &day, &second);
}
