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
if ! lend_guest_build "$WORK" "$KVER" test; then
  bad "build the initramfs"
  echo "$pass passed, $fail failed"; exit 1
fi
LOG=$OUT/lending-guest.log
lend_guest_boot "$WORK" "$KVER" 256 "$LOG" 220
grep -a -o 'LEND-.*\|^LOG .*' "$LOG" | tr -d '\r'

# anywhere in a line: the console's escape codes or kernel messages may
# share it
marker() { grep -a -o "LEND-$1 .*" "$LOG" | tr -d '\r' | tail -n 1; }
for m in STORE SETUP WORKLOAD SWAPPED METERS-LIVE HOLD RECALL RECALL-DATA \
         METERS-FINAL VANISH ALIVE END; do
  line=$(marker "$m")
  if [[ -z $line ]]; then bad "$m: no marker (see $LOG)"
  elif [[ $m == END || $line == "LEND-$m ok"* ]]; then ok "$line"
  else bad "$line"; fi
done
if grep -aq 'LEND-[A-Z-]* fail' "$LOG"; then
  grep -a -o 'LEND-[A-Z-]* fail.*' "$LOG" | tr -d '\r' | while read -r l; do echo "  $l"; done
fi
echo "$pass passed, $fail failed"
(( fail == 0 ))
