/* lend_bridge.c — NBD export over a lend contract (see the header). */
#include "node-agent/lend/lend_bridge.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h> /* BLKFLSBUF */
#include <linux/nbd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/swap.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "node-agent/lend/lend_mem.h"
#include "node-agent/lend/lend_server.h" /* clock_mono_ms */

int lend_bridge_init(struct lend_bridge *b, struct lend_client *client,
                     const char *export_name)
{
	memset(b, 0, sizeof *b);
	b->client = client;
	b->fd = b->dev_fd = b->kernel_fd = -1;
	b->wake[0] = b->wake[1] = -1;
	b->swap_prio = -1;
	b->exp.name = export_name;
	b->exp.size = (uint64_t)client->pages * LEND_PAGE_SIZE;
	b->exp.tflags = LEND_NBD_TFLAGS;
	b->buf = aligned_alloc(LEND_PAGE_SIZE, LEND_BRIDGE_BUF);
	b->ib = malloc(LEND_BRIDGE_IBUF);
	if (!b->buf || !b->ib || pipe2(b->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not allocate the bridge: %s", strerror(errno));
		lend_bridge_free(b);
		return -1;
	}
	return 0;
}

int lend_bridge_keep_awake(struct lend_bridge *b, int threads)
{
	lend_awake_stop(&b->awake);
	return lend_awake_start(&b->awake, threads, b->err, sizeof b->err);
}

int lend_bridge_idle_poll(struct lend_bridge *b, const char *path)
{
	lend_qos_stop(&b->qos);
	return lend_qos_start(&b->qos, path);
}

static void wake(struct lend_bridge *b, char c)
{
	(void)!write(b->wake[1], &c, 1);
}

void lend_bridge_stop(struct lend_bridge *b)
{
	wake(b, 's');
}

static void *attach_main(void *arg)
{
	struct lend_bridge *b = arg;
	uint64_t size = b->exp.size;
	uint16_t tflags = b->exp.tflags;
	char err[160];
	int fd = b->dev_fd;

	b->attach_rc = -1;
	/* direct: the lender's DATA connection is in transmission already;
	 * the bridge's own export negotiates like any NBD server */
	if (!b->direct &&
	    lend_nbd_client_handshake(b->kernel_fd, "", &size, &tflags, err,
	                              sizeof err) < 0) {
		log_error("could not negotiate with the bridge", "why=\"%s\"",
		          err);
		goto out;
	}
	/* direct: a lender silent this long with a request in flight fails
	 * it with EIO and kills the socket (nbd.ko, one connection, no
	 * dead_conn_timeout); the bridge then retires the device */
	if (b->direct && b->timeout_s > 0 &&
	    ioctl(fd, NBD_SET_TIMEOUT, (unsigned long)b->timeout_s) < 0) {
		log_error("the kernel refused the NBD timeout", "why=\"%s\"",
		          strerror(errno));
		goto out;
	}
	if (ioctl(fd, NBD_SET_BLKSIZE, (unsigned long)LEND_NBD_BLOCK) < 0 ||
	    ioctl(fd, NBD_SET_SIZE_BLOCKS,
	          (unsigned long)(size / LEND_NBD_BLOCK)) < 0 ||
	    ioctl(fd, NBD_CLEAR_SOCK) < 0 ||
	    ioctl(fd, NBD_SET_FLAGS, (unsigned long)tflags) < 0 ||
	    ioctl(fd, NBD_SET_SOCK, (unsigned long)b->kernel_fd) < 0) {
		log_error("the kernel refused the NBD socket",
		          "why=\"%s\" hint=\"is nbd.ko loaded and the device "
		          "free?\"",
		          strerror(errno));
		goto out;
	}
	b->attach_rc = 0;
	wake(b, 'a');
	/* blocks while the kernel uses the device */
	if (ioctl(fd, NBD_DO_IT) < 0 && errno != EPIPE && errno != EINTR)
		log_warn("NBD_DO_IT ended", "why=\"%s\"", strerror(errno));
	ioctl(fd, NBD_CLEAR_QUE);
	ioctl(fd, NBD_CLEAR_SOCK);
	wake(b, 'd'); /* the kernel let go of the device's socket */
out:
	if (b->attach_rc < 0)
		wake(b, 'f');
	return NULL;
}

/*
 * Room in the NBD socket for every reply the staging buffer can hold, so
 * that one writev sends a batch of READ replies whole. With the default
 * (about 200 KiB for a unix socket) a 512 KiB reply went in pieces, each
 * a wait for the NBD client to read and a wakeup back, and meanwhile
 * the bridge neither read the lender's replies nor sent it requests.
 * SO_SNDBUFFORCE passes net.core.wmem_max for root (which the attached
 * bridge is); elsewhere SO_SNDBUF gets what wmem_max allows.
 */
static void nbd_sndbuf(int fd)
{
	int sz = 2 * LEND_BRIDGE_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
}

static int attach_wait(struct lend_bridge *b, const char *nbd_dev);
static int dev_counts(const struct lend_bridge *b, int64_t n[3]);

/* Opens /dev/nbdX, and remembers what swapoff gets. Returns 0 or -1. */
static int open_dev(struct lend_bridge *b, const char *nbd_dev,
                    const char *swap_dev)
{
	const char *base = strrchr(nbd_dev, '/');
	b->swap = swap_dev;
	snprintf(b->size_path, sizeof b->size_path, "/sys/block/%s/size",
	         base ? base + 1 : nbd_dev);
	b->dev_fd = open(nbd_dev, O_RDWR | O_CLOEXEC);
	if (b->dev_fd < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not open %s: %s (modprobe nbd?)", nbd_dev,
		         strerror(errno));
		return -1;
	}
	return 0;
}

