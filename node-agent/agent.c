/*
 * agent.c — ramex-agent's main loop: the edges wired around the pure core.
 *
 * Every sample_s seconds: sample → estimate → reconcile contracts with the
 * exchange (deliver new sales, take back recalled or ended ones) → strategy
 * → orders; every report_s seconds: cut the meter, spool every report
 * (fsync), send what is pending. The machine's own workload always wins:
 * a recall gives the pages back locally first and tells the exchange after.
 * When the exchange cannot be reached the agent keeps delivering, metering
 * and spooling, and sends everything once it is back. SIGTERM/SIGINT: cancel
 * the open offers, give every page back, spool the final reports, exit.
 */
#include "common/log.h"
#include "node-agent/client.h"
#include "node-agent/config.h"
#include "node-agent/core/meter.h"
#include "node-agent/core/strategy.h"
#include "node-agent/core/wsest.h"
#include "node-agent/exec.h"
#include "node-agent/sample.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AGENT_MAX_PENDING 256 /* reports sent per round */

struct held { /* a contract of ours the exchange knows */
	int64_t id;
	enum strategy_product product;
	enum strategy_side side; /* SELL: we deliver; BUY: we receive */
	enum exec_kind kind;
	rx_pages pages; /* contract size */
	int seen;       /* in this round's listing */
};

