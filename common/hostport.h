/*
 * hostport.h — splitting "HOST:PORT" endpoints, the one form every ramex
 * program takes and the exchange stores for lend servers. Pure: no I/O.
 */
#ifndef RAMEX_HOSTPORT_H
#define RAMEX_HOSTPORT_H

#include <stddef.h>

/* "127.0.0.1:7000", "lender.example:7000" or "[2001:db8::7]:7000" -> host
 * (copied into host[hostlen], without the brackets) and port. An IPv6
 * address without brackets is refused. Returns 0 or -1. */
int hostport_split(const char *s, char *host, size_t hostlen, int *port);

/* Whether host (an address, or "localhost") is a loopback address, where
 * plain TCP never leaves the machine. A name other than "localhost" is
 * not (what it resolves to may change), nor NULL (every address). */
int hostport_is_loopback(const char *host);

#endif
