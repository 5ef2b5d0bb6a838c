/*
 * auth.h — who is calling: bearer tokens for people, HMAC signatures for
 * node agents, and the roles of the brief's table.
 *
 * A person sends `Authorization: Bearer rx_<64 hex>`; only the token's
 * SHA-256 is stored (api_tokens). A node agent signs each request with its
 * per-node secret (common/sign.h): the timestamp must be within ±300 s of
 * ours and after this ramexd started, and a nonce is accepted once — the
 * nonces seen in the last 600 s are kept in memory, and the start-time fence
 * covers the ones an earlier process saw: a timestamp before this process
 * started is refused (the agent signs again), and one more than
 * AUTH_FUTURE_S ahead of our clock too, since an earlier process that took
 * it could not have told us its nonce. Credentials found in the database
 * are cached for AUTH_CACHE_S seconds; a revocation through this process
 * (auth_forget_*) takes effect at once, one through another ramexd sharing
 * the database within AUTH_CACHE_S. The module owns the cache and the nonce
 * set.
 */
#ifndef RAMEX_AUTH_H
#define RAMEX_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* The roles (brief, "Roles and trust"); a route names the ones it serves. */
#define AUTH_NODE      0x01u /* trade for itself, report its usage */
#define AUTH_TRADER    0x02u /* trade for the nodes of its team */
#define AUTH_OPERATOR  0x04u /* post offline bids, manage markets */
#define AUTH_FINANCE   0x08u /* read billing data, nothing else */
#define AUTH_ADMIN     0x10u /* manage accounts and keys */
#define AUTH_ALL_ROLES 0x1fu
#define AUTH_PUBLIC    0x100u /* no credentials needed (health, metrics) */

#define AUTH_CACHE_S      5
#define AUTH_FUTURE_S     5 /* how far ahead a signed timestamp may be */
#define AUTH_NONCE_MAX    (1 << 20) /* nonces remembered at once */
#define AUTH_TOKEN_PREFIX "rx_"
#define AUTH_TOKEN_LEN    67 /* "rx_" + 64 hex digits = 256 random bits */

struct http_req;
struct db_pool;

struct auth_principal {
	unsigned role; /* one AUTH_* bit */
	int64_t id;    /* api_tokens.id, or the node's account id */
	int64_t
	    account_id;  /* node: itself; operator: the account it bids for */
	int64_t team_id; /* trader: its team; node: its team */
	char name[72];
	char scope[48]; /* "tok:ID" or "node:KEYID": names its idempotency keys
	                 */
};

struct auth;
/* `started` is this process's start time in Unix seconds (the fence). */
struct auth *auth_new(struct db_pool *pool, int64_t started);
void auth_free(struct auth *a);

/* Authenticates rq. Returns 0 with *out filled, or -1 with *status (401,
 * or 503 when the database is away) and a reason in why. When !may_block
 * and the credentials are not cached, returns -2 at once, having checked
 * nothing (a signed request's nonce is not used up): ask again where a
 * query may wait. */
int auth_authenticate(struct auth *a, struct http_req *rq,
                      struct auth_principal *out, int *status, char *why,
                      size_t whylen, int may_block);

/* Drops a revoked bearer token (api_tokens.id) or node key from the cache,
 * so that the next request with it goes to the database and is refused.
 * Call after the revocation committed. */
void auth_forget_token(struct auth *a, int64_t token_id);
void auth_forget_node_key(struct auth *a, const char *key_id);

const char *auth_role_name(unsigned role);
/* "trader" -> AUTH_TRADER; 0 for an unknown name. */
unsigned auth_role_parse(const char *name);

/* Makes a new bearer token and its SHA-256 (hex). Returns 0 or -1. */
int auth_token_new(char token[AUTH_TOKEN_LEN + 1], char sha_hex[65]);
/* Makes a node key id ("nk_" + 16 hex) and secret ("rxs_" + 64 hex). */
int auth_node_key_new(char key_id[20], char secret[69]);

#endif
