/* metrics.c — see metrics.h. */
#include "exchange/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/http.h"

#define MAX_ROUTES 128
#define NCLASS     6 /* 1xx..5xx, and [0] for none */

/* Request latency buckets, in seconds; the order path is ~ms. */
static const double lat_le[] = {0.001, 0.002, 0.005, 0.01, 0.02,
                                0.05,  0.1,   0.5,   1,    5};
#define NLAT (sizeof lat_le / sizeof lat_le[0])

static const struct http_route *routes;
static size_t nroutes;
static uint64_t req_count[MAX_ROUTES + 1][NCLASS];
static uint64_t lat_bucket[NLAT + 1];
static uint64_t lat_sum_us, lat_n;
static uint64_t batches, batch_cmds, commit_us;
static uint64_t orders_ok, orders_rej, trades;
static int db_up = 1;
static int sse = 0;
static int http_conns = 0;
static uint64_t http_refused, http_refused_addr, http_deadline, http_evicted;
static uint64_t auth_queries;
static uint64_t idem_looked, idem_filtered, kf_keys[2], kf_bytes[2];
static uint64_t key_races, events_read;
static uint64_t nonce_groups, nonces_shared, nonce_failures;
static int markets_served;
static uint64_t markets_taken, batches_fenced;
static int64_t billing_unbilled;

#define ADD(v, n) __atomic_fetch_add(&(v), (n), __ATOMIC_RELAXED)
#define GET(v)    __atomic_load_n(&(v), __ATOMIC_RELAXED)

void metrics_init(const struct http_route *r, size_t n)
{
	routes = r;
	nroutes = n > MAX_ROUTES ? MAX_ROUTES : n;
}

void metrics_http(int route, int status, int64_t ns)
{
	size_t i =
	    route < 0 || (size_t)route >= nroutes ? MAX_ROUTES : (size_t)route;
	int cls = status >= 100 && status < 600 ? status / 100 : 0;
	ADD(req_count[i][cls], 1);
	double s = (double)ns / 1e9;
	size_t b = 0;
	while (b < NLAT && s > lat_le[b])
		b++;
	ADD(lat_bucket[b], 1);
	ADD(lat_sum_us, (uint64_t)(ns / 1000));
	ADD(lat_n, 1);
}

void metrics_batch(int commands, int64_t ns)
{
	ADD(batches, 1);
	ADD(batch_cmds, (uint64_t)commands);
	ADD(commit_us, (uint64_t)(ns / 1000));
}

void metrics_orders(int accepted, int rejected, int t)
{
	ADD(orders_ok, (uint64_t)accepted);
	ADD(orders_rej, (uint64_t)rejected);
	ADD(trades, (uint64_t)t);
}

void metrics_markets_served(int n)
{
	__atomic_store_n(&markets_served, n, __ATOMIC_RELAXED);
}
void metrics_market_taken(void)
{
	ADD(markets_taken, 1);
}
void metrics_billing_unbilled(int64_t n)
{
	__atomic_store_n(&billing_unbilled, n, __ATOMIC_RELAXED);
}

void metrics_batch_fenced(void)
{
	ADD(batches_fenced, 1);
}

void metrics_db_up(int up)
{
	__atomic_store_n(&db_up, up, __ATOMIC_RELAXED);
}
void metrics_sse_clients(int d)
{
	ADD(sse, d);
}

void metrics_http_connections(int d)
{
	ADD(http_conns, d);
}

void metrics_http_refused(void)
{
	ADD(http_refused, 1);
}

void metrics_http_refused_per_address(void)
{
	ADD(http_refused_addr, 1);
}

void metrics_http_deadline_closed(int n)
{
	ADD(http_deadline, (uint64_t)n);
}

void metrics_http_evicted(void)
{
	ADD(http_evicted, 1);
}

void metrics_auth_query(void)
{
	ADD(auth_queries, 1);
}

void metrics_idem_keys(int looked_up, int filtered)
{
	ADD(idem_looked, (uint64_t)looked_up);
	ADD(idem_filtered, (uint64_t)filtered);
}

void metrics_key_filter(bool loaded, uint64_t keys, uint64_t bytes)
{
	__atomic_store_n(&kf_keys[loaded], keys, __ATOMIC_RELAXED);
	__atomic_store_n(&kf_bytes[loaded], bytes, __ATOMIC_RELAXED);
}

void metrics_key_races(int n)
{
	ADD(key_races, (uint64_t)n);
}

void metrics_events_read(int n)
{
	ADD(events_read, (uint64_t)n);
}

void metrics_nonce_group(int n, bool ok)
{
	ADD(nonce_groups, 1);
	ADD(nonces_shared, (uint64_t)n);
	if (!ok)
		ADD(nonce_failures, 1);
}

struct buf {
	char *s;
	size_t n, cap;
};

