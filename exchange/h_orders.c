/* h_orders.c — orders; see handlers.h (contracts are h_contracts.c).
 *
 * Writes (place, cancel, reduce) go to the writer and are answered after
 * their batch committed: their routes are inline (http.h), and the request
 * is parked (http_defer) while its command waits for the batch, so that a
 * thousand orders in flight hold no thread each. Reads go to the database
 * through the pool, scoped to what the caller may see (handlers_scope). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sign.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/owner.h"
#include "exchange/writer.h"

/* Orders in one POST /v1/orders/batch: enough to share a group commit,
 * few enough that one answer stays small (~1 KiB an order). */
#define ORDERS_BATCH_MAX 100

/* Fills what every writer command carries: who asks, and the keys that
 * make a retry idempotent. Returns -1 after replying 400. */
static int cmd_init(struct http_req *rq, struct writer_cmd *c,
                    enum writer_kind kind)
{
	const struct auth_principal *p = http_principal(rq);
	memset(c, 0, sizeof *c);
	c->kind = kind;
	c->role = p->role;
	c->p_account = p->account_id;
	c->p_team = p->team_id;
	snprintf(c->p_scope, sizeof c->p_scope, "%s", p->scope);
	const char *key = http_header(rq, "Idempotency-Key");
	if (key) {
		size_t n = strlen(key);
		int ok = n >= 1 && n < sizeof c->idem_key;
		for (size_t i = 0; ok && i < n; i++)
			ok = key[i] > 0x20 && key[i] < 0x7f;
		if (!ok) {
			http_problem(
			    rq, 400, "invalid-header",
			    "invalid Idempotency-Key",
			    "Idempotency-Key must be 1 to 128 printable "
			    "ASCII characters without spaces");
			return -1;
		}
		memcpy(c->idem_key, key, n + 1);
	}
	size_t blen;
	const char *body = http_body(rq, &blen);
	/* "METHOD\nTARGET\nBODY", without snprintf: this runs for every
	 * order, and formatting cost more than copying */
	const char *m = http_method(rq), *t = http_target(rq);
	size_t ml = strlen(m), tl = strlen(t);
	char *buf = malloc(ml + tl + 2 + blen);
	if (!buf) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		return -1;
	}
	memcpy(buf, m, ml);
	buf[ml] = '\n';
	memcpy(buf + ml + 1, t, tl);
	buf[ml + 1 + tl] = '\n';
	memcpy(buf + ml + tl + 2, body, blen);
	sign_sha256_hex(buf, ml + tl + 2 + blen, c->req_sha);
	free(buf);
	return 0;
}

/* The command's answer is in (writer thread): wake the request. */
static void on_answer(struct writer_cmd *c, void *rq)
{
	(void)c;
	http_resume(rq);
}

/* On an HTTP thread again: reply with the answer. */
static void reply(struct http_req *rq, void *arg)
{
	struct writer_cmd *c = arg;
	if (c->retry_after)
		http_add_header(rq, "Retry-After", "2");
	if (c->replayed)
		http_add_header(rq, "Idempotent-Replayed", "true");
	if (c->status == 307)
		handlers_redirect(rq, c->redirect);
	const char *body = c->body ? c->body : "{}";
	http_reply_raw(rq, c->status,
	               c->status >= 300 ? "application/problem+json"
	                                : "application/json",
	               body, strlen(body));
	free(c->body);
	free(c);
}

/* Hands a copy of *c to the writer and parks the request until its batch
 * committed or failed. */
static void submit_reply(struct http_req *rq, const struct writer_cmd *c)
{
	struct app *a = http_app(rq);
	struct writer_cmd *h = malloc(sizeof *h);
	if (!h) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		return;
	}
	*h = *c;
	http_defer(rq, reply, h);
	writer_submit_async(a->writer, h, on_answer, rq);
}

/* Reads one new order from object b into c (cmd_init'ed). Returns -1
 * after replying 400. */
