/*
 * lend_bench.c — ramex-lend-bench, 4 KiB page latency and throughput.
 *
 * One program for every path bench/50-lending.sh compares:
 *   --lender HOST:PORT --contract ID --secret-file F [--tls-ca F]
 *                          the lend protocol itself (TCP or TLS)
 *   --nbd-unix PATH        NBD through ramex-lend-nbd (what the kernel sees)
 *   --blockdev PATH        pread/pwrite with O_DIRECT on a device or file
 *                          (the local-swap baseline)
 * For each it writes then reads --ops random 4 KiB pages of the first
 * --pages pages, one at a time, and prints one line per direction:
 *   PATH_NAME write p50_us=.. p99_us=.. ops_s=.. mib_s=..
 * Measures only; never judges.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/hostport.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_nbd.h"

enum mode { M_LEND, M_NBD, M_DEV };

struct target {
	enum mode mode;
	struct lend_client c;
	int fd;
	uint64_t handle;
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int op(struct target *t, int write, uint64_t page, uint8_t *buf)
{
	uint32_t e = 0;
	switch (t->mode) {
	case M_LEND:
		return write ? lend_client_write(&t->c, page, 1, buf)
		             : lend_client_read(&t->c, page, 1, buf);
	case M_NBD:
		if (lend_nbd_client_cmd(
		        t->fd, write ? LEND_NBD_CMD_WRITE : LEND_NBD_CMD_READ,
		        ++t->handle, page * 4096, 4096, buf, buf, &e) < 0)
			return -1;
		return e ? -1 : 0;
	case M_DEV: {
		ssize_t n = write ? pwrite(t->fd, buf, 4096, (off_t)page * 4096)
		                  : pread(t->fd, buf, 4096, (off_t)page * 4096);
		return n == 4096 ? 0 : -1;
	}
	}
	return -1;
}

static int run(struct target *t, const char *name, int write, int64_t pages,
               int64_t ops, uint8_t *buf)
{
	int64_t *lat = malloc((size_t)ops * sizeof *lat);
	uint64_t x = 88172645463325252u;
	if (!lat)
		return -1;
	int64_t t0 = now_ns();
	for (int64_t i = 0; i < ops; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memset(buf, (int)(i & 0xff), 64);
		int64_t s = now_ns();
		if (op(t, write, x % (uint64_t)pages, buf) < 0) {
			fprintf(stderr,
			        "bench: %s %s failed at op %" PRId64 "\n", name,
			        write ? "write" : "read", i);
			free(lat);
			return -1;
		}
		lat[i] = now_ns() - s;
	}
	int64_t total = now_ns() - t0;
	qsort(lat, (size_t)ops, sizeof *lat, cmp64);
	double secs = (double)total / 1e9;
	printf("%-12s %-5s p50_us=%.1f p99_us=%.1f ops_s=%.0f mib_s=%.1f\n",
	       name, write ? "write" : "read", (double)lat[ops / 2] / 1e3,
	       (double)lat[ops * 99 / 100] / 1e3, (double)ops / secs,
	       (double)ops * 4096 / secs / 1048576);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	const char *lender = NULL, *secret_file = NULL, *ca = NULL;
	const char *nbd_unix = NULL, *dev = NULL, *name = "bench";
	int64_t pages = 1024, ops = 2000, contract = 0;
	char host[256], err[256];
	int port;
	struct target t = {.fd = -1};
	SSL_CTX *tls = NULL;
	uint8_t secret[LEND_SECRET_LEN];

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--lender"))
			lender = v;
		else if (!strcmp(a, "--contract"))
			lend_args_int(v, 1, INT64_MAX, &contract);
		else if (!strcmp(a, "--secret-file"))
			secret_file = v;
		else if (!strcmp(a, "--tls-ca"))
			ca = v;
		else if (!strcmp(a, "--nbd-unix"))
			nbd_unix = v;
		else if (!strcmp(a, "--blockdev"))
			dev = v;
		else if (!strcmp(a, "--pages"))
			lend_args_int(v, 1, LEND_MAX_PAGES, &pages);
		else if (!strcmp(a, "--ops"))
			lend_args_int(v, 100, 100000000, &ops);
		else if (!strcmp(a, "--name"))
			name = v;
		else {
			fprintf(stderr, "bench: unknown option %s\n", a);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	uint8_t *buf = aligned_alloc(4096, 4096);
	if (!buf)
		return 1;
	if (lender) {
		t.mode = M_LEND;
		if (hostport_split(lender, host, sizeof host, &port) < 0 ||
		    !secret_file ||
		    lend_args_secret(secret_file, secret, err, sizeof err) <
		        0) {
			fprintf(stderr, "bench: --lender HOST:PORT and a valid "
			                "--secret-file are needed\n");
			return 2;
		}
		if (ca && !(tls = lend_tls_client_ctx(ca, err, sizeof err))) {
			fprintf(stderr, "bench: %s\n", err);
			return 1;
		}
		if (lend_client_connect(&t.c, host, port, tls,
		                        (uint64_t)contract, secret, 5000) < 0) {
			fprintf(stderr, "bench: %s\n", t.c.err);
			return 1;
		}
		if (pages > t.c.pages)
			pages = t.c.pages;
	} else if (nbd_unix) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		uint64_t size;
		uint16_t fl;
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", nbd_unix);
		t.mode = M_NBD;
		t.fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (t.fd < 0 || connect(t.fd, (void *)&sa, sizeof sa) < 0 ||
		    lend_nbd_client_handshake(t.fd, "", &size, &fl, err,
		                              sizeof err) < 0) {
			fprintf(stderr,
			        "bench: could not reach the bridge at "
			        "%s\n",
			        nbd_unix);
			return 1;
		}
		if ((uint64_t)pages > size / 4096)
			pages = (int64_t)(size / 4096);
	} else if (dev) {
		t.mode = M_DEV;
		t.fd = open(dev, O_RDWR | O_DIRECT | O_CREAT, 0600);
		if (t.fd < 0) {
			perror("bench: open");
			return 1;
		}
	} else {
		fprintf(stderr, "bench: give --lender, --nbd-unix or "
		                "--blockdev\n");
		return 2;
	}
	int rc = run(&t, name, 1, pages, ops, buf) < 0 ||
	         run(&t, name, 0, pages, ops, buf) < 0;
	if (t.mode == M_LEND)
		lend_client_close(&t.c);
	if (t.mode == M_NBD) {
		uint32_t e;
		lend_nbd_client_cmd(t.fd, LEND_NBD_CMD_DISC, 0, 0, 0, NULL,
		                    NULL, &e);
	}
	if (t.fd >= 0)
		close(t.fd);
	lend_tls_ctx_free(tls);
	free(buf);
	return rc;
}
