#!/usr/bin/env bash
# bench/60-wss.sh: does the agent's working-set estimate match a known
# working set on a stock kernel? Boots the Debian kernel under qemu (TCG) as
# tests/kernel does, runs the unmodified ramex-agent (no exchange: it
# samples, estimates and decides the same, and places no orders) beside
# tests/wss/wss_workload, and prints per phase: truth, estimate, error bar,
# ratio, seconds to converge, PSI stall, and on a "knee" workload where the
# agent's need lands against the measured knee.
#
# Workload: 600 MiB allocated and touched once, then a hot set of 150, 300
# and 50 MiB, each touched once a second for RAMEX_WSS_PHASE_S seconds. Its
# Denning working set (pages touched within the window τ) is the hot set
# once τ has passed since the phase began; τ is RAMEX_WSS_WINDOW_S (20 s:
# shorter than the agent's default 60 s so that a shrinking hot set can
# leave the working set, by definition τ after it stopped being touched,
# within the 60 s the goal allows). Cases: the whole machine (kmod backend)
# in a 1 GiB guest and a 512 MiB one (below the allocation), and one cgroup
# without a limit (probing through memory.reclaim, and again through
# memory.high: cghigh), with memory.max 400 MiB (cglimit400) and with 256
# MiB (probing on, and again off: cglimit0); the whole machine probes
# through the cgroup2 root's memory.reclaim. zram is the guest's swap.
#
#   RAMEX_WSS_PHASE_S (60)  RAMEX_WSS_WINDOW_S (20)  RAMEX_WSS_CASES (all)
#   RAMEX_WSS_GUEST_SETUP: shell run in the guest before the cases, for
#   experiments only (e.g. khugepaged off: echo 3600000 >
#   /sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs);
#   the figures in node-agent/README.md are the kernel's defaults.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAMEX_BUILD:-$ROOT/build}
BIN=$BUILD/bin
. "$ROOT/tests/wss/guest.sh"
P=${RAMEX_WSS_PHASE_S:-60}
W=${RAMEX_WSS_WINDOW_S:-20}
CASES=${RAMEX_WSS_CASES:-whole cg cghigh cglimit400 cglimit cglimit0 knee whole512}
work=$BUILD/wss-bench
mkdir -p "$work"

kver=$(guest_kver) || exit 1
[[ -x $BIN/ramex-agent ]] || make -s -C "$ROOT" "$BIN/ramex-agent" >/dev/null || exit 1

phases="600 150 $P 300 $P 50 $P"
gen_main() { # cases...
  echo '. /wss-lib.sh; wss_setup 1024'
  # the setup named in the log as written (its quotes dropped), then run
  [[ -n ${RAMEX_WSS_GUEST_SETUP:-} ]] && printf "echo 'WSS-INFO guest setup: %s'\n%s\n" "$(tr '\n' ';' <<<"$RAMEX_WSS_GUEST_SETUP" | tr -d "'")" "$RAMEX_WSS_GUEST_SETUP"
  echo 'echo RAMEX-WSS-START'
  for c in "$@"; do
    echo "echo WSS-CASE $c"
    case $c in
      whole|whole512) cat <<SH
insmod /lib/modules/ramex.ko
wss_agent $c $W --backend=kmod
sleep 6; wss_monitor $c & MON=\$!
echo "WSS-BASE case=$c kb=\$(awk '/^(Unevictable|AnonPages|Mapped):/{s+=\$2} END{print s}' /proc/meminfo)"
WSS_TRUTH_WINDOW_S=$W /wss_workload phases $phases
wss_stop \$MON \$AGENT; rmmod ramex
SH
      ;;
      cg|cghigh|cglimit|cglimit0|cglimit400) lim=max pages=262144 probe=
        [[ $c == cghigh ]] && probe=--probe_via=high
        [[ $c == cglimit || $c == cglimit0 ]] && lim=256M pages=65536
        [[ $c == cglimit400 ]] && lim=400M pages=102400
        [[ $c == cglimit0 ]] && probe=--probe=0
        cat <<SH
mkdir /sys/fs/cgroup/$c; echo $lim >/sys/fs/cgroup/$c/memory.max
echo "WSS-BASE case=$c kb=0"
wss_agent $c $W --backend=cgroup --cgroup=/sys/fs/cgroup/$c --cgroup_pages=$pages $probe
sleep 6; WSS_TRACE=1 wss_monitor $c /sys/fs/cgroup/$c & MON=\$!
sh -c 'echo \$\$ >/sys/fs/cgroup/$c/cgroup.procs; export WSS_TRUTH_WINDOW_S=$W; exec /wss_workload phases $phases'
wss_stop \$MON \$AGENT
SH
      ;;
      knee) cat <<SH
mkdir /sys/fs/cgroup/knee
for l in 128 96 80 72 68 66 64 62 60; do
  echo \${l}M >/sys/fs/cgroup/knee/memory.max
  echo "WSS-KNEE-LIMIT mib=\$l"
  timeout 60 sh -c 'echo \$\$ >/sys/fs/cgroup/knee/cgroup.procs; exec /wss_workload knee 64 40'
done
echo max >/sys/fs/cgroup/knee/memory.max
wss_agent knee $W --backend=cgroup --cgroup=/sys/fs/cgroup/knee --cgroup_pages=65536 --margin_pct=5 --margin_min_pages=256
sleep 6; wss_monitor knee & MON=\$!
sh -c 'echo \$\$ >/sys/fs/cgroup/knee/cgroup.procs; exec /wss_workload phases 64 64 $((W * 2 + 20))'
wss_stop \$MON \$AGENT
SH
      ;;
    esac
  done
  echo 'grep -h -E "working-set source|MGLRU|probing" /tmp/*.log | head -n 40 | sed "s/^/WSS-LOG /"'
}

boot() { # name mem-mib seconds cases...
  local name=$1 mem=$2 secs=$3
  shift 3
  gen_main "$@" >"$work/$name.main.sh"
  wss_guest_build "$work/$name" "$kver" "$work/$name.main.sh" >/dev/null || { echo "wss bench: guest build failed"; return 1; }
  wss_guest_boot "$work/$name" "$kver" "$mem" "$work/$name.serial.log" "$secs"
  tr -d '\r' <"$work/$name.serial.log" >"$work/$name.log"
  grep -q '^RAMEX-GUEST-END' "$work/$name.log" || echo "wss bench: guest $name did not finish (see $work/$name.serial.log)"
}

big= small=
for c in $CASES; do
  case $c in whole512) small="$small $c" ;; *) big="$big $c" ;; esac
done
case_s=$((3 * P + 60))
[[ -n $big ]] && boot big 1024 $(( $(wc -w <<<"$big") * case_s + 400 )) $big
[[ -n $small ]] && boot small 512 $((case_s + 200)) $small
cat "$work"/big.log "$work"/small.log 2>/dev/null >"$work/all.log"

echo "kernel $kver under qemu TCG; window τ=${W}s, phases ${P}s, agent samples every 2 s; load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -a '^WSS-INFO\|^WSS-LOG' "$work/all.log" | sed 's/^/  /' | sort -u
awk -v W="$W" -f "$ROOT/bench/wss_report.awk" "$work/all.log"
