#!/usr/bin/env bash
# Build the emulated AArch64 Linux guest (issue 35) into a cache directory outside the
# repository: Debian 12's arm64 kernel, an initramfs with busybox, perf and the libraries they
# need, and an AArch64 DynamoRIO with the harness's ROI client (armie_clients/dynamorio):
# DynamoRIO built from source at a pinned commit (setup/dynamorio.sh), or the one DYNAMORIO_HOME
# names. analysis/core/arm64_vm.py boots it under qemu-system-aarch64.
#
#   setup/arm64-vm.sh            build what is missing (a second call does nothing)
#   setup/arm64-vm.sh --path     print the guest directory; "not built" on stderr and exit 1
#                                when there is none yet; build nothing
#   setup/arm64-vm.sh --where    print where the guest is or will be; build nothing
#   setup/arm64-vm.sh --dynamorio
#                                print the guest's DynamoRIO directory; "not installed" on
#                                stderr and exit 1 when it has none; build nothing
#
# Environment:
#   DYNAMORIO_HOME=DIR  an AArch64 DynamoRIO install tree (DynamoRIO's AArch64 Linux release
#                       package unpacked, or an install of your own build), version
#                       $DR_MIN_VERSION or newer: it is copied into the guest's share and the
#                       client is built against it. Without it, setup/dynamorio.sh builds
#                       DynamoRIO at its pinned commit into the cache (DYNAMORIO_SRC,
#                       DYNAMORIO_DEPS: its offline inputs), unless the guest already holds a
#                       DynamoRIO copied from a DYNAMORIO_HOME given earlier (kept).
#   HARNESS_CACHE=DIR   cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#
# Steps (each writes its stamp last; a failed step removes only its own output, so the next
# call resumes at that step): debs (apt-get download of the pinned arm64 packages), kernel
# (vmlinuz and the 9p modules), rootfs (the packages unpacked with dpkg-deb -x; every shared
# library perf needs must be in it), initrd (cpio), dynamorio (setup/dynamorio.sh's build when
# no DYNAMORIO_HOME is given; copy, client), check (a boot).
#
# Why an initramfs and not a disk image: no root, loop device or binfmt_misc is needed
# (debootstrap --foreign needs binfmt_misc, which containers lack), and the guest boots to its
# init in about 3 s (../shared/reference/arm64-vm-dynamorio.md). Binaries and records go
# through a 9p share; the Debian kernel has 9p and virtio-mmio as modules, loaded by /init.
#
# Called by `setup/install.sh --with-arm64-vm` after qemu-system-arm and cpio went through its
# no-removal apt guard and the arm64 architecture was enabled (apt-get download needs its lists).
set -euo pipefail

ME="setup/arm64-vm.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# The guest kernel: Debian 12's arm64 kernel of this point release (the version perf matches).
KERNEL_ABI="6.1.0-56-arm64"
KERNEL_VERSION="6.1.192-2"
# Pinned: what the guest measures with. The libraries below are perf's shared-library closure
# (the rootfs step checks it) at the mirror's current versions, recorded in guest.txt.
PINNED=("linux-image-$KERNEL_ABI=$KERNEL_VERSION" "linux-perf=$KERNEL_VERSION"
        "busybox-static=1:1.35.0-4+deb12u1+b1")
LIBS=(libc6 libgcc-s1 libstdc++6 zlib1g liblzma5 libzstd1 libbz2-1.0 libelf1 libdw1 libunwind8
      libslang2 libperl5.36 libcrypt1 libdb5.3 libgdbm6 libgdbm-compat4 libpython3.11 libexpat1
      libffi8 libcap2 libnuma1 libopencsd1 libbabeltrace1 libglib2.0-0 libpcre2-8-0 libmount1
      libblkid1 libselinux1 libuuid1)
# Loaded by /init in this order (modinfo depends: 9p needs 9pnet, fscache, netfs).
MODULES=(fs/netfs/netfs fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p
         drivers/virtio/virtio_mmio)
# busybox applets the batches and /init use (no --install: busybox cannot run on the host).
APPLETS=(sh ash cat cp cut date dmesg echo env false grep head id insmod ls mkdir mount mv
         poweroff printf rm sed seq sleep sort sync tail tee test timeout tr true umount uname wc)
NEED_GIB=${ARM64_VM_NEED_GIB:-2}

# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
# shellcheck source=setup/dynamorio-tree.sh
source "$(dirname "$0")/dynamorio-tree.sh"
DIR="$CACHE/arm64-vm-$KERNEL_ABI"
DR_DIR="$DIR/dynamorio"
STAMP="$DIR/installed"
CLIENT_SRC="$ROOT/armie_clients/dynamorio"
CLIENT="$DR_DIR/harness/libroi_inscount.so"
FIX="./harness setup --with-arm64-vm"

case "${1:-}" in
    --path)
        [[ -f "$STAMP" ]] && { echo "$DIR"; exit 0; }
        echo "$ME: the arm64 guest is not built (it would be $DIR; fix: $FIX)" >&2
        exit 1 ;;
    --where) echo "$DIR"; exit 0 ;;
    --dynamorio)
        [[ -f "$DIR/.done-dynamorio" && -f "$CLIENT" ]] && { echo "$DR_DIR"; exit 0; }
        echo "$ME: the arm64 guest has no DynamoRIO (fix: $FIX, which builds it; or DYNAMORIO_HOME=<AArch64 DynamoRIO install> $FIX)" >&2
        exit 1 ;;
    "") ;;
    *) bad "unknown option '$1'; usage: $ME [--path | --where | --dynamorio]" ;;
esac

started=$(date +%s)
done_step() { [[ -f "$DIR/.done-$1" ]]; }
mark_done() { date -u +%FT%TZ >"$DIR/.done-$1"; }
# The DynamoRIO step is wanted when DYNAMORIO_HOME names another tree or version than the
# one copied (.done-dynamorio records it): a new DYNAMORIO_HOME replaces the old copy.
dr_wanted() {
    [[ -n "${DYNAMORIO_HOME:-}" ]] \
        && [[ "$(cat "$DIR/.done-dynamorio" 2>/dev/null)" != "$DYNAMORIO_HOME $(dr_version "$DYNAMORIO_HOME")" ]]
}
client_stale() {
    [[ ! -f "$CLIENT" || "$CLIENT_SRC/roi_inscount.c" -nt "$CLIENT" || "$CLIENT_SRC/CMakeLists.txt" -nt "$CLIENT" ]]
}

# Without DYNAMORIO_HOME: DynamoRIO from source (setup/dynamorio.sh), unless the guest holds one
# copied from a DYNAMORIO_HOME given earlier (.done-dynamorio names its tree): a later setup
# without the variable keeps the user's DynamoRIO rather than build and replace it.
DR_SOURCE=0
if [[ -z "${DYNAMORIO_HOME:-}" ]]; then
    given=$(cut -d' ' -f1 "$DIR/.done-dynamorio" 2>/dev/null || true)
    if [[ -z "$given" || "$given" == "$CACHE"/dynamorio-*/home ]]; then
        DR_SOURCE=1
        # Built already: the guest's copy is checked against it as against a given home.
        DYNAMORIO_HOME=$("$ROOT/setup/dynamorio.sh" --path 2>/dev/null) || DYNAMORIO_HOME=""
    fi
fi

# Bad input first: nothing under the cache is created and no tool is needed to refuse it.
[[ -z "${DYNAMORIO_HOME:-}" ]] || check_dr_home "$DYNAMORIO_HOME" "the guest"
# Built: every step's stamp, the boot check's, and an initramfs newer than the /init it holds.
built() {
    local step
    for step in debs kernel rootfs initrd; do done_step "$step" || return 1; done
    [[ -f "$STAMP" && ! "$ROOT/setup/arm64-vm-init.sh" -nt "$DIR/initrd.img" ]] || return 1
    [[ $DR_SOURCE -eq 0 || -n "$DYNAMORIO_HOME" ]] || return 1
    ! dr_wanted || return 1
    ! done_step dynamorio || ! client_stale
}
if built; then
    say "the arm64 guest is built: $DIR"
    exit 0
fi
need_disk "$DIR" "$NEED_GIB" "the arm64 guest"

