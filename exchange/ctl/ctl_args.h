/*
 * ctl_args.h — ramexctl's command line: what a command is (struct ctl_cmd, the
 * table's row), the options it was given (struct ctl_opts) and the context it
 * runs in (struct ctl_ctx); option parsing, usage errors, typed options (whole
 * numbers, prices, page counts, time offsets) and the safe building of
 * request paths from what a person typed. Prints only usage errors.
 */
#ifndef RAMEX_CTL_ARGS_H
#define RAMEX_CTL_ARGS_H

#include "exchange/ctl/ctl_http.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_MAX_OPTS 24
#define CTL_MAX_POS  4

/* The program's name, for messages. */
extern const char *const ctl_prog;

struct ctl_opts {
	const char *name[CTL_MAX_OPTS], *val[CTL_MAX_OPTS];
	int n;
	const char *pos[CTL_MAX_POS];
	int npos;
	int help;
};

struct ctl_cmd;

/* What every command runs with: the server and token, --json, and the
 * command itself (whose options name the server's fields in messages). */
struct ctl_ctx {
	struct ctl_http http;
	int json;
	const struct ctl_cmd *cmd;
};

struct ctl_cmd {
	const char *group, *verb; /* verb NULL: the group is the command */
	const char *usage, *about;
	const char *const *valued; /* options that take a value */
	const char *const *flags;  /* options that take none */
	int npos;                  /* positional arguments it needs */
	int (*run)(struct ctl_ctx *, struct ctl_opts *);
};

/* Says what is wrong on stderr, with a pointer to --help; returns
 * CTL_USAGE. */
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The value of option `name` (the last one given), "" for a flag, NULL
 * when it is not there. */
const char *ctl_opt(const struct ctl_opts *o, const char *name);

/* 1 when s is in the NULL-terminated list l. */
int ctl_in_list(const char *const *l, const char *s);

/* Parses a command's arguments after its name into o; 0, or CTL_USAGE
 * after saying why. */
int ctl_parse_opts(const struct ctl_cmd *c, int argc, char **argv,
                   struct ctl_opts *o);

/* "+90s", "-15m", "+2h", "-7d": now plus or minus it, as ns since the
 * epoch; -1 when s is not one. */
int ctl_parse_offset(const char *s, int64_t *ns);
/* A command's --from and --to: each a whole number of `unit_ns` since the
 * epoch (1: ns, 1000000000: s, as the route takes it), or "-90s", "-15m",
 * "-2h", "-7d" before now. Into f and t as that number's text, *from and
 * *to NULL when absent; 0, or CTL_USAGE after saying what they take. */
int ctl_from_to(struct ctl_opts *o, int64_t unit_ns, char f[32], char t[32],
                const char **from, const char **to);

/* Appends "&k=v" (or "?k=v") to the path p with v URL-escaped; nothing
 * when v is NULL. */
void ctl_add_query(char *p, size_t len, const char *k, const char *v);

/* 1 when s may be a path segment: a name or an id (letters, digits, '-',
 * '_'; at most 64), so nothing a person types can walk to another route. */
int ctl_segment_ok(const char *s);

/* fmt with one path segment from the command line, which must be a name
 * or an id; 0, or CTL_USAGE after saying why. */
int ctl_path1(char *p, size_t len, const char *fmt, const char *seg);
/* The same for a segment that must be an id (`what`: "an order id"): a
 * whole number from 1, else a usage error, not a request the server
 * refuses (exit 1). */
int ctl_path_id(char *p, size_t len, const char *fmt, const char *seg,
                const char *what);
/* ctl_add_query for option `name` of o, which must be a whole number when
 * given; 0, or CTL_USAGE after saying so. */
int ctl_add_int_query(char *p, size_t len, const char *k,
                      const struct ctl_opts *o, const char *name);
/* A listing's page: --limit and --before as limit and before. */
int ctl_add_paging(char *p, size_t len, const struct ctl_opts *o);

/* The option of command c that a request field or query parameter of the
 * API comes from (the name, n bytes of it: "min_pages" is --min,
 * "client_order_id" --client-order-id), written into buf; NULL when c has
 * no such option. */
const char *ctl_flag_for(const struct ctl_cmd *c, const char *name, size_t n,
                         char *buf, size_t len);

/* The server's message `in` with the API's names put as the options of c a
 * person types: every name with an '_' in it ("account_id" -> --account),
 * and a plain one that opens the message ("limit must be ..." -> "--limit
 * must be ...", "side: ..." -> "--side: ..."); other words are left alone,
 * as "price" may be the word and not the field. Into out (len bytes). */
void ctl_flags_in(const struct ctl_cmd *c, const char *in, char *out,
                  size_t len);

/* Option `name` as a whole number, a price or a page count, set as
 * body[key]; 0 (also when it is absent and not required), or CTL_USAGE
 * after saying why. */
int ctl_int_opt(const struct ctl_opts *o, const char *name, json_t *body,
                const char *key, int required);
int ctl_price_opt(const struct ctl_opts *o, const char *name, json_t *body,
                  const char *key, int required);
int ctl_pages_opt(const struct ctl_opts *o, const char *name, json_t *body,
                  const char *key, int required);

#endif
