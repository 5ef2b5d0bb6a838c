/* h_lend.c — the data path of a lend contract over HTTP: the lender's
 * endpoint and the per-contract secret (schema/0009_lend_sessions.sql,
 * docs/lending.md, docs/billing-api.md "Contracts").
 *
 *   POST /v1/contracts/{id}/lend  the seller (its node or a trader of its
 *        team) says where its page server listens: {"endpoint":
 *        "HOST:PORT"}; the first call draws the 256-bit secret, later
 *        calls move the endpoint and keep the secret
 *   GET  /v1/contracts/{id}/lend  either party reads {endpoint, secret};
 *        404 until the seller registered
 *
 * The secret is what the lend protocol's HMAC is keyed by, so only the two
 * parties may read it: operator, finance and admin are not even routed
 * here, and a node or trader of neither side gets the 404 of a contract
 * that does not exist. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/log.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/seal.h"

#define LEND_ENDPOINT_MAX 255

/* A DNS host name: dot-separated labels of letters, digits and '-', each
 * 1..63 long, not starting or ending with '-'. IPv4 literals fit too. */
static int host_name_ok(const char *h, size_t n)
{
	size_t label = 0;
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (label == 0 || h[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return 0;
		if (c == '-' && label == 0)
			return 0;
		if (++label > 63)
			return 0;
	}
	return label > 0 && h[n - 1] != '-';
}

/* "HOST:PORT" with HOST a host name, an IPv4 literal or [IPv6], PORT
 * 1..65535. 0 when good, else -1 with why. */
static int endpoint_check(const char *s, char *why, size_t whylen)
{
	size_t n = strlen(s);
	const char *colon = strrchr(s, ':');
	if (n > LEND_ENDPOINT_MAX) {
		snprintf(why, whylen, "is %zu characters, at most %d", n,
		         LEND_ENDPOINT_MAX);
		return -1;
	}
	if (!colon || colon == s) {
		snprintf(why, whylen,
		         "must be HOST:PORT, e.g. \"10.0.0.7:7100\"");
		return -1;
	}
	const char *p = colon + 1;
	char *end;
	long port = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
	if (port < 1 || port > 65535 || *end || end - p > 5) {
		snprintf(why, whylen,
		         "must end in :PORT with PORT 1..65535 (the port the "
		         "lender's page server listens on)");
		return -1;
	}
	size_t hn = (size_t)(colon - s);
	if (s[0] == '[') {
		char v6[64];
		struct in6_addr a6;
		if (hn < 3 || s[hn - 1] != ']' || hn - 2 >= sizeof v6) {
			snprintf(why, whylen,
			         "an IPv6 host goes in brackets: "
			         "[2001:db8::7]:7100");
			return -1;
		}
		memcpy(v6, s + 1, hn - 2);
		v6[hn - 2] = '\0';
		if (inet_pton(AF_INET6, v6, &a6) != 1) {
			snprintf(why, whylen, "%s is not an IPv6 address", v6);
			return -1;
		}
		return 0;
	}
	if (!host_name_ok(s, hn)) {
		snprintf(why, whylen,
		         "the host must be a host name (letters, digits, '-' "
		         "and dots), an IPv4 address or [IPv6]");
		return -1;
	}
	/* A host name's last label is never all digits (RFC 1123, 2.1):
	 * such a host is an IPv4 address or a mistake (999.1.1.1 went to
	 * the resolver, and the borrower learnt only when it connected). */
	const char *last = s + hn;
	while (last > s && last[-1] != '.')
		last--;
	if (strspn(last, "0123456789") < (size_t)(colon - last))
		return 0;
	char v4[INET_ADDRSTRLEN];
	struct in_addr a4;
	if (hn < sizeof v4) {
		memcpy(v4, s, hn);
		v4[hn] = '\0';
		if (inet_pton(AF_INET, v4, &a4) == 1)
			return 0;
	}
	snprintf(why, whylen,
	         "%.*s is not an IPv4 address (four numbers 0..255), and a "
	         "host name does not end in digits",
	         (int)(hn < 64 ? hn : 64), s);
	return -1;
}

/* The contract's parties as the caller sees them. */
struct party {
	int found, lend, seller, buyer;
	char state[24];
};

/* Loads contract `ids` and says whether the caller is its seller or buyer:
 * a node by its account, a trader by its team. 0, or -1 after replying. */
static int load_party(struct http_req *rq, PGconn *c, const char *ids,
                      struct party *out)
{
	const struct auth_principal *p = http_principal(rq);
	char acct[24], team[24], err[512];
	snprintf(acct, sizeof acct, "%lld",
	         (long long)(p->role == AUTH_NODE ? p->account_id : 0));
	snprintf(team, sizeof team, "%lld",
	         (long long)(p->role == AUTH_TRADER ? p->team_id : 0));
	const char *pv[] = {ids, acct, team};
	PGresult *r =
	    db_exec(c, PGRES_TUPLES_OK,
	            "SELECT c.delivery = 'lend', c.state, "
	            "c.seller_id = $2::bigint OR (sa.kind = 'node' AND "
	            "sa.team_id = $3::bigint), c.buyer_id = $2::bigint OR "
	            "(ba.kind = 'node' AND ba.team_id = $3::bigint) "
	            "FROM contracts c JOIN accounts sa ON sa.id = c.seller_id "
	            "JOIN accounts ba ON ba.id = c.buyer_id WHERE c.id = $1",
	            3, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		return -1;
	}
	memset(out, 0, sizeof *out);
	if (PQntuples(r) == 1) {
		out->found = 1;
		out->lend = PQgetvalue(r, 0, 0)[0] == 't';
		snprintf(out->state, sizeof out->state, "%s",
		         PQgetvalue(r, 0, 1));
		out->seller = PQgetvalue(r, 0, 2)[0] == 't';
		out->buyer = PQgetvalue(r, 0, 3)[0] == 't';
	}
	PQclear(r);
	/* one answer for "no such contract" and "not yours", so the ids of
	 * other accounts' contracts are not probed through this call */
	if (!out->found || (!out->seller && !out->buyer)) {
		http_problem(rq, 404, "not-found", "not found",
		             "there is no contract %s that you may see: only "
		             "its buyer and seller (their nodes or traders of "
		             "their teams) see its lend endpoint and secret",
		             ids);
		return -1;
	}
	return 0;
}

/* r: endpoint, secret (plaintext, rows from before 0013), created_at,
 * updated_at, secret_sealed. */
static void reply_session(struct http_req *rq, const char *ids, PGresult *r)
{
	struct app *a = http_app(rq);
	char secret[128], aad[40];
	snprintf(aad, sizeof aad, "lend:%s", ids);
	if (PQgetisnull(r, 0, 4)) {
		snprintf(secret, sizeof secret, "%s", PQgetvalue(r, 0, 1));
	} else if (seal_open(a->seal, PQgetvalue(r, 0, 4), aad, secret,
	                     sizeof secret) < 0) {
		log_error("a lend secret does not open",
		          "contract=%s hint=\"%s\"", ids,
		          "its sealing key is not in seal_key_file, or the row "
		          "was changed or copied from another");
		http_problem(rq, 500, "internal", "secret unavailable",
		             "the exchange cannot open contract %s's lend "
		             "secret (its sealing key is missing from the "
		             "exchange's seal_key_file); tell the operator",
		             ids);
		return;
	}
	json_t *o = json_pack(
	    "{s:I, s:s, s:s, s:s, s:s}", "contract_id",
	    (json_int_t)strtoll(ids, NULL, 10), "endpoint", PQgetvalue(r, 0, 0),
	    "secret", secret, "created_at", PQgetvalue(r, 0, 2),
	    "updated_at", PQgetvalue(r, 0, 3));
	OPENSSL_cleanse(secret, sizeof secret);
	if (!o) {
		http_problem(rq, 500, "internal", "reply failed",
		             "could not build the reply; retry");
		return;
	}
	http_reply_json(rq, 200, o);
}

void h_contract_lend_register(struct http_req *rq)
{
	static const char *const known[] = {"endpoint", NULL};
	struct app *a = http_app(rq);
	char endpoint[LEND_ENDPOINT_MAX + 1], ids[24], why[160], err[512];
	unsigned char raw[32];
	char hex[65];
	int64_t id;
	json_t *b = NULL;
	PGconn *c = NULL;
	struct party pt;
	if (in_pid(rq, "id", &id) < 0)
		return;
	if (!(b = http_body_object(rq)))
		return;
	if (in_known(rq, b, known) < 0 || in_str(rq, b, "endpoint", true, false,
	                                         endpoint, sizeof endpoint) < 0)
		goto out;
	if (endpoint_check(endpoint, why, sizeof why) < 0) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "endpoint: %s", why);
		goto out;
	}
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	if (!(c = db_acquire(a->pool))) {
		http_db_unavailable(rq);
		goto out;
	}
	if (load_party(rq, c, ids, &pt) < 0)
		goto out;
	if (!pt.seller) {
		http_problem(rq, 403, "not-party", "not the seller",
		             "only the seller of contract %s registers where "
		             "its pages are served; the buyer reads it with "
		             "GET /v1/contracts/%s/lend",
		             ids, ids);
		goto out;
	}
	if (!pt.lend) {
		http_problem(rq, 409, "not-lend", "not a lend contract",
		             "contract %s is an offline contract: its pages "
		             "go offline on the seller, no data moves",
		             ids);
		goto out;
	}
	if (strcmp(pt.state, "pending_delivery") != 0 &&
	    strcmp(pt.state, "active") != 0) {
		http_problem(rq, 409, "wrong-state", "contract not running",
		             "contract %s is %s: an endpoint is registered "
		             "only while it is pending_delivery or active",
		             ids, pt.state);
		goto out;
	}
	/* drawn on every call, kept only by the first: ON CONFLICT leaves the
	 * stored secret alone */
	if (RAND_bytes(raw, sizeof raw) != 1) {
		http_problem(rq, 500, "internal", "no randomness",
		             "the exchange could not draw a secret (OpenSSL "
		             "RAND_bytes failed); retry");
		goto out;
	}
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	/* only sealed in the database (seal.h) */
	char sealed[SEAL_TEXT_MAX], aad[40];
	snprintf(aad, sizeof aad, "lend:%s", ids);
	int sealed_rc = seal_seal(a->seal, hex, aad, sealed);
	OPENSSL_cleanse(raw, sizeof raw);
	OPENSSL_cleanse(hex, sizeof hex);
	if (sealed_rc < 0) {
		http_problem(rq, 500, "internal", "could not seal the secret",
		             "the exchange could not seal the contract's "
		             "secret (OpenSSL failed); retry");
		goto out;
	}
	const char *pv[] = {ids, endpoint, sealed};
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "INSERT INTO lend_sessions (contract_id, endpoint, secret_sealed) "
	    "VALUES ($1, $2, $3) ON CONFLICT (contract_id) DO UPDATE SET "
	    "endpoint = EXCLUDED.endpoint, updated_at = now() RETURNING "
	    "endpoint, secret, created_at::text, updated_at::text, "
	    "secret_sealed",
	    3, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		goto out;
	}
	reply_session(rq, ids, r);
	PQclear(r);
out:
	if (c)
		db_release(a->pool, c);
	json_decref(b);
}

void h_contract_lend_get(struct http_req *rq)
{
	struct app *a = http_app(rq);
	char ids[24], err[512];
	int64_t id;
	struct party pt;
	if (in_pid(rq, "id", &id) < 0)
		return;
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	if (load_party(rq, c, ids, &pt) < 0)
		goto out;
	const char *pv[] = {ids};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT endpoint, secret, created_at::text, "
	                      "updated_at::text, secret_sealed FROM "
	                      "lend_sessions WHERE contract_id = $1",
	                      1, pv, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		goto out;
	}
	if (PQntuples(r) != 1)
		http_problem(rq, 404, "not-registered", "no lend endpoint yet",
		             "the seller of contract %s has not registered "
		             "its page server yet (%s); retry in a few "
		             "seconds",
		             ids,
		             pt.lend ? "POST /v1/contracts/{id}/lend"
		                     : "it is an offline contract, it never "
		                       "will");
	else
		reply_session(rq, ids, r);
	PQclear(r);
out:
	db_release(a->pool, c);
}
