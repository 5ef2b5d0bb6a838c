/*
 * writer_pipe.h — the writer's commit pipeline: batches sent to
 * PostgreSQL on two transaction connections in libpq's pipeline mode, their
 * COMMITs awaited, and what each batch's commands are answered when it
 * does not commit. It owns the two connections' places (conn[0], conn[1];
 * writer.c makes them and gives up lost ones, through the drop hook), the
 * batches in flight (cf, of), and the state each batch moves through. It
 * never touches libpq itself: every call goes through struct wpipe_pq (the
 * real one is writer_pq.c; tests/unit/test_writer_pipe.c brings a fake
 * that fails at every step), and what a batch holds (its rows, the books
 * it changed) stays with the writer, through struct wpipe_hooks.
 *
 * A batch's life (struct wpipe_batch); the function of writer_pipe.c that
 * makes each move in brackets:
 *
 *   GATHERING  commands taken and applied to the books; its rows built
 *     |  |  |  (hooks->build) once it may go [may_send]
 *     |  |  |
 *     |  |  +-- nothing in flight: sent whole, BEGIN, INSERTs, --------+
 *     |  |      UPDATEs, COMMIT and sync [launch]                      |
 *     |  |                                                             |
 *     |  +-- one committing and overlap on: opened on the other        |
 *     |      connection, BEGIN and INSERTs [launch]                    |
 *     |          |                                                     v
 *     |          v                                                     |
 *     |        OPEN ---- the one before committed: its UPDATEs, -> COMMITTING
 *     |          |       COMMIT and sync sent [advance]                |  |
 *     |          |                                                     |  |
 *     |          | the one before failed: synced, read,                |  |
 *     |          | rolled back [advance, fail_after, finish_batch]     |  |
 *     |          v                                                     |  |
 *     +-----> FAILED <--- an error came, or the connection was lost ---+  |
 *     a batch    |        before COMMIT's answer came [finish_batch]      |
 *     in flight  |                                                        |
 *     failed     |                   COMMIT's answer came OK (a sync lost |
 *     [wpipe_    |                   after it changes nothing)            |
 *      turn,     |                   [finish_batch]                       v
 *      fail_     +----> answered [land] <------------------------- COMMITTED
 *      after]
 *
 * A COMMITTED batch is answered its own answers (hooks->land); a FAILED
 * one as the table below says, and the writer rebuilds its books from the
 * database before the next (hooks->land), so that memory never runs ahead
 * of what is committed. Answers of a COMMITTING batch come only when
 * pq->ready says its results are in [wpipe_turn]: a slow one is waited for.
 *
 * What a batch that did not commit is answered [fail_all]:
 *
 *   failure                                   connection   answer
 *   ---------------------------------------   ----------   ---------------
 *   PostgreSQL answered an error (a refused   rolled back, 500 internal
 *     INSERT), or a batch before it did       kept
 *   a unique key of idempotency or a client   rolled back, none: run again
 *     order id another ramexd committed       kept         (retry), keys
 *     first, or a batch before it was so                   looked up
 *   lost before its COMMIT was sent (an idle  given up     503 database-
 *     connection found closed, a send that                 unavailable
 *     failed), or a batch before it was lost
 *   lost after its COMMIT was sent and        given up     503 outcome-
 *     before COMMIT's answer came (it may                  unknown (a retry
 *     have committed)                                      with the same key
 *                                                          tells)
 *   lost after COMMIT's answer came (the      given up     committed: its
 *     sync, mid-sync)                                      own answers
 *   slow (a lock, a long fsync)               kept         waits, no answer
 *                                                          until it lands
 *
 * A batch that fails fails the open one (rolled back) and the gathering
 * one too, since both were applied on top of it; PostgreSQL runs a
 * pipeline ahead of the answers it sends, so no missing answer proves a
 * statement did not run. Batches commit in the order they were applied.
 * Without overlap (the default) no batch is OPEN: the gathering one grows
 * until the COMMIT is back, then goes out whole. Only the writer's thread
 * calls these.
 */
#ifndef RAMEX_WRITER_PIPE_H
#define RAMEX_WRITER_PIPE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "exchange/pgpipe.h"
#include "exchange/writer_rows.h"

struct writer_cmd;

/* A result of the pipeline, as the pipeline needs to know it. */
enum wpipe_res_kind {
	WPIPE_RES_OK,      /* PGRES_COMMAND_OK */
	WPIPE_RES_ABORTED, /* PGRES_PIPELINE_ABORTED: an error came before */
	WPIPE_RES_SYNC,    /* PGRES_PIPELINE_SYNC: the end of the batch */
	WPIPE_RES_ERROR,   /* anything else: an error (state, msg) */
};
struct wpipe_res {
	enum wpipe_res_kind kind;
	char state[6]; /* WPIPE_RES_ERROR: its SQLSTATE, "" when none */
	bool lost;     /* WPIPE_RES_ERROR: it says the connection is gone */
	/* WPIPE_RES_ERROR: a key another writer committed first (a unique
	 * idempotency key or client order id): the batch is worth running
	 * again, its keys looked up (wpipe_batch.retry) */
	bool key_taken;
	char msg[256]; /* WPIPE_RES_ERROR: PostgreSQL's text, for the log */
};

/* The libpq calls the pipeline makes, on one connection each: the seam a
 * test replaces. writer_pq.c holds the real ones (writer_pq_libpq). */
