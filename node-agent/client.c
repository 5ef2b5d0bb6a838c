/* client.c — signed JSON calls to ramexd over http1; see client.h. */
#include "node-agent/client.h"

#include "common/sign.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLIENT_MAX_BODY   (4 << 20) /* a page of contracts is far smaller */
#define CLIENT_CONNECT_MS 3000
#define CLIENT_TIMEOUT_MS 10000
#define CLIENT_HDR_LEN    300

struct client {
	struct http1_conn *conn;
	char base[512];
	char key_id[128];
	char secret[256];
	char ca_file[512];
};

struct client *client_new(const char *base_url, const char *key_id,
                          const char *secret, const char *ca_file, char *err,
                          size_t errlen)
{
	struct client *c = calloc(1, sizeof *c);

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (snprintf(c->base, sizeof c->base, "%s", base_url) >=
	        (int)sizeof c->base ||
	    snprintf(c->key_id, sizeof c->key_id, "%s", key_id) >=
	        (int)sizeof c->key_id ||
	    snprintf(c->secret, sizeof c->secret, "%s", secret) >=
	        (int)sizeof c->secret ||
	    snprintf(c->ca_file, sizeof c->ca_file, "%s",
	             ca_file ? ca_file : "") >= (int)sizeof c->ca_file) {
		snprintf(err, errlen,
		         "exchange url, key id, secret or CA file "
		         "too long");
		goto fail;
	}
	size_t bl = strlen(c->base);
	while (bl > 0 && c->base[bl - 1] == '/')
		c->base[--bl] = 0;
	/* Checks the URL and the CA file now, so that a typo stops the
	 * agent at start rather than looking like an outage. */
	if (!(c->conn = client_conn_new(c, err, errlen)))
		goto fail;
	return c;
fail:
	client_free(c);
	return NULL;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	http1_free(c->conn);
	memset(c->secret, 0, sizeof c->secret);
	free(c);
}

struct http1_conn *client_conn_new(struct client *c, char *err, size_t errlen)
{
	return http1_new(c->base, c->ca_file, CLIENT_CONNECT_MS, err, errlen);
}

void client_resp_clear(struct client_resp *r)
{
	if (r->json)
		json_decref(r->json);
	memset(r, 0, sizeof *r);
}

/* The signing headers of one request, written into line[0..3]. */
static int sign_headers(struct client *c, const char *method, const char *path,
                        const char *text, char line[][CLIENT_HDR_LEN],
                        char *err, size_t errlen)
{
	char nonce[33], sig[SIGN_HEX_LEN + 1];
	struct sign_request sr = {.method = method,
	                          .path = path,
	                          .timestamp = (int64_t)time(NULL),
	                          .nonce = nonce,
	                          .body = text,
	                          .body_len = text ? strlen(text) : 0};
	if (sign_nonce(nonce) < 0 || sign_compute(c->secret, &sr, sig) < 0) {
		snprintf(err, errlen, "could not sign the request");
		return -1;
	}
	snprintf(line[0], CLIENT_HDR_LEN, SIGN_HDR_KEY ": %s", c->key_id);
	snprintf(line[1], CLIENT_HDR_LEN, SIGN_HDR_TIMESTAMP ": %lld",
	         (long long)sr.timestamp);
	snprintf(line[2], CLIENT_HDR_LEN, SIGN_HDR_NONCE ": %s", nonce);
	snprintf(line[3], CLIENT_HDR_LEN, SIGN_HDR_SIGNATURE ": %s", sig);
	return 0;
}

#define CLIENT_EXTRA_MAX 8

