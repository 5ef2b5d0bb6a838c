/*
 * test_lendsup.c — the supervision of the agent's lend children
 * (node-agent/lendsup.h): a child that fails is started again after its
 * backoff, one that ends cleanly or with one of its final exit codes is
 * not, a stopped one is not, a deadline stops it; the secret file is 0600;
 * the meter file reads back. Children are /bin/sh one-liners; times are
 * the caller's now_ms, so nothing here depends on how fast the machine is.
 */
#include "node-agent/lendsup.h"

#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

static void setup(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/test_lendsup.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void sh(struct lendsup_child *c, const char *script)
{
	lendsup_arg(c, "/bin/sh");
	lendsup_arg(c, "-c");
	lendsup_arg(c, "%s", script);
}

/* Polls at a fixed now_ms until the child was reaped. */
static void reap(struct lendsup_child *c, int64_t now_ms)
{
	for (int i = 0; i < 20000 && c->pid > 0; i++) {
		lendsup_poll(c, now_ms);
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(c->pid, 0);
}

START_TEST(failing_child_restarts_with_backoff)
{
	struct lendsup_child c;
	char err[512];
	lendsup_init(&c, dir, "lend-test", 7);
	sh(&c, "exit 1");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	reap(&c, 0);
	ck_assert_int_eq(c.starts, 1);
	ck_assert(!c.stopping);
	/* not before its backoff (1 s) */
	lendsup_poll(&c, 999);
	ck_assert_int_eq(c.starts, 1);
	lendsup_poll(&c, 1000);
	ck_assert_int_eq(c.starts, 2);
	reap(&c, 1000);
	/* the backoff doubled: 2 s after that exit */
	lendsup_poll(&c, 2999);
	ck_assert_int_eq(c.starts, 2);
	lendsup_poll(&c, 3000);
	ck_assert_int_eq(c.starts, 3);
	lendsup_stop(&c, 2000);
	ck_assert(c.stopping);
	lendsup_poll(&c, 1000000);
	ck_assert_int_eq(c.starts, 3);
}
END_TEST

START_TEST(clean_and_final_exits_stay_down)
{
	struct lendsup_child c;
	char err[512];
	lendsup_init(&c, dir, "lend-test", 8);
	sh(&c, "exit 0");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	reap(&c, 0);
	ck_assert(c.stopping);
	ck_assert_int_eq(lendsup_final_code(&c), 0);
	lendsup_poll(&c, 100000);
	ck_assert_int_eq(c.starts, 1);

	lendsup_init(&c, dir, "lend-test", 9);
	c.final_exits = 1u << 3;
	sh(&c, "exit 3");
	ck_assert_int_eq(lendsup_final_code(&c), -1); /* not started yet */
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	reap(&c, 0);
	ck_assert(c.stopping);
	/* what its supervisor acts on: the agent ends a lost lender's
	 * contract */
	ck_assert_int_eq(lendsup_final_code(&c), 3);
	lendsup_poll(&c, 100000);
	ck_assert_int_eq(c.starts, 1);

	/* 4 is not final for it: started again */
	lendsup_init(&c, dir, "lend-test", 10);
	c.final_exits = 1u << 3;
	sh(&c, "exit 4");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	reap(&c, 0);
	ck_assert_int_eq(lendsup_final_code(&c), -1);
	lendsup_poll(&c, 100000);
	ck_assert_int_eq(c.starts, 2);
	lendsup_stop(&c, 2000);
	/* stopped is not ended on its own terms */
	ck_assert_int_eq(lendsup_final_code(&c), -1);
}
END_TEST

START_TEST(stop_signal_and_deadline)
{
	struct lendsup_child c;
	char err[512], path[600];
	/* USR1 is the lender's notice: the child must see it */
	char ready[600], script[1400];
	lendsup_init(&c, dir, "lend-test", 11);
	snprintf(path, sizeof path, "%s/usr1", dir);
	snprintf(ready, sizeof ready, "%s/ready", dir);
	snprintf(script, sizeof script,
	         "trap 'echo got > %s; exit 0' USR1; : > %s; while :; do "
	         "sleep 0.05; done",
	         path, ready);
	sh(&c, script);
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	/* sent once the trap is set (before, USR1 would end the shell) */
	for (int i = 0; i < 20000 && access(ready, F_OK) != 0; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(access(ready, F_OK), 0);
	lendsup_signal(&c, SIGUSR1);
	reap(&c, 0);
	ck_assert_int_eq(access(path, F_OK), 0);
	ck_assert(c.stopping);

	/* a deadline stops a child that would run for ever */
	lendsup_init(&c, dir, "lend-test", 12);
	sh(&c, "while :; do sleep 1; done");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	c.deadline_ms = 5000;
	lendsup_poll(&c, 4999);
	ck_assert_int_gt(c.pid, 0);
	lendsup_poll(&c, 5000);
	ck_assert_int_eq(c.pid, 0);
	ck_assert(c.stopping);
	lendsup_poll(&c, 100000);
	ck_assert_int_eq(c.starts, 1);

	/* retired: it finishes on its own, however long it takes before
	 * its deadline, and is never started again, even after a failure */
	lendsup_init(&c, dir, "lend-test", 14);
	sh(&c, "trap 'sleep 0.2; exit 4' TERM; while :; do sleep 0.05; done");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	struct timespec settle = {0, 100 * 1000000L}; /* the trap is set */
	nanosleep(&settle, NULL);
	lendsup_retire(&c, SIGTERM, 60000);
	lendsup_poll(&c, 1000);
	ck_assert_int_gt(c.pid, 0); /* not killed: still finishing */
	reap(&c, 1000);
	ck_assert(WIFEXITED(c.last_status));
	ck_assert_int_eq(WEXITSTATUS(c.last_status), 4);
	lendsup_poll(&c, 100000);
	ck_assert_int_eq(c.starts, 1);

	/* retired and still running at its deadline: stopped */
	lendsup_init(&c, dir, "lend-test", 15);
	sh(&c, "trap '' TERM; while :; do sleep 0.05; done");
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), 0);
	lendsup_retire(&c, 0, 5000);
	lendsup_poll(&c, 4999);
	ck_assert_int_gt(c.pid, 0);
	lendsup_poll(&c, 5000); /* SIGTERM, then SIGKILL if it stays */
	ck_assert_int_eq(c.pid, 0);
	ck_assert_int_eq(c.starts, 1);
}
END_TEST

START_TEST(files)
{
	struct lendsup_child c;
	char err[512];
	struct stat st;
	lendsup_init(&c, dir, "lend-test", 13);
	ck_assert_int_eq(lendsup_write_secret(
	                     &c,
	                     "00112233445566778899aabbccddeeff00112233445566"
	                     "778899aabbccddeeff",
	                     err, sizeof err),
	                 0);
	ck_assert_int_eq(stat(c.secret_file, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* a program that is not there is an error with the setting to fix */
	lendsup_arg(&c, "%s/no-such-program", dir);
	ck_assert_int_eq(lendsup_start(&c, 0, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "lend_bin_dir"));

	struct lend_meter_report r, back;
	ck_assert_int_eq(lendsup_meter(&c, &back), -1);
	memset(&r, 0, sizeof r);
	r.contract = 13;
	r.role = LEND_METER_LENDER;
	r.pages_hosted = 256;
	r.hosted_page_s = 12345;
	char line[512];
	ck_assert_int_gt(lend_meter_format(&r, line, sizeof line), 0);
	FILE *f = fopen(c.meter_file, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s\n", line);
	fclose(f);
	ck_assert_int_eq(lendsup_meter(&c, &back), 0);
	ck_assert_int_eq(back.hosted_page_s, 12345);
	ck_assert_int_eq(back.pages_hosted, 256);
	lendsup_cleanup(&c);
	ck_assert_int_ne(access(c.secret_file, F_OK), 0);

	int port = lendsup_free_port("127.0.0.1");
	ck_assert_int_gt(port, 0);
	ck_assert_int_lt(port, 65536);
	/* IPv6, as lend_listen writes it, where this machine has ::1 */
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 lo = {.sin6_family = AF_INET6,
	                          .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	if (fd >= 0 && bind(fd, (struct sockaddr *)&lo, sizeof lo) == 0) {
		port = lendsup_free_port("[::1]");
		ck_assert_int_gt(port, 0);
		ck_assert_int_lt(port, 65536);
		port = lendsup_free_port("::1");
		ck_assert_int_gt(port, 0);
	}
	if (fd >= 0)
		close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lendsup");
	TCase *t = tcase_create("children");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, failing_child_restarts_with_backoff);
	tcase_add_test(t, clean_and_final_exits_stay_down);
	tcase_add_test(t, stop_signal_and_deadline);
	tcase_add_test(t, files);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
