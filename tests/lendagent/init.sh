#!/bin/busybox sh
# tests/lendagent/init.sh — /init of the agents' lending guest (see
# README.md). Two ramex-agent processes (sim executors) trade a lend
# contract on the ramexd of the host (10.0.2.2, qemu's user network): A
# lends, B borrows and runs ramex-lend-nbd as the agent does by default
# (--attach /dev/nbd0 --direct, swap at priority 100). A workload swaps to
# the lent pages, A's workload grows and A recalls, B's bridge moves the
# pages back and releases. One marker line per fact, "AGL-<NAME> ok|fail
# key=value..."; the host judges by them. With /agent/device "ublk" (the
# suite's LENDAGENT_DEVICE=ublk, a kernel with ublk_drv) B runs
# lend_device = ublk: ramex-lend-ublk on /dev/ublkbN instead, marker UBLK
# for DIRECT.
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ip link set lo up
if [ -f /debug ]; then
  echo 7 >/proc/sys/kernel/printk
  echo 15 >/proc/sys/kernel/hung_task_timeout_secs
fi
T0=$(cut -d. -f1 /proc/uptime)
BDIR=/tmp/b/spool-lend ADIR=/tmp/a/spool-lend
# B's device: its child's name (files lend-CHILD-ID.*), the devices' path
# prefix, its log's lines for "serves", "ends" and a buyer's end
DEVICE=$(cat /agent/device 2>/dev/null || echo nbd)
if [ "$DEVICE" = ublk ]; then
  CHILD=lend-ublk DEVPFX=/dev/ublkb SERVES='ublk device serves'
  ENDS='ublk server ends' BUYER_ENDS='end=\(stopped\|recalled\)'
else
  CHILD=lend-nbd DEVPFX=/dev/nbd SERVES='bridge attached'
  ENDS='bridge ends' BUYER_ENDS='end=\(disconnected\|recalled\)'
fi
DEV0=${DEVPFX}0

