#!/usr/bin/env bash
# `make bench`: runs every bench/*.sh but lib.sh (which the others source)
# in name order; each prints its own
# figures. Benchmarks measure; they never pass or fail on a number.
set -uo pipefail
cd "$(dirname "$0")/.."
export RAMEX_BUILD=$PWD/${BUILD:-build}
status=0
for b in $(ls bench/*.sh 2>/dev/null | grep -v -e '/run.sh$' -e '/lib.sh$' | sort); do
  echo "== $(basename "$b" .sh)"
  bash "$b" || { echo "bench $(basename "$b"): exited with an error"; status=1; }
done
exit $status
