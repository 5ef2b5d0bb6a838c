#!/usr/bin/env bash
# bench/50-lending.sh: 4 KiB page latency (p50/p99) and throughput of lent
# pages, beside local storage on the same machine (docs/lending.md).
#
# Host, over loopback (native speed):
#   lend      the lend protocol itself: ramex-lend-bench speaks to
#             ramex-lend-server over TCP on 127.0.0.1, one page at a time
#   nbd       the same pages as NBD through ramex-lend-nbd (what the kernel's
#             nbd driver would see), over a unix socket
#   direct    (in flight only) NBD straight to the lender on its DATA
#             connection: the direct path, no bridge (ramex-lend-nbd --direct)
#   file      pread/pwrite with O_DIRECT on a local file (a swap file's path)
# Guest, the Debian kernel under qemu TCG (emulated: compare rows with each
# other, not with the host), lender and bridge inside the guest:
#   guest-nbd /dev/nbd0 through the kernel's nbd driver, the bridge and the
#             lender, O_DIRECT (the swap path)
#   guest-direct /dev/nbd2 on the direct path: the guest's nbd.ko on the
#             lender's DATA connection, no bridge between
#   guest-vda the guest's local virtio disk, O_DIRECT (local swap)
#   guest-lend the lend protocol from a process to a lender in the guest
# and a second guest on Debian 12's 6.12 kernel, which has ublk_drv
# (tests/lending/ublk.sh; downloaded once into var/; RAMEX_BENCH_UBLK=0
# skips it): guest-ublk /dev/ublkb0 through ramex-lend-ublk, beside
# guest-nbd and guest-direct again in that guest, one at a time and QD32
#
# Then, on the host, with many requests in flight (the kernel's nbd driver
# keeps up to 128 per device): streaming MiB/s in 512 KiB requests (8 in
# flight) written and read back, 4 KiB random reads at queue depth 32 with
# p50/p99, and a recall of the whole contract through the protocol (notice
# -> every page back in the borrower's memory -> RELEASE answered, the
# lender's pages freed). Beside them the local alternatives: a file on disk
# with O_DIRECT (32 threads), and zram when the kernel has it. The
# scheduler's floor (two processes bouncing a byte) comes first; slow peers
# (8 trickling handshakes at the lender) and a slow lender (its replies
# delivered late by a relay) are each run beside a healthy run. The
# in-flight runs are repeated over TLS 1.3 (required off loopback).
# /proc/loadavg is printed beside each figure: the machine is shared.
#
# Every server binds 127.0.0.1 and is stopped when the script ends; every
# step runs under `timeout`.
#   RAMEX_BENCH_OPS (20000: one at a time)  RAMEX_BENCH_QD_OPS (100000: the
#   random reads of each queue-depth run)  RAMEX_BENCH_GUEST (1; 0 skips the qemu part)
#   RAMEX_BENCH_STREAM_MIB (1024: the contract of the in-flight runs and
#   the recall, held in locked memory by the lender)
#   RAMEX_BENCH_SLOW_US (1000: how late the slow lender's replies arrive)
#   RAMEX_BENCH_KEEP_AWAKE (the number of cores, at most 8: the bridge's
#   --keep-awake threads in the runs that name them "awake")
# The runs named "idlepoll" hold the CPU latency limit at 0 us while reads
# are in flight (the bridge's --idle-poll 1; the limit is the whole
# machine's, so on loopback it serves the lender too); they need root and
# /dev/cpu_dma_latency, and say so when they cannot.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BDIR=${RAMEX_BUILD:-$ROOT/build} # absolute; guest.sh wants BUILD relative
BIN=$BDIR/bin
OPS=${RAMEX_BENCH_OPS:-20000}
# reads at a queue depth: more of them, so that a p99 is not the first
# requests' warm-up (20 000 reads at 200 k/s is a tenth of a second)
QOPS=${RAMEX_BENCH_QD_OPS:-100000}
PAGES=16384 # 64 MiB, more than a CPU cache
work=$BDIR/lend-bench
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$work/data.img"
}
trap cleanup EXIT

