/*
 * writer_pq.c — see writer_pq.h.
 */
#include "exchange/writer_pq.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "exchange/db.h"
#include "exchange/pgpipe.h"

static bool pq_alive(PGconn *c)
{
	return db_alive(c);
}

static bool pq_enter(PGconn *c)
{
	return PQenterPipelineMode(c);
}

static void pq_leave(PGconn *c)
{
	PQexitPipelineMode(c);
}

static bool pq_send_sql(PGconn *c, const char *sql)
{
	return PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0);
}

static bool pq_send_prepared(PGconn *c, const char *name, int n,
                             const char *const *params)
{
	return PQsendQueryPrepared(c, name, n, params, NULL, NULL, 0);
}

static bool pq_sync(PGconn *c)
{
	return PQpipelineSync(c);
}

static bool pq_flush(PGconn *c)
{
	return PQflush(c) == 0;
}

static bool pq_result(PGconn *c, struct wpipe_res *out, bool *lost)
{
	PGresult *r = pgpipe_result(c, lost);
	if (!r)
		return false;
	switch (PQresultStatus(r)) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK: /* the fence (w_fence) */
		out->kind = WPIPE_RES_OK;
		break;
	case PGRES_PIPELINE_ABORTED:
		out->kind = WPIPE_RES_ABORTED;
		break;
	case PGRES_PIPELINE_SYNC:
		out->kind = WPIPE_RES_SYNC;
		break;
	default:
		out->kind = WPIPE_RES_ERROR;
		break;
	}
	/* what an error says, read only for one: the path of a batch that
	 * commits copies nothing */
	if (out->kind != WPIPE_RES_OK) {
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		snprintf(out->state, sizeof out->state, "%s", st ? st : "");
		snprintf(out->msg, sizeof out->msg, "%s",
		         PQresultErrorMessage(r));
		out->lost = db_result_lost(c, r);
		/* the unique keys of 0002_markets_orders.sql that another
		 * ramexd on the database may have committed first */
		const char *k = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME);
		out->key_taken = strcmp(out->state, "23505") == 0 && k &&
		                 (strcmp(k, "idempotency_pkey") == 0 ||
		                  strcmp(k, "orders_client_id") == 0);
	}
	PQclear(r);
	return true;
}

static bool pq_rollback(PGconn *c)
{
	PGresult *r = PQexec(c, "ROLLBACK");
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	return ok;
}

/* Whether results are waiting on c (within ms milliseconds); a connection
 * without a socket has its answer at once: that it is lost. */
static bool pq_ready(PGconn *c, int ms)
{
	struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
	return pfd.fd < 0 || poll(&pfd, 1, ms) != 0;
}

static bool pq_broken(PGconn *c)
{
	return db_broken(c);
}

static const char *pq_error(PGconn *c)
{
	return PQerrorMessage(c);
}

static void pq_step(const struct pgpipe_fault *f, enum pgpipe_step step,
                    uint64_t batch, PGconn *c)
{
	pgpipe_fault_hit(f, step, batch, c);
}

const struct wpipe_pq writer_pq_libpq = {
    .alive = pq_alive,
    .enter = pq_enter,
    .leave = pq_leave,
    .send_sql = pq_send_sql,
    .send_prepared = pq_send_prepared,
    .sync = pq_sync,
    .flush = pq_flush,
    .result = pq_result,
    .rollback = pq_rollback,
    .ready = pq_ready,
    .broken = pq_broken,
    .error = pq_error,
    .step = pq_step,
};
