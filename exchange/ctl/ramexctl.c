/*
 * ramexctl.c — the command line for engineers and operators: orders, the
 * book, contracts and their moves, usage, invoices and the ledger, markets,
 * and (for admins) teams, accounts, nodes, tokens and the billing job, all
 * through ramexd's HTTP API (exchange/routes.c, docs/billing-api.md).
 *
 * Owns the table of commands, --help, the global options and the config
 * file, and main. The commands are ctl_trade.h, ctl_bill.h and
 * ctl_admin.h; option parsing is ctl_args.h, human output ctl_out.h (with
 * --json the server's JSON unchanged, so scripts see exact integers),
 * talking to the server ctl_http.h, unit conversions ctl_units.h.
 */
#include "exchange/ctl/ctl_admin.h"
#include "exchange/ctl/ctl_args.h"
#include "exchange/ctl/ctl_bill.h"
#include "exchange/ctl/ctl_http.h"
#include "exchange/ctl/ctl_trade.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- the table of commands --------------------------------------------- */

static const char *const none[] = {NULL};
static const char *const o_create_market[] = {
    "--tick",      "--lot",    "--min",     "--max",      "--price-min",
    "--price-max", "--notice", "--penalty", "--deadline", NULL};
static const char *const o_depth[] = {"--depth", NULL};
static const char *const o_page[] = {"--limit", "--before", NULL};
static const char *const o_candles[] = {"--interval", "--from", "--to",
                                        "--limit", NULL};
static const char *const o_place[] = {
    "--market",  "--side", "--pages",           "--price",   "--tif",
    "--expires", "--stp",  "--client-order-id", "--account", NULL};
static const char *const o_post_only[] = {"--post-only", NULL};
static const char *const o_pages[] = {"--pages", "--idempotency-key", NULL};
static const char *const o_olist[] = {
    "--market", "--status", "--side", "--account", "--limit", "--before", NULL};
static const char *const o_clist[] = {
    "--state", "--market", "--role", "--account", "--limit", "--before", NULL};
static const char *const o_note[] = {"--note", NULL};
static const char *const o_cnote[] = {"--note", "--idempotency-key", NULL};
static const char *const o_ulist[] = {"--contract", "--node", "--epoch",
                                      "--from",     "--to",   "--limit",
                                      "--after",    NULL};
static const char *const o_gaps[] = {"--node", "--epoch", NULL};
static const char *const o_ilist[] = {"--account", "--month",  "--status",
                                      "--limit",   "--before", NULL};
static const char *const o_output[] = {"--output", NULL};
static const char *const o_uexport[] = {"--from", "--to", "--output", NULL};
static const char *const o_summary[] = {"--from", "--to", "--by", NULL};
static const char *const o_kind[] = {"--kind", NULL};
static const char *const o_team[] = {"--team", NULL};
static const char *const o_token[] = {"--role", "--team", "--account", NULL};

