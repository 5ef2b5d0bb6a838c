/*
 * lend_bridge.h — the borrower's bridge: an NBD export whose blocks are the
 * pages a lender holds.
 *
 * Owns the NBD side (a connected stream: a socketpair whose other end it
 * hands to the kernel's nbd driver, or a client accepted on 127.0.0.1 / a
 * unix socket) and drives a lend_client for every request: block b of the
 * export is page b of the contract. Single-threaded serving; two helper
 * threads at most: one blocked in NBD_DO_IT while the kernel uses
 * /dev/nbdX, one running swapoff(2) to move the pages back.
 *
 * Many requests in flight: the kernel's nbd driver sends requests with
 * distinct handles without waiting for replies. The bridge reads each one
 * as it comes, stages a WRITE's data (or room for a READ's) in a 2 MiB
 * buffer, and sends it on as lend requests without waiting
 * (lend_client_submit); each reply completes its piece, and the NBD reply
 * goes out, header and data in one writev, as soon as the last piece of
 * its request is answered: in the order the lender answers, not the order
 * the requests came. Both sides batch: the requests that one recv brought
 * go to the lender with one writev (lend_client_cork), and the replies
 * that one read of the lender's socket completed go to the NBD client
 * with one writev. A request longer than the staging buffer (the kernel
 * sends at most 1.25 MiB unless told otherwise) waits for everything in
 * flight and is then served alone, in pieces. Lender lost: every request
 * in flight and every later one is answered EIO.
 *
 * Recall (docs/lending.md): on the lender's NOTICE the bridge calls
 * swapoff(2) on the device in a helper thread while it keeps serving the
 * reads that swapoff causes; the kernel moves every page back into memory,
 * or into lower-priority local swap when memory is short. When swapoff
 * returns the bridge sends RELEASE, disconnects the device and ends.
 * Lender lost: every request fails with EIO at once (no hang), and the
 * bridge swaps the device off so the kernel stops using it; pages that were
 * only on the lender are gone, and a process touching one gets SIGBUS.
 *
 * Direct (lend_bridge_attach_direct, docs/lending.md): the kernel's nbd
 * driver gets the lender's DATA connection itself (lend_proto.h), so pages
 * go nbd.ko <-> lender with no process between; the bridge keeps the
 * CONTROL connection (its lend_client) and the same loop: NOTICE ->
 * swapoff -> RELEASE -> NBD_DISCONNECT; the lender lost (control lost, or
 * the kernel's socket closed: NBD_DO_IT returned without a DISCONNECT)
 * -> the device retired as above. The kernel fails requests a silent
 * lender leaves unanswered past NBD_SET_TIMEOUT with EIO. The meter is the
 * control connection's (hosted time) plus the device's counts from
 * /sys/block/nbdX/stat. Plain TCP only: nbd.ko cannot speak TLS.
 */
#ifndef RAMEX_LEND_BRIDGE_H
#define RAMEX_LEND_BRIDGE_H

#include <pthread.h>
#include <stdint.h>

#include "node-agent/lend/lend_awake.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_qos.h"

#define LEND_BRIDGE_BUF   (2u << 20) /* staging: NBD requests in flight */
#define LEND_BRIDGE_PAGES (LEND_BRIDGE_BUF / LEND_PAGE_SIZE)
#define LEND_BRIDGE_SLOTS 128 /* NBD requests in flight (nbd.ko's depth) */
#define LEND_BRIDGE_PIECES                                                     \
	(LEND_BRIDGE_PAGES / LEND_CLIENT_CHUNK) /* lend requests per slot */

/* One NBD request in flight: its pages in the staging buffer, and the
 * lend requests it became (pieces of LEND_CLIENT_CHUNK pages). */
struct lend_bridge_slot {
	int used;
	uint16_t type;
	uint64_t handle; /* the NBD client's */
	uint32_t len;
	int first, npages; /* in the staging buffer */
	int pending;       /* pieces unanswered (+1 while submitting) */
	uint32_t error;    /* errno for the NBD reply, 0 = success */
	int finished;      /* answered; its reply waits in the batch */
	uint8_t rh[16];    /* that reply's header */
	struct iovec piece[LEND_BRIDGE_PIECES];
};

#define LEND_BRIDGE_IBUF (64u << 10) /* NBD requests read ahead */

enum lend_bridge_end {
	LEND_BRIDGE_DISC,     /* the NBD client disconnected */
	LEND_BRIDGE_RECALLED, /* pages moved back and released in time */
	LEND_BRIDGE_LOST,     /* the lender vanished */
	LEND_BRIDGE_FAILED,   /* recall could not move the pages back */
	LEND_BRIDGE_ERROR,    /* the NBD side broke */
};

/* ramex-lend-nbd's exit status for each end (its supervisor, the agent,
 * acts on them: a lost lender ends the contract) */
#define LEND_EXIT_OK     0 /* recalled or disconnected */
#define LEND_EXIT_ERROR  1
#define LEND_EXIT_LOST   3
#define LEND_EXIT_FAILED 4

