#!/usr/bin/env bash
# bench/45-usage.sh: usage line items per second through POST /v1/usage into
# PostgreSQL, in batches of 1000 reports from several node connections at
# once, beside the goal of 50 000/s. A private PostgreSQL (fsync and
# synchronous_commit on) under var/bench-usage-pg and an optimised ramexd are
# started here and stopped at the end, also when something fails; the load
# stops by itself after RAMEX_BENCH_SECONDS.
#
#   RAMEX_BENCH_SECONDS (10)  RAMEX_BENCH_NODES (8)  RAMEX_BENCH_BATCH (1000)
#
# RAMEX_BENCH_BATCH=0 sends signed orders instead of usage (usagegen.c):
# the cost of a signed request, e.g. of RAMEX_SHARED=1 (nonces taken in
# PostgreSQL) against the default (the CPU lines then are per order).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
secs=${RAMEX_BENCH_SECONDS:-10}
nodes=${RAMEX_BENCH_NODES:-8}
batch=${RAMEX_BENCH_BATCH:-1000}
var=${RAMEX_BENCH_VAR:-$ROOT/var} # another DIR: two runs at once
pgdir=$var/bench-usage-pg
work=$var/bench-usage
ramexd=$BUILD/bin/ramexd usagegen=$BUILD/bin/usagegen
[[ -x $ramexd && -x $usagegen ]] || { echo "45-usage: build ramexd and usagegen first (make)"; exit 1; }

. "$ROOT/bench/lib.sh"
bench_pg 45-usage "$pgdir" "$work"
bench_admin 45-usage "$work"
# one pooled connection per node connection: each batch holds one for its
# whole transaction
bench_ramexd 45-usage "$work" --db_pool=$((nodes < 64 ? nodes : 64)) --log_level=warn

api() { # method path token body
  curl -sf -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
    ${4:+-d "$4"} "$url$2"
}
team=$(api POST /v1/teams "$admin" '{"name":"bench"}' | jq .id)
opacct=$(api POST /v1/accounts "$admin" '{"name":"operator","kind":"operator"}' | jq .id)
op=$(api POST /v1/tokens "$admin" "{\"name\":\"op\",\"role\":\"operator\",\"account_id\":$opacct}" | jq -r .token)
trader=$(api POST /v1/tokens "$admin" "{\"name\":\"tr\",\"role\":\"trader\",\"team_id\":$team}" | jq -r .token)
api POST /v1/markets "$op" '{"name":"spot","tick":1000,"lot":256,"min_pages":256,"max_pages":1048576,"price_min":0,"price_max":1000000000,"notice_period_s":3600,"breach_penalty":0,"delivery_deadline_s":600}' >/dev/null \
  || { echo "45-usage: setup failed"; exit 1; }
# each node sells 256 pages to the operator: one contract each, which
# usagegen delivers and then reports on
: >"$work/nodes"
for i in $(seq "$nodes"); do
  n=$(api POST /v1/nodes "$admin" "{\"name\":\"node-$i\",\"team_id\":$team}") || { echo "45-usage: setup failed"; exit 1; }
  acct=$(jq .account.id <<<"$n")
  api POST /v1/orders "$trader" "{\"market\":\"spot\",\"account_id\":$acct,\"side\":\"sell\",\"pages\":256,\"price\":100000}" >/dev/null
  cid=$(api POST /v1/orders "$op" "{\"market\":\"spot\",\"account_id\":$opacct,\"side\":\"buy\",\"pages\":256,\"price\":100000}" | jq '.trades[0].contract_id')
  echo "$(jq -r .key_id <<<"$n") $(jq -r .secret <<<"$n") $cid" >>"$work/nodes"
done

# CPU seconds (user + system) of ramexd, of every PostgreSQL process and of
# the generator, from /proc: what a report costs in each, which the rate
# alone hides when other work shares the cores.

echo "loopback, $(nproc) cores, fsync and synchronous_commit on, ${secs} s; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
rx0=$(cpu_rx) pg0=$(cpu_pg)
/usr/bin/time -f '%U %S' -o "$work/gen.cpu" "$usagegen" "$port" "$work/nodes" "$batch" "$secs" | tee "$work/out"
rx1=$(cpu_rx) pg1=$(cpu_pg)
rate=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "reports/s" || $(i+1) == "orders/s") print $i}' "$work/out")
n=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "in" && $(i-1) ~ /counted/) {gsub(/[(]/, "", $i); print $i}}' "$work/out")
awk -v n="${n:-0}" -v t="$(getconf CLK_TCK)" -v rx=$((rx1 - rx0)) -v pg=$((pg1 - pg0)) -v gen="$(awk '{print $1 + $2}' "$work/gen.cpu" 2>/dev/null)" \
  'BEGIN {if (n > 0) printf "  CPU per report: ramexd %.1f us, PostgreSQL %.1f us, the generator %.1f us\n", rx * 1e6 / t / n, pg * 1e6 / t / n, gen * 1e6 / n}'
stored=$(psql -qtA -d "$db" -c "SELECT count(*) FROM usage_reports")
echo "  stored in PostgreSQL: $stored usage reports (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
awk -v r="${rate:-0}" 'BEGIN {printf "  goal: 50000 reports/s; measured %.0f/s (%.0f%% of the goal)\n", r, r * 100 / 50000}'
