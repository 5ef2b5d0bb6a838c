/*
 * test_ramexctl.c — ramexctl against a real ramexd (ramexd_harness.h) on a
 * private PostgreSQL: create a market, place a bid and an offer, see the
 * book, trade, list contracts, cancel; and the exit codes a script relies
 * on: 1 for a refused order, 2 for a bad command line, 3 for no server,
 * 4 for a bad token. --json output must parse; human output must show
 * dollars and GiB. Where the URL and token come from is checked too.
 * Then contracts and billing: deliver, refused moves, transitions, a usage
 * report (stored by SQL as POST /v1/usage would), a billing run, invoices
 * and their CSV, the usage export, and the ledger check's exit 5 when an
 * invoice no longer equals its postings.
 */
#include <check.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/fake_http.h"
#include "tests/integration/ramexd_harness.h"

extern char **environ;

struct run {
	int rc;
	char out[65536], err[8192];
	json_t *json; /* stdout parsed, when it is JSON */
};

static void ctl_path(char *buf, size_t len)
{
	const char *b = getenv("RAMEX_BUILD");
	snprintf(buf, len, "%s/san/bin/ramexctl", b && *b ? b : "build");
	if (access(buf, X_OK) != 0)
		snprintf(buf, len, "%s/bin/ramexctl", b && *b ? b : "build");
}