static void put(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k < 0)
			return;
		if ((size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)k;
		char *s = realloc(b->s, cap);
		if (!s)
			return;
		b->s = s, b->cap = cap;
	}
}

char *metrics_render(size_t *len)
{
	struct buf b = {malloc(8192), 0, 8192};
	if (!b.s)
		return NULL;
	b.s[0] = 0;
	put(&b, "# HELP ramex_http_requests_total HTTP requests by route and "
	        "status class.\n# TYPE ramex_http_requests_total counter\n");
	for (size_t i = 0; i <= MAX_ROUTES; i++) {
		if (i >= nroutes && i != MAX_ROUTES)
			continue;
		for (int c = 0; c < NCLASS; c++) {
			uint64_t v = GET(req_count[i][c]);
			if (!v)
				continue;
			if (i == MAX_ROUTES)
				put(&b,
				    "ramex_http_requests_total{method=\"\","
				    "route="
				    "\"unmatched\",code=\"%dxx\"} %llu\n",
				    c, (unsigned long long)v);
			else
				put(&b,
				    "ramex_http_requests_total{method=\"%s\","
				    "route=\"%s\",code=\"%dxx\"} %llu\n",
				    routes[i].method, routes[i].pattern, c,
				    (unsigned long long)v);
		}
	}
	put(&b, "# HELP ramex_http_request_seconds Request latency.\n"
	        "# TYPE ramex_http_request_seconds histogram\n");
	uint64_t cum = 0;
	for (size_t i = 0; i < NLAT; i++) {
		cum += GET(lat_bucket[i]);
		put(&b, "ramex_http_request_seconds_bucket{le=\"%g\"} %llu\n",
		    lat_le[i], (unsigned long long)cum);
	}
	cum += GET(lat_bucket[NLAT]);
	put(&b, "ramex_http_request_seconds_bucket{le=\"+Inf\"} %llu\n",
	    (unsigned long long)cum);
	put(&b, "ramex_http_request_seconds_sum %.6f\n",
	    (double)GET(lat_sum_us) / 1e6);
	put(&b, "ramex_http_request_seconds_count %llu\n",
	    (unsigned long long)GET(lat_n));
	put(&b,
	    "# HELP ramex_batches_total Group-commit transactions.\n"
	    "# TYPE ramex_batches_total counter\nramex_batches_total %llu\n"
	    "# HELP ramex_batch_commands_total Commands in committed "
	    "batches.\n# TYPE ramex_batch_commands_total counter\n"
	    "ramex_batch_commands_total %llu\n"
	    "# HELP ramex_commit_seconds_total Time spent committing "
	    "batches.\n# TYPE ramex_commit_seconds_total counter\n"
	    "ramex_commit_seconds_total %.6f\n",
	    (unsigned long long)GET(batches),
	    (unsigned long long)GET(batch_cmds), (double)GET(commit_us) / 1e6);
	put(&b,
	    "# TYPE ramex_orders_accepted_total counter\n"
	    "ramex_orders_accepted_total %llu\n"
	    "# TYPE ramex_orders_rejected_total counter\n"
	    "ramex_orders_rejected_total %llu\n"
	    "# TYPE ramex_trades_total counter\nramex_trades_total %llu\n"
	    "# HELP ramex_database_up Whether PostgreSQL answered last "
	    "time.\n# TYPE ramex_database_up gauge\nramex_database_up %d\n"
	    "# TYPE ramex_sse_clients gauge\nramex_sse_clients %d\n"
	    "# HELP ramex_http_connections Open HTTP connections.\n"
	    "# TYPE ramex_http_connections gauge\nramex_http_connections %d\n"
	    "# HELP ramex_http_connections_refused_total Connections "
	    "refused at max_connections.\n"
	    "# TYPE ramex_http_connections_refused_total counter\n"
	    "ramex_http_connections_refused_total %llu\n"
	    "# HELP ramex_http_connections_refused_per_address_total "
	    "Connections refused at max_connections_per_address.\n"
	    "# TYPE ramex_http_connections_refused_per_address_total "
	    "counter\n"
	    "ramex_http_connections_refused_per_address_total %llu\n"
	    "# HELP ramex_http_request_timeouts_total Connections closed "
	    "because a request's head and body did not arrive within "
	    "request_timeout_ms (408).\n"
	    "# TYPE ramex_http_request_timeouts_total counter\n"
	    "ramex_http_request_timeouts_total %llu\n"
	    "# HELP ramex_http_connections_evicted_total Connections "
	    "waiting for their request, closed (408) to let a new one in "
	    "at max_connections.\n"
	    "# TYPE ramex_http_connections_evicted_total counter\n"
	    "ramex_http_connections_evicted_total %llu\n"
	    "# HELP ramex_auth_queries_total Credential lookups in "
	    "PostgreSQL (cache misses and reads of the new ones).\n"
	    "# TYPE ramex_auth_queries_total counter\n"
	    "ramex_auth_queries_total %llu\n",
	    (unsigned long long)GET(orders_ok),
	    (unsigned long long)GET(orders_rej),
	    (unsigned long long)GET(trades), GET(db_up), GET(sse),
	    GET(http_conns), (unsigned long long)GET(http_refused),
	    (unsigned long long)GET(http_refused_addr),
	    (unsigned long long)GET(http_deadline),
	    (unsigned long long)GET(http_evicted),
	    (unsigned long long)GET(auth_queries));
	put(&b,
	    "# HELP ramex_idem_keys_looked_up_total Idempotency keys and "
	    "client order ids looked up in PostgreSQL.\n"
	    "# TYPE ramex_idem_keys_looked_up_total counter\n"
	    "ramex_idem_keys_looked_up_total %llu\n"
	    "# HELP ramex_idem_keys_filtered_total Keys not looked up: the "
	    "key filter knew them to be new.\n"
	    "# TYPE ramex_idem_keys_filtered_total counter\n"
	    "ramex_idem_keys_filtered_total %llu\n"
	    "# HELP ramex_key_filter_loaded Whether the key filter holds "
	    "the keys written before ramexd started (until then every key "
	    "is looked up).\n"
	    "# TYPE ramex_key_filter_loaded gauge\n"
	    "ramex_key_filter_loaded %d\n"
	    "# HELP ramex_key_filter_keys Keys in the writer's key filter.\n"
	    "# TYPE ramex_key_filter_keys gauge\n"
	    "ramex_key_filter_keys %llu\n"
	    "# HELP ramex_key_filter_bytes Memory of the key filter.\n"
	    "# TYPE ramex_key_filter_bytes gauge\n"
	    "ramex_key_filter_bytes %llu\n",
	    (unsigned long long)GET(idem_looked),
	    (unsigned long long)GET(idem_filtered),
	    GET(kf_bytes[1]) > 0, /* a loaded filter has memory */
	    (unsigned long long)(GET(kf_keys[0]) + GET(kf_keys[1])),
	    (unsigned long long)(GET(kf_bytes[0]) + GET(kf_bytes[1])));
	put(&b,
	    "# HELP ramex_key_races_total Batches run again because another "
	    "ramexd on the database committed one of their keys first.\n"
	    "# TYPE ramex_key_races_total counter\n"
	    "ramex_key_races_total %llu\n"
	    "# HELP ramex_events_read_total Events read from the stream "
	    "shared through PostgreSQL (shared = 1).\n"
	    "# TYPE ramex_events_read_total counter\n"
	    "ramex_events_read_total %llu\n"
	    "# HELP ramex_nonce_groups_total Groups of nonces written to "
	    "the shared store in PostgreSQL (shared = 1), one statement each.\n"
	    "# TYPE ramex_nonce_groups_total counter\n"
	    "ramex_nonce_groups_total %llu\n"
	    "# HELP ramex_nonces_shared_total Nonces checked in the shared "
	    "store.\n"
	    "# TYPE ramex_nonces_shared_total counter\n"
	    "ramex_nonces_shared_total %llu\n"
	    "# HELP ramex_nonce_group_failures_total Groups the database "
	    "could not take (their requests got 503).\n"
	    "# TYPE ramex_nonce_group_failures_total counter\n"
	    "ramex_nonce_group_failures_total %llu\n"
	    "# HELP ramex_markets_served Markets whose book this instance "
	    "holds (exchange/owner.h).\n"
	    "# TYPE ramex_markets_served gauge\n"
	    "ramex_markets_served %d\n"
	    "# HELP ramex_markets_taken_total Markets this instance took "
	    "(at start, new ones, and from instances that died).\n"
	    "# TYPE ramex_markets_taken_total counter\n"
	    "ramex_markets_taken_total %llu\n"
	    "# HELP ramex_batches_fenced_total Batches refused because "
	    "another instance took one of their markets.\n"
	    "# TYPE ramex_batches_fenced_total counter\n"
	    "ramex_batches_fenced_total %llu\n"
	    "# HELP ramex_billing_unbilled_contracts Contracts the last "
	    "billing run left unbilled and queued (logged \"contract not "
	    "billed\"): their amount, or an invoice's total, would pass "
	    "int64.\n"
	    "# TYPE ramex_billing_unbilled_contracts gauge\n"
	    "ramex_billing_unbilled_contracts %lld\n",
	    (unsigned long long)GET(key_races),
	    (unsigned long long)GET(events_read),
	    (unsigned long long)GET(nonce_groups),
	    (unsigned long long)GET(nonces_shared),
	    (unsigned long long)GET(nonce_failures),
	    GET(markets_served), (unsigned long long)GET(markets_taken),
	    (unsigned long long)GET(batches_fenced),
	    (long long)GET(billing_unbilled));
	*len = b.n;
	return b.s;
}
