/* sample.c — kernel memory files to samples; see sample.h. */
#include "node-agent/sample.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define SAMPLE_FILE_MAX 16384 /* /proc/vmstat is about 5 KiB */

/* Parses an unsigned decimal that must be followed by `end`-class text
 * (space, newline or NUL). */
static int parse_u64(const char *s, const char **rest, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	*rest = p;
	return 0;
}

/* "12.37" → 1237 (the kernel always prints two decimals). */
static int parse_pct(const char *s, const char **rest, int64_t *out)
{
	uint64_t whole, frac;
	const char *p;

	if (parse_u64(s, &p, &whole) < 0 || *p != '.' ||
	    parse_u64(p + 1, &p, &frac) < 0 || p - s < 4 || p[-3] != '.' ||
	    whole > 100)
		return -1;
	*out = (int64_t)(whole * 100 + frac);
	*rest = p;
	return 0;
}

static int psi_line(const char *p, struct sample_psi_line *l)
{
	if (strncmp(p, " avg10=", 7) || parse_pct(p + 7, &p, &l->avg10) < 0)
		return -1;
	if (strncmp(p, " avg60=", 7) || parse_pct(p + 7, &p, &l->avg60) < 0)
		return -1;
	if (strncmp(p, " avg300=", 8) || parse_pct(p + 8, &p, &l->avg300) < 0)
		return -1;
	if (strncmp(p, " total=", 7) || parse_u64(p + 7, &p, &l->total_us) < 0)
		return -1;
	return *p == '\n' || *p == 0 ? 0 : -1;
}

int sample_parse_psi(const char *text, struct sample_psi *out, char *err,
                     size_t errlen)
{
	const char *p = text;
	int has_some = 0;

	memset(out, 0, sizeof *out);
	while (*p) {
		const char *nl = strchr(p, '\n');
		int ok;
		if (strncmp(p, "some", 4) == 0) {
			ok = psi_line(p + 4, &out->some) == 0;
			has_some = 1;
		} else if (strncmp(p, "full", 4) == 0) {
			ok = psi_line(p + 4, &out->full) == 0;
			out->has_full = 1;
		} else {
			ok = 0;
		}
		if (!ok) {
			err_set(
			    err, errlen,
			    "pressure file: cannot parse line %.*s (expected "
			    "\"some|full avg10=N.NN avg60=N.NN avg300=N.NN "
			    "total=N\")",
			    (int)(nl ? nl - p : (long)strlen(p)), p);
			return -1;
		}
		p = nl ? nl + 1 : p + strlen(p);
	}
	if (!has_some) {
		err_set(err, errlen,
		        "pressure file has no \"some\" line; is PSI "
		        "enabled (psi=1 on the kernel command line)?");
		return -1;
	}
	return 0;
}

/* Calls `fn` for each "key value" line; values must be decimal. */
typedef void (*kv_fn)(void *ctx, const char *key, size_t klen, uint64_t v,
                      const char *unit);

