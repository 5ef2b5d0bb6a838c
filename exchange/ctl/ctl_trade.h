/*
 * ctl_trade.h — ramexctl's trading commands: whoami, markets, the book,
 * trades and candles, orders (place with a fresh idempotency key, cancel,
 * reduce, list, show) and contracts (list, show, transitions and the
 * moves deliver, recall, end, breach). Each is a row of the command table
 * in ramexctl.c; each returns an exit code (ctl_http.h).
 */
#ifndef RAMEX_CTL_TRADE_H
#define RAMEX_CTL_TRADE_H

#include "exchange/ctl/ctl_args.h"

int ctl_trade_book(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_candles(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_breach(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_deliver(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_end(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_recall(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_show(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_contracts_transitions(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_markets_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_markets_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_markets_show(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_orders_cancel(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_orders_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_orders_place(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_orders_reduce(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_orders_show(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_trades(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_trade_whoami(struct ctl_ctx *x, struct ctl_opts *o);

#endif
