#!/usr/bin/env bash
# Build the arm64 node (issue 52): a whole Debian 12 arm64 system on a disk image, booted under
# qemu-system-aarch64 with user-mode networking, where the harness itself runs as on an SVE
# machine. Built into a cache directory outside the repository; analysis/core/arm64_node.py
# boots it and runs commands in it (`python3 -m analysis.core.arm64_node run -- CMD`).
#
#   setup/arm64-node.sh            build what is missing (a second call does nothing)
#   setup/arm64-node.sh --path     print the node's directory; "not built" on stderr and exit 1
#                                  when there is none yet; build nothing
#   setup/arm64-node.sh --where    print where the node is or will be; build nothing
#
# Environment:
#   HARNESS_CACHE=DIR     cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#   ARM64_NODE_GIB=N      the disk image's size (sparse; default 16): what the node can hold
#
# Steps (each writes its stamp last; a failed step removes only its own output, so the next
# call resumes there): debs (apt-get download of the pinned kernel and busybox), kernel
# (vmlinuz and the modules the initramfs loads), rootfs (debootstrap --foreign on the host:
# no binfmt_misc needed; the host's apt, pip and CA settings staged in it), initrd (busybox,
# the modules, setup/arm64-node-init.sh as /init), image (mke2fs -d: no loop mount), firstboot
# (debootstrap's second stage and setup/arm64-node-firstboot.sh, run inside the emulated
# machine), check (a boot: the user, Python, sudo, DNS and HTTPS through the copied CA).
#
# Pinned: the suite, the kernel and busybox versions below; every other package is the
# mirror's current bookworm version, recorded in node.txt (dpkg-query in the node).
# Needs root (debootstrap creates device nodes and root-owned files). Called by
# `setup/install.sh --with-arm64-node` after qemu-system-arm, qemu-utils, cpio, debootstrap and
# e2fsprogs went through its no-removal apt guard and the arm64 architecture was enabled.
set -euo pipefail

ME="setup/arm64-node.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUITE=bookworm
# The node's kernel: the one the emulated guest of setup/arm64-vm.sh boots (linux-perf matches it).
KERNEL_ABI="6.1.0-56-arm64"
KERNEL_VERSION="6.1.192-2"
PINNED=("linux-image-$KERNEL_ABI=$KERNEL_VERSION" "busybox-static=1:1.35.0-4+deb12u1+b1")
# What debootstrap adds to minbase; the harness's installer adds the rest through apt in the node.
INCLUDE="python3,python3-venv,git,ca-certificates,sudo"
# Loaded by /init in this order (modinfo depends): the virtio transport, ext4 and the disk,
# the network card, 9p for the share.
MODULES=(drivers/virtio/virtio_mmio lib/crc16 fs/mbcache fs/jbd2/jbd2 crypto/crc32c_generic lib/libcrc32c
         fs/ext4/ext4 drivers/block/virtio_blk net/core/failover drivers/net/net_failover
         drivers/net/virtio_net fs/netfs/netfs fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p)
APPLETS=(sh cat chroot cut date echo insmod ip ln mkdir mount poweroff sync)
# The ordinary user the harness runs as in the node.
NODE_USER=harness
IMAGE_GIB=${ARM64_NODE_GIB:-16}
NEED_GIB=4

# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
DIR="$CACHE/arm64-node-$SUITE-$KERNEL_ABI"
STAMP="$DIR/installed"
FIX="./harness setup --with-arm64-node"

case "${1:-}" in
    --path)
        [[ -f "$STAMP" ]] && { echo "$DIR"; exit 0; }
        echo "$ME: the arm64 node is not built (it would be $DIR; fix: $FIX)" >&2
        exit 1 ;;
    --where) echo "$DIR"; exit 0 ;;
    "") ;;
    *) bad "unknown option '$1'; usage: $ME [--path | --where]" ;;
esac
[[ "$IMAGE_GIB" =~ ^[0-9]+$ && "$IMAGE_GIB" -ge 4 ]] || bad "ARM64_NODE_GIB=$IMAGE_GIB: give the image size in GiB, 4 or more"

started=$(date +%s)
done_step() { [[ -f "$DIR/.done-$1" ]]; }
mark_done() { date -u +%FT%TZ >"$DIR/.done-$1"; }
# Built: the check's stamp, and an initramfs newer than the /init it holds.
if [[ -f "$STAMP" && ! "$ROOT/setup/arm64-node-init.sh" -nt "$DIR/initrd.img" ]]; then
    say "the arm64 node is built: $DIR"
    exit 0
