/*
 * ramex_test.c - the ramex.ko tests, run as a static binary inside a qemu
 * guest by tests/kernel/suite.sh.
 *
 * Usage: ramex_test PATH/TO/ramex.ko
 *
 * Prints one line per test, "RAMEX-TEST <name> PASS" or
 * "RAMEX-TEST <name> FAIL <why>", plus "RAMEX-INFO" lines with measured
 * numbers. The host judges only these lines: a test that never prints has
 * failed. Tests run in order and share one loaded module; each leaves no
 * page offline unless it says so.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/kernel/guest_util.h"

#define PAGE 4096
#define KB_PER_PAGE 4

static const char *ko_path;
static int64_t base_memtotal; /* kB before the module was loaded */
static uint64_t max_pages;    /* what the module was loaded with */
static int dev = -1;          /* the shared /dev/ramex file */
static char why[512];

static int failf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return 1;
}

#define CHECK(cond, ...)                         \
	do {                                     \
		if (!(cond))                     \
			return failf(__VA_ARGS__); \
	} while (0)

static void info(const char *fmt, ...)
{
	va_list ap;

	printf("RAMEX-INFO ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* The counters always add up: every page ever offlined is accounted for. */
static int stats_balanced(const struct ramex_stats *st)
{
	return st->total_offlined ==
	       st->pages_offline + st->total_onlined + st->oom_released;
}

static int64_t offline_now(void)
{
	struct ramex_stats st;

	if (gu_stats(dev, &st))
		return -1;
	return (int64_t)st.pages_offline;
}

/* MemTotal must equal the pre-load value less what the module holds. */
static int memtotal_matches(void)
{
	struct ramex_stats st;

	if (gu_stats(dev, &st))
		return 0;
	return gu_meminfo("MemTotal") ==
	       base_memtotal -
		       (int64_t)(st.pages_offline + st.pages_pool) * KB_PER_PAGE;
}

static int set_oom_score_adj(const char *v)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, v, strlen(v)) == (ssize_t)strlen(v);
	close(fd);
	return ok ? 0 : -1;
}

/* ---- loading ---- */

static int t_bad_params(void)
{
	char p[64];
	int64_t before = gu_meminfo("MemTotal");
	int ret;

	ret = gu_load(ko_path, "pool_max_pages=100000");
	CHECK(ret == -EINVAL, "pool_max_pages=100000 loaded: %d", ret);
	snprintf(p, sizeof(p), "max_pages=%lld",
		 (long long)(before / KB_PER_PAGE + 1));
	ret = gu_load(ko_path, p);
	CHECK(ret == -EINVAL, "%s loaded: %d", p, ret);
	CHECK(access(RAMEX_DEVICE, F_OK) != 0, "device left behind");
	CHECK(gu_meminfo("MemTotal") == before, "MemTotal moved");
	return 0;
}

static int t_load(void)
{
	struct ramex_info in;
	char p[128];
	int ret;

	base_memtotal = gu_meminfo("MemTotal");
	/* Nearly all of RAM, so that t_shortfall meets a real shortage. */
	max_pages = (uint64_t)base_memtotal / KB_PER_PAGE - 2048;
	snprintf(p, sizeof(p), "max_pages=%llu oom_pages=1024 pool_max_pages=256",
		 (unsigned long long)max_pages);
	ret = gu_load(ko_path, p);
	CHECK(ret == 0, "finit_module: %s", strerror(-ret));
	dev = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
	CHECK(dev >= 0, "open %s: %s", RAMEX_DEVICE, strerror(errno));
	memset(&in, 0xff, sizeof(in));
	CHECK(ioctl(dev, RAMEX_IOC_INFO, &in) == 0, "INFO: %s", strerror(errno));
	CHECK(in.abi_version == RAMEX_ABI_VERSION, "abi %llu",
	      (unsigned long long)in.abi_version);
	CHECK(in.page_size == PAGE, "page size %llu",
	      (unsigned long long)in.page_size);
	CHECK(in.max_pages == max_pages && in.pool_max_pages == 256 &&
		      in.oom_pages == 1024,
	      "limits %llu %llu %llu", (unsigned long long)in.max_pages,
	      (unsigned long long)in.pool_max_pages,
	      (unsigned long long)in.oom_pages);
	CHECK(in.reserved[0] == 0 && in.reserved[2] == 0, "reserved not zero");
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "load moved MemTotal");
	info("memtotal_kb=%lld max_pages=%llu", (long long)base_memtotal,
	     (unsigned long long)max_pages);
	return 0;
}

