/*
 * lend_nbd.h — the NBD protocol, both ends, for the borrower's bridge.
 *
 * The borrower's kernel reaches lent pages through its own NBD driver
 * (drivers/block/nbd.c): the bridge program speaks NBD on one side and the
 * lend protocol on the other. This module owns NBD's wire format
 * (NetworkBlockDevice/nbd doc/proto.md): the fixed newstyle handshake
 * (NBD_OPT_EXPORT_NAME, _GO, _INFO, _LIST, _ABORT; anything else gets
 * NBD_REP_ERR_UNSUP) and the transmission phase with simple replies (READ,
 * WRITE, FLUSH, TRIM, DISC). Storage is behind a backend of four calls, so
 * the protocol is tested against memory and used against a lender.
 * Also a minimal client (handshake with NBD_OPT_GO, one command at a time)
 * for tests and for attaching a socket to /dev/nbdX.
 *
 * The export is a whole number of 4096-byte blocks and every request must be
 * 4096-aligned (announced with NBD_INFO_BLOCK_SIZE): each block is one lent
 * page. Blocking I/O on a stream fd (unix socket or 127.0.0.1 TCP).
 */
#ifndef RAMEX_LEND_NBD_H
#define RAMEX_LEND_NBD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define LEND_NBD_BLOCK   4096
#define LEND_NBD_MAX_REQ (32u << 20) /* longest request accepted */
#define LEND_NBD_MAX_OPT 4096        /* longest option data accepted */

/* NBD command types and transmission flags (doc/proto.md). */
enum {
	LEND_NBD_CMD_READ = 0,
	LEND_NBD_CMD_WRITE = 1,
	LEND_NBD_CMD_DISC = 2,
	LEND_NBD_CMD_FLUSH = 3,
	LEND_NBD_CMD_TRIM = 4,
};
#define LEND_NBD_FLAG_HAS_FLAGS  (1u << 0)
#define LEND_NBD_FLAG_SEND_FLUSH (1u << 2)
#define LEND_NBD_FLAG_SEND_FUA   (1u << 3)
#define LEND_NBD_FLAG_SEND_TRIM  (1u << 5)
#define LEND_NBD_TFLAGS                                                        \
	(LEND_NBD_FLAG_HAS_FLAGS | LEND_NBD_FLAG_SEND_FLUSH |                  \
	 LEND_NBD_FLAG_SEND_FUA | LEND_NBD_FLAG_SEND_TRIM)

/* Storage behind the export. Each call returns 0 or an errno value (EIO,
 * ENOSPC, ...) that goes back to the NBD client as the reply's error. */
struct lend_nbd_backend {
	void *ctx;
	int (*read)(void *ctx, uint64_t off, uint32_t len, void *buf);
	int (*write)(void *ctx, uint64_t off, uint32_t len, const void *buf);
	int (*flush)(void *ctx);
	int (*trim)(void *ctx, uint64_t off, uint32_t len);
};

struct lend_nbd_export {
	const char *name; /* the client may also ask for "" (the default) */
	uint64_t size;    /* bytes, a multiple of LEND_NBD_BLOCK */
	uint16_t tflags;  /* LEND_NBD_TFLAGS */
};

struct lend_nbd_stats {
	int64_t reads, writes, trims, flushes; /* requests */
	int64_t errors;                        /* replies with an error */
};

/* Server handshake. Returns 0 when transmission begins, 1 when the client
 * aborted, -1 with err set when the client broke the protocol. */
int lend_nbd_server_handshake(int fd, const struct lend_nbd_export *e,
                              char *err, size_t errlen);

/*
 * Reads and answers one request. buf (buflen a multiple of LEND_NBD_BLOCK)
 * is the staging area; longer requests go through it in pieces. Returns 0,
 * 1 on NBD_CMD_DISC, -1 when the connection must be dropped (err set).
 */
int lend_nbd_serve_one(int fd, const struct lend_nbd_export *e,
                       const struct lend_nbd_backend *b, uint8_t *buf,
                       size_t buflen, struct lend_nbd_stats *st, char *err,
                       size_t errlen);