fi
[[ $EUID -eq 0 ]] || die "needs root (debootstrap makes device nodes and root-owned files); fix: sudo $FIX"
need_disk "$DIR" "$NEED_GIB" "the arm64 node"
for tool in qemu-system-aarch64 apt-get dpkg-deb cpio debootstrap mke2fs python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; fix: $FIX (installs qemu-system-arm, qemu-utils, cpio, debootstrap, e2fsprogs)"
done
archs=$(dpkg --print-foreign-architectures 2>/dev/null || true)
grep -qx arm64 <<<"$archs" || die "the arm64 architecture is not enabled for apt; fix: $FIX (dpkg --add-architecture arm64)"
mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
rm -f "$STAMP"  # written again only after the check boot passes

# The mirror of the host's apt sources (ci/fresh-machine reads it the same way).
host_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f "$f" ]] || continue
        awk -v s="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                                         if ($(i + 1) == s) { print $i; exit } }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        awk -v s="$SUITE" 'function flush() { if (deb && suite && uri != "" && !off) print uri; deb = suite = off = 0; uri = "" }
            /^[ \t]*$/ { flush(); next }
            /^#/ { next }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
            tolower($1) == "enabled:" { off = (tolower($2) == "no") }
            END { flush() }' "$f"
    done
}

# --- debs --------------------------------------------------------------------------------------
if ! done_step debs; then
    want=()
    for p in "${PINNED[@]}"; do want+=("${p%%=*}:arm64=${p#*=}"); done
    say "downloading the kernel $KERNEL_ABI $KERNEL_VERSION and busybox (arm64)"
    download_debs "$DIR" "${want[@]}"
    mark_done debs
fi

# --- kernel ------------------------------------------------------------------------------------
if ! done_step kernel; then
    unpack_kernel "$DIR" "$KERNEL_ABI" "$FIX" "${MODULES[@]}"
    mark_done kernel
fi

