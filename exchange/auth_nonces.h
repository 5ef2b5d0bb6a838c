/*
 * auth_nonces.h — the nonces of signed requests, shared by several ramexd
 * on one database (`shared = 1`) in PostgreSQL's auth_nonces table
 * (0018_shared_state.sql), so that a request taken by one instance and
 * replayed to another is refused there. auth.c checks its own memory first
 * (a replay to the same instance costs no query) and then this store.
 *
 * Cost: a round trip per signed request would cap each waiting thread at
 * one request per round trip. So the store commits in groups, as the
 * writer does: the first thread to ask writes every nonce asked for so far
 * in one INSERT ... ON CONFLICT DO NOTHING RETURNING (a nonce it returns
 * is new; one it does not was taken before, by any instance), and the
 * threads that asked meanwhile wait for that group or write the next one.
 * The session commits with synchronous_commit off: a nonce is visible to
 * every instance as soon as its INSERT returns, but PostgreSQL crashing
 * may forget the last few hundred milliseconds of them (the guarantee and
 * its limits: docs/operations.md, "Several instances").
 *
 * Rows live until their timestamp leaves the replay window (`expires`);
 * a writer deletes the expired ones every AUTH_NONCES_PRUNE_S. Per key
 * the table holds at most what the instances took in the window, each at
 * most nonce_per_key (auth.h). The module owns its connection; any thread
 * may call it.
 */
#ifndef RAMEX_AUTH_NONCES_H
#define RAMEX_AUTH_NONCES_H

#include <stdint.h>

#define AUTH_NONCES_PRUNE_S 10

struct auth_nonces;

/* A store on conninfo (connected at the first use); NULL without memory. */
struct auth_nonces *auth_nonces_new(const char *conninfo);
void auth_nonces_free(struct auth_nonces *s);

/* Takes (key_id, nonce) until `expires` (Unix seconds): 1 when it is new
 * (now recorded), 0 when some instance took it before, -1 when the
 * database could not be asked (the request gets 503). Blocks for one or
 * two group commits. */
int auth_nonces_take(struct auth_nonces *s, const char *key_id,
                     const char *nonce, int64_t expires);

#endif
