/*
 * sample.h — the thin layer between the kernel's memory files and the
 * estimator: parsers for their text, a reader that turns them into one
 * wsest_sample, and the idle-page sampler.
 *
 * Parsers are pure functions of the text (tested on recorded fixtures). The
 * reader knows where the files live: for the whole machine
 * ROOT/proc/pressure/memory, ROOT/proc/vmstat and ROOT/proc/meminfo (ROOT is
 * "" in production, a fixture tree in tests); for a cgroup v2 directory its
 * memory.pressure, memory.stat and memory.swap.current (absent where swap
 * is not accounted: then no page counts as out). The idle sampler owns an open
 * /sys/kernel/mm/page_idle/bitmap and the idle age of each sampled page.
 */
#ifndef RAMEX_SAMPLE_H
#define RAMEX_SAMPLE_H

#include "common/units.h"
#include "node-agent/core/wsest.h"

#include <stddef.h>
#include <stdint.h>

#define SAMPLE_PAGE_IDLE_BITMAP "/sys/kernel/mm/page_idle/bitmap"

struct sample_psi_line {
	int64_t avg10, avg60, avg300; /* percent × 100 */
	uint64_t total_us;
};

struct sample_psi {
	struct sample_psi_line some, full;
	int has_full; /* the "full" line exists (kernel 5.x and cgroups) */
};

struct sample_counters {
	uint64_t refault_anon, refault_file; /* legacy kernels: all in file */
	uint64_t pgmajfault, pswpin;
	uint64_t thp_collapse_alloc; /* huge pages khugepaged allocated */
};

struct sample_mem { /* pages */
	rx_pages total, available;
	rx_pages active_anon, inactive_anon, active_file, inactive_file;
	rx_pages unevictable;
	/* Swap: meminfo's SwapTotal, SwapFree and SwapCached (memory.stat
	 * has only swapcached; a cgroup's swap is memory.swap.current). */
	rx_pages swap_total, swap_free, swap_cached;
};

/* Each returns 0, or -1 with a reason in err that names the field. */
int sample_parse_psi(const char *text, struct sample_psi *out, char *err,
                     size_t errlen);
int sample_parse_vmstat(const char *text, struct sample_counters *out,
                        char *err, size_t errlen);
int sample_parse_meminfo(const char *text, struct sample_mem *out, char *err,
                         size_t errlen);
/* cgroup v2 memory.stat: list sizes (bytes → pages) and refault counters.
 * total and available are left 0 (they come from memory.max). */
int sample_parse_memstat(const char *text, struct sample_mem *mem,
                         struct sample_counters *ctr, char *err, size_t errlen);

/* Where to read: cgroup NULL or "" means the whole machine under root. */
struct sample_source {
	const char *root;   /* "" in production */
	const char *cgroup; /* a cgroup v2 directory, or NULL */
	/* Pages of a huge page (sample_thp_pages): thp_collapse_alloc
	 * times this is the sample's thp_collapsed. 0: not counted. */
	rx_pages thp_pages;
};

#define SAMPLE_THP_PMD_SIZE "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"

/* The pages of a PMD-sized transparent huge page, from `file`
 * (SAMPLE_THP_PMD_SIZE: bytes); 0 when the kernel has no THP. */
rx_pages sample_thp_pages(const char *file);

/* Reads the files of `src` into `out` (timestamp t, no idle data); the
 * meminfo or memory.stat sizes also go to `mem` when it is not NULL. */
int sample_take(const struct sample_source *src, rx_time_ns t,
                struct wsest_sample *out, struct sample_mem *mem, char *err,
                size_t errlen);

/* Active probing's edge: asks the kernel to reclaim `pages` from cgroup v2
 * directory `dir` (memory.reclaim, kernel 5.19+) and sets *taken to the
 * pages memory.current fell by. A reclaim that fell short (EAGAIN) is not
 * an error: *taken says how much it got. Returns 0 or -1 with err. */
int sample_reclaim(const char *dir, rx_pages pages, rx_pages *taken, char *err,
                   size_t errlen);

/* The other edge, for cgroups without memory.reclaim (kernels before 5.19)
 * or by choice: lowers `dir`'s memory.high to memory.current less `pages`
 * (the kernel reclaims down to it in the writer's context, for at most
 * SAMPLE_PROBE_HIGH_MS: a workload growing meanwhile is throttled, and its
 * new pages would be taken too), then sets memory.high back to what it
 * read. The value to set back is written
 * to `marker` first (NULL: none) and the marker removed after, so that an
 * agent killed between the two writes restores it when it starts again
 * (sample_probe_high_restore). *taken: the pages memory.current fell by.
 * Returns 0, or -1 with err (memory.high then holds what it held before,
 * or the marker says what it should). */
#define SAMPLE_PROBE_HIGH_MS 300 /* the longest memory.high stays lowered */
int sample_probe_high(const char *dir, rx_pages pages, const char *marker,
                      rx_pages *taken, char *err, size_t errlen);

/* Sets `dir`'s memory.high back to what `marker` holds and removes it.
 * Returns 1 when it did, 0 when there was no marker, -1 with err. */
int sample_probe_high_restore(const char *dir, const char *marker, char *err,
                              size_t errlen);

/* Reads a whole small file into buf (NUL-terminated). */
int sample_read_file(const char *path, char *buf, size_t len, char *err,
                     size_t errlen);

/*
 * Idle-page sampler: every `stride`-th page frame in [pfn_start, pfn_end)
 * is sampled. Each scan reads the idle bit of every sampled page (set by the
 * previous scan; the kernel clears it when the page is touched), updates the
 * page's idle age, and sets the bit again. A page whose bit does not stick
 * is not a user page (free, kernel) and is not counted. stride must be at
 * least 64, so each sampled page has its own 64-bit word of the bitmap.
 */
struct sample_idle;

struct sample_idle *sample_idle_new(const char *bitmap, uint64_t pfn_start,
                                    uint64_t pfn_end, uint64_t stride,
                                    char *err, size_t errlen);
void sample_idle_free(struct sample_idle *si);

/* One scan. Fills `out`; out->sampled is 0 on the first scan (no ages yet).
 * Returns 0 or -1 with err set. */
int sample_idle_scan(struct sample_idle *si, struct wsest_idle *out, char *err,
                     size_t errlen);

#endif