# --- rootfs (debootstrap's first stage) ---------------------------------------------------------
ROOTFS="$DIR/rootfs"
# The tree is needed until it is in the image (the image step removes it and its stamp).
if ! done_step rootfs && ! done_step image; then
    mirror=$(host_mirror | head -n 1) || true
    [[ -n "$mirror" ]] || die "no '$SUITE' deb entry in the host's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/); the node's mirror is read from there"
    rm -rf "$ROOTFS"
    say "debootstrap --foreign --arch=arm64 --variant=minbase --include=$INCLUDE $SUITE from $mirror (log: $DIR/debootstrap.log)"
    if ! debootstrap --foreign --arch=arm64 --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" "$mirror" \
            >"$DIR/debootstrap.log" 2>&1; then
        rm -rf "$ROOTFS"
        die "debootstrap failed: $(grep -E '^E:' "$DIR/debootstrap.log" | tail -n 1) (log: $DIR/debootstrap.log)"
    fi
    # What the host uses to reach the registries, staged for the first boot (the second stage
    # would overwrite apt's files): apt sources, settings and keyrings, pip settings, local CA
    # certificates (ca-certificates' own setup in the second stage adds them to the store).
    staged="$ROOTFS/var/lib/harness-node/host"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
             /etc/apt/apt.conf.d/* /etc/apt/preferences /etc/apt/preferences.d/* /etc/apt/trusted.gpg \
             /etc/apt/trusted.gpg.d/* /etc/apt/auth.conf /etc/apt/auth.conf.d/* /etc/pip.conf \
             /etc/xdg/pip/pip.conf /usr/local/share/ca-certificates; do
        [[ -e "$f" ]] || continue
        mkdir -p "$staged$(dirname "$f")"
        cp -aL "$f" "$staged$f"
    done
    mkdir -p "$ROOTFS/usr/local/share"
    [[ -d /usr/local/share/ca-certificates ]] && cp -aL /usr/local/share/ca-certificates "$ROOTFS/usr/local/share/"
    mark_done rootfs
fi

# --- initrd ------------------------------------------------------------------------------------
if ! done_step initrd || [[ "$ROOT/setup/arm64-node-init.sh" -nt "$DIR/initrd.img" ]]; then
    rm -rf "$DIR/initrd" "$DIR/.done-initrd"; mkdir -p "$DIR/initrd"/{bin,sbin,proc,sys,dev,lib/modules}
    dpkg-deb -x "$DIR"/debs/busybox-static_*_arm64.deb "$DIR/initrd/busybox" \
        || { rm -rf "$DIR/initrd"; die "unpacking busybox-static failed; fix: rm -f $DIR/.done-debs and rerun $FIX"; }
    mv "$DIR/initrd/busybox/bin/busybox" "$DIR/initrd/bin/busybox" && rm -rf "$DIR/initrd/busybox"
    for a in "${APPLETS[@]}"; do ln -s busybox "$DIR/initrd/bin/$a"; done
    cp "$DIR"/modules/*.ko "$DIR/initrd/lib/modules/"
    for m in "${MODULES[@]}"; do basename "$m"; done >"$DIR/initrd/modules.order"
    cp "$ROOT/setup/arm64-node-init.sh" "$DIR/initrd/init" && chmod 755 "$DIR/initrd/init"
    (cd "$DIR/initrd" && find . -print0 | sort -z | cpio --null -o -H newc --owner 0:0 --quiet) >"$DIR/initrd.img.part" \
        || { rm -f "$DIR/initrd.img.part"; die "packing the initramfs failed (cpio); see the lines above"; }
    mv "$DIR/initrd.img.part" "$DIR/initrd.img"
    rm -rf "$DIR/initrd"
    mark_done initrd
fi

# --- image -------------------------------------------------------------------------------------
if ! done_step image; then
    rm -f "$DIR/node.img" "$DIR/node.img.part"
    say "making the ${IMAGE_GIB} GiB disk image (sparse) from the tree (mke2fs -d)"
    mke2fs -q -t ext4 -L harness-node -d "$ROOTFS" "$DIR/node.img.part" "${IMAGE_GIB}G" >"$DIR/image.log" 2>&1 \
        || { rm -f "$DIR/node.img.part"; die "mke2fs -d failed: $(tail -n 1 "$DIR/image.log") (log: $DIR/image.log)"; }
    mv "$DIR/node.img.part" "$DIR/node.img"
    mark_done image
    rm -rf "$ROOTFS"  # in the image now; a new image needs a new first stage
    rm -f "$DIR/.done-rootfs"
fi

# --- first boot: debootstrap's second stage inside the emulated machine --------------------------
node() { (cd "$ROOT" && python3 -m analysis.core.arm64_node "$@"); }
if ! done_step firstboot; then
    say "first boot: debootstrap's second stage in the emulated machine (about 10 min; log: $DIR/firstboot/output.log)"
    rm -rf "$DIR/firstboot"; mkdir -p "$DIR/firstboot"
    cp "$ROOT/setup/arm64-node-firstboot.sh" "$DIR/firstboot/firstboot.sh"
    if ! node run --dir "$DIR" --root --out "$DIR/firstboot" --time-limit 3600 --persist \
            -- sh /mnt/host/firstboot.sh "$NODE_USER" >"$DIR/firstboot.log" 2>&1; then
        # The disk is half configured: the next call starts again from debootstrap's first stage.
        rm -f "$DIR/node.img" "$DIR/.done-image"
        die "the first boot failed: $(tail -n 1 "$DIR/firstboot.log") (log: $DIR/firstboot/output.log); rerun $FIX to start the tree again"
    fi
    mark_done firstboot
fi

# --- provenance and a check boot ---------------------------------------------------------------
say "booting the node once to check it (user, Python, sudo, DNS, HTTPS)"
rm -rf "$DIR/check"; mkdir -p "$DIR/check"
if ! node check --dir "$DIR" --out "$DIR/check" >"$DIR/check.log" 2>&1; then
    die "the node did not pass its check: $(tail -n 1 "$DIR/check.log") (log: $DIR/check/output.log)"
fi
{
    echo "suite=$SUITE"
    echo "kernel=$KERNEL_ABI $KERNEL_VERSION"
    for deb in "$DIR"/debs/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' ' | sed 's/^/pinned=/'; done
    sed -n 's/^package=/package=/p' "$DIR/check/output.log"
} >"$DIR/node.txt"
date -u +%FT%TZ >"$STAMP"
say "the arm64 node is built: $DIR ($(tail -n 1 "$DIR/check.log"))"
say "took $(( $(date +%s) - started )) s; the cache holds $(du -sh "$DIR" | cut -f1) at $DIR (image: $(du -h "$DIR/node.img" | cut -f1) used of ${IMAGE_GIB} GiB)"
