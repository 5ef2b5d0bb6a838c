# sim/sim.mk — ramex-fleet, the fleet simulator: the real pure cores
# (estimator, strategy, book, contracts, usage, invoicing) on simulated
# machines. `make fleet` (top-level Makefile) runs the default fleet.
# Included by the top-level Makefile.

SIM_CORE := sim/workload.c sim/fleet.c sim/exchange.c node-agent/core/wsest.c \
  node-agent/core/strategy.c $(BOOK_SRC) exchange/core/contract.c \
  exchange/core/usage.c exchange/core/invoice.c common/money.c
$(call program,ramex-fleet,sim/main.c sim/report.c $(SIM_CORE),)

# A small fleet, every policy, the invariants (tests/unit/test_fleet.c).
$(call unit_test,test_fleet,tests/unit/test_fleet.c sim/report.c $(SIM_CORE))

# The workload's kernel signals: MGLRU's generations, the kernel's own
# aging, 6.1's refault counter (tests/unit/test_workload.c).
$(call unit_test,test_workload,tests/unit/test_workload.c sim/workload.c node-agent/core/wsest.c)
