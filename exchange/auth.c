/* auth.c — see auth.h. */
#include "exchange/auth.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/sign.h"
#include "exchange/db.h"
#include "exchange/http.h"

#define CACHE_SLOTS   4096
#define NONCE_BUCKETS 65536
#define NONCE_KEEP_S  (2 * SIGN_MAX_SKEW_S)

struct cached {
	char key[72]; /* token sha256 or node key id; "" when empty */
	int64_t until;
	struct auth_principal p;
	char secret[80];
};

struct nonce {
	struct nonce *next;
	int64_t until;
	char key[SIGN_NONCE_MAX + 24];
};

struct auth {
	struct db_pool *pool;
	int64_t started;
	pthread_mutex_t mu;
	struct cached cache[CACHE_SLOTS];
	/* Bumped by every auth_forget_*: a lookup that read the database
	 * before a revocation must not put its stale answer into the cache
	 * after the revocation cleared it. */
	uint64_t gen;
	struct nonce *nonces[NONCE_BUCKETS];
	long nnonces;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

static int64_t mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

struct auth *auth_new(struct db_pool *pool, int64_t started)
{
	struct auth *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->pool = pool;
	a->started = started;
	pthread_mutex_init(&a->mu, NULL);
	return a;
}

void auth_free(struct auth *a)
{
	if (!a)
		return;
	for (int i = 0; i < NONCE_BUCKETS; i++) {
		struct nonce *n = a->nonces[i];
		while (n) {
			struct nonce *next = n->next;
			free(n);
			n = next;
		}
	}
	pthread_mutex_destroy(&a->mu);
	free(a);
}

static const char *role_names[] = {"node", "trader", "operator", "finance",
                                   "admin"};

const char *auth_role_name(unsigned role)
{
	for (int i = 0; i < 5; i++)
		if (role == (1u << i))
			return role_names[i];
	return "unknown";
}

unsigned auth_role_parse(const char *name)
{
	for (int i = 0; i < 5; i++)
		if (name && strcmp(name, role_names[i]) == 0)
			return 1u << i;
	return 0;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

int auth_token_new(char token[AUTH_TOKEN_LEN + 1], char sha_hex[65])
{
	unsigned char b[32];
	if (RAND_bytes(b, sizeof b) != 1)
		return -1;
	memcpy(token, AUTH_TOKEN_PREFIX, 3);
	hex(b, sizeof b, token + 3);
	sign_sha256_hex(token, strlen(token), sha_hex);
	return 0;
}

int auth_node_key_new(char key_id[20], char secret[69])
{
	unsigned char b[8], s[32];
	if (RAND_bytes(b, sizeof b) != 1 || RAND_bytes(s, sizeof s) != 1)
		return -1;
	memcpy(key_id, "nk_", 3);
	hex(b, sizeof b, key_id + 3);
	memcpy(secret, "rxs_", 4);
	hex(s, sizeof s, secret + 4);
	return 0;
}

/* Returns 1 and fills p (and secret) from the cache, 0 on a miss. */
static int cache_get(struct auth *a, const char *key, struct auth_principal *p,
                     char *secret, size_t slen)
{
	int hit = 0;
	struct cached *c = &a->cache[hash(key) % CACHE_SLOTS];
	pthread_mutex_lock(&a->mu);
	if (strcmp(c->key, key) == 0 && c->until > mono_s()) {
		*p = c->p;
		if (secret)
			snprintf(secret, slen, "%s", c->secret);
		hit = 1;
	}
	pthread_mutex_unlock(&a->mu);
	return hit;
}

static uint64_t cache_gen(struct auth *a)
{
	pthread_mutex_lock(&a->mu);
	uint64_t g = a->gen;
	pthread_mutex_unlock(&a->mu);
	return g;
}

/* Stores what a lookup that began at generation `gen` found, unless a
 * revocation happened since. */
static void cache_put(struct auth *a, uint64_t gen, const char *key,
                      const struct auth_principal *p, const char *secret)
{
	struct cached *c = &a->cache[hash(key) % CACHE_SLOTS];
	pthread_mutex_lock(&a->mu);
	if (a->gen != gen) {
		pthread_mutex_unlock(&a->mu);
		return;
	}
	snprintf(c->key, sizeof c->key, "%s", key);
	c->until = mono_s() + AUTH_CACHE_S;
	c->p = *p;
	snprintf(c->secret, sizeof c->secret, "%s", secret ? secret : "");
	pthread_mutex_unlock(&a->mu);
}

/* 1: new and now remembered; 0: seen before; -1: too many remembered. */
static int nonce_once(struct auth *a, const char *key_id, const char *nonce,
                      int64_t now)
{
	char k[sizeof((struct nonce *)0)->key];
	snprintf(k, sizeof k, "%s/%s", key_id, nonce);
	struct nonce **b = &a->nonces[hash(k) % NONCE_BUCKETS];
	int rc = 1;
	pthread_mutex_lock(&a->mu);
	for (struct nonce **pp = b; *pp;) {
		struct nonce *n = *pp;
		if (n->until <
		    now) { /* forget what can no longer be replayed */
			*pp = n->next;
			free(n);
			a->nnonces--;
			continue;
		}
		if (strcmp(n->key, k) == 0) {
			rc = 0;
			goto out;
		}
		pp = &n->next;
	}
	if (a->nnonces >= AUTH_NONCE_MAX) {
		rc = -1;
		goto out;
	}
	struct nonce *n = malloc(sizeof *n);
	if (!n) {
		rc = -1;
		goto out;
	}
	snprintf(n->key, sizeof n->key, "%s", k);
	n->until = now + NONCE_KEEP_S;
	n->next = *b;
	*b = n;
	a->nnonces++;
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static int bearer(struct auth *a, const char *token, struct auth_principal *out,
                  int *status, char *why, size_t whylen, int may_block)
{
	char sha[65], err[256];
	if (strncmp(token, AUTH_TOKEN_PREFIX, 3) != 0 ||
	    strlen(token) != AUTH_TOKEN_LEN) {
		snprintf(
		    why, whylen,
		    "the bearer token is not a ramex token (rx_ followed by "
		    "64 hex digits)");
		return -1;
	}
	sign_sha256_hex(token, strlen(token), sha);
	uint64_t gen = cache_gen(a);
	if (cache_get(a, sha, out, NULL, 0))
		return out->role
		           ? 0
		           : (snprintf(why, whylen, "unknown or revoked token"),
		              -1);
	if (!may_block)
		return -2;
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		*status = 503;
		snprintf(why, whylen,
		         "the exchange cannot reach PostgreSQL to check the "
		         "token; retry after a few seconds");
		return -1;
	}
	const char *params[] = {sha};
	char state[6];
	PGresult *r = db_exec_state(
	    c, PGRES_TUPLES_OK,
	    "SELECT id, name, role, coalesce(team_id, 0), "
	    "coalesce(account_id, 0) FROM api_tokens "
	    "WHERE sha256 = $1 AND revoked_at IS NULL",
	    1, params, err, sizeof err, state);
	/* PostgreSQL going away (a closed connection, an admin shutdown)
	 * is a 503, whatever libpq's state says yet */
	int lost = !r && (db_broken(c) || db_state_lost(state));
	db_release(a->pool, c);
	if (!r) {
		*status = lost ? 503 : 500;
		log_error("token lookup failed", "err=\"%s\"", err);
		snprintf(why, whylen,
		         lost ? "the exchange cannot reach PostgreSQL to check "
		                "the token; retry after a few seconds"
		              : "could not check the token; the exchange's "
		                "log says why");
		return -1;
	}
	memset(out, 0, sizeof *out);
	if (PQntuples(r) == 1) {
		out->id = db_int(r, 0, 0);
		snprintf(out->name, sizeof out->name, "%s",
		         PQgetvalue(r, 0, 1));
		out->role = auth_role_parse(PQgetvalue(r, 0, 2));
		out->team_id = db_int(r, 0, 3);
		out->account_id = db_int(r, 0, 4);
		snprintf(out->scope, sizeof out->scope, "tok:%lld",
		         (long long)out->id);
	}
	PQclear(r);
	cache_put(a, gen, sha, out, NULL); /* misses too: a flood of bad tokens
	                                 must not reach the database */
	if (!out->role) {
		snprintf(why, whylen, "unknown or revoked token");
		return -1;
	}
	return 0;
}

static int signature(struct auth *a, struct http_req *rq, const char *key_id,
                     struct auth_principal *out, int *status, char *why,
                     size_t whylen, int may_block)
{
	char secret[80] = "", err[256];
	const char *ts = http_header(rq, SIGN_HDR_TIMESTAMP);
	const char *nonce = http_header(rq, SIGN_HDR_NONCE);
	const char *sig = http_header(rq, SIGN_HDR_SIGNATURE);
	const char *reason;
	char *end;

	if (!ts || !nonce || !sig) {
		snprintf(why, whylen,
		         "a signed request needs the headers " SIGN_HDR_KEY
		         ", " SIGN_HDR_TIMESTAMP ", " SIGN_HDR_NONCE
		         " and " SIGN_HDR_SIGNATURE);
		return -1;
	}
	long long t = strtoll(ts, &end, 10);
	if (*end || end == ts) {
		snprintf(why, whylen,
		         SIGN_HDR_TIMESTAMP " must be Unix seconds in decimal");
		return -1;
	}
	uint64_t gen = cache_gen(a);
	if (strlen(key_id) > 32 ||
	    !cache_get(a, key_id, out, secret, sizeof secret)) {
		if (!may_block)
			return -2;
		PGconn *c = db_acquire(a->pool);
		if (!c) {
			*status = 503;
			snprintf(
			    why, whylen,
			    "the exchange cannot reach PostgreSQL to check "
			    "the key; retry after a few seconds");
			return -1;
		}
		const char *params[] = {key_id};
		char state[6];
		PGresult *r = db_exec_state(
		    c, PGRES_TUPLES_OK,
		    "SELECT k.account_id, k.secret, a.name, "
		    "coalesce(a.team_id, 0) FROM node_keys k JOIN accounts a "
		    "ON a.id = k.account_id WHERE k.key_id = $1 AND "
		    "k.revoked_at IS NULL AND a.kind = 'node'",
		    1, params, err, sizeof err, state);
		int lost = !r && (db_broken(c) || db_state_lost(state));
		db_release(a->pool, c);
		if (!r) {
			*status = lost ? 503 : 500;
			log_error("node key lookup failed", "err=\"%s\"", err);
			snprintf(why, whylen,
			         lost ? "the exchange cannot reach PostgreSQL "
			                "to check the key; retry after a few "
			                "seconds"
			              : "could not check the key; the "
			                "exchange's log says why");
			return -1;
		}
		memset(out, 0, sizeof *out);
		if (PQntuples(r) == 1) {
			out->role = AUTH_NODE;
			out->id = out->account_id = db_int(r, 0, 0);
			snprintf(secret, sizeof secret, "%s",
			         PQgetvalue(r, 0, 1));
			snprintf(out->name, sizeof out->name, "%s",
			         PQgetvalue(r, 0, 2));
			out->team_id = db_int(r, 0, 3);
			snprintf(out->scope, sizeof out->scope, "node:%s",
			         key_id);
		}
		PQclear(r);
		if (strlen(key_id) <= 32)
			cache_put(a, gen, key_id, out, secret);
	}
	if (!out->role) {
		snprintf(why, whylen, "unknown or revoked node key %.32s",
		         key_id);
		return -1;
	}
	size_t blen;
	const char *body = http_body(rq, &blen);
	struct sign_request sr = {
	    http_method(rq), http_target(rq), t, nonce, body, blen};
	int64_t now = (int64_t)time(NULL);
	if (sign_verify(secret, &sr, sig, now, SIGN_MAX_SKEW_S, &reason) !=
	    SIGN_OK) {
		snprintf(why, whylen, "%s", reason);
		return -1;
	}
	if (t > now + AUTH_FUTURE_S) {
		snprintf(why, whylen,
		         "the request's timestamp is %lld s ahead of the "
		         "exchange's clock (at most %d s are accepted, since a "
		         "later one could be replayed after a restart); set "
		         "the node's clock right (NTP) and sign again",
		         t - (long long)now, AUTH_FUTURE_S);
		return -1;
	}
	if (t < a->started) {
		snprintf(why, whylen,
		         "the request was signed before this exchange process "
		         "started, so its nonce cannot be checked; sign it "
		         "again with the current time");
		return -1;
	}
	int once = nonce_once(a, key_id, nonce, now);
	if (once == 0) {
		snprintf(why, whylen,
		         "this nonce was already used; every signed request "
		         "needs a fresh one");
		return -1;
	}
	if (once < 0) {
		*status = 503;
		snprintf(why, whylen,
		         "too many signed requests to remember; retry later");
		return -1;
	}
	return 0;
}

int auth_authenticate(struct auth *a, struct http_req *rq,
                      struct auth_principal *out, int *status, char *why,
                      size_t whylen, int may_block)
{
	const char *h = http_header(rq, "Authorization");
	const char *key = http_header(rq, SIGN_HDR_KEY);
	*status = 401;
	if (h && strncmp(h, "Bearer ", 7) == 0)
		return bearer(a, h + 7, out, status, why, whylen, may_block);
	if (key)
		return signature(a, rq, key, out, status, why, whylen,
		                 may_block);
	snprintf(why, whylen,
	         "no credentials: send Authorization: Bearer <token>, or sign "
	         "the request with a node key (" SIGN_HDR_KEY " ...)");
	return -1;
}

void auth_forget_token(struct auth *a, int64_t token_id)
{
	pthread_mutex_lock(&a->mu);
	a->gen++;
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct cached *c = &a->cache[i];
		/* token entries are keyed by their SHA-256 (64 hex digits),
		 * node keys by their id */
		if (c->key[0] && strlen(c->key) == 64 && c->p.role &&
		    c->p.role != AUTH_NODE && c->p.id == token_id)
			c->key[0] = 0;
	}
	pthread_mutex_unlock(&a->mu);
}

void auth_forget_node_key(struct auth *a, const char *key_id)
{
	pthread_mutex_lock(&a->mu);
	a->gen++;
	struct cached *c = &a->cache[hash(key_id) % CACHE_SLOTS];
	if (strcmp(c->key, key_id) == 0)
		c->key[0] = 0;
	pthread_mutex_unlock(&a->mu);
}
