/*
 * ctl_trade.c — ramexctl's trading commands; see ctl_trade.h.
 */
#include "exchange/ctl/ctl_trade.h"
#include "exchange/ctl/ctl_out.h"
#include "exchange/ctl/ctl_units.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int ctl_trade_whoami(struct ctl_ctx *x, struct ctl_opts *o)
{
	(void)o;
	return ctl_call_show(x, "GET", "/v1/whoami", NULL, NULL);
}

static const char *const market_cols[] = {
    "id", "name", "product", "tick", "lot", "min_pages", "max_pages", NULL};

int ctl_trade_markets_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	(void)o;
	return ctl_call_show(x, "GET", "/v1/markets", NULL, market_cols);
}

int ctl_trade_markets_show(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path1(p, sizeof p, "/v1/markets/%s", o->pos[0]))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, NULL);
}

int ctl_trade_markets_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	json_t *b = json_pack("{s:s}", "name", o->pos[0]);
	/* defaults that make a usable market; every one can be overridden */
	static const struct {
		const char *opt, *key, *def;
		int kind; /* 0 int, 1 price, 2 pages */
	} f[] = {{"--tick", "tick", NULL, 1},
	         {"--lot", "lot", "256", 2},
	         {"--min", "min_pages", NULL, 2},
	         {"--max", "max_pages", "1048576", 2},
	         {"--price-min", "price_min", "0", 1},
	         {"--price-max", "price_max", NULL, 1},
	         {"--notice", "notice_period_s", "3600", 0},
	         {"--penalty", "breach_penalty", "0", 1},
	         {"--deadline", "delivery_deadline_s", "600", 0}};
	struct ctl_opts d = *o;
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		const char *def = f[i].def;
		if (!def && strcmp(f[i].key, "min_pages") == 0)
			def = ctl_opt(o, "--lot") ? ctl_opt(o, "--lot") : "256";
		if (!def && strcmp(f[i].key, "price_max") == 0)
			def = "1000000000";
		if (!ctl_opt(&d, f[i].opt) && def && d.n < CTL_MAX_OPTS) {
			d.name[d.n] = f[i].opt;
			d.val[d.n++] = def;
		}
		int rc = f[i].kind == 0
		             ? ctl_int_opt(&d, f[i].opt, b, f[i].key, 1)
		         : f[i].kind == 1
		             ? ctl_price_opt(&d, f[i].opt, b, f[i].key, 1)
		             : ctl_pages_opt(&d, f[i].opt, b, f[i].key, 1);
		if (rc) {
			json_decref(b);
			return rc;
		}
	}
	return ctl_call_show(x, "POST", "/v1/markets", b, NULL);
}

int ctl_trade_book(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	int64_t depth;
	json_t *j = NULL;
	if (ctl_path1(p, sizeof p, "/v1/markets/%s/book", o->pos[0]))
		return CTL_USAGE;
	if (ctl_opt(o, "--depth") &&
	    ctl_units_parse_int(ctl_opt(o, "--depth"), &depth) < 0)
		return ctl_usage_error("--depth must be a whole number");
	ctl_add_query(p, sizeof p, "depth", ctl_opt(o, "--depth"));
	int rc = ctl_call(x, "GET", p, NULL, &j);
	if (rc)
		return rc;
	if (x->json) {
		ctl_print_json(j);
	} else {
		/* asks from the highest down to the best, then bids from the
		 * best down: the spread sits in the middle, as on a screen */
		json_t *rows = json_array(), *asks = json_object_get(j, "asks");
		for (size_t i = json_array_size(asks); i-- > 0;) {
			json_t *r = json_copy(json_array_get(asks, i));
			json_object_set_new(r, "side", json_string("ask"));
			json_array_append_new(rows, r);
		}
		json_t *bids = json_object_get(j, "bids");
		for (size_t i = 0; i < json_array_size(bids); i++) {
			json_t *r = json_copy(json_array_get(bids, i));
			json_object_set_new(r, "side", json_string("bid"));
			json_array_append_new(rows, r);
		}
		static const char *const cols[] = {"side", "price", "pages",
		                                   "orders", NULL};
		printf(
		    "market %s (seq %lld)\n",
		    json_string_value(json_object_get(j, "market")),
		    (long long)json_integer_value(json_object_get(j, "seq")));
		ctl_print_table(rows, cols);
		json_decref(rows);
	}
	json_decref(j);
	return CTL_OK;
}

