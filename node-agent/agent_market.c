/*
 * agent_market.c — see agent_market.h.
 */
#include "node-agent/agent_market.h"

#include "common/log.h"
#include "node-agent/agent_contract.h"
#include "node-agent/exec.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *market_of(const struct agent *a, enum strategy_product p)
{
	return p == STRATEGY_PERM ? a->cfg.strat.perm_market
	                          : a->cfg.strat.spot_market;
}

/* A person paused or resumed this node's automation (GET /v1/whoami). */
void agent_market_set_paused(struct agent *a, int paused, const char *note)
{
	if (paused == a->paused)
		return;
	a->paused = paused;
	if (paused)
		log_warn("automation paused by a person: delivering and "
		         "metering, not trading",
		         "note=%s", log_quote((char[300]){0}, 300, note));
	else
		log_info("automation resumed", NULL);
}

void agent_market_refresh(struct agent *a)
{
	struct client_resp r;
	char path[128];

	a->nquotes = 0;
	if (agent_call(a, "GET", "/v1/orders?status=open&limit=200", NULL, NULL,
	               &r) == 0 &&
	    r.status == 200) {
		json_t *o;
		size_t i;
		memset(&a->others, 0, sizeof a->others);
		json_array_foreach(json_object_get(r.json, "items"), i, o)
		{
			const char *m =
			    json_string_value(json_object_get(o, "market"));
			const char *side =
			    json_string_value(json_object_get(o, "side"));
			const char *by =
			    json_string_value(json_object_get(o, "placed_by"));
			if (!m || !side)
				continue;
			if (by && strcmp(by, a->scope)) {
				/* a person's: it stands, we plan around it */
				enum strategy_product p = strncmp(m, "perm-", 5)
				                              ? STRATEGY_SPOT
				                              : STRATEGY_PERM;
				rx_pages n = json_integer_value(
				    json_object_get(o, "remaining"));
				if (!strcmp(side, "buy"))
					a->others.buy[p] += n;
				else
					a->others.sell[p] += n;
				continue;
			}
			if (a->nquotes == STRATEGY_MAX_QUOTES)
				continue;
			struct strategy_quote *q = &a->quotes[a->nquotes++];
			q->id = (uint64_t)json_integer_value(
			    json_object_get(o, "id"));
			q->product = strncmp(m, "perm-", 5) ? STRATEGY_SPOT
			                                    : STRATEGY_PERM;
			q->side =
			    strcmp(side, "buy") ? STRATEGY_SELL : STRATEGY_BUY;
			q->pages =
			    json_integer_value(json_object_get(o, "remaining"));
			q->price =
			    json_integer_value(json_object_get(o, "price"));
		}
	}
	client_resp_clear(&r);
	for (int p = 0; p < STRATEGY_NPRODUCTS; p++) {
		memset(&a->top[p], 0, sizeof a->top[p]);
		if (!market_of(a, p)[0] || !a->reachable)
			continue;
		snprintf(path, sizeof path, "/v1/markets/%s/book",
		         market_of(a, p));
		if (agent_call(a, "GET", path, NULL, NULL, &r) == 0 &&
		    r.status == 200) {
			json_t *b =
			    json_array_get(json_object_get(r.json, "bids"), 0);
			json_t *s =
			    json_array_get(json_object_get(r.json, "asks"), 0);
			a->top[p].best_bid =
			    json_integer_value(json_object_get(b, "price"));
			a->top[p].best_ask =
			    json_integer_value(json_object_get(s, "price"));
		}
		client_resp_clear(&r);
	}
}

/* Sends order b under key idem; true when its fate is known (placed or
 * refused), false when it must be sent again with the same key. */
static bool place_order(struct agent *a, json_t *b, const char *idem,
                        const char *why)
{
	struct client_resp r;
	bool known = false;
	if (agent_call(a, "POST", "/v1/orders", b, idem, &r) == 0) {
		known = r.status != 503;
		if (r.status == 201) {
			a->n_orders++;
			log_info(
			    "placed",
			    "side=%s market=%s pages=%lld price=%lld key=%s "
			    "why=%s",
			    json_string_value(json_object_get(b, "side")),
			    json_string_value(json_object_get(b, "market")),
			    (long long)json_integer_value(
			        json_object_get(b, "pages")),
			    (long long)json_integer_value(
			        json_object_get(b, "price")),
			    idem, log_quote((char[200]){0}, 200, why));
		} else if (known) {
			log_warn("order refused", "status=%ld detail=%s",
			         r.status,
			         log_quote((char[300]){0}, 300, r.detail));
		} else {
			log_warn("order not known to be placed; sending it "
			         "again with the same key",
			         "key=%s detail=%s", idem,
			         log_quote((char[300]){0}, 300, r.detail));
		}
	}
	client_resp_clear(&r);
	return known;
}

