/*
 * billing_store.c — writing a priced batch of the billing job; see
 * billing_store.h.
 */
#include "exchange/billing_store.h"
#include "common/err.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/money.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"
#include "exchange/db.h"
#include "exchange/pgarr.h"

static int inv_cmp(const void *a, const void *b)
{
	const struct billing_inv *x = a, *y = b;
	if (x->account != y->account)
		return x->account < y->account ? -1 : 1;
	return (x->key > y->key) - (x->key < y->key);
}

static struct billing_inv *inv_find(struct billing_batch *b, int64_t account,
                                    int key)
{
	struct billing_inv k = {.account = account, .key = key};
	return bsearch(&k, b->inv, (size_t)b->ninv, sizeof *b->inv, inv_cmp);
}

/* The invoice of the batch that row i of r is (id, account_id, year,
 * month in columns 0 to 3), or NULL. */
static struct billing_inv *inv_of_row(struct billing_batch *b,
                                      const PGresult *r, int i)
{
	return inv_find(b, db_int(r, i, 1),
	                billing_month_key((int)db_int(r, i, 2),
	                                  (int)db_int(r, i, 3)));
}

/* Puts the account, year and month of the batch's invoices (only those
 * not in the database yet that take postings, with `only_new`) into
 * col[0..2]; how many. */
static int inv_keys(const struct billing_batch *b, bool only_new,
                    struct pgarr col[3])
{
	int n = 0;
	for (int i = 0; i < b->ninv; i++) {
		const struct billing_inv *k = &b->inv[i];
		if (only_new && (k->id || !k->changed))
			continue;
		pgarr_i64(&col[0], k->account);
		pgarr_i64(&col[1], k->key / 12);
		pgarr_i64(&col[2], k->key % 12 + 1);
		n++;
	}
	return n;
}

/*
 * Loads the invoices the movements land on. One that does not exist yet
 * is held in memory only (id 0, an empty draft) until admit() knows
 * whether a posting lands on it: invoices cannot be deleted (0005), so
 * one made for a contract that admit() then leaves unbilled stayed an
 * empty draft for good. make_invoices() inserts those that take postings.
 */
static int load_invoices(PGconn *db, struct billing_batch *b, char *err,
                         size_t errlen)
{
	int want = 0;
	for (int i = 0; i < b->nmv; i++)
		want += b->mv[i].m.n;
	b->inv = calloc((size_t)(want ? want : 1), sizeof *b->inv);
	if (!b->inv)
		return err_set(err, errlen, "out of memory for invoices");
	for (int i = 0; i < b->nmv; i++)
		for (int p = 0; p < b->mv[i].m.n; p++) {
			struct invoice_posting *ps = &b->mv[i].m.p[p];
			b->inv[b->ninv].account = ps->account;
			b->inv[b->ninv].key =
			    billing_month_key(ps->year, ps->month);
			b->ninv++;
		}
	qsort(b->inv, (size_t)b->ninv, sizeof *b->inv, inv_cmp);
	int u = 0;
	for (int i = 0; i < b->ninv; i++)
		if (u == 0 || inv_cmp(&b->inv[u - 1], &b->inv[i]) != 0)
			b->inv[u++] = b->inv[i];
	b->ninv = u;
	if (u == 0)
		return 0;
	struct pgarr col[3] = {{0}}; /* account, year, month */
	for (int i = 0; i < u; i++) {
		struct billing_inv *k = &b->inv[i];
		/* as the table's defaults, until the database has it */
		k->inv = (struct invoice){.account = k->account,
		                          .year = k->key / 12,
		                          .month = k->key % 12 + 1,
		                          .status = INVOICE_DRAFT};
	}
	inv_keys(b, false, col);
	const char *pv[3];
	int rc = -1;
	PGresult *r = NULL;
	if (pgarr_params(col, 3, pv) < 0) {
		err_set(err, errlen, "out of memory for invoices");
		goto out;
	}
	r = db_exec(
	    db, PGRES_TUPLES_OK,
	    "SELECT i.id, i.account_id, i.year, i.month, i.status, "
	    "i.total, i.lines FROM invoices i JOIN unnest($1::bigint[], "
	    "$2::int[], $3::int[]) x(a, y, m) ON i.account_id = x.a AND "
	    "i.year = x.y AND i.month = x.m WHERE i.account_id = "
	    "ANY($1::bigint[])",
	    3, pv, err, errlen);
	if (!r)
		goto out;
	for (int i = 0; i < PQntuples(r); i++) {
		struct billing_inv *k = inv_of_row(b, r, i);
		if (!k)
			continue;
		k->id = db_int(r, i, 0);
		k->inv.id = k->id;
		k->inv.status = strcmp(PQgetvalue(r, i, 4), "final") == 0
		                    ? INVOICE_FINAL
		                    : INVOICE_DRAFT;
		k->inv.total = db_int(r, i, 5);
		k->inv.lines = db_int(r, i, 6);
	}
	rc = 0;
out:
	PQclear(r);
	for (int i = 0; i < 3; i++)
		pgarr_free(&col[i]);
	return rc;
}

