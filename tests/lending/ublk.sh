#!/usr/bin/env bash
# tests/lending/ublk.sh — ramex-lend-ublk in a real kernel (see README.md).
# The host kernel (Debian 12's 6.1) has no ublk driver: this boots
# Debian 12's 6.12 kernel (bookworm-security, CONFIG_BLK_DEV_UBLK=m),
# downloaded once into var/ and extracted there, never installed. The
# guest (init.sh, mode "ublk") checks the device's data, discard and stop
# and the loss of its lender (UBLK-* markers, judged here) and prints the
# bench's rows for /dev/ublkb0 beside /dev/nbd0 (bridge) and /dev/nbd2
# (direct): compare them with each other, not with the host (TCG).
# --test: the checks alone (tests/lending-ublk/suite.sh, make check).
# Last line: "N passed, M failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
BIN=${RAMEX_BUILD:-$ROOT/$BUILD}/bin
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}
WORK=$ROOT/$BUILD/lending-ublk
# the rows run three contracts at once: their lenders' locked memory
MODE=ublk MARKERS="SETUP DATA TRIM STOP LOST RECALL SWAP BENCH" MEM=512
[[ ${1:-} == --test ]] && MODE=ublk-test MARKERS="SETUP DATA TRIM STOP LOST RECALL SWAP" MEM=256
. "$ROOT/tests/lending/guest.sh"
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

mkdir -p "$OUT" "$WORK"
make -s -C "$ROOT" -j2 "$BUILD/bin/ramex-lend-server" "$BUILD/bin/ramex-lend-nbd" \
  "$BUILD/bin/ramex-lend-ublk" "$BUILD/bin/ramex-lend-workload" \
  "$BUILD/bin/ramex-lend-bench" >/dev/null || bad "build the lending programs"
LEND_GUEST_KROOT=$(lend_guest_ublk_kroot) ||
  { bad "get the ublk kernel"; echo "$pass passed, $fail failed"; exit 1; }
export LEND_GUEST_KROOT
KVER=$(lend_guest_kver) || { bad "find the guest kernel"; echo "$pass passed, $fail failed"; exit 1; }
LOG=$OUT/lending-guest-$MODE.log
if lend_guest_build "$WORK" "$KVER" $MODE; then
  echo "guest: kernel $KVER under qemu TCG, $MEM MiB; host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  lend_guest_boot "$WORK" "$KVER" $MEM "$LOG" ${LEND_UBLK_SECONDS:-420}
  echo "host load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -a -o 'LEND-.*\|^LOG .*\|guest-[a-z]* .*' "$LOG" | tr -d '\r' | sed 's/^/  /'
  grep -a 'END elapsed' "$LOG" >/dev/null || echo "  the guest did not finish; see $LOG"
  for m in $MARKERS; do
    line=$(grep -a -o "LEND-UBLK-$m .*" "$LOG" | tr -d '\r' | tail -n 1)
    if [[ -z $line ]]; then bad "UBLK-$m: no marker (see $LOG)"
    elif [[ $line == "LEND-UBLK-$m ok"* ]]; then ok "$line"
    else bad "$line"; fi
  done
else
  bad "build the initramfs"
fi
echo "$pass passed, $fail failed"
(( fail == 0 ))
