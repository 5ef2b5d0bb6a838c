#!/usr/bin/env bash
# `make fuzz`: builds every tests/fuzz/fuzz_NAME.c with libFuzzer + ASan +
# UBSan and runs each for a bounded time (RAMEX_FUZZ_SECONDS, default 60).
# make builds it ($BUILD/fuzz/bin/NAME): the component's fragment says
# what it links with `$(call fuzzer,NAME,$(MODULE_SRC),PKGS)`, the same
# source variable as the program it fuzzes (see the top-level Makefile).
# Optional beside the target: fuzz_NAME.seeds, one seed input a line with
# \r \n \xNN escapes (each is written to a file of the seed corpus), and
# fuzz_NAME.dict, a libFuzzer dictionary. Corpora and crash files are kept
# under var/fuzz/NAME/.
# RAMEX_FUZZ_TARGETS="fuzz_a fuzz_b" builds and runs only those.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${RAMEX_FUZZ_SECONDS:-60}
build=${BUILD:-build}
command -v clang >/dev/null || { echo "fuzz: clang is missing (run scripts/deps.sh)" >&2; exit 1; }
# A make of its own (this may run under `make check`, whose jobserver is
# not handed to a script), with as many jobs as `make check` builds with.
fuzz_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory \
    -j"$(nproc 2>/dev/null || echo 2)" BUILD="$build" "$@"
}
status=0
for f in tests/fuzz/fuzz_*.c; do
  [[ -e $f ]] || { echo "fuzz: no targets"; exit 0; }
  name=$(basename "$f" .c)
  [[ -n ${RAMEX_FUZZ_TARGETS:-} && " $RAMEX_FUZZ_TARGETS " != *" $name "* ]] && continue
  bin=$build/fuzz/bin/$name
  [[ $bin == /* ]] || bin=$PWD/$bin # it runs in var/fuzz/NAME
  mkdir -p "var/fuzz/$name/corpus"
  if ! fuzz_make "$build/fuzz/bin/$name"; then
    echo "fuzz: $name does not build (and a new target needs \$(call fuzzer,$name,...) in its component's .mk)"
    status=1; continue
  fi
  args=(-max_total_time="$secs" -print_final_stats=1)
  [[ -f tests/fuzz/$name.dict ]] && args+=(-dict="$PWD/tests/fuzz/$name.dict")
  corpora=(corpus)
  if [[ -f tests/fuzz/$name.seeds ]]; then
    rm -rf "var/fuzz/$name/seeds" && mkdir -p "var/fuzz/$name/seeds"
    i=0
    while IFS= read -r line; do
      [[ -z $line || $line == \#* ]] && continue
      printf '%b' "$line" > "var/fuzz/$name/seeds/$((i++))"
    done < "tests/fuzz/$name.seeds"
    corpora+=(seeds)
  fi
  echo "== $name for ${secs}s"
  if ! (cd "var/fuzz/$name" && "$bin" "${args[@]}" "${corpora[@]}" 2>&1 | tail -n 12); then
    echo "fuzz: $name found a failure; the input is under var/fuzz/$name/"; status=1
  fi
done
exit $status
