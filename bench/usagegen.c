/*
 * usagegen.c — load generator for bench/45-usage.sh: usage line items per
 * second through POST /v1/usage into PostgreSQL.
 *
 *   usagegen PORT NODES_FILE BATCH SECONDS
 *       NODES_FILE has one line per node: "KEY_ID SECRET CONTRACT_ID" (a
 *       node key and a spot contract that node sells, not yet delivered).
 *       One thread and one keep-alive connection per node: it confirms the
 *       delivery (signed POST /v1/contracts/ID/deliver), then sends signed
 *       batches of BATCH reports with consecutive numbers and consecutive
 *       100 us periods, one batch in flight, until SECONDS are over. Prints
 *       reports counted per second and p50/p99/max batch latency; every
 *       batch must answer 200 with every report counted, or it is counted
 *       as refused.
 *   usagegen PORT NODES_FILE 0 SECONDS
 *       BATCH 0: signed orders instead, the agent's order path: each node
 *       sends POST /v1/orders (an IOC sell that finds no bid, so that no
 *       book grows), one in flight, and an order is counted when it is
 *       answered 201. What ramexd's `shared = 1` costs a signed request
 *       (the nonce taken in PostgreSQL) shows here.
 *
 * Latencies are kept in a fixed array (no allocation while measuring).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/sign.h"

#define MAX_NODES   256
#define MAX_SAMPLES (1024 * 1024)
#define PERIOD_NS   100000 /* 100 us: 10 000 reports per second of time */

struct resp {
	char *buf;
	size_t len, cap;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t k = sz * n;
	if (r->len + k + 1 > r->cap) {
		size_t cap = (r->len + k + 1) * 2;
		char *b = realloc(r->buf, cap);
		if (!b)
			return 0;
		r->buf = b, r->cap = cap;
	}
	memcpy(r->buf + r->len, p, k);
	r->len += k;
	r->buf[r->len] = 0;
	return k;
}

struct node {
	char key[32], secret[96];
	long long contract;
	int64_t delivered_ns;
	/* results */
	long counted, refused;
	int64_t *lat;
	long nlat;
};

static int port, batch;
static int64_t deadline;

/* One signed call on handle c; returns the HTTP status (0: no answer). */
static long call(CURL *c, struct node *n, const char *method, const char *path,
                 const char *body, size_t blen, struct resp *out)
{
	char url[256], nonce[33], sig[SIGN_HEX_LEN + 1], h[4][160];
	int64_t ts = (int64_t)time(NULL);
	if (sign_nonce(nonce) < 0)
		return 0;
	struct sign_request sr = {method, path, ts, nonce, body, blen};
	if (sign_compute(n->secret, &sr, sig) < 0)
		return 0;
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	snprintf(h[0], sizeof h[0], "%s: %s", SIGN_HDR_KEY, n->key);
	snprintf(h[1], sizeof h[1], "%s: %lld", SIGN_HDR_TIMESTAMP,
	         (long long)ts);
	snprintf(h[2], sizeof h[2], "%s: %s", SIGN_HDR_NONCE, nonce);
	snprintf(h[3], sizeof h[3], "%s: %s", SIGN_HDR_SIGNATURE, sig);
	struct curl_slist *hl =
	    curl_slist_append(NULL, "Content-Type: application/json");
	for (int i = 0; i < 4; i++)
		hl = curl_slist_append(hl, h[i]);
	out->len = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)blen);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	long status = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	return status;
}

