# exchange/ramexd.mk — ramexd, its tests and its benchmark load generator.
# Included by the top-level Makefile (see docs/CONVENTIONS.md).

SIGN_SRC := common/sign.c

$(call unit_test,test_sign,tests/unit/test_sign.c $(SIGN_SRC),libcrypto)
$(call unit_test,test_seal,tests/unit/test_seal.c exchange/seal.c,libcrypto)
$(call unit_test,test_target,tests/unit/test_target.c exchange/target.c)
$(call unit_test,test_pgarr,tests/unit/test_pgarr.c exchange/pgarr.c)
# the event ring as one instance and the shared stream fill it
$(call unit_test,test_events,tests/unit/test_events.c exchange/events.c \
  exchange/metrics.c common/log.c $(CLOCK_SRC))
# auth without a server: it takes a view of the request (auth.h)
$(call unit_test,test_auth,tests/unit/test_auth.c exchange/auth.c exchange/auth_nonces.c exchange/pgarr.c \
  exchange/db.c exchange/seal.c exchange/metrics.c $(SIGN_SRC) common/log.c \
  $(CLOCK_SRC),\
  libpq jansson libcrypto)
# The writer's commit pipeline against a fake connection (no PostgreSQL;
# libpq only for its header's types).
$(call unit_test,test_writer_pipe,tests/unit/test_writer_pipe.c \
  exchange/writer_pipe.c exchange/writer_rows.c exchange/pgarr.c \
  $(BOOK_SRC) $(CONTRACT_SRC) $(MONEY_SRC) common/log.c,jansson libpq)

# ramexd, in two parts. RAMEXD_EDGE is the HTTP edge: the server and its
# guard, the route table, every handler, the input checks and the pages;
# tests/fuzz/fuzz_edge.c runs it as it is and replaces what lies behind it,
# the rest of RAMEXD_LIB (the database, the writer, auth, the event ring,
# billing). A new module goes in one of the two: in the edge, the fuzzer
# links it; behind, the fuzzer's stubs stand for what the edge calls of it.
# The matching engine (exchange/core/book.mk) belongs to the core; we link
# it as it is.
RAMEXD_EDGE := exchange/http.c exchange/http_req.c exchange/http_guard.c \
  exchange/target.c exchange/seal.c exchange/input.c exchange/routes.c \
  exchange/metrics.c exchange/static.c exchange/h_system.c \
  exchange/h_admin.c exchange/h_nodes.c exchange/h_market.c \
  exchange/h_orders.c exchange/h_events.c exchange/h_contracts.c \
  exchange/h_usage.c exchange/h_lend.c exchange/h_billing.c exchange/pgarr.c \
  $(INVOICE_SRC) $(USAGE_SRC) $(CONTRACT_SRC) $(MONEY_SRC) common/log.c \
  $(SIGN_SRC) $(CLOCK_SRC)
RAMEXD_LIB := $(RAMEXD_EDGE) exchange/config.c \
  exchange/auth.c exchange/auth_nonces.c exchange/db.c \
  exchange/events.c exchange/events_db.c exchange/pgpipe.c \
  exchange/writer.c exchange/writer_rows.c exchange/writer_apply.c \
  exchange/writer_idem.c exchange/writer_pipe.c exchange/writer_pq.c \
  exchange/owner.c $(BOOK_SRC) $(KEYFILTER_SRC) exchange/contracts.c \
  exchange/usage_db.c exchange/billing.c exchange/billing_batch.c \
  exchange/billing_store.c $(MIGRATE_SRC) $(CONF_SRC)
RAMEXD_PKGS := libmicrohttpd jansson libpq libcrypto
$(call fuzzer,fuzz_edge,$(RAMEXD_EDGE),$(RAMEXD_PKGS))

$(call program,ramexd,exchange/ramexd.c $(RAMEXD_LIB),$(RAMEXD_PKGS))
INSTALL_BIN += $(BUILD)/bin/ramexd

# Integration tests against a real ramexd (tests/integration/ramexd_harness.h
# starts one). They run the sanitizer ramexd, so they depend on it.
RAMEXD_HARNESS := tests/integration/ramexd_harness.c tests/integration/testdb.c \
  common/sign.c $(CLOCK_SRC)
