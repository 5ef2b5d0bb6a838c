/*
 * agent_contract.c — see agent_contract.h.
 */
#include "node-agent/agent_contract.h"

#include "common/clock.h"
#include "common/log.h"
#include "node-agent/agent_lend.h"
#include "node-agent/agent_report.h"
#include "node-agent/core/meter.h"
#include "node-agent/events.h"
#include "node-agent/exec.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct held *agent_contract_find(struct agent *a, int64_t id)
{
	for (int i = 0; i < a->nheld; i++)
		if (a->held[i].id == id)
			return &a->held[i];
	return NULL;
}

/* Starts metering h's pages from t, or, after a restart, from where the
 * spool's last report of it stopped (unless that report was its last). */
static void start_meter(struct agent *a, struct held *h, rx_pages got,
                        rx_time_ns t)
{
	char id[32];
	const char *why;
	struct spool_report last;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_time_ns from = t;
	int64_t carry = 0;
	if (spool_last(a->spool, id, &last) == 0 && !last.final &&
	    last.end <= t) {
		from = last.end;
		carry = last.carry_pns;
	} else if (spool_last(a->spool, id, &last) == 0 && last.end > t) {
		from = last.end; /* the clock stepped back: never overlap */
	}
	if (meter_start(a->meter, id, from, got, carry, &why) < 0) {
		log_error("could not meter", "contract=%s why=%s", id,
		          log_quote((char[300]){0}, 300, why));
		a->n_errors++;
		return;
	}
	h->metering = 1;
}

