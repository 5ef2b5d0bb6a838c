# tests/wss/guest.sh — the working-set guest: the Debian kernel under qemu
# (TCG) with busybox, the unmodified ramex-agent (and the shared libraries
# it needs, copied by ldd), ramex.ko built against that kernel, zram as swap,
# tests/wss/wss_workload and a /guest-main script written by the caller.
#
# Sourced by tests/wss/suite.sh and bench/60-wss.sh; needs ROOT and BIN.
#   wss_guest_build DIR KVER MAIN   DIR/initrd.gz with MAIN as /guest-main
#   wss_guest_boot DIR KVER MEM LOG SECONDS
#
# The guest's /wss-lib.sh (tests/wss/guest-lib.sh) holds the shell functions
# both scripts use inside: setup, running the agent, the status monitor.
. "$ROOT/tests/kernel/guest.sh"

_wss_copy_bin() { # file root
  local lib
  install -D -m 755 "$1" "$2/bin/${1##*/}"
  for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
    [[ -f $2$lib ]] || install -D -m 755 "$lib" "$2$lib"
  done
}

wss_guest_build() { # dir kver main
  local dir=$1 r=$1/root m
  rm -rf "$r" && mkdir -p "$r/bin" "$r/lib/modules" || return 1
  [[ -x $BIN/ramex-agent ]] || { echo "wss guest: $BIN/ramex-agent is not built (make)" >&2; return 1; }
  _wss_copy_bin "$BIN/ramex-agent" "$r" || return 1
  guest_build_prog "$ROOT/tests/wss/wss_workload.c" "$r/wss_workload" || return 1
  for m in zsmalloc zram; do
    cp "$(modinfo -k "$2" -n "$m")" "$r/lib/modules/$m.ko" || return 1
  done
  guest_build_module "$2" "$dir" && cp "$dir/kmod/ramex.ko" "$r/lib/modules/ramex.ko" || return 1
  cp "$ROOT/tests/wss/guest-lib.sh" "$r/wss-lib.sh" || return 1
  guest_initramfs "$r" "$3" "$dir/initrd.gz"
}

wss_guest_boot() { # dir kver mem-mib log seconds
  guest_boot "$2" "$1/initrd.gz" "$4" "$3" "$5"
}