make -s -C "$ROOT" -j2 build/bin/ramex-lend-server build/bin/ramex-lend-nbd \
  build/bin/ramex-lend-bench build/bin/ramex-lend-workload >/dev/null ||
  { echo "lending bench: build failed"; exit 1; }
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/secret"

# one lender per contract: a contract has one borrower at a time
port=
lpid=
lender_tls=() # --tls-cert F --tls-key F for the next lender, or nothing
lender() { # contract [pages]; sets port and lpid (not in a subshell: pids must stay ours)
  rm -f "$work/port$1"
  "$BIN/ramex-lend-server" --contract "$1" --secret-file "$work/secret" \
    --pages "${2:-$PAGES}" --listen 127.0.0.1:0 --port-file "$work/port$1" \
    --store anon --mlock "${lender_tls[@]}" >/dev/null 2>"$work/lender$1.log" &
  lpid=$!
  pids+=($!)
  local i=0
  while [[ ! -s $work/port$1 ]] && ((i < 300)); do sleep 0.1; i=$((i + 1)); done
  [[ -s $work/port$1 ]] || { echo "lending bench: lender $1 did not start"; cat "$work/lender$1.log"; exit 1; }
  port=$(cat "$work/port$1")
}

echo "host: $(nproc) cores, loopback, $OPS random 4 KiB pages of $PAGES, one at a time"
lender 1
timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 1 \
  --secret-file "$work/secret" --pages $PAGES --ops "$OPS" --name lend |
  sed 's/^/  /'

lender 2
"$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 2 \
  --secret-file "$work/secret" --listen-unix "$work/nbd.sock" \
  >/dev/null 2>"$work/bridge.log" &
