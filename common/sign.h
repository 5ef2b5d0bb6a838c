/*
 * sign.h — HMAC-SHA256 request signatures between node agents and ramexd.
 *
 * A node agent signs every request with its per-node secret; ramexd checks the
 * signature, the clock skew and (outside this module) that the nonce is new.
 * The signed text is the canonical request, after AWS SigV4's but without
 * its normalising (nothing is decoded, sorted or re-encoded: the bytes as
 * sent are the bytes signed):
 *
 *     RAMEX-HMAC-SHA256-2\n
 *     METHOD\n                "POST"
 *     PATH\n                  the target up to its first '?', as sent
 *     QUERY\n                 what follows that '?', as sent; "" if none
 *     TIMESTAMP\n             the X-Ramex-Timestamp header, as sent
 *     NONCE\n
 *     hex(sha256(BODY))       (no newline after the last line)
 *
 * PATH and QUERY are the request target exactly as it went on the wire,
 * percent-encoding and all ("%26" stays "%26"); the target is at most
 * SIGN_TARGET_MAX bytes (ramexd answers 414 to a longer one rather than
 * sign a part of it). TIMESTAMP is Unix seconds in decimal digits only (no
 * sign, no leading zero, no spaces) and must be within SIGN_MAX_SKEW_S of
 * the server's clock, before or after. NONCE is 16..64 characters of
 * [A-Za-z0-9_-]. A target that ends in a bare '?' signs as one with no
 * query, and ramexd treats the two alike. The signature travels as
 * lower-case hex in the header SIGN_HDR_SIGNATURE, the other parts in the
 * headers named below. Both sides use this module, so they cannot disagree
 * on the format. Pure apart from sign_nonce (which reads the system's
 * random source); the caller passes `now`.
 */
#ifndef RAMEX_SIGN_H
#define RAMEX_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define SIGN_HDR_KEY       "X-Ramex-Key"       /* the node key id */
#define SIGN_HDR_TIMESTAMP "X-Ramex-Timestamp" /* Unix seconds */
#define SIGN_HDR_NONCE     "X-Ramex-Nonce"
#define SIGN_HDR_SIGNATURE "X-Ramex-Signature" /* 64 lower-case hex digits */

#define SIGN_MAX_SKEW_S 300 /* either way: stale or early are refused */
#define SIGN_TARGET_MAX 2048 /* bytes of a request target, at most */
#define SIGN_TS_DIGITS  12   /* Unix seconds: digits, at most */
#define SIGN_NONCE_MIN  16
#define SIGN_NONCE_MAX  64
#define SIGN_HEX_LEN    64

struct sign_request {
	const char *method; /* "POST" */
	const char *path;   /* the target, "/v1/orders?x=1", as sent */
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

/* Parses a timestamp header: 1..SIGN_TS_DIGITS decimal digits, no sign,
 * no leading zero, nothing else. Returns 0 with *out set, or -1. */
int sign_parse_timestamp(const char *text, int64_t *out);

/* Writes a fresh random nonce of 32 hex digits and a NUL. Returns 0 or -1. */
int sign_nonce(char out[33]);

/* Lower-case hex SHA-256 of `data`. */
void sign_sha256_hex(const void *data, size_t len, char out[SIGN_HEX_LEN + 1]);

#endif
