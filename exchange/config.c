/* config.c — see config.h. */
#include "exchange/config.h"

#include "common/conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_STR, K_INT, K_LISTEN };

struct setting {
	const char *key;
	enum kind kind;
	size_t off;  /* into struct rx_config */
	size_t size; /* K_STR: buffer size */
	long long min, max;
	const char *def;
	const char *help;
};

#define S(k, f, d, h)                                                          \
	{                                                                      \
		k, K_STR, offsetof(struct rx_config, f),                       \
		    sizeof(((struct rx_config *)0)->f), 0, 0, d, h             \
	}
#define I(k, f, lo, hi, d, h)                                                  \
	{                                                                      \
		k, K_INT, offsetof(struct rx_config, f),                       \
		    sizeof(((struct rx_config *)0)->f), lo, hi, d, h           \
	}

/* The one list of settings. Limits say what the code was built to carry. */
static const struct setting settings[] = {
    {"listen", K_LISTEN, 0, 0, 0, 0, "127.0.0.1:8080",
     "address:port to serve HTTP on (port 0 = any free port)"},
    S("db", db, "dbname=ramex",
      "PostgreSQL conninfo; several hosts with target_session_attrs="
      "read-write follow a failover (docs/operations.md)"),
    S("read_db", read_db, "",
      "PostgreSQL conninfo for the reports (invoices, exports, billing "
      "summary, ledger check, usage gaps, trades, candles), e.g. a "
      "streaming replica; they may lag the primary by its replay delay. "
      "Its sessions are read-only. Empty: the db connections"),
    I("max_connections", max_connections, 1, 10000, "512",
      "most HTTP connections at once; more are refused"),
    I("max_connections_per_address", max_connections_per_address, 0, 10000,
      "128",
      "most HTTP connections one client address holds at once; more are "
      "refused. 0: no limit (behind a proxy, where every client has the "
      "proxy's address: limit clients in the proxy)"),
    I("connection_timeout_s", connection_timeout_s, 1, 3600, "30",
      "a connection idle this many seconds is closed (between requests, "
      "or a client that stops sending or reading)"),
    I("request_timeout_ms", request_timeout_ms, 0, 3600000, "10000",
      "a request's head and body must arrive in full within this many "
      "milliseconds of the connection's accept (or of the previous answer "
      "plus connection_timeout_s), however they trickle in; else 408 and "
      "the connection is closed. 0: no deadline; else at least 100"),
    I("http_threads", http_threads, 0, 64, "0",
      "threads serving the HTTP connections; 0: one per core, or "
      "max_connections/125 when that is more (at least that many run)"),
    I("http_workers", http_workers, 1, 256, "8",
      "threads for the requests that wait for PostgreSQL (every one but "
      "the order writes, the event stream, /healthz and /metrics)"),
    I("body_limit", body_limit, 256, 16 << 20, "1048576",
      "largest request body in bytes; larger ones get 413 (a full "
      "POST /v1/usage batch of 1000 reports needs about 350 KiB)"),
    S("log_level", log_level, "info", "debug, info, warn or error"),
    I("batch_max", batch_max, 1, 65536, "2048",
      "most commands committed in one transaction (group commit)"),
    I("batch_overlap", batch_overlap, 0, 1, "0",
      "1: open the next batch on a second connection while one commits "
      "(for PostgreSQL on cores of its own, or a host that steals CPU); "
      "0: one batch at a time, larger and cheaper, for ramexd and "
      "PostgreSQL sharing cores"),
    I("book_capacity", book_capacity, 16, 1 << 24, "100000",
      "most open orders per market (memory is allocated up front)"),
    I("db_pool", db_pool, 1, 64, "4",
      "PostgreSQL connections for queries, beside the writer's one"),
    I("sse_keepalive_s", sse_keepalive_s, 1, 300, "15",
      "seconds without an event before a keep-alive comment on "
      "/v1/events (a stream may ask for another: ?keepalive_s=)"),
    I("sse_max_clients", sse_max_clients, 1, 10000, "256",
      "most event-stream subscribers at once"),
    S("seal_key_file", seal_key_file, "",
      "file of the keys that seal node and lend secrets in PostgreSQL "
      "(AES-256-GCM; docs/operations.md, \"Sealing key\"); empty: a "
      "built-in demo key, which protects nothing"),
    I("nonce_per_key", nonce_per_key, 16, 1 << 24, "262144",
      "signed requests one node key may make in 600 s (the nonces "
      "remembered for it); more get 429"),
    I("shared", shared, 0, 1, "0",
      "1: several ramexd share this database: every signed request's nonce "
      "is checked in PostgreSQL and the event stream is read from it, so "
      "that a replay or an event reaches every instance (docs/"
      "operations.md, \"Several instances\"); set it "
      "on each of them. 0: "
      "one ramexd, nonces and events in its memory"),
    S("port_file", port_file, "",
      "when set, ramexd writes the port it listens on there once ready"),
    I("contract_tick_ms", contract_tick_ms, 10, 60000, "1000",
      "how often the contract timer applies due deadlines (late "
      "delivery, notice over, term over)"),
    S("web_root", web_root, "",
      "directory of the web pages served at / and /web/ (make builds "
      "build/web); empty serves none"),
    I("billing_interval_s", billing_interval_s, 0, 86400, "60",
      "seconds between billing runs; 0 bills only on POST /v1/billing/run"),
    I("fee_bps", fee_bps, 0, 10000, "0",
      "the exchange's fee in basis points of each amount, fixed per "
      "contract at its first billing"),
    S("markets", markets, "all",
      "the markets this instance serves when nobody else does: all, or "
      "names separated by commas (spot,perm-2027); with several ramexd "
      "on one database each market is served by one of them at a time "
      "(docs/operations.md, \"Several instances\")"),
    S("instance", instance, "",
      "this instance's name in market_owners; empty: host:pid"),
    S("advertise_url", advertise_url, "",
      "the base URL other instances send clients to for the markets "
      "served here (307), e.g. http://10.0.0.5:8080; empty: http:// and "
      "the listen address and port"),
    I("own_poll_ms", own_poll_ms, 20, 60000, "500",
      "how often an instance tries to take the markets it wants that "
      "nobody serves (after their owner died): the takeover time is "
      "about this plus the rebuild of the books"),
    I("invoice_grace_s", invoice_grace_s, 0, 31536000, "259200",
      "seconds after its month's end during which an invoice stays a "
      "draft for late usage reports; then it is final"),
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static int apply(struct rx_config *c, const struct setting *s, const char *v,
                 char *err, size_t errlen)
{
	char *base = (char *)c;
	if (s->kind == K_STR) {
		if (strlen(v) >= s->size) {
			snprintf(err, errlen, "%s is longer than %zu bytes",
			         s->key, s->size - 1);
			return -1;
		}
		snprintf(base + s->off, s->size, "%s", v);
		return 0;
	}
	if (s->kind == K_LISTEN) {
		const char *colon = strrchr(v, ':');
		char *end;
		long port;
		if (!colon || colon == v ||
		    (size_t)(colon - v) >= sizeof c->listen_host) {
			snprintf(
			    err, errlen,
			    "listen must be address:port, e.g. 127.0.0.1:8080, "
			    "not '%s'",
			    v);
			return -1;
		}
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || port < 0 ||
		    port > 65535) {
			snprintf(err, errlen,
			         "listen port must be 0..65535, not '%s'",
			         colon + 1);
			return -1;
		}
		snprintf(c->listen_host, sizeof c->listen_host, "%.*s",
		         (int)(colon - v), v);
		c->listen_port = (int)port;
		return 0;
	}
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || *end || end == v || n < s->min || n > s->max) {
		snprintf(err, errlen,
		         "%s must be an integer in %lld..%lld, not '%s'",
		         s->key, s->min, s->max, v);
		return -1;
	}
	if (s->size == sizeof(int))
		*(int *)(base + s->off) = (int)n;
	else
		*(int64_t *)(base + s->off) = n;
	return 0;
}

