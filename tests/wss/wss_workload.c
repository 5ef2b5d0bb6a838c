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
 * at every phase change and "WSS-KNEE hot=MIB seconds=S" at the end.
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

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "phases") && argc % 2 == 1) {
		long total = atol(argv[2]) << 20;
		char *p = alloc(total);
		printf("WSS-PHASE t=%.1f hot=%ld\n", now(), total >> 20);
		fflush(stdout);
		for (long i = 0; i < total; i += PAGE)
			p[i] = 1;
		for (int a = 3; a + 1 < argc; a += 2) {
			long hot = atol(argv[a]) << 20;
			if (hot > total)
				hot = total;
			double end = now() + atof(argv[a + 1]);
			printf("WSS-PHASE t=%.1f hot=%ld\n", now(), hot >> 20);
			fflush(stdout);
			while (now() < end) {
				double t0 = now(), d;
				for (long i = 0; i < hot; i += PAGE)
					p[i]++;
				d = now() - t0;
				if (d < 1)
					usleep((useconds_t)((1 - d) * 1e6));
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
