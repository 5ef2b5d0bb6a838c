/* lend_proto.c — frame layout and contract authentication (see the header). */
#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_be.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

static const uint8_t hello_magic[8] = {'R', 'A', 'M', 'X', 'L', 'N', 'D', '1'};
static const uint8_t auth_magic[8] = {'R', 'A', 'M', 'X', 'A', 'U', 'T', 'H'};
static const uint8_t authr_magic[8] = {'R', 'A', 'M', 'X',
                                       'A', 'U', 'T', 'R'};


void lend_hello_encode(const struct lend_hello *h, uint8_t out[LEND_HELLO_LEN])
{
	memcpy(out, hello_magic, 8);
	put32(out + 8, h->version);
	put32(out + 12, h->flags);
	memcpy(out + 16, h->server_nonce, LEND_NONCE_LEN);
}

int lend_hello_decode(const uint8_t in[LEND_HELLO_LEN], struct lend_hello *h)
{
	if (memcmp(in, hello_magic, 8) != 0)
		return -1;
	h->version = get32(in + 8);
	h->flags = get32(in + 12);
	memcpy(h->server_nonce, in + 16, LEND_NONCE_LEN);
	return h->version == LEND_VERSION ? 0 : -1;
}

size_t lend_auth_encode(const struct lend_auth *a,
                        uint8_t out[LEND_AUTHR_LEN])
{
	memcpy(out, a->role ? authr_magic : auth_magic, 8);
	put64(out + 8, a->contract);
	memcpy(out + 16, a->client_nonce, LEND_NONCE_LEN);
	memcpy(out + 48, a->mac, LEND_MAC_LEN);
	if (!a->role)
		return LEND_AUTH_LEN;
	put32(out + 80, a->role);
	put32(out + 84, 0);
	return LEND_AUTHR_LEN;
}

int lend_auth_decode(const uint8_t in[LEND_AUTH_LEN], struct lend_auth *a)
{
	int more;
	if (memcmp(in, auth_magic, 8) == 0)
		more = 0;
	else if (memcmp(in, authr_magic, 8) == 0)
		more = 1;
	else
		return -1;
	a->role = LEND_CONN_LEND;
	a->contract = get64(in + 8);
	memcpy(a->client_nonce, in + 16, LEND_NONCE_LEN);
	memcpy(a->mac, in + 48, LEND_MAC_LEN);
	return more;
}

int lend_auth_role_decode(const uint8_t in[LEND_AUTHR_LEN - LEND_AUTH_LEN],
                          struct lend_auth *a)
{
	uint32_t role = get32(in);
	if (get32(in + 4) != 0 ||
	    (role != LEND_CONN_DATA && role != LEND_CONN_CONTROL))
		return -1;
	a->role = role;
	return 0;
}

void lend_welcome_encode(const struct lend_welcome *w,
                         uint8_t out[LEND_WELCOME_LEN])
{
	put32(out, w->status);
	put32(out + 4, 0);
	put64(out + 8, w->pages);
	memcpy(out + 16, w->mac, LEND_MAC_LEN);
}

void lend_welcome_decode(const uint8_t in[LEND_WELCOME_LEN],
                         struct lend_welcome *w)
{
	w->status = get32(in);
	w->pages = get64(in + 8);
	memcpy(w->mac, in + 16, LEND_MAC_LEN);
}

void lend_hdr_encode(const struct lend_hdr *h, int is_reply,
                     uint8_t out[LEND_HDR_LEN])
{
	put32(out, is_reply ? LEND_REP_MAGIC : LEND_REQ_MAGIC);
	put16(out + 4, h->type);
	put16(out + 6, h->flags);
	put64(out + 8, h->handle);
	put64(out + 16, is_reply ? h->extra : h->page);
	put32(out + 24, h->count);
	put32(out + 28, is_reply ? h->error : 0);
}

int lend_hdr_decode(const uint8_t in[LEND_HDR_LEN], int is_reply,
                    struct lend_hdr *h)
{
	memset(h, 0, sizeof *h);
	if (get32(in) != (is_reply ? LEND_REP_MAGIC : LEND_REQ_MAGIC))
		return -1;
	h->type = get16(in + 4);
	h->flags = get16(in + 6);
	h->handle = get64(in + 8);
	if (is_reply)
		h->extra = get64(in + 16);
	else
		h->page = get64(in + 16);
	h->count = get32(in + 24);
	h->error = get32(in + 28);
	return 0;
}

