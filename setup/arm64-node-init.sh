#!/bin/sh
# /init of the arm64 node's initramfs (setup/arm64-node.sh packs it with busybox and the modules
# below; analysis/core/arm64_node.py boots it): load the disk, network and 9p modules, mount the
# node's disk (/dev/vda, ext4) and the host's share (9p tag "host"), bring up QEMU's user-mode
# network, then run the share's boot.sh chrooted into the disk once and power off. The console
# lines NODE-READY and NODE-DONE tell the runner how far the node got; boot.sh's exit status is
# also in the share (rc). panic=-1 with -no-reboot ends QEMU when this script dies.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do
    insmod "/lib/modules/$m.ko" || echo "NODE-ERROR insmod $m"
done
fail() { echo "NODE-ERROR $*"; poweroff -f; }
mkdir -p /root
mount -t ext4 /dev/vda /root || fail "cannot mount the node's disk /dev/vda"
mkdir -p /root/proc /root/sys /root/dev /root/mnt/host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 host /root/mnt/host || fail "no host share"
# No systemd sets the host name: sudo warns on every call when it cannot resolve it.
cat /root/etc/hostname >/proc/sys/kernel/hostname 2>/dev/null
# QEMU's user-mode network: the guest is 10.0.2.15, the gateway 10.0.2.2, DNS 10.0.2.3.
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 \
    || echo "NODE-ERROR no network (eth0)"
# The guest clock starts from QEMU's RTC (the host's UTC); the share's epoch is the fallback
# for a kernel without it (TLS refuses certificates "not yet valid" in 1970).
[ "$(date +%Y)" -ge 2024 ] || date -s "@$(cat /root/mnt/host/epoch)" >/dev/null
# The node's own /proc, /sys and /dev (devtmpfs mounted twice is one instance).
mount -t proc proc /root/proc
mount -t sysfs sys /root/sys
mount -t devtmpfs dev /root/dev
mkdir -p /root/dev/pts /root/dev/shm /root/run /root/tmp
mount -t devpts -o gid=5,mode=620 devpts /root/dev/pts
mount -t tmpfs -o mode=1777 shm /root/dev/shm
mount -t tmpfs -o mode=755 run /root/run
# What udev makes on a normal boot: bash's process substitution needs /dev/fd.
ln -sf /proc/self/fd /root/dev/fd
ln -sf /proc/self/fd/0 /root/dev/stdin
ln -sf /proc/self/fd/1 /root/dev/stdout
ln -sf /proc/self/fd/2 /root/dev/stderr
echo "NODE-READY uptime=$(cut -d' ' -f1 /root/proc/uptime)"
chroot /root /bin/sh /mnt/host/boot.sh </root/dev/null >/root/mnt/host/console.log 2>&1
rc=$?
echo "$rc" >/root/mnt/host/rc
echo "NODE-DONE rc=$rc uptime=$(cut -d' ' -f1 /root/proc/uptime)"
sync
mount -o remount,ro /root 2>/dev/null
sync
poweroff -f
