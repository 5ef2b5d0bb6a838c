/* auth.c — see auth.h. */
#include "exchange/auth.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sign.h"
#include "exchange/auth_nonces.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/seal.h"

#define CACHE_SLOTS   4096
#define NEG_SLOTS     4096
#define NONCE_BUCKETS 65536
#define KEY_BUCKETS   1024
/* How stale the set of known credentials may be before a miss reads what
 * was created since (one query a second at most, however many misses). */
#define KNOWN_REFRESH_S 1
/* A refresh reads what was created since the last one, less this much:
 * a key inserted by a transaction that commits later is still seen. */
#define KNOWN_OVERLAP_S 60

struct cached {
	char key[72]; /* token sha256 or node key id; "" when empty */
	int64_t until;
	struct auth_principal p;
	char secret[80];
};

/* What is known of a node key that signed in this process. */
struct keyst {
	struct keyst *next;
	char id[20];
	long nnonces;  /* remembered now; at most nonce_per_key */
	int64_t hw;    /* node_keys.signed_until as written or read */
	int64_t fence; /* the signed_until an earlier process left */
};

struct nonce {
	struct nonce *next;
	struct keyst *ks;
	int64_t until;
	char key[SIGN_NONCE_MAX + 24];
};

/* An unknown credential, remembered for AUTH_CACHE_S apart from the known
 * ones, so that a flood of made-up ones neither reaches PostgreSQL twice
 * nor pushes a valid entry out of the cache. */
struct neg {
	char key[72];
	int64_t until;
};

/* Every node key id and token SHA-256 the database holds (revoked ones
 * too, until a restart): a credential not in it is unknown without a
 * query. Open addressing; grows at half full. */
struct idset {
	char **slot;
	size_t cap, n;
};

struct auth {
	struct db_pool *pool;
	int64_t started;
	const struct seal_keys *seal;
	long nonce_per_key;
	pthread_mutex_t mu;
	struct cached cache[CACHE_SLOTS];
	struct neg neg[NEG_SLOTS];
	/* Bumped by every auth_forget_*: a lookup that read the database
	 * before a revocation must not put its stale answer into the cache
	 * after the revocation cleared it. */
	uint64_t gen;
	struct nonce *nonces[NONCE_BUCKETS];
	unsigned sweep; /* the next bucket swept of expired nonces */
	/* shared = 1: the nonces of every instance (auth_share_nonces) */
	struct auth_nonces *shared;
	struct keyst *keys[KEY_BUCKETS];
	struct idset known;        /* under mu */
	int64_t known_at;          /* last refresh, clock_mono_s; under mu */
	char known_since[40];      /* the database's clock then; under refresh_mu */
	pthread_mutex_t refresh_mu; /* one refresh at a time */
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

struct auth *auth_new(struct db_pool *pool, int64_t started,
                      const struct seal_keys *seal, long nonce_per_key)
{
	struct auth *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->pool = pool;
	a->started = started;
	a->seal = seal;
	a->nonce_per_key = nonce_per_key;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->refresh_mu, NULL);
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
	for (int i = 0; i < KEY_BUCKETS; i++) {
		struct keyst *k = a->keys[i];
		while (k) {
			struct keyst *next = k->next;
			free(k);
			k = next;
		}
	}
	for (size_t i = 0; i < a->known.cap; i++)
		free(a->known.slot[i]);
	free(a->known.slot);
	auth_nonces_free(a->shared);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->refresh_mu);
	OPENSSL_cleanse(a->cache, sizeof a->cache);
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
	if (strcmp(c->key, key) == 0 && c->until > clock_mono_s()) {
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
	c->until = clock_mono_s() + AUTH_CACHE_S;
	c->p = *p;
	snprintf(c->secret, sizeof c->secret, "%s", secret ? secret : "");
	pthread_mutex_unlock(&a->mu);
}

static int idset_has(const struct idset *s, const char *id)
{
	if (!s->cap)
		return 0;
	for (size_t i = hash(id) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->slot[i])
			return 0;
		if (strcmp(s->slot[i], id) == 0)
			return 1;
	}
}

