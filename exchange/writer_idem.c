/*
 * writer_idem.c — see writer_idem.h.
 */
#include "exchange/writer_idem.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exchange/core/keyfilter.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/writer.h"

/* --- lookups ------------------------------------------------------------ */

/* The lookups of every batch, on lconn, prepared once per connection: sent
 * as plain PQexecParams they were parsed and planned again for every batch
 * (about a fifth of PostgreSQL's CPU an order). */
enum lookup_id { L_IDEM, L_COID, L_COID_TRADES, L_ACCOUNT, L_COUNT };
static const char *const lookup_sql[L_COUNT][2] = {
    [L_IDEM] = {"l_idem",
                "SELECT i.scope, i.key, i.request_sha, i.status, i.response "
                "FROM unnest($1::text[], $2::text[]) AS k(scope, key) JOIN "
                "idempotency i ON i.scope = k.scope AND i.key = k.key"},
    [L_COID] = {"l_coid",
                "SELECT o.id, o.account_id, o.side, o.tif, o.stp, "
                "o.post_only, o.price, o.pages, coalesce(o.expires_ns, 0), "
                "o.client_order_id, o.placed_reason, o.created_ns, m.name "
                "FROM unnest($1::bigint[], $2::text[]) AS k(account_id, "
                "coid) JOIN orders o ON o.account_id = k.account_id AND "
                "o.client_order_id = k.coid JOIN markets m ON m.id = "
                "o.market_id ORDER BY o.id"},
    /* a contract has its trade's id (0010); the subquery, a scan, finds
     * the contract of a trade written before that, were its id another */
    [L_COID_TRADES] = {"l_coid_trades",
                       "SELECT t.taker_order_id, t.id, t.price, t.pages, "
                       "t.maker_order_id, t.buyer_id, t.seller_id, "
                       "t.taker_side, t.maker_remaining, coalesce(c.id, "
                       "(SELECT c2.id FROM contracts c2 WHERE c2.trade_id "
                       "= t.id)) FROM trades t LEFT JOIN contracts c ON "
                       "c.id = t.id AND c.trade_id = t.id WHERE "
                       "t.taker_order_id = ANY ($1::bigint[]) ORDER BY "
                       "t.taker_order_id, t.id"},
    [L_ACCOUNT] = {"l_account", "SELECT kind, coalesce(team_id, 0) FROM "
                                "accounts WHERE id = $1"},
};

int idem_prepare(PGconn *c, char *err, size_t errlen)
{
	for (int i = 0; i < L_COUNT; i++) {
		PGresult *r =
		    PQprepare(c, lookup_sql[i][0], lookup_sql[i][1], 0, NULL);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok) {
			snprintf(err, errlen, "could not prepare %s: %s",
			         lookup_sql[i][0], PQresultErrorMessage(r));
			err[strcspn(err, "\n")] = 0;
		}
		PQclear(r);
		if (!ok)
			return -1;
	}
	return 0;
}

/* Runs lookup `id` on lconn; its rows, or NULL with err set. */
static PGresult *lookup(struct idem *ix, enum lookup_id id, int n,
                        const char *const *params, char *err, size_t errlen)
{
	PGresult *r = PQexecPrepared(ix->lconn, lookup_sql[id][0], n, params,
	                             NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(err, errlen, "%s", PQerrorMessage(ix->lconn));
		err[strcspn(err, "\n")] = 0;
		/* PostgreSQL going away (an admin shutdown's FATAL, a closed
		 * socket) while libpq may still call the connection good:
		 * drop it, db_usable makes a new one */
		ix->lookup_lost = db_result_lost(ix->lconn, r);
		PQclear(r);
		if (ix->lookup_lost) {
			PQfinish(ix->lconn);
			ix->lconn = NULL;
		}
		return NULL;
	}
	return r;
}

