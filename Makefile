# ramex — top-level build.
#
# `make` builds everything, `make check` runs every test, `make bench` prints
# benchmark figures, `make demo` runs the whole system on this machine and
# `make fuzz` runs the fuzzers for a bounded time.
#
# Each component describes its own programs and tests in a `*.mk` fragment
# beside its sources, using the two helpers defined below; this file only holds what
# they share. Two builds are made from one source tree: the normal one under
# build/ and a sanitizer one (ASan + UBSan) under build/san/, which the unit
# tests run under.

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
CC      ?= cc
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

# Every library comes through pkg-config. Evaluated lazily so that `make deps`
# works before the libraries are installed.
PKGS = libmicrohttpd libpq jansson libcrypto libcurl check liburing

WARN      = -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CPPFLAGS += -D_GNU_SOURCE -I. -I$(BUILD)/gen
OPT      ?= -O2 -g
SANFLAGS  = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
            -fno-omit-frame-pointer

# (a program that needs no library asks nothing: pkg-config with no
# package complains on stderr)
pkg_cflags = $(if $(strip $(1)),$(shell pkg-config --cflags $(1)))
pkg_libs   = $(if $(strip $(1)),$(shell pkg-config --libs $(1)))

.DEFAULT_GOAL := all
.PHONY: all check check-run bench fuzz demo fleet install deps clean format test-bin

PROGRAMS     :=
SAN_PROGRAMS :=
UNIT_TESTS   :=
INTEGRATION_TESTS :=
INSTALL_BIN  :=
ALL_EXTRA    :=

# $(call program,NAME,SOURCES,PKGS[,EXTRA_LDLIBS])
# Builds $(BUILD)/bin/NAME and its sanitizer twin $(BUILD)/san/bin/NAME.
define program_tpl
$(1)_OBJ  := $$(patsubst %.c,$$(BUILD)/obj/%.o,$(2))
$(1)_SOBJ := $$(patsubst %.c,$$(BUILD)/san/obj/%.o,$(2))
$$(BUILD)/bin/$(1): $$($(1)_OBJ)
	@mkdir -p $$(@D)
	$$(CC) $$(OPT) -o $$@ $$^ $$(call pkg_libs,$(3)) $(4) -lpthread -lm
$$(BUILD)/san/bin/$(1): $$($(1)_SOBJ)
	@mkdir -p $$(@D)
	$$(CC) $$(SANFLAGS) -o $$@ $$^ $$(call pkg_libs,$(3)) $(4) -lpthread -lm
PROGRAMS     += $$(BUILD)/bin/$(1)
SAN_PROGRAMS += $$(BUILD)/san/bin/$(1)
endef
program = $(eval $(call program_tpl,$(1),$(2),$(3),$(4)))

# $(call unit_test,NAME,SOURCES[,PKGS]) — a check suite run under sanitizers.
# $(call integration_test,...) — the same, run with a private PostgreSQL in
# the environment (PGHOST, PGPORT, ...; see tests/run.sh).
unit_test = $(call program,$(1),$(2),check $(3))$(eval UNIT_TESTS += $(1))
integration_test = $(call program,$(1),$(2),check $(3))$(eval INTEGRATION_TESTS += $(1))

# $(call fuzzer,NAME,SOURCES,PKGS) — the libFuzzer target tests/fuzz/NAME.c
# linked with SOURCES into $(BUILD)/fuzz/bin/NAME by clang, under ASan and
# UBSan. SOURCES is the source variable of the module it fuzzes (LEND_SRC,
# BOOK_SRC, ...), never a list of its own, so that a module added to the
# program reaches the fuzzer too. tests/fuzz/run.sh (`make fuzz`, the
# `fuzz` suite of `make check`) builds and runs them.
FUZZ_CC    ?= clang
FUZZFLAGS   = -std=c11 -g -O1 -fsanitize=address,undefined
FUZZERS    :=
define fuzzer_tpl
$$(BUILD)/fuzz/bin/$(1): $$(patsubst %.c,$$(BUILD)/fuzz/obj/%.o,tests/fuzz/$(1).c $(2))
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(FUZZFLAGS) -fsanitize=fuzzer -o $$@ $$^ $$(call pkg_libs,$(3)) -lpthread -lm
FUZZERS += $(1)
endef
fuzzer = $(eval $(call fuzzer_tpl,$(1),$(2),$(3)))

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(OPT) $(CPPFLAGS) $(call pkg_cflags,$(PKGS)) -MMD -MP -c -o $@ $<

