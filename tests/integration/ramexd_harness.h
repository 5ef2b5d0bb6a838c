/*
 * ramexd_harness.h — a real ramexd for integration tests, and a small HTTP
 * client to talk to it.
 *
 * rxh_start makes a fresh database with the schema (testdb_create_schema,
 * testdb.h), bootstraps an admin token
 * with `ramexd token create`, starts the sanitizer build of ramexd on a free
 * 127.0.0.1 port and waits until /readyz answers. The server dies with the
 * test: rxh_stop ends it, and the child is also bound to its parent with
 * PR_SET_PDEATHSIG, so a failing test (check forks one process per test)
 * never leaves a server behind. Logs go to $RAMEX_TEST_OUTPUT/ramexd-*.log.
 *
 * rxh_world builds a small market on top: a team, an operator account and
 * token, a trader token, two nodes with keys, and the spot and perm-2027
 * markets. The agent and web tests can reuse all of it.
 */
#ifndef RAMEX_RAMEXD_HARNESS_H
#define RAMEX_RAMEXD_HARNESS_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct rxh {
	char db[64]; /* database name */
	char conninfo[256];
	char admin[80];  /* admin bearer token */
	char log[512];   /* ramexd's log file */
	char extra[512]; /* extra flags for ramexd, space separated */
	pid_t pid;
	int port;
	int starts;
};

struct rxh_resp {
	long status;
	char *body;
	char headers[4096];
	json_t *json; /* parsed body, or NULL */
};

/* Creates database `db` afresh (with the schema: testdb_create_schema)
 * and starts ramexd on it. `extra` are more
 * flags for ramexd ("" for none). Aborts the test when it cannot. */
void rxh_start(struct rxh *h, const char *db, const char *extra);
/* The same on a database the caller made, reached with `conninfo` (e.g. a
 * multi-host one that follows a failover); `db` names the log files. */
void rxh_start_at(struct rxh *h, const char *db, const char *conninfo,
                  const char *extra);
/* Starts ramexd again on the same database (after rxh_kill). */
void rxh_restart(struct rxh *h);
/* Sends `sig` to ramexd and waits for it; returns its wait status. */
int rxh_kill(struct rxh *h, int sig);
/* SIGTERM, wait, done. Safe to call twice. */
void rxh_stop(struct rxh *h);
/* How many lines of ramexd's log hold `needle`. */
int rxh_log_count(const struct rxh *h, const char *needle);

/* One HTTP call. `token` is a bearer token or NULL; `hdr` one extra
 * header line ("Name: value") or NULL. Returns the status. */
long rxh_call(struct rxh *h, const char *method, const char *path,
              const char *token, const char *body, const char *hdr,
              struct rxh_resp *r);
/* A call signed with a node key; ts 0 = now, nonce NULL = fresh. */
long rxh_call_signed(struct rxh *h, const char *method, const char *path,
                     const char *key_id, const char *secret, const char *body,
                     int64_t ts, const char *nonce, struct rxh_resp *r);
/* The same, signed over `signed_target` but sent to `sent` (to check that
 * what is signed is the target as sent), with the timestamp header given
 * as text when ts_text is not NULL (ts is still what is signed). */
long rxh_call_signed_as(struct rxh *h, const char *method, const char *sent,
                        const char *signed_target, const char *key_id,
                        const char *secret, const char *body, int64_t ts,
                        const char *ts_text, const char *nonce,
                        struct rxh_resp *r);
void rxh_resp_free(struct rxh_resp *r);
/* The same calls for a check of the status alone: the answer is read and
 * freed, and only its status returned. */
long rxh_status(struct rxh *h, const char *method, const char *path,
                const char *token, const char *body, const char *hdr);
long rxh_status_signed(struct rxh *h, const char *method, const char *path,
                       const char *key_id, const char *secret, const char *body,
                       int64_t ts, const char *nonce);
/* Whether r is an RFC 9457 problem (problem+json) whose type is `type`
 * (the whole URN, urn:ramex:problem:...). */
int rxh_is_problem(const struct rxh_resp *r, const char *type);

/* Starts bin (argv[0] is its name) as a child bound to this test process:
 * it gets SIGKILL when the test dies (PR_SET_PDEATHSIG), even by a failed
 * assertion, so none is left behind. Its stdout and stderr are appended to
 * `log`; LeakSanitizer is off. Returns its pid; fails the test when fork
 * does. */
pid_t rxh_spawn(const char *bin, char *const argv[], const char *log);

/* A TCP connection to 127.0.0.1:port, for tests that speak the protocol
 * by hand; -1 when it cannot be made. */
int rxh_dial(int port);

/* A listener on GET /v1/events, for a thread of its own: rxh_sse_run
 * (pthread_create's signature) reads the stream into buf until the text
 * holds `until` (NULL: until the server ends it, or 60 s). `connected` is
 * set (atomically) once the first bytes came. */
struct rxh_sse {
	struct rxh *h;
	const char *token; /* bearer */
	const char *until;
	char buf[32768];
	size_t n;
	int connected;
};
void *rxh_sse_run(void *sse);
/* A header of the response, or NULL. Copies into buf. */
const char *rxh_header(const struct rxh_resp *r, const char *name, char *buf,
                       size_t len);
/* JSON integer field of the body (0 when absent). */
int64_t rxh_int(const struct rxh_resp *r, const char *key);

struct rxh_world {
	int64_t team, team2, op_account, node_a, node_b, node_c;
	char op_token[80], trader_token[80], trader2_token[80];
	char finance_token[80];
	char key_a[24], secret_a[80], key_b[24], secret_b[80];
	char key_c[24], secret_c[80]; /* node_c is in team2 */
};

/* Creates the fixtures above through the API (as admin and operator). */
void rxh_world(struct rxh *h, struct rxh_world *w);

#endif