int idem_accounts(struct idem *ix, struct apply_books *bk,
                  struct writer_cmd **cmds, int n, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		if (!cmds[i] || cmds[i]->kind != WR_NEW)
			continue;
		int64_t a = apply_cmd_account(cmds[i]);
		if (a <= 0 || apply_acct_get(bk, a))
			continue;
		char s[24];
		snprintf(s, sizeof s, "%lld", (long long)a);
		const char *pv[] = {s};
		PGresult *r = lookup(ix, L_ACCOUNT, 1, pv, err, errlen);
		if (!r)
			return -1;
		if (PQntuples(r) == 1)
			apply_acct_put(bk, a, PQgetvalue(r, 0, 0)[0],
			               db_int(r, 0, 1));
		PQclear(r);
	}
	return 0;
}

/* --- keys ---------------------------------------------------------------- */

/* The key of a client order id: its account's, whoever placed it. */
static void coid_key(int64_t account, const char *coid, char scope[48],
                     char key[140])
{
	snprintf(scope, 48, "acct:%lld", (long long)account);
	snprintf(key, 140, "coid:%s", coid);
}

/* The keys of one command: its header key and its client order id. */
static int cmd_keys(const struct writer_cmd *c, char scope[2][48],
                    char key[2][140])
{
	int n = 0;
	if (c->kind != WR_NEW && c->kind != WR_CANCEL && c->kind != WR_REDUCE)
		return 0;
	if (c->idem_key[0]) {
		snprintf(scope[n], 48, "%s", c->p_scope);
		snprintf(key[n], 140, "%s", c->idem_key);
		n++;
	}
	if (c->kind == WR_NEW && c->client_order_id[0]) {
		coid_key(apply_cmd_account(c), c->client_order_id, scope[n],
		         key[n]);
		n++;
	}
	return n;
}

static uint64_t hash2(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603u;
	for (; *a; a++)
		h = (h ^ (unsigned char)*a) * 1099511628211u;
	h = (h ^ 0xff) * 1099511628211u;
	for (; *b; b++)
		h = (h ^ (unsigned char)*b) * 1099511628211u;
	return h ? h : 1;
}

/* Notes that the database will hold key (scope, key) once the batch being
 * built commits. Added before it does: a batch that then fails leaves a key
 * that is not there, which costs a lookup, never a wrong answer. */
static void known_add(struct idem *ix, const char *scope, const char *key)
{
	if (keyfilter_add(ix->known, hash2(scope, key)) < 0)
		log_warn("key filter full: no memory to grow it",
		         "hint=\"idempotency lookups grow more frequent; give "
		         "ramexd more memory\"");
}

void idem_stats(const struct idem *ix)
{
	struct keyfilter_stats st;
	keyfilter_stats(ix->known, &st);
	metrics_key_filter(false, st.keys, st.bytes);
}

/* Whether the database may hold the key of hash h. */
static bool known_maybe(const struct idem *ix, uint64_t h)
{
	const struct keyfilter *l =
	    __atomic_load_n(&ix->loaded, __ATOMIC_ACQUIRE);
	if (!l)
		return true; /* not loaded yet: look everything up */
	return keyfilter_maybe(ix->known, h) || keyfilter_maybe(l, h);
}

/*
 * Reads every key the database holds into a new filter (*out): each stored
 * answer's (scope, key), and the key of each order's client order id.
 * Through a cursor, so that millions of keys never sit in one result; the
 * filter is made for twice the rows PostgreSQL counts (at least a million
 * keys, 2 MiB), and grows. Returns 0; READ_KEYS_DB when the database failed
 * (or the writer stops), READ_KEYS_MEMORY without memory for the filter,
 * err set either way.
 */
