/*
 * err.h — errors as values: a code and a message a person can act on.
 *
 * The tree passes errors one way: a function that can fail takes the
 * caller's buffer (`char *err, size_t errlen`), writes a message into it
 * and returns -1. err_set is that write, the one copy of it. Where the
 * caller must also tell failures apart (the config reader: a bad line is
 * not an unknown key), struct err carries a code beside the message; the
 * codes are the module's own, listed in its header (0 is success).
 *
 * A message longer than its buffer is cut at a UTF-8 character boundary,
 * never inside a character, so that what is kept is valid UTF-8 if what
 * was formatted was (messages end up in problem+json details and logs).
 * Messages follow the house style: lower case, no full stop, say why.
 */
#ifndef RAMEX_ERR_H
#define RAMEX_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define ERR_MSG_MAX 512 /* struct err's message, the NUL included */

struct err {
	int code; /* 0: no error; else the module's code */
	char msg[ERR_MSG_MAX];
};

/* Formats into buf (len bytes, the NUL included; buf may be NULL or len
 * 0, for callers that do not want the message). Returns -1, so that a
 * failing function can `return err_set(err, errlen, ...)`. */
int err_set(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int err_vset(char *buf, size_t len, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Sets e's code (non-zero) and message; returns -1. e may be NULL. */
int err_fail(struct err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears e to "no error". */
void err_clear(struct err *e);

/* The length of the longest prefix of s[0..n) that ends on a UTF-8
 * character boundary: n, less a trailing character cut short. */
size_t err_utf8_prefix(const char *s, size_t n);

#endif
