#!/usr/bin/env bash
# tests/fuzz/suite.sh — every fuzzer still builds and finds nothing in a
# short run over its seeds and kept corpus (a fuzzer that no longer links,
# or a seed that crashes again, fails `make check`, not only `make fuzz`).
# Each target runs RAMEX_FUZZ_CHECK_SECONDS (2); `make fuzz` is the long
# run. Run by tests/run.sh (suite "fuzz"). Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${RAMEX_FUZZ_CHECK_SECONDS:-2}
pass=0 fail=0
command -v clang >/dev/null || { echo "fuzz: clang is missing (run scripts/deps.sh)"; echo "0 passed, 1 failed"; exit 0; }
for f in tests/fuzz/fuzz_*.c; do
  name=$(basename "$f" .c)
  if out=$(RAMEX_FUZZ_SECONDS=$secs RAMEX_FUZZ_TARGETS=$name bash tests/fuzz/run.sh 2>&1); then
    echo "ok: $name"; pass=$((pass + 1))
  else
    echo "FAILED: $name"; echo "$out" | tail -n 30 | sed 's/^/    /'; fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
