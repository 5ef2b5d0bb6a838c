#!/usr/bin/env bash
# bench/50-lending.sh: 4 KiB page latency (p50/p99) and throughput of lent
# pages, beside local storage on the same machine (docs/lending.md).
#
# Host, over loopback (native speed):
#   lend      the lend protocol itself: ramex-lend-bench speaks to
#             ramex-lend-server over TCP on 127.0.0.1, one page at a time
#   nbd       the same pages as NBD through ramex-lend-nbd (what the kernel's
#             nbd driver would see), over a unix socket
#   file      pread/pwrite with O_DIRECT on a local file (a swap file's path)
# Guest, the Debian kernel under qemu TCG (emulated: compare rows with each
# other, not with the host), lender and bridge inside the guest:
#   guest-nbd /dev/nbd0 through the kernel's nbd driver, the bridge and the
#             lender, O_DIRECT (the swap path)
#   guest-vda the guest's local virtio disk, O_DIRECT (local swap)
#   guest-lend the lend protocol from a process to a lender in the guest
#
# Every server binds 127.0.0.1 and is stopped when the script ends; every
# step runs under `timeout`.
#   RAMEX_BENCH_OPS (20000)  RAMEX_BENCH_GUEST (1; 0 skips the qemu part)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BDIR=${RAMEX_BUILD:-$ROOT/build} # absolute; guest.sh wants BUILD relative
BIN=$BDIR/bin
OPS=${RAMEX_BENCH_OPS:-20000}
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
lender() { # contract; sets port (not in a subshell: pids must stay ours)
  rm -f "$work/port$1"
  "$BIN/ramex-lend-server" --contract "$1" --secret-file "$work/secret" \
    --pages $PAGES --listen 127.0.0.1:0 --port-file "$work/port$1" \
    --store anon --mlock >/dev/null 2>"$work/lender$1.log" &
  pids+=($!)
  local i=0
  while [[ ! -s $work/port$1 ]] && ((i < 100)); do sleep 0.1; i=$((i + 1)); done
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
