/*
 * migrate.h — applies the numbered SQL migrations in schema/ to a database.
 *
 * The migrations are embedded in the binary at build time (build/gen/schema.c,
 * made from schema/NNNN_name.sql), so a ramexd always carries the schema it
 * was built for. Each migration runs in its own transaction together with the
 * row that records it in `schema_migrations`, under an advisory lock so two
 * ramexd starting at once do not race: a migration that fails leaves the
 * database exactly as it was, and one that is recorded is never run again.
 * A recorded migration whose text has changed since is refused, because the
 * database no longer matches the file a reader would look at.
 */
#ifndef RAMEX_MIGRATE_H
#define RAMEX_MIGRATE_H

#include <libpq-fe.h>
#include <stddef.h>

struct migration {
	const char *name; /* file name without .sql, e.g. "0001_accounts" */
	const char *sql;  /* the whole file */
};

/* The migrations built into this binary, in order. */
extern const struct migration schema_migrations[];
extern const int schema_migrations_count;

/*
 * Applies every migration of `m[0..n)` not yet recorded, in order. Returns the
 * number applied (0 when the database is current) or -1 with a message in
 * `err`; on -1 the failed migration and every later one are not applied.
 */
int migrate_apply(PGconn *conn, const struct migration *m, int n, char *err,
                  size_t errlen);

#endif