/* ---- accounting ---- */

struct mem_snap {
	int64_t total, avail, free, pcp;
};

/* All of meminfo in one read, then the per-CPU lists right after. */
static void mem_snap(struct mem_snap *s)
{
	static char buf[8192];

	gu_stat_refresh();
	gu_slurp("/proc/meminfo", buf, sizeof(buf));
	s->pcp = gu_pcp_pages();
	s->total = gu_meminfo_in(buf, "MemTotal");
	s->avail = gu_meminfo_in(buf, "MemAvailable");
	s->free = gu_meminfo_in(buf, "MemFree");
}

/*
 * MemFree does not count free pages on per-CPU lists, and those lists
 * refill and drain in batches; so the exact figure is MemFree plus the
 * per-CPU pages, which must move by exactly the pages taken. MemTotal has
 * no such noise and must always be exact.
 *
 * Returns 0 exact, 1 MemTotal wrong (a module bug), 2 free memory off.
 */
static int check_mem_delta(const struct mem_snap *a, const struct mem_snap *b,
			   int64_t pages, const char *what)
{
	int64_t dt = b->total - a->total, df = b->free - a->free;
	int64_t dfe = df + (b->pcp - a->pcp) * KB_PER_PAGE;
	int64_t da = b->avail - a->avail;
	int64_t want = pages * KB_PER_PAGE;

	info("%s pages=%lld d_memtotal_kb=%lld d_memavailable_kb=%lld "
	     "d_memfree_kb=%lld d_pcp_pages=%lld",
	     what, (long long)pages, (long long)dt, (long long)da,
	     (long long)df, (long long)(b->pcp - a->pcp));
	if (dt != want)
		return failf("%s: MemTotal moved %lld kB, want %lld", what,
			     (long long)dt, (long long)want);
	if (dfe != want) {
		failf("%s: MemFree+pcp moved %lld kB, want %lld", what,
		      (long long)dfe, (long long)want);
		return 2;
	}
	if (da != df) {
		failf("%s: MemAvailable moved %lld kB but MemFree %lld", what,
		      (long long)da, (long long)df);
		return 2;
	}
	return 0;
}

/* One offline (or online, @sign > 0) of @n pages, measured. */
static int measured_move(uint64_t n, int sign)
{
	unsigned long cmd = sign < 0 ? RAMEX_IOC_OFFLINE : RAMEX_IOC_ONLINE;
	struct mem_snap a, b;
	uint64_t done;
	int ret;

	/* Warm up: the first reads create proc inodes and dentries (slab). */
	mem_snap(&a);
	mem_snap(&a);
	ret = gu_pages(dev, cmd, n, &done);
	if (ret || done != n)
		return failf("move %llu: ret %d done %llu",
			     (unsigned long long)n, ret,
			     (unsigned long long)done);
	mem_snap(&b);
	return check_mem_delta(&a, &b, sign * (int64_t)n,
			       sign < 0 ? "offline" : "online");
}

/*
 * The module's effect is exact, but any other kernel allocation between
 * the two readings (a new kworker's stack is 4 pages) shows up in free
 * memory too. So each direction gets a few tries and must be exact to the
 * page in one of them; a module that is off by even one page never is.
 */