enum { READ_KEYS_DB = -1, READ_KEYS_MEMORY = -2 };
static int read_keys(struct idem *ix, PGconn *c, struct keyfilter **out,
                     long *rows, char *err, size_t errlen)
{
	static const char *const decl[2] = {
	    "DECLARE known_keys NO SCROLL CURSOR FOR SELECT scope, key FROM "
	    "idempotency",
	    "DECLARE known_keys NO SCROLL CURSOR FOR SELECT account_id, "
	    "client_order_id FROM orders WHERE client_order_id IS NOT NULL",
	};
	struct keyfilter *kf = NULL;
	int rc = READ_KEYS_DB;
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT (greatest((SELECT reltuples FROM pg_class WHERE oid = "
	    "'idempotency'::regclass), 0) + greatest((SELECT reltuples FROM "
	    "pg_class WHERE oid = 'orders'::regclass), 0))::bigint",
	    0, NULL, err, errlen);
	if (!r)
		return READ_KEYS_DB;
	int64_t est = db_int(r, 0, 0);
	PQclear(r);
	size_t want = est > (1 << 19) ? (size_t)est * 2 : (size_t)1 << 20;
	kf = keyfilter_new(want);
	if (!kf) {
		snprintf(err, errlen,
		         "out of memory for the key filter (%zu MiB for %lld "
		         "keys)",
		         want * 2 >> 20, (long long)est);
		return READ_KEYS_MEMORY;
	}
	*rows = 0;
	r = db_exec(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL, err, errlen);
	if (!r)
		goto fail;
	PQclear(r);
	for (int q = 0; q < 2; q++) {
		r = db_exec(c, PGRES_COMMAND_OK, decl[q], 0, NULL, err, errlen);
		if (!r)
			goto fail;
		PQclear(r);
		for (;;) {
			if (__atomic_load_n(&ix->loader_stop,
			                    __ATOMIC_RELAXED)) {
				snprintf(err, errlen, "stopped");
				goto fail;
			}
			r = db_exec(c, PGRES_TUPLES_OK,
			            "FETCH 50000 FROM known_keys", 0, NULL, err,
			            errlen);
			if (!r)
				goto fail;
			int n = PQntuples(r);
			for (int i = 0; i < n; i++) {
				char scope[48], key[140];
				const char *sc = PQgetvalue(r, i, 0),
				           *ky = PQgetvalue(r, i, 1);
				if (q == 1) {
					coid_key(db_int(r, i, 0), ky, scope,
					         key);
					sc = scope, ky = key;
				}
				if (keyfilter_add(kf, hash2(sc, ky)) < 0) {
					PQclear(r);
					snprintf(err, errlen,
					         "out of memory for the key "
					         "filter after %ld keys",
					         *rows + i);
					rc = READ_KEYS_MEMORY;
					goto fail;
				}
			}
			PQclear(r);
			*rows += n;
			if (n == 0)
				break;
		}
		r = db_exec(c, PGRES_COMMAND_OK, "CLOSE known_keys", 0, NULL,
		            err, errlen);
		if (!r)
			goto fail;
		PQclear(r);
	}
	r = db_exec(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL, err, errlen);
	if (!r)
		goto fail;
	PQclear(r);
	*out = kf;
	return 0;
fail:
	keyfilter_free(kf);
	return rc;
}

/*
 * The loader thread: fills ix->loaded once, while the writer already runs
 * (looking every key up meanwhile), so that ramexd starts at once however
 * many keys its history holds (about a second for two million here). No key
 * of this process falls between the two filters: a row committed before
 * the loader's snapshot is read by it, and one committed after was written
 * by this writer, which notes every key it writes (known_add) before it
 * commits. A key another ramexd on the database committed since is not in
 * either: the unique index refuses the batch that writes it again, and the
 * writer runs that batch again (writer.c, requeue): its keys were noted
 * as written when it was built (known_add), so this time they are looked
 * up, and the other's answer is found. Tries again every few seconds while the
 * database is away. Without memory for the filter, it gives up: every key
 * is then looked up, as before there was a filter.
 */
static void *loader_main(void *arg)
{
	struct idem *ix = arg;
	bool said = false;
	while (!__atomic_load_n(&ix->loader_stop, __ATOMIC_RELAXED)) {
		char err[512];
		long rows = 0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		struct keyfilter *kf = NULL;
		PGconn *c = db_connect(ix->conninfo, err, sizeof err);
		int rc = c ? read_keys(ix, c, &kf, &rows, err, sizeof err)
		           : READ_KEYS_DB;
		if (c)
			PQfinish(c);
		if (rc == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			struct keyfilter_stats st;
			keyfilter_stats(kf, &st);
			metrics_key_filter(true, st.keys, st.bytes);
			__atomic_store_n(&ix->loaded, kf, __ATOMIC_RELEASE);
			log_info(
			    "key filter loaded", "keys=%ld bytes=%zu ms=%lld",
			    rows, st.bytes,
			    (long long)((t1.tv_sec - t0.tv_sec) * 1000 +
			                (t1.tv_nsec - t0.tv_nsec) / 1000000));
			return NULL;
		}
		if (__atomic_load_n(&ix->loader_stop, __ATOMIC_RELAXED))
			break;
		if (rc == READ_KEYS_MEMORY) {
			log_error(
			    "key filter not loaded: every idempotency key "
			    "is looked up",
			    "err=\"%s\"", err);
			return NULL;
		}
		if (!said)
			log_warn("key filter not loaded yet, trying again",
			         "err=\"%s\"", err);
		said = true;
		for (int i = 0; i < 30 && !__atomic_load_n(&ix->loader_stop,
		                                           __ATOMIC_RELAXED);
		     i++)
			usleep(100000);
	}
	return NULL;
}

void idem_keys_add(struct idem_keys *k, uint64_t h)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256;
		uint64_t *x = realloc(k->h, cap * sizeof *x);
		assert(x); /* small; out of memory here is fatal */
		k->h = x, k->cap = cap;
	}
	k->h[k->n++] = h;
}

