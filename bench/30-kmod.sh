#!/usr/bin/env bash
# bench/30-kmod.sh: how fast ramex.ko takes pages offline and gives them
# back, inside a Debian kernel under qemu, beside the guest's own rate of
# allocating and touching the same memory from user space (and of freeing
# it with munmap). qemu runs under TCG emulation here, so compare the rows
# with each other rather than with bare metal.
#
#   RAMEX_BENCH_PAGES (32768 = 128 MiB)  RAMEX_BENCH_ROUNDS (5)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/kernel/guest.sh"
BUILD=${RAMEX_BUILD:-$ROOT/build}
work=$BUILD/kernel-bench
pages=${RAMEX_BENCH_PAGES:-32768}
rounds=${RAMEX_BENCH_ROUNDS:-5}

kver=$(guest_kver) || exit 1
rm -rf "$work" && mkdir -p "$work/root"
guest_build_module "$kver" "$work" || { echo "kmod bench: module build failed"; exit 1; }
guest_build_prog "$ROOT/tests/kernel/ramex_bench.c" "$work/root/ramex_bench" || exit 1
cp "$work/kmod/ramex.ko" "$work/root/"
printf '%s\n' "/ramex_bench /ramex.ko $pages $rounds" >"$work/main.sh"
guest_initramfs "$work/root" "$work/main.sh" "$work/initrd.gz" || exit 1
guest_boot "$kver" "$work/initrd.gz" "$work/serial.log" 512 300

if ! grep -aq '^RAMEX-BENCH-END' "$work/serial.log"; then
  echo "kmod bench: the guest did not finish; tail of $work/serial.log:"
  tail -n 20 "$work/serial.log"
  exit 1
fi
echo "kernel $kver under qemu TCG, 512 MiB guest, median of $rounds rounds"
grep -a '^RAMEX-BENCH ' "$work/serial.log" | tr -d '\r' | sed 's/^RAMEX-BENCH /  /; s/=/: /'
