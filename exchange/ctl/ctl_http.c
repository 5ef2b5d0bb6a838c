/* ctl_http.c — ramexctl's HTTP client; see ctl_http.h. */
#include "exchange/ctl/ctl_http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reply bigger than this is not something ramexd sends (its own row
 * limits keep lists far below); refuse rather than grow without bound. */
#define CTL_HTTP_MAX_BODY (64u << 20)

struct buf {
	char *p;
	size_t n;
	int too_big;
};

static size_t on_data(char *d, size_t sz, size_t nm, void *u)
{
	struct buf *b = u;
	size_t n = sz * nm;
	if (b->n + n > CTL_HTTP_MAX_BODY) {
		b->too_big = 1;
		return 0;
	}
	char *p = realloc(b->p, b->n + n + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, d, n);
	b->p = p;
	b->n += n;
	p[b->n] = 0;
	return n;
}

enum ctl_exit ctl_http_exit(long status)
{
	/* a redirect still unanswered after the hops followed: the
	 * request was not carried out */
	if (status == 0 || status >= 500 || (status >= 300 && status < 400))
		return CTL_UNREACHABLE;
	if (status == 401 || status == 403)
		return CTL_AUTH;
	if (status >= 400)
		return CTL_REFUSED;
	return CTL_OK;
}

enum ctl_exit ctl_http_call(const struct ctl_http *c, const char *method,
                            const char *path, const char *body,
                            struct ctl_http_resp *r)
{
	struct buf b = {0};
	struct curl_slist *h = NULL;
	char url[2048], auth[512], accept[128], idem[160];
	CURL *cu = NULL;
	int not_json = 0;
	memset(r, 0, sizeof *r);
	size_t ul = strlen(c->url);
	while (ul > 0 && c->url[ul - 1] == '/')
		ul--;
	if ((size_t)snprintf(url, sizeof url, "%.*s%s", (int)ul, c->url,
	                     path) >= sizeof url) {
		snprintf(r->err, sizeof r->err, "the URL is too long");
		goto fail;
	}
	cu = curl_easy_init();
	if (!cu) {
		snprintf(r->err, sizeof r->err, "could not start libcurl");
		goto fail;
	}
	snprintf(accept, sizeof accept, "Accept: %s",
	         c->accept ? c->accept : "application/json");
	h = curl_slist_append(h, accept);
	if (body)
		h = curl_slist_append(h, "Content-Type: application/json");
	if (c->token && *c->token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s",
		         c->token);
		h = curl_slist_append(h, auth);
	}
	if (c->idem_key) {
		snprintf(idem, sizeof idem, "Idempotency-Key: %s", c->idem_key);
		h = curl_slist_append(h, idem);
	}
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	/* an exchange of several instances sends a request for a market
	 * served by another to that one (307, docs/operations.md "Several
	 * instances"): followed with its method, body and token, over http
	 * or https only, at most three times */
	curl_easy_setopt(cu, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(cu, CURLOPT_MAXREDIRS, 3L);
	curl_easy_setopt(cu, CURLOPT_UNRESTRICTED_AUTH, 1L);
	curl_easy_setopt(cu, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	if (body)
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
	CURLcode rc = curl_easy_perform(cu);
	if (rc != CURLE_OK) {
		snprintf(r->err, sizeof r->err, "could not reach %s: %s",
		         c->url,
		         b.too_big ? "the reply is too large"
		                   : curl_easy_strerror(rc));
		goto fail;
	}
	curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &r->status);
	r->body = b.p;
	r->len = b.n;
	b.p = NULL;
	/* a CSV export is not JSON; its problem+json errors are */
	if (r->body && *r->body && (r->status >= 400 || !c->accept)) {
		json_error_t je;
		r->json = json_loads(r->body, 0, &je);
		if (!r->json) {
			snprintf(r->err, sizeof r->err,
			         "the server's reply is not JSON: %s", je.text);
			/* a 2xx that is not JSON is no answer of ramexd's
			 * (a proxy's page, a broken reply cut short): it
			 * printed nothing and exited 0 */
			not_json = r->status < 300;
		}
	} else if (r->status < 300 && !c->accept) {
		/* ramexd answers every request with a body (no 204) */
		snprintf(r->err, sizeof r->err,
		         "the server's reply is not JSON: it is empty");
		not_json = 1;
	}
fail:
	free(b.p);
	curl_slist_free_all(h);
	if (cu)
		curl_easy_cleanup(cu);
	return not_json ? CTL_UNREACHABLE : ctl_http_exit(r->status);
}

void ctl_http_resp_free(struct ctl_http_resp *r)
{
	json_decref(r->json);
	free(r->body);
	memset(r, 0, sizeof *r);
}
