/*
 * ctl_units.h — ramexctl's exact conversions between what a person types or
 * reads and the exchange's integer units (common brief: pages of 4096 bytes,
 * nanodollars, prices in n$/page-year). Pure: no I/O, no allocation, no
 * floating point, so every conversion is exact or refused.
 */
#ifndef RAMEX_CTL_UNITS_H
#define RAMEX_CTL_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "100000" (n$/page-year) or "$0.0001" (dollars, at most 9 decimals).
 * Returns 0, or -1 with a message in err. */
int ctl_units_parse_price(const char *s, int64_t *out, char *err, size_t len);
/* "262144" (pages), or a whole number with a KiB/MiB/GiB/TiB suffix that is
 * a whole number of pages. Returns 0, or -1 with a message in err. */
int ctl_units_parse_pages(const char *s, int64_t *out, char *err, size_t len);
/* A plain non-negative decimal integer ("42"); -1 when s is anything else. */
int ctl_units_parse_int(const char *s, int64_t *out);

/* Money to the cent, rounded half away from zero: "$104.86", "-$0.01". */
void ctl_units_fmt_money(int64_t nanodollars, char *buf, size_t len);
/* A price in dollars, exact, at least two decimals: "$0.0001", "$1.00". */
void ctl_units_fmt_price(int64_t nanodollars, char *buf, size_t len);
/* Pages as bytes, by the web pages' rule (web/js/fmt.js bytes): GiB to two
 * decimals from 0.01 GiB up, halves away from zero, then MiB, then whole
 * KiB, thousands grouped: "4.00 GiB", "1.00 MiB", "1,020 KiB". */
void ctl_units_fmt_bytes(int64_t pages, char *buf, size_t len);
/* Pages with their size: "1048576 (4.00 GiB)", "256 (1.00 MiB)". */
void ctl_units_fmt_pages(int64_t pages, char *buf, size_t len);
/* Money a person can read at any size (web/js/fmt.js amount): to the cent
 * from a cent up; under a cent to two significant digits, halves away from
 * zero ("$0.0041"); exact to the nanodollar when `exact`. */
void ctl_units_fmt_amount(int64_t nanodollars, int exact, char *buf,
                          size_t len);
/* A duration in ns as a person reads it, exactly: whole days, hours,
 * minutes and seconds, those that are not zero ("30 s", "2 min",
 * "1 h 30 min", "1 min 0.25 s"); under a second in ms ("250 ms",
 * "0.5 ms"); "0 s" for none. */
void ctl_units_fmt_duration(int64_t ns, char *buf, size_t len);

/* Both, ramexctl and the web pages, are checked against the same table:
 * tests/unit/fixtures/units.tsv. */

#endif
