/*
 * sign.h — HMAC-SHA256 request signatures between node agents and ramexd.
 *
 * A node agent signs every request with its per-node secret; ramexd checks the
 * signature, the clock skew and (outside this module) that the nonce is new.
 * The signed text is the canonical string
 *
 *     RAMEX-HMAC-SHA256\n METHOD\n PATH\n TIMESTAMP\n NONCE\n hex(sha256(BODY))
 *
 * (each part followed by one newline, none after the last), where PATH is the
 * request target exactly as sent, query string included, TIMESTAMP is Unix
 * seconds in decimal and NONCE is 16..64 characters of [A-Za-z0-9_-]. The
 * signature travels as lower-case hex in the header SIGN_HDR_SIGNATURE, the
 * other parts in the headers named below. Both sides use this module, so they
 * cannot disagree on the format. Pure apart from sign_nonce (which reads the
 * system's random source); the caller passes `now`.
 */
#ifndef RAMEX_SIGN_H
#define RAMEX_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define SIGN_HDR_KEY       "X-Ramex-Key"       /* the node key id */
#define SIGN_HDR_TIMESTAMP "X-Ramex-Timestamp" /* Unix seconds */
#define SIGN_HDR_NONCE     "X-Ramex-Nonce"
#define SIGN_HDR_SIGNATURE "X-Ramex-Signature" /* 64 lower-case hex digits */

#define SIGN_MAX_SKEW_S 300 /* brief: stale timestamps are refused */
#define SIGN_NONCE_MIN  16
#define SIGN_NONCE_MAX  64
#define SIGN_HEX_LEN    64

struct sign_request {
	const char *method; /* "POST" */
	const char *path;   /* "/v1/orders?x=1", as sent */
	int64_t timestamp;  /* Unix seconds */
	const char *nonce;
	const void *body; /* may be NULL when body_len is 0 */
	size_t body_len;
};

enum sign_result {
	SIGN_OK = 0,
	SIGN_MALFORMED, /* a part is missing or has the wrong shape */
	SIGN_STALE,     /* timestamp outside now ± max_skew */
	SIGN_MISMATCH,  /* signature does not match */
};

/* Writes the canonical string into `out`; returns its length, or -1 when it
 * does not fit or a part is malformed. */
int sign_canonical(const struct sign_request *r, char *out, size_t outlen);

/* Signs `r` with `secret`; writes 64 hex digits and a NUL into `sig_hex`.
 * Returns 0, or -1 when the request is malformed. For clients. */
int sign_compute(const char *secret, const struct sign_request *r,
                 char sig_hex[SIGN_HEX_LEN + 1]);

/* Checks `sig_hex` for `r` against `secret` at time `now` (Unix seconds), in
 * constant time. For the server. `why` gets a reason a person can act on. */
enum sign_result sign_verify(const char *secret, const struct sign_request *r,
                             const char *sig_hex, int64_t now, int64_t max_skew,
                             const char **why);

/* Writes a fresh random nonce of 32 hex digits and a NUL. Returns 0 or -1. */
int sign_nonce(char out[33]);

/* Lower-case hex SHA-256 of `data`. */
void sign_sha256_hex(const void *data, size_t len, char out[SIGN_HEX_LEN + 1]);

#endif
