/*
 * agent_lend.h — the data path of lend contracts, supervised: a seller
 * registers its endpoint and runs ramex-lend-server, a buyer runs
 * ramex-lend-nbd towards the lender (lendsup.h starts, restarts and stops
 * them); their meter files become the contracts' usage; a lender given
 * notice is served until released or its deadline, and metered until then
 * (a->draining).
 *
 * Owns h->lc and the lend_* fields of struct held, a->draining.
 */
#ifndef RAMEX_AGENT_LEND_H
#define RAMEX_AGENT_LEND_H

#include "node-agent/agent.h"

/* Every round: start the data paths not yet running (at most once a
 * sample each), supervise the running ones and the draining lenders. */
void agent_lend_tick(struct agent *a, rx_time_ns t);

/* Seller about to confirm a delivery: the lend server up and registered
 * first, when this node runs one (agent_lend_tick retries a failure). */
void agent_lend_deliver(struct agent *a, struct held *h);

/* A metered period of h (NULL: nothing to do), from the lend child's
 * meter once it runs; 0 page-seconds while this node's child for h has
 * no meter (its data path never came up: nothing delivered). */
void agent_lend_adjust(const struct agent *a, struct held *h,
                       struct meter_period *p);

/* h's pages are back (at t): the lender gives notice, the borrower's
 * bridge moves its pages back and ends, each supervised in a->draining.
 * A lender still holds the pages through the notice, until its borrower
 * released them: time delivered, which bills (docs/money.md, the
 * delivery span runs to the notice's end). So when h is metered from its
 * child's meter, its meter runs on in a->draining until the child ends,
 * then its last report is spooled; h->metering is cleared and 1 returned.
 * 0: h's metering is the caller's to end now. */
int agent_lend_finish(struct agent *a, struct held *h, rx_time_ns t);

/* The draining contract `id` whose meter still runs, or NULL. */
struct held *agent_lend_tail(struct agent *a, int64_t id);

/* Draining contract d's metering ends at t (at most its lend_tail_end):
 * its child ended, or is stopped, or the time it may report is over. The
 * child's meter's last reading is the contract's last report. */
void agent_lend_tail_end(struct agent *a, struct held *d, rx_time_ns t);

/* h is dropped: its child, if any, is stopped now. */
void agent_lend_drop(struct held *h);

/* Supervises the children finishing on their own (lenders giving
 * notice, bridges moving pages back): reaps the ended, stops those past
 * their deadline. How many still run. */
int agent_lend_draining(struct agent *a, rx_time_ns t);

/* Shutdown: the lenders still giving notice are stopped. */
void agent_lend_stop_draining(struct agent *a, rx_time_ns t);

#endif