static int order_parse(struct http_req *rq, json_t *b, struct writer_cmd *c)
{
	static const char *const known[] = {"market",     "account_id",
	                                    "side",       "pages",
	                                    "price",      "tif",
	                                    "stp",        "post_only",
	                                    "expires_ns", "client_order_id",
	                                    NULL};
	char side[8], tif[8] = "gtc", stp[16] = "cancel_taker";
	int64_t account = 0, expires = 0;
	if (!json_is_object(b)) {
		http_problem(rq, 400, "bad-json", "JSON object expected",
		             "an order must be a JSON object");
		return -1;
	}
	if (in_known(rq, b, known) < 0 ||
	    in_str(rq, b, "market", true, true, c->market, sizeof c->market) <
	        0 ||
	    in_int(rq, b, "account_id", false, 1, IN_ID_MAX, &account) < 0 ||
	    in_str(rq, b, "side", true, true, side, sizeof side) < 0 ||
	    in_int(rq, b, "pages", true, 1, IN_PAGES_MAX, &c->pages) < 0 ||
	    in_int(rq, b, "price", true, 0, IN_PRICE_MAX, &c->price) < 0 ||
	    in_str(rq, b, "tif", false, true, tif, sizeof tif) < 0 ||
	    in_str(rq, b, "stp", false, true, stp, sizeof stp) < 0 ||
	    in_bool(rq, b, "post_only", &c->post_only) < 0 ||
	    in_int(rq, b, "expires_ns", false, 1, IN_TIME_NS_MAX, &expires) <
	        0 ||
	    in_str(rq, b, "client_order_id", false, true, c->client_order_id,
	           sizeof c->client_order_id) < 0)
		return -1;
	if (writer_side_parse(side, &c->side) < 0) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "side: must be buy or sell");
		return -1;
	}
	if (writer_tif_parse(tif, &c->tif) < 0) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "tif: must be gtc, ioc, fok or gtd");
		return -1;
	}
	if (writer_stp_parse(stp, &c->stp) < 0) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "stp: must be cancel_taker, cancel_maker or "
		             "cancel_both");
		return -1;
	}
	if ((c->tif == BOOK_GTD) != (expires != 0)) {
		http_problem(
		    rq, 400, "invalid-field", "invalid field",
		    "expires_ns: required with tif gtd, and only then");
		return -1;
	}
	c->account = account;
	c->expires = expires;
	return 0;
}

void h_order_place(struct http_req *rq)
{
	struct writer_cmd c;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (cmd_init(rq, &c, WR_NEW) == 0 && order_parse(rq, b, &c) == 0)
		submit_reply(rq, &c);
	json_decref(b);
}

/* --- POST /v1/orders/batch ------------------------------------------------ */

/* A batch in flight: its commands go to the writer together, so they
 * share group commits, and the request is answered once the last one is. */
struct batch {
	atomic_int left;
	int n;
	struct http_req *rq;
	struct writer_cmd cmds[];
};

static void batch_on_answer(struct writer_cmd *c, void *arg)
{
	struct batch *b = arg;
	(void)c;
	if (atomic_fetch_sub(&b->left, 1) == 1)
		http_resume(b->rq);
}

/* {"results":[{"status":201,"body":{...}}, ...]} in the orders' order;
 * each body is the writer's answer text, as POST /v1/orders gives it. */
static void batch_reply(struct http_req *rq, void *arg)
{
	struct batch *b = arg;
	size_t cap = 32;
	for (int i = 0; i < b->n; i++)
		cap += 64 + (b->cmds[i].body ? strlen(b->cmds[i].body) : 2);
	char *out = malloc(cap);
	if (out) {
		size_t k = (size_t)snprintf(out, cap, "{\"results\":[");
		for (int i = 0; i < b->n; i++) {
			const struct writer_cmd *c = &b->cmds[i];
			k += (size_t)snprintf(
			    out + k, cap - k, "%s{\"status\":%d,%s\"body\":%s}",
			    i ? "," : "", c->status,
			    c->replayed ? "\"replayed\":true," : "",
			    c->body ? c->body : "{}");
		}
		snprintf(out + k, cap - k, "]}");
		http_reply_raw(rq, 200, "application/json", out, strlen(out));
		free(out);
	} else {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "the answers of this batch could not be written; "
		             "retry it: each order's client_order_id answers "
		             "it again without placing it twice");
	}
	for (int i = 0; i < b->n; i++)
		free(b->cmds[i].body);
	free(b);
}

/* A batch whose orders are for markets served elsewhere (owner.h): the
 * writer answers each order alone, and one answer must carry them all, so
 * the batch is sent on whole, to the one instance serving all its
 * markets (307), or refused when they are served by several. 0 when it
 * is carried out here; -1 after replying. */