static const struct ctl_cmd cmds[] = {
    {"whoami", NULL, "whoami", "who the token belongs to", none, none, 0,
     ctl_trade_whoami},
    {"markets", "list", "markets list", "list markets", none, none, 0,
     ctl_trade_markets_list},
    {"markets", "show", "markets show NAME", "one market", none, none, 1,
     ctl_trade_markets_show},
    {"markets", "create",
     "markets create NAME --tick PRICE [--lot PAGES] [--min PAGES] [--max "
     "PAGES] [--price-min P] [--price-max P] [--notice S] [--penalty P] "
     "[--deadline S]",
     "create a market (operator)", o_create_market, none, 1,
     ctl_trade_markets_create},
    {"book", NULL, "book MARKET [--depth N]", "the order book", o_depth, none,
     1, ctl_trade_book},
    {"trades", NULL, "trades MARKET [--limit N] [--before ID]", "recent trades",
     o_page, none, 1, ctl_trade_trades},
    {"candles", NULL,
     "candles MARKET [--interval S] [--from T] [--to T] [--limit N]",
     "price history (OHLC); T: seconds since the epoch or -2h (ago)", o_candles,
     none, 1, ctl_trade_candles},
    {"orders", "place",
     "orders place --market M --side buy|sell --pages N --price P [--tif "
     "gtc|ioc|fok|gtd] [--expires T|+Nh] [--post-only] [--stp POLICY] "
     "[--client-order-id ID] [--account ID]",
     "place a limit order", o_place, o_post_only, 0, ctl_trade_orders_place},
    {"orders", "cancel", "orders cancel ID [--note TEXT] [--idempotency-key K]",
     "cancel an order; the note (why) is kept with it beside who cancelled "
     "it",
     o_cnote, none, 1, ctl_trade_orders_cancel},
    {"orders", "reduce", "orders reduce ID --pages N [--idempotency-key K]",
     "reduce what remains of an order, keeping its priority", o_pages, none, 1,
     ctl_trade_orders_reduce},
    {"orders", "list",
     "orders list [--market M] [--status S] [--side S] [--account ID] "
     "[--limit N] [--before ID]",
     "list orders", o_olist, none, 0, ctl_trade_orders_list},
    {"orders", "show", "orders show ID", "one order", none, none, 1,
     ctl_trade_orders_show},
    {"contracts", "list",
     "contracts list [--state S] [--market M] [--role buyer|seller] "
     "[--account ID] [--limit N] [--before ID]",
     "list contracts", o_clist, none, 0, ctl_trade_contracts_list},
    {"contracts", "show", "contracts show ID",
     "one contract and every move it made", none, none, 1,
     ctl_trade_contracts_show},
    {"contracts", "transitions", "contracts transitions ID",
     "every move of a contract: who, when, why", none, none, 1,
     ctl_trade_contracts_transitions},
    {"contracts", "deliver", "contracts deliver ID [--note TEXT]",
     "the seller confirms delivery: active", o_note, none, 1,
     ctl_trade_contracts_deliver},
    {"contracts", "recall", "contracts recall ID [--note TEXT]",
     "the seller takes its pages back (spot: after the notice; perm: a "
     "breach)",
     o_note, none, 1, ctl_trade_contracts_recall},
    {"contracts", "end", "contracts end ID [--note TEXT]",
     "the buyer releases the pages: ended", o_note, none, 1,
     ctl_trade_contracts_end},
    {"contracts", "breach", "contracts breach ID --note TEXT",
     "declare a contract in breach (admin)", o_note, none, 1,
     ctl_trade_contracts_breach},
    {"usage", "list",
     "usage list [--contract ID] [--node ID] [--epoch E] [--from T] [--to T] "
     "[--limit N] [--after NODE:EPOCH:SEQ]",
     "usage reports in number order; T: ns since the epoch or -2h (ago)",
     o_ulist, none, 0, ctl_bill_usage_list},
    {"usage", "gaps", "usage gaps [--node ID] [--epoch E]",
     "missing report numbers per node and epoch (finance, admin)", o_gaps, none,
     0, ctl_bill_usage_gaps},
    {"usage", "export",
     "usage export [--from YYYY-MM] [--to YYYY-MM] [--output FILE]",
     "billed usage per contract and month, CSV (--json: JSON rows) "
     "(finance, admin)",
     o_uexport, none, 0, ctl_bill_usage_export},
    {"invoices", "list",
     "invoices list [--account ID] [--month YYYY-MM|YYYY] "
     "[--status draft|final] [--limit N] [--before ID]",
     "list invoices", o_ilist, none, 0, ctl_bill_invoices_list},
    {"invoices", "show", "invoices show ID", "one invoice with its lines", none,
     none, 1, ctl_bill_invoices_show},
    {"invoices", "csv", "invoices csv ID [--output FILE]",
     "an invoice's FOCUS-style export: CSV to stdout or FILE (--json: "
     "JSON rows)",
     o_output, none, 1, ctl_bill_invoices_csv},
    {"ledger", "check", "ledger check",
     "the ledger sums to zero and every invoice equals its postings "
     "(finance, admin); exit 5 when not",
     none, none, 0, ctl_bill_ledger_check},
    {"billing", "run", "billing run", "run the billing job now (admin)", none,
     none, 0, ctl_bill_billing_run},
    {"billing", "summary",
     "billing summary [--from YYYY-MM] [--to YYYY-MM] [--by account|team]",
     "spend, revenue and page-years per month (finance, admin)", o_summary,
     none, 0, ctl_bill_billing_summary},
    {"teams", "create", "teams create NAME", "create a team (admin)", none,
     none, 1, ctl_admin_teams_create},
    {"teams", "list", "teams list", "list teams (admin, finance)", none, none,
     0, ctl_admin_teams_list},
    {"accounts", "create", "accounts create NAME --kind operator|exchange",
     "create an account (admin; nodes: nodes create)", o_kind, none, 1,
     ctl_admin_accounts_create},
    {"accounts", "list", "accounts list [--kind K]", "list accounts", o_kind,
     none, 0, ctl_admin_accounts_list},
    {"nodes", "list", "nodes list",
     "the nodes you may see, by team and name, and whether a person paused "
     "their automation",
     none, none, 0, ctl_admin_nodes_list},
    {"nodes", "pause", "nodes pause NODE [--note TEXT]",
     "pause a node's automation (NODE: name or id; trader, admin): its "
     "agent keeps delivering and metering, withdraws its own quotes and "
     "places none; people's orders stand",
     o_note, none, 1, ctl_admin_nodes_pause},
    {"nodes", "resume", "nodes resume NODE",
     "resume a node's automation (trader, admin)", none, none, 1,
     ctl_admin_nodes_resume},
    {"nodes", "create", "nodes create NAME --team ID",
     "create a node and its first key; prints the secret once (admin)", o_team,
     none, 1, ctl_admin_nodes_create},
    {"keys", "create", "keys create NODE_ID",
     "another key for a node; prints the secret once (admin)", none, none, 1,
     ctl_admin_keys_create},
    {"keys", "revoke", "keys revoke KEY_ID", "revoke a node key (admin)", none,
     none, 1, ctl_admin_keys_revoke},
    {"tokens", "create",
     "tokens create NAME --role R [--team ID] [--account ID]",
     "create a bearer token; prints it once (admin); --team for a "
     "trader, --account for an operator, neither for finance or admin",
     o_token, none, 1,
     ctl_admin_tokens_create},
    {"tokens", "list", "tokens list", "list tokens (admin)", none, none, 0,
     ctl_admin_tokens_list},
    {"tokens", "revoke", "tokens revoke ID", "revoke a token (admin)", none,
     none, 1, ctl_admin_tokens_revoke},
};

