/*
 * agent_lend.h — the data path of lend contracts, supervised: a seller
 * registers its endpoint and runs ramex-lend-server, a buyer runs
 * ramex-lend-nbd towards the lender (lendsup.h starts, restarts and stops
 * them); their meter files become the contracts' usage; a lender given
 * notice is served until released or its deadline (a->draining).
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
 * meter once it runs. */
void agent_lend_adjust(struct held *h, struct meter_period *p);

/* h's pages are back: the lender gives notice, the borrower's bridge
 * moves its pages back and ends. */
void agent_lend_finish(struct agent *a, struct held *h);

/* h is dropped: its child, if any, is stopped now. */
void agent_lend_drop(struct held *h);

/* Supervises the children finishing on their own (lenders giving
 * notice, bridges moving pages back): reaps the ended, stops those past
 * their deadline. How many still run. */
int agent_lend_draining(struct agent *a);

/* Shutdown: the lenders still giving notice are stopped. */
void agent_lend_stop_draining(struct agent *a);

#endif