/* Adds id; 0, or -1 when out of memory. */
static int idset_add(struct idset *s, const char *id)
{
	if (idset_has(s, id))
		return 0;
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		char **slot = calloc(cap, sizeof *slot);
		if (!slot)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t j = hash(s->slot[i]) & (cap - 1);
			while (slot[j])
				j = (j + 1) & (cap - 1);
			slot[j] = s->slot[i];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	char *copy = strdup(id);
	if (!copy)
		return -1;
	size_t i = hash(id) & (s->cap - 1);
	while (s->slot[i])
		i = (i + 1) & (s->cap - 1);
	s->slot[i] = copy;
	s->n++;
	return 0;
}

/* Reads the credentials created since the last refresh (all of them the
 * first time) into a->known. 0, or -1 when the database is away. */
static int known_refresh(struct auth *a, PGconn *c)
{
	char err[256];
	pthread_mutex_lock(&a->refresh_mu);
	const char *params[] = {a->known_since[0] ? a->known_since : NULL};
	char q[512];
	snprintf(q, sizeof q,
	         "SELECT statement_timestamp()::text, NULL UNION ALL "
	         "SELECT NULL, key_id FROM node_keys WHERE $1::timestamptz IS "
	         "NULL OR created_at >= $1::timestamptz - interval '%d s' "
	         "UNION ALL SELECT NULL, sha256 FROM api_tokens WHERE "
	         "$1::timestamptz IS NULL OR created_at >= $1::timestamptz - "
	         "interval '%d s'",
	         KNOWN_OVERLAP_S, KNOWN_OVERLAP_S);
	metrics_auth_query();
	PGresult *r = db_exec(c, PGRES_TUPLES_OK, q, 1, params, err, sizeof err);
	if (!r) {
		pthread_mutex_unlock(&a->refresh_mu);
		return -1;
	}
	int rc = 0;
	pthread_mutex_lock(&a->mu);
	for (int i = 0; i < PQntuples(r); i++) {
		if (!PQgetisnull(r, i, 0))
			snprintf(a->known_since, sizeof a->known_since, "%s",
			         PQgetvalue(r, i, 0));
		else if (idset_add(&a->known, PQgetvalue(r, i, 1)) < 0)
			rc = -1;
	}
	if (rc == 0)
		a->known_at = clock_mono_s();
	pthread_mutex_unlock(&a->mu);
	pthread_mutex_unlock(&a->refresh_mu);
	PQclear(r);
	return rc;
}

/* Whether credential `id` (a key id, a token's SHA-256) may exist: 1 yes
 * (look it up), 0 no (unknown, no query made), -2 when that needs the
 * database and !may_block, -1 when the database is away. */
static int known(struct auth *a, const char *id, int may_block)
{
	pthread_mutex_lock(&a->mu);
	int has = idset_has(&a->known, id);
	int fresh =
	    a->known_at && clock_mono_s() - a->known_at < KNOWN_REFRESH_S;
	pthread_mutex_unlock(&a->mu);
	if (has)
		return 1;
	if (fresh)
		return 0;
	if (!may_block)
		return -2;
	PGconn *c = db_acquire(a->pool);
	if (!c)
		return -1;
	int rc = known_refresh(a, c);
	db_release(a->pool, c);
	if (rc < 0)
		return -1;
	pthread_mutex_lock(&a->mu);
	has = idset_has(&a->known, id);
	pthread_mutex_unlock(&a->mu);
	return has;
}

/* 1 when `key` was found unknown less than AUTH_CACHE_S ago. */
static int neg_get(struct auth *a, const char *key)
{
	struct neg *n = &a->neg[hash(key) % NEG_SLOTS];
	pthread_mutex_lock(&a->mu);
	int hit = strcmp(n->key, key) == 0 && n->until > clock_mono_s();
	pthread_mutex_unlock(&a->mu);
	return hit;
}