/* The order in doubt first: true when there is none (any more). */
static bool settle_pending(struct agent *a)
{
	if (!a->pending)
		return true;
	if (!place_order(a, a->pending, a->pending_key, "retry"))
		return false;
	json_decref(a->pending);
	a->pending = NULL;
	return true;
}

void agent_market_act(struct agent *a, const struct strategy_action *x,
                      rx_time_ns t)
{
	struct client_resp r;
	char path[128], idem[64];

	switch (x->kind) {
	case STRATEGY_CANCEL:
		snprintf(path, sizeof path, "/v1/orders/%" PRIu64, x->id);
		/* a cancel lost on its way back is sent again under the
		 * same key the next time the strategy asks for it */
		snprintf(idem, sizeof idem, "agent-%" PRIu64 "-c%" PRIu64,
		         spool_epoch(a->spool), x->id);
		json_t *note = json_pack("{s:s}", "note", x->reason);
		if (agent_call(a, "DELETE", path, note, idem, &r) == 0) {
			a->n_cancels++;
			log_info("cancelled", "order=%" PRIu64 " why=%s", x->id,
			         log_quote((char[200]){0}, 200, x->reason));
		}
		json_decref(note);
		client_resp_clear(&r);
		break;
	case STRATEGY_PLACE: {
		if (!settle_pending(a))
			break;
		snprintf(idem, sizeof idem, "agent-%" PRIu64 "-%" PRIu64,
		         spool_epoch(a->spool), ++a->order_seq);
		json_t *b = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s}", "market",
		                      market_of(a, x->product), "side",
		                      x->side == STRATEGY_SELL ? "sell" : "buy",
		                      "pages", (json_int_t)x->pages, "price",
		                      (json_int_t)x->price, "tif",
		                      x->tif == STRATEGY_IOC ? "ioc" : "gtc",
		                      "client_order_id", idem);
		if (!place_order(a, b, idem, x->reason)) {
			a->pending = b;
			snprintf(a->pending_key, sizeof a->pending_key, "%s",
			         idem);
			break;
		}
		json_decref(b);
		break;
	}
	case STRATEGY_RECALL:
	case STRATEGY_RELEASE: {
		/* Whole contracts: the API recalls and ends contracts, not
		 * parts of them. Pages first, then the exchange. */
		struct held *h = agent_contract_find(a, (int64_t)x->id);
		if (!h || h->tell)
			break;
		agent_contract_give_up(
		    a, h, x->kind == STRATEGY_RECALL ? "recall" : "end",
		    x->reason, t);
		break;
	}
	}
}

void agent_market_decide(struct agent *a, rx_time_ns t, int known)
{
	static struct strategy_action acts[STRATEGY_MAX_ACTIONS];
	static struct strategy_contract ks[STRATEGY_MAX_CONTRACTS];
	const char *why;
	int nk = 0;

	for (int i = 0; i < a->nheld; i++) {
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, a->held[i].id);
		/* pages still moving are the contract's too: not to sell
		 * again */
		rx_pages p = exec_held(a->ex, id);
		if (p >= 0)
			p += exec_moving(a->ex, id);
		if (p <= 0)
			continue;
		ks[nk++] = (struct strategy_contract){(uint64_t)a->held[i].id,
		                                      a->held[i].product,
		                                      a->held[i].side, p};
	}
	for (int i = 0; i < a->npend && nk < STRATEGY_MAX_CONTRACTS; i++)
		if (a->pend[i].pages > 0 &&
		    !agent_contract_find(a, (int64_t)a->pend[i].id))
			ks[nk++] = a->pend[i];
	struct strategy_input in = {.est = &a->e,
	                            .total = a->managed,
	                            .quotes = a->quotes,
	                            .nquotes = a->nquotes,
	                            .others = a->others,
	                            .contracts = ks,
	                            .ncontracts = nk};
	memcpy(in.top, a->top, sizeof in.top);
	int n = strategy_decide(&a->cfg.strat, &in, acts, &a->view, &why);
	if (n < 0) {
		log_error("strategy refused its input", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return;
	}
	if (!known)
		return; /* the view (need) is up to date; acting waits until
		         * the exchange has said who this node is */
	/* an order in doubt is settled before any new one goes out */
	settle_pending(a);
	if (a->paused) {
		/* A person took over: withdraw what we placed, place nothing.
		 * Recalls and releases still run: the workload comes first. */
		for (int i = 0; i < a->nquotes && a->reachable; i++)
			agent_market_act(
			    a,
			    &(struct strategy_action){
			        .kind = STRATEGY_CANCEL,
			        .id = a->quotes[i].id,
			        .reason = "automation paused by a person"},
			    t);
		a->nquotes = 0;
	}
	for (int i = 0; i < n; i++) {
		/* Without the exchange only the local half of a recall can
		 * run; orders wait for the next round. */
		if ((!a->reachable || a->paused) &&
		    (acts[i].kind == STRATEGY_PLACE ||
		     acts[i].kind == STRATEGY_CANCEL))
			continue;
		agent_market_act(a, &acts[i], t);
	}
}
