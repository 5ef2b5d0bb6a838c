/*
 * fuzz_http1.c — libFuzzer target for the agent's HTTP/1.1 client, the
 * bytes an exchange (or anything that answers on its address) sends back:
 * a thread on 127.0.0.1 answers each request with the input and closes;
 * the client reads it as a whole answer (Content-Length, chunked or
 * until close) or, when the input's first byte is odd, as a stream. It
 * must return an answer or an error with a reason, never read or write
 * outside its buffers, hand over no more body than the limit allows, and
 * stay usable for the next request.
 */
#include "node-agent/http1.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_BODY 4096

static int lfd = -1, port;
static const uint8_t *answer;
static size_t answer_len;
static sem_t go, done;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_http1: %s\n", what);
	abort();
}

/* Accepts one connection per input, reads its request head, writes the
 * input and closes. */
static void *server_main(void *arg)
{
	(void)arg;
	for (;;) {
		sem_wait(&go);
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			abort();
		char b[4096];
		size_t n = 0;
		while (n < sizeof b - 1) {
			ssize_t r = read(fd, b + n, sizeof b - 1 - n);
			if (r <= 0)
				break;
			n += (size_t)r;
			b[n] = 0;
			if (strstr(b, "\r\n\r\n"))
				break;
		}
		size_t off = 0;
		while (off < answer_len) {
			ssize_t w = send(fd, answer + off, answer_len - off,
			                 MSG_NOSIGNAL);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		close(fd);
		sem_post(&done);
	}
	return NULL;
}

static void start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof a;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(lfd, 4) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0)
		abort();
	port = ntohs(a.sin_port);
	sem_init(&go, 0, 0);
	sem_init(&done, 0, 0);
	pthread_t t;
	if (pthread_create(&t, NULL, server_main, NULL) != 0)
		abort();
}

static int on_chunk(void *ctx, const char *data, size_t len)
{
	size_t *got = ctx;
	(void)data;
	*got += len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char url[64], err[256];
	if (lfd < 0)
		start();
	if (size == 0)
		return 0;
	int stream = data[0] & 1;
	answer = data + 1;
	answer_len = size - 1;
	snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
	struct http1_conn *c = http1_new(url, NULL, 1000, err, sizeof err);
	if (!c)
		die(err);
	struct http1_request rq = {.method = "GET",
	                           .path = "/v1/whoami",
	                           .timeout_ms = 2000,
	                           .max_body = MAX_BODY};
	sem_post(&go);
	err[0] = 0;
	if (!stream) {
		struct http1_response r = {0};
		if (http1_request(c, &rq, &r, err, sizeof err) == 0) {
			if (r.status < 100 || r.status > 999)
				die("a status outside 100..999");
			if (r.body_len > MAX_BODY)
				die("a body over the limit");
			if (r.body && r.body[r.body_len] != 0)
				die("a body that is not NUL-terminated");
		} else if (!err[0]) {
			die("an error without a reason");
		}
		http1_response_clear(&r);
	} else {
		int status;
		if (http1_stream_open(c, &rq, &status, err, sizeof err) == 0) {
			size_t got = 0;
			for (int k = 0; k < 64; k++) {
				err[0] = 0;
				int rc = http1_stream_read(
				    c, on_chunk, &got, 200, err, sizeof err);
				if (rc < 0) {
					if (!err[0])
						die("a stream ended without "
						    "a reason");
					break;
				}
				if (rc == 0)
					break;
			}
			if (got > answer_len)
				die("more body than bytes sent");
		} else if (!err[0]) {
			die("an error without a reason");
		}
	}
	http1_free(c);
	sem_wait(&done); /* the server closed: the next input starts clean */
	return 0;
}
