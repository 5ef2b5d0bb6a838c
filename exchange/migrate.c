/*
 * migrate.c — see migrate.h.
 *
 * Migration files are trusted text built into the binary, and a migration is
 * a script of many statements, which PQexecParams cannot run; so they go
 * through PQexec. That is the one place ramex sends SQL that is not
 * parameterised, and none of it ever contains outside input.
 */
#include "exchange/migrate.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

/* Any constant works as long as every ramexd uses the same one. */
#define MIGRATE_LOCK_KEY "7265616d657801" /* "ramex\x01" */

static void sha256_hex(const char *s, char out[65])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)s, strlen(s), d);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int exec_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	         PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		snprintf(err, errlen, "%s", PQerrorMessage(c));
	PQclear(r);
	return ok;
}

static void rollback(PGconn *c)
{
	PQclear(PQexec(c, "ROLLBACK"));
}

/* Returns 1 when applied now, 0 when already there, -1 on error. */
static int apply_one(PGconn *c, const struct migration *m, char *err,
                     size_t errlen)
{
	char sum[65], why[512];
	const char *params[2];
	PGresult *r;

	sha256_hex(m->sql, sum);
	if (!exec_ok(c, "BEGIN", why, sizeof why))
		goto fail;
	if (!exec_ok(c,
	             "SELECT pg_advisory_xact_lock(x'" MIGRATE_LOCK_KEY
	             "'::bigint)",
	             why, sizeof why))
		goto fail_rb;
	if (!exec_ok(c,
	             "CREATE TABLE IF NOT EXISTS schema_migrations ("
	             " name text PRIMARY KEY,"
	             " sha256 text NOT NULL,"
	             " applied_at timestamptz NOT NULL DEFAULT now())",
	             why, sizeof why))
		goto fail_rb;

	params[0] = m->name;
	r = PQexecParams(c,
	                 "SELECT sha256 FROM schema_migrations WHERE name = $1",
	                 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(why, sizeof why, "%s", PQerrorMessage(c));
		PQclear(r);
		goto fail_rb;
	}
	if (PQntuples(r) == 1) {
		int same = strcmp(PQgetvalue(r, 0, 0), sum) == 0;
		PQclear(r);
		rollback(c);
		if (!same) {
			snprintf(
			    err, errlen,
			    "migration %s was changed after it was applied; "
			    "restore the original file or add a new migration",
			    m->name);
			return -1;
		}
		return 0;
	}
	PQclear(r);

	if (!exec_ok(c, m->sql, why, sizeof why))
		goto fail_rb;
	params[1] = sum;
	r = PQexecParams(
	    c, "INSERT INTO schema_migrations (name, sha256) VALUES ($1, $2)",
	    2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		snprintf(why, sizeof why, "%s", PQerrorMessage(c));
		PQclear(r);
		goto fail_rb;
	}
	PQclear(r);
	if (!exec_ok(c, "COMMIT", why, sizeof why))
		goto fail;
	return 1;

fail_rb:
	rollback(c);
fail:
	why[strcspn(why, "\n")] = 0;
	snprintf(err, errlen, "migration %s failed and was rolled back: %s",
	         m->name, why);
	return -1;
}

int migrate_apply(PGconn *conn, const struct migration *m, int n, char *err,
                  size_t errlen)
{
	int applied = 0;
	for (int i = 0; i < n; i++) {
		int rc = apply_one(conn, &m[i], err, errlen);
		if (rc < 0)
			return -1;
		applied += rc;
	}
	return applied;
}
