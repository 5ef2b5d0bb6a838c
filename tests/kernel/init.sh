#!/bin/busybox sh
# /init of the qemu guest that tests/kernel/guest.sh builds: mounts the
# kernel file systems, runs /guest-main (written by the host for a test or a
# bench run), prints its exit status as a marker and powers off at once.
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /tmp
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo RAMEX-BOOTED
sh /guest-main
echo "RAMEX-GUEST-END rc=$?"
poweroff -f
