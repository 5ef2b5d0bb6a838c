/*
 * ramexd.c — the exchange service: settings, start-up checks, the servers,
 * graceful shutdown, and the `token create` and `migrate` subcommands.
 *
 * Start-up refuses, with a message that says what to change, a database
 * that runs with fsync or synchronous_commit off, then applies the embedded
 * migrations, rebuilds every book (writer.h) and only then listens. SIGTERM
 * or SIGINT: stop accepting connections, end the event streams, let every
 * request in flight finish (the writer commits the batch it holds and
 * answers it), then stop the writer and exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/billing.h"
#include "exchange/config.h"
#include "exchange/contracts.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/events_db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/metrics.h"
#include "exchange/migrate.h"
#include "exchange/owner.h"
#include "exchange/routes.h"
#include "exchange/seal.h"
#include "exchange/writer.h"

extern char **environ;

static void usage(FILE *f)
{
	char help[8192];
	config_help(help, sizeof help);
	fprintf(f,
	        "usage: ramexd [--config=FILE] [--SETTING=VALUE ...]\n"
	        "       ramexd migrate [--db=CONNINFO]\n"
	        "       ramexd token create --role=ROLE --name=NAME "
	        "[--team=ID] [--account=ID] [--db=CONNINFO]\n"
	        "\n"
	        "Serves the ramex exchange API. Settings come from the "
	        "defaults, then the\nconfig file (key = value lines; "
	        "--config or RAMEX_CONFIG), then RAMEX_*\nenvironment "
	        "variables, then the flags.\n\nsettings:\n%s",
	        help);
}

struct args {
	const char *config;
	const char *words[4];
	int nwords;
	const char *role, *name, *team, *account;
	int help;
};

static int parse_args(int argc, char **argv, struct rx_config *cfg,
                      struct args *a)
{
	char err[512];
	const char *sets[64][2];
	int nsets = 0;
	memset(a, 0, sizeof *a);
	a->config = getenv("RAMEX_CONFIG");
	for (int i = 1; i < argc; i++) {
		char *s = argv[i];
		if (strncmp(s, "--", 2) != 0) {
			if (a->nwords < 4)
				a->words[a->nwords++] = s;
			continue;
		}
		if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
			a->help = 1;
			continue;
		}
		char key[64];
		const char *val;
		char *eq = strchr(s, '=');
		if (eq) {
			snprintf(key, sizeof key, "%.*s", (int)(eq - s - 2),
			         s + 2);
			val = eq + 1;
		} else {
			snprintf(key, sizeof key, "%s", s + 2);
			if (i + 1 >= argc) {
				fprintf(stderr, "ramexd: --%s needs a value\n",
				        key);
				return -1;
			}
			val = argv[++i];
		}
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		if (strcmp(key, "config") == 0)
			a->config = val;
		else if (strcmp(key, "role") == 0)
			a->role = val;
		else if (strcmp(key, "name") == 0)
			a->name = val;
		else if (strcmp(key, "team") == 0)
			a->team = val;
		else if (strcmp(key, "account") == 0)
			a->account = val;
		else if (nsets < 64) {
			static char keys[64][64];
			snprintf(keys[nsets], 64, "%s", key);
			sets[nsets][0] = keys[nsets];
			sets[nsets][1] = val;
			nsets++;
		}
	}
	if (a->config && config_load_file(cfg, a->config, err, sizeof err) < 0)
		goto bad;
	if (config_load_env(cfg, environ, err, sizeof err) < 0)
		goto bad;
	for (int i = 0; i < nsets; i++)
		if (config_set(cfg, sets[i][0], sets[i][1], err, sizeof err) <
		    0)
			goto bad;
	return 0;
bad:
	fprintf(stderr, "ramexd: %s\n", err);
	return -1;
}

/* Markets made before POST /v1/markets refused limits a contract's
 * int64 totals cannot bill (in_market_billable): each is named in the
 * log at every start, with the largest limits allowed, since the billing
 * job leaves such a contract unbilled. The exchange still starts: its
 * other markets, and this one's contracts that do fit, go on. */
static void check_markets(PGconn *c)
{
	char err[256];
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT name, max_pages, price_max FROM markets "
	                      "ORDER BY id",
	                      0, NULL, err, sizeof err);
	if (!r) {
		log_warn("cannot check the markets' limits", "err=\"%s\"", err);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++)
		if (in_market_billable(PQgetvalue(r, i, 0), db_int(r, i, 1),
		                       db_int(r, i, 2), contracts_now(), err,
		                       sizeof err) < 0)
			log_error("market limits past what billing can hold: "
			          "lower them (UPDATE markets), or contracts of "
			          "it may stay unbilled",
			          "market=%s err=\"%s\"", PQgetvalue(r, i, 0),
			          err);
	PQclear(r);
}

