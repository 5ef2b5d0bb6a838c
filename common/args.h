/*
 * args.h — command-line options from a table, for the small programs that
 * take `--name value` flags (ramex-lend-server, ramex-lend-nbd,
 * ramex-lend-bench). ramex-agent and ramexd read settings tables of their
 * own (config.c), which also take files.
 *
 * A program lists its options once, each with where its value goes and
 * what it does; the parser owns the loop: `--name value` or
 * `--name=value`, flags without a value, integers checked against their
 * range, `--help`/`-h`, and the error that names the option ("--pages must
 * be an integer in 1..268435456, not \"0\""; an option's own `why`, when
 * given, replaces it). --help prints the options from the same table, so
 * that the text cannot leave one out. What is left to the program is what
 * the table cannot say: the usage lines, required options, options that go
 * together, values it parses itself (HOST:PORT).
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
	const char *arg; /* --help: the value's name ("HOST:PORT"), no flag's */
	const char *help; /* --help: what it does (every option has one) */
};

/* A program's command line: its options and the text --help prints
 * around them. */
struct args_prog {
	const char *name;     /* "ramex-lend-server", before every error */
	const char *synopsis; /* "usage: ..." lines, each ending in '\n' */
	const struct args_opt *opts;
	size_t nopts;
	const char *notes; /* after the options: what no one option says, or
	                      NULL */
};

/* Parses argv[1..argc) in order. 0; 1 when --help or -h comes (what
 * follows it is not read); -1 with err for an unknown option, a missing
 * value, a flag given a value, or an integer that does not parse. Nothing
 * is stored unless it returns 0, so that --help shows the defaults. */
int args_parse(int argc, char **argv, const struct args_opt *opts, size_t nopts,
               char *err, size_t errlen);

/* --help: the synopsis, then one entry per option of the table, its value's
 * name and its help, wrapped at 80 columns, with its range and its default
 * (an ARGS_INT's value now, when it lies in the range: 0 for a --contract
 * in 1.. is "none", not a default), then the notes. */
void args_usage(FILE *f, const struct args_prog *p);

/* What a program's main does with args_parse's answer `parsed`: -1 to go
 * on (parsed was 0); otherwise the exit status, after args_usage on stdout
 * (--help: 0), or "PROG: ERR" and the synopsis on stderr (an error: 2).
 * The same call with parsed -1 refuses what the table could not check. */
int args_done(int parsed, const struct args_prog *p, const char *err);

/* args_parse of p's table, then args_done: -1 to go on, else the exit
 * status (err holds what args_done printed). */
int args_main(int argc, char **argv, const struct args_prog *p, char *err,
              size_t errlen);

/* A decimal integer in [min, max], the whole of s (no spaces, no '+').
 * 0, or -1. */
int args_int(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
