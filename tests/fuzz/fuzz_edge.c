/*
 * fuzz_edge.c — libFuzzer target for ramexd's HTTP edge: the input is the
 * raw bytes a client sends (request line, headers, body, even several
 * requests), sent over a real TCP connection to the real edge — the
 * libmicrohttpd daemon of exchange/http.c with the real route table,
 * every handler, input.c's validators and the web pages' path checks.
 * What lies behind the edge is replaced below: PostgreSQL cannot be
 * reached (db_acquire gives NULL, so a request that passes validation is
 * answered 503), the writer refuses every command with 503, and a caller
 * is whoever "Authorization: Bearer ROLE" names (node, trader, operator,
 * finance, admin), so that the fuzzer reaches the handlers of every role.
 *
 * It aborts when an answer breaks the edge's promises: a 500 (nothing
 * here is the exchange's fault, the database being away is a 503), a
 * problem that is not problem+json in valid UTF-8 with its status and a
 * detail, a JSON answer that is not valid UTF-8 JSON, or no answer within
 * a few seconds — and on every sanitizer report, in the edge's threads too.
 *
 * Seeds: tests/fuzz/fuzz_edge.seeds (one request per file, made by
 * run.sh's seeding: a valid request for every route).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/billing.h"
#include "exchange/contracts.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/metrics.h"
#include "exchange/owner.h"
#include "exchange/routes.h"
#include "exchange/usage_db.h"
#include "exchange/writer.h"

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_edge: %s: %.2000s\n", what, detail);
	abort();
}

/* --- what lies behind the edge -------------------------------------------- */

static const char *const role_names[] = {"node", "trader", "operator",
                                         "finance", "admin"};

const char *auth_role_name(unsigned role)
{
	for (int i = 0; i < 5; i++)
		if (role == 1u << i)
			return role_names[i];
	return role == AUTH_PUBLIC ? "public" : "none";
}

unsigned auth_role_parse(const char *name)
{
	for (int i = 0; i < 5; i++)
		if (strcmp(name, role_names[i]) == 0)
			return 1u << i;
	return 0;
}

int auth_authenticate(struct auth *a, const struct auth_request *rq,
                      struct auth_principal *out, int *status, char *why,
                      size_t whylen, int may_block)
{
	(void)a, (void)may_block;
	const char *h = rq->authorization;
	unsigned role =
	    h && strncmp(h, "Bearer ", 7) == 0 ? auth_role_parse(h + 7) : 0;
	if (!role) {
		*status = 401;
		snprintf(why, whylen, "send Authorization: Bearer ROLE");
		return -1;
	}
	memset(out, 0, sizeof *out);
	out->role = role;
	out->id = out->account_id = out->team_id = 1;
	snprintf(out->name, sizeof out->name, "%s", h + 7);
	snprintf(out->scope, sizeof out->scope, "tok:1");
	return 0;
}

void auth_forget_token(struct auth *a, int64_t id)
{
	(void)a, (void)id;
}

void auth_forget_node_key(struct auth *a, const char *key_id)
{
	(void)a, (void)key_id;
}

void auth_known(struct auth *a, const char *key)
{
	(void)a, (void)key;
}

/* Reached only with a connection, which there never is. */
int auth_token_new(char token[AUTH_TOKEN_LEN + 1], char sha_hex[65])
{
	(void)token, (void)sha_hex;
	die("unreachable", "auth_token_new without a database");
	return -1;
}

int auth_node_key_new(char key_id[20], char secret[69])
{
	(void)key_id, (void)secret;
	die("unreachable", "auth_node_key_new without a database");
	return -1;
}

PGconn *db_acquire(struct db_pool *p)
{
	(void)p;
	return NULL;
}

PGconn *db_acquire_within(struct db_pool *p, int timeout_ms, bool *busy)
{
	(void)p, (void)timeout_ms;
	if (busy)
		*busy = false;
	return NULL;
}

static void no_db(void);

int db_ping(PGconn *c, int timeout_ms, char *err, size_t errlen)
{
	(void)c, (void)timeout_ms, (void)err, (void)errlen;
	no_db();
	return -1;
}

void db_release(struct db_pool *p, PGconn *c)
{
	(void)p, (void)c;
	die("unreachable", "db_release of a connection never given");
}

bool db_broken(PGconn *c)
{
	return c == NULL;
}

static void no_db(void)
{
	die("unreachable", "a query without a connection");
}

PGresult *db_exec(PGconn *c, ExecStatusType want, const char *sql, int n,
                  const char *const *params, char *err, size_t errlen)
{
	(void)c, (void)want, (void)sql, (void)n, (void)params, (void)err;
	(void)errlen;
	no_db();
	return NULL;
}

PGresult *db_exec_fail(PGconn *c, ExecStatusType want, const char *sql, int n,
                       const char *const *params, struct db_fail *f)
{
	(void)c, (void)want, (void)sql, (void)n, (void)params, (void)f;
	no_db();
	return NULL;
}

