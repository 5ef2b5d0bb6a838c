/*
 * wss_workload.c — guest workloads with a known working set, for the
 * working-set bench (bench/60-wss.sh) and test (tests/wss/suite.sh).
 *
 *   wss_workload phases TOTAL_MIB HOT_MIB SECONDS [HOT_MIB SECONDS ...]
 *     allocates TOTAL_MIB of anonymous memory, touches every page once,
 *     then for each phase touches the first HOT_MIB of it once a second
 *     (one write a 4 KiB page): the phase's Denning working set is HOT_MIB
 *     once the window has passed since the phase began.
 *   wss_workload knee HOT_MIB PASSES
 *     writes HOT_MIB PASSES times in a cycle and prints the seconds taken:
 *     its runtime against memory has a knee at HOT_MIB (below it every pass
 *     refaults what LRU evicted just before).
 *
 * Prints "WSS-PHASE t=SECONDS hot=MIB" (t: CLOCK_BOOTTIME, as /proc/uptime)
 * at every phase change, "WSS-TRUTH t=SECONDS pages=N" every 2 s when
 * WSS_TRUTH_WINDOW_S is set (the pages it wrote within that window: a
 * workload slowed down by refaults touches fewer than its hot set), and
 * "WSS-KNEE hot=MIB seconds=S" at the end of the knee.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_BOOTTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char *alloc(long bytes)
{
	char *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

/* The Denning truth, as the workload itself knows it: when each page was
 * last written (a clock read every 64 pages), and every 2 s how many were
 * written within the window (WSS_TRUTH_WINDOW_S; unset: not reported). */
static float *stamp;
static long npages;
static double window, next_report;

static void truth_init(long pages, double w)
{
	window = w;
	if (w <= 0)
		return;
	npages = pages;
	stamp = calloc((size_t)pages, sizeof *stamp);
	if (!stamp) {
		perror("calloc");
		exit(1);
	}
	for (long i = 0; i < pages; i++)
		stamp[i] = -1e9f;
}

static void truth_report(void)
{
	double t = now();
	long n = 0;

	if (window <= 0 || t < next_report)
		return;
	next_report = t + 2;
	for (long i = 0; i < npages; i++)
		n += stamp[i] >= (float)(t - window);
	printf("WSS-TRUTH t=%.1f pages=%ld\n", t, n);
	fflush(stdout);
}

static void touch(char *p, long bytes)
{
	float t = (float)now();
	for (long i = 0, k = 0; i < bytes; i += PAGE, k++) {
		p[i]++;
		if (window > 0) {
			if (!(k & 63)) {
				t = (float)now();
				truth_report();
			}
			stamp[k] = t;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "phases") && argc % 2 == 1) {
		long total = atol(argv[2]) << 20;
		char *p = alloc(total);
		const char *w = getenv("WSS_TRUTH_WINDOW_S");
		truth_init(total / PAGE, w ? atof(w) : 0);
		printf("WSS-PHASE t=%.1f hot=%ld\n", now(), total >> 20);
		fflush(stdout);
		touch(p, total);
		for (int a = 3; a + 1 < argc; a += 2) {
			long hot = atol(argv[a]) << 20;
			if (hot > total)
				hot = total;
			double end = now() + atof(argv[a + 1]);
			printf("WSS-PHASE t=%.1f hot=%ld\n", now(), hot >> 20);
			fflush(stdout);
			while (now() < end) {
				double t0 = now(), d;
				touch(p, hot);
				d = now() - t0;
				if (d < 1)
					usleep((useconds_t)((1 - d) * 1e6));
				truth_report();
			}
		}
		printf("WSS-PHASE t=%.1f end\n", now());
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "knee")) {
		long hot = atol(argv[2]) << 20;
		int passes = atoi(argv[3]);
		char *p = alloc(hot);
		double t0 = now();
		for (int k = 0; k < passes; k++)
			for (long i = 0; i < hot; i += PAGE)
				p[i]++;
		printf("WSS-KNEE hot=%ld seconds=%.2f\n", hot >> 20,
		       now() - t0);
		return 0;
	}
	fprintf(stderr, "usage: wss_workload phases TOTAL HOT S [HOT S ...] | "
	                "knee HOT PASSES\n");
	return 2;
}
