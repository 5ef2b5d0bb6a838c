#!/usr/bin/env bash
# `make demo`: the whole system on this machine, until Ctrl-C.
#
# A private PostgreSQL under var/demo/, ramexd on 127.0.0.1, the operator's
# standing bids (spot at 100 000 n$/page-year, perm at 200 000) and a few
# sim-backed agents of different sizes and workloads that trade with each other and
# the operator. Prints the dashboard's address and tokens, and stops
# everything it started on Ctrl-C (or when any part dies).
#
#   RAMEX_DEMO_PORT   port for ramexd (default 8080, or any free one if busy)
#   RAMEX_DEMO_AGENTS how many agents (default 3)
#   RAMEX_DEMO_SECONDS stop by itself after this many seconds (default: never)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${RAMEX_BUILD:-$ROOT/build}/bin
DEMO=$ROOT/var/demo
PIDS=()

say() { printf '\033[1mdemo:\033[0m %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

cleanup() {
  trap - EXIT INT TERM
  say "stopping"
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[$i]}" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  bash scripts/pg.sh stop "$DEMO/pg" >/dev/null 2>&1 || true
  say "stopped; logs are in var/demo/"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ -x $BIN/ramexd ]] || die "build/bin/ramexd is missing: run make"
command -v node >/dev/null || die "node is missing: run scripts/deps.sh"
command -v curl >/dev/null || die "curl is missing: run scripts/deps.sh"

# A fresh demo every time: old data would make the first minute confusing.
bash scripts/pg.sh destroy "$DEMO/pg" >/dev/null 2>&1 || true
rm -rf "$DEMO"; mkdir -p "$DEMO"
say "starting a private PostgreSQL in var/demo/pg"
eval "$(bash scripts/pg.sh start "$DEMO/pg")"
DB="host=$PGHOST port=$PGPORT dbname=ramex user=$PGUSER"

"$BIN/ramexd" migrate --db="$DB" 2>>"$DEMO/ramexd.log"
ADMIN=$("$BIN/ramexd" token create --role=admin --name=demo-admin --db="$DB" 2>>"$DEMO/ramexd.log")

port=${RAMEX_DEMO_PORT:-8080}
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then port=0; fi
rm -f "$DEMO/port"
web_flag=()
"$BIN/ramexd" --help 2>&1 | grep -q -- '--web_root' && web_flag=(--web_root="$ROOT/${RAMEX_WEB_DIR:-build/web}")
(exec "$BIN/ramexd" --listen="127.0.0.1:$port" --db="$DB" --port_file="$DEMO/port" \
   "${web_flag[@]}" >>"$DEMO/ramexd.log" 2>&1) &
PIDS+=($!)
for _ in $(seq 1 100); do [[ -s $DEMO/port ]] && break; sleep 0.1; done
[[ -s $DEMO/port ]] || { tail -n 20 "$DEMO/ramexd.log" >&2; die "ramexd did not start"; }
URL="http://127.0.0.1:$(cat "$DEMO/port")"
say "ramexd listens on $URL"

