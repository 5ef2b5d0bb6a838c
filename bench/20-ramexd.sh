#!/usr/bin/env bash
# bench/20-ramexd.sh: durable orders per second through ramexd's HTTP API on
# loopback, with p50/p99 latency, beside the same machine's rate for one
# PostgreSQL transaction per order. A private PostgreSQL (fsync and
# synchronous_commit on) under var/bench-pg and an optimised ramexd are
# started here and stopped at the end, also when something fails. Beside
# the rates it prints the CPU that one order costs in ramexd and in
# PostgreSQL (the throughput alone says little when other work shares the
# cores), the WAL it writes, and the rate of GET /healthz, the HTTP edge with
# no work behind it; and how busy the cores were, and how much of them the
# host took (steal, on a virtual machine: a run with much of it is slower for
# reasons outside the exchange). The same orders go through POST /v1/orders/batch too,
# ten to a request (with an eighth of the connections, so that about as
# many orders are in flight): the exchange's rate when HTTP costs less.
#
#   RAMEX_BENCH_SECONDS (10)  RAMEX_BENCH_CONNS (128)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
secs=${RAMEX_BENCH_SECONDS:-10}
conns=${RAMEX_BENCH_CONNS:-128}
var=${RAMEX_BENCH_VAR:-$ROOT/var} # another DIR: two runs at once
pgdir=$var/bench-pg
work=$var/bench-ramexd
ramexd=$BUILD/bin/ramexd loadgen=$BUILD/bin/loadgen
[[ -x $ramexd && -x $loadgen ]] || { echo "20-ramexd: build ramexd and loadgen first (make)"; exit 1; }

. "$ROOT/bench/lib.sh"
bench_pg 20-ramexd "$pgdir" "$work"
# WAL for about 128 MiB per second of load (a fast run writes ~100), made
# ahead so that the figures are a running server's, not a fresh cluster's
wal_ahead=$((secs * 128 > bench_wal_keep_mib ? bench_wal_keep_mib : secs * 128))
bench_wal_ahead 20-ramexd "$wal_ahead"
wal_files() { find "$PGHOST/data/pg_wal" -maxdepth 1 -type f -name '0*' | wc -l; }
wal_files0=$(wal_files)
bench_admin 20-ramexd "$work"
bench_ramexd 20-ramexd "$work" --max_connections=$((conns + 64)) --max_connections_per_address=0 --log_level=warn

bench_market 20-ramexd

# CPU of ramexd and PostgreSQL: cpu_rx and cpu_pg (lib.sh).

# all, busy and stolen CPU ticks of the machine so far (/proc/stat)
cpu_all() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t, t - $5 - $6 - $9, $9; exit}' /proc/stat; }
echo "loopback, $(nproc) cores, fsync and synchronous_commit on, ${secs} s each, $wal_ahead MiB of WAL segments made ahead; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# orders LOADGEN-ARGS...: one load, and what its orders cost.
orders() {
  local rx0 pg0 wal0 out rx1 pg1 wal n b0 c0 s0 st0 st1
  rx0=$(cpu_rx) pg0=$(cpu_pg) st0=$(cpu_all)
  # WAL written while the load runs: what the rows of an order cost on disk
  wal0=$(psql -qtA -d "$db" -c "SELECT pg_current_wal_lsn()")
  read -r b0 c0 s0 < <(batches)
  out=$("$loadgen" "$@")
  rx1=$(cpu_rx) pg1=$(cpu_pg) st1=$(cpu_all)
  wal=$(psql -qtA -d "$db" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')::bigint")
  echo "$out"
  n=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[(][0-9]+$/) {gsub(/[(]/, "", $i); print $i; exit}}' <<<"$out")
  awk -v n="$n" -v wal="$wal" 'BEGIN {if (n > 0) printf "  WAL per acknowledged order: %.0f bytes\n", wal / n}'
  awk -v n="$n" -v t="$(getconf CLK_TCK)" -v rx=$((rx1 - rx0)) -v pg=$((pg1 - pg0)) -v la="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN {if (n > 0) printf "  CPU per acknowledged order: ramexd %.0f us, PostgreSQL %.0f us (load average after: %s)\n", rx * 1e6 / t / n, pg * 1e6 / t / n, la}'
  # steal: the time a virtual machine's cores ran something else (the
  # host's); figures from runs with much of it are not comparable
  awk -v a="$st0" -v b="$st1" 'BEGIN {split(a, x, " "); split(b, y, " "); tot = y[1] - x[1]; if (tot > 0) printf "  the cores: %.0f %% busy, %.0f %% taken by the host (steal)\n", 100 * (y[2] - x[2]) / tot, 100 * (y[3] - x[3]) / tot}'
  read -r b1 c1 s1 < <(batches)
  awk -v b=$((b1 - b0)) -v c="$c1" -v c0="$c0" -v s="$s1" -v s0="$s0" \
    'BEGIN {if (b > 0) printf "  group commit: %d batches, %.1f commands and %.2f ms from sending to COMMIT each\n", b, (c - c0) / b, (s - s0) * 1000 / b}'
}
# batches, commands and seconds to COMMIT so far (ramexd's /metrics)
batches() {
  curl -s "$url/metrics" | awk '/^ramex_batches_total/ {b=$2} /^ramex_batch_commands_total/ {c=$2} /^ramex_commit_seconds_total/ {s=$2} END {print b + 0, c + 0, s + 0}'
}
orders http "$port" "$trader" "$sell" "$buy" "$conns" "$secs"
# The same orders, ten to a request (POST /v1/orders/batch): what the
# exchange does when HTTP costs it and the load generator a tenth as much.
orders batch "$port" "$trader" "$sell" "$buy" "$((conns / 8))" "$secs" 10
echo "  WAL segments made during the order loads: $(($(wal_files) - wal_files0)) (each one stalls every commit while it is zero-filled)"
psql -qtA -d "$db" -c "SELECT '  committed: ' || (SELECT count(*) FROM orders) || ' orders, ' || (SELECT count(*) FROM trades) || ' trades and contracts, ' || (SELECT count(*) FROM idempotency) || ' idempotency rows'"
# The HTTP edge and the load generator alone: GET /healthz does no work.
"$loadgen" get "$port" /healthz "$conns" "$secs"
kill "$pid"; wait "$pid"; pid=
"$loadgen" pg "$db" 1 "$secs"
"$loadgen" pg "$db" "$conns" "$secs"
