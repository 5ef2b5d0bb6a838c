/*
 * test_sample.c — the memory-file parsers on recorded fixtures
 * (tests/unit/fixtures/agent/: a real machine's /proc files, a cgroup's
 * memory.pressure and memory.stat, legacy and broken variants), and the
 * idle-page sampler on a fake bitmap file, and probing through memory.high
 * on a fake cgroup directory.
 */
#include "node-agent/sample.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIX "tests/unit/fixtures/agent"

static char buf[16384], err[512];

static const char *fixture(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, FIX "/%s", name);
	ck_assert_msg(
	    sample_read_file(path, buf, sizeof buf, err, sizeof err) == 0, "%s",
	    err);
	return buf;
}

START_TEST(psi_recorded)
{
	struct sample_psi p;

	ck_assert_int_eq(sample_parse_psi(fixture("cgroup/memory.pressure"), &p,
	                                  err, sizeof err),
	                 0);
	ck_assert_int_eq(p.some.avg10, 1237);
	ck_assert_int_eq(p.some.avg60, 405);
	ck_assert_int_eq(p.some.avg300, 91);
	ck_assert_int_eq(p.some.total_us, 83423117);
	ck_assert(p.has_full);
	ck_assert_int_eq(p.full.avg10, 310);
	ck_assert_int_eq(p.full.total_us, 20981544);

	ck_assert_int_eq(
	    sample_parse_psi(fixture("system/proc/pressure/memory"), &p, err,
	                     sizeof err),
	    0);
	ck_assert(p.has_full);

	ck_assert_int_eq(
	    sample_parse_psi(fixture("psi-no-full.txt"), &p, err, sizeof err),
	    0);
	ck_assert(!p.has_full);
	ck_assert_int_eq(p.some.total_us, 123456);
	ck_assert_int_eq(p.some.avg10, 50);
}
END_TEST