/*
 * Inserts the invoices admit() put postings on that the database did not
 * have yet, and takes their ids. The billing run's lock keeps any other
 * run from making them meanwhile; ON CONFLICT would hide a bug, so there
 * is none: a clash fails the batch.
 */
static int make_invoices(PGconn *db, struct billing_batch *b, char *err,
                         size_t errlen)
{
	struct pgarr col[3] = {{0}};
	int rc = -1;
	PGresult *r = NULL;
	int n = inv_keys(b, true, col);
	if (n == 0)
		return 0;
	const char *pv[3];
	if (pgarr_params(col, 3, pv) < 0) {
		err_set(err, errlen, "out of memory for invoices");
		goto out;
	}
	r = db_exec(db, PGRES_TUPLES_OK,
	            "INSERT INTO invoices (account_id, year, month) SELECT * "
	            "FROM unnest($1::bigint[], $2::int[], $3::int[]) "
	            "RETURNING id, account_id, year, month",
	            3, pv, err, errlen);
	if (!r)
		goto out;
	assert(PQntuples(r) == n);
	for (int i = 0; i < PQntuples(r); i++) {
		struct billing_inv *k = inv_of_row(b, r, i);
		assert(k && !k->id);
		k->id = db_int(r, i, 0);
		k->inv.id = k->id;
	}
	rc = 0;
out:
	PQclear(r);
	for (int i = 0; i < 3; i++)
		pgarr_free(&col[i]);
	return rc;
}

static struct billing_ctr *ctr_find(struct billing_batch *b, int64_t id)
{
	for (int i = 0; i < b->nc; i++) /* sorted by id, but few */
		if (b->c[i].k.id == id)
			return &b->c[i];
	return NULL;
}

/*
 * Adds the batch's postings to the invoices they land on, contract by
 * contract (a contract's movements are next to each other in b->mv). A
 * contract one of whose postings an invoice cannot take (its total would
 * pass int64 n$: many contracts each billable alone, on one account's
 * month) is taken back out whole: its postings come off the invoices
 * again, its movements leave the batch, its billing state is not stored,
 * and it is queued again (refused), logged and counted in `unbilled`, as
 * a contract the arithmetic refuses (billing.c). The invoice is not split
 * and nothing of the contract is posted: an invoice holds all of a
 * month's postings of an account or none of a contract's, and a person
 * decides (docs/billing-api.md, "unbilled"). -1 only for a movement with
 * no invoice (a bug).
 */