/* The answer for a client order id that is used already: the same order
 * again gets its first answer, rebuilt from its rows exactly as apply_new
 * wrote it (rows_order_answer); another order gets 422. `o` is a row of the
 * orders query in coid_replay, `t` its trades as taker from row *ti on. */
static void coid_answer(struct writer_cmd *c, const PGresult *o, int i,
                        const PGresult *t, int *ti)
{
	struct rows_order r = {0};
	struct rows_buf fills = {0};
	int64_t id = db_int(o, i, 0);
	bool gtd = strcmp(PQgetvalue(o, i, 3), "gtd") == 0;
	if (writer_side_parse(PQgetvalue(o, i, 2), &r.side) < 0 ||
	    writer_tif_parse(PQgetvalue(o, i, 3), &r.tif) < 0 ||
	    writer_stp_parse(PQgetvalue(o, i, 4), &r.stp) < 0)
		goto bad;
	r.id = (uint64_t)id;
	r.account_id = db_int(o, i, 1);
	r.post_only = PQgetvalue(o, i, 5)[0] == 't';
	r.price = db_int(o, i, 6);
	r.pages = db_int(o, i, 7);
	r.expires = gtd ? db_int(o, i, 8) : 0;
	r.created = r.updated = db_int(o, i, 11);
	if (strcmp(PQgetvalue(o, i, 12), c->market) || r.side != c->side ||
	    r.tif != c->tif || r.stp != c->stp || r.post_only != c->post_only ||
	    r.price != c->price || r.pages != c->pages ||
	    (gtd && r.expires != c->expires)) {
		rows_fail_cmd(c, 422, "idempotency-conflict",
		              "key reused for another request",
		              "this client_order_id was already used for a "
		              "different order; use a new one");
		return;
	}
	snprintf(r.coid, sizeof r.coid, "%s", PQgetvalue(o, i, 9));
	/* its trades as taker all happened as it was placed, in id order */
	for (; *ti < PQntuples(t) && db_int(t, *ti, 0) == id; (*ti)++) {
		int k = *ti;
		if (PQgetisnull(t, k, 8))
			goto bad; /* written before 0007: no maker_remaining */
		struct rows_fill f = {
		    .trade_id = db_int(t, k, 1),
		    .price = db_int(t, k, 2),
		    .pages = db_int(t, k, 3),
		    .taker = id,
		    .maker = db_int(t, k, 4),
		    .buyer = db_int(t, k, 5),
		    .seller = db_int(t, k, 6),
		    .maker_remaining = db_int(t, k, 8),
		    .contract_id = db_int(t, k, 9),
		    .side = r.side,
		    .market = PQgetvalue(o, i, 12),
		};
		r.filled += f.pages;
		f.taker_remaining = r.pages - r.filled;
		rows_fill_view(&fills, &f);
	}
	r.remaining = r.pages - r.filled;
	if (!PQgetisnull(o, i, 10)) {
		r.status = "cancelled";
		r.reason = PQgetvalue(o, i, 10);
	} else {
		r.status = r.remaining ? "open" : "filled";
	}
	rows_set_answer(c, 201,
	                rows_order_answer(&r, PQgetvalue(o, i, 12), &fills));
	c->replayed = true;
	free(fills.p);
	return;
bad:
	free(fills.p);
	log_error("order of a client order id cannot be replayed", "order=%lld",
	          (long long)id);
	rows_fail_cmd(c, 500, "internal", "first answer lost",
	              "this client_order_id was used for an order whose first "
	              "answer cannot be rebuilt; GET /v1/orders lists it");
}

