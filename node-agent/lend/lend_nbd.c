/* lend_nbd.c — NBD handshake and transmission, server and client. */
#include "node-agent/lend/lend_nbd.h"
#include "node-agent/lend/lend_be.h"
#include "node-agent/lend/lend_iov.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define NBDMAGIC      UINT64_C(0x4e42444d41474943)
#define IHAVEOPT      UINT64_C(0x49484156454f5054)
#define OPT_REP_MAGIC UINT64_C(0x0003e889045565a9)
#define REQ_MAGIC     UINT32_C(0x25609513)
#define REP_MAGIC     UINT32_C(0x67446698)

#define FLAG_FIXED_NEWSTYLE (1u << 0)
#define FLAG_NO_ZEROES      (1u << 1)

enum {
	OPT_EXPORT_NAME = 1,
	OPT_ABORT = 2,
	OPT_LIST = 3,
	OPT_INFO = 6,
	OPT_GO = 7,
};
enum {
	REP_ACK = 1,
	REP_SERVER = 2,
	REP_INFO = 3,
};
#define REP_ERR_UNSUP   (UINT32_C(1) << 31 | 1)
#define REP_ERR_INVALID (UINT32_C(1) << 31 | 3)
#define REP_ERR_UNKNOWN (UINT32_C(1) << 31 | 6)
enum { INFO_EXPORT = 0, INFO_BLOCK_SIZE = 3 };