enum lend_err lend_hdr_check(const struct lend_hdr *h, uint64_t pages)
{
	if (h->flags != 0 || h->error != 0)
		return LEND_E_INVAL;
	switch (h->type) {
	case LEND_READ:
	case LEND_WRITE:
	case LEND_TRIM:
		if (h->count == 0 || h->count > LEND_MAX_REQ_PAGES)
			return LEND_E_INVAL;
		/* written so that page + count cannot overflow */
		if (h->page >= pages || h->count > pages - h->page)
			return LEND_E_RANGE;
		return LEND_OK;
	case LEND_FLUSH:
	case LEND_METER:
	case LEND_RELEASE:
	case LEND_BYE:
		return h->count == 0 && h->page == 0 ? LEND_OK : LEND_E_INVAL;
	default:
		return LEND_E_UNSUPPORTED;
	}
}

void lend_mac(enum lend_role role, const uint8_t secret[LEND_SECRET_LEN],
              uint64_t contract, const uint8_t server_nonce[LEND_NONCE_LEN],
              const uint8_t client_nonce[LEND_NONCE_LEN],
              const uint8_t *binding, uint8_t mac[LEND_MAC_LEN])
{
	static const char borrower[] = "ramex-lend-v1 borrower";
	static const char lender[] = "ramex-lend-v1 lender";
	const char *label = role == LEND_BORROWER ? borrower : lender;
	size_t llen = strlen(label);
	uint8_t msg[32 + 8 + 2 * LEND_NONCE_LEN + LEND_BINDING_LEN];
	size_t n = 0;

	assert(llen <= 32);
	memcpy(msg, label, llen);
	n = llen;
	put64(msg + n, contract);
	n += 8;
	memcpy(msg + n, server_nonce, LEND_NONCE_LEN);
	n += LEND_NONCE_LEN;
	memcpy(msg + n, client_nonce, LEND_NONCE_LEN);
	n += LEND_NONCE_LEN;
	if (binding)
		memcpy(msg + n, binding, LEND_BINDING_LEN);
	else
		memset(msg + n, 0, LEND_BINDING_LEN);
	n += LEND_BINDING_LEN;

	unsigned int mlen = LEND_MAC_LEN;
	/* HMAC-SHA256 with a 32-byte key cannot fail short of a broken
	 * libcrypto; a MAC of zeros would fail every comparison anyway */
	if (!HMAC(EVP_sha256(), secret, LEND_SECRET_LEN, msg, n, mac, &mlen))
		memset(mac, 0, LEND_MAC_LEN);
	assert(mlen == LEND_MAC_LEN);
}

int lend_mac_equal(const uint8_t a[LEND_MAC_LEN], const uint8_t b[LEND_MAC_LEN])
{
	return CRYPTO_memcmp(a, b, LEND_MAC_LEN) == 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int lend_secret_parse(const char *hex, uint8_t secret[LEND_SECRET_LEN])
{
	uint8_t tmp[LEND_SECRET_LEN];
	if (!hex || strlen(hex) != 2 * LEND_SECRET_LEN)
		return -1;
	for (int i = 0; i < LEND_SECRET_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		tmp[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(secret, tmp, sizeof tmp);
	return 0;
}

const char *lend_err_str(uint32_t err)
{
	switch (err) {
	case LEND_OK:
		return "ok";
	case LEND_E_RANGE:
		return "page range outside the contract";
	case LEND_E_INVAL:
		return "malformed request";
	case LEND_E_AUTH:
		return "contract authentication failed: wrong secret";
	case LEND_E_CONTRACT:
		return "this lender serves another contract";
	case LEND_E_VERSION:
		return "protocol version not spoken by the lender";
	case LEND_E_RELEASED:
		return "the pages were freed after a recall";
	case LEND_E_UNSUPPORTED:
		return "request type not supported";
	default:
		return "unknown error";
	}
}