static int admit(struct billing_batch *b, struct billing_result *res,
                 char *err, size_t errlen)
{
	struct undo {
		struct billing_inv *k;
		rx_ndollars amount;
	} *u = NULL;
	size_t nu = 0, capu = 0;
	char why[INVOICE_MSG_MAX];
	int kept = 0;
	for (int i = 0, j; i < b->nmv; i = j) {
		int64_t cid = b->mv[i].m.contract_id;
		for (j = i; j < b->nmv && b->mv[j].m.contract_id == cid; j++)
			;
		bool ok = true;
		nu = 0;
		for (int x = i; x < j && ok; x++) {
			struct invoice_movement *m = &b->mv[x].m;
			for (int p = 0; p < m->n && ok; p++) {
				struct invoice_posting *ps = &m->p[p];
				struct billing_inv *k = inv_find(
				    b, ps->account,
				    billing_month_key(ps->year, ps->month));
				if (!k) {
					free(u);
					return err_set(
					    err, errlen,
					    "no invoice for account %" PRId64
					    " %04d-%02d",
					    ps->account, ps->year, ps->month);
				}
				if (invoice_add(&k->inv, ps, why,
				                sizeof why) < 0) {
					ok = false;
					break;
				}
				if (nu == capu) {
					capu = capu ? capu * 2 : 16;
					struct undo *g =
					    realloc(u, capu * sizeof *u);
					if (!g) {
						free(u);
						return err_set(err, errlen,
						               "out of memory");
					}
					u = g;
				}
				u[nu++] = (struct undo){k, ps->amount};
			}
		}
		if (ok) {
			for (size_t x = 0; x < nu; x++)
				u[x].k->changed = true;
			if (kept != i)
				memmove(&b->mv[kept], &b->mv[i],
				        (size_t)(j - i) * sizeof *b->mv);
			kept += j - i;
			continue;
		}
		/* exact: each total held its value plus this amount */
		while (nu > 0) {
			nu--;
			u[nu].k->inv.total -= u[nu].amount;
			u[nu].k->inv.lines--;
		}
		log_error("contract not billed",
		          "contract=%" PRId64 " err=\"%s\"", cid, why);
		struct billing_ctr *c = ctr_find(b, cid);
		assert(c); /* every movement is of a contract of the batch */
		billing_unprice(c, res);
		c->refused = true;
		res->unbilled++;
		res->contracts--;
	}
	b->nmv = kept;
	free(u);
	return 0;
}

