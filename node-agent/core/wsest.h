/*
 * wsest.h — the working-set estimator: the agent's measured "calculus".
 *
 * Fed one sample at a time (PSI stall totals, refault and major-fault
 * totals, the LRU sizes from meminfo or memory.stat, the pages in swap, and
 * MGLRU's generations or, where the kernel has idle-page tracking, an
 * idle-age histogram of sampled pages), it returns the working-set size
 * with an uncertainty and the marginal value of a page, dy/dx, as a curve
 * over memory sizes, no lower than what the pages out of memory that come
 * back are worth. The model is described in node-agent/README.md.
 *
 * Pure: no clock, no I/O, no globals, no allocation after wsest_new. The
 * caller passes the sample's timestamp. Floating point is used inside for the
 * statistics; every quantity and value it returns is an integer.
 */
#ifndef RAMEX_WSEST_H
#define RAMEX_WSEST_H

#include "common/units.h"

#include <stdint.h>

/* Idle ages are counted in scans: bucket k holds pages idle for exactly k
 * scans, the last bucket those idle for that many or more. 16 buckets cover
 * a 60 s window at scans down to 4 s apart. */
#define WSEST_AGE_BUCKETS 16

struct wsest_config {
	int64_t window_ns;      /* Denning's τ: touched within it = working */
	int64_t fault_cost_ns;  /* stall per refault until PSI calibrates it */
	int smooth_pct;         /* weight of a new sample in the averages */
	int stable_pct;         /* error and drift under this % = stable ... */
	int stable_samples;     /* ... for this many samples in a row */
	int64_t min_refaults;   /* refaults per interval needed to calibrate */
	int64_t pressure_ppm;   /* stall share (ppm of time) that is pressure */
	int64_t unpressure_ppm; /* pressure ends below this (hysteresis) */
};

/* Idle-page scan result for sampled pages (see sample.h). */
struct wsest_idle {
	int64_t sampled;    /* trackable pages examined by this scan */
	int64_t population; /* trackable pages the sample stands for */
	/* age[k]: sampled pages idle for k scans now (0 = touched since the
	 * previous scan). reuse[k]: sampled pages touched since the previous
	 * scan, by the idle age they had at that scan. */
	int64_t age[WSEST_AGE_BUCKETS];
	int64_t reuse[WSEST_AGE_BUCKETS];
};

/* Page-age bins from the kernel's multi-generational LRU (MGLRU): every
 * generation of every memcg and node the sample covers is one bin. A page in
 * a generation was last seen accessed (by the aging walk that moved it there)
 * between idle_min_ms and idle_max_ms ago; idle_max_ms is WSEST_GEN_OPEN for
 * the oldest generation, into which older ones are merged. Pages counted,
 * unlike page_idle's, are every page on the LRU, not a sample. */
#define WSEST_GEN_BINS 32
#define WSEST_GEN_OPEN INT64_MAX

struct wsest_gen_bin {
	int64_t idle_min_ms, idle_max_ms;
	int64_t pages;
};

struct wsest_gens {
	int nbins;
	struct wsest_gen_bin bin[WSEST_GEN_BINS];
	/* The age of the youngest generation made by the aging walk: pages
	 * touched since are not yet seen, so the histogram is that stale. */
	int64_t walk_age_ms;
	/* Added: 0 means absent. The oldest generation's sequence number,
	 * summed over the lruvecs read: it grows by one each time a
	 * lruvec's oldest generation is emptied by reclaim or merged into
	 * the next by aging. MGLRU on 6.1 counts a fault in
	 * workingset_refault only while the generation the page was
	 * evicted from is still the oldest, so faults per such step, less
	 * those counted, measure how long evicted pages stay out (see
	 * the thrashing model in node-agent/README.md). */
	uint64_t min_seq_sum;
};

/* One sample. Counters are cumulative since boot (or cgroup creation). */
struct wsest_sample {
	rx_time_ns t;
	uint64_t psi_some_us; /* PSI "some" total stall, microseconds */
	uint64_t psi_full_us; /* PSI "full" total stall, microseconds */
	uint64_t refaults;    /* workingset_refault_anon + _file */
	/* LRU sizes in pages, from /proc/meminfo or memory.stat. */
	rx_pages active;      /* Active(anon) + Active(file) */
	rx_pages inactive;    /* Inactive(anon) + Inactive(file) */
	rx_pages unevictable; /* counts as working: it cannot be reclaimed */
	int has_idle;         /* idle-page tracking ran for this sample */
	struct wsest_idle idle;
	/* Added fields: zero means absent. */
	int has_gens; /* MGLRU generations were read for this sample */
	struct wsest_gens gens;
	/* Pages active probing (memory.reclaim) took away since the previous
	 * sample: their refaults in this interval are dy/dx at the margin. */
	rx_pages probed;
	/* Pages faulted in from swap or files (pgmajfault). MGLRU on 6.1
	 * counts a refault in workingset_refault only while the generation
	 * the page was evicted from is still the oldest, which thrashing
	 * outruns: the faults count every page that came back. */
	uint64_t majfaults;
	/* Pages the probes since the previous sample could not evict, which
	 * MGLRU's reclaim puts into the youngest generation without their
	 * being accessed (the agent reads the generations either side of a
	 * probe): the walk-based reading would count them as working for a
	 * window, so they are taken off it for one. */
	rx_pages rejected;
	/* Pages khugepaged collapsed into huge pages, cumulative
	 * (thp_collapse_alloc times the pages of a huge page). A collapsed
	 * huge page is a new folio whose page-table entry is made young:
	 * MGLRU puts it into the generation of the last walk, and the next
	 * walk sees it accessed, whether the workload touched it or not. */
	uint64_t thp_collapsed;
	/* Pages the generations within the window, other than the youngest,
	 * gained since the previous read without a walk in between (the
	 * agent compares the two reads, lruvec by lruvec): on 6.1 only a
	 * collapse puts pages there, and a collapse of pages already within
	 * the window (a hot range) gains nothing. */
	rx_pages window_gain;
	/* Pages of the workload out of memory, in swap: SwapTotal − SwapFree
	 * − SwapCached from /proc/meminfo, or a cgroup's memory.swap.current.
	 * Each that the workload touches again comes back as a major fault
	 * (majfaults), however long it was out, which MGLRU's refault counter
	 * on 6.1 does not count past a generation's turn: the faults per page
	 * out measure what the pages given back are worth (comeback_value). */
	rx_pages swapped;
};

