/*
 * ramexd_fixture.h — what the two ramexd suites (test_ramexd,
 * test_ramexd_recovery) share on top of ramexd_harness.h: placing a spot
 * order over HTTP, the id in an order's answer, and a one-number query of
 * the suite's database. Test code only; the short names are the ones the
 * suites' bodies use.
 */
#ifndef RAMEX_TESTS_RAMEXD_FIXTURE_H
#define RAMEX_TESTS_RAMEXD_FIXTURE_H

#include <stdint.h>

#include "tests/integration/ramexd_harness.h"

/* POST /v1/orders on the spot market for `acct` with token `tok`; `more`
 * is appended to the JSON body (",\"field\":..."), `hdr` extra headers
 * for rxh_call (`more` may be NULL). The HTTP status; the answer in *r. */
long place(struct rxh *h, const char *tok, int64_t acct, const char *side,
           int pages, int price, const char *more, const char *hdr,
           struct rxh_resp *r);
/* order.id of an order's answer (0 if none) */
int64_t order_id(const struct rxh_resp *r);
/* The one number `sql` returns on the ramexd's database. */
long count(struct rxh *h, const char *sql);

#endif
