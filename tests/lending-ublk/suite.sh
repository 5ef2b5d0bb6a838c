#!/usr/bin/env bash
# tests/lending-ublk/suite.sh — ramex-lend-ublk in a real kernel: the checks
# of tests/lending/ublk.sh without its bench rows (see README.md there).
exec bash "$(dirname "$0")/../lending/ublk.sh" --test