int ctl_trade_trades(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"id",         "price", "pages",
	                                   "taker_side", "ts_ns", NULL};
	char p[256];
	if (ctl_path1(p, sizeof p, "/v1/markets/%s/trades", o->pos[0]))
		return CTL_USAGE;
	if (ctl_add_paging(p, sizeof p, o))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, cols);
}

int ctl_trade_candles(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"start", "open",   "high",   "low",
	                                   "close", "volume", "trades", NULL};
	char p[256], f[32], t[32];
	const char *from, *to;
	if (ctl_from_to(o, 1000000000, f, t, &from, &to))
		return CTL_USAGE;
	if (ctl_path1(p, sizeof p, "/v1/markets/%s/candles", o->pos[0]))
		return CTL_USAGE;
	ctl_add_query(p, sizeof p, "interval", ctl_opt(o, "--interval"));
	ctl_add_query(p, sizeof p, "from", from ? f : NULL);
	ctl_add_query(p, sizeof p, "to", to ? t : NULL);
	if (ctl_add_int_query(p, sizeof p, "limit", o, "--limit"))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, cols);
}

static const char *const order_cols[] = {"id",
                                         "market",
                                         "account_name",
                                         "side",
                                         "price",
                                         "pages",
                                         "filled",
                                         "status",
                                         "reason",
                                         "placed_by_name",
                                         "cancelled_by_name",
                                         NULL};

/* "+90s", "+15m", "+2h", "+7d" from now, or seconds since the epoch. */
static int parse_expiry(const char *s, int64_t *ns)
{
	int64_t v;
	if (s[0] != '+')
		return ctl_units_parse_int(s, &v) < 0 ||
		               v > INT64_MAX / 1000000000
		           ? -1
		           : (*ns = v * 1000000000, 0);
	return ctl_parse_offset(s, ns);
}

/* A key for a write that has none: "ctl-" and 24 random hex digits. */
static void fresh_key(char out[32])
{
	unsigned char r[12];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		/* no randomness: time and pid are still unique enough for
		 * one person's commands */
		snprintf(out, 32, "ctl-%llx-%x", (long long)time(NULL),
		         (unsigned)getpid());
		return;
	}
	memcpy(out, "ctl-", 4);
	for (int k = 0; k < 12; k++)
		snprintf(out + 4 + 2 * k, 3, "%02x", r[k]);
}

/* A write sent under `key` got no answer, or a 5xx (the exchange lost
 * PostgreSQL: outcome-unknown or database-unavailable): the same command
 * with the same key tells what became of it, and never does it twice. */
static void retry_hint(int rc, const char *what, const char *opt_name,
                       const char *key)
{
	if (rc == CTL_UNREACHABLE)
		fprintf(stderr,
		        "hint: the %s may or may not have been carried out; "
		        "run the same command again with %s %s to learn "
		        "which (it is never carried out twice)\n",
		        what, opt_name, key);
}

