#!/usr/bin/env bash
# `make fuzz`: builds every tests/fuzz/fuzz_NAME.c with libFuzzer + ASan +
# UBSan and runs each for a bounded time (RAMEX_FUZZ_SECONDS, default 60).
# fuzz_NAME.srcs, beside the target, lists the project sources it links
# (one path per line, from the repository root). Optional beside it:
# fuzz_NAME.seeds, one seed input a line with \r \n \xNN escapes (each is
# written to a file of the seed corpus), and fuzz_NAME.dict, a libFuzzer
# dictionary. Corpora and crash files are kept under var/fuzz/NAME/.
# RAMEX_FUZZ_TARGETS="fuzz_a fuzz_b" builds and runs only those.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${RAMEX_FUZZ_SECONDS:-60}
command -v clang >/dev/null || { echo "fuzz: clang is missing (run scripts/deps.sh)" >&2; exit 1; }
status=0
for f in tests/fuzz/fuzz_*.c; do
  [[ -e $f ]] || { echo "fuzz: no targets"; exit 0; }
  name=$(basename "$f" .c)
  [[ -n ${RAMEX_FUZZ_TARGETS:-} && " $RAMEX_FUZZ_TARGETS " != *" $name "* ]] && continue
  srcs=()
  [[ -f tests/fuzz/$name.srcs ]] && mapfile -t srcs < <(grep -v '^\s*#' "tests/fuzz/$name.srcs" | grep .)
  bin=var/fuzz/$name/$name
  mkdir -p "var/fuzz/$name/corpus"
  if ! clang -std=c11 -g -O1 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
    $(pkg-config --cflags jansson libpq libmicrohttpd 2>/dev/null) \
    -o "$bin" "$f" "${srcs[@]}" \
    $(pkg-config --libs jansson libssl libcrypto libpq libmicrohttpd 2>/dev/null) -lm -lpthread; then
    echo "fuzz: $name does not build"; status=1; continue
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
  if ! (cd "var/fuzz/$name" && ./"$name" "${args[@]}" "${corpora[@]}" 2>&1 | tail -n 12); then
    echo "fuzz: $name found a failure; the input is under var/fuzz/$name/"; status=1
  fi
done
exit $status
