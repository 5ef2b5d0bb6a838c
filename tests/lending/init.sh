#!/bin/busybox sh
# tests/lending/init.sh — /init of the lending guest (see guest.sh).
#
# Mode "test" (tests/lending/suite.sh) runs three scenarios and prints one
# marker line per fact, "LEND-<NAME> ok|fail key=value...", which the host
# judges; "test-direct" runs them with the bridge's --direct (nbd.ko on the
# lender's own connection; the borrower's meter then counts the device's
# pages and hosted time, so the meters compare those); mode "bench" prints
# the figures of bench/50-lending.sh.
#   1 swap:   lender + bridge over 127.0.0.1, /dev/nbd0 swap at priority 100,
#             a workload bigger than free memory (in a memory cgroup that
#             leaves the swap path headroom) checks its pattern; both meters
#             agree
#   2 recall: the lender recalls while a workload holds swapped pages; the
#             bridge swaps off (pages come back to RAM or to the local swap
#             at busybox's default negative priority), releases, the lender frees; the data is intact
#   3 vanish: a lender is killed while a victim (in a 32 MiB memory cgroup)
#             has pages on it: the victim dies of SIGBUS, the kernel and every
#             other process go on, the device is swapped off
#   4 silent: the same with a lender that stops (SIGSTOP) with its
#             connections open: the reply timeout ends the wait
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ip link set lo up
MODE=$(cat /mode)
DIRECT=
[ "$MODE" = test-direct ] && DIRECT=--direct
# LEND_GUEST_DEBUG=1 (guest.sh): kernel messages on the console and blocked
# tasks reported after 15 s, to see where a hang sits
if [ -f /debug ]; then
  echo 7 >/proc/sys/kernel/printk
  echo 15 >/proc/sys/kernel/hung_task_timeout_secs
fi
T0=$(cut -d. -f1 /proc/uptime)

