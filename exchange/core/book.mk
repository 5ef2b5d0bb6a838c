# exchange/core/book.mk — the order book (exchange/core/book.c with its
# bitmap tickset.c and its snapshot book_snap.c), its unit and property
# tests against the reference model, and its benchmark. Included by the
# top-level Makefile (see docs/CONVENTIONS.md).

BOOK_SRC := exchange/core/book.c exchange/core/book_snap.c \
  exchange/core/tickset.c $(ERR_SRC)

$(call unit_test,test_book,tests/unit/test_book.c tests/unit/book_fixture.c \
  $(BOOK_SRC))
$(call unit_test,test_book_recovery,tests/unit/test_book_recovery.c \
  tests/unit/book_fixture.c tests/unit/book_ref.c $(BOOK_SRC))
$(call unit_test,test_book_prop,tests/unit/test_book_prop.c \
  tests/unit/book_ref.c $(BOOK_SRC))

# bench/10-book.sh runs the -O2 build from $(BUILD)/bin.
$(call program,bench_book,bench/bench_book.c $(BOOK_SRC) $(CLOCK_SRC),check)
# the same comparison with the reference model on libFuzzer's inputs
$(call fuzzer,fuzz_book,tests/unit/book_ref.c $(BOOK_SRC))