static size_t slurp(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t k;
	while (n + 1 < len && (k = read(fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = 0;
	return n;
}

/* Runs ramexctl with argv (NULL-terminated) and an environment without
 * RAMEX_URL, RAMEX_TOKEN or HOME, plus `env` ("K=V" strings, NULL-ended).
 * HOME points at an empty directory so no person's config file is read. */
static void ctl_env(struct run *r, const char *const *env, ...)
{
	char bin[512], home[512];
	const char *argv[48], *envp[256];
	int na = 0, ne = 0, po[2], pe[2];
	va_list ap;
	ctl_path(bin, sizeof bin);
	argv[na++] = bin;
	va_start(ap, env);
	for (const char *a; (a = va_arg(ap, const char *)) && na < 47;)
		argv[na++] = a;
	va_end(ap);
	argv[na] = NULL;
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	snprintf(home, sizeof home, "HOME=%s/ramexctl-home",
	         o && *o ? o : "var/test-output");
	for (char **e = environ; *e && ne < 200; e++)
		if (strncmp(*e, "RAMEX_URL=", 10) &&
		    strncmp(*e, "RAMEX_TOKEN=", 12) && strncmp(*e, "HOME=", 5))
			envp[ne++] = *e;
	envp[ne++] = home;
	for (; env && *env && ne < 254; env++)
		envp[ne++] = *env;
	envp[ne] = NULL;
	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execve(bin, (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* outputs are small; stderr is read after stdout ends */
	slurp(po[0], r->out, sizeof r->out);
	slurp(pe[0], r->err, sizeof r->err);
	close(po[0]);
	close(pe[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "ramexctl died: %s", r->err);
	r->rc = WEXITSTATUS(st);
	r->json = json_loads(r->out, 0, NULL);
}

static void run_free(struct run *r)
{
	json_decref(r->json);
	r->json = NULL;
}

#define URL(h, buf) snprintf(buf, sizeof buf, "http://127.0.0.1:%d", (h)->port)

static struct rxh h;
static struct rxh_world w;
static char url[64];

/* ctl(r, token, args...): --url and --token as flags. */
#define ctl(r, tok, ...)                                                       \
	ctl_env(r, NULL, "--url", url, "--token", tok, __VA_ARGS__, NULL)

static int64_t jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

START_TEST(trade_flow)
{
	struct run r;
	char acct[24], id[24];
	rxh_start(&h, "ramex_t_ctl_flow", "");
	rxh_world(&h, &w);
	URL(&h, url);
	snprintf(acct, sizeof acct, "%lld", (long long)w.node_a);

	ctl(&r, w.trader_token, "whoami");
	ck_assert_msg(r.rc == 0, "whoami: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "trader"));
	/* by name: the trader's team */
	ck_assert_msg(strstr(r.out, "team_name"), "%s", r.out);
	run_free(&r);

	/* the team's nodes by name; pause and resume one by its name */
	ctl(&r, w.trader_token, "nodes", "list");
	ck_assert_msg(r.rc == 0 && strstr(r.out, "node-a") &&
	                  !strstr(r.out, "node-c"),
	              "nodes list: %d %s %s", r.rc, r.out, r.err);
	run_free(&r);
	ctl(&r, w.trader_token, "nodes", "pause", "node-a", "--note",
	    "hand trading");
	ck_assert_msg(r.rc == 0 && strstr(r.out, "hand trading"),
	              "pause: %d %s %s", r.rc, r.out, r.err);
	run_free(&r);
	ctl_env(&r, NULL, "--url", url, "--token", w.trader_token, "--json",
	        "nodes", "list", NULL);
	ck_assert(r.json);
	ck_assert(json_is_true(
	    json_object_get(json_array_get(json_object_get(r.json, "items"), 0),
	                    "trading_paused")));
	run_free(&r);
	ctl(&r, w.trader_token, "nodes", "resume", acct);
	ck_assert_msg(r.rc == 0, "resume: %d %s", r.rc, r.err);
	run_free(&r);
	/* another team's node is not found, by name or id */
	ctl(&r, w.trader_token, "nodes", "pause", "node-c");
	ck_assert_msg(r.rc == 1 && strstr(r.err, "nodes list"),
	              "pause node-c: %d %s", r.rc, r.err);
	run_free(&r);

	/* a market through the CLI: lot as a size, tick in dollars */
	ctl(&r, w.op_token, "markets", "create", "perm-2028", "--tick",
	    "$0.000001", "--lot", "1MiB", "--penalty", "5000");
	ck_assert_msg(r.rc == 0, "create: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.op_token, "--json", "markets", "show", "perm-2028");
	ck_assert_msg(r.rc == 0 && r.json, "show: %s", r.err);
	ck_assert_int_eq(jint(r.json, "tick"), 1000);
	ck_assert_int_eq(jint(r.json, "lot"), 256);
	ck_assert_int_eq(jint(r.json, "min_pages"), 256);
	run_free(&r);
	/* its notice and delivery deadline as durations, not seconds */
	ctl(&r, w.op_token, "markets", "show", "perm-2028");
	ck_assert_msg(r.rc == 0, "show: %s", r.err);
	const char *np = strstr(r.out, "notice_period_s ");
	ck_assert_msg(np && strncmp(np + strcspn(np, "\n") - 4, " 1 h", 4) == 0,
	              "notice: %.200s", r.out);
	const char *dd = strstr(r.out, "delivery_deadline_s ");
	ck_assert_msg(dd && strncmp(dd + strcspn(dd, "\n") - 7, " 10 min", 7) ==
	                        0,
	              "deadline: %.200s", r.out);
	run_free(&r);

	/* the operator's bid: 1 GiB at $0.0001 per page-year */
	ctl(&r, w.op_token, "orders", "place", "--market", "perm-2028",
	    "--side", "buy", "--pages", "1GiB", "--price", "$0.0001");
	ck_assert_msg(r.rc == 0, "bid: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "$0.0001"));
	ck_assert_ptr_nonnull(strstr(r.out, "1.00 GiB"));
	run_free(&r);

	ctl_env(&r, NULL, "--url", url, "--token", w.trader_token, "--json",
	        "book", "perm-2028", "--depth", "5", NULL);
	ck_assert_msg(r.rc == 0 && r.json, "book: %s", r.err);
	json_t *bid = json_array_get(json_object_get(r.json, "bids"), 0);
	ck_assert_int_eq(jint(bid, "price"), 100000);
	ck_assert_int_eq(jint(bid, "pages"), 262144);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "asks")), 0);
	run_free(&r);
	ctl(&r, w.trader_token, "book", "perm-2028");
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "bid"));
	ck_assert_ptr_nonnull(strstr(r.out, "262144 (1.00 GiB)"));
	run_free(&r);

	/* the trader sells half of it for node a: a trade at the bid */
	ctl_env(&r, NULL, "--url", url, "--token", w.trader_token, "--json",
	        "orders", "place", "--market", "perm-2028", "--side", "sell",
	        "--pages", "512MiB", "--price", "90000", "--account", acct,
	        "--client-order-id", "ctl-1", NULL);
	ck_assert_msg(r.rc == 0 && r.json, "offer: %d %s", r.rc, r.err);
	json_t *tr = json_object_get(r.json, "trades");
	ck_assert_int_eq(json_array_size(tr), 1);
	ck_assert_int_eq(jint(json_array_get(tr, 0), "price"), 100000);
	ck_assert_int_eq(jint(json_array_get(tr, 0), "pages"), 131072);
	run_free(&r);

	ctl_env(&r, NULL, "--url", url, "--token", w.trader_token, "--json",
	        "contracts", "list", NULL);
	ck_assert_msg(r.rc == 0 && r.json, "contracts: %s", r.err);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	json_t *c0 = json_array_get(items, 0);
	ck_assert_str_eq(json_string_value(json_object_get(c0, "market")),
	                 "perm-2028");
	ck_assert_int_eq(jint(c0, "pages"), 131072);
	ck_assert_int_eq(jint(c0, "price"), 100000);
	ck_assert_int_eq(jint(c0, "seller_id"), w.node_a);
	snprintf(id, sizeof id, "%lld", (long long)jint(c0, "id"));
	run_free(&r);
	ctl(&r, w.trader_token, "contracts", "list");
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "perm-2028"));
	ck_assert_ptr_nonnull(strstr(r.out, "0.50 GiB"));
	/* deliver_by in RFC 3339, not PostgreSQL's text */
	ck_assert_msg(!strstr(r.out, "+00") && strstr(r.out, "Z\n"),
	              "times: %s", r.out);
	run_free(&r);
	ctl(&r, w.trader_token, "contracts", "show", id);
	ck_assert_msg(r.rc == 0, "contract show: %s", r.err);
	run_free(&r);

	ctl(&r, w.trader_token, "trades", "perm-2028");
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "$0.0001"));
	run_free(&r);

	/* what is left of the bid, then cancel it */
	ctl_env(&r, NULL, "--url", url, "--token", w.op_token, "--json",
	        "orders", "list", "--market", "perm-2028", "--status", "open",
	        NULL);
	ck_assert_msg(r.rc == 0 && r.json, "orders list: %s", r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_eq(jint(json_array_get(items, 0), "remaining"), 131072);
	snprintf(id, sizeof id, "%lld",
	         (long long)jint(json_array_get(items, 0), "id"));
	run_free(&r);
	ctl(&r, w.op_token, "orders", "reduce", id, "--pages", "256MiB");
	ck_assert_msg(r.rc == 0, "reduce: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.op_token, "orders", "cancel", id, "--note", "bid too high");
	ck_assert_msg(r.rc == 0, "cancel: %d %s", r.rc, r.err);
	run_free(&r);
	ctl_env(&r, NULL, "--url", url, "--token", w.op_token, "--json",
	        "orders", "show", id, NULL);
	ck_assert_msg(r.rc == 0 && r.json, "show: %s", r.err);
	ck_assert_str_eq(json_string_value(json_object_get(r.json, "status")),
	                 "cancelled");
	ck_assert_str_eq(
	    json_string_value(json_object_get(r.json, "cancel_note")),
	    "bid too high");
	run_free(&r);
	/* the list says who placed and who cancelled it */
	ctl(&r, w.op_token, "orders", "list", "--market", "perm-2028");
	ck_assert_msg(r.rc == 0 && strstr(r.out, "placed_by_name") &&
	                  strstr(r.out, "(operator)"),
	              "orders list: %s", r.out);
	run_free(&r);
	/* cancelling twice is refused by the server: exit 1 */
	ctl(&r, w.op_token, "orders", "cancel", id);
	ck_assert_msg(r.rc == 1, "second cancel: %d %s", r.rc, r.err);
	run_free(&r);
	rxh_stop(&h);
}
END_TEST

START_TEST(exit_codes)
{
	struct run r;
	char acct[24];
	rxh_start(&h, "ramex_t_ctl_exit", "");
	rxh_world(&h, &w);
	URL(&h, url);
	snprintf(acct, sizeof acct, "%lld", (long long)w.node_a);

	/* off the tick (1000 n$): the server refuses, says why, exit 1 */
	ctl(&r, w.trader_token, "orders", "place", "--market", "spot", "--side",
	    "sell", "--pages", "256", "--price", "100001", "--account", acct);
	ck_assert_msg(r.rc == 1, "off tick: %d %s", r.rc, r.err);
	ck_assert_msg(strncmp(r.err, "error: ", 7) == 0, "stderr: %s", r.err);
	run_free(&r);

	/* --expires: +N[smhd] from now; a past offset is a usage error */
	ctl(&r, w.trader_token, "--json", "orders", "place", "--market", "spot",
	    "--side", "sell", "--pages", "256", "--price", "100000",
	    "--account", acct, "--tif", "gtd", "--expires", "+1h");
	ck_assert_msg(r.rc == 0, "gtd +1h: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(r.json);
	int64_t exp = json_integer_value(
	    json_object_get(json_object_get(r.json, "order"), "expires_ns"));
	int64_t now_s = (int64_t)time(NULL);
	ck_assert_msg(exp / 1000000000 >= now_s + 3600 - 60 &&
	                  exp / 1000000000 <= now_s + 3600,
	              "expires_ns %lld is not an hour from %lld",
	              (long long)exp, (long long)now_s);
	run_free(&r);
	ctl(&r, w.trader_token, "orders", "place", "--market", "spot", "--side",
	    "sell", "--pages", "256", "--price", "100000", "--account", acct,
	    "--tif", "gtd", "--expires", "-1h");
	ck_assert_msg(r.rc == 2, "gtd -1h: %d %s", r.rc, r.err);
	run_free(&r);

	/* candles' --from and --to: seconds since the epoch or -N[smhd]
	 * ago, like the other commands' times (-2h went to the server as
	 * it was and came back as its parameter's range, exit 1) */
	ctl(&r, w.trader_token, "--json", "candles", "spot", "--from", "-2h",
	    "--to", "-0s");
	ck_assert_msg(r.rc == 0, "candles -2h: %d %s", r.rc, r.err);
	run_free(&r);
	/* a range that ends before it starts is refused, not an empty
	 * table (it printed "(none)" and exited 0, as if nothing were
	 * there) */
	ctl(&r, w.trader_token, "candles", "spot", "--from", "-2h", "--to",
	    "-3h");
	ck_assert_msg(r.rc == 1 && strstr(r.err, "before"),
	              "candles -2h to -3h: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.trader_token, "usage", "list", "--from", "-1h", "--to",
	    "-2h");
	ck_assert_msg(r.rc == 1 && strstr(r.err, "before"),
	              "usage -1h to -2h: %d %s", r.rc, r.err);
	run_free(&r);
	/* past the 100 years it takes: it said only "-N followed by s, m,
	 * h or d", which -99999999d is */
	ctl(&r, w.trader_token, "usage", "list", "--from", "-99999999d");
	ck_assert_msg(r.rc == 2 && strstr(r.err, "at most 100 years"),
	              "usage -99999999d: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.trader_token, "candles", "spot", "--from", "yesterday");
	ck_assert_msg(r.rc == 2 && strstr(r.err, "--from and --to"),
	              "candles yesterday: %d %s", r.rc, r.err);
	run_free(&r);

	/* a bad token: exit 4 */
	ctl(&r, "rx_not_a_token", "whoami");
	ck_assert_msg(r.rc == 4, "bad token: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.err, "error: "));
	run_free(&r);
	/* a finance token may not trade: 403, exit 4 */
	ctl(&r, w.finance_token, "orders", "place", "--market", "spot",
	    "--side", "buy", "--pages", "256", "--price", "1000");
	ck_assert_msg(r.rc == 4, "finance order: %d %s", r.rc, r.err);
	run_free(&r);

	/* nobody listens on port 1: exit 3 */
	ctl_env(&r, NULL, "--url", "http://127.0.0.1:1", "--token", "x",
	        "whoami", NULL);
	ck_assert_msg(r.rc == 3, "unreachable: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.err, "could not reach"));
	run_free(&r);

	/* an order always carries a client order id (made when none is
	 * given), and one whose answer did not come says how to learn what
	 * became of it: the same command with that id */
	ctl_env(&r, NULL, "--url", "http://127.0.0.1:1", "--token", "x",
	        "orders", "place", "--market", "spot", "--side", "buy",
	        "--pages", "256", "--price", "1000", NULL);
	ck_assert_msg(r.rc == 3, "unreachable order: %d %s", r.rc, r.err);
	const char *hint = strstr(r.err, "--client-order-id ctl-");
	ck_assert_msg(hint, "no retry hint: %s", r.err);
	char coid[64];
	ck_assert_int_eq(sscanf(hint, "--client-order-id %63s", coid), 1);
	run_free(&r);
	ctl_env(&r, NULL, "--url", "http://127.0.0.1:1", "--token", "x",
	        "orders", "cancel", "7", NULL);
	ck_assert_msg(r.rc == 3 && strstr(r.err, "--idempotency-key ctl-"),
	              "unreachable cancel: %d %s", r.rc, r.err);
	run_free(&r);
	/* the retry with it places the order once; another retry is the
	 * first answer again */
	int64_t first = 0;
	for (int k = 0; k < 2; k++) {
		ctl(&r, w.trader_token, "--json", "orders", "place", "--market",
		    "spot", "--side", "buy", "--pages", "256", "--price",
		    "1000", "--account", acct, "--client-order-id", coid);
		ck_assert_msg(r.rc == 0, "retry %d: %d %s", k, r.rc, r.err);
		json_t *ord = json_object_get(r.json, "order");
		ck_assert_str_eq(
		    json_string_value(json_object_get(ord, "client_order_id")),
		    coid);
		int64_t id = json_integer_value(json_object_get(ord, "id"));
		if (k == 0)
			first = id;
		ck_assert_int_eq(id, first);
		run_free(&r);
	}
	/* without --client-order-id, one is made */
	ctl(&r, w.trader_token, "--json", "orders", "place", "--market", "spot",
	    "--side", "buy", "--pages", "256", "--price", "1000", "--account",
	    acct);
	ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.err);
	const char *made = json_string_value(json_object_get(
	    json_object_get(r.json, "order"), "client_order_id"));
	ck_assert_msg(made && strncmp(made, "ctl-", 4) == 0,
	              "client_order_id %s", made ? made : "(none)");
	run_free(&r);

	/* usage errors: exit 2, before any request */
	const char *bad[][8] = {
	    {"frobnicate", NULL},
	    {"orders", NULL},
	    {"orders", "place", "--market", "spot", "--side", "up", "--pages",
	     NULL},
	    {"orders", "place", "--market", "spot", "--side", "buy", "--pages",
	     "6KiB"}, /* not whole pages */
	    {"orders", "place", "--market", "spot", "--side", "buy", "--price",
	     "$0.0000000001"}, /* below a nanodollar */
	    {"book", NULL},
	    {"orders", "show", "../whoami", NULL},
	    /* an id that is no whole number from 1 is the command line's
	     * fault, not a request the server refuses (exit 1) */
	    {"invoices", "show", "abc", NULL},
	    {"invoices", "csv", "0", NULL},
	    {"orders", "show", "abc", NULL},
	    {"orders", "cancel", "x1", NULL},
	    {"orders", "reduce", "-3", "--pages", "256", NULL},
	    {"contracts", "show", "abc", NULL},
	    {"contracts", "transitions", "abc", NULL},
	    {"contracts", "end", "abc", NULL},
	    {"keys", "create", "abc", NULL},
	    {"tokens", "revoke", "abc", NULL},
	    /* and so is an option that takes a whole number */
	    {"orders", "list", "--limit", "ten", NULL},
	    {"contracts", "list", "--before", "x", NULL},
	    {"trades", "spot", "--before", "1.5", NULL},
	    {"usage", "list", "--node", "n1", NULL},
	    {"usage", "gaps", "--epoch", "-1", NULL},
	    {"invoices", "list", "--account", "a", NULL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ctl_env(&r, NULL, "--url", url, "--token", w.trader_token,
		        bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4],
		        bad[i][5], bad[i][6], bad[i][7], NULL);
		ck_assert_msg(r.rc == 2, "case %zu: rc %d %s", i, r.rc, r.err);
		run_free(&r);
	}
	ctl_env(&r, NULL, "--help", NULL);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "exit codes"));
	run_free(&r);
	ctl_env(&r, NULL, "orders", "place", "--help", NULL);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "--client-order-id"));
	run_free(&r);
	rxh_stop(&h);
}
END_TEST

/* Flags win over the environment, which wins over the config file. */
/* The URL and the token are checked before anything is sent: a usage
 * error, exit 2, naming where the value came from (found from outside: an
 * ftp:// or malformed URL was exit 3 "could not reach", a token with a
 * line end split the Authorization header and the server's 400 read "not
 * JSON", a --config that is a directory was read as empty). No server is
 * needed: nothing is sent. */
START_TEST(url_and_token_are_checked)
{
	static const struct {
		const char *url, *tok, *env, *says;
	} cases[] = {
	    {"ftp://127.0.0.1:1", "rx_1", NULL, "must start with http://"},
	    {"http://[::1", "rx_1", NULL, "is not a URL"},
	    {"http://", "rx_1", NULL, "is not a URL"},
	    {"http://127.0.0.1:1", "rx_1\nX-Evil: 1", NULL, "(--token) has"},
	    {"http://127.0.0.1:1", NULL, "RAMEX_TOKEN=rx_1\r", "(RAMEX_TOKEN)"},
	    {NULL, "rx_1", "RAMEX_URL=http://127.0.0.1:1 /", "(RAMEX_URL)"},
	};
	struct run r;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *env[] = {cases[i].env, NULL};
		if (!cases[i].url)
			ctl_env(&r, env, "--token", cases[i].tok, "whoami",
			        NULL);
		else if (!cases[i].tok)
			ctl_env(&r, env, "--url", cases[i].url, "whoami", NULL);
		else
			ctl_env(&r, env, "--url", cases[i].url, "--token",
			        cases[i].tok, "whoami", NULL);
		ck_assert_msg(r.rc == 2 && strstr(r.err, cases[i].says),
		              "case %zu: %d %s", i, r.rc, r.err);
		run_free(&r);
	}
	ctl_env(&r, NULL, "--config", "/", "whoami", NULL);
	ck_assert_msg(r.rc == 2 && strstr(r.err, "Is a directory"), "%d %s",
	              r.rc, r.err);
	run_free(&r);
	/* a key set twice is said, not the last one taken in silence */
	char conf[600];
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	snprintf(conf, sizeof conf, "%s/ramexctl-twice.conf",
	         o && *o ? o : "var/test-output");
	FILE *f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fputs("url = http://127.0.0.1:1\ntoken = rx_1\ntoken = rx_2\n", f);
	fclose(f);
	ctl_env(&r, NULL, "--config", conf, "whoami", NULL);
	ck_assert_msg(r.rc == 2 && strstr(r.err, ":3: token is set twice "
	                                         "(first on line 2)"),
	              "%d %s", r.rc, r.err);
	run_free(&r);
}
END_TEST

