/* client.c — signed JSON calls to ramexd over libcurl; see client.h. */
#include "node-agent/client.h"

#include "common/sign.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLIENT_MAX_BODY (4 << 20) /* a page of contracts is far smaller */

struct client {
	CURL *curl;
	char base[512];
	char key_id[128];
	char secret[256];
	char ca_file[512];
};

struct buf {
	char *p;
	size_t n;
	int too_big;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct buf *b = ctx;
	size_t len = size * nmemb;
	if (b->n + len > CLIENT_MAX_BODY) {
		b->too_big = 1;
		return 0;
	}
	char *p = realloc(b->p, b->n + len + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, data, len);
	b->p = p;
	b->n += len;
	b->p[b->n] = 0;
	return len;
}

struct client *client_new(const char *base_url, const char *key_id,
                          const char *secret, const char *ca_file, char *err,
                          size_t errlen)
{
	static int inited;
	struct client *c;

	if (!inited) {
		/* Not thread-safe by libcurl's contract; the agent calls this
		 * once, from main, before any thread exists. */
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = 1;
	}
	c = calloc(1, sizeof *c);
	if (!c || !(c->curl = curl_easy_init())) {
		snprintf(err, errlen, "out of memory");
		free(c);
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
		client_free(c);
		return NULL;
	}
	size_t bl = strlen(c->base);
	while (bl > 0 && c->base[bl - 1] == '/')
		c->base[--bl] = 0;
	return c;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	memset(c->secret, 0, sizeof c->secret);
	free(c);
}

void client_resp_clear(struct client_resp *r)
{
	if (r->json)
		json_decref(r->json);
	memset(r, 0, sizeof *r);
}

/* The signing headers of one request, appended to *hl. */
static int sign_headers(struct client *c, const char *method, const char *path,
                        const char *text, struct curl_slist **hl, char *err,
                        size_t errlen)
{
	char nonce[33], sig[SIGN_HEX_LEN + 1], line[4][300];
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
	snprintf(line[0], sizeof line[0], SIGN_HDR_KEY ": %s", c->key_id);
	snprintf(line[1], sizeof line[1], SIGN_HDR_TIMESTAMP ": %lld",
	         (long long)sr.timestamp);
	snprintf(line[2], sizeof line[2], SIGN_HDR_NONCE ": %s", nonce);
	snprintf(line[3], sizeof line[3], SIGN_HDR_SIGNATURE ": %s", sig);
	for (int i = 0; i < 4; i++)
		*hl = curl_slist_append(*hl, line[i]);
	return 0;
}

int client_prepare(struct client *c, CURL *h, const char *method,
                   const char *path, const char *const *extra,
                   struct curl_slist **hl, char *err, size_t errlen)
{
	char url[1024];

	*hl = NULL;
	if (snprintf(url, sizeof url, "%s%s", c->base, path) >=
	    (int)sizeof url) {
		snprintf(err, errlen, "request path too long");
		return -1;
	}
	if (sign_headers(c, method, path, NULL, hl, err, errlen) < 0)
		return -1;
	for (int i = 0; extra && extra[i]; i++)
		*hl = curl_slist_append(*hl, extra[i]);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hl);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	return 0;
}

int client_call(struct client *c, const char *method, const char *path,
                json_t *body, const char *idem, struct client_resp *r,
                char *err, size_t errlen)
{
	char url[1024], line[300];
	char *text = NULL;
	struct buf b = {0};
	struct curl_slist *hl = NULL;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (body && !(text = json_dumps(body, JSON_COMPACT))) {
		snprintf(err, errlen, "could not encode the request");
		return -1;
	}
	snprintf(url, sizeof url, "%s%s", c->base, path);
	if (sign_headers(c, method, path, text, &hl, err, errlen) < 0)
		goto out;
	if (idem) {
		snprintf(line, sizeof line, "Idempotency-Key: %s", idem);
		hl = curl_slist_append(hl, line);
	}
	hl = curl_slist_append(hl, "Content-Type: application/json");
	hl = curl_slist_append(hl, "Expect:");

	CURL *h = c->curl;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (text) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	}
	CURLcode cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "could not reach the exchange at %s: %s",
		         c->base,
		         b.too_big ? "answer too large"
		                   : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (b.p && b.n)
		r->json = json_loads(b.p, 0, NULL);
	if (r->status >= 400 && r->json) {
		const char *t =
		    json_string_value(json_object_get(r->json, "title"));
		const char *d =
		    json_string_value(json_object_get(r->json, "detail"));
		snprintf(r->detail, sizeof r->detail, "%s%s%s", t ? t : "",
		         t && d ? ": " : "", d ? d : "");
	}
	rc = 0;
out:
	curl_slist_free_all(hl);
	free(b.p);
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
		fclose(f);
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