static int batch_route(struct http_req *rq, struct app *a,
                       const struct writer_cmd *cmds, int n)
{
	char url[OWNER_URL_MAX], first[OWNER_URL_MAX] = "";
	int here = 0, nobody = 0, elsewhere = 0;
	bool split = false;
	if (!a->owner)
		return 0;
	for (int i = 0; i < n; i++) {
		switch (
		    owner_where(a->owner, cmds[i].market, 0, url, sizeof url)) {
		case OWNER_HERE:
		case OWNER_UNKNOWN: /* the writer answers 404 */
			here++;
			break;
		case OWNER_NOBODY:
			nobody++;
			break;
		case OWNER_ELSEWHERE:
			if (!elsewhere++)
				snprintf(first, sizeof first, "%s", url);
			else if (strcmp(first, url) != 0)
				split = true;
			break;
		}
	}
	if (!nobody && !elsewhere)
		return 0;
	if (nobody) {
		http_add_header(rq, "Retry-After", "2");
		http_problem(rq, 503, "market-unavailable",
		             "market not served now",
		             "no exchange instance serves a market of this "
		             "batch at this moment (its owner stopped and "
		             "another is taking it over); retry in a few "
		             "seconds: each order's client_order_id keeps it "
		             "placed once");
	} else if (here || split) {
		http_problem(rq, 409, "split-batch",
		             "markets served by several instances",
		             "the orders of this batch are for markets served "
		             "by different exchange instances; send each "
		             "market's orders in a batch of their own");
	} else {
		handlers_redirect(rq, first);
		http_problem(rq, 307, "not-owner", "markets served elsewhere",
		             "the markets of this batch are served by the "
		             "exchange instance at %s: send the batch there "
		             "(Location)",
		             first);
	}
	return -1;
}

void h_order_batch(struct http_req *rq)
{
	struct app *a = http_app(rq);
	static const char *const known[] = {"orders", NULL};
	struct writer_cmd tmpl;
	struct batch *bt = NULL;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (http_header(rq, "Idempotency-Key")) {
		http_problem(
		    rq, 400, "invalid-header", "no Idempotency-Key on a batch",
		    "a batch takes no Idempotency-Key: give each order "
		    "a client_order_id, and a retried batch is "
		    "answered order by order without placing any "
		    "twice");
		goto out;
	}
	json_t *orders = json_object_get(b, "orders");
	if (in_known(rq, b, known) < 0)
		goto out;
	if (!json_is_array(orders) || json_array_size(orders) == 0 ||
	    json_array_size(orders) > ORDERS_BATCH_MAX) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "orders: must be an array of 1 to %d orders",
		             ORDERS_BATCH_MAX);
		goto out;
	}
	if (cmd_init(rq, &tmpl, WR_NEW) < 0)
		goto out;
	int n = (int)json_array_size(orders);
	bt = calloc(1, sizeof *bt + (size_t)n * sizeof bt->cmds[0]);
	if (!bt) {
		http_problem(rq, 503, "overloaded", "out of memory",
		             "retry later");
		goto out;
	}
	/* every order is checked before any is placed: a bad one refuses the
	 * whole batch, and changes nothing */
	for (int i = 0; i < n; i++) {
		char pre[32];
		snprintf(pre, sizeof pre, "orders[%d]: ", i);
		http_problem_prefix(rq, pre);
		bt->cmds[i] = tmpl;
		if (order_parse(rq, json_array_get(orders, (size_t)i),
		                &bt->cmds[i]) < 0)
			goto out;
	}
	http_problem_prefix(rq, NULL);
	if (batch_route(rq, a, bt->cmds, n) < 0)
		goto out;
	bt->n = n;
	bt->rq = rq;
	atomic_init(&bt->left, n);
	http_defer(rq, batch_reply, bt);
	for (int i = 0; i < n; i++)
		writer_submit_async(a->writer, &bt->cmds[i], batch_on_answer,
		                    bt);
	bt = NULL; /* batch_reply frees it */
out:
	free(bt);
	json_decref(b);
}

_Static_assert(sizeof(((struct writer_cmd *)0)->note) == IN_NOTE_BUF,
               "writer_cmd's note holds in_note's 200 characters");

/* An optional body {"note": "why"}: kept with the order beside who
 * cancelled it, for the person who placed it to read. */
void h_order_cancel(struct http_req *rq)
{
	static const char *const known[] = {"note", NULL};
	struct writer_cmd c;
	int64_t id;
	size_t blen = 0;
	json_t *b = NULL;
	if (in_pid(rq, "id", &id) < 0 || cmd_init(rq, &c, WR_CANCEL) < 0)
		return;
	http_body(rq, &blen);
	if (blen > 0) {
		if (!(b = http_body_object(rq)))
			return;
		if (in_known(rq, b, known) < 0 ||
		    in_note(rq, b, c.note) < 0)
			goto out;
	}
	c.order_id = (uint64_t)id;
	submit_reply(rq, &c);
out:
	json_decref(b);
}