/* A 2xx whose body is not JSON is no answer: exit 3 and the reason (found
 * from outside: a proxy's page, or a reply cut short, printed nothing and
 * exited 0, as if the list were empty). */
START_TEST(a_reply_that_is_not_json_fails)
{
	static const char *const answers[] = {
	    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
	    "22\r\nConnection: close\r\n\r\n<html>not ramex</html>",
	    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	    "Content-Length: 10\r\nConnection: close\r\n\r\n{\"items\":[",
	    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: "
	    "close\r\n\r\n"};
	for (int i = 0; i < 3; i++) {
		struct fake_http f;
		struct run r;
		char u[64];
		fake_http_start(&f, answers[i]);
		snprintf(u, sizeof u, "http://127.0.0.1:%d", f.port);
		ctl_env(&r, NULL, "--url", u, "--token", "rx_1", "orders",
		        "list", NULL);
		ck_assert_msg(r.rc == 3 && strstr(r.err, "not JSON"),
		              "answer %d: %d %s", i, r.rc, r.err);
		run_free(&r);
		fake_http_stop(&f);
	}
}
END_TEST

START_TEST(config_precedence)
{
	struct run r;
	char conf[512], env_url[128], env_tok[128], f_url[128];
	rxh_start(&h, "ramex_t_ctl_conf", "");
	rxh_world(&h, &w);
	URL(&h, url);
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	snprintf(conf, sizeof conf, "%s/ramexctl-test.conf",
	         o && *o ? o : "var/test-output");
	FILE *f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# test\nurl = %s\ntoken = %s\n", url, w.op_token);
	fclose(f);

	/* the file alone */
	ctl_env(&r, NULL, "--config", conf, "whoami", NULL);
	ck_assert_msg(r.rc == 0, "file: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "operator"));
	run_free(&r);
	/* the environment's token beats the file's */
	snprintf(env_tok, sizeof env_tok, "RAMEX_TOKEN=%s", w.trader_token);
	const char *e1[] = {env_tok, NULL};
	ctl_env(&r, e1, "--config", conf, "whoami", NULL);
	ck_assert_msg(r.rc == 0, "env: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "trader"));
	run_free(&r);
	/* a flag beats both */
	ctl_env(&r, e1, "--config", conf, "--token", w.finance_token, "whoami",
	        NULL);
	ck_assert_msg(r.rc == 0, "flag: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "finance"));
	run_free(&r);
	/* a wrong URL in the environment beats the file's good one ... */
	snprintf(env_url, sizeof env_url, "RAMEX_URL=http://127.0.0.1:1");
	const char *e2[] = {env_url, NULL};
	ctl_env(&r, e2, "--config", conf, "whoami", NULL);
	ck_assert_int_eq(r.rc, 3);
	run_free(&r);
	/* ... and the flag beats the environment */
	snprintf(f_url, sizeof f_url, "%s", url);
	ctl_env(&r, e2, "--config", conf, "--url", f_url, "whoami", NULL);
	ck_assert_int_eq(r.rc, 0);
	run_free(&r);
	/* a named config file that is missing is a usage error */
	ctl_env(&r, NULL, "--config", "no-such-ramexctl.conf", "whoami", NULL);
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);

	/* admin: a token created through the CLI works at once */
	ctl_env(&r, NULL, "--url", url, "--token", h.admin, "--json", "tokens",
	        "create", "ci", "--role", "finance", NULL);
	ck_assert_msg(r.rc == 0 && r.json, "token: %d %s", r.rc, r.err);
	char tok[128];
	snprintf(tok, sizeof tok, "%s",
	         json_string_value(json_object_get(r.json, "token")));
	run_free(&r);
	ctl(&r, tok, "whoami");
	ck_assert_msg(r.rc == 0, "new token: %s", r.err);
	run_free(&r);
	ctl(&r, h.admin, "teams", "create", "green");
	ck_assert_msg(r.rc == 0, "team: %s", r.err);
	run_free(&r);
	ctl_env(&r, NULL, "--url", url, "--token", h.admin, "--json", "teams",
	        "list", NULL);
	ck_assert_msg(r.rc == 0 && r.json, "teams: %s", r.err);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), 3);
	run_free(&r);
	rxh_stop(&h);
}
END_TEST