int64_t db_int(const PGresult *r, int row, int col)
{
	(void)r, (void)row, (void)col;
	no_db();
	return 0;
}

struct json_t *db_rows_json(const PGresult *r)
{
	(void)r;
	no_db();
	return NULL;
}

enum contracts_status contracts_move(PGconn *c, struct events *ev,
                                     const struct contracts_caller *who,
                                     int64_t id, enum contract_event event,
                                     const char *note, rx_time_ns now,
                                     struct contracts_result *out)
{
	(void)c, (void)ev, (void)who, (void)id, (void)event, (void)note;
	(void)now, (void)out;
	no_db();
	return CONTRACTS_FAILED;
}

enum usage_db_status usage_db_ingest(PGconn *c, int64_t node,
                                     const char *principal,
                                     struct usage_db_item *items, size_t n,
                                     json_t *const *bodies, int64_t now,
                                     size_t *counted, size_t *duplicates,
                                     char *err, size_t errlen)
{
	(void)c, (void)node, (void)principal, (void)items, (void)n;
	(void)bodies, (void)now, (void)counted, (void)duplicates, (void)err;
	(void)errlen;
	no_db();
	return USAGE_DB_FAILED;
}

rx_time_ns contracts_now(void)
{
	return INT64_C(1700000000000000000);
}

int billing_run(struct billing *b, rx_time_ns as_of, int api,
                struct billing_result *out, char *err, size_t errlen)
{
	(void)b, (void)as_of, (void)api, (void)out;
	snprintf(err, errlen, "the billing job is not running here");
	return -1;
}

struct events_sub *events_subscribe(struct events *e, unsigned role,
                                    int64_t account, int64_t team,
                                    int64_t last_id)
{
	(void)e, (void)role, (void)account, (void)team, (void)last_id;
	return NULL; /* "too many streams": a stream would never end */
}

void events_set_keepalive(struct events_sub *s, int keepalive_s)
{
	(void)s, (void)keepalive_s;
}

void events_set_wake(struct events_sub *s, void (*wake)(void *arg), void *arg)
{
	(void)s, (void)wake, (void)arg;
}

long events_poll(struct events_sub *s, char *buf, size_t max)
{
	(void)s, (void)buf, (void)max;
	return -1;
}

void events_unsubscribe(struct events_sub *s)
{
	(void)s;
}

void events_publish(struct events *e, const char *type, int64_t acct_a,
                    int64_t team_a, int64_t acct_b, int64_t team_b,
                    const char *data)
{
	(void)e, (void)type, (void)acct_a, (void)team_a, (void)acct_b,
	    (void)team_b, (void)data;
}

static const char *const sides[] = {"buy", "sell"};
static const char *const tifs[] = {"gtc", "ioc", "fok", "gtd"};
static const char *const stps[] = {"cancel_taker", "cancel_maker",
                                   "cancel_both"};

static int name_of(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int writer_side_parse(const char *s, enum book_side *out)
{
	int v = name_of(s, sides, 2);
	*out = (enum book_side)(v < 0 ? 0 : v);
	return v < 0 ? -1 : 0;
}

int writer_tif_parse(const char *s, enum book_tif *out)
{
	int v = name_of(s, tifs, 4);
	*out = (enum book_tif)(v < 0 ? 0 : v);
	return v < 0 ? -1 : 0;
}

int writer_stp_parse(const char *s, enum book_stp *out)
{
	int v = name_of(s, stps, 3);
	*out = (enum book_stp)(v < 0 ? 0 : v);
	return v < 0 ? -1 : 0;
}

/* The writer as it is while PostgreSQL is away: every command 503. */
static void refuse(struct writer_cmd *c)
{
	static const char body[] =
	    "{\"type\":\"urn:ramex:problem:database-unavailable\",\"title\":"
	    "\"database unavailable\",\"status\":503,\"detail\":\"fuzz\"}";
	c->status = 503;
	c->retry_after = true;
	c->body = strdup(body);
}

void writer_submit(struct writer *w, struct writer_cmd *c)
{
	(void)w;
	refuse(c);
}

void writer_submit_async(struct writer *w, struct writer_cmd *c,
                         void (*on_done)(struct writer_cmd *c, void *arg),
                         void *arg)
{
	(void)w;
	refuse(c);
	on_done(c, arg);
}

/* The fuzzed app has no owner (one ramexd holding every market): never
 * called, linked for h_orders.c. */
enum owner_where owner_where(struct owner *ow, const char *name, int64_t id,
                             char *url, size_t urllen)
{
	(void)ow, (void)name, (void)id, (void)url, (void)urllen;
	return OWNER_HERE;
}

bool writer_ready(struct writer *w)
{
	(void)w;
	return false;
}

/* --- the edge ------------------------------------------------------------- */

static struct app app;
static int port;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	(void)argc, (void)argv;
	log_init("fuzz_edge", LOG_ERROR); /* libmicrohttpd warns per bad
	                                     request */
	metrics_init(routes_table, routes_count);
	app.cfg.sse_max_clients = 1;
	/* the repository's web pages, when the target runs in run.sh's
	 * working directory for it (var/fuzz/fuzz_edge); else no pages, 404 */
	if (static_root_init(&app.web, "../../../web", "/web", err,
	                     sizeof err) < 0)
		app.web.dir[0] = 0;
	struct http_opts o = {
	    .host = "127.0.0.1",
	    .port = 0,
	    .max_connections = 16,
	    .timeout_s = 5,
	    .threads = 1,
	    .workers = 2,
	    .body_limit = 64 * 1024,
	    .routes = routes_table,
	    .nroutes = routes_count,
	    .queries = routes_query,
	    .nqueries = routes_query_count,
	    .app = &app,
	};
	struct http_server *s = http_start(&o, err, sizeof err);
	if (!s)
		die("cannot start the edge", err);
	port = http_port(s);
	return 0;
}