static void neg_put(struct auth *a, uint64_t gen, const char *key)
{
	struct neg *n = &a->neg[hash(key) % NEG_SLOTS];
	pthread_mutex_lock(&a->mu);
	if (a->gen == gen) {
		snprintf(n->key, sizeof n->key, "%s", key);
		n->until = clock_mono_s() + AUTH_CACHE_S;
	}
	pthread_mutex_unlock(&a->mu);
}

/* The state of node key `id`, made on first use; under a->mu. NULL when
 * out of memory. Only keys whose signature was checked get one. */
static struct keyst *keyst_get(struct auth *a, const char *id)
{
	struct keyst **b = &a->keys[hash(id) % KEY_BUCKETS];
	for (struct keyst *k = *b; k; k = k->next)
		if (strcmp(k->id, id) == 0)
			return k;
	struct keyst *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	snprintf(k->id, sizeof k->id, "%s", id);
	k->next = *b;
	*b = k;
	return k;
}

/* Drops the expired nonces of one bucket; under a->mu. */
static void sweep_bucket(struct nonce **pp, int64_t now)
{
	while (*pp) {
		struct nonce *n = *pp;
		if (n->until < now) { /* can no longer be replayed */
			*pp = n->next;
			n->ks->nnonces--;
			free(n);
			continue;
		}
		pp = &n->next;
	}
}

/* 1: new and now remembered; 0: seen before; -1: this key has
 * nonce_per_key remembered already; -2: out of memory. A nonce is kept
 * until its timestamp leaves the window, so that it cannot be replayed
 * while the timestamp would still pass. */
