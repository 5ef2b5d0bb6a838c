/* billing.c — the billing job; see billing.h and docs/money.md.
 *
 * One run: take the advisory lock, then, batch by batch, take dirty
 * contracts out of billing_dirty, load their contract rows, billing state,
 * the month sums of their usage reports and what each month has billed,
 * price what is new with invoice_plan/invoice_charge (and invoice_settle
 * for perm contracts that are over), and store movements, postings, invoice
 * totals and the new billing state with a handful of set-based statements
 * (unnest of arrays) in the batch's one transaction. Then finalize the
 * invoices whose grace is over, one account after another in month order
 * so that the cents carry runs in order, and record the run.
 *
 * This file owns the job: its thread, the lock, a run's batches and their
 * transactions, finalising, the run's record and log line. Loading and
 * pricing a batch is billing_batch.c, writing it billing_store.c. */
#include "exchange/billing.h"
#include "common/clock.h"
#include "common/err.h"
#include "exchange/billing_batch.h"
#include "exchange/billing_store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/money.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"

/* The advisory lock key: one billing run per database at a time. */
#define BILLING_LOCK "7234100542"

struct billing {
	struct billing_opts o;
	char conninfo[512];
	PGconn *conn;
	pthread_mutex_t mu; /* one run at a time in this process */
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	int stopping;
	int has_thread;
	pthread_t thread;
};

static int exec_simple(PGconn *db, const char *sql, char *err, size_t errlen)
{
	PGresult *r = db_exec(db, PGRES_COMMAND_OK, sql, 0, NULL, err, errlen);
	if (!r)
		return -1;
	PQclear(r);
	return 0;
}

/* One batch in one transaction. *taken: how many dirty contracts it took
 * (0: nothing left to do). */
static int exchange_account(PGconn *db, int64_t *id, char *err, size_t errlen);

