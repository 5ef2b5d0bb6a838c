/* exec.c — the contract table over a backend; see exec.h. */
#include "node-agent/exec.h"

#include "node-agent/core/meter.h"
#include "node-agent/core/strategy.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S INT64_C(1000000000)

/* Every contract the strategy may hold is executed and metered. */
_Static_assert(EXEC_MAX_CONTRACTS == STRATEGY_MAX_CONTRACTS &&
                   METER_MAX_CONTRACTS == STRATEGY_MAX_CONTRACTS,
               "the executor and the meter hold what the strategy may");

struct exec_contract {
	char id[EXEC_ID_LEN];
	enum exec_kind kind;
	rx_pages pages; /* moved: what it holds and what is metered */
	rx_pages asked; /* pages + those still moving (rate-limited) */
};

struct exec {
	const struct exec_ops *ops;
	void *impl;
	int n; /* contracts, oldest first */
	struct exec_contract c[EXEC_MAX_CONTRACTS];
	struct exec_totals total; /* sum of the table, by kind */
	/* Moves at a rate (exec_set_rates; 0: at once): what may still move
	 * of each kind, in page-nanoseconds per second (the carry keeps the
	 * sum exact), and the clock it was last advanced to. */
	int64_t rate[EXEC_NKINDS];
	__int128 budget[EXEC_NKINDS];
	/* a mover that was idle starts at the next exec_advance: the time
	 * before it had nothing to move (a move never takes less than its
	 * pages at the rate) */
	int idle[EXEC_NKINDS];
	rx_time_ns now;
	int has_now;
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

/* Asks the backend for `n` more pages of kind k and sets *moved to what it
 * took (0..n), added to the totals. Only `k` is updated: a backend whose
 * pages the kernel took back meanwhile (kmod's OOM give-back) reports
 * less, and exec_sync, not this call, attributes that loss to contracts. */
static int move_more(struct exec *e, enum exec_kind k, rx_pages n,
                     rx_pages *moved, char *err, size_t errlen)
{
	struct exec_totals want = e->total, have;
	want.pages[k] += n;
	if (e->ops->apply(e->impl, &want, &have, err, errlen) < 0)
		return -1;
	*moved = have.pages[k] - e->total.pages[k];
	if (*moved < 0)
		*moved = 0;
	assert(*moved <= n);
	e->total.pages[k] += *moved;
	return 0;
}

/* Moves what the budget allows for the contracts still moving, oldest
 * first. A backend that gives less than asked is short of memory: the
 * contract keeps what it got and stops moving (delivered short). */
static int pump(struct exec *e, char *err, size_t errlen)
{
	for (int i = 0; i < e->n; i++) {
		struct exec_contract *c = &e->c[i];
		int k = c->kind;
		rx_pages n = c->asked - c->pages;
		if (n <= 0)
			continue;
		rx_pages may = (rx_pages)(e->budget[k] / NS_PER_S);
		if (n > may)
			n = may;
		if (n == 0)
			continue;
		rx_pages moved;
		if (move_more(e, c->kind, n, &moved, err, errlen) < 0)
			return -1;
		c->pages += moved;
		e->budget[k] -= (__int128)moved * NS_PER_S;
		if (moved < n)
			c->asked = c->pages; /* memory in use: no more */
	}
	return 0;
}

int exec_set_rates(struct exec *e, const int64_t rate[EXEC_NKINDS])
{
	for (int k = 0; k < EXEC_NKINDS; k++)
		if (rate[k] < 0)
			return -1;
	for (int k = 0; k < EXEC_NKINDS; k++) {
		e->rate[k] = rate[k];
		e->budget[k] = 0;
		e->idle[k] = 1;
	}
	return 0;
}

int exec_advance(struct exec *e, rx_time_ns t, char *err, size_t errlen)
{
	rx_time_ns dt = e->has_now && t > e->now ? t - e->now : 0;
	if (!e->has_now || t > e->now) {
		e->now = t;
		e->has_now = 1;
	}
	for (int k = 0; k < EXEC_NKINDS; k++) {
		int moving = 0;
		for (int i = 0; i < e->n && !moving; i++)
			moving = e->c[i].kind == (enum exec_kind)k &&
			         e->c[i].asked > e->c[i].pages;
		/* Time passes for a mover only while it has work: an idle
		 * mover saves up nothing for the next contract. */
		if (!moving || e->idle[k])
			e->budget[k] = 0;
		else if (e->rate[k] > 0)
			e->budget[k] += (__int128)e->rate[k] * dt;
		e->idle[k] = !moving;
	}
	if (pump(e, err, errlen) < 0)
		return -1;
	/* what a mover did not need by the time its work ran out is not
	 * kept for the next contract either */
	for (int k = 0; k < EXEC_NKINDS; k++)
		if (exec_moving_total(e, (enum exec_kind)k) == 0)
			e->budget[k] = 0;
	return 0;
}

rx_pages exec_moving(const struct exec *e, const char *id)
{
	for (int i = 0; i < e->n; i++)
		if (strcmp(e->c[i].id, id) == 0)
			return e->c[i].asked - e->c[i].pages;
	return -1;
}

rx_pages exec_moving_total(const struct exec *e, enum exec_kind kind)
{
	rx_pages n = 0;
	for (int i = 0; i < e->n; i++)
		if (e->c[i].kind == kind)
			n += e->c[i].asked - e->c[i].pages;
	return n;
}

int exec_take(struct exec *e, const char *id, enum exec_kind kind,
              rx_pages pages, rx_pages *got, char *err, size_t errlen)
{
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
	if (e->rate[kind] > 0) {
		/* At a rate: the contract moves from now on (exec_advance),
		 * up to its pages and these; asking again for what is still
		 * moving changes nothing. */
		if (i < 0) {
			i = e->n++;
			snprintf(e->c[i].id, EXEC_ID_LEN, "%s", id);
			e->c[i].kind = kind;
			e->c[i].pages = e->c[i].asked = 0;
		}
		rx_pages before = e->c[i].pages;
		if (e->c[i].asked < before + pages)
			e->c[i].asked = before + pages;
		if (pump(e, err, errlen) < 0)
			return -1;
		*got = e->c[i].pages - before;
		return 0;
	}
	rx_pages moved;
	if (move_more(e, kind, pages, &moved, err, errlen) < 0)
		return -1;
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
	e->c[i].asked = e->c[i].pages;
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
	/* a recall or an end mid-move: what had not moved stays */
	e->c[i].asked = e->c[i].pages;
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
	e->c[e->n].pages = e->c[e->n].asked = pages;
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
			if (e->c[i].kind != (enum exec_kind)k ||
			    e->c[i].pages == 0)
				continue;
			rx_pages n =
			    e->c[i].pages < gone ? e->c[i].pages : gone;
			snprintf(lost[nl].id, EXEC_ID_LEN, "%s", e->c[i].id);
			lost[nl].pages = n;
			nl++;
			gone -= n;
			e->total.pages[k] -= n;
			e->c[i].pages -= n;
			e->c[i].asked -= n;
			if (e->c[i].pages == 0 && e->c[i].asked == 0)
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
