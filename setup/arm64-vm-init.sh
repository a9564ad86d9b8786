#!/bin/sh
# /init of the arm64 guest (setup/arm64-vm.sh packs it; analysis/core/arm64_vm.py boots it):
# mount the batch share (9p tag "batch") and DynamoRIO's (tag "dynamorio", read-only and
# cached: it never changes under a running guest; when the runner passes it), run the share's
# batch.sh once, power off. The console lines ARM64VM-READY and ARM64VM-DONE tell the runner how far the guest got; a dying init panics,
# and panic=-1 with QEMU's -no-reboot ends the machine instead of hanging it.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in netfs fscache 9pnet 9pnet_virtio 9p virtio_mmio; do
    insmod "/lib/modules/$m.ko" || echo "ARM64VM-ERROR insmod $m"
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 batch /mnt/batch; then
    echo "ARM64VM-ERROR no batch share"
    poweroff -f
fi
grep -qw dynamorio /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null \
    && mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose dynamorio /opt/dynamorio
echo "ARM64VM-READY uptime=$(cut -d' ' -f1 /proc/uptime)"
cd /mnt/batch && sh ./batch.sh >/mnt/batch/batch.log 2>&1
echo "ARM64VM-DONE rc=$? uptime=$(cut -d' ' -f1 /proc/uptime)"
cd /
umount /mnt/batch
sync
poweroff -f
