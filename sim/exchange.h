/*
 * exchange.h — ramex-fleet's simulated exchange: one spot market's book
 * (exchange/core/book.c), the contracts as the exchange and both agents
 * see them (contract.c: delivery deadlines, recall notice, breach), the
 * operator's standing bids, and every hour each seller's usage report,
 * checked (usage.c) and billed (invoice.c) into the ledger.
 *
 * Owns the exchange's part of the run's state (engine.h: struct fleet's
 * book, contracts, live and watched lists, the operator's quotes, the
 * ledger); the machines are fleet.c's. No clock, no I/O: time is f->now.
 */
#ifndef RAMEX_SIM_EXCHANGE_H
#define RAMEX_SIM_EXCHANGE_H

#include "sim/engine.h"

/* Orders: a new one (its trades become contracts), a cancel. */
void sx_place(struct fleet *f, int64_t account, enum book_side side,
              enum book_tif tif, rx_pages pages, rx_price price);
void sx_cancel(struct fleet *f, uint64_t id);

/* m has pages to move for x (out, back, in or away): its movers see to it
 * from the next time they run. */
void sx_moving(struct fleet *f, struct fl_machine *m,
               const struct fl_contract *x);
/* Applies a contract event; 0, or -1 counted as a refusal. */
int sx_apply(struct fleet *f, struct fl_contract *x, enum contract_event ev,
             enum contract_actor who, rx_time_ns at);
/* Something is due on a contract (delivery, notice, an end): watch it. */
void sx_watch(struct fleet *f, struct fl_contract *x);
/* The agent's meter: page-seconds delivered up to `upto`. */
void sx_accrue(struct fl_contract *x, rx_time_ns upto);
/* Reports and bills the contract's metered usage up to `to`. */
void sx_report(struct fleet *f, struct fl_contract *x, rx_time_ns to);
/* The contract of an id, or NULL. */
struct fl_contract *sx_find_contract(struct fleet *f, uint64_t id);
/* The buyer moves its data back from the lender (release or recall). */
void sx_vacate(struct fleet *f, struct fl_contract *x);
/* The contract is over: the seller stops delivering and brings back what
 * it placed, the buyer's data on it is dropped (its agent's part). */
void sx_end(struct fleet *f, struct fl_contract *x);
/* Deadlines and ends due up to `upto`; closed contracts reported. */
void sx_deadlines(struct fleet *f, rx_time_ns upto);
/* Drops closed contracts from the live list. */
void sx_compact_live(struct fleet *f);
/* Tops the operator's standing bids up. */
void sx_operator_bids(struct fleet *f);

#endif