for tool in qemu-system-aarch64 apt-get dpkg-deb cpio aarch64-linux-gnu-readelf; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; fix: $FIX (installs qemu-system-arm and cpio)"
done
# Read whole before grep answers (`cmd | grep -q` under pipefail can die of SIGPIPE).
archs=$(dpkg --print-foreign-architectures 2>/dev/null || true)
grep -qx arm64 <<<"$archs" || die "the arm64 architecture is not enabled for apt; fix: $FIX (dpkg --add-architecture arm64)"
if [[ $DR_SOURCE -eq 1 && -z "$DYNAMORIO_HOME" ]]; then
    # DYNAMORIO_SRC and DYNAMORIO_DEPS (exit 2), then the build's tools (exit 1): before
    # anything is created, so a wrong input is not found after the guest's steps.
    "$ROOT/setup/dynamorio.sh" --check || exit $?
fi
mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
rm -f "$STAMP"  # written again only after the boot check passes

# --- debs --------------------------------------------------------------------------------------
if ! done_step debs; then
    want=()
    for p in "${PINNED[@]}"; do want+=("${p%%=*}:arm64=${p#*=}"); done
    for p in "${LIBS[@]}"; do want+=("$p:arm64"); done
    say "downloading ${#want[@]} arm64 packages (Debian 12, kernel $KERNEL_ABI $KERNEL_VERSION)"
    download_debs "$DIR" "${want[@]}"
    mark_done debs
fi

# --- kernel ------------------------------------------------------------------------------------
if ! done_step kernel; then
    unpack_kernel "$DIR" "$KERNEL_ABI" "$FIX" "${MODULES[@]}"
    mark_done kernel
fi