static int t_meminfo_delta(void)
{
	const uint64_t n = 16384; /* 64 MiB */
	int sign, try, ret = 0;
	uint64_t done;

	for (sign = -1; sign <= 1; sign += 2) {
		for (try = 0; try < 5; try++) {
			ret = measured_move(n, sign);
			if (ret != 2)
				break;
			/* Undo the noisy move and measure again. */
			if (gu_pages(dev, sign < 0 ? RAMEX_IOC_ONLINE :
						     RAMEX_IOC_OFFLINE,
				     n, &done) || done != n)
				return failf("undo failed");
		}
		if (ret)
			return 1;
	}
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "MemTotal not restored");
	return 0;
}

static int t_stats_sysfs(void)
{
	static const char *names[] = { "pages_offline", "pages_pool",
				       "pool_mappings", "total_offlined",
				       "total_onlined", "alloc_failures",
				       "oom_released", "oom_events" };
	struct ramex_stats st;
	__u64 *fields = &st.pages_offline;
	uint64_t done;
	size_t i;

	CHECK(gu_pages(dev, RAMEX_IOC_OFFLINE, 100, &done) == 0 && done == 100,
	      "offline 100");
	CHECK(gu_stats(dev, &st) == 0, "STATS: %s", strerror(errno));
	CHECK(st.abi_version == RAMEX_ABI_VERSION, "abi in stats");
	CHECK(st.pages_offline == 100, "pages_offline %llu",
	      (unsigned long long)st.pages_offline);
	CHECK(stats_balanced(&st), "counters do not add up");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(gu_sysfs(names[i]) == (int64_t)fields[i],
		      "sysfs %s=%lld, ioctl %llu", names[i],
		      (long long)gu_sysfs(names[i]),
		      (unsigned long long)fields[i]);
	CHECK(gu_pages(dev, RAMEX_IOC_ONLINE, 100, &done) == 0 && done == 100,
	      "online 100");
	CHECK(gu_sysfs("pages_offline") == 0, "sysfs pages_offline not 0");
	CHECK(access(RAMEX_SYSFS_DIR "/pages_offline", W_OK) != 0 ||
		      geteuid() == 0,
	      "sysfs writable");
	return 0;
}

/* ---- bad input ---- */

static int expect_errno(int fd, unsigned long cmd, void *arg, int want,
			const char *what)
{
	int ret = ioctl(fd, cmd, arg);

	CHECK(ret == -1 && errno == want, "%s: ret %d errno %s, want %s", what,
	      ret, strerror(errno), strerror(want));
	return 0;
}

static int t_bad_input(void)
{
	struct ramex_pages req;
	int64_t before = offline_now();
	void *ro;
	uint64_t done;

#define BAD(cmd, arg, err, what)                                 \
	do {                                                     \
		if (expect_errno(dev, cmd, arg, err, what))      \
			return 1;                                \
	} while (0)

	memset(&req, 0, sizeof(req));
	req.pages = UINT64_MAX;
	BAD(RAMEX_IOC_OFFLINE, &req, E2BIG, "offline UINT64_MAX");
	BAD(RAMEX_IOC_ONLINE, &req, E2BIG, "online UINT64_MAX");
	BAD(RAMEX_IOC_POOL_SET, &req, E2BIG, "pool UINT64_MAX");
	req.pages = max_pages + 1;
	BAD(RAMEX_IOC_OFFLINE, &req, E2BIG, "offline max_pages+1");
	req.pages = 1;
	req.flags = 1;
	BAD(RAMEX_IOC_OFFLINE, &req, EINVAL, "flags set");
	req.flags = 0;
	req.reserved = 1;
	BAD(RAMEX_IOC_ONLINE, &req, EINVAL, "reserved set");
	BAD(RAMEX_IOC_OFFLINE, NULL, EFAULT, "NULL pointer");
	BAD(RAMEX_IOC_OFFLINE, (void *)1, EFAULT, "pointer 1");
	BAD(RAMEX_IOC_OFFLINE, (void *)0xffff888000000000ULL, EFAULT,
	    "kernel pointer");
	BAD(RAMEX_IOC_STATS, NULL, EFAULT, "STATS to NULL");
	BAD(RAMEX_IOC_INFO, (void *)-4096L, EFAULT, "INFO to top page");
	BAD(_IO(RAMEX_IOC_MAGIC, 0x7f), &req, ENOTTY, "unknown number");
	BAD(_IOWR('x', 0x01, struct ramex_pages), &req, ENOTTY, "wrong magic");
	BAD(_IOWR(RAMEX_IOC_MAGIC, 0x01, __u32), &req, ENOTTY, "wrong size");
	BAD(_IO(RAMEX_IOC_MAGIC, 0x01), &req, ENOTTY, "no direction");

	CHECK(gu_pages(dev, RAMEX_IOC_OFFLINE, 0, &done) == 0 && done == 0,
	      "offline 0");
	CHECK(gu_pages(dev, RAMEX_IOC_ONLINE, 5, &done) == 0 && done == 0,
	      "online with nothing offline gave %llu",
	      (unsigned long long)done);

	/* Readable but not writable: the request is read, the answer is lost. */
	ro = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED, "mmap");
	((struct ramex_pages *)ro)->pages = 7;
	mprotect(ro, PAGE, PROT_READ);
	BAD(RAMEX_IOC_OFFLINE, ro, EFAULT, "read-only answer");
	munmap(ro, PAGE);
	CHECK(offline_now() == before + 7,
	      "pages moved before a failed copy-out were not kept: %lld",
	      (long long)offline_now());
	CHECK(gu_pages(dev, RAMEX_IOC_ONLINE, 7, &done) == 0 && done == 7,
	      "online 7");
	CHECK(offline_now() == before, "pages_offline moved");
	CHECK(memtotal_matches(), "MemTotal off");
	CHECK(lseek(dev, 0, SEEK_SET) == -1 && errno == ESPIPE, "lseek");
