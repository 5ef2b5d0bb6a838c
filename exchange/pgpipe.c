/* pgpipe.c — see pgpipe.h. */
#include "exchange/pgpipe.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

PGresult *pgpipe_result(PGconn *c, bool *lost)
{
	int nulls = 0;
	for (;;) {
		if (PQstatus(c) != CONNECTION_OK) {
			*lost = true;
			return NULL;
		}
		/* PQgetResult would block in there, and libpq's own wait
		 * cannot be told apart from a spin by /readyz */
		while (PQisBusy(c)) {
			struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
			if (p.fd < 0) {
				*lost = true;
				return NULL;
			}
			int n = poll(&p, 1, 1000);
			if (n == 0) {
				/* a slow statement (a lock, a long commit): the
				 * writer waits, it does not spin */
				continue;
			}
			if (!PQconsumeInput(c)) {
				*lost = true;
				return NULL;
			}
		}
		PGresult *r = PQgetResult(c);
		if (r)
			return r;
		/* One NULL ends a query's results and moves the pipeline to
		 * the next query; a second in a row means there is none:
		 * whatever was still to come will not. */
		if (++nulls >= 2) {
			*lost = true;
			return NULL;
		}
	}
}

int pgpipe_fault_parse(struct pgpipe_fault *f, const char *text)
{
	static const char *names[] = {"idle", "open", "close", "result"};
	memset(f, 0, sizeof *f);
	if (!text || !*text)
		return 0;
	const char *colon = strchr(text, ':');
	if (!colon)
		return -1;
	for (int i = 0; i < 4; i++)
		if (strlen(names[i]) == (size_t)(colon - text) &&
		    strncmp(text, names[i], (size_t)(colon - text)) == 0)
			f->step = (enum pgpipe_step)(PGPIPE_IDLE + i);
	char *end;
	unsigned long long n = strtoull(colon + 1, &end, 10);
	if (f->step == PGPIPE_NONE || *end || end == colon + 1 || n == 0 ||
	    colon[1] == '-') {
		memset(f, 0, sizeof *f);
		return -1;
	}
	f->every = n;
	return 0;
}

bool pgpipe_fault_hit(const struct pgpipe_fault *f, enum pgpipe_step step,
                      uint64_t batch, PGconn *c)
{
	if (f->step != step || !c || batch % f->every != 0)
		return false;
	/* what was queued reaches the server first, as it would have */
	PQflush(c);
	int fd = PQsocket(c);
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	return true;
}
