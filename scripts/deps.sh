#!/usr/bin/env bash
# Installs the Debian packages ramex needs, only when some are missing.
# Idempotent and silent when everything is present; `make check`, `make demo`
# and `make bench` call it. Needs root (or sudo) only when it has to install.
set -euo pipefail

# Keep this list the one place that names the project's system packages.
PKGS=(
  build-essential pkg-config git
  libmicrohttpd-dev libpq-dev libjansson-dev libssl-dev libcurl4-openssl-dev check
  postgresql postgresql-contrib
  # kernel module build and qemu tests
  linux-headers-amd64 linux-image-amd64 qemu-system-x86 busybox-static cpio kmod
  # browser tests and front-end packages
  chromium fonts-dejavu-core nodejs npm
  # remote lending: NBD block device in the qemu guest; the ublk server
  nbd-client liburing-dev
  # bench and helpers
  procps iproute2 curl ca-certificates
  # make fuzz: libFuzzer
  clang libclang-rt-14-dev
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# A Node.js that did not come from Debian (e.g. /usr/bin/node from elsewhere)
# is fine: only ask apt for nodejs/npm when there is no working node at all.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do
    [[ $p == nodejs || $p == npm ]] || filtered+=("$p")
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: missing packages ${missing[*]} and not root; install them or run as root" >&2; exit 1; }
  SUDO=sudo
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "deps: apt-get failed; see the lines above" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "deps: done"
