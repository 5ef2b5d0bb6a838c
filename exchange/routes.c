/* routes.c — the route table; see routes.h. Keep api/openapi.yaml in step:
 * tests/integration/test_ramexd_api.c fails when they differ. */
#include "exchange/routes.h"

#include "exchange/auth.h"
#include "exchange/handlers.h"
#include "exchange/static.h"

#define NODE     AUTH_NODE
#define TRADER   AUTH_TRADER
#define OPERATOR AUTH_OPERATOR
#define FINANCE  AUTH_FINANCE
#define ADMIN    AUTH_ADMIN
#define PUBLIC   AUTH_PUBLIC
#define TRADING  (NODE | TRADER | OPERATOR) /* may place orders */
#define MARKET   (TRADING | ADMIN)          /* may read market data */

const struct http_route routes_table[] = {
    /* operations */
    {"GET", "/healthz", h_healthz, PUBLIC, "the process is alive"},
    {"GET", "/readyz", h_readyz, PUBLIC, "ready: database reachable"},
    {"GET", "/metrics", h_metrics, PUBLIC, "Prometheus metrics"},
    {"GET", "/v1/whoami", h_whoami, AUTH_ALL_ROLES, "the caller"},

    /* identity (admin) */
    {"POST", "/v1/teams", h_team_create, ADMIN, "create a team"},
    {"GET", "/v1/teams", h_team_list, ADMIN | FINANCE, "list teams"},
    {"POST", "/v1/accounts", h_account_create, ADMIN,
     "create an operator or exchange account"},
    {"GET", "/v1/accounts", h_account_list, ADMIN | FINANCE | OPERATOR,
     "list accounts"},
    {"POST", "/v1/nodes", h_node_create, ADMIN,
     "create a node account and its first key"},
    {"POST", "/v1/nodes/{id}/keys", h_node_key_create, ADMIN,
     "create another key for a node"},
    {"DELETE", "/v1/keys/{key_id}", h_node_key_revoke, ADMIN,
     "revoke a node key"},
    {"POST", "/v1/tokens", h_token_create, ADMIN, "create a bearer token"},
    {"GET", "/v1/tokens", h_token_list, ADMIN, "list tokens"},
    {"DELETE", "/v1/tokens/{id}", h_token_revoke, ADMIN, "revoke a token"},

    /* markets */
    {"GET", "/v1/markets", h_market_list, MARKET, "list markets"},
    {"POST", "/v1/markets", h_market_create, OPERATOR, "create a market"},
    {"GET", "/v1/markets/{name}", h_market_get, MARKET, "one market"},
    {"GET", "/v1/markets/{name}/book", h_book, MARKET, "book depth"},
    {"GET", "/v1/markets/{name}/trades", h_trades, MARKET, "recent trades"},
    {"GET", "/v1/markets/{name}/candles", h_candles, MARKET,
     "OHLC price history"},

    /* orders and contracts */
    {"POST", "/v1/orders", h_order_place, TRADING, "place an order"},
    {"GET", "/v1/orders", h_order_list, TRADING | ADMIN, "list orders"},
    {"GET", "/v1/orders/{id}", h_order_get, TRADING | ADMIN, "one order"},
    {"DELETE", "/v1/orders/{id}", h_order_cancel, TRADING, "cancel an order"},
    {"POST", "/v1/orders/{id}/reduce", h_order_reduce, TRADING,
     "reduce an order's remaining pages, keeping its priority"},
    {"GET", "/v1/contracts", h_contract_list, TRADING | FINANCE | ADMIN,
     "list contracts"},
    {"GET", "/v1/contracts/{id}", h_contract_get, TRADING | FINANCE | ADMIN,
     "one contract"},
    {"POST", "/v1/contracts/{id}/deliver", h_contract_deliver, NODE | TRADER,
     "the seller confirms delivery"},
    {"POST", "/v1/contracts/{id}/recall", h_contract_recall, NODE | TRADER,
     "the seller recalls its pages"},
    {"POST", "/v1/contracts/{id}/end", h_contract_end, TRADING,
     "the buyer releases the pages"},
    {"POST", "/v1/contracts/{id}/breach", h_contract_breach, ADMIN,
     "declare a contract in breach"},
    {"GET", "/v1/contracts/{id}/transitions", h_contract_transitions,
     TRADING | FINANCE | ADMIN, "every move of a contract"},
    /* the data path of a lend contract (h_lend.c): only its two parties */
    {"POST", "/v1/contracts/{id}/lend", h_contract_lend_register,
     NODE | TRADER, "the seller registers its page server; makes the secret"},
    {"GET", "/v1/contracts/{id}/lend", h_contract_lend_get, NODE | TRADER,
     "either party reads the lender's endpoint and the contract secret"},

    /* usage reports (h_usage.c) */
    {"POST", "/v1/usage", h_usage_post, NODE,
     "report metered usage (up to 1000 reports, all or nothing)"},
    {"GET", "/v1/usage", h_usage_list, NODE | TRADER | FINANCE | ADMIN,
     "list usage reports"},
    {"GET", "/v1/usage/gaps", h_usage_gaps, FINANCE | ADMIN,
     "missing report numbers per node and epoch"},

    /* billing (h_billing.c): finance reads it all, the parties their
     * own accounts' invoices */
    {"GET", "/v1/invoices", h_invoice_list, TRADING | FINANCE | ADMIN,
     "list invoices"},
    {"GET", "/v1/invoices/{id}", h_invoice_get, TRADING | FINANCE | ADMIN,
     "one invoice with its lines"},
    {"GET", "/v1/invoices/{id}/export", h_invoice_export,
     TRADING | FINANCE | ADMIN, "an invoice as FOCUS-style CSV or JSON"},
    {"GET", "/v1/usage/export", h_usage_export, FINANCE | ADMIN,
     "billed usage per contract and month, CSV or JSON"},
    {"GET", "/v1/billing/summary", h_billing_summary, FINANCE | ADMIN,
     "spend, revenue and page-years per month and account or team"},
    {"GET", "/v1/ledger/check", h_ledger_check, FINANCE | ADMIN,
     "the ledger balances and every invoice equals its postings"},
    {"POST", "/v1/billing/run", h_billing_run, ADMIN,
     "run the billing job now"},

    /* the event stream */
    {"GET", "/v1/events", h_events, TRADING | ADMIN,
     "Server-Sent Events: fills, orders, contracts"},

    /* the web pages (exchange/static.c): public, since they hold no data;
     * what they show comes from /v1 with the person's own token */
    {"GET", "/", h_web, PUBLIC, "the start page"},
    {"HEAD", "/", h_web, PUBLIC, "the start page"},
    {"GET", "/web/{file}", h_web, PUBLIC, "a web page"},
    {"HEAD", "/web/{file}", h_web, PUBLIC, "a web page"},
    {"GET", "/web/{dir}/{file}", h_web, PUBLIC, "a script or style sheet"},
    {"HEAD", "/web/{dir}/{file}", h_web, PUBLIC, "a script or style sheet"},
};

const size_t routes_count = sizeof routes_table / sizeof routes_table[0];