/*
 * Orders placed with a client order id store no idempotency row for it
 * (idem_store): the order row (unique per account and client order id)
 * says that it was placed, and it and its trades hold the first answer.
 * Answers the commands of cmds[0..n) that no stored answer answered and
 * whose client order id names an order. Returns 0, or -1 when the
 * database failed.
 */
static int coid_replay(struct idem *ix, struct writer_cmd **cmds, int n,
                       char *err, size_t errlen)
{
	struct rows_cols keys = {0}; /* account, client order id */
	char *kv[2] = {NULL, NULL};
	PGresult *o = NULL, *t = NULL;
	int rc = -1;
	for (int i = 0; i < n; i++) {
		if (!cmds[i] || cmds[i]->status || cmds[i]->kind != WR_NEW ||
		    !cmds[i]->client_order_id[0])
			continue;
		if (cmds[i]->coid_fresh)
			continue; /* no order has it (idem_lookup) */
		rows_col_i(&keys, 0, apply_cmd_account(cmds[i]));
		rows_col_s(&keys, 1, cmds[i]->client_order_id);
		keys.rows++;
	}
	if (keys.rows == 0) {
		rc = 0;
		goto out;
	}
	rows_cols_take(&keys, 2, kv);
	const char *pv[] = {kv[0], kv[1]};
	o = lookup(ix, L_COID, 2, pv, err, errlen);
	if (!o)
		goto out;
	if (PQntuples(o) == 0) {
		rc = 0;
		goto out;
	}
	free(kv[0]);
	kv[0] = NULL;
	for (int i = 0; i < PQntuples(o); i++)
		rows_col_i(&keys, 0, db_int(o, i, 0));
	rows_cols_take(&keys, 1, kv);
	const char *tv[] = {kv[0]};
	t = lookup(ix, L_COID_TRADES, 1, tv, err, errlen);
	if (!t)
		goto out;
	int ti = 0;
	for (int i = 0; i < PQntuples(o); i++) {
		int64_t acct = db_int(o, i, 1);
		const char *coid = PQgetvalue(o, i, 9);
		int from = ti;
		for (int k = 0; k < n; k++) {
			struct writer_cmd *c = cmds[k];
			if (!c || c->status || c->kind != WR_NEW ||
			    apply_cmd_account(c) != acct ||
			    strcmp(c->client_order_id, coid))
				continue;
			ti = from; /* (a batch holds each key once) */
			coid_answer(c, o, i, t, &ti);
		}
		/* past this order's trades, answered or not */
		while (ti < PQntuples(t) && db_int(t, ti, 0) == db_int(o, i, 0))
			ti++;
	}
	rc = 0;
out:
	PQclear(o);
	PQclear(t);
	for (int k = 0; k < 2; k++) {
		free(kv[k]);
		pgarr_free(&keys.c[k]);
	}
	return rc;
}

/*
 * Looks up every key of cmds[0..n) at once. Commands whose key was seen
 * are answered (replay, or 422 for another body); a command whose key is
 * also used by an earlier command of this batch, or by the batch in flight
 * (`busy`), is returned through *deferred to run in a later batch, when
 * the first one's answer is stored. The keys looked up are added to
 * `mine`. Runs on the lookup connection, which sees only what has been
 * committed. Returns 0, or -1 when the database failed.
 */
