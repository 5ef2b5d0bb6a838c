# tests/lending/guest.sh — build and boot the lending guest.
#
# Sourced by tests/lending/suite.sh and bench/50-lending.sh. The guest is
# the Debian kernel under qemu (TCG) with an initramfs holding busybox, the
# lending programs and the shared libraries they need (copied by ldd),
# nbd.ko and virtio_blk.ko with their dependencies, ramex.ko when it was
# built, and tests/lending/init.sh as /init. A second virtio disk is the
# guest's local swap. Nothing is written into the source tree.
#
#   lend_guest_kver                   the -amd64 kernel with headers + image
#   lend_guest_build DIR KVER MODE [INIT [FILES]]
#                                     DIR/initrd.gz, DIR/local.img; INIT is
#                                     /init (tests/lending/init.sh), FILES a
#                                     folder copied into the root as it is
#   lend_guest_boot DIR KVER MEM LOG SECONDS [NIC]
#                                     NIC: qemu's -nic (none)
#   lend_guest_kroot DIR              a Debian kernel package, extracted
#                                     under DIR/root (downloaded once)
#   lend_guest_ublk_kroot             that of Debian 12's 6.12 kernel, which
#                                     has ublk_drv (LEND_UBLK_KERNEL_PKG)
#
# LEND_GUEST_KROOT=DIR (an extracted linux-image package: DIR/boot,
# DIR/lib/modules) boots that kernel instead of the host's (its modules
# may be .ko.xz: decompressed into the initramfs, which busybox insmod
# needs); it also adds ublk_drv and ramex-lend-ublk when it has them.
#
# Mode "agent" (tests/lendagent) adds ramex-agent and virtio_net.ko: the
# guest's agents reach a ramexd on the host through qemu's user network.
# Needs ROOT (repository root) and BIN (built programs). LEND_GUEST_DEBUG=1
# puts kernel messages and hung-task reports on the serial log.

lend_guest_kver() {
  local d k best= r=${LEND_GUEST_KROOT:-}
  for d in "$r"/lib/modules/*-amd64; do
    k=${d##*/}
    [[ -f $r/boot/vmlinuz-$k && -d $d/kernel ]] && best=$k
  done
  [[ -n $best ]] || { echo "guest: no $r/lib/modules/*-amd64 with $r/boot/vmlinuz" >&2; return 1; }
  # an extracted package has no modules.dep (its postinst makes it)
  if [[ -n $r && ! -s $r/lib/modules/$best/modules.dep ]]; then
    depmod -b "$r" "$best" || return 1
  fi
  echo "$best"
}

# modinfo of the guest's kernel (the host's, or LEND_GUEST_KROOT's)
_lend_modinfo() { modinfo ${LEND_GUEST_KROOT:+-b "$LEND_GUEST_KROOT"} -k "$@"; }

# Downloads PKG (a linux-image package apt knows) into DIR once and
# extracts it to DIR/root; prints DIR/root. Nothing is installed.
lend_guest_kroot() { # dir pkg
  local f
  mkdir -p "$1" || return 1
  if [[ ! -d $1/root/boot ]]; then
    f=$(ls "$1"/"$2"_*.deb 2>/dev/null | head -n 1)
    if [[ -z $f ]]; then
      (cd "$1" && apt-get download "$2" >/dev/null) || { echo "guest: apt-get download $2 failed (apt-get update? bookworm-security in sources?)" >&2; return 1; }
      f=$(ls "$1"/"$2"_*.deb | head -n 1)
    fi
    rm -rf "$1/root.tmp" && dpkg-deb -x "$f" "$1/root.tmp" && mv "$1/root.tmp" "$1/root" || return 1
  fi
  echo "$1/root"
}

lend_guest_ublk_kroot() {
  lend_guest_kroot "$ROOT/var/kernel-ublk" \
    "${LEND_UBLK_KERNEL_PKG:-linux-image-6.12.111+deb12-amd64-unsigned}"
}

