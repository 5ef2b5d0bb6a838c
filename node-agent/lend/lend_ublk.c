/* lend_ublk.c — a contract's pages as /dev/ublkbN (see lend_ublk.h). */
#include "node-agent/lend/lend_ublk.h"

#include "common/clock.h"
#include "common/log.h"
#include "node-agent/lend/lend_bridge.h" /* lend_bridge_swap_header */
#include "node-agent/lend/lend_mem.h"
#include "node-agent/lend/lend_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <time.h>
#include <unistd.h>

/* user_data of the queue ring's completions: a tag (< LEND_UBLK_DEPTH)
 * or one of these polls */
#define UD_SOCK (1ull << 32) /* the lender's connection is readable */
#define UD_WAKE (2ull << 32) /* lend_ublk_stop or a helper thread */

#define SECTORS_PER_PAGE (LEND_PAGE_SIZE >> 9)

/* One control command, waited for. Called by one thread at a time: init
 * and free by the caller's, START_DEV and STOP_DEV by their helpers (the
 * stop helper joins the start helper first). Returns the driver's
 * answer (0 or -errno). */
static int ctrl_cmd(struct lend_ublk *u, uint32_t op, void *buf, uint16_t len,
                    uint64_t data0)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ctrl);
	struct io_uring_cqe *cqe;
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof *sqe); /* SQE128: the command inside */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->ctrl_fd;
	sqe->cmd_op = op;
	struct ublksrv_ctrl_cmd *cmd = (void *)sqe->cmd;
	cmd->dev_id = (uint32_t)u->dev_id; /* -1 in ADD_DEV: any free id */
	cmd->queue_id = (uint16_t)-1;
	cmd->addr = (uint64_t)(uintptr_t)buf;
	cmd->len = len;
	cmd->data[0] = data0;
	int rc = io_uring_submit(&u->ctrl);
	if (rc < 0)
		return rc;
	do
		rc = io_uring_wait_cqe(&u->ctrl, &cqe);
	while (rc == -EINTR);
	if (rc < 0)
		return rc;
	rc = cqe->res;
	io_uring_cqe_seen(&u->ctrl, cqe);
	return rc;
}

static void wake(struct lend_ublk *u)
{
	uint64_t one = 1;
	ssize_t w = write(u->wake_fd, &one, sizeof one);
	(void)w; /* a full counter already wakes */
}