#undef BAD
	return 0;
}

/* ---- concurrency ---- */

static volatile int race_stop;
static volatile int race_errors;
static int shared_fd = -1;

static void *race_open_close(void *arg)
{
	struct ramex_stats st;
	struct pollfd pfd;
	int i, fd;

	(void)arg;
	for (i = 0; i < 1500; i++) {
		fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			race_errors++;
			continue;
		}
		if (gu_stats(fd, &st) || !stats_balanced(&st))
			race_errors++;
		pfd.fd = fd;
		pfd.events = POLLPRI;
		if (poll(&pfd, 1, 0) < 0)
			race_errors++;
		close(fd);
	}
	return NULL;
}

/* Uses shared_fd while another thread closes and reopens it. */
static void *race_use_shared(void *arg)
{
	uint64_t done;
	int ret;

	(void)arg;
	while (!race_stop) {
		ret = gu_pages(shared_fd, RAMEX_IOC_OFFLINE, 8, &done);
		if (ret == 0 && done == 8)
			gu_pages(shared_fd, RAMEX_IOC_ONLINE, 8, &done);
		else if (ret != -EBADF && ret != 0)
			race_errors++;
	}
	return NULL;
}

static int t_open_close_race(void)
{
	pthread_t t[5];
	int i, fd;
	uint64_t done;

	shared_fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
	CHECK(shared_fd >= 0, "open");
	race_stop = 0;
	race_errors = 0;
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, race_open_close, NULL);
	pthread_create(&t[4], NULL, race_use_shared, NULL);
	for (i = 0; i < 2000; i++) {
		fd = shared_fd;
		close(fd);
		shared_fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
	}
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	race_stop = 1;
	pthread_join(t[4], NULL);
	close(shared_fd);
	CHECK(race_errors == 0, "%d errors", race_errors);
	/* The user thread may have raced an ONLINE against a close. */
	gu_pages(dev, RAMEX_IOC_ONLINE, max_pages, &done);
	CHECK(offline_now() == 0, "pages left offline");
	CHECK(memtotal_matches(), "MemTotal off");
	return 0;
}

/* Each child cycles its own amount; globally the counts must add up. */
static int cycle_child(uint64_t k, int rounds)
{
	uint64_t done;
	int fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC), i;

	if (fd < 0)
		return 2;
	for (i = 0; i < rounds; i++) {
		if (gu_pages(fd, RAMEX_IOC_OFFLINE, k, &done) || done != k)
			return 3;
		if (gu_pages(fd, RAMEX_IOC_ONLINE, k, &done) || done != k)
			return 4;
	}
	close(fd);
	return 0;
}

