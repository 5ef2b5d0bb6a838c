/*
 * writer_apply.c — see writer_apply.h.
 */
#include "exchange/writer_apply.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "exchange/auth.h"
#include "exchange/core/contract.h"
#include "exchange/db.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"
#include "exchange/writer.h"

/* --- books and accounts ------------------------------------------------ */

static struct rows_market *apply_market_by_name(struct apply_books *bk,
                                                const char *name)
{
	for (int i = 0; i < bk->nm; i++)
		if (strcmp(bk->m[i].name, name) == 0)
			return &bk->m[i];
	return NULL;
}

struct apply_acct *apply_acct_get(struct apply_books *bk, int64_t id)
{
	if (id <= 0 || (size_t)id >= bk->nacct || !bk->acct[id].kind)
		return NULL;
	return &bk->acct[id];
}

int apply_acct_put(struct apply_books *bk, int64_t id, char kind, int64_t team)
{
	if (id <= 0)
		return -1;
	if ((size_t)id >= bk->nacct) {
		size_t n = (size_t)id * 2 + 64;
		struct apply_acct *a = realloc(bk->acct, n * sizeof *a);
		if (!a)
			return -1;
		memset(a + bk->nacct, 0, (n - bk->nacct) * sizeof *a);
		bk->acct = a, bk->nacct = n;
	}
	bk->acct[id].kind = kind;
	bk->acct[id].team = team;
	return 0;
}

static void emit(void *ctx, const struct book_event *ev)
{
	struct apply_books *bk = ctx;
	if (bk->nev == bk->capev) {
		size_t n = bk->capev ? bk->capev * 2 : 64;
		struct book_event *e = realloc(bk->ev, n * sizeof *e);
		assert(e); /* events are small; out of memory here is fatal */
		bk->ev = e, bk->capev = n;
	}
	bk->ev[bk->nev] = *ev;
	bk->ev[bk->nev].message = NULL;
	if (ev->kind == BOOK_EV_REJECTED && ev->message)
		snprintf(bk->reject_msg, sizeof bk->reject_msg, "%s",
		         ev->message);
	bk->nev++;
}

/* --- loading ----------------------------------------------------------- */

static void apply_free_books(struct apply_books *bk)
{
	for (int i = 0; i < bk->nm; i++)
		book_free(bk->m[i].book);
	bk->nm = 0;
	bk->nheld = 0;
}

/* The held market of this name (or of this id when name is NULL). */
static const struct apply_held *held_market(const struct apply_books *bk,
                                            const char *name, int64_t id)
{
	for (int i = 0; i < bk->nheld; i++)
		if (name ? strcmp(bk->held[i].name, name) == 0
		         : bk->held[i].id == id)
			return &bk->held[i];
	return NULL;
}

/* What to do about a held market, for the log and the answer alike. */
#define HELD_FIX                                                               \
	"an operator changes its limits in the database (UPDATE markets "      \
	"SET tick, price_min, price_max, max_pages WHERE name = '%s', with "   \
	"its open orders on the new grid; a larger book_capacity if its book " \
	"is full) and restarts ramexd; its open orders stay open meanwhile"

static int load_accounts(struct apply_books *bk, PGconn *c, char *err,
                         size_t errlen)
{
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT id, kind, coalesce(team_id, 0) FROM "
	                      "accounts",
	                      0, NULL, err, errlen);
	if (!r)
		return -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (apply_acct_put(bk, db_int(r, i, 0), PQgetvalue(r, i, 1)[0],
		                   db_int(r, i, 2)) < 0) {
			PQclear(r);
			snprintf(err, errlen, "out of memory for accounts");
			return -1;
		}
	PQclear(r);
	return 0;
}

/* Holds market `id` (not among bk->m): logged, its commands refused. */
static void hold_market(struct apply_books *bk, int64_t id, const char *name,
                        const char *why)
{
	assert(bk->nm + bk->nheld < ROWS_MAX_MARKETS);
	struct apply_held *h = &bk->held[bk->nheld++];
	h->id = id;
	snprintf(h->name, sizeof h->name, "%s", name);
	snprintf(h->why, sizeof h->why, "%s", why);
	char msg[400];
	snprintf(msg, sizeof msg,
	         "market held: its book cannot be built from what is "
	         "stored, so its orders are refused; " HELD_FIX,
	         h->name);
	log_error(msg, "market=%s market_id=%lld err=\"%s\"", h->name,
	          (long long)id, why);
}

/* Adds market row i of r with its book: 0. -1 with err set when it
 * cannot; with `hold`, a market whose limits make no book is held
 * instead (struct apply_held, logged): 1. */
static int add_market(struct apply_books *bk, const PGresult *r, int i,
                      bool hold, char *err, size_t errlen)
{
	if (bk->nm >= ROWS_MAX_MARKETS) {
		snprintf(err, errlen, "more than %d markets", ROWS_MAX_MARKETS);
		return -1;
	}
	struct rows_market *m = &bk->m[bk->nm];
	struct book_params p = {
	    .tick = db_int(r, i, 3),
	    .lot = db_int(r, i, 4),
	    .min_pages = db_int(r, i, 5),
	    .max_pages = db_int(r, i, 6),
	    .price_min = db_int(r, i, 7),
	    .price_max = db_int(r, i, 8),
	    .capacity = bk->book_capacity,
	};
	memset(m, 0, sizeof *m);
	m->id = db_int(r, i, 0);
	snprintf(m->name, sizeof m->name, "%s", PQgetvalue(r, i, 1));
	m->perm = strcmp(PQgetvalue(r, i, 2), "perm") == 0;
	if (m->perm)
		m->perm_year = atoi(m->name + 5);
	if (!PQgetisnull(r, i, 9)) {
		m->term_end_s = db_int(r, i, 9);
		rows_iso_time(m->term_end_s, m->term_end);
	}
	m->notice_period_s = db_int(r, i, 10);
	m->breach_penalty = db_int(r, i, 11);
	m->delivery_deadline_s = db_int(r, i, 12);
	m->seq_saved = (uint64_t)db_int(r, i, 13);
	char why[BOOK_MSG_MAX];
	if (book_params_check(&p, why, sizeof why) < 0) {
		if (!hold) {
			snprintf(err, errlen, "market %s: %s", m->name, why);
			return -1;
		}
		hold_market(bk, m->id, PQgetvalue(r, i, 1), why);
		return 1;
	}
	m->book = book_new(&p, err, errlen);
	if (!m->book)
		return -1;
	book_set_seq(m->book, m->seq_saved);
	bk->nm++;
	return 0;
}