static int each_kv(const char *text, int colon, kv_fn fn, void *ctx,
                   const char *what, char *err, size_t errlen)
{
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);
		const char *k = p, *q = p;
		uint64_t v;

		while (q < end && *q != ' ' && *q != ':')
			q++;
		size_t klen = (size_t)(q - k);
		if (colon && q < end && *q == ':')
			q++;
		while (q < end && *q == ' ')
			q++;
		if (klen == 0 || parse_u64(q, &q, &v) < 0) {
			if (end != p) {
				err_set(err, errlen,
				        "%s: cannot parse line %.*s", what,
				        (int)(end - p), p);
				return -1;
			}
		} else {
			while (q < end && *q == ' ')
				q++;
			fn(ctx, k, klen, v, q < end ? q : "");
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static int key_is(const char *k, size_t klen, const char *want)
{
	return strlen(want) == klen && memcmp(k, want, klen) == 0;
}

struct vm_ctx {
	struct sample_counters *c;
	int seen;
};

static void vm_kv(void *ctx, const char *k, size_t klen, uint64_t v,
                  const char *unit)
{
	struct vm_ctx *x = ctx;
	(void)unit;
	if (key_is(k, klen, "workingset_refault_anon")) {
		x->c->refault_anon = v;
		x->seen = 1;
	} else if (key_is(k, klen, "workingset_refault_file") ||
	           key_is(k, klen, "workingset_refault")) {
		x->c->refault_file = v; /* before 5.9 there was one counter */
		x->seen = 1;
	} else if (key_is(k, klen, "pgmajfault")) {
		x->c->pgmajfault = v;
	} else if (key_is(k, klen, "pswpin")) {
		x->c->pswpin = v;
	} else if (key_is(k, klen, "thp_collapse_alloc")) {
		x->c->thp_collapse_alloc = v;
	}
}

int sample_parse_vmstat(const char *text, struct sample_counters *out,
                        char *err, size_t errlen)
{
	struct vm_ctx x = {out, 0};
	memset(out, 0, sizeof *out);
	if (each_kv(text, 0, vm_kv, &x, "vmstat", err, errlen) < 0)
		return -1;
	if (!x.seen) {
		err_set(err, errlen,
		        "vmstat has no workingset_refault counters "
		        "(kernel older than 3.15?)");
		return -1;
	}
	return 0;
}

struct mem_ctx {
	struct sample_mem *m;
	struct sample_counters *c;
	unsigned seen;
	int bytes; /* memory.stat: bytes; meminfo: kB */
};

enum {
	SEEN_TOTAL = 1,
	SEEN_AA = 2,
	SEEN_IA = 4,
	SEEN_AF = 8,
	SEEN_IF = 16,
	SEEN_UNEV = 32,
	SEEN_REF = 64,
};

static void mem_kv(void *ctx, const char *k, size_t klen, uint64_t v,
                   const char *unit)
{
	struct mem_ctx *x = ctx;
	rx_pages pages;

	if (x->bytes)
		pages = (rx_pages)(v / RX_PAGE_SIZE);
	else if (strncmp(unit, "kB", 2) == 0)
		pages = (rx_pages)(v / (RX_PAGE_SIZE / 1024));
	else
		pages = (rx_pages)v; /* HugePages_* counts */

	static const struct {
		const char *meminfo, *memstat;
		unsigned bit;
		size_t off;
	} keys[] = {
	    {"MemTotal", NULL, SEEN_TOTAL, offsetof(struct sample_mem, total)},
	    {"MemAvailable", NULL, 0, offsetof(struct sample_mem, available)},
	    {"Active(anon)", "active_anon", SEEN_AA,
	     offsetof(struct sample_mem, active_anon)},
	    {"Inactive(anon)", "inactive_anon", SEEN_IA,
	     offsetof(struct sample_mem, inactive_anon)},
	    {"Active(file)", "active_file", SEEN_AF,
	     offsetof(struct sample_mem, active_file)},
	    {"Inactive(file)", "inactive_file", SEEN_IF,
	     offsetof(struct sample_mem, inactive_file)},
	    {"Unevictable", "unevictable", SEEN_UNEV,
	     offsetof(struct sample_mem, unevictable)},
	    {"SwapTotal", NULL, 0, offsetof(struct sample_mem, swap_total)},
	    {"SwapFree", NULL, 0, offsetof(struct sample_mem, swap_free)},
	    {"SwapCached", "swapcached", 0,
	     offsetof(struct sample_mem, swap_cached)},
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const char *want = x->bytes ? keys[i].memstat : keys[i].meminfo;
		if (want && key_is(k, klen, want)) {
			*(rx_pages *)((char *)x->m + keys[i].off) = pages;
			x->seen |= keys[i].bit;
			return;
		}
	}
	if (x->c) {
		struct vm_ctx vx = {x->c, 0};
		vm_kv(&vx, k, klen, v, unit);
		if (vx.seen)
			x->seen |= SEEN_REF;
	}
}

static int need_keys(unsigned seen, unsigned want, int memstat, char *err,
                     size_t errlen)
{
	static const char *mi[] = {"MemTotal",          "Active(anon)",
	                           "Inactive(anon)",    "Active(file)",
	                           "Inactive(file)",    "Unevictable",
	                           "workingset_refault"};
	static const char *ms[] = {"",
	                           "active_anon",
	                           "inactive_anon",
	                           "active_file",
	                           "inactive_file",
	                           "unevictable",
	                           "workingset_refault_anon/_file"};
	for (int b = 0; b < 7; b++) {
		if ((want & (1u << b)) && !(seen & (1u << b))) {
			err_set(err, errlen, "%s has no %s line",
			        memstat ? "memory.stat" : "meminfo",
			        memstat ? ms[b] : mi[b]);
			return -1;
		}
	}
	return 0;
}

int sample_parse_meminfo(const char *text, struct sample_mem *out, char *err,
                         size_t errlen)
{
	struct mem_ctx x = {out, NULL, 0, 0};
	memset(out, 0, sizeof *out);
	if (each_kv(text, 1, mem_kv, &x, "meminfo", err, errlen) < 0)
		return -1;
	return need_keys(x.seen,
	                 SEEN_TOTAL | SEEN_AA | SEEN_IA | SEEN_AF | SEEN_IF |
	                     SEEN_UNEV,
	                 0, err, errlen);
}

int sample_parse_memstat(const char *text, struct sample_mem *mem,
                         struct sample_counters *ctr, char *err, size_t errlen)
{
	struct mem_ctx x = {mem, ctr, 0, 1};
	memset(mem, 0, sizeof *mem);
	memset(ctr, 0, sizeof *ctr);
	if (each_kv(text, 0, mem_kv, &x, "memory.stat", err, errlen) < 0)
		return -1;
	return need_keys(x.seen,
	                 SEEN_AA | SEEN_IA | SEEN_AF | SEEN_IF | SEEN_UNEV |
	                     SEEN_REF,
	                 1, err, errlen);
}

int sample_read_file(const char *path, char *buf, size_t len, char *err,
                     size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (fd < 0) {
		err_set(err, errlen, "could not open %s: %s", path,
		        strerror(errno));
		return -1;
	}
	while (n < len - 1) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err_set(err, errlen, "could not read %s: %s", path,
			        strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (n == len - 1) {
		err_set(err, errlen, "%s is larger than %zu bytes", path,
		        len - 1);
		return -1;
	}
	buf[n] = 0;
	return 0;
}

rx_pages sample_thp_pages(const char *file)
{
	char buf[32], err[256];
	unsigned long long b;

	if (sample_read_file(file, buf, sizeof buf, err, sizeof err) < 0 ||
	    sscanf(buf, "%llu", &b) != 1 || b < RX_PAGE_SIZE ||
	    b > (1ULL << 40))
		return 0;
	return (rx_pages)(b / RX_PAGE_SIZE);
}

static int read_in(const char *dir, const char *name, char *buf, size_t len,
                   char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", dir, name) >=
	    (int)sizeof path) {
		err_set(err, errlen, "path too long: %s/%s", dir, name);
		return -1;
	}
	return sample_read_file(path, buf, len, err, errlen);
}

int sample_take(const struct sample_source *src, rx_time_ns t,
                struct wsest_sample *out, struct sample_mem *mem_out, char *err,
                size_t errlen)
{
	char *buf = malloc(SAMPLE_FILE_MAX), dir[PATH_MAX];
	struct sample_psi psi;
	struct sample_counters ctr;
	struct sample_mem mem;
	rx_pages swap = 0;
	int rc = -1;

	if (!buf) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	memset(out, 0, sizeof *out);
	if (src->cgroup && src->cgroup[0]) {
		snprintf(dir, sizeof dir, "%s%s", src->root, src->cgroup);
		if (read_in(dir, "memory.pressure", buf, SAMPLE_FILE_MAX, err,
		            errlen) < 0 ||
		    sample_parse_psi(buf, &psi, err, errlen) < 0 ||
		    read_in(dir, "memory.stat", buf, SAMPLE_FILE_MAX, err,
		            errlen) < 0 ||
		    sample_parse_memstat(buf, &mem, &ctr, err, errlen) < 0)
			goto fail;
		/* Optional: without swap accounting no page counts as out,
		 * and the estimator learns nothing from the faults. */
		char e2[256];
		uint64_t b;
		if (read_in(dir, "memory.swap.current", buf, SAMPLE_FILE_MAX,
		            e2, sizeof e2) == 0 &&
		    sscanf(buf, "%" SCNu64, &b) == 1)
			swap = (rx_pages)(b / RX_PAGE_SIZE) - mem.swap_cached;
	} else {
		snprintf(dir, sizeof dir, "%s/proc", src->root);
		if (read_in(dir, "pressure/memory", buf, SAMPLE_FILE_MAX, err,
		            errlen) < 0 ||
		    sample_parse_psi(buf, &psi, err, errlen) < 0 ||
		    read_in(dir, "vmstat", buf, SAMPLE_FILE_MAX, err, errlen) <
		        0 ||
		    sample_parse_vmstat(buf, &ctr, err, errlen) < 0 ||
		    read_in(dir, "meminfo", buf, SAMPLE_FILE_MAX, err, errlen) <
		        0 ||
		    sample_parse_meminfo(buf, &mem, err, errlen) < 0)
			goto fail;
		swap = mem.swap_total - mem.swap_free - mem.swap_cached;
	}
	out->t = t;
	out->psi_some_us = psi.some.total_us;
	out->psi_full_us = psi.full.total_us;
	out->refaults = ctr.refault_anon + ctr.refault_file;
	out->majfaults = ctr.pgmajfault;
	out->thp_collapsed = ctr.thp_collapse_alloc * (uint64_t)src->thp_pages;
	out->active = mem.active_anon + mem.active_file;
	out->inactive = mem.inactive_anon + mem.inactive_file;
	out->unevictable = mem.unevictable;
	/* The workload's pages out of memory, whose major faults are pages
	 * coming back (wsest's comeback_rate). A swap page still cached in
	 * memory is not out. */
	out->swapped = swap > 0 ? swap : 0;
	if (mem_out)
		*mem_out = mem;
	rc = 0;
fail:
	free(buf);
	return rc;
}

struct sample_idle {
	int fd;
	uint64_t start, stride, n;
	uint8_t *age;     /* idle age in scans */
	uint8_t *tracked; /* the bit stuck at the last scan */
};

struct sample_idle *sample_idle_new(const char *bitmap, uint64_t pfn_start,
                                    uint64_t pfn_end, uint64_t stride,
                                    char *err, size_t errlen)
{
	struct sample_idle *si = NULL;

	if (stride < 64 || pfn_end <= pfn_start) {
		err_set(err, errlen,
		        "idle sampling needs a stride of at least 64 "
		        "and a non-empty page frame range");
		return NULL;
	}
	si = calloc(1, sizeof *si);
	if (!si)
		goto oom;
	si->fd = -1;
	si->start = pfn_start;
	si->stride = stride;
	si->n = (pfn_end - pfn_start + stride - 1) / stride;
	si->age = calloc(si->n, 1);
	si->tracked = calloc(si->n, 1);
	if (!si->age || !si->tracked)
		goto oom;
	si->fd = open(bitmap, O_RDWR | O_CLOEXEC);
	if (si->fd < 0) {
		err_set(err, errlen,
		        "could not open %s: %s (needs root and "
		        "CONFIG_IDLE_PAGE_TRACKING; the estimate falls back to "
		        "list sizes without it)",
		        bitmap, strerror(errno));
		goto fail;
	}
	return si;
oom:
	err_set(err, errlen, "out of memory");
fail:
	sample_idle_free(si);
	return NULL;
}

void sample_idle_free(struct sample_idle *si)
{
	if (!si)
		return;
	if (si->fd >= 0)
		close(si->fd);
	free(si->age);
	free(si->tracked);
	free(si);
}

int sample_idle_scan(struct sample_idle *si, struct wsest_idle *out, char *err,
                     size_t errlen)
{
	memset(out, 0, sizeof *out);
	for (uint64_t i = 0; i < si->n; i++) {
		uint64_t pfn = si->start + i * si->stride;
		off_t off = (off_t)(pfn / 64 * 8);
		uint64_t bit = UINT64_C(1) << (pfn % 64), word;

		if (pread(si->fd, &word, 8, off) != 8)
			break; /* past the last page frame: the range ends */
		if (si->tracked[i]) {
			if (word & bit) {
				if (si->age[i] < WSEST_AGE_BUCKETS - 1)
					si->age[i]++;
			} else {
				out->reuse[si->age[i]]++;
				si->age[i] = 0;
			}
			out->age[si->age[i]]++;
			out->sampled++;
		}
		/* Set the bit again and check it stuck: only user pages can be
		 * idle, and only they count. */
		if (pwrite(si->fd, &bit, 8, off) != 8 ||
		    pread(si->fd, &word, 8, off) != 8) {
			err_set(err, errlen,
			        "could not write the idle bitmap at "
			        "page frame %" PRIu64 ": %s",
			        pfn, strerror(errno));
			return -1;
		}
		if (!si->tracked[i])
			si->age[i] = 0;
		si->tracked[i] = (word & bit) != 0;
	}
	out->population = out->sampled * (int64_t)si->stride;
	return 0;
}

/* What the cgroup uses, in bytes: memory.current, or where there is none
 * (the cgroup2 root) the pages on its LRU lists from memory.stat. */
static int read_current(const char *dir, int64_t *out, char *err, size_t errlen)
{
	char buf[64], path[PATH_MAX];
	uint64_t v;
	const char *rest;

	snprintf(path, sizeof path, "%s/memory.current", dir);
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		struct sample_mem mem;
		struct sample_counters ctr;
		char *st = malloc(SAMPLE_FILE_MAX);
		int rc = -1;
		if (!st) {
			err_set(err, errlen, "out of memory");
			return -1;
		}
		if (read_in(dir, "memory.stat", st, SAMPLE_FILE_MAX, err,
		            errlen) == 0 &&
		    sample_parse_memstat(st, &mem, &ctr, err, errlen) == 0) {
			*out = (int64_t)(mem.active_anon + mem.inactive_anon +
			                 mem.active_file + mem.inactive_file +
			                 mem.unevictable) *
			       RX_PAGE_SIZE;
			rc = 0;
		}
		free(st);
		return rc;
	}
	if (read_in(dir, "memory.current", buf, sizeof buf, err, errlen) < 0)
		return -1;
	if (parse_u64(buf, &rest, &v) < 0 || v > INT64_MAX) {
		err_set(err, errlen, "%s/memory.current: not a byte count",
		        dir);
		return -1;
	}
	*out = (int64_t)v;
	return 0;
}

