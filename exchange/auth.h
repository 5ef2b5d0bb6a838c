/*
 * auth.h — who is calling: bearer tokens for people, HMAC signatures for
 * node agents, and the roles of the brief's table.
 *
 * A person sends `Authorization: Bearer rx_<64 hex>`; only the token's
 * SHA-256 is stored (api_tokens). A node agent signs each request with its
 * per-node secret (common/sign.h), which PostgreSQL keeps only sealed
 * (seal.h): ramexd opens it on a cache miss and keeps it in memory for
 * AUTH_CACHE_S.
 *
 * Replays. A signed timestamp must be within ±300 s of our clock, either
 * way, and a nonce is accepted once: each is remembered until its
 * timestamp leaves the window, at most nonce_per_key of them per node key
 * (a busy key is told 429; other keys are not affected). Nonces live in
 * memory, so a restarted process cannot know what the one before it took;
 * two fences cover that. A timestamp before this process started is
 * refused (the agent signs again). And a timestamp more than
 * AUTH_FUTURE_S ahead of our clock is taken only after the key's
 * node_keys.signed_until records it (AUTH_FENCE_STEP_S further, so a
 * node whose clock runs ahead costs one UPDATE per that many seconds, and
 * after a restart is refused for at most that long); a process
 * refuses, per key, any timestamp up to the signed_until it found at
 * start. What is left is a replay within AUTH_FUTURE_S of a restart.
 * Several instances on one database (auth_share_nonces) also take each
 * nonce in PostgreSQL, so a replay to another instance is refused too.
 *
 * Credentials found in the database are cached for AUTH_CACHE_S seconds;
 * ones it says are unknown or revoked too, apart (a negative cache, so
 * that they neither query PostgreSQL again nor push a valid entry out). A
 * credential must have its shape (rx_ + 64 hex, nk_ + 16 hex) before it
 * is looked up at all, and be in the set of every key id and token hash
 * the database holds, read at start and, on a miss, for what was created
 * since (at most once a KNOWN_REFRESH_S): made-up credentials, each new,
 * cost no query each. A revocation through this process (auth_forget_*)
 * and a creation (auth_known) take effect at once; a revocation through
 * another ramexd sharing the database within AUTH_CACHE_S, a creation
 * within a second. The module owns the caches, the set, the nonce sets
 * and the sealing of secrets at rest.
 *
 * auth knows nothing of the HTTP server: the edge (http.c) hands it a
 * view of the request, struct auth_request (the method, the target as
 * sent, the credential headers and the body), and gets back a verdict (a
 * principal, or a status and a reason). So the dependency runs one way,
 * http → auth: the server decides when a request is authenticated, and
 * auth can be driven by anything that can fill the view (a test, another
 * transport) without a server behind it.
 */
#ifndef RAMEX_AUTH_H
#define RAMEX_AUTH_H

#include <libpq-fe.h>
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
#define AUTH_FUTURE_S     5  /* ahead of our clock without a record */
#define AUTH_FENCE_STEP_S 10 /* a record covers this much more */
#define AUTH_TOKEN_PREFIX "rx_"
#define AUTH_TOKEN_LEN    67 /* "rx_" + 64 hex digits = 256 random bits */

struct db_pool;
struct seal_keys;

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
/* `started` is this process's start time in Unix seconds (the fence);
 * `seal` opens the node secrets and must outlive the auth. */
struct auth *auth_new(struct db_pool *pool, int64_t started,
                      const struct seal_keys *seal, long nonce_per_key);

/* Several ramexd on one database (`shared = 1`): a nonce new to this
 * process is also taken in PostgreSQL's shared store (auth_nonces.h), so
 * that a request replayed to another instance is refused. Signed requests
 * then always authenticate where a query may wait (may_block). Call once,
 * before serving; -1 without memory. */
int auth_share_nonces(struct auth *a, const char *conninfo);

/* At start, before serving: reads the keys' signed_until left by earlier
 * processes (the second fence). Returns how many keys have one, or -1. */
int auth_load_fences(struct auth *a, PGconn *c, char *err, size_t errlen);

/* At start: seals, in one transaction, every node and lend secret still in
 * plaintext (rows from before schema 0013) or sealed under a key that is
 * no longer the first of the key file (a rotation). Returns how many were
 * sealed, or -1 with err. */
int auth_seal_at_rest(PGconn *c, const struct seal_keys *k, char *err,
                      size_t errlen);
void auth_free(struct auth *a);

/* What auth reads of a request; NULL for a header that is absent. The
 * strings are the caller's and need only live for the call. */
struct auth_request {
	const char *method;
	const char *target; /* as sent, with the query: what a node signs */
	const char *authorization; /* Authorization */
	const char *key;           /* SIGN_HDR_KEY and the rest of a */
	const char *timestamp;     /* node's signature (common/sign.h) */
	const char *nonce;
	const char *signature;
	const char *body; /* "" when there is none */
	size_t body_len;
};

/* Authenticates rq. Returns 0 with *out filled, or -1 with *status (401,
 * or 503 when the database is away) and a reason in why. When !may_block
 * and the credentials are not cached, returns -2 at once, having checked
 * nothing (a signed request's nonce is not used up): ask again where a
 * query may wait. */
int auth_authenticate(struct auth *a, const struct auth_request *rq,
                      struct auth_principal *out, int *status, char *why,
                      size_t whylen, int may_block);

/* Drops a revoked bearer token (api_tokens.id) or node key from the cache,
 * so that the next request with it goes to the database and is refused.
 * Call after the revocation committed. */
void auth_forget_token(struct auth *a, int64_t token_id);
void auth_forget_node_key(struct auth *a, const char *key_id);
/* A credential was just made (a node key id, or a token's SHA-256 hex):
 * drops it from the negative cache, so that it works at once. */
void auth_known(struct auth *a, const char *key);

const char *auth_role_name(unsigned role);
/* "trader" -> AUTH_TRADER; 0 for an unknown name. */
unsigned auth_role_parse(const char *name);

/* Makes a new bearer token and its SHA-256 (hex). Returns 0 or -1. */
int auth_token_new(char token[AUTH_TOKEN_LEN + 1], char sha_hex[65]);
/* Makes a node key id ("nk_" + 16 hex) and secret ("rxs_" + 64 hex). */
int auth_node_key_new(char key_id[20], char secret[69]);

#endif