#define MARKET_COLS                                                            \
	"id, name, product, tick, lot, min_pages, max_pages, price_min, "      \
	"price_max, extract(epoch FROM term_end)::bigint, notice_period_s, "   \
	"breach_penalty, delivery_deadline_s, seq"

/* Drops the markets owned whose take is no longer current (not among the
 * rows r loaded): another instance took them. */
static void drop_taken(struct apply_books *bk)
{
	for (int k = 0; k < bk->nown;) {
		/* a held market was loaded too: it has no book */
		bool loaded = held_market(bk, NULL, bk->own[k].id) != NULL;
		for (int i = 0; i < bk->nm && !loaded; i++)
			loaded = bk->m[i].id == bk->own[k].id;
		if (loaded) {
			k++;
			continue;
		}
		log_error("market fenced: another instance took it",
		          "market_id=%lld epoch=%lld", (long long)bk->own[k].id,
		          (long long)bk->own[k].epoch);
		if (bk->owner)
			owner_lost(bk->owner, bk->own[k].id);
		bk->own[k] = bk->own[--bk->nown];
	}
}

/* Rebuilds every owned book from the open orders, in priority order. */
int apply_load(struct apply_books *bk, PGconn *c, char *err, size_t errlen)
{
	PGresult *r = NULL;
	struct pgarr a[2] = {{0}}; /* ids and epochs */
	apply_free_books(bk);
	if (load_accounts(bk, c, err, errlen) < 0)
		return -1;
	for (int k = 0; k < bk->nown; k++) {
		pgarr_i64(&a[0], bk->own[k].id);
		pgarr_i64(&a[1], bk->own[k].epoch);
	}
	const char *pv[2];
	if (pgarr_params(a, 2, pv) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* only the markets whose take is still current */
	r = db_exec(c, PGRES_TUPLES_OK,
	            "SELECT " MARKET_COLS ", h.epoch FROM markets JOIN (SELECT "
	            "o.market_id, o.epoch FROM market_owners o JOIN "
	            "unnest($1::bigint[], $2::bigint[]) AS u(mid, ep) ON "
	            "o.market_id = u.mid AND o.epoch = u.ep) h ON h.market_id "
	            "= id ORDER BY id",
	            2, pv, err, errlen);
	if (!r)
		goto fail;
	for (int i = 0; i < PQntuples(r); i++) {
		int added = add_market(bk, r, i, true, err, errlen);
		if (added < 0)
			goto fail;
		if (added == 0)
			bk->m[bk->nm - 1].epoch = db_int(r, i, 14);
	}
	PQclear(r);
	r = NULL;
	drop_taken(bk);
	pgarr_free(&a[0]);
	pgarr_free(&a[1]);
	for (int i = 0; i < bk->nm; i++)
		pgarr_i64(&a[0], bk->m[i].id);
	pv[0] = pgarr_text(&a[0]);
	if (!pv[0]) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	r = db_exec(c, PGRES_TUPLES_OK,
	            "SELECT o.id, o.market_id, o.account_id, o.side, o.tif, "
	            "o.stp, o.post_only, o.price, o.remaining, "
	            "coalesce(o.expires_ns, 0) FROM orders o WHERE o.status = "
	            "'open' AND o.market_id = ANY($1::bigint[]) ORDER BY "
	            "o.market_id, o.side, CASE WHEN o.side = 'buy' THEN "
	            "-o.price ELSE o.price END, o.priority",
	            1, pv, err, errlen);
	pgarr_free(&a[0]);
	if (!r)
		goto fail;
	long n = PQntuples(r);
	for (long i = 0; i < n; i++) {
		int64_t mid = db_int(r, i, 1);
		struct rows_market *m = NULL;
		int mk = 0;
		for (int k = 0; k < bk->nm; k++)
			if (bk->m[k].id == mid)
				m = &bk->m[k], mk = k;
		if (!m && held_market(bk, NULL, mid))
			continue; /* an order of a market held below */
		struct book_order o = {
		    .id = (uint64_t)db_int(r, i, 0),
		    .account = db_int(r, i, 2),
		    .price = db_int(r, i, 7),
		    .pages = db_int(r, i, 8),
		    .expires = db_int(r, i, 9),
		    .post_only = PQgetvalue(r, i, 6)[0] == 't',
		};
		if (!m || writer_side_parse(PQgetvalue(r, i, 3), &o.side) < 0 ||
		    writer_tif_parse(PQgetvalue(r, i, 4), &o.tif) < 0 ||
		    writer_stp_parse(PQgetvalue(r, i, 5), &o.stp) < 0) {
			snprintf(err, errlen, "open order %llu has a bad row",
			         (unsigned long long)o.id);
			goto fail;
		}
		char why[BOOK_MSG_MAX + 32], msg[BOOK_MSG_MAX];
		if (book_insert_resting(m->book, &o, msg, sizeof msg) < 0) {
			/* a market whose limits were changed under its open
			 * orders, or a book_capacity lowered below them: held,
			 * as a market whose limits make no book */
			snprintf(why, sizeof why, "open order %llu: %s",
			         (unsigned long long)o.id, msg);
			hold_market(bk, m->id, m->name, why);
			book_free(m->book);
			bk->m[mk] = bk->m[--bk->nm];
		}
	}
	PQclear(r);
	r = NULL;
	log_info("books rebuilt", "markets=%d open_orders=%ld", bk->nm, n);
	metrics_markets_served(bk->nm);
	bk->need_rebuild = false;
	return 0;
fail:
	PQclear(r);
	pgarr_free(&a[0]);
	pgarr_free(&a[1]);
	apply_free_books(bk);
	return -1;
}

/* --- ids ------------------------------------------------------------------ */

/* A new block from sequence `seq` (one of ours, never input): [*next, *end).
 * -1 with err set when the database does not give one. */
static int take_block(struct apply_books *bk, const char *seq, uint64_t *next,
                      uint64_t *end, char *err, size_t errlen)
{
	const char *pv[] = {seq};
	PGresult *r =
	    db_exec(*bk->idconn, PGRES_TUPLES_OK,
	            "SELECT nextval($1::regclass)", 1, pv, err, errlen);
	if (!r)
		return -1;
	int64_t v = db_int(r, 0, 0);
	PQclear(r);
	assert(v > 0);
	*next = (uint64_t)v;
	*end = (uint64_t)v + APPLY_ID_BLOCK;
	return 0;
}

int apply_ids_reserve(struct apply_books *bk, int orders, char *err,
                      size_t errlen)
{
	if ((bk->ids_lost ||
	     bk->next_order + (uint64_t)orders > bk->order_end) &&
	    take_block(bk, "order_id_blocks", &bk->next_order, &bk->order_end,
	               err, errlen) < 0)
		return -1;
	if ((bk->ids_lost ||
	     bk->next_trade + APPLY_ID_BLOCK / 16 > bk->trade_end) &&
	    take_block(bk, "trade_id_blocks", &bk->next_trade, &bk->trade_end,
	               err, errlen) < 0)
		return -1;
	bk->ids_lost = false;
	return 0;
}

/* The next id of a block, taking a new block when it is used up (rare:
 * apply_ids_reserve takes them before a batch). When none can be taken,
 * the id is past the block, never written: ids_lost fails the batch, and
 * the rest of it tries no more. */
static uint64_t next_id(struct apply_books *bk, const char *seq, uint64_t *next,
                        uint64_t *end)
{
	char err[256];
	if (*next >= *end && !bk->ids_lost &&
	    take_block(bk, seq, next, end, err, sizeof err) < 0) {
		log_error("could not take a block of ids", "seq=%s err=\"%s\"",
		          seq, err);
		bk->ids_lost = true;
	}
	return (*next)++;
}

void apply_free(struct apply_books *bk)
{
	apply_free_books(bk);
	free(bk->ev);
	free(bk->acct);
	bk->ev = NULL, bk->nev = bk->capev = 0;
	bk->acct = NULL, bk->nacct = 0;
}

/* --- rows of a command ------------------------------------------------- */

/* Queues an event; `data` is its JSON text. */
static void publish_later(struct apply_books *bk, struct rows_batch *b,
                          const char *type, int64_t a1, int64_t a2,
                          const char *data, size_t len)
{
	struct apply_acct *x = apply_acct_get(bk, a1),
	                  *y = apply_acct_get(bk, a2);
	struct rows_event *e = ROWS_PUSH(b->pub);
	e->type = type;
	e->a = a1, e->ta = x ? x->team : 0;
	e->b = a2, e->tb = y ? y->team : 0;
	e->off = b->pubtext.n;
	rows_put(&b->pubtext, data, len);
	rows_put(&b->pubtext, "", 1); /* the NUL that ends it */
}

static void order_closed(struct apply_books *bk, struct rows_batch *b,
                         uint64_t id, int64_t account, rx_pages left,
                         const char *status, const char *reason, rx_time_ns now)
{
	struct rows_order *row = rows_order_row(b, id, now);
	struct rows_buf t = {0};
	row->remaining = left;
	row->status = status;
	row->reason = reason;
	row->updated = now;
	rows_open(&t, '{');
	rows_ki(&t, "id", (int64_t)id);
	rows_ki(&t, "account_id", account);
	rows_ks(&t, "status", status);
	rows_ki(&t, "remaining", left);
	rows_ks(&t, "reason", reason);
	if (row->cancelled_by) {
		rows_ks(&t, "cancelled_by", row->cancelled_by);
		rows_ks(&t, "cancel_note", row->cancel_note);
	}
	rows_s(&t, "}");
	publish_later(bk, b, "order", account, 0, t.p, t.n);
	free(t.p);
}

/* The contract row of a trade, as exchange/core/contract.h opens it. The
 * order path has already refused what contract_open refuses (a node buying
 * perm, a term that is over), so a failure here is a bug; it is logged and
 * the row is still written from the trade, since the trade has happened. */
static void contract_row(struct rows_contract *row, struct rows_market *m,
                         uint64_t cid, uint64_t tid, int64_t buyer,
                         int64_t seller, bool buyer_is_operator,
                         const struct book_event *ev, rx_time_ns now)
{
	struct contract_trade t = {
	    .contract_id = (int64_t)cid,
	    .trade_id = (int64_t)tid,
	    .buyer = buyer,
	    .seller = seller,
	    .buyer_is_operator = buyer_is_operator,
	    .pages = ev->pages,
	    .price = ev->price,
	    .now = now,
	};
	struct contract_market cm = {
	    .market_id = m->id,
	    .product = m->perm ? CONTRACT_PERM : CONTRACT_SPOT,
	    .perm_year = m->perm_year,
	    .delivery_window = m->delivery_deadline_s * INT64_C(1000000000),
	    .recall_notice = m->notice_period_s * INT64_C(1000000000),
	    .breach_penalty = m->breach_penalty,
	};
	struct contract *k = &row->k;
	char err[256];
	if (contract_open(&t, &cm, k, err, sizeof err) < 0) {
		log_error("trade makes no valid contract; writing it as traded",
		          "trade=%llu err=%s", (unsigned long long)tid,
		          log_quote((char[300]){0}, 300, err));
		memset(k, 0, sizeof *k);
		k->product = cm.product;
		k->perm_year = m->perm_year;
		k->delivery =
		    buyer_is_operator ? CONTRACT_OFFLINE : CONTRACT_LEND;
		k->breach_penalty = m->breach_penalty;
		k->recall_notice = cm.recall_notice;
		k->created = k->changed_at = now;
		k->delivery_deadline = now + cm.delivery_window;
	}
	row->id = cid;
	row->trade_id = tid;
	row->m = m;
	row->buyer = buyer;
	row->seller = seller;
	row->pages = ev->pages;
	row->price = ev->price;
	row->now = now;
}

/* Rows and events of one trade; appends the fill's JSON to `fills`. */
static void trade_rows(struct apply_books *bk, struct rows_batch *b,
                       struct rows_market *m, const struct book_event *ev,
                       rx_time_ns now, struct rows_buf *fills)
{
	int64_t buyer = ev->side == BOOK_BUY ? ev->account : ev->maker_account;
	int64_t seller = ev->side == BOOK_BUY ? ev->maker_account : ev->account;
	struct apply_acct *ba = apply_acct_get(bk, buyer);
	bool operator_buys = ba && ba->kind == 'o';
	uint64_t tid = next_id(bk, "trade_id_blocks", &bk->next_trade,
	                       &bk->trade_end),
	         cid = tid;

	struct rows_trade *t = ROWS_PUSH(b->trades);
	t->id = tid, t->market_id = m->id, t->seq = (int64_t)ev->seq;
	t->taker = ev->id, t->maker = ev->maker_id;
	t->buyer = buyer, t->seller = seller, t->side = ev->side;
	t->price = ev->price, t->pages = ev->pages, t->ts = now;
	t->maker_remaining = ev->maker_remaining;
	struct rows_contract *c = ROWS_PUSH(b->contracts);
	contract_row(c, m, cid, tid, buyer, seller, operator_buys, ev, now);

	/* the maker's row: filled counts up on a new row, filled_add on an
	 * update of an earlier batch's order */
	struct rows_order *row = rows_order_row(b, ev->maker_id, now);
	row->remaining = ev->maker_remaining;
	row->filled += ev->pages;
	row->status = ev->maker_remaining ? "open" : "filled";
	row->updated = now;

	struct rows_buf f = {0};
	struct rows_fill fv = {
	    .trade_id = (int64_t)tid,
	    .price = ev->price,
	    .pages = ev->pages,
	    .taker = (int64_t)ev->id,
	    .maker = (int64_t)ev->maker_id,
	    .buyer = buyer,
	    .seller = seller,
	    .maker_remaining = ev->maker_remaining,
	    .taker_remaining = ev->remaining,
	    .contract_id = (int64_t)cid,
	    .side = ev->side,
	    .market = m->name,
	};
	rows_fill_view(&f, &fv);
	publish_later(bk, b, "fill", buyer, seller, f.p, f.n);
	if (fills) {
		rows_open(fills, '{');
		rows_put(fills, f.p + 1, f.n - 1);
	}
	f.n = 0;
	rows_contract_json(&f, c, true);
	publish_later(bk, b, "contract", buyer, seller, f.p, f.n);
	free(f.p);
	b->ntrades++;
}

/* Handles events that concern resting orders (expiry, self-trade cancels
 * of makers); returns 1 when it handled ev. */
static int resting_event(struct apply_books *bk, struct rows_batch *b,
                         const struct book_event *ev, uint64_t taker,
                         rx_time_ns now)
{
	if (ev->kind == BOOK_EV_EXPIRED) {
		order_closed(bk, b, ev->id, ev->account, ev->pages, "expired",
		             "gtd", now);
		return 1;
	}
	if (ev->kind == BOOK_EV_CANCELLED && ev->id != taker) {
		order_closed(bk, b, ev->id, ev->account, ev->pages, "cancelled",
		             book_cancel_name(ev->cancel), now);
		return 1;
	}
	return 0;
}

/* --- authorisation ----------------------------------------------------- */

/* 0 when the principal of c may act for `account`; else answers c. */
/* The rule itself: whether c's principal may act for account a. */
static bool acts_for(const struct apply_acct *a, const struct writer_cmd *c,
                     int64_t account)
{
	switch (c->role) {
	case AUTH_NODE:
		return account == c->p_account;
	case AUTH_TRADER:
		return a->kind == 'n' && a->team == c->p_team;
	case AUTH_OPERATOR:
		return account == c->p_account && a->kind == 'o';
	default:
		return false;
	}
}

int apply_may_act_for(struct apply_books *bk, struct writer_cmd *c,
                      int64_t account)
{
	struct apply_acct *a = apply_acct_get(bk, account);
	char why[256];
	if (!a) {
		snprintf(why, sizeof why, "there is no account %lld",
		         (long long)account);
		rows_fail_cmd(c, 404, "not-found", "no such account", why);
		return -1;
	}
	if (acts_for(a, c, account))
		return 0;
	switch (c->role) {
	case AUTH_NODE:
		snprintf(why, sizeof why,
		         "a node may act only for itself (account %lld), not "
		         "for account %lld",
		         (long long)c->p_account, (long long)account);
		break;
	case AUTH_TRADER:
		snprintf(why, sizeof why,
		         "a trader may act only for the nodes of its team; "
		         "account %lld is not one",
		         (long long)account);
		break;
	case AUTH_OPERATOR:
		snprintf(why, sizeof why,
		         "an operator token acts only for its operator account "
		         "%lld",
		         (long long)c->p_account);
		break;
	default:
		snprintf(why, sizeof why, "the %s role may not trade",
		         auth_role_name(c->role));
	}
	rows_fail_cmd(c, 403, "forbidden", "not your account", why);
	return -1;
}

/* --- commands ---------------------------------------------------------- */

/* A command for a market whose book is not here (by name, or by id when
 * name is NULL): 307 to the instance that owns it, 503 while none does
 * (its owner stopped and another is taking it, or this one is loading
 * it), 404 when there is no such market. Neither is stored as an
 * idempotency answer (idem_store): the retry at the owner is carried out. */
static void not_here(struct apply_books *bk, struct writer_cmd *c,
                     const char *name, int64_t id)
{
	char url[OWNER_URL_MAX], why[400];
	const struct apply_held *held = held_market(bk, name, id);
	if (held) {
		char *p = rows_problem(
		    409, "market-held", "market held",
		    "market %s is held: its stored limits cannot make a book "
		    "(%s), so its orders are refused; " HELD_FIX
		    ". The other markets are served",
		    held->name, held->why, held->name);
		rows_set_answer(c, 409, p);
		c->not_kept = true; /* a retry after the fix is carried out */
		return;
	}
	enum owner_where wh =
	    bk->owner ? owner_where(bk->owner, name, id, url, sizeof url)
	              : OWNER_UNKNOWN;
	if (wh == OWNER_ELSEWHERE) {
		snprintf(c->redirect, sizeof c->redirect, "%s", url);
		char *p = rows_problem(
		    307, "not-owner", "market served elsewhere",
		    "market %s is served by the exchange instance at %s: send "
		    "the request there (Location); the same Idempotency-Key "
		    "or client_order_id keeps it placed once",
		    name ? name : "of this order", url);
		/* the owner's base URL as a field too, for clients that do
		 * not read headers (the agent's) */
		json_t *pj = json_loads(p, 0, NULL);
		free(p);
		json_object_set_new(pj, "owner", json_string(url));
		rows_set_answer(c, 307, json_dumps(pj, JSON_COMPACT));
		json_decref(pj);
	} else if (wh != OWNER_UNKNOWN) {
		c->retry_after = true;
		snprintf(why, sizeof why,
		         "no exchange instance serves market %s at this moment "
		         "(its owner stopped and another is taking it over); "
		         "retry in a few seconds with the same Idempotency-Key "
		         "or client_order_id",
		         name ? name : "of this order");
		rows_fail_cmd(c, 503, "market-unavailable",
		              "market not served now", why);
	} else {
		snprintf(why, sizeof why,
		         "there is no market named '%s'; GET /v1/markets lists "
		         "them",
		         name ? name : "");
		rows_fail_cmd(c, 404, "not-found", "no such market", why);
	}
}

int64_t apply_cmd_account(const struct writer_cmd *c)
{
	return c->account ? c->account : c->p_account;
}

void apply_new(struct apply_books *bk, struct rows_batch *b,
               struct writer_cmd *c, rx_time_ns now)
{
	int64_t account = apply_cmd_account(c);
	struct rows_market *m = apply_market_by_name(bk, c->market);
	char why[256];

	if (!m) {
		not_here(bk, c, c->market, 0);
		return;
	}
	if (!account) {
		rows_fail_cmd(
		    c, 422, "invalid", "account_id required",
		    "say which account the order is for (account_id)");
		return;
	}
	if (apply_may_act_for(bk, c, account) < 0)
		return;
	struct apply_acct *a = apply_acct_get(bk, account);
	if (c->side == BOOK_BUY && m->perm && a->kind != 'o') {
		snprintf(why, sizeof why,
		         "only the operator buys in %s: a perm market buys "
		         "pages kept offline",
		         m->name);
		rows_fail_cmd(c, 403, "forbidden", "buyer not allowed", why);
		return;
	}
	if (m->perm && now / 1000000000 >= m->term_end_s) {
		snprintf(why, sizeof why,
		         "%s ended at %s: its pages can no longer be "
		         "committed; trade a later year",
		         m->name, m->term_end);
		rows_fail_cmd(c, 422, "invalid", "market term over", why);
		return;
	}
	if (c->side == BOOK_SELL && a->kind != 'n') {
		rows_fail_cmd(c, 403, "forbidden", "seller not allowed",
		              "only nodes sell pages");
		return;
	}

	uint64_t id =
	    next_id(bk, "order_id_blocks", &bk->next_order, &bk->order_end);
	struct book_cmd bc = {
	    .kind = BOOK_CMD_NEW,
	    .now = now,
	    .id = id,
	    .account = account,
	    .side = c->side,
	    .tif = c->tif,
	    .stp = c->stp,
	    .post_only = c->post_only,
	    .pages = c->pages,
	    .price = c->price,
	    .expires = c->tif == BOOK_GTD ? c->expires : 0,
	};
	bk->nev = 0;
	enum book_reject rej = book_apply(m->book, &bc, emit, bk);
	b->touched[m - bk->m] = true;

	/* the new order's row, by index: trade_rows adds rows */
	size_t ri = SIZE_MAX;
	struct rows_buf fills = {0};
	for (size_t i = 0; i < bk->nev; i++) {
		const struct book_event *ev = &bk->ev[i];
		struct rows_order *row;
		if (resting_event(bk, b, ev, id, now))
			continue;
		switch (ev->kind) {
		case BOOK_EV_ACCEPTED:
			row = rows_order_row(b, id, now);
			ri = (size_t)(row - b->orders.v);
			row->is_new = true;
			row->market_id = m->id;
			row->account_id = account;
			row->side = c->side;
			row->tif = c->tif;
			row->stp = c->stp;
			row->post_only = c->post_only;
			row->price = c->price;
			row->pages = row->remaining = c->pages;
			row->priority = (int64_t)ev->seq;
			row->created = row->updated = now;
			row->expires = c->tif == BOOK_GTD ? c->expires : 0;
			snprintf(row->coid, sizeof row->coid, "%s",
			         c->client_order_id);
			snprintf(row->placed_by, sizeof row->placed_by, "%s",
			         c->p_scope);
			break;
		case BOOK_EV_TRADE:
			assert(ri != SIZE_MAX);
			row = &b->orders.v[ri];
			row->remaining = ev->remaining;
			row->filled += ev->pages;
			if (!ev->remaining)
				row->status = "filled";
			trade_rows(bk, b, m, ev, now, &fills);
			break;
		case BOOK_EV_CANCELLED:
			assert(ri != SIZE_MAX && ev->id == id);
			row = &b->orders.v[ri];
			row->status = "cancelled";
			row->reason = book_cancel_name(ev->cancel);
			row->placed_reason = row->reason;
			break;
		default:
			break;
		}
	}
	if (rej != BOOK_REJ_NONE) {
		free(fills.p);
		char *p = rows_problem(422, "order-rejected", "order rejected",
		                       "%s", bk->reject_msg);
		json_t *pj = json_loads(p, 0, NULL);
		free(p);
		json_object_set_new(pj, "reason",
		                    json_string(book_reject_name(rej)));
		rows_set_answer(c, 422, json_dumps(pj, JSON_COMPACT));
		json_decref(pj);
		b->rejected++;
		return;
	}
	assert(ri != SIZE_MAX);
	b->accepted++;
	rows_set_answer(c, 201,
	                rows_order_answer(&b->orders.v[ri], m->name, &fills));
	free(fills.p);
}

/* The market of open order c->order_id when it is not one of the books
 * here (0 when there is no such open order), read on the lookup
 * connection; -1 after answering c 503 when that fails. */
static int64_t order_market(struct apply_books *bk, struct writer_cmd *c)
{
	char id[24], err[256];
	snprintf(id, sizeof id, "%llu", (unsigned long long)c->order_id);
	const char *pv[] = {id};
	PGresult *r =
	    *bk->idconn
	        ? db_exec(*bk->idconn, PGRES_TUPLES_OK,
	                  "SELECT market_id FROM orders WHERE id = $1::bigint "
	                  "AND status = 'open'",
	                  1, pv, err, sizeof err)
	        : NULL;
	if (!r) {
		c->retry_after = true;
		rows_fail_cmd(
		    c, 503, "database-unavailable", "database unavailable",
		    "the exchange could not look up which market this "
		    "order is in; retry after a few seconds");
		return -1;
	}
	int64_t mid = PQntuples(r) == 1 ? db_int(r, 0, 0) : 0;
	PQclear(r);
	return mid;
}

void apply_change(struct apply_books *bk, struct rows_batch *b,
                  struct writer_cmd *c, rx_time_ns now)
{
	struct book_order o;
	struct rows_market *m = NULL;
	char why[256];
	for (int i = 0; i < bk->nm && !m; i++)
		if (book_get(bk->m[i].book, c->order_id, &o))
			m = &bk->m[i];
	bool elsewhere = bk->owner && !owner_holds_all(bk->owner);
	if (!m && (elsewhere || bk->nheld > 0)) {
		/* an order of a market held elsewhere, or of one held here
		 * without a book? Only here, off the path of an instance
		 * that holds every market's book */
		int64_t mid = order_market(bk, c);
		if (mid < 0)
			return; /* answered */
		if (mid > 0 && (elsewhere || held_market(bk, NULL, mid))) {
			not_here(bk, c, NULL, mid);
			return;
		}
	}
	/* Another account's open order is answered as one that is not open:
	 * a 403 naming its account told anyone which ids were open orders,
	 * and whose, that GET /v1/orders/{id} hides from them (404). */
	const struct apply_acct *owner = m ? apply_acct_get(bk, o.account) : NULL;
	if (!m || !owner || !acts_for(owner, c, o.account)) {
		snprintf(why, sizeof why,
		         "order %llu is not an open order of yours: it was "
		         "filled, cancelled or expired, never existed, or is "
		         "another account's",
		         (unsigned long long)c->order_id);
		rows_fail_cmd(c, 404, "not-found", "no open order", why);
		return;
	}
	struct book_cmd bc = {
	    .kind = c->kind == WR_CANCEL ? BOOK_CMD_CANCEL : BOOK_CMD_REDUCE,
	    .now = now,
	    .id = c->order_id,
	    .pages = c->pages,
	};
	bk->nev = 0;
	enum book_reject rej = book_apply(m->book, &bc, emit, bk);
	b->touched[m - bk->m] = true;
	const char *status = "open";
	rx_pages left = o.pages;
	for (size_t i = 0; i < bk->nev; i++) {
		const struct book_event *ev = &bk->ev[i];
		if (ev->kind == BOOK_EV_EXPIRED) {
			resting_event(bk, b, ev, 0, now);
			if (ev->id == c->order_id)
				status = "expired";
		} else if (ev->kind == BOOK_EV_CANCELLED) {
			if (ev->id == c->order_id) {
				struct rows_order *row =
				    rows_order_row(b, ev->id, now);
				row->cancelled_by = c->p_scope;
				row->cancel_note = c->note[0] ? c->note : NULL;
			}
			order_closed(bk, b, ev->id, ev->account, ev->pages,
			             "cancelled", book_cancel_name(ev->cancel),
			             now);
			status = "cancelled", left = ev->pages;
		} else if (ev->kind == BOOK_EV_REDUCED) {
			struct rows_order *row = rows_order_row(b, ev->id, now);
			row->remaining = ev->pages;
			row->updated = now;
			left = ev->pages;
			struct rows_buf t = {0};
			rows_open(&t, '{');
			rows_ki(&t, "id", (int64_t)ev->id);
			rows_ki(&t, "account_id", ev->account);
			rows_ks(&t, "status", "open");
			rows_ki(&t, "remaining", ev->pages);
			rows_s(&t, "}");
			publish_later(bk, b, "order", ev->account, 0, t.p, t.n);
			free(t.p);
		}
	}
	if (rej != BOOK_REJ_NONE) {
		int st = rej == BOOK_REJ_UNKNOWN_ORDER ? 404 : 422;
		char *p = rows_problem(st, "order-rejected", "change rejected",
		                       "%s", bk->reject_msg);
		rows_set_answer(c, st, p);
		return;
	}
	json_t *ans =
	    json_pack("{s:{s:I,s:s,s:I,s:s,s:I,s:I,s:s}}", "order", "id",
	              (json_int_t)c->order_id, "market", m->name, "account_id",
	              (json_int_t)o.account, "side", writer_side_name(o.side),
	              "price", (json_int_t)o.price, "remaining",
	              (json_int_t)left, "status", status);
	rows_set_answer(c, 200, json_dumps(ans, JSON_COMPACT));
	json_decref(ans);
}

void apply_depth(struct apply_books *bk, struct writer_cmd *c)
{
	struct rows_market *m = apply_market_by_name(bk, c->market);
	struct book_level lv[200];
	if (!m) {
		not_here(bk, c, c->market, 0);
		return;
	}
	size_t max = c->depth > 0 && c->depth <= 200 ? (size_t)c->depth : 20;
	json_t *sides[2];
	for (int s = 0; s < 2; s++) {
		size_t n = book_depth(m->book, (enum book_side)s, lv, max);
		sides[s] = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(
			    sides[s],
			    json_pack("{s:I,s:I,s:i}", "price",
			              (json_int_t)lv[i].price, "pages",
			              (json_int_t)lv[i].pages, "orders",
			              (int)lv[i].orders));
	}
	json_t *ans = json_pack("{s:s,s:I,s:o,s:o}", "market", m->name, "seq",
	                        (json_int_t)book_seq(m->book), "bids", sides[0],
	                        "asks", sides[1]);
	rows_set_answer(c, 200, json_dumps(ans, JSON_COMPACT));
	json_decref(ans);
}

static json_t *market_json(const struct rows_market *m)
{
	const struct book_params *p = book_params_of(m->book);
	return json_pack(
	    "{s:I,s:s,s:s,s:s?,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "id",
	    (json_int_t)m->id, "name", m->name, "product",
	    m->perm ? "perm" : "spot", "term_end", m->perm ? m->term_end : NULL,
	    "tick", (json_int_t)p->tick, "lot", (json_int_t)p->lot, "min_pages",
	    (json_int_t)p->min_pages, "max_pages", (json_int_t)p->max_pages,
	    "price_min", (json_int_t)p->price_min, "price_max",
	    (json_int_t)p->price_max, "notice_period_s",
	    (json_int_t)m->notice_period_s, "breach_penalty",
	    (json_int_t)m->breach_penalty, "delivery_deadline_s",
	    (json_int_t)m->delivery_deadline_s);
}

void apply_create_market(struct apply_books *bk, PGconn **lconn,
                         struct writer_cmd *c)
{
	struct writer_market_spec *s = &c->spec;
	char err[256], args[13][32], term_end[32] = "";
	bool perm = strncmp(s->name, "perm-", 5) == 0;

	if (apply_market_by_name(bk, s->name) || held_market(bk, s->name, 0) ||
	    (bk->owner &&
	     owner_where(bk->owner, s->name, 0, NULL, 0) != OWNER_UNKNOWN)) {
		rows_fail_cmd(c, 409, "conflict", "market exists",
		              "a market with this name exists already");
		return;
	}
	if (bk->nm >= ROWS_MAX_MARKETS) {
		rows_fail_cmd(c, 409, "conflict", "too many markets",
		              "this exchange holds at most 256 markets");
		return;
	}
	s->p.capacity = bk->book_capacity;
	if (book_params_check(&s->p, err, sizeof err) < 0) {
		rows_fail_cmd(c, 422, "invalid", "invalid market", err);
		return;
	}
	if (perm) {
		struct tm tm = {.tm_year = atoi(s->name + 5) + 1 - 1900,
		                .tm_mday = 1};
		rows_iso_time((int64_t)timegm(&tm), term_end);
	}
	snprintf(args[0], 32, "%s", s->name);
	snprintf(args[1], 32, "%s", perm ? "perm" : "spot");
	snprintf(args[2], 32, "%s", term_end);
	snprintf(args[3], 32, "%lld", (long long)s->p.tick);
	snprintf(args[4], 32, "%lld", (long long)s->p.lot);
	snprintf(args[5], 32, "%lld", (long long)s->p.min_pages);
	snprintf(args[6], 32, "%lld", (long long)s->p.max_pages);
	snprintf(args[7], 32, "%lld", (long long)s->p.price_min);
	snprintf(args[8], 32, "%lld", (long long)s->p.price_max);
	snprintf(args[9], 32, "%lld", (long long)s->notice_period_s);
	snprintf(args[10], 32, "%lld", (long long)s->breach_penalty);
	snprintf(args[11], 32, "%lld", (long long)s->delivery_deadline_s);
	const char *pv[12];
	for (int i = 0; i < 12; i++)
		pv[i] = args[i];
	if (!perm)
		pv[2] = NULL;
	struct db_fail f;
	PGresult *r = db_exec_fail(
	    *lconn, PGRES_TUPLES_OK,
	    "INSERT INTO markets (name, product, term_end, tick, lot, "
	    "min_pages, max_pages, price_min, price_max, notice_period_s, "
	    "breach_penalty, delivery_deadline_s) VALUES ($1, $2, $3, $4, $5, "
	    "$6, $7, $8, $9, $10, $11, $12) RETURNING " MARKET_COLS,
	    12, pv, &f);
	if (!r) {
		if (db_broken(*lconn) || db_state_lost(f.state)) {
			/* the INSERT commits by itself: lost on its way back,
			 * it may have */
			c->retry_after = true;
			bk->need_rebuild = true;
			PQfinish(*lconn);
			*lconn = NULL;
			rows_fail_cmd(
			    c, 503, "outcome-unknown", "outcome unknown",
			    "the connection to PostgreSQL was lost while "
			    "the market was being created, so it may or "
			    "may not exist; GET /v1/markets tells which, "
			    "and creating it again is refused (409) if "
			    "it does");
		} else {
			/* PostgreSQL's text is for the log: the edge checked
			 * every field, so a rule of the schema that still
			 * refuses is named, not quoted */
			char q[600];
			bool rule = f.state[0] == '2' &&
			            (f.state[1] == '2' || f.state[1] == '3');
			log_error("market not created",
			          "name=%s state=%s constraint=%s err=%s",
			          s->name, f.state, f.constraint,
			          log_quote(q, sizeof q, f.text));
			snprintf(err, sizeof err,
			         "the database refused the market (rule %s of "
			         "the schema); the exchange's log says more",
			         f.constraint[0] ? f.constraint : "-");
			rows_fail_cmd(c, rule ? 422 : 500,
			              rule ? "invalid" : "internal",
			              "market not created", err);
		}
		return;
	}
	if (add_market(bk, r, 0, false, err, sizeof err) < 0) {
		PQclear(r);
		/* committed but unusable: rebuild to find out why */
		bk->need_rebuild = true;
		rows_fail_cmd(c, 500, "internal", "market not loaded", err);
		return;
	}
	PQclear(r);
	struct rows_market *m = &bk->m[bk->nm - 1];
	json_t *j = market_json(m);
	rows_set_answer(c, 201, json_dumps(j, JSON_COMPACT));
	json_decref(j);
	/* its book stays here when this instance takes it now; else the
	 * instance that wants it takes it at its next round */
	int64_t epoch = 0;
	int taken =
	    bk->owner ? owner_claim(bk->owner, m->id, m->name, &epoch) : 0;
	if (taken == 1 && bk->nown < ROWS_MAX_MARKETS) {
		m->epoch = epoch;
		bk->own[bk->nown++] = (struct owner_held){m->id, epoch};
	} else {
		book_free(m->book);
		bk->nm--;
	}
	log_info("market created", "name=%s here=%d", s->name, taken == 1);
	metrics_markets_served(bk->nm);
}

void apply_own(struct apply_books *bk, struct writer_cmd *c)
{
	int k = 0;
	while (k < bk->nown && bk->own[k].id != c->own_market)
		k++;
	if (c->kind == WR_OWN) {
		if (k == bk->nown && bk->nown < ROWS_MAX_MARKETS)
			bk->nown++;
		if (k < bk->nown)
			bk->own[k] =
			    (struct owner_held){c->own_market, c->own_epoch};
	} else if (k < bk->nown) {
		bk->own[k] = bk->own[--bk->nown];
		/* no command may reach its book from now on: no batch is in
		 * flight (the writer drained them), so no index is held */
		for (int i = 0; i < bk->nm; i++)
			if (bk->m[i].id == c->own_market) {
				book_free(bk->m[i].book);
				bk->m[i] = bk->m[--bk->nm];
				metrics_markets_served(bk->nm);
				break;
			}
		log_info("market given up", "market_id=%lld",
		         (long long)c->own_market);
	}
	bk->need_rebuild = true;
	rows_set_answer(c, 200, strdup("{}"));
}

/* --- expiry ------------------------------------------------------------- */

void apply_expire(struct apply_books *bk, struct rows_batch *b, rx_time_ns now)
{
	for (int i = 0; i < bk->nm; i++) {
		struct book_cmd bc = {.kind = BOOK_CMD_EXPIRE, .now = now};
		bk->nev = 0;
		book_apply(bk->m[i].book, &bc, emit, bk);
		for (size_t k = 0; k < bk->nev; k++)
			resting_event(bk, b, &bk->ev[k], 0, now);
		if (bk->nev)
			b->touched[i] = true;
	}
}