/* Connects, checks durability and applies the migrations. */
static PGconn *prepare_db(const struct rx_config *cfg)
{
	char err[1024];
	PGconn *c = db_connect(cfg->db, err, sizeof err);
	if (!c) {
		log_error("cannot start", "err=\"%s\"", err);
		return NULL;
	}
	if (db_check_durable(c, err, sizeof err) < 0) {
		log_error("refusing a database that does not sync",
		          "err=\"%s\"", err);
		PQfinish(c);
		return NULL;
	}
	int n = migrate_apply(c, schema_migrations, schema_migrations_count,
	                      err, sizeof err);
	if (n < 0) {
		log_error("cannot migrate", "err=\"%s\"", err);
		PQfinish(c);
		return NULL;
	}
	log_info("schema ready", "applied=%d total=%d", n,
	         schema_migrations_count);
	/* the history's months ahead (the contract timer keeps them so) */
	int made = db_history_ahead(c, err, sizeof err);
	if (made < 0)
		log_warn("cannot make the history partitions ahead; new rows "
		         "go to the default partitions meanwhile",
		         "err=\"%s\"", err);
	else if (made > 0)
		log_info("history partitions made", "tables=%d", made);
	return c;
}

static int cmd_token(const struct rx_config *cfg, const struct args *a)
{
	char token[68], err[512];
	int64_t team = 0, account = 0;
	if (!a->role || !a->name) {
		fprintf(
		    stderr,
		    "ramexd token create: --role and --name are required\n");
		return 2;
	}
	if ((a->team && (team = strtoll(a->team, NULL, 10)) <= 0) ||
	    (a->account && (account = strtoll(a->account, NULL, 10)) <= 0)) {
		fprintf(stderr,
		        "ramexd token create: --team and --account take "
		        "positive ids\n");
		return 2;
	}
	PGconn *c = prepare_db(cfg);
	if (!c)
		return 1;
	int64_t id =
	    handlers_token_create((struct pg_conn *)c, a->name, a->role, team,
	                          account, token, err, sizeof err, NULL);
	PQfinish(c);
	if (id < 0) {
		fprintf(stderr, "ramexd token create: %s\n", err);
		return 1;
	}
	log_info("token created", "id=%lld role=%s", (long long)id, a->role);
	printf("%s\n", token);
	return 0;
}

static int write_port_file(const char *path, int port)
{
	char tmp[600];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

/* The base URL other instances send clients to: advertise_url, or the
 * listen address and the port bound (the host's name for a wildcard). */
static void advertise_url(const struct rx_config *cfg, int port, char *url,
                          size_t len)
{
	if (cfg->advertise_url[0]) {
		snprintf(url, len, "%s", cfg->advertise_url);
		size_t n = strlen(url);
		while (n > 0 && url[n - 1] == '/')
			url[--n] = 0;
		return;
	}
	char host[64];
	snprintf(host, sizeof host, "%s", cfg->listen_host);
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !host[0]) {
		gethostname(host, sizeof host);
		host[sizeof host - 1] = 0;
	}
	snprintf(url, len,
	         strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
	         port);
}

