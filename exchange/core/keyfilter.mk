# exchange/core/keyfilter.mk — the filter of known keys that spares the
# writer its idempotency lookups (exchange/core/keyfilter.c), and its unit
# test. Included by the top-level Makefile (see docs/CONVENTIONS.md).

KEYFILTER_SRC := exchange/core/keyfilter.c

$(call unit_test,test_keyfilter,tests/unit/test_keyfilter.c $(KEYFILTER_SRC))
