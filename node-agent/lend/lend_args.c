/* lend_args.c — command-line helpers for the lending programs. */
#include "node-agent/lend/lend_args.h"

#include "common/hostport.h"
#include "common/log.h"
#include "node-agent/lend/lend_awake.h"
#include "node-agent/lend/lend_mem.h"

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

struct args_opt lend_args_swap_priority(int64_t *out)
{
	return (struct args_opt){
	    "--swap-priority",
	    ARGS_INT,
	    out,
	    0,
	    32767,
	    "--swap-priority is 0..32767",
	    "N",
	    "format the device as swap and swap to it at this priority once "
	    "it serves (mkswap, swapon -p N; give --mlock then)"};
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

int lend_args_lender(struct lend_args_lender *l,
                     const struct lend_args_borrower *b, char *err,
                     size_t errlen)
{
	l->tls = NULL;
	if (!b->lender || !b->contract || !b->secret_file) {
		snprintf(err, errlen,
		         "--lender, --contract and --secret-file are required");
		return -2;
	}
	if (hostport_split(b->lender, l->host, sizeof l->host, &l->port) < 0) {
		snprintf(err, errlen, "--lender wants HOST:PORT");
		return -2;
	}
	if (!b->ca && !hostport_is_loopback(l->host)) {
		if (!b->plaintext) {
			snprintf(
			    err, errlen,
			    "plain TCP to a lender off loopback would send "
			    "this node's pages in clear: give --tls-ca, or "
			    "--plaintext to allow it");
			return -2;
		}
		log_warn("plain TCP to a lender off loopback, as told: this "
		         "node's pages cross the network in clear",
		         "lender=%s", b->lender);
	}
	if (lend_args_secret(b->secret_file, l->secret, err, errlen) < 0)
		return -1;
	if (b->ca && !(l->tls = lend_tls_client_ctx(b->ca, err, errlen)))
		return -1;
	return 0;
}

void lend_args_mlock(void)
{
	char why[256];
	int got = lend_mem_guard(why, sizeof why);
	if (got !=
	    (LEND_MEM_LOCKED | LEND_MEM_IO_FLUSHER | LEND_MEM_OOM_EXEMPT))
		log_warn("this program is not fully kept out of reclaim; "
		         "swapping to its device may deadlock under memory "
		         "pressure",
		         "why=\"%s\"", why);
}
