#!/usr/bin/env bash
# bench/26-instances.sh: durable orders per second, p99 and the CPU an order
# costs with 1, 2 and 3 ramexd on one PostgreSQL (exchange/owner.h: each
# market served by one instance at a time). The same load each time: single
# orders on RAMEX_BENCH_CONNS connections spread over three markets (spot,
# perm-2030, perm-2031; a perm market's buys are the operator's), each sent
# to the instance that serves its market. One instance serves all three;
# two split them (spot | both perm); three take one each. On a machine whose
# cores ramexd and PostgreSQL share, more instances cannot add cores: the
# CPU an order beside the rate shows what they cost or save.
#
#   RAMEX_BENCH_SECONDS (10)  RAMEX_BENCH_CONNS (128)
#   RAMEX_BENCH_INSTANCES ("1 2 3": the runs, in that order)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
secs=${RAMEX_BENCH_SECONDS:-10}
conns=${RAMEX_BENCH_CONNS:-128}
var=${RAMEX_BENCH_VAR:-$ROOT/var}
pgdir=$var/bench-pg-instances
work=$var/bench-instances
ramexd=$BUILD/bin/ramexd loadgen=$BUILD/bin/loadgen
[[ -x $ramexd && -x $loadgen ]] || { echo "26-instances: build ramexd and loadgen first (make)"; exit 1; }

. "$ROOT/bench/lib.sh"
bench_pg 26-instances "$pgdir" "$work"
wal_ahead=$((secs * 3 * 128 > bench_wal_keep_mib ? bench_wal_keep_mib : secs * 3 * 128))
bench_wal_ahead 26-instances "$wal_ahead"
bench_admin 26-instances "$work"
# the accounts, tokens and markets, through a first instance
bench_ramexd 26-instances "$work" --log_level=warn
bench_market 26-instances
opacct=$(api POST /v1/accounts "$admin" '{"name":"perm-buyer","kind":"operator"}' | jq .id)
op=$(api POST /v1/tokens "$admin" "{\"name\":\"perm-buyer\",\"role\":\"operator\",\"account_id\":$opacct}" | jq -r .token)
for m in perm-2030 perm-2031; do
  api POST /v1/markets "$op" "{\"name\":\"$m\",\"tick\":1000,\"lot\":256,\"min_pages\":256,\"max_pages\":1048576,\"price_min\":0,\"price_max\":1000000000,\"notice_period_s\":0,\"breach_penalty\":0,\"delivery_deadline_s\":600}" >/dev/null \
    || { echo "26-instances: could not create $m"; exit 1; }
done
markets=(spot perm-2030 perm-2031)
# a first load, not reported: the first seconds on a fresh cluster are
# slower (measured here: a third), which would count against 1 instance
RAMEX_LOADGEN_TARGETS="$port/spot/$buy/$trader,$port/perm-2030/$opacct/$op,$port/perm-2031/$opacct/$op" \
  "$loadgen" http 0 "$trader" "$sell" "$buy" "$conns" 3 >/dev/null
kill "$pid"; wait "$pid" 2>/dev/null

