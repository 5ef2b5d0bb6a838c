/*
 * pgarr.h — PostgreSQL array literals ("{1,2,NULL}") built element by
 * element, for the bulk statements of the billing job and usage ingest:
 * INSERT ... SELECT FROM unnest($1::bigint[], $2::text[], ...) takes one
 * parameter per column, which the server reads far more cheaply than JSON
 * and we write without a JSON library. A struct pgarr owns its buffer;
 * running out of memory is sticky and shows as pgarr_text returning NULL,
 * so callers check once, at the end.
 */
#ifndef RAMEX_PGARR_H
#define RAMEX_PGARR_H

#include <stddef.h>
#include <stdint.h>

struct pgarr {
	char *p;
	size_t n, cap; /* text so far, without the closing brace */
	int count;     /* elements */
	int oom;
};

/* Appends one element as it is (a number, NULL, t/f, or an element the
 * caller quoted): k bytes of e, or the whole string. */
void pgarr_rawn(struct pgarr *a, const char *e, size_t k);
void pgarr_raw(struct pgarr *a, const char *e);
/* Appends a printf-formatted element (at most 63 bytes). */
void pgarr_addf(struct pgarr *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends an integer (no printf: many of these go into one batch). */
void pgarr_i64(struct pgarr *a, int64_t v);
/* Appends a text element, quoted and escaped; NULL appends NULL. */
void pgarr_str(struct pgarr *a, const char *s);

/* The literal, closed ("{}" when empty); NULL when out of memory. The
 * array stays usable: appending more and asking again gives the longer
 * literal. Valid until the next append or pgarr_free. */
const char *pgarr_text(struct pgarr *a);

/* The literal as a malloc'd string for the caller to free ("{}" when
 * empty), and a empty again; NULL when out of memory. */
char *pgarr_take(struct pgarr *a);

/* The literals of a[0..n) into pv[0..n), as a statement's parameters:
 * 0, or -1 when any of them ran out of memory. */
int pgarr_params(struct pgarr *a, int n, const char **pv);

void pgarr_free(struct pgarr *a);

#endif
