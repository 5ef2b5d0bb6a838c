#!/usr/bin/env bash
# tests/pgsh/suite.sh — scripts/pg.sh's ports: a private cluster keeps the
# port it was first given (DIR/port) across stop and start, that port lies
# outside the kernel's ephemeral range, and a kept port another program
# holds is refused with a message that says what to do. Run by tests/run.sh
# (suite "pgsh"), or alone from the repository root. About 10 s (one
# cluster, started three times). Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}/pgsh
mkdir -p "$OUT"
dir=$ROOT/var/pgsh-test # under var/, as every cluster of the tests
pass=0 fail=0 holder=
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAILED: $1"; fail=$((fail + 1)); }
cleanup() {
  [[ -n $holder ]] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
  bash scripts/pg.sh destroy "$dir" >/dev/null 2>&1
}
trap cleanup EXIT
command -v python3 >/dev/null || { echo "pgsh: python3 is missing"; echo "0 passed, 1 failed"; exit 0; }

read -r elo ehi </proc/sys/net/ipv4/ip_local_port_range
outside() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 < elo || $1 > ehi )); }
envport() { bash scripts/pg.sh env "$dir" | sed -n 's/.*PGPORT=\([0-9]*\).*/\1/p'; }

bash scripts/pg.sh destroy "$dir" >/dev/null 2>&1
if bash scripts/pg.sh start "$dir" >"$OUT/start1.log" 2>&1; then
  ok "first start"
else
  bad "first start: $(tail -n 3 "$OUT/start1.log")"; echo "$pass passed, $fail failed"; exit 0
fi
p1=$(cat "$dir/port" 2>/dev/null)
[[ -n $p1 && $(envport) == "$p1" ]] && ok "port kept in DIR/port ($p1), env says it" \
  || bad "DIR/port '$p1', env's PGPORT '$(envport)'"
outside "$p1" && ok "port $p1 outside the ephemeral range $elo-$ehi" \
  || bad "port $p1 inside the ephemeral range $elo-$ehi"

bash scripts/pg.sh stop "$dir" >/dev/null 2>&1
bash scripts/pg.sh start "$dir" >"$OUT/start2.log" 2>&1 || bad "second start: $(tail -n 3 "$OUT/start2.log")"
p2=$(envport)
[[ $p2 == "$p1" ]] && ok "stop, start: same port" || bad "stop, start: port $p1 became $p2"
eval "$(bash scripts/pg.sh env "$dir")"
[[ $(psql -h 127.0.0.1 -p "$p1" -d ramex -XqtAc 'SELECT 1' 2>&1) == 1 ]] \
  && ok "reached on 127.0.0.1:$p1" || bad "not reached on 127.0.0.1:$p1"

# the kept port taken while the cluster is stopped: refused, and said so
bash scripts/pg.sh stop "$dir" >/dev/null 2>&1
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").write("up")
time.sleep(60)' "$p1" "$OUT/holder.up" &
holder=$!
for _ in $(seq 1 50); do [[ -s $OUT/holder.up ]] && break; sleep 0.1; done
if bash scripts/pg.sh start "$dir" >"$OUT/start3.log" 2>&1; then
  bad "start on a taken port succeeded (port $(envport))"
else
  grep -q "port $p1 .* is taken" "$OUT/start3.log" && grep -q "remove $dir/port" "$OUT/start3.log" \
    && ok "taken port refused: $(head -n 1 "$OUT/start3.log")" \
    || bad "taken port refused without the reason: $(cat "$OUT/start3.log")"
fi
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; holder=
bash scripts/pg.sh start "$dir" >"$OUT/start4.log" 2>&1 && [[ $(envport) == "$p1" ]] \
  && ok "freed: starts on $p1 again" || bad "after the port was freed: $(tail -n 3 "$OUT/start4.log")"

fp=$(bash scripts/pg.sh freeport)
[[ $fp =~ ^[0-9]+$ ]] && outside "$fp" && ok "freeport: $fp" || bad "freeport: '$fp'"

echo "$pass passed, $fail failed"
