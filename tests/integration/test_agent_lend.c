/*
 * test_agent_lend.c — the data path of a lend contract against a real
 * ramexd (ramexd_harness.h) on a private PostgreSQL.
 *
 * - endpoints: POST /v1/contracts/{id}/lend by the seller stores the
 *   lender's endpoint and draws the contract secret once; GET by either
 *   party reads both back; the buyer may not register, a third node, the
 *   other team's trader, finance and the operator may not read; endpoints
 *   that are not HOST:PORT are 400; an offline contract is 409 not-lend and
 *   an ended one 409 wrong-state.
 * - end to end: real ramex-agent processes (sim backend) on both sides.
 *   A has lend_listen set and B lend_borrow_mode=listen; they trade a lend
 *   contract, A's agent starts ramex-lend-server and registers it, B's
 *   agent starts ramex-lend-nbd towards it; the test writes pages through
 *   the bridge's NBD port and reads them back, checksum right; a third
 *   node may not read the endpoint and a wrong secret is refused by the
 *   lender; both agents report usage from the children's meter files and
 *   the exchange's usage_reconcile finds the two sides agreeing.
 * - recall: A's workload grows and A recalls; its server gives notice, B's
 *   bridge releases, both children end for good, the contract ends, and
 *   the two sides' usage still agrees.
 * - lender lost: A's server is killed (SIGKILL); B's bridge answers EIO,
 *   ends with "lender lost" once its NBD client leaves, and B's agent
 *   ends the contract saying why (the transition's note), counts it, and
 *   does not start a bridge again.
 * - a slow release (the bridge stopped for 11 s) is awaited: the seller's
 *   agent, shutting down, keeps its server until the borrower released,
 *   and the buyer's agent does not kill the bridge moving pages back.
 * - the seller's agent killed: its server gives notice and serves until
 *   the borrower released (the borrower's pages are not lost with it).
 * - lend_device = ublk on this kernel without ublk_drv: B's agent starts
 *   ramex-lend-ublk with its arguments, restarts it as it fails, and
 *   bills nothing.
 *
 * Waits poll for a condition with a generous bound: they say that
 * something happens, never how fast.
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exchange/core/usage.h"
#include "node-agent/lend/lend_client.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_nbd.h"

#include "tests/integration/agent_harness.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static void place(struct rxh *h, const char *tok, int64_t acct,
                  const char *side, struct rxh_resp *r)
{
	char body[512];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"%s\","
	         "\"pages\":256,\"price\":100000}",
	         (long long)acct, side);
	long s = rxh_call(h, "POST", "/v1/orders", tok, body, NULL, r);
	ck_assert_msg(s == 201, "place: %ld %s", s, r->body);
}

/* `seller` sells 256 pages of spot to `buyer`; returns the contract. */
static int64_t contract(struct rxh *h, const char *seller_tok, int64_t seller,
                        const char *buyer_tok, int64_t buyer)
{
	struct rxh_resp r;
	place(h, seller_tok, seller, "sell", &r);
	rxh_resp_free(&r);
	place(h, buyer_tok, buyer, "buy", &r);
	int64_t id = json_integer_value(json_object_get(
	    json_array_get(json_object_get(r.json, "trades"), 0),
	    "contract_id"));
	rxh_resp_free(&r);
	ck_assert_int_gt(id, 0);
	return id;
}

static const char *str(const struct rxh_resp *r, const char *key)
{
	const char *s = json_string_value(json_object_get(r->json, key));
	return s ? s : "";
}

static int is_secret(const char *s)
{
	if (strlen(s) != 64)
		return 0;
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s) || isupper((unsigned char)*s))
			return 0;
	return 1;
}

/* A signed call by node a, b or c of the world. */
static long node_call(struct rxh *h, struct rxh_world *w, char node,
                      const char *method, const char *path, const char *body,
                      struct rxh_resp *r)
{
	const char *key = node == 'a'   ? w->key_a
	                  : node == 'b' ? w->key_b
	                                : w->key_c;
	const char *sec = node == 'a'   ? w->secret_a
	                  : node == 'b' ? w->secret_b
	                                : w->secret_c;
	return rxh_call_signed(h, method, path, key, sec, body, 0, NULL, r);
}

/* The status of one call whose body is not needed. */
static long status_of(long st, struct rxh_resp *r)
{
	rxh_resp_free(r);
	return st;
}

static int problem_is(const struct rxh_resp *r, const char *slug)
{
	char want[96];
	snprintf(want, sizeof want, "urn:ramex:problem:%s", slug);
	return strcmp(str(r, "type"), want) == 0;
}