int lend_bridge_attach(struct lend_bridge *b, const char *nbd_dev,
                       const char *swap_dev)
{
	int sv[2];
	if (open_dev(b, nbd_dev, swap_dev) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(b->err, sizeof b->err, "socketpair: %s",
		         strerror(errno));
		return -1;
	}
	b->fd = sv[0];
	b->kernel_fd = sv[1];
	nbd_sndbuf(b->fd);
	return attach_wait(b, nbd_dev);
}

int lend_bridge_attach_direct(struct lend_bridge *b, const char *nbd_dev,
                              const char *swap_dev, int data_fd, int timeout_s)
{
	b->direct = 1;
	b->timeout_s = timeout_s;
	b->kernel_fd = data_fd;
	if (open_dev(b, nbd_dev, swap_dev) < 0)
		return -1;
	/* the kernel counts the device's I/O here: the direct path's meter.
	 * The count lives as long as the device, across connections: a
	 * device an earlier contract used holds that contract's I/O, so the
	 * meter counts from what it reads now, before the kernel has the
	 * socket (seen in the guest: a second contract on /dev/nbd0 counted
	 * the first one's reads as its own) */
	const char *base = strrchr(nbd_dev, '/');
	snprintf(b->stat_path, sizeof b->stat_path, "/sys/block/%s/stat",
	         base ? base + 1 : nbd_dev);
	if (dev_counts(b, b->dev_base) < 0)
		memset(b->dev_base, 0, sizeof b->dev_base);
	return attach_wait(b, nbd_dev);
}

/* Starts the thread that hands the kernel its socket and waits until the
 * kernel took it (or refused). */
static int attach_wait(struct lend_bridge *b, const char *nbd_dev)
{
	if (pthread_create(&b->attach_thr, NULL, attach_main, b) != 0) {
		snprintf(b->err, sizeof b->err, "could not start a thread");
		return -1;
	}
	b->attach_started = 1;
	if (!b->direct && lend_nbd_server_handshake(b->fd, &b->exp, b->err,
	                                            sizeof b->err) != 0)
		return -1;
	/* wait for the kernel to take the socket (or refuse it) */
	struct pollfd p = {.fd = b->wake[0], .events = POLLIN};
	char c = 0;
	while (poll(&p, 1, -1) >= 0 || errno == EINTR)
		if (read(b->wake[0], &c, 1) == 1 && (c == 'a' || c == 'f'))
			break;
	if (c != 'a') {
		snprintf(b->err, sizeof b->err,
		         "the kernel did not take the NBD socket of %s",
		         nbd_dev);
		return -1;
	}
	log_info("bridge attached", "device=%s pages=%lld direct=%d", nbd_dev,
	         (long long)b->client->pages, b->direct);
	return 0;
}

int lend_bridge_accept(struct lend_bridge *b, int fd)
{
	b->fd = fd;
	nbd_sndbuf(fd);
	int rc = lend_nbd_server_handshake(fd, &b->exp, b->err, sizeof b->err);
	return rc == 0 ? 0 : -1;
}

int lend_bridge_swap_header(struct lend_client *c, char *err, size_t errlen)
{
	/* union swap_header of <linux/swap.h>, version 1, native endian */
	uint8_t page[LEND_PAGE_SIZE];
	uint32_t v[3] = {1, (uint32_t)(c->pages - 1), 0};
	if (c->pages < 10 || c->pages > UINT32_MAX) {
		snprintf(err, errlen, "swap needs 10 to 2^32 pages");
		return -1;
	}
	memset(page, 0, sizeof page);
	memcpy(page + 1024, v, sizeof v);
	memcpy(page + LEND_PAGE_SIZE - 10, "SWAPSPACE2", 10);
	if (lend_client_write(c, 0, 1, page) < 0) {
		snprintf(err, errlen, "could not write the swap header: %.200s",
		         c->err);
		return -1;
	}
	return 0;
}