struct agent {
	struct agent_config cfg;
	struct client *cl;
	struct exec *ex;
	struct wsest *est;
	struct meter *meter;
	struct spool *spool;
	struct sample_idle *idle;
	int64_t account;
	rx_pages managed;
	struct wsest_estimate e;
	struct strategy_view view;
	int nheld;
	struct held held[STRATEGY_MAX_CONTRACTS];
	int nquotes;
	struct strategy_quote quotes[STRATEGY_MAX_QUOTES];
	struct strategy_top top[STRATEGY_NPRODUCTS];
	int reachable;
	uint64_t order_seq;
	/* counters for the status file */
	int64_t n_samples, n_orders, n_cancels, n_recalls, n_deliveries;
	int64_t n_reports, n_acked, n_send_fail, n_errors;
	int warned_no_usage;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static rx_time_ns now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (rx_time_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *market_of(const struct agent *a, enum strategy_product p)
{
	return p == STRATEGY_PERM ? a->cfg.strat.perm_market
	                          : a->cfg.strat.spot_market;
}

static int call(struct agent *a, const char *method, const char *path,
                json_t *body, const char *idem, struct client_resp *r)
{
	char err[512];
	if (client_call(a->cl, method, path, body, idem, r, err, sizeof err) <
	    0) {
		if (a->reachable)
			log_warn("exchange unreachable; delivering, metering "
			         "and spooling locally",
			         "err=%s", log_quote((char[600]){0}, 600, err));
		a->reachable = 0;
		return -1;
	}
	if (!a->reachable)
		log_info("exchange reachable again", NULL);
	a->reachable = 1;
	return 0;
}

/* ---- sampling ---- */

static int take_sample(struct agent *a, rx_time_ns t, struct wsest_sample *s)
{
	char err[512];
	const char *why;

	if (!strcmp(a->cfg.backend, "sim")) {
		/* The sim's workload touches all of its pages: its working
		 * set is its usage, measured through the same estimator. */
		memset(s, 0, sizeof *s);
		s->t = t;
		s->active = a->cfg.sim_usage;
	} else {
		struct sample_source src = {
		    "",
		    !strcmp(a->cfg.backend, "cgroup") ? a->cfg.cgroup : NULL};
		if (sample_take(&src, t, s, NULL, err, sizeof err) < 0) {
			log_error("could not sample memory", "err=%s",
			          log_quote((char[600]){0}, 600, err));
			return -1;
		}
		if (a->idle &&
		    sample_idle_scan(a->idle, &s->idle, err, sizeof err) == 0 &&
		    s->idle.sampled > 0)
			s->has_idle = 1;
	}
	if (wsest_update(a->est, s, &a->e, &why) < 0) {
		log_error("estimator refused a sample", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return -1;
	}
	a->n_samples++;
	return 0;
}

/* ---- reports ---- */

static void spool_period(struct agent *a, const struct meter_period *p,
                         int final)
{
	struct spool_report r;
	char err[512];

	memset(&r, 0, sizeof r);
	snprintf(r.contract, sizeof r.contract, "%s", p->contract);
	r.start = p->start;
	r.end = p->end;
	r.page_seconds = p->page_seconds;
	r.carry_pns = p->carry_pns;
	r.final = final;
	if (spool_append(a->spool, &r, err, sizeof err) < 0) {
		/* Not durable means not sent: the meter keeps nothing back,
		 * so this period is lost unless the operator acts. */
		log_error("could not spool a usage report",
		          "contract=%s err=%s", p->contract,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	a->n_reports++;
}

static void send_reports(struct agent *a)
{
	static struct spool_report p[AGENT_MAX_PENDING];
	char err[512];
	int n = spool_pending(a->spool, p, AGENT_MAX_PENDING);

	if (n > AGENT_MAX_PENDING)
		n = AGENT_MAX_PENDING;
	for (int i = 0; i < n && a->reachable; i++) {
		struct client_resp r;
		json_t *b = json_pack(
		    "{s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "epoch",
		    (json_int_t)p[i].epoch, "seq", (json_int_t)p[i].seq,
		    "contract_id", (json_int_t)strtoll(p[i].contract, NULL, 10),
		    "period_start_ns", (json_int_t)p[i].start, "period_end_ns",
		    (json_int_t)p[i].end, "page_seconds",
		    (json_int_t)p[i].page_seconds, "final", p[i].final);
		int rc = call(a, "POST", "/v1/usage", b, NULL, &r);
		json_decref(b);
		if (rc < 0)
			break;
		if (r.status == 200 || r.status == 201) {
			spool_ack(a->spool, p[i].seq, err, sizeof err);
			a->n_acked++;
		} else if (r.status == 404 || r.status == 405) {
			if (!a->warned_no_usage)
				log_warn("the exchange has no usage endpoint; "
				         "reports stay in the spool",
				         "status=%ld", r.status);
			a->warned_no_usage = 1;
			client_resp_clear(&r);
			break;
		} else {
			a->n_send_fail++;
			log_warn("usage report refused; kept for resending",
			         "seq=%" PRIu64 " status=%ld detail=%s",
			         p[i].seq, r.status,
			         log_quote((char[300]){0}, 300, r.detail));
		}
		client_resp_clear(&r);
	}
	if (spool_records(a->spool) > 4096 &&
	    spool_pending(a->spool, p, 0) < 1024 &&
	    spool_compact(a->spool, err, sizeof err) < 0)
		log_warn("could not compact the spool", "err=%s",
		         log_quote((char[600]){0}, 600, err));
}

static void cut_all(struct agent *a, rx_time_ns t)
{
	struct meter_period p;
	const char *why;
	for (int i = 0; i < meter_count(a->meter); i++)
		if (meter_cut(a->meter, meter_id(a->meter, i), t, &p, &why) ==
		    0)
			spool_period(a, &p, 0);
}

/* ---- contracts ---- */

static struct held *find_held(struct agent *a, int64_t id)
{
	for (int i = 0; i < a->nheld; i++)
		if (a->held[i].id == id)
			return &a->held[i];
	return NULL;
}

/* Starts delivering (seller) or receiving (buyer) contract h. */
static void deliver(struct agent *a, struct held *h, rx_time_ns t)
{
	char id[32], err[512];
	rx_pages got = 0;
	const char *why;
	struct spool_report last;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	if (exec_take(a->ex, id, h->kind, h->pages, &got, err, sizeof err) <
	    0) {
		log_error("could not deliver", "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	/* After a restart metering resumes where the spool stopped. */
	rx_time_ns from = t;
	int64_t carry = 0;
	if (spool_last(a->spool, id, &last) == 0 && !last.final &&
	    last.end <= t) {
		from = last.end;
		carry = last.carry_pns;
	}
	if (meter_start(a->meter, id, from, got, carry, &why) < 0)
		log_error("could not meter", "contract=%s why=%s", id,
		          log_quote((char[300]){0}, 300, why));
	a->n_deliveries++;
	log_info(h->side == STRATEGY_SELL ? "delivered" : "receiving",
	         "contract=%s pages=%lld of=%lld kind=%d", id, (long long)got,
	         (long long)h->pages, h->kind);
	if (got < h->pages)
		log_warn("delivered short: memory in use",
		         "contract=%s "
		         "missing=%lld",
		         id, (long long)(h->pages - got));
}

/* Gives back up to `pages` of h (all when pages >= held); final when the
 * contract is over. */
static void take_back(struct agent *a, struct held *h, rx_pages pages,
                      rx_time_ns t, int final)
{
	char id[32], err[512];
	const char *why;
	struct meter_period p;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_pages have = exec_held(a->ex, id);
	if (have > 0 && exec_give_back(a->ex, id, pages, err, sizeof err) < 0) {
		log_error("could not give pages back", "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	rx_pages left = exec_held(a->ex, id);
	if (left < 0)
		left = 0;
	if (final || left == 0) {
		if (meter_stop(a->meter, id, t, &p, &why) == 0)
			spool_period(a, &p, 1);
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

/* Brings local contracts in line with the exchange's list. */
static void reconcile(struct agent *a, rx_time_ns t)
{
	struct client_resp r;

	if (call(a, "GET", "/v1/contracts?limit=200", NULL, NULL, &r) < 0)
		return;
	if (r.status != 200) {
		log_warn("could not list contracts", "status=%ld", r.status);
		client_resp_clear(&r);
		return;
	}
	for (int i = 0; i < a->nheld; i++)
		a->held[i].seen = 0;
	json_t *items = json_object_get(r.json, "items"), *c;
	size_t i;
	json_array_foreach(items, i, c)
	{
		int64_t id = json_integer_value(json_object_get(c, "id"));
		const char *state =
		    json_string_value(json_object_get(c, "state"));
		const char *market =
		    json_string_value(json_object_get(c, "market"));
		int64_t seller =
		    json_integer_value(json_object_get(c, "seller_id"));
		int live = state && (!strcmp(state, "pending_delivery") ||
		                     !strcmp(state, "active"));
		struct held *h = find_held(a, id);
		if (h)
			h->seen = 1;
		if (live && !h && a->nheld < STRATEGY_MAX_CONTRACTS) {
			h = &a->held[a->nheld++];
			memset(h, 0, sizeof *h);
			h->id = id;
			h->seen = 1;
			h->side =
			    seller == a->account ? STRATEGY_SELL : STRATEGY_BUY;
			h->product = market && !strncmp(market, "perm-", 5)
			                 ? STRATEGY_PERM
			                 : STRATEGY_SPOT;
			h->kind = kind_of(
			    json_string_value(json_object_get(c, "delivery")),
			    h->side);
			h->pages =
			    json_integer_value(json_object_get(c, "pages"));
			/* An offline buyer (the operator) receives nothing. */
			if (h->side == STRATEGY_BUY &&
			    strcmp(json_string_value(
			               json_object_get(c, "delivery"))
			               ? json_string_value(
			                     json_object_get(c, "delivery"))
			               : "",
			           "lend")) {
				a->nheld--;
				continue;
			}
			deliver(a, h, t);
		} else if (h && !live) {
			log_info("contract over",
			         "contract=%" PRId64 " state=%s", id,
			         state ? state : "?");
			take_back(a, h, h->pages, t, 1);
			*h = a->held[--a->nheld];
		}
	}
	client_resp_clear(&r);
}

/* The kernel took offline pages back (OOM): meter the loss. */
static void sync_losses(struct agent *a, rx_time_ns t)
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
		a->n_recalls++;
	}
}

/* ---- market ---- */

static void refresh_market(struct agent *a)
{
	struct client_resp r;
	char path[128];

	a->nquotes = 0;
	if (call(a, "GET", "/v1/orders?status=open&limit=200", NULL, NULL,
	         &r) == 0 &&
	    r.status == 200) {
		json_t *o;
		size_t i;
		json_array_foreach(json_object_get(r.json, "items"), i, o)
		{
			const char *m =
			    json_string_value(json_object_get(o, "market"));
			const char *side =
			    json_string_value(json_object_get(o, "side"));
			if (!m || !side || a->nquotes == STRATEGY_MAX_QUOTES)
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
		if (call(a, "GET", path, NULL, NULL, &r) == 0 &&
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

static void act(struct agent *a, const struct strategy_action *x, rx_time_ns t)
{
	struct client_resp r;
	char path[128], idem[64];

	switch (x->kind) {
	case STRATEGY_CANCEL:
		snprintf(path, sizeof path, "/v1/orders/%" PRIu64, x->id);
		if (call(a, "DELETE", path, NULL, NULL, &r) == 0) {
			a->n_cancels++;
			log_info("cancelled", "order=%" PRIu64 " why=%s", x->id,
			         log_quote((char[200]){0}, 200, x->reason));
		}
		client_resp_clear(&r);
		break;
	case STRATEGY_PLACE: {
		snprintf(idem, sizeof idem, "agent-%" PRIu64 "-%" PRIu64,
		         spool_epoch(a->spool), ++a->order_seq);
		json_t *b = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s}", "market",
		                      market_of(a, x->product), "side",
		                      x->side == STRATEGY_SELL ? "sell" : "buy",
		                      "pages", (json_int_t)x->pages, "price",
		                      (json_int_t)x->price, "tif",
		                      x->tif == STRATEGY_IOC ? "ioc" : "gtc",
		                      "client_order_id", idem);
		if (call(a, "POST", "/v1/orders", b, idem, &r) == 0) {
			if (r.status == 201) {
				a->n_orders++;
				log_info(
				    "placed",
				    "side=%s market=%s pages=%lld "
				    "price=%lld why=%s",
				    x->side == STRATEGY_SELL ? "sell" : "buy",
				    market_of(a, x->product),
				    (long long)x->pages, (long long)x->price,
				    log_quote((char[200]){0}, 200, x->reason));
			} else {
				log_warn(
				    "order refused", "status=%ld detail=%s",
				    r.status,
				    log_quote((char[300]){0}, 300, r.detail));
			}
		}
		json_decref(b);
		client_resp_clear(&r);
		break;
	}
	case STRATEGY_RECALL:
	case STRATEGY_RELEASE: {
		/* Pages first: the workload wins. Then the exchange. */
		struct held *h = find_held(a, (int64_t)x->id);
		if (!h)
			break;
		take_back(a, h, x->pages, t, 0);
		a->n_recalls++;
		log_warn(x->kind == STRATEGY_RECALL ? "recalled pages"
		                                    : "released borrowed pages",
		         "contract=%" PRIu64 " pages=%lld why=%s", x->id,
		         (long long)x->pages,
		         log_quote((char[200]){0}, 200, x->reason));
		snprintf(path, sizeof path, "/v1/contracts/%" PRIu64 "/recall",
		         x->id);
		json_t *b = json_pack("{s:I}", "pages", (json_int_t)x->pages);
		if (call(a, "POST", path, b, NULL, &r) == 0 && r.status >= 400)
			log_warn("exchange did not take the recall",
			         "contract=%" PRIu64 " status=%ld", x->id,
			         r.status);
		json_decref(b);
		client_resp_clear(&r);
		break;
	}
	}
}

static void decide(struct agent *a, rx_time_ns t)
{
	static struct strategy_action acts[STRATEGY_MAX_ACTIONS];
	static struct strategy_contract ks[STRATEGY_MAX_CONTRACTS];
	const char *why;
	int nk = 0;

	for (int i = 0; i < a->nheld; i++) {
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, a->held[i].id);
		rx_pages p = exec_held(a->ex, id);
		if (p <= 0)
			continue;
		ks[nk++] = (struct strategy_contract){(uint64_t)a->held[i].id,
		                                      a->held[i].product,
		                                      a->held[i].side, p};
	}
	struct strategy_input in = {.est = &a->e,
	                            .total = a->managed,
	                            .quotes = a->quotes,
	                            .nquotes = a->nquotes,
	                            .contracts = ks,
	                            .ncontracts = nk};
	memcpy(in.top, a->top, sizeof in.top);
	int n = strategy_decide(&a->cfg.strat, &in, acts, &a->view, &why);
	if (n < 0) {
		log_error("strategy refused its input", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return;
	}
	for (int i = 0; i < n; i++) {
		/* Without the exchange only the local half of a recall can
		 * run; orders wait for the next round. */
		if (!a->reachable && (acts[i].kind == STRATEGY_PLACE ||
		                      acts[i].kind == STRATEGY_CANCEL))
			continue;
		act(a, &acts[i], t);
	}
}

/* ---- status ---- */

static void write_status(struct agent *a)
{
	char tmp[CONFIG_STR + 8];
	FILE *f;

	if (!a->cfg.status_file[0])
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", a->cfg.status_file);
	if (!(f = fopen(tmp, "w")))
		return;
	static struct spool_report none[1];
	fprintf(f,
	        "# ramex-agent status (Prometheus text format)\n"
	        "ramex_agent_wss_pages %lld\n"
	        "ramex_agent_wss_err_pages %lld\n"
	        "ramex_agent_resident_pages %lld\n"
	        "ramex_agent_dydx_us_per_page_year %lld\n"
	        "ramex_agent_stall_ppm %lld\n"
	        "ramex_agent_pressure %d\n"
	        "ramex_agent_stable %d\n"
	        "ramex_agent_need_pages %lld\n"
	        "ramex_agent_sold_pages %lld\n"
	        "ramex_agent_borrowed_pages %lld\n"
	        "ramex_agent_spare_pages %lld\n"
	        "ramex_agent_ask_spot %lld\n"
	        "ramex_agent_ask_perm %lld\n"
	        "ramex_agent_bid %lld\n"
	        "ramex_agent_contracts %d\n"
	        "ramex_agent_exchange_up %d\n"
	        "ramex_agent_samples_total %lld\n"
	        "ramex_agent_orders_total %lld\n"
	        "ramex_agent_cancels_total %lld\n"
	        "ramex_agent_deliveries_total %lld\n"
	        "ramex_agent_recalls_total %lld\n"
	        "ramex_agent_reports_total %lld\n"
	        "ramex_agent_reports_acked_total %lld\n"
	        "ramex_agent_reports_pending %d\n"
	        "ramex_agent_errors_total %lld\n",
	        (long long)a->e.wss, (long long)a->e.wss_err,
	        (long long)a->e.resident, (long long)a->e.dydx,
	        (long long)a->e.stall_ppm, a->e.pressure, a->e.stable,
	        (long long)a->view.need, (long long)a->view.sold,
	        (long long)a->view.borrowed, (long long)a->view.spare,
	        (long long)a->view.ask[STRATEGY_SPOT],
	        (long long)a->view.ask[STRATEGY_PERM], (long long)a->view.bid,
	        exec_count(a->ex), a->reachable, (long long)a->n_samples,
	        (long long)a->n_orders, (long long)a->n_cancels,
	        (long long)a->n_deliveries, (long long)a->n_recalls,
	        (long long)a->n_reports, (long long)a->n_acked,
	        spool_pending(a->spool, none, 0), (long long)a->n_errors);
	for (int i = 0; i < meter_count(a->meter); i++)
		fprintf(
		    f, "ramex_agent_contract_pages{contract=\"%s\"} %lld\n",
		    meter_id(a->meter, i),
		    (long long)meter_pages(a->meter, meter_id(a->meter, i)));
	if (fclose(f) == 0)
		rename(tmp, a->cfg.status_file);
}

/* ---- start and stop ---- */

static int start(struct agent *a, char *err, size_t errlen)
{
	char secret[256];
	const char *why;
	struct client_resp r;

	if (client_read_secret(a->cfg.secret_file, secret, sizeof secret, err,
	                       errlen) < 0)
		return -1;
	a->cl = client_new(a->cfg.exchange_url, a->cfg.key_id, secret,
	                   a->cfg.ca_file, err, errlen);
	memset(secret, 0, sizeof secret);
	if (!a->cl)
		return -1;
	if (!strcmp(a->cfg.backend, "sim"))
		a->ex = exec_sim_new(a->cfg.sim_total, a->cfg.sim_usage);
	else if (!strcmp(a->cfg.backend, "cgroup"))
		a->ex = exec_cgroup_new(a->cfg.cgroup, a->cfg.cgroup_pages, err,
		                        errlen);
	else
		a->ex = exec_kmod_new(a->cfg.kmod_device, err, errlen);
	if (!a->ex)
		return -1;
	if (!(a->est = wsest_new(&a->cfg.est, &why))) {
		snprintf(err, errlen, "estimator: %s", why);
		return -1;
	}
	if (!(a->meter = meter_new())) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	a->spool = spool_open(a->cfg.spool, (uint64_t)time(NULL), err, errlen);
	if (!a->spool)
		return -1;
	if (spool_dropped(a->spool))
		log_warn("dropped a torn record at the end of the spool",
		         "bytes=%zu", spool_dropped(a->spool));
	a->managed = a->cfg.managed_pages;
	if (!a->managed && !strcmp(a->cfg.backend, "sim"))
		a->managed = a->cfg.sim_total;
	if (!a->managed && !strcmp(a->cfg.backend, "cgroup"))
		a->managed = a->cfg.cgroup_pages;
	if (!a->managed) {
		struct wsest_sample s;
		struct sample_mem m;
		struct sample_source src = {"", NULL};
		if (sample_take(&src, 1, &s, &m, err, errlen) < 0)
			return -1;
		a->managed = m.total;
	}
	if (strcmp(a->cfg.backend, "sim") && a->cfg.idle_sampling) {
		char e2[512];
		a->idle = sample_idle_new(
		    SAMPLE_PAGE_IDLE_BITMAP, 0, (uint64_t)a->managed * 5 / 4,
		    (uint64_t)a->cfg.idle_stride, e2, sizeof e2);
		if (!a->idle)
			log_info("no idle-page sampling", "why=%s",
			         log_quote((char[600]){0}, 600, e2));
	}
	a->reachable = 1;
	if (call(a, "GET", "/v1/whoami", NULL, NULL, &r) == 0) {
		if (r.status != 200) {
			snprintf(err, errlen,
			         "the exchange refused this node's "
			         "key (%ld %s): check key_id and secret_file",
			         r.status, r.detail);
			client_resp_clear(&r);
			return -1;
		}
		a->account =
		    json_integer_value(json_object_get(r.json, "account_id"));
		client_resp_clear(&r);
	}
	log_info("started",
	         "backend=%s managed_pages=%lld account=%lld "
	         "epoch=%" PRIu64 " pending_reports=%d",
	         exec_name(a->ex), (long long)a->managed, (long long)a->account,
	         spool_epoch(a->spool), spool_pending(a->spool, NULL, 0));
	return 0;
}

static void shutdown_agent(struct agent *a)
{
	char err[512];
	rx_time_ns t = now_ns();

	/* Stop selling, then give every page back before anything else. */
	for (int i = 0; i < a->nquotes && a->reachable; i++) {
		struct strategy_action x = {.kind = STRATEGY_CANCEL,
		                            .id = a->quotes[i].id,
		                            .reason = "shutting down"};
		act(a, &x, t);
	}
	if (a->ex && exec_release_all(a->ex, err, sizeof err) < 0)
		log_error("could not give every page back", "err=%s",
		          log_quote((char[600]){0}, 600, err));
	else if (a->ex)
		log_info("gave every page back", NULL);
	if (a->meter && a->spool) {
		cut_all(a, t);
		send_reports(a);
	}
	write_status(a);
	log_info("stopped", "reports_pending=%d",
	         a->spool ? spool_pending(a->spool, NULL, 0) : 0);
}

static void sleep_until(struct timespec *next, int64_t step_s)
{
	next->tv_sec += step_s;
	while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next,
	                                NULL) == EINTR)
		;
}

int main(int argc, char **argv)
{
	static struct agent a;
	char err[512];
	struct timespec next;
	struct sigaction sa;

	int rc = config_args(&a.cfg, argc, argv, err, sizeof err);
	if (rc == 1) {
		config_help(stdout);
		return 0;
	}
	if (rc < 0 || config_check(&a.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "ramex-agent: %s\n", err);
		return 2;
	}
	log_init("agent", log_level_parse(a.cfg.log_level));
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (start(&a, err, sizeof err) < 0) {
		log_error("could not start", "err=%s",
		          log_quote((char[600]){0}, 600, err));
		shutdown_agent(&a);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	int64_t last_report = 0, tick = 0;
	while (!stop) {
		rx_time_ns t = now_ns();
		struct wsest_sample s;
		take_sample(&a, t, &s);
		reconcile(&a, t);
		sync_losses(&a, t);
		if (a.reachable)
			refresh_market(&a);
		decide(&a, t);
		if ((tick - last_report) * a.cfg.sample_s >= a.cfg.report_s) {
			cut_all(&a, t);
			last_report = tick;
		}
		send_reports(&a);
		write_status(&a);
		tick++;
		sleep_until(&next, a.cfg.sample_s);
	}
	shutdown_agent(&a);
	client_free(a.cl);
	exec_close(a.ex);
	wsest_free(a.est);
	meter_free(a.meter);
	spool_close(a.spool);
	sample_idle_free(a.idle);
	return 0;
}
