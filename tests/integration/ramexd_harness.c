/* ramexd_harness.c — see ramexd_harness.h. */
#include "tests/integration/ramexd_harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sign.h"
#include "tests/integration/testdb.h"

static const char *build_dir(void)
{
	const char *b = getenv("RAMEX_BUILD");
	return b && *b ? b : "build";
}

static const char *out_dir(void)
{
	const char *o = getenv("RAMEX_TEST_OUTPUT");
	return o && *o ? o : "/tmp";
}

static void ramexd_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/san/bin/ramexd", build_dir());
	if (access(buf, X_OK) != 0)
		snprintf(buf, len, "%s/bin/ramexd", build_dir());
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

static void bootstrap_token(struct rxh *h)
{
	char bin[512], cmd[2048];
	ramexd_path(bin, sizeof bin);
	snprintf(cmd, sizeof cmd,
	         "%s token create --role=admin --name=harness --db='%s' "
	         "2>>%s",
	         bin, h->conninfo, h->log);
	FILE *p = popen(cmd, "r");
	ck_assert_msg(p, "could not run %s", bin);
	char *ok = fgets(h->admin, sizeof h->admin, p);
	int st = pclose(p);
	ck_assert_msg(ok && st == 0, "ramexd token create failed; see %s",
	              h->log);
	h->admin[strcspn(h->admin, "\n")] = 0;
}
pid_t rxh_spawn(const char *bin, char *const argv[], const char *log)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_msg(pid >= 0, "fork failed");
	if (pid == 0) {
		/* Die with the test process, even when it dies by a failed
		 * assertion. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0", 1);
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

static void spawn(struct rxh *h)
{
	char bin[512], portfile[600], db[300];
	char *argv[32];
	int argc = 0;
	ramexd_path(bin, sizeof bin);
	snprintf(portfile, sizeof portfile, "%s/ramexd-%s.port", out_dir(),
	         h->db);
	unlink(portfile);
	snprintf(db, sizeof db, "--db=%s", h->conninfo);
	static char pf[640];
	snprintf(pf, sizeof pf, "--port_file=%s", portfile);
	char extra[512];
	snprintf(extra, sizeof extra, "%s", h->extra);
	argv[argc++] = bin;
	argv[argc++] = db;
	argv[argc++] = "--listen=127.0.0.1:0";
	argv[argc++] = pf;
	for (char *t = strtok(extra, " "); t && argc < 30;
	     t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;

	h->pid = rxh_spawn(bin, argv, h->log);
	h->starts++;
	/* Wait for the port file, then for readiness. */
	for (int i = 0; i < 600; i++) {
		FILE *f = fopen(portfile, "r");
		if (f) {
			int ok = fscanf(f, "%d", &h->port) == 1;
			fclose(f);
			if (ok)
				break;
		}
		int st;
		if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
			h->pid = 0;
			ck_abort_msg("ramexd exited at start; see %s", h->log);
		}
		sleep_ms(50);
	}
	ck_assert_msg(h->port > 0, "ramexd did not start; see %s", h->log);
	for (int i = 0; i < 200; i++) {
		struct rxh_resp r;
		long s = rxh_call(h, "GET", "/readyz", NULL, NULL, NULL, &r);
		rxh_resp_free(&r);
		if (s == 200)
			return;
		sleep_ms(50);
	}
	ck_abort_msg("ramexd never became ready; see %s", h->log);
}

void rxh_start(struct rxh *h, const char *db, const char *extra)
{
	rxh_start_at(h, db, testdb_create_schema(db), extra);
}

void rxh_start_at(struct rxh *h, const char *db, const char *conninfo,
                  const char *extra)
{
	memset(h, 0, sizeof *h);
	snprintf(h->db, sizeof h->db, "%s", db);
	snprintf(h->conninfo, sizeof h->conninfo, "%s", conninfo);
	snprintf(h->extra, sizeof h->extra, "%s", extra ? extra : "");
	snprintf(h->log, sizeof h->log, "%s/ramexd-%s.log", out_dir(), db);
	unlink(h->log);
	curl_global_init(CURL_GLOBAL_ALL);
	bootstrap_token(h);
	spawn(h);
}

void rxh_restart(struct rxh *h)
{
	ck_assert_msg(h->pid == 0, "restart of a ramexd that still runs");
	h->port = 0;
	spawn(h);
}

int rxh_kill(struct rxh *h, int sig)
{
	int st = 0;
	if (h->pid <= 0)
		return 0;
	kill(h->pid, sig);
	while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
		;
	h->pid = 0;
	return st;
}

void rxh_stop(struct rxh *h)
{
	if (h->pid > 0) {
		kill(h->pid, SIGTERM);
		for (int i = 0; i < 200; i++) {
			int st;
			if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
				h->pid = 0;
				return;
			}
			sleep_ms(50);
		}
		rxh_kill(h, SIGKILL);
	}
}