# a newline first: the console's escape codes must not share a marker's line
mark() { echo; echo "LEND-$*"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
field() { tr ' ' '\n' <"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }
swap_used_kb() { awk -v d="$1" '$1 == d { print $4 }' /proc/swaps; }
wait_file() { # path seconds
  i=0
  while [ ! -e "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$1" ]
}
finish() { mark "END elapsed_s=$(($(cut -d. -f1 /proc/uptime) - T0))"; poweroff -f; }

for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || mark "MODULE fail name=$m"; done
STORE=anon
if [ -f /lib/modules/ramex.ko ] && insmod /lib/modules/ramex.ko pool_max_pages=32768; then
  STORE=ramex
fi
mark "STORE ok store=$STORE"
echo 8192 >/proc/sys/vm/min_free_kbytes
echo 100 >/proc/sys/vm/swappiness

# Every workload runs in a memory cgroup whose limit leaves HEADROOM_MIB of
# the guest's memory free for the swap path (docs/lending.md, "the swap
# path's headroom"): the bridge copies each swapped-out page into socket
# buffers, which needs free pages, and user space cannot use the kernel's
# emergency reserves. The workloads are still bigger than the guest's memory.
HEADROOM_MIB=16
mount -t cgroup2 none /sys/fs/cgroup
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/work /sys/fs/cgroup/victim
in_cg() { # cgroup command...
  cg=$1; shift
  sh -c 'echo $$ >/sys/fs/cgroup/'$cg'/cgroup.procs; exec "$@"' sh "$@"
}

# local swap at busybox's default priority (negative: below the lent pages)
mkswap /dev/vda >/dev/null && swapon /dev/vda || mark "LOCALSWAP fail"

start_pair() { # contract port pages nbd
  rm -f /tmp/port$1 /tmp/ready$1
  ramex-lend-server --contract $1 --secret-file /secret$1 --pages $3 \
    --listen 127.0.0.1:$2 --port-file /tmp/port$1 --store $STORE \
    --notice-ms 120000 --meter-file /tmp/lender$1 --mlock 2>/tmp/lender$1.log &
  LENDER=$!
  wait_file /tmp/port$1 20 || return 1
  ramex-lend-nbd --lender 127.0.0.1:$2 --contract $1 --secret-file /secret$1 \
    --attach $4 --swap-priority ${5:-100} --meter-file /tmp/borrower$1 \
    --ready-file /tmp/ready$1 --mlock $DIRECT 2>/tmp/borrower$1.log &
  BRIDGE=$!
  wait_file /tmp/ready$1 20 || return 1
  i=0
  while ! grep -q "^$4 " /proc/swaps && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
  grep -q "^$4 " /proc/swaps
}

# compares the two final or live meter files of a contract
meters() { # name contract
  l=/tmp/lender$2 b=/tmp/borrower$2 bad=
  # direct: the borrower sees the device's page counts and hosted time,
  # not which pages hold data
  keys="page_writes page_reads page_trims pages_in_use" int=used_page_s
  [ -n "$DIRECT" ] && keys="page_writes page_reads page_trims" int=hosted_page_s
  for k in $keys; do
    [ "$(field $l $k)" = "$(field $b $k)" ] || bad="$bad $k"
  done
  lu=$(field $l $int) bu=$(field $b $int)
  d=$((lu - bu)); [ $d -lt 0 ] && d=$((-d))
  slack=$((lu / 100 + 2 * ${PAGES:-0}))
  [ $d -le $slack ] || bad="$bad $int"
  st=ok; [ -n "$bad" ] && st=fail
  mark "$1 $st differ=${bad:-none} writes=$(field $l page_writes)/$(field $b page_writes) reads=$(field $l page_reads)/$(field $b page_reads) $int=$lu/$bu"
}

# a lender and ramex-lend-ublk on its contract; $DEV the device, $LENDER
# and $UBLK their pids; the logs /tmp/lenderN.log and /tmp/ublkN.log
start_ublk() { # n(files) contract port [server options]
  n=$1 k=$2 port=$3; shift 3
  rm -f /tmp/port$n /tmp/ready$n
  ramex-lend-server --contract $k --secret-file /secret$k --pages $PAGES \
    --listen 127.0.0.1:$port --port-file /tmp/port$n --store $STORE \
    --notice-ms 120000 --meter-file /tmp/lender$n --mlock 2>/tmp/lender$n.log &
  LENDER=$!
  wait_file /tmp/port$n 20 || return 1
  ramex-lend-ublk --lender 127.0.0.1:$port --contract $k --secret-file /secret$k \
    --ready-file /tmp/ready$n --meter-file /tmp/borrower$n --mlock "$@" \
    2>/tmp/ublk$n.log &
  UBLK=$!
  wait_file /tmp/ready$n 60 || return 1
  DEV=$(cat /tmp/ready$n)
}
# Mode "ublk-test" (tests/lending/ublk.sh; a kernel with ublk_drv): a
# contract's pages as /dev/ublkbN through ramex-lend-ublk, checked (a
# pattern written and read back with O_DIRECT, a discard, a clean stop, a
# lender that vanishes, a recall, swap recalled); mode "ublk" then adds the bench's rows on it
# beside /dev/nbd0 (bridge) and /dev/nbd2 (direct), compared within this
# guest only.
if [ "$MODE" = ublk ] || [ "$MODE" = ublk-test ]; then
  PAGES=16384
  if ! start_ublk 1 1 7001; then
    mark "UBLK-SETUP fail"; cat /tmp/lender1.log /tmp/ublk1.log; finish
  fi
  SECTORS=$(cat /sys/block/${DEV#/dev/}/size)
  st=fail; [ "$SECTORS" = $((PAGES * 8)) ] && [ -b "$DEV" ] && st=ok
  mark "UBLK-SETUP $st dev=$DEV sectors=$SECTORS"
  # 8 MiB of random bytes at 1 MiB in, and 4 KiB pieces at odd pages
  dd if=/dev/urandom of=/tmp/pat bs=65536 count=128 2>/dev/null
  dd if=/tmp/pat of=$DEV bs=65536 seek=16 oflag=direct 2>/tmp/dd.err
  dd if=$DEV of=/tmp/back bs=65536 skip=16 count=128 iflag=direct 2>>/tmp/dd.err
  i=0
  for p in 1 7 4099 16383; do
    dd if=/tmp/pat of=$DEV bs=4096 skip=$i seek=$p count=1 oflag=direct 2>>/tmp/dd.err
    i=$((i + 1))
  done
  for p in 1 7 4099 16383; do
    dd if=$DEV bs=4096 skip=$p count=1 iflag=direct 2>>/tmp/dd.err
  done >/tmp/back4
  dd if=/tmp/pat of=/tmp/pat4 bs=4096 count=4 2>/dev/null
  a=$(sha256sum </tmp/pat | cut -c1-16) b=$(sha256sum </tmp/back | cut -c1-16)
  a4=$(sha256sum </tmp/pat4 | cut -c1-16) b4=$(sha256sum </tmp/back4 | cut -c1-16)
  st=fail; [ "$a" = "$b" ] && [ "$a4" = "$b4" ] && st=ok
  mark "UBLK-DATA $st sha256=$a/$b pages_sha256=$a4/$b4 writes=$(field /tmp/lender1 page_writes)"
  # a discard becomes a lend TRIM: the lender frees the pages
  before=$(field /tmp/lender1 page_trims)
  blkdiscard -o 1048576 -l 1048576 $DEV; drc=$?
  sleep 2 # one meter tick of the lender
  after=$(field /tmp/lender1 page_trims)
  st=fail; [ $drc -eq 0 ] && [ "${after:-0}" -ge $((${before:-0} + 256)) ] && st=ok
  mark "UBLK-TRIM $st rc=$drc page_trims=${before:-0}..${after:-0}"
  kill -TERM $UBLK; wait $UBLK; urc=$?
  gone=ok; [ -e /sys/block/${DEV#/dev/} ] && gone=fail
  st=fail; [ $urc -eq 0 ] && [ $gone = ok ] && st=ok
  mark "UBLK-STOP $st rc=$urc device_gone=$gone"
  grep -E 'level=(warn|error)|ends' /tmp/ublk1.log | sed 's|^|LOG ublk1.log: |'
  [ $st = ok ] || { tail -n 20 /tmp/ublk1.log; dmesg | tail -n 20; }
  kill -TERM $LENDER; wait $LENDER
  # the lender vanishes under the device: its requests fail with EIO at
  # once, the server ends "lender lost" (3) and the device goes
  if start_ublk 5 3 7005; then
    dd if=/tmp/pat of=$DEV bs=65536 count=16 oflag=direct 2>/dev/null; wrc=$?
    kill -KILL $LENDER; wait $LENDER
    dd if=$DEV of=/dev/null bs=4096 skip=5 count=1 iflag=direct 2>/dev/null; rrc=$?
    wait $UBLK; urc=$?
    gone=ok; [ -e /sys/block/${DEV#/dev/} ] && gone=fail
    st=fail; [ $wrc -eq 0 ] && [ $rrc -ne 0 ] && [ $urc -eq 3 ] && [ $gone = ok ] && st=ok
    mark "UBLK-LOST $st write_rc=$wrc read_rc=$rrc rc=$urc device_gone=$gone"
    [ $st = ok ] || { tail -n 20 /tmp/ublk5.log; dmesg | tail -n 20; }
  else
    mark "UBLK-LOST fail setup"; cat /tmp/ublk5.log
  fi
  # a recall: the server stops the device, releases, the lender frees
  if start_ublk 6 2 7006; then
    dd if=/tmp/pat of=$DEV bs=65536 count=16 oflag=direct 2>/dev/null
    kill -USR1 $LENDER
    wait $UBLK; urc=$?
    wait $LENDER; lrc=$?
    gone=ok; [ -e /sys/block/${DEV#/dev/} ] && gone=fail
    st=fail; [ $urc -eq 0 ] && [ $lrc -eq 0 ] && [ $gone = ok ] && grep -q 'end=released' /tmp/lender6.log && st=ok
    mark "UBLK-RECALL $st rc=$urc lender_rc=$lrc device_gone=$gone"
    [ $st = ok ] || { tail -n 20 /tmp/ublk6.log /tmp/lender6.log; }
  else
    mark "UBLK-RECALL fail setup"; cat /tmp/ublk6.log
  fi
  # swap on the device: a workload bigger than memory holds pages on it,
  # the lender recalls, the server swaps the device off (the pages come
  # back to memory or to the local swap below it), stops and releases;
  # the workload's pattern is intact
  rm -f /tmp/pat /tmp/back /tmp/pat4 /tmp/back4 # the guest's memory
  if start_ublk 8 2 7008 --swap-priority 100; then
    src=0; grep -q "^$DEV " /proc/swaps || src=1
    AVAIL=$(($(meminfo MemAvailable) / 1024))
    W=$((AVAIL + 40))
    echo $(((AVAIL - HEADROOM_MIB) << 20)) >/sys/fs/cgroup/work/memory.max
    rm -f /tmp/go8
    in_cg work ramex-lend-workload $W /tmp/go8 >/tmp/w8.out 2>&1 &
    WL=$!
    i=0; while ! grep -q written /tmp/w8.out 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    used=$(swap_used_kb $DEV)
    kill -USR1 $LENDER
    wait $UBLK; urc=$?
    wait $LENDER; lrc=$?
    gone=ok; grep -q "^$DEV " /proc/swaps && gone=fail
    touch /tmp/go8
    wait $WL; wrc=$?
    st=fail
    [ $src -eq 0 ] && [ "${used:-0}" -gt 16384 ] && [ $urc -eq 0 ] && [ $lrc -eq 0 ] &&
      [ $gone = ok ] && [ $wrc -eq 0 ] && grep -q bad_words=0 /tmp/w8.out &&
      grep -q 'end=released' /tmp/lender8.log && st=ok
    mark "UBLK-SWAP $st swapon_rc=$src used_kb=${used:-0} workload_mib=$W rc=$urc lender_rc=$lrc swap_gone=$gone vda_used_kb=$(swap_used_kb /dev/vda) workload_rc=$wrc $(tail -n 1 /tmp/w8.out)"
    [ $st = ok ] || { tail -n 20 /tmp/ublk8.log /tmp/lender8.log; }
  else
    mark "UBLK-SWAP fail setup"; cat /tmp/ublk8.log
  fi
  [ "$MODE" = ublk ] || finish # the guest's memory, for the rows
  # the rows: ublk, nbd.ko with the bridge and nbd.ko direct, all three up
  # at once and measured in turns, twice, so that the emulator's and the
  # host's changing load fall on each alike (smaller contracts: three
  # lenders' locked memory in one guest)
  PAGES=8192
  start_ublk 7 1 7007 || { mark "UBLK-BENCH fail ublk"; cat /tmp/ublk7.log; finish; }
  PIDS="$UBLK $LENDER" UDEV=$DEV
  start_pair 2 7002 $PAGES /dev/nbd0 || { mark "UBLK-BENCH fail bridge"; cat /tmp/borrower2.log; finish; }
  swapoff /dev/nbd0; PIDS="$PIDS $BRIDGE $LENDER"
  DIRECT=--direct
  start_pair 3 7003 $PAGES /dev/nbd2 || { mark "UBLK-BENCH fail direct"; cat /tmp/borrower3.log; finish; }
  swapoff /dev/nbd2; PIDS="$PIDS $BRIDGE $LENDER"
  DIRECT=
  for round in 1 2; do
    stream=; [ $round = 1 ] && stream="--stream-mib 16"
    for d in "$UDEV ublk" "/dev/nbd0 nbd" "/dev/nbd2 direct"; do
      set -- $d
      ramex-lend-bench --blockdev $1 --pages $PAGES --ops 2000 --name guest-$2
      ramex-lend-bench --blockdev $1 --pages $PAGES --ops 3000 --qd 32 $stream \
        --name guest-$2
    done
  done
  for p in $PIDS; do kill -TERM $p; wait $p; done
  mark "UBLK-BENCH ok store=$STORE"
  finish
fi

if [ "$MODE" = bench ]; then
  PAGES=16384
  start_pair 1 7001 $PAGES /dev/nbd0 || { mark "BENCH fail setup"; finish; }
  swapoff /dev/nbd0; swapoff /dev/vda
  # the same 4 KiB O_DIRECT random I/O on both block devices
  ramex-lend-bench --blockdev /dev/nbd0 --pages $PAGES --ops 3000 --name guest-nbd
  ramex-lend-bench --blockdev /dev/vda --pages $PAGES --ops 3000 --name guest-vda
  # many requests in flight through the kernel's nbd driver (32 threads of
  # O_DIRECT), beside the local disk and zram the same way
  ramex-lend-bench --blockdev /dev/nbd0 --pages $PAGES --ops 3000 --qd 32 \
    --stream-mib 32 --name guest-nbd
  ramex-lend-bench --blockdev /dev/vda --pages $PAGES --ops 3000 --qd 32 \
    --stream-mib 32 --name guest-vda
  if [ -e /sys/block/zram0 ] && echo 64M >/sys/block/zram0/disksize; then
    ramex-lend-bench --blockdev /dev/zram0 --pages $PAGES --ops 3000 --name guest-zram
    ramex-lend-bench --blockdev /dev/zram0 --pages $PAGES --ops 3000 --qd 32 \
      --stream-mib 32 --name guest-zram
  else
    echo "guest-zram not available"
  fi
  kill -TERM $BRIDGE; wait $BRIDGE; kill -TERM $LENDER; wait $LENDER
  # the direct path: the guest's nbd.ko on the lender's DATA connection,
  # the same runs (compare with guest-nbd: both are emulated alike)
  DIRECT=--direct
  if start_pair 3 7003 $PAGES /dev/nbd2; then
    swapoff /dev/nbd2
    ramex-lend-bench --blockdev /dev/nbd2 --pages $PAGES --ops 3000 --name guest-direct
    ramex-lend-bench --blockdev /dev/nbd2 --pages $PAGES --ops 3000 --qd 32 \
      --stream-mib 32 --name guest-direct
    kill -TERM $BRIDGE; wait $BRIDGE; kill -TERM $LENDER; wait $LENDER
  else
    echo "guest-direct could not start"; cat /tmp/borrower3.log
  fi
  DIRECT=
  # the lend protocol alone, from a process: a contract has one borrower,
  # so a second lender
  ramex-lend-server --contract 2 --secret-file /secret2 --pages $PAGES \
    --listen 127.0.0.1:7002 --port-file /tmp/port2 --store $STORE --mlock \
    2>/tmp/lender2.log &
  LENDER=$!
  wait_file /tmp/port2 20 && ramex-lend-bench --lender 127.0.0.1:7002 \
    --contract 2 --secret-file /secret2 --pages $PAGES --ops 3000 --name guest-lend
  kill -TERM $LENDER; wait $LENDER
  mark "BENCH ok store=$STORE"
  finish
fi

# ---- 1: swap to lent pages ------------------------------------------------
PAGES=24576 # 96 MiB
if ! start_pair 1 7001 $PAGES /dev/nbd0; then
  mark "SETUP fail"; cat /tmp/lender1.log /tmp/borrower1.log; finish
fi
AVAIL=$(($(meminfo MemAvailable) / 1024))
W=$((AVAIL + 48))
echo $(((AVAIL - HEADROOM_MIB) << 20)) >/sys/fs/cgroup/work/memory.max
# both ends of the swap path must be out of reclaim (lend_mem.h)
st=ok; grep -q 'not fully kept out of reclaim' /tmp/lender1.log /tmp/borrower1.log && st=fail
mark "SETUP $st guard=$st mem_total_kb=$(meminfo MemTotal) mem_available_mib=$AVAIL workload_mib=$W work_cgroup_max_mib=$((AVAIL - HEADROOM_MIB)) lent_mib=$((PAGES / 256))"
( peak=0; while [ ! -e /tmp/stop-sampler ]; do
    u=$(swap_used_kb /dev/nbd0); [ -n "$u" ] && [ "$u" -gt $peak ] && peak=$u
    echo $peak >/tmp/peak; sleep 0.2; done ) &
in_cg work ramex-lend-workload $W >/tmp/w1.out 2>&1; rc=$?
touch /tmp/stop-sampler; sleep 0.5
st=fail; [ $rc -eq 0 ] && grep -q bad_words=0 /tmp/w1.out && st=ok
mark "WORKLOAD $st rc=$rc $(cat /tmp/w1.out | tail -n 1)"
peak=$(cat /tmp/peak)
st=fail; [ "$peak" -gt $((16 * 1024)) ] && st=ok
mark "SWAPPED $st nbd0_peak_used_kb=$peak vda_used_kb=$(swap_used_kb /dev/vda)"
sleep 2 # one more meter tick on both sides, no I/O in between
meters METERS-LIVE 1

# ---- 2: recall while pages are out -------------------------------------
AVAIL=$(($(meminfo MemAvailable) / 1024))
W=$((AVAIL + 40))
rm -f /tmp/go2
in_cg work ramex-lend-workload $W /tmp/go2 >/tmp/w2.out 2>&1 &
WL=$!
wait_file /tmp/w2.out 5
i=0; while ! grep -q written /tmp/w2.out && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
used=$(swap_used_kb /dev/nbd0)
mark "HOLD ok workload_mib=$W nbd0_used_kb=$used"
t=$(cut -d. -f1 /proc/uptime)
kill -USR1 $LENDER
wait $BRIDGE; brc=$?
wait $LENDER; lrc=$?
dt=$(($(cut -d. -f1 /proc/uptime) - t))
gone=ok; grep -q '^/dev/nbd0' /proc/swaps && gone=fail
st=fail; [ $brc -eq 0 ] && [ $lrc -eq 0 ] && [ "$gone" = ok ] && grep -q 'end=released' /tmp/lender1.log && st=ok
mark "RECALL $st bridge_rc=$brc lender_rc=$lrc seconds=$dt notice_s=120 nbd0_gone=$gone vda_used_kb=$(swap_used_kb /dev/vda) lender_pages_hosted=$(field /tmp/lender1 pages_hosted)"
touch /tmp/go2
wait $WL; rc=$?
st=fail; [ $rc -eq 0 ] && grep -q bad_words=0 /tmp/w2.out && st=ok
mark "RECALL-DATA $st rc=$rc $(tail -n 1 /tmp/w2.out)"
meters METERS-FINAL 1

# ---- 3: the lender vanishes --------------------------------------------
PAGES=16384 # 64 MiB
if ! start_pair 2 7002 $PAGES /dev/nbd1; then
  mark "VANISH-SETUP fail"; cat /tmp/lender2.log /tmp/borrower2.log; finish
fi
swapoff /dev/vda # the victim's pages must go to the lender
echo 32M >/sys/fs/cgroup/victim/memory.max
rm -f /tmp/go3
in_cg victim ramex-lend-workload 48 /tmp/go3 >/tmp/w3.out 2>&1 &
VICTIM=$!
i=0; while ! grep -q written /tmp/w3.out 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
used=$(swap_used_kb /dev/nbd1)
# the limit only served to push the victim's pages out; lifted now so that
# swapoff, which charges a page to the victim for each entry it tries to
# read back, cannot end the victim by a cgroup OOM kill (SIGKILL) before
# the victim meets a lost page (SIGBUS, the outcome under test)
echo max >/sys/fs/cgroup/victim/memory.max
kill -KILL $LENDER; wait $LENDER
touch /tmp/go3
wait $VICTIM; vrc=$?
wait $BRIDGE; brc=$?
gone=ok; grep -q '^/dev/nbd1' /proc/swaps && gone=fail
st=fail; [ $vrc -eq 135 ] && [ $brc -eq 3 ] && [ "$gone" = ok ] && st=ok
mark "VANISH $st nbd1_used_kb_before=$used victim_rc=$vrc (135=SIGBUS) bridge_rc=$brc nbd1_gone=$gone lost=$(field /tmp/borrower2 lost)"

# ---- 4: the lender stops answering (stopped, its connections open) ---------
# nbd.ko (direct, NBD_SET_TIMEOUT) or the bridge (its reply timeout) fails
# the victim's reads with EIO after --reply-timeout-ms (5 s): the victim
# dies of SIGBUS instead of hanging, the device is retired
PAGES=16384
if ! start_pair 3 7003 $PAGES /dev/nbd2; then
  mark "SILENT-SETUP fail"; cat /tmp/lender3.log /tmp/borrower3.log; finish
fi
echo 32M >/sys/fs/cgroup/victim/memory.max
rm -f /tmp/go5
in_cg victim ramex-lend-workload 48 /tmp/go5 >/tmp/w5.out 2>&1 &
VICTIM=$!
i=0; while ! grep -q written /tmp/w5.out 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
used=$(swap_used_kb /dev/nbd2)
echo max >/sys/fs/cgroup/victim/memory.max
kill -STOP $LENDER
t=$(cut -d. -f1 /proc/uptime)
touch /tmp/go5
wait $VICTIM; vrc=$?
wait $BRIDGE; brc=$?
dt=$(($(cut -d. -f1 /proc/uptime) - t))
kill -KILL $LENDER; kill -CONT $LENDER; wait $LENDER
gone=ok; grep -q '^/dev/nbd2' /proc/swaps && gone=fail
st=fail; [ $vrc -eq 135 ] && [ $brc -eq 3 ] && [ "$gone" = ok ] && st=ok
mark "SILENT $st nbd2_used_kb_before=$used victim_rc=$vrc (135=SIGBUS) bridge_rc=$brc seconds=$dt nbd2_gone=$gone"
in_cg work ramex-lend-workload 16 >/tmp/w4.out 2>&1; rc=$?
st=fail; [ $rc -eq 0 ] && st=ok
mark "ALIVE $st rc=$rc $(tail -n 1 /tmp/w4.out)"
for f in /tmp/lender1.log /tmp/borrower1.log /tmp/borrower2.log /tmp/borrower3.log; do
  grep -E 'level=(warn|error)|ends|swapoff' $f | sed "s|^|LOG ${f##*/}: |"
done
finish