int idem_lookup(struct idem *ix, struct apply_books *bk,
                struct writer_cmd **cmds, int n, const struct idem_keys *busy,
                struct idem_keys *mine, struct writer_cmd **deferred, char *err,
                size_t errlen)
{
	size_t cap = 16;
	while (cap < ((size_t)n + busy->n) * 4)
		cap *= 2;
	uint64_t *seen = calloc(cap, sizeof *seen);
	struct rows_cols keys = {0}; /* scope, key */
	char *kv[2] = {NULL, NULL};
	struct writer_cmd **dtail = deferred;
	int rc = -1, filtered = 0;
	assert(seen);
	/* The keys of the batch in flight: a command that shares one waits
	 * for the next batch, when that answer is committed or not. */
	for (size_t i = 0; i < busy->n; i++) {
		size_t s = busy->h[i] & (cap - 1);
		while (seen[s] && seen[s] != busy->h[i])
			s = (s + 1) & (cap - 1);
		seen[s] = busy->h[i];
	}

	for (int i = 0; i < n; i++) {
		/* A client order id is keyed by its account, not by who asks:
		 * check who asks first, or naming another account's id would
		 * show that account's order (and a refusal stored under its
		 * key would answer the owner's own order later). Answers to an
		 * Idempotency-Key are per principal and need no check. */
		if (cmds[i]->kind == WR_NEW && cmds[i]->client_order_id[0] &&
		    apply_cmd_account(cmds[i]) &&
		    apply_may_act_for(bk, cmds[i], apply_cmd_account(cmds[i])) <
		        0)
			continue;
		char scope[2][48], key[2][140];
		int k = cmd_keys(cmds[i], scope, key);
		bool dup = false;
		for (int j = 0; j < k && !dup; j++) {
			uint64_t h = hash2(scope[j], key[j]);
			size_t s = h & (cap - 1);
			while (seen[s] && seen[s] != h)
				s = (s + 1) & (cap - 1);
			/* A hash collision only defers a command: harmless. */
			dup = seen[s] == h;
		}
		cmds[i]->coid_fresh = false;
		if (dup) {
			*dtail = cmds[i];
			dtail = &cmds[i]->next;
			cmds[i] = NULL;
			continue;
		}
		for (int j = 0; j < k; j++) {
			uint64_t h = hash2(scope[j], key[j]);
			size_t s = h & (cap - 1);
			while (seen[s] && seen[s] != h)
				s = (s + 1) & (cap - 1);
			seen[s] = h;
			idem_keys_add(mine, h);
			/* a key never written has no answer to find; the
			 * client order id's is the last (cmd_keys) */
			if (!known_maybe(ix, h)) {
				filtered++;
				cmds[i]->coid_fresh =
				    j == k - 1 && cmds[i]->kind == WR_NEW &&
				    cmds[i]->client_order_id[0];
				continue;
			}
			rows_col_s(&keys, 0, scope[j]);
			rows_col_s(&keys, 1, key[j]);
			keys.rows++;
		}
	}
	*dtail = NULL;
	metrics_idem_keys((int)keys.rows, filtered);
	if (keys.rows == 0) {
		rc = 0;
		goto out;
	}
	rows_cols_take(&keys, 2, kv);
	const char *pv[] = {kv[0], kv[1]};
	PGresult *r = lookup(ix, L_IDEM, 2, pv, err, errlen);
	if (!r)
		goto out;
	for (int row = 0; row < PQntuples(r); row++) {
		const char *rs = PQgetvalue(r, row, 0),
		           *rk = PQgetvalue(r, row, 1);
		for (int i = 0; i < n; i++) {
			if (!cmds[i] || cmds[i]->status)
				continue;
			char scope[2][48], key[2][140];
			int k = cmd_keys(cmds[i], scope, key);
			for (int j = 0; j < k; j++) {
				if (strcmp(scope[j], rs) || strcmp(key[j], rk))
					continue;
				if (strcmp(PQgetvalue(r, row, 2),
				           cmds[i]->req_sha) == 0) {
					rows_set_answer(
					    cmds[i], (int)db_int(r, row, 3),
					    strdup(PQgetvalue(r, row, 4)));
					cmds[i]->replayed = true;
				} else {
					rows_fail_cmd(
					    cmds[i], 422,
					    "idempotency-conflict",
					    "key reused for another request",
					    strncmp(rk, "coid:", 5) == 0
					        ? "this client_order_id was "
					          "already used for a "
					          "different "
					          "order; use a new one"
					        : "this Idempotency-Key was "
					          "already used for a "
					          "different "
					          "request; use a new key for "
					          "a "
					          "new request");
				}
				break;
			}
		}
	}
	PQclear(r);
	rc = coid_replay(ix, cmds, n, err, errlen);
out:
	for (int k = 0; k < 2; k++) {
		free(kv[k]);
		pgarr_free(&keys.c[k]);
	}
	free(seen);
	return rc;
}

