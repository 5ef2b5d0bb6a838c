/*
 * exec.h — the executor: what actually moves pages for contracts.
 *
 * The agent speaks per contract ("take 1000 pages offline for c-17", "give
 * 400 of them back"); this module keeps the table of contracts and the pages
 * each holds, and asks a backend to bring the machine to the new totals:
 *
 *   kmod    /dev/ramex (kmod/uapi/ramex.h): offline pages and the lending
 *           pool; the module keeps pages across agent restarts
 *   cgroup  a cgroup v2 directory: lowers memory.high / memory.max (after
 *           memory.reclaim) by the pages given away, raises them by the
 *           pages borrowed; never below what the cgroup uses, so the
 *           workload is never OOM-killed for a sale
 *   sim     in-process, for the demo and the tests
 *
 * A backend may achieve less than asked (memory is short): exec_take says
 * how many pages it really took, and that is what the contract holds and
 * what gets metered.
 *
 * Moves at a rate: a backend whose moves complete at once (sim) is given
 * the rates of the real path (exec_set_rates); a contract then moves from
 * exec_take on, as the clock passed to exec_advance allows, oldest first,
 * and holds (and is metered for) only what has moved. exec_moving says
 * what is still in flight; giving a contract back (a recall mid-move)
 * stops the rest. No clock is read here: time comes in by exec_advance.
 *
 * exec_sync notices pages the kernel took back on its own (the OOM
 * notifier) and says which contracts lost them.
 */
#ifndef RAMEX_EXEC_H
#define RAMEX_EXEC_H

#include "common/units.h"

#include <stddef.h>
#include <stdint.h>

#define EXEC_MAX_CONTRACTS 8192 /* = STRATEGY_MAX_CONTRACTS */
#define EXEC_ID_LEN        48

enum exec_kind {
	EXEC_OFFLINE, /* our pages, powered off for the operator */
	EXEC_LEND,    /* our pages, holding a buyer's data */
	EXEC_BORROW,  /* someone else's pages, extending our memory */
	EXEC_NKINDS,
};

struct exec_totals {
	rx_pages pages[EXEC_NKINDS];
};

struct exec;

/* The backend interface, for exec_*.c. `apply` moves the machine towards
 * `want` and reports what it reached in `got` (got may be less than want
 * for pages given away, never more); `read` reports the machine's state. */
struct exec_ops {
	const char *name;
	int (*apply)(void *impl, const struct exec_totals *want,
	             struct exec_totals *got, char *err, size_t errlen);
	int (*read)(void *impl, struct exec_totals *now, char *err,
	            size_t errlen);
	void (*close)(void *impl);
};

/* For backends: wraps `impl` (owned from now on, closed by exec_close). */
struct exec *exec_new(const struct exec_ops *ops, void *impl);
/* For backends: their impl, or NULL when `e` runs on other ops. */
void *exec_impl(struct exec *e, const struct exec_ops *ops);

/* Backends. Each returns NULL with err set when it cannot start. */
struct exec *exec_sim_new(rx_pages total, rx_pages usage);
/* sim only: the workload now uses `usage` pages; the kernel's OOM
 * give-back returns up to `pages` offline pages. */
void exec_sim_set_usage(struct exec *e, rx_pages usage);
void exec_sim_oom(struct exec *e, rx_pages pages);
/* sim only: from now on the workload follows `load` (simload.h, copied)
 * instead of a fixed usage; 0, or -1 with err when it does not fit. */
struct simload_config;
int exec_sim_set_load(struct exec *e, const struct simload_config *load,
                      char *err, size_t errlen);
/* sim only: pages a second that offline pages come back online at (0: at
 * once). Pages given back are the workload's again only once moved. */
void exec_sim_set_online_rate(struct exec *e, int64_t pages_per_s);
/* sim only: brings the workload to its size at t and returns the pages it
 * uses, for the sampler; moves pages coming back online. Growing into
 * pages that were given away, it takes offline pages back as the kernel's
 * OOM give-back does (exec_sync sees the loss); lent pages hold a buyer's
 * data and stay. */
rx_pages exec_sim_advance(struct exec *e, rx_time_ns t);

/* `pages` is what the cgroup may use when nothing is sold (0: read its
 * memory.max, which must then be a number). */
struct exec *exec_cgroup_new(const char *dir, rx_pages pages, char *err,
                             size_t errlen);

struct exec *exec_kmod_new(const char *device, char *err, size_t errlen);

const char *exec_name(const struct exec *e);

/* Pages per second each kind moves at, 0: at once (the default). Resets
 * what the movers saved up; -1 when a rate is negative. */
int exec_set_rates(struct exec *e, const int64_t rate[EXEC_NKINDS]);

/* The clock is at t: the contracts still moving move what their kind's
 * rate allows since the last call (a mover with nothing to move saves up
 * nothing). 0, or -1 with err when the backend failed. */
int exec_advance(struct exec *e, rx_time_ns t, char *err, size_t errlen);

/* Pages of contract `id` still moving (-1: unknown), and of every
 * contract of a kind. */
rx_pages exec_moving(const struct exec *e, const char *id);
rx_pages exec_moving_total(const struct exec *e, enum exec_kind kind);

/* Takes up to `pages` more pages for contract `id` (created when new) and
 * sets *got to how many it took (0..pages). At a rate, the contract is
 * recorded (exec_held 0) and moves from now on; *got is what moved in
 * this call, and asking again for pages still moving adds none. */
int exec_take(struct exec *e, const char *id, enum exec_kind kind,
              rx_pages pages, rx_pages *got, char *err, size_t errlen);

/* Gives up to `pages` of contract `id` back to the workload (all of them:
 * pass its held pages); a contract left with none is forgotten. */
int exec_give_back(struct exec *e, const char *id, rx_pages pages, char *err,
                   size_t errlen);

/* Re-registers a contract whose pages are still out from before a restart
 * (kmod keeps them); fails when the backend holds fewer. */
int exec_adopt(struct exec *e, const char *id, enum exec_kind kind,
               rx_pages pages, char *err, size_t errlen);

/* Pages contract `id` holds now, or -1 when unknown. */
rx_pages exec_held(const struct exec *e, const char *id);
int exec_count(const struct exec *e);
const char *exec_id(const struct exec *e, int i);
enum exec_kind exec_kind_of(const struct exec *e, int i);

struct exec_loss {
	char id[EXEC_ID_LEN];
	rx_pages pages;
};

/* Compares the backend's state with the table; pages the backend no
 * longer holds are taken from the newest contracts of that kind. Fills
 * `lost` (room for EXEC_MAX_CONTRACTS) and returns how many contracts lost
 * pages, or -1 with err set. */
int exec_sync(struct exec *e, struct exec_loss *lost, char *err, size_t errlen);

/* Gives every page back (clean shutdown); returns 0 or -1 with err. */
int exec_release_all(struct exec *e, char *err, size_t errlen);

void exec_close(struct exec *e);

#endif