/* --- reading the answer -----------------------------------------------------
 */

static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	while (*len < cap) {
		struct pollfd p = {fd, POLLIN, 0};
		int rc = poll(&p, 1, 8000);
		if (rc == 0)
			return -1; /* no answer, no close: hung */
		ssize_t n = read(fd, buf + *len, cap - *len);
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	return 0;
}

/* Checks one answer at r (len bytes left); returns its length, or 0 when
 * what is left is not a whole answer of ours. `head`: to a HEAD. */
static size_t check_answer(const char *r, size_t len, int head)
{
	const char *end = memmem(r, len, "\r\n\r\n", 4);
	if (!end || len < 12 || strncmp(r, "HTTP/1.", 7) != 0)
		return 0;
	int status = atoi(r + 9);
	size_t hl = (size_t)(end - r) + 4;
	char hdr[8192];
	snprintf(hdr, sizeof hdr, "%.*s", (int)(hl < sizeof hdr ? hl : 8191),
	         r);
	const char *cl = strcasestr(hdr, "\r\nContent-Length:");
	const char *ct = strcasestr(hdr, "\r\nContent-Type:");
	size_t blen = cl ? strtoul(cl + 17, NULL, 10) : len - hl;
	/* Every answer of ramexd's own carries Cache-Control (http.c); one
	 * without it is libmicrohttpd's, for a request it could not parse
	 * (its own HTML 400, 413, 414, 505...), made before ramexd's code is
	 * called and not ours to shape. */
	if (!strcasestr(hdr, "\r\nCache-Control:"))
		return 0;
	if (status >= 500 && status != 503)
		die("a 5xx other than 503", hdr);
	/* a HEAD's answer has a Content-Length but no body: the next answer
	 * follows at once (no body of ours starts like an answer) */
	if (head ||
	    (blen > 0 && len - hl >= 7 && strncmp(r + hl, "HTTP/1.", 7) == 0))
		head = 1, blen = 0;
	if (hl + blen > len)
		return 0; /* cut short: the server closed mid-answer */
	const char *body = r + hl;
	int problem = ct && strncasecmp(ct + 15 + strspn(ct + 15, " "),
	                                "application/problem+json", 24) == 0;
	int json = ct && strncasecmp(ct + 15 + strspn(ct + 15, " "),
	                             "application/json", 16) == 0;
	if (status >= 400 && !problem && !head)
		die("an error that is not problem+json", hdr);
	if ((problem || json) && !head) {
		if (!in_utf8_valid(body, blen))
			die("an answer that is not UTF-8", body);
		json_error_t e;
		json_t *j = json_loadb(body, blen, 0, &e);
		if (!j || !json_is_object(j))
			die("an answer that is not a JSON object", body);
		if (problem) {
			const char *d =
			    json_string_value(json_object_get(j, "detail"));
			if (!d || !*d)
				die("a problem without a detail", body);
			if (json_integer_value(json_object_get(j, "status")) !=
			    status)
				die("a problem whose status is not the "
				    "answer's",
				    body);
		}
		json_decref(j);
	}
	return hl + blen;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[1 << 20];
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		die("cannot connect to the edge", "");
	for (size_t off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0)
			break; /* the edge closed: it may, on a bad request */
		off += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	size_t len;
	if (read_all(fd, buf, sizeof buf - 1, &len) < 0)
		die("no answer within 8 s", "");
	buf[len] = 0;
	close(fd);
	int head = size >= 5 && memcmp(data, "HEAD ", 5) == 0;
	/* every answer, those to pipelined requests too */
	for (size_t off = 0, n; off < len; off += n, head = 0)
		if ((n = check_answer(buf + off, len - off, head)) == 0)
			break;
	return 0;
}
