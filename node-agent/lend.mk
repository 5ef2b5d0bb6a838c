# node-agent/lend.mk — remote lending: the lender's page server, the
# borrower's NBD bridge, their tests and the guest workload. Included by the
# top-level Makefile (see docs/CONVENTIONS.md and docs/lending.md).

LEND_SRC := node-agent/lend/lend_proto.c node-agent/lend/lend_conn.c \
  node-agent/lend/lend_meter.c node-agent/lend/lend_store.c \
  node-agent/lend/lend_server.c node-agent/lend/lend_client.c \
  node-agent/lend/lend_nbd.c node-agent/lend/lend_bridge.c \
  node-agent/lend/lend_awake.c node-agent/lend/lend_qos.c \
  node-agent/lend/lend_args.c node-agent/lend/lend_mem.c common/log.c \
  common/hostport.c common/tlserr.c $(CLOCK_SRC) $(ARGS_SRC)

$(call program,ramex-lend-server,node-agent/lend/lend_server_main.c \
  $(LEND_SRC),libssl libcrypto)
$(call program,ramex-lend-nbd,node-agent/lend/lend_nbd_main.c \
  $(LEND_SRC),libssl libcrypto)
# the ublk server: the same lend client, liburing for the device
$(call program,ramex-lend-ublk,node-agent/lend/lend_ublk_main.c \
  node-agent/lend/lend_ublk.c $(LEND_SRC),libssl libcrypto liburing)
# the qemu suite's workload: writes a pattern bigger than memory, checks it
$(call program,ramex-lend-workload,tests/lending/workload.c,libcrypto)
# bench/50-lending.sh's load generator
$(call program,ramex-lend-bench,node-agent/lend/lend_bench.c $(LEND_SRC),\
  libssl libcrypto)

$(call unit_test,test_lend,tests/unit/test_lend.c tests/unit/lend_fixture.c \
  $(LEND_SRC),libssl libcrypto)
$(call unit_test,test_lend_nbd,tests/unit/test_lend_nbd.c \
  tests/unit/lend_fixture.c $(LEND_SRC),libssl libcrypto)
# it also runs the programs (their flags and --help)
LEND_PROGS_SAN := $(BUILD)/san/bin/ramex-lend-nbd \
  $(BUILD)/san/bin/ramex-lend-server $(BUILD)/san/bin/ramex-lend-bench \
  $(BUILD)/san/bin/ramex-lend-ublk
$(BUILD)/san/bin/test_lend_nbd: | $(LEND_PROGS_SAN)
$(BUILD)/bin/test_lend_nbd: | $(LEND_PROGS_SAN)
$(call unit_test,test_lend_direct,tests/unit/test_lend_direct.c \
  tests/unit/lend_fixture.c $(LEND_SRC),libssl libcrypto)

INSTALL_BIN += $(BUILD)/bin/ramex-lend-server $(BUILD)/bin/ramex-lend-nbd \
  $(BUILD)/bin/ramex-lend-ublk

# The fuzzers of the wire format, the NBD side, the bridge and the direct
# path link the programs' whole LEND_SRC (tests/fuzz/).
$(call fuzzer,fuzz_lend_proto,$(LEND_SRC),libssl libcrypto)
$(call fuzzer,fuzz_nbd,$(LEND_SRC),libssl libcrypto)
$(call fuzzer,fuzz_bridge,$(LEND_SRC),libssl libcrypto)
$(call fuzzer,fuzz_lend_direct,$(LEND_SRC),libssl libcrypto)
