#!/usr/bin/env bash
# Runs every ramex test suite and prints one summary line per suite plus a
# total. Called by `make check` after the builds; not meant to be run alone
# (it expects the sanitizer test binaries under $BUILD/san/bin).
#
#   UNIT_TESTS, INTEGRATION_TESTS  check suites (names of binaries)
#   tests/*/suite.sh               other suites (kernel under qemu, browser,
#                                  end-to-end); each prints, as its last
#                                  line, "N passed, M failed"
#   RAMEX_CHECK_ONLY=regex         run only the suites whose name matches
#   RAMEX_CHECK_PG=dir             where its private PostgreSQL lives (var/check-pg)
#   RAMEX_CHECK_OUT=dir            where logs and screenshots go (var/test-output)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROOT=$PWD
OUT=${RAMEX_CHECK_OUT:-$ROOT/var/test-output}
rm -rf "$OUT"; mkdir -p "$OUT"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export RAMEX_TEST_OUTPUT=$OUT RAMEX_BUILD=$ROOT/$BUILD

total_pass=0 total_fail=0 failed_suites=()
only=${RAMEX_CHECK_ONLY:-}

pgdir=${RAMEX_CHECK_PG:-$ROOT/var/check-pg} # several checks at once: one each
cleanup() { bash scripts/pg.sh destroy "$pgdir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

record() { # name pass fail seconds
  printf '%-28s %4d passed, %d failed  (%ss)\n' "$1" "$2" "$3" "$4"
  total_pass=$((total_pass + $2)); total_fail=$((total_fail + $3))
  (( $3 > 0 )) && failed_suites+=("$1")
}

run_check_suite() { # binary
  local name=$1 log=$OUT/$1.log t0=$SECONDS
  [[ -n $only && ! $name =~ $only ]] && return
  "$ROOT/$BUILD/san/bin/$name" >"$log" 2>&1
  local rc=$?
  local line; line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -n 1)
  local n f e
  if [[ $line =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
    n=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} e=${BASH_REMATCH[3]}
  else
    n=1 f=1 e=0
  fi
  local bad=$((f + e)); (( rc != 0 && bad == 0 )) && bad=1
  record "$name" $((n - f - e)) $bad $((SECONDS - t0))
  if (( bad )); then grep -vE '^Running suite' "$log" | tail -n 40 | sed 's/^/    /'; fi
}

echo "== unit tests (ASan + UBSan)"
for t in ${UNIT_TESTS:-}; do run_check_suite "$t"; done

echo "== integration tests (private PostgreSQL)"
cleanup
if ! bash scripts/pg.sh start "$pgdir" >"$OUT/pg-start.log" 2>&1; then
  cat "$OUT/pg-start.log"; record postgresql 0 1 0
else
  eval "$(bash scripts/pg.sh env "$pgdir")"
  for t in ${INTEGRATION_TESTS:-}; do run_check_suite "$t"; done
fi

for s in $(ls tests/*/suite.sh 2>/dev/null | sort); do
  name=$(basename "$(dirname "$s")")
  [[ -n $only && ! $name =~ $only ]] && continue
  echo "== $name"
  t0=$SECONDS log=$OUT/suite-$name.log
  bash "$s" >"$log" 2>&1; rc=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
  else
    p=0 f=1
  fi
  (( rc != 0 && f == 0 )) && f=1
  record "$name" "$p" "$f" $((SECONDS - t0))
  if (( f )); then tail -n 40 "$log" | sed 's/^/    /'; fi
done

echo "== logs and screenshots: ${OUT#"$ROOT"/}/"
if (( ${#failed_suites[@]} )); then echo "failed: ${failed_suites[*]}"; fi
echo "check: $total_pass passed, $total_fail failed"
(( total_fail == 0 && total_pass > 0 ))