START_TEST(endpoints)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	char path[96], secret[80];
	long st;

	rxh_start(&h, "agent_lend_endpoints", "");
	rxh_world(&h, &w);
	/* A (seller) lends to B (buyer); both are in the trader's team */
	int64_t id =
	    contract(&h, w.trader_token, w.node_a, w.trader_token, w.node_b);
	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)id);

	st = node_call(&h, &w, 'b', "GET", path, NULL, &r);
	ck_assert_msg(st == 404 && problem_is(&r, "not-registered"),
	              "GET before the lender registered: %ld %s", st, r.body);
	rxh_resp_free(&r);

	/* only the seller registers */
	st = node_call(&h, &w, 'b', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 403 && problem_is(&r, "not-party"),
	              "the buyer registered: %ld %s", st, r.body);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'c', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 404, "a third node registered: %ld %s", st, r.body);
	rxh_resp_free(&r);

	/* endpoints that are not HOST:PORT */
	static const char *const bad[] = {
	    "{\"endpoint\":\"127.0.0.1\"}",
	    "{\"endpoint\":\"127.0.0.1:0\"}",
	    "{\"endpoint\":\"127.0.0.1:65536\"}",
	    "{\"endpoint\":\"127.0.0.1:70x\"}",
	    "{\"endpoint\":\":7100\"}",
	    "{\"endpoint\":\"-lender:7100\"}",
	    "{\"endpoint\":\"len der:7100\"}",
	    "{\"endpoint\":\"a..b:7100\"}",
	    "{\"endpoint\":\"[::1:7100\"}",
	    "{\"endpoint\":\"[not-v6]:7100\"}",
	    /* digits and dots are an IPv4 address or nothing: a host
	     * name's last label is not all digits (RFC 1123, 2.1) */
	    "{\"endpoint\":\"999.1.1.1:7100\"}",
	    "{\"endpoint\":\"10.0.0.7.1:7100\"}",
	    "{\"endpoint\":\"lender.7:7100\"}",
	    "{\"endpoint\":7100}",
	    "{}",
	    "{\"endpoint\":\"127.0.0.1:7100\",\"secret\":\"00\"}",
	    NULL};
	for (int i = 0; bad[i]; i++) {
		st = node_call(&h, &w, 'a', "POST", path, bad[i], &r);
		ck_assert_msg(st == 400, "%s: %ld %s", bad[i], st, r.body);
		ck_assert_msg(strstr(str(&r, "detail"), "endpoint") ||
		                  strstr(str(&r, "detail"), "secret"),
		              "%s: the detail does not name the field: %s",
		              bad[i], r.body);
		rxh_resp_free(&r);
	}
	char longer[400];
	snprintf(longer, sizeof longer, "{\"endpoint\":\"%0250d.ex:7100\"}", 0);
	memset(longer + 13, 'a', 250);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'a', "POST", path, longer, &r), &r),
	    400);
	/* far too long: the limit it names is the one it keeps, 255 (it
	 * said "1 to 256 characters") */
	char far[400];
	memset(far, 'a', sizeof far);
	memcpy(far, "{\"endpoint\":\"", 13);
	snprintf(far + 313, sizeof far - 313, ".ex:7100\"}");
	st = node_call(&h, &w, 'a', "POST", path, far, &r);
	ck_assert_msg(st == 400 && strstr(str(&r, "detail"), " 255 "),
	              "a 300-character endpoint: %ld %s", st, r.body);
	rxh_resp_free(&r);

	/* the seller registers: the secret is drawn */
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 200, "register: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "endpoint"), "127.0.0.1:7100");
	ck_assert_msg(is_secret(str(&r, "secret")), "secret %s",
	              str(&r, "secret"));
	ck_assert_int_eq(rxh_int(&r, "contract_id"), id);
	snprintf(secret, sizeof secret, "%s", str(&r, "secret"));
	rxh_resp_free(&r);

	/* again, by the team's trader, elsewhere: same secret, new place */
	st = rxh_call(&h, "POST", path, w.trader_token,
	              "{\"endpoint\":\"lender-7.example:7200\"}", NULL, &r);
	ck_assert_msg(st == 200, "re-register: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	ck_assert_str_eq(str(&r, "endpoint"), "lender-7.example:7200");
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"[::1]:7300\"}", &r);
	ck_assert_msg(st == 200, "IPv6: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);

	/* both parties read it */
	st = node_call(&h, &w, 'b', "GET", path, NULL, &r);
	ck_assert_msg(st == 200, "buyer GET: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "endpoint"), "[::1]:7300");
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "GET", path, NULL, &r);
	ck_assert_msg(st == 200, "seller GET: %ld %s", st, r.body);
	ck_assert_str_eq(str(&r, "secret"), secret);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, w.trader_token, NULL, NULL, &r),
	              &r),
	    200);

	/* nobody else; a node or trader of neither side is told what it is
	 * told of a contract that does not exist (a 403 said it did) */
	st = node_call(&h, &w, 'c', "GET", path, NULL, &r);
	ck_assert_msg(st == 404 && problem_is(&r, "not-found") &&
	                  !strstr(r.body, secret),
	              "a third node: %ld %s", st, r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(
	        rxh_call(&h, "GET", path, w.trader2_token, NULL, NULL, &r), &r),
	    404);
	ck_assert_int_eq(
	    status_of(
	        rxh_call(&h, "GET", path, w.finance_token, NULL, NULL, &r), &r),
	    403);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, w.op_token, NULL, NULL, &r),
	              &r),
	    403);
	ck_assert_int_eq(
	    status_of(rxh_call(&h, "GET", path, h.admin, NULL, NULL, &r), &r),
	    403);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'b', "GET",
	                        "/v1/contracts/987654321/lend", NULL, &r),
	              &r),
	    404);

	/* the secret is stored once, sealed (exchange/seal.h): nothing of
	 * it in the row, which a dump or a replica would show */
	PGconn *c = testdb_connect(h.conninfo);
	char sql[320];
	snprintf(sql, sizeof sql,
	         "SELECT count(*) FROM lend_sessions l WHERE contract_id = "
	         "%lld AND secret IS NULL AND secret_sealed LIKE 'rxseal1:%%' "
	         "AND strpos(row_to_json(l)::text, '%s') = 0",
	         (long long)id, secret);
	ck_assert_int_eq(testdb_scalar(c, sql), 1);
	PQfinish(c);

	/* an ended contract takes no endpoint, but its parties still read
	 * the last one (the lender's agent may be draining) */
	snprintf(sql, sizeof sql, "/v1/contracts/%lld/end", (long long)id);
	st = node_call(&h, &w, 'b', "POST", sql, NULL, &r);
	ck_assert_msg(st == 200, "end: %ld %s", st, r.body);
	rxh_resp_free(&r);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 409 && problem_is(&r, "wrong-state"),
	              "ended: %ld %s", st, r.body);
	rxh_resp_free(&r);
	ck_assert_int_eq(
	    status_of(node_call(&h, &w, 'b', "GET", path, NULL, &r), &r), 200);

	/* an offline contract has no data path */
	int64_t off =
	    contract(&h, w.trader_token, w.node_a, w.op_token, w.op_account);
	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)off);
	st = node_call(&h, &w, 'a', "POST", path,
	               "{\"endpoint\":\"127.0.0.1:7100\"}", &r);
	ck_assert_msg(st == 409 && problem_is(&r, "not-lend"),
	              "offline: %ld %s", st, r.body);
	rxh_resp_free(&r);
	rxh_stop(&h);
}
END_TEST

/* ---- end to end: two agents ---- */

static void agent_init(struct agh_agent *a, const char *name, const char *key,
                       const char *secret, struct rxh *h, long total,
                       long usage, const char *const *more)
{
	char bins[512];
	agh_init(a, name, key, secret, h->port, total, usage, more);
	snprintf(a->name, sizeof a->name, "%s", name);
	agh_bin_dir(bins, sizeof bins);
	agh_arg(a, "--lend_bin_dir=%s", bins);
}

