/*
 * agent_market.h — the agent as a trader: the open orders read back (our
 * quotes apart from a person's), the book's top, the strategy's decision
 * and its actions (place, cancel, recall, release). An order whose fate
 * is unknown is sent again under its key before anything new.
 *
 * Owns a->quotes, a->others, a->top, a->view, a->pending, a->paused.
 */
#ifndef RAMEX_AGENT_MARKET_H
#define RAMEX_AGENT_MARKET_H

#include "node-agent/agent.h"

/* A person paused or resumed this node's automation (GET /v1/whoami). */
void agent_market_set_paused(struct agent *a, int paused, const char *note);

/* Our quotes, a person's orders and the top of each market's book. */
void agent_market_refresh(struct agent *a);

/* Runs the strategy (the view is kept current even when `known` is 0)
 * and, once the exchange said who this node is, acts on it. */
void agent_market_decide(struct agent *a, rx_time_ns t, int known);

/* One action of the strategy's (also the shutdown's cancels). */
void agent_market_act(struct agent *a, const struct strategy_action *x,
                      rx_time_ns t);

#endif
