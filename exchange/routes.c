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
#define MARKET   (TRADING | FINANCE | ADMIN) /* may read market data */
/* never blocks: runs on the HTTP thread (http.h) */
#define INLINE HTTP_INLINE

const struct http_route routes_table[] = {
    /* operations */
    {"GET", "/healthz", h_healthz, PUBLIC, "the process is alive", INLINE},
    {"GET", "/readyz", h_readyz, PUBLIC, "ready: database reachable", 0},
    {"GET", "/metrics", h_metrics, PUBLIC, "Prometheus metrics", INLINE},
    {"GET", "/v1/whoami", h_whoami, AUTH_ALL_ROLES, "the caller", 0},

    /* identity (admin) */
    {"POST", "/v1/teams", h_team_create, ADMIN, "create a team", 0},
    {"GET", "/v1/teams", h_team_list, ADMIN | FINANCE, "list teams", 0},
    {"POST", "/v1/accounts", h_account_create, ADMIN,
     "create an operator or exchange account", 0},
    {"GET", "/v1/accounts", h_account_list, ADMIN | FINANCE | OPERATOR,
     "list accounts", 0},
    {"POST", "/v1/nodes", h_node_create, ADMIN,
     "create a node account and its first key", 0},
    {"POST", "/v1/nodes/{id}/keys", h_node_key_create, ADMIN,
     "create another key for a node", 0},
    {"GET", "/v1/nodes", h_node_list, TRADING | FINANCE | ADMIN,
     "list the nodes you may see, by name, with their automation state", 0},
    {"POST", "/v1/nodes/{id}/pause", h_node_pause, TRADER | ADMIN,
     "pause a node's automation: its agent stops trading", 0},
    {"POST", "/v1/nodes/{id}/resume", h_node_resume, TRADER | ADMIN,
     "resume a node's automation", 0},
    {"DELETE", "/v1/keys/{key_id}", h_node_key_revoke, ADMIN,
     "revoke a node key", 0},
    {"POST", "/v1/tokens", h_token_create, ADMIN, "create a bearer token", 0},
    {"GET", "/v1/tokens", h_token_list, ADMIN, "list tokens", 0},
    {"DELETE", "/v1/tokens/{id}", h_token_revoke, ADMIN, "revoke a token", 0},

    /* markets */
    {"GET", "/v1/markets", h_market_list, MARKET, "list markets", 0},
    {"POST", "/v1/markets", h_market_create, OPERATOR, "create a market", 0},
    {"GET", "/v1/markets/{name}", h_market_get, MARKET, "one market", 0},
    {"GET", "/v1/markets/{name}/book", h_book, MARKET, "book depth", 0},
    {"GET", "/v1/markets/{name}/trades", h_trades, MARKET, "recent trades", 0},
    {"GET", "/v1/markets/{name}/candles", h_candles, MARKET,
     "OHLC price history", 0},

    /* orders and contracts */
    {"POST", "/v1/orders", h_order_place, TRADING, "place an order", INLINE},
    {"POST", "/v1/orders/batch", h_order_batch, TRADING,
     "place up to 100 orders in one request", INLINE},
    {"GET", "/v1/orders", h_order_list, TRADING | ADMIN, "list orders", 0},
    {"GET", "/v1/orders/{id}", h_order_get, TRADING | ADMIN, "one order", 0},
    {"DELETE", "/v1/orders/{id}", h_order_cancel, TRADING, "cancel an order",
     INLINE},
    {"POST", "/v1/orders/{id}/reduce", h_order_reduce, TRADING,
     "reduce an order's remaining pages, keeping its priority", INLINE},
    {"GET", "/v1/contracts", h_contract_list, TRADING | FINANCE | ADMIN,
     "list contracts", 0},
    {"GET", "/v1/contracts/{id}", h_contract_get, TRADING | FINANCE | ADMIN,
     "one contract", 0},
    {"POST", "/v1/contracts/{id}/deliver", h_contract_deliver, NODE | TRADER,
     "the seller confirms delivery", 0},
    {"POST", "/v1/contracts/{id}/recall", h_contract_recall, NODE | TRADER,
     "the seller recalls its pages", 0},
    {"POST", "/v1/contracts/{id}/end", h_contract_end, TRADING,
     "the buyer releases the pages", 0},
    {"POST", "/v1/contracts/{id}/breach", h_contract_breach, ADMIN,
     "declare a contract in breach", 0},
    {"GET", "/v1/contracts/{id}/transitions", h_contract_transitions,
     TRADING | FINANCE | ADMIN, "every move of a contract", 0},
    /* the data path of a lend contract (h_lend.c): only its two parties */
    {"POST", "/v1/contracts/{id}/lend", h_contract_lend_register, NODE | TRADER,
     "the seller registers its page server; makes the secret", 0},
    {"GET", "/v1/contracts/{id}/lend", h_contract_lend_get, NODE | TRADER,
     "either party reads the lender's endpoint and the contract secret", 0},

    /* usage reports (h_usage.c) */
    {"POST", "/v1/usage", h_usage_post, NODE,
     "report metered usage (up to 1000 reports, all or nothing)", 0},
    {"GET", "/v1/usage", h_usage_list, NODE | TRADER | FINANCE | ADMIN,
     "list usage reports", 0},
    {"GET", "/v1/usage/gaps", h_usage_gaps, FINANCE | ADMIN,
     "missing report numbers per node and epoch", 0},

    /* billing (h_billing.c): finance reads it all, the parties their
     * own accounts' invoices */
    {"GET", "/v1/invoices", h_invoice_list, TRADING | FINANCE | ADMIN,
     "list invoices", 0},
    {"GET", "/v1/invoices/{id}", h_invoice_get, TRADING | FINANCE | ADMIN,
     "one invoice with its lines", 0},
    {"GET", "/v1/invoices/{id}/export", h_invoice_export,
     TRADING | FINANCE | ADMIN, "an invoice as FOCUS-style CSV or JSON", 0},
    {"GET", "/v1/usage/export", h_usage_export, FINANCE | ADMIN,
     "billed usage per contract and month, CSV or JSON", 0},
    {"GET", "/v1/billing/summary", h_billing_summary,
     TRADING | FINANCE | ADMIN,
     "spend, revenue and page-years per month and account or team", 0},
    {"GET", "/v1/ledger/check", h_ledger_check, FINANCE | ADMIN,
     "the ledger balances and every invoice equals its postings", 0},
    {"POST", "/v1/billing/run", h_billing_run, ADMIN, "run the billing job now",
     0},

    /* the event stream */
    {"GET", "/v1/events", h_events, TRADING | ADMIN,
     "Server-Sent Events: fills, orders, contracts", INLINE},

    /* the web pages (exchange/static.c): public, since they hold no data;
     * what they show comes from /v1 with the person's own token */
    {"GET", "/", h_web, PUBLIC, "the start page", 0},
    {"HEAD", "/", h_web, PUBLIC, "the start page", 0},
    {"GET", "/web/{file}", h_web, PUBLIC, "a web page", 0},
    {"HEAD", "/web/{file}", h_web, PUBLIC, "a web page", 0},
    {"GET", "/web/{dir}/{file}", h_web, PUBLIC, "a script or style sheet", 0},
    {"HEAD", "/web/{dir}/{file}", h_web, PUBLIC, "a script or style sheet", 0},
};

