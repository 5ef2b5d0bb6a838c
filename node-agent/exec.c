/* exec.c — the contract table over a backend; see exec.h. */
#include "node-agent/exec.h"

#include "node-agent/core/meter.h"
#include "node-agent/core/strategy.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every contract the strategy may hold is executed and metered. */
_Static_assert(EXEC_MAX_CONTRACTS == STRATEGY_MAX_CONTRACTS &&
                   METER_MAX_CONTRACTS == STRATEGY_MAX_CONTRACTS,
               "the executor and the meter hold what the strategy may");

struct exec_contract {
	char id[EXEC_ID_LEN];
	enum exec_kind kind;
	rx_pages pages;
};

struct exec {
	const struct exec_ops *ops;
	void *impl;
	int n; /* contracts, oldest first */
	struct exec_contract c[EXEC_MAX_CONTRACTS];
	struct exec_totals total; /* sum of the table, by kind */
};

struct exec *exec_new(const struct exec_ops *ops, void *impl)
{
	struct exec *e = calloc(1, sizeof *e);
	if (!e) {
		ops->close(impl);
		return NULL;
	}
	e->ops = ops;
	e->impl = impl;
	return e;
}

void *exec_impl(struct exec *e, const struct exec_ops *ops)
{
	return e->ops == ops ? e->impl : NULL;
}

void exec_close(struct exec *e)
{
	if (!e)
		return;
	e->ops->close(e->impl);
	free(e);
}

const char *exec_name(const struct exec *e)
{
	return e->ops->name;
}

static int find(const struct exec *e, const char *id)
{
	for (int i = 0; i < e->n; i++)
		if (strcmp(e->c[i].id, id) == 0)
			return i;
	return -1;
}

static void forget(struct exec *e, int i)
{
	memmove(&e->c[i], &e->c[i + 1],
	        (size_t)(e->n - i - 1) * sizeof e->c[0]);
	e->n--;
}

int exec_take(struct exec *e, const char *id, enum exec_kind kind,
              rx_pages pages, rx_pages *got, char *err, size_t errlen)
{
	struct exec_totals want = e->total, have;
	int i = find(e, id);

	*got = 0;
	if (strlen(id) == 0 || strlen(id) >= EXEC_ID_LEN || pages < 0 ||
	    kind < 0 || kind >= EXEC_NKINDS) {
		snprintf(err, errlen, "bad contract id, kind or page count");
		return -1;
	}
	if (i >= 0 && e->c[i].kind != kind) {
		snprintf(err, errlen,
		         "contract %s is already held as another "
		         "kind",
		         id);
		return -1;
	}
	if (i < 0 && e->n == EXEC_MAX_CONTRACTS) {
		snprintf(err, errlen, "too many contracts for one executor");
		return -1;
	}
	want.pages[kind] += pages;
	if (e->ops->apply(e->impl, &want, &have, err, errlen) < 0)
		return -1;
	/* Only `kind` is updated: a backend whose pages the kernel took back
	 * meanwhile (kmod's OOM give-back) reports less, and exec_sync, not
	 * this call, attributes that loss to contracts. */
	rx_pages moved = have.pages[kind] - e->total.pages[kind];
	if (moved < 0)
		moved = 0;
	assert(moved <= pages);
	e->total.pages[kind] += moved;
	*got = moved;
	if (moved == 0 && i < 0)
		return 0;
	if (i < 0) {
		i = e->n++;
		snprintf(e->c[i].id, EXEC_ID_LEN, "%s", id);
		e->c[i].kind = kind;
		e->c[i].pages = 0;
	}
	e->c[i].pages += moved;
	return 0;
}