int lend_bridge_swap(struct lend_bridge *b, int prio)
{
	if (!b->swap) {
		snprintf(b->err, sizeof b->err,
		         "swap needs an attached device");
		return -1;
	}
	if (lend_bridge_swap_header(b->client, b->err, sizeof b->err) < 0)
		return -1;
	/* the header went to the lender beside the kernel: a first page the
	 * kernel read and cached before (the device's partition scan, or a
	 * contract that used the device before) would still read without
	 * it, and swapon failed with EINVAL (seen once in ten boots of
	 * tests/lendagent). Its page cache goes. */
	if (b->dev_fd >= 0 && ioctl(b->dev_fd, BLKFLSBUF, 0) < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not drop %s's cached pages: %s", b->swap,
		         strerror(errno));
		return -1;
	}
	b->swap_prio = prio < 0                     ? 0
	               : prio > SWAP_FLAG_PRIO_MASK ? SWAP_FLAG_PRIO_MASK
	                                            : prio;
	return 0;
}

/* Waits (up to 10 s) until the kernel runs the device: the attach thread
 * says it took the socket just before NBD_DO_IT, which sets the device's
 * size, so a swapon right after could find it empty and fail with EINVAL
 * (seen in tests/lendagent: 15 ms after "bridge attached"). Then drops what
 * the kernel cached of it meanwhile (zeros read past the end of an empty
 * device, or a first page read before the swap header went to the lender
 * beside the kernel), so that swapon reads the header itself. */