/* Stores the batch's movements, postings, invoice totals and state. */
int billing_store_batch(PGconn *db, struct billing_batch *b,
                        struct billing_phases *ph, struct billing_result *res,
                        char *err, size_t errlen)
{
	char n[24];
	int rc = -1;
	PGresult *r = NULL;
	enum {
		M_ID,
		M_C,
		M_KIND,
		M_Y,
		M_M,
		M_UY,
		M_UM,
		M_FROM,
		M_TO,
		M_PS,
		M_PRICE,
		M_AMT,
		M_FEE,
		M_RECON,
		M_N
	};
	enum { P_MV, P_INV, P_ACC, P_C, P_Y, P_M, P_ROLE, P_AMT, P_N };
	struct pgarr ma[M_N] = {{0}}, pa[P_N] = {{0}}, ia[3] = {{0}};
	struct pgarr ca[10] = {{0}}, mo[7] = {{0}};

	if (b->nmv > 0) {
		if (load_invoices(db, b, err, errlen) < 0 ||
		    admit(b, res, err, errlen) < 0 ||
		    make_invoices(db, b, err, errlen) < 0)
			goto out;
		billing_lap(ph, PH_INVOICES);
	}
	if (b->nmv > 0) {
		snprintf(n, sizeof n, "%d", b->nmv);
		const char *pv[] = {n};
		r = db_exec(db, PGRES_TUPLES_OK,
		            "SELECT nextval('movements_id_seq') FROM "
		            "generate_series(1, $1::int)",
		            1, pv, err, errlen);
		if (!r)
			goto out;
		for (int i = 0; i < b->nmv; i++) {
			struct invoice_movement *m = &b->mv[i].m;
			m->movement_id = db_int(r, i, 0);
			for (int p = 0; p < m->n; p++)
				m->p[p].movement_id = m->movement_id;
		}
		PQclear(r);
		r = NULL;
	}
	for (int i = 0; i < b->nmv; i++) {
		struct billing_mv *v = &b->mv[i];
		struct invoice_movement *m = &v->m;
		pgarr_i64(&ma[M_ID], m->movement_id);
		pgarr_i64(&ma[M_C], m->contract_id);
		pgarr_raw(&ma[M_KIND], invoice_kind_name(m->kind));
		pgarr_i64(&ma[M_Y], m->year);
		pgarr_i64(&ma[M_M], m->month);
		if (v->usage_key >= 0) {
			pgarr_i64(&ma[M_UY], v->usage_key / 12);
			pgarr_i64(&ma[M_UM], v->usage_key % 12 + 1);
		} else {
			pgarr_raw(&ma[M_UY], "NULL");
			pgarr_raw(&ma[M_UM], "NULL");
		}
		pgarr_i64(&ma[M_FROM], m->charge_start);
		pgarr_i64(&ma[M_TO], m->charge_end);
		pgarr_i64(&ma[M_PS], m->page_seconds);
		pgarr_i64(&ma[M_PRICE], m->unit_price);
		pgarr_i64(&ma[M_AMT], m->amount);
		pgarr_i64(&ma[M_FEE], m->fee);
		pgarr_raw(&ma[M_RECON], v->recon ? v->recon : "NULL");
		for (int p = 0; p < m->n; p++) {
			struct invoice_posting *ps = &m->p[p];
			/* on its invoice already (admit) */
			struct billing_inv *k =
			    inv_find(b, ps->account,
			             billing_month_key(ps->year, ps->month));
			pgarr_i64(&pa[P_MV], ps->movement_id);
			pgarr_i64(&pa[P_INV], k->id);
			pgarr_i64(&pa[P_ACC], ps->account);
			pgarr_i64(&pa[P_C], ps->contract_id);
			pgarr_i64(&pa[P_Y], ps->year);
			pgarr_i64(&pa[P_M], ps->month);
			pgarr_raw(&pa[P_ROLE], invoice_role_name(ps->role));
			pgarr_i64(&pa[P_AMT], ps->amount);
			res->postings++;
		}
		res->movements++;
	}
	if (b->nmv > 0) {
		const char *pv[M_N];
		if (pgarr_params(ma, M_N, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO movements (id, contract_id, kind, year, "
		    "month, usage_year, usage_month, charge_start_ns, "
		    "charge_end_ns, page_seconds, unit_price, amount, "
		    "fee, recon) SELECT * FROM unnest($1::bigint[], "
		    "$2::bigint[], $3::text[], $4::int[], $5::int[], "
		    "$6::int[], $7::int[], $8::bigint[], $9::bigint[], "
		    "$10::bigint[], $11::bigint[], $12::bigint[], "
		    "$13::bigint[], $14::text[])",
		    M_N, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		const char *qv[P_N];
		if (pgarr_params(pa, P_N, qv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO postings (movement_id, invoice_id, "
		    "account_id, contract_id, year, month, role, amount) "
		    "SELECT * FROM unnest($1::bigint[], $2::bigint[], "
		    "$3::bigint[], $4::bigint[], $5::int[], $6::int[], "
		    "$7::text[], $8::bigint[])",
		    P_N, qv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		for (int i = 0; i < b->ninv; i++) {
			if (!b->inv[i].changed)
				continue;
			pgarr_i64(&ia[0], b->inv[i].id);
			pgarr_i64(&ia[1], b->inv[i].inv.total);
			pgarr_i64(&ia[2], b->inv[i].inv.lines);
		}
		const char *iv[3];
		if (pgarr_params(ia, 3, iv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "UPDATE invoices i SET total = x.t, lines = x.l FROM "
		    "unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
		    "x(id, t, l) WHERE i.id = x.id AND i.id = "
		    "ANY($1::bigint[])",
		    3, iv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	billing_lap(ph, PH_LEDGER);
	/* the billing state of each contract and month */
	int nchanged = 0, nmonths = 0;
	for (int i = 0; i < b->nc; i++) {
		struct billing_ctr *c = &b->c[i];
		for (int k = 0; k < c->nm; k++) {
			struct billing_month *m = &c->m[k];
			if (!m->touched)
				continue;
			pgarr_i64(&mo[0], c->k.id);
			pgarr_i64(&mo[1], m->key / 12);
			pgarr_i64(&mo[2], m->key % 12 + 1);
			pgarr_i64(&mo[3], m->billed);
			if (m->seller_rep)
				pgarr_i64(&mo[4], m->seller);
			else
				pgarr_raw(&mo[4], "NULL");
			if (m->buyer_rep)
				pgarr_i64(&mo[5], m->buyer);
			else
				pgarr_raw(&mo[5], "NULL");
			pgarr_raw(&mo[6], m->offline
			                      ? "seller_only"
			                      : usage_recon_name(m->recon));
			nmonths++;
		}
		if (!c->changed)
			continue;
		struct invoice_contract *ic = &c->ic;
		pgarr_i64(&ca[0], c->k.id);
		pgarr_i64(&ca[1], ic->fee_bps);
		pgarr_i64(&ca[2], ic->amount_carry.rem);
		pgarr_i64(&ca[3], ic->fee_carry.rem);
		pgarr_i64(&ca[4], ic->billed_ps);
		pgarr_i64(&ca[5], ic->billed);
		pgarr_i64(&ca[6], ic->fees);
		pgarr_raw(&ca[7], ic->settled ? "true" : "false");
		if (c->has_settle) {
			pgarr_i64(&ca[8], c->settle_price);
			pgarr_i64(&ca[9], c->spot_ref);
		} else {
			pgarr_raw(&ca[8], "NULL");
			pgarr_raw(&ca[9], "NULL");
		}
		nchanged++;
	}
	if (nchanged) {
		const char *pv[10];
		if (pgarr_params(ca, 10, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_contracts (contract_id, fee_bps, "
		    "amount_carry, fee_carry, billed_ps, billed, fees, "
		    "settled, "
		    "settle_price, spot_reference) SELECT * FROM "
		    "unnest($1::bigint[], $2::int[], $3::bigint[], "
		    "$4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
		    "$8::boolean[], $9::bigint[], $10::bigint[]) ON CONFLICT "
		    "(contract_id) DO UPDATE SET amount_carry = "
		    "EXCLUDED.amount_carry, fee_carry = EXCLUDED.fee_carry, "
		    "billed_ps = EXCLUDED.billed_ps, billed = EXCLUDED.billed, "
		    "fees = EXCLUDED.fees, settled = EXCLUDED.settled, "
		    "settle_price = coalesce(EXCLUDED.settle_price, "
		    "billing_contracts.settle_price), spot_reference = "
		    "coalesce(EXCLUDED.spot_reference, "
		    "billing_contracts.spot_reference), updated_at = now()",
		    10, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	if (nmonths) {
		const char *pv[7];
		if (pgarr_params(mo, 7, pv) < 0) {
			err_set(err, errlen, "out of memory");
			goto out;
		}
		r = db_exec(
		    db, PGRES_COMMAND_OK,
		    "INSERT INTO billing_months (contract_id, year, month, "
		    "billed_ps, seller_ps, buyer_ps, recon) SELECT * FROM "
		    "unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], "
		    "$5::bigint[], $6::bigint[], $7::text[]) ON CONFLICT "
		    "(contract_id, year, month) DO UPDATE SET billed_ps = "
		    "EXCLUDED.billed_ps, seller_ps = EXCLUDED.seller_ps, "
		    "buyer_ps = EXCLUDED.buyer_ps, recon = EXCLUDED.recon, "
		    "updated_at = now()",
		    7, pv, err, errlen);
		if (!r)
			goto out;
		PQclear(r);
		r = NULL;
	}
	rc = 0;
out:
	PQclear(r);
	for (int i = 0; i < M_N; i++)
		pgarr_free(&ma[i]);
	for (int i = 0; i < P_N; i++)
		pgarr_free(&pa[i]);
	for (int i = 0; i < 3; i++)
		pgarr_free(&ia[i]);
	for (int i = 0; i < 10; i++)
		pgarr_free(&ca[i]);
	for (int i = 0; i < 7; i++)
		pgarr_free(&mo[i]);
	return rc;
}
