/*
 * fake_http.h — a broken exchange for the tests of its clients: a server
 * on a free 127.0.0.1 port that reads each request's head and answers
 * every one with the same bytes, then closes the connection. The answer
 * is whatever a test wants a client to survive: a 503, a proxy's HTML
 * page, a 200 whose body is not JSON.
 */
#ifndef RAMEX_FAKE_HTTP_H
#define RAMEX_FAKE_HTTP_H

#include <pthread.h>

struct fake_http {
	int fd, port;
	const char *answer; /* the whole HTTP answer, status line on */
	pthread_t th;
};

/* Listens and serves on a thread of its own (the test fails when it
 * cannot). */
void fake_http_start(struct fake_http *f, const char *answer);
/* Stops serving and joins the thread. */
void fake_http_stop(struct fake_http *f);

#endif
