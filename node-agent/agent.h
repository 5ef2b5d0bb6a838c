/*
 * agent.h — ramex-agent's state, shared by the modules of its main loop.
 *
 * The agent is one process with one thread; its state is one struct agent,
 * which agent.c (the main loop: start, the rounds, shutdown) owns and hands
 * to the modules that each own one concern of a round:
 *
 *   agent_sample    sampling, the estimator, MGLRU, probing
 *   agent_contract  the contracts held: deliver, take back, reconcile
 *   agent_lend      the lend children of lend contracts (lendsup.h)
 *   agent_market    the book, our quotes, the strategy's orders
 *   agent_report    metering cut into usage reports, spooled and sent
 *   agent_status    the status file (Prometheus text)
 *
 * A module reads any field but writes only those of its concern (the
 * counters are shared). Nothing here is a library: the modules exist to be
 * read one at a time, not reused.
 */
#ifndef RAMEX_AGENT_H
#define RAMEX_AGENT_H

#include "node-agent/client.h"
#include "node-agent/config.h"
#include "node-agent/core/meter.h"
#include "node-agent/core/probe.h"
#include "node-agent/core/strategy.h"
#include "node-agent/core/wsest.h"
#include "node-agent/events.h"
#include "node-agent/exec.h"
#include "node-agent/lendsup.h"
#include "node-agent/mglru.h"
#include "node-agent/sample.h"
#include "node-agent/spool.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct held { /* a contract of ours the exchange knows */
	int64_t id;
	enum strategy_product product;
	enum strategy_side side; /* SELL: we deliver; BUY: we receive */
	enum exec_kind kind;
	rx_pages pages; /* contract size */
	int seen;       /* in this round's listing */
	int confirmed;  /* seller: the exchange has our delivery; buyer: active
	                 */
	int metering;   /* its pages are held and metered */
	int last_unspooled; /* every page is back, but the last period could
	                     * not be spooled: it is cut again each round */
	int refused;        /* the exchange refused our delivery: stop trying */
	/* Pages given back, the exchange not yet told (recall or end): the
	 * call is retried until it answers. */
	const char *tell; /* "recall", "end" or NULL */
	/* The lend data path (lendsup.h), when this node runs one for it:
	 * the child, the page-seconds its meter file says (hosted, the
	 * pages under contract) and how many of those are reported. */
	struct lendsup_child *lc;
	int64_t notice_s; /* the contract's recall notice */
	int64_t lend_cum, lend_reported;
	int lend_real;        /* usage comes from the child's meter */
	int64_t lend_next_ms; /* when to try to start the path again */
	/* In a->draining with its meter still running (metering): the
	 * latest end its periods may have (agent_lend_finish). */
	rx_time_ns lend_tail_end;
};

struct agent {
	struct agent_config cfg;
	struct client *cl;
	struct exec *ex;
	struct wsest *est;
	struct meter *meter;
	struct spool *spool;
	struct sample_idle *idle;
	/* MGLRU: on when the kernel has it and its file reads; the memcg
	 * path lru_gen prints for our cgroup (NULL: the whole machine). */
	int mglru_on;
	char memcg[CONFIG_STR];
	char *mglru_buf;
	struct mglru_view *mg, *mg_probe; /* the last read, the one before */
	enum wsest_source source;         /* the last estimate's, for the log */
	/* Active probing: off, or through memory.reclaim or memory.high of
	 * probe_dir (the cgroup backend's cgroup, or probe_cgroup); the
	 * marker keeps memory.high to set back across a crash. */
	enum { PROBE_OFF, PROBE_RECLAIM, PROBE_HIGH } probe_on;
	char probe_dir[CONFIG_STR];
	char probe_marker[CONFIG_STR + 16];
	struct probe probe;
	rx_pages probed_pending;      /* taken since the last sample */
	rx_pages rejected_pending;    /* put in young generations unaccessed */
	rx_pages window_gain_pending; /* came into the window unwalked */
	rx_pages thp_pages;           /* of a huge page; 0: no THP */
	int64_t n_probes, probed_total;
	int64_t account;
	/* this agent's principal as orders record it (node:KEY): the orders
	 * it placed are its quotes; the account's other orders are a
	 * person's, which it plans around and never cancels */
	char scope[48]; /* key ids are nk_ and 16 hex digits */
	/* a person paused this node's automation (GET /v1/whoami): deliver
	 * and meter, withdraw our quotes, place nothing */
	int paused;
	struct strategy_others others;
	rx_pages managed;
	struct wsest_estimate e;
	struct strategy_view view;
	int nheld;
	struct held held[STRATEGY_MAX_CONTRACTS];
	/* lend contracts we bought whose seller has not delivered yet: not
	 * held (nothing to receive), but ours, so the strategy counts them
	 * and does not bid for the same pages again while they move */
	int npend;
	struct strategy_contract pend[STRATEGY_MAX_QUOTES];
	int nquotes;
	struct strategy_quote quotes[STRATEGY_MAX_QUOTES];
	struct strategy_top top[STRATEGY_NPRODUCTS];
	int reachable;
	/* the status of the last whoami that did not name our account (0:
	 * it did), so that the log says it once, not every sample */
	long whoami_bad;
	uint64_t order_seq;
	/* An order whose fate is not known: no answer came, or a 503 (the
	 * exchange could not reach PostgreSQL, or lost it while committing
	 * the order: outcome-unknown). It is sent again with the same
	 * Idempotency-Key and client_order_id before anything new is
	 * placed, so that it is placed at most once (docs/operations.md). */
	json_t *pending;
	char pending_key[64];
	/* counters for the status file */
	int64_t n_samples, n_orders, n_cancels, n_recalls, n_deliveries;
	int64_t n_lenders_lost; /* borrows ended: the lender vanished */
	rx_pages swapped;       /* the last sample's pages out of memory */
	int64_t n_reports, n_acked, n_send_fail, n_errors, n_set_aside;
	int status_errno; /* why the status file was not written last time */
	int64_t n_batches, n_reconciles;
	int warned_no_usage;
	struct events_stream *ev;
	int64_t last_list_ms; /* when the contracts were last listed */
	char
	    lend_dir[LENDSUP_PATH]; /* secrets, meters, logs of lend children */
	char lend_bin[LENDSUP_PATH]; /* where the ramex-lend-* programs are */
	int lend_device_said; /* the borrow device last logged: 1 nbd, 2 ublk */
	/* Contracts over whose lend child still runs (a lender giving
	 * notice, a bridge moving pages back), until it ends: copies of
	 * their entries, each with its child (lc); one still metering
	 * reports its child's meter until then (agent_lend_finish). */
	struct held draining[STRATEGY_MAX_CONTRACTS];
	int ndraining;
};

/* One call to the exchange; -1 when it could not be reached (logged once
 * per outage, and a->reachable follows). */
int agent_call(struct agent *a, const char *method, const char *path,
               json_t *body, const char *idem, struct client_resp *r);

/* Learns this node's account. 0 when known; -1 with err when the
 * exchange refused the key (a configuration error: stop); 0 with the
 * account still unknown when the exchange cannot be reached (ask again). */
int agent_whoami(struct agent *a, char *err, size_t errlen);

#endif