void h_order_reduce(struct http_req *rq)
{
	static const char *const known[] = {"remaining", NULL};
	struct writer_cmd c;
	int64_t id;
	json_t *b = NULL;
	if (in_pid(rq, "id", &id) < 0)
		return;
	if (!(b = http_body_object(rq)))
		return;
	if (cmd_init(rq, &c, WR_REDUCE) < 0 || in_known(rq, b, known) < 0 ||
	    in_int(rq, b, "remaining", true, 1, IN_PAGES_MAX, &c.pages) < 0)
		goto out;
	c.order_id = (uint64_t)id;
	submit_reply(rq, &c);
out:
	json_decref(b);
}

static void rows(struct http_req *rq, const char *sql, int n,
                 const char *const *pv, int single, int64_t limit)
{
	handlers_query(rq, sql, n, pv, single, limit, "id",
	               "there is no such object that you may see");
}

/* Who placed and who cancelled an order: the principal (tok:ID for a
 * person's token, node:KEY for a node's agent) and its name as a person
 * reads it: the token's name and role, or "agent of NODE". */
#define WHO_NAME(col)                                                          \
	"CASE WHEN " col " LIKE 'tok:%' THEN (SELECT t.name || ' (' || "       \
	"t.role || ')' FROM api_tokens t WHERE t.id::text = substr(" col       \
	", 5)) WHEN " col " LIKE 'node:%' THEN (SELECT 'agent of ' || "         \
	"na.name FROM node_keys k JOIN accounts na ON na.id = k.account_id "   \
	"WHERE k.key_id = substr(" col ", 6)) END"

#define ORDER_SELECT                                                           \
	"SELECT o.id, m.name AS market, o.account_id, oa.name AS "             \
	"account_name, o.side, o.tif, o.stp, "                                 \
	"o.post_only, o.price, o.pages, o.remaining, o.filled, o.status, "     \
	"o.reason, o.client_order_id, o.expires_ns, o.created_ns, "            \
	"o.updated_ns, o.placed_by, " WHO_NAME("o.placed_by")                  \
	" AS placed_by_name, o.placed_by LIKE 'node:%' AS by_agent, "          \
	"o.cancelled_by, " WHO_NAME("o.cancelled_by") " AS cancelled_by_name, " \
	"o.cancel_note FROM orders o JOIN markets m ON m.id = o.market_id "    \
	"JOIN accounts oa ON oa.id = o.account_id "                            \
	"WHERE ($1::bigint IS NULL OR o.account_id = $1) AND ($2::bigint IS "  \
	"NULL OR o.account_id IN (SELECT id FROM accounts WHERE team_id = "    \
	"$2)) "

static const char *nz(const char *s)
{
	return s && *s ? s : NULL;
}

void h_order_get(struct http_req *rq)
{
	char acct[24], team[24], ids[24];
	int64_t id;
	if (in_pid(rq, "id", &id) < 0)
		return;
	handlers_scope(rq, 0, acct, team);
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *pv[] = {nz(acct), nz(team), ids};
	rows(rq, ORDER_SELECT "AND o.id = $3", 3, pv, 1, 0);
}

void h_order_list(struct http_req *rq)
{
	static const char *const statuses[] = {"open", "filled", "cancelled",
	                                       "expired", NULL};
	static const char *const sides[] = {"buy", "sell", NULL};
	char acct[24], team[24], ls[24], bs[24], as[24];
	int64_t limit = 100, before = INT64_MAX, account = 0;
	const char *status = NULL, *side = NULL;
	const char *market = http_query(rq, "market");
	if (in_qint(rq, "limit", 1, 500, &limit) < 0 ||
	    in_qint(rq, "before", 1, INT64_MAX, &before) < 0 ||
	    in_qint(rq, "account_id", 1, INT64_MAX, &account) < 0 ||
	    in_qenum(rq, "status", statuses, &status) < 0 ||
	    in_qenum(rq, "side", sides, &side) < 0)
		return;
	handlers_scope(rq, 0, acct, team);
	snprintf(ls, sizeof ls, "%lld", (long long)limit);
	snprintf(bs, sizeof bs, "%lld", (long long)before);
	snprintf(as, sizeof as, "%lld", (long long)account);
	const char *pv[] = {nz(acct), nz(team), market,
	                    status,   side,     account ? as : NULL,
	                    bs,       ls};
	rows(rq,
	     ORDER_SELECT
	     "AND ($3::text IS NULL OR m.name = $3) AND ($4::text "
	     "IS NULL OR o.status = $4) AND ($5::text IS NULL OR "
	     "o.side = $5) AND ($6::bigint IS NULL OR o.account_id "
	     "= $6) AND o.id < $7 ORDER BY o.id DESC LIMIT $8",
	     8, pv, 0, limit);
}