/* Takes the pages of a contract we sell (offline or lent) or receive. */
static int take_pages(struct agent *a, struct held *h, rx_pages *got)
{
	char id[32], err[512];

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_pages have = exec_held(a->ex, id);
	if (have >= h->pages) {
		*got = have;
		return 0;
	}
	rx_pages more = 0;
	if (exec_take(a->ex, id, h->kind, h->pages - (have > 0 ? have : 0),
	              &more, err, sizeof err) < 0) {
		log_error("could not take the contract's pages",
		          "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return -1;
	}
	*got = (have > 0 ? have : 0) + more;
	/* still moving (a rate-limited backend) is not short */
	if (*got < h->pages && exec_moving(a->ex, id) <= 0)
		log_warn("delivered short: memory in use",
		         "contract=%s missing=%lld", id,
		         (long long)(h->pages - *got));
	return 0;
}

/* A contract move on the exchange (deliver, recall, end). 1 when the
 * exchange answered with the move made (or made before), 0 when it refused
 * it for good, -1 when it must be retried. */
int agent_contract_move(struct agent *a, int64_t id, const char *move,
                        const char *note)
{
	struct client_resp r;
	char path[128];

	snprintf(path, sizeof path, "/v1/contracts/%" PRId64 "/%s", id, move);
	json_t *b = json_pack("{s:s}", "note", note);
	int rc = agent_call(a, "POST", path, b, NULL, &r);
	json_decref(b);
	if (rc < 0)
		return -1;
	int out;
	if (r.status == 200) {
		out = 1;
	} else if (r.status == 409 || r.status == 403 || r.status == 404 ||
	           r.status == 422) {
		log_warn("the exchange refused a contract move",
		         "contract=%" PRId64 " move=%s status=%ld detail=%s",
		         id, move, r.status,
		         log_quote((char[300]){0}, 300, r.detail));
		out = 0;
	} else {
		log_warn("contract move not taken; retrying",
		         "contract=%" PRId64 " move=%s status=%ld detail=%s",
		         id, move, r.status,
		         log_quote((char[300]){0}, 300, r.detail));
		out = -1;
	}
	client_resp_clear(&r);
	return out;
}

/* Seller of a contract pending delivery: take the pages, then confirm. The
 * meter starts once the exchange has the delivery, since it counts usage
 * from then on. */
static void deliver(struct agent *a, struct held *h, rx_time_ns t)
{
	rx_pages got = 0;

	if (take_pages(a, h, &got) < 0 || got == 0)
		return;
	/* a lend's server is up and registered before the buyer hears of
	 * the delivery (agent_lend_tick retries when this fails) */
	agent_lend_deliver(a, h);
	int rc =
	    agent_contract_move(a, h->id, "deliver", "ramex-agent: pages out");
	if (rc < 0)
		return; /* pages stay out; confirmed at the next round */
	if (rc == 0) {
		/* Too late or no longer ours: the contract's next listing
		 * (breached, ended) gives the pages back. */
		h->refused = 1;
		return;
	}
	h->confirmed = 1;
	start_meter(a, h, got, t);
	a->n_deliveries++;
	log_info("delivered", "contract=%" PRId64 " pages=%lld of=%lld kind=%d",
	         h->id, (long long)got, (long long)h->pages, h->kind);
}

/* Gives back up to `pages` of h (all when pages >= held); the period is
 * the contract's last when every page is back. */
void agent_contract_take_back(struct agent *a, struct held *h, rx_pages pages,
                              rx_time_ns t)
{
	char id[32], err[512];
	const char *why;
	struct meter_period p;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_pages have = exec_held(a->ex, id);
	/* held but nothing moved yet: giving back stops the move */
	if (have >= 0 &&
	    exec_give_back(a->ex, id, pages, err, sizeof err) < 0) {
		log_error("could not give pages back", "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	rx_pages left = exec_held(a->ex, id);
	if (left < 0)
		left = 0;
	/* its meter's last reading, below, or once its child ended */
	if (left == 0 && agent_lend_finish(a, h, t))
		return;
	if (!h->metering)
		return;
	if (left == 0) {
		if (meter_stop(a->meter, id, t, &p, &why) == 0) {
			agent_lend_adjust(a, h, &p);
			if (agent_report_spool(a, h, &p, 0, 1) < 0 &&
			    meter_pages(a->meter, id) >= 0) {
				/* back in the meter: the next round's cut
				 * spools it (agent_report_cut_all) */
				h->last_unspooled = 1;
				return;
			}
		}
		h->metering = 0;
	} else {
		meter_set(a->meter, id, t, left, &why);
	}
}

static int kind_of(const char *delivery, enum strategy_side side)
{
	if (side == STRATEGY_BUY)
		return EXEC_BORROW;
	return delivery && !strcmp(delivery, "lend") ? EXEC_LEND : EXEC_OFFLINE;
}

static void drop_held(struct agent *a, struct held *h)
{
	agent_lend_drop(h);
	*h = a->held[--a->nheld];
}

/* One listed contract. */
static void reconcile_one(struct agent *a, json_t *c, rx_time_ns t)
{
	int64_t id = json_integer_value(json_object_get(c, "id"));
	const char *state = json_string_value(json_object_get(c, "state"));
	const char *market = json_string_value(json_object_get(c, "market"));
	const char *delivery =
	    json_string_value(json_object_get(c, "delivery"));
	int64_t seller = json_integer_value(json_object_get(c, "seller_id"));
	int64_t buyer = json_integer_value(json_object_get(c, "buyer_id"));
	int pending = state && !strcmp(state, "pending_delivery");
	int active = state && !strcmp(state, "active");
	struct held *h = agent_contract_find(a, id);

	if (!pending && !active)
		return; /* over: handled as "not seen" */
	if (seller != a->account && buyer != a->account)
		return;
	/* An offline buyer (the operator) receives nothing; a lend buyer
	 * receives once the seller delivered. */
	if (seller != a->account &&
	    (!delivery || strcmp(delivery, "lend") || !active)) {
		if (pending && delivery && !strcmp(delivery, "lend") &&
		    a->npend < STRATEGY_MAX_QUOTES)
			a->pend[a->npend++] = (struct strategy_contract){
			    (uint64_t)id, STRATEGY_SPOT, STRATEGY_BUY,
			    json_integer_value(json_object_get(c, "pages"))};
		return;
	}
	if (!h) {
		if (a->nheld == STRATEGY_MAX_CONTRACTS) {
			log_error("too many contracts to hold; not delivering",
			          "contract=%" PRId64, id);
			return;
		}
		h = &a->held[a->nheld++];
		memset(h, 0, sizeof *h);
		h->id = id;
		h->side = seller == a->account ? STRATEGY_SELL : STRATEGY_BUY;
		h->product = market && !strncmp(market, "perm-", 5)
		                 ? STRATEGY_PERM
		                 : STRATEGY_SPOT;
		h->kind = kind_of(delivery, h->side);
		h->pages = json_integer_value(json_object_get(c, "pages"));
		h->notice_s =
		    json_integer_value(json_object_get(c, "notice_period_s"));
	}
	h->seen = 1;
	if (h->tell)
		return; /* given back; the exchange is told below */
	if (h->side == STRATEGY_SELL && pending && !h->confirmed) {
		if (!h->refused)
			deliver(a, h, t);
	} else if (!h->metering) {
		/* Active and not held here: a buyer's new lend, or our own
		 * contract after a restart (metering resumes from the spool).
		 */
		rx_pages got = 0;
		if (take_pages(a, h, &got) == 0 && got > 0) {
			h->confirmed = 1;
			start_meter(a, h, got, t);
			a->n_deliveries++;
			log_info(h->side == STRATEGY_SELL ? "delivering"
			                                  : "receiving",
			         "contract=%" PRId64 " pages=%lld", id,
			         (long long)got);
		}
	}
}

static int list_contracts(struct agent *a, const char *state, rx_time_ns t)
{
	struct client_resp r;
	char path[128];
	int64_t before = INT64_MAX;

	/* 500 a page, newest first: an agent may hold far more */
	for (;;) {
		snprintf(path, sizeof path,
		         "/v1/contracts?state=%s&limit=500&before=%" PRId64,
		         state, before);
		if (agent_call(a, "GET", path, NULL, NULL, &r) < 0)
			return -1;
		if (r.status != 200) {
			log_warn("could not list contracts",
			         "status=%ld detail=%s", r.status,
			         log_quote((char[300]){0}, 300, r.detail));
			client_resp_clear(&r);
			return -1;
		}
		json_t *c, *items = json_object_get(r.json, "items");
		size_t i, n = json_array_size(items);
		json_array_foreach(items, i, c)
		{
			int64_t id =
			    json_integer_value(json_object_get(c, "id"));
			if (id > 0 && id < before)
				before = id;
			reconcile_one(a, c, t);
		}
		client_resp_clear(&r);
		if (n < 500 || before <= 1)
			return 0;
	}
}

/* Brings local contracts in line with the exchange's: deliver what we
 * sold, receive what we borrowed, give back what is over, and tell the
 * exchange about pages we took back while it could not hear us. */
void agent_contract_reconcile(struct agent *a, rx_time_ns t)
{
	for (int i = 0; i < a->nheld; i++)
		a->held[i].seen = 0;
	a->npend = 0;
	if (list_contracts(a, "pending_delivery", t) < 0 ||
	    list_contracts(a, "active", t) < 0)
		return; /* without the whole picture, change nothing */
	/* whether a person paused us: read with the contracts, so on every
	 * event (an "automation" event among them) and every poll_s */
	char err[512];
	if (agent_whoami(a, err, sizeof err) < 0)
		log_warn("could not read the automation state", "err=%s",
		         log_quote((char[600]){0}, 600, err));
	a->n_reconciles++;
	a->last_list_ms = clock_mono_ms();
	for (int i = 0; i < a->nheld;) {
		struct held *h = &a->held[i];
		if (!h->seen) {
			/* recalling, ended or breached: the contract is over
			 * for the pages (a recall's notice is the buyer's
			 * time to move out, not ours to keep delivering). */
			if (!h->tell)
				log_info("contract over", "contract=%" PRId64,
				         h->id);
			agent_contract_take_back(a, h, h->pages, t);
			drop_held(a, h);
			continue;
		}
		if (h->tell &&
		    agent_contract_move(a, h->id, h->tell,
		                        "ramex-agent: pages taken back") >= 0) {
			drop_held(a, h);
			continue;
		}
		i++;
	}
}

/* Takes every page of h back, then tells the exchange (`move`: recall
 * for a sale, end for a borrow). The workload wins: the pages come back
 * whether or not the exchange can be told now. */
void agent_contract_give_up(struct agent *a, struct held *h, const char *move,
                            const char *why, rx_time_ns t)
{
	if (h->side == STRATEGY_SELL && !h->confirmed) {
		/* A sale still moving (pending delivery): the exchange
		 * recalls only a delivered contract, so deliver what has
		 * moved, then recall it. With nothing out yet the move
		 * stops, and the contract ends at its delivery deadline. */
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, h->id);
		if (!h->refused && exec_held(a->ex, id) > 0)
			deliver(a, h, t);
		if (!h->confirmed) {
			agent_contract_take_back(a, h, h->pages, t);
			h->refused = 1;
			log_warn("gave up a sale before its delivery",
			         "contract=%" PRId64 " why=%s", h->id,
			         log_quote((char[200]){0}, 200, why));
			return;
		}
	}
	agent_contract_take_back(a, h, h->pages, t);
	h->tell = move;
	a->n_recalls++;
	log_warn(!strcmp(move, "recall") ? "recalled a contract"
	                                 : "ended a borrowed contract",
	         "contract=%" PRId64 " pages=%lld why=%s", h->id,
	         (long long)h->pages, log_quote((char[200]){0}, 200, why));
	if (agent_contract_move(a, h->id, move, why) >= 0)
		drop_held(a, h);
}

/* Moves take time (exec_set_rates: the sim at the real path's rates): every
 * sample, the pages moved since are delivered (a sale's first pages), and
 * metered (the meter follows what has moved, so usage is only ever the
 * pages actually out). */
void agent_contract_moving_tick(struct agent *a, rx_time_ns t)
{
	char err[512];
	const char *why;

	if (exec_advance(a->ex, t, err, sizeof err) < 0) {
		log_error("could not move pages", "err=%s",
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	for (int i = 0; i < a->nheld; i++) {
		struct held *h = &a->held[i];
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, h->id);
		rx_pages have = exec_held(a->ex, id);
		if (h->tell || have <= 0)
			continue;
		if (h->side == STRATEGY_SELL && !h->confirmed) {
			if (!h->refused && a->account)
				deliver(a, h, t);
		} else if (!h->metering) {
			h->confirmed = 1;
			start_meter(a, h, have, t);
			a->n_deliveries++;
			log_info("receiving", "contract=%" PRId64 " pages=%lld",
			         h->id, (long long)have);
		} else if (meter_pages(a->meter, id) != have) {
			meter_set(a->meter, id, t, have, &why);
			if (exec_moving(a->ex, id) == 0)
				log_info("moved",
				         "contract=%" PRId64
				         " pages=%lld of=%lld",
				         h->id, (long long)have,
				         (long long)h->pages);
		}
	}
}

/* The kernel took offline pages back (OOM): meter the loss. */
void agent_contract_sync_losses(struct agent *a, rx_time_ns t)
{
	static struct exec_loss lost[EXEC_MAX_CONTRACTS];
	char err[512];
	const char *why;
	int n = exec_sync(a->ex, lost, err, sizeof err);
	for (int i = 0; i < n; i++) {
		rx_pages left = exec_held(a->ex, lost[i].id);
		meter_set(a->meter, lost[i].id, t, left < 0 ? 0 : left, &why);
		log_warn("the kernel took pages back", "contract=%s pages=%lld",
		         lost[i].id, (long long)lost[i].pages);
		/* A contract cannot be delivered in part: the rest comes back
		 * too and the exchange hears of a recall. */
		struct held *h =
		    agent_contract_find(a, strtoll(lost[i].id, NULL, 10));
		if (h && h->side == STRATEGY_SELL && !h->tell)
			agent_contract_give_up(a, h, "recall",
			                       "the kernel took pages back", t);
	}
}