/* One statement with text parameters on the test's database. */
/* Whether text has a line "KEY  VALUE" (key, then spaces, then exactly
 * value). */
static int line_has(const char *text, const char *key, const char *value)
{
	size_t k = strlen(key), v = strlen(value);
	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : l) {
		if (strncmp(l, key, k) != 0 || l[k] != ' ')
			continue;
		const char *p = l + k;
		while (*p == ' ')
			p++;
		if (strncmp(p, value, v) == 0 && (p[v] == '\n' || !p[v]))
			return 1;
	}
	return 0;
}

static void sql(const struct rxh *hh, const char *q, int n,
                const char *const *pv)
{
	PGconn *c = PQconnectdb(hh->conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexecParams(c, q, n, NULL, pv, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
	                  PQresultStatus(r) == PGRES_TUPLES_OK,
	              "%s: %s", q, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(contracts_and_billing)
{
	struct run r;
	char acct[24], cid[24], inv[24], csv[512], tmonth[8];
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	/* billing only when asked, so that the test decides what is billed */
	rxh_start(&h, "ramex_t_ctl_bill", "--billing_interval_s=0");
	rxh_world(&h, &w);
	URL(&h, url);
	snprintf(acct, sizeof acct, "%lld", (long long)w.node_a);

	/* 1 GiB sold on spot by node a to the operator: an offline contract */
	ctl(&r, w.op_token, "orders", "place", "--market", "spot", "--side",
	    "buy", "--pages", "1GiB", "--price", "100000");
	ck_assert_msg(r.rc == 0, "bid: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.trader_token, "orders", "place", "--market", "spot", "--side",
	    "sell", "--pages", "1GiB", "--price", "100000", "--account", acct);
	ck_assert_msg(r.rc == 0, "offer: %d %s", r.rc, r.err);
	run_free(&r);

	ctl(&r, w.trader_token, "--json", "contracts", "list", "--role",
	    "seller", "--state", "pending_delivery");
	ck_assert_msg(r.rc == 0 && r.json, "list: %d %s", r.rc, r.err);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	json_t *c0 = json_array_get(items, 0);
	ck_assert_str_eq(json_string_value(json_object_get(c0, "delivery")),
	                 "offline");
	/* --json keeps the notice as the API sends it: ns */
	ck_assert_int_eq(jint(c0, "recall_notice_ns"), 3600LL * 1000000000);
	snprintf(cid, sizeof cid, "%lld", (long long)jint(c0, "id"));
	run_free(&r);
	ctl(&r, w.trader_token, "contracts", "list", "--role", "buyer");
	ck_assert_msg(r.rc == 0, "buyer side: %s", r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "(none)"));
	run_free(&r);
	ctl(&r, w.trader_token, "contracts", "list", "--role", "lender");
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);

	/* the buyer's move from the seller's trader: 403, exit 4 */
	ctl(&r, w.trader_token, "contracts", "end", cid);
	ck_assert_msg(r.rc == 4, "end by the seller: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.err, "error: "));
	run_free(&r);
	/* the seller delivers, with a note kept as the transition's why */
	ctl(&r, w.trader_token, "contracts", "deliver", cid, "--note",
	    "pages offline on node a");
	ck_assert_msg(r.rc == 0, "deliver: %d %s", r.rc, r.err);
	ck_assert_msg(strstr(r.out, "moved pending_delivery -> active"), "%s",
	              r.out);
	run_free(&r);
	/* a retried deliver changes nothing and is no error */
	ctl(&r, w.trader_token, "--json", "contracts", "deliver", cid);
	ck_assert_msg(r.rc == 0 && r.json, "again: %d %s", r.rc, r.err);
	ck_assert_str_eq(json_string_value(json_object_get(r.json, "state")),
	                 "active");
	run_free(&r);
	/* a trader of another team may not see it: 404, exit 1 */
	ctl(&r, w.trader2_token, "contracts", "recall", cid);
	ck_assert_msg(r.rc == 1, "recall by another team: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, h.admin, "contracts", "breach", cid);
	ck_assert_int_eq(r.rc, 2); /* a breach needs its --note */
	run_free(&r);

	ctl(&r, w.trader_token, "contracts", "show", cid);
	ck_assert_msg(r.rc == 0, "show: %s", r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "transitions"));
	/* the spot market's notice (3600 s) as a duration, not ns */
	const char *rn = strstr(r.out, "recall_notice_ns ");
	ck_assert_msg(rn, "no recall notice in %s", r.out);
	ck_assert_msg(strncmp(rn + strcspn(rn, "\n") - 4, " 1 h", 4) == 0,
	              "recall notice: %.60s", rn);
	ck_assert_ptr_null(strstr(r.out, "3600000000000"));
	ck_assert_ptr_nonnull(strstr(r.out, "pages offline on node a"));
	ck_assert_ptr_nonnull(strstr(r.out, "1.00 GiB"));
	run_free(&r);
	ctl(&r, w.finance_token, "--json", "contracts", "transitions", cid);
	ck_assert_msg(r.rc == 0 && r.json, "transitions: %s", r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_ge(json_array_size(items), 1);
	json_t *last = json_array_get(items, json_array_size(items) - 1);
	ck_assert_str_eq(json_string_value(json_object_get(last, "to_state")),
	                 "active");
	run_free(&r);

	/* one hour of the whole GiB, reported by the seller and ending now:
	 * what the agent would send (POST /v1/usage) */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t end = (int64_t)ts.tv_sec * 1000000000;
	char node[24], pstart[24], pend[24], ps[24];
	snprintf(node, sizeof node, "%lld", (long long)w.node_a);
	snprintf(pend, sizeof pend, "%lld", (long long)end);
	snprintf(ps, sizeof ps, "%lld", (long long)(262144LL * 3600));
	/* the contract delivered a moment ago: move its start back an hour
	 * so the report lies inside the delivery */
	snprintf(pstart, sizeof pstart, "%lld",
	         (long long)(end - 3600LL * 1000000000));
	const char *pv1[] = {cid, pstart};
	sql(&h,
	    "UPDATE contracts SET created_ns = $2::bigint - 1000000000, "
	    "delivered_ns = $2::bigint WHERE id = $1::bigint",
	    2, pv1);
	const char *pv2[] = {node, cid, pstart, pend, ps};
	sql(&h,
	    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	    "side, period_start_ns, period_end_ns, page_seconds, "
	    "kmod_page_seconds, kmod_pages, body_hash, delivered_ns, "
	    "billable_ps) VALUES ($1, 1, 1, $2, 'seller', $3, $4, $5, $5, "
	    "262144, 1, $4::bigint - $3::bigint, $5)",
	    5, pv2);

	/* the report as ramexd counts it */
	ctl(&r, w.finance_token, "--json", "usage", "list", "--contract", cid);
	ck_assert_msg(r.rc == 0 && r.json, "usage list: %d %s", r.rc, r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_eq(jint(json_array_get(items, 0), "page_seconds"),
	                 262144LL * 3600);
	run_free(&r);
	ctl(&r, w.trader_token, "usage", "list", "--from", "-2h");
	ck_assert_msg(r.rc == 0, "usage list --from: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "seller"));
	run_free(&r);
	ctl(&r, w.trader_token, "usage", "list", "--to", "-3h");
	ck_assert_msg(r.rc == 0, "usage list --to: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "(none)"));
	run_free(&r);
	ctl(&r, w.trader_token, "usage", "list", "--from", "yesterday");
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);

	/* only the admin runs the billing job */
	ctl(&r, w.finance_token, "billing", "run");
	ck_assert_msg(r.rc == 4, "finance run: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, h.admin, "--json", "billing", "run");
	ck_assert_msg(r.rc == 0 && r.json, "run: %d %s %s", r.rc, r.err, r.out);
	ck_assert_int_ge(jint(r.json, "movements"), 1);
	run_free(&r);
	ctl(&r, h.admin, "billing", "run");
	ck_assert_msg(r.rc == 0, "second run: %s", r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "movements"));
	run_free(&r);

	/* 942 249 600 000 page-s at 100 000 n$/page-year:
	 * 2 987 856.62... n$, rounded down with the rest carried */
	const int64_t amount = 262144LL * 3600 * 100000 / 31536000;
	time_t now_s = ts.tv_sec;
	struct tm tm;
	gmtime_r(&now_s, &tm);
	strftime(tmonth, sizeof tmonth, "%Y-%m", &tm);
	ctl(&r, w.finance_token, "--json", "invoices", "list", "--account",
	    acct, "--month", tmonth);
	ck_assert_msg(r.rc == 0 && r.json, "invoices: %d %s", r.rc, r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	json_t *i0 = json_array_get(items, 0);
	ck_assert_int_eq(jint(i0, "total"), -amount); /* node a is paid */
	ck_assert_str_eq(json_string_value(json_object_get(i0, "status")),
	                 "draft");
	snprintf(inv, sizeof inv, "%lld", (long long)jint(i0, "id"));
	run_free(&r);
	ctl(&r, w.finance_token, "invoices", "list", "--status", "draft");
	ck_assert_msg(r.rc == 0, "%s", r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "$0.00"));
	ck_assert_ptr_nonnull(strstr(r.out, "draft"));
	run_free(&r);
	ctl(&r, w.finance_token, "invoices", "list", "--month", "2026-13");
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);
	ctl(&r, w.finance_token, "invoices", "list", "--status", "paid");
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);

	ctl(&r, w.trader_token, "invoices", "show", inv);
	ck_assert_msg(r.rc == 0, "show: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "lines"));
	ck_assert_ptr_nonnull(strstr(r.out, "spot"));
	ck_assert_ptr_nonnull(strstr(r.out, "$0.0001")); /* the unit price */
	run_free(&r);
	/* another team's trader does not see it */
	ctl(&r, w.trader2_token, "invoices", "show", inv);
	ck_assert_msg(r.rc == 1, "other team: %d %s", r.rc, r.err);
	run_free(&r);

	/* the CSV, to a file and to stdout: the same bytes */
	snprintf(csv, sizeof csv, "%s/ramexctl-invoice.csv",
	         o && *o ? o : "var/test-output");
	remove(csv);
	ctl(&r, w.finance_token, "invoices", "csv", inv, "--output", csv);
	ck_assert_msg(r.rc == 0, "csv: %d %s", r.rc, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "2 lines"));
	run_free(&r);
	FILE *f = fopen(csv, "r");
	ck_assert_ptr_nonnull(f);
	static char file[8192];
	size_t n = fread(file, 1, sizeof file - 1, f);
	file[n] = 0;
	fclose(f);
	ck_assert_msg(strncmp(file, "BillingAccountId,", 17) == 0, "%s", file);
	ck_assert_ptr_nonnull(strstr(file, "ConsumedQuantity"));
	ck_assert_int_eq(count_lines(file), 2);
	ctl(&r, w.finance_token, "invoices", "csv", inv);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_str_eq(r.out, file);
	run_free(&r);
	ctl(&r, w.finance_token, "--json", "invoices", "csv", inv);
	ck_assert_msg(r.rc == 0 && r.json, "csv json: %s", r.err);
	ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), 1);
	run_free(&r);
	ctl(&r, w.finance_token, "invoices", "csv", inv, "--output",
	    "no-such-dir/x.csv");
	ck_assert_int_eq(r.rc, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "could not write"));
	run_free(&r);
	/* an --output that is not a regular file is written through, not
	 * renamed over (found from outside: --output /dev/full replaced
	 * root's /dev/full with a regular file and said "wrote"); a link
	 * stands here for the device, which a test may not risk */
	char link[600], real[600];
	snprintf(real, sizeof real, "%s.real", csv);
	snprintf(link, sizeof link, "%s.link", csv);
	remove(real);
	remove(link);
	ck_assert_int_eq(symlink(real, link), 0);
	ctl(&r, w.finance_token, "invoices", "csv", inv, "--output", link);
	ck_assert_msg(r.rc == 0, "csv to a link: %d %s", r.rc, r.err);
	run_free(&r);
	struct stat lst;
	ck_assert_int_eq(lstat(link, &lst), 0);
	ck_assert_msg(S_ISLNK(lst.st_mode), "the link was replaced by a file");
	ck_assert_int_eq(stat(real, &lst), 0);
	ck_assert_int_eq((long)lst.st_size, (long)n);
	/* and printed output that cannot be written (a full disk) is an
	 * error, not a cut export and exit 0 */
	char cmd[1800], bin[512];
	ctl_path(bin, sizeof bin);
	snprintf(
	    cmd, sizeof cmd,
	    "%s --url %s --token %s invoices csv %s >/dev/full 2>/dev/null",
	    bin, url, w.finance_token, inv);
	int st = system(cmd);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2,
	              "to a full disk: status %d", st);

	ctl(&r, w.finance_token, "--json", "usage", "export", "--from", tmonth,
	    "--to", tmonth);
	ck_assert_msg(r.rc == 0 && r.json, "usage export: %d %s", r.rc, r.err);
	json_t *u0 = json_array_get(json_object_get(r.json, "items"), 0);
	ck_assert_int_eq(jint(u0, "billed_page_seconds"), 262144LL * 3600);
	run_free(&r);
	ctl(&r, w.finance_token, "billing", "summary", "--by", "account");
	ck_assert_msg(r.rc == 0, "summary: %d %s", r.rc, r.err);
	run_free(&r);
	ctl(&r, w.finance_token, "billing", "summary", "--by", "node");
	ck_assert_int_eq(r.rc, 2);
	run_free(&r);

	/* the books balance ... */
	ctl(&r, w.finance_token, "ledger", "check");
	ck_assert_msg(r.rc == 0, "check: %d %s %s", r.rc, r.err, r.out);
	/* money in dollars, as everywhere in ramexctl: the sum the server
	 * sends as n$ text was "0" */
	ck_assert_msg(line_has(r.out, "sum", "$0.00"), "%s", r.out);
	run_free(&r);
	/* ... until an invoice's total no longer equals its postings */
	const char *pv3[] = {inv};
	sql(&h, "UPDATE invoices SET total = total + 1 WHERE id = $1::bigint",
	    1, pv3);
	ctl(&r, w.finance_token, "ledger", "check");
	ck_assert_msg(r.rc == 5, "broken check: %d %s %s", r.rc, r.err, r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "invoice"));
	ck_assert_ptr_nonnull(strstr(r.err, "ledger check failed"));
	run_free(&r);
	ctl(&r, w.trader_token, "ledger", "check");
	ck_assert_int_eq(r.rc, 4);
	run_free(&r);
	/* a final invoice's payable cents and sub-cent carries (n$) and the
	 * server's total to the cent, in dollars: they were 1234, 0, 4100000
	 * and 0.00 */
	sql(&h,
	    "UPDATE invoices SET status = 'final', payable_cents = 1234, "
	    "cents_in = 0, cents_out = 4100000, finalized_at = now() WHERE "
	    "id <> $1::bigint",
	    1, pv3);
	ctl(&r, w.finance_token, "invoices", "list", "--status", "final");
	ck_assert_msg(r.rc == 0, "%s", r.err);
	char fin[24];
	ck_assert_int_eq(sscanf(strstr(r.out, "\n") + 1, "%23s", fin), 1);
	run_free(&r);
	ctl(&r, w.finance_token, "invoices", "show", fin);
	ck_assert_msg(r.rc == 0, "%s", r.err);
	ck_assert_msg(line_has(r.out, "payable_cents", "$12.34") &&
	                  line_has(r.out, "cents_in", "$0.00") &&
	                  line_has(r.out, "cents_out", "$0.0041") &&
	                  line_has(r.out, "total_shown", "$0.00"),
	              "%s", r.out);
	run_free(&r);

	/* report 3 without report 2: a gap that finance can see */
	const char *pv4[] = {node, cid, pend};
	sql(&h,
	    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	    "side, period_start_ns, period_end_ns, page_seconds, "
	    "kmod_page_seconds, kmod_pages, body_hash, delivered_ns, "
	    "billable_ps) VALUES ($1, 1, 3, $2, 'seller', $3, $3::bigint + "
	    "1000000000, 0, 0, 262144, 3, 1000000000, 0)",
	    3, pv4);
	ctl(&r, w.finance_token, "--json", "usage", "gaps", "--node", node);
	ck_assert_msg(r.rc == 0 && r.json, "gaps: %d %s", r.rc, r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_eq(jint(json_array_get(items, 0), "first"), 2);
	ck_assert_int_eq(jint(json_array_get(items, 0), "missing"), 1);
	run_free(&r);

	/* two reports, a page of one: the cursor leads to the other */
	ctl(&r, w.finance_token, "--json", "usage", "list", "--node", node,
	    "--limit", "1");
	ck_assert_msg(r.rc == 0 && r.json, "page 1: %d %s", r.rc, r.err);
	char cursor[64];
	snprintf(cursor, sizeof cursor, "%s",
	         json_string_value(json_object_get(r.json, "next")));
	int64_t seq1 =
	    jint(json_array_get(json_object_get(r.json, "items"), 0), "seq");
	run_free(&r);
	ctl(&r, w.finance_token, "usage", "list", "--node", node, "--limit",
	    "1");
	ck_assert_msg(strstr(r.out, "(more: --after "), "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, cursor));
	run_free(&r);
	ctl(&r, w.finance_token, "--json", "usage", "list", "--node", node,
	    "--limit", "1", "--after", cursor);
	ck_assert_msg(r.rc == 0 && r.json, "page 2: %d %s", r.rc, r.err);
	items = json_object_get(r.json, "items");
	ck_assert_int_eq(json_array_size(items), 1);
	ck_assert_int_ne(jint(json_array_get(items, 0), "seq"), seq1);
	run_free(&r);

	ctl_env(&r, NULL, "invoices", "--help", NULL);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "invoices csv ID [--output FILE]"));
	run_free(&r);
	rxh_stop(&h);
}
END_TEST