const size_t routes_count = sizeof routes_table / sizeof routes_table[0];

/* The query parameters each route reads (api/openapi.yaml lists the same;
 * test_ramexd_api compares them); a route not here takes none. */
const struct http_route_query routes_query[] = {
    {"GET", "/v1/accounts", "kind"},
    {"GET", "/v1/markets/{name}/book", "depth"},
    {"GET", "/v1/markets/{name}/trades", "limit before"},
    {"GET", "/v1/markets/{name}/candles", "interval from to limit"},
    {"GET", "/v1/orders", "market status side account_id limit before"},
    {"GET", "/v1/contracts", "state market role account_id limit before"},
    {"GET", "/v1/usage", "contract_id node_id epoch from to limit after"},
    {"GET", "/v1/usage/gaps", "node_id epoch limit"},
    {"GET", "/v1/invoices", "account_id year month status limit before"},
    {"GET", "/v1/invoices/{id}/export", "format"},
    {"GET", "/v1/usage/export", "from to format"},
    {"GET", "/v1/billing/summary", "from to by"},
    {"GET", "/v1/events", "keepalive_s"},
    {"GET", "/", "*"},
    {"HEAD", "/", "*"},
    {"GET", "/web/{file}", "*"},
    {"HEAD", "/web/{file}", "*"},
    {"GET", "/web/{dir}/{file}", "*"},
    {"HEAD", "/web/{dir}/{file}", "*"},
};

const size_t routes_query_count = sizeof routes_query / sizeof routes_query[0];
