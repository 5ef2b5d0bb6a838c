/*
 * client.h — the agent's HTTP client for ramexd: JSON requests signed with
 * the node's key (common/sign.h), over node-agent/http1.h (http, or https
 * with OpenSSL's libssl).
 *
 * Thin on purpose: one synchronous call at a time, a short timeout, and a
 * clear split between "the exchange answered" (any status, returns 0) and
 * "the exchange could not be reached" (returns -1), because the agent does
 * different things in the two cases: a 4xx is a decision to log, an outage
 * means keep going locally and resend later. Owns one keep-alive
 * connection (http1), reused by every call.
 */
#ifndef RAMEX_CLIENT_H
#define RAMEX_CLIENT_H

#include "node-agent/http1.h"

#include <jansson.h>
#include <stddef.h>

struct client;

struct client_resp {
	long status;      /* HTTP status */
	json_t *json;     /* parsed body or NULL */
	char detail[256]; /* the problem's title/detail on errors */
};

/* `secret` is copied. Returns NULL with err set. */
struct client *client_new(const char *base_url, const char *key_id,
                          const char *secret, const char *ca_file, char *err,
                          size_t errlen);
void client_free(struct client *c);

/* One signed call. `body` (borrowed, may be NULL) is sent as JSON;
 * `idem` (may be NULL) is sent as Idempotency-Key. Returns 0 when the
 * exchange answered (see r->status), -1 with err set when it could not be
 * reached. Free r with client_resp_clear. */
int client_call(struct client *c, const char *method, const char *path,
                json_t *body, const char *idem, struct client_resp *r,
                char *err, size_t errlen);
void client_resp_clear(struct client_resp *r);

/* For long-lived requests (the event stream): a connection of the
 * caller's to the same exchange (URL, CA file), to be freed with
 * http1_free. NULL with err set. */
struct http1_conn *client_conn_new(struct client *c, char *err, size_t errlen);

/* Sends a signed `method path` with no body, plus `extra` header lines
 * (NULL-terminated, may be NULL), on `h` in streaming mode and reads the
 * answer's headers: returns 0 with *status set (the body is then read
 * with http1_stream_read), or -1 with err set. */
int client_stream_open(struct client *c, struct http1_conn *h,
                       const char *method, const char *path,
                       const char *const *extra, int *status, char *err,
                       size_t errlen);

/* Reads the secret from a file (first line, trimmed). */
int client_read_secret(const char *path, char *out, size_t len, char *err,
                       size_t errlen);

#endif