/* The server's problems name its JSON fields and query parameters; a
 * person typed ramexctl's options, and reads those (an outside test found
 * "expires_ns", "min_pages" and "limit" where --expires, --min and --limit
 * were meant). */
static void says_option(struct run *r, const char *flag, const char *field)
{
	ck_assert_msg(r->rc == 1, "%s: rc %d %s", flag, r->rc, r->err);
	ck_assert_msg(strstr(r->err, flag), "no %s in: %s", flag, r->err);
	ck_assert_msg(!strstr(r->err, field), "%s in: %s", field, r->err);
	run_free(r);
}

START_TEST(errors_name_the_options)
{
	struct run r;
	char acct[24];
	rxh_start(&h, "ramex_t_ctl_names", "");
	rxh_world(&h, &w);
	URL(&h, url);
	snprintf(acct, sizeof acct, "%lld", (long long)w.node_a);

	/* a body's field: expires_ns is --expires */
	ctl(&r, w.trader_token, "orders", "place", "--market", "spot", "--side",
	    "sell", "--pages", "256", "--price", "$0.0001", "--tif", "gtd",
	    "--account", acct);
	says_option(&r, "--expires", "expires_ns");
	/* a body's field named differently: min_pages is --min */
	ctl(&r, w.op_token, "markets", "create", "perm-2031", "--tick",
	    "$0.000001", "--lot", "256", "--min", "300");
	says_option(&r, "--min 300", "min_pages");
	/* a query parameter at the start of the message */
	ctl(&r, w.trader_token, "orders", "list", "--limit", "0");
	says_option(&r, "--limit must be", ": limit must");
	/* an id the server does not know, by its option */
	ctl(&r, h.admin, "tokens", "create", "--role", "node", "--account",
	    "999999");
	ck_assert_msg(r.rc != 0, "token for no account: %s", r.out);
	ck_assert_msg(!strstr(r.err, "account_id"), "account_id in: %s", r.err);
	run_free(&r);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ramexctl");
	TCase *tc = tcase_create("ramexctl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, trade_flow);
	tcase_add_test(tc, exit_codes);
	tcase_add_test(tc, url_and_token_are_checked);
	tcase_add_test(tc, a_reply_that_is_not_json_fails);
	tcase_add_test(tc, config_precedence);
	tcase_add_test(tc, contracts_and_billing);
	tcase_add_test(tc, errors_name_the_options);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
