/*
 * money.h — the money arithmetic every ramex component shares: checked
 * int64 operations, pricing usage with the carry rule, the billing calendar,
 * and the text forms of amounts at the edges. docs/money.md is the rule book;
 * this module is its only implementation.
 *
 *   amount = page_seconds * price / RX_SECONDS_PER_YEAR
 *
 * is computed with a 128-bit intermediate and rounded down (towards minus
 * infinity). The part below one nanodollar is not dropped: it is kept as the
 * remainder numerator in a struct money_carry (0 <= rem < denominator) that
 * the caller stores with what it prices (one per contract) and hands back
 * for the next period. So the sum of the amounts of any split of a usage
 * equals the amount of the whole usage, to the nanodollar; the same carry,
 * with another denominator, turns exact nanodollars into payable cents and
 * exchange fees into basis points without losing a unit.
 *
 * Pure: no clock, no I/O, no globals, no allocation. Every function that can
 * fail returns 0 or -1 and, on -1, writes a sentence a person can act on into
 * err (which may be NULL), leaving its outputs untouched.
 */
#ifndef RAMEX_MONEY_H
#define RAMEX_MONEY_H

#include "common/units.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MONEY_NS_PER_S  INT64_C(1000000000)
#define MONEY_BPS_DENOM INT64_C(10000) /* basis points in one whole */
#define MONEY_MSG_MAX   160  /* room for any message this module writes */
#define MONEY_TEXT_MAX  32   /* room for any amount this module formats */
#define MONEY_YEAR_MIN  1970 /* the calendar covers [1970, 2200] */
#define MONEY_YEAR_MAX  2200 /* ns since 1970 in int64 run out in 2262 */

/* Checked arithmetic: true and *out on success, false (and *out untouched)
 * when the exact result does not fit int64. */
bool money_add(int64_t a, int64_t b, int64_t *out);
bool money_sub(int64_t a, int64_t b, int64_t *out);
bool money_mul(int64_t a, int64_t b, int64_t *out);

/*
 * The remainder carried from one priced period to the next, as a numerator
 * over the denominator of the operation that made it. Zero-initialise one per
 * stream of amounts (one per contract for usage, one per contract for fees,
 * one per account for payable cents) and never mix streams.
 */
struct money_carry {
	int64_t rem; /* 0 <= rem < denominator */
};

/*
 * *out = floor((a * b + c->rem) / den), and c->rem becomes what is left,
 * computed exactly in 128 bits. a and b may be negative (a correction);
 * den > 0. -1 when the quotient does not fit int64 (c is then unchanged).
 */
int money_muldiv_carry(struct money_carry *c, int64_t a, int64_t b, int64_t den,
                       int64_t *out, char *err, size_t errlen);

/* The amount of `ps` page-seconds at `price` n$/page-year, carrying the
 * sub-nanodollar remainder in c (den = RX_SECONDS_PER_YEAR). price >= 0. */
int money_accrue(struct money_carry *c, rx_pagesec ps, rx_price price,
                 rx_ndollars *amount, char *err, size_t errlen);

/* The amount without a carry, rounded down; for one-off figures such as the
 * brief's examples and settlement targets. */
int money_amount(rx_pagesec ps, rx_price price, rx_ndollars *amount, char *err,
                 size_t errlen);

/* The highest price (n$/page-year) at which `ps` page-seconds still
 * amount to an int64 of nanodollars (money_accrue, however the usage is
 * split: the carry makes the parts sum to the whole's amount); INT64_MAX
 * when any price does, -1 when ps < 0. */
int64_t money_price_bound(rx_pagesec ps);

/* An exchange fee of `bps` basis points (0..10000) on `amount`, carrying the
 * remainder below a nanodollar in c (den = MONEY_BPS_DENOM). */
int money_fee(struct money_carry *c, rx_ndollars amount, int bps,
              rx_ndollars *fee, char *err, size_t errlen);

/* Whole cents payable for `amount` n$, carrying the sub-cent part in c
 * (den = RX_NANODOLLARS_PER_CENT). The sum of the payable cents of a stream
 * plus its final carry is exactly the sum of its amounts. */
int money_to_cents(struct money_carry *c, rx_ndollars amount, int64_t *cents,
                   char *err, size_t errlen);

/* ---- text forms, for the edges only ---- */

/* "104.86": dollars rounded to the nearest cent, halves away from zero, with
 * a leading '-' when negative. Display only: never parse it back into money.
 * Returns the length, or -1 when buf is too small. */
int money_format_cents(rx_ndollars v, char *buf, size_t len);

/* "104.857600000": the exact value, nine decimals. Length or -1. */
int money_format_exact(rx_ndollars v, char *buf, size_t len);

/* "1048576.000000": page-seconds as page-years, six decimals, rounded to
 * nearest (page-years do not end in decimal; page-seconds are the exact
 * figure). Length or -1. */
int money_format_page_years(rx_pagesec ps, char *buf, size_t len);

/*
 * Parses a decimal dollar amount: optional '-', one or more digits,
 * optionally '.' and one to nine digits ("104.86", "0.000000001", "-3").
 * No spaces, signs other than a leading '-', exponents, thousands
 * separators or currency signs; more than nine decimals is refused rather
 * than rounded, since it would lose money below a nanodollar.
 */
int money_parse(const char *s, rx_ndollars *out, char *err, size_t errlen);

/* ---- the billing calendar (UTC, proleptic Gregorian) ---- */

/* Days from 1970-01-01 to year-month-day (month 1..12, day 1..31). */
int64_t money_days_from_civil(int year, int month, int day);

/* The first instant of year-month (1..12) in ns since the epoch. month 13
 * is January of the next year, so the end of a month is
 * money_month_start(y, m + 1). Asserts the year is in the calendar range. */
rx_time_ns money_month_start(int year, int month);

/* The month that contains t (t >= 0, before MONEY_YEAR_MAX + 1). */
void money_month_of(rx_time_ns t, int *year, int *month);

/* The UTC date and time of t (t >= 0): year, month 1..12, day 1..31,
 * seconds into the day 0..86399. */
void money_civil_of(rx_time_ns t, int *year, int *month, int *day, int *second);

#endif
