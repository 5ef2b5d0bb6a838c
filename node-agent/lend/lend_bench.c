/*
 * lend_bench.c — ramex-lend-bench, 4 KiB page latency and throughput.
 *
 * One program for every path bench/50-lending.sh compares:
 *   --lender HOST:PORT --contract ID --secret-file F [--tls-ca F]
 *                          the lend protocol itself (TCP or TLS)
 *   --nbd-unix PATH        NBD through ramex-lend-nbd (what the kernel sees)
 *   --nbd-direct HOST:PORT --contract ID --secret-file F
 *                          NBD straight to the lender on a DATA connection
 *                          (the direct path: what nbd.ko sees there)
 *   --blockdev PATH        pread/pwrite with O_DIRECT on a device or file
 *                          (the local-swap baseline)
 * For each it writes then reads --ops random 4 KiB pages of the first
 * --pages pages, one at a time, and prints one line per direction:
 *   PATH_NAME write p50_us=.. p99_us=.. ops_s=.. mib_s=..
 * (--gap-us N: N us of sleep after each, a borrower whose faults come
 * apart; ops_s then counts the sleeps too)
 * With --qd N (N > 1) it keeps N requests in flight instead (the NBD socket
 * driven by a sender and a receiver thread, as the kernel's nbd driver
 * does; N threads on a file; N lend requests through lend_client_submit):
 *   --stream-mib M   writes M MiB in order in --bs byte requests, then
 *                    reads them back:  PATH_NAME stream-write mib_s=..
 *   and always       --ops random 4 KiB reads:  PATH_NAME randread-qdN ..
 *   (each in-flight line ends with inflight=: the queue depth the device
 *   really had, averaged over the run; below N when the submitter lags)
 *   --recall-pid PID (with --lender) writes --pages pages, sends the
 *                    lender PID SIGUSR1 (its recall) and times the notice's
 *                    arrival, every page read back into this process's
 *                    memory, and RELEASE answered (the lender has freed
 *                    the pages by then):  PATH_NAME recall ..
 * Slow peers, beside any of the runs above:
 *   --trickle HOST:PORT [--trickle-peers N (8)] [--trickle-ms MS (4000)]
 *                    N other peers connect to that lender while the run
 *                    lasts, each sending its AUTH one byte every MS ms
 *                    (cut by the lender's handshake deadline, they connect
 *                    again): does the borrower's p99 move?
 * And a slow lender, as a program of its own between borrower and lender:
 *   --relay HOST:PORT --relay-port-file F [--delay-us N]
 *                    listens on 127.0.0.1 (port written to F), takes one
 *                    connection, relays it to HOST:PORT, and delivers
 *                    every byte the lender sends N us late; ends when
 *                    either side closes.
 *   --wakeup-floor   no storage at all: two processes bounce one byte over
 *                    a unix socketpair --ops times; each round trip is two
 *                    wakeups, the least any path between processes pays:
 *                    PATH_NAME wakeup-rtt p50_us=.. p99_us=..
 *                    With --keep-awake N, N lend_awake threads (what
 *                    ramex-lend-nbd --keep-awake runs) spin meanwhile;
 *                    with --idle-poll 1 the CPU latency request is held
 *                    at 0 us meanwhile (lend_qos, ramex-lend-nbd
 *                    --idle-poll 1): idle cores poll instead of halting.
 * Measures only; never judges.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/hostport.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_awake.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_qos.h"

enum mode { M_LEND, M_NBD, M_DEV };

struct target {
	enum mode mode;
	struct lend_client c;
	int fd;
	uint64_t handle;
};

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
               int64_t ops, uint8_t *buf, int64_t gap_us)
{
	int64_t *lat = malloc((size_t)ops * sizeof *lat);
	uint64_t x = 88172645463325252u;
	if (!lat)
		return -1;
	int64_t t0 = clock_mono_ns();
	for (int64_t i = 0; i < ops; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memset(buf, (int)(i & 0xff), 64);
		int64_t s = clock_mono_ns();
		if (op(t, write, x % (uint64_t)pages, buf) < 0) {
			fprintf(stderr,
			        "bench: %s %s failed at op %" PRId64 "\n", name,
			        write ? "write" : "read", i);
			free(lat);
			return -1;
		}
		lat[i] = clock_mono_ns() - s;
		if (gap_us > 0) {
			struct timespec g = {gap_us / 1000000,
			                     gap_us % 1000000 * 1000};
			nanosleep(&g, NULL);
		}
	}
	int64_t total = clock_mono_ns() - t0;
	qsort(lat, (size_t)ops, sizeof *lat, cmp64);
	double secs = (double)total / 1e9;
	printf("%-12s %-5s p50_us=%.1f p99_us=%.1f ops_s=%.0f mib_s=%.1f\n",
	       name, write ? "write" : "read", (double)lat[ops / 2] / 1e3,
	       (double)lat[ops * 99 / 100] / 1e3, (double)ops / secs,
	       (double)ops * 4096 / secs / 1048576);
	free(lat);
	return 0;
}

/* ---- many requests in flight ------------------------------------- */

