#!/usr/bin/env bash
# tests/lendagent/suite.sh — the agents execute a lend contract on the direct
# path in a real kernel (see README.md). A private PostgreSQL and ramexd on
# 127.0.0.1 here; one qemu boot whose agents reach that ramexd through
# qemu's user network. The guest (init.sh) prints AGL-* markers; this script
# judges by them, then by what the exchange recorded. Last line: "N passed,
# M failed". LENDAGENT_DEVICE=ublk: B's agent borrows with lend_device =
# ublk in Debian 12's 6.12 kernel (ublk_drv; tests/lending/ublk.sh's), not
# in make check.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
BIN=${RAMEX_BUILD:-$ROOT/$BUILD}/bin
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}
DEVICE=${LENDAGENT_DEVICE:-nbd}
WORK=$ROOT/$BUILD/lendagent-test${LENDAGENT_DEVICE:+-$DEVICE}
. "$ROOT/tests/lending/guest.sh"
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
MARKERS="CONTRACT $([[ $DEVICE == ublk ]] && echo UBLK || echo DIRECT) STATUS SWAPPED RECALL RECALL-DATA METERS AGENT-END TWO SWAPPED-TWO METERS-TWO BUYER-END BUYER-END-DATA METERS-END AGENT-END-TWO END"
give_up() { bad "$1"; echo "$pass passed, $((fail + $(wc -w <<<"$MARKERS") + 1)) failed"; exit 1; }

pg=$WORK/pg ramexd_pid=
cleanup() {
  [[ -n $ramexd_pid ]] && kill "$ramexd_pid" 2>/dev/null && wait "$ramexd_pid" 2>/dev/null
  bash "$ROOT/scripts/pg.sh" destroy "$pg" >/dev/null 2>&1
}
trap cleanup EXIT
mkdir -p "$OUT" "$WORK"
make -s -C "$ROOT" -j2 "$BUILD/bin/ramexd" "$BUILD/bin/ramex-agent" "$BUILD/bin/ramex-lend-server" \
  "$BUILD/bin/ramex-lend-nbd" "$BUILD/bin/ramex-lend-workload" "$BUILD/bin/ramex-lend-bench" \
  "$BUILD/bin/ramex-lend-ublk" >/dev/null || give_up "build the agent and the lending programs"
if [[ $DEVICE == ublk ]]; then
  # ramex.ko is built for the host's kernel: the lender holds anonymous
  # memory in this one
  LEND_GUEST_KROOT=$(lend_guest_ublk_kroot) || give_up "get the ublk kernel"
  export LEND_GUEST_KROOT
else
  make -s -C "$ROOT" kmod >"$WORK/kmod.log" 2>&1 || echo "note: ramex.ko did not build; the lender uses anonymous memory"
fi
KVER=$(lend_guest_kver) || give_up "find a guest kernel"

