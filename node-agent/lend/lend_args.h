/*
 * lend_args.h — command-line helpers shared by the lending programs.
 *
 * Owns nothing: the rows of the option tables (common/args.h) the programs
 * share, so that an option means and says the same in each; reading the
 * contract secret from a file (never from argv, where `ps` would show it),
 * and the meter file (one logfmt line, replaced atomically so a reader never
 * sees half a line).
 */
#ifndef RAMEX_LEND_ARGS_H
#define RAMEX_LEND_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/args.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

/* Shared rows of the option tables, each writing to `out`:
 * --contract ID, --secret-file F, --tls-ca F, --meter-file F, and the
 * wakeup options of the two daemons, --keep-awake N and --idle-poll 0|1. */
struct args_opt lend_args_contract(int64_t *out);
struct args_opt lend_args_secret_file(const char **out);
struct args_opt lend_args_tls_ca(const char **out);
struct args_opt lend_args_meter_file(const char **out);
struct args_opt lend_args_keep_awake(int64_t *out);
struct args_opt lend_args_idle_poll(int64_t *out);

/* The first line of path: 64 hex digits. Returns 0 or -1 with err. */
int lend_args_secret(const char *path, uint8_t secret[LEND_SECRET_LEN],
                     char *err, size_t errlen);
/* Writes r as one line to path (via path.tmp + rename). The meter file
 * is what the agent reports usage from: the first failure is logged (a
 * full disk, a folder gone), not passed over, and so is the recovery. */
void lend_args_write_meter(const char *path, const struct lend_meter_report *r);
/* Writes the text to path (the port file, the ready file): 0, or -1 with
 * err (a program told to write one must not run on without it: whoever
 * waits for it would wait for ever). */
int lend_args_write_small(const char *path, const char *text, char *err,
                          size_t errlen);

#endif