$(call integration_test,test_ramexd,tests/integration/test_ramexd.c \
  tests/integration/ramexd_fixture.c $(RAMEXD_HARNESS),\
  libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_ramexd: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_ramexd: | $(BUILD)/san/bin/ramexd
$(call integration_test,test_ramexd_recovery,\
  tests/integration/test_ramexd_recovery.c \
  tests/integration/ramexd_fixture.c $(RAMEXD_HARNESS),\
  libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_ramexd_recovery: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_ramexd_recovery: | $(BUILD)/san/bin/ramexd
$(call integration_test,test_contracts,tests/integration/test_contracts.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_contracts: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_contracts: | $(BUILD)/san/bin/ramexd
# (test_usage is the unit suite of exchange/core/usage.c; this one is
# POST /v1/usage through ramexd.)
$(call integration_test,test_usage_http,tests/integration/test_usage.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_usage_http: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_usage_http: | $(BUILD)/san/bin/ramexd
# Billing against a real ramexd: the invoices end to end (test_billing),
# the job's inputs and faults (test_billing_job).
BILLING_FIXTURE := tests/integration/billing_fixture.c $(USAGE_SRC) \
  $(RAMEXD_HARNESS) $(MONEY_SRC)
$(call integration_test,test_billing,tests/integration/test_billing.c \
  $(BILLING_FIXTURE),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_billing: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_billing: | $(BUILD)/san/bin/ramexd
$(call integration_test,test_billing_job,tests/integration/test_billing_job.c \
  $(BILLING_FIXTURE),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_billing_job: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_billing_job: | $(BUILD)/san/bin/ramexd
# The HTTP edge: parked connections, workers, a stop under load.
$(call integration_test,test_http_edge,tests/integration/test_http_edge.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_http_edge: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_http_edge: | $(BUILD)/san/bin/ramexd
# Signed requests and their credentials (auth.c, auth_nonces.c, seal.c).
$(call integration_test,test_http_auth,tests/integration/test_http_auth.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_http_auth: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_http_auth: | $(BUILD)/san/bin/ramexd
# Hostile clients over raw sockets: slow heads and bodies (slowloris), one
# address that takes every connection, malformed requests.
$(call integration_test,test_http_hostile,tests/integration/test_http_hostile.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_http_hostile: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_http_hostile: | $(BUILD)/san/bin/ramexd
# The writer's pipeline of batches: a failed one and those after it.
$(call integration_test,test_writer,tests/integration/test_writer.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_writer: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_writer: | $(BUILD)/san/bin/ramexd
# PostgreSQL stopped under load: every answer 503 of the right type, no
# spin, /readyz, outcome-unknown orders resolved by a retry.
$(call integration_test,test_outage,tests/integration/test_outage.c \
  exchange/pgpipe.c exchange/db.c common/log.c $(RAMEXD_HARNESS),\
  libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_outage: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_outage: | $(BUILD)/san/bin/ramexd
# Three ramexd on one database: markets owned, fenced, taken over.
# The agent's client (node-agent/client.c) and ramexctl follow the 307.
$(call integration_test,test_owners,tests/integration/test_owners.c \
  node-agent/client.c node-agent/http1.c node-agent/http1_io.c \
  common/tlserr.c common/hostport.c $(RAMEXD_HARNESS),libcurl jansson libpq libssl libcrypto)
$(BUILD)/san/bin/test_owners: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramexctl
$(BUILD)/bin/test_owners: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramexctl
RAMEXD_TEST_LIB := $(filter-out common/sign.c,$(RAMEXD_LIB))
$(call integration_test,test_ramexd_api,tests/integration/test_ramexd_api.c \
  $(RAMEXD_HARNESS) $(RAMEXD_TEST_LIB),libcurl $(RAMEXD_PKGS))
$(BUILD)/san/bin/test_ramexd_api: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_ramexd_api: | $(BUILD)/san/bin/ramexd
# Hostile input at the edge: JSONTestSuite on every JSON route, bytes that
# are not UTF-8, database refusals, null and out-of-range values.
$(call integration_test,test_input,tests/integration/test_input.c \
  $(RAMEXD_HARNESS) $(RAMEXD_TEST_LIB),libcurl $(RAMEXD_PKGS))
$(BUILD)/san/bin/test_input: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_input: | $(BUILD)/san/bin/ramexd

# The load generator of bench/20-ramexd.sh.
$(call program,loadgen,bench/loadgen.c $(CLOCK_SRC),libpq)
# The load generator of bench/45-usage.sh (signed POST /v1/usage batches).
$(call program,usagegen,bench/usagegen.c $(SIGN_SRC) $(CLOCK_SRC),\
  libcurl libcrypto)
# A primary with a synchronous standby (scripts/pg.sh standby): reports off
# the replica (read_db), and a failover under load that loses no
# acknowledged order.
$(call integration_test,test_failover,tests/integration/test_failover.c \
  $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_failover: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_failover: | $(BUILD)/san/bin/ramexd
# Two ramexd on one database (shared = 1): idempotency keys, nonces and
# the event stream shared through PostgreSQL; three for a stream resumed
# across a takeover.
$(call integration_test,test_shared,tests/integration/test_shared.c \
  tests/integration/ramexd_fixture.c $(RAMEXD_HARNESS),\
  libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_shared: | $(BUILD)/san/bin/ramexd
$(BUILD)/bin/test_shared: | $(BUILD)/san/bin/ramexd
