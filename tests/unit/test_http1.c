/*
 * test_http1.c — node-agent/http1 against a tiny scripted server on
 * 127.0.0.1 (a thread of this process): Content-Length and chunked bodies
 * (the chunked one written a few bytes at a time), keep-alive reuse of one
 * connection, a server that closes an idle connection or says
 * Connection: close, a server that never answers (the request's timeout),
 * bodies over the size limit, a body cut short, 1xx and 204 answers, an
 * answer that is not HTTP, a refused connection, the streaming mode, the
 * URL checks, and https: against a server that does not speak TLS, and
 * against a TLS server with a certificate made here (trusted through
 * ca_file, untrusted without it, and for a host name it does not carry).
 */
#include "node-agent/http1.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct srv;
typedef void (*script_fn)(struct srv *s, int fd);

struct srv {
	int lfd, port;
	script_fn script;
	pthread_t th;
	atomic_int stop;
	atomic_int accepts, requests;
	char last_req[8192]; /* the last request's head and body */
	pthread_mutex_t mu;
};

static struct srv S;
static char err[512];
static char url[64];

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

static void put(int fd, const char *text)
{
	size_t n = strlen(text);
	while (n > 0) {
		ssize_t w = send(fd, text, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		text += w;
		n -= (size_t)w;
	}
}

/* Reads one request (head and Content-Length body). 1, or 0 at EOF. */
static int get_request(struct srv *s, int fd)
{
	char buf[8192];
	size_t n = 0;
	char *end = NULL;
	long clen = 0;

	while (!(end = memmem(buf, n, "\r\n\r\n", 4))) {
		if (n == sizeof buf - 1)
			return 0;
		ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
		if (r <= 0)
			return 0;
		n += (size_t)r;
	}
	buf[n] = 0;
	char *cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl && cl < end)
		clen = strtol(cl + 17, NULL, 10);
	size_t want = (size_t)(end - buf) + 4 + (size_t)clen;
	while (n < want && n < sizeof buf - 1) {
		ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
		if (r <= 0)
			return 0;
		n += (size_t)r;
	}
	buf[n] = 0;
	pthread_mutex_lock(&s->mu);
	memcpy(s->last_req, buf, n + 1);
	pthread_mutex_unlock(&s->mu);
	s->requests++;
	return 1;
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;
	while (!s->stop) {
		struct pollfd p = {s->lfd, POLLIN, 0};
		if (poll(&p, 1, 20) != 1)
			continue;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		s->accepts++;
		s->script(s, fd);
		close(fd);
	}
	return NULL;
}

static int listen_any(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void srv_start(script_fn fn)
{
	memset(&S, 0, sizeof S);
	pthread_mutex_init(&S.mu, NULL);
	S.script = fn;
	S.lfd = listen_any(&S.port);
	snprintf(url, sizeof url, "http://127.0.0.1:%d", S.port);
	ck_assert_int_eq(pthread_create(&S.th, NULL, srv_main, &S), 0);
}

static void srv_stop(void)
{
	S.stop = 1;
	pthread_join(S.th, NULL);
	close(S.lfd);
}

static struct http1_conn *conn(void)
{
	struct http1_conn *c = http1_new(url, NULL, 2000, err, sizeof err);
	ck_assert_msg(c, "http1_new: %s", err);
	return c;
}

static int get(struct http1_conn *c, const char *path, struct http1_response *r,
               int timeout_ms, size_t max)
{
	const char *h[] = {"X-Test: yes", NULL};
	struct http1_request req = {.method = "GET",
	                            .path = path,
	                            .headers = h,
	                            .timeout_ms = timeout_ms,
	                            .max_body = max};
	return http1_request(c, &req, r, err, sizeof err);
}

/* --- scripts ------------------------------------------------------- */

static void s_hello_keepalive(struct srv *s, int fd)
{
	while (!s->stop && get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		        "Content-Length: 5\r\n\r\nhello");
}

static void s_chunked_slow(struct srv *s, int fd)
{
	static const char *const pieces[] = {
	    "HTTP/1.1 201 Created\r\nTransfer-",
	    "Encoding: chunked\r\n\r\n4\r",
	    "\nWi",
	    "ki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n",
	    "\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n",
	    "\r\n"};
	while (!s->stop && get_request(s, fd)) {
		for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
			put(fd, pieces[i]);
			sleep_ms(5);
		}
	}
}

