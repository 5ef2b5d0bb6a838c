/* meter.c — page-second integration per contract; see meter.h. */
#include "node-agent/core/meter.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1000000000

struct meter_entry {
	char id[METER_ID_LEN];
	rx_time_ns start; /* of the open period */
	rx_time_ns last;  /* of the last observation */
	rx_pages pages;   /* held since `last` */
	__int128 acc;     /* page-ns since `start`, with the carry */
};

struct meter {
	int n;
	struct meter_entry e[METER_MAX_CONTRACTS];
};

struct meter *meter_new(void)
{
	return calloc(1, sizeof(struct meter));
}

void meter_free(struct meter *m)
{
	free(m);
}

static struct meter_entry *find(struct meter *m, const char *id)
{
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->e[i].id, id) == 0)
			return &m->e[i];
	return NULL;
}

static int advance(struct meter_entry *e, rx_time_ns t, const char **why)
{
	if (t < e->last) {
		*why = "meter time went backwards; the agent's clock must be "
		       "monotonic";
		return -1;
	}
	e->acc += (__int128)e->pages * (t - e->last);
	e->last = t;
	return 0;
}

int meter_start(struct meter *m, const char *id, rx_time_ns t, rx_pages pages,
                int64_t carry_pns, const char **why)
{
	struct meter_entry *e;

	if (strlen(id) == 0 || strlen(id) >= METER_ID_LEN) {
		*why = "contract id must be 1..47 characters";
		return -1;
	}
	if (pages < 0 || carry_pns < 0 || carry_pns >= NS_PER_S) {
		*why = "pages and carry must be non-negative, the carry under "
		       "one page-second";
		return -1;
	}
	if (find(m, id)) {
		*why = "contract is already metered";
		return -1;
	}
	if (m->n == METER_MAX_CONTRACTS) {
		*why = "too many contracts metered at once";
		return -1;
	}
	e = &m->e[m->n++];
	memset(e, 0, sizeof *e);
	snprintf(e->id, sizeof e->id, "%s", id);
	e->start = e->last = t;
	e->pages = pages;
	e->acc = carry_pns;
	return 0;
}

int meter_set(struct meter *m, const char *id, rx_time_ns t, rx_pages pages,
              const char **why)
{
	struct meter_entry *e = find(m, id);

	if (!e) {
		*why = "contract is not metered";
		return -1;
	}
	if (pages < 0) {
		*why = "pages held cannot be negative";
		return -1;
	}
	if (advance(e, t, why) < 0)
		return -1;
	e->pages = pages;
	return 0;
}

int meter_cut(struct meter *m, const char *id, rx_time_ns t,
              struct meter_period *out, const char **why)
{
	struct meter_entry *e = find(m, id);

	if (!e) {
		*why = "contract is not metered";
		return -1;
	}
	if (advance(e, t, why) < 0)
		return -1;
	assert(e->acc >= 0);
	__int128 ps = e->acc / NS_PER_S;
	assert(ps <= INT64_MAX);
	memset(out, 0, sizeof *out);
	snprintf(out->contract, sizeof out->contract, "%s", e->id);
	out->start = e->start;
	out->end = t;
	out->page_seconds = (rx_pagesec)ps;
	out->carry_pns = (int64_t)(e->acc % NS_PER_S);
	e->acc %= NS_PER_S;
	e->start = t;
	return 0;
}

int meter_stop(struct meter *m, const char *id, rx_time_ns t,
               struct meter_period *out, const char **why)
{
	struct meter_entry *e;

	if (meter_cut(m, id, t, out, why) < 0)
		return -1;
	e = find(m, id);
	*e = m->e[--m->n];
	return 0;
}

int meter_uncut(struct meter *m, const struct meter_period *p, rx_pages pages,
                const char **why)
{
	if (p->page_seconds < 0 || p->carry_pns < 0 ||
	    p->carry_pns >= NS_PER_S || p->end < p->start) {
		*why = "not a period the meter cut";
		return -1;
	}
	struct meter_entry *e = find(m, p->contract);
	__int128 back = (__int128)p->page_seconds * NS_PER_S;
	if (e) {
		/* cut at p->end: its carry is still in acc */
		if (e->start != p->end) {
			*why = "the contract was cut again after this period";
			return -1;
		}
		e->start = p->start;
		e->acc += back;
		return 0;
	}
	if (meter_start(m, p->contract, p->end, pages, p->carry_pns, why) < 0)
		return -1;
	e = find(m, p->contract);
	e->start = p->start;
	e->acc += back;
	return 0;
}

rx_pages meter_pages(const struct meter *m, const char *id)
{
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->e[i].id, id) == 0)
			return m->e[i].pages;
	return -1;
}

int meter_count(const struct meter *m)
{
	return m->n;
}

const char *meter_id(const struct meter *m, int i)
{
	assert(i >= 0 && i < m->n);
	return m->e[i].id;
}