/* The number in a file, or -1 when it is not there (yet). */
static long file_number(const char *path)
{
	long v = -1;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The page pattern: page p of round r, reproducible. */
static void pattern(uint8_t *buf, uint64_t page, int round)
{
	uint64_t x = page * 0x9e3779b97f4a7c15ull + (uint64_t)round + 1;
	for (int i = 0; i < LEND_NBD_BLOCK; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
}

static uint64_t fnv(uint64_t h, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The two sides' counted page-seconds of contract id. */
static void sides(PGconn *c, int64_t id, long *seller, long *buyer,
                  long *nseller, long *nbuyer)
{
	*seller =
	    agh_q(c,
	          "SELECT coalesce(sum(page_seconds), 0) FROM usage_reports "
	          "WHERE contract_id = %lld AND side = 'seller'",
	          (long long)id);
	*buyer =
	    agh_q(c,
	          "SELECT coalesce(sum(page_seconds), 0) FROM usage_reports "
	          "WHERE contract_id = %lld AND side = 'buyer'",
	          (long long)id);
	*nseller =
	    agh_q(c,
	          "SELECT count(*) FROM usage_reports WHERE contract_id = "
	          "%lld AND side = 'seller'",
	          (long long)id);
	*nbuyer =
	    agh_q(c,
	          "SELECT count(*) FROM usage_reports WHERE contract_id = "
	          "%lld AND side = 'buyer'",
	          (long long)id);
}

/* A meter file's hosted page-seconds (-1 when there is none yet). */
static long long meter_hosted(const char *path)
{
	char line[512];
	struct lend_meter_report r;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int ok = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	line[strcspn(line, "\n")] = 0;
	if (!ok || lend_meter_parse(line, &r) < 0)
		return -1;
	return (long long)r.hosted_page_s;
}

/* The spot market's notice for the next lend_up (a test that needs a
 * longer one sets it, and back) */
static int lend_notice_s = 2;
/* lend_up: A's ramex-lend-server a program that fails at once (a lender
 * whose server cannot start: ramex.ko's pool taken, say); lend_up then
 * returns once the contract is delivered, *fd -1 */
static int lend_no_server;
/* lend_up: B borrows with lend_device = ublk (attach mode) through a
 * ramex-lend-ublk that writes its arguments to BIN/ublk-args first, BIN
 * being lend_ublk_dir; lend_up then returns once the contract is
 * delivered, *fd -1 */
static int lend_b_ublk;
static char lend_ublk_dir[600];

/* Starts ramexd and the two agents, waits for their lend contract and
 * B's bridge, and connects to the bridge's NBD port: *fd after the NBD
 * handshake, *id and *pages the contract's. */
static void lend_up_tls(const char *db_name, struct rxh *h, struct rxh_world *w,
                        struct agh_agent *A, struct agh_agent *B, PGconn **cp,
                        int64_t *id, long *pages, int *fd, int tls);

static void lend_up(const char *db_name, struct rxh *h, struct rxh_world *w,
                    struct agh_agent *A, struct agh_agent *B, PGconn **cp,
                    int64_t *id, long *pages, int *fd)
{
	lend_up_tls(db_name, h, w, A, B, cp, id, pages, fd, 0);
}

/* lend_up, and with `tls` the lender's servers take a certificate made
 * here and the borrower's bridge trusts it (lend_tls_* settings). */
static void lend_up_tls(const char *db_name, struct rxh *h, struct rxh_world *w,
                        struct agh_agent *A, struct agh_agent *B, PGconn **cp,
                        int64_t *id, long *pages, int *fd, int tls)
{
	char path[700], err[256];

	rxh_start(h, db_name, "");
	rxh_world(h, w);
	/* a recall must end within the test: spot's notice is 2 s (ramexd
	 * reads markets at start) */
	PGconn *c = testdb_connect(h->conninfo);
	char q[96];
	snprintf(q, sizeof q,
	         "UPDATE markets SET notice_period_s = %d WHERE name = 'spot'",
	         lend_notice_s);
	PGresult *pr = PQexec(c, q);
	ck_assert_msg(PQresultStatus(pr) == PGRES_COMMAND_OK, "%s",
	              PQerrorMessage(c));
	PQclear(pr);
	PQfinish(c);
	rxh_stop(h);
	rxh_restart(h);

	/* A has spare pages it offers cheaply and serves lends on loopback;
	 * B's workload needs more than it has and bids for the difference */
	static char cert[600], key[600], ca[600], tdir[500];
	const char *a_flags[] = {"--margin_min_pages=4096",
	                         "--spot_floor=100000",
	                         "--stall_value=10",
	                         "--lend_listen=127.0.0.1:0",
	                         "--lend_keep_awake=2",
	                         "--lend_idle_poll=yes",
	                         NULL,
	                         NULL,
	                         NULL};
	/* a reply timeout, keep-awake threads and idle polling of its own,
	 * to see them reach the bridge */
	const char *b_flags[] = {"--margin_min_pages=8192",
	                         "--events=no",
	                         "--lend_borrow_mode=listen",
	                         "--lend_reply_timeout_ms=4321",
	                         "--lend_keep_awake=1",
	                         "--lend_idle_poll=yes",
	                         NULL,
	                         NULL};
	if (tls) {
		char cmd[2600];
		snprintf(tdir, sizeof tdir, "%s/%s-tls", agh_out_dir(),
		         db_name);
		snprintf(cmd, sizeof cmd,
		         "rm -rf '%s' && mkdir -p '%s' && openssl req -x509 "
		         "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
		         "-nodes -days 1 -subj /CN=localhost -keyout "
		         "'%s/lender.key' -out '%s/lender.crt' >/dev/null 2>&1",
		         tdir, tdir, tdir, tdir);
		ck_assert_int_eq(system(cmd), 0);
		snprintf(cert, sizeof cert, "--lend_tls_cert=%s/lender.crt",
		         tdir);
		snprintf(key, sizeof key, "--lend_tls_key=%s/lender.key", tdir);
		snprintf(ca, sizeof ca, "--lend_tls_ca=%s/lender.crt", tdir);
		a_flags[6] = cert;
		a_flags[7] = key;
		b_flags[6] = ca;
	}
	char an[80], bn[80];
	snprintf(an, sizeof an, "%s-a", db_name);
	snprintf(bn, sizeof bn, "%s-b", db_name);
	agent_init(A, an, w->key_a, w->secret_a, h, 65536, 8192, a_flags);
	if (lend_no_server) {
		char dir[600], prog[700];
		snprintf(dir, sizeof dir, "%s/%s-bin", agh_out_dir(), db_name);
		snprintf(prog, sizeof prog, "%s/ramex-lend-server", dir);
		ck_assert_int_eq(mkdir(dir, 0755) == 0 || errno == EEXIST, 1);
		FILE *f = fopen(prog, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "#!/bin/sh\necho 'ramex-lend-server: could not "
		           "pool the pages (a test)' >&2\nexit 1\n");
		fclose(f);
		ck_assert_int_eq(chmod(prog, 0755), 0);
		agh_arg(A, "--lend_bin_dir=%s", dir); /* the last one counts */
	}
	if (lend_b_ublk)
		b_flags[2] = "--lend_device=ublk"; /* attach, the default */
	agent_init(B, bn, w->key_b, w->secret_b, h, 16384, 12000, b_flags);
	if (lend_b_ublk) {
		char prog[700], bins[512];
		snprintf(lend_ublk_dir, sizeof lend_ublk_dir, "%s/%s-bin",
		         agh_out_dir(), db_name);
		snprintf(prog, sizeof prog, "%s/ramex-lend-ublk",
		         lend_ublk_dir);
		ck_assert_int_eq(
		    mkdir(lend_ublk_dir, 0755) == 0 || errno == EEXIST, 1);
		agh_bin_dir(bins, sizeof bins);
		FILE *f = fopen(prog, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f,
		        "#!/bin/sh\nprintf '%%s\\n' \"$@\" > '%s/ublk-args'\n"
		        "exec '%s/ramex-lend-ublk' \"$@\"\n",
		        lend_ublk_dir, bins);
		fclose(f);
		ck_assert_int_eq(chmod(prog, 0755), 0);
		agh_arg(B, "--lend_bin_dir=%s", lend_ublk_dir);
	}
	agh_start(A);
	agh_start(B);

	c = *cp = testdb_connect(h->conninfo);
	AGH_WAIT_FOR(
	    agh_q(c,
	          "SELECT count(*) FROM contracts WHERE state = 'active' AND "
	          "delivery = 'lend' AND seller_id = %lld AND buyer_id = %lld",
	          (long long)w->node_a, (long long)w->node_b) >= 1,
	    "no lend contract from A to B was delivered; see %s and %s", A->log,
	    B->log);
	*id = agh_q(c, "SELECT min(id) FROM contracts WHERE state = 'active' "
	               "AND delivery = 'lend'");
	*pages = agh_q(c, "SELECT pages FROM contracts WHERE id = %lld",
	               (long long)*id);
	ck_assert_int_gt(*pages, 0);
	*fd = -1;
	if (lend_no_server || lend_b_ublk)
		return;

	/* A registered its server; B's bridge came up on an NBD port */
	snprintf(path, sizeof path, "%s-lend/lend-nbd-%lld.port", B->spool,
	         (long long)*id);
	AGH_WAIT_FOR(file_number(path) > 0,
	             "B's bridge for contract %lld did not start (%s); see %s",
	             (long long)*id, path, B->log);
	int nbd_port = (int)file_number(path);
	*fd = -1;
	AGH_WAIT_FOR((*fd = rxh_dial(nbd_port)) >= 0,
	             "B's bridge does not listen on %d; see %s-lend/", nbd_port,
	             B->spool);
	uint64_t size = 0;
	uint16_t tflags = 0;
	ck_assert_msg(lend_nbd_client_handshake(*fd, "ramex", &size, &tflags,
	                                        err, sizeof err) == 0,
	              "NBD handshake: %s", err);
	ck_assert_int_eq(size, (uint64_t)*pages * LEND_NBD_BLOCK);
}

/* Does the file hold `text`? */
static int file_has(const char *path, const char *text)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, text) != NULL;
}

/* How often `text` occurs in the file. */
static int file_count(const char *path, const char *text)
{
	static char buf[1 << 20];
	int n = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = 0;
	for (char *p = buf; (p = strstr(p, text)); p += strlen(text))
		n++;
	return n;
}

START_TEST(end_to_end)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct agh_agent A, B;
	char path[700], lender[300];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	lend_up("agent_lend_e2e", &h, &w, &A, &B, &c, &id, &pages, &fd);

	/* pages spread over the export: first, last and a stride between */
	enum { NPAGES = 96 };
	uint64_t at[NPAGES];
	for (int i = 0; i < NPAGES; i++)
		at[i] = (uint64_t)i * ((uint64_t)pages - 1) / (NPAGES - 1);
	static uint8_t buf[LEND_NBD_BLOCK], back[LEND_NBD_BLOCK];
	uint64_t wrote = 0xcbf29ce484222325ull, read = wrote;
	uint32_t nerr;
	for (int i = 0; i < NPAGES; i++) {
		pattern(buf, at[i], 0);
		wrote = fnv(wrote, buf, sizeof buf);
		ck_assert_int_eq(
		    lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, (uint64_t)i + 1,
		                        at[i] * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                        buf, NULL, &nerr),
		    0);
		ck_assert_int_eq(nerr, 0);
	}
	for (int i = NPAGES - 1; i >= 0; i--) {
		ck_assert_int_eq(lend_nbd_client_cmd(
		                     fd, LEND_NBD_CMD_READ, (uint64_t)i + 1000,
		                     at[i] * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                     NULL, back, &nerr),
		                 0);
		ck_assert_int_eq(nerr, 0);
		pattern(buf, at[i], 0);
		ck_assert_msg(!memcmp(buf, back, sizeof buf),
		              "page %llu came back changed",
		              (unsigned long long)at[i]);
	}
	for (int i = 0; i < NPAGES; i++) {
		ck_assert_int_eq(lend_nbd_client_cmd(
		                     fd, LEND_NBD_CMD_READ, (uint64_t)i + 2000,
		                     at[i] * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                     NULL, back, &nerr),
		                 0);
		read = fnv(read, back, sizeof back);
	}
	ck_assert_msg(read == wrote,
	              "checksum of the pages read back %llx, "
	              "written %llx",
	              (unsigned long long)read, (unsigned long long)wrote);

	/* the agent's lend_reply_timeout_ms is the bridge's bound */
	snprintf(path, sizeof path, "%s-lend/lend-nbd-%lld.log", B.spool,
	         (long long)id);
	ck_assert_msg(file_has(path, "reply_timeout_ms=4321"),
	              "the bridge did not get lend_reply_timeout_ms; see %s",
	              path);
	ck_assert_msg(file_has(path, "keep_awake=1"),
	              "the bridge did not get lend_keep_awake; see %s", path);
	ck_assert_msg(file_has(path, "idle_poll=1"),
	              "the bridge did not get lend_idle_poll; see %s", path);
	snprintf(path, sizeof path, "%s-lend/lend-server-%lld.log", A.spool,
	         (long long)id);
	ck_assert_msg(file_has(path, "keep_awake=2"),
	              "the lender did not get lend_keep_awake; see %s", path);
	ck_assert_msg(file_has(path, "idle_poll=1"),
	              "the lender did not get lend_idle_poll; see %s", path);

	/* the endpoint is the parties' alone, and the lender refuses a
	 * borrower without the secret */
	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)id);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", path, w.key_c, w.secret_c,
	                                 NULL, 0, NULL, &r),
	                 404);
	rxh_resp_free(&r);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", path, w.key_b, w.secret_b,
	                                 NULL, 0, NULL, &r),
	                 200);
	snprintf(lender, sizeof lender, "%s",
	         json_string_value(json_object_get(r.json, "endpoint")));
	rxh_resp_free(&r);
	char *colon = strrchr(lender, ':');
	ck_assert(colon);
	*colon = 0;
	uint8_t wrong[LEND_SECRET_LEN];
	memset(wrong, 0x5a, sizeof wrong);
	struct lend_client bad;
	ck_assert_msg(lend_client_connect(&bad, lender, atoi(colon + 1), NULL,
	                                  (uint64_t)id, wrong, 5000) < 0,
	              "the lender let in a borrower with a wrong secret");
	ck_assert_msg(bad.last_error == LEND_E_AUTH,
	              "refused, but not for the secret: %s", bad.err);
	lend_client_close(&bad);
	/* the real borrower still works after that */
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 5000,
	                                     at[1] * LEND_NBD_BLOCK,
	                                     LEND_NBD_BLOCK, NULL, back, &nerr),
	                 0);
	pattern(buf, at[1], 0);
	ck_assert(!memcmp(buf, back, sizeof buf));

	/* both sides report from their meters: wait until the exchange
	 * counted a few seconds of hosting from each */
	snprintf(path, sizeof path, "%s-lend/lend-server-%lld.meter", A.spool,
	         (long long)id);
	char bpath[700];
	snprintf(bpath, sizeof bpath, "%s-lend/lend-nbd-%lld.meter", B.spool,
	         (long long)id);
	AGH_WAIT_FOR(
	    meter_hosted(path) >= 3 * pages && meter_hosted(bpath) >= 3 * pages,
	    "the lend children's meters do not count (%s, %s)", path, bpath);
	long s_ps, b_ps, ns, nb;
	AGH_WAIT_FOR((sides(c, id, &s_ps, &b_ps, &ns, &nb),
	              s_ps >= 3 * pages && b_ps >= 3 * pages),
	             "usage of both sides not counted; see %s and %s", A.log,
	             B.log);

	/* the borrower is done: NBD disconnect ends the bridge (its meter
	 * stops there); B's agent goes on reporting for some seconds, which
	 * the executor would count as pages x time and the meter does not;
	 * then the agents stop and send their last reports */
	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 9999, 0, 0, NULL, NULL,
	                    &nerr);
	close(fd);
	char blog[700];
	snprintf(blog, sizeof blog, "%s-lend/lend-nbd-%lld.log", B.spool,
	         (long long)id);
	AGH_WAIT_FOR(file_has(blog, "end=disconnected"),
	             "B's bridge did not end on the NBD disconnect; see %s",
	             blog);
	long nb0 = nb;
	AGH_WAIT_FOR((sides(c, id, &s_ps, &b_ps, &ns, &nb), nb >= nb0 + 6),
	             "B stopped reporting; see %s", B.log);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	sides(c, id, &s_ps, &b_ps, &ns, &nb);
	ck_assert_int_ge(ns, 3);
	ck_assert_int_ge(nb, 3);
	struct usage_recon rc = usage_reconcile(pages, true, s_ps, true, b_ps);
	printf("end to end: contract %lld of %ld pages: seller %ld, buyer "
	       "%ld page-seconds (%s)\n",
	       (long long)id, pages, s_ps, b_ps, usage_recon_name(rc.flag));
	ck_assert_msg(rc.flag == USAGE_RECON_AGREE,
	              "contract %lld of %ld pages: seller reported %ld "
	              "page-seconds, buyer %ld: %s",
	              (long long)id, pages, s_ps, b_ps,
	              usage_recon_name(rc.flag));
	/* and the reports are the meter's, not the executor's: all the
	 * meter counted, plus the executor's figure for the second or two
	 * before the bridge was up, but nothing for the six seconds after
	 * it ended */
	long long bm = meter_hosted(bpath);
	ck_assert_msg(b_ps >= bm && b_ps - bm <= 3 * pages,
	              "buyer reported %ld page-seconds, its meter says %lld "
	              "(contract of %ld pages)",
	              b_ps, bm, pages);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* With lend_tls_* set the data path is TLS: pages written through the
 * bridge come back intact, and the lender refuses a borrower that speaks
 * plain TCP even with the contract's secret. */
