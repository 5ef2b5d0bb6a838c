/*
 * lend_ublk.h — the borrower's ublk server: a contract's pages as the
 * block device /dev/ublkbN, served from this process over io_uring.
 *
 * Owns one ublk device (Linux >= 6.0 with ublk_drv: /dev/ublk-control)
 * with one queue: the control ring (IORING_SETUP_SQE128 uring commands:
 * ADD_DEV, SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV), the queue's ring on
 * /dev/ublkcN, its request descriptors (mmap'd from the driver) and one
 * buffer per tag. Block b of the device is page b of the contract
 * (4 KiB logical blocks, so every request is whole pages). Each request
 * the kernel hands over (FETCH_REQ, then COMMIT_AND_FETCH_REQ per tag) is
 * one lend request sent without waiting (lend_client_submit); the lend
 * requests of one turn of the loop go out with one writev
 * (lend_client_cork) and the answers of one turn go back to the kernel
 * with one io_uring_enter, together with the wait for the next ones: no
 * socket copy between the kernel and this process, unlike NBD.
 *
 * Single-threaded serving (the driver wants every queue command from the
 * task that fetched); three helper threads at most, for what blocks while
 * the queue must be served: START_DEV (the kernel reads the new disk's
 * partition table before it returns), swapoff and STOP_DEV (it flushes
 * the disk).
 *
 * The end (a recall notice, the lender lost, lend_ublk_stop): first
 * swapoff(2) on the device in a helper thread while the queue is served
 * (the kernel moves every page back into memory or lower-priority swap;
 * a device that is not swap has nothing to move), then STOP_DEV. Lender
 * lost: every request in flight and every later one fails with EIO at
 * once, so pages that were only on the lender are gone (a process
 * touching one gets SIGBUS), as with the NBD bridge.
 */
#ifndef RAMEX_LEND_UBLK_H
#define RAMEX_LEND_UBLK_H

#include <liburing.h>
#include <linux/ublk_cmd.h>
#include <pthread.h>
#include <stdint.h>

#include "node-agent/lend/lend_client.h"

#define LEND_UBLK_DEPTH 64 /* requests the kernel may have in flight */
/* the largest request: one lend request (LEND_CLIENT_CHUNK pages) */
#define LEND_UBLK_MAX_IO (LEND_CLIENT_CHUNK * LEND_PAGE_SIZE)

enum lend_ublk_end {
	LEND_UBLK_STOPPED,  /* told to stop (SIGTERM) */
	LEND_UBLK_RECALLED, /* the lender recalled its pages */
	LEND_UBLK_LOST,     /* the lender vanished */
	LEND_UBLK_ERROR,    /* the ublk side broke */
	LEND_UBLK_FAILED,   /* swapoff could not move the pages back */
};

struct lend_ublk {
	struct lend_client *client;
	int ctrl_fd, cdev_fd, dev_id;
	struct io_uring ctrl, q;
	int ctrl_ring, q_ring;             /* set up */
	int added;                         /* ADD_DEV done: DEL_DEV owed */
	const struct ublksrv_io_desc *iod; /* the driver's, by tag */
	size_t iod_len;
	uint8_t *bufs;                     /* LEND_UBLK_MAX_IO per tag */
	int32_t result[LEND_UBLK_DEPTH];   /* a served tag's answer */
	struct iovec iov[LEND_UBLK_DEPTH]; /* its buffer, for lend_client */
	int busy[LEND_UBLK_DEPTH];         /* a lend request in flight */
	int inflight;                      /* tags busy */
	int wake_fd;                       /* eventfd: stop, helpers done */
	pthread_t start_thr, stop_thr, swapoff_thr;
	int start_started, stop_started, swapoff_started;
	volatile int swapoff_done, swapoff_rc, swapoff_errno;
	int evacuating; /* swapoff started (or not needed) */
	int swap_prio;  /* swapon(2) once started, or -1 (lend_ublk_swap) */
	volatile int start_done, stop_done;
	volatile int start_rc, stop_rc; /* 0 or -errno */
	volatile int stop_asked;        /* lend_ublk_stop */
	int stopping;                   /* STOP_DEV sent */
	enum lend_ublk_end end;
	int64_t reads, writes, trims, flushes, errors; /* requests */
	void (*on_tick)(const struct lend_meter_report *r, void *arg);
	void *arg;
	char dev_path[32]; /* /dev/ublkbN */
	char err[240];
};

/*
 * Adds the device for `client` (connected): its size the contract's
 * pages, discard as lend TRIM, a volatile cache flushed by lend FLUSH.
 * Returns 0 with u->dev_path set, or -1 with err (no ublk driver, not
 * root, ...).
 */
int lend_ublk_init(struct lend_ublk *u, struct lend_client *client);
/* Makes the device swap at `prio` (before lend_ublk_run): writes a swap
 * header to page 0 through the lender, and swapon(2) follows START_DEV in
 * its helper thread (swapon reads the device, served meanwhile). Returns
 * 0 or -1 with err. */
int lend_ublk_swap(struct lend_ublk *u, int prio);
/* Serves until the end (see enum lend_ublk_end): starts the device, and
 * `ready` (may be NULL) is called once /dev/ublkbN is there. */
enum lend_ublk_end lend_ublk_run(struct lend_ublk *u,
                                 void (*ready)(struct lend_ublk *u));
/* Async-signal-safe: stop the device and end lend_ublk_run. */
void lend_ublk_stop(struct lend_ublk *u);
/* Deletes the device and frees everything. */
void lend_ublk_free(struct lend_ublk *u);

#endif
