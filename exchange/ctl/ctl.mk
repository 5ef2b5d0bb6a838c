# exchange/ctl/ctl.mk — ramexctl, its unit and integration tests.
# Included by the top-level Makefile (see docs/CONVENTIONS.md).

CTL_LIB := exchange/ctl/ctl_http.c exchange/ctl/ctl_units.c \
  exchange/ctl/ctl_args.c exchange/ctl/ctl_out.c exchange/ctl/ctl_trade.c \
  exchange/ctl/ctl_bill.c exchange/ctl/ctl_admin.c

$(call program,ramexctl,exchange/ctl/ramexctl.c $(CTL_LIB),libcurl jansson)
INSTALL_BIN += $(BUILD)/bin/ramexctl

# Against a real ramexd (tests/integration/ramexd_harness.h); runs the
# sanitizer builds of both programs. The harness list is spelled out here
# because this fragment is included before exchange/ramexd.mk.
CTL_HARNESS := tests/integration/ramexd_harness.c tests/integration/testdb.c \
  common/sign.c tests/integration/fake_http.c
$(call integration_test,test_ramexctl,tests/integration/test_ramexctl.c \
  $(CTL_HARNESS),libcurl jansson libpq libcrypto)
$(BUILD)/san/bin/test_ramexctl: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramexctl
$(BUILD)/bin/test_ramexctl: | $(BUILD)/san/bin/ramexd $(BUILD)/san/bin/ramexctl

$(call unit_test,test_ramexctl_units,tests/integration/test_ramexctl_units.c \
  exchange/ctl/ctl_units.c)