pids+=($!)
i=0; while [[ ! -S $work/nbd.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd.sock" --pages $PAGES \
  --ops "$OPS" --name nbd | sed 's/^/  /'

truncate -s $((PAGES * 4096)) "$work/data.img"
timeout 300 "$BIN/ramex-lend-bench" --blockdev "$work/data.img" --pages $PAGES \
  --ops "$OPS" --name file | sed 's/^/  /'
echo "  (file: $(df -T "$work" | awk 'NR == 2 { print $2 }') on the build dir; O_DIRECT)"

# ---- many requests in flight ------------------------------------------
SMIB=${RAMEX_BENCH_STREAM_MIB:-1024}
SPAGES=$((SMIB * 256))
load() { echo "  (load: $(cut -d' ' -f1-3 /proc/loadavg))"; }
echo "host: many in flight; stream = $SMIB MiB in 512 KiB requests, 8 in flight; randread = $QOPS random 4 KiB reads, 32 in flight"
# the scheduler's floor: two processes bouncing a byte, two wakeups a
# round trip; every path below wakes three or four processes per request
# and the same with cores kept out of idle (lend_awake, --keep-awake)
AWAKE=${RAMEX_BENCH_KEEP_AWAKE:-$(nproc)}
((AWAKE > 8)) && AWAKE=8
load
"$BIN/ramex-lend-bench" --wakeup-floor --ops 100000 --name floor | sed 's/^/  /'
"$BIN/ramex-lend-bench" --wakeup-floor --ops 100000 --keep-awake "$AWAKE" \
  --name floor-awake | sed 's/^/  /'
# idle polling (lend_qos) alternated with plain floors: the machine is shared
for k in 1 2; do
  "$BIN/ramex-lend-bench" --wakeup-floor --ops 100000 --idle-poll 1 \
    --name floor-idlepoll 2>&1 | sed 's/^/  /'
  "$BIN/ramex-lend-bench" --wakeup-floor --ops 100000 --name floor | sed 's/^/  /'
done
lender 3 $SPAGES
load
timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 3 \
  --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 8 \
  --stream-mib "$SMIB" --name lend-qd | sed 's/^/  /'
load
timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 3 \
  --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
  --name lend-qd | sed 's/^/  /'
lender 4 $SPAGES
"$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
  --secret-file "$work/secret" --listen-unix "$work/nbd4.sock" \
  >/dev/null 2>"$work/bridge4.log" &
pids+=($!)
i=0; while [[ ! -S $work/nbd4.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
load
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4.sock" --pages $SPAGES \
  --ops "$QOPS" --qd 8 --stream-mib "$SMIB" --name nbd-qd | sed 's/^/  /'
"$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
  --secret-file "$work/secret" --listen-unix "$work/nbd4b.sock" \
  >/dev/null 2>"$work/bridge4b.log" &
pids+=($!)
i=0; while [[ ! -S $work/nbd4b.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
load
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4b.sock" --pages $SPAGES \
  --ops "$QOPS" --qd 32 --name nbd-qd | sed 's/^/  /'
# the bridge keeping the cores out of idle while reads are in flight,
# alternated with plain runs: the machine is shared, one pair says little
for k in 1 2; do
  "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --listen-unix "$work/nbd4a$k.sock" \
    --keep-awake "$AWAKE" >/dev/null 2>"$work/bridge4a$k.log" &
  pids+=($!)
  i=0; while [[ ! -S $work/nbd4a$k.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4a$k.sock" --pages $SPAGES \
    --ops "$QOPS" --qd 32 --name nbd-qd-awake | sed 's/^/  /'
  "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --listen-unix "$work/nbd4p$k.sock" \
    >/dev/null 2>"$work/bridge4p$k.log" &
  pids+=($!)
  i=0; while [[ ! -S $work/nbd4p$k.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4p$k.sock" --pages $SPAGES \
    --ops "$QOPS" --qd 32 --name nbd-qd | sed 's/^/  /'
done
# idle polling (--idle-poll 1, lend_qos) alternated with plain runs likewise
for k in 1 2; do
  "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --listen-unix "$work/nbd4i$k.sock" \
    --idle-poll 1 >/dev/null 2>"$work/bridge4i$k.log" &
  pids+=($!)
  i=0; while [[ ! -S $work/nbd4i$k.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4i$k.sock" --pages $SPAGES \
    --ops "$QOPS" --qd 32 --name nbd-qd-idlepoll | sed 's/^/  /'
  grep -o 'msg="idle polling is off[^"]*".*' "$work/bridge4i$k.log" | head -1 | sed 's/^/  (not polled: /; s/$/)/'
  "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --listen-unix "$work/nbd4q$k.sock" \
    >/dev/null 2>"$work/bridge4q$k.log" &
  pids+=($!)
  i=0; while [[ ! -S $work/nbd4q$k.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4q$k.sock" --pages $SPAGES \
    --ops "$QOPS" --qd 32 --name nbd-qd | sed 's/^/  /'
done

# ---- the direct path ----------------------------------------------------
# The borrower's kernel speaking NBD to the lender itself on a DATA
# connection (ramex-lend-nbd --direct hands nbd.ko the socket): the same
# NBD client model as nbd-qd, with no bridge between; alternated with the
# bridge's runs against the same lender. (The slow-peer runs below go on
# with lender 4: its port and pid are kept.)
port4=$port lpid4=$lpid
lender 7 $SPAGES
echo "host: the direct path (NBD on the lender's DATA connection) and the bridge, alternated"
for k in 1 2; do
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-direct 127.0.0.1:$port --contract 7 \
    --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 8 \
    --stream-mib "$SMIB" --name direct-qd | sed 's/^/  /'
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-direct 127.0.0.1:$port --contract 7 \
    --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
    --name direct-qd | sed 's/^/  /'
  for q in 8 32; do
    "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$port --contract 7 \
      --secret-file "$work/secret" --listen-unix "$work/nbd7$k$q.sock" \
      >/dev/null 2>"$work/bridge7$k$q.log" &
    pids+=($!)
    i=0; while [[ ! -S $work/nbd7$k$q.sock ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
    load
    stream=(); ((q == 8)) && stream=(--stream-mib "$SMIB")
    timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd7$k$q.sock" --pages $SPAGES \
      --ops "$QOPS" --qd $q "${stream[@]}" --name nbd-qd | sed 's/^/  /'
  done
done
kill -TERM "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null # its 1 GiB
port=$port4 lpid=$lpid4

# ---- slow peers ---------------------------------------------------------
# 1. Others trickling handshakes at the borrower's lender (the issue's "one
#    byte every 4 s", and a faster 10 ms): 8 peers, the lender's handshake
#    limit, each path first without them, then with them.
# 2. A slow lender: every byte it sends delivered SLOW_US late by a relay
#    (ramex-lend-bench --relay) between the bridge and the lender, beside
#    the healthy run. The bridge's reply timeout (5 s) is far above it.
SLOW_US=${RAMEX_BENCH_SLOW_US:-1000}
bridge() { # contract socket lender-port [--tls-ca F]; starts a bridge, waits for its socket
  "$BIN/ramex-lend-nbd" --lender 127.0.0.1:$3 --contract "$1" \
    --secret-file "$work/secret" --listen-unix "$work/$2" "${@:4}" \
    >/dev/null 2>"$work/$2.log" &
  pids+=($!)
  local i=0
  while [[ ! -S $work/$2 ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
}
echo "host: slow peers; randread = $QOPS random 4 KiB reads, 32 in flight, each path healthy then with 8 slow peers"
load
timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 4 \
  --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
  --name lend-healthy | sed 's/^/  /'
for ms in 4000 10; do
  timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
    --trickle 127.0.0.1:$port --trickle-ms $ms --name lend-trickle$ms |
    sed 's/^/  /'
done
load
bridge 4 nbd4h.sock $port
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4h.sock" \
  --pages $SPAGES --ops "$QOPS" --qd 32 --name nbd-healthy | sed 's/^/  /'
for ms in 4000 10; do
  bridge 4 nbd4t$ms.sock $port
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4t$ms.sock" \
    --pages $SPAGES --ops "$QOPS" --qd 32 --trickle 127.0.0.1:$port \
    --trickle-ms $ms --name nbd-trickle$ms | sed 's/^/  /'
done
load
# the direct path (the default where plain TCP is allowed): nbd.ko's DATA
# connection is served in the lender's one loop beside the trickling peers
timeout 300 "$BIN/ramex-lend-bench" --nbd-direct 127.0.0.1:$port --contract 4 \
  --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
  --name direct-healthy | sed 's/^/  /'
for ms in 4000 10; do
  timeout 300 "$BIN/ramex-lend-bench" --nbd-direct 127.0.0.1:$port --contract 4 \
    --secret-file "$work/secret" --pages $SPAGES --ops "$QOPS" --qd 32 \
    --trickle 127.0.0.1:$port --trickle-ms $ms --name direct-trickle$ms |
    sed 's/^/  /'
done
load
echo "  (a lender whose every reply arrives ${SLOW_US} us late, beside a healthy one)"
bridge 4 nbd4h2.sock $port
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4h2.sock" \
  --pages $SPAGES --ops "$QOPS" --qd 32 --name nbd-healthy | sed 's/^/  /'
rm -f "$work/relay.port"
"$BIN/ramex-lend-bench" --relay 127.0.0.1:$port --relay-port-file "$work/relay.port" \
  --delay-us "$SLOW_US" 2>"$work/relay.log" &
pids+=($!)
i=0; while [[ ! -s $work/relay.port ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
bridge 4 nbd4slow.sock "$(cat "$work/relay.port")"
timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd4slow.sock" \
  --pages $SPAGES --ops "$QOPS" --qd 32 --name nbd-slow${SLOW_US}us | sed 's/^/  /'

# ---- TLS ---------------------------------------------------------------
# Off loopback the pages must travel in TLS 1.3 (docs/lending.md): the same
# in-flight runs over TLS, the protocol alone and through the bridge.
if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
  -nodes -days 1 -subj /CN=localhost -keyout "$work/tls.key" \
  -out "$work/tls.crt" >/dev/null 2>&1; then
  echo "host: TLS 1.3 on loopback; stream and randread as above"
  lender_tls=(--tls-cert "$work/tls.crt" --tls-key "$work/tls.key")
  lender 6 $SPAGES
  lender_tls=()
  load
  timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 6 \
    --secret-file "$work/secret" --tls-ca "$work/tls.crt" --pages $SPAGES \
    --ops "$QOPS" --qd 8 --stream-mib "$SMIB" --name lend-tls | sed 's/^/  /'
  load
  timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 6 \
    --secret-file "$work/secret" --tls-ca "$work/tls.crt" --pages $SPAGES \
    --ops "$QOPS" --qd 32 --name lend-tls | sed 's/^/  /'
  bridge 6 nbd6.sock $port --tls-ca "$work/tls.crt"
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd6.sock" \
    --pages $SPAGES --ops "$QOPS" --qd 8 --stream-mib "$SMIB" --name nbd-tls |
    sed 's/^/  /'
  bridge 6 nbd6b.sock $port --tls-ca "$work/tls.crt"
  load
  timeout 300 "$BIN/ramex-lend-bench" --nbd-unix "$work/nbd6b.sock" \
    --pages $SPAGES --ops "$QOPS" --qd 32 --name nbd-tls | sed 's/^/  /'
else
  echo "  TLS: openssl could not make a certificate here; not measured"
fi

lender 5 $SPAGES
load
timeout 300 "$BIN/ramex-lend-bench" --lender 127.0.0.1:$port --contract 5 \
  --secret-file "$work/secret" --pages $SPAGES --recall-pid "$lpid" \
  --name lend | sed 's/^/  /'
truncate -s $((SPAGES * 4096)) "$work/data.img"
load
timeout 300 "$BIN/ramex-lend-bench" --blockdev "$work/data.img" --pages $SPAGES \
  --ops "$QOPS" --qd 8 --stream-mib "$SMIB" --name file-qd | sed 's/^/  /'
load
timeout 300 "$BIN/ramex-lend-bench" --blockdev "$work/data.img" --pages $SPAGES \
  --ops "$QOPS" --qd 32 --name file-qd | sed 's/^/  /'
rm -f "$work/data.img"
# zram: compressed swap in the borrower's own RAM, the other local choice
if [[ -e /sys/block/zram0 ]] || modprobe zram num_devices=1 2>/dev/null; then
  if [[ -w /sys/block/zram0/disksize ]] && ! grep -q zram0 /proc/swaps &&
    echo "${SMIB}M" >/sys/block/zram0/disksize 2>/dev/null; then
    load
    timeout 300 "$BIN/ramex-lend-bench" --blockdev /dev/zram0 --pages $SPAGES \
      --ops "$QOPS" --qd 8 --stream-mib "$SMIB" --name zram-qd | sed 's/^/  /'
    timeout 300 "$BIN/ramex-lend-bench" --blockdev /dev/zram0 --pages $SPAGES \
      --ops "$QOPS" --qd 32 --name zram-qd | sed 's/^/  /'
    echo 1 >/sys/block/zram0/reset 2>/dev/null
  else
    echo "  zram: /dev/zram0 is in use or cannot be sized here; not measured"
  fi
else
  echo "  zram: not available (modprobe zram: $(modprobe zram 2>&1 | head -1))"
fi

[[ ${RAMEX_BENCH_GUEST:-1} == 0 ]] && exit 0
. "$ROOT/tests/lending/guest.sh"
KVER=$(lend_guest_kver) || { echo "guest: no kernel to boot, skipped"; exit 0; }
make -s -C "$ROOT" kmod >"$work/kmod.log" 2>&1 || true
lend_guest_build "$work/guest" "$KVER" bench || { echo "guest: initramfs failed"; exit 1; }
lend_guest_boot "$work/guest" "$KVER" 256 "$work/guest.log" 300
if ! grep -aq 'LEND-BENCH ok' "$work/guest.log"; then
  echo "guest: the bench did not finish; tail of $work/guest.log:"
  tail -n 20 "$work/guest.log"
  exit 1
fi
echo "guest: kernel $KVER under qemu TCG, 256 MiB, 3000 random 4 KiB pages, O_DIRECT"
grep -a -o 'guest-[a-z]* .*' "$work/guest.log" | tr -d '\r' | sed 's/^/  /'

# ublk: Debian 12's 6.12 kernel (its own guest; compare within it)
[[ ${RAMEX_BENCH_UBLK:-1} == 0 ]] && exit 0
echo "guest (ublk): tests/lending/ublk.sh"
timeout 900 bash "$ROOT/tests/lending/ublk.sh" | sed 's/^/  /'
