/* sign.c — see sign.h. */
#include "common/sign.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void to_hex(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = 0;
}

/* SHA-256 fetched once: SHA256() looks the algorithm up in OpenSSL's
 * provider tables at every call, which was half of what hashing a request
 * cost ramexd (two hashes an order: the bearer token and the request). */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void sign_sha256_hex(const void *data, size_t len, char out[SIGN_HEX_LEN + 1])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	const void *p = data ? data : (const void *)"";
	pthread_once(&sha256_once, sha256_fetch);
	if (!sha256_md || !EVP_Digest(p, len, d, NULL, sha256_md, NULL))
		SHA256(p, len, d);
	to_hex(d, sizeof d, out);
}

static int nonce_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	if (len < SIGN_NONCE_MIN || len > SIGN_NONCE_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int text_ok(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 || *s == 0x7f)
			return 0;
	return 1;
}

int sign_parse_timestamp(const char *text, int64_t *out)
{
	int64_t v = 0;
	size_t n = text ? strlen(text) : 0;
	if (n == 0 || n > SIGN_TS_DIGITS || (n > 1 && text[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (text[i] < '0' || text[i] > '9')
			return -1;
		v = v * 10 + (text[i] - '0');
	}
	*out = v;
	return 0;
}

int sign_canonical(const struct sign_request *r, char *out, size_t outlen)
{
	char body_hex[SIGN_HEX_LEN + 1];
	if (!text_ok(r->method) || !text_ok(r->path) || !nonce_ok(r->nonce) ||
	    strlen(r->path) > SIGN_TARGET_MAX || r->timestamp < 0 ||
	    (r->body_len && !r->body))
		return -1;
	const char *q = strchr(r->path, '?');
	int plen = q ? (int)(q - r->path) : (int)strlen(r->path);
	sign_sha256_hex(r->body, r->body_len, body_hex);
	int n = snprintf(out, outlen,
	                 "RAMEX-HMAC-SHA256-2\n%s\n%.*s\n%s\n%" PRId64
	                 "\n%s\n%s",
	                 r->method, plen, r->path, q ? q + 1 : "",
	                 r->timestamp, r->nonce, body_hex);
	if (n < 0 || (size_t)n >= outlen)
		return -1;
	return n;
}

static int mac(const char *secret, const struct sign_request *r,
               unsigned char d[32])
{
	/* the longest target, a method, the nonce and the hashes */
	char canon[SIGN_TARGET_MAX + 512];
	unsigned int dlen = 32;
	int n = sign_canonical(r, canon, sizeof canon);
	if (n < 0 || !secret || !*secret)
		return -1;
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret),
	          (const unsigned char *)canon, (size_t)n, d, &dlen))
		return -1;
	return 0;
}

int sign_compute(const char *secret, const struct sign_request *r,
                 char sig_hex[SIGN_HEX_LEN + 1])
{
	unsigned char d[32];
	if (mac(secret, r, d) < 0)
		return -1;
	to_hex(d, sizeof d, sig_hex);
	return 0;
}

enum sign_result sign_verify(const char *secret, const struct sign_request *r,
                             const char *sig_hex, int64_t now, int64_t max_skew,
                             const char **why)
{
	unsigned char d[32];
	char want[SIGN_HEX_LEN + 1];
	const char *dummy;
	if (!why)
		why = &dummy;
	if (!sig_hex || strlen(sig_hex) != SIGN_HEX_LEN) {
		*why = "the signature must be 64 lower-case hex digits";
		return SIGN_MALFORMED;
	}
	if (!nonce_ok(r->nonce)) {
		*why =
		    "the nonce must be 16 to 64 characters of A-Z a-z 0-9 _ -";
		return SIGN_MALFORMED;
	}
	if (r->timestamp < now - max_skew || r->timestamp > now + max_skew) {
		*why =
		    "the timestamp is more than 300 s before or after the "
		    "server's clock; check the node's clock (NTP)";
		return SIGN_STALE;
	}
	if (mac(secret, r, d) < 0) {
		*why = "the request cannot be put in canonical form";
		return SIGN_MALFORMED;
	}
	to_hex(d, sizeof d, want);
	if (CRYPTO_memcmp(want, sig_hex, SIGN_HEX_LEN) != 0) {
		*why =
		    "the signature does not match; check the node secret and "
		    "that method, path, query, timestamp, nonce and body are "
		    "signed as sent (the target with its percent-encoding, "
		    "not decoded)";
		return SIGN_MISMATCH;
	}
	*why = "";
	return SIGN_OK;
}

int sign_nonce(char out[33])
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof b) != 1)
		return -1;
	to_hex(b, sizeof b, out);
	return 0;
}
