/* exec_sim.c — the in-process executor backend (see exec.h).
 *
 * A machine of `total` pages whose workload uses `usage`; pages can be
 * given away only while they are free (total − usage − given + borrowed),
 * just as the kernel module cannot offline pages that are in use.
 *
 * The usage is fixed, or follows a workload profile (core/simload.h) that
 * exec_sim_advance moves along the clock the agent passes in. A workload
 * that grows into given-away pages gets offline pages back, the way the
 * kernel module's OOM notifier does; lent pages hold a buyer's data and
 * are not taken.
 *
 * Taking pages at the real path's rate is exec.c's (exec_set_rates); the
 * way back is this backend's: offline pages given back come online at
 * `online_rate` pages a second of the clock exec_sim_advance passes in,
 * and until then they are neither the contract's nor the workload's.
 */
#include "node-agent/core/simload.h"
#include "node-agent/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim {
	rx_pages total, usage;
	struct exec_totals held;
	rx_pages oom_pending; /* offline pages the "kernel" took back */
	struct simload_config load;
	int has_load; /* usage follows `load`, else it stays as set */
	/* Offline pages on their way back online, in page-ns still to go
	 * at online_rate pages a second, from the clock at `now`. */
	int64_t online_rate;
	rx_pages returning;
	__int128 carry;
	rx_time_ns now;
	int has_now;
};

/* Pages neither given away nor used nor on their way back. */
static rx_pages free_of(const struct sim *s, const struct exec_totals *h)
{
	return s->total - s->usage - s->returning - h->pages[EXEC_OFFLINE] -
	       h->pages[EXEC_LEND] + h->pages[EXEC_BORROW];
}

static int sim_apply(void *impl, const struct exec_totals *want,
                     struct exec_totals *got, char *err, size_t errlen)
{
	struct sim *s = impl;
	(void)err;
	(void)errlen;

	/* Returns first, so that their pages are free for what follows
	 * (offline ones once they are back online). */
	*got = s->held;
	for (int k = 0; k < EXEC_NKINDS; k++)
		if (want->pages[k] < got->pages[k]) {
			if (k == EXEC_OFFLINE && s->online_rate > 0)
				s->returning += got->pages[k] - want->pages[k];
			got->pages[k] = want->pages[k];
		}
	for (int k = 0; k < EXEC_NKINDS; k++) {
		if (want->pages[k] <= got->pages[k])
			continue;
		if (k == EXEC_BORROW) {
			got->pages[k] = want->pages[k];
			continue;
		}
		rx_pages free_pages = free_of(s, got);
		rx_pages more = want->pages[k] - got->pages[k];
		if (more > free_pages)
			more = free_pages > 0 ? free_pages : 0;
		got->pages[k] += more;
	}
	s->held = *got;
	return 0;
}

static int sim_read(void *impl, struct exec_totals *now, char *err,
                    size_t errlen)
{
	struct sim *s = impl;
	(void)err;
	(void)errlen;
	*now = s->held;
	return 0;
}

static void sim_close(void *impl)
{
	free(impl);
}

static const struct exec_ops sim_ops = {"sim", sim_apply, sim_read, sim_close};

struct exec *exec_sim_new(rx_pages total, rx_pages usage)
{
	struct sim *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->total = total;
	s->usage = usage;
	return exec_new(&sim_ops, s);
}

static struct sim *sim_of(struct exec *e)
{
	struct sim *s = exec_impl(e, &sim_ops);
	if (!s)
		abort(); /* a sim control on another backend is a bug */
	return s;
}

void exec_sim_set_usage(struct exec *e, rx_pages usage)
{
	sim_of(e)->usage = usage;
}

void exec_sim_oom(struct exec *e, rx_pages pages)
{
	struct sim *s = sim_of(e);
	if (pages > s->held.pages[EXEC_OFFLINE])
		pages = s->held.pages[EXEC_OFFLINE];
	s->held.pages[EXEC_OFFLINE] -= pages;
}

int exec_sim_set_load(struct exec *e, const struct simload_config *load,
                      char *err, size_t errlen)
{
	struct sim *s = sim_of(e);
	const char *why = simload_check(load);
	if (!why && load->total != s->total)
		why = "the profile is for a machine of another size";
	if (why) {
		snprintf(err, errlen, "sim workload: %s", why);
		return -1;
	}
	s->load = *load;
	s->has_load = 1;
	return 0;
}

void exec_sim_set_online_rate(struct exec *e, int64_t pages_per_s)
{
	struct sim *s = sim_of(e);
	s->online_rate = pages_per_s > 0 ? pages_per_s : 0;
	if (!s->online_rate)
		s->returning = 0, s->carry = 0;
}

rx_pages exec_sim_advance(struct exec *e, rx_time_ns t)
{
	struct sim *s = sim_of(e);
	if (s->has_now && t > s->now && s->returning > 0) {
		s->carry += (__int128)s->online_rate * (t - s->now);
		rx_pages back = (rx_pages)(s->carry / 1000000000);
		if (back >= s->returning) {
			back = s->returning;
			s->carry = 0;
		} else {
			s->carry -= (__int128)back * 1000000000;
		}
		s->returning -= back;
	}
	if (s->returning == 0)
		s->carry = 0;
	if (!s->has_now || t > s->now)
		s->now = t, s->has_now = 1;
	if (!s->has_load)
		return s->usage;
	s->usage = simload_pages(&s->load, t);
	/* The workload grows into what is free or coming back; past that,
	 * into offline pages. */
	rx_pages free_pages = free_of(s, &s->held) + s->returning;
	if (free_pages < 0)
		exec_sim_oom(e, -free_pages);
	return s->usage;
}