# ---- the exchange: PostgreSQL, ramexd, a team, the spot market, two nodes
log=$OUT/lendagent${LENDAGENT_DEVICE:+-$DEVICE}-ramexd.log
: >"$log"
bash "$ROOT/scripts/pg.sh" destroy "$pg" >/dev/null 2>&1
bash "$ROOT/scripts/pg.sh" start "$pg" >>"$log" 2>&1 || give_up "start PostgreSQL (see $log)"
eval "$(bash "$ROOT/scripts/pg.sh" env "$pg")"
psql() { "${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}/psql" -X -q -At "$@"; }
psql -d postgres -c "CREATE DATABASE ramex_lendagent" >>"$log" 2>&1 || give_up "create the database (see $log)"
DB="host=$PGHOST port=$PGPORT dbname=ramex_lendagent user=$PGUSER"
"$BIN/ramexd" migrate --db="$DB" >>"$log" 2>&1 || give_up "ramexd migrate (see $log)"
ADMIN=$("$BIN/ramexd" token create --role=admin --name=lendagent --db="$DB" 2>>"$log") || give_up "ramexd token create (see $log)"
rm -f "$WORK/port"
"$BIN/ramexd" --listen=127.0.0.1:0 --db="$DB" --port_file="$WORK/port" >>"$log" 2>&1 &
ramexd_pid=$!
for _ in $(seq 1 100); do [[ -s $WORK/port ]] && break; sleep 0.1; done
[[ -s $WORK/port ]] || give_up "ramexd did not start (see $log)"
URL=http://127.0.0.1:$(cat "$WORK/port")
# api TOKEN METHOD PATH JSON: the answer's body; fails on a status >= 400
api() {
  local out
  out=$(curl -sS -w '\n%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
    -H 'Content-Type: application/json' --data "$4" "$URL$3") || return 1
  [[ ${out##*$'\n'} -lt 400 ]] || { echo "lendagent: $2 $3: ${out//$'\n'/ }" >>"$log"; return 1; }
  printf '%s' "${out%$'\n'*}"
}
# json_field JSON A.B: the value at that path (empty when absent)
json_field() {
  node -e 'let v = JSON.parse(process.argv[1]); for (const k of process.argv[2].split(".")) v = v == null ? v : v[k]; process.stdout.write(v == null ? "" : String(v))' "$1" "$2"
}
files=$WORK/files
rm -rf "$files" && mkdir -p "$files/agent" && chmod 700 "$files/agent"
setup_exchange() {
  team=$(json_field "$(api "$ADMIN" POST /v1/teams '{"name":"blue"}')" id) &&
  opacc=$(json_field "$(api "$ADMIN" POST /v1/accounts '{"name":"operator","kind":"operator"}')" id) &&
  op=$(json_field "$(api "$ADMIN" POST /v1/tokens "{\"name\":\"op\",\"role\":\"operator\",\"account_id\":$opacc}")" token) &&
  # a recall's notice long enough for the bridge's swapoff under TCG
  api "$op" POST /v1/markets '{"name":"spot","tick":1000,"lot":256,"min_pages":256,"max_pages":1048576,"price_min":0,"price_max":1000000000,"notice_period_s":60,"breach_penalty":0,"delivery_deadline_s":600}' >/dev/null &&
  for n in a b; do
    node=$(api "$ADMIN" POST /v1/nodes "{\"name\":\"node-$n\",\"team_id\":$team}") || return 1
    json_field "$node" key_id >"$files/agent/$n.key"
    json_field "$node" secret >"$files/agent/$n.secret"
    json_field "$node" account.id >"$WORK/node-$n.id"
    [[ -s $files/agent/$n.key && -s $files/agent/$n.secret ]] || return 1
  done
}
setup_exchange || give_up "set up the exchange (see $log)"
chmod 600 "$files/agent/"*.secret
echo "http://10.0.2.2:$(cat "$WORK/port")" >"$files/agent/url"
echo "$DEVICE" >"$files/agent/device"

# ---- the guest
lend_guest_build "$WORK/guest" "$KVER" agent "${LENDAGENT_INIT:-$ROOT/tests/lendagent/init.sh}" "$files" ||
  give_up "build the initramfs"
LOG=$OUT/lendagent-guest${LENDAGENT_DEVICE:+-$DEVICE}.log
lend_guest_boot "$WORK/guest" "$KVER" 256 "$LOG" 420 user,model=virtio-net-pci
grep -a -o 'AGL-.*\|^LOG .*' "$LOG" | tr -d '\r'
marker() { grep -a -o "AGL-$1 .*" "$LOG" | tr -d '\r' | tail -n 1; }
# a marker may come once per contract: each line passes or fails
for m in $MARKERS; do
  lines=$(grep -a -o "AGL-$m .*" "$LOG" | tr -d '\r')
  if [[ -z $lines ]]; then bad "$m: no marker (see $LOG)"; continue; fi
  while read -r line; do
    if [[ $m == END || $line == "AGL-$m ok"* ]]; then ok "$line"; else bad "$line"; fi
  done <<<"$lines"
done

# ---- what the exchange recorded: the contract ended (the recall's notice
# may still run when the guest is done: its end comes at the latest then),
# both agents reported its usage and the two sides agree (usage_reconcile:
# within 60 s of the contract's pages, or 1 %)
id=$(marker CONTRACT-ID | awk '{ print $2 }')
if [[ -z $id ]]; then
  bad "EXCHANGE: the guest named no contract"
else
  for _ in $(seq 1 90); do
    [[ $(psql -d ramex_lendagent -c "SELECT state FROM contracts WHERE id = $id") == ended ]] && break
    sleep 1
  done
  row=$(psql -d ramex_lendagent -F ' ' -c "
    SELECT c.state, c.delivery, c.pages, c.seller_id = $(cat "$WORK/node-a.id") AND c.buyer_id = $(cat "$WORK/node-b.id"),
           count(*) FILTER (WHERE u.side = 'seller'), coalesce(sum(u.page_seconds) FILTER (WHERE u.side = 'seller'), 0),
           count(*) FILTER (WHERE u.side = 'buyer'), coalesce(sum(u.page_seconds) FILTER (WHERE u.side = 'buyer'), 0)
    FROM contracts c LEFT JOIN usage_reports u ON u.contract_id = c.id WHERE c.id = $id
    GROUP BY c.id")
  read -r state delivery cpages parties ns sps nb bps <<<"$row"
  lo=$((sps < bps ? sps : bps)) hi=$((sps < bps ? bps : sps))
  tol=$((cpages * 60)); ((hi / 100 > tol)) && tol=$((hi / 100))
  what="contract=$id state=$state delivery=$delivery pages=$cpages a_to_b=$parties seller_reports=$ns seller_page_s=$sps buyer_reports=$nb buyer_page_s=$bps"
  if [[ $state == ended && $delivery == lend && $parties == t && $ns -ge 1 && $nb -ge 1 && $lo -gt 0 && $((hi - lo)) -le $tol ]]; then
    ok "EXCHANGE $what"
  else
    bad "EXCHANGE $what"
  fi
fi
echo "$pass passed, $fail failed"
((fail == 0))