static int nonce_once(struct auth *a, const char *key_id, const char *nonce,
                      int64_t t, int64_t now)
{
	char k[sizeof((struct nonce *)0)->key];
	snprintf(k, sizeof k, "%s/%s", key_id, nonce);
	struct nonce **b = &a->nonces[hash(k) % NONCE_BUCKETS];
	int rc = 1;
	pthread_mutex_lock(&a->mu);
	/* this bucket and two more each time, so that every key's count
	 * follows its expired nonces, busy or not */
	sweep_bucket(b, now);
	for (int i = 0; i < 2; i++)
		sweep_bucket(&a->nonces[a->sweep++ % NONCE_BUCKETS], now);
	for (struct nonce *n = *b; n; n = n->next)
		if (strcmp(n->key, k) == 0) {
			rc = 0;
			goto out;
		}
	struct keyst *ks = keyst_get(a, key_id);
	if (!ks) {
		rc = -2;
		goto out;
	}
	if (ks->nnonces >= a->nonce_per_key) {
		rc = -1;
		goto out;
	}
	struct nonce *n = malloc(sizeof *n);
	if (!n) {
		rc = -2;
		goto out;
	}
	snprintf(n->key, sizeof n->key, "%s", k);
	n->ks = ks;
	n->until = t + SIGN_MAX_SKEW_S;
	n->next = *b;
	*b = n;
	ks->nnonces++;
out:
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* "nk_" and 16 lower-case hex digits, as auth_node_key_new makes them
 * (and node_keys' CHECK holds them): anything else is refused unread. */
static int key_id_ok(const char *k)
{
	return strlen(k) == 19 && strncmp(k, "nk_", 3) == 0 &&
	       is_hex(k + 3, 16);
}

static int bearer(struct auth *a, const char *token, struct auth_principal *out,
                  int *status, char *why, size_t whylen, int may_block)
{
	char sha[65], err[256], q[320];
	if (strncmp(token, AUTH_TOKEN_PREFIX, 3) != 0 ||
	    strlen(token) != AUTH_TOKEN_LEN || !is_hex(token + 3, 64)) {
		snprintf(
		    why, whylen,
		    "the bearer token is not a ramex token (rx_ followed by "
		    "64 hex digits)");
		return -1;
	}
	sign_sha256_hex(token, strlen(token), sha);
	uint64_t gen = cache_gen(a);
	if (cache_get(a, sha, out, NULL, 0))
		return 0;
	if (neg_get(a, sha)) {
		snprintf(why, whylen, "unknown or revoked token");
		return -1;
	}
	int k = known(a, sha, may_block);
	if (k == -2)
		return -2;
	if (k < 0) {
		*status = 503;
		snprintf(why, whylen,
		         "the exchange cannot reach PostgreSQL to check the "
		         "token; retry after a few seconds");
		return -1;
	}
	if (k == 0) { /* (not cached: the set is as cheap) */
		snprintf(why, whylen, "unknown or revoked token");
		return -1;
	}
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
	metrics_auth_query();
	char state[6];
	PGresult *r = db_exec_state(c, PGRES_TUPLES_OK,
	                            "SELECT id, name, role, coalesce(team_id, "
	                            "0), coalesce(account_id, 0) FROM "
	                            "api_tokens WHERE sha256 = $1 AND "
	                            "revoked_at IS NULL",
	                            1, params, err, sizeof err, state);
	/* PostgreSQL going away (a closed connection, an admin shutdown)
	 * is a 503, whatever libpq's state says yet; anything else is ours */
	int lost = !r && (db_broken(c) || db_state_lost(state));
	db_release(a->pool, c);
	if (!r) {
		*status = lost ? 503 : 500;
		log_warn("token lookup failed", "err=%s",
		         log_quote(q, sizeof q, err));
		snprintf(why, whylen,
		         lost ? "the exchange could not reach PostgreSQL to "
		                "check the token; retry after a few seconds"
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
	if (!out->role) {
		neg_put(a, gen, sha);
		snprintf(why, whylen, "unknown or revoked token");
		return -1;
	}
	cache_put(a, gen, sha, out, NULL);
	return 0;
}

/* Reads node key `key_id` from the database into out and secret (the
 * secret unsealed). 0 (out->role 0 when there is no such key), or -1 with
 * *status and why. */
static int key_lookup(struct auth *a, const char *key_id,
                      struct auth_principal *out, char *secret, size_t slen,
                      int64_t *signed_until, int *status, char *why,
                      size_t whylen)
{
	char err[256], aad[40], q[320];
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		*status = 503;
		snprintf(why, whylen,
		         "the exchange cannot reach PostgreSQL to check the key; "
		         "retry after a few seconds");
		return -1;
	}
	const char *params[] = {key_id};
	metrics_auth_query();
	char state[6];
	PGresult *r = db_exec_state(
	    c, PGRES_TUPLES_OK,
	    "SELECT k.account_id, k.secret, k.secret_sealed, a.name, "
	    "coalesce(a.team_id, 0), k.signed_until FROM node_keys k JOIN "
	    "accounts a ON a.id = k.account_id WHERE k.key_id = $1 AND "
	    "k.revoked_at IS NULL AND a.kind = 'node'",
	    1, params, err, sizeof err, state);
	int lost = !r && (db_broken(c) || db_state_lost(state));
	db_release(a->pool, c);
	if (!r) {
		*status = lost ? 503 : 500;
		log_warn("node key lookup failed", "err=%s",
		         log_quote(q, sizeof q, err));
		snprintf(why, whylen,
		         lost ? "the exchange could not reach PostgreSQL to "
		                "check the key; retry after a few seconds"
		              : "could not check the key; the exchange's log "
		                "says why");
		return -1;
	}
	memset(out, 0, sizeof *out);
	if (PQntuples(r) != 1) {
		PQclear(r);
		return 0;
	}
	snprintf(aad, sizeof aad, "node_key:%s", key_id);
	if (!PQgetisnull(r, 0, 2)) {
		if (seal_open(a->seal, PQgetvalue(r, 0, 2), aad, secret, slen) <
		    0) {
			PQclear(r);
			*status = 500;
			log_error("a node secret does not open",
			          "key_id=%s hint=\"%s\"", key_id,
			          "its sealing key is not in seal_key_file, or "
			          "the row was changed or copied from another");
			snprintf(why, whylen,
			         "the exchange cannot open this key's secret "
			         "(its sealing key is missing from the "
			         "exchange's seal_key_file); tell the operator");
			return -1;
		}
	} else { /* not sealed yet: written by an older ramexd */
		snprintf(secret, slen, "%s", PQgetvalue(r, 0, 1));
	}
	out->role = AUTH_NODE;
	out->id = out->account_id = db_int(r, 0, 0);
	snprintf(out->name, sizeof out->name, "%s", PQgetvalue(r, 0, 3));
	out->team_id = db_int(r, 0, 4);
	*signed_until = db_int(r, 0, 5);
	snprintf(out->scope, sizeof out->scope, "node:%s", key_id);
	PQclear(r);
	return 0;
}

/* Records durably that key_id signed up to `until`, so that a ramexd
 * started after this one refuses what this one took (auth.h). */
static int record_signed_until(struct auth *a, const char *key_id,
                               int64_t until, int *status, char *why,
                               size_t whylen)
{
	char err[256], u[24];
	snprintf(u, sizeof u, "%lld", (long long)until);
	PGconn *c = db_acquire(a->pool);
	const char *params[] = {key_id, u};
	PGresult *r =
	    c ? db_exec(c, PGRES_COMMAND_OK,
	                "UPDATE node_keys SET signed_until = "
	                "greatest(signed_until, $2::bigint) WHERE key_id = $1",
	                2, params, err, sizeof err)
	      : NULL;
	if (c)
		db_release(a->pool, c);
	if (!r) {
		*status = 503;
		snprintf(why, whylen,
		         "the exchange could not record a timestamp ahead of its "
		         "clock in PostgreSQL; retry after a few seconds");
		return -1;
	}
	PQclear(r);
	pthread_mutex_lock(&a->mu);
	struct keyst *ks = keyst_get(a, key_id);
	if (ks && ks->hw < until)
		ks->hw = until;
	pthread_mutex_unlock(&a->mu);
	return 0;
}

static int signature(struct auth *a, const struct auth_request *rq,
                     const char *key_id, struct auth_principal *out,
                     int *status, char *why, size_t whylen, int may_block)
{
	char secret[80] = "";
	const char *ts = rq->timestamp;
	const char *nonce = rq->nonce;
	const char *sig = rq->signature;
	const char *reason;
	int64_t t, signed_until = -1;

	if (!ts || !nonce || !sig) {
		snprintf(why, whylen,
		         "a signed request needs the headers " SIGN_HDR_KEY
		         ", " SIGN_HDR_TIMESTAMP ", " SIGN_HDR_NONCE
		         " and " SIGN_HDR_SIGNATURE);
		return -1;
	}
	if (sign_parse_timestamp(ts, &t) < 0) {
		snprintf(why, whylen,
		         SIGN_HDR_TIMESTAMP " must be Unix seconds in decimal "
		                            "digits only (no sign, no leading "
		                            "zero, no spaces)");
		return -1;
	}
	if (!key_id_ok(key_id)) {
		snprintf(why, whylen,
		         SIGN_HDR_KEY " is not a ramex node key id (nk_ and 16 "
		                      "lower-case hex digits)");
		return -1;
	}
	uint64_t gen = cache_gen(a);
	if (!cache_get(a, key_id, out, secret, sizeof secret)) {
		if (neg_get(a, key_id)) {
			snprintf(why, whylen, "unknown or revoked node key %s",
			         key_id);
			return -1;
		}
		int k = known(a, key_id, may_block);
		if (k == -2)
			return -2;
		if (k < 0) {
			*status = 503;
			snprintf(why, whylen,
			         "the exchange cannot reach PostgreSQL to check "
			         "the key; retry after a few seconds");
			return -1;
		}
		if (k == 0) {
			snprintf(why, whylen, "unknown or revoked node key %s",
			         key_id);
			return -1;
		}
		if (!may_block)
			return -2;
		if (key_lookup(a, key_id, out, secret, sizeof secret,
		               &signed_until, status, why, whylen) < 0)
			return -1;
		if (!out->role) {
			neg_put(a, gen, key_id);
			snprintf(why, whylen, "unknown or revoked node key %s",
			         key_id);
			return -1;
		}
		cache_put(a, gen, key_id, out, secret);
	}
	struct sign_request sr = {rq->method, rq->target, t,
	                          nonce,      rq->body,   rq->body_len};
	int64_t now = (int64_t)time(NULL);
	enum sign_result v =
	    sign_verify(secret, &sr, sig, now, SIGN_MAX_SKEW_S, &reason);
	OPENSSL_cleanse(secret, sizeof secret);
	if (v != SIGN_OK) {
		snprintf(why, whylen, "%s", reason);
		return -1;
	}
	if (t < a->started) {
		snprintf(why, whylen,
		         "the request was signed before this exchange process "
		         "started, so its nonce cannot be checked; sign it "
		         "again with the current time");
		return -1;
	}
	pthread_mutex_lock(&a->mu);
	struct keyst *ks = keyst_get(a, key_id);
	int64_t fence = ks ? ks->fence : 0;
	if (ks && ks->hw < signed_until)
		ks->hw = signed_until;
	int64_t hw = ks ? ks->hw : 0;
	pthread_mutex_unlock(&a->mu);
	if (t <= fence) {
		snprintf(why, whylen,
		         "an earlier exchange process took requests of this key "
		         "signed ahead of its clock, up to %lld s from now, and "
		         "their nonces are gone with it: until then a timestamp "
		         "cannot be told from a replay; sign again after that "
		         "and set the node's clock right (NTP)",
		         (long long)(fence - now));
		return -1;
	}
	if (t > now + AUTH_FUTURE_S && t > hw) {
		/* ahead of our clock: recorded before it is taken (auth.h) */
		if (!may_block)
			return -2;
		if (record_signed_until(a, key_id, t + AUTH_FENCE_STEP_S,
		                        status, why, whylen) < 0)
			return -1;
	}
	/* shared, the nonce is a query: where one may wait, before this
	 * process remembers it (the retry there would find it) */
	if (a->shared && !may_block)
		return -2;
	int once = nonce_once(a, key_id, nonce, t, now);
	if (once == 1 && a->shared) {
		/* new here; and to every other instance? */
		once = auth_nonces_take(a->shared, key_id, nonce,
		                        t + SIGN_MAX_SKEW_S);
		if (once < 0) {
			*status = 503;
			snprintf(why, whylen,
			         "the exchange cannot reach PostgreSQL to check "
			         "the nonce; sign again and retry after a few "
			         "seconds");
			return -1;
		}
	}
	if (once == 0) {
		snprintf(why, whylen,
		         "this nonce was already used; every signed request "
		         "needs a fresh one");
		return -1;
	}
	if (once == -1) {
		*status = 429;
		snprintf(why, whylen,
		         "node key %s made more than %ld signed requests in "
		         "the last %d s; slow down and retry",
		         key_id, a->nonce_per_key, 2 * SIGN_MAX_SKEW_S);
		return -1;
	}
	if (once < 0) {
		*status = 503;
		snprintf(why, whylen,
		         "out of memory for the nonces; retry later");
		return -1;
	}
	return 0;
}

int auth_share_nonces(struct auth *a, const char *conninfo)
{
	a->shared = auth_nonces_new(conninfo);
	return a->shared ? 0 : -1;
}

int auth_load_fences(struct auth *a, PGconn *c, char *err, size_t errlen)
{
	if (known_refresh(a, c) < 0) {
		snprintf(err, errlen,
		         "could not read the node keys and tokens");
		return -1;
	}
	char now[24];
	snprintf(now, sizeof now, "%lld", (long long)time(NULL));
	const char *params[] = {now};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT key_id, signed_until FROM node_keys "
	                      "WHERE signed_until >= $1::bigint",
	                      1, params, err, errlen);
	if (!r)
		return -1;
	pthread_mutex_lock(&a->mu);
	for (int i = 0; i < PQntuples(r); i++) {
		struct keyst *ks = keyst_get(a, PQgetvalue(r, i, 0));
		if (ks)
			ks->fence = ks->hw = db_int(r, i, 1);
	}
	pthread_mutex_unlock(&a->mu);
	int n = PQntuples(r);
	PQclear(r);
	return n;
}

/* Seals each secret of `table` that is plaintext or sealed under an
 * older key. Returns how many, or -1. */
static int seal_table(PGconn *c, const struct seal_keys *k, const char *table,
                      const char *idcol, const char *aadfmt, char *err,
                      size_t errlen)
{
	char q[512], plain[128], sealed[SEAL_TEXT_MAX], aad[64];
	int n = 0;
	snprintf(q, sizeof q,
	         "SELECT %s::text, secret, secret_sealed FROM %s WHERE secret "
	         "IS NOT NULL OR secret_sealed NOT LIKE $1 FOR UPDATE",
	         idcol, table);
	char like[SEAL_KEY_ID_MAX + 16];
	snprintf(like, sizeof like, "rxseal1:%s:%%", seal_current_id(k));
	const char *p1[] = {like};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK, q, 1, p1, err, errlen);
	if (!r)
		return -1;
	snprintf(q, sizeof q,
	         "UPDATE %s SET secret = NULL, secret_sealed = $2 WHERE "
	         "%s::text = $1",
	         table, idcol);
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		snprintf(aad, sizeof aad, aadfmt, id);
		if (!PQgetisnull(r, i, 1)) {
			snprintf(plain, sizeof plain, "%s", PQgetvalue(r, i, 1));
		} else if (!seal_has_key(k, PQgetvalue(r, i, 2))) {
			snprintf(err, errlen,
			         "the secret of %s %s is sealed with a key that "
			         "is not in seal_key_file; put that key back in "
			         "the file (after the current one)",
			         table, id);
			PQclear(r);
			return -1;
		} else if (seal_open(k, PQgetvalue(r, i, 2), aad, plain,
		                     sizeof plain) < 0) {
			/* changed, or copied from another row: it stays as it
			 * is, and is refused when used */
			log_error("a secret does not open", "table=%s id=%s "
			          "hint=\"%s\"", table, id,
			          "the row was changed or copied from another "
			          "row; make a new key (or lend session)");
			continue;
		}
		int rc = seal_seal(k, plain, aad, sealed);
		OPENSSL_cleanse(plain, sizeof plain);
		if (rc < 0) {
			snprintf(err, errlen, "could not seal a secret");
			PQclear(r);
			return -1;
		}
		const char *p2[] = {id, sealed};
		PGresult *u =
		    db_exec(c, PGRES_COMMAND_OK, q, 2, p2, err, errlen);
		if (!u) {
			PQclear(r);
			return -1;
		}
		PQclear(u);
		n++;
	}
	PQclear(r);
	return n;
}

