# exchange/core/billing.mk — money arithmetic, contracts, usage reports and
# invoices (the pure billing core) and their unit tests. Included by the
# top-level Makefile (see docs/CONVENTIONS.md).

MONEY_SRC    := common/money.c $(ERR_SRC)
CONTRACT_SRC := exchange/core/contract.c $(ERR_SRC)
USAGE_SRC    := exchange/core/usage.c $(ERR_SRC)
INVOICE_SRC  := exchange/core/invoice.c $(ERR_SRC)
# Everything a caller of the billing core links (ramexd, tools).
BILLING_SRC  := $(MONEY_SRC) $(CONTRACT_SRC) $(USAGE_SRC) $(INVOICE_SRC)

$(call unit_test,test_money,tests/unit/test_money.c $(MONEY_SRC))
$(call unit_test,test_contract,tests/unit/test_contract.c $(CONTRACT_SRC) \
  $(MONEY_SRC))
$(call unit_test,test_usage,tests/unit/test_usage.c $(USAGE_SRC) $(MONEY_SRC))
$(call unit_test,test_invoice,tests/unit/test_invoice.c $(INVOICE_SRC) \
  $(CONTRACT_SRC) $(USAGE_SRC) $(MONEY_SRC))