struct wpipe_pq {
	/* whether an idle connection still works, without blocking */
	bool (*alive)(PGconn *c);
	bool (*enter)(PGconn *c); /* PQenterPipelineMode */
	void (*leave)(PGconn *c); /* PQexitPipelineMode */
	/* queue a statement: BEGIN or COMMIT, or a prepared one */
	bool (*send_sql)(PGconn *c, const char *sql);
	bool (*send_prepared)(PGconn *c, const char *name, int n,
	                      const char *const *params);
	bool (*sync)(PGconn *c);  /* PQpipelineSync */
	bool (*flush)(PGconn *c); /* PQflush, true when all went out */
	/* the next result, waiting for it (a slow one is waited for); false
	 * when none will come, *lost set (pgpipe_result) */
	bool (*result)(PGconn *c, struct wpipe_res *r, bool *lost);
	bool (*rollback)(PGconn *c); /* ROLLBACK outside the pipeline */
	/* whether results wait on c, within ms */
	bool (*ready)(PGconn *c, int ms);
	bool (*broken)(PGconn *c);       /* NULL or not CONNECTION_OK */
	const char *(*error)(PGconn *c); /* PQerrorMessage */
	/* the test fault hook (pgpipe.h): may break c at step */
	void (*step)(const struct pgpipe_fault *f, enum pgpipe_step step,
	             uint64_t batch, PGconn *c);
};

/* A batch on its way to PostgreSQL: the pipeline's part of it. The writer
 * embeds it first in its own (struct flight in writer.c). */
struct wpipe_batch {
	struct writer_cmd **cmds; /* its commands (NULL entries skipped) */
	int n;
	/* each statement's parameters (hooks->build), freed once sent */
	char *par[ROWS_NSTMT][ROWS_COLS_MAX];
	size_t rows[ROWS_NSTMT];
	PGconn *conn; /* where it is sent; NULL before */
	uint64_t no;  /* its number among the batches sent, from 1 */
	bool piped;   /* in pipeline mode on conn: its results are to read */
	bool synced;  /* its sync was sent */
	bool commit_sent; /* its COMMIT went to libpq: it may have run */
	int nsent;        /* statements sent, BEGIN and COMMIT included */
	bool ok;          /* false: not committed, or not known to be (err) */
	bool down;        /* not committed because PostgreSQL is away */
	bool unknown;     /* the connection was lost after its COMMIT was sent
	                   * and before its answer came: it may have committed */
	bool pause; /* PostgreSQL unusable: wait a little before the next */
	/* not committed because a key of it was taken by another writer
	 * (wpipe_res.key_taken), or applied on top of one that was: its
	 * commands are not answered a failure but run again (hooks->land) */
	bool retry;
	/* refused by its fence (RX001, schema/0017): another instance took
	 * a market it touches */
	bool fenced;
	struct timespec t0; /* sent (CLOCK_MONOTONIC) */
	char err[512];
};

/* What the pipeline asks of the writer, once per batch. */
struct wpipe_hooks {
	/* Turn b's rows into each statement's parameters (b->par, b->rows);
	 * how many statements have rows: 0 when there is nothing to write. */
	int (*build)(void *ctx, struct wpipe_batch *b);
	/* b committed (its COMMIT's answer came), before any later batch is
	 * built or answered. */
	void (*committed)(void *ctx, struct wpipe_batch *b);
	/* b is over: answer its commands (their answers are set: their own
	 * when b->ok, else a failure's), publish, or rebuild the books; when
	 * b->retry, no answer is set: queue them again instead. */
	void (*land)(void *ctx, struct wpipe_batch *b);
	/* conn[i] is lost or out of step: give it up (close it, set conn[i]
	 * NULL); the writer makes a new one before the next batch. */
	void (*drop)(void *ctx, int i);
};

struct wpipe {
	const struct wpipe_pq *pq;
	const struct wpipe_hooks *h;
	void *ctx;       /* the hooks' */
	PGconn *conn[2]; /* the transaction connections (writer.c makes them) */
	bool overlap; /* writer_opts.overlap: open a batch while one commits */
	struct pgpipe_fault fault;   /* RAMEX_WRITER_FAULT (pgpipe.h), tests */
	uint64_t nbatch;             /* batches sent, for the fault hook */
	struct wpipe_batch *cf, *of; /* in flight: committing, open */
	bool retry; /* the last batch that failed by itself may run again */
	bool fenced;                 /* the last batch that failed was fenced */
};

/* A batch made ready to gather (cmds kept; ok true, the rest cleared). */
void wpipe_batch_reset(struct wpipe_batch *b);

/* One turn of the writer's loop, after it applied what it took into *gp
 * (`took`: it took commands this turn): lands the committing batch when its
 * answers are in (waiting up to 1 ms for them when nothing was taken),
 * then sends *gp when it may go, or answers it when it failed or has
 * nothing to write. *gp becomes NULL when it was sent or answered. */
void wpipe_turn(struct wpipe *p, struct wpipe_batch **gp, bool took);
/* Lands every batch in flight; false when one failed. */
bool wpipe_drain(struct wpipe *p);
/* Sends b whole on conn[0], with nothing in flight, and waits for it (the
 * expiry of GTD orders); b->ok says whether it committed. */
void wpipe_run(struct wpipe *p, struct wpipe_batch *b);
/* Whether either transaction connection is broken. */
bool wpipe_down(const struct wpipe *p);

#endif
