/*
 * workload.h — one simulated machine's workload and the kernel signals it
 * produces. Owns the access model (docs/economics.md, "The workload"):
 *
 *   pages ranked hottest first, in classes of equal access rate:
 *     hot    H(t) pages, each touched λh times a second;
 *     warm   12 classes of L = ℓ·H(t) pages, rates λh·e^-(j+½), j = 0..11
 *            (an exponential tail of reuse distances);
 *     cold   C pages touched λc times a second (once in three days);
 *   H(t) = mean · level · (1 + a·sin(2π(t − φ)/day)) + burst.
 *
 * Given the memory the machine gives the workload (M local pages, B pages
 * of borrowed remote memory), the top M ranks are resident (the LRU keeps
 * the hottest), the next B are remote and the rest are on local storage;
 * from that follow the faults, the stall the workload suffers, and what the
 * kernel shows: PSI some/full totals, refault and major-fault totals, the
 * active/inactive list sizes and, by the kernel the machine runs
 * (wl_source), either MGLRU's generations (a stock kernel: Debian 12's
 * 6.1 has no page_idle) or a page_idle age histogram of every 257th
 * resident page.
 * The truth (the working set, pages touched within τ = 60 s) is given to
 * the caller for scoring and for the oracle only.
 *
 * Pure: state comes in and goes out; randomness only from the caller's
 * stream; no clock, no I/O, no globals.
 */
#ifndef RAMEX_SIM_WORKLOAD_H
#define RAMEX_SIM_WORKLOAD_H

#include "common/units.h"
#include "node-agent/core/wsest.h"
#include "sim/rng.h"

#define WL_TAIL    12
#define WL_CLASSES (WL_TAIL + 2) /* hot, the warm tail, cold */

/* The working-set signal the machine's kernel gives its agent. */
enum wl_source {
	/* MGLRU's generations (/sys/kernel/debug/lru_gen) as the agent
	 * reads them: a stock kernel's (CONFIG_LRU_GEN, no page_idle), with
	 * 6.1's refault counter, which counts a fault only while the
	 * generation its page was evicted from is still the oldest. */
	WL_MGLRU = 0,
	/* page_idle sampling (CONFIG_IDLE_PAGE_TRACKING) on a kernel with
	 * the classic LRU, whose refault counter counts every refault. */
	WL_PAGE_IDLE,
};

/* The kernel the model stands for and the costs it takes from bench/
 * (docs/economics.md says which). */
struct wl_costs {
	double fault_local_s;  /* a page fault served by local storage */
	double fault_remote_s; /* ... by lent memory on another machine */
	double window_s;       /* Denning's τ for the true working set */
	double full_share;     /* PSI full as a share of PSI some */
	int idle_stride;       /* page_idle samples every n-th page */
	enum wl_source source; /* what the kernel gives the agent */
};

/* Fixed per machine, drawn once. */
struct wl_params {
	rx_pages installed;
	double ws_mean;     /* pages: the hot set at level 1, no swing */
	double tail_frac;   /* ℓ: warm pages per class, share of H */
	double cold_frac;   /* C as a share of ws_mean */
	double hot_rate;    /* λh, touches per second per hot page */
	double cold_rate;   /* λc */
	double amp;         /* diurnal amplitude a */
	double phase_s;     /* φ: when the day peaks */
	double burst_per_s; /* rate of bursts */
	double burst_mean_s;
	double phase_per_s; /* rate of phase changes */
	/* Per class, precomputed from the rates and the sampling interval. */
	double rate[WL_CLASSES];
	double pk[WL_CLASSES][WSEST_AGE_BUCKETS]; /* P(idle age = k) */
	double reuse[WL_CLASSES];                 /* P(touched in a scan) */
	double active[WL_CLASSES];                /* P(on the active list) */
	double in_ws[WL_CLASSES];                 /* P(touched within τ) */
	/* MGLRU: the agent ages the generations every walk_s (the first
	 * sample half a window after the last walk); e^-λ·walk_s per class. */
	double walk_s;
	double walk_keep[WL_CLASSES];
};

/* Changes over time. */
struct wl_state {
	double level;
	double burst_pages;
	double burst_end, next_burst, next_phase;
	int64_t prev_age[WSEST_AGE_BUCKETS]; /* the last scan's histogram */
	int have_prev;
	double frac_refault; /* sub-page carry, so counts stay exact */
	double frac_counted; /* the same for the refaults counted */
	double since_walk;   /* MGLRU: seconds since the last aging walk */
	double seq;          /* MGLRU: the oldest generation's number */
	/* Cumulative kernel counters. */
	uint64_t psi_some_us, psi_full_us, refaults, majfaults;
};

/* The workload at one instant. */
struct wl_now {
	double size[WL_CLASSES]; /* pages per class */
	double footprint;        /* all pages it has */
	double ws;               /* the true working set */
};

/* What one interval did. */
struct wl_step {
	double stall_s;  /* time the workload stalled in the interval */
	double faults;   /* pages faulted in */
	double used;     /* resident pages of the workload */
	rx_pages active; /* LRU sizes the kernel shows */
	rx_pages inactive;
};

void wl_costs_default(struct wl_costs *c);

/* Draws machine `p` (installed pages, ratio of installed to working set,
 * the diurnal phase of its group) and its initial state. */
void wl_draw(struct wl_params *p, struct wl_state *s, struct rng *r,
             const struct wl_costs *c, rx_pages installed, double ratio,
             double phase_s, double dt_s);

/* Moves events (bursts, phase changes) to time t and gives the workload. */
void wl_at(const struct wl_params *p, struct wl_state *s, struct rng *r,
           double t, struct wl_now *now);

/* MGLRU's generations of `res` resident pages per class, as lru_gen shows
 * them `since` seconds after the last aging walk, the walks `walk` seconds
 * apart (the kernel keeps four generations: the youngest holds the
 * `fresh` pages faulted in since that walk, the next the pages that walk
 * saw accessed, then those the walk before saw, and the oldest, into which
 * older ones merge, the rest), as the agent's mglru_parse turns them into
 * page-age bins (youngest first). Expected counts, no noise: the kernel
 * counts every page, not a sample. */
void wl_gens(const struct wl_params *p, const double *res, double walk,
             double since, double fresh, struct wsest_gens *g);

/* How often the kernel's own reclaim ages the generations when evicting
 * `evict_ps` pages a second from `res` resident pages per class: it must
 * age whenever the two oldest generations run out (the two youngest are
 * not evicted from), so the walks come at most `walk` apart and, if the
 * evictions need it, as often as the pages idle longer than the interval
 * cover them. Returns the interval, seconds. */
double wl_walk_interval(const struct wl_params *p, const double *res,
                        double walk, double evict_ps);

/* One interval of dt_s ending at t with `mem` local pages for the workload
 * and `remote` borrowed pages (r: the sampling noise's own stream, apart
 * from the workload's): advances the counters in s, fills out and
 * the sample the agent reads (sample->t is set by the caller). */
void wl_step(const struct wl_params *p, struct wl_state *s, struct rng *r,
             const struct wl_costs *c, const struct wl_now *now, double mem,
             double remote, double dt_s, struct wl_step *out,
             struct wsest_sample *sample);

/* The estimate an agent with perfect knowledge would have: the oracle
 * (pressure: the true stall at or over pressure_ppm of the interval). */
void wl_oracle(const struct wl_params *p, const struct wl_costs *c,
               const struct wl_now *now, const struct wl_step *st, double mem,
               double dt_s, int64_t pressure_ppm, struct wsest_estimate *e);

#endif