struct qrun {
	struct target *t;
	int write, qd;
	int64_t ops;      /* requests */
	uint32_t bs;      /* bytes per request */
	int64_t pages;    /* random: within these; stream: from page 0 */
	int random;
	uint8_t *bufs;    /* qd buffers of bs bytes */
	int64_t *lat, *start;
	/* NBD: the sender takes free slots, the receiver gives them back */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int *free_slots, nfree;
	int64_t received;
	int failed;
	/* file: the next request to issue */
	int64_t next;
	uint64_t x;
};

static uint64_t q_page(struct qrun *q, int64_t i)
{
	if (!q->random)
		return (uint64_t)i * (q->bs / 4096) % (uint64_t)q->pages;
	q->x ^= q->x << 13;
	q->x ^= q->x >> 7;
	q->x ^= q->x << 17;
	return q->x % (uint64_t)q->pages;
}

static void *nbd_receiver(void *arg)
{
	struct qrun *q = arg;
	uint8_t r[LEND_NBD_REPLY_LEN];
	for (int64_t i = 0; i < q->ops; i++) {
		uint32_t err;
		uint64_t slot;
		if (lend_nbd_read_full(q->t->fd, r, sizeof r) < 0 ||
		    lend_nbd_reply_decode(r, &err, &slot) < 0 || err ||
		    slot >= (uint64_t)q->qd)
			goto fail;
		if (!q->write &&
		    lend_nbd_read_full(q->t->fd, q->bufs + slot * q->bs,
		                       q->bs) < 0)
			goto fail;
		int64_t now = clock_mono_ns();
		pthread_mutex_lock(&q->mu);
		q->lat[q->received++] = now - q->start[slot];
		q->free_slots[q->nfree++] = slot;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
	}
	return NULL;
fail:
	pthread_mutex_lock(&q->mu);
	q->failed = 1;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static int q_nbd(struct qrun *q)
{
	pthread_t rt;
	uint8_t h[LEND_NBD_REQ_LEN];
	if (pthread_create(&rt, NULL, nbd_receiver, q) != 0)
		return -1;
	for (int64_t i = 0; i < q->ops; i++) {
		pthread_mutex_lock(&q->mu);
		while (q->nfree == 0 && !q->failed)
			pthread_cond_wait(&q->cv, &q->mu);
		int slot = q->failed ? -1 : q->free_slots[--q->nfree];
		pthread_mutex_unlock(&q->mu);
		if (slot < 0)
			break;
		uint64_t off = q_page(q, i) * 4096;
		uint8_t *b = q->bufs + (size_t)slot * q->bs;
		lend_nbd_req_encode(h,
		                    q->write ? LEND_NBD_CMD_WRITE
		                             : LEND_NBD_CMD_READ,
		                    (uint64_t)slot, off, q->bs);
		if (q->write)
			memset(b, (int)(i & 0xff), 64);
		q->start[slot] = clock_mono_ns();
		if (lend_nbd_write_full(q->t->fd, h, sizeof h) < 0 ||
		    (q->write && lend_nbd_write_full(q->t->fd, b, q->bs) < 0))
			break;
	}
	pthread_join(rt, NULL);
	return q->failed || q->received != q->ops ? -1 : 0;
}

static void *file_worker(void *arg)
{
	struct qrun *q = arg;
	uint8_t *b = NULL;
	pthread_mutex_lock(&q->mu);
	b = q->bufs + (size_t)q->nfree++ * q->bs; /* this thread's buffer */
	pthread_mutex_unlock(&q->mu);
	for (;;) {
		pthread_mutex_lock(&q->mu);
		int64_t i = q->failed ? q->ops : q->next++;
		uint64_t page = i < q->ops ? q_page(q, i) : 0;
		pthread_mutex_unlock(&q->mu);
		if (i >= q->ops)
			return NULL;
		int64_t s = clock_mono_ns();
		ssize_t n = q->write ? pwrite(q->t->fd, b, q->bs,
		                              (off_t)page * 4096)
		                     : pread(q->t->fd, b, q->bs,
		                             (off_t)page * 4096);
		int64_t e = clock_mono_ns();
		pthread_mutex_lock(&q->mu);
		if (n != (ssize_t)q->bs)
			q->failed = 1;
		q->lat[q->received++] = e - s;
		pthread_mutex_unlock(&q->mu);
	}
}

static int q_file(struct qrun *q)
{
	pthread_t th[256];
	q->nfree = 0;
	for (int i = 0; i < q->qd; i++)
		if (pthread_create(&th[i], NULL, file_worker, q) != 0)
			return -1;
	for (int i = 0; i < q->qd; i++)
		pthread_join(th[i], NULL);
	return q->failed ? -1 : 0;
}

static void lend_done(void *arg, uint64_t tag, uint32_t error)
{
	struct qrun *q = arg;
	if (error)
		q->failed = 1;
	q->lat[q->received++] = clock_mono_ns() - q->start[tag];
	q->free_slots[q->nfree++] = (int)tag;
}

static int q_lend(struct qrun *q)
{
	struct lend_client *c = &q->t->c;
	struct iovec *v = calloc((size_t)q->qd, sizeof *v);
	if (!v)
		return -1;
	for (int64_t i = 0; i < q->ops && !q->failed;) {
		while (q->nfree == 0)
			if (lend_client_pump(c, -1) < 0)
				goto out;
		/* every slot the replies freed, refilled with one writev, as
		 * the bridge does */
		lend_client_cork(c);
		for (; q->nfree > 0 && i < q->ops; i++) {
			int slot = q->free_slots[--q->nfree];
			v[slot] = (struct iovec){q->bufs + (size_t)slot * q->bs,
			                         q->bs};
			q->start[slot] = clock_mono_ns();
			if (lend_client_submit(
			        c, q->write ? LEND_WRITE : LEND_READ,
			        q_page(q, i), q->bs / 4096, &v[slot], 1,
			        lend_done, q, (uint64_t)slot) < 0)
				goto out;
		}
		if (lend_client_uncork(c) < 0)
			goto out;
	}
	while (q->received < q->ops && !q->failed)
		if (lend_client_pump(c, -1) < 0)
			break;
out:
	free(v);
	return q->failed || q->received != q->ops ? -1 : 0;
}

/* A recall of every page: notice, pages back, lender's pages freed. */
static int recall(struct target *t, const char *name, int64_t pages, pid_t pid)
{
	struct lend_client *c = &t->c;
	size_t len = (size_t)pages * 4096;
	uint8_t *b = aligned_alloc(4096, len);
	if (!b)
		return -1;
	memset(b, 0x77, len);
	if (lend_client_write(c, 0, (uint32_t)pages, b) < 0) {
		fprintf(stderr, "bench: %s recall: %s\n", name, c->err);
		free(b);
		return -1;
	}
	memset(b, 0, len);
	int64_t t_sig = clock_mono_ns();
	if (kill(pid, SIGUSR1) < 0) {
		perror("bench: kill");
		free(b);
		return -1;
	}
	while (!c->notice)
		if (lend_client_pump(c, 1000) < 0 ||
		    clock_mono_ns() - t_sig > 10e9) {
			fprintf(stderr, "bench: %s recall: no notice\n", name);
			free(b);
			return -1;
		}
	int64_t t0 = clock_mono_ns();
	int rc = lend_client_read(c, 0, (uint32_t)pages, b);
	int64_t t1 = clock_mono_ns();
	if (rc == 0)
		rc = lend_client_release(c);
	int64_t t2 = clock_mono_ns();
	if (rc < 0 || b[0] != 0x77 || b[len - 1] != 0x77) {
		fprintf(stderr, "bench: %s recall failed: %s\n", name, c->err);
		free(b);
		return -1;
	}
	printf("%-12s %-15s pages=%lld signal_to_notice_ms=%.1f "
	       "pages_back_ms=%.1f release_ms=%.1f notice_to_freed_ms=%.1f\n",
	       name, "recall", (long long)pages, (double)(t0 - t_sig) / 1e6,
	       (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
	       (double)(t2 - t0) / 1e6);
	free(b);
	return 0;
}

/* One run with qd requests in flight; prints one line. */
static int qrun(struct target *t, const char *name, const char *what,
                int write, int qd, int64_t ops, uint32_t bs, int64_t pages,
                int random)
{
	struct qrun q = {.t = t,
	                 .write = write,
	                 .qd = qd,
	                 .ops = ops,
	                 .bs = bs,
	                 .pages = pages,
	                 .random = random,
	                 .x = 88172645463325252u,
	                 .mu = PTHREAD_MUTEX_INITIALIZER,
	                 .cv = PTHREAD_COND_INITIALIZER};
	q.bufs = aligned_alloc(4096, (size_t)qd * bs);
	q.lat = malloc((size_t)ops * sizeof *q.lat);
	q.start = calloc((size_t)qd, sizeof *q.start);
	q.free_slots = malloc((size_t)qd * sizeof *q.free_slots);
	if (!q.bufs || !q.lat || !q.start || !q.free_slots)
		return -1;
	/* pages like a program's: half random, half zeros (about 2:1 for a
	 * compressor; zram would store constant pages for nothing) */
	for (size_t i = 0; i < (size_t)qd * bs; i += 8) {
		q.x ^= q.x << 13;
		q.x ^= q.x >> 7;
		q.x ^= q.x << 17;
		uint64_t v = i % 4096 < 2048 ? q.x : 0;
		memcpy(q.bufs + i, &v, 8);
	}
	q.x = 88172645463325252u;
	for (int i = 0; i < qd; i++)
		q.free_slots[q.nfree++] = qd - 1 - i;
	int64_t t0 = clock_mono_ns();
	int rc = t->mode == M_NBD    ? q_nbd(&q)
	         : t->mode == M_DEV  ? q_file(&q)
	                             : q_lend(&q);
	int64_t total = clock_mono_ns() - t0;
	if (rc < 0) {
		fprintf(stderr, "bench: %s %s failed after %" PRId64 " of %"
		                PRId64 " requests\n",
		        name, what, q.received, ops);
	} else {
		double secs = (double)total / 1e9;
		/* the sum of the latencies is the integral of the requests in
		 * flight over the run: divided by its length, the queue depth
		 * the device really had (below qd when the submitter lags) */
		double busy = 0;
		for (int64_t i = 0; i < ops; i++)
			busy += (double)q.lat[i];
		qsort(q.lat, (size_t)ops, sizeof *q.lat, cmp64);
		printf("%-12s %-15s p50_us=%.1f p99_us=%.1f ops_s=%.0f "
		       "mib_s=%.1f inflight=%.1f\n",
		       name, what, (double)q.lat[ops / 2] / 1e3,
		       (double)q.lat[ops * 99 / 100] / 1e3, (double)ops / secs,
		       (double)ops * bs / secs / 1048576, busy / (double)total);
	}
	free(q.bufs);
	free(q.lat);
	free(q.start);
	free(q.free_slots);
	return rc;
}

/* ---- slow peers ---------------------------------------------------- */

struct trickle {
	const char *host;
	int port, peers, ms;
	int stop[2]; /* a byte here ends every peer */
	pthread_t th[64];
	int64_t bytes, conns; /* sent, made (atomic) */
};

/* One peer: HELLO read, then its AUTH a byte at a time, again and again. */
static void *trickle_main(void *arg)
{
	struct trickle *t = arg;
	uint8_t hello[LEND_HELLO_LEN], auth[LEND_AUTH_LEN];
	char err[200];
	memset(auth, 0x5a, sizeof auth);
	for (;;) {
		int fd = lend_tcp_connect(t->host, t->port, err, sizeof err);
		if (fd >= 0) {
			__atomic_add_fetch(&t->conns, 1, __ATOMIC_RELAXED);
			(void)lend_nbd_read_full(fd, hello, sizeof hello);
		}
		for (size_t i = 0; fd >= 0 && i < sizeof auth; i++) {
			struct pollfd p = {.fd = t->stop[0], .events = POLLIN};
			if (poll(&p, 1, t->ms) != 0)
				break;
			if (send(fd, auth + i, 1, MSG_NOSIGNAL) != 1)
				break; /* cut: connect again */
			__atomic_add_fetch(&t->bytes, 1, __ATOMIC_RELAXED);
		}
		if (fd >= 0)
			close(fd);
		struct pollfd p = {.fd = t->stop[0], .events = POLLIN};
		if (poll(&p, 1, fd >= 0 ? 0 : 100) != 0)
			return NULL;
	}
}

static int trickle_start(struct trickle *t)
{
	if (pipe(t->stop) < 0)
		return -1;
	for (int i = 0; i < t->peers; i++)
		if (pthread_create(&t->th[i], NULL, trickle_main, t) != 0)
			return -1;
	return 0;
}

static void trickle_stop(struct trickle *t, const char *name)
{
	(void)!write(t->stop[1], "x", 1);
	for (int i = 0; i < t->peers; i++)
		pthread_join(t->th[i], NULL);
	close(t->stop[0]);
	close(t->stop[1]);
	printf("%-12s %-15s peers=%d byte_every_ms=%d connections=%lld "
	       "bytes=%lld\n",
	       name, "slow-peers", t->peers, t->ms, (long long)t->conns,
	       (long long)t->bytes);
}

/* Bytes read from one side, due at the other at `due`. */
struct chunk {
	struct chunk *next;
	int64_t due;
	size_t len, off;
	uint8_t data[];
};

struct dir {
	int from, to;
	int64_t delay_ns;
	struct chunk *head, *tail;
	size_t queued;
};

/* Reads what has come into a chunk due delay_ns later. 0, or -1 when the
 * side closed. */
static int dir_read(struct dir *d)
{
	enum { MAXC = 256 * 1024 };
	struct chunk *c = malloc(sizeof *c + MAXC);
	if (!c)
		return -1;
	ssize_t r = read(d->from, c->data, MAXC);
	if (r <= 0) {
		free(c);
		return r < 0 && errno == EAGAIN ? 0 : -1;
	}
	*c = (struct chunk){.due = clock_mono_ns() + d->delay_ns,
	                    .len = (size_t)r};
	if (d->tail)
		d->tail->next = c;
	else
		d->head = c;
	d->tail = c;
	d->queued += (size_t)r;
	return 0;
}

/* Writes the chunks that are due. 0, or -1 when the side closed. */
static int dir_write(struct dir *d)
{
	int64_t now = clock_mono_ns();
	while (d->head && d->head->due <= now) {
		struct chunk *c = d->head;
		ssize_t w = send(d->to, c->data + c->off, c->len - c->off,
		                 MSG_NOSIGNAL);
		if (w < 0)
			return errno == EAGAIN ? 0 : -1;
		c->off += (size_t)w;
		d->queued -= (size_t)w;
		if (c->off < c->len)
			return 0;
		d->head = c->next;
		if (!d->head)
			d->tail = NULL;
		free(c);
	}
	return 0;
}

static int relay(const char *to, const char *port_file, int64_t delay_us)
{
	char host[256], err[256];
	int port, bound = 0;
	if (hostport_split(to, host, sizeof host, &port) < 0 || !port_file) {
		fprintf(stderr, "bench: --relay HOST:PORT and "
		                "--relay-port-file F are needed\n");
		return 2;
	}
	int lfd = lend_tcp_listen("127.0.0.1", 0, &bound, err, sizeof err);
	FILE *f = lfd >= 0 ? fopen(port_file, "w") : NULL;
	if (!f) {
		fprintf(stderr, "bench: relay: %s\n", lfd < 0 ? err : port_file);
		return 1;
	}
	fprintf(f, "%d\n", bound);
	fclose(f);
	int a = accept(lfd, NULL, NULL);
	close(lfd);
	int b = a >= 0 ? lend_tcp_connect(host, port, err, sizeof err) : -1;
	if (b < 0) {
		fprintf(stderr, "bench: relay: %s\n", a < 0 ? "accept" : err);
		return 1;
	}
	int one = 1;
	setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	fcntl(a, F_SETFL, O_NONBLOCK);
	fcntl(b, F_SETFL, O_NONBLOCK);
	/* borrower -> lender at once; lender -> borrower delay_us late */
	struct dir d[2] = {{.from = a, .to = b},
	                   {.from = b, .to = a, .delay_ns = delay_us * 1000}};
	for (;;) {
		struct pollfd p[4];
		int64_t wait = -1, now = clock_mono_ns(); /* ns */
		for (int i = 0; i < 2; i++) {
			/* at most 64 MiB held per direction */
			p[i] = (struct pollfd){
			    .fd = d[i].queued < (64u << 20) ? d[i].from : -1,
			    .events = POLLIN};
			p[2 + i] = (struct pollfd){.fd = -1, .events = POLLOUT};
			if (!d[i].head)
				continue;
			if (d[i].head->due <= now)
				p[2 + i].fd = d[i].to;
			else {
				int64_t ns = d[i].head->due - now;
				if (wait < 0 || ns < wait)
					wait = ns;
			}
		}
		struct timespec ts = {wait / 1000000000, wait % 1000000000};
		if (ppoll(p, 4, wait < 0 ? NULL : &ts, NULL) < 0 &&
		    errno != EINTR)
			break;
		int gone = 0;
		for (int i = 0; i < 2; i++) {
			if (p[i].revents && dir_read(&d[i]) < 0)
				gone = 1;
			if (dir_write(&d[i]) < 0)
				gone = 1;
		}
		if (gone)
			break;
	}
	for (int i = 0; i < 2; i++)
		while (d[i].head) {
			struct chunk *c = d[i].head;
			d[i].head = c->next;
			free(c);
		}
	close(a);
	close(b);
	return 0;
}

/* ---- the scheduler's floor ------------------------------------------ */

static int wakeup_floor(const char *name, int64_t ops, int awake,
                        int idle_poll)
{
	struct lend_awake aw;
	struct lend_qos q = {0};
	char err[120];
	int sv[2];
	int64_t *lat = malloc((size_t)ops * sizeof *lat);
	if (!lat || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char c;
		close(sv[0]);
		while (read(sv[1], &c, 1) == 1 && write(sv[1], &c, 1) == 1)
			;
		_exit(0);
	}
	close(sv[1]);
	int rc = 0;
	if (lend_awake_start(&aw, awake, err, sizeof err) < 0) {
		fprintf(stderr, "bench: %s\n", err);
		rc = -1;
	}
	/* a floor said to be polled must be: no device, no figure */
	if (idle_poll && lend_qos_start(&q, NULL) < 0) {
		fprintf(stderr, "bench: %s\n", q.err);
		rc = -1;
	}
	for (int64_t i = 0; i < ops && rc == 0; i++) {
		char c = 'x';
		lend_awake_busy(&aw);
		lend_qos_busy(&q);
		int64_t t0 = clock_mono_ns();
		if (write(sv[0], &c, 1) != 1 || read(sv[0], &c, 1) != 1)
			rc = -1;
		lat[i] = clock_mono_ns() - t0;
	}
	lend_awake_stop(&aw);
	lend_qos_stop(&q);
	close(sv[0]);
	waitpid(pid, NULL, 0);
	if (rc == 0) {
		qsort(lat, (size_t)ops, sizeof *lat, cmp64);
		printf("%-12s %-15s p50_us=%.1f p99_us=%.1f p999_us=%.1f\n",
		       name, "wakeup-rtt", (double)lat[ops / 2] / 1e3,
		       (double)lat[ops * 99 / 100] / 1e3,
		       (double)lat[ops * 999 / 1000] / 1e3);
	}
	free(lat);
	return rc;
}

/* --help around the options of the table in main */
static const char synopsis[] =
    "usage: ramex-lend-bench (--lender HOST:PORT --contract ID --secret-file F "
    "[--tls-ca F]\n"
    "                         | --nbd-direct HOST:PORT --contract ID "
    "--secret-file F\n"
    "                         | --nbd-unix PATH | --blockdev PATH)\n"
    "         [--pages N] [--ops N] [--name NAME] [--qd N] [--gap-us US]\n"
    "         [--stream-mib M [--bs BYTES]] [--recall-pid PID]\n"
    "         [--trickle HOST:PORT [--trickle-peers N] [--trickle-ms MS]]\n"
    "       ramex-lend-bench --relay HOST:PORT --relay-port-file F "
    "[--delay-us N]\n"
    "       ramex-lend-bench --wakeup-floor [--ops N] [--keep-awake N] "
    "[--idle-poll 0|1]\n";
static const char notes[] =
    "Writes then reads --ops random 4 KiB pages through the lend protocol, "
    "the NBD\n"
    "bridge or a block device (O_DIRECT), and prints p50/p99 and throughput "
    "per\n"
    "direction. Measures only. More on each path: docs/lending.md and\n"
    "bench/50-lending.sh.\n";

int main(int argc, char **argv)
{
	const char *lender = NULL, *secret_file = NULL, *ca = NULL;
	const char *nbd_unix = NULL, *dev = NULL, *name = "bench";
	const char *nbd_direct = NULL;
	int64_t pages = 1024, ops = 2000, contract = 0, qd = 1, stream_mib = 0;
	int64_t bs = 512 * 1024, recall_pid = 0, delay_us = 0;
	int64_t trickle_peers = 8, trickle_ms = 4000;
	const char *trickle_at = NULL, *relay_to = NULL, *relay_file = NULL;
	struct trickle tr = {0};
	int floor_only = 0;
	int64_t awake = 0, idle_poll = 0, gap_us = 0;
	char host[256], err[256];
	int port;
	struct target t = {.fd = -1};
	SSL_CTX *tls = NULL;
	uint8_t secret[LEND_SECRET_LEN];

	const struct args_opt opts[] = {
	    {"--lender", ARGS_STR, &lender, 0, 0, NULL, "HOST:PORT",
	     "the lend protocol itself, to this lender (TCP, or TLS with "
	     "--tls-ca)"},
	    lend_args_contract(&contract),
	    lend_args_secret_file(&secret_file),
	    lend_args_tls_ca(&ca),
	    {"--nbd-unix", ARGS_STR, &nbd_unix, 0, 0, NULL, "PATH",
	     "NBD through ramex-lend-nbd's unix socket (what the kernel "
	     "sees)"},
	    {"--nbd-direct", ARGS_STR, &nbd_direct, 0, 0, NULL, "HOST:PORT",
	     "the NBD client model on a lender's DATA connection (the direct "
	     "path: what nbd.ko does with ramex-lend-nbd --direct)"},
	    {"--blockdev", ARGS_STR, &dev, 0, 0, NULL, "PATH",
	     "pread/pwrite with O_DIRECT on a device or file (the local-swap "
	     "baseline)"},
	    {"--pages", ARGS_INT, &pages, 1, LEND_MAX_PAGES, NULL, "N",
	     "the pages the random requests fall in"},
	    {"--ops", ARGS_INT, &ops, 100, 100000000, NULL, "N",
	     "random 4 KiB pages written, then read (--wakeup-floor: round "
	     "trips)"},
	    {"--name", ARGS_STR, &name, 0, 0, NULL, "NAME",
	     "the path's name, first on every line printed"},
	    {"--qd", ARGS_INT, &qd, 1, 128, NULL, "N",
	     "requests kept in flight (1: one at a time)"},
	    {"--stream-mib", ARGS_INT, &stream_mib, 1, 1 << 20, NULL, "M",
	     "with --qd: also write M MiB in order, then read them back"},
	    {"--recall-pid", ARGS_INT, &recall_pid, 1, INT32_MAX, NULL, "PID",
	     "with --lender: write --pages pages, send the lender PID "
	     "SIGUSR1 (its recall) and time the recall"},
	    {"--bs", ARGS_INT, &bs, 4096, 1 << 20, NULL, "BYTES",
	     "the size of --stream-mib's requests"},
	    {"--wakeup-floor", ARGS_FLAG, &floor_only, 0, 0, NULL, NULL,
	     "no storage: two processes bounce one byte over a socketpair "
	     "--ops times, two wakeups a round trip, the least any path "
	     "between processes pays"},
	    {"--keep-awake", ARGS_INT, &awake, 0, LEND_AWAKE_MAX_THREADS, NULL,
	     "N",
	     "--wakeup-floor: lend_awake threads spinning meanwhile (what "
	     "ramex-lend-nbd --keep-awake runs)"},
	    {"--idle-poll", ARGS_INT, &idle_poll, 0, 1, NULL, "0|1",
	     "--wakeup-floor: 1 holds the CPU latency request at 0 us "
	     "meanwhile (ramex-lend-nbd --idle-poll 1)"},
	    {"--gap-us", ARGS_INT, &gap_us, 0, 1000000, NULL, "US",
	     "one at a time: a pause after each request, a borrower whose "
	     "faults come apart (ops_s counts the pauses too)"},
	    {"--trickle", ARGS_STR, &trickle_at, 0, 0, NULL, "HOST:PORT",
	     "meanwhile, slow peers connect to this lender, each sending "
	     "its AUTH one byte at a time"},
	    {"--trickle-peers", ARGS_INT, &trickle_peers, 1, 64, NULL, "N",
	     "how many slow peers"},
	    {"--trickle-ms", ARGS_INT, &trickle_ms, 1, 60000, NULL, "MS",
	     "the pause between a slow peer's bytes"},
	    {"--relay", ARGS_STR, &relay_to, 0, 0, NULL, "HOST:PORT",
	     "be a slow lender instead: relay one connection to HOST:PORT, "
	     "delivering the lender's bytes --delay-us late"},
	    {"--relay-port-file", ARGS_STR, &relay_file, 0, 0, NULL, "F",
	     "the relay listens on 127.0.0.1 and writes its port to F"},
	    {"--delay-us", ARGS_INT, &delay_us, 0, 10000000, NULL, "US",
	     "the relay's delay"},
	};
	const struct args_prog prog = {"ramex-lend-bench", synopsis, opts,
	                               sizeof opts / sizeof opts[0], notes};
	int done = args_main(argc, argv, &prog, err, sizeof err);
	if (done >= 0)
		return done;
	signal(SIGPIPE, SIG_IGN);
	if (relay_to)
		return relay(relay_to, relay_file, delay_us);
	if (floor_only)
		return wakeup_floor(name, ops, (int)awake, (int)idle_poll) < 0;
	uint8_t *buf = aligned_alloc(4096, 4096);
	if (!buf)
		return 1;
	if (lender || nbd_direct) {
		t.mode = M_LEND;
		if (hostport_split(lender ? lender : nbd_direct, host,
		                   sizeof host, &port) < 0 ||
		    !secret_file ||
		    lend_args_secret(secret_file, secret, err, sizeof err) <
		        0) {
			fprintf(stderr, "bench: --lender or --nbd-direct "
			                "HOST:PORT and a valid --secret-file are "
			                "needed\n");
			return 2;
		}
	}
	if (nbd_direct) {
		/* the same NBD client model as --nbd-unix, on the lender's
		 * DATA connection */
		struct lend_client dc;
		t.mode = M_NBD;
		if (lend_client_connect_role(&dc, host, port, NULL,
		                             (uint64_t)contract, secret, 5000,
		                             LEND_CONN_DATA) < 0 ||
		    (t.fd = lend_client_take_fd(&dc)) < 0) {
			fprintf(stderr, "bench: %s\n", dc.err);
			return 1;
		}
		if (pages > dc.pages)
			pages = dc.pages;
	} else if (lender) {
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
		fprintf(stderr, "bench: give --lender, --nbd-unix, "
		                "--nbd-direct or --blockdev\n");
		return 2;
	}
	int rc;
	if (trickle_at) {
		char th[256];
		if (hostport_split(trickle_at, th, sizeof th, &tr.port) < 0) {
			fprintf(stderr, "bench: --trickle wants HOST:PORT\n");
			return 2;
		}
		tr.host = strdup(th);
		tr.peers = (int)trickle_peers;
		tr.ms = (int)trickle_ms;
		if (!tr.host || trickle_start(&tr) < 0) {
			fprintf(stderr, "bench: could not start the slow peers\n");
			return 1;
		}
	}
	if (recall_pid && t.mode == M_LEND) {
		rc = recall(&t, name, pages, (pid_t)recall_pid) < 0;
	} else if (qd > 1) {
		char what[32];
		bs -= bs % 4096;
		rc = 0;
		if (stream_mib) {
			int64_t n = stream_mib * 1048576 / bs;
			if (n * (bs / 4096) > pages)
				n = pages / (bs / 4096);
			rc |= qrun(&t, name, "stream-write", 1, (int)qd, n,
			           (uint32_t)bs, pages, 0) < 0;
			rc |= qrun(&t, name, "stream-read", 0, (int)qd, n,
			           (uint32_t)bs, pages, 0) < 0;
		}
		snprintf(what, sizeof what, "randread-qd%d", (int)qd);
		rc |= qrun(&t, name, what, 0, (int)qd, ops, 4096, pages, 1) < 0;
	} else {
		rc = run(&t, name, 1, pages, ops, buf, gap_us) < 0 ||
		     run(&t, name, 0, pages, ops, buf, gap_us) < 0;
	}
	if (trickle_at) {
		trickle_stop(&tr, name);
		free((void *)tr.host);
	}
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
