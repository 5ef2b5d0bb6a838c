/*
 * lend_args.h — command-line helpers shared by the two lending programs.
 *
 * Owns nothing: reading the contract secret from a file (never from argv, where
 * `ps` would show it), and the meter file (one logfmt line, replaced atomically
 * so a reader never sees half a line).
 */
#ifndef RAMEX_LEND_ARGS_H
#define RAMEX_LEND_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

/* The first line of path: 64 hex digits. Returns 0 or -1 with err. */
int lend_args_secret(const char *path, uint8_t secret[LEND_SECRET_LEN],
                     char *err, size_t errlen);
/* Writes r as one line to path (via path.tmp + rename). */
void lend_args_write_meter(const char *path, const struct lend_meter_report *r);

#endif