int exec_give_back(struct exec *e, const char *id, rx_pages pages, char *err,
                   size_t errlen)
{
	struct exec_totals want = e->total, have;
	int i = find(e, id);

	if (i < 0) {
		snprintf(err, errlen, "contract %s holds no pages here", id);
		return -1;
	}
	if (pages < 0)
		pages = 0;
	if (pages > e->c[i].pages)
		pages = e->c[i].pages;
	want.pages[e->c[i].kind] -= pages;
	if (e->ops->apply(e->impl, &want, &have, err, errlen) < 0)
		return -1;
	/* Giving back cannot fall short: the pages are ours to return. */
	if (have.pages[e->c[i].kind] > want.pages[e->c[i].kind]) {
		snprintf(err, errlen, "%s could not give back all pages",
		         e->ops->name);
		return -1;
	}
	e->total.pages[e->c[i].kind] = want.pages[e->c[i].kind];
	e->c[i].pages -= pages;
	if (e->c[i].pages == 0)
		forget(e, i);
	return 0;
}

int exec_adopt(struct exec *e, const char *id, enum exec_kind kind,
               rx_pages pages, char *err, size_t errlen)
{
	struct exec_totals now;

	if (find(e, id) >= 0 || e->n == EXEC_MAX_CONTRACTS || pages <= 0 ||
	    strlen(id) == 0 || strlen(id) >= EXEC_ID_LEN) {
		snprintf(err, errlen, "cannot adopt contract %s", id);
		return -1;
	}
	if (e->ops->read(e->impl, &now, err, errlen) < 0)
		return -1;
	if (now.pages[kind] < e->total.pages[kind] + pages) {
		snprintf(err, errlen,
		         "cannot adopt contract %s: %s holds %lld pages of "
		         "its kind, the contracts need %lld",
		         id, e->ops->name, (long long)now.pages[kind],
		         (long long)(e->total.pages[kind] + pages));
		return -1;
	}
	snprintf(e->c[e->n].id, EXEC_ID_LEN, "%s", id);
	e->c[e->n].kind = kind;
	e->c[e->n].pages = pages;
	e->n++;
	e->total.pages[kind] += pages;
	return 0;
}

rx_pages exec_held(const struct exec *e, const char *id)
{
	int i = find(e, id);
	return i < 0 ? -1 : e->c[i].pages;
}

int exec_count(const struct exec *e)
{
	return e->n;
}

const char *exec_id(const struct exec *e, int i)
{
	assert(i >= 0 && i < e->n);
	return e->c[i].id;
}

enum exec_kind exec_kind_of(const struct exec *e, int i)
{
	assert(i >= 0 && i < e->n);
	return e->c[i].kind;
}

int exec_sync(struct exec *e, struct exec_loss *lost, char *err, size_t errlen)
{
	struct exec_totals now;
	int nl = 0;

	if (e->ops->read(e->impl, &now, err, errlen) < 0)
		return -1;
	for (int k = 0; k < EXEC_NKINDS; k++) {
		rx_pages gone = e->total.pages[k] - now.pages[k];
		/* Newest first: the oldest contracts are most likely perm. */
		for (int i = e->n - 1; i >= 0 && gone > 0; i--) {
			if (e->c[i].kind != (enum exec_kind)k)
				continue;
			rx_pages n =
			    e->c[i].pages < gone ? e->c[i].pages : gone;
			snprintf(lost[nl].id, EXEC_ID_LEN, "%s", e->c[i].id);
			lost[nl].pages = n;
			nl++;
			gone -= n;
			e->total.pages[k] -= n;
			e->c[i].pages -= n;
			if (e->c[i].pages == 0)
				forget(e, i);
		}
	}
	return nl;
}

int exec_release_all(struct exec *e, char *err, size_t errlen)
{
	struct exec_totals zero, have;

	memset(&zero, 0, sizeof zero);
	if (e->ops->apply(e->impl, &zero, &have, err, errlen) < 0)
		return -1;
	for (int k = 0; k < EXEC_NKINDS; k++) {
		if (have.pages[k] != 0) {
			snprintf(err, errlen, "%s still holds %lld pages",
			         e->ops->name, (long long)have.pages[k]);
			return -1;
		}
	}
	memset(&e->total, 0, sizeof e->total);
	e->n = 0;
	return 0;
}