static void *stats_reader(void *arg)
{
	struct ramex_stats st;

	(void)arg;
	while (!race_stop) {
		if (gu_stats(dev, &st) || !stats_balanced(&st) ||
		    st.pages_offline > max_pages)
			race_errors++;
	}
	return NULL;
}

static int t_concurrent_ioctls(void)
{
	pid_t pid[4];
	pthread_t reader;
	int i, status, bad = 0;

	race_stop = 0;
	race_errors = 0;
	pthread_create(&reader, NULL, stats_reader, NULL);
	for (i = 0; i < 4; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			_exit(cycle_child(64 * (uint64_t)(i + 1), 200));
	}
	for (i = 0; i < 4; i++) {
		if (waitpid(pid[i], &status, 0) != pid[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	}
	race_stop = 1;
	pthread_join(reader, NULL);
	CHECK(bad == 0, "%d children failed", bad);
	CHECK(race_errors == 0, "%d inconsistent stats snapshots", race_errors);
	CHECK(offline_now() == 0, "pages left offline");
	CHECK(memtotal_matches(), "MemTotal off");
	return 0;
}

static int t_cycles_1000(void)
{
	uint64_t done;
	int i;
	double t0 = gu_now();

	for (i = 0; i < 1000; i++) {
		CHECK(gu_pages(dev, RAMEX_IOC_OFFLINE, 256, &done) == 0 &&
			      done == 256,
		      "cycle %d offline got %llu", i, (unsigned long long)done);
		CHECK(gu_pages(dev, RAMEX_IOC_ONLINE, 256, &done) == 0 &&
			      done == 256,
		      "cycle %d online got %llu", i, (unsigned long long)done);
	}
	info("cycles=1000 pages_per_cycle=256 seconds=%.3f", gu_now() - t0);
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "MemTotal not restored");
	return 0;
}

/* ---- lending pool ---- */

static int pool_set(uint64_t n, uint64_t *done)
{
	return gu_pages(dev, RAMEX_IOC_POOL_SET, n, done);
}

static int all_zero(const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int pool_mappings(void)
{
	struct ramex_stats st;

	return gu_stats(dev, &st) ? -1 : (int)st.pool_mappings;
}

static int t_pool_mmap(void)
{
	const size_t len = 64 * PAGE;
	unsigned char *m;
	uint64_t done;
	pid_t pid;
	int status, i, ret;

	CHECK(pool_set(64, &done) == 0 && done == 64, "pool 64: %llu",
	      (unsigned long long)done);
	CHECK(gu_meminfo("MemTotal") == base_memtotal - 64 * KB_PER_PAGE,
	      "MemTotal did not drop by the pool");
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, dev, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(all_zero(m, len), "new pool not zeroed");
	for (i = 0; i < 64; i++)
		memset(m + (size_t)i * PAGE, i + 1, PAGE);
	CHECK(pool_mappings() == 1, "mappings %d", pool_mappings());
	ret = pool_set(0, &done);
	CHECK(ret == -EBUSY && done == 64, "resize while mapped: %d", ret);
	pid = fork();
	if (pid == 0) {
		m[5 * PAGE] = 0xee;
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status),
	      "child died");
	CHECK(m[5 * PAGE] == 0xee, "child's write not shared");
	CHECK(pool_mappings() == 1, "mappings after fork %d", pool_mappings());
	CHECK(mremap(m, len, len * 2, 0) == MAP_FAILED, "mremap grew");
	CHECK(munmap(m + 32 * PAGE, 32 * PAGE) == 0, "munmap half");
	CHECK(pool_mappings() == 1, "mappings after split %d",
	      pool_mappings());
	CHECK(munmap(m, 32 * PAGE) == 0 && pool_mappings() == 0,
	      "mappings after munmap %d", pool_mappings());

	m = mmap(NULL, 4 * PAGE, PROT_READ, MAP_SHARED, dev, 10 * PAGE);
	CHECK(m != MAP_FAILED, "mmap at offset: %s", strerror(errno));
	CHECK(m[0] == 11 && m[3 * PAGE + 4095] == 14, "pool data lost");
	munmap(m, 4 * PAGE);

	CHECK(mmap(NULL, 65 * PAGE, PROT_READ, MAP_SHARED, dev, 0) ==
			      MAP_FAILED && errno == EINVAL,
	      "mmap past the pool");
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, dev, 64 * PAGE) ==
			      MAP_FAILED && errno == EINVAL,
	      "mmap at the end");
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, dev, 0) == MAP_FAILED &&
		      errno == EINVAL,
	      "private mmap");
	CHECK(pool_set(257, &done) == -E2BIG, "pool past pool_max_pages");
	CHECK(pool_set(0, &done) == 0 && done == 0, "pool 0");
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "MemTotal not restored");
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, dev, 0) == MAP_FAILED,
	      "mmap of empty pool");
	CHECK(pool_set(64, &done) == 0 && done == 64, "pool 64 again");
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, dev, 0);
	CHECK(m != MAP_FAILED, "mmap again");
	CHECK(all_zero(m, len), "old pool data reached the new pool");
	munmap(m, len);
	CHECK(pool_set(0, &done) == 0 && done == 0, "pool 0");
	return 0;
}