/* The integer after "key": in a JSON text (enough for our own replies). */
static long long json_int_of(const char *s, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = s ? strstr(s, pat) : NULL;
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static void *run(void *arg)
{
	struct node *n = arg;
	CURL *c = curl_easy_init();
	struct resp r = {0};
	char path[96];
	size_t cap = (size_t)batch * 256 + 64;
	char *body = malloc(cap);
	if (!c || !body)
		goto out;
	snprintf(path, sizeof path, "/v1/contracts/%lld/deliver", n->contract);
	long s = call(c, n, "POST", path, "", 0, &r);
	n->delivered_ns = json_int_of(r.buf, "delivered_ns");
	if (s != 200 || n->delivered_ns <= 0) {
		fprintf(stderr, "usagegen: deliver %lld: %ld %s\n", n->contract,
		        s, r.buf ? r.buf : "");
		goto out;
	}
	while (batch == 0 && clock_mono_ns() < deadline) {
		static const char order[] =
		    "{\"market\":\"spot\",\"side\":\"sell\",\"pages\":256,"
		    "\"price\":900000000,\"tif\":\"ioc\"}";
		int64_t t0 = clock_mono_ns();
		s = call(c, n, "POST", "/v1/orders", order, sizeof order - 1,
		         &r);
		int64_t dt = clock_mono_ns() - t0;
		if (s == 201) {
			n->counted++;
			if (n->nlat < MAX_SAMPLES / MAX_NODES * 4)
				n->lat[n->nlat++] = dt;
		} else if (n->refused++ == 0) {
			fprintf(stderr, "usagegen: order refused: %ld %.300s\n",
			        s, r.buf ? r.buf : "");
		}
	}
	/* periods start just inside the clock slack before the delivery */
	int64_t t = n->delivered_ns - INT64_C(59) * 1000000000, seq = 0,
	        kmod = 0;
	while (clock_mono_ns() < deadline) {
		size_t len = (size_t)snprintf(body, cap, "{\"reports\":[");
		for (int i = 0; i < batch; i++) {
			seq++, kmod++;
			len += (size_t)snprintf(
			    body + len, cap - len,
			    "%s{\"epoch\":1,\"seq\":%lld,\"contract_id\":%lld,"
			    "\"period_start_ns\":%lld,\"period_end_ns\":%lld,"
			    "\"page_seconds\":1,\"kmod_page_seconds\":%lld,"
			    "\"kmod_pages\":256}",
			    i ? "," : "", (long long)seq, n->contract,
			    (long long)t, (long long)(t + PERIOD_NS),
			    (long long)kmod);
			t += PERIOD_NS;
		}
		len += (size_t)snprintf(body + len, cap - len, "]}");
		int64_t t0 = clock_mono_ns();
		s = call(c, n, "POST", "/v1/usage", body, len, &r);
		int64_t dt = clock_mono_ns() - t0;
		if (s == 200 && json_int_of(r.buf, "counted") == batch) {
			n->counted += batch;
			if (n->nlat < MAX_SAMPLES / MAX_NODES * 4)
				n->lat[n->nlat++] = dt;
		} else {
			n->refused += batch;
			if (n->refused == batch)
				fprintf(stderr,
				        "usagegen: batch refused: %ld %.300s\n",
				        s, r.buf ? r.buf : "");
		}
	}
out:
	free(body);
	free(r.buf);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr,
		        "usage: usagegen PORT NODES_FILE BATCH SECONDS\n");
		return 2;
	}
	port = atoi(argv[1]);
	batch = atoi(argv[3]);
	int secs = atoi(argv[4]);
	if (port <= 0 || batch < 0 || batch > 1000 || secs < 1) {
		fprintf(stderr, "usagegen: PORT > 0, BATCH 0..1000 (0: signed "
		                "orders), SECONDS >= 1\n");
		return 2;
	}
	FILE *f = fopen(argv[2], "r");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	static struct node nodes[MAX_NODES];
	int nn = 0;
	while (nn < MAX_NODES &&
	       fscanf(f, "%31s %95s %lld", nodes[nn].key, nodes[nn].secret,
	              &nodes[nn].contract) == 3)
		nn++;
	fclose(f);
	if (nn == 0) {
		fprintf(stderr, "usagegen: no nodes in %s\n", argv[2]);
		return 1;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pthread_t th[MAX_NODES];
	int64_t t0 = clock_mono_ns();
	deadline = t0 + (int64_t)secs * 1000000000;
	for (int i = 0; i < nn; i++) {
		nodes[i].lat =
		    malloc(MAX_SAMPLES / MAX_NODES * 4 * sizeof *nodes[i].lat);
		if (!nodes[i].lat)
			return 1;
		pthread_create(&th[i], NULL, run, &nodes[i]);
	}
	long counted = 0, refused = 0, nlat = 0;
	for (int i = 0; i < nn; i++) {
		pthread_join(th[i], NULL);
		counted += nodes[i].counted;
		refused += nodes[i].refused;
		nlat += nodes[i].nlat;
	}
	double el = (clock_mono_ns() - t0) / 1e9;
	int64_t *all = malloc((size_t)(nlat ? nlat : 1) * sizeof *all);
	long k = 0;
	for (int i = 0; i < nn; i++)
		for (long j = 0; j < nodes[i].nlat; j++)
			all[k++] = nodes[i].lat[j];
	qsort(all, (size_t)nlat, sizeof *all, cmp64);
	if (batch == 0)
		printf("  %d connections (one node each), signed orders "
		       "(answered 201): %.0f orders/s counted (%ld in %.1f s, "
		       "%ld refused)  p50 "
		       "%.1f ms  p99 %.1f ms  max %.1f ms\n",
		       nn, counted / el, counted, el, refused,
		       nlat ? all[nlat / 2] / 1e6 : 0,
		       nlat ? all[(long)(nlat * 0.99)] / 1e6 : 0,
		       nlat ? all[nlat - 1] / 1e6 : 0);
	else
		printf(
		    "  %d connections (one node each), %d reports a batch: "
		    "%.0f "
		    "reports/s counted (%ld in %.1f s, %ld refused)  batch p50 "
		    "%.1f ms  p99 %.1f ms  max %.1f ms\n",
		    nn, batch, counted / el, counted, el, refused,
		    nlat ? all[nlat / 2] / 1e6 : 0,
		    nlat ? all[(long)(nlat * 0.99)] / 1e6 : 0,
		    nlat ? all[nlat - 1] / 1e6 : 0);
	free(all);
	for (int i = 0; i < nn; i++)
		free(nodes[i].lat);
	curl_global_cleanup();
	return refused ? 1 : 0;
}
