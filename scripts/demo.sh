#!/usr/bin/env bash
# `make demo`: the whole system on this machine, until Ctrl-C.
#
# A private PostgreSQL under var/demo/, ramexd on 127.0.0.1 billing every
# 10 s, the operator's standing bids (spot at 100 000 n$/page-year, perm at
# 200 000) and sim-backed agents with steady, diurnal and bursty workloads
# that trade with the operator and with each other (a node short of memory
# borrows from the others). Prints the pages' addresses and the tokens; on
# Ctrl-C (or RAMEX_DEMO_SECONDS, or when any part dies) prints what the
# market did and stops everything it started.
#
#   RAMEX_DEMO_PORT    port for ramexd (default 8080, or any free one if busy)
#   RAMEX_DEMO_AGENTS  how many agents (default 4, at most 6)
#   RAMEX_DEMO_SECONDS stop by itself after this many seconds (default: never)
#   RAMEX_DEMO_SUMMARY_PAGES, RAMEX_DEMO_SUMMARY_LIMIT  the summary reads at
#                      most this many pages of this many rows of each listing
#                      (default 20 of 500); past them it says "not all read"
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${RAMEX_BUILD:-$ROOT/${BUILD:-build}}/bin
DEMO=$ROOT/var/demo
PIDS=()
URL=
FINANCE=
TRADER=

