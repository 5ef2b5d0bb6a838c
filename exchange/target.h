/*
 * target.h — a request target read the one way it was signed.
 *
 * A node signs the target as it sends it (common/sign.h), so ramexd must
 * act on nothing else: the path and the query parameters are decoded here
 * from those bytes, once, and a target that could be read more than one
 * way is refused. `%XX` is decoded once; '+' in the query is a space (as
 * HTML forms send it). Refused: a byte that is not printable ASCII, a
 * broken escape, an encoded control character (%00 would cut a C string
 * short), an encoded '/' in the path (one segment would look like two),
 * an empty or repeated query parameter, more than TARGET_MAX_QUERY of
 * them, a target longer than SIGN_TARGET_MAX. A bare trailing '?' is no
 * query, as it signs. Pure: no I/O, no allocation.
 */
#ifndef RAMEX_TARGET_H
#define RAMEX_TARGET_H

#include "common/sign.h"

#define TARGET_MAX_QUERY 16

struct target {
	char path[SIGN_TARGET_MAX + 1]; /* decoded, without the query */
	/* decoded names and values: no longer than the query, but a name
	 * without '=' takes two NULs for its one '&' */
	char qbuf[SIGN_TARGET_MAX + 2 * TARGET_MAX_QUERY + 2];
	const char *qname[TARGET_MAX_QUERY], *qval[TARGET_MAX_QUERY];
	int nquery;
};

/* Reads target `raw` into tg. Returns 0, or -1 with *why, a reason a
 * person can act on (and tg holding no path and no parameters). */
int target_parse(const char *raw, struct target *tg, const char **why);

/* The decoded value of query parameter `name` ("" when it has no '='), or
 * NULL when it is not given. */
const char *target_query(const struct target *tg, const char *name);

#endif