mark() { echo; echo "AGL-$*"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
field() { tr ' ' '\n' <"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }
metric() { awk -v k="$2" '$1 == k { v = $2 } END { print v }' "$1" 2>/dev/null; }
swap_used_kb() { awk -v d="$1" '$1 == d { print $4 }' /proc/swaps; }
wait_for() { # seconds command...: polls every 0.2 s
  n=$(($1 * 5)); shift
  while ! "$@"; do
    n=$((n - 1)); [ $n -le 0 ] && return 1
    sleep 0.2
  done
}
# mark_meters NAME ID: the two children's meters of contract ID agree. On
# the direct path the borrower counts the device's requests and the
# hosted time, not which pages hold data; the lender hosts from its start,
# the bridge from its own, one or a few of B's agent rounds later (seen:
# 1.5 to 4 s under TCG; 10 s of slack).
mark_meters() {
  for try in 1 2 3; do # each side writes its meter once a second
    cp $ADIR/lend-server-$2.meter /tmp/l.meter; cp $BDIR/$CHILD-$2.meter /tmp/b.meter
    l=/tmp/l.meter b=/tmp/b.meter bad=
    for k in page_writes page_reads page_trims; do
      [ "$(field $l $k)" = "$(field $b $k)" ] || bad="$bad $k"
    done
    p=$(grep 'holds the contract' $ADIR/lend-server-$2.log | grep -o 'pages=[0-9]*' | head -n 1)
    p=${p##*=}
    lu=$(field $l hosted_page_s) bu=$(field $b hosted_page_s)
    d=$((lu - bu)); [ $d -lt 0 ] && d=$((-d))
    [ -n "$lu" ] && [ -n "$p" ] && [ $d -le $((lu / 100 + 10 * p)) ] || bad="$bad hosted_page_s"
    [ -z "$bad" ] && break
    sleep 1
  done
  st=ok; [ -n "$bad" ] && st=fail
  mark "$1 $st contract=$2 differ=${bad:-none} writes=$(field $l page_writes)/$(field $b page_writes) reads=$(field $l page_reads)/$(field $b page_reads) hosted_page_s=$lu/$bu"
}
# hold_workload GO OUT: a workload of free memory + 40 MiB in the work
# cgroup (limited to leave the swap path its headroom) writes its pattern
# and waits for /tmp/GO to check it; its pid in WL, its size in W
hold_workload() {
  AVAIL=$(($(meminfo MemAvailable) / 1024))
  W=$((AVAIL + 40))
  echo $(((AVAIL - HEADROOM_MIB) << 20)) >/sys/fs/cgroup/work/memory.max
  rm -f /tmp/$1
  sh -c 'echo $$ >/sys/fs/cgroup/work/cgroup.procs; exec ramex-lend-workload '$W' /tmp/'$1 >/tmp/$2 2>&1 &
  WL=$!
  wait_for 300 grep -q written /tmp/$2
}
finish() {
  for p in $AGENT_B $AGENT_A; do kill -TERM $p 2>/dev/null; done
  for p in $AGENT_B $AGENT_A; do wait $p; done
  for f in /tmp/a.log /tmp/b.log $BLOG $SLOG; do
    [ -f "$f" ] && grep -E 'level=(warn|error)|lend child|contract over|recalled|ends' "$f" | sed "s|^|LOG ${f##*/}: |"
  done
  mark "END elapsed_s=$(($(cut -d. -f1 /proc/uptime) - T0))"
  poweroff -f
}

for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || mark "MODULE fail name=$m"; done
[ -f /lib/modules/ramex.ko ] && insmod /lib/modules/ramex.ko pool_max_pages=32768
echo 8192 >/proc/sys/vm/min_free_kbytes
echo 100 >/proc/sys/vm/swappiness
# qemu's user network: the host's 127.0.0.1 is 10.0.2.2
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0
HEADROOM_MIB=16 # tests/lending/init.sh says why
mount -t cgroup2 none /sys/fs/cgroup
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/work
mkswap /dev/vda >/dev/null && swapon /dev/vda || mark "LOCALSWAP fail"

# agent NAME TOTAL USAGE FLAGS...: a sim agent of TOTAL pages whose
# workload uses USAGE (its usage file, which the test rewrites)
agent() {
  n=$1 total=$2 usage=$3; shift 3
  mkdir -p /tmp/$n
  echo $usage >/tmp/$n.usage
  ramex-agent --exchange_url=$(cat /agent/url) --key_id=$(cat /agent/$n.key) \
    --secret_file=/agent/$n.secret --backend=sim --sim_total_pages=$total \
    --sim_usage_pages=$usage --sim_usage_file=/tmp/$n.usage \
    --spool=/tmp/$n/spool --status_file=/tmp/$n/status.prom --sample_s=1 \
    --report_s=2 --poll_s=5 --spot_market=spot --perm_market= --tick=1000 \
    --lend_bin_dir=/bin "$@" >/tmp/$n.log 2>&1 &
}
# A has pages to spare and lends them on loopback; B's workload needs
# about 45 MiB more than it has. B runs the lending defaults: attach
# /dev/nbd0 as swap, the direct path (or lend_device = ublk).
agent a 65536 8192 --margin_min_pages=4096 --spot_floor=100000 \
  --stall_value=10 --lend_listen=127.0.0.1:0
AGENT_A=$!
agent b 16384 16000 --margin_min_pages=12288 --lend_device=$DEVICE
AGENT_B=$!

# ---- the contract and B's bridge -----------------------------------------
bridge_log() { ls $BDIR/$CHILD-*.log 2>/dev/null | head -n 1; }
if ! wait_for 240 grep -q "^$DEV0 " /proc/swaps; then
  mark "CONTRACT fail no $DEV0 in /proc/swaps within 240 s bridge_log=$(bridge_log)"
  tail -n 30 /tmp/a.log /tmp/b.log $(bridge_log)
  finish
fi
BLOG=$(bridge_log)
ID=${BLOG##*/$CHILD-}; ID=${ID%.log}
SLOG=$ADIR/lend-server-$ID.log
SECTORS=$(cat /sys/block/${DEV0#/dev/}/size)
PAGES=$((SECTORS / 8))
wait_for 10 grep -q "^ramex_agent_contract_pages{contract=\"$ID\"}" /tmp/b/status.prom
HELD=$(metric /tmp/b/status.prom "ramex_agent_contract_pages{contract=\"$ID\"}")
st=fail; [ -n "$ID" ] && [ "$HELD" = "$PAGES" ] && st=ok
mark "CONTRACT $st contract=$ID device=$DEV0 pages=$PAGES status_pages=$HELD after_s=$(($(cut -d. -f1 /proc/uptime) - T0))"

if [ "$DEVICE" = ublk ]; then
  # the agent's ramex-lend-ublk: the lender's options, swap at priority
  # 100, memory locked, none of the bridge's levers; the agent said once
  # what does not apply to it
  BPID=$(pidof ramex-lend-ublk)
  cmd=$(tr '\0' ' ' </proc/$BPID/cmdline 2>/dev/null)
  prio=$(awk -v d=$DEV0 '$1 == d { print $5 }' /proc/swaps)
  said=$(grep -c 'device=ublk note=' /tmp/b.log)
  st=fail
  case "$cmd" in
  *ramex-lend-ublk*--swap-priority\ 100\ --mlock*)
    grep -q "$SERVES.*dev=$DEV0 " $BLOG && [ "$prio" = 100 ] && [ "$said" = 1 ] && st=ok ;;
  esac
  case "$cmd" in *--keep-awake*|*--idle-poll*|*--direct*) st=fail ;; esac
  grep -q 'not fully kept out of reclaim' $BLOG $SLOG && st=fail
  rss=$(awk '$1 == "VmRSS:" { print $2 }' /proc/$BPID/status 2>/dev/null)
  mark "UBLK $st pid=$BPID priority=$prio said=$said rss_kb=$rss cmd=\"$cmd\""
else
  # the agent's bridge: --direct, nbd.ko connected (its pid file is the
  # process that configured it: the bridge), the kernel's device in
  # /proc/swaps at priority 100
  BPID=$(cat /sys/block/nbd0/pid 2>/dev/null)
  cmd=$(tr '\0' ' ' </proc/$BPID/cmdline 2>/dev/null)
  prio=$(awk '$1 == "/dev/nbd0" { print $5 }' /proc/swaps)
  st=fail
  case "$cmd" in
  *ramex-lend-nbd*--direct*)
    grep -q 'bridge reached its lender.*direct=1' $BLOG && [ "$prio" = 100 ] && st=ok ;;
  esac
  grep -q 'not fully kept out of reclaim' $BLOG $SLOG && st=fail
  # what the bridge holds in memory, all of it locked (mlockall): its
  # libraries, buffers and small thread stacks (11 MiB seen), less than two
  # 8 MiB default stacks (each of its threads held one whole before
  # lend_mem.h's LEND_MEM_STACK). VmRSS, not VmLck: VmLck counts the whole
  # of a thread's malloc arena (64 MiB reserved, PROT_NONE, not in memory).
  rss=$(awk '$1 == "VmRSS:" { print $2 }' /proc/$BPID/status 2>/dev/null)
  lck=$(awk '$1 == "VmLck:" { print $2 }' /proc/$BPID/status 2>/dev/null)
  [ "${rss:-99999}" -lt 16384 ] || st=fail
  mark "DIRECT $st nbd0_pid=$BPID priority=$prio rss_kb=$rss locked_kb=$lck cmd=\"$cmd\""
fi

wait_for 10 sh -c '[ "$(awk '\''$1 == "ramex_agent_lend_children" { print $2 }'\'' /tmp/a/status.prom)" = 1 ]'
a_children=$(metric /tmp/a/status.prom ramex_agent_lend_children)
b_children=$(metric /tmp/b/status.prom ramex_agent_lend_children)
st=fail; [ "$a_children" = 1 ] && [ "$b_children" = 1 ] && st=ok
mark "STATUS $st a_lend_children=$a_children b_lend_children=$b_children b_contracts=$(metric /tmp/b/status.prom ramex_agent_contracts) b_lenders_lost=$(metric /tmp/b/status.prom ramex_agent_lenders_lost_total)"
grep '^ramex_agent_\(contract\|lend\)' /tmp/b/status.prom | sed 's/^/LOG b status: /'

# ---- a workload bigger than memory swaps to the lent pages ------------
hold_workload go w.out
used=$(swap_used_kb $DEV0)
st=fail; [ "${used:-0}" -gt $((PAGES * 2)) ] && st=ok # half the device
mark "SWAPPED $st workload_mib=$W device_used_kb=$used device_kb=$((PAGES * 4)) vda_used_kb=$(swap_used_kb /dev/vda)"
# a page-second or more on both meters before the recall
sleep 2
grep '^ramex_agent_contract_page_seconds' /tmp/b/status.prom | sed 's/^/LOG b status: /'

# ---- A's workload grows: A recalls, B's bridge moves the pages back ----
t=$(cut -d. -f1 /proc/uptime)
echo 60000 >/tmp/a.usage
wait_for 240 grep -q "$ENDS" $BLOG
dt=$(($(cut -d. -f1 /proc/uptime) - t))
wait_for 30 grep -q 'lender ends' $SLOG
gone=ok; grep -q "^$DEV0 " /proc/swaps && gone=fail
st=fail
grep -q 'end=recalled' $BLOG && grep -q 'end=released' $SLOG && [ $gone = ok ] && st=ok
mark "RECALL $st seconds=$dt device_gone=$gone bridge=\"$(grep -o 'end=[a-z-]*' $BLOG | tr '\n' ' ')\" server=\"$(grep -o 'end=[a-z-]*' $SLOG | tr '\n' ' ')\" vda_used_kb=$(swap_used_kb /dev/vda)"
touch /tmp/go
wait $WL; rc=$?
st=fail; [ $rc -eq 0 ] && grep -q bad_words=0 /tmp/w.out && st=ok
mark "RECALL-DATA $st rc=$rc $(tail -n 1 /tmp/w.out)"

mark_meters METERS $ID
# both agents saw the contract end, their children ended for good (the
# bridge was not started again), nothing counted as a lost lender
over() {
  grep -q "contract over.*contract=$ID" /tmp/b.log &&
    [ "$(metric /tmp/a/status.prom ramex_agent_lend_children)" = 0 ] &&
    [ "$(metric /tmp/b/status.prom ramex_agent_lend_children)" = 0 ] &&
    ! grep -q "^ramex_agent_contract_pages{contract=\"$ID\"}" /tmp/b/status.prom
}
wait_for 60 over
st=fail; over && st=ok
starts=$(grep -c "lend child started.*child=$CHILD " /tmp/b.log)
ends=$(grep -c "$ENDS" $BLOG)
lost=$(metric /tmp/b/status.prom ramex_agent_lenders_lost_total)
[ "$starts" = 1 ] && [ "$ends" = 1 ] && [ "$lost" = 0 ] || st=fail
mark "AGENT-END $st contract_over=$(grep -c "contract over.*contract=$ID" /tmp/b.log) bridge_starts=$starts bridge_ends=$ends lenders_lost=$lost a_lend_children=$(metric /tmp/a/status.prom ramex_agent_lend_children) b_lend_children=$(metric /tmp/b/status.prom ramex_agent_lend_children)"
grep '^ramex_agent_\(contract\|lend\)' /tmp/b/status.prom | sed 's/^/LOG b status: /'
echo "AGL-CONTRACT-ID $ID"

# ---- two contracts at once, a device used before, the buyer ends them ----
# ramex.ko has one lending pool, which one lend server maps at a time
# (kmod/README.md): a second server beside it cannot start. Unloaded here
# so that A's next servers hold anonymous memory and two run at once.
rmmod ramex 2>/dev/null
nbds() { grep -c "^$DEVPFX" /proc/swaps; }
echo 12000 >/tmp/b.usage
echo 8192 >/tmp/a.usage
wait_for 120 sh -c '[ $(grep -c "^'$DEVPFX'" /proc/swaps) -ge 1 ]'
# B needs more beside the contract it has: one more
echo 16384 >/tmp/b.usage
# settled: two devices or more swapping, one per contract B holds, and as
# many bridges in B's status file (its strategy may buy a piece more)
held_ids() { ls $BDIR | sed -n 's/^'$CHILD'-\([0-9]*\)\.secret$/\1/p' | sort -n | tr '\n' ' '; }
settled() {
  IDS=$(held_ids)
  b_children=$(metric /tmp/b/status.prom ramex_agent_lend_children)
  [ "$(nbds)" -ge 2 ] && [ "$(echo $IDS | wc -w)" = "$(nbds)" ] && [ "$b_children" = "$(nbds)" ]
}
wait_for 120 settled
st=fail; settled && st=ok
devs=$(awk -v p=$DEVPFX 'index($1, p) == 1 { printf "%s ", $1 }' /proc/swaps)
mark "TWO $st contracts=\"$IDS\" devices=\"$devs\" b_lend_children=$b_children a_lend_children=$(metric /tmp/a/status.prom ramex_agent_lend_children)"
for i in $IDS; do grep -h "$SERVES" $BDIR/$CHILD-$i.log | sed "s/^/LOG contract $i: /"; done

hold_workload go2 w2.out
used=$(awk -v p=$DEVPFX 'index($1, p) == 1 { printf "%s=%s ", $1, $4 }' /proc/swaps)
n=0
for d in $devs; do [ "$(swap_used_kb $d)" -gt 0 ] && n=$((n + 1)); done
st=fail; [ $n -ge 2 ] && st=ok
mark "SWAPPED-TWO $st workload_mib=$W used_kb=\"$used\""
sleep 2 # a meter tick on both sides, no I/O in between
for i in $IDS; do mark_meters METERS-TWO $i; done

# B's workload shrinks: B's agent ends the contracts itself, its bridges
# (SIGTERM) move the pages back and release; or A's agent, told by the
# exchange first, gives notice (end=recalled): either way the pages are back
t=$(cut -d. -f1 /proc/uptime)
echo 2000 >/tmp/b.usage
ended() { for i in $IDS; do grep -q "$ENDS" $BDIR/$CHILD-$i.log || return 1; done; }
wait_for 180 ended
dt=$(($(cut -d. -f1 /proc/uptime) - t))
st=ok; why=
for i in $IDS; do
  grep -q "$BUYER_ENDS" $BDIR/$CHILD-$i.log || why="$why bridge-$i"
  wait_for 20 grep -q 'lender ends' $ADIR/lend-server-$i.log
  grep -q 'end=released' $ADIR/lend-server-$i.log || why="$why server-$i"
  grep -q "ended a borrowed contract.*contract=$i" /tmp/b.log || why="$why agent-$i"
done
# every bridge swapped off before it ended; a device it left behind, or
# one of a contract B took meanwhile, is named (once seen in CI, unnamed)
no_swap() { [ "$(nbds)" = 0 ]; }
wait_for 20 no_swap ||
  why="$why still-swapping:$(awk -v p=$DEVPFX 'index($1, p) == 1 { printf "%s,", $1 }' /proc/swaps)"
[ -n "$why" ] && st=fail
mark "BUYER-END $st seconds=$dt not=\"${why# }\" ends=\"$(for i in $IDS; do grep -o 'end=[a-z-]*' $BDIR/$CHILD-$i.log | tr '\n' ' '; done)\" vda_used_kb=$(swap_used_kb /dev/vda)"
touch /tmp/go2
wait $WL; rc=$?
st=fail; [ $rc -eq 0 ] && grep -q bad_words=0 /tmp/w2.out && st=ok
mark "BUYER-END-DATA $st rc=$rc $(tail -n 1 /tmp/w2.out)"
for i in $IDS; do mark_meters METERS-END $i; done
quiet() {
  [ "$(metric /tmp/a/status.prom ramex_agent_lend_children)" = 0 ] &&
    [ "$(metric /tmp/b/status.prom ramex_agent_lend_children)" = 0 ]
}
wait_for 60 quiet
st=fail; quiet && st=ok
restarts=0
for i in $IDS; do [ "$(grep -c "$ENDS" $BDIR/$CHILD-$i.log)" = 1 ] || restarts=$((restarts + 1)); done
lost=$(metric /tmp/b/status.prom ramex_agent_lenders_lost_total)
[ $restarts = 0 ] && [ "$lost" = 0 ] || st=fail
mark "AGENT-END-TWO $st restarted=$restarts lenders_lost=$lost a_lend_children=$(metric /tmp/a/status.prom ramex_agent_lend_children) b_lend_children=$(metric /tmp/b/status.prom ramex_agent_lend_children)"
finish