void idem_store(struct idem *ix, struct rows_batch *b,
                const struct writer_cmd *c)
{
	char scope[2][48], key[2][140];
	int k = cmd_keys(c, scope, key);
	/* nor a redirect: the retry at the owner is to be carried out */
	if (c->replayed || c->status >= 500 || c->status == 307 ||
	    c->not_kept || !c->body)
		return;
	for (int j = 0; j < k; j++) {
		/* a placed order's row holds its client order id and, with its
		 * trades, its answer (coid_replay; build_batch notes its key);
		 * refusals leave no order */
		if (c->status == 201 && strncmp(key[j], "coid:", 5) == 0)
			continue;
		known_add(ix, scope[j], key[j]);
		rows_col_s(&b->idem, 0, scope[j]);
		rows_col_s(&b->idem, 1, key[j]);
		rows_col_s(&b->idem, 2, c->req_sha);
		rows_col_i(&b->idem, 3, c->status);
		rows_col_s(&b->idem, 4, c->body);
		b->idem.rows++;
	}
}

void idem_note_coid(struct idem *ix, int64_t account, const char *coid)
{
	char scope[48], key[140];
	coid_key(account, coid, scope, key);
	known_add(ix, scope, key);
}

/* --- life ---------------------------------------------------------------- */

int idem_init(struct idem *ix, const char *conninfo, char *err, size_t errlen)
{
	snprintf(ix->conninfo, sizeof ix->conninfo, "%s", conninfo);
	ix->known = keyfilter_new(1 << 20);
	if (!ix->known) {
		snprintf(err, errlen, "out of memory for the key filter");
		return -1;
	}
	idem_stats(ix);
	return 0;
}

void idem_start_loader(struct idem *ix)
{
	/* without it, every key is looked up: slower, still right */
	ix->loader_started =
	    pthread_create(&ix->loader, NULL, loader_main, ix) == 0;
	if (ix->loader_started)
		pthread_setname_np(ix->loader, "ramexd-keys");
	else
		log_error("could not start the key loader thread",
		          "hint=\"every idempotency key is looked up\"");
}

void idem_reload(struct idem *ix)
{
	__atomic_store_n(&ix->loader_stop, 1, __ATOMIC_RELAXED);
	if (ix->loader_started)
		pthread_join(ix->loader, NULL);
	ix->loader_started = false;
	/* only the writer's thread reads it (known_maybe), which is here */
	keyfilter_free(
	    __atomic_exchange_n(&ix->loaded, NULL, __ATOMIC_ACQ_REL));
	__atomic_store_n(&ix->loader_stop, 0, __ATOMIC_RELAXED);
	idem_start_loader(ix);
}

void idem_free(struct idem *ix)
{
	__atomic_store_n(&ix->loader_stop, 1, __ATOMIC_RELAXED);
	if (ix->loader_started)
		pthread_join(ix->loader, NULL);
	ix->loader_started = false;
	if (ix->lconn)
		PQfinish(ix->lconn);
	ix->lconn = NULL;
	keyfilter_free(ix->known);
	keyfilter_free(ix->loaded);
	ix->known = ix->loaded = NULL;
}
