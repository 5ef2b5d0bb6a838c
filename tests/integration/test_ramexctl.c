/*
 * test_ramexctl.c — ramexctl against a real ramexd (ramexd_harness.h) on a
 * private PostgreSQL: create a market, place a bid and an offer, see the
 * book, trade, list contracts, cancel; and the exit codes a script relies
 * on: 1 for a refused order, 2 for a bad command line, 3 for no server,
 * 4 for a bad token. --json output must parse; human output must show
 * dollars and GiB. Where the URL and token come from is checked too.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
	ctl(&r, w.op_token, "orders", "cancel", id);
	ck_assert_msg(r.rc == 0, "cancel: %d %s", r.rc, r.err);
	run_free(&r);
	ctl_env(&r, NULL, "--url", url, "--token", w.op_token, "--json",
	        "orders", "show", id, NULL);
	ck_assert_msg(r.rc == 0 && r.json, "show: %s", r.err);
	ck_assert_str_eq(json_string_value(json_object_get(r.json, "status")),
	                 "cancelled");
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

int main(void)
{
	Suite *s = suite_create("ramexctl");
	TCase *tc = tcase_create("ramexctl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, trade_flow);
	tcase_add_test(tc, exit_codes);
	tcase_add_test(tc, config_precedence);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
