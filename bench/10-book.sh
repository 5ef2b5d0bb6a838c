#!/usr/bin/env bash
# The order book: replays a fixed, seeded stream of 10 M commands (50 % new
# orders near the touch, 35 % cancels, 15 % crossing) on one thread and
# prints commands per second and p50/p99/p99.9 latency per command. The
# program is bench/bench_book.c, built at -O2 by `make` into $RAMEX_BUILD/bin.
# RAMEX_BENCH_BOOK_COMMANDS and RAMEX_BENCH_BOOK_SEED change the stream.
set -euo pipefail
bin=${RAMEX_BUILD:-build}/bin/bench_book
[[ -x $bin ]] || { echo "10-book: $bin is missing; run make" >&2; exit 1; }
args=("${RAMEX_BENCH_BOOK_COMMANDS:-10000000}" "${RAMEX_BENCH_BOOK_SEED:-42}")
# One core: pin to the CPU we are on when taskset is there, so the figures
# are not smeared across cores by the scheduler.
if command -v taskset >/dev/null; then
  exec taskset -c "$(awk '{print $39}' /proc/self/stat)" "$bin" "${args[@]}"
fi
exec "$bin" "${args[@]}"