static int run_batch(struct billing *bl, rx_time_ns as_of, int64_t *exchange,
                     struct billing_phases *ph, int64_t *after,
                     struct billing_result *res, int *taken, char *err,
                     size_t errlen)
{
	PGconn *db = bl->conn;
	struct billing_batch b = {0};
	PGresult *r = NULL;
	struct pgarr ids = {0}, later = {0};
	char lim[24], aft[24];
	int rc = -1;
	*taken = 0;
	billing_lap_start(ph);
	if (exec_simple(db, "BEGIN", err, errlen) < 0)
		return -1;
	snprintf(lim, sizeof lim, "%d", bl->o.batch);
	snprintf(aft, sizeof aft, "%" PRId64, *after);
	const char *pv[] = {lim, aft};
	/* In id order from after the last batch's: the index scan starts
	 * past the entries this run has deleted (a scan from the start walked
	 * over all of them, batch after batch), and a contract put back for a
	 * later run is not taken again by this one. = ANY(ARRAY(...)) deletes
	 * by the key: with IN (...) PostgreSQL scanned the whole table into a
	 * hash join (EXPLAIN ANALYZE: 4-6 ms a batch at 40 000 contracts). */
	r = db_exec(db, PGRES_TUPLES_OK,
	            "DELETE FROM billing_dirty WHERE contract_id = ANY(ARRAY("
	            "SELECT contract_id FROM billing_dirty WHERE contract_id > "
	            "$2::bigint ORDER BY contract_id LIMIT $1::int FOR UPDATE "
	            "SKIP LOCKED)) RETURNING contract_id",
	            2, pv, err, errlen);
	if (!r)
		goto out;
	*taken = PQntuples(r);
	for (int i = 0; i < *taken; i++) {
		int64_t id = db_int(r, i, 0);
		pgarr_i64(&ids, id);
		if (id > *after)
			*after = id;
	}
	PQclear(r);
	r = NULL;
	billing_lap(ph, PH_TAKE);
	if (*taken == 0) {
		rc = exec_simple(db, "COMMIT", err, errlen);
		billing_lap(ph, PH_COMMIT);
		goto done;
	}
	ph->batches++;
	const char *idt = pgarr_text(&ids);
	if (!idt) {
		err_set(err, errlen, "out of memory");
		goto out;
	}
	rx_time_ns grace = bl->o.grace_s * MONEY_NS_PER_S;
	if (billing_load_contracts(db, idt, bl->o.fee_bps, &b, err, errlen) < 0)
		goto out;
	billing_lap(ph, PH_CONTRACTS);
	if (billing_load_usage(db, idt, as_of, &b, err, errlen) < 0)
		goto out;
	billing_lap(ph, PH_USAGE);
	for (int i = 0; i < b.nc; i++) {
		/* a contract keeps the fee of its first billing, even when the
		 * setting is 0 now */
		if (b.c[i].ic.fee_bps > 0 && *exchange == 0 &&
		    exchange_account(db, exchange, err, errlen) < 0)
			goto out;
		int pr = billing_price_contract(db, &b, &b.c[i], as_of, grace,
		                                *exchange, res, err, errlen);
		if (pr == BILLING_PRICE_REFUSED) {
			/* One contract the arithmetic cannot bill must not
			 * stop billing for everyone: it stays queued, unbilled,
			 * and says why at every run until a person sees to it.
			 */
			log_error("contract not billed",
			          "contract=%" PRId64 " err=\"%s\"",
			          b.c[i].k.id, err);
			pgarr_i64(&later, b.c[i].k.id);
			res->unbilled++;
			continue;
		}
		if (pr < 0)
			goto out;
		res->contracts++;
	}
	billing_lap(ph, PH_PRICE);
	if (billing_store_batch(db, &b, ph, res, err, errlen) < 0)
		goto out;
	/* Reports that start at or after as_of, and perm contracts that end
	 * after it (a run as of the past), are for a later run; so is a
	 * contract an invoice could not take (billing_store_batch). */
	for (int i = 0; i < b.nc; i++) {
		const struct contract *k = &b.c[i].k;
		if (b.c[i].later || b.c[i].refused ||
		    (k->product == CONTRACT_PERM && k->delivered_at > 0 &&
		     (k->state == CONTRACT_ENDED ||
		      k->state == CONTRACT_BREACHED) &&
		     k->ended_at > as_of))
			pgarr_i64(&later, k->id);
	}
	if (later.count > 0) {
		const char *rv[] = {pgarr_text(&later)};
		if (!rv[0]) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(db, PGRES_COMMAND_OK,
		            "INSERT INTO billing_dirty (contract_id) SELECT "
		            "unnest($1::bigint[]) ON CONFLICT DO NOTHING",
		            1, rv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	billing_lap(ph, PH_STATE);
	rc = exec_simple(db, "COMMIT", err, errlen);
	billing_lap(ph, PH_COMMIT);
	goto done;
out:
	PQclear(r);
	{
		PGresult *rb = PQexec(db, "ROLLBACK");
		PQclear(rb);
	}
done:
	pgarr_free(&ids);
	pgarr_free(&later);
	billing_batch_free(&b);
	return rc;
}

/* Finalizes every draft invoice whose month and grace are over at as_of,
 * in account and month order, carrying each account's sub-cent part. */
static int finalize(struct billing *bl, rx_time_ns as_of,
                    struct billing_result *res, char *err, size_t errlen)
{
	PGconn *db = bl->conn;
	rx_time_ns grace = bl->o.grace_s * MONEY_NS_PER_S;
	if (as_of - grace < 0)
		return 0;
	int y, mo;
	money_month_of(as_of - grace, &y, &mo);
	char cut[24];
	snprintf(cut, sizeof cut, "%d", billing_month_key(y, mo));
	struct pgarr a[5] = {{0}}, ca[2] = {{0}};
	int rc = -1;
	PGresult *r = NULL;
	if (exec_simple(db, "BEGIN", err, errlen) < 0)
		return -1;
	const char *pv[] = {cut};
	r = db_exec(db, PGRES_TUPLES_OK,
	            "SELECT i.id, i.account_id, i.year, i.month, i.total, "
	            "i.lines, coalesce(c.rem, 0) FROM invoices i LEFT JOIN "
	            "billing_cents c ON c.account_id = i.account_id WHERE "
	            "i.status = 'draft' AND i.year * 12 + i.month - 1 < "
	            "$1::int ORDER BY i.account_id, i.year, i.month FOR UPDATE "
	            "OF i",
	            1, pv, err, errlen);
	if (!r)
		goto out;
	int n = PQntuples(r);
	struct money_carry carry = {0};
	for (int i = 0; i < n; i++) {
		int64_t acct = db_int(r, i, 1);
		if (i == 0 || acct != db_int(r, i - 1, 1))
			carry.rem = db_int(r, i, 6);
		struct invoice inv = {.id = db_int(r, i, 0),
		                      .account = acct,
		                      .year = (int)db_int(r, i, 2),
		                      .month = (int)db_int(r, i, 3),
		                      .status = INVOICE_DRAFT,
		                      .total = db_int(r, i, 4),
		                      .lines = db_int(r, i, 5)};
		char why[INVOICE_MSG_MAX];
		if (invoice_finalize(&inv, &carry, as_of, grace, why,
		                     sizeof why) < 0) {
			err_set(err, errlen, "%s", why);
			goto out;
		}
		pgarr_i64(&a[0], inv.id);
		pgarr_i64(&a[1], inv.payable_cents);
		pgarr_i64(&a[2], inv.cents_in.rem);
		pgarr_i64(&a[3], inv.cents_out.rem);
		if (i + 1 == n || db_int(r, i + 1, 1) != acct) {
			pgarr_i64(&ca[0], acct);
			pgarr_i64(&ca[1], carry.rem);
		}
		res->finalized++;
	}
	PQclear(r);
	r = NULL;
	if (n > 0) {
		const char *iv[4], *cv[2];
		if (pgarr_params(a, 4, iv) < 0 || pgarr_params(ca, 2, cv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "UPDATE invoices i SET status = 'final', "
		    "payable_cents = x.c, cents_in = x.ci, cents_out = "
		    "x.co, finalized_at = now() FROM unnest($1::bigint[], "
		    "$2::bigint[], $3::bigint[], $4::bigint[]) x(id, c, "
		    "ci, co) WHERE i.id = x.id",
		    4, iv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_cents (account_id, rem) SELECT * "
		    "FROM unnest($1::bigint[], $2::bigint[]) ON CONFLICT "
		    "(account_id) DO UPDATE SET rem = EXCLUDED.rem",
		    2, cv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	rc = exec_simple(db, "COMMIT", err, errlen);
	goto done;
out:
	PQclear(r);
	{
		PGresult *rb = PQexec(db, "ROLLBACK");
		PQclear(rb);
	}
done:
	for (int i = 0; i < 5; i++)
		pgarr_free(&a[i]);
	for (int i = 0; i < 2; i++)
		pgarr_free(&ca[i]);
	return rc;
}

/* The exchange's account, made when a fee needs one. */
static int exchange_account(PGconn *db, int64_t *id, char *err, size_t errlen)
{
	PGresult *r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "WITH made AS (INSERT INTO accounts (name, kind) SELECT "
	    "'exchange', 'exchange' WHERE NOT EXISTS (SELECT 1 FROM accounts "
	    "WHERE kind = 'exchange') ON CONFLICT (name) DO NOTHING RETURNING "
	    "id) SELECT id FROM made UNION ALL (SELECT id FROM accounts WHERE "
	    "kind = 'exchange' ORDER BY id LIMIT 1)",
	    0, NULL, err, errlen);
	if (!r)
		return -1;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return err_set(
		    err, errlen,
		    "no account of kind exchange, and the name "
		    "'exchange' is taken by another kind; create one "
		    "with POST /v1/accounts");
	}
	*id = db_int(r, 0, 0);
	PQclear(r);
	return 0;
}

static int run_locked(struct billing *bl, rx_time_ns as_of, int api,
                      struct billing_result *out, char *err, size_t errlen)
{
	char e[BILLING_MSG_MAX];
	if (bl->conn && !db_alive(bl->conn)) { /* idle since the last run */
		PQfinish(bl->conn);
		bl->conn = NULL;
	}
	if (!bl->conn && !(bl->conn = db_connect(bl->conninfo, e, sizeof e)))
		return err_set(err, errlen, "%s", e);
	PGconn *db = bl->conn;
	rx_time_ns real = clock_wall_ns();
	if (as_of == 0)
		as_of = real;
	if (as_of > real) {
		err_set(err, errlen,
		        "as_of_ns %" PRId64
		        " is in the future; billing runs as "
		        "of now or a past instant",
		        as_of);
		return -2;
	}
	PGresult *r = db_exec(db, PGRES_TUPLES_OK,
	                      "SELECT pg_try_advisory_lock(" BILLING_LOCK ")",
	                      0, NULL, e, sizeof e);
	if (!r)
		return err_set(err, errlen, "%s", e);
	bool locked = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!locked) {
		err_set(err, errlen,
		        "another billing run holds the lock now; retry when it "
		        "is done");
		return -2;
	}
	int rc = -1;
	struct billing_result res = {.as_of = as_of};
	struct billing_phases ph;
	memset(&ph, 0, sizeof ph);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = db_exec(db, PGRES_TUPLES_OK,
	            "SELECT coalesce(max(as_of_ns), 0) FROM billing_runs", 0,
	            NULL, e, sizeof e);
	if (!r) {
		err_set(err, errlen, "%s", e);
		goto out;
	}
	int64_t last = db_int(r, 0, 0);
	PQclear(r);
	if (as_of < last) {
		err_set(err, errlen,
		        "as_of_ns %" PRId64
		        " is before the last run's (%" PRId64
		        "); billing never goes back in time",
		        as_of, last);
		rc = -2;
		goto out;
	}
	int64_t exch = 0;
	if (bl->o.fee_bps > 0 && exchange_account(db, &exch, e, sizeof e) < 0) {
		err_set(err, errlen, "%s", e);
		goto out;
	}
	int64_t after = 0; /* the highest contract id taken so far */
	for (;;) {
		int taken;
		if (run_batch(bl, as_of, &exch, &ph, &after, &res, &taken, e,
		              sizeof e) < 0) {
			err_set(err, errlen, "billing stopped: %s", e);
			goto out;
		}
		if (taken < bl->o.batch)
			break;
	}
	billing_lap_start(&ph);
	if (finalize(bl, as_of, &res, e, sizeof e) < 0) {
		err_set(err, errlen, "finalizing invoices: %s", e);
		goto out;
	}
	billing_lap(&ph, PH_FINALIZE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res.elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	                 (t1.tv_nsec - t0.tv_nsec) / 1000000;
	char v[9][24];
	int64_t vals[9] = {as_of,         res.elapsed_ms, res.contracts,
	                   res.movements, res.postings,   res.settled,
	                   res.finalized, res.flagged,    0};
	for (int i = 0; i < 8; i++)
		snprintf(v[i], sizeof v[i], "%" PRId64, vals[i]);
	const char *pv[] = {v[0], v[1], v[2],
	                    v[3], v[4], v[5],
	                    v[6], v[7], api ? "api" : "timer"};
	r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "INSERT INTO billing_runs (as_of_ns, elapsed_ms, contracts, "
	    "movements, postings, settled, finalized, flagged, trigger) "
	    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
	    9, pv, e, sizeof e);
	if (!r) {
		err_set(err, errlen, "recording the run: %s", e);
		goto out;
	}
	res.run_id = db_int(r, 0, 0);
	PQclear(r);
	metrics_billing_unbilled(res.unbilled);
	*out = res;
	rc = 0;
	if (res.contracts > 0 || res.finalized > 0) {
		char t[PH_N * 32];
		size_t k = 0;
		for (int i = 0; i < PH_N && k < sizeof t; i++)
			k += (size_t)snprintf(
			    t + k, sizeof t - k, "%s%s_ms=%" PRId64 ".%" PRId64,
			    i ? " " : "", billing_phase_name[i],
			    ph.us[i] / 1000, ph.us[i] % 1000 / 100);
		log_info("billing run phases",
		         "run=%" PRId64 " contracts=%" PRId64
		         " batches=%" PRId64 " ms=%" PRId64 " %s",
		         res.run_id, res.contracts, ph.batches, res.elapsed_ms,
		         t);
	}
out:
	r = PQexec(db, "SELECT pg_advisory_unlock(" BILLING_LOCK ")");
	PQclear(r);
	return rc;
}

int billing_run(struct billing *b, rx_time_ns as_of, int api,
                struct billing_result *out, char *err, size_t errlen)
{
	pthread_mutex_lock(&b->mu);
	int rc = run_locked(b, as_of, api, out, err, errlen);
	pthread_mutex_unlock(&b->mu);
	return rc;
}

static void *loop(void *arg)
{
	struct billing *b = arg;
	pthread_mutex_lock(&b->stop_mu);
	while (!b->stopping) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += b->o.interval_s;
		while (!b->stopping &&
		       pthread_cond_timedwait(&b->stop_cv, &b->stop_mu,
		                              &until) != ETIMEDOUT)
			;
		if (b->stopping)
			break;
		pthread_mutex_unlock(&b->stop_mu);
		struct billing_result res;
		char err[BILLING_MSG_MAX];
		if (billing_run(b, 0, 0, &res, err, sizeof err) < 0)
			log_warn("billing run failed", "err=\"%s\"", err);
		else if (res.movements || res.finalized || res.unbilled)
			log_info("billed",
			         "contracts=%" PRId64 " movements=%" PRId64
			         " settled=%" PRId64 " finalized=%" PRId64
			         " flagged=%" PRId64 " unbilled=%" PRId64
			         " ms=%" PRId64,
			         res.contracts, res.movements, res.settled,
			         res.finalized, res.flagged, res.unbilled,
			         res.elapsed_ms);
		pthread_mutex_lock(&b->stop_mu);
	}
	pthread_mutex_unlock(&b->stop_mu);
	return NULL;
}

struct billing *billing_start(const struct billing_opts *o, char *err,
                              size_t errlen)
{
	struct billing *b = calloc(1, sizeof *b);
	if (!b) {
		err_set(err, errlen, "out of memory");
		return NULL;
	}
	b->o = *o;
	if (b->o.batch <= 0)
		b->o.batch = 500;
	snprintf(b->conninfo, sizeof b->conninfo, "%s", o->conninfo);
	b->o.conninfo = b->conninfo;
	pthread_mutex_init(&b->mu, NULL);
	pthread_mutex_init(&b->stop_mu, NULL);
	pthread_cond_init(&b->stop_cv, NULL);
	if (o->interval_s > 0) {
		if (pthread_create(&b->thread, NULL, loop, b) != 0) {
			err_set(err, errlen, "cannot start the billing thread");
			free(b);
			return NULL;
		}
		b->has_thread = 1;
	}
	return b;
}

void billing_stop(struct billing *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->stop_mu);
	b->stopping = 1;
	pthread_cond_broadcast(&b->stop_cv);
	pthread_mutex_unlock(&b->stop_mu);
	if (b->has_thread)
		pthread_join(b->thread, NULL);
	if (b->conn)
		PQfinish(b->conn);
	pthread_mutex_destroy(&b->mu);
	pthread_mutex_destroy(&b->stop_mu);
	pthread_cond_destroy(&b->stop_cv);
	free(b);
}
