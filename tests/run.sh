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
#   RAMEX_CHECK_LANES=1|2          2 (the default): the check suites and
#                                  the tests/*/suite.sh side by side
#                                  (below); 1: one suite after another
#   RAMEX_CHECK_PG=dir             where its private PostgreSQL lives (var/check-pg)
#   RAMEX_CHECK_OUT=dir            where logs and screenshots go (var/test-output)
#
# Two lanes (the default): the check suites (unit, then integration on the
# PostgreSQL started here) are one lane; the tests/*/suite.sh, in name
# order, are the other, started first. Most of each lane's time is waiting
# (a guest's fixed phases, a browser's keep-alives, PostgreSQL stopped and
# started, an agent's samples), so on two cores the two lanes take about
# as long as the longer one. The suite.sh suites never see this PostgreSQL,
# in either mode (test_outage stops it under the integration suites'
# feet): each of them that needs one starts its own, as when run alone.
#
# Each suite's line says its wall time and the CPU time of its processes
# (user + system, the processes it waited for; a PostgreSQL server is not
# among them). At the end: the slowest suites and the slowest check tests
# (from check's XML log, $RAMEX_CHECK_OUT/NAME.xml), then each failed
# suite's last log lines.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROOT=$PWD
OUT=${RAMEX_CHECK_OUT:-$ROOT/var/test-output}
rm -rf "$OUT"; mkdir -p "$OUT"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export RAMEX_TEST_OUTPUT=$OUT RAMEX_BUILD=$ROOT/$BUILD

only=${RAMEX_CHECK_ONLY:-}
lanes=${RAMEX_CHECK_LANES:-2}
results=$OUT/.results # name pass fail wall_ms cpu_ms log, a line per suite
: >"$results"

