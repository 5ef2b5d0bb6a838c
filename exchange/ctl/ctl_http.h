/*
 * ctl_http.h — ramexctl's one way of talking to ramexd: a JSON call over
 * libcurl with a bearer token, and the mapping of its outcome onto
 * ramexctl's exit codes. Owns the curl handle; prints nothing.
 */
#ifndef RAMEX_CTL_HTTP_H
#define RAMEX_CTL_HTTP_H

#include <jansson.h>
#include <stddef.h>

/* ramexctl's exit codes (documented in --help and docs/ramexctl.md). */
enum ctl_exit {
	CTL_OK = 0,
	CTL_REFUSED = 1,      /* the server refused the request (4xx) */
	CTL_USAGE = 2,        /* the command line is wrong */
	CTL_UNREACHABLE = 3,  /* no answer, or the server failed (5xx) */
	CTL_AUTH = 4,         /* 401 or 403 */
	CTL_CHECK_FAILED = 5, /* a check ran and found a problem (ledger) */
};

struct ctl_http {
	const char *url;    /* base URL, no trailing slash needed */
	const char *token;  /* bearer token, or NULL */
	const char *accept; /* Accept header, NULL: application/json */
	const char *idem_key; /* Idempotency-Key header, NULL: none */
};

struct ctl_http_resp {
	long status;   /* 0 when no answer came */
	json_t *json;  /* parsed body, or NULL */
	char *body;    /* raw body (NUL terminated), or NULL */
	size_t len;    /* bytes in body */
	char err[512]; /* when status is 0 or the body is not JSON: why */
};

/* One call: method, path (with query), JSON body or NULL. Fills r; returns
 * the exit code its outcome maps to. Free r with ctl_http_resp_free. */
enum ctl_exit ctl_http_call(const struct ctl_http *c, const char *method,
                            const char *path, const char *body,
                            struct ctl_http_resp *r);
void ctl_http_resp_free(struct ctl_http_resp *r);
/* The exit code for an HTTP status (0 = no answer). */
enum ctl_exit ctl_http_exit(long status);

#endif