int sample_reclaim(const char *dir, rx_pages pages, rx_pages *taken, char *err,
                   size_t errlen)
{
	char path[PATH_MAX], num[32];
	int64_t before, after;
	int fd, n;
	ssize_t w;

	*taken = 0;
	if (pages <= 0)
		return 0;
	if (read_current(dir, &before, err, errlen) < 0)
		return -1;
	if (snprintf(path, sizeof path, "%s/memory.reclaim", dir) >=
	    (int)sizeof path) {
		err_set(err, errlen, "path too long: %s/memory.reclaim", dir);
		return -1;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		err_set(
		    err, errlen,
		    "could not open %s: %s (memory.reclaim needs kernel 5.19 "
		    "or later)",
		    path, strerror(errno));
		return -1;
	}
	n = snprintf(num, sizeof num, "%lld\n",
	             (long long)pages * RX_PAGE_SIZE);
	w = write(fd, num, (size_t)n);
	int e = errno;
	close(fd);
	if (w < 0 && e != EAGAIN) {
		err_set(err, errlen, "could not write %s: %s", path,
		        strerror(e));
		return -1;
	}
	if (read_current(dir, &after, err, errlen) < 0)
		return -1;
	*taken =
	    before > after ? (rx_pages)((before - after) / RX_PAGE_SIZE) : 0;
	return 0;
}