# api TOKEN METHOD PATH [JSON] -> response body on stdout; fails on >= 400.
api() {
  local out code
  out=$(curl -sS -o - -w '\n%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' ${4:+--data "$4"} "$URL$3")
  code=${out##*$'\n'}; out=${out%$'\n'*}
  if (( code >= 400 )); then echo "demo: $2 $3 -> $code $out" >&2; return 1; fi
  printf '%s' "$out"
}
# field JSON NAME -> the value of a top-level field
field() { node -e 'const o=JSON.parse(process.argv[1]); const v=o[process.argv[2]]; process.stdout.write(typeof v==="object"?JSON.stringify(v):String(v))' "$1" "$2"; }

year=$(date -u +%Y)
api "$ADMIN" POST /v1/teams '{"name":"fleet"}' >"$DEMO/team.json"
TEAM=$(field "$(cat "$DEMO/team.json")" id)
OPACC=$(field "$(api "$ADMIN" POST /v1/accounts '{"name":"dc-owner","kind":"operator"}')" id)
OPERATOR=$(field "$(api "$ADMIN" POST /v1/tokens "{\"role\":\"operator\",\"name\":\"demo-operator\",\"account_id\":$OPACC}")" token)
FINANCE=$(field "$(api "$ADMIN" POST /v1/tokens '{"role":"finance","name":"demo-finance"}')" token)
TRADER=$(field "$(api "$ADMIN" POST /v1/tokens "{\"role\":\"trader\",\"name\":\"demo-trader\",\"team_id\":$TEAM}")" token)

# Markets: prices in n$/page-year, pages in 4 KiB pages (256 pages = 1 MiB).
market() {
  api "$OPERATOR" POST /v1/markets "{\"name\":\"$1\",\"tick\":100,\"lot\":256,\"min_pages\":256,
    \"max_pages\":16777216,\"price_min\":0,\"price_max\":10000000,\"notice_period_s\":$2,
    \"breach_penalty\":$3,\"delivery_deadline_s\":30}" >/dev/null
}
market spot 60 0
market "perm-$year" 0 50000
say "markets spot and perm-$year created"

# The operator's standing bids for offline pages (the "green" incentive).
api "$OPERATOR" POST /v1/orders "{\"market\":\"spot\",\"side\":\"buy\",\"pages\":1048576,\"price\":100000,\"client_order_id\":\"standing-spot\"}" >/dev/null
api "$OPERATOR" POST /v1/orders "{\"market\":\"perm-$year\",\"side\":\"buy\",\"pages\":524288,\"price\":200000,\"client_order_id\":\"standing-perm\"}" >/dev/null
say "operator bids: spot 100000 n\$/page-year (4 GiB), perm-$year 200000 (2 GiB)"

agents=0
if [[ -x $BIN/ramex-agent ]]; then
  # Machines of different sizes whose workloads use different shares of
  # their memory, so that some have much to sell and some little.
  usage_pct=(25 50 80 35 60 20)
  for ((i = 0; i < ${RAMEX_DEMO_AGENTS:-3}; i++)); do
    total=$((2097152 * (i + 1)))
    used=$((total * ${usage_pct[$((i % 6))]} / 100))
    node_json=$(api "$ADMIN" POST /v1/nodes "{\"name\":\"node-$i\",\"team_id\":$TEAM}")
    key=$(field "$node_json" key_id)
    mkdir -p "$DEMO/agent-$i"
    field "$node_json" secret >"$DEMO/agent-$i/secret"
    chmod 0600 "$DEMO/agent-$i/secret"
    cat >"$DEMO/agent-$i/agent.conf" <<EOF
exchange_url = $URL
key_id = $key
secret_file = $DEMO/agent-$i/secret
backend = sim
sim_total_pages = $total
sim_usage_pages = $used
spool = $DEMO/agent-$i/spool
status_file = $DEMO/agent-$i/status.prom
perm_market = perm-$year
tick = 100
sample_s = 2
report_s = 10
stall_value = 1
spot_floor = 90000
perm_floor = 150000
EOF
    (exec "$BIN/ramex-agent" --config="$DEMO/agent-$i/agent.conf" >>"$DEMO/agent-$i/log" 2>&1) &
    PIDS+=($!)
    agents=$((agents + 1))
  done
  say "$agents sim agents started; logs in var/demo/agent-*/log"
else
  say "ramex-agent is not built yet: no agents trade in this demo"
fi

cat <<EOF

  Dashboard:     $URL/
  Admin token:   $ADMIN
  Operator:      $OPERATOR
  Finance:       $FINANCE
  Trader (team fleet): $TRADER

  Try: curl -H 'Authorization: Bearer $TRADER' $URL/v1/markets/spot/book
  Ctrl-C stops everything.

EOF

deadline=$(( ${RAMEX_DEMO_SECONDS:-0} > 0 ? SECONDS + RAMEX_DEMO_SECONDS : 0 ))
while :; do
  for p in "${PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null || die "a demo process ($p) exited; see var/demo/*.log"
  done
  (( deadline > 0 && SECONDS >= deadline )) && break
  sleep 1
done
