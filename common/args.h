/*
 * args.h — command-line options from a table, for the small programs that
 * take `--name value` flags (ramex-lend-server, ramex-lend-nbd,
 * ramex-lend-bench). ramex-agent and ramexd read settings tables of their
 * own (config.c), which also take files.
 *
 * A program lists its options once, each with where its value goes; the
 * parser owns the loop: `--name value` or `--name=value`, flags without a
 * value, integers checked against their range, `--help`/`-h`, and the
 * error that names the option ("--pages must be an integer in 1..268435456,
 * not \"0\""; an option's own `why`, when given, replaces it). What is
 * left to the program is what the table cannot say: required options,
 * options that go together, values it parses itself (HOST:PORT).
 */
#ifndef RAMEX_ARGS_H
#define RAMEX_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum args_kind {
	ARGS_FLAG, /* no value: *(int *)out = 1 */
	ARGS_STR,  /* *(const char **)out = the value (argv's own) */
	ARGS_INT,  /* *(int64_t *)out = the value, in min..max */
};

struct args_opt {
	const char *name; /* with its dashes: "--contract" */
	enum args_kind kind;
	void *out;
	int64_t min, max; /* ARGS_INT */
	const char *why;  /* ARGS_INT: the message when it does not parse */
};

/* Parses argv[1..argc) in order. 0; 1 when --help or -h comes (what
 * follows it is not read); -1 with err for an unknown option, a missing
 * value, a flag given a value, or an integer that does not parse. */
int args_parse(int argc, char **argv, const struct args_opt *opts, size_t nopts,
               char *err, size_t errlen);

/* What a program's main does with args_parse's answer `parsed`: -1 to go
 * on (parsed was 0); otherwise the exit status, after the usage on stdout
 * (--help: 0), or "PROG: ERR" and the usage on stderr (an error: 2). The
 * same call with parsed -1 refuses what the table could not check. */
int args_done(int parsed, const char *prog, const char *err,
              void (*usage)(FILE *f));

/* A decimal integer in [min, max], the whole of s (no spaces, no '+').
 * 0, or -1. */
int args_int(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
