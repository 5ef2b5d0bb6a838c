# node-agent/ — ramex-agent, its pure core and its edges. Included by the
# top-level Makefile.

AGENT_CORE := node-agent/core/wsest.c

$(call unit_test,test_wsest,tests/unit/test_wsest.c node-agent/core/wsest.c)
$(call unit_test,test_strategy,tests/unit/test_strategy.c \
  node-agent/core/strategy.c node-agent/core/wsest.c)
# The agent's spool of unsent reports, and its HTTP/1.1 client (no libcurl:
# see ramex-agent below); each is fuzzed (tests/fuzz/).
SPOOL_SRC := node-agent/spool.c $(ERR_SRC)
HTTP1_SRC := node-agent/http1.c node-agent/http1_io.c common/tlserr.c \
  $(CLOCK_SRC)
$(call unit_test,test_spool,tests/unit/test_spool.c $(SPOOL_SRC))
$(call fuzzer,fuzz_spool,$(SPOOL_SRC))
$(call unit_test,test_agent_meter,tests/unit/test_agent_meter.c \
  node-agent/core/meter.c)
$(call unit_test,test_sample,tests/unit/test_sample.c node-agent/sample.c $(ERR_SRC))
$(call unit_test,test_mglru,tests/unit/test_mglru.c node-agent/mglru.c $(ERR_SRC) \
  node-agent/core/wsest.c)
AGENT_EXEC := node-agent/exec.c node-agent/exec_sim.c \
  node-agent/exec_cgroup.c node-agent/exec_kmod.c node-agent/core/simload.c
$(call unit_test,test_simload,tests/unit/test_simload.c $(AGENT_EXEC) node-agent/config.c $(CONF_SRC) node-agent/core/wsest.c node-agent/core/strategy.c node-agent/core/probe.c common/log.c common/hostport.c)
$(call unit_test,test_probe,tests/unit/test_probe.c node-agent/core/probe.c)
$(call unit_test,test_exec,tests/unit/test_exec.c $(AGENT_EXEC))
$(call unit_test,test_http1,tests/unit/test_http1.c $(HTTP1_SRC),libssl libcrypto)
$(call fuzzer,fuzz_http1,$(HTTP1_SRC),libssl libcrypto)
$(call unit_test,test_agent_config,tests/unit/test_agent_config.c \
  node-agent/config.c $(CONF_SRC) node-agent/core/wsest.c node-agent/core/strategy.c \
  node-agent/core/probe.c \
  common/log.c node-agent/core/simload.c common/hostport.c)

AGENT_SRC := node-agent/agent.c node-agent/agent_sample.c \
  node-agent/agent_contract.c node-agent/agent_lend.c node-agent/agent_market.c \
  node-agent/agent_report.c node-agent/agent_status.c \
  node-agent/client.c node-agent/config.c $(CONF_SRC) \
  node-agent/events.c $(HTTP1_SRC) \
  node-agent/sample.c node-agent/mglru.c $(SPOOL_SRC) \
  node-agent/core/wsest.c node-agent/core/strategy.c node-agent/core/probe.c \
  node-agent/core/meter.c $(AGENT_EXEC) \
  node-agent/lendsup.c node-agent/lend/lend_meter.c \
  common/log.c common/sign.c common/hostport.c $(CLOCK_SRC)
# No libcurl: node-agent/http1.c speaks HTTP/1.1 itself (libssl for https),
# which keeps ~35 shared libraries' resident pages out of the agent.
$(call program,ramex-agent,$(AGENT_SRC),jansson libssl libcrypto)
INSTALL_BIN += $(BUILD)/bin/ramex-agent

# End to end: real ramexd + PostgreSQL, ramex-agent processes (sim backend).
AGENT_HARNESS := tests/integration/agent_harness.c tests/integration/fake_http.c
$(call integration_test,test_agent,tests/integration/test_agent.c \
  $(AGENT_HARNESS) $(SPOOL_SRC) $(RAMEXD_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_agent: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramex-agent
$(BUILD)/bin/test_agent: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramex-agent

$(call unit_test,test_lendsup,tests/unit/test_lendsup.c node-agent/lendsup.c \
  node-agent/lend/lend_meter.c common/log.c)

# A lend contract's data path: ramexd's lend endpoints, and two agents whose
# lend children (ramex-lend-server, ramex-lend-nbd) move real pages.
# (lend.mk comes after this file: its LEND_SRC is not defined yet here)
$(call integration_test,test_agent_lend,tests/integration/test_agent_lend.c \
  $(AGENT_HARNESS) $(RAMEXD_HARNESS) $(USAGE_SRC) node-agent/lend/lend_proto.c \
  node-agent/lend/lend_conn.c node-agent/lend/lend_meter.c \
  node-agent/lend/lend_client.c node-agent/lend/lend_nbd.c \
  node-agent/lend/lend_server.c node-agent/lend/lend_store.c \
  node-agent/lend/lend_awake.c node-agent/lend/lend_qos.c common/log.c \
  common/hostport.c common/tlserr.c $(CLOCK_SRC),\
  libcurl jansson libpq libssl libcrypto)
TEST_AGENT_LEND_NEEDS := $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramex-agent \
  $(BUILD)/san/bin/ramex-lend-server $(BUILD)/san/bin/ramex-lend-nbd
$(BUILD)/san/bin/test_agent_lend: | $(TEST_AGENT_LEND_NEEDS)
$(BUILD)/bin/test_agent_lend: | $(TEST_AGENT_LEND_NEEDS)
