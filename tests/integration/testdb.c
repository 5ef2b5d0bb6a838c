/* testdb.c — see testdb.h. */
#include "tests/integration/testdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PGconn *admin_connect(void)
{
	PGconn *c = PQconnectdb("dbname=postgres");
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr,
		        "testdb: cannot reach the test PostgreSQL (%s); "
		        "run the tests through `make check`\n",
		        PQerrorMessage(c));
		exit(2);
	}
	return c;
}

static const char *create(const char *name, const char *template)
{
	static char conninfo[512];
	char sql[512];
	PGconn *c = admin_connect();
	PGresult *r;

	/* Names come from the tests themselves (and run.sh), never from
	 * outside. */
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)",
	         name);
	PQclear(PQexec(c, sql));
	if (template)
		snprintf(sql, sizeof sql,
		         "CREATE DATABASE \"%s\" TEMPLATE \"%s\"", name,
		         template);
	else
		snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "testdb: %s", PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
	PQfinish(c);
	snprintf(conninfo, sizeof conninfo, "dbname=%s", name);
	return conninfo;
}

const char *testdb_create(const char *name)
{
	return create(name, NULL);
}

const char *testdb_create_schema(const char *name)
{
	const char *t = getenv("RAMEX_TEST_SCHEMA_DB");
	return create(name, t && *t ? t : NULL);
}

PGconn *testdb_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "testdb: %s", PQerrorMessage(c));
		exit(2);
	}
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

long testdb_scalar(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	long v = 0;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "testdb: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	if (PQntuples(r) > 0)
		v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

long testdb_scalar_at(const char *conninfo, const char *sql)
{
	PGconn *c = testdb_connect(conninfo);
	long v = testdb_scalar(c, sql);
	PQfinish(c);
	return v;
}

void testdb_run(const char *conninfo, const char *sql)
{
	PGconn *c = testdb_connect(conninfo);
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "testdb: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
	PQfinish(c);
}

int testdb_pg_ctl(const char *args)
{
	const char *host = getenv("PGHOST"), *bin = getenv("PGBIN");
	char cmd[1024];
	if (!host || !bin) {
		fprintf(stderr, "testdb: PGHOST and PGBIN unset: run the tests "
		                "through `make check`\n");
		return -1;
	}
	snprintf(cmd, sizeof cmd, "%s%s/pg_ctl -D %s/data %s >/dev/null 2>&1",
	         getuid() == 0 ? "runuser -u postgres -- " : "", bin, host,
	         args);
	return system(cmd);
}

int testdb_pg_stop_now(void)
{
	return testdb_pg_ctl("-m immediate -w stop") == 0 ? 0 : -1;
}

int testdb_pg_start(void)
{
	const char *host = getenv("PGHOST"), *port = getenv("PGPORT");
	char args[768];
	if (!host || !port)
		return -1;
	if (testdb_pg_ctl("status") == 0)
		return 0;
	/* as scripts/pg.sh starts it; but while it was stopped, another
	 * program on this machine may have taken its TCP port (as the local
	 * end of a connection): then it serves its unix socket only, which
	 * is what the tests use (PGHOST is its directory) */
	for (int tries = 0; tries < 4; tries++) {
		snprintf(args, sizeof args,
		         "-l %s/log -w -t 60 -o \"-k %s -c listen_addresses=%s "
		         "-p %s -c max_connections=200\" start",
		         host, host, tries < 3 ? "127.0.0.1" : "''", port);
		if (testdb_pg_ctl(args) == 0)
			return 0;
		usleep(500000);
	}
	return -1;
}
