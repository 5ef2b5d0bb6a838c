/*
 * pgpipe.h — reading a libpq pipeline without trusting the connection: the
 * next result of a pipeline, or word that the connection is gone, never a
 * loop on NULL; and the writer's fault hook for tests, which breaks a
 * connection at a chosen step.
 *
 * Why: when PostgreSQL stops at once (`pg_ctl stop -m immediate`), libpq
 * may take the server's last message as a notice and end a pipeline's
 * results early, leaving its connection CONNECTION_OK while PQgetResult
 * answers NULL forever without reading. The writer used to wait for its
 * sync in such a loop and spun at 100 % CPU (issue 25). Here a pipeline is
 * read by waiting on its socket and consuming input, and two NULLs in a row
 * (no result, no next query) mean the pipeline lost its place.
 */
#ifndef RAMEX_PGPIPE_H
#define RAMEX_PGPIPE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

/* The next result of the pipeline on c (skipping the NULL that ends each
 * query's results), waiting on c's socket for it. NULL when none will
 * come: the connection is broken, or the pipeline has nothing more to
 * give; *lost is then set. A slow statement is waited for (poll, not a
 * loop). */
PGresult *pgpipe_result(PGconn *c, bool *lost);

/* The steps of a batch the fault hook can break a connection at. */
enum pgpipe_step {
	PGPIPE_NONE,
	PGPIPE_IDLE,   /* before the batch is sent: an idle connection */
	PGPIPE_OPEN,   /* BEGIN and the INSERTs sent, not the rest */
	PGPIPE_CLOSE,  /* everything sent, COMMIT and sync included */
	PGPIPE_RESULT, /* the first result (BEGIN's) read, not the rest */
};

/* RAMEX_WRITER_FAULT=STEP:N (idle, open, close or result; N >= 1) breaks
 * the connection of every Nth batch at STEP, as a server that vanished
 * would: shutdown(2) of its socket under libpq, which then reads end of
 * file and fails writes. For tests only; unset, it costs a comparison. */
struct pgpipe_fault {
	enum pgpipe_step step;
	uint64_t every;
};

/* Reads the variable's text (NULL: no fault). -1 when it is malformed. */
int pgpipe_fault_parse(struct pgpipe_fault *f, const char *text);
/* Breaks c if batch number `batch` (counted from 1) is one of f's at
 * `step`; true when it did. */
bool pgpipe_fault_hit(const struct pgpipe_fault *f, enum pgpipe_step step,
                      uint64_t batch, PGconn *c);

#endif