START_TEST(end_to_end_tls)
{
	struct rxh h;
	struct rxh_world w;
	struct rxh_resp r;
	struct agh_agent A, B;
	char path[700], lender[300];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	lend_up_tls("agent_lend_tls", &h, &w, &A, &B, &c, &id, &pages, &fd, 1);
	enum { NPAGES = 16 };
	static uint8_t buf[LEND_NBD_BLOCK], back[LEND_NBD_BLOCK];
	uint32_t nerr;
	for (int i = 0; i < NPAGES; i++) {
		uint64_t at =
		    (uint64_t)i * ((uint64_t)pages - 1) / (NPAGES - 1);
		pattern(buf, at, 1);
		ck_assert_int_eq(
		    lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, (uint64_t)i + 1,
		                        at * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                        buf, NULL, &nerr),
		    0);
		ck_assert_int_eq(nerr, 0);
	}
	for (int i = 0; i < NPAGES; i++) {
		uint64_t at =
		    (uint64_t)i * ((uint64_t)pages - 1) / (NPAGES - 1);
		ck_assert_int_eq(
		    lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ,
		                        (uint64_t)i + 100, at * LEND_NBD_BLOCK,
		                        LEND_NBD_BLOCK, NULL, back, &nerr),
		    0);
		ck_assert_int_eq(nerr, 0);
		pattern(buf, at, 1);
		ck_assert_msg(!memcmp(buf, back, sizeof buf),
		              "page %llu came back changed over TLS",
		              (unsigned long long)at);
	}

	snprintf(path, sizeof path, "/v1/contracts/%lld/lend", (long long)id);
	ck_assert_int_eq(rxh_call_signed(&h, "GET", path, w.key_b, w.secret_b,
	                                 NULL, 0, NULL, &r),
	                 200);
	snprintf(lender, sizeof lender, "%s",
	         json_string_value(json_object_get(r.json, "endpoint")));
	uint8_t secret[LEND_SECRET_LEN];
	ck_assert_int_eq(
	    lend_secret_parse(
	        json_string_value(json_object_get(r.json, "secret")), secret),
	    0);
	rxh_resp_free(&r);
	char *colon = strrchr(lender, ':');
	ck_assert(colon);
	*colon = 0;
	struct lend_client plain;
	ck_assert_msg(lend_client_connect(&plain, lender, atoi(colon + 1), NULL,
	                                  (uint64_t)id, secret, 5000) < 0,
	              "the TLS lender let in a plain-TCP borrower");
	lend_client_close(&plain);

	lend_nbd_client_cmd(fd, LEND_NBD_CMD_DISC, 9999, 0, 0, NULL, NULL,
	                    &nerr);
	close(fd);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* The lender takes its pages back: A's workload grows, A's agent recalls
 * the contract and gives its server's borrower notice (SIGUSR1); B's
 * bridge moves out and releases, the server frees the pages, neither
 * child is started again, the contract ends after its notice, and both
 * sides' usage still reconciles. */