static void s_one_then_close(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
}

static void s_conn_close(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n"
		        "Content-Length: 2\r\n\r\nok");
}

static void s_until_close(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\n\r\nall of it");
}

static void s_silent(struct srv *s, int fd)
{
	if (get_request(s, fd))
		while (!s->stop)
			sleep_ms(10);
}

static void s_big(struct srv *s, int fd)
{
	if (get_request(s, fd)) {
		char body[200];
		memset(body, 'x', 100);
		body[100] = 0;
		put(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
		put(fd, body);
	}
}

static void s_big_chunked(struct srv *s, int fd)
{
	if (get_request(s, fd)) {
		put(fd,
		    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
		for (int i = 0; i < 20; i++)
			put(fd, "8\r\n01234567\r\n");
		put(fd, "0\r\n\r\n");
	}
}

static void s_short(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
}

static void s_info_then_204(struct srv *s, int fd)
{
	while (!s->stop && get_request(s, fd))
		put(fd, "HTTP/1.1 100 Continue\r\n\r\n"
		        "HTTP/1.1 204 No Content\r\n\r\n");
}

static void s_garbage(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "SSH-2.0-OpenSSH_9.6\r\n\r\n");
}

static void s_bad_chunk(struct srv *s, int fd)
{
	if (get_request(s, fd))
		put(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		        "zz\r\nab\r\n0\r\n\r\n");
}

static void s_stream(struct srv *s, int fd)
{
	if (!get_request(s, fd))
		return;
	put(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	        "Transfer-Encoding: chunked\r\n\r\n");
	sleep_ms(20);
	put(fd, "c\r\n: keepalive\n\r\n");
	sleep_ms(20);
	put(fd, "13\r\nid: 7\nevent: fill\n\n\r\n");
	sleep_ms(20);
	put(fd, "0\r\n\r\n");
}

static void s_stream_dies(struct srv *s, int fd)
{
	if (!get_request(s, fd))
		return;
	put(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	        "c\r\n: keepalive\n\r\n");
	sleep_ms(20);
	/* Gone without the last chunk, like a killed exchange. */
}

/* A peer that reads the TLS ClientHello and answers plain HTTP. */
static void s_plain_for_tls(struct srv *s, int fd)
{
	char buf[2048];
	(void)s;
	if (recv(fd, buf, sizeof buf, 0) > 0)
		put(fd,
		    "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
}

/* --- tests --------------------------------------------------------- */

START_TEST(content_length_and_request)
{
	srv_start(s_hello_keepalive);
	struct http1_conn *c = conn();
	struct http1_response r;
	const char *h[] = {"Content-Type: application/json", NULL};
	struct http1_request req = {.method = "POST",
	                            .path = "/v1/usage",
	                            .headers = h,
	                            .body = "{\"a\":1}",
	                            .body_len = 7};
	ck_assert_msg(http1_request(c, &req, &r, err, sizeof err) == 0, "%s",
	              err);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body_len, 5);
	ck_assert_str_eq(r.body, "hello");
	pthread_mutex_lock(&S.mu);
	ck_assert_msg(!strncmp(S.last_req, "POST /v1/usage HTTP/1.1\r\n", 25),
	              "%s", S.last_req);
	char host[64];
	snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", S.port);
	ck_assert_ptr_nonnull(strstr(S.last_req, host));
	ck_assert_ptr_nonnull(strstr(S.last_req, "\r\nContent-Length: 7\r\n"));
	ck_assert_ptr_nonnull(
	    strstr(S.last_req, "\r\nContent-Type: application/json\r\n"));
	ck_assert_ptr_nonnull(strstr(S.last_req, "\r\n\r\n{\"a\":1}"));
	pthread_mutex_unlock(&S.mu);
	http1_response_clear(&r);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(chunked_in_pieces)
{
	srv_start(s_chunked_slow);
	struct http1_conn *c = conn();
	struct http1_response r;
	for (int i = 0; i < 2; i++) { /* and the connection stays usable */
		ck_assert_msg(get(c, "/x", &r, 0, 0) == 0, "%s", err);
		ck_assert_int_eq(r.status, 201);
		ck_assert_str_eq(r.body, "Wikipedia in\r\n\r\nchunks.");
		http1_response_clear(&r);
	}
	ck_assert_int_eq(http1_connects(c), 1);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(keep_alive_reuses_one_connection)
{
	srv_start(s_hello_keepalive);
	struct http1_conn *c = conn();
	struct http1_response r;
	for (int i = 0; i < 5; i++) {
		ck_assert_msg(get(c, "/v1/whoami", &r, 0, 0) == 0, "%s", err);
		ck_assert_int_eq(r.status, 200);
		http1_response_clear(&r);
	}
	ck_assert_int_eq(http1_connects(c), 1);
	ck_assert_int_eq(S.accepts, 1);
	ck_assert_int_eq(S.requests, 5);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(server_closes_idle_connection)
{
	srv_start(s_one_then_close);
	struct http1_conn *c = conn();
	struct http1_response r;
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(get(c, "/a", &r, 0, 0) == 0, "request %d: %s", i,
		              err);
		ck_assert_str_eq(r.body, "ok");
		http1_response_clear(&r);
	}
	/* Each answer's connection was closed behind the client's back. */
	ck_assert_int_eq(http1_connects(c), 3);
	ck_assert_int_eq(S.requests, 3);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(connection_close_and_body_until_close)
{
	srv_start(s_conn_close);
	struct http1_conn *c = conn();
	struct http1_response r;
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(get(c, "/a", &r, 0, 0) == 0, "%s", err);
		http1_response_clear(&r);
	}
	ck_assert_int_eq(http1_connects(c), 2);
	ck_assert_int_eq(http1_fd(c), -1); /* closed as it was told */
	http1_free(c);
	srv_stop();

	srv_start(s_until_close);
	c = conn();
	ck_assert_msg(get(c, "/a", &r, 0, 0) == 0, "%s", err);
	ck_assert_str_eq(r.body, "all of it");
	http1_response_clear(&r);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(timeout_when_no_answer)
{
	srv_start(s_silent);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/slow", &r, 200, 0), -1);
	ck_assert_msg(strstr(err, "timed out"), "%s", err);
	ck_assert_msg(strstr(err, "127.0.0.1"), "%s", err);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(http1_fd(c), -1);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(oversized_body_refused)
{
	srv_start(s_big);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/big", &r, 0, 64), -1);
	ck_assert_msg(strstr(err, "larger than 64 bytes"), "%s", err);
	ck_assert_ptr_null(r.body);
	http1_free(c);
	srv_stop();

	srv_start(s_big_chunked); /* 160 bytes in 8-byte chunks */
	c = conn();
	ck_assert_int_eq(get(c, "/big", &r, 0, 100), -1);
	ck_assert_msg(strstr(err, "larger than 100 bytes"), "%s", err);
	ck_assert_msg(get(c, "/big", &r, 0, 160) == 0, "%s", err);
	ck_assert_uint_eq(r.body_len, 160);
	http1_response_clear(&r);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(body_cut_short)
{
	srv_start(s_short);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/short", &r, 0, 0), -1);
	ck_assert_msg(strstr(err, "in the middle"), "%s", err);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(informational_then_no_content)
{
	srv_start(s_info_then_204);
	struct http1_conn *c = conn();
	struct http1_response r;
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(get(c, "/d", &r, 0, 0) == 0, "%s", err);
		ck_assert_int_eq(r.status, 204);
		ck_assert_ptr_null(r.body);
		http1_response_clear(&r);
	}
	ck_assert_int_eq(http1_connects(c), 1);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(not_http_and_bad_chunks)
{
	srv_start(s_garbage);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/", &r, 0, 0), -1);
	ck_assert_msg(strstr(err, "did not answer in HTTP/1.x"), "%s", err);
	http1_free(c);
	srv_stop();

	srv_start(s_bad_chunk);
	c = conn();
	ck_assert_int_eq(get(c, "/", &r, 0, 0), -1);
	ck_assert_msg(strstr(err, "malformed chunked body"), "%s", err);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(refused_connection)
{
	int port, fd = listen_any(&port);
	close(fd); /* nothing listens there now */
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/v1/whoami", &r, 0, 0), -1);
	ck_assert_msg(strstr(err, "could not connect to 127.0.0.1:"), "%s",
	              err);
	ck_assert_msg(strstr(err, "refused"), "%s", err);
	http1_free(c);
}
END_TEST

struct sse {
	char text[512];
	size_t n;
	int calls;
};

static int on_chunk(void *ctx, const char *data, size_t len)
{
	struct sse *e = ctx;
	ck_assert_uint_lt(e->n + len, sizeof e->text);
	memcpy(e->text + e->n, data, len);
	e->n += len;
	e->text[e->n] = 0;
	e->calls++;
	return 0;
}

START_TEST(streaming)
{
	srv_start(s_stream);
	struct http1_conn *c = conn();
	struct sse e = {0};
	int status = 0, rc;
	const char *h[] = {"Accept: text/event-stream", NULL};
	struct http1_request req = {
	    .method = "GET", .path = "/v1/events", .headers = h};
	ck_assert_msg(http1_stream_open(c, &req, &status, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(status, 200);
	ck_assert_int_ge(http1_fd(c), 0);
	/* Nothing has come yet or some has: either way no error, until the
	 * server's last chunk ends the stream. */
	int reads = 0;
	while ((rc = http1_stream_read(c, on_chunk, &e, 1000, err,
	                               sizeof err)) >= 0)
		ck_assert_int_lt(++reads, 1000);
	ck_assert_msg(strstr(err, "ended the stream"), "%s", err);
	ck_assert_str_eq(e.text, ": keepalive\nid: 7\nevent: fill\n\n");
	ck_assert_int_ge(e.calls, 2);
	ck_assert_int_eq(http1_fd(c), -1);
	ck_assert_int_eq(http1_stream_read(c, on_chunk, &e, 0, err, sizeof err),
	                 -1);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(stream_broken_by_the_server)
{
	srv_start(s_stream_dies);
	struct http1_conn *c = conn();
	struct sse e = {0};
	int status = 0, rc, reads = 0;
	struct http1_request req = {.method = "GET", .path = "/v1/events"};
	ck_assert_msg(http1_stream_open(c, &req, &status, err, sizeof err) == 0,
	              "%s", err);
	while ((rc = http1_stream_read(c, on_chunk, &e, 1000, err,
	                               sizeof err)) >= 0)
		ck_assert_int_lt(++reads, 100);
	ck_assert_msg(strstr(err, "closed the connection in the middle"), "%s",
	              err);
	ck_assert_str_eq(e.text, ": keepalive\n");
	ck_assert_int_eq(http1_fd(c), -1);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(stream_open_times_out)
{
	srv_start(s_silent);
	struct http1_conn *c = conn();
	struct sse e = {0};
	int status = 0;
	struct http1_request req = {
	    .method = "GET", .path = "/v1/events", .timeout_ms = 200};
	/* No headers ever come: the open times out. */
	ck_assert_int_eq(http1_stream_open(c, &req, &status, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "timed out"), "%s", err);
	ck_assert_int_eq(e.calls, 0);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(urls)
{
	struct http1_conn *c;
	const char *bad[] = {"ftp://h",     "127.0.0.1:80",   "http://",
	                     "http://h:0",  "http://h:99999", "http://h:8x",
	                     "http://[::1", "http://h?q=1",   NULL};
	for (int i = 0; bad[i]; i++) {
		c = http1_new(bad[i], NULL, 0, err, sizeof err);
		ck_assert_msg(!c, "%s accepted", bad[i]);
		ck_assert_msg(strstr(err, "the exchange url"), "%s: %s", bad[i],
		              err);
	}
	c = http1_new("http://[::1]:8080/api/", NULL, 0, err, sizeof err);
	ck_assert_msg(c, "%s", err);
	ck_assert_str_eq(http1_authority(c), "[::1]:8080");
	http1_free(c);
	c = http1_new("http://exchange.example", NULL, 0, err, sizeof err);
	ck_assert_msg(c, "%s", err);
	ck_assert_str_eq(http1_authority(c), "exchange.example");
	http1_free(c);
	c = http1_new("https://exchange.example:8443", NULL, 0, err,
	              sizeof err);
	ck_assert_msg(c, "%s", err);
	ck_assert_str_eq(http1_authority(c), "exchange.example:8443");
	http1_free(c);
	c = http1_new("https://h", "/nonexistent/ca.pem", 0, err, sizeof err);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, "could not load the CA file"), "%s", err);
	/* in words, not OpenSSL's code (found from outside: "error:05880002:
	 * x509 certificate routines::system lib" for a missing file) */
	ck_assert_msg(strstr(err, "No such file or directory") &&
	                  !strstr(err, "error:"),
	              "%s", err);
}
END_TEST

START_TEST(prefix_in_request_line)
{
	srv_start(s_hello_keepalive);
	char u[96];
	snprintf(u, sizeof u, "%s/api/", url);
	struct http1_conn *c = http1_new(u, NULL, 0, err, sizeof err);
	ck_assert_msg(c, "%s", err);
	struct http1_response r;
	ck_assert_msg(get(c, "/v1/x?y=1", &r, 0, 0) == 0, "%s", err);
	pthread_mutex_lock(&S.mu);
	ck_assert_msg(
	    !strncmp(S.last_req, "GET /api/v1/x?y=1 HTTP/1.1\r\n", 28), "%s",
	    S.last_req);
	ck_assert_ptr_null(strstr(S.last_req, "Content-Length"));
	ck_assert_ptr_nonnull(strstr(S.last_req, "\r\nX-Test: yes\r\n"));
	pthread_mutex_unlock(&S.mu);
	http1_response_clear(&r);
	const char *evil[] = {"X-A: 1\r\nX-B: 2", NULL};
	struct http1_request req = {
	    .method = "GET", .path = "/v1/x", .headers = evil};
	ck_assert_int_eq(http1_request(c, &req, &r, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "bad request header"), "%s", err);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(https_to_plain_server)
{
	srv_start(s_plain_for_tls);
	snprintf(url, sizeof url, "https://127.0.0.1:%d", S.port);
	struct http1_conn *c = conn();
	struct http1_response r;
	ck_assert_int_eq(get(c, "/v1/whoami", &r, 2000, 0), -1);
	ck_assert_msg(strstr(err, "TLS handshake with 127.0.0.1:"), "%s", err);
	http1_free(c);
	srv_stop();
}
END_TEST

/* --- TLS ----------------------------------------------------------- */

static SSL_CTX *tls_srv;
static char ca_path[256];

/* A self-signed certificate for IP 127.0.0.1, written to ca_path, and a
 * server context that uses it. */
static void tls_setup(void)
{
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *crt = X509_new();
	X509V3_CTX v3;
	ck_assert_ptr_nonnull(key);
	ck_assert_ptr_nonnull(crt);
	X509_set_version(crt, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(crt), 1);
	X509_gmtime_adj(X509_getm_notBefore(crt), -60);
	X509_gmtime_adj(X509_getm_notAfter(crt), 3600);
	X509_set_pubkey(crt, key);
	X509_NAME *n = X509_get_subject_name(crt);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	                           (const unsigned char *)"ramex test", -1, -1,
	                           0);
	X509_set_issuer_name(crt, n);
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, crt, crt, NULL, NULL, 0);
	const char *ext[][2] = {{"subjectAltName", "IP:127.0.0.1"},
	                        {"basicConstraints", "critical,CA:TRUE"}};
	for (int i = 0; i < 2; i++) {
		X509_EXTENSION *e =
		    X509V3_EXT_nconf(NULL, &v3, ext[i][0], ext[i][1]);
		ck_assert_ptr_nonnull(e);
		X509_add_ext(crt, e, -1);
		X509_EXTENSION_free(e);
	}
	ck_assert_int_gt(X509_sign(crt, key, EVP_sha256()), 0);

	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(ca_path, sizeof ca_path, "%s/test_http1.%d.pem", base,
	         (int)getpid());
	FILE *f = fopen(ca_path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(PEM_write_X509(f, crt), 1);
	fclose(f);

	tls_srv = SSL_CTX_new(TLS_server_method());
	ck_assert_ptr_nonnull(tls_srv);
	ck_assert_int_eq(SSL_CTX_use_certificate(tls_srv, crt), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(tls_srv, key), 1);
	X509_free(crt);
	EVP_PKEY_free(key);
}

static void tls_teardown(void)
{
	unlink(ca_path);
	SSL_CTX_free(tls_srv);
}

/* Answers "ok" to every request on the connection, over TLS. */
static void s_tls_ok(struct srv *s, int fd)
{
	SSL *ssl = SSL_new(tls_srv);
	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	char buf[4096];
	size_t n = 0;
	while (!s->stop) {
		int r = SSL_read(ssl, buf + n, (int)(sizeof buf - 1 - n));
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
		if (!strstr(buf, "\r\n\r\n"))
			continue;
		s->requests++;
		n = 0;
		const char *a =
		    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
		SSL_write(ssl, a, (int)strlen(a));
	}
out:
	SSL_free(ssl);
}

START_TEST(tls_verified_and_kept_alive)
{
	srv_start(s_tls_ok);
	snprintf(url, sizeof url, "https://127.0.0.1:%d", S.port);
	struct http1_conn *c = http1_new(url, ca_path, 2000, err, sizeof err);
	ck_assert_msg(c, "%s", err);
	struct http1_response r;
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(get(c, "/v1/whoami", &r, 5000, 0) == 0, "%s",
		              err);
		ck_assert_int_eq(r.status, 200);
		ck_assert_str_eq(r.body, "ok");
		http1_response_clear(&r);
	}
	ck_assert_int_eq(http1_connects(c), 1);
	ck_assert_int_eq(S.requests, 3);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(tls_untrusted_certificate)
{
	srv_start(s_tls_ok);
	snprintf(url, sizeof url, "https://127.0.0.1:%d", S.port);
	struct http1_conn *c = conn(); /* the system's CAs */
	struct http1_response r;
	ck_assert_int_eq(get(c, "/v1/whoami", &r, 5000, 0), -1);
	ck_assert_msg(strstr(err, "is not accepted") && strstr(err, "ca_file"),
	              "%s", err);
	ck_assert_int_eq(S.requests, 0);
	http1_free(c);
	srv_stop();
}
END_TEST

START_TEST(tls_wrong_host_name)
{
	srv_start(s_tls_ok);
	/* Trusted, but made out to 127.0.0.1, not to this name. */
	snprintf(url, sizeof url, "https://localhost:%d", S.port);
	struct http1_conn *c = http1_new(url, ca_path, 2000, err, sizeof err);
	ck_assert_msg(c, "%s", err);
	struct http1_response r;
	ck_assert_int_eq(get(c, "/v1/whoami", &r, 5000, 0), -1);
	ck_assert_msg(strstr(err, "is not accepted"), "%s", err);
	ck_assert_msg(strstr(err, "mismatch"), "%s", err);
	ck_assert_int_eq(S.requests, 0);
	http1_free(c);
	srv_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("http1");
	TCase *t = tcase_create("http1");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, content_length_and_request);
	tcase_add_test(t, chunked_in_pieces);
	tcase_add_test(t, keep_alive_reuses_one_connection);
	tcase_add_test(t, server_closes_idle_connection);
	tcase_add_test(t, connection_close_and_body_until_close);
	tcase_add_test(t, timeout_when_no_answer);
	tcase_add_test(t, oversized_body_refused);
	tcase_add_test(t, body_cut_short);
	tcase_add_test(t, informational_then_no_content);
	tcase_add_test(t, not_http_and_bad_chunks);
	tcase_add_test(t, refused_connection);
	tcase_add_test(t, streaming);
	tcase_add_test(t, stream_broken_by_the_server);
	tcase_add_test(t, stream_open_times_out);
	tcase_add_test(t, urls);
	tcase_add_test(t, prefix_in_request_line);
	tcase_add_test(t, https_to_plain_server);
	suite_add_tcase(s, t);
	TCase *tt = tcase_create("tls");
	tcase_set_timeout(tt, 30);
	tcase_add_checked_fixture(tt, tls_setup, tls_teardown);
	tcase_add_test(tt, tls_verified_and_kept_alive);
	tcase_add_test(tt, tls_untrusted_certificate);
	tcase_add_test(tt, tls_wrong_host_name);
	suite_add_tcase(s, tt);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