static int serve(struct app *app)
{
	char err[1024];
	struct rx_config *cfg = &app->cfg;
	struct http_server *srv = NULL;
	int rc = 1;
	sigset_t sigs;

	/* Only the main thread takes the signals: every thread started from
	 * here on inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg->advertise_url[0] &&
	    strncmp(cfg->advertise_url, "http://", 7) != 0 &&
	    strncmp(cfg->advertise_url, "https://", 8) != 0) {
		log_error("cannot start", "err=\"%s\"",
		          "advertise_url must start with http:// or https://");
		return 1;
	}
	if (owner_markets_check(cfg->markets, err, sizeof err) < 0) {
		log_error("cannot start", "err=\"%s\"", err);
		return 1;
	}
	if (cfg->request_timeout_ms > 0 && cfg->request_timeout_ms < 100) {
		log_error("cannot start", "err=\"%s\" request_timeout_ms=%d",
		          "request_timeout_ms must be 0 (no deadline) or at "
		          "least 100: a request needs time to arrive",
		          cfg->request_timeout_ms);
		return 1;
	}
	PGconn *c = prepare_db(cfg);
	if (!c)
		return 1;
	check_markets(c);
	app->seal = seal_load(cfg->seal_key_file, err, sizeof err);
	if (!app->seal) {
		log_error("cannot read the sealing keys", "err=\"%s\"", err);
		PQfinish(c);
		return 1;
	}
	if (seal_is_demo(app->seal))
		log_warn("secrets sealed with the demo key",
		         "hint=\"%s\"",
		         "the demo key is public, so node and lend secrets in "
		         "PostgreSQL are as good as plaintext; set "
		         "seal_key_file (docs/operations.md, Sealing key)");
	int sealed = auth_seal_at_rest(c, app->seal, err, sizeof err);
	if (sealed < 0) {
		log_error("cannot seal the secrets in PostgreSQL",
		          "err=\"%s\"", err);
		PQfinish(c);
		seal_free(app->seal);
		return 1;
	}
	if (sealed > 0)
		log_info("secrets sealed", "rows=%d key=%s", sealed,
		         seal_current_id(app->seal));
	if (cfg->web_root[0] && static_root_init(&app->web, cfg->web_root,
	                                         "/web", err, sizeof err) < 0) {
		log_error("cannot serve the web pages", "err=\"%s\"", err);
		return 1;
	}

	metrics_init(routes_table, routes_count);
	app->events = events_new(cfg->sse_max_clients, cfg->sse_keepalive_s);
	app->pool = db_pool_new(cfg->db, cfg->db_pool);
	app->reports = cfg->read_db[0]
	                   ? db_pool_new_readonly(cfg->read_db, cfg->db_pool)
	                   : app->pool;
	app->auth = auth_new(app->pool, (int64_t)time(NULL), app->seal,
	                     cfg->nonce_per_key);
	if (!app->events || !app->pool || !app->reports || !app->auth) {
		log_error("cannot start", "err=\"out of memory\"");
		PQfinish(c);
		goto out;
	}
	if (cfg->shared && auth_share_nonces(app->auth, cfg->db) < 0) {
		log_error("cannot start", "err=\"out of memory\"");
		PQfinish(c);
		goto out;
	}
	if (auth_load_fences(app->auth, c, err, sizeof err) < 0) {
		log_error("cannot read the node keys' fences", "err=\"%s\"",
		          err);
		PQfinish(c);
		goto out;
	}
	PQfinish(c);
	if (cfg->shared) {
		app->events_db =
		    events_db_start(app->events, cfg->db, err, sizeof err);
		if (!app->events_db) {
			log_error("cannot share the event stream", "err=\"%s\"",
			          err);
			goto out;
		}
	}
	/* the markets served here: taken before the writer loads their
	 * books, so that a lone ramexd starts with all of them */
	struct owner_opts oo = {.conninfo = cfg->db,
	                        .markets = cfg->markets,
	                        .instance = cfg->instance,
	                        .poll_ms = cfg->own_poll_ms};
	app->owner = owner_new(&oo, err, sizeof err);
	if (!app->owner) {
		log_error("cannot take the markets", "err=\"%s\"", err);
		goto out;
	}
	/* another instance serves markets here: without shared = 1 a nonce
	 * taken by it is not known here, nor its events in streams here */
	if (!cfg->shared && !owner_holds_all(app->owner))
		log_warn("not every market is served here, yet shared = 0",
		         "hint=\"when several ramexd serve this database, set "
		         "shared = 1 on every one (docs/operations.md, Several "
		         "instances on one database): else a signed request "
		         "may be replayed to another instance and event "
		         "streams see only this one's events\"");
	struct writer_opts wo = {.conninfo = cfg->db,
	                         .batch_max = cfg->batch_max,
	                         .book_capacity = (uint32_t)cfg->book_capacity,
	                         .events = app->events,
	                         .overlap = cfg->batch_overlap != 0,
	                         .owner = app->owner};
	app->writer = writer_start(&wo, err, sizeof err);
	if (!app->writer) {
		log_error("cannot start the writer", "err=\"%s\"", err);
		goto out;
	}
	if (owner_run(app->owner, app->writer, err, sizeof err) < 0) {
		log_error("cannot start", "err=\"%s\"", err);
		goto out_writer;
	}
	/* The contract deadline timer (contracts.h): after the writer, whose
	 * trades make the contracts it watches. */
	app->contracts = contracts_timer_start(cfg->db, cfg->contract_tick_ms,
	                                       app->events, err, sizeof err);
	if (!app->contracts) {
		log_error("cannot start the contract timer", "err=\"%s\"", err);
		goto out_writer;
	}
	/* The billing job, with its own connection and thread. */
	struct billing_opts bo = {.conninfo = cfg->db,
	                          .interval_s = cfg->billing_interval_s,
	                          .fee_bps = cfg->fee_bps,
	                          .grace_s = cfg->invoice_grace_s};
	app->billing = billing_start(&bo, err, sizeof err);
	if (!app->billing) {
		log_error("cannot start billing", "err=\"%s\"", err);
		goto out_writer;
	}
	struct http_opts ho = {
	    .host = cfg->listen_host,
	    .port = cfg->listen_port,
	    .max_connections = cfg->max_connections,
	    .per_address = cfg->max_connections_per_address,
	    .timeout_s = cfg->connection_timeout_s,
	    .request_timeout_ms = cfg->request_timeout_ms,
	    .threads = cfg->http_threads,
	    .workers = cfg->http_workers,
	    .body_limit = (size_t)cfg->body_limit,
	    .routes = routes_table,
	    .nroutes = routes_count,
	    .queries = routes_query,
	    .nqueries = routes_query_count,
	    .auth = app->auth,
	    .app = app,
	};
	srv = http_start(&ho, err, sizeof err);
	if (!srv) {
		log_error("cannot start", "err=\"%s\"", err);
		goto out_writer;
	}
	log_info("HTTP limits",
	         "max_connections=%d max_connections_per_address=%d%s "
	         "connection_timeout_s=%d request_timeout_ms=%d%s",
	         cfg->max_connections, cfg->max_connections_per_address,
	         cfg->max_connections_per_address == 0 ? " (no limit)"
	         : cfg->max_connections_per_address >= cfg->max_connections
	             ? " (not below max_connections: no effect)"
	             : "",
	         cfg->connection_timeout_s, cfg->request_timeout_ms,
	         cfg->request_timeout_ms == 0 ? " (no deadline)" : "");
	log_info("listening", "addr=%s port=%d", cfg->listen_host,
	         http_port(srv));
	char url[OWNER_URL_MAX];
	advertise_url(cfg, http_port(srv), url, sizeof url);
	owner_set_url(app->owner, url);
	if (cfg->port_file[0] &&
	    write_port_file(cfg->port_file, http_port(srv)) < 0) {
		log_error("cannot write the port file", "path=%s err=\"%s\"",
		          cfg->port_file, strerror(errno));
		goto out_http;
	}

	int sig = 0;
	sigwait(&sigs, &sig);
	log_info("shutting down", "signal=%d", sig);
	app->stopping = 1;
	rc = 0;
out_http:
	http_quiesce(srv);
	events_close(app->events);
	http_stop(srv); /* waits for the requests in flight */
out_writer:
	billing_stop(app->billing);           /* NULL when never started */
	contracts_timer_stop(app->contracts); /* NULL when never started */
	owner_stop(app->owner); /* before the writer: it tells the writer */
	writer_stop(app->writer);
	/* the markets are let go once the writer has finished its batches */
	owner_free(app->owner);
	app->owner = NULL;
out:
	events_db_stop(app->events_db); /* after whatever publishes */
	owner_free(app->owner);
	auth_free(app->auth);
	seal_free(app->seal);
	if (app->reports != app->pool)
		db_pool_free(app->reports);
	db_pool_free(app->pool);
	events_free(app->events);
	if (rc == 0)
		log_info("stopped", NULL);
	return rc;
}

int main(int argc, char **argv)
{
	static struct app app;
	struct args a;
	config_defaults(&app.cfg);
	if (parse_args(argc, argv, &app.cfg, &a) < 0)
		return 2;
	if (a.help) {
		usage(stdout);
		return 0;
	}
	int lvl = log_level_parse(app.cfg.log_level);
	if (lvl < 0) {
		fprintf(stderr,
		        "ramexd: log_level must be debug, info, warn or "
		        "error\n");
		return 2;
	}
	log_init("ramexd", (enum log_level)lvl);
	if (a.nwords == 0)
		return serve(&app);
	if (a.nwords == 1 && strcmp(a.words[0], "migrate") == 0) {
		PGconn *c = prepare_db(&app.cfg);
		if (c)
			PQfinish(c);
		return c ? 0 : 1;
	}
	if (a.nwords == 2 && strcmp(a.words[0], "token") == 0 &&
	    strcmp(a.words[1], "create") == 0)
		return cmd_token(&app.cfg, &a);
	usage(stderr);
	return 2;
}