START_TEST(recall)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	char slog[700], blog[700];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;
	static uint8_t buf[LEND_NBD_BLOCK], back[LEND_NBD_BLOCK];
	uint32_t nerr;

	lend_up("agent_lend_recall", &h, &w, &A, &B, &c, &id, &pages, &fd);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_lend_children") == 1 &&
	                 agh_metric(&B, "ramex_agent_lend_children") == 1,
	             "the status files do not show the lend children; see %s",
	             A.status);
	for (uint64_t p = 0; p < 16; p++) {
		pattern(buf, p * 7, 1);
		ck_assert_int_eq(
		    lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, p + 1,
		                        p * 7 * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                        buf, NULL, &nerr),
		    0);
		ck_assert_int_eq(nerr, 0);
	}
	for (uint64_t p = 0; p < 16; p++) {
		ck_assert_int_eq(
		    lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, p + 100,
		                        p * 7 * LEND_NBD_BLOCK, LEND_NBD_BLOCK,
		                        NULL, back, &nerr),
		    0);
		pattern(buf, p * 7, 1);
		ck_assert(!memcmp(buf, back, sizeof buf));
	}

	snprintf(slog, sizeof slog, "%s-lend/lend-server-%lld.log", A.spool,
	         (long long)id);
	snprintf(blog, sizeof blog, "%s-lend/lend-nbd-%lld.log", B.spool,
	         (long long)id);
	agh_write_file(A.usage, "60000\n");
	AGH_WAIT_FOR(file_has(blog, "end=recalled"),
	             "B's bridge was not recalled; see %s and %s", blog, A.log);
	AGH_WAIT_FOR(file_has(slog, "end=released"),
	             "A's server did not free the pages on B's release; see %s",
	             slog);
	AGH_WAIT_FOR(agh_q(c,
	                   "SELECT count(*) FROM contracts WHERE id = %lld AND "
	                   "state = 'ended'",
	                   (long long)id) == 1,
	             "the recalled contract did not end; see %s", h.log);
	AGH_WAIT_FOR(file_has(B.log, "contract over"),
	             "B did not see the contract end; see %s", B.log);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_lend_children") == 0 &&
	                 agh_metric(&B, "ramex_agent_lend_children") == 0,
	             "lend children still run after the recall; see %s and %s",
	             A.log, B.log);
	/* the bridge is gone: the NBD link is closed */
	ck_assert_msg(lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 999, 0,
	                                  LEND_NBD_BLOCK, NULL, back,
	                                  &nerr) < 0 ||
	                  nerr != 0,
	              "the bridge still serves after the recall");
	close(fd);

	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	/* ended on their own terms: neither was started again */
	ck_assert_int_eq(file_count(blog, "bridge ends"), 1);
	ck_assert_int_eq(file_count(slog, "lender ends"), 1);
	long s_ps, b_ps, ns, nb;
	sides(c, id, &s_ps, &b_ps, &ns, &nb);
	ck_assert_int_ge(ns, 1);
	ck_assert_int_ge(nb, 1);
	struct usage_recon rc = usage_reconcile(pages, true, s_ps, true, b_ps);
	printf("recall: contract %lld of %ld pages: seller %ld, buyer %ld "
	       "page-seconds (%s)\n",
	       (long long)id, pages, s_ps, b_ps, usage_recon_name(rc.flag));
	ck_assert_msg(rc.flag == USAGE_RECON_AGREE,
	              "contract %lld of %ld pages: seller reported %ld "
	              "page-seconds, buyer %ld: %s",
	              (long long)id, pages, s_ps, b_ps,
	              usage_recon_name(rc.flag));
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* The pid of the lend child whose command line names `file` (its
 * secret file: one agent's, one contract's), or 0. Earlier tests' children
 * may still be ending, with the same contract ids. */
