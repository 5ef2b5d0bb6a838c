# guest.sh - build ramex.ko and boot it in a Debian kernel under qemu.
#
# Sourced by tests/kernel/suite.sh and bench/30-kmod.sh. The host kernel
# cannot load modules, so the module is built against the Debian headers
# of a kernel installed in /boot and tested inside that kernel, booted by
# qemu with an initramfs of busybox, the module and static test programs.
#
#   guest_kver                      prints the kernel version to use
#   guest_build_module KVER DIR     builds DIR/kmod/ramex.ko from kmod/
#   guest_build_prog SRC OUT        a static guest program
#   guest_initramfs DIR MAIN OUT    cpio.gz of DIR plus busybox, /init, MAIN
#   guest_boot KVER INITRD LOG MEM SECONDS
#
# Needs ROOT (the repository root). Nothing is written into the source tree.

# The newest -amd64 kernel that has both headers and an image. Never the
# running kernel: it is the host's and has no module support.
guest_kver() {
  local d k best=
  for d in /lib/modules/*-amd64; do
    k=${d##*/}
    [[ -d $d/build && -f /boot/vmlinuz-$k ]] && best=$k
  done
  [[ -n $best ]] || { echo "guest: no /lib/modules/*-amd64 with build/ and /boot/vmlinuz" >&2; return 1; }
  echo "$best"
}

# Kbuild writes next to the sources, so build a copy.
guest_build_module() { # kver dir
  rm -rf "$2/kmod" && mkdir -p "$2/kmod" &&
  cp -R "$ROOT"/kmod/Kbuild "$ROOT"/kmod/*.c "$ROOT"/kmod/*.h "$ROOT"/kmod/uapi "$2/kmod/" &&
  make -s -j2 -C "/lib/modules/$1/build" M="$2/kmod" RAMEX_WERROR=y modules 2>&1 |
    grep -v 'Skipping BTF generation' || true
  [[ -f $2/kmod/ramex.ko ]]
}

guest_build_prog() { # src out
  ${CC:-cc} -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla \
    -D_GNU_SOURCE -I"$ROOT" -O2 -static -pthread -o "$2" "$1"
}

guest_initramfs() { # dir main-script out
  local dir=$1
  mkdir -p "$dir/bin" &&
  cp /bin/busybox "$dir/bin/busybox" &&
  cp "$ROOT/tests/kernel/init.sh" "$dir/init" && chmod 755 "$dir/init" &&
  cp "$2" "$dir/guest-main" &&
  (cd "$dir" && find . | cpio -o -H newc --quiet | gzip -1) >"$3"
}

# TCG: KVM does not start on this machine kind; one CPU boots fastest.
# loglevel=1 keeps kernel messages off the serial line except panics; the
# tests read the kernel log themselves.
guest_boot() { # kver initrd log mem-mib seconds
  timeout "$5" qemu-system-x86_64 -accel tcg -machine pc -nic none -m "$4" \
    -nographic -no-reboot -kernel "/boot/vmlinuz-$1" -initrd "$2" \
    -append "console=ttyS0 quiet loglevel=1 panic=-1 oops=panic" >"$3" 2>&1 </dev/null
  return 0
}