# Appends module NAME and, first, everything it depends on to $mods.
_lend_mod_add() { # kver name
  local dep
  [[ " $mods " == *" $2 "* ]] && return 0
  for dep in $(_lend_modinfo "$1" -F depends "$2" 2>/dev/null | tr , ' '); do
    _lend_mod_add "$1" "$dep" || return 1
  done
  case $(_lend_modinfo "$1" -n "$2" 2>/dev/null) in
    "") echo "guest: module $2 not found for $1" >&2; return 1 ;;
    "(builtin)") return 0 ;; # in the kernel itself
  esac
  mods="$mods $2"
}

_lend_copy_bin() { # file root
  local lib
  install -D -m 755 "$1" "$2/bin/${1##*/}"
  for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
    [[ -f $2$lib ]] || install -D -m 755 "$lib" "$2$lib"
  done
}

lend_guest_build() { # dir kver mode [init [files]]
  local dir=$1 kver=$2 r=$1/root m f mods= kmods="nbd virtio_blk virtio_pci"
  rm -rf "$r" && mkdir -p "$r/bin" "$r/lib/modules" || return 1
  cp /bin/busybox "$r/bin/busybox" || return 1
  local progs="ramex-lend-server ramex-lend-nbd ramex-lend-workload ramex-lend-bench"
  [[ $3 == agent ]] && progs="$progs ramex-agent" kmods="$kmods virtio_net"
  _lend_modinfo "$kver" -n ublk_drv >/dev/null 2>&1 && progs="$progs ramex-lend-ublk"
  for m in $progs; do
    [[ -x $BIN/$m ]] || { echo "guest: $BIN/$m is not built (make)" >&2; return 1; }
    _lend_copy_bin "$BIN/$m" "$r" || return 1
  done
  for m in $kmods; do _lend_mod_add "$kver" "$m" || return 1; done
  # the bench compares lent pages with zram, the local compressed swap
  if [[ $3 == bench ]] && _lend_modinfo "$kver" -n zram >/dev/null 2>&1; then
    _lend_mod_add "$kver" zram || return 1
  fi
  if _lend_modinfo "$kver" -n ublk_drv >/dev/null 2>&1; then
    _lend_mod_add "$kver" ublk_drv || return 1
  fi
  for m in $mods; do
    f=$(_lend_modinfo "$kver" -n "$m") || return 1
    case $f in
      *.xz) xz -dc "$f" >"$r/lib/modules/$m.ko" || return 1 ;;
      *) cp "$f" "$r/lib/modules/$m.ko" || return 1 ;;
    esac
  done
  echo "$mods" >"$r/lib/modules/order"
  if [[ -f $ROOT/${BUILD:-build}/kmod/ramex.ko ]] &&
     modinfo -F vermagic "$ROOT/${BUILD:-build}/kmod/ramex.ko" | grep -q "^$kver "; then
    cp "$ROOT/${BUILD:-build}/kmod/ramex.ko" "$r/lib/modules/ramex.ko"
  fi
  # one secret per contract, as the exchange would hand out
  for m in 1 2 3; do od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$r/secret$m"; done
  echo "$3" >"$r/mode"
  [[ -n ${LEND_GUEST_DEBUG:-} ]] && echo 1 >"$r/debug"
  cp "${4:-$ROOT/tests/lending/init.sh}" "$r/init" && chmod 755 "$r/init" || return 1
  if [[ -n ${5:-} ]]; then cp -a "$5/." "$r/" || return 1; fi
  (cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initrd.gz" || return 1
  rm -f "$dir/local.img" && truncate -s 128M "$dir/local.img"
}

lend_guest_boot() { # dir kver mem-mib log seconds [nic]
  timeout "$5" qemu-system-x86_64 -accel tcg -machine pc -nic "${6:-none}" -m "$3" \
    -nographic -no-reboot -kernel "${LEND_GUEST_KROOT:-}/boot/vmlinuz-$2" -initrd "$1/initrd.gz" \
    -drive "file=$1/local.img,if=virtio,format=raw,cache=unsafe" \
    -append "console=ttyS0 quiet loglevel=1 panic=-1" >"$4" 2>&1 </dev/null
  return 0
}
