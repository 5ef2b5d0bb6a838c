/*
 * ramexd_fixture.c — the ramexd suites' shared helpers (see
 * ramexd_fixture.h).
 */
#include "tests/integration/ramexd_fixture.h"

#include <stdio.h>

#include "tests/integration/testdb.h"

long place(struct rxh *h, const char *tok, int64_t acct, const char *side,
           int pages, int price, const char *more, const char *hdr,
           struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":%d,\"price\":%d%s}",
	         (long long)acct, side, pages, price, more ? more : "");
	return rxh_call(h, "POST", "/v1/orders", tok, body, hdr, r);
}

int64_t order_id(const struct rxh_resp *r)
{
	return json_integer_value(
	    json_object_get(json_object_get(r->json, "order"), "id"));
}

long count(struct rxh *h, const char *sql)
{
	return testdb_scalar_at(h->conninfo, sql);
}