say() { printf '\033[1mdemo:\033[0m %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# GET as finance, the body on stdout ("" when it fails).
fin_get() { curl -sS -f -H "Authorization: Bearer $FINANCE" "$URL$1" 2>/dev/null || true; }

# Every item of a listing, page by page ({items, more} on stdout; {items:
# []} when it fails): PATH with limit=SUMMARY_LIMIT, then the page's `next`
# as CURSOR (before, or after for usage), at most SUMMARY_PAGES pages;
# `more` says the listing went on past them, so a count says it is not all.
SUMMARY_PAGES=${RAMEX_DEMO_SUMMARY_PAGES:-20}
SUMMARY_LIMIT=${RAMEX_DEMO_SUMMARY_LIMIT:-500}
all_pages() {
  node -e '
    const [url, path, cursor, token, pages, limit] = process.argv.slice(1);
    (async () => {
      const items = []; let next = null, more = false;
      for (let i = 0; ; i++) {
        if (i === +pages) { more = true; break; }
        const q = url + path + (path.includes("?") ? "&" : "?") + "limit=" + limit +
                  (next === null ? "" : "&" + cursor + "=" + encodeURIComponent(next));
        const r = await fetch(q, {headers: {Authorization: "Bearer " + token}});
        if (!r.ok) break;
        const o = await r.json();
        if (!o || !Array.isArray(o.items)) break;
        items.push(...o.items);
        next = o.next === undefined ? null : o.next;
        if (next === null) break;
      }
      console.log(JSON.stringify({items, more}));
    })().catch(() => console.log("{\"items\": []}"));
  ' "$URL" "$1" "$2" "${3:-$FINANCE}" "$SUMMARY_PAGES" "$SUMMARY_LIMIT"
}
# "N", or "at least N (not all read)" when the listing went on past what
# was read
counted='const n = (o.more ? "at least " : "") + o.items.length + (o.more ? " (not all read)" : "");'

# What the market did, from the API (finance sees everything), every page
# of it. The JSON goes to node on its standard input: as an argument, a
# long list is past the kernel's limit for one ("Argument list too long").
summary() {
  [[ -n $URL && -n $FINANCE ]] || return 0
  curl -sS -f "$URL/readyz" >/dev/null 2>&1 || return 0
  local trades=0 more='' m t
  for m in spot "perm-$(date -u +%Y)"; do
    t=$(all_pages "/v1/markets/$m/trades" before "$TRADER")
    trades=$((trades + $(count <<<"$t")))
    [[ $(json 'console.log(!!o.more)' <<<"$t") == true ]] && more='at least '
  done
  say "after ${SECONDS}s: $more$trades trades${more:+ (not all read)}"
  say "  contracts: $(all_pages /v1/contracts before | json "$counted"'
      const k = {};
      for (const c of o.items) { const s = c.delivery + " " + c.state; k[s] = (k[s] || 0) + 1; }
      console.log(n + (o.items.length ? " (" + Object.entries(k).map(e => e[1] + " " + e[0]).join(", ") + ")" : ""));
    ')"
  say "  usage reports: $(all_pages /v1/usage after | json "$counted"' console.log(n)')"
  say "  invoices: $(all_pages /v1/invoices before | json "$counted"'
      const f = v => (v < 0 ? "-" : "") + "$" + (Math.abs(v) / 1e9).toFixed(6);
      console.log(n + (o.items.length ? ": " + o.items.map(i => i.account + " " + f(i.total)).join(", ") : ""));
    ')"
  say "  ledger check: $(fin_get /v1/ledger/check | node -e '
      try { const o = JSON.parse(require("fs").readFileSync(0, "utf8"));
            console.log(o.ok ? "balanced, " + o.postings + " postings" : "NOT balanced: " + o.problems.join("; ")) }
      catch (e) { console.log("not available") }
    ')"
}
# json SCRIPT: runs SCRIPT with o = the page of items on standard input
# ({items: []} when it is empty or not JSON)
json() { node -e 'let o; try { o = JSON.parse(require("fs").readFileSync(0, "utf8")); } catch (e) {} if (!o || !Array.isArray(o.items)) o = {items: []}; '"$1"; }
# count: the number of .items of the JSON on standard input
count() { json 'console.log(o.items.length)'; }

cleanup() {
  trap - EXIT INT TERM
  summary || true
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
# Ctrl-C is how a demo ends: the same summary as a timed run, and exit 0.
# (ramexd and the agents run in sessions of their own, setsid below, so the
# terminal's SIGINT does not stop them before the summary asks them.)
trap 'echo; exit 0' INT TERM

# One demo a tree: a second one would destroy the first's PostgreSQL and
# var/demo/ under it (found from outside: the first ran on without its
# database and printed no summary). The lock is this shell's alone: fd 9
# is closed for every program it starts (9>&-), so that a demo killed
# with -9 leaves no lock behind in a process of its.
mkdir -p "$ROOT/var"
exec 9>"$ROOT/var/demo.lock"
flock -n 9 || { trap - EXIT; die "another make demo runs in this tree (var/demo/ is its): stop it with Ctrl-C first"; }

[[ -x $BIN/ramexd ]] || die "$BIN/ramexd is missing: run make"
command -v node >/dev/null || die "node is missing: run scripts/deps.sh"
command -v curl >/dev/null || die "curl is missing: run scripts/deps.sh"

# A fresh demo every time: old data would make the first minute confusing.
bash scripts/pg.sh destroy "$DEMO/pg" >/dev/null 2>&1 || true
rm -rf "$DEMO"; mkdir -p "$DEMO"
say "starting a private PostgreSQL in var/demo/pg"
eval "$(bash scripts/pg.sh start "$DEMO/pg" 9>&-)"
DB="host=$PGHOST port=$PGPORT dbname=ramex user=$PGUSER"

"$BIN/ramexd" migrate --db="$DB" 2>>"$DEMO/ramexd.log"
ADMIN=$("$BIN/ramexd" token create --role=admin --name=demo-admin --db="$DB" 2>>"$DEMO/ramexd.log")

port=${RAMEX_DEMO_PORT:-8080}
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then port=0; fi
rm -f "$DEMO/port"
flags=()
help=$("$BIN/ramexd" --help 2>&1 || true)
grep -q -- '--web_root' <<<"$help" && flags+=(--web_root="$ROOT/${RAMEX_WEB_DIR:-build/web}")
# Bill every 10 s, so that invoices accrue while one watches.
grep -q -- '--billing_interval_s' <<<"$help" && flags+=(--billing_interval_s=10)
(exec setsid "$BIN/ramexd" --listen="127.0.0.1:$port" --db="$DB" --port_file="$DEMO/port" \
   "${flags[@]}" >>"$DEMO/ramexd.log" 2>&1 9>&-) &
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
# Delivery within 30 s, a spot recall's notice 60 s: short enough to watch.
market() {
  api "$OPERATOR" POST /v1/markets "{\"name\":\"$1\",\"tick\":100,\"lot\":256,\"min_pages\":256,
    \"max_pages\":1073741824,\"price_min\":0,\"price_max\":10000000,\"notice_period_s\":$2,
    \"breach_penalty\":$3,\"delivery_deadline_s\":30}" >/dev/null
}
market spot 60 0
market "perm-$year" 0 50000
say "markets spot and perm-$year created"

# The operator's standing bids for offline pages (the "green" incentive).
api "$OPERATOR" POST /v1/orders "{\"market\":\"spot\",\"side\":\"buy\",\"pages\":67108864,\"price\":100000,\"client_order_id\":\"standing-spot\"}" >/dev/null
api "$OPERATOR" POST /v1/orders "{\"market\":\"perm-$year\",\"side\":\"buy\",\"pages\":33554432,\"price\":200000,\"client_order_id\":\"standing-perm\"}" >/dev/null
say "operator bids: spot 100000 n\$/page-year (256 GiB), perm-$year 200000 (128 GiB)"

# The sim agents, one line each: name, workload profile, machine pages, the
# workload's pages (steady level, diurnal mean, bursty quiet level), its
# swing (diurnal amplitude, highest burst), the profile's period in seconds
# (a diurnal "day", a bursty slot), and the n$ one second of stall costs,
# which prices what the node asks and bids. 262144 pages = 1 GiB: these
# are data-center machines of 256 GiB to 1 TiB, so that a minute of the
# market makes bills of whole cents.
#   node-0  a big steady machine with much to spare: sells to the operator
#   node-1  diurnal, a day every 2 minutes: more to sell at "night"
#   node-2  bursty, 20 s slots, its memory worth much: in a high burst it
#           is short, recalls what it sold and borrows, then gives it back
#   node-3  a small machine whose workload needs all it has and more: it
#           bids on spot and borrows from the others (a lend contract)
#   node-4, node-5 (RAMEX_DEMO_AGENTS=6): one more diurnal and bursty
agent_specs=(
  "node-0 steady  268435456 67108864        0   0     100"
  "node-1 diurnal 134217728 53687091 33554432 120     100"
  "node-2 bursty  134217728 80530636 53687091  20 5000000"
  "node-3 steady   67108864 67108864        0   0 5000000"
  "node-4 diurnal  67108864 33554432 16777216  90     100"
  "node-5 bursty  268435456 67108864 134217728 30     100"
)
agents=0
if [[ -x $BIN/ramex-agent ]]; then
  n=${RAMEX_DEMO_AGENTS:-4}
  (( n <= ${#agent_specs[@]} )) || die "RAMEX_DEMO_AGENTS is at most ${#agent_specs[@]}"
  for ((i = 0; i < n; i++)); do
    read -r name profile total used swing period stall <<<"${agent_specs[$i]}"
    node_json=$(api "$ADMIN" POST /v1/nodes "{\"name\":\"$name\",\"team_id\":$TEAM}")
    key=$(field "$node_json" key_id)
    mkdir -p "$DEMO/$name"
    field "$node_json" secret >"$DEMO/$name/secret"
    chmod 0600 "$DEMO/$name/secret"
    # Sellers ask at least 90 000 n$/page-year on spot, so they fill the
    # operator's 100 000 bid first and then rest for the short node, whose
    # bids go up to 150 000 (the brief's lend price).
    {
      echo "exchange_url = $URL"
      echo "key_id = $key"
      echo "secret_file = $DEMO/$name/secret"
      echo "backend = sim"
      echo "sim_total_pages = $total"
      echo "sim_usage_pages = $used"
      echo "sim_profile = $profile"
      echo "sim_swing_pages = $swing"
      echo "sim_period_s = $(( period > 0 ? period : 86400 ))"
      echo "sim_seed = $(( i + 1 ))"
      echo "spool = $DEMO/$name/spool"
      echo "status_file = $DEMO/$name/status.prom"
      echo "perm_market = perm-$year"
      echo "tick = 100"
      echo "sample_s = 2"
      echo "report_s = 10"
      echo "stable_samples = 5"
      echo "stall_value = $stall"
      echo "spot_floor = 90000"
      echo "perm_floor = 150000"
      echo "bid_ceiling = 150000"
      # no lend data path: the demo's lends live in the simulator, whose
      # figure each side reports (an attaching buyer with no lender to
      # reach would report 0: nothing delivered)
      echo "lend_borrow_mode = off"
    } >"$DEMO/$name/agent.conf"
    (exec setsid "$BIN/ramex-agent" --config="$DEMO/$name/agent.conf" >>"$DEMO/$name/log" 2>&1 9>&-) &
    PIDS+=($!)
    say "  $name: $profile workload, $((total / 262144)) GiB machine"
    agents=$((agents + 1))
  done
  say "$agents sim agents started; logs in var/demo/node-*/log"
else
  say "ramex-agent is not built yet: no agents trade in this demo"
fi

cat <<EOF

  Dashboard:     $URL/
  Market view:   $URL/web/market.html
  Trading page:  $URL/web/trade.html      (sign in with the trader token)
  Billing:       $URL/web/billing.html    (sign in with the finance token)

  Tokens (paste one into a page, or export RAMEX_TOKEN for ramexctl):
    finance:   $FINANCE
    trader:    $TRADER   (team fleet: the nodes)
    operator:  $OPERATOR
    admin:     $ADMIN

  Try: RAMEX_URL=$URL RAMEX_TOKEN=$FINANCE $BIN/ramexctl invoices list
       RAMEX_URL=$URL RAMEX_TOKEN=$TRADER $BIN/ramexctl contracts list
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
