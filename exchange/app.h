/*
 * app.h — what ramexd's handlers share: the settings, the query pool, the
 * writer, the event stream. One instance, made by main (ramexd.c) and handed
 * to every handler through http_app; nothing here is a global.
 */
#ifndef RAMEX_APP_H
#define RAMEX_APP_H

#include "exchange/config.h"
#include "exchange/static.h"

struct db_pool;
struct writer;
struct events;
struct events_db;
struct auth;
struct contracts_timer;
struct billing;
struct seal_keys;
struct owner;

struct app {
	struct rx_config cfg;
	struct db_pool *pool;
	/* the reports' connections (handlers_report): read_db's own,
	 * read-only, or `pool` itself when read_db is empty */
	struct db_pool *reports;
	struct writer *writer;
	struct events *events;
	/* shared = 1: the stream through PostgreSQL (events_db.h) */
	struct events_db *events_db;
	struct auth *auth;
	struct seal_keys *seal; /* seals node and lend secrets (seal.h) */
	struct contracts_timer *contracts; /* the contract deadline timer */
	struct billing *billing; /* the billing job (billing.h) */
	struct owner *owner;     /* the markets served here (owner.h) */
	int stopping;           /* set at SIGTERM: /readyz answers 503 */
	struct static_root web; /* web.dir[0] == 0: no pages served */
};

#endif