int client_stream_open(struct client *c, struct http1_conn *h,
                       const char *method, const char *path,
                       const char *const *extra, int *status, char *err,
                       size_t errlen)
{
	char line[4][CLIENT_HDR_LEN];
	const char *hdr[4 + CLIENT_EXTRA_MAX + 1];
	int n = 0;

	if (sign_headers(c, method, path, NULL, line, err, errlen) < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		hdr[n++] = line[i];
	for (int i = 0; extra && extra[i]; i++) {
		if (i == CLIENT_EXTRA_MAX) {
			snprintf(err, errlen, "more than %d extra headers",
			         CLIENT_EXTRA_MAX);
			return -1;
		}
		hdr[n++] = extra[i];
	}
	hdr[n] = NULL;
	struct http1_request req = {.method = method,
	                            .path = path,
	                            .headers = hdr,
	                            .timeout_ms = CLIENT_TIMEOUT_MS};
	if (http1_stream_open(h, &req, status, err, errlen) < 0)
		return -1;
	return 0;
}

/* One signed request on h: signed afresh (a new nonce) each time, so that
 * a request sent on to another instance is not a replay. */
static int send_signed(struct client *c, struct http1_conn *h,
                       const char *method, const char *path, const char *text,
                       const char *idem, struct http1_response *hr, char *err,
                       size_t errlen)
{
	char line[6][CLIENT_HDR_LEN];
	const char *hdr[8];
	int n = 0;
	if (sign_headers(c, method, path, text, line, err, errlen) < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		hdr[n++] = line[i];
	if (idem) {
		if (snprintf(line[4], CLIENT_HDR_LEN, "Idempotency-Key: %s",
		             idem) >= CLIENT_HDR_LEN) {
			snprintf(err, errlen, "idempotency key too long");
			return -1;
		}
		hdr[n++] = line[4];
	}
	if (text)
		hdr[n++] = "Content-Type: application/json";
	hdr[n] = NULL;
	struct http1_request req = {.method = method,
	                            .path = path,
	                            .headers = hdr,
	                            .body = text,
	                            .body_len = text ? strlen(text) : 0,
	                            .timeout_ms = CLIENT_TIMEOUT_MS,
	                            .max_body = CLIENT_MAX_BODY};
	char why[400];
	if (http1_request(h, &req, hr, why, sizeof why) < 0) {
		snprintf(err, errlen, "could not reach the exchange at %s: %s",
		         http1_authority(h), why);
		return -1;
	}
	return 0;
}

/* The instance a 307 sends the request to (its problem's "owner", a base
 * URL): into url, or -1 with err set when there is none or it would leave
 * https for http. */
static int redirect_owner(const struct client *c,
                          const struct http1_response *hr, char *url,
                          size_t len, char *err, size_t errlen)
{
	json_t *j =
	    hr->body ? json_loadb(hr->body, hr->body_len, 0, NULL) : NULL;
	const char *o = json_string_value(json_object_get(j, "owner"));
	int rc = -1;
	if (!o || (strncmp(o, "http://", 7) && strncmp(o, "https://", 8)))
		snprintf(err, errlen,
		         "the exchange sent the request elsewhere (307) "
		         "without an owner URL");
	else if (!strncmp(c->base, "https://", 8) && strncmp(o, "https://", 8))
		snprintf(err, errlen,
		         "the exchange sent the request to %.200s, which is "
		         "not https like %.200s: refused",
		         o, c->base);
	else if (snprintf(url, len, "%s", o) >= (int)len)
		snprintf(err, errlen, "the owner URL is too long");
	else
		rc = 0;
	json_decref(j);
	return rc;
}

int client_call(struct client *c, const char *method, const char *path,
                json_t *body, const char *idem, struct client_resp *r,
                char *err, size_t errlen)
{
	char *text = NULL;
	struct http1_response hr = {0};
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (body && !(text = json_dumps(body, JSON_COMPACT))) {
		snprintf(err, errlen, "could not encode the request");
		return -1;
	}
	if (send_signed(c, c->conn, method, path, text, idem, &hr, err,
	                errlen) < 0)
		goto out;
	/* A market served by another instance of the exchange: the request
	 * goes there, signed again (docs/agent.md). At most two hops; the
	 * owner's connection lasts this call only, since the next order of
	 * the market may be served here again after a takeover. */
	for (int hop = 0; hr.status == 307 && hop < 2; hop++) {
		char url[512];
		if (redirect_owner(c, &hr, url, sizeof url, err, errlen) < 0)
			goto out;
		struct http1_conn *o =
		    http1_new(url, c->ca_file, CLIENT_CONNECT_MS, err, errlen);
		if (!o)
			goto out;
		http1_response_clear(&hr);
		int sent = send_signed(c, o, method, path, text, idem, &hr, err,
		                       errlen);
		http1_free(o);
		if (sent < 0)
			goto out;
	}
	r->status = hr.status;
	if (hr.body && hr.body_len)
		r->json = json_loadb(hr.body, hr.body_len, 0, NULL);
	if (r->status >= 300 && r->json) {
		const char *t =
		    json_string_value(json_object_get(r->json, "title"));
		const char *d =
		    json_string_value(json_object_get(r->json, "detail"));
		snprintf(r->detail, sizeof r->detail, "%s%s%s", t ? t : "",
		         t && d ? ": " : "", d ? d : "");
	}
	rc = 0;
out:
	http1_response_clear(&hr);
	free(text);
	return rc;
}

int client_read_secret(const char *path, char *out, size_t len, char *err,
                       size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "could not open the node secret %s: %s",
		         path, strerror(errno));
		return -1;
	}
	if (!fgets(out, (int)len, f)) {
		/* a directory opens for reading and fails here (EISDIR): say
		 * so, not "empty" */
		int e = ferror(f) ? errno : 0;
		fclose(f);
		if (e)
			snprintf(err, errlen, "could not read the node secret %s: %s",
			         path, strerror(e));
		else
			snprintf(err, errlen, "the node secret %s is empty", path);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\r\n \t")] = 0;
	if (!out[0]) {
		snprintf(err, errlen, "the node secret %s is empty", path);
		return -1;
	}
	return 0;
}