# --- rootfs ------------------------------------------------------------------------------------
ROOTFS="$DIR/rootfs"
if ! done_step rootfs; then
    rm -rf "$ROOTFS"; mkdir -p "$ROOTFS"
    for deb in "$DIR"/debs/*.deb; do
        [[ "$(basename "$deb")" == linux-image-* ]] && continue
        dpkg-deb -x "$deb" "$ROOTFS" || { rm -rf "$ROOTFS"; die "unpacking $deb failed; fix: rm -f $DIR/.done-debs and rerun $FIX"; }
    done
    # Documentation, translations, glibc's charset converters and Perl's modules (perf links
    # libperl but runs no Perl script here): half of the tree, nothing a run reads, and every
    # megabyte of the initramfs is unpacked at each boot.
    rm -rf "$ROOTFS"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion} \
        "$ROOTFS"/usr/lib/aarch64-linux-gnu/{gconv,perl}
    mkdir -p "$ROOTFS"/{proc,sys,dev,tmp,mnt/batch,opt/dynamorio,lib/modules,bin,sbin}
    cp "$DIR"/modules/*.ko "$ROOTFS/lib/modules/"
    for a in "${APPLETS[@]}"; do [[ -e "$ROOTFS/bin/$a" ]] || ln -s busybox "$ROOTFS/bin/$a"; done
    # perf's shared libraries, resolved the way the guest's loader will (its multiarch dirs).
    missing=$(aarch64-linux-gnu-readelf -d "$ROOTFS/usr/bin/perf" "$ROOTFS"/usr/lib/aarch64-linux-gnu/*.so.* \
                  "$ROOTFS"/lib/aarch64-linux-gnu/*.so.* 2>/dev/null \
              | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | while read -r so; do
                  [[ -e "$ROOTFS/lib/aarch64-linux-gnu/$so" || -e "$ROOTFS/usr/lib/aarch64-linux-gnu/$so" \
                     || -e "$ROOTFS/lib/$so" ]] || echo "$so"; done)
    [[ -z "$missing" ]] || { rm -rf "$ROOTFS"; die "perf's libraries $(echo $missing) are in no listed package; fix: add their packages to LIBS in $ME"; }
    cp "$ROOT/setup/arm64-vm-init.sh" "$ROOTFS/init" && chmod 755 "$ROOTFS/init"
    mark_done rootfs
fi

# --- initrd ------------------------------------------------------------------------------------
if ! done_step initrd || [[ "$ROOT/setup/arm64-vm-init.sh" -nt "$DIR/initrd.img" ]]; then
    cp "$ROOT/setup/arm64-vm-init.sh" "$ROOTFS/init" && chmod 755 "$ROOTFS/init"
    rm -f "$DIR/initrd.img" "$DIR/.done-initrd"
    # Uncompressed: the guest's kernel unpacks it faster than it would gunzip it under TCG.
    (cd "$ROOTFS" && find . -print0 | sort -z | cpio --null -o -H newc --owner 0:0 --quiet) >"$DIR/initrd.img.part" \
        || { rm -f "$DIR/initrd.img.part"; die "packing the initramfs failed (cpio); see the lines above"; }
    mv "$DIR/initrd.img.part" "$DIR/initrd.img"
    mark_done initrd
fi

# --- DynamoRIO and the ROI client -----------------------------------------------------------------
# Its own steps and stamps: a stopped build resumes there; its failure is its one line. A
# failed build (no GitHub, a compiler error) does not take the guest from perf: the guest is
# finished and stamped without DynamoRIO (or with the one it had), this call exits 1 at its end,
# and the next one tries the build again.
DR_FAILED=0
if [[ $DR_SOURCE -eq 1 && -z "$DYNAMORIO_HOME" ]]; then
    if "$ROOT/setup/dynamorio.sh"; then
        DYNAMORIO_HOME=$("$ROOT/setup/dynamorio.sh" --path) || exit 1
    else
        rc=$?
        [[ $rc -ne 2 ]] || exit 2
        DR_FAILED=1
    fi
fi
if dr_wanted; then
    command -v aarch64-linux-gnu-strip >/dev/null 2>&1 || die "aarch64-linux-gnu-strip not found; fix: ./harness setup"
    rm -rf "$DR_DIR" "$DIR/.done-dynamorio"
    say "copying DynamoRIO $(dr_version "$DYNAMORIO_HOME") from $DYNAMORIO_HOME"
    cp -a "$DYNAMORIO_HOME/." "$DR_DIR/" || { rm -rf "$DR_DIR"; die "copying $DYNAMORIO_HOME failed"; }
    # Debug information is most of a build's size, and the guest reads the share over 9p.
    find "$DR_DIR" -type f -name '*.debug' -delete
    find "$DR_DIR" -type f \( -name '*.so' -o -path '*/bin64/*' \) -exec aarch64-linux-gnu-strip --strip-debug {} + 2>/dev/null || true
    echo "$DYNAMORIO_HOME $(dr_version "$DYNAMORIO_HOME")" >"$DIR/.done-dynamorio"
fi
# The client follows its source: an edited client is rebuilt without copying DynamoRIO again.
if done_step dynamorio && client_stale; then
    command -v cmake >/dev/null 2>&1 || die "cmake not found; fix: $FIX (installs cmake)"
    rm -rf "$DR_DIR/harness"
    build_client "$DR_DIR" "$DIR/client-build" "$DIR/client.log" \
        -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc
    mkdir -p "$DR_DIR/harness"
    cp "$DIR/client-build/libroi_inscount.so" "$CLIENT"
    dr_version "$DR_DIR" >"$DR_DIR/harness/version"
fi

# --- provenance and a boot ---------------------------------------------------------------------
{
    echo "kernel=$KERNEL_ABI $KERNEL_VERSION"
    for deb in "$DIR"/debs/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' ' | sed 's/^/package=/'; done
    # The version, and the commit when setup/dynamorio.sh built it (its harness-source.txt).
    done_step dynamorio && echo "dynamorio=$(cat "$DR_DIR/harness/version")$(sed 's/^/ /' "$DR_DIR/harness-source.txt" 2>/dev/null)"
} >"$DIR/guest.txt"
py="$ROOT/.venv/bin/python"
[[ -x "$py" ]] || die "the harness's venv is missing; fix: ./harness setup, then $FIX"
say "booting the guest once (about 10 s)"
if ! (cd "$ROOT" && "$py" -m analysis.core.arm64_vm check --dir "$DIR") >"$DIR/check.log" 2>&1; then
    rm -f "$STAMP"
    die "the guest did not pass its boot check: $(tail -n 1 "$DIR/check.log") (log: $DIR/check.log)"
fi
date -u +%FT%TZ >"$STAMP"
say "the arm64 guest is built: $DIR ($(tail -n 1 "$DIR/check.log"))"
say "took $(( $(date +%s) - started )) s; the cache holds $(du -sh "$DIR" | cut -f1) at $DIR"
if [[ $DR_FAILED -eq 1 ]]; then
    done_step dynamorio && had="the DynamoRIO it had ($(cat "$DR_DIR/harness/version"))" || had="no DynamoRIO"
    die "the guest is built with $had: DynamoRIO's build failed (the line from setup/dynamorio.sh above); fix that and rerun $FIX"
fi
