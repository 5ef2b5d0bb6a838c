/* lend_args.c — command-line helpers for the lending programs. */
#include "node-agent/lend/lend_args.h"

#include "common/log.h"
#include "node-agent/lend/lend_awake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct args_opt lend_args_contract(int64_t *out)
{
	return (struct args_opt){
	    "--contract", ARGS_INT,
	    out,          1,
	    INT64_MAX,    "--contract must be a positive integer",
	    "ID",         "the lend contract, by its id at the exchange"};
}

struct args_opt lend_args_secret_file(const char **out)
{
	return (struct args_opt){
	    "--secret-file",
	    ARGS_STR,
	    out,
	    0,
	    0,
	    NULL,
	    "F",
	    "the contract's secret, 64 hex digits on the file's first line "
	    "(never on the command line, where ps shows it)"};
}

struct args_opt lend_args_tls_ca(const char **out)
{
	return (struct args_opt){
	    "--tls-ca", ARGS_STR,
	    out,        0,
	    0,          NULL,
	    "F",        "speak TLS to the lender, trusting this CA (PEM)"};
}

struct args_opt lend_args_meter_file(const char **out)
{
	return (struct args_opt){
	    "--meter-file",
	    ARGS_STR,
	    out,
	    0,
	    0,
	    NULL,
	    "F",
	    "the meter, one logfmt line replaced at every tick (the agent "
	    "reports usage from it)"};
}

struct args_opt lend_args_keep_awake(int64_t *out)
{
	return (struct args_opt){
	    "--keep-awake",
	    ARGS_INT,
	    out,
	    0,
	    LEND_AWAKE_MAX_THREADS,
	    NULL,
	    "N",
	    "threads that keep cores out of idle, under SCHED_IDLE, while "
	    "requests are in flight and 1 ms after"};
}

struct args_opt lend_args_idle_poll(int64_t *out)
{
	return (struct args_opt){
	    "--idle-poll",
	    ARGS_INT,
	    out,
	    0,
	    1,
	    NULL,
	    "0|1",
	    "1 holds the CPU latency request at 0 us while requests are in "
	    "flight and 1 ms after: idle cores poll instead of halting; needs "
	    "root"};
}

int lend_args_secret(const char *path, uint8_t secret[LEND_SECRET_LEN],
                     char *err, size_t errlen)
{
	char line[2 * LEND_SECRET_LEN + 4];
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "could not open the secret file %s: %s",
		         path, strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof line, f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (lend_secret_parse(line, secret) < 0) {
		snprintf(err, errlen,
		         "the secret file %s must hold 64 hex digits (the "
		         "contract secret from the exchange)",
		         path);
		return -1;
	}
	return 0;
}

void lend_args_write_meter(const char *path, const struct lend_meter_report *r)
{
	static int failing; /* one program, one meter file */
	char line[512], tmp[4096];
	if (!path || lend_meter_format(r, line, sizeof line) < 0)
		return;
	int ok = 0;
	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) < (int)sizeof tmp) {
		FILE *f = fopen(tmp, "w");
		if (f) {
			int wrote = fprintf(f, "%s\n", line) > 0;
			int closed = fclose(f) == 0;
			ok = wrote && closed && rename(tmp, path) == 0;
		}
	}
	if (!ok && !failing)
		log_warn("could not write the meter file; the agent reports "
		         "usage from it",
		         "path=%s err=\"%s\"", path, strerror(errno));
	else if (ok && failing)
		log_info("the meter file is written again", "path=%s", path);
	failing = !ok;
}

int lend_args_write_small(const char *path, const char *text, char *err,
                          size_t errlen)
{
	FILE *f = fopen(path, "w");
	int wrote = f && fputs(text, f) >= 0;
	int closed = f && fclose(f) == 0;
	if (!wrote || !closed) {
		snprintf(err, errlen, "could not write %s: %s", path,
		         strerror(errno));
		return -1;
	}
	return 0;
}
