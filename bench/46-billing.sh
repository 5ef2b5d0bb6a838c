#!/usr/bin/env bash
# bench/46-billing.sh: one billing run over a month of usage for a fleet of
# RAMEX_BENCH_NODES (10 000) nodes with four contracts each (two spot
# offline, one perm offline, one lend whose two sides both report): daily
# reports for October 2026 (46-billing-gen.sql makes them in PostgreSQL),
# then POST /v1/billing/run as of 31 October 23:00 UTC, timed, and a second
# run with nothing new; the first with where its time went (the phases ramexd
# logs at the end of a run, exchange/billing.c). A private PostgreSQL
# (fsync on) under var/bench-billing-pg (RAMEX_BENCH_VAR=DIR: under DIR, so
# that two people can run it at once) and an optimised ramexd are started
# here and stopped at the end, also when something fails.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
nodes=${RAMEX_BENCH_NODES:-10000}
days=31
var=${RAMEX_BENCH_VAR:-$ROOT/var}
pgdir=$var/bench-billing-pg
work=$var/bench-billing
ramexd=$BUILD/bin/ramexd
[[ -x $ramexd ]] || { echo "46-billing: build ramexd first (make)"; exit 1; }

. "$ROOT/bench/lib.sh"
bench_pg 46-billing "$pgdir" "$work"

"$ramexd" migrate --db="$db" 2>"$work/migrate.log" || { cat "$work/migrate.log"; exit 1; }
bench_admin 46-billing "$work"
t0=1790812800000000000 # 2026-10-01T00:00:00Z
as_of=$((t0 + (days * 86400 - 3600) * 1000000000))
start=$(date +%s.%N)
psql -q -d "$db" -v nodes="$nodes" -v t0="$t0" -v days="$days" -f "$ROOT/bench/46-billing-gen.sql" \
  || { echo "46-billing: generating the fleet failed"; exit 1; }
gen=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
reports=$(psql -qtA -d "$db" -c "SELECT count(*) FROM usage_reports")

bench_ramexd 46-billing "$work" --billing_interval_s=0 --log_level=info

run() {
  curl -sf -m 600 -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d "{\"as_of_ns\": $as_of}" -w ' %{time_total}' "$url/v1/billing/run"
}
echo "$nodes nodes x 4 contracts, $reports daily reports of October 2026 (made in $gen s); $(nproc) cores, fsync on"
out=$(run) || { echo "46-billing: the billing run failed"; tail -5 "$work/ramexd.log"; exit 1; }
wall=${out##* }; body=${out% *}
echo "  billing run: $(echo "$body" | jq -r '"\(.contracts) contracts, \(.movements) movements, \(.postings) postings, \(.flagged) flagged lend months in \(.elapsed_ms) ms"') ($wall s through HTTP)"
# the phases of run N: "batches=B ms=T take_ms=... finalize_ms=..."
phases() {
  grep 'msg="billing run phases"' "$work/ramexd.log" | grep " run=$1 " | tail -1 \
    | sed -E 's/.* (batches=)/    \1/; s/ ms=[0-9]+//; s/_ms=/ /g'
}
echo "  its phases (ms): $(phases "$(echo "$body" | jq -r .run_id)")"
echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(run) || { echo "46-billing: the second run failed"; exit 1; }
echo "  again with nothing new: $(echo "${out% *}" | jq -r '"\(.contracts) contracts in \(.elapsed_ms) ms"')"
t=$(curl -sf -m 600 -H "Authorization: Bearer $admin" -o "$work/check" -w '%{time_total}' "$url/v1/ledger/check") \
  && echo "  ledger check: $(jq -r '"ok=\(.ok), \(.movements) movements, \(.postings) postings, \(.invoices) invoices"' "$work/check") in $t s"
kill "$pid"; wait "$pid"; pid=
