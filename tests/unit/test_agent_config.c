/*
 * test_agent_config.c — defaults, the config file, flags over the file,
 * and errors that say where and why.
 */
#include "node-agent/config.h"
#include "node-agent/lend/lend_qos.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512], path[256];

static void write_conf(const char *text)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof path, "%s/test_agent_config.XXXXXX", base);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

START_TEST(defaults_are_sane)
{
	struct agent_config c;
	config_default(&c);
	ck_assert_int_eq(config_check(&c, err, sizeof err), 0);
	ck_assert_str_eq(c.backend, "kmod");
	ck_assert_int_eq(c.est.window_ns, 60000000000LL);
	ck_assert_int_eq(c.strat.lot, 256);
	ck_assert_str_eq(c.strat.spot_market, "spot");
}
END_TEST

START_TEST(file_then_flags)
{
	struct agent_config c;
	write_conf("# a node\n"
	           "backend = sim   # in-process\n"
	           "\n"
	           "  window_s=120\n"
	           "perm_market = perm-2027\n"
	           "margin_pct = 20\n"
	           "breach_perm = no\n"
	           "fault_cost_us = 80\n");
	char cfg[300];
	snprintf(cfg, sizeof cfg, "--config=%s", path);
	char *argv[] = {"ramex-agent",  "--margin_pct=30", cfg,
	                "--spot_floor", "70000",           NULL};
	ck_assert_int_eq(config_args(&c, 5, argv, err, sizeof err), 0);
	ck_assert_str_eq(c.backend, "sim");
	ck_assert_int_eq(c.est.window_ns, 120000000000LL);
	ck_assert_int_eq(c.est.fault_cost_ns, 80000);
	ck_assert_str_eq(c.strat.perm_market, "perm-2027");
	ck_assert_int_eq(c.strat.margin_pct, 30); /* the flag wins */
	ck_assert_int_eq(c.strat.spot_floor, 70000);
	ck_assert_int_eq(c.strat.breach_perm, 0);
	ck_assert_int_eq(config_check(&c, err, sizeof err), 0);

	/* the dump reads back to the same settings */
	FILE *f = fopen(path, "w");
	config_dump(&c, f);
	fclose(f);
	struct agent_config d;
	config_default(&d);
	ck_assert_msg(config_load(&d, path, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(memcmp(&c, &d, sizeof c), 0);
	unlink(path);
}
END_TEST

START_TEST(errors_say_where)
{
	struct agent_config c;
	config_default(&c);
	write_conf("backend = sim\nwindow_s = soon\n");
	ck_assert_int_eq(config_load(&c, path, err, sizeof err), -1);
	ck_assert_msg(strstr(err, ":2: window_s: expected a whole number"),
	              "%s", err);
	unlink(path);
	write_conf("colour = blue\n");
	ck_assert_int_eq(config_load(&c, path, err, sizeof err), -1);
	ck_assert_msg(strstr(err, ":1: unknown setting \"colour\""), "%s", err);
	unlink(path);
	write_conf("just words\n");
	ck_assert_int_eq(config_load(&c, path, err, sizeof err), -1);
	ck_assert(strstr(err, "expected key = value"));
	unlink(path);
	ck_assert_int_eq(config_load(&c, "/nonexistent.conf", err, sizeof err),
	                 -1);

	ck_assert_int_eq(
	    config_set(&c, "perm_share_pct", "101", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "outside 0..100"), "%s", err);
	ck_assert_int_eq(
	    config_set(&c, "breach_perm", "maybe", err, sizeof err), -1);

	/* the bridge's reply timeout: the programs' own range, 1 ms..1 h */
	ck_assert_int_eq(c.lend_reply_timeout_ms, 5000);
	ck_assert_int_eq(config_set(&c, "lend_reply_timeout_ms", "0", err,
	                            sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "outside 1..3600000"), "%s", err);
	ck_assert_int_eq(config_set(&c, "lend_reply_timeout_ms", "250", err,
	                            sizeof err),
	                 0);
	ck_assert_int_eq(c.lend_reply_timeout_ms, 250);
	/* the bridge's keep-awake threads: off unless asked, 0..8 */
	ck_assert_int_eq(c.lend_keep_awake, 0);
	ck_assert_int_eq(
	    config_set(&c, "lend_keep_awake", "9", err, sizeof err), -1);
	ck_assert_msg(strstr(err, "outside 0..8"), "%s", err);
	ck_assert_int_eq(
	    config_set(&c, "lend_keep_awake", "2", err, sizeof err), 0);
	ck_assert_int_eq(c.lend_keep_awake, 2);
	/* idle polling: the default is lend_qos's, a yes/no */
	ck_assert_int_eq(c.lend_idle_poll, LEND_QOS_DEFAULT);
	ck_assert_int_eq(
	    config_set(&c, "lend_idle_poll", "maybe", err, sizeof err), -1);
	ck_assert_int_eq(
	    config_set(&c, "lend_idle_poll", "no", err, sizeof err), 0);
	ck_assert_int_eq(c.lend_idle_poll, 0);
	ck_assert_int_eq(
	    config_set(&c, "lend_idle_poll", "yes", err, sizeof err), 0);
	ck_assert_int_eq(c.lend_idle_poll, 1);
	/* the direct path: on by default where it can be (attach, plain
	 * TCP); TLS or another mode keeps the bridge between */
	ck_assert_int_eq(c.lend_direct, 1);
	ck_assert_int_eq(config_lend_direct(&c), 1);
	ck_assert_int_eq(
	    config_set(&c, "lend_tls_ca", "/etc/ramex/ca.pem", err, sizeof err),
	    0);
	ck_assert_int_eq(config_lend_direct(&c), 0);
	c.lend_tls_ca[0] = 0;
	ck_assert_int_eq(
	    config_set(&c, "lend_borrow_mode", "listen", err, sizeof err), 0);
	ck_assert_int_eq(config_lend_direct(&c), 0);
	ck_assert_int_eq(
	    config_set(&c, "lend_borrow_mode", "attach", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "lend_direct", "no", err, sizeof err),
	                 0);
	ck_assert_int_eq(config_lend_direct(&c), 0);
	/* the device: nbd unless asked; auto takes ublk only where the
	 * control device exists (here /dev/null stands in for it); listen
	 * mode is NBD on loopback whatever it says */
	ck_assert_str_eq(c.lend_device, "nbd");
	ck_assert_int_eq(config_lend_ublk(&c, "/dev/null"), 0);
	ck_assert_int_eq(config_set(&c, "lend_device", "auto", err, sizeof err),
	                 0);
	ck_assert_int_eq(config_lend_ublk(&c, "/dev/null"), 1);
	ck_assert_int_eq(config_lend_ublk(&c, "/nonexistent/ublk-control"), 0);
	ck_assert_int_eq(config_set(&c, "lend_device", "ublk", err, sizeof err),
	                 0);
	ck_assert_int_eq(config_lend_ublk(&c, "/nonexistent/ublk-control"), 1);
	ck_assert_int_eq(
	    config_set(&c, "lend_borrow_mode", "listen", err, sizeof err), 0);
	ck_assert_int_eq(config_lend_ublk(&c, "/dev/null"), 0);

	char *a1[] = {"ramex-agent", "--nope=1", NULL};
	ck_assert_int_eq(config_args(&c, 2, a1, err, sizeof err), -1);
	ck_assert(strstr(err, "unknown option --nope"));
	char *a2[] = {"ramex-agent", "--lot_pages", NULL};
	ck_assert_int_eq(config_args(&c, 2, a2, err, sizeof err), -1);
	ck_assert(strstr(err, "needs a value"));
	char *a3[] = {"ramex-agent", "--help", NULL};
	ck_assert_int_eq(config_args(&c, 2, a3, err, sizeof err), 1);
}
END_TEST

START_TEST(check_catches_nonsense)
{
	struct agent_config c;
	config_default(&c);
	strcpy(c.backend, "magic");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "sim, cgroup or kmod"));
	config_default(&c);
	strcpy(c.backend, "cgroup");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "cgroup = DIR"));
	config_default(&c);
	c.est.unpressure_ppm = c.est.pressure_ppm + 1;
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "estimator:"));
	config_default(&c);
	c.strat.spot_floor = c.strat.spot_ceiling + 1;
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "strategy:"));
	config_default(&c);
	strcpy(c.exchange_url, "ftp://x");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	config_default(&c);
	strcpy(c.probe_via, "max");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "probe_via must be auto, reclaim or high"));
	strcpy(c.probe_via, "high");
	ck_assert_int_eq(config_check(&c, err, sizeof err), 0);
	/* lend_listen: HOST:PORT, an IPv6 host in brackets */
	const char *good[] = {"10.0.0.7:7100", "[::1]:0", "[2001:db8::7]:7100",
	                      "lender.dc1:0"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		config_default(&c);
		strcpy(c.lend_listen, good[i]);
		c.lend_plaintext = 1; /* off loopback: allowed in clear */
		ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s: %s",
		              good[i], err);
	}
	/* names that go into request paths and headers (found from outside:
	 * spot_market = "a b" or bytes outside ASCII were taken and every
	 * request for the book failed with nothing naming the setting) */
	const char *bad_market[] = {"a b", "../orders", "spot?x=1", "\xff\xfe",
	                            "", ".."};
	for (size_t i = 0; i < sizeof bad_market / sizeof bad_market[0]; i++) {
		config_default(&c);
		strcpy(c.strat.spot_market, bad_market[i]);
		ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "spot_market must be a market's name"),
		              "%s: %s", bad_market[i], err);
	}
	config_default(&c);
	strcpy(c.strat.perm_market, "perm 2027");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "perm_market"));
	strcpy(c.strat.perm_market, "perm-2027");
	ck_assert_int_eq(config_check(&c, err, sizeof err), 0);
	strcpy(c.key_id, "nk_1\r");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert(strstr(err, "key_id has"));
	/* off loopback without TLS or lend_plaintext: refused at start, not
	 * when the first lend contract cannot be served */
	config_default(&c);
	strcpy(c.lend_listen, "10.0.0.7:0");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "off loopback"), "%s", err);
	strcpy(c.lend_tls_cert, "/etc/ramex/lend.crt");
	strcpy(c.lend_tls_key, "/etc/ramex/lend.key");
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
	config_default(&c);
	strcpy(c.lend_listen, "127.0.0.1:0");
	/* lend_device: a word from its list, ublk only where it attaches */
	config_default(&c);
	strcpy(c.lend_device, "ublkb");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "lend_device must be nbd, ublk"), "%s", err);
	strcpy(c.lend_device, "ublk");
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
	strcpy(c.lend_borrow_mode, "listen");
	ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "lend_device = ublk needs lend_borrow_mode "
	                          "= attach (it is listen)"),
	              "%s", err);
	strcpy(c.lend_device, "auto");
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(config_check(&c, err, sizeof err) == 0, "%s", err);
	const char *bad[] = {"10.0.0.7", "::1:7100", "[::1]", "host:99999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		config_default(&c);
		strcpy(c.lend_listen, bad[i]);
		ck_assert_int_eq(config_check(&c, err, sizeof err), -1);
		ck_assert_msg(strstr(err, "lend_listen must be HOST:PORT"),
		              "%s: %s", bad[i], err);
	}
}
END_TEST

START_TEST(help_lists_every_setting)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	config_help(f);
	fclose(f);
	ck_assert(strstr(buf, "usage: ramex-agent"));
	ck_assert(strstr(buf, "--window_s"));
	ck_assert(strstr(buf, "[60]"));
	ck_assert(strstr(buf, "--breach_perm"));
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults_are_sane);
	tcase_add_test(tc, file_then_flags);
	tcase_add_test(tc, errors_say_where);
	tcase_add_test(tc, check_catches_nonsense);
	tcase_add_test(tc, help_lists_every_setting);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
