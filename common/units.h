/*
 * units.h — the units every ramex component shares (see docs/money.md).
 *
 * Quantities are whole 4096-byte pages, usage is page-seconds, money is
 * nanodollars and prices are nanodollars per page-year; all are int64 and
 * never floating point. This header owns the constants and nothing else.
 */
#ifndef RAMEX_UNITS_H
#define RAMEX_UNITS_H

#include <stdint.h>

#define RX_PAGE_SIZE              4096
#define RX_SECONDS_PER_YEAR       INT64_C(31536000) /* 365 days */
#define RX_NANODOLLARS_PER_DOLLAR INT64_C(1000000000)
#define RX_NANODOLLARS_PER_CENT   INT64_C(10000000)

typedef int64_t rx_pages;    /* whole pages */
typedef int64_t rx_pagesec;  /* page-seconds */
typedef int64_t rx_ndollars; /* nanodollars */
typedef int64_t rx_price;    /* nanodollars per page-year */
typedef int64_t rx_time_ns;  /* nanoseconds since the Unix epoch, UTC */

#endif
