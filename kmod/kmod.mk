# kmod/kmod.mk - build ramex.ko with Kbuild against installed kernel headers.
#
# `make` builds $(BUILD)/kmod/ramex.ko for KMOD_KVER (default: the newest
# /lib/modules/*-amd64 that has a build/ directory; never `uname -r`, which
# may be a kernel without module support). Kbuild writes its outputs next
# to the sources, so the sources are copied into $(BUILD)/kmod first and
# the source tree stays clean. `make kmod` builds only the module.
# The module's tests are tests/kernel/suite.sh (run by `make check`).

KMOD_KVER ?= $(shell for d in /lib/modules/*-amd64; do \
	[ -d "$$d/build" ] && basename "$$d"; done | sort -V | tail -n 1)
KMOD_OUT  := $(BUILD)/kmod
KMOD_SRC  := kmod/Kbuild $(wildcard kmod/*.c kmod/*.h kmod/uapi/*.h)

.PHONY: kmod
kmod: $(KMOD_OUT)/ramex.ko

$(KMOD_OUT)/ramex.ko: $(KMOD_SRC)
	@test -n "$(KMOD_KVER)" || { echo "kmod: no kernel headers in /lib/modules/*-amd64/build (make deps)"; exit 1; }
	@rm -rf $(KMOD_OUT) && mkdir -p $(KMOD_OUT)/uapi
	@cp kmod/Kbuild kmod/*.c kmod/*.h $(KMOD_OUT)/ && cp kmod/uapi/*.h $(KMOD_OUT)/uapi/
	$(MAKE) -s -C /lib/modules/$(KMOD_KVER)/build M=$(abspath $(KMOD_OUT)) RAMEX_WERROR=y modules

ALL_EXTRA += kmod

# The DKMS source tree (/usr/src/ramex-<version>), for packages and for
# `sudo make kmod-install && sudo dkms install ramex/1`.
KMOD_VERSION := 1
.PHONY: kmod-install
kmod-install:
	install -d $(DESTDIR)/usr/src/ramex-$(KMOD_VERSION)/uapi
	install -m 0644 kmod/Kbuild kmod/dkms.conf kmod/*.c kmod/*.h $(DESTDIR)/usr/src/ramex-$(KMOD_VERSION)/
	install -m 0644 kmod/uapi/*.h $(DESTDIR)/usr/src/ramex-$(KMOD_VERSION)/uapi/