START_TEST(psi_broken)
{
	struct sample_psi p;
	static const char *bad[] = {
	    "",
	    "some avg10=0.00 avg60=0.00 avg300=0.00\n",
	    "some avg10=0.0 avg60=0.00 avg300=0.00 total=1\n",
	    "some avg10=101.00 avg60=0.00 avg300=0.00 total=1\n",
	    "some avg10=1.00 avg60=0.00 avg300=0.00 "
	    "total=99999999999999999999\n",
	    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	    "other avg10=0.00\n",
	};

	ck_assert_int_eq(
	    sample_parse_psi(fixture("psi-bad.txt"), &p, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot parse line some"), "%s", err);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(sample_parse_psi(bad[i], &p, err, sizeof err) ==
		                  -1,
		              "accepted %s", bad[i]);
	sample_parse_psi("", &p, err, sizeof err);
	ck_assert(strstr(err, "PSI"));
}
END_TEST

START_TEST(vmstat_recorded)
{
	struct sample_counters c;

	ck_assert_int_eq(sample_parse_vmstat(fixture("system/proc/vmstat"), &c,
	                                     err, sizeof err),
	                 0);
	ck_assert_int_eq(c.refault_anon, 0);
	ck_assert_int_eq(c.refault_file, 567077);
	ck_assert_int_eq(c.pgmajfault, 4058);
	ck_assert_int_eq(c.pswpin, 0);

	ck_assert_int_eq(sample_parse_vmstat(fixture("vmstat-legacy.txt"), &c,
	                                     err, sizeof err),
	                 0);
	ck_assert_int_eq(c.refault_file, 4242);
	ck_assert_int_eq(c.pswpin, 12);

	ck_assert_int_eq(
	    sample_parse_vmstat("pgmajfault 1\n", &c, err, sizeof err), -1);
	ck_assert(strstr(err, "workingset_refault"));
	ck_assert_int_eq(
	    sample_parse_vmstat("workingset_refault x\n", &c, err, sizeof err),
	    -1);
}
END_TEST

START_TEST(meminfo_recorded)
{
	struct sample_mem m;

	ck_assert_int_eq(sample_parse_meminfo(fixture("system/proc/meminfo"),
	                                      &m, err, sizeof err),
	                 0);
	ck_assert_int_eq(m.total, 24683664 / 4);
	ck_assert_int_eq(m.available, 23718096 / 4);
	ck_assert_int_eq(m.active_anon, 79684 / 4);
	ck_assert_int_eq(m.inactive_anon, 435200 / 4);
	ck_assert_int_eq(m.active_file, 374412 / 4);
	ck_assert_int_eq(m.inactive_file, 568480 / 4);

	/* Pages out of memory: swap in use less what is still cached. */
	ck_assert_int_eq(
	    sample_parse_meminfo(
	        "MemTotal: 1000 kB\nActive(anon): 0 kB\nInactive(anon): 0 kB\n"
	        "Active(file): 0 kB\nInactive(file): 0 kB\nUnevictable: 0 kB\n"
	        "SwapCached: 400 kB\nSwapTotal: 8000 kB\nSwapFree: 6000 kB\n",
	        &m, err, sizeof err),
	    0);
	ck_assert_int_eq(m.swap_total - m.swap_free - m.swap_cached, 400);

	ck_assert_int_eq(sample_parse_meminfo(fixture("meminfo-missing.txt"),
	                                      &m, err, sizeof err),
	                 -1);
	ck_assert_str_eq(err, "meminfo has no Inactive(anon) line");
}
END_TEST

START_TEST(memstat_recorded)
{
	struct sample_mem m;
	struct sample_counters c;

	ck_assert_int_eq(sample_parse_memstat(fixture("cgroup/memory.stat"), &m,
	                                      &c, err, sizeof err),
	                 0);
	ck_assert_int_eq(m.active_anon, 805306368 / 4096);
	ck_assert_int_eq(m.inactive_anon, 268435456 / 4096);
	ck_assert_int_eq(m.active_file, 134217728 / 4096);
	ck_assert_int_eq(m.inactive_file, 402653184 / 4096);
	ck_assert_int_eq(m.unevictable, 1024);
	ck_assert_int_eq(c.refault_anon, 1200);
	ck_assert_int_eq(c.refault_file, 98765);
	ck_assert_int_eq(c.pgmajfault, 4567);
	ck_assert_int_eq(
	    sample_parse_memstat("active_anon 4096\n", &m, &c, err, sizeof err),
	    -1);
	ck_assert_str_eq(err, "memory.stat has no inactive_anon line");
}
END_TEST

START_TEST(take_machine_and_cgroup)
{
	struct wsest_sample s;
	struct sample_mem m;
	struct sample_source sys = {.root = FIX "/system"};
	struct sample_source cg = {
	    .root = FIX "/", .cgroup = "cgroup", .thp_pages = 512};

	ck_assert_msg(sample_take(&sys, 5, &s, &m, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(s.t, 5);
	ck_assert_int_eq(s.refaults, 567077);
	ck_assert_int_eq(s.active, 79684 / 4 + 374412 / 4);
	ck_assert_int_eq(s.inactive, 435200 / 4 + 568480 / 4);
	ck_assert_int_eq(m.total, 24683664 / 4);
	ck_assert(!s.has_idle);
	ck_assert_int_eq(s.swapped, 0); /* the machine has no swap */

	ck_assert_msg(sample_take(&cg, 6, &s, NULL, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(s.psi_some_us, 83423117);
	ck_assert_int_eq(s.psi_full_us, 20981544);
	ck_assert_int_eq(s.refaults, 1200 + 98765);
	ck_assert_int_eq(s.majfaults, 4567);
	ck_assert_int_eq(s.unevictable, 1024);
	/* 7 huge pages collapsed, 512 pages each */
	ck_assert_int_eq(s.thp_collapsed, 7 * 512);
	/* memory.swap.current 40 MiB, of which 4 MiB still cached */
	ck_assert_int_eq(s.swapped, 10240 - 1024);

	struct sample_source none = {.root = FIX "/nope"};
	ck_assert_int_eq(sample_take(&none, 7, &s, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "could not open"), "%s", err);
}
END_TEST

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static const char *get(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	ck_assert_msg(
	    sample_read_file(path, buf, sizeof buf, err, sizeof err) == 0, "%s",
	    err);
	return buf;
}

/* Plain files stand in for a cgroup: no kernel reclaims, so nothing is
 * taken, but memory.high must read what it read before, the marker must
 * be gone, and a marker an agent killed mid-probe left is set back. */
START_TEST(probe_high_sets_back)
{
	char dir[] = "/tmp/ramex-probe-XXXXXX", marker[600];
	rx_pages taken = -1;

	ck_assert(mkdtemp(dir));
	snprintf(marker, sizeof marker, "%s/agent.spool.probe-high", dir);
	put(dir, "memory.current", "104857600\n");
	put(dir, "memory.high", "max\n");
	ck_assert_msg(sample_probe_high(dir, 256, marker, &taken, err,
	                                sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(taken, 0);
	ck_assert_str_eq(get(dir, "memory.high"), "max\n");
	ck_assert_int_eq(access(marker, F_OK), -1);
	put(dir, "memory.high", "209715200\n");
	ck_assert_int_eq(sample_probe_high(dir, 256, marker, &taken, err,
	                                   sizeof err),
	                 0);
	ck_assert_str_eq(get(dir, "memory.high"), "209715200\n");

	/* killed between the writes: memory.high lowered, the marker kept */
	put(dir, "memory.high", "94371840\n");
	put(dir, "agent.spool.probe-high", "max\n");
	ck_assert_int_eq(sample_probe_high_restore(dir, marker, err, sizeof err),
	                 1);
	ck_assert_str_eq(get(dir, "memory.high"), "max\n");
	ck_assert_int_eq(access(marker, F_OK), -1);
	ck_assert_int_eq(sample_probe_high_restore(dir, marker, err, sizeof err),
	                 0);
	put(dir, "agent.spool.probe-high", "lots\n");
	ck_assert_int_eq(sample_probe_high_restore(dir, marker, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "by hand"), "%s", err);
	unlink(marker);

	/* no memory.high (the cgroup2 root): an error, nothing written */
	char p2[600];
	snprintf(p2, sizeof p2, "%s/memory.high", dir);
	unlink(p2);
	ck_assert_int_eq(sample_probe_high(dir, 256, marker, &taken, err,
	                                   sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "memory.high"), "%s", err);
	ck_assert_int_eq(access(marker, F_OK), -1);
	snprintf(p2, sizeof p2, "%s/memory.current", dir);
	unlink(p2);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The cgroup2 root (the whole machine's probes) has memory.reclaim and
 * memory.stat but no memory.current: what a probe took is measured on the
 * LRU lists memory.stat counts. */
START_TEST(reclaim_at_the_root)
{
	char dir[] = "/tmp/ramex-root-XXXXXX", p[600];
	rx_pages taken = -1;

	ck_assert(mkdtemp(dir));
	put(dir, "memory.stat", fixture("cgroup/memory.stat"));
	put(dir, "memory.reclaim", "");
	ck_assert_msg(sample_reclaim(dir, 256, &taken, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(taken, 0);
	ck_assert_str_eq(get(dir, "memory.reclaim"), "1048576\n");
	snprintf(p, sizeof p, "%s/memory.stat", dir);
	unlink(p);
	ck_assert_int_eq(sample_reclaim(dir, 256, &taken, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "memory.stat"), "%s", err);
	snprintf(p, sizeof p, "%s/memory.reclaim", dir);
	unlink(p);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* hpage_pmd_size (bytes) to pages of a huge page; a kernel without THP has
 * no such file, and nonsense counts as none. */
START_TEST(thp_pages)
{
	char dir[] = "/tmp/ramex-thp-XXXXXX", p[600];

	ck_assert(mkdtemp(dir));
	snprintf(p, sizeof p, "%s/hpage_pmd_size", dir);
	put(dir, "hpage_pmd_size", "2097152\n");
	ck_assert_int_eq(sample_thp_pages(p), 512);
	put(dir, "hpage_pmd_size", "x\n");
	ck_assert_int_eq(sample_thp_pages(p), 0);
	put(dir, "hpage_pmd_size", "100\n");
	ck_assert_int_eq(sample_thp_pages(p), 0);
	unlink(p);
	ck_assert_int_eq(sample_thp_pages(p), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A plain file stands in for page_idle/bitmap: the sampler sets a page's
 * bit, the test "touches" a page by clearing it, as the kernel does. */
static void touch(int fd, uint64_t pfn)
{
	uint64_t zero = 0;
	ck_assert_int_eq(pwrite(fd, &zero, 8, (off_t)(pfn / 64 * 8)), 8);
}

START_TEST(idle_ages)
{
	char path[256];
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof path, "%s/test_sample_bitmap.XXXXXX", base);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	static char zeros[64 * 64 / 8 * 64]; /* 4096 frames × 8 */
	ck_assert_int_eq(write(fd, zeros, 4096 / 64 * 8), 4096 / 64 * 8);

	/* 4096 frames, every 64th sampled: 64 samples, one word each. */
	struct sample_idle *si =
	    sample_idle_new(path, 0, 4096, 64, err, sizeof err);
	ck_assert_msg(si, "%s", err);
	struct wsest_idle id;

	ck_assert_int_eq(sample_idle_scan(si, &id, err, sizeof err), 0);
	ck_assert_int_eq(id.sampled, 0); /* first scan only marks */

	for (uint64_t i = 0; i < 16; i++)
		touch(fd, i * 64);
	ck_assert_int_eq(sample_idle_scan(si, &id, err, sizeof err), 0);
	ck_assert_int_eq(id.sampled, 64);
	ck_assert_int_eq(id.population, 4096);
	ck_assert_int_eq(id.age[0], 16);
	ck_assert_int_eq(id.reuse[0], 16);
	ck_assert_int_eq(id.age[1], 48);

	ck_assert_int_eq(sample_idle_scan(si, &id, err, sizeof err), 0);
	ck_assert_int_eq(id.age[1], 16);
	ck_assert_int_eq(id.age[2], 48);
	ck_assert_int_eq(id.reuse[0] + id.reuse[1] + id.reuse[2], 0);

	for (uint64_t i = 56; i < 64; i++)
		touch(fd, i * 64); /* 8 pages idle for 2 scans */
	ck_assert_int_eq(sample_idle_scan(si, &id, err, sizeof err), 0);
	ck_assert_int_eq(id.reuse[2], 8);
	ck_assert_int_eq(id.age[0], 8);
	ck_assert_int_eq(id.age[2], 16);
	ck_assert_int_eq(id.age[3], 40);

	for (int k = 0; k < 30; k++)
		sample_idle_scan(si, &id, err, sizeof err);
	ck_assert_int_eq(id.age[WSEST_AGE_BUCKETS - 1], 64); /* saturates */
	sample_idle_free(si);

	ck_assert_ptr_null(sample_idle_new(path, 0, 4096, 8, err, sizeof err));
	ck_assert_ptr_null(sample_idle_new("/nonexistent/bitmap", 0, 4096, 64,
	                                   err, sizeof err));
	ck_assert(strstr(err, "CONFIG_IDLE_PAGE_TRACKING"));
	close(fd);
	unlink(path);
}
END_TEST

/* Every prefix of every fixture either parses or fails with a message;
 * none crashes (the sanitizers watch). */
START_TEST(truncated_inputs)
{
	static const char *files[] = {
	    "system/proc/vmstat", "system/proc/meminfo", "cgroup/memory.stat",
	    "cgroup/memory.pressure"};
	static char copy[16384];
	for (size_t f = 0; f < 4; f++) {
		fixture(files[f]);
		size_t n = strlen(buf);
		for (size_t len = 0; len <= n; len++) {
			struct sample_psi p;
			struct sample_counters c;
			struct sample_mem m;
			memcpy(copy, buf, len);
			copy[len] = 0;
			err[0] = 0;
			if (sample_parse_psi(copy, &p, err, sizeof err) < 0)
				ck_assert(err[0]);
			err[0] = 0;
			if (sample_parse_vmstat(copy, &c, err, sizeof err) < 0)
				ck_assert(err[0]);
			err[0] = 0;
			if (sample_parse_meminfo(copy, &m, err, sizeof err) < 0)
				ck_assert(err[0]);
			err[0] = 0;
			if (sample_parse_memstat(copy, &m, &c, err,
			                         sizeof err) < 0)
				ck_assert(err[0]);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sample");
	TCase *tc = tcase_create("sample");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, psi_recorded);
	tcase_add_test(tc, psi_broken);
	tcase_add_test(tc, vmstat_recorded);
	tcase_add_test(tc, meminfo_recorded);
	tcase_add_test(tc, memstat_recorded);
	tcase_add_test(tc, take_machine_and_cgroup);
	tcase_add_test(tc, idle_ages);
	tcase_add_test(tc, truncated_inputs);
	tcase_add_test(tc, probe_high_sets_back);
	tcase_add_test(tc, reclaim_at_the_root);
	tcase_add_test(tc, thp_pages);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
