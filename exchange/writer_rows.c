/*
 * writer_rows.c — see writer_rows.h.
 */
#include "exchange/writer_rows.h"

#include <assert.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exchange/events_db.h"
#include "exchange/writer.h"

/* --- names (writer.h) ------------------------------------------------ */

static const char *side_names[] = {"buy", "sell"};
static const char *tif_names[] = {"gtc", "ioc", "fok", "gtd"};
static const char *stp_names[] = {"cancel_taker", "cancel_maker",
                                  "cancel_both"};

const char *writer_side_name(enum book_side s)
{
	return side_names[s & 1];
}
const char *writer_tif_name(enum book_tif t)
{
	return tif_names[t & 3];
}
const char *writer_stp_name(enum book_stp s)
{
	return (unsigned)s < 3 ? stp_names[s] : "?";
}

static int parse_name(const char *s, const char **names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (s && strcmp(s, names[i]) == 0)
			return *out = i, 0;
	return -1;
}

int writer_side_parse(const char *s, enum book_side *out)
{
	int v;
	if (parse_name(s, side_names, 2, &v) < 0)
		return -1;
	*out = (enum book_side)v;
	return 0;
}

int writer_tif_parse(const char *s, enum book_tif *out)
{
	int v;
	if (parse_name(s, tif_names, 4, &v) < 0)
		return -1;
	*out = (enum book_tif)v;
	return 0;
}

int writer_stp_parse(const char *s, enum book_stp *out)
{
	int v;
	if (parse_name(s, stp_names, 3, &v) < 0)
		return -1;
	*out = (enum book_stp)v;
	return 0;
}

void rows_vec_grow(void **v, size_t *cap, size_t elem)
{
	size_t n = *cap ? *cap * 2 : 64;
	void *x = realloc(*v, n * elem);
	assert(x);
	*v = x, *cap = n;
}

