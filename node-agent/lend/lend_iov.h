/*
 * lend_iov.h — iovec bookkeeping for the lending programs' vectored
 * writes: after a write took n bytes, the array starts at the first byte
 * not yet written. Owns nothing. Header-only: a loop of a few lines that
 * lend_conn, lend_client and lend_nbd all need.
 */
#ifndef RAMEX_LEND_IOV_H
#define RAMEX_LEND_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Drops the n bytes written from the front of *iov (and the entries they
 * emptied), moving *iov and *iovcnt on. */
static inline void lend_iov_advance(struct iovec **iov, int *iovcnt, size_t n)
{
	struct iovec *v = *iov;
	int c = *iovcnt;
	while (c > 0 && n >= v->iov_len) {
		n -= v->iov_len;
		v++, c--;
	}
	if (c > 0) {
		v->iov_base = (uint8_t *)v->iov_base + n;
		v->iov_len -= n;
	}
	*iov = v;
	*iovcnt = c;
}

#endif