/*
 * The pieces of the transmission phase, for a server that keeps many
 * requests in flight (lend_bridge): the kernel's nbd driver sends requests
 * with distinct handles on one socket without waiting, and takes the
 * replies in any order.
 */
struct lend_nbd_req {
	uint16_t flags, type;
	uint64_t handle, off;
	uint32_t len;
};
/* Reads one request header. Returns 0, or -1 with err set (the client
 * closed, or a bad magic). */
int lend_nbd_read_req(int fd, struct lend_nbd_req *q, char *err,
                      size_t errlen);
/*
 * Checks a READ, WRITE, FLUSH or TRIM against the export: 0, EINVAL
 * (unaligned, outside, an empty or too long READ, an unknown type: answer
 * with it; a WRITE's payload must still be read and dropped), or -1 for a
 * WRITE longer than LEND_NBD_MAX_REQ (drop the connection: nobody reads
 * that much to throw it away).
 */
int lend_nbd_req_check(const struct lend_nbd_export *e,
                       const struct lend_nbd_req *q);
/* Reads and drops len bytes through buf. Returns 0 or -1. */
int lend_nbd_skip(int fd, uint8_t *buf, size_t buflen, uint32_t len);
/* A simple reply and, for a successful READ, its data, with one writev.
 * Returns 0 or -1 when the client is gone. */
int lend_nbd_reply(int fd, uint32_t error, uint64_t handle,
                   const struct iovec *iov, int iovcnt);

/* More of a READ reply's data, after lend_nbd_reply sent the first part.
 * Returns 0 or -1. */
int lend_nbd_reply_data(int fd, const struct iovec *iov, int iovcnt);

/*
 * The byte-level pieces, for anyone who speaks NBD on a stream fd (the
 * bridge, the bench's pipelined client, the tests): exact reads and
 * writes that retry on EINTR and short transfers, a request header and a
 * simple reply header.
 */
#define LEND_NBD_REQ_LEN   28
#define LEND_NBD_REPLY_LEN 16
/* Reads exactly n bytes. Returns 0, or -1 at EOF or on an error. */
int lend_nbd_read_full(int fd, void *buf, size_t n);
/* Writes exactly n bytes (no SIGPIPE on a socket). Returns 0 or -1. */
int lend_nbd_write_full(int fd, const void *buf, size_t n);
void lend_nbd_req_encode(uint8_t h[LEND_NBD_REQ_LEN], uint16_t type,
                         uint64_t handle, uint64_t off, uint32_t len);
/* Decodes a request header. Returns 0, or -1 on a bad magic. */
int lend_nbd_req_decode(const uint8_t h[LEND_NBD_REQ_LEN],
                        struct lend_nbd_req *q);
/* Writes every byte of iov (any iovcnt; short writes continued). The
 * array is consumed. Returns 0 or -1. */
int lend_nbd_writev_full(int fd, struct iovec *iov, int iovcnt);
void lend_nbd_reply_encode(uint8_t r[LEND_NBD_REPLY_LEN], uint32_t error,
                           uint64_t handle);
/* Returns 0 with the reply's error and handle, or -1 on a bad magic. */
int lend_nbd_reply_decode(const uint8_t r[LEND_NBD_REPLY_LEN],
                          uint32_t *error, uint64_t *handle);

/* Client handshake with NBD_OPT_GO for `name`. Returns 0 with the export's
 * size and transmission flags, or -1 with err set. */
int lend_nbd_client_handshake(int fd, const char *name, uint64_t *size,
                              uint16_t *tflags, char *err, size_t errlen);

/* One command; wbuf for WRITE, rbuf for READ (len bytes). Returns 0 when a
 * reply came (*nbd_error is its error, 0 = success), -1 when the link
 * failed. */
int lend_nbd_client_cmd(int fd, uint16_t type, uint64_t handle, uint64_t off,
                        uint32_t len, const void *wbuf, void *rbuf,
                        uint32_t *nbd_error);

#endif