int auth_seal_at_rest(PGconn *c, const struct seal_keys *k, char *err,
                      size_t errlen)
{
	PGresult *r = db_exec(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL, err,
	                      errlen);
	if (!r)
		return -1;
	PQclear(r);
	int a = seal_table(c, k, "node_keys", "key_id", "node_key:%s", err,
	                   errlen);
	int b = a < 0 ? -1
	              : seal_table(c, k, "lend_sessions", "contract_id",
	                           "lend:%s", err, errlen);
	char rb[256];
	r = db_exec(c, PGRES_COMMAND_OK, b < 0 ? "ROLLBACK" : "COMMIT", 0,
	            NULL, b < 0 ? rb : err, b < 0 ? sizeof rb : errlen);
	if (!r || b < 0) {
		if (r)
			PQclear(r);
		return -1;
	}
	PQclear(r);
	return a + b;
}

int auth_authenticate(struct auth *a, const struct auth_request *rq,
                      struct auth_principal *out, int *status, char *why,
                      size_t whylen, int may_block)
{
	const char *h = rq->authorization;
	const char *key = rq->key;
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

void auth_known(struct auth *a, const char *key)
{
	pthread_mutex_lock(&a->mu);
	a->gen++; /* a lookup in flight must not put it back */
	struct neg *n = &a->neg[hash(key) % NEG_SLOTS];
	if (strcmp(n->key, key) == 0)
		n->key[0] = 0;
	if (idset_add(&a->known, key) < 0)
		a->known_at = 0; /* out of memory: the next miss reads again */
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