#define NCMDS (sizeof cmds / sizeof cmds[0])

static void help(FILE *f, const char *group)
{
	fprintf(f,
	        "usage: %s [--url URL] [--token TOKEN] [--config FILE] "
	        "[--json] COMMAND ...\n\n"
	        "The command line of the ramex exchange.\n\ncommands:\n",
	        ctl_prog);
	for (size_t i = 0; i < NCMDS; i++)
		if (!group || strcmp(group, cmds[i].group) == 0)
			fprintf(f, "  %s\n      %s\n", cmds[i].usage,
			        cmds[i].about);
	fprintf(f,
	        "\nunits: prices are n$/page-year as a whole number "
	        "(100000) or\n"
	        "dollars with a $ prefix ($0.0001); pages are a whole number "
	        "or a size\n"
	        "with KiB/MiB/GiB/TiB that is a whole number of 4096-byte "
	        "pages (4GiB).\n\n"
	        "server and token: --url/--token win over RAMEX_URL/"
	        "RAMEX_TOKEN, which\n"
	        "win over ~/.config/ramex/ctl.conf (lines \"url = ...\", "
	        "\"token = ...\").\n"
	        "The default URL is http://127.0.0.1:8080.\n\n"
	        "columns (the server's field names; --json shows them exact):\n"
	        "  id, *_id          ids; *_name, account, team: names\n"
	        "  price, tick, unit_price, price_min/max, open/high/low/close,\n"
	        "                    breach_penalty: $ per page-year, exact\n"
	        "  amount, total, spend, revenue, fees, offline_credits, sum,\n"
	        "  total_shown, ...:\n"
	        "                    money to the cent (halves away from zero);\n"
	        "                    under a cent, two significant digits "
	        "($0.0041)\n"
	        "  pages, remaining, filled, lot, min/max_pages, volume: pages of\n"
	        "                    4096 bytes, with the size (GiB to two "
	        "decimals,\n"
	        "                    halves away from zero; MiB, KiB below 0.01 "
	        "GiB)\n"
	        "  *_ns, *_at, deliver_by, term_end: UTC times, RFC 3339 to the\n"
	        "                    second\n"
	        "  recall_notice_ns, notice_period_s, delivery_deadline_s: a\n"
	        "                    duration, exact (30 s, 2 min, 1 h 30 "
	        "min;\n"
	        "                    under a second in ms: 250 ms)\n"
	        "  page_seconds, *_page_years: usage (a page-year is one page "
	        "for\n"
	        "                    365 days)\n"
	        "  status, state, reason: an order's or contract's state and why;\n"
	        "                    cancelled_by/_name and cancel_note: who "
	        "cancelled\n"
	        "                    an order and the note they gave\n"
	        "  placed_by, placed_by_name, by_agent: who placed an order (a\n"
	        "                    node's agent, node:KEY, or a person's "
	        "token, tok:ID)\n"
	        "  trading_paused*: a person paused the node's automation\n"
	        "  payable_cents, cents_in, cents_out: what a final invoice "
	        "charges\n"
	        "                    (whole cents) and the sub-cent carries, as "
	        "money;\n"
	        "                    \"-\" (null) while it is a draft\n"
	        "  -                 no value (null) or not yet (a time of 0)\n\n"
	        "exit codes:\n"
	        "  0  done\n"
	        "  1  the server refused the request (4xx, e.g. a validation "
	        "error)\n"
	        "  2  usage error (the command line is wrong: also an ID that "
	        "is no\n"
	        "     whole number from 1, or a number option such as --limit "
	        "that is\n"
	        "     not a whole number; told before any request), or the "
	        "output\n"
	        "     could not be written (a full disk)\n"
	        "  3  the server could not be reached, or failed (5xx)\n"
	        "  4  authentication or permission refused (401, 403)\n"
	        "  5  a check found a problem (ledger check)\n");
}

