# exchange/ramexd.mk — ramexd, its tests and its benchmark load generator.
# Included by the top-level Makefile (see docs/CONVENTIONS.md).

SIGN_SRC := common/sign.c

$(call unit_test,test_sign,tests/unit/test_sign.c $(SIGN_SRC),libcrypto)
