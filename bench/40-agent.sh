#!/usr/bin/env bash
# bench/40-agent.sh: ramex-agent's cost at steady state. One agent (sim
# backend, the default 10 s sample and 60 s report intervals unless told
# otherwise) trades against a real ramexd on a private PostgreSQL under
# var/bench-agent-pg: it sells into an operator bid, delivers, and reports.
# After a warm-up, its CPU (utime + stime from /proc/PID/stat) and RSS
# (VmRSS) are read over RAMEX_BENCH_SECONDS and printed beside the goals
# (<= 0.5 % of one core, <= 8 MiB), with its Pss (/proc/PID/smaps_rollup:
# shared pages divided among the processes that map them, so the agent's
# fair share of the libraries) and the machine's load average, without
# which a CPU figure from a shared machine means little. Everything started
# here is stopped at the end, also when something fails.
#
#   RAMEX_BENCH_SECONDS (30)  RAMEX_BENCH_WARMUP (3 samples + 5 s)
#   RAMEX_BENCH_SAMPLE_S (10) RAMEX_BENCH_REPORT_S (60)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
secs=${RAMEX_BENCH_SECONDS:-30}
warm=${RAMEX_BENCH_WARMUP:-}
sample_s=${RAMEX_BENCH_SAMPLE_S:-10}
report_s=${RAMEX_BENCH_REPORT_S:-60}
# Warm-up: the estimator needs two samples before the agent trades.
warm=${warm:-$((3 * sample_s + 5))}
var=${RAMEX_BENCH_VAR:-$ROOT/var} # another DIR: two runs at once
pgdir=$var/bench-agent-pg
work=$var/bench-agent
ramexd=$BUILD/bin/ramexd agent=$BUILD/bin/ramex-agent
[[ -x $ramexd && -x $agent ]] || { echo "40-agent: build ramexd and ramex-agent first (make)"; exit 1; }

apid=
. "$ROOT/bench/lib.sh"
bench_pg 40-agent "$pgdir" "$work"
bench_admin 40-agent "$work"
bench_ramexd 40-agent "$work" --log_level=warn

api() { # method path token body
  curl -sf -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
    ${4:+-d "$4"} "$url$2"
}
team=$(api POST /v1/teams "$admin" '{"name":"bench"}' | jq .id)
node=$(api POST /v1/nodes "$admin" "{\"name\":\"bench-node\",\"team_id\":$team}") \
  || { echo "40-agent: setup failed"; exit 1; }
key=$(jq -r .key_id <<<"$node")
jq -r .secret <<<"$node" >"$work/secret"; chmod 600 "$work/secret"
opacct=$(api POST /v1/accounts "$admin" '{"name":"operator","kind":"operator"}' | jq .id)
op=$(api POST /v1/tokens "$admin" "{\"name\":\"op\",\"role\":\"operator\",\"account_id\":$opacct}" | jq -r .token)
api POST /v1/markets "$op" '{"name":"spot","tick":1000,"lot":256,"min_pages":256,"max_pages":1048576,"price_min":0,"price_max":1000000000,"notice_period_s":3600,"breach_penalty":0,"delivery_deadline_s":600}' >/dev/null \
  && api POST /v1/orders "$op" '{"market":"spot","side":"buy","pages":262144,"price":150000,"tif":"gtc"}' >/dev/null \
  || { echo "40-agent: setup failed"; exit 1; }

(exec "$agent" --exchange_url="$url" --key_id="$key" --secret_file="$work/secret" \
   --backend=sim --sim_total_pages=2097152 --sim_usage_pages=524288 \
   --spool="$work/spool" --status_file="$work/status.prom" \
   --sample_s="$sample_s" --report_s="$report_s" --perm_market= \
   --tick=1000 --spot_floor=100000 --stall_value=10 --log_level=warn \
   2>"$work/agent.log") &
apid=$!
bench_pids+=("$apid")

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$apid/stat"; }
sleep "$warm"
kill -0 "$apid" 2>/dev/null || { echo "40-agent: the agent exited"; cat "$work/agent.log"; exit 1; }
c0=$(cpu) t0=$(date +%s%N) rss=0 anon=0 pss=0
load0=$(cut -d' ' -f1-3 /proc/loadavg)
end=$((SECONDS + secs))
while (( SECONDS < end )); do
  r=$(awk '/^VmRSS:/ {print $2}' "/proc/$apid/status")
  a=$(awk '/^RssAnon:/ {print $2}' "/proc/$apid/status")
  (( r > rss )) && rss=$r
  (( a > anon )) && anon=$a
  p=$(awk '/^Pss:/ {print $2}' "/proc/$apid/smaps_rollup" 2>/dev/null)
  (( ${p:-0} > pss )) && pss=$p
  sleep 1
done
c1=$(cpu) t1=$(date +%s%N) load1=$(cut -d' ' -f1-3 /proc/loadavg)
kill -0 "$apid" 2>/dev/null || { echo "40-agent: the agent exited"; cat "$work/agent.log"; exit 1; }
m() { awk -v k="$1" '$1 == k {print $2}' "$work/status.prom"; }

echo "one agent, sim backend, sample ${sample_s} s, report ${report_s} s, ${secs} s after ${warm} s warm-up"
echo "  load average $load0 at the start, $load1 at the end ($(nproc) cores)"
# VmRSS counts the shared libraries' resident pages too (libcrypto, libssl,
# jansson, libc: shared with every other process using them); RssAnon is
# the agent's own memory; Pss charges each shared page in part.
awk -v c=$((c1 - c0)) -v hz="$ticks" -v ns=$((t1 - t0)) -v rss="$rss" -v anon="$anon" -v pss="$pss" 'BEGIN {
  pct = c / hz / (ns / 1e9) * 100
  res = 1 / hz / (ns / 1e9) * 100 # one clock tick over the window
  printf "  CPU  %.3f %% of a core, %d clock ticks (one tick = %.3f %%)   (goal <= 0.5 %%)  %s\n", pct, c, res, pct <= 0.5 ? "ok" : "over"
  printf "  RSS  %.2f MiB (VmRSS peak, with shared libraries)  (goal <= 8 MiB)  %s\n", rss / 1024, rss / 1024 <= 8 ? "ok" : "over"
  printf "       %.2f MiB of it the agent'"'"'s own (RssAnon peak)\n", anon / 1024
  printf "  PSS  %.2f MiB (Pss peak, shared pages divided among their users)\n", pss / 1024
}'
echo "  contracts $(m ramex_agent_contracts), offline pages $(m ramex_agent_offline_pages), reports $(m ramex_agent_reports_total), acked $(m ramex_agent_reports_acked_total), events up $(m ramex_agent_events_up)"
kill "$apid"; wait "$apid"; apid=
echo "  after SIGTERM: offline pages $(m ramex_agent_offline_pages), pending reports $(m ramex_agent_reports_pending)"