/* ---- memory pressure ---- */

static int t_shortfall(void)
{
	struct ramex_stats a, b;
	uint64_t done;
	int ret;
	double t0 = gu_now();

	CHECK(gu_stats(dev, &a) == 0, "stats");
	ret = gu_pages(dev, RAMEX_IOC_OFFLINE, max_pages, &done);
	CHECK(gu_stats(dev, &b) == 0, "stats");
	info("shortfall wanted=%llu got=%llu seconds=%.3f oom_events=%llu",
	     (unsigned long long)max_pages, (unsigned long long)done,
	     gu_now() - t0, (unsigned long long)b.oom_events);
	CHECK(ret == 0, "offline all: %s", strerror(-ret));
	CHECK(done > 0 && done < max_pages, "got %llu of %llu",
	      (unsigned long long)done, (unsigned long long)max_pages);
	CHECK(b.alloc_failures > a.alloc_failures, "failure not counted");
	CHECK(stats_balanced(&b), "counters do not add up");
	CHECK(memtotal_matches(), "MemTotal off");
	return 0;
}

/*
 * Touches @mib MiB and exits 0; the OOM killer would end it first. One
 * MiB per mmap(): with most of RAM offline, MemTotal is small and the
 * overcommit heuristic refuses one mapping bigger than all of it.
 */
static void hog(int mib)
{
	size_t i;
	char *p;
	int m;

	set_oom_score_adj("1000");
	for (m = 0; m < mib; m++) {
		p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(2);
		for (i = 0; i < 1 << 20; i += PAGE)
			p[i] = 1;
	}
	_exit(0);
}

static int prio_pending(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLPRI };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLPRI);
}

struct poller {
	int fd;
	int revents; /* what a blocking poll() returned, -1 on error */
};

/*
 * Blocks in poll() with no timeout, as an agent would: only a wake-up from
 * the OOM give-back ends it (a timeout would hide a missing wake-up, since
 * poll() looks at the file once more before it gives up).
 */
static void *poll_blocking(void *arg)
{
	struct poller *pl = arg;
	struct pollfd pfd = { .fd = pl->fd, .events = POLLPRI };
	int n = poll(&pfd, 1, -1);

	pl->revents = n < 0 ? -1 : pfd.revents;
	return NULL;
}

/*
 * The wake-up came at the first OOM event, long before the hog ended; the
 * bound only keeps a missing wake-up from hanging the suite.
 */
static int poll_woken(pthread_t t)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	return pthread_timedjoin_np(t, NULL, &until) == 0;
}

