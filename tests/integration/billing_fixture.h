/*
 * billing_fixture.h — what the billing suites (test_billing,
 * test_billing_job) share: contracts and usage reports made by SQL as the
 * writer and POST /v1/usage would have made them (node, contract, report),
 * month instants (ms, month_ps), a billing run (run), the invoices as the
 * API shows them (invoices, invoice, sums, jint) and the ledger check
 * (ledger_ok). Test code only; the names are kept short as the suites'
 * bodies use them.
 */
#ifndef RAMEX_TESTS_BILLING_FIXTURE_H
#define RAMEX_TESTS_BILLING_FIXTURE_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "common/money.h"
#include "tests/integration/ramexd_harness.h"

#define S    MONEY_NS_PER_S
#define DAY  (INT64_C(86400) * S)
#define GIB4 (INT64_C(1) << 20)

/* Runs sql with int64 parameters $1..$n; returns the first value of the
 * first row as an integer (0 when none). */
int64_t q(PGconn *c, const char *sql, int n, ...);
/* a node account of team, by SQL; returns its id */
int64_t node(PGconn *c, int64_t team, const char *name);
/* A trade and its contract, as the writer would have made them, moved by
 * SQL to `state` with the given instants. Returns the contract id. */
int64_t contract(PGconn *c, int64_t market, int perm, int64_t buyer,
                 int64_t seller, int lend, int64_t pages, int64_t price,
                 int64_t penalty, int64_t created, int64_t delivered,
                 const char *state, int64_t ended, int64_t term_end);
/* One usage report of `side` for [from, to), as POST /v1/usage stores it. */
void report(PGconn *c, int64_t nodeid, int64_t id, int buyer_side, int64_t from,
            int64_t to, int64_t ps);
/* the first instant of month m (1-12, 13 is the next January) of year y */
int64_t ms(int y, int m);
/* `pages` for the whole month m of year y, in page-seconds */
int64_t month_ps(int64_t pages, int y, int m);
/* POST /v1/billing/run as of as_of (admin), which must answer 200 */
json_t *run(struct rxh *h, int64_t as_of);
/* The invoices of `account` (admin), as a JSON array. */
json_t *invoices(struct rxh *h, int64_t account);
/* GET /v1/invoices/{id} (admin) */
json_t *invoice(struct rxh *h, int64_t id);
/* o's member k as an integer (0 when missing) */
int64_t jint(json_t *o, const char *k);
/* The sum of the lines of contract `cid` on all invoices of `account`
 * in `year` (0: any), and of their totals. */
void sums(struct rxh *h, int64_t account, int year, int64_t cid, int64_t *lines,
          int64_t *totals, int64_t *cents, int *n);
/* GET /v1/ledger/check answers ok. */
void ledger_ok(struct rxh *h);

#endif