int lend_nbd_read_full(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int lend_nbd_write_full(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int rd(int fd, void *buf, size_t n)
{
	return lend_nbd_read_full(fd, buf, n);
}

static int wr(int fd, const void *buf, size_t n)
{
	return lend_nbd_write_full(fd, buf, n);
}

void lend_nbd_req_encode(uint8_t h[LEND_NBD_REQ_LEN], uint16_t type,
                         uint64_t handle, uint64_t off, uint32_t len)
{
	put32(h, REQ_MAGIC);
	put16(h + 4, 0);
	put16(h + 6, type);
	put64(h + 8, handle);
	put64(h + 16, off);
	put32(h + 24, len);
}

int lend_nbd_reply_decode(const uint8_t r[LEND_NBD_REPLY_LEN],
                          uint32_t *error, uint64_t *handle)
{
	if (get32(r) != REP_MAGIC)
		return -1;
	*error = get32(r + 4);
	*handle = get64(r + 8);
	return 0;
}

static int opt_reply(int fd, uint32_t opt, uint32_t type, const void *data,
                     uint32_t len)
{
	uint8_t h[20];
	put64(h, OPT_REP_MAGIC);
	put32(h + 8, opt);
	put32(h + 12, type);
	put32(h + 16, len);
	if (wr(fd, h, sizeof h) < 0)
		return -1;
	return len ? wr(fd, data, len) : 0;
}

static int name_ok(const struct lend_nbd_export *e, const uint8_t *n,
                   uint32_t len)
{
	return len == 0 ||
	       (strlen(e->name) == len && memcmp(e->name, n, len) == 0);
}

/* NBD_OPT_INFO / NBD_OPT_GO. Returns 1 when GO succeeded, 0 to go on
 * negotiating, -1 when the link failed. */
static int info_or_go(int fd, const struct lend_nbd_export *e, uint32_t opt,
                      const uint8_t *d, uint32_t len)
{
	uint8_t info[12];
	if (len < 6)
		return opt_reply(fd, opt, REP_ERR_INVALID, NULL, 0);
	uint32_t nlen = get32(d);
	if (nlen > len - 6)
		return opt_reply(fd, opt, REP_ERR_INVALID, NULL, 0);
	uint16_t nreq = get16(d + 4 + nlen);
	if ((uint32_t)6 + nlen + 2u * nreq != len)
		return opt_reply(fd, opt, REP_ERR_INVALID, NULL, 0);
	if (!name_ok(e, d + 4, nlen))
		return opt_reply(fd, opt, REP_ERR_UNKNOWN, NULL, 0);
	put16(info, INFO_EXPORT);
	put64(info + 2, e->size);
	put16(info + 10, e->tflags);
	if (opt_reply(fd, opt, REP_INFO, info, 12) < 0)
		return -1;
	/* always sent: every request must be whole 4096-byte pages */
	uint8_t bs[14];
	put16(bs, INFO_BLOCK_SIZE);
	put32(bs + 2, LEND_NBD_BLOCK);    /* minimum */
	put32(bs + 6, LEND_NBD_BLOCK);    /* preferred */
	put32(bs + 10, LEND_NBD_MAX_REQ); /* maximum payload */
	if (opt_reply(fd, opt, REP_INFO, bs, sizeof bs) < 0)
		return -1;
	if (opt_reply(fd, opt, REP_ACK, NULL, 0) < 0)
		return -1;
	return opt == OPT_GO ? 1 : 0;
}

int lend_nbd_server_handshake(int fd, const struct lend_nbd_export *e,
                              char *err, size_t errlen)
{
	uint8_t b[18], d[LEND_NBD_MAX_OPT];
	assert(e->size % LEND_NBD_BLOCK == 0);
	put64(b, NBDMAGIC);
	put64(b + 8, IHAVEOPT);
	put16(b + 16, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
	if (wr(fd, b, 18) < 0 || rd(fd, b, 4) < 0) {
		snprintf(err, errlen, "the NBD client went away");
		return -1;
	}
	uint32_t cflags = get32(b);
	if (cflags & ~(uint32_t)(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)) {
		snprintf(err, errlen, "the NBD client sent unknown flags %#x",
		         cflags);
		return -1;
	}
	int no_zeroes = (cflags & FLAG_NO_ZEROES) != 0;
	for (;;) {
		if (rd(fd, b, 16) < 0) {
			snprintf(err, errlen, "the NBD client went away");
			return -1;
		}
		uint32_t opt = get32(b + 8), len = get32(b + 12);
		if (get64(b) != IHAVEOPT || len > LEND_NBD_MAX_OPT) {
			snprintf(err, errlen,
			         "the NBD client sent a bad option header");
			return -1;
		}
		if (rd(fd, d, len) < 0) {
			snprintf(err, errlen, "the NBD client went away");
			return -1;
		}
		int rc = 0;
		switch (opt) {
		case OPT_EXPORT_NAME: {
			uint8_t r[10 + 124];
			if (!name_ok(e, d, len)) {
				snprintf(err, errlen,
				         "the NBD client asked for an unknown "
				         "export");
				return -1;
			}
			memset(r, 0, sizeof r);
			put64(r, e->size);
			put16(r + 8, e->tflags);
			if (wr(fd, r, no_zeroes ? 10 : sizeof r) < 0)
				return -1;
			return 0;
		}
		case OPT_ABORT:
			(void)opt_reply(fd, opt, REP_ACK, NULL, 0);
			return 1;
		case OPT_LIST: {
			uint8_t r[4 + 256];
			uint32_t n = (uint32_t)strlen(e->name);
			assert(n <= 256);
			if (len != 0) {
				rc = opt_reply(fd, opt, REP_ERR_INVALID, NULL,
				               0);
				break;
			}
			put32(r, n);
			memcpy(r + 4, e->name, n);
			rc = opt_reply(fd, opt, REP_SERVER, r, 4 + n);
			if (rc == 0)
				rc = opt_reply(fd, opt, REP_ACK, NULL, 0);
			break;
		}
		case OPT_INFO:
		case OPT_GO:
			rc = info_or_go(fd, e, opt, d, len);
			if (rc == 1)
				return 0;
			break;
		default:
			/* STARTTLS included: the NBD side is a local socket;
			 * the network hop is the lend protocol's TLS */
			rc = opt_reply(fd, opt, REP_ERR_UNSUP, NULL, 0);
		}
		if (rc < 0) {
			snprintf(err, errlen, "the NBD client went away");
			return -1;
		}
	}
}

static int simple_reply(int fd, uint32_t error, uint64_t handle)
{
	uint8_t r[LEND_NBD_REPLY_LEN];
	lend_nbd_reply_encode(r, error, handle);
	return wr(fd, r, sizeof r);
}

/* Skips a WRITE's payload that will not be stored. */
static int drain(int fd, uint8_t *buf, size_t buflen, uint32_t len)
{
	while (len > 0) {
		size_t n = len < buflen ? len : buflen;
		if (rd(fd, buf, n) < 0)
			return -1;
		len -= (uint32_t)n;
	}
	return 0;
}

int lend_nbd_req_decode(const uint8_t h[LEND_NBD_REQ_LEN],
                        struct lend_nbd_req *q)
{
	if (get32(h) != REQ_MAGIC)
		return -1;
	q->flags = get16(h + 4);
	q->type = get16(h + 6);
	q->handle = get64(h + 8);
	q->off = get64(h + 16);
	q->len = get32(h + 24);
	return 0;
}

int lend_nbd_read_req(int fd, struct lend_nbd_req *q, char *err,
                      size_t errlen)
{
	uint8_t h[LEND_NBD_REQ_LEN];
	if (rd(fd, h, sizeof h) < 0) {
		snprintf(err, errlen, "the NBD client closed the connection");
		return -1;
	}
	if (lend_nbd_req_decode(h, q) < 0) {
		snprintf(err, errlen, "an NBD request with a bad magic");
		return -1;
	}
	return 0;
}

int lend_nbd_writev_full(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		if (iov->iov_len == 0) {
			iov++, iovcnt--;
			continue;
		}
		struct msghdr m = {.msg_iov = iov,
		                   .msg_iovlen = (size_t)(iovcnt < IOV_MAX
		                                              ? iovcnt
		                                              : IOV_MAX)};
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK)
			w = writev(fd, iov, (int)m.msg_iovlen);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		lend_iov_advance(&iov, &iovcnt, (size_t)w);
	}
	return 0;
}

int lend_nbd_req_check(const struct lend_nbd_export *e,
                       const struct lend_nbd_req *q)
{
	int bad = q->off % LEND_NBD_BLOCK || q->len % LEND_NBD_BLOCK ||
	          q->off > e->size || q->len > e->size - q->off;
	switch (q->type) {
	case LEND_NBD_CMD_READ:
		return bad || q->len == 0 || q->len > LEND_NBD_MAX_REQ ? EINVAL
		                                                       : 0;
	case LEND_NBD_CMD_WRITE:
		if (q->len > LEND_NBD_MAX_REQ)
			return -1;
		return bad ? EINVAL : 0;
	case LEND_NBD_CMD_TRIM:
		return bad ? EINVAL : 0;
	case LEND_NBD_CMD_FLUSH:
		return 0;
	}
	return EINVAL;
}

int lend_nbd_reply(int fd, uint32_t error, uint64_t handle,
                   const struct iovec *iov, int iovcnt)
{
	uint8_t r[LEND_NBD_REPLY_LEN];
	struct iovec v[8];
	int n = 1;
	lend_nbd_reply_encode(r, error, handle);
	v[0] = (struct iovec){r, sizeof r};
	assert(iovcnt >= 0 && iovcnt < 8);
	for (int i = 0; i < iovcnt; i++)
		v[n++] = iov[i];
	return lend_nbd_writev_full(fd, v, n);
}

void lend_nbd_reply_encode(uint8_t r[LEND_NBD_REPLY_LEN], uint32_t error,
                           uint64_t handle)
{
	put32(r, REP_MAGIC);
	put32(r + 4, error);
	put64(r + 8, handle);
}

int lend_nbd_reply_data(int fd, const struct iovec *iov, int iovcnt)
{
	for (int i = 0; i < iovcnt; i++)
		if (wr(fd, iov[i].iov_base, iov[i].iov_len) < 0)
			return -1;
	return 0;
}

int lend_nbd_skip(int fd, uint8_t *buf, size_t buflen, uint32_t len)
{
	return drain(fd, buf, buflen, len);
}

int lend_nbd_serve_one(int fd, const struct lend_nbd_export *e,
                       const struct lend_nbd_backend *b, uint8_t *buf,
                       size_t buflen, struct lend_nbd_stats *st, char *err,
                       size_t errlen)
{
	struct lend_nbd_req q;
	assert(buflen >= LEND_NBD_BLOCK && buflen % LEND_NBD_BLOCK == 0);
	if (lend_nbd_read_req(fd, &q, err, errlen) < 0)
		return -1;
	uint16_t type = q.type;
	uint64_t handle = q.handle, off = q.off;
	uint32_t len = q.len;
	int rc = type == LEND_NBD_CMD_DISC ? 0 : lend_nbd_req_check(e, &q);

	switch (type) {
	case LEND_NBD_CMD_DISC:
		return 1;
	case LEND_NBD_CMD_READ:
		st->reads++;
		if (rc != 0)
			break;
		for (uint32_t done = 0; done < len;) {
			uint32_t n =
			    len - done < buflen ? len - done : (uint32_t)buflen;
			rc = b->read(b->ctx, off + done, n, buf);
			if (rc != 0 && done == 0)
				break;
			if (rc != 0) {
				/* the header said success: only closing the
				 * connection can tell the client now */
				snprintf(err, errlen,
				         "a read failed halfway: %s",
				         strerror(rc));
				return -1;
			}
			if ((done == 0 && simple_reply(fd, 0, handle) < 0) ||
			    wr(fd, buf, n) < 0) {
				snprintf(err, errlen,
				         "the NBD client closed the connection "
				         "during a read's reply");
				return -1;
			}
			done += n;
		}
		if (rc == 0)
			return 0;
		break;
	case LEND_NBD_CMD_WRITE:
		st->writes++;
		if (rc < 0) {
			snprintf(err, errlen, "an NBD write of %u bytes", len);
			return -1;
		}
		if (rc != 0) {
			if (drain(fd, buf, buflen, len) < 0) {
				snprintf(err, errlen,
				         "the NBD client closed the connection "
				         "inside a write's payload");
				return -1;
			}
			break;
		}
		for (uint32_t done = 0; done < len;) {
			uint32_t n =
			    len - done < buflen ? len - done : (uint32_t)buflen;
			if (rd(fd, buf, n) < 0) {
				snprintf(err, errlen,
				         "the NBD client closed the connection "
				         "inside a write's payload");
				return -1;
			}
			/* keep reading after a failure: the payload is part
			 * of the stream */
			if (rc == 0)
				rc = b->write(b->ctx, off + done, n, buf);
			done += n;
		}
		break;
	case LEND_NBD_CMD_FLUSH:
		st->flushes++;
		rc = b->flush(b->ctx);
		break;
	case LEND_NBD_CMD_TRIM:
		st->trims++;
		if (rc == 0 && len)
			rc = b->trim(b->ctx, off, len);
		break;
	default:
		rc = EINVAL;
	}
	if (rc != 0)
		st->errors++;
	if (simple_reply(fd, (uint32_t)rc, handle) < 0) {
		snprintf(err, errlen, "the NBD client closed the connection");
		return -1;
	}
	return 0;
}

int lend_nbd_client_handshake(int fd, const char *name, uint64_t *size,
                              uint16_t *tflags, char *err, size_t errlen)
{
	uint8_t b[20 + 14], o[16 + 4 + 256 + 2];
	uint32_t nlen = (uint32_t)strlen(name);
	int have_export = 0;
	if (nlen > 256) {
		snprintf(err, errlen, "export name too long");
		return -1;
	}
	if (rd(fd, b, 18) < 0 || get64(b) != NBDMAGIC ||
	    get64(b + 8) != IHAVEOPT) {
		snprintf(err, errlen, "the peer is not a newstyle NBD server");
		return -1;
	}
	if (!(get16(b + 16) & FLAG_FIXED_NEWSTYLE)) {
		snprintf(err, errlen, "the NBD server is not fixed newstyle");
		return -1;
	}
	put32(b, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
	put64(o, IHAVEOPT);
	put32(o + 8, OPT_GO);
	put32(o + 12, 4 + nlen + 2);
	put32(o + 16, nlen);
	memcpy(o + 20, name, nlen);
	put16(o + 20 + nlen, 0);
	if (wr(fd, b, 4) < 0 || wr(fd, o, 16 + 4 + nlen + 2) < 0)
		goto gone;
	for (;;) {
		if (rd(fd, b, 20) < 0 || get64(b) != OPT_REP_MAGIC)
			goto gone;
		uint32_t type = get32(b + 12), len = get32(b + 16);
		uint8_t d[LEND_NBD_MAX_OPT];
		if (len > sizeof d || rd(fd, d, len) < 0)
			goto gone;
		if (type == REP_ACK) {
			if (!have_export) {
				snprintf(err, errlen,
				         "the NBD server acknowledged GO "
				         "without describing the export");
				return -1;
			}
			return 0;
		}
		if (type & (UINT32_C(1) << 31)) {
			snprintf(err, errlen,
			         "the NBD server refused the export (%#x)",
			         type);
			return -1;
		}
		if (type == REP_INFO && len >= 12 && get16(d) == INFO_EXPORT) {
			*size = get64(d + 2);
			*tflags = get16(d + 10);
			have_export = 1;
		}
	}
gone:
	snprintf(err, errlen, "the NBD server broke the handshake");
	return -1;
}

int lend_nbd_client_cmd(int fd, uint16_t type, uint64_t handle, uint64_t off,
                        uint32_t len, const void *wbuf, void *rbuf,
                        uint32_t *nbd_error)
{
	uint8_t h[LEND_NBD_REQ_LEN], r[LEND_NBD_REPLY_LEN];
	uint64_t got;
	lend_nbd_req_encode(h, type, handle, off, len);
	if (wr(fd, h, sizeof h) < 0)
		return -1;
	if (type == LEND_NBD_CMD_WRITE && wr(fd, wbuf, len) < 0)
		return -1;
	if (type == LEND_NBD_CMD_DISC)
		return 0;
	if (rd(fd, r, sizeof r) < 0 ||
	    lend_nbd_reply_decode(r, nbd_error, &got) < 0 || got != handle)
		return -1;
	if (type == LEND_NBD_CMD_READ && *nbd_error == 0 &&
	    rd(fd, rbuf, len) < 0)
		return -1;
	return 0;
}