/* @watcher is a second open file that must see POLLPRI. */
static int oom_give_back(int watcher)
{
	struct ramex_stats a, b;
	struct poller pl = { .fd = watcher };
	pthread_t t;
	uint64_t done;
	pid_t pid;
	int status;

	CHECK(gu_stats(watcher, &a) == 0, "stats");
	CHECK(a.pages_offline > 0, "nothing offline (t_shortfall failed?)");
	CHECK(!prio_pending(watcher), "POLLPRI before any OOM");
	set_oom_score_adj("-1000");
	pthread_create(&t, NULL, poll_blocking, &pl);
	pid = fork();
	if (pid == 0)
		hog(64);
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	if (!poll_woken(t)) {
		pthread_cancel(t);
		pthread_join(t, NULL);
		return failf("blocked poll() never woke after the OOM give-back");
	}
	CHECK(pl.revents > 0 && (pl.revents & POLLPRI),
	      "blocked poll() was not woken with POLLPRI (revents %d)",
	      pl.revents);
	CHECK(gu_stats(dev, &b) == 0, "stats");
	info("oom hog_mib=64 oom_events=%llu oom_released=%llu",
	     (unsigned long long)(b.oom_events - a.oom_events),
	     (unsigned long long)(b.oom_released - a.oom_released));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "hog did not finish (exit %d, signal %d)",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
	      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	CHECK(b.oom_events > a.oom_events && b.oom_released > a.oom_released,
	      "no OOM give-back counted");
	CHECK(b.pages_offline ==
		      a.pages_offline - (b.oom_released - a.oom_released),
	      "pages_offline does not match the give-back");
	CHECK(stats_balanced(&b), "counters do not add up");
	CHECK(prio_pending(watcher), "no POLLPRI after OOM give-back");
	CHECK(gu_stats(watcher, &b) == 0 && !prio_pending(watcher),
	      "POLLPRI not cleared by STATS");
	CHECK(memtotal_matches(), "MemTotal off");
	CHECK(gu_pages(dev, RAMEX_IOC_ONLINE, max_pages, &done) == 0,
	      "online all");
	CHECK(offline_now() == 0, "pages left offline");
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "MemTotal not restored");
	return 0;
}

static int t_oom_give_back(void)
{
	int watcher = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC), ret;

	CHECK(watcher >= 0, "open");
	ret = oom_give_back(watcher);
	close(watcher);
	return ret;
}

/* ---- unloading ---- */

static int t_rmmod_restores(void)
{
	uint64_t done;
	void *m;
	int ret;

	CHECK(gu_pages(dev, RAMEX_IOC_OFFLINE, 1000, &done) == 0 &&
		      done == 1000,
	      "offline 1000");
	CHECK(pool_set(16, &done) == 0 && done == 16, "pool 16");
	CHECK(gu_meminfo("MemTotal") == base_memtotal - 1016 * KB_PER_PAGE,
	      "MemTotal before rmmod");
	ret = gu_unload();
	CHECK(ret == -EWOULDBLOCK || ret == -EBUSY,
	      "unloaded while open: %d", ret);
	m = mmap(NULL, 16 * PAGE, PROT_READ, MAP_SHARED, dev, 0);
	CHECK(m != MAP_FAILED, "mmap pool");
	close(dev);
	dev = -1;
	/* A mapping outlives its file and must still pin the module. */
	ret = gu_unload();
	CHECK(ret == -EWOULDBLOCK || ret == -EBUSY,
	      "unloaded while mapped: %d", ret);
	munmap(m, 16 * PAGE);
	ret = gu_unload();
	CHECK(ret == 0, "delete_module: %s", strerror(-ret));
	CHECK(gu_meminfo("MemTotal") == base_memtotal,
	      "MemTotal %lld after rmmod, %lld before load",
	      (long long)gu_meminfo("MemTotal"), (long long)base_memtotal);
	CHECK(access(RAMEX_SYSFS_DIR, F_OK) != 0, "sysfs dir left behind");
	CHECK(access(RAMEX_DEVICE, F_OK) != 0, "device left behind");
	return 0;
}

