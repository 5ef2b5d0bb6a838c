#!/usr/bin/env bash
# tests/wss: the working-set estimate follows a hot-set change on a stock
# kernel. Boots the Debian kernel under qemu (TCG, 512 MiB) with the
# unmodified ramex-agent (cgroup backend, no exchange, window 10 s, a sample
# a second) and tests/wss/wss_workload in that cgroup: 160 MiB touched once,
# then a hot set of 32, 96 and 16 MiB for 25, 25 and 40 s (a shrink shows
# one window after the pages were last touched, and the aging walks that see
# it run late when TCG shares a busy host: at 25 s the last phase once still
# read 52 MiB). The estimate averaged
# over each phase's last 6 s must lie within 30 % of the hot set, rise with
# the growth and fall with the shrink (runs read 32.0, 96.0 and 16.0 MiB; an
# estimate off by a third fails, while load that delays the walks by a few
# seconds does not; the bench, bench/60-wss.sh, measures how close it is).
# About 105 s of wall time (160 s at load 13-17).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
BIN=$BUILD/bin
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}
. "$ROOT/tests/wss/guest.sh"
work=$BUILD/wss-test
mkdir -p "$OUT" "$work"
TESTS="source_mglru follows_phases status_need"
fail_all() { for t in $TESTS; do echo "FAIL $t ($1)"; done; echo "0 passed, $(wc -w <<<"$TESTS") failed"; exit 1; }

kver=$(guest_kver) || fail_all "no kernel to boot"
[[ -x $BIN/ramex-agent ]] || make -s -C "$ROOT" "$BIN/ramex-agent" >/dev/null || fail_all "agent not built"
cat >"$work/main.sh" <<'SH'
. /wss-lib.sh; wss_setup 256
mkdir /sys/fs/cgroup/t
WSS_SAMPLE_S=1 wss_agent t 10 --backend=cgroup --cgroup=/sys/fs/cgroup/t --cgroup_pages=65536
sleep 3; wss_monitor t & MON=$!
sh -c 'echo $$ >/sys/fs/cgroup/t/cgroup.procs; exec /wss_workload phases 160 32 25 96 25 16 40'
wss_stop $MON $AGENT
grep -c '^ramex_agent_wss_source{source="mglru"} 1$' /tmp/t.status | sed 's/^/WSS-STATUS-SOURCE /'
grep -h -E 'working-set source|level=(warn|error)' /tmp/t.log | sed 's/^/WSS-LOG /'
SH
wss_guest_build "$work" "$kver" "$work/main.sh" >/dev/null || fail_all "guest build failed"
log=$OUT/wss-serial.log
echo "kernel $kver, booting under qemu"
wss_guest_boot "$work" "$kver" 512 "$log" 300
tr -d '\r' <"$log" >"$work/log"

awk -f - "$work/log" >"$work/result" <<'AWK'
function kv(k,   i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return substr($i, length(k) + 2) } return "" }
# times + 0: numbers, not strings ("101.2" sorts before "97.7" as text)
/^WSS-PHASE / { if (kv("hot") != "") { n++; ts[n] = kv("t") + 0; hot[n] = kv("hot") + 0 } else tend = kv("t") + 0 }
/^WSS-STAT / { m++; t[m] = kv("t") + 0; w[m] = kv("wss") * 4 / 1024; need[m] = kv("need") * 4 / 1024; src[m] = kv("source") }
/^WSS-STATUS-SOURCE 1$/ { status_src = 1 }
/^WSS-LOG .*ramex_agent_wss_source=mglru/ { log_src = 1 }
END {
  bad = 0; for (j = 1; j <= m; j++) if (t[j] > ts[1] + 2 && src[j] != "mglru") bad++
  if (m > 0 && bad == 0 && status_src && log_src) print "PASS source_mglru"
  else printf "FAIL source_mglru: %d samples not from mglru, status file %s, log %s\n", bad, status_src ? "names it" : "does not name it", log_src ? "names it" : "does not name it"
  ok = n == 4 && tend != ""; why = ok ? "" : "the workload did not run its phases"
  for (p = 2; ok && p <= 4; p++) {
    e = pe = (p < 4 ? ts[p + 1] : tend); k = 0; s = 0
    for (j = 1; j <= m; j++) if (t[j] >= e - 6 && t[j] <= e) { s += w[j]; k++ }
    est[p] = k ? s / k : -1
    if (k == 0 || est[p] < hot[p] * 0.7 || est[p] > hot[p] * 1.3) { ok = 0; why = sprintf("phase %d (hot %d MiB): estimate %.1f MiB over %d samples, not within 30 %%", p - 1, hot[p], est[p], k) }
  }
  if (ok && !(est[3] > est[2] && est[4] < est[3])) { ok = 0; why = "the estimate did not rise and fall with the hot set" }
  if (ok) printf "PASS follows_phases\n"; else printf "FAIL follows_phases: %s\n", why
  printf "INFO estimates (MiB) for hot 32/96/16: %.1f %.1f %.1f\n", est[2], est[3], est[4]
  okn = m > 0; for (j = 1; j <= m; j++) if (need[j] < w[j]) okn = 0
  if (okn) print "PASS status_need"; else print "FAIL status_need: need missing or below the working set"
}
AWK
grep -v '^INFO' "$work/result"
grep '^INFO' "$work/result" | sed 's/^INFO /  /'
pass=$(grep -c '^PASS' "$work/result"); failn=$(grep -c '^FAIL' "$work/result")
grep -q '^RAMEX-GUEST-END' "$work/log" || { echo "guest did not finish; last lines of $log:"; tail -n 20 "$work/log"; }
echo "$pass passed, $failn failed"
