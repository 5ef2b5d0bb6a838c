/*
 * seal.h — secrets at rest: node HMAC secrets and lend-contract secrets are
 * kept in PostgreSQL sealed with AES-256-GCM under a key that only ramexd's
 * key file holds, so that a database dump, a backup or a read replica
 * cannot sign as a node or speak a lend contract's protocol.
 *
 * A sealed secret is the text "rxseal1:KEYID:HEX", HEX being the 12-byte
 * IV, the ciphertext and the 16-byte tag. The associated data names the row
 * the secret belongs to ("node_key:nk_..." or "lend:ID"), so that a sealed
 * value copied into another row does not open there.
 *
 * The key file (setting seal_key_file) holds one key a line, "KEYID HEX",
 * HEX being 64 hex digits (32 random bytes), '#' starting a comment. The
 * first key seals; every key opens, which is how a key is rotated: put the
 * new one first, restart (ramexd reseals every row under it at start), then
 * drop the old one (docs/operations.md). With no key file ramexd uses a
 * built-in demo key, which protects nothing, and says so in its log.
 *
 * The module owns the keys; it does no I/O apart from reading the file.
 */
#ifndef RAMEX_SEAL_H
#define RAMEX_SEAL_H

#include <stddef.h>

#define SEAL_MAX_KEYS   8
#define SEAL_KEY_ID_MAX 16
#define SEAL_DEMO_ID    "demo"
/* "rxseal1:" + id + ":" + hex(12 + 80 + 16) + NUL: room for an 80-byte
 * secret, more than node (68) and lend (64) secrets need */
#define SEAL_TEXT_MAX 256

struct seal_keys;

/* Reads the key file at `path`; "" for the demo key. NULL with a message
 * naming the file and line on failure. */
struct seal_keys *seal_load(const char *path, char *err, size_t errlen);
void seal_free(struct seal_keys *k);
/* 1 when the keys are the built-in demo key. */
int seal_is_demo(const struct seal_keys *k);
/* The id of the key that seals. */
const char *seal_current_id(const struct seal_keys *k);

/* Seals `plain` (NUL-terminated, at most 80 bytes) for the row `aad` into
 * out. Returns 0 or -1. */
int seal_seal(const struct seal_keys *k, const char *plain, const char *aad,
              char out[SEAL_TEXT_MAX]);

/* Opens `sealed` for the row `aad` into out (NUL-terminated). Returns 0,
 * or -1 when its key is not in the file, it was sealed for another row, or
 * it was changed. */
int seal_open(const struct seal_keys *k, const char *sealed, const char *aad,
              char *out, size_t outlen);

/* 1 when the key that sealed `sealed` is in the file. */
int seal_has_key(const struct seal_keys *k, const char *sealed);

/* 1 when `sealed` is sealed under the current key (no reseal needed). */
int seal_is_current(const struct seal_keys *k, const char *sealed);

#endif