/* Reads "key = value" lines; '#' starts a comment. A missing file is
 * fine (the default one is optional); an unreadable named one is not. */
static int read_config(const char *path, int must, char *url, size_t ul,
                       char *tok, size_t tl)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int n = 0, url_at = 0, tok_at = 0;
	if (!f) {
		if (!must && errno == ENOENT)
			return 0;
		fprintf(stderr, "%s: could not read %s: %s\n", ctl_prog, path,
		        strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		n++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "%s: %s:%d: line longer than %zu bytes\n",
			        ctl_prog, path, n, sizeof line - 2);
			fclose(f);
			return -1;
		}
		char *s = line, *eq, *k, *v, *e;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || *s == 0)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "%s: %s:%d: expected key = value\n",
			        ctl_prog, path, n);
			fclose(f);
			return -1;
		}
		for (e = eq; e > s && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*e = 0;
		k = s;
		for (v = eq + 1; *v == ' ' || *v == '\t'; v++)
			;
		for (e = v + strlen(v);
		     e > v && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' ||
		               e[-1] == '\r');
		     e--)
			;
		*e = 0;
		int *at = !strcmp(k, "url")     ? &url_at
		          : !strcmp(k, "token") ? &tok_at
		                                : NULL;
		/* a key set twice is a mistake to say, as in every other
		 * ramex config file (common/conf.h), not the last one winning
		 * in silence */
		if (at && *at) {
			fprintf(stderr,
			        "%s: %s:%d: %s is set twice (first on line %d): "
			        "remove one\n",
			        ctl_prog, path, n, k, *at);
			fclose(f);
			return -1;
		}
		if (at)
			*at = n;
		if (strcmp(k, "url") == 0)
			snprintf(url, ul, "%s", v);
		else if (strcmp(k, "token") == 0)
			snprintf(tok, tl, "%s", v);
		else {
			fprintf(stderr,
			        "%s: %s:%d: unknown key \"%s\" (url, token)\n",
			        ctl_prog, path, n, k);
			fclose(f);
			return -1;
		}
	}
	/* a directory opens and then fails to read (EISDIR): say so, not
	 * run on without its settings */
	if (ferror(f)) {
		fprintf(stderr, "%s: could not read %s: %s\n", ctl_prog, path,
		        strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

/* The URL and token as they will be sent, checked before any request:
 * an ftp:// URL or a token with a line end in it went out as they were
 * (the token's newline split the Authorization header, and the server's
 * answer was "not JSON"). `from` says where each came from. */
static int check_url_token(const char *url, const char *url_from,
                           const char *tok, const char *tok_from)
{
	if (strncasecmp(url, "http://", 7) != 0 &&
	    strncasecmp(url, "https://", 8) != 0)
		return ctl_usage_error("the URL \"%s\" (%s) must start with "
		                       "http:// or https://",
		                       url, url_from);
	CURLU *u = curl_url();
	char *host = NULL;
	int ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	         curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	         host && *host;
	curl_free(host);
	curl_url_cleanup(u);
	if (!ok)
		return ctl_usage_error("the URL \"%s\" (%s) is not a URL like "
		                       "http://HOST:PORT",
		                       url, url_from);
	for (const unsigned char *c = (const unsigned char *)url; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			return ctl_usage_error(
			    "the URL (%s) has a space, a line end or a byte "
			    "outside ASCII in it",
			    url_from);
	for (const unsigned char *c = (const unsigned char *)tok; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			return ctl_usage_error(
			    "the token (%s) has a space, a line end or a byte "
			    "outside ASCII in it: give it without them",
			    tok_from);
	return 0;
}

/* Copies a setting; one that does not fit is an error, not cut short. */
static int setting(char *dst, size_t len, const char *v, const char *what)
{
	if (strlen(v) >= len)
		return ctl_usage_error("%s is longer than %zu bytes", what,
		                       len - 1);
	snprintf(dst, len, "%s", v);
	return 0;
}

int main(int argc, char **argv)
{
	static char url[1024] = "http://127.0.0.1:8080", tok[512];
	const char *flag_url = NULL, *flag_tok = NULL, *config = NULL;
	struct ctl_ctx x = {0};
	char cfg[1024];
	int i = 1;
	for (; i < argc && strncmp(argv[i], "-", 1) == 0; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			help(stdout, NULL);
			return CTL_OK;
		} else if (strcmp(a, "--json") == 0) {
			x.json = 1;
		} else if ((strcmp(a, "--url") == 0 ||
		            strcmp(a, "--token") == 0 ||
		            strcmp(a, "--config") == 0)) {
			if (i + 1 >= argc)
				return ctl_usage_error("%s needs a value", a);
			const char **dst = a[2] == 'u'   ? &flag_url
			                   : a[2] == 't' ? &flag_tok
			                                 : &config;
			*dst = argv[++i];
		} else {
			return ctl_usage_error("unknown option \"%s\"", a);
		}
	}
	if (i >= argc)
		return ctl_usage_error("a command is needed");
	const char *home = getenv("HOME");
	if (config) {
		if (read_config(config, 1, url, sizeof url, tok, sizeof tok))
			return CTL_USAGE;
	} else if (home && *home) {
		snprintf(cfg, sizeof cfg, "%s/.config/ramex/ctl.conf", home);
		if (read_config(cfg, 0, url, sizeof url, tok, sizeof tok))
			return CTL_USAGE;
	}
	const char *url_from = config ? config
	                              : "~/.config/ramex/ctl.conf or the "
	                                "default",
	           *tok_from = config ? config : "~/.config/ramex/ctl.conf";
	if (getenv("RAMEX_URL") && *getenv("RAMEX_URL")) {
		if (setting(url, sizeof url, getenv("RAMEX_URL"), "RAMEX_URL"))
			return CTL_USAGE;
		url_from = "RAMEX_URL";
	}
	if (getenv("RAMEX_TOKEN") && *getenv("RAMEX_TOKEN")) {
		if (setting(tok, sizeof tok, getenv("RAMEX_TOKEN"),
		            "RAMEX_TOKEN"))
			return CTL_USAGE;
		tok_from = "RAMEX_TOKEN";
	}
	if (flag_url) {
		if (setting(url, sizeof url, flag_url, "--url"))
			return CTL_USAGE;
		url_from = "--url";
	}
	if (flag_tok) {
		if (setting(tok, sizeof tok, flag_tok, "--token"))
			return CTL_USAGE;
		tok_from = "--token";
	}
	if (check_url_token(url, url_from, tok, tok_from))
		return CTL_USAGE;
	x.http.url = url;
	x.http.token = tok;

	const char *group = argv[i++];
	const char *verb = i < argc ? argv[i] : NULL;
	const struct ctl_cmd *c = NULL;
	int group_known = 0;
	for (size_t k = 0; k < NCMDS; k++) {
		if (strcmp(cmds[k].group, group) != 0)
			continue;
		group_known = 1;
		if (!cmds[k].verb ||
		    (verb && strcmp(cmds[k].verb, verb) == 0)) {
			c = &cmds[k];
			break;
		}
	}
	if (!group_known)
		return ctl_usage_error("unknown command \"%s\"", group);
	if (!c) {
		if (verb &&
		    (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)) {
			help(stdout, group);
			return CTL_OK;
		}
		return ctl_usage_error("%s needs one of its commands%s%s%s",
		                       group, verb ? " (not \"" : "",
		                       verb ? verb : "", verb ? "\")" : "");
	}
	if (c->verb)
		i++;
	struct ctl_opts o;
	if (ctl_parse_opts(c, argc - i, argv + i, &o))
		return CTL_USAGE;
	if (o.help) {
		printf("usage: %s %s\n  %s\n", ctl_prog, c->usage, c->about);
		return CTL_OK;
	}
	x.cmd = c;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = c->run(&x, &o);
	curl_global_cleanup();
	/* what was printed reached its file: an export to a full disk
	 * (ramexctl usage export > f) was cut short and exited 0 */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: could not write the output: %s\n",
		        ctl_prog, strerror(errno));
		if (rc == CTL_OK)
			rc = CTL_USAGE;
	}
	return rc;
}