/* Writes `text` to DIR/NAME in one write. */
static int write_in(const char *dir, const char *name, const char *text,
                    char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t n = strlen(text);
	int fd;

	if (snprintf(path, sizeof path, "%s/%s", dir, name) >=
	    (int)sizeof path) {
		err_set(err, errlen, "path too long: %s/%s", dir, name);
		return -1;
	}
	/* O_TRUNC as the shell's `>` does: cgroup files take it, and a plain
	 * file (tests) then holds only the value. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0) {
		err_set(err, errlen, "could not open %s: %s", path,
		        strerror(errno));
		return -1;
	}
	ssize_t w = write(fd, text, n);
	int e = errno;
	close(fd);
	if (w != (ssize_t)n) {
		err_set(err, errlen, "could not write %s: %s", path,
		        w < 0 ? strerror(e) : "short write");
		errno = w < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* memory.high as read ("max" or bytes), one line, for writing back. */
static int read_high(const char *dir, char *out, size_t len, char *err,
                     size_t errlen)
{
	char buf[64];
	uint64_t v;
	const char *rest;

	if (read_in(dir, "memory.high", buf, sizeof buf, err, errlen) < 0)
		return -1;
	if (!strncmp(buf, "max", 3) && (buf[3] == '\n' || !buf[3])) {
		snprintf(out, len, "max\n");
		return 0;
	}
	if (parse_u64(buf, &rest, &v) < 0 || v > INT64_MAX) {
		err_set(err, errlen,
		        "%s/memory.high: neither \"max\" nor a byte "
		        "count",
		        dir);
		return -1;
	}
	snprintf(out, len, "%llu\n", (unsigned long long)v);
	return 0;
}

int sample_probe_high(const char *dir, rx_pages pages, const char *marker,
                      rx_pages *taken, char *err, size_t errlen)
{
	char high[32], low[32];
	int64_t before, after;

	*taken = 0;
	if (pages <= 0)
		return 0;
	if (read_current(dir, &before, err, errlen) < 0 ||
	    read_high(dir, high, sizeof high, err, errlen) < 0)
		return -1;
	int64_t target = before - (int64_t)pages * RX_PAGE_SIZE;
	if (target < 0)
		target = 0;
	snprintf(low, sizeof low, "%lld\n", (long long)target);
	if (marker) {
		FILE *f = fopen(marker, "w");
		if (!f || fputs(high, f) < 0 || fflush(f) != 0 ||
		    fsync(fileno(f)) != 0) {
			err_set(
			    err, errlen,
			    "could not write %s (it keeps memory.high to set "
			    "back): %s",
			    marker, strerror(errno));
			if (f)
				fclose(f);
			return -1;
		}
		fclose(f);
	}
	/* The kernel reclaims down to the new memory.high before the write
	 * returns, and goes on while the workload grows past it (taking
	 * what it grows into, and throttling it meanwhile): a timer's signal
	 * ends the write after SAMPLE_PROBE_HIGH_MS, whatever it got. */
	struct sigaction sa, old_sa;
	struct itimerval it = {{0, 0}, {0, SAMPLE_PROBE_HIGH_MS * 1000}}, off;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm; /* no SA_RESTART: the write returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old_sa);
	setitimer(ITIMER_REAL, &it, NULL);
	int rc = write_in(dir, "memory.high", low, err, errlen);
	if (rc < 0 && errno == EINTR)
		rc = 0; /* the timer ended it: what it got is taken */
	memset(&off, 0, sizeof off);
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (rc == 0)
		rc = read_current(dir, &after, err, errlen);
	char e2[256];
	if (write_in(dir, "memory.high", high, e2, sizeof e2) < 0) {
		err_set(
		    err, errlen,
		    "%s; memory.high is left lowered (%s is kept, the agent "
		    "sets it back when it starts)",
		    e2, marker ? marker : "no marker");
		return -1;
	}
	if (marker)
		unlink(marker);
	if (rc < 0)
		return -1;
	*taken =
	    before > after ? (rx_pages)((before - after) / RX_PAGE_SIZE) : 0;
	return 0;
}

int sample_probe_high_restore(const char *dir, const char *marker, char *err,
                              size_t errlen)
{
	char buf[64];
	uint64_t v;
	const char *rest;

	if (access(marker, F_OK) < 0)
		return 0;
	if (sample_read_file(marker, buf, sizeof buf, err, errlen) < 0)
		return -1;
	if (strcmp(buf, "max\n") &&
	    (parse_u64(buf, &rest, &v) < 0 || v > INT64_MAX)) {
		err_set(err, errlen,
		        "%s holds neither \"max\" nor a byte count: set %s's "
		        "memory.high by hand, then remove it",
		        marker, dir);
		return -1;
	}
	if (write_in(dir, "memory.high", buf, err, errlen) < 0)
		return -1;
	unlink(marker);
	return 1;
}