void rows_iso_time(int64_t unix_s, char out[32])
{
	struct tm tm;
	time_t t = (time_t)unix_s;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *rows_problem(int status, const char *slug, const char *title,
                   const char *fmt, ...)
{
	char detail[512], type[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	snprintf(type, sizeof type, "urn:ramex:problem:%s", slug);
	json_t *j = json_pack("{s:s,s:s,s:i,s:s}", "type", type, "title", title,
	                      "status", status, "detail", detail);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

void rows_set_answer(struct writer_cmd *c, int status, char *body)
{
	free(c->body);
	c->status = status;
	c->body = body;
}

void rows_fail_cmd(struct writer_cmd *c, int status, const char *slug,
                   const char *title, const char *detail)
{
	rows_set_answer(c, status,
	                rows_problem(status, slug, title, "%s", detail));
}

/* --- text ---------------------------------------------------------------- */

static void rows_need(struct rows_buf *b, size_t more)
{
	if (b->n + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	assert(p); /* out of memory here is fatal, as for the events */
	b->p = p, b->cap = cap;
}

void rows_put(struct rows_buf *b, const char *s, size_t n)
{
	rows_need(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void rows_s(struct rows_buf *b, const char *s)
{
	rows_put(b, s, strlen(s));
}

static void rows_i(struct rows_buf *b, int64_t v)
{
	char t[24];
	char *e = t + sizeof t, *q = e;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--q = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--q = '-';
	rows_put(b, q, (size_t)(e - q));
}

/* A JSON string: quotes, and escapes for what JSON requires. */
static void rows_js(struct rows_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	rows_need(b, strlen(s) * 6 + 2);
	char *o = b->p + b->n;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\', *o++ = (char)*p;
		} else if (*p < 0x20) {
			*o++ = '\\', *o++ = 'u', *o++ = '0', *o++ = '0';
			*o++ = hex[*p >> 4], *o++ = hex[*p & 15];
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	b->n = (size_t)(o - b->p);
	b->p[b->n] = 0;
}

/* ,"key": */
static void rows_k(struct rows_buf *b, const char *key)
{
	size_t n = strlen(key);
	rows_need(b, n + 4);
	char *o = b->p + b->n;
	if (b->n && b->p[b->n - 1] != '{' && b->p[b->n - 1] != '[')
		*o++ = ',';
	*o++ = '"';
	memcpy(o, key, n);
	o += n;
	*o++ = '"', *o++ = ':';
	b->n = (size_t)(o - b->p);
	b->p[b->n] = 0;
}

void rows_ki(struct rows_buf *b, const char *key, int64_t v)
{
	rows_k(b, key);
	rows_i(b, v);
}

/* a string, or null for NULL */
void rows_ks(struct rows_buf *b, const char *key, const char *v)
{
	rows_k(b, key);
	if (v)
		rows_js(b, v);
	else
		rows_s(b, "null");
}

void rows_kb(struct rows_buf *b, const char *key, bool v)
{
	rows_k(b, key);
	rows_s(b, v ? "true" : "false");
}

void rows_open(struct rows_buf *b, char c)
{
	if (b->n && b->p[b->n - 1] != '{' && b->p[b->n - 1] != '[' &&
	    b->p[b->n - 1] != ':')
		rows_put(b, ",", 1);
	rows_put(b, &c, 1);
}

char *rows_take(struct rows_buf *b)
{
	char *p = b->p ? b->p : strdup("");
	b->p = NULL, b->n = b->cap = 0;
	return p;
}

/* --- batch rows -------------------------------------------------------- */

static struct rows_omap *omap_find(struct rows_batch *b, uint64_t id, bool add)
{
	if (add && (b->mapn + 1) * 2 > b->mapcap) {
		size_t cap = b->mapcap ? b->mapcap * 2 : 1024;
		struct rows_omap *m = calloc(cap, sizeof *m);
		assert(m);
		for (size_t i = 0; i < b->mapcap; i++) {
			if (!b->map[i].id)
				continue;
			size_t k =
			    (b->map[i].id * 0x9E3779B97F4A7C15u) & (cap - 1);
			while (m[k].id)
				k = (k + 1) & (cap - 1);
			m[k] = b->map[i];
		}
		free(b->map);
		b->map = m, b->mapcap = cap;
	}
	if (!b->mapcap)
		return NULL;
	size_t k = (id * 0x9E3779B97F4A7C15u) & (b->mapcap - 1);
	while (b->map[k].id && b->map[k].id != id)
		k = (k + 1) & (b->mapcap - 1);
	if (b->map[k].id == id)
		return &b->map[k];
	if (!add)
		return NULL;
	b->map[k].id = id;
	b->map[k].row = SIZE_MAX;
	b->mapn++;
	return &b->map[k];
}

void rows_batch_init(struct rows_batch *b)
{
	memset(b, 0, sizeof *b);
}

void rows_batch_free(struct rows_batch *b)
{
	free(b->orders.v);
	free(b->trades.v);
	free(b->contracts.v);
	free(b->pub.v);
	for (int i = 0; i < ROWS_COLS_MAX; i++)
		pgarr_free(&b->idem.c[i]);
	free(b->pubtext.p);
	free(b->map);
	memset(b, 0, sizeof *b);
}

/* The row of order `id` in this batch, made an update row when it is an
 * order of an earlier batch. The pointer lasts until the next row. */
struct rows_order *rows_order_row(struct rows_batch *b, uint64_t id,
                                  rx_time_ns now)
{
	struct rows_omap *e = omap_find(b, id, true);
	if (e->row == SIZE_MAX) {
		struct rows_order *r = ROWS_PUSH(b->orders);
		r->id = id;
		r->status = "open";
		r->updated = now;
		e->row = b->orders.n - 1;
	}
	return &b->orders.v[e->row];
}

/* --- columns ------------------------------------------------------------ */

void rows_col_i(struct rows_cols *cs, int k, int64_t v)
{
	pgarr_i64(&cs->c[k], v);
}

static void col_null(struct rows_cols *cs, int k)
{
	pgarr_raw(&cs->c[k], "NULL");
}

/* a text element, quoted; NULL for NULL */
void rows_col_s(struct rows_cols *cs, int k, const char *v)
{
	pgarr_str(&cs->c[k], v);
}

static void col_b(struct rows_cols *cs, int k, bool v)
{
	pgarr_raw(&cs->c[k], v ? "t" : "f");
}

/* Closes the arrays and hands them out as the statement's parameters (the
 * caller frees them); n columns. */
void rows_cols_take(struct rows_cols *cs, int n, char **out)
{
	for (int k = 0; k < n; k++) {
		out[k] = pgarr_take(&cs->c[k]);
		assert(
		    out[k]); /* out of memory here is fatal, as in rows_need */
	}
	cs->rows = 0;
}

static void orow_upd(struct rows_cols *upd, const struct rows_order *r,
                     int64_t filled_add)
{
	rows_col_i(upd, 0, (int64_t)r->id);
	rows_col_i(upd, 1, r->remaining);
	rows_col_i(upd, 2, filled_add);
	rows_col_s(upd, 3, r->status);
	rows_col_s(upd, 4, r->reason);
	rows_col_i(upd, 5, r->updated);
	rows_col_s(upd, 6, r->cancelled_by);
	rows_col_s(upd, 7, r->cancel_note);
	upd->rows++;
}

void rows_event_cols(struct rows_cols *cs, const struct rows_batch *b,
                     const struct rows_event *e)
{
	rows_col_s(cs, 0, e->type);
	rows_col_i(cs, 1, e->a);
	rows_col_i(cs, 2, e->ta);
	rows_col_i(cs, 3, e->b);
	rows_col_i(cs, 4, e->tb);
	rows_col_s(cs, 5, b->pubtext.p + e->off);
	cs->rows++;
}

void rows_order_cols(struct rows_cols *ins, struct rows_cols *upd,
                     const struct rows_order *r)
{
	if (!r->is_new) {
		orow_upd(upd, r, r->filled);
		return;
	}
	/* placed and cancelled by someone in the same batch (rare): who and
	 * why go in by an update after the insert, in the same transaction,
	 * so that the insert, every order's statement, carries no column
	 * for them */
	if (r->cancelled_by)
		orow_upd(upd, r, 0);
	rows_col_i(ins, 0, (int64_t)r->id);
	rows_col_i(ins, 1, r->market_id);
	rows_col_i(ins, 2, r->account_id);
	rows_col_s(ins, 3, writer_side_name(r->side));
	rows_col_s(ins, 4, writer_tif_name(r->tif));
	rows_col_s(ins, 5, writer_stp_name(r->stp));
	col_b(ins, 6, r->post_only);
	rows_col_i(ins, 7, r->price);
	rows_col_i(ins, 8, r->pages);
	rows_col_i(ins, 9, r->remaining);
	rows_col_i(ins, 10, r->filled);
	if (r->tif == BOOK_GTD)
		rows_col_i(ins, 11, r->expires);
	else
		col_null(ins, 11);
	rows_col_s(ins, 12, r->coid[0] ? r->coid : NULL);
	rows_col_s(ins, 13, r->status);
	rows_col_s(ins, 14, r->reason);
	rows_col_i(ins, 15, r->priority);
	rows_col_i(ins, 16, r->created);
	rows_col_i(ins, 17, r->updated);
	rows_col_s(ins, 18, r->placed_by);
	rows_col_s(ins, 19, r->placed_reason);
	ins->rows++;
}

void rows_trade_cols(struct rows_cols *cs, const struct rows_trade *t)
{
	rows_col_i(cs, 0, (int64_t)t->id);
	rows_col_i(cs, 1, t->market_id);
	rows_col_i(cs, 2, t->seq);
	rows_col_i(cs, 3, (int64_t)t->taker);
	rows_col_i(cs, 4, (int64_t)t->maker);
	rows_col_i(cs, 5, t->buyer);
	rows_col_i(cs, 6, t->seller);
	rows_col_s(cs, 7, writer_side_name(t->side));
	rows_col_i(cs, 8, t->price);
	rows_col_i(cs, 9, t->pages);
	rows_col_i(cs, 10, t->ts);
	rows_col_i(cs, 11, t->maker_remaining);
	cs->rows++;
}

/* The contract row: the same values, column by column, as rows_contract_json.
 * Its trade id is its id, its timestamptz columns are made by the statement
 * from the instants in ns (parsing their text cost more than the rest of
 * the row), and what every new contract holds (its state, the instants of
 * later moves) is in the statement's text (w_ins_contracts). */
void rows_contract_cols(struct rows_cols *cs, const struct rows_contract *c)
{
	const struct contract *k = &c->k;
	assert(c->id == c->trade_id && k->created == c->now);
	rows_col_i(cs, 0, (int64_t)c->id);
	rows_col_i(cs, 1, c->m->id);
	rows_col_i(cs, 2, c->buyer);
	rows_col_i(cs, 3, c->seller);
	rows_col_s(cs, 4, contract_delivery_name(k->delivery));
	rows_col_i(cs, 5, c->pages);
	rows_col_i(cs, 6, c->price);
	rows_col_s(cs, 7, c->m->perm ? c->m->term_end : NULL);
	rows_col_i(cs, 8, c->m->notice_period_s);
	rows_col_s(cs, 9, contract_product_name(k->product));
	rows_col_i(cs, 10, k->perm_year);
	rows_col_i(cs, 11, k->breach_penalty);
	rows_col_i(cs, 12, k->recall_notice);
	rows_col_i(cs, 13, k->created);
	rows_col_i(cs, 14, k->delivery_deadline);
	rows_col_i(cs, 15, k->term_end);
	rows_col_i(cs, 16, k->changed_at);
	cs->rows++;
}

/* The order as the API shows it (the answer to POST /v1/orders). */
static void order_view(struct rows_buf *o, const struct rows_order *r,
                       const char *market)
{
	rows_open(o, '{');
	rows_ki(o, "id", (int64_t)r->id);
	rows_ki(o, "account_id", r->account_id);
	rows_ks(o, "side", writer_side_name(r->side));
	rows_ks(o, "tif", writer_tif_name(r->tif));
	rows_ks(o, "stp", writer_stp_name(r->stp));
	rows_kb(o, "post_only", r->post_only);
	rows_ki(o, "price", r->price);
	rows_ki(o, "pages", r->pages);
	rows_ki(o, "remaining", r->remaining);
	rows_ki(o, "filled", r->filled);
	rows_ks(o, "status", r->status);
	rows_ks(o, "reason", r->reason);
	rows_ki(o, "created_ns", r->created);
	rows_ki(o, "updated_ns", r->updated);
	if (r->tif == BOOK_GTD)
		rows_ki(o, "expires_ns", r->expires);
	else
		rows_ks(o, "expires_ns", NULL);
	rows_ks(o, "client_order_id", r->coid[0] ? r->coid : NULL);
	rows_ks(o, "market", market);
	rows_s(o, "}");
}

void rows_fill_view(struct rows_buf *o, const struct rows_fill *f)
{
	rows_open(o, '{');
	rows_ki(o, "trade_id", f->trade_id);
	rows_ks(o, "market", f->market);
	rows_ki(o, "price", f->price);
	rows_ki(o, "pages", f->pages);
	rows_ki(o, "taker_order_id", f->taker);
	rows_ki(o, "maker_order_id", f->maker);
	rows_ki(o, "buyer_id", f->buyer);
	rows_ki(o, "seller_id", f->seller);
	rows_ks(o, "taker_side", writer_side_name(f->side));
	rows_ki(o, "maker_remaining", f->maker_remaining);
	rows_ki(o, "taker_remaining", f->taker_remaining);
	rows_ki(o, "contract_id", f->contract_id);
	rows_s(o, "}");
}

/* The answer to a placed order: the order as placed, and the JSON texts of
 * its fills (rows_fill_view, comma-separated). A retry answered from the stored
 * rows (coid_replay) goes through this too, so both are the same text. */
char *rows_order_answer(const struct rows_order *r, const char *market,
                        const struct rows_buf *fills)
{
	struct rows_buf ans = {0};
	rows_s(&ans, "{\"order\":");
	order_view(&ans, r, market);
	rows_s(&ans, ",\"trades\":[");
	if (fills->n)
		rows_put(&ans, fills->p, fills->n);
	rows_s(&ans, "]}");
	return rows_take(&ans);
}

/* The contract event's data: the contract row, and its market's name. */
void rows_contract_json(struct rows_buf *o, const struct rows_contract *c,
                        bool market)
{
	char created[32], deliver_by[32];
	const struct contract *k = &c->k;
	rows_iso_time(c->now / 1000000000, created);
	rows_iso_time(k->delivery_deadline / 1000000000, deliver_by);
	rows_open(o, '{');
	rows_ki(o, "id", (int64_t)c->id);
	rows_ki(o, "trade_id", (int64_t)c->trade_id);
	rows_ki(o, "market_id", c->m->id);
	rows_ki(o, "buyer_id", c->buyer);
	rows_ki(o, "seller_id", c->seller);
	rows_ks(o, "delivery", contract_delivery_name(k->delivery));
	rows_ki(o, "pages", c->pages);
	rows_ki(o, "price", c->price);
	rows_ks(o, "state", "pending_delivery");
	rows_ks(o, "deliver_by", deliver_by);
	rows_ks(o, "term_end", c->m->perm ? c->m->term_end : NULL);
	rows_ki(o, "notice_period_s", c->m->notice_period_s);
	rows_ks(o, "created_at", created);
	rows_ks(o, "updated_at", created);
	rows_ks(o, "product", contract_product_name(k->product));
	rows_ki(o, "perm_year", k->perm_year);
	rows_ki(o, "breach_penalty", k->breach_penalty);
	rows_ki(o, "recall_notice_ns", k->recall_notice);
	rows_ki(o, "created_ns", k->created);
	rows_ki(o, "deliver_by_ns", k->delivery_deadline);
	rows_ki(o, "term_end_ns", k->term_end);
	rows_ki(o, "delivered_ns", 0);
	rows_ki(o, "notice_end_ns", 0);
	rows_ki(o, "ended_ns", 0);
	rows_ki(o, "changed_ns", k->changed_at);
	if (market)
		rows_ks(o, "market", c->m->name);
	rows_s(o, "}");
}

/* --- statements --------------------------------------------------------- */

/* Each takes one array per column, in the order the rows_*_cols above
 * fill them. */
const struct rows_stmt rows_stmts[ROWS_NSTMT] = {
    /* designated by id so that the order matches enum rows_stmt_id */
    [ROWS_INS_ORDERS] =
        {"w_ins_orders",
         "INSERT INTO orders (id, market_id, account_id, side, tif, stp, "
         "post_only, price, pages, remaining, filled, expires_ns, "
         "client_order_id, status, reason, priority, created_ns, updated_ns, "
         "placed_by, placed_reason) SELECT * FROM unnest($1::bigint[], "
         "$2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], "
         "$7::boolean[], $8::bigint[], $9::bigint[], $10::bigint[], "
         "$11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], "
         "$16::bigint[], $17::bigint[], $18::bigint[], $19::text[], "
         "$20::text[])",
         20, false},
    [ROWS_UPD_ORDERS] =
        {"w_upd_orders",
         "UPDATE orders o SET remaining = u.remaining, filled = o.filled + "
         "u.filled_add, status = u.status, reason = coalesce(u.reason, "
         "o.reason), updated_ns = u.updated_ns, cancelled_by = "
         "coalesce(u.cancelled_by, o.cancelled_by), cancel_note = "
         "coalesce(u.cancel_note, o.cancel_note) FROM unnest($1::bigint[], "
         "$2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], "
         "$7::text[], $8::text[]) AS u(id, remaining, filled_add, status, "
         "reason, updated_ns, cancelled_by, cancel_note) WHERE o.id = u.id",
         8, true},
    [ROWS_INS_TRADES] =
        {"w_ins_trades",
         "INSERT INTO trades (id, market_id, seq, taker_order_id, "
         "maker_order_id, buyer_id, seller_id, taker_side, price, pages, "
         "ts_ns, "
         "maker_remaining) SELECT * FROM unnest($1::bigint[], $2::bigint[], "
         "$3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], "
         "$7::bigint[], "
         "$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], "
         "$12::bigint[])",
         12, false},
    /* the timestamptz columns whole seconds of the ns ones, as
     * rows_contract_json shows them (rows_iso_time); nonnegative, so / rounds
     * down as it does */
    [ROWS_INS_CONTRACTS] =
        {"w_ins_contracts",
         "INSERT INTO contracts (id, trade_id, market_id, buyer_id, seller_id, "
         "delivery, pages, price, state, deliver_by, term_end, "
         "notice_period_s, created_at, updated_at, product, perm_year, "
         "breach_penalty, recall_notice_ns, created_ns, deliver_by_ns, "
         "term_end_ns, delivered_ns, notice_end_ns, ended_ns, changed_ns) "
         "SELECT u.id, u.id, u.market_id, u.buyer_id, u.seller_id, u.delivery, "
         "u.pages, u.price, 'pending_delivery', to_timestamp(u.deliver_by_ns / "
         "1000000000), u.term_end, u.notice_period_s, "
         "to_timestamp(u.created_ns "
         "/ 1000000000), to_timestamp(u.created_ns / 1000000000), u.product, "
         "u.perm_year, u.breach_penalty, u.recall_notice_ns, u.created_ns, "
         "u.deliver_by_ns, u.term_end_ns, 0, 0, 0, u.changed_ns FROM "
         "unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], "
         "$5::text[], $6::bigint[], $7::bigint[], $8::timestamptz[], "
         "$9::bigint[], $10::text[], $11::int[], $12::bigint[], $13::bigint[], "
         "$14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[]) AS u(id, "
         "market_id, buyer_id, seller_id, delivery, pages, price, term_end, "
         "notice_period_s, product, perm_year, breach_penalty, "
         "recall_notice_ns, created_ns, deliver_by_ns, term_end_ns, "
         "changed_ns)",
         17, false},
    /* the markets the batch touches are still this instance's: their
     * epochs unchanged, and kept so until COMMIT (schema/0017) */
    [ROWS_FENCE] = {"w_fence",
                    "SELECT market_fence($1::bigint[], $2::bigint[])", 2,
                    false},
    [ROWS_SEQ] = {"w_seq",
                  "UPDATE markets m SET seq = u.seq FROM unnest($1::bigint[], "
                  "$2::bigint[]) AS u(id, seq) WHERE m.id = u.id",
                  2, true},
    /* late: it locks event_head until the batch commits (events_db.h), so
     * it waits for the batch before, never holds it up */
    [ROWS_EVENTS] = {"w_events", EVENTS_DB_INSERT_SQL, 6, true},
    [ROWS_IDEM] =
        {"w_idem",
         "INSERT INTO idempotency (scope, key, request_sha, status, response) "
         "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], "
         "$5::text[])",
         5, false},
};