# which markets instance K of N serves
serves() {
  case $2 in
    1) echo all ;;
    2) [[ $1 == 1 ]] && echo spot || echo perm-2030,perm-2031 ;;
    3) echo "${markets[$(($1 - 1))]}" ;;
  esac
}
echo "loopback, $(nproc) cores, fsync and synchronous_commit on, ${secs} s each, $conns connections over 3 markets; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in ${RAMEX_BENCH_INSTANCES:-1 2 3}; do
  pids=() ports=()
  for k in $(seq "$n"); do
    mkdir -p "$work/i$k"
    bench_ramexd 26-instances "$work/i$k" --max_connections=$((conns + 64)) --max_connections_per_address=0 --log_level=warn \
      --instance="i$k" --markets="$(serves "$k" "$n")" --own_poll_ms=100
    pids+=("$pid") ports+=("$port")
  done
  # every market taken by the instance that wants it
  for i in 0 1 2; do
    case $n in 1) want=i1 ;; 2) ((i == 0)) && want=i1 || want=i2 ;; 3) want=i$((i + 1)) ;; esac
    for _ in $(seq 100); do
      got=$(psql -qtA -d "$db" -c "SELECT o.instance FROM market_owners o JOIN markets m ON m.id = o.market_id WHERE m.name = '${markets[$i]}'")
      [[ $got == "$want" ]] && break
      sleep 0.1
    done
    [[ $got == "$want" ]] || { echo "26-instances: ${markets[$i]} is served by '$got', not $want"; exit 1; }
  done
  targets=
  for i in 0 1 2; do
    m=${markets[$i]}
    k=$(psql -qtA -d "$db" -c "SELECT substr(o.instance, 2) FROM market_owners o JOIN markets m ON m.id = o.market_id WHERE m.name = '$m'")
    if [[ $m == spot ]]; then acct=$buy tok=$trader; else acct=$opacct tok=$op; fi
    targets+="${targets:+,}${ports[$((k - 1))]}/$m/$acct/$tok"
  done
  rx0=0; for p in "${pids[@]}"; do rx0=$((rx0 + $(cpu_rx "$p"))); done
  pg0=$(cpu_pg)
  out=$(RAMEX_LOADGEN_TARGETS=$targets "$loadgen" http 0 "$trader" "$sell" "$buy" "$conns" "$secs")
  rx1=0; for p in "${pids[@]}"; do rx1=$((rx1 + $(cpu_rx "$p"))); done
  pg1=$(cpu_pg)
  echo "$n instance(s):"
  echo "$out"
  norders=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[(][0-9]+$/) {gsub(/[(]/, "", $i); print $i; exit}}' <<<"$out")
  awk -v n="$norders" -v t="$(getconf CLK_TCK)" -v rx=$((rx1 - rx0)) -v pg=$((pg1 - pg0)) -v la="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN {if (n > 0) printf "  CPU per acknowledged order: ramexd %.0f us (all instances), PostgreSQL %.0f us (load average after: %s)\n", rx * 1e6 / t / n, pg * 1e6 / t / n, la}'
  for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null; done
done

# Takeover: i1 serves spot, i2 everything else and whatever nobody serves
# (own_poll_ms at its default); i1 is killed with -9, and the time until
# i2 serves spot's book is measured (the release build, no load).
pids=() ports=()
for k in 1 2; do
  mkdir -p "$work/t$k"
  [[ $k == 1 ]] && want=spot || want=all
  bench_ramexd 26-instances "$work/t$k" --log_level=warn --instance="t$k" --markets="$want"
  pids+=("$pid") ports+=("$port")
  sleep 0.5
done
owner() { psql -qtA -d "$db" -c "SELECT o.instance FROM market_owners o JOIN markets m ON m.id = o.market_id WHERE m.name = 'spot'"; }
[[ $(owner) == t1 ]] || { echo "26-instances: spot is not t1's"; exit 1; }
ms() { date +%s%3N; }
t0=$(ms)
kill -9 "${pids[0]}"; wait "${pids[0]}" 2>/dev/null
taken= served=
for _ in $(seq 500); do
  [[ -z $taken && $(owner) == t2 ]] && taken=$(($(ms) - t0))
  if [[ -n $taken ]] && curl -sf -o /dev/null -H "Authorization: Bearer $trader" "http://127.0.0.1:${ports[1]}/v1/markets/spot/book"; then
    served=$(($(ms) - t0)); break
  fi
  sleep 0.01
done
echo "takeover (own_poll_ms 500): spot taken by the other instance ${taken:-?} ms after kill -9 of its owner, its book served ${served:-?} ms after (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
kill "${pids[1]}"; wait "${pids[1]}" 2>/dev/null