static pid_t lend_child_pid(const char *file)
{
	pid_t found = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && !found && (e = readdir(d))) {
		char path[300], buf[8192];
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		/* arguments are NUL-separated: one of them is the file */
		for (char *a = buf; a < buf + n; a += strlen(a) + 1)
			if (!strcmp(a, file))
				found = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* The secret file of agent `spool`'s child `name` for contract `id`. */
static const char *child_secret(char *out, size_t n, const char *spool,
                                const char *name, int64_t id)
{
	snprintf(out, n, "%s-lend/%s-%lld.secret", spool, name, (long long)id);
	return out;
}

/* Writes page `page` (a pattern of its number) through the bridge's NBD
 * port: the data path works before a test breaks something. */
static void write_one(int fd, uint64_t page)
{
	static uint8_t buf[LEND_NBD_BLOCK];
	uint32_t nerr;
	pattern(buf, page, 1);
	ck_assert_int_eq(lend_nbd_client_cmd(fd, LEND_NBD_CMD_WRITE, 1,
	                                     page * LEND_NBD_BLOCK,
	                                     LEND_NBD_BLOCK, buf, NULL, &nerr),
	                 0);
	ck_assert_int_eq(nerr, 0);
}

/* The logs of contract id's server (A, the seller) and bridge (B). */
static void child_logs(const struct agh_agent *A, const struct agh_agent *B,
                       int64_t id, char *slog, char *blog, size_t n)
{
	snprintf(slog, n, "%s-lend/lend-server-%lld.log", A->spool,
	         (long long)id);
	snprintf(blog, n, "%s-lend/lend-nbd-%lld.log", B->spool, (long long)id);
}

START_TEST(lender_lost)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	char blog[700];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;
	static uint8_t back[LEND_NBD_BLOCK];
	uint32_t nerr;

	lend_up("agent_lend_lost", &h, &w, &A, &B, &c, &id, &pages, &fd);
	write_one(fd, 3);
	char sf[700];
	pid_t server = lend_child_pid(
	    child_secret(sf, sizeof sf, A.spool, "lend-server", id));
	ck_assert_msg(server > 0, "no ramex-lend-server for contract %lld",
	              (long long)id);
	ck_assert_int_eq(kill(server, SIGKILL), 0);
	/* the page is gone with the lender: EIO, never a hang */
	int rc =
	    lend_nbd_client_cmd(fd, LEND_NBD_CMD_READ, 2, 3 * LEND_NBD_BLOCK,
	                        LEND_NBD_BLOCK, NULL, back, &nerr);
	ck_assert_msg(rc < 0 || nerr != 0,
	              "a read of a page on a dead lender succeeded");
	close(fd); /* the NBD client leaves: the bridge ends */
	snprintf(blog, sizeof blog, "%s-lend/lend-nbd-%lld.log", B.spool,
	         (long long)id);
	AGH_WAIT_FOR(agh_q(c,
	                   "SELECT count(*) FROM contracts WHERE id = %lld AND "
	                   "state = 'ended'",
	                   (long long)id) == 1,
	             "B did not end the contract of its lost lender; see %s "
	             "and %s",
	             B.log, blog);
	ck_assert_int_eq(
	    agh_q(c,
	          "SELECT count(*) FROM contract_transitions WHERE "
	          "contract_id = %lld AND to_state = 'ended' AND why LIKE "
	          "'%%lender vanished%%'",
	          (long long)id),
	    1);
	AGH_WAIT_FOR(agh_metric(&B, "ramex_agent_lenders_lost_total") == 1,
	             "B's status does not count the lost lender; see %s",
	             B.status);
	AGH_WAIT_FOR(agh_metric(&B, "ramex_agent_lend_children") == 0,
	             "B's bridge still runs; see %s", B.log);
	ck_assert_int_eq(file_count(B.log, "child=lend-nbd pid="), 1);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	/* started once, ended once, for good */
	ck_assert_int_eq(file_count(blog, "bridge ends"), 1);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* lend_up with a 60 s notice, page `page` written through the bridge,
 * the children's logs named; returns the bridge's pid. */
static pid_t lend_up_long_notice(const char *db_name, struct rxh *h,
                                 struct rxh_world *w, struct agh_agent *A,
                                 struct agh_agent *B, PGconn **c, int64_t *id,
                                 long *pages, int *fd, uint64_t page,
                                 char *slog, char *blog, size_t n)
{
	char bf[700];
	lend_notice_s = 60;
	lend_up(db_name, h, w, A, B, c, id, pages, fd);
	lend_notice_s = 2;
	write_one(*fd, page);
	child_logs(A, B, *id, slog, blog, n);
	pid_t bridge = lend_child_pid(
	    child_secret(bf, sizeof bf, B->spool, "lend-nbd", *id));
	ck_assert_msg(bridge > 0, "no ramex-lend-nbd for contract %lld",
	              (long long)*id);
	return bridge;
}

/* A release that takes long (a borrower's swapoff under memory pressure,
 * here a bridge stopped for 11 s) is waited for on both sides: the
 * seller's agent, shutting down, keeps its server giving notice until
 * the borrower released, and the buyer's agent does not kill the bridge
 * that moves the pages back (it used to, after 10 s; and the seller's
 * server after 2 s). */
START_TEST(slow_release_is_awaited)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	char slog[700], blog[700];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	pid_t bridge =
	    lend_up_long_notice("agent_lend_slow", &h, &w, &A, &B, &c, &id,
	                        &pages, &fd, 5, slog, blog, sizeof slog);
	ck_assert_int_eq(kill(bridge, SIGSTOP), 0);
	/* A shuts down: it recalls its sale and gives its borrower notice */
	ck_assert_int_eq(kill(A.pid, SIGTERM), 0);
	AGH_WAIT_FOR(file_has(B.log, "contract over"),
	             "B did not see the recall; see %s", B.log);
	sleep(11);
	ck_assert_int_eq(kill(bridge, SIGCONT), 0);
	AGH_WAIT_FOR(file_has(blog, "end=recalled"),
	             "B's bridge did not finish its recall; see %s and %s",
	             blog, B.log);
	AGH_WAIT_FOR(file_has(slog, "end=released"),
	             "A's server did not serve until the release; see %s",
	             slog);
	int st = agh_signal(&A, 0); /* reaps A, which ends by itself now */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	              "A did not stop cleanly; see %s", A.log);
	ck_assert(file_has(A.log, "waiting for lend children to finish"));
	ck_assert(!file_has(A.log, "stopping lend children before"));
	ck_assert_int_eq(agh_metric(&B, "ramex_agent_lenders_lost_total"), 0);
	close(fd);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* The seller's agent crashes (SIGKILL): its server gets its recall
 * notice from the kernel (PR_SET_PDEATHSIG, SIGUSR1) and serves until the
 * borrower released; it used to get SIGTERM and stop, and the borrower's
 * pages were lost with it. */