struct limit_arg {
	uint64_t done;
	int ret;
};

static void *limit_worker(void *arg)
{
	struct limit_arg *la = arg;
	int fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);

	la->ret = gu_pages(fd, RAMEX_IOC_OFFLINE, 2048, &la->done);
	close(fd);
	return NULL;
}

/* A fresh load with a small limit: racing callers never pass it. */
static int t_limit_concurrent(void)
{
	struct limit_arg la[4];
	pthread_t t[4];
	uint64_t sum = 0, done;
	int i, ret;

	ret = gu_load(ko_path, "max_pages=4096");
	CHECK(ret == 0, "reload: %s", strerror(-ret));
	dev = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
	CHECK(dev >= 0, "open");
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, limit_worker, &la[i]);
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(la[i].ret == 0 || la[i].ret == -ENOSPC, "worker %d: %d",
		      i, la[i].ret);
		sum += la[i].done;
	}
	CHECK(sum == 4096, "racing callers got %llu pages, limit 4096",
	      (unsigned long long)sum);
	CHECK(offline_now() == 4096, "pages_offline %lld",
	      (long long)offline_now());
	CHECK(gu_pages(dev, RAMEX_IOC_OFFLINE, 1, &done) == -ENOSPC,
	      "offline past the limit");
	CHECK(gu_meminfo("MemTotal") == base_memtotal - 4096 * KB_PER_PAGE,
	      "MemTotal off");
	close(dev);
	dev = -1;
	CHECK(gu_unload() == 0, "unload");
	CHECK(gu_meminfo("MemTotal") == base_memtotal, "MemTotal not restored");
	return 0;
}

/* The kernel log shows no oops, warning or bad page from any test. */
static int t_kernel_healthy(void)
{
	static const char *bad[] = { "BUG:", "WARNING:", "Oops", "Bad page",
				     "general protection", "Call Trace",
				     "Killed process" };
	static char buf[1 << 20];
	int n = klogctl(3, buf, sizeof(buf) - 1);
	size_t i;

	CHECK(n >= 0, "klogctl: %s", strerror(errno));
	buf[n] = 0;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!strstr(buf, bad[i]), "kernel log has \"%s\"", bad[i]);
	return 0;
}

/*
 * A failed test may leave pages offline or the pool full; give them back
 * so that one failure does not fail every later test.
 */
static void reset_after_failure(void)
{
	uint64_t done;

	if (dev < 0)
		return;
	gu_pages(dev, RAMEX_IOC_ONLINE, max_pages, &done);
	pool_set(0, &done);
}

struct test {
	const char *name;
	int (*fn)(void);
};

static const struct test tests[] = {
	{ "bad_params", t_bad_params },
	{ "load", t_load },
	{ "meminfo_delta", t_meminfo_delta },
	{ "stats_sysfs", t_stats_sysfs },
	{ "bad_input", t_bad_input },
	{ "open_close_race", t_open_close_race },
	{ "concurrent_ioctls", t_concurrent_ioctls },
	{ "cycles_1000", t_cycles_1000 },
	{ "pool_mmap", t_pool_mmap },
	{ "shortfall", t_shortfall },
	{ "oom_give_back", t_oom_give_back },
	{ "rmmod_restores", t_rmmod_restores },
	{ "limit_concurrent", t_limit_concurrent },
	{ "kernel_healthy", t_kernel_healthy },
};

int main(int argc, char **argv)
{
	size_t i;
	int failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: ramex_test PATH/TO/ramex.ko\n");
		return 2;
	}
	ko_path = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		why[0] = 0;
		if (tests[i].fn()) {
			printf("RAMEX-TEST %s FAIL %s\n", tests[i].name, why);
			failed++;
			reset_after_failure();
		} else {
			printf("RAMEX-TEST %s PASS\n", tests[i].name);
		}
		fflush(stdout);
		/* Later tests need the module the load test brings. */
		if (failed && i == 1)
			break;
	}
	return failed ? 1 : 0;
}
