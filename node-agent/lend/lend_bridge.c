/* lend_bridge.c — NBD export over a lend contract (see the header). */
#include "node-agent/lend/lend_bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nbd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/swap.h>
#include <unistd.h>

#include "common/log.h"
#include "node-agent/lend/lend_mem.h"
#include "node-agent/lend/lend_server.h" /* lend_now_ms */

static int be_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	struct lend_client *c = ctx;
	if (lend_client_read(c, off / LEND_PAGE_SIZE, len / LEND_PAGE_SIZE,
	                     buf) < 0)
		return EIO;
	return 0;
}

static int be_write(void *ctx, uint64_t off, uint32_t len, const void *buf)
{
	struct lend_client *c = ctx;
	if (lend_client_write(c, off / LEND_PAGE_SIZE, len / LEND_PAGE_SIZE,
	                      buf) < 0)
		return EIO;
	return 0;
}

static int be_flush(void *ctx)
{
	return lend_client_flush(ctx) < 0 ? EIO : 0;
}

static int be_trim(void *ctx, uint64_t off, uint32_t len)
{
	struct lend_client *c = ctx;
	if (lend_client_trim(c, off / LEND_PAGE_SIZE, len / LEND_PAGE_SIZE) < 0)
		return EIO;
	return 0;
}

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
	b->buf = malloc(LEND_BRIDGE_BUF);
	if (!b->buf || pipe2(b->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not allocate the bridge: %s", strerror(errno));
		lend_bridge_free(b);
		return -1;
	}
	return 0;
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
	uint64_t size = 0;
	uint16_t tflags = 0;
	char err[160];
	int fd = b->dev_fd;

	b->attach_rc = -1;
	if (lend_nbd_client_handshake(b->kernel_fd, "", &size, &tflags, err,
	                              sizeof err) < 0) {
		log_error("could not negotiate with the bridge", "why=\"%s\"",
		          err);
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
out:
	if (b->attach_rc < 0)
		wake(b, 'f');
	return NULL;
}

int lend_bridge_attach(struct lend_bridge *b, const char *nbd_dev,
                       const char *swap_dev)
{
	int sv[2];
	b->swap = swap_dev;
	b->dev_fd = open(nbd_dev, O_RDWR | O_CLOEXEC);
	if (b->dev_fd < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not open %s: %s (modprobe nbd?)", nbd_dev,
		         strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(b->err, sizeof b->err, "socketpair: %s",
		         strerror(errno));
		return -1;
	}
	b->fd = sv[0];
	b->kernel_fd = sv[1];
	if (pthread_create(&b->attach_thr, NULL, attach_main, b) != 0) {
		snprintf(b->err, sizeof b->err, "could not start a thread");
		return -1;
	}
	b->attach_started = 1;
	if (lend_nbd_server_handshake(b->fd, &b->exp, b->err, sizeof b->err) !=
	    0)
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
	log_info("bridge attached", "device=%s pages=%lld", nbd_dev,
	         (long long)b->client->pages);
	return 0;
}

int lend_bridge_accept(struct lend_bridge *b, int fd)
{
	b->fd = fd;
	int rc = lend_nbd_server_handshake(fd, &b->exp, b->err, sizeof b->err);
	return rc == 0 ? 0 : -1;
}

int lend_bridge_swap(struct lend_bridge *b, int prio)
{
	/* union swap_header of <linux/swap.h>, version 1, native endian */
	uint8_t page[LEND_PAGE_SIZE];
	uint32_t v[3] = {1, (uint32_t)(b->client->pages - 1), 0};
	if (!b->swap || b->client->pages < 10 ||
	    b->client->pages > UINT32_MAX) {
		snprintf(b->err, sizeof b->err,
		         "swap needs an attached device of 10 to 2^32 pages");
		return -1;
	}
	memset(page, 0, sizeof page);
	memcpy(page + 1024, v, sizeof v);
	memcpy(page + LEND_PAGE_SIZE - 10, "SWAPSPACE2", 10);
	if (lend_client_write(b->client, 0, 1, page) < 0) {
		snprintf(b->err, sizeof b->err,
		         "could not write the swap header: %.200s",
		         b->client->err);
		return -1;
	}
	b->swap_prio = prio < 0                     ? 0
	               : prio > SWAP_FLAG_PRIO_MASK ? SWAP_FLAG_PRIO_MASK
	                                            : prio;
	return 0;
}

static void *swapon_main(void *arg)
{
	struct lend_bridge *b = arg;
	int flags = SWAP_FLAG_PREFER | ((b->swap_prio << SWAP_FLAG_PRIO_SHIFT) &
	                                SWAP_FLAG_PRIO_MASK);
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
	int64_t t0 = lend_now_ms();
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
	         b->swap, b->swapoff_rc, (long long)(lend_now_ms() - t0),
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

static void tick(struct lend_bridge *b)
{
	if (b->on_tick) {
		struct lend_meter_report r = lend_client_report(b->client);
		b->on_tick(&r, b->arg);
	}
}

enum lend_bridge_end lend_bridge_run(struct lend_bridge *b)
{
	struct lend_client *c = b->client;
	enum lend_bridge_end end = LEND_BRIDGE_DISC;
	int64_t next_tick = lend_now_ms() + 1000;
	int done = 0, was_lost = 0;

	if (b->swap_prio >= 0 && !b->swapon_started &&
	    pthread_create(&b->swapon_thr, NULL, swapon_main, b) == 0)
		b->swapon_started = 1;

	for (;;) {
		int64_t now = lend_now_ms();
		if (now >= next_tick) {
			tick(b);
			next_tick = now + 1000;
		}
		if (c->lost && !was_lost) {
			was_lost = 1;
			end = LEND_BRIDGE_LOST;
			evacuate(b, "the lender vanished");
		}
		if (!c->lost && lend_conn_pending(&c->conn) > 0)
			(void)lend_client_poll(c);
		if (c->notice && !b->evacuating)
			evacuate(b, "the lender recalled its pages");
		struct pollfd p[3] = {
		    {.fd = b->fd, .events = POLLIN},
		    {.fd = b->wake[0], .events = POLLIN},
		    {.fd = c->lost ? -1 : c->conn.fd, .events = POLLIN}};
		int n = poll(p, 3, (int)(next_tick - now));
		if (n < 0 && errno != EINTR) {
			end = LEND_BRIDGE_ERROR;
			break;
		}
		if (n <= 0)
			continue;
		if (p[2].revents)
			(void)lend_client_poll(c);
		if (p[1].revents & POLLIN) {
			char ch;
			while (read(b->wake[0], &ch, 1) == 1) {
				if (ch == 's' && !b->stopping) {
					b->stopping = 1;
					evacuate(b, "the bridge was told to "
					            "stop");
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
				if (!c->lost) {
					if (lend_client_release(c) == 0)
						end = LEND_BRIDGE_RECALLED;
					else
						end = LEND_BRIDGE_LOST;
				}
				disconnect(b);
				/* a lost lender without a swap device to
				 * retire: keep answering EIO until the NBD
				 * client leaves, so that it never hangs */
				if (b->dev_fd < 0 && !(c->lost && !b->swap))
					done = 1;
			}
		}
		if (done)
			break;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			int rc = lend_nbd_serve_one(
			    b->fd, &b->exp,
			    &(struct lend_nbd_backend){.ctx = c,
			                               .read = be_read,
			                               .write = be_write,
			                               .flush = be_flush,
			                               .trim = be_trim},
			    b->buf, LEND_BRIDGE_BUF, &b->st, b->err,
			    sizeof b->err);
			if (rc == 1)
				break;
			if (rc < 0) {
				log_warn("NBD connection ended", "why=\"%s\"",
				         b->err);
				if (end == LEND_BRIDGE_DISC)
					end = LEND_BRIDGE_ERROR;
				break;
			}
		}
	}
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
	int *fds[] = {&b->fd, &b->kernel_fd, &b->dev_fd, &b->wake[0],
	              &b->wake[1]};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	free(b->buf);
	b->buf = NULL;
}