enum wsest_source {
	WSEST_NONE = 0, /* fewer than two samples yet */
	WSEST_LRU,      /* from active/inactive list sizes only (coarse) */
	WSEST_IDLE,     /* from idle-page ages (fine) */
	WSEST_MGLRU,    /* from MGLRU generations and their ages (fine) */
};

/* The source's name as the status file and the log say it. */
const char *wsest_source_name(enum wsest_source s);

/* One point of the marginal-value curve: at memory sizes from `size` up to
 * the next point's size, one more page saves `value` microseconds of stall
 * per page-year. Values never increase with size (concave utility). */
struct wsest_point {
	rx_pages size;
	int64_t value;
};

struct wsest_estimate {
	enum wsest_source source;
	rx_pages wss;      /* working-set pages */
	rx_pages wss_err;  /* ≈95 % half-width: truth in wss ± wss_err */
	rx_pages resident; /* LRU pages the workload holds now */
	rx_pages deficit;  /* working-set pages estimated not resident */
	/* dy/dx at the resident size: stall microseconds a page-year saves. */
	int64_t dydx;
	/* dy/dx just above the resident size (what one more page is worth
	 * when the workload refaults); equals dydx when it does not. */
	int64_t dydx_above;
	int64_t stall_ppm;     /* PSI some: share of the last interval */
	int64_t refault_mps;   /* refaults per second × 1000 */
	int64_t fault_cost_ns; /* calibrated stall per refault */
	int pressure;          /* stall over the threshold (hysteresis) */
	int stable;            /* steady enough to sell for the long term */
	int npoints;
	struct wsest_point curve[WSEST_AGE_BUCKETS];
	/* Added fields: zero means absent. */
	rx_pages wss_lo, wss_hi; /* the bounds the histogram allows */
	/* dy/dx measured by probing: refaults per probed page, as stall µs
	 * per page-year (smoothed over probes; 0 until a probe). dydx is at
	 * least this once measured. */
	int64_t probe_dydx;
	rx_pages probed; /* pages the probe of this interval took away */
	/* Thrashing: pages touched within the window are being evicted (the
	 * oldest generation is younger than the window while pages fault
	 * back). Then the missing pages are at most the fault rate times
	 * the time from eviction to the window's end (thrash_hi); the
	 * deficit is half of that, give or take the other half. */
	int thrashing;
	rx_pages thrash_hi;
	int64_t evict_age_ms; /* the oldest generation's age, smoothed */
	rx_pages rejected;    /* probe-rejected pages taken off (window) */
	rx_pages collapsed;   /* cold pages khugepaged collapsed, taken off */
	/* MGLRU: pages in generations whose next younger one was made a
	 * window ago or more, known idle that long: the oldest, which
	 * reclaim takes first. 0 from the other sources. */
	rx_pages cold_known;
	/* The pages out of memory (swapped) come back at comeback_nps each,
	 * per second × 10^9, learnt over the last 10 minutes or so
	 * (WSEST_COMEBACK_S, comeback_rate in wsest.c);
	 * comeback_value is what that is worth, stall µs per page-year. The
	 * LRU keeps the hottest pages, so every page still kept is worth at
	 * least as much: it is a floor under the curve and dydx_above. 0
	 * until pages given back were seen to come back. */
	int64_t comeback_nps;
	int64_t comeback_value;
};

struct wsest;

/* Sane defaults: 60 s window, 50 µs per fault, 30 % smoothing, ±5 % for
 * 6 samples is stable, pressure at 10 % stall and ends under 2 %. */
void wsest_config_default(struct wsest_config *c);

/* Returns NULL and sets *why when the configuration is unusable. */
struct wsest *wsest_new(const struct wsest_config *c, const char **why);
void wsest_free(struct wsest *w);

/* Feeds one sample. Returns 0 and fills `out`; or -1 and sets *why when the
 * sample cannot be used (time went backwards, counts are inconsistent). A
 * counter that went backwards (a reset) restarts the deltas, not an error. */
int wsest_update(struct wsest *w, const struct wsest_sample *s,
                 struct wsest_estimate *out, const char **why);

/* dy/dx at memory size x (pages): the curve's step, or dydx_above beyond
 * the resident size. */
int64_t wsest_value_at(const struct wsest_estimate *e, rx_pages x);

#endif