struct lend_bridge {
	struct lend_client *client;
	struct lend_nbd_export exp;
	struct lend_nbd_stats st;
	uint8_t *buf; /* staging buffer, LEND_BRIDGE_BUF */
	uint64_t used_pages[LEND_BRIDGE_PAGES / 64]; /* its pages taken */
	int used_count;
	struct lend_bridge_slot slot[LEND_BRIDGE_SLOTS];
	int slots_used;
	int slots_peak; /* most NBD requests in flight at once */
	/* answered slots whose replies go out together (one writev per
	 * turn of the loop, or before any wait) */
	int fin[LEND_BRIDGE_SLOTS], nfin;
	/* NBD requests read ahead: one recv takes many headers */
	uint8_t *ib;
	size_t ib_off, ib_len;
	int nbd_broken;   /* a reply could not be sent: the NBD side is gone */
	int fd;           /* NBD stream, server end */
	int dev_fd;       /* /dev/nbdX when attached, else -1 */
	const char *swap; /* device to swapoff on recall/loss, or NULL */
	int wake[2];      /* helper threads and signals write here */
	pthread_t attach_thr, swapoff_thr;
	int attach_started, swapoff_started;
	int attach_rc; /* 0, or -1 when the kernel refused the socket */
	int kernel_fd; /* socketpair end given to the kernel */
	volatile int swapoff_rc, swapoff_errno;
	int evacuating; /* swapoff running or done */
	int swap_prio;  /* swapon priority, or -1 to leave swapon to others */
	pthread_t swapon_thr;
	int swapon_started;
	int stopping;
	/* direct: nbd.ko holds the lender's DATA socket (kernel_fd) */
	int direct, timeout_s;
	int disconnected; /* NBD_DISCONNECT sent */
	int kernel_gone;  /* NBD_DO_IT returned */
	int data_lost;    /* ... before a DISCONNECT: the lender is lost */
	char stat_path[96];
	char size_path[96]; /* /sys/block/nbdX/size once attached */
	int64_t dev_reads, dev_writes, dev_trims; /* pages, from stat */
	int64_t dev_base[3]; /* stat's reads, writes, trims at the attach */
	/* cores kept out of idle while requests are in flight (off
	 * unless lend_bridge_keep_awake asked for threads) */
	struct lend_awake awake;
	/* the CPU latency request held at 0 µs while requests are in
	 * flight (off unless lend_bridge_idle_poll turned it on) */
	struct lend_qos qos;
	void (*on_tick)(const struct lend_meter_report *r, void *arg);
	void *arg;
	char err[240];
};

/* An NBD export over `client` (connected). Returns 0 or -1 with err. */
int lend_bridge_init(struct lend_bridge *b, struct lend_client *client,
                     const char *export_name);
/* Starts `threads` lend_awake spinners (lend_awake.h) that keep cores out
 * of idle while requests are in flight; 0 leaves them off. Returns 0, or
 * -1 with err. */
int lend_bridge_keep_awake(struct lend_bridge *b, int threads);
/* Idle polling (lend_qos.h): idle cores poll instead of halting while
 * requests are in flight. `path` is the latency device (NULL: the
 * kernel's). Returns 0, or -1 when it cannot be had (logged, and the
 * reason in b->qos.err): the bridge works on without it. */
int lend_bridge_idle_poll(struct lend_bridge *b, const char *path);
/*
 * Connects the export to the kernel's /dev/nbdX (NBD handshake over a
 * socketpair, then NBD_SET_SOCK / NBD_DO_IT in a helper thread). swap_dev is
 * what swapoff(2) gets on recall (normally the same device). Returns 0, or
 * -1 with err set.
 */
int lend_bridge_attach(struct lend_bridge *b, const char *nbd_dev,
                       const char *swap_dev);
/*
 * The direct path: hands the kernel's /dev/nbdX the lender's DATA
 * connection (data_fd, plain TCP, in transmission; kept open until
 * lend_bridge_free) with the contract's size, TRIM and FLUSH, and
 * NBD_SET_TIMEOUT timeout_s (0: none); NBD_DO_IT runs in a helper thread.
 * The bridge's client is then the CONTROL connection. Returns 0, or -1
 * with err set.
 */
int lend_bridge_attach_direct(struct lend_bridge *b, const char *nbd_dev,
                              const char *swap_dev, int data_fd, int timeout_s);
/* The borrower's meter: the client's, and in direct mode the device's
 * page counts from /sys/block/nbdX/stat added. */
struct lend_meter_report lend_bridge_report(struct lend_bridge *b);
/*
 * Makes the attached device swap with `prio` (call before lend_bridge_run,
 * after lend_bridge_attach): writes a swap header to page 0 through the
 * lender (what mkswap would write) and, once serving, calls swapon(2) in a
 * helper thread, since swapon reads the device through this bridge.
 * Returns 0 or -1 with err.
 */
int lend_bridge_swap(struct lend_bridge *b, int prio);
/* Writes a swap header (what mkswap would write: version 1, the
 * contract's pages) to page 0 through c; ramex-lend-ublk's too. Returns 0
 * or -1 with err. */
int lend_bridge_swap_header(struct lend_client *c, char *err, size_t errlen);
/* Serves an NBD client already connected on fd (runs the handshake). */
int lend_bridge_accept(struct lend_bridge *b, int fd);
/* Serves until the end; see enum lend_bridge_end. */
enum lend_bridge_end lend_bridge_run(struct lend_bridge *b);
/* Async-signal-safe: move the pages back and release, as on a recall. */
void lend_bridge_stop(struct lend_bridge *b);
void lend_bridge_free(struct lend_bridge *b);

#endif
