/* fake_http.c — see fake_http.h. */
#include "tests/integration/fake_http.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *serve(void *arg)
{
	struct fake_http *f = arg;
	for (;;) {
		int c = accept(f->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[8192];
		size_t n = 0;
		ssize_t k;
		while (n < sizeof buf - 1 &&
		       (k = read(c, buf + n, sizeof buf - 1 - n)) > 0) {
			n += (size_t)k;
			buf[n] = 0;
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		if (write(c, f->answer, strlen(f->answer)) < 0)
			(void)0; /* the client went away: its test says so */
		close(c);
	}
}

void fake_http_start(struct fake_http *f, const char *answer)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof sa;
	f->answer = answer;
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(f->fd >= 0);
	ck_assert(bind(f->fd, (void *)&sa, sizeof sa) == 0);
	ck_assert(listen(f->fd, 16) == 0);
	ck_assert(getsockname(f->fd, (void *)&sa, &sl) == 0);
	f->port = ntohs(sa.sin_port);
	ck_assert(pthread_create(&f->th, NULL, serve, f) == 0);
}

void fake_http_stop(struct fake_http *f)
{
	shutdown(f->fd, SHUT_RDWR);
	close(f->fd);
	pthread_join(f->th, NULL);
}
