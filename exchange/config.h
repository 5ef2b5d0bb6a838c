/*
 * config.h — ramexd's settings: defaults, then a config file, then RAMEX_*
 * environment variables, then --flags, each overriding the one before.
 *
 * Every setting has one name used in all three places: `listen` in the file
 * is RAMEX_LISTEN in the environment and --listen=VALUE on the command line.
 * The table in config.c is the one list of settings, their defaults, limits
 * and help text (`ramexd --help` prints it). Pure apart from reading the file
 * and the environment, which the caller asks for explicitly.
 */
#ifndef RAMEX_CONFIG_H
#define RAMEX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct rx_config {
	char listen_host[64]; /* "127.0.0.1" */
	int listen_port;      /* 0 = any free port (see port_file) */
	char db[512];         /* libpq conninfo */
	char read_db[512];    /* the reports' conninfo; "" = db */
	int max_connections;
	int max_connections_per_address; /* 0: no limit */
	int http_threads, http_workers;
	int connection_timeout_s; /* idle (reset by each byte) */
	int request_timeout_ms;   /* a request in full; 0: no deadline */
	int64_t body_limit; /* bytes; larger bodies get 413 */
	char log_level[16];
	int batch_max;     /* commands per group-commit transaction */
	int batch_overlap; /* 1: two batches under way on two connections */
	int book_capacity; /* open orders per market */
	int db_pool;       /* connections for queries */
	int sse_keepalive_s;
	int sse_max_clients;
	char seal_key_file[512]; /* seal.h; "" = the demo key */
	int nonce_per_key;       /* nonces remembered per node key */
	int shared; /* 1: several ramexd share the database (nonces, events) */
	char port_file[512];  /* when set, the bound port is written there */
	char web_root[512];   /* the web pages (build/web); "" serves none */
	int contract_tick_ms; /* the contract deadline timer's period */
	/* billing (exchange/billing.h) */
	int billing_interval_s;  /* the billing job's period; 0: on demand */
	int fee_bps;             /* the exchange's fee on new contracts */
	int64_t invoice_grace_s; /* an invoice is final this long after */
	/* several instances (exchange/owner.h) */
	char markets[1024];      /* "all" or market names, comma-separated */
	char instance[64];       /* this instance's name; "" = host:pid */
	char advertise_url[128]; /* clients sent here; "" = http://listen */
	int own_poll_ms;         /* how often free markets are tried */
};

void config_defaults(struct rx_config *c);

/* Applies `key = value` lines of file `path` ('#' starts a comment). Returns
 * 0, or -1 with a message naming the file and line. */
int config_load_file(struct rx_config *c, const char *path, char *err,
                     size_t errlen);

/* Applies every RAMEX_<KEY> variable of `envp`. */
int config_load_env(struct rx_config *c, char **envp, char *err, size_t errlen);

/* Applies one setting by name; value is text. */
int config_set(struct rx_config *c, const char *key, const char *value,
               char *err, size_t errlen);

/* Writes the list of settings with defaults and help, for --help. */
void config_help(char *out, size_t outlen);

#endif