pgdir=${RAMEX_CHECK_PG:-$ROOT/var/check-pg} # several checks at once: one each
lane_pid=""
cleanup() {
  # the suite.sh lane is a process group of its own (set -m below)
  [[ -n $lane_pid ]] && kill -TERM -- "-$lane_pid" 2>/dev/null
  # its server log outlives it: a failed test may point at it
  [[ -f $pgdir/cluster/log ]] && cp "$pgdir/cluster/log" "$OUT/check-pg.log"
  bash scripts/pg.sh destroy "$pgdir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_us() { echo "${EPOCHREALTIME/./}"; }
# CPU_MS: CPU time (ms) of the children this shell has waited for, user +
# system. `times` runs in this shell (not in a $(...), whose children
# would be its own).
cpu_now() {
  local f=$OUT/.times.$BASHPID
  times >"$f"
  CPU_MS=$(awk 'END { n = split($0, a, /[ms ]+/); print int((a[1] * 60 + a[2] + a[3] * 60 + a[4]) * 1000) }' "$f")
  rm -f "$f"
}

record() { # name pass fail wall_ms cpu_ms log
  printf '%-28s %4d passed, %d failed  (%d.%d s, cpu %d.%d s)\n' "$1" "$2" "$3" \
    $(($4 / 1000)) $(($4 % 1000 / 100)) $(($5 / 1000)) $(($5 % 1000 / 100))
  echo "$*" >>"$results"
}

run_check_suite() { # binary
  local name=$1 log=$OUT/$1.log t0 c0
  [[ -n $only && ! $name =~ $only ]] && return
  cpu_now; t0=$(now_us) c0=$CPU_MS
  CK_XML_LOG_FILE_NAME=$OUT/$name.xml "$ROOT/$BUILD/san/bin/$name" >"$log" 2>&1
  local rc=$?
  local line; line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -n 1)
  local n f e
  if [[ $line =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
    n=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} e=${BASH_REMATCH[3]}
  else
    n=1 f=1 e=0
  fi
  local bad=$((f + e)); (( rc != 0 && bad == 0 )) && bad=1
  cpu_now
  record "$name" $((n - f - e)) $bad $((($(now_us) - t0) / 1000)) $((CPU_MS - c0)) "$log"
}

run_script_suite() { # tests/NAME/suite.sh
  local s=$1 name t0 c0 log line p f rc
  name=$(basename "$(dirname "$s")")
  [[ -n $only && ! $name =~ $only ]] && return
  cpu_now; t0=$(now_us) c0=$CPU_MS log=$OUT/suite-$name.log
  bash "$s" >"$log" 2>&1; rc=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
  else
    p=0 f=1
  fi
  (( rc != 0 && f == 0 )) && f=1
  cpu_now
  record "$name" "$p" "$f" $((($(now_us) - t0) / 1000)) $((CPU_MS - c0)) "$log"
}

# The suite.sh suites that close the check lane instead (two lanes only):
# the script lane is the longer one (614 s against 510 in CI, 2026-12-07),
# and these need no PostgreSQL and nothing of the other lane's.
SWAPPED_SCRIPTS="tests/fuzz/suite.sh"

script_lane() { # [all]: every suite.sh, the swapped ones too
  unset PGHOST PGPORT PGUSER PGDATABASE PGBIN
  for s in $(ls tests/*/suite.sh 2>/dev/null | sort); do
    [[ ${1:-} != all && " $SWAPPED_SCRIPTS " == *" $s "* ]] && continue
    run_script_suite "$s"
  done
}

swapped_scripts() {
  unset PGHOST PGPORT PGUSER PGDATABASE PGBIN
  for s in $SWAPPED_SCRIPTS; do [[ -f $s ]] && run_script_suite "$s"; done
}

check_lane() {
  for t in ${UNIT_TESTS:-}; do run_check_suite "$t"; done
  local want=""
  for t in ${INTEGRATION_TESTS:-}; do [[ -z $only || $t =~ $only ]] && want=1; done
  [[ -n $want ]] || return 0
  bash scripts/pg.sh destroy "$pgdir" >/dev/null 2>&1
  if ! bash scripts/pg.sh start "$pgdir" >"$OUT/pg-start.log" 2>&1; then
    record postgresql 0 1 0 0 "$OUT/pg-start.log"
    return
  fi
  eval "$(bash scripts/pg.sh env "$pgdir")"
  # The schema, once: every integration test's ramexd starts on a copy
  # (testdb_create_schema, tests/integration/testdb.h). A copy fails while
  # anyone is connected to it: closed to connections after the migration,
  # as template0 is (autovacuum included).
  export RAMEX_TEST_SCHEMA_DB=ramex_t_schema
  if ! { "$PGBIN/createdb" "$RAMEX_TEST_SCHEMA_DB" &&
         "$ROOT/$BUILD/bin/ramexd" migrate --db="dbname=$RAMEX_TEST_SCHEMA_DB" &&
         "$PGBIN/psql" -X -q -d postgres -c "ALTER DATABASE $RAMEX_TEST_SCHEMA_DB WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"; } >>"$OUT/pg-start.log" 2>&1; then
    record schema 0 1 0 0 "$OUT/pg-start.log"
    return
  fi
  for t in ${INTEGRATION_TESTS:-}; do run_check_suite "$t"; done
}

t_start=$(now_us)
if (( lanes >= 2 )); then
  echo "== two lanes: unit then integration tests (ASan + UBSan; a private PostgreSQL), then fuzz, beside the other tests/*/suite.sh"
  set -m # the lane in a process group of its own: cleanup ends all of it
  script_lane </dev/null &
  lane_pid=$!
  set +m
  # each lane in a shell of its own, whose `times` are its suites' alone
  # (this shell's would take in the other lane's when it is reaped)
  (check_lane; swapped_scripts)
  wait "$lane_pid"; lane_pid=""
else
  echo "== one lane: unit, integration tests (ASan + UBSan; a private PostgreSQL), tests/*/suite.sh"
  (check_lane)
  (script_lane all)
fi
t_all=$((($(now_us) - t_start) / 1000))

echo "== slowest suites (wall, cpu) of $((t_all / 1000)) s in all"
sort -k4,4nr "$results" | head -n 8 | awk '{ printf "  %-26s %6.1f s  cpu %6.1f s\n", $1, $4 / 1000, $5 / 1000 }'
if compgen -G "$OUT/*.xml" >/dev/null; then
  echo "== slowest check tests (of those over 1 s)"
  # check's XML: <test>...<id>NAME</id><iteration>I</iteration><duration>S</duration>...
  awk '
    FNR == 1 { suite = FILENAME; sub(/.*\//, "", suite); sub(/\.xml$/, "", suite) }
    /<id>/ { id = $0; gsub(/.*<id>|<\/id>.*/, "", id) }
    /<iteration>/ { it = $0; gsub(/.*<iteration>|<\/iteration>.*/, "", it) }
    /<duration>/ { d = $0; gsub(/.*<duration>|<\/duration>.*/, "", d); if (id != "") printf "%s %s/%s%s\n", d, suite, id, (it > 0 ? "#" it : ""); id = "" }
  ' "$OUT"/*.xml | sort -k1,1nr | head -n 10 | awk '$1 >= 1 { printf "  %-64s %6.1f s\n", $2, $1 }'
fi

total_pass=0 total_fail=0 failed=()
while read -r name p f _ _ log; do
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
  if (( f > 0 )); then
    failed+=("$name")
    echo "== $name failed; the last lines of ${log#"$ROOT"/}:"
    grep -vE '^Running suite' "$log" | tail -n 40 | sed 's/^/    /'
  fi
done <"$results"

echo "== logs and screenshots: ${OUT#"$ROOT"/}/"
if (( ${#failed[@]} )); then echo "failed: ${failed[*]}"; fi
echo "check: $total_pass passed, $total_fail failed"
(( total_fail == 0 && total_pass > 0 ))