int config_set(struct rx_config *c, const char *key, const char *value,
               char *err, size_t errlen)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].key, key) == 0)
			return apply(c, &settings[i], value, err, errlen);
	snprintf(err, errlen, "unknown setting '%s' (see ramexd --help)", key);
	return -1;
}

void config_defaults(struct rx_config *c)
{
	char err[256];
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < NSETTINGS; i++) {
		int rc =
		    apply(c, &settings[i], settings[i].def, err, sizeof err);
		(void)rc;
		if (rc != 0)
			abort(); /* a default that does not parse is a bug */
	}
}

/* conf.h's view of the table: which key, and whether its value fits. */
static int conf_set(void *ctx, const char *key, const char *value,
                    struct err *e)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].key, key) == 0) {
			if (apply(ctx, &settings[i], value, e->msg,
			          sizeof e->msg) < 0) {
				e->code = CONF_VALUE;
				return -1;
			}
			return 0;
		}
	return err_fail(e, CONF_UNKNOWN,
	                "unknown setting '%s' (see ramexd --help)", key);
}

int config_load_file(struct rx_config *c, const char *path, char *err,
                     size_t errlen)
{
	struct err e;
	if (conf_read_file(path, conf_set, c, &e) < 0)
		return err_set(err, errlen, "%s", e.msg);
	return 0;
}

int config_load_env(struct rx_config *c, char **envp, char *err, size_t errlen)
{
	char why[384];
	for (size_t i = 0; i < NSETTINGS; i++) {
		char name[64];
		size_t k = snprintf(name, sizeof name, "RAMEX_");
		for (const char *p = settings[i].key; *p && k < sizeof name - 1;
		     p++)
			name[k++] = (char)toupper((unsigned char)*p);
		name[k] = 0;
		for (char **e = envp; e && *e; e++) {
			if (strncmp(*e, name, k) == 0 && (*e)[k] == '=') {
				if (apply(c, &settings[i], *e + k + 1, why,
				          sizeof why) < 0) {
					snprintf(err, errlen, "%s: %s", name,
					         why);
					return -1;
				}
			}
		}
	}
	return 0;
}

void config_help(char *out, size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < NSETTINGS && o < outlen; i++) {
		char up[64];
		size_t k = 0;
		for (const char *p = settings[i].key; *p && k < sizeof up - 1;
		     p++)
			up[k++] = (char)toupper((unsigned char)*p);
		up[k] = 0;
		int n = snprintf(
		    out + o, outlen - o,
		    "  --%s=VALUE  (RAMEX_%s, default '%s')\n      %s\n",
		    settings[i].key, up, settings[i].def, settings[i].help);
		if (n < 0)
			break;
		o += (size_t)n;
	}
}