$(BUILD)/san/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(SANFLAGS) $(CPPFLAGS) $(call pkg_cflags,$(PKGS)) -MMD -MP -c -o $@ $<

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS) $(call pkg_cflags,$(PKGS)) -MMD -MP -c -o $@ $<

# Every component's fragment: exchange/ramexd.mk, kmod/kmod.mk, ...
include $(sort $(wildcard */*.mk */*/*.mk))

all: $(PROGRAMS) $(ALL_EXTRA)

test-bin: $(PROGRAMS) $(SAN_PROGRAMS)

# `make check` first installs what is missing, then re-enters make so that
# pkg-config sees the freshly installed libraries.
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) test-bin
	@UNIT_TESTS="$(UNIT_TESTS)" INTEGRATION_TESTS="$(INTEGRATION_TESTS)" BUILD="$(BUILD)" bash tests/run.sh

bench: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@BUILD="$(BUILD)" bash bench/run.sh

fuzz: deps
	@BUILD="$(BUILD)" bash tests/fuzz/run.sh

# Quiet: a line per step; the compiler's lines go to var/demo-build.log
# (its last lines are shown when the build fails).
# Ctrl-C ends a demo: from a terminal, the demo runs as a job of its own in
# the terminal's foreground (bash -m), so that only it gets the SIGINT,
# prints its summary and exits 0; make, which would otherwise get the SIGINT
# too and say "Interrupt", exits with the demo's status. bash gives the
# terminal back to make's group when the demo ends ("; exit $$?" keeps bash
# from exec'ing the demo in its own place). tests/demo checks it in a pty.
demo: deps
	@mkdir -p var
	@echo "demo: building ramexd, the agents, ramexctl and the pages (log: var/demo-build.log)"
	@$(MAKE) --no-print-directory -j$(JOBS) all >var/demo-build.log 2>&1 || \
	  { tail -n 30 var/demo-build.log; echo "demo: the build failed; the whole log is var/demo-build.log"; exit 1; }
	@if [ -t 0 ]; then BUILD="$(BUILD)" exec bash -c 'set -m; bash scripts/demo.sh; exit $$?'; \
	else BUILD="$(BUILD)" exec bash scripts/demo.sh; fi

# FLEET_ARGS: more ramex-fleet options (e.g. --machines 10000 --seed 2).
FLEET_OUT ?= $(BUILD)/fleet
fleet: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BUILD)/bin/ramex-fleet
	@mkdir -p $(FLEET_OUT)
	$(BUILD)/bin/ramex-fleet --json $(FLEET_OUT)/fleet.json \
	  --svg $(FLEET_OUT)/fleet.svg $(FLEET_ARGS)
	@echo "wrote $(FLEET_OUT)/fleet.json and $(FLEET_OUT)/fleet.svg"

deps:
	@bash scripts/deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/ramex
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(PREFIX)/bin/
	rm -rf $(DESTDIR)$(PREFIX)/share/ramex/web && cp -R $(BUILD)/web $(DESTDIR)$(PREFIX)/share/ramex/web
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0644 scripts/systemd/*.service $(DESTDIR)$(PREFIX)/lib/systemd/system/

format:
	clang-format -i $$(git ls-files '*.c' '*.h' | grep -v '^kmod/')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
