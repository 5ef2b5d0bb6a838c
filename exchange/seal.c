/* seal.c — see seal.h. */
#include "exchange/seal.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IV_LEN    12
#define TAG_LEN   16
#define PLAIN_MAX 80
#define PREFIX    "rxseal1:"

struct seal_key {
	char id[SEAL_KEY_ID_MAX + 1];
	unsigned char key[32];
};

struct seal_keys {
	int n;
	int demo;
	struct seal_key k[SEAL_MAX_KEYS];
};

/* The demo key: public (it is in the source), so it keeps nobody out. It
 * exists so that a test or a first look at ramex needs no key file; the
 * log says at every start that it is in use. */
static const char demo_hex[] =
    "72616d65782d64656d6f2d7365616c2d6b65792d6e6f742d7365637265742121";

static int unhex(const char *s, size_t n, unsigned char *out)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int j = 0; j < 2; j++) {
			char c = s[2 * i + j];
			int d = c >= '0' && c <= '9'   ? c - '0'
			        : c >= 'a' && c <= 'f' ? c - 'a' + 10
			        : c >= 'A' && c <= 'F' ? c - 'A' + 10
			                               : -1;
			if (d < 0)
				return -1;
			v = v * 16 + d;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

static void tohex(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = 0;
}

static int id_ok(const char *s, size_t n)
{
	if (n == 0 || n > SEAL_KEY_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '-'))
			return 0;
	return 1;
}

struct seal_keys *seal_load(const char *path, char *err, size_t errlen)
{
	struct seal_keys *k = calloc(1, sizeof *k);
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!path || !*path) {
		k->n = 1;
		k->demo = 1;
		snprintf(k->k[0].id, sizeof k->k[0].id, SEAL_DEMO_ID);
		unhex(demo_hex, 32, k->k[0].key);
		return k;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen,
		         "seal_key_file %s: cannot open it (%s); make one with "
		         "docs/operations.md, \"Sealing key\"",
		         path, strerror(errno));
		free(k);
		return NULL;
	}
	char line[256];
	int no = 0;
	while (fgets(line, sizeof line, f)) {
		no++;
		line[strcspn(line, "#\r\n")] = 0;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			continue;
		size_t il = strcspn(p, " \t");
		char *h = p + il;
		while (*h == ' ' || *h == '\t')
			h++;
		size_t hl = strcspn(h, " \t");
		if (!id_ok(p, il) || hl != 64 || h[hl] != 0) {
			snprintf(err, errlen,
			         "seal_key_file %s line %d: expected \"KEYID "
			         "HEX\" (an id of 1 to 16 of a-z 0-9 _ -, and "
			         "64 hex digits)",
			         path, no);
			goto fail;
		}
		if (k->n == SEAL_MAX_KEYS) {
			snprintf(err, errlen,
			         "seal_key_file %s: more than %d keys; drop "
			         "the ones no row is sealed with",
			         path, SEAL_MAX_KEYS);
			goto fail;
		}
		struct seal_key *sk = &k->k[k->n];
		memcpy(sk->id, p, il);
		sk->id[il] = 0;
		for (int i = 0; i < k->n; i++)
			if (strcmp(k->k[i].id, sk->id) == 0) {
				snprintf(err, errlen,
				         "seal_key_file %s line %d: key id %s "
				         "is given twice",
				         path, no, sk->id);
				goto fail;
			}
		if (unhex(h, 32, sk->key) < 0) {
			snprintf(err, errlen,
			         "seal_key_file %s line %d: the key is not 64 "
			         "hex digits",
			         path, no);
			goto fail;
		}
		k->n++;
	}
	fclose(f);
	OPENSSL_cleanse(line, sizeof line);
	if (k->n == 0) {
		snprintf(err, errlen, "seal_key_file %s holds no key", path);
		free(k);
		return NULL;
	}
	return k;
fail:
	fclose(f);
	OPENSSL_cleanse(line, sizeof line);
	seal_free(k);
	return NULL;
}

void seal_free(struct seal_keys *k)
{
	if (!k)
		return;
	OPENSSL_cleanse(k, sizeof *k);
	free(k);
}