int ctl_trade_orders_place(struct ctl_ctx *x, struct ctl_opts *o)
{
	json_t *b = json_object(), *j = NULL;
	const char *side = ctl_opt(o, "--side"), *tif = ctl_opt(o, "--tif");
	int rc = CTL_USAGE;
	if (!ctl_opt(o, "--market")) {
		rc = ctl_usage_error("--market is required");
		goto fail;
	}
	if (!side || (strcmp(side, "buy") && strcmp(side, "sell"))) {
		rc = ctl_usage_error("--side must be buy or sell");
		goto fail;
	}
	json_object_set_new(b, "market", json_string(ctl_opt(o, "--market")));
	json_object_set_new(b, "side", json_string(side));
	if ((rc = ctl_pages_opt(o, "--pages", b, "pages", 1)) ||
	    (rc = ctl_price_opt(o, "--price", b, "price", 1)) ||
	    (rc = ctl_int_opt(o, "--account", b, "account_id", 0)))
		goto fail;
	if (tif) {
		static const char *const tifs[] = {"gtc", "ioc", "fok", "gtd",
		                                   NULL};
		if (!ctl_in_list(tifs, tif)) {
			rc = ctl_usage_error(
			    "--tif must be gtc, ioc, fok or gtd");
			goto fail;
		}
		json_object_set_new(b, "tif", json_string(tif));
	}
	if (ctl_opt(o, "--expires")) {
		int64_t ns;
		if (parse_expiry(ctl_opt(o, "--expires"), &ns) < 0) {
			rc = ctl_usage_error(
			    "--expires is seconds since the epoch "
			    "or +N followed by s, m, h or d");
			goto fail;
		}
		json_object_set_new(b, "expires_ns", json_integer(ns));
	}
	if (ctl_opt(o, "--stp"))
		json_object_set_new(b, "stp", json_string(ctl_opt(o, "--stp")));
	if (ctl_opt(o, "--post-only"))
		json_object_set_new(b, "post_only", json_true());
	/* always a client order id, sent as the Idempotency-Key too: after
	 * a lost answer or a 503 the same command with it tells whether the
	 * order was placed (docs/operations.md, "Outages and retries") */
	char key[32];
	if (ctl_opt(o, "--client-order-id"))
		snprintf(key, sizeof key, "%.31s",
		         ctl_opt(o, "--client-order-id"));
	else
		fresh_key(key);
	const char *coid = ctl_opt(o, "--client-order-id")
	                       ? ctl_opt(o, "--client-order-id")
	                       : key;
	json_object_set_new(b, "client_order_id", json_string(coid));
	x->http.idem_key = coid;
	rc = ctl_call(x, "POST", "/v1/orders", b, &j);
	x->http.idem_key = NULL;
	retry_hint(rc, "order", "--client-order-id", coid);
	if (rc)
		goto fail;
	if (x->json) {
		ctl_print_json(j);
	} else {
		ctl_print_object(json_object_get(j, "order"));
		json_t *t = json_object_get(j, "trades");
		if (json_array_size(t) > 0) {
			static const char *const cols[] = {"price", "pages",
			                                   NULL};
			printf("\ntrades\n");
			ctl_print_table(t, cols);
		}
	}
fail:
	json_decref(j);
	json_decref(b);
	return rc;
}

int ctl_trade_orders_cancel(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	const char *note = ctl_opt(o, "--note");
	if (ctl_path_id(p, sizeof p, "/v1/orders/%s", o->pos[0], "an order id"))
		return CTL_USAGE;
	if (note && (strlen(note) == 0 || strlen(note) > 200))
		return ctl_usage_error("--note has %zu characters; 1 to 200",
		                       strlen(note));
	json_t *j = NULL, *b = note ? json_pack("{s:s}", "note", note) : NULL;
	char key[32];
	const char *k = ctl_opt(o, "--idempotency-key");
	if (!k)
		fresh_key(key), k = key;
	x->http.idem_key = k;
	int rc = ctl_call(x, "DELETE", p, b, &j);
	x->http.idem_key = NULL;
	json_decref(b);
	retry_hint(rc, "cancel", "--idempotency-key", k);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_object(json_object_get(j, "order")
		                     ? json_object_get(j, "order")
		                     : j);
	json_decref(j);
	return CTL_OK;
}

int ctl_trade_orders_reduce(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	json_t *b = json_object();
	int rc;
	if (ctl_path_id(p, sizeof p, "/v1/orders/%s/reduce", o->pos[0],
	                "an order id") ||
	    (rc = ctl_pages_opt(o, "--pages", b, "remaining", 1))) {
		json_decref(b);
		return CTL_USAGE;
	}
	json_t *j = NULL;
	char key[32];
	const char *k = ctl_opt(o, "--idempotency-key");
	if (!k)
		fresh_key(key), k = key;
	x->http.idem_key = k;
	rc = ctl_call(x, "POST", p, b, &j);
	x->http.idem_key = NULL;
	retry_hint(rc, "reduce", "--idempotency-key", k);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_object(json_object_get(j, "order")
		                     ? json_object_get(j, "order")
		                     : j);
	json_decref(j);
	return CTL_OK;
}

int ctl_trade_orders_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[512] = "/v1/orders";
	ctl_add_query(p, sizeof p, "market", ctl_opt(o, "--market"));
	ctl_add_query(p, sizeof p, "status", ctl_opt(o, "--status"));
	ctl_add_query(p, sizeof p, "side", ctl_opt(o, "--side"));
	if (ctl_add_int_query(p, sizeof p, "account_id", o, "--account"))
		return CTL_USAGE;
	if (ctl_add_paging(p, sizeof p, o))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, order_cols);
}

int ctl_trade_orders_show(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path_id(p, sizeof p, "/v1/orders/%s", o->pos[0], "an order id"))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, NULL);
}