int lend_ublk_init(struct lend_ublk *u, struct lend_client *client)
{
	memset(u, 0, sizeof *u);
	u->client = client;
	u->ctrl_fd = u->cdev_fd = u->wake_fd = -1;
	u->dev_id = -1;
	u->swap_prio = -1;
	u->iod = MAP_FAILED;
	u->bufs = MAP_FAILED;
	u->ctrl_fd = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
	if (u->ctrl_fd < 0) {
		snprintf(u->err, sizeof u->err,
		         "cannot open /dev/ublk-control: %s (the kernel needs "
		         "the ublk driver, Linux >= 6.0 with "
		         "CONFIG_BLK_DEV_UBLK: modprobe ublk_drv; and root)",
		         strerror(errno));
		return -1;
	}
	int rc = io_uring_queue_init(4, &u->ctrl, IORING_SETUP_SQE128);
	if (rc < 0) {
		snprintf(
		    u->err, sizeof u->err,
		    "cannot set up io_uring for ublk control: %s (io_uring "
		    "disabled? see /proc/sys/kernel/io_uring_disabled)",
		    strerror(-rc));
		return -1;
	}
	u->ctrl_ring = 1;
	struct ublksrv_ctrl_dev_info info = {
	    .nr_hw_queues = 1,
	    .queue_depth = LEND_UBLK_DEPTH,
	    .max_io_buf_bytes = LEND_UBLK_MAX_IO,
	    .dev_id = (uint32_t)-1,
	};
	rc = ctrl_cmd(u, UBLK_CMD_ADD_DEV, &info, sizeof info, 0);
	if (rc < 0) {
		snprintf(u->err, sizeof u->err,
		         "the ublk driver refused to add a device: %s",
		         strerror(-rc));
		return -1;
	}
	u->added = 1;
	u->dev_id = (int)info.dev_id;
	snprintf(u->dev_path, sizeof u->dev_path, "/dev/ublkb%d", u->dev_id);
	struct ublk_params p = {
	    .len = sizeof p,
	    .types = UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD,
	    .basic =
	        {
	            /* the lender's pages are RAM: a FLUSH makes every
	             * earlier reply final (lend FLUSH) */
	            .attrs = UBLK_ATTR_VOLATILE_CACHE,
	            .logical_bs_shift = 12,
	            .physical_bs_shift = 12,
	            .io_opt_shift = 12,
	            .io_min_shift = 12,
	            .max_sectors = LEND_UBLK_MAX_IO >> 9,
	            .dev_sectors = (uint64_t)client->pages * SECTORS_PER_PAGE,
	        },
	    .discard =
	        {
	            .discard_granularity = LEND_PAGE_SIZE,
	            .max_discard_sectors = LEND_UBLK_MAX_IO >> 9,
	            .max_discard_segments = 1,
	        },
	};
	rc = ctrl_cmd(u, UBLK_CMD_SET_PARAMS, &p, sizeof p, 0);
	if (rc < 0) {
		snprintf(u->err, sizeof u->err,
		         "the ublk driver refused the device's parameters: %s",
		         strerror(-rc));
		return -1;
	}
	/* devtmpfs (or udev) makes the node shortly after ADD_DEV */
	char cdev[32];
	snprintf(cdev, sizeof cdev, "/dev/ublkc%d", u->dev_id);
	for (int i = 0; i < 200 && u->cdev_fd < 0; i++) {
		u->cdev_fd = open(cdev, O_RDWR | O_CLOEXEC);
		if (u->cdev_fd < 0 && errno == ENOENT)
			usleep(10000);
		else if (u->cdev_fd < 0)
			break;
	}
	if (u->cdev_fd < 0) {
		snprintf(u->err, sizeof u->err,
		         "cannot open %s: %s (no devtmpfs or udev to make it?)",
		         cdev, strerror(errno));
		return -1;
	}
	long pg = sysconf(_SC_PAGESIZE);
	u->iod_len = (LEND_UBLK_DEPTH * sizeof(struct ublksrv_io_desc) +
	              (size_t)pg - 1) /
	             (size_t)pg * (size_t)pg;
	u->iod = mmap(NULL, u->iod_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
	              u->cdev_fd, UBLKSRV_CMD_BUF_OFFSET);
	u->bufs =
	    mmap(NULL, (size_t)LEND_UBLK_DEPTH * LEND_UBLK_MAX_IO,
	         PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u->iod == MAP_FAILED || u->bufs == MAP_FAILED) {
		snprintf(u->err, sizeof u->err,
		         "cannot map the request descriptors or buffers: %s",
		         strerror(errno));
		return -1;
	}
	rc = io_uring_queue_init(2 * LEND_UBLK_DEPTH + 8, &u->q, 0);
	if (rc < 0) {
		snprintf(u->err, sizeof u->err,
		         "cannot set up the queue's io_uring: %s",
		         strerror(-rc));
		return -1;
	}
	u->q_ring = 1;
	u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (u->wake_fd < 0) {
		snprintf(u->err, sizeof u->err, "eventfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int lend_ublk_swap(struct lend_ublk *u, int prio)
{
	if (lend_bridge_swap_header(u->client, u->err, sizeof u->err) < 0)
		return -1;
	u->swap_prio = prio < 0                     ? 0
	               : prio > SWAP_FLAG_PRIO_MASK ? SWAP_FLAG_PRIO_MASK
	                                            : prio;
	return 0;
}

static struct io_uring_sqe *q_sqe(struct lend_ublk *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->q);
	if (!sqe) { /* full: hand the queued ones over first */
		(void)io_uring_submit(&u->q);
		sqe = io_uring_get_sqe(&u->q);
	}
	return sqe;
}

/* FETCH_REQ (res unused) or COMMIT_AND_FETCH_REQ of tag with res. */
static void queue_cmd(struct lend_ublk *u, uint32_t op, int tag, int32_t res)
{
	struct io_uring_sqe *sqe = q_sqe(u);
	if (!sqe) { /* cannot happen: one command per tag, room for all */
		log_error("the ublk queue's ring is full", "tag=%d", tag);
		return;
	}
	memset(sqe, 0, sizeof *sqe);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = u->cdev_fd;
	sqe->cmd_op = op;
	struct ublksrv_io_cmd *cmd = (void *)sqe->cmd;
	cmd->q_id = 0;
	cmd->tag = (uint16_t)tag;
	cmd->result = res;
	cmd->addr =
	    (uint64_t)(uintptr_t)(u->bufs + (size_t)tag * LEND_UBLK_MAX_IO);
	io_uring_sqe_set_data64(sqe, (uint64_t)tag);
}

static void arm_poll(struct lend_ublk *u, int fd, uint64_t ud)
{
	struct io_uring_sqe *sqe = q_sqe(u);
	if (!sqe)
		return;
	io_uring_prep_poll_multishot(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud);
}

static void on_done(void *arg, uint64_t tag, uint32_t error)
{
	struct lend_ublk *u = arg;
	u->busy[tag] = 0;
	u->inflight--;
	if (error != LEND_OK) {
		/* the first few said, the rest counted (a lost lender fails
		 * every request in flight) */
		if (u->errors++ < 8)
			log_warn("a request failed at the lender: EIO",
			         "dev=%s tag=%d error=%u", u->dev_path,
			         (int)tag, error);
		u->result[tag] = -EIO;
	}
	queue_cmd(u, UBLK_IO_COMMIT_AND_FETCH_REQ, (int)tag, u->result[tag]);
}

/* One request the driver handed over: one lend request. */
static void serve(struct lend_ublk *u, int tag)
{
	const struct ublksrv_io_desc *d = &u->iod[tag];
	uint8_t op = ublksrv_get_op(d);
	uint64_t page = d->start_sector / SECTORS_PER_PAGE;
	uint32_t count = d->nr_sectors / SECTORS_PER_PAGE;
	/* lend_client keeps the pointer until the reply: the tag's own */
	struct iovec *iov = &u->iov[tag];
	uint16_t type;
	int with_data = 0;
	switch (op) {
	case UBLK_IO_OP_READ:
		type = LEND_READ, with_data = 1, u->reads++;
		break;
	case UBLK_IO_OP_WRITE:
		type = LEND_WRITE, with_data = 1, u->writes++;
		break;
	case UBLK_IO_OP_FLUSH:
		type = LEND_FLUSH, page = 0, count = 0, u->flushes++;
		break;
	case UBLK_IO_OP_DISCARD:
		type = LEND_TRIM, u->trims++;
		break;
	default: /* not announced: write-same, write-zeroes, zoned */
		queue_cmd(u, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, -EOPNOTSUPP);
		return;
	}
	/* 4 KiB logical blocks: the driver sends whole pages only, at most
	 * LEND_UBLK_MAX_IO (max_sectors); anything else is refused */
	if ((d->start_sector | d->nr_sectors) % SECTORS_PER_PAGE ||
	    count > LEND_CLIENT_CHUNK || (type != LEND_FLUSH && !count)) {
		if (u->errors++ < 8)
			log_warn("a request not in whole pages: EINVAL",
			         "dev=%s op=%u sector=%llu sectors=%u",
			         u->dev_path, op,
			         (unsigned long long)d->start_sector,
			         d->nr_sectors);
		queue_cmd(u, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, -EINVAL);
		return;
	}
	iov->iov_base = u->bufs + (size_t)tag * LEND_UBLK_MAX_IO;
	iov->iov_len = (size_t)count * LEND_PAGE_SIZE;
	u->result[tag] = with_data ? (int32_t)iov->iov_len : 0;
	if (u->client->lost) {
		u->errors++;
		queue_cmd(u, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, -EIO);
		return;
	}
	u->busy[tag] = 1;
	u->inflight++;
	if (lend_client_submit(u->client, type, page, count,
	                       with_data ? iov : NULL, with_data, on_done, u,
	                       (uint64_t)tag) < 0) {
		u->busy[tag] = 0;
		u->inflight--;
		u->errors++;
		queue_cmd(u, UBLK_IO_COMMIT_AND_FETCH_REQ, tag, -EIO);
	}
}

static void *start_main(void *arg)
{
	struct lend_ublk *u = arg;
	/* returns once every tag's FETCH is queued and the disk is added,
	 * which reads the partition table through the queue */
	u->start_rc =
	    ctrl_cmd(u, UBLK_CMD_START_DEV, NULL, 0, (uint64_t)getpid());
	/* swapon reads the header through the queue, served meanwhile;
	 * the device is ready (start_done) once it is swap */
	if (u->start_rc == 0 && u->swap_prio >= 0) {
		int flags =
		    SWAP_FLAG_PREFER | ((u->swap_prio << SWAP_FLAG_PRIO_SHIFT) &
		                        SWAP_FLAG_PRIO_MASK);
		if (swapon(u->dev_path, flags) < 0)
			log_error("could not swap to the lent pages",
			          "dev=%s why=\"%s\"", u->dev_path,
			          strerror(errno));
		else
			log_info("swapping to the lent pages",
			         "dev=%s priority=%d", u->dev_path,
			         u->swap_prio);
	}
	u->start_done = 1;
	wake(u);
	return NULL;
}

static void *stop_main(void *arg)
{
	struct lend_ublk *u = arg;
	if (u->start_started)
		pthread_join(u->start_thr, NULL);
	u->start_started = 0;
	/* the kernel flushes and removes the disk: the queue is served
	 * meanwhile */
	u->stop_rc = ctrl_cmd(u, UBLK_CMD_STOP_DEV, NULL, 0, 0);
	u->stop_done = 1;
	wake(u);
	return NULL;
}

static void begin_stop(struct lend_ublk *u, enum lend_ublk_end end,
                       const char *why)
{
	if (u->stopping)
		return;
	u->stopping = 1;
	if (!u->evacuating)
		u->end = end;
	u->evacuating = 1;
	log_info("ublk device stops", "dev=%s why=\"%s\"", u->dev_path, why);
	if (pthread_create(&u->stop_thr, NULL, stop_main, u) == 0)
		u->stop_started = 1;
	else
		u->stop_done = 1; /* cannot stop it: end, free deletes it */
}

static void *swapoff_main(void *arg)
{
	struct lend_ublk *u = arg;
	int64_t t0 = clock_mono_ms();
	/* swapoff allocates a page for every page it brings back; its
	 * reclaim must be free to write other pages to local swap, so this
	 * one thread is no I/O flusher (as the bridge's) */
	(void)lend_mem_io_flusher(0);
	u->swapoff_rc = swapoff(u->dev_path);
	u->swapoff_errno = errno;
	if (u->swapoff_rc < 0 && u->swapoff_errno == EINVAL)
		u->swapoff_rc = 0; /* not swap: nothing of ours to move */
	else
		log_info(
		    "swapoff returned", "dev=%s rc=%d ms=%lld why=\"%s\"",
		    u->dev_path, u->swapoff_rc, (long long)(clock_mono_ms() - t0),
		    u->swapoff_rc == 0 ? "ok" : strerror(u->swapoff_errno));
	u->swapoff_done = 1;
	wake(u);
	return NULL;
}

/* The end begins: the pages move back (swapoff), then the device stops. */
static void evacuate(struct lend_ublk *u, enum lend_ublk_end end,
                     const char *why)
{
	if (u->evacuating)
		return;
	u->evacuating = 1;
	u->end = end;
	log_info("ublk device ends", "dev=%s why=\"%s\"", u->dev_path, why);
	if (!u->start_done || u->start_rc < 0 ||
	    pthread_create(&u->swapoff_thr, NULL, swapoff_main, u) != 0)
		u->swapoff_done = 1; /* never served: never swap */
	else
		u->swapoff_started = 1;
}

static void tick(struct lend_ublk *u)
{
	if (u->on_tick) {
		struct lend_meter_report r = lend_client_report(u->client);
		u->on_tick(&r, u->arg);
	}
}

enum lend_ublk_end lend_ublk_run(struct lend_ublk *u,
                                 void (*ready)(struct lend_ublk *u))
{
	struct lend_client *c = u->client;
	int announced = 0;
	int64_t next_tick = clock_mono_ms();

	for (int t = 0; t < LEND_UBLK_DEPTH; t++)
		queue_cmd(u, UBLK_IO_FETCH_REQ, t, -1);
	arm_poll(u, u->wake_fd, UD_WAKE);
	if (!c->lost)
		arm_poll(u, c->conn.fd, UD_SOCK);
	int rc = io_uring_submit(&u->q);
	if (rc < 0) {
		snprintf(u->err, sizeof u->err,
		         "the ublk driver refused the queue's commands: %s",
		         strerror(-rc));
		return LEND_UBLK_ERROR;
	}
	if (pthread_create(&u->start_thr, NULL, start_main, u) != 0) {
		snprintf(u->err, sizeof u->err, "cannot start a thread");
		return LEND_UBLK_ERROR;
	}
	u->start_started = 1;

	for (;;) {
		int64_t now = clock_mono_ms();
		if (now >= next_tick) {
			tick(u);
			next_tick = now + 1000;
		}
		if (!c->lost && lend_conn_pending(&c->conn) > 0)
			(void)lend_client_poll(c);
		(void)lend_client_expire(c, now);
		if (c->lost)
			evacuate(u, LEND_UBLK_LOST,
			         "the lender vanished or stopped answering");
		if (c->notice)
			evacuate(u, LEND_UBLK_RECALLED,
			         "the lender recalled its pages");
		if (u->stop_asked)
			evacuate(u, LEND_UBLK_STOPPED, "told to stop");
		if (u->swapoff_done && !u->stopping) {
			/* a recall whose pages could not all come back */
			if (u->swapoff_rc < 0 && u->end == LEND_UBLK_RECALLED)
				u->end = LEND_UBLK_FAILED;
			begin_stop(u, u->end, "its pages are off it");
		}
		if (u->start_done && !announced) {
			announced = 1;
			if (u->start_rc < 0) {
				snprintf(u->err, sizeof u->err,
				         "the ublk driver refused to start the "
				         "device: %s",
				         strerror(-u->start_rc));
				begin_stop(u, LEND_UBLK_ERROR, u->err);
			} else {
				log_info("ublk device serves",
				         "dev=%s pages=%lld", u->dev_path,
				         (long long)c->pages);
				if (ready)
					ready(u);
			}
		}
		if (u->stop_done && u->inflight == 0)
			break;
		int64_t until = next_tick, dl = lend_client_deadline_ms(c);
		if (dl >= 0 && dl < until)
			until = dl;
		int64_t wait = until > now ? until - now : 0;
		struct __kernel_timespec ts = {wait / 1000,
		                               (wait % 1000) * 1000000};
		struct io_uring_cqe *cqe;
		rc =
		    io_uring_submit_and_wait_timeout(&u->q, &cqe, 1, &ts, NULL);
		if (rc < 0 && rc != -ETIME && rc != -EINTR) {
			snprintf(u->err, sizeof u->err,
			         "waiting on the ublk queue failed: %s",
			         strerror(-rc));
			begin_stop(u, LEND_UBLK_ERROR, u->err);
		}
		unsigned head, seen = 0;
		lend_client_cork(c);
		io_uring_for_each_cqe(&u->q, head, cqe)
		{
			uint64_t ud = io_uring_cqe_get_data64(cqe);
			int more = cqe->flags & IORING_CQE_F_MORE;
			seen++;
			if (ud == UD_WAKE) {
				uint64_t v;
				ssize_t n = read(u->wake_fd, &v, sizeof v);
				(void)n;
				if (!more)
					arm_poll(u, u->wake_fd, UD_WAKE);
			} else if (ud == UD_SOCK) {
				if (!c->lost)
					(void)lend_client_poll(c);
				if (!more && !c->lost)
					arm_poll(u, c->conn.fd, UD_SOCK);
			} else if (ud < LEND_UBLK_DEPTH) {
				if (cqe->res == UBLK_IO_RES_OK)
					serve(u, (int)ud);
				else if (cqe->res != UBLK_IO_RES_ABORT &&
				         !u->stopping) {
					snprintf(
					    u->err, sizeof u->err,
					    "the ublk driver refused a queue "
					    "command: %s",
					    strerror(-cqe->res));
					begin_stop(u, LEND_UBLK_ERROR, u->err);
				}
			}
		}
		io_uring_cq_advance(&u->q, seen);
		(void)lend_client_uncork(c);
	}
	tick(u);
	if (u->stop_rc < 0)
		log_warn("the ublk driver refused to stop the device",
		         "dev=%s why=\"%s\"", u->dev_path,
		         strerror(-u->stop_rc));
	return u->end;
}

void lend_ublk_stop(struct lend_ublk *u)
{
	u->stop_asked = 1;
	if (u->wake_fd >= 0)
		wake(u);
}

void lend_ublk_free(struct lend_ublk *u)
{
	if (u->swapoff_started)
		pthread_join(u->swapoff_thr, NULL);
	if (u->stop_started)
		pthread_join(u->stop_thr, NULL);
	if (u->start_started && u->start_done)
		pthread_join(u->start_thr, NULL);
	/* the ring's end cancels the commands the driver still holds; the
	 * device is deleted only once its char device is closed */
	if (u->q_ring)
		io_uring_queue_exit(&u->q);
	if (u->iod != MAP_FAILED)
		munmap((void *)u->iod, u->iod_len);
	if (u->cdev_fd >= 0)
		close(u->cdev_fd);
	if (u->added) {
		if (!u->stop_done)
			(void)ctrl_cmd(u, UBLK_CMD_STOP_DEV, NULL, 0, 0);
		int rc = ctrl_cmd(u, UBLK_CMD_DEL_DEV, NULL, 0, 0);
		if (rc < 0)
			log_warn("the ublk driver refused to delete the device",
			         "dev=%s why=\"%s\"", u->dev_path,
			         strerror(-rc));
	}
	if (u->ctrl_ring)
		io_uring_queue_exit(&u->ctrl);
	if (u->ctrl_fd >= 0)
		close(u->ctrl_fd);
	if (u->bufs != MAP_FAILED)
		munmap(u->bufs, (size_t)LEND_UBLK_DEPTH * LEND_UBLK_MAX_IO);
	if (u->wake_fd >= 0)
		close(u->wake_fd);
	u->added = u->ctrl_ring = u->q_ring = 0;
	u->ctrl_fd = u->cdev_fd = u->wake_fd = -1;
}
