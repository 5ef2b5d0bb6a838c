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

pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  bash "$ROOT/scripts/pg.sh" destroy "$pgdir" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bash "$ROOT/scripts/pg.sh" destroy "$pgdir" >/dev/null 2>&1
bash "$ROOT/scripts/pg.sh" start "$pgdir" >/dev/null || { echo "46-billing: PostgreSQL did not start"; exit 1; }
eval "$(bash "$ROOT/scripts/pg.sh" env "$pgdir")"
rm -rf "$work"; mkdir -p "$work"
db="dbname=ramex host=$PGHOST port=$PGPORT user=$PGUSER"

"$ramexd" migrate --db="$db" 2>"$work/migrate.log" || { cat "$work/migrate.log"; exit 1; }
admin=$("$ramexd" token create --role=admin --name=bench --db="$db" 2>"$work/token.log") \
  || { cat "$work/token.log"; exit 1; }
t0=1790812800000000000 # 2026-10-01T00:00:00Z
as_of=$((t0 + (days * 86400 - 3600) * 1000000000))
start=$(date +%s.%N)
psql -q -d "$db" -v nodes="$nodes" -v t0="$t0" -v days="$days" -f "$ROOT/bench/46-billing-gen.sql" \
  || { echo "46-billing: generating the fleet failed"; exit 1; }
gen=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
reports=$(psql -qtA -d "$db" -c "SELECT count(*) FROM usage_reports")

(exec "$ramexd" --db="$db" --listen=127.0.0.1:0 --port_file="$work/port" \
   --billing_interval_s=0 --log_level=info 2>"$work/ramexd.log") &
pid=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port" 2>/dev/null) || { echo "46-billing: ramexd did not start"; cat "$work/ramexd.log"; exit 1; }
url=http://127.0.0.1:$port

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