int seal_is_demo(const struct seal_keys *k)
{
	return k->demo;
}

const char *seal_current_id(const struct seal_keys *k)
{
	return k->k[0].id;
}

int seal_seal(const struct seal_keys *k, const char *plain, const char *aad,
              char out[SEAL_TEXT_MAX])
{
	unsigned char buf[IV_LEN + PLAIN_MAX + TAG_LEN];
	size_t pl = strlen(plain);
	int len = 0, rc = -1;
	if (pl == 0 || pl > PLAIN_MAX || RAND_bytes(buf, IV_LEN) != 1)
		return -1;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	if (!c)
		return -1;
	if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, k->k[0].key, buf) ==
	        1 &&
	    EVP_EncryptUpdate(c, NULL, &len, (const unsigned char *)aad,
	                      (int)strlen(aad)) == 1 &&
	    EVP_EncryptUpdate(c, buf + IV_LEN, &len,
	                      (const unsigned char *)plain, (int)pl) == 1 &&
	    EVP_EncryptFinal_ex(c, buf + IV_LEN + len, &len) == 1 &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN,
	                        buf + IV_LEN + pl) == 1) {
		int n = snprintf(out, SEAL_TEXT_MAX, PREFIX "%s:", k->k[0].id);
		tohex(buf, IV_LEN + pl + TAG_LEN, out + n);
		rc = 0;
	}
	EVP_CIPHER_CTX_free(c);
	return rc;
}

/* The key `sealed` names, and where its hex starts; NULL when none. */
static const struct seal_key *key_of(const struct seal_keys *k,
                                     const char *sealed, const char **hex)
{
	if (strncmp(sealed, PREFIX, strlen(PREFIX)) != 0)
		return NULL;
	const char *id = sealed + strlen(PREFIX);
	const char *colon = strchr(id, ':');
	if (!colon)
		return NULL;
	for (int i = 0; i < k->n; i++)
		if (strlen(k->k[i].id) == (size_t)(colon - id) &&
		    memcmp(k->k[i].id, id, (size_t)(colon - id)) == 0) {
			*hex = colon + 1;
			return &k->k[i];
		}
	return NULL;
}

int seal_open(const struct seal_keys *k, const char *sealed, const char *aad,
              char *out, size_t outlen)
{
	unsigned char buf[IV_LEN + PLAIN_MAX + TAG_LEN];
	const char *hex;
	const struct seal_key *sk = sealed ? key_of(k, sealed, &hex) : NULL;
	if (!sk)
		return -1;
	size_t hl = strlen(hex);
	if (hl % 2 || hl / 2 <= IV_LEN + TAG_LEN || hl / 2 > sizeof buf ||
	    unhex(hex, hl / 2, buf) < 0)
		return -1;
	size_t cl = hl / 2 - IV_LEN - TAG_LEN;
	if (cl + 1 > outlen)
		return -1;
	int len = 0, rc = -1;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	if (!c)
		return -1;
	if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, sk->key, buf) == 1 &&
	    EVP_DecryptUpdate(c, NULL, &len, (const unsigned char *)aad,
	                      (int)strlen(aad)) == 1 &&
	    EVP_DecryptUpdate(c, (unsigned char *)out, &len, buf + IV_LEN,
	                      (int)cl) == 1 &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN,
	                        buf + IV_LEN + cl) == 1 &&
	    EVP_DecryptFinal_ex(c, (unsigned char *)out + len, &len) == 1)
		rc = 0;
	EVP_CIPHER_CTX_free(c);
	if (rc == 0 && memchr(out, 0, cl) == NULL) {
		out[cl] = 0;
	} else {
		OPENSSL_cleanse(out, outlen);
		rc = -1;
	}
	return rc;
}

int seal_is_current(const struct seal_keys *k, const char *sealed)
{
	const char *hex;
	return sealed && key_of(k, sealed, &hex) == &k->k[0];
}

int seal_has_key(const struct seal_keys *k, const char *sealed)
{
	const char *hex;
	return sealed && key_of(k, sealed, &hex) != NULL;
}
