/*
 * handlers.h — every route handler of ramexd, one file per area:
 *
 *   h_system.c    health, readiness, metrics
 *   h_admin.c     teams, accounts, nodes and their keys, tokens (admin)
 *   h_nodes.c     who am I; nodes by name, pausing a node's automation
 *   h_market.c    markets, book depth, trades, candles
 *   h_orders.c    place, cancel, reduce, get and list orders
 *   h_contracts.c get and list contracts, their moves and transitions
 *   h_lend.c      a lend contract's endpoint and secret (its parties only)
 *   h_usage.c     usage reports from node agents: ingest, list, gaps
 *   h_billing.c   invoices and their exports, usage export, billing
 *                 summary, ledger check, billing runs
 *   h_events.c    the Server-Sent Events stream
 *
 * A handler runs after the route table (routes.c) has authenticated the
 * caller and checked its role; it still decides which rows that caller may
 * see (handlers_scope). Each handler replies exactly once.
 */
#ifndef RAMEX_HANDLERS_H
#define RAMEX_HANDLERS_H

#include <stdint.h>

struct http_req;
struct app;

void h_healthz(struct http_req *rq);
void h_readyz(struct http_req *rq);
void h_metrics(struct http_req *rq);

void h_team_create(struct http_req *rq);
void h_team_list(struct http_req *rq);
void h_account_create(struct http_req *rq);
void h_account_list(struct http_req *rq);
void h_node_create(struct http_req *rq);
void h_node_key_create(struct http_req *rq);
void h_node_key_revoke(struct http_req *rq);
void h_token_create(struct http_req *rq);
void h_token_list(struct http_req *rq);
void h_token_revoke(struct http_req *rq);
void h_whoami(struct http_req *rq);
void h_node_list(struct http_req *rq);
void h_node_pause(struct http_req *rq);
void h_node_resume(struct http_req *rq);

void h_market_list(struct http_req *rq);
void h_market_create(struct http_req *rq);
void h_market_get(struct http_req *rq);
void h_book(struct http_req *rq);
void h_trades(struct http_req *rq);
void h_candles(struct http_req *rq);

void h_order_place(struct http_req *rq);
void h_order_batch(struct http_req *rq);
void h_order_cancel(struct http_req *rq);
void h_order_reduce(struct http_req *rq);
void h_order_get(struct http_req *rq);
void h_order_list(struct http_req *rq);
void h_contract_list(struct http_req *rq);
void h_contract_get(struct http_req *rq);
void h_contract_deliver(struct http_req *rq);
void h_contract_recall(struct http_req *rq);
void h_contract_end(struct http_req *rq);
void h_contract_breach(struct http_req *rq);
void h_contract_transitions(struct http_req *rq);
void h_contract_lend_register(struct http_req *rq);
void h_contract_lend_get(struct http_req *rq);

void h_usage_post(struct http_req *rq);
void h_usage_list(struct http_req *rq);
void h_usage_gaps(struct http_req *rq);

void h_invoice_list(struct http_req *rq);
void h_invoice_get(struct http_req *rq);
void h_invoice_export(struct http_req *rq);
void h_usage_export(struct http_req *rq);
void h_billing_summary(struct http_req *rq);
void h_ledger_check(struct http_req *rq);
void h_billing_run(struct http_req *rq);

void h_events(struct http_req *rq);

/* A request for a market served by another instance (owner.h): adds
 * Location, that instance's base URL and this request's target; the
 * caller replies 307 (docs/operations.md, "Several instances"). */
void handlers_redirect(struct http_req *rq, const char *base);

/*
 * Which accounts the caller may see, as two SQL parameters: `account`
 * (only that account) and `team` (only accounts of that team); "" for no
 * restriction. Node: its account; trader: its team; operator: its account
 * (orders) or everything (contracts, when `all_for_operator`); finance and
 * admin: everything.
 */
void handlers_scope(struct http_req *rq, int all_for_operator, char account[24],
                    char team[24]);

/* Answers a PGresult-less failure: 503 when the connection broke, else
 * 500 (handlers_internal). */
void handlers_db_error(struct http_req *rq, void *conn, const char *err);

/* A fault of the exchange: 500 saying `what` went wrong in the exchange's
 * words; err (a library's or PostgreSQL's text) goes to the log only. */
void handlers_internal(struct http_req *rq, const char *what, const char *err);

/* Answers a statement the database refused, in the exchange's words: a
 * unique violation 409, another integrity rule or a value the column cannot
 * take 422, each naming the field and its rule; a broken connection 503;
 * anything else 500. PostgreSQL's text goes to the log only. */
struct db_fail;
void handlers_db_refused(struct http_req *rq, void *conn,
                         const struct db_fail *f);

/* Replies with the JSON array of the rows of a query, as {"items": [...],
 * "next": cursor or null}; `cursor_col` names the id column for paging when
 * the page is full. */
void handlers_reply_rows(struct http_req *rq, void *pgresult, int64_t limit,
                         const char *cursor_col);

/*
 * Runs a read-only query on a pooled connection and answers it: with the
 * first row, or a 404 carrying `notfound`, when `single`; else with the rows
 * as handlers_reply_rows does. Database failures answer 503 or 500.
 */
void handlers_query(struct http_req *rq, const char *sql, int n,
                    const char *const *pv, int single, int64_t limit,
                    const char *cursor_col, const char *notfound);

/*
 * The same on the reports' connections (app->reports: read_db, e.g. a
 * replica, when set). Only for reports of what is committed, which may lag
 * the primary by the replica's replay delay: invoices and their exports,
 * usage exports and gaps, the billing summary, the ledger check, a market's
 * trades and candles. Never for what a caller reads back after a write of
 * its own (its orders, contracts, usage reports, nodes).
 */
void handlers_report(struct http_req *rq, const char *sql, int n,
                     const char *const *pv, int single, int64_t limit,
                     const char *cursor_col, const char *notfound);

/*
 * Creates a bearer token for `role` (trader needs team, operator needs an
 * operator account; 0 = none) and writes it into token, shown only now.
 * Returns the token's id; -1 with a message for a request that breaks a
 * rule; -2 when the database refused or failed, with PostgreSQL's text in
 * err and why in *f (NULL: not wanted). Used by POST /v1/tokens and by
 * `ramexd token create`.
 */
struct pg_conn;
int64_t handlers_token_create(struct pg_conn *c, const char *name,
                              const char *role, int64_t team, int64_t account,
                              char token[68], char *err, size_t errlen,
                              struct db_fail *f);

#endif