START_TEST(seller_agent_crash_gives_notice)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	char slog[700], blog[700];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	lend_up("agent_lend_crash", &h, &w, &A, &B, &c, &id, &pages, &fd);
	write_one(fd, 9);
	child_logs(&A, &B, id, slog, blog, sizeof slog);
	int st = agh_signal(&A, SIGKILL);
	ck_assert(WIFSIGNALED(st));
	AGH_WAIT_FOR(file_has(blog, "end=recalled"),
	             "B's bridge was not given notice by the orphaned server; "
	             "see %s and %s",
	             blog, slog);
	AGH_WAIT_FOR(file_has(slog, "end=released"),
	             "the orphaned server did not serve until the release; "
	             "see %s",
	             slog);
	ck_assert_int_eq(agh_metric(&B, "ramex_agent_lenders_lost_total"), 0);
	close(fd);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* A lender given notice still holds its borrower's pages until the
 * release: that time is delivered, and both sides report it (the
 * delivery span runs to the notice's end, docs/money.md). Both agents
 * used to end their contract's metering at the recall, so the notice
 * went unbilled. Here the borrower's bridge is held (SIGSTOP) for 8 s
 * after the recall: the lender's reports must cover those 8 s, and the
 * buyer's must go on until its bridge ended. (A stopped bridge does not
 * write its meter file, and a report never claims more than its period's
 * pages x seconds, so the buyer's figure for the stop stays low: it is
 * the lower one, and the two still agree within the reconciliation's
 * slack.) */
START_TEST(notice_is_metered)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	char slog[700], blog[700];
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	pid_t bridge =
	    lend_up_long_notice("agent_lend_notice", &h, &w, &A, &B, &c, &id,
	                        &pages, &fd, 3, slog, blog, sizeof slog);
	/* both agents bill from their child's meter once it has one */
	char smeter[700], bmeter[700];
	snprintf(smeter, sizeof smeter, "%s-lend/lend-server-%lld.meter",
	         A.spool, (long long)id);
	snprintf(bmeter, sizeof bmeter, "%s-lend/lend-nbd-%lld.meter", B.spool,
	         (long long)id);
	AGH_WAIT_FOR(meter_hosted(smeter) > 0 && meter_hosted(bmeter) > 0,
	             "no meter files %s and %s", smeter, bmeter);
	sleep(2); /* a round of each agent: they have read them */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long recall_ns = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
	ck_assert_int_eq(kill(bridge, SIGSTOP), 0);
	agh_write_file(A.usage, "60000\n"); /* A's workload wants its RAM */
	AGH_WAIT_FOR(file_has(B.log, "contract over"),
	             "B did not see the recall; see %s and %s", B.log, A.log);
	sleep(8);
	ck_assert_int_eq(kill(bridge, SIGCONT), 0);
	AGH_WAIT_FOR(file_has(slog, "end=released"),
	             "A's server did not serve until the release; see %s",
	             slog);
	/* each side's last report covers the notice up to the release */
	const long long after = recall_ns + 6000000000LL;
	AGH_WAIT_FOR(agh_q(c,
	                   "SELECT count(*) FROM usage_reports WHERE "
	                   "contract_id = %lld AND side = 'seller' AND "
	                   "period_end_ns >= %lld",
	                   (long long)id, after) >= 1 &&
	                 agh_q(c,
	                       "SELECT count(*) FROM usage_reports WHERE "
	                       "contract_id = %lld AND side = 'buyer' AND "
	                       "period_end_ns >= %lld",
	                       (long long)id, after) >= 1,
	             "the notice's time was not reported by both sides; see "
	             "%s and %s",
	             A.log, B.log);
	AGH_WAIT_FOR(agh_metric(&A, "ramex_agent_lend_children") == 0 &&
	                 agh_metric(&B, "ramex_agent_lend_children") == 0,
	             "lend children still run after the release; see %s and %s",
	             A.log, B.log);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	/* the pages were held at least the 8 s the bridge was stopped: the
	 * page-seconds reported for periods after the recall show it */
	long s_tail = agh_q(c,
	                    "SELECT coalesce(sum(page_seconds), 0) FROM "
	                    "usage_reports WHERE contract_id = %lld AND side = "
	                    "'seller' AND period_start_ns >= %lld",
	                    (long long)id, recall_ns);
	long b_tail = agh_q(c,
	                    "SELECT coalesce(sum(page_seconds), 0) FROM "
	                    "usage_reports WHERE contract_id = %lld AND side = "
	                    "'buyer' AND period_start_ns >= %lld",
	                    (long long)id, recall_ns);
	long s_ps, b_ps, ns, nb;
	sides(c, id, &s_ps, &b_ps, &ns, &nb);
	struct usage_recon rc = usage_reconcile(pages, true, s_ps, true, b_ps);
	printf("notice: contract %lld of %ld pages: seller %ld (after the "
	       "recall %ld), buyer %ld (%ld) page-seconds (%s)\n",
	       (long long)id, pages, s_ps, s_tail, b_ps, b_tail,
	       usage_recon_name(rc.flag));
	ck_assert_msg(
	    s_tail >= 6 * pages && b_tail > 0,
	    "contract %lld of %ld pages: after the recall the seller "
	    "reported %ld page-seconds, the buyer %ld; the pages were "
	    "held at least 8 s",
	    (long long)id, pages, s_tail, b_tail);
	ck_assert_msg(rc.flag == USAGE_RECON_AGREE,
	              "contract %lld of %ld pages: seller reported %ld "
	              "page-seconds, buyer %ld: %s",
	              (long long)id, pages, s_ps, b_ps,
	              usage_recon_name(rc.flag));
	close(fd);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* A lender whose server never starts delivers nothing, and neither side
 * bills a page-second for it: the agents used to report the executor's
 * pages x time while the child had no meter (seen in the guest: 340 558
 * page-seconds for a server that ramex.ko's busy pool kept from
 * starting). Both still report, with 0. */
