/*
 * mglru.h — the multi-generational LRU as a working-set signal: the edge
 * between the kernel's lru_gen files and the estimator's page-age bins.
 *
 * Owns: parsing /sys/kernel/debug/lru_gen (a pure function of its text,
 * tested on recorded fixtures), turning each memcg's and node's generations
 * into idle-age bins (wsest_gens), asking the kernel to age them (writing
 * "+ memcg node max_seq can_swap force_scan" to that file), switching MGLRU
 * on through /sys/kernel/mm/lru_gen/enabled, and finding a cgroup's path as
 * lru_gen names it.
 *
 * Why aging: the kernel makes a new generation only under memory pressure.
 * Aged by the agent every half window, each generation is the set of pages
 * the aging walk found accessed in one interval (their page-table accessed
 * bits), so generation counts and ages are a page-age histogram of every
 * page on the LRU, not a sample: what page_idle sampling approximated.
 */
#ifndef RAMEX_MGLRU_H
#define RAMEX_MGLRU_H

#include "node-agent/core/wsest.h"

#include <stddef.h>
#include <stdint.h>

#define MGLRU_ENABLED_FILE "/sys/kernel/mm/lru_gen/enabled"
#define MGLRU_DEBUG_FILE   "/sys/kernel/debug/lru_gen"
#define MGLRU_MAX_LRUVECS  256
#define MGLRU_MAX_GENS     8 /* the kernel keeps 4; room for a later one */

/* One memcg on one node: what aging it needs. */
struct mglru_lruvec {
	int64_t memcg_id;
	int node;
	uint64_t max_seq;        /* the youngest generation's number */
	uint64_t min_seq;        /* the oldest's (anonymous pages') */
	int64_t youngest_age_ms; /* age of that generation */
	int ngens;
	int64_t young_pages; /* pages in that generation */
	/* Every generation, oldest first: its number, age and pages. */
	uint64_t seq[MGLRU_MAX_GENS];
	int64_t age_ms[MGLRU_MAX_GENS];
	int64_t pages[MGLRU_MAX_GENS];
};

struct mglru_view {
	struct wsest_gens gens;
	int nlv;
	struct mglru_lruvec lv[MGLRU_MAX_LRUVECS];
	int64_t pages; /* all pages counted */
};

/* Parses lru_gen text. memcg: the cgroup path as lru_gen prints it ("/w");
 * NULL or "/" takes every memcg (the whole machine), otherwise that memcg
 * and those below it. Bins of different lruvecs whose idle ranges lie within
 * merge_ms of each other are merged (the agent ages them all at once, so
 * their generations line up); when more than WSEST_GEN_BINS remain, the
 * nearest are merged into their union, which is still true of each page.
 * Returns 0, or -1 with err naming the line that does not parse or saying
 * that no memcg matched. */
int mglru_parse(const char *text, const char *memcg, int64_t merge_ms,
                struct mglru_view *out, char *err, size_t errlen);

/* Pages that went into the youngest generations between two reads of
 * the same memcgs (`before`, `after`) without being seen accessed: reclaim
 * puts the pages it could not evict there (6.1's evict_folios: "don't add
 * rejected folios to the oldest generation"). Meant for the reads either
 * side of a probe, too short for anything else to fill them: per lruvec
 * the youngest generation's growth, or all of it when a younger one was
 * made meanwhile. */
int64_t mglru_young_gain(const struct mglru_view *before,
                         const struct mglru_view *after);

/* Pages the generations within the window gained between two reads of
 * the same memcgs (`before`, `after`) without a walk in between: per
 * lruvec whose youngest generation is the same in both, the growth of
 * its other generations whose next younger one was made less than
 * `window_ms` ago (the ones counted as working), net of what they lost.
 * Faults and rejected pages go into the youngest generation, and a walk
 * makes a new one; on 6.1 what else puts pages there is khugepaged, whose
 * collapsed huge page goes into the last walk's generation: from ranges
 * outside the window a gain, from one inside it (a hot range) none. */
int64_t mglru_window_gain(const struct mglru_view *before,
                          const struct mglru_view *after, int64_t window_ms);

/* Ages every lruvec of `v` whose youngest generation is at least
 * `interval_ms` old (force_scan: walk every page table, swap or not).
 * Returns how many were aged, or -1 with err. */
int mglru_age(const char *debug_file, const struct mglru_view *v,
              int64_t interval_ms, char *err, size_t errlen);

/* Reads `enabled_file`; when MGLRU is off and `enable` is set, switches it
 * on. Returns 1 when it is on (after), 0 when it is off, -1 when the kernel
 * has no MGLRU (err says so). */
int mglru_enable(const char *enabled_file, int enable, char *err,
                 size_t errlen);

/* The path lru_gen prints for cgroup directory `dir`, from /proc/mounts text:
 * `dir` without the cgroup2 mount point it lies under ("/" for the mount
 * point itself). Returns 0, or -1 when no cgroup2 mount holds `dir`. */
int mglru_memcg_path(const char *mounts, const char *dir, char *out,
                     size_t outlen);

#endif
