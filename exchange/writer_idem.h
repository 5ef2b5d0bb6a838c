/*
 * writer_idem.h — what the writer looks up before it applies a batch, on
 * its lookup connection (which sees only what has committed): the stored
 * answers of idempotency keys and the orders of client order ids (a retry
 * gets its first answer again, with nothing done twice), and accounts the
 * writer has not cached yet. Also the filter of every key the database may
 * hold (exchange/core/keyfilter.h), filled by a loader thread at start, so
 * that a batch of fresh keys, the usual case, costs no query.
 *
 * An order placed with a client order id stores no answer for it: its
 * order row says it was placed, and that row, its trades and their
 * contracts rebuild the first answer exactly (0007_order_path.sql);
 * refusals are stored as answers (idem_store).
 *
 * Only the writer's thread calls these, but the loader thread, which
 * publishes `loaded` once (atomically).
 */
#ifndef RAMEX_WRITER_IDEM_H
#define RAMEX_WRITER_IDEM_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/writer_apply.h"
#include "exchange/writer_rows.h"

struct writer_cmd;
struct keyfilter;

struct idem {
	char conninfo[512]; /* for the loader's own connection */
	PGconn *lconn;      /* lookups (made by writer.c, idem_prepare'd) */
	bool lookup_lost;   /* the last failed lookup lost lconn (closed) */
	/* every idempotency key and client order id the database may hold:
	 * those it held when ramexd started, read by the loader thread
	 * (`loaded`, NULL until it is done), and those the writer wrote since
	 * (`known`); a key in neither needs no lookup */
	struct keyfilter *known;
	struct keyfilter *loaded;
	pthread_t loader;
	bool loader_started;
	int loader_stop; /* atomic */
};

/* The hashes of the idempotency keys of one batch. */
struct idem_keys {
	uint64_t *h;
	size_t n, cap;
};
void idem_keys_add(struct idem_keys *k, uint64_t h);

/* Makes the filter of keys written; -1 without memory. */
int idem_init(struct idem *ix, const char *conninfo, char *err, size_t errlen);
/* Starts the loader thread (without it every key is looked up). */
void idem_start_loader(struct idem *ix);
/* Another writer wrote keys this one never saw: a market taken over from
 * another instance (owner.h), whose orders' client order ids may be
 * retried here. The loaded filter is read again, every key looked up
 * meanwhile. */
void idem_reload(struct idem *ix);
/* Stops the loader, frees the filters and closes lconn. */
void idem_free(struct idem *ix);

/* Prepares the lookups on a new lookup connection. */
int idem_prepare(PGconn *c, char *err, size_t errlen);

/* Reads into bk the accounts of new orders it does not know yet. -1 when
 * the database failed. */
int idem_accounts(struct idem *ix, struct apply_books *bk,
                  struct writer_cmd **cmds, int n, char *err, size_t errlen);

/* Looks up every key of cmds[0..n) at once. Commands whose key was seen
 * are answered (replay, or 422 for another body); a command whose key is
 * also used by an earlier command of this batch, or by a batch in flight
 * (`busy`), is taken out of cmds (NULL) and returned through *deferred to
 * run in a later batch, when the first one's answer is stored. The keys
 * looked up are added to `mine`. Returns 0, or -1 when the database
 * failed (ix->lookup_lost says whether it lost the connection). */
int idem_lookup(struct idem *ix, struct apply_books *bk,
                struct writer_cmd **cmds, int n, const struct idem_keys *busy,
                struct idem_keys *mine, struct writer_cmd **deferred, char *err,
                size_t errlen);
/* Adds c's first answer to the batch's idempotency rows (b->idem), when it
 * is one to store. */
void idem_store(struct idem *ix, struct rows_batch *b,
                const struct writer_cmd *c);
/* Notes the client order id of an order the batch inserts: the database
 * will hold its key once the batch commits (noted before: a batch that
 * fails leaves a key that is not there, which costs a lookup, never a
 * wrong answer). */
void idem_note_coid(struct idem *ix, int64_t account, const char *coid);
/* The filter's size, for the metrics. */
void idem_stats(const struct idem *ix);

#endif