int rxh_log_count(const struct rxh *h, const char *needle)
{
	FILE *f = fopen(h->log, "r");
	char line[4096];
	int n = 0;
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* --- HTTP ---------------------------------------------------------------- */

struct sink {
	char *s;
	size_t n;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct sink *k = ud;
	char *s = realloc(k->s, k->n + sz * n + 1);
	if (!s)
		return 0;
	memcpy(s + k->n, p, sz * n);
	k->s = s;
	k->n += sz * n;
	s[k->n] = 0;
	return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct rxh_resp *r = ud;
	size_t have = strlen(r->headers), add = sz * n;
	if (have + add < sizeof r->headers) {
		memcpy(r->headers + have, p, add);
		r->headers[have + add] = 0;
	}
	return add;
}

static long call(struct rxh *h, const char *method, const char *path,
                 struct curl_slist *hl, const char *body, struct rxh_resp *r)
{
	char url[8192];
	struct sink k = {NULL, 0};
	memset(r, 0, sizeof *r);
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", h->port, path);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	hl = curl_slist_append(hl, "Expect:");
	hl = curl_slist_append(hl, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	else
		r->status = -1;
	curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	r->body = k.s ? k.s : strdup("");
	r->json = json_loads(r->body, 0, NULL);
	return r->status;
}

long rxh_call(struct rxh *h, const char *method, const char *path,
              const char *token, const char *body, const char *hdr,
              struct rxh_resp *r)
{
	struct curl_slist *hl = NULL;
	char auth[160];
	if (token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		hl = curl_slist_append(hl, auth);
	}
	if (hdr)
		hl = curl_slist_append(hl, hdr);
	return call(h, method, path, hl, body, r);
}

long rxh_call_signed_as(struct rxh *h, const char *method, const char *sent,
                        const char *signed_target, const char *key_id,
                        const char *secret, const char *body, int64_t ts,
                        const char *ts_text, const char *nonce,
                        struct rxh_resp *r)
{
	char n[33], sig[65], line[4][200];
	if (!nonce) {
		ck_assert_int_eq(sign_nonce(n), 0);
		nonce = n;
	}
	if (!ts)
		ts = (int64_t)time(NULL);
	struct sign_request sr = {method, signed_target, ts,
	                          nonce,  body,          body ? strlen(body) : 0};
	ck_assert_int_eq(sign_compute(secret, &sr, sig), 0);
	snprintf(line[0], 200, SIGN_HDR_KEY ": %s", key_id);
	if (ts_text)
		snprintf(line[1], 200, SIGN_HDR_TIMESTAMP ": %s", ts_text);
	else
		snprintf(line[1], 200, SIGN_HDR_TIMESTAMP ": %lld",
		         (long long)ts);
	snprintf(line[2], 200, SIGN_HDR_NONCE ": %s", nonce);
	snprintf(line[3], 200, SIGN_HDR_SIGNATURE ": %s", sig);
	struct curl_slist *hl = NULL;
	for (int i = 0; i < 4; i++)
		hl = curl_slist_append(hl, line[i]);
	return call(h, method, sent, hl, body, r);
}

long rxh_call_signed(struct rxh *h, const char *method, const char *path,
                     const char *key_id, const char *secret, const char *body,
                     int64_t ts, const char *nonce, struct rxh_resp *r)
{
	return rxh_call_signed_as(h, method, path, path, key_id, secret, body,
	                          ts, NULL, nonce, r);
}

void rxh_resp_free(struct rxh_resp *r)
{
	free(r->body);
	json_decref(r->json);
	r->body = NULL;
	r->json = NULL;
}

const char *rxh_header(const struct rxh_resp *r, const char *name, char *buf,
                       size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = r->headers; p && *p;) {
		const char *e = strstr(p, "\r\n");
		size_t ll = e ? (size_t)(e - p) : strlen(p);
		if (ll > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ')
				v++;
			snprintf(buf, len, "%.*s", (int)(ll - (size_t)(v - p)),
			         v);
			return buf;
		}
		p = e ? e + 2 : NULL;
	}
	return NULL;
}

int64_t rxh_int(const struct rxh_resp *r, const char *key)
{
	return r->json ? json_integer_value(json_object_get(r->json, key)) : 0;
}

/* --- fixtures ------------------------------------------------------------- */

static int64_t post_id(struct rxh *h, const char *token, const char *path,
                       const char *body, struct rxh_resp *keep)
{
	struct rxh_resp r;
	long s = rxh_call(h, "POST", path, token, body, NULL, &r);
	ck_assert_msg(s == 201, "POST %s %s: %ld %s", path, body, s, r.body);
	int64_t id = rxh_int(&r, "id");
	if (keep)
		*keep = r;
	else
		rxh_resp_free(&r);
	return id;
}

static void token(struct rxh *h, const char *body, char out[80])
{
	struct rxh_resp r;
	post_id(h, h->admin, "/v1/tokens", body, &r);
	snprintf(out, 80, "%s",
	         json_string_value(json_object_get(r.json, "token")));
	rxh_resp_free(&r);
}

static int64_t node(struct rxh *h, const char *name, int64_t team, char key[24],
                    char secret[80])
{
	char body[128];
	struct rxh_resp r;
	snprintf(body, sizeof body, "{\"name\":\"%s\",\"team_id\":%lld}", name,
	         (long long)team);
	post_id(h, h->admin, "/v1/nodes", body, &r);
	snprintf(key, 24, "%s",
	         json_string_value(json_object_get(r.json, "key_id")));
	snprintf(secret, 80, "%s",
	         json_string_value(json_object_get(r.json, "secret")));
	int64_t id = json_integer_value(
	    json_object_get(json_object_get(r.json, "account"), "id"));
	rxh_resp_free(&r);
	return id;
}

void rxh_world(struct rxh *h, struct rxh_world *w)
{
	char body[256];
	memset(w, 0, sizeof *w);
	w->team =
	    post_id(h, h->admin, "/v1/teams", "{\"name\":\"blue\"}", NULL);
	w->team2 =
	    post_id(h, h->admin, "/v1/teams", "{\"name\":\"red\"}", NULL);
	w->op_account =
	    post_id(h, h->admin, "/v1/accounts",
	            "{\"name\":\"operator\",\"kind\":\"operator\"}", NULL);
	w->node_a = node(h, "node-a", w->team, w->key_a, w->secret_a);
	w->node_b = node(h, "node-b", w->team, w->key_b, w->secret_b);
	w->node_c = node(h, "node-c", w->team2, w->key_c, w->secret_c);
	snprintf(body, sizeof body,
	         "{\"name\":\"op\",\"role\":\"operator\",\"account_id\":%lld}",
	         (long long)w->op_account);
	token(h, body, w->op_token);
	snprintf(body, sizeof body,
	         "{\"name\":\"tr\",\"role\":\"trader\",\"team_id\":%lld}",
	         (long long)w->team);
	token(h, body, w->trader_token);
	snprintf(body, sizeof body,
	         "{\"name\":\"tr2\",\"role\":\"trader\",\"team_id\":%lld}",
	         (long long)w->team2);
	token(h, body, w->trader2_token);
	token(h, "{\"name\":\"fin\",\"role\":\"finance\"}", w->finance_token);
	post_id(
	    h, w->op_token, "/v1/markets",
	    "{\"name\":\"spot\",\"tick\":1000,\"lot\":256,\"min_pages\":256,"
	    "\"max_pages\":1048576,\"price_min\":0,\"price_max\":"
	    "1000000000,\"notice_period_s\":3600,\"breach_penalty\":0,"
	    "\"delivery_deadline_s\":600}",
	    NULL);
	post_id(h, w->op_token, "/v1/markets",
	        "{\"name\":\"perm-2027\",\"tick\":1000,\"lot\":256,"
	        "\"min_pages\":256,\"max_pages\":1048576,\"price_min\":0,"
	        "\"price_max\":1000000000,\"notice_period_s\":0,"
	        "\"breach_penalty\":5000,\"delivery_deadline_s\":600}",
	        NULL);
}

static size_t sse_data(char *p, size_t sz, size_t n, void *ud)
{
	struct rxh_sse *s = ud;
	size_t k = sz * n;
	if (s->n + k < sizeof s->buf) {
		memcpy(s->buf + s->n, p, k);
		s->n += k;
		s->buf[s->n] = 0;
	}
	__atomic_store_n(&s->connected, 1, __ATOMIC_SEQ_CST);
	return s->until && strstr(s->buf, s->until) ? 0 : k;
}

void *rxh_sse_run(void *arg)
{
	struct rxh_sse *s = arg;
	char url[128], auth[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/events", s->h->port);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", s->token);
	CURL *c = curl_easy_init();
	struct curl_slist *hl = curl_slist_append(NULL, auth);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_perform(c);
	curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	return NULL;
}

int rxh_dial(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

long rxh_status(struct rxh *h, const char *method, const char *path,
                const char *token, const char *body, const char *hdr)
{
	struct rxh_resp r;
	long status = rxh_call(h, method, path, token, body, hdr, &r);
	rxh_resp_free(&r);
	return status;
}

long rxh_status_signed(struct rxh *h, const char *method, const char *path,
                       const char *key_id, const char *secret, const char *body,
                       int64_t ts, const char *nonce)
{
	struct rxh_resp r;
	long status = rxh_call_signed(h, method, path, key_id, secret, body, ts,
	                              nonce, &r);
	rxh_resp_free(&r);
	return status;
}

int rxh_is_problem(const struct rxh_resp *r, const char *type)
{
	char ct[128];
	const char *t = json_string_value(json_object_get(r->json, "type"));
	/* an instance is the request's path, or absent (never "") */
	json_t *in = json_object_get(r->json, "instance");
	const char *is = json_string_value(in);
	ck_assert_msg(!in || (is && is[0] == '/'), "instance in %s", r->body);
	return rxh_header(r, "Content-Type", ct, sizeof ct) &&
	       strstr(ct, "application/problem+json") && t &&
	       strcmp(t, type) == 0;
}