static const char *const contract_cols[] = {
    "id",    "market", "buyer_name", "seller_name", "delivery",
    "pages", "price",  "state",      "deliver_by",  NULL};
static const char *const transition_cols[] = {
    "at_ns", "from_state", "to_state", "event", "actor", "why", NULL};

int ctl_trade_contracts_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *role = ctl_opt(o, "--role");
	char p[512] = "/v1/contracts";
	if (role && strcmp(role, "buyer") && strcmp(role, "seller"))
		return ctl_usage_error("--role must be buyer or seller");
	ctl_add_query(p, sizeof p, "state", ctl_opt(o, "--state"));
	ctl_add_query(p, sizeof p, "market", ctl_opt(o, "--market"));
	ctl_add_query(p, sizeof p, "role", role);
	if (ctl_add_int_query(p, sizeof p, "account_id", o, "--account"))
		return CTL_USAGE;
	if (ctl_add_paging(p, sizeof p, o))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, contract_cols);
}

/* The contract, then (for a person) every move it made. --json prints
 * the contract as the server sent it; `contracts transitions` has the
 * moves as JSON. */
int ctl_trade_contracts_show(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256], t[256];
	json_t *c = NULL, *tr = NULL;
	if (ctl_path_id(p, sizeof p, "/v1/contracts/%s", o->pos[0],
	                "a contract id") ||
	    ctl_path_id(t, sizeof t, "/v1/contracts/%s/transitions", o->pos[0],
	                "a contract id"))
		return CTL_USAGE;
	int rc = ctl_call(x, "GET", p, NULL, &c);
	if (rc)
		return rc;
	if (x->json) {
		ctl_print_json(c);
		goto out;
	}
	ctl_print_object(c);
	if ((rc = ctl_call(x, "GET", t, NULL, &tr)))
		goto out;
	printf("\ntransitions\n");
	ctl_print_some(json_object_get(tr, "items"), transition_cols);
out:
	json_decref(c);
	json_decref(tr);
	return rc;
}

int ctl_trade_contracts_transitions(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path_id(p, sizeof p, "/v1/contracts/%s/transitions", o->pos[0],
	                "a contract id"))
		return CTL_USAGE;
	return ctl_call_show(x, "GET", p, NULL, transition_cols);
}

/* deliver, recall, end, breach: POST with an optional note, then the
 * contract as it is now and the move that was made. */
static int contract_move(struct ctl_ctx *x, struct ctl_opts *o,
                         const char *verb)
{
	char p[256];
	const char *note = ctl_opt(o, "--note");
	json_t *b = NULL, *j = NULL;
	char fmt[64];
	snprintf(fmt, sizeof fmt, "/v1/contracts/%%s/%s", verb);
	if (ctl_path_id(p, sizeof p, fmt, o->pos[0], "a contract id"))
		return CTL_USAGE;
	if (note && strlen(note) > 200)
		return ctl_usage_error("--note has %zu characters; at most 200",
		                       strlen(note));
	if (!note && strcmp(verb, "breach") == 0)
		return ctl_usage_error(
		    "contracts breach needs --note: say why the "
		    "contract is in breach");
	b = note ? json_pack("{s:s}", "note", note) : json_object();
	int rc = ctl_call(x, "POST", p, b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json) {
		ctl_print_json(j);
	} else {
		json_t *t = json_object_get(j, "transition");
		ctl_print_object(j);
		if (json_is_object(t))
			printf(
			    "\nmoved %s -> %s (%s)\n",
			    json_string_value(json_object_get(t, "from_state")),
			    json_string_value(json_object_get(t, "to_state")),
			    json_string_value(json_object_get(t, "event")));
	}
	json_decref(j);
	return CTL_OK;
}

int ctl_trade_contracts_deliver(struct ctl_ctx *x, struct ctl_opts *o)
{
	return contract_move(x, o, "deliver");
}

int ctl_trade_contracts_recall(struct ctl_ctx *x, struct ctl_opts *o)
{
	return contract_move(x, o, "recall");
}

int ctl_trade_contracts_end(struct ctl_ctx *x, struct ctl_opts *o)
{
	return contract_move(x, o, "end");
}

int ctl_trade_contracts_breach(struct ctl_ctx *x, struct ctl_opts *o)
{
	return contract_move(x, o, "breach");
}