START_TEST(a_lender_that_never_served_bills_nothing)
{
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	lend_no_server = 1;
	lend_up("agent_lend_never", &h, &w, &A, &B, &c, &id, &pages, &fd);
	lend_no_server = 0;
	AGH_WAIT_FOR(file_count(A.log, "lend child failed") >= 2,
	             "A's failing server was not started twice; see %s",
	             A.log);
	/* several rounds of reports from each side (report_s is 1) */
	AGH_WAIT_FOR(agh_q(c,
	                   "SELECT count(*) FROM usage_reports WHERE "
	                   "contract_id = %lld AND side = 'seller'",
	                   (long long)id) >= 3 &&
	                 agh_q(c,
	                       "SELECT count(*) FROM usage_reports WHERE "
	                       "contract_id = %lld AND side = 'buyer'",
	                       (long long)id) >= 3,
	             "too few usage reports for contract %lld; see %s and %s",
	             (long long)id, A.log, B.log);
	long s_ps, b_ps, ns, nb;
	sides(c, id, &s_ps, &b_ps, &ns, &nb);
	printf("never served: contract %lld of %ld pages: seller %ld, buyer "
	       "%ld page-seconds in %ld and %ld reports\n",
	       (long long)id, pages, s_ps, b_ps, ns, nb);
	ck_assert_msg(s_ps == 0 && b_ps == 0,
	              "contract %lld, whose lender never served: seller "
	              "reported %ld page-seconds, buyer %ld",
	              (long long)id, s_ps, b_ps);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

/* B borrows with lend_device = ublk on a kernel without ublk_drv (the
 * host's): its agent runs ramex-lend-ublk with the lender's options and
 * --swap-priority 100 --mlock (none of the bridge's wakeup levers), which
 * reaches the lender, fails with "cannot open /dev/ublk-control" and is
 * started again with the backoff; the contract stays up (exit 1 is not a
 * lost lender) and B, whose device never came up, bills nothing. */
START_TEST(ublk_without_the_driver_bills_nothing)
{
	char args[700], want[2400], ulog[700], meter[700];
	struct rxh h;
	struct rxh_world w;
	struct agh_agent A, B;
	PGconn *c;
	int64_t id;
	long pages;
	int fd;

	/* as root with ublk_drv this would add a device and swap to it on
	 * the test machine: that is tests/lending/ublk.sh's, in a guest */
	if (access("/dev/ublk-control", F_OK) == 0 && geteuid() == 0) {
		printf("ublk without the driver: skipped, this machine has "
		       "/dev/ublk-control\n");
		return;
	}
	lend_b_ublk = 1;
	lend_up("agent_lend_ublk", &h, &w, &A, &B, &c, &id, &pages, &fd);
	lend_b_ublk = 0;
	snprintf(ulog, sizeof ulog, "%s-lend/lend-ublk-%lld.log", B.spool,
	         (long long)id);
	AGH_WAIT_FOR(file_count(B.log, "child=lend-ublk status=1") >= 2,
	             "B's ramex-lend-ublk did not fail twice; see %s and %s",
	             B.log, ulog);
	ck_assert_msg(file_count(B.log, "child=lend-ublk pid=") >= 2,
	              "B did not start ramex-lend-ublk again; see %s", B.log);
	ck_assert_msg(file_has(ulog, "cannot open /dev/ublk-control"),
	              "%s does not say why it failed", ulog);
	ck_assert_int_eq(file_count(B.log, "child=lend-nbd"), 0);
	ck_assert_int_eq(file_count(B.log, "device=ublk note="), 1);
	/* its arguments, the lender's endpoint aside */
	snprintf(args, sizeof args, "%s/ublk-args", lend_ublk_dir);
	snprintf(want, sizeof want,
	         "--contract\n%lld\n--secret-file\n%s-lend/lend-ublk-%lld."
	         "secret\n--meter-file\n%s-lend/lend-ublk-%lld.meter\n"
	         "--reply-timeout-ms\n4321\n--swap-priority\n100\n--mlock\n",
	         (long long)id, B.spool, (long long)id, B.spool, (long long)id);
	ck_assert_msg(
	    file_has(args, "--lender\n127.0.0.1:") && file_has(args, want),
	    "ramex-lend-ublk's arguments (%s) are not:\n%s", args, want);
	ck_assert_int_eq(file_count(args, "--keep-awake"), 0);
	/* several rounds of reports from B (report_s is 1) */
	AGH_WAIT_FOR(agh_q(c,
	                   "SELECT count(*) FROM usage_reports WHERE "
	                   "contract_id = %lld AND side = 'buyer'",
	                   (long long)id) >= 3,
	             "too few usage reports from B for contract %lld; see %s",
	             (long long)id, B.log);
	long s_ps, b_ps, ns, nb;
	sides(c, id, &s_ps, &b_ps, &ns, &nb);
	printf("ublk without the driver: contract %lld of %ld pages: seller "
	       "%ld, buyer %ld page-seconds in %ld and %ld reports\n",
	       (long long)id, pages, s_ps, b_ps, ns, nb);
	ck_assert_msg(b_ps == 0,
	              "contract %lld, whose ublk device never came up: B "
	              "reported %ld page-seconds",
	              (long long)id, b_ps);
	snprintf(meter, sizeof meter, "%s-lend/lend-ublk-%lld.meter", B.spool,
	         (long long)id);
	ck_assert_int_eq(access(meter, F_OK), -1);
	ck_assert_int_eq(agh_q(c,
	                       "SELECT count(*) FROM contracts WHERE id = %lld "
	                       "AND state = 'active'",
	                       (long long)id),
	                 1);
	ck_assert_int_eq(agh_signal(&B, SIGTERM), 0);
	ck_assert_int_eq(agh_signal(&A, SIGTERM), 0);
	PQfinish(c);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_lend");
	/* CK_RUN_CASE=endpoints runs the calls alone, without agents */
	TCase *t = tcase_create("endpoints");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, endpoints);
	suite_add_tcase(s, t);
	t = tcase_create("lend");
	tcase_set_timeout(t, 400);
	tcase_add_test(t, end_to_end);
	tcase_add_test(t, end_to_end_tls);
	tcase_add_test(t, recall);
	tcase_add_test(t, lender_lost);
	tcase_add_test(t, slow_release_is_awaited);
	tcase_add_test(t, seller_agent_crash_gives_notice);
	tcase_add_test(t, notice_is_metered);
	tcase_add_test(t, a_lender_that_never_served_bills_nothing);
	tcase_add_test(t, ublk_without_the_driver_bills_nothing);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
