#!/usr/bin/env bash
# tests/demo/suite.sh — `make demo` as a person ends it: Ctrl-C in a
# terminal prints the same summary as a timed run and exits 0, leaves the
# terminal as it was and nothing running (ctrlc.py, in a pseudo-terminal).
# Run by tests/run.sh (suite "demo"), or alone from the repository root.
# About 20-40 s: a private PostgreSQL, ramexd and two sim agents start, the
# demo is stopped two seconds after its banner. Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${RAMEX_TEST_OUTPUT:-$ROOT/var/test-output}/demo
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "demo: python3 is missing"; echo "0 passed, 1 failed"; exit 0; }
# bounded: the demo stops by itself too (RAMEX_DEMO_SECONDS in ctrlc.py)
timeout -k 10 600 python3 tests/demo/ctrlc.py "$ROOT" "$OUT"
rc=$?
(( rc != 0 )) && echo "demo: ctrlc.py exited $rc" && echo "0 passed, 1 failed"
exit 0