static void device_running(struct lend_bridge *b)
{
	char line[32];
	for (int i = 0; b->size_path[0] && i < 1000; i++) {
		FILE *f = fopen(b->size_path, "re");
		if (!f)
			break; /* no such device here: nothing to wait for */
		int ok = fgets(line, sizeof line, f) && atoll(line) > 0;
		fclose(f);
		if (ok)
			break;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (b->dev_fd >= 0)
		(void)ioctl(b->dev_fd, BLKFLSBUF, 0);
}

static void *swapon_main(void *arg)
{
	struct lend_bridge *b = arg;
	int flags = SWAP_FLAG_PREFER | ((b->swap_prio << SWAP_FLAG_PRIO_SHIFT) &
	                                SWAP_FLAG_PRIO_MASK);
	device_running(b);
	if (swapon(b->swap, flags) < 0)
		log_error("could not swap to the lent pages",
		          "device=%s why=\"%s\"", b->swap, strerror(errno));
	else
		log_info("swapping to the lent pages", "device=%s priority=%d",
		         b->swap, b->swap_prio);
	return NULL;
}

static void *swapoff_main(void *arg)
{
	struct lend_bridge *b = arg;
	int64_t t0 = clock_mono_ms();
	/* swapoff allocates a page for every page it brings back; its
	 * reclaim must be free to write other pages to local swap (this
	 * device is already out of the kernel's swap list), so this one
	 * thread is no I/O flusher */
	(void)lend_mem_io_flusher(0);
	b->swapoff_rc = swapoff(b->swap);
	b->swapoff_errno = errno;
	/* EINVAL: the device is not (or no longer) swap, e.g. someone ran
	 * swapoff already; no page of ours is on it, so the recall or stop
	 * is done rather than stuck waiting for a swapoff that cannot be */
	if (b->swapoff_rc < 0 && b->swapoff_errno == EINVAL) {
		log_info("the device was not swap: nothing to move back",
		         "device=%s", b->swap);
		b->swapoff_rc = 0;
	}
	log_info("swapoff returned", "device=%s rc=%d ms=%lld why=\"%s\"",
	         b->swap, b->swapoff_rc, (long long)(clock_mono_ms() - t0),
	         b->swapoff_rc == 0 ? "ok" : strerror(b->swapoff_errno));
	wake(b, 'o');
	return NULL;
}

/* Moves the pages back (recall, stop, lender lost). */
static void evacuate(struct lend_bridge *b, const char *why)
{
	if (b->evacuating)
		return;
	b->evacuating = 1;
	log_info("bridge moves the pages back", "why=\"%s\" device=%s", why,
	         b->swap ? b->swap : "none");
	if (!b->swap) {
		/* nothing swaps here (a test client): done at once */
		b->swapoff_rc = 0;
		wake(b, 'o');
		return;
	}
	if (pthread_create(&b->swapoff_thr, NULL, swapoff_main, b) != 0) {
		b->swapoff_rc = -1;
		b->swapoff_errno = EAGAIN;
		wake(b, 'o');
		return;
	}
	b->swapoff_started = 1;
}

static void disconnect(struct lend_bridge *b)
{
	if (b->dev_fd >= 0)
		ioctl(b->dev_fd, NBD_DISCONNECT);
}

/* The device's own count of pages read, written and trimmed since it
 * exists (8 sectors a page; swap moves whole pages): 0, or -1 when it
 * cannot be read. */
static int dev_counts(const struct lend_bridge *b, int64_t n[3])
{
	FILE *f = fopen(b->stat_path, "re");
	long long v[15] = {0};
	int k = 0;
	if (!f)
		return -1;
	while (k < 15 && fscanf(f, "%lld", &v[k]) == 1)
		k++;
	fclose(f);
	if (k < 7)
		return -1;
	n[0] = v[2] / 8;
	n[1] = v[6] / 8;
	n[2] = k >= 14 ? v[13] / 8 : 0;
	return 0;
}

struct lend_meter_report lend_bridge_report(struct lend_bridge *b)
{
	struct lend_meter_report r = lend_client_report(b->client);
	int64_t n[3];
	if (!b->direct || !b->stat_path[0])
		return r;
	/* the pages went nbd.ko <-> lender: the kernel's count of the
	 * device's I/O since this bridge attached it, plus what the control
	 * connection moved (the swap header) */
	if (dev_counts(b, n) == 0) {
		b->dev_reads = n[0] - b->dev_base[0];
		b->dev_writes = n[1] - b->dev_base[1];
		b->dev_trims = n[2] - b->dev_base[2];
	}
	r.page_reads += b->dev_reads;
	r.page_writes += b->dev_writes;
	r.page_trims += b->dev_trims;
	if (b->data_lost)
		r.lost = 1;
	return r;
}

static void tick(struct lend_bridge *b)
{
	if (b->on_tick) {
		struct lend_meter_report r = lend_bridge_report(b);
		b->on_tick(&r, b->arg);
	}
}

/* ---- NBD requests in flight --------------------------------------- */

/* Takes n contiguous free pages of the staging buffer: the first, or -1. */
static int pages_take(struct lend_bridge *b, int n)
{
	for (int i = 0, run = 0; i < (int)LEND_BRIDGE_PAGES; i++) {
		if (i % 64 == 0 && b->used_pages[i / 64] == UINT64_MAX) {
			run = 0;
			i += 63; /* a word of taken pages at once */
			continue;
		}
		if (b->used_pages[i / 64] >> (i % 64) & 1) {
			run = 0;
			continue;
		}
		if (++run < n)
			continue;
		int first = i - n + 1;
		for (int j = first; j <= i; j++)
			b->used_pages[j / 64] |= UINT64_C(1) << (j % 64);
		b->used_count += n;
		return first;
	}
	return -1;
}

static void pages_give(struct lend_bridge *b, int first, int n)
{
	for (int j = first; j < first + n; j++) {
		assert(b->used_pages[j / 64] >> (j % 64) & 1);
		b->used_pages[j / 64] &= ~(UINT64_C(1) << (j % 64));
	}
	b->used_count -= n;
}

static uint8_t *page_at(struct lend_bridge *b, int i)
{
	return b->buf + (size_t)i * LEND_PAGE_SIZE;
}

static void reply(struct lend_bridge *b, uint32_t error, uint64_t handle,
                  const struct iovec *iov, int iovcnt)
{
	if (error)
		b->st.errors++;
	if (!b->nbd_broken &&
	    lend_nbd_reply(b->fd, error, handle, iov, iovcnt) < 0) {
		snprintf(b->err, sizeof b->err,
		         "the NBD client closed the connection");
		b->nbd_broken = 1;
	}
}

/* The last piece of a slot was answered: its reply joins the batch. */
static void slot_finish(struct lend_bridge *b, struct lend_bridge_slot *s)
{
	assert(!s->finished && b->nfin < LEND_BRIDGE_SLOTS);
	if (s->error)
		b->st.errors++;
	lend_nbd_reply_encode(s->rh, s->error, s->handle);
	s->finished = 1;
	b->fin[b->nfin++] = (int)(s - b->slot);
}

/* Sends the batch of replies with one writev and frees their slots and
 * staging pages (only now: a READ's reply data is still in them). */
static void flush_replies(struct lend_bridge *b)
{
	struct iovec v[2 * LEND_BRIDGE_SLOTS];
	int n = 0;
	if (b->nfin == 0)
		return;
	for (int i = 0; i < b->nfin; i++) {
		struct lend_bridge_slot *s = &b->slot[b->fin[i]];
		v[n++] = (struct iovec){s->rh, sizeof s->rh};
		if (s->type == LEND_NBD_CMD_READ && s->error == 0)
			v[n++] = (struct iovec){page_at(b, s->first), s->len};
	}
	if (!b->nbd_broken && lend_nbd_writev_full(b->fd, v, n) < 0) {
		snprintf(b->err, sizeof b->err,
		         "the NBD client closed the connection");
		b->nbd_broken = 1;
	}
	for (int i = 0; i < b->nfin; i++) {
		struct lend_bridge_slot *s = &b->slot[b->fin[i]];
		if (s->npages)
			pages_give(b, s->first, s->npages);
		s->used = s->finished = 0;
		b->slots_used--;
	}
	b->nfin = 0;
}

/* ---- the NBD requests, read ahead --------------------------------- */

static size_t nbd_buffered(const struct lend_bridge *b)
{
	return b->ib_len - b->ib_off;
}

/* Reads what has arrived (without waiting) behind what is buffered. */
static void nbd_fill(struct lend_bridge *b)
{
	memmove(b->ib, b->ib + b->ib_off, nbd_buffered(b));
	b->ib_len -= b->ib_off;
	b->ib_off = 0;
	ssize_t r = recv(b->fd, b->ib + b->ib_len, LEND_BRIDGE_IBUF - b->ib_len,
	                 MSG_DONTWAIT);
	if (r < 0 && errno == ENOTSOCK)
		r = read(b->fd, b->ib + b->ib_len,
		         LEND_BRIDGE_IBUF - b->ib_len);
	if (r > 0)
		b->ib_len += (size_t)r;
	/* EOF or an error: the next exact read says so */
}

/* Exactly n bytes of the NBD stream: the buffered ones, then the socket.
 * Returns 0 or -1. */
static int nbd_in(struct lend_bridge *b, void *dst, size_t n)
{
	size_t k = nbd_buffered(b) < n ? nbd_buffered(b) : n;
	memcpy(dst, b->ib + b->ib_off, k);
	b->ib_off += k;
	return k == n ? 0
	              : lend_nbd_read_full(b->fd, (uint8_t *)dst + k, n - k);
}

/* Drops a WRITE's payload that will not be stored (not through the
 * staging buffer: its pages may belong to requests in flight). */
static int nbd_skip(struct lend_bridge *b, uint32_t len)
{
	uint8_t junk[4096];
	while (len > 0) {
		uint32_t k = len < sizeof junk ? len : (uint32_t)sizeof junk;
		if (nbd_in(b, junk, k) < 0)
			return -1;
		len -= k;
	}
	return 0;
}

static void piece_done(void *arg, uint64_t tag, uint32_t error)
{
	struct lend_bridge *b = arg;
	struct lend_bridge_slot *s = &b->slot[tag];
	assert(s->used && s->pending > 0);
	if (error != LEND_OK)
		s->error = EIO; /* refused or lost: the data is not there */
	if (--s->pending == 0)
		slot_finish(b, s);
}

/* Waits for replies until `cond` holds or the lender is lost; the
 * replies they complete are sent (and their slots freed) on the way. */
#define PUMP_UNTIL(b, cond)                                                    \
	for (flush_replies(b); !(cond) && !(b)->client->lost;                  \
	     flush_replies(b))                                                 \
	(void)lend_client_pump((b)->client, -1)

/*
 * A READ or WRITE longer than the staging buffer: served alone, after
 * everything in flight, through the whole buffer in pieces (the reply's
 * data must follow its header unbroken). Returns 0, or -1 when the NBD
 * connection must end.
 */
static int serve_long(struct lend_bridge *b, const struct lend_nbd_req *q)
{
	struct lend_client *c = b->client;
	uint64_t page = q->off / LEND_PAGE_SIZE;
	uint32_t done = 0, rc = 0;
	PUMP_UNTIL(b, c->inflight == 0);
	assert(b->used_count == 0 || c->lost);
	while (done < q->len) {
		uint32_t n = q->len - done < LEND_BRIDGE_BUF ? q->len - done
		                                             : LEND_BRIDGE_BUF;
		uint32_t pages = n / LEND_PAGE_SIZE;
		if (q->type == LEND_NBD_CMD_WRITE) {
			if (nbd_in(b, b->buf, n) < 0) {
				snprintf(b->err, sizeof b->err,
				         "the NBD client closed the connection "
				         "inside a write's payload");
				return -1;
			}
			/* keep reading after a failure: the payload is part
			 * of the stream */
			if (rc == 0 &&
			    lend_client_write(c, page, pages, b->buf) < 0)
				rc = EIO;
		} else {
			if (lend_client_read(c, page, pages, b->buf) < 0) {
				if (done == 0) {
					reply(b, EIO, q->handle, NULL, 0);
					return b->nbd_broken ? -1 : 0;
				}
				/* the header said success: only closing
				 * the connection can tell the client now */
				snprintf(b->err, sizeof b->err,
				         "a read failed halfway: %.200s",
				         c->err);
				return -1;
			}
			struct iovec v = {b->buf, n};
			if (done == 0)
				reply(b, 0, q->handle, &v, 1);
			else if (!b->nbd_broken &&
			         lend_nbd_reply_data(b->fd, &v, 1) < 0)
				b->nbd_broken = 1;
			if (b->nbd_broken)
				return -1;
		}
		done += n;
		page += pages;
	}
	if (q->type == LEND_NBD_CMD_WRITE)
		reply(b, rc, q->handle, NULL, 0);
	return b->nbd_broken ? -1 : 0;
}

/*
 * Reads one NBD request and sends it on without waiting for the lender.
 * Returns 0, 1 on NBD_CMD_DISC, -1 when the NBD connection must end.
 */
static int serve_nbd(struct lend_bridge *b)
{
	struct lend_client *c = b->client;
	struct lend_nbd_req q;
	uint8_t h[LEND_NBD_REQ_LEN];
	if (nbd_in(b, h, sizeof h) < 0) {
		snprintf(b->err, sizeof b->err,
		         "the NBD client closed the connection");
		return -1;
	}
	if (lend_nbd_req_decode(h, &q) < 0) {
		snprintf(b->err, sizeof b->err,
		         "an NBD request with a bad magic");
		return -1;
	}
	if (q.type == LEND_NBD_CMD_DISC)
		return 1;
	int rc = lend_nbd_req_check(&b->exp, &q);
	switch (q.type) {
	case LEND_NBD_CMD_READ:
		b->st.reads++;
		break;
	case LEND_NBD_CMD_WRITE:
		b->st.writes++;
		break;
	case LEND_NBD_CMD_FLUSH:
		b->st.flushes++;
		break;
	case LEND_NBD_CMD_TRIM:
		b->st.trims++;
		break;
	}
	if (rc < 0) {
		snprintf(b->err, sizeof b->err, "an NBD write of %u bytes",
		         q.len);
		return -1;
	}
	if (rc == 0 && c->lost)
		rc = EIO; /* at once: a lost lender never makes anyone wait */
	/* nothing to do: success (a WRITE of no pages would be a request
	 * the lender refuses, and a refused WRITE ends the stream; found by
	 * fuzz_bridge) */
	if (rc == 0 && q.len == 0 &&
	    (q.type == LEND_NBD_CMD_TRIM || q.type == LEND_NBD_CMD_WRITE))
		rc = -2;
	if (rc != 0) {
		if (q.type == LEND_NBD_CMD_WRITE && nbd_skip(b, q.len) < 0) {
			snprintf(b->err, sizeof b->err,
			         "the NBD client closed the connection inside "
			         "a write's payload");
			return -1;
		}
		reply(b, rc == -2 ? 0 : (uint32_t)rc, q.handle, NULL, 0);
		return b->nbd_broken ? -1 : 0;
	}
	int data = q.type == LEND_NBD_CMD_READ || q.type == LEND_NBD_CMD_WRITE;
	if (data && q.len > LEND_BRIDGE_BUF)
		return serve_long(b, &q);

	/* a slot, and room in the staging buffer: wait for replies that
	 * free some (the loop does not read the NBD socket without a slot,
	 * but the pages may be short) */
	int npages = data ? (int)(q.len / LEND_PAGE_SIZE) : 0, first = -1;
	for (;;) {
		if (b->slots_used < LEND_BRIDGE_SLOTS) {
			if (!npages) {
				first = 0;
				break;
			}
			if ((first = pages_take(b, npages)) >= 0)
				break;
		}
		if (c->lost)
			break;
		/* answered ones hold theirs until their replies are out */
		if (b->nfin > 0) {
			flush_replies(b);
			continue;
		}
		/* slots and pages are held only by requests in flight */
		assert(c->inflight > 0);
		(void)lend_client_pump(c, -1);
	}
	if (c->lost) {
		if (npages && first >= 0)
			pages_give(b, first, npages);
		if (q.type == LEND_NBD_CMD_WRITE && nbd_skip(b, q.len) < 0)
			return -1;
		reply(b, EIO, q.handle, NULL, 0);
		return b->nbd_broken ? -1 : 0;
	}
	int idx = 0;
	while (b->slot[idx].used)
		idx++;
	struct lend_bridge_slot *s = &b->slot[idx];
	*s = (struct lend_bridge_slot){.used = 1,
	                               .type = q.type,
	                               .handle = q.handle,
	                               .len = q.len,
	                               .first = first,
	                               .npages = npages,
	                               .pending = 1};
	if (++b->slots_used > b->slots_peak)
		b->slots_peak = b->slots_used;
	if (q.type == LEND_NBD_CMD_WRITE &&
	    nbd_in(b, page_at(b, first), q.len) < 0) {
		snprintf(b->err, sizeof b->err,
		         "the NBD client closed the connection inside a "
		         "write's payload");
		s->error = EIO;
		b->nbd_broken = 1; /* no reply can reach it */
		if (--s->pending == 0)
			slot_finish(b, s);
		return -1;
	}
	/* a FLUSH is one request of no pages at page 0, whatever its
	 * length and offset say (the lender refuses any other) */
	uint64_t page =
	    q.type == LEND_NBD_CMD_FLUSH ? 0 : q.off / LEND_PAGE_SIZE;
	uint32_t left =
	    q.type == LEND_NBD_CMD_FLUSH ? 0 : q.len / LEND_PAGE_SIZE;
	uint16_t type = q.type == LEND_NBD_CMD_READ    ? LEND_READ
	                : q.type == LEND_NBD_CMD_WRITE ? LEND_WRITE
	                : q.type == LEND_NBD_CMD_TRIM  ? LEND_TRIM
	                                               : LEND_FLUSH;
	int np = 0, at = first;
	do {
		uint32_t n =
		    type == LEND_TRIM ? LEND_MAX_REQ_PAGES : LEND_CLIENT_CHUNK;
		n = left < n ? left : n;
		struct iovec *v = NULL;
		if (data) {
			assert(np < (int)LEND_BRIDGE_PIECES);
			v = &s->piece[np++];
			*v = (struct iovec){page_at(b, at),
			                    (size_t)n * LEND_PAGE_SIZE};
			at += (int)n;
		}
		s->pending++;
		if (lend_client_submit(c, type, page, n, v, v ? 1 : 0,
		                       piece_done, b, (uint64_t)idx) < 0) {
			s->pending--;
			s->error = EIO;
			break;
		}
		page += n;
		left -= n;
	} while (left > 0);
	if (--s->pending == 0)
		slot_finish(b, s);
	return b->nbd_broken ? -1 : 0;
}

enum lend_bridge_end lend_bridge_run(struct lend_bridge *b)
{
	struct lend_client *c = b->client;
	enum lend_bridge_end end = LEND_BRIDGE_DISC;
	/* a meter file from the start: the agent bills from it once there */
	int64_t next_tick = clock_mono_ms();
	int done = 0, was_lost = 0;

	if (b->swap_prio >= 0 && !b->swapon_started &&
	    pthread_create(&b->swapon_thr, NULL, swapon_main, b) == 0)
		b->swapon_started = 1;

	for (;;) {
		int64_t now = clock_mono_ms();
		if (now >= next_tick) {
			tick(b);
			next_tick = now + 1000;
		}
		if (!c->lost && lend_conn_pending(&c->conn) > 0)
			(void)lend_client_poll(c);
		/* a lender that stops answering without closing is lost
		 * like one that closes: the requests in flight get EIO */
		(void)lend_client_expire(c, now);
		if (c->lost && !was_lost) {
			was_lost = 1;
			end = LEND_BRIDGE_LOST;
			evacuate(b, "the lender vanished or stopped answering");
		}
		if (c->notice && !b->evacuating)
			evacuate(b, "the lender recalled its pages");
		/* what the lender answered goes out before any wait */
		flush_replies(b);
		/* replies are due (or NBD requests wait for their turn): keep
		 * a core awake for the wakeups that bring them */
		if (c->inflight > 0 || b->slots_used > 0) {
			lend_awake_busy(&b->awake);
			lend_qos_busy(&b->qos);
		}
		/* idle polling ends a linger after the last request: the
		 * wait below ends by then to release it */
		int64_t rel = lend_qos_idle(&b->qos);
		/* requests already read ahead are served without a wait */
		int ahead = nbd_buffered(b) >= LEND_NBD_REQ_LEN &&
		            b->slots_used < LEND_BRIDGE_SLOTS;
		/* no slot free: leave the NBD requests waiting in the
		 * socket until a reply frees one */
		struct pollfd p[3] = {
		    {.fd = b->slots_used < LEND_BRIDGE_SLOTS ? b->fd : -1,
		     .events = POLLIN},
		    {.fd = b->wake[0], .events = POLLIN},
		    {.fd = c->lost ? -1 : c->conn.fd, .events = POLLIN}};
		int64_t dl = lend_client_deadline_ms(c), until = next_tick;
		if (dl >= 0 && dl < until)
			until = dl;
		if (rel >= 0 && now + rel < until)
			until = now + rel;
		int n =
		    poll(p, 3, until > now && !ahead ? (int)(until - now) : 0);
		if (n < 0 && errno != EINTR) {
			end = LEND_BRIDGE_ERROR;
			break;
		}
		if (n <= 0 && !ahead)
			continue;
		if (p[2].revents) {
			(void)lend_client_poll(c);
			/* the answers first: each frees a slot the NBD
			 * client waits to refill */
			flush_replies(b);
		}
		if (p[1].revents & POLLIN) {
			char ch;
			while (read(b->wake[0], &ch, 1) == 1) {
				if (ch == 's' && !b->stopping) {
					b->stopping = 1;
					evacuate(b, "the bridge was told to "
					            "stop");
				}
				if (ch == 'd' && b->direct) {
					/* the kernel's socket to the lender
					 * closed: after a DISCONNECT the end,
					 * else the lender is lost */
					b->kernel_gone = 1;
					if (b->disconnected) {
						done = 1;
					} else {
						/* pages only the lender had
						 * are gone: no RELEASE for
						 * them, the meter says lost */
						b->data_lost = 1;
						end = LEND_BRIDGE_LOST;
						log_error(
						    "the kernel lost the data "
						    "connection to the lender",
						    "device=%s hint=\"the "
						    "lender "
						    "closed it, or left a "
						    "request "
						    "unanswered past the reply "
						    "timeout\"",
						    b->swap ? b->swap : "none");
						evacuate(
						    b, "the data connection "
						       "to the lender closed");
					}
				}
				if (ch != 'o')
					continue;
				if (b->swapoff_rc != 0) {
					log_error(
					    "could not move the pages back",
					    "device=%s why=\"%s\" hint=\"free "
					    "memory or add local swap; pages "
					    "still on the lender are lost at "
					    "the recall deadline\"",
					    b->swap,
					    strerror(b->swapoff_errno));
					if (!c->lost)
						end = LEND_BRIDGE_FAILED;
					continue;
				}
				if (!c->lost && !b->data_lost) {
					if (lend_client_release(c) == 0)
						end = LEND_BRIDGE_RECALLED;
					else
						end = LEND_BRIDGE_LOST;
				}
				disconnect(b);
				b->disconnected = 1;
				/* a lost lender without a swap device to
				 * retire: keep answering EIO until the NBD
				 * client leaves, so that it never hangs */
				if (b->dev_fd < 0 && !(c->lost && !b->swap))
					done = 1;
				/* direct: the end once the kernel let go */
				if (b->direct && b->kernel_gone)
					done = 1;
			}
		}
		if (done)
			break;
		if (ahead || (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			/* every request one recv brought, to the lender
			 * with one writev */
			int rc;
			if (p[0].revents)
				nbd_fill(b);
			lend_client_cork(c);
			do
				rc = serve_nbd(b);
			while (rc == 0 && !c->lost &&
			       nbd_buffered(b) >= LEND_NBD_REQ_LEN &&
			       b->slots_used < LEND_BRIDGE_SLOTS);
			(void)lend_client_uncork(c);
			if (rc != 0) {
				/* what is in flight is answered first (NBD:
				 * a DISC comes after the last request) */
				PUMP_UNTIL(b, c->inflight == 0);
				if (rc == 1 && !b->nbd_broken)
					break;
				log_warn("NBD connection ended", "why=\"%s\"",
				         b->err);
				if (end == LEND_BRIDGE_DISC)
					end = LEND_BRIDGE_ERROR;
				break;
			}
		}
	}
	flush_replies(b);
	/* whoever is on the NBD side sees the end, never a silent hang */
	if (b->dev_fd < 0 && b->fd >= 0)
		shutdown(b->fd, SHUT_RDWR);
	tick(b);
	return end;
}

void lend_bridge_free(struct lend_bridge *b)
{
	if (b->fd >= 0)
		shutdown(b->fd, SHUT_RDWR);
	if (b->swapon_started)
		pthread_join(b->swapon_thr, NULL);
	if (b->attach_started)
		pthread_join(b->attach_thr, NULL);
	if (b->swapoff_started)
		pthread_join(b->swapoff_thr, NULL);
	b->attach_started = b->swapoff_started = b->swapon_started = 0;
	lend_awake_stop(&b->awake);
	lend_qos_stop(&b->qos);
	int *fds[] = {&b->fd, &b->kernel_fd, &b->dev_fd, &b->wake[0],
	              &b->wake[1]};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	free(b->buf);
	free(b->ib);
	b->buf = NULL;
	b->ib = NULL;
}
