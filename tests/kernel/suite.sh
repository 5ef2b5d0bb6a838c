#!/usr/bin/env bash
# tests/kernel: ramex.ko in a real kernel. Builds the module against the
# Debian headers, boots that kernel under qemu once with the module and
# ramex_test, and turns the guest's "RAMEX-TEST name PASS|FAIL" lines into
# the runner's format. A test without a marker line has failed. The serial
# log is saved as $RAMEX_TEST_OUTPUT/kernel-serial.log.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/kernel/guest.sh"
BUILD=${RAMEX_BUILD:-$ROOT/build}
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}
work=$BUILD/kernel-test
mkdir -p "$OUT"

# Every test ramex_test runs, in order; kept here so a guest that dies
# early reports each missing one as failed.
TESTS="bad_params load meminfo_delta stats_sysfs bad_input open_close_race
concurrent_ioctls cycles_1000 pool_mmap shortfall oom_give_back
rmmod_restores limit_concurrent kernel_healthy"

fail_all() { for t in $TESTS; do echo "FAIL $t ($1)"; done; echo "0 passed, $(wc -w <<<"$TESTS") failed"; exit 1; }

kver=$(guest_kver) || fail_all "no kernel to boot"
rm -rf "$work" && mkdir -p "$work/root"
guest_build_module "$kver" "$work" || fail_all "module build failed"
guest_build_prog "$ROOT/tests/kernel/ramex_test.c" "$work/root/ramex_test" || fail_all "test build failed"
cp "$work/kmod/ramex.ko" "$work/root/ramex.ko"
printf '%s\n' 'echo RAMEX-START' '/ramex_test /ramex.ko' >"$work/main.sh"
guest_initramfs "$work/root" "$work/main.sh" "$work/initrd.gz" || fail_all "initramfs failed"

log=$OUT/kernel-serial.log
echo "kernel $kver, booting under qemu"
guest_boot "$kver" "$work/initrd.gz" "$log" 512 240

pass=0 failn=0
for t in $TESTS; do
  # Anywhere in a line: kernel console output may share it.
  line=$(grep -a -o -m1 "RAMEX-TEST $t .*" "$log" | tr -d '\r')
  case $line in
    "RAMEX-TEST $t PASS") echo "PASS $t"; pass=$((pass + 1)) ;;
    "RAMEX-TEST $t FAIL"*) echo "FAIL $t: ${line#RAMEX-TEST $t FAIL }"; failn=$((failn + 1)) ;;
    *) echo "FAIL $t: no marker in the serial log"; failn=$((failn + 1)) ;;
  esac
done
grep -a -o 'RAMEX-INFO.*' "$log" | tr -d '\r'
if ! grep -aq '^RAMEX-GUEST-END' "$log"; then
  echo "guest did not finish; last lines of $log:"; tail -n 30 "$log"
fi
echo "$pass passed, $failn failed"
