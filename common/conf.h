/*
 * conf.h — the `key = value` settings file both daemons read (ramexd's
 * exchange/config.c, ramex-agent's node-agent/config.c); each keeps its own
 * table of keys and hands this reader a function that sets one.
 *
 * The reader owns the file's syntax, one rule for both:
 *
 *     # a comment, from '#' to the end of the line
 *     key = value           spaces around either are trimmed
 *     key = "a # b \" c"    in double quotes '#' is text; \" and \\ escape
 *     key =                 an empty value
 *
 * Keys are letters, digits, '_', '-' and '.'. A key set twice in one file
 * is refused (the second would silently win, and one of the two is a
 * mistake), as is a line longer than CONF_LINE_MAX. Every error names the
 * file and line: "agent.conf:7: unknown setting ...".
 */
#ifndef RAMEX_CONF_H
#define RAMEX_CONF_H

#include "common/err.h"

#include <stdio.h>

#define CONF_LINE_MAX 4096 /* bytes of a line, its newline included */
#define CONF_KEY_MAX  64   /* bytes of a key */
#define CONF_KEYS_MAX 256  /* distinct keys one file may set */

/* struct err codes of the reader and of its set functions */
enum conf_code {
	CONF_IO = 1,    /* the file could not be opened or read */
	CONF_SYNTAX,    /* not `key = value`, or a quote left open */
	CONF_UNKNOWN,   /* the table has no such key (set function's) */
	CONF_VALUE,     /* the value does not fit the key (set function's) */
	CONF_DUPLICATE, /* the key was set before in the same file */
	CONF_TOO_LONG,  /* a line past CONF_LINE_MAX, too many keys */
};

/* Sets key to value in ctx; 0, or -1 with e's code CONF_UNKNOWN or
 * CONF_VALUE and a message without the file and line (the reader adds
 * them). */
typedef int (*conf_set_fn)(void *ctx, const char *key, const char *value,
                           struct err *e);

/* Reads path, calling set for each setting in file order. 0, or -1 with
 * e (the settings before the bad line are set). */
int conf_read_file(const char *path, conf_set_fn set, void *ctx, struct err *e);

/* The same from an open stream; `name` stands for the file in errors. */
int conf_read_stream(FILE *f, const char *name, conf_set_fn set, void *ctx,
                     struct err *e);

#endif
