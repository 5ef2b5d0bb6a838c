/* agent_harness.c — ramex-agent processes for tests; see agent_harness.h. */
#include "tests/integration/agent_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

const char *agh_out_dir(void)
{
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	return o && *o ? o : "var/test-output";
}

void agh_bin_dir(char *buf, size_t len)
{
	const char *b = getenv("RAMEX_BUILD");
	char probe[700];
	snprintf(buf, len, "%s/san/bin", b && *b ? b : "build");
	snprintf(probe, sizeof probe, "%s/ramex-agent", buf);
	if (access(probe, X_OK) != 0)
		snprintf(buf, len, "%s/bin", b && *b ? b : "build");
}

void agh_sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

void agh_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "could not write %s: %s", path, strerror(errno));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

void agh_arg(struct agh_agent *a, const char *fmt, ...)
{
	ck_assert_int_lt(a->nargs, (int)(sizeof a->args / sizeof a->args[0]));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->args[a->nargs++], sizeof a->args[0], fmt, ap);
	va_end(ap);
}

void agh_init(struct agh_agent *a, const char *leaf, const char *key,
              const char *secret, int port, long total, long usage,
              const char *const *more)
{
	char cmd[1100], s[100];
	memset(a, 0, sizeof *a);
	snprintf(a->dir, sizeof a->dir, "%s/%s", agh_out_dir(), leaf);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", a->dir,
	         a->dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(a->spool, sizeof a->spool, "%s/spool", a->dir);
	snprintf(a->status, sizeof a->status, "%s/status.prom", a->dir);
	snprintf(a->usage, sizeof a->usage, "%s/usage", a->dir);
	snprintf(a->secret, sizeof a->secret, "%s/secret", a->dir);
	snprintf(a->log, sizeof a->log, "%s/agent.log", a->dir);
	snprintf(s, sizeof s, "%s\n", secret);
	agh_write_file(a->secret, s);
	chmod(a->secret, 0600);
	snprintf(s, sizeof s, "%ld\n", usage);
	agh_write_file(a->usage, s);
	agh_arg(a, "--exchange_url=http://127.0.0.1:%d", port);
	agh_arg(a, "--key_id=%s", key);
	agh_arg(a, "--secret_file=%s", a->secret);
	agh_arg(a, "--backend=sim");
	agh_arg(a, "--sim_total_pages=%ld", total);
	agh_arg(a, "--sim_usage_pages=%ld", usage);
	agh_arg(a, "--sim_usage_file=%s", a->usage);
	agh_arg(a, "--spool=%s", a->spool);
	agh_arg(a, "--status_file=%s", a->status);
	agh_arg(a, "--sample_s=1");
	agh_arg(a, "--report_s=1");
	agh_arg(a, "--poll_s=5");
	agh_arg(a, "--spot_market=spot");
	agh_arg(a, "--perm_market=");
	agh_arg(a, "--tick=1000");
	agh_arg(a, "--log_level=debug");
	for (; more && *more; more++)
		agh_arg(a, "%s", *more);
}

void agh_start(struct agh_agent *a)
{
	char bin[600];
	char *argv[40];
	int n = 0;
	agh_bin_dir(bin, sizeof bin - 16);
	strcat(bin, "/ramex-agent");
	argv[n++] = bin;
	for (int i = 0; i < a->nargs; i++)
		argv[n++] = a->args[i];
	argv[n] = NULL;
	a->pid = rxh_spawn(bin, argv, a->log);
}

int agh_signal(struct agh_agent *a, int sig)
{
	int st = 0;
	if (a->pid <= 0)
		return 0;
	kill(a->pid, sig);
	while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
	return st;
}

int64_t agh_metric(const struct agh_agent *a, const char *name)
{
	char line[512];
	size_t n = strlen(name);
	int64_t v = -1;
	FILE *f = fopen(a->status, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, name, n) && line[n] == ' ')
			v = strtoll(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

long agh_q(PGconn *c, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	return testdb_scalar(c, sql);
}
