/*
 * routes.h — the route table of ramexd: every route, the handler that
 * serves it and the roles that may call it. A route that names no role
 * serves nobody (deny by default); AUTH_PUBLIC marks the few that need no
 * credentials. Adding an endpoint = a handler in an h_*.c file plus one row
 * in routes.c (see exchange/README.md).
 */
#ifndef RAMEX_ROUTES_H
#define RAMEX_ROUTES_H

#include <stddef.h>

#include "exchange/http.h"

extern const struct http_route routes_table[];
extern const size_t routes_count;
/* The query parameters of the routes that take any. */
extern const struct http_route_query routes_query[];
extern const size_t routes_query_count;

#endif
