#!/usr/bin/env bash
# bench/25-standby.sh: what a synchronous standby costs the order path. The
# same load (POST /v1/orders, loadgen) against one ramexd, first on a lone
# primary, then with a streaming replica named in synchronous_standby_names
# (scripts/pg.sh standby, synchronous_commit = on: a COMMIT waits until the
# standby has the WAL on disk), then once more alone (the standby taken out
# with scripts/pg.sh unsync), so that a drift of the machine's load shows.
# Each line has the load average beside it: on a 2-core machine the standby
# is a third server on the same cores, so the figure is an upper bound of
# the cost where the standby has a machine of its own (and a lower bound of
# the network's: here the round trip is loopback). Then a failover: the
# primary killed (-9), the standby promoted, and the time until ramexd (on
# the multi-host conninfo) acknowledges an order again.
#
#   RAMEX_BENCH_SECONDS (10)  RAMEX_BENCH_CONNS (128)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
secs=${RAMEX_BENCH_SECONDS:-10}
conns=${RAMEX_BENCH_CONNS:-128}
var=${RAMEX_BENCH_VAR:-$ROOT/var}
pgdir=$var/bench-standby-pg
work=$var/bench-standby
ramexd=$BUILD/bin/ramexd loadgen=$BUILD/bin/loadgen
[[ -x $ramexd && -x $loadgen ]] || { echo "25-standby: build ramexd and loadgen first (make)"; exit 1; }

. "$ROOT/bench/lib.sh"
bench_pg 25-standby "$pgdir" "$work"
wal_mib=$((secs * 64 > bench_wal_keep_mib ? bench_wal_keep_mib : secs * 64))
bench_wal_ahead 25-standby "$wal_mib"
# ramexd on both hosts from the start, the standby's port chosen now: with
# no standby yet libpq finds it closed and keeps the first
bench_admin 25-standby "$work"
spare=$(bash "$ROOT/scripts/pg.sh" freeport) || exit 1
db="dbname=ramex host=127.0.0.1,127.0.0.1 port=$PGPORT,$spare user=$PGUSER target_session_attrs=read-write connect_timeout=2"
bench_ramexd 25-standby "$work" --max_connections=$((conns + 64)) --max_connections_per_address=0 --log_level=warn
bench_market 25-standby
sync_state() {
  psql -qtA -d postgres -c "SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE application_name = 'ramex_standby'), 'none')"
}
run() { # label
  local la0 out
  la0=$(cut -d' ' -f1 /proc/loadavg)
  out=$("$loadgen" http "$port" "$trader" "$sell" "$buy" "$conns" "$secs" 2>&1)
  printf '%-30s %s  (load average %s before, %s after)\n' "$1" "$(grep -m1 ' /s ' <<<"$out" | sed 's/^ *ramexd HTTP, [0-9]* connections: *//')" "$la0" "$(cut -d' ' -f1 /proc/loadavg)"
}
echo "loopback, $(nproc) cores, fsync and synchronous_commit on, $conns connections, ${secs} s each"
run "lone primary, no standby:"
# the standby, on the port ramexd's conninfo names second; its WAL segments
# made ahead too (a fresh standby otherwise zero-fills a segment every 16
# MiB while the primary's commits wait for it), then a restartpoint so that
# it reuses them
RAMEX_PG_PORT=$spare RAMEX_PG_OPTS="-c min_wal_size=${bench_wal_keep_mib}MB -c max_wal_size=$((bench_wal_keep_mib * 2))MB" \
  bash "$ROOT/scripts/pg.sh" standby "$pgdir" >/dev/null || { echo "25-standby: the standby did not start"; exit 1; }
bench_wal_ahead 25-standby "$wal_mib"
psql -qtA -h 127.0.0.1 -p "$spare" -d postgres -c CHECKPOINT >/dev/null
run "synchronous standby ($(sync_state)):"
bash "$ROOT/scripts/pg.sh" unsync "$pgdir" >/dev/null
run "standby, not waited for ($(sync_state)):"

# Failover under load: kill -9 the primary, promote the standby, and time
# the first acknowledged order after the promotion.
bash "$ROOT/scripts/pg.sh" standby "$pgdir" >/dev/null
"$loadgen" http "$port" "$trader" "$sell" "$buy" 16 "$((secs + 10))" >"$work/failover-load.log" 2>&1 &
lg=$!
bench_pids+=("$lg")
sleep 3
t0=$(date +%s%N)
bash "$ROOT/scripts/pg.sh" kill "$pgdir"
t1=$(date +%s%N)
bash "$ROOT/scripts/pg.sh" promote "$pgdir" || { echo "25-standby: promote failed"; exit 1; }
t2=$(date +%s%N)
body="{\"market\":\"spot\",\"account_id\":$sell,\"side\":\"sell\",\"pages\":256,\"price\":999000000}"
until [[ $(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $trader" \
           -H 'Content-Type: application/json' -d "$body" "$url/v1/orders") == 201 ]]; do
  (( $(date +%s%N) - t2 > 60000000000 )) && { echo "25-standby: no order acknowledged 60 s after the promotion"; exit 1; }
  sleep 0.01
done
t3=$(date +%s%N)
wait "$lg"
awk -v k=$(((t1 - t0) / 1000000)) -v p=$(((t2 - t1) / 1000000)) -v a=$(((t3 - t2) / 1000000)) -v la="$(cut -d' ' -f1-3 /proc/loadavg)" \
  'BEGIN {printf "failover under load: primary killed in %d ms, standby promoted in %d ms, first order acknowledged %d ms after the promotion (load average %s)\n", k, p, a, la}'
