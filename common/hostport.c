/* hostport.c — "HOST:PORT" strings, IPv6 in brackets. */
#include "common/hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int hostport_split(const char *s, char *host, size_t hostlen, int *port)
{
	const char *h = s, *colon;
	size_t hn;
	long long p;
	if (s[0] == '[') { /* [IPv6]:PORT, as the exchange stores endpoints */
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return -1;
		h = s + 1;
		hn = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -1;
		hn = (size_t)(colon - s);
		/* an IPv6 address without brackets: where its port begins
		 * is a guess */
		if (memchr(s, ':', hn))
			return -1;
	}
	if (hn == 0 || hn >= hostlen)
		return -1;
	char *end;
	if (colon[1] < '0' || colon[1] > '9') /* no sign, no space */
		return -1;
	errno = 0;
	p = strtoll(colon + 1, &end, 10);
	if (errno || *end || p > 65535)
		return -1;
	memcpy(host, h, hn);
	host[hn] = '\0';
	*port = (int)p;
	return 0;
}

int hostport_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (!host)
		return 0; /* every address */
	if (strcmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}
