/* pgarr.c — PostgreSQL array literals; see pgarr.h. */
#include "exchange/pgarr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for k more bytes, a separator, the closing brace and the NUL. */
static char *room(struct pgarr *a, size_t k)
{
	if (a->oom)
		return NULL;
	size_t need = a->n + k + 3;
	if (need > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		while (cap < need)
			cap *= 2;
		char *p = realloc(a->p, cap);
		if (!p) {
			a->oom = 1;
			return NULL;
		}
		a->p = p;
		a->cap = cap;
	}
	a->p[a->n++] = a->count ? ',' : '{';
	a->count++;
	return a->p + a->n;
}

void pgarr_rawn(struct pgarr *a, const char *e, size_t k)
{
	char *o = room(a, k);
	if (!o)
		return;
	memcpy(o, e, k);
	a->n += k;
	a->p[a->n] = 0;
}

void pgarr_raw(struct pgarr *a, const char *e)
{
	pgarr_rawn(a, e, strlen(e));
}

void pgarr_addf(struct pgarr *a, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof tmp) {
		a->oom = 1; /* no element of ours is that long */
		return;
	}
	pgarr_rawn(a, tmp, (size_t)k);
}

void pgarr_i64(struct pgarr *a, int64_t v)
{
	char tmp[24], *p = tmp + sizeof tmp;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	pgarr_rawn(a, p, (size_t)(tmp + sizeof tmp - p));
}

void pgarr_str(struct pgarr *a, const char *s)
{
	if (!s) {
		pgarr_raw(a, "NULL");
		return;
	}
	char *o = room(a, strlen(s) * 2 + 2);
	if (!o)
		return;
	*o++ = '"';
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			*o++ = '\\';
		*o++ = *s;
	}
	*o++ = '"';
	a->n = (size_t)(o - a->p);
	a->p[a->n] = 0;
}

const char *pgarr_text(struct pgarr *a)
{
	if (a->oom)
		return NULL;
	if (a->count == 0)
		return "{}";
	/* room() keeps space for the brace and the NUL past n */
	a->p[a->n] = '}';
	a->p[a->n + 1] = 0;
	return a->p;
}

char *pgarr_take(struct pgarr *a)
{
	char *t = NULL;
	if (!a->oom && a->count == 0)
		t = strdup("{}");
	else if (!a->oom) {
		pgarr_text(a);
		t = a->p;
		a->p = NULL;
	}
	pgarr_free(a);
	return t;
}

int pgarr_params(struct pgarr *a, int n, const char **pv)
{
	int rc = 0;
	for (int i = 0; i < n; i++)
		if (!(pv[i] = pgarr_text(&a[i])))
			rc = -1;
	return rc;
}

void pgarr_free(struct pgarr *a)
{
	free(a->p);
	memset(a, 0, sizeof *a);
}
