#!/usr/bin/env bash
# tests/lending/suite.sh — remote lending in a real kernel (see README.md).
# One qemu boot; the guest (init.sh) prints LEND-* markers and this script
# judges only by them. Last line: "N passed, M failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
BIN=${RAMEX_BUILD:-$ROOT/$BUILD}/bin
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}
WORK=$ROOT/$BUILD/lending-test
. "$ROOT/tests/lending/guest.sh"
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

mkdir -p "$OUT" "$WORK"
make -s -C "$ROOT" -j2 "$BUILD/bin/ramex-lend-server" "$BUILD/bin/ramex-lend-nbd" \
  "$BUILD/bin/ramex-lend-workload" "$BUILD/bin/ramex-lend-bench" >/dev/null || bad "build the lending programs"
# ramex.ko is optional: without it the lender runs on anonymous memory and
# the STORE marker says so
make -s -C "$ROOT" kmod >"$WORK/kmod.log" 2>&1 || echo "note: ramex.ko did not build; lender uses anonymous memory"
KVER=$(lend_guest_kver) || { bad "find a guest kernel"; echo "$pass passed, $((fail + 1)) failed"; exit 1; }
# anywhere in a line: the console's escape codes or kernel messages may
# share it
marker() { grep -a -o "LEND-$1 .*" "$LOG" | tr -d '\r' | tail -n 1; }
# Two boots: the direct path (nbd.ko on the lender's DATA connection, the
# default an agent runs) and the bridge between them; the same scenarios.
for mode in test-direct test; do
  what=${mode#test}; what=${what#-}; what=${what:-bridge}
  if ! lend_guest_build "$WORK/$what" "$KVER" "$mode"; then
    bad "$what: build the initramfs"
    continue
  fi
  LOG=$OUT/lending-guest-$what.log
  lend_guest_boot "$WORK/$what" "$KVER" 256 "$LOG" 220
  grep -a -o 'LEND-.*\|^LOG .*' "$LOG" | tr -d '\r' | sed "s/^/$what: /"
  for m in STORE SETUP WORKLOAD SWAPPED METERS-LIVE HOLD RECALL RECALL-DATA \
           METERS-FINAL VANISH SILENT ALIVE END; do
    line=$(marker "$m")
    if [[ -z $line ]]; then bad "$what: $m: no marker (see $LOG)"
    elif [[ $m == END || $line == "LEND-$m ok"* ]]; then ok "$what: $line"
    else bad "$what: $line"; fi
  done
  if grep -aq 'LEND-[A-Z-]* fail' "$LOG"; then
    grep -a -o 'LEND-[A-Z-]* fail.*' "$LOG" | tr -d '\r' | while read -r l; do echo "  $what: $l"; done
  fi
done
echo "$pass passed, $fail failed"
(( fail == 0 ))
