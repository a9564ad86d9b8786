#!/usr/bin/env bash
# Build DynamoRIO for AArch64 at a pinned commit into a cache directory outside the repository
# (issue 35): on an x86-64 host a cross build, the DynamoRIO that setup/arm64-vm.sh puts into the
# emulated AArch64 guest when no DYNAMORIO_HOME is given; on an arm64 host a native build with
# its own gcc, the one setup/dynamorio-native.sh gives the armie backend's `via: native` (the
# host's architecture as setup/install.sh reads it: HARNESS_HOST_ARCH, else dpkg's). Only what
# the harness's ROI client needs is built (the core, drrun, and the static drmgr, drreg and
# drx); the result is a DynamoRIO home (bin64, lib64, cmake, include, ext), the same AArch64
# code either way, that the client builds against.
#
#   setup/dynamorio.sh           build it unless the cache already holds it (then: nothing)
#   setup/dynamorio.sh --path    print the DynamoRIO home; "not built" on stderr and exit 1 when
#                                there is none yet; build nothing
#   setup/dynamorio.sh --where   print where the home is or will be; build nothing
#   setup/dynamorio.sh --check   refuse bad input (exit 2) and missing tools (exit 1) as a build
#                                would, create and build nothing (setup/arm64-vm.sh asks first)
#
# Environment:
#   DYNAMORIO_SRC=DIR   a DynamoRIO git checkout at the pinned commit to build from (offline,
#                       tests); it is read, never changed. Without it the pinned commit is
#                       fetched from GitHub into the cache.
#   DYNAMORIO_DEPS=DIR  a directory holding the pinned Debian files (offline): any of
#                       ${DEB_FILES[*]}; each is checked against its pinned sha256, and
#                       those it lacks are downloaded
#   DYNAMORIO_GIT=URL   where the pinned commit is fetched from (default DynamoRIO's GitHub
#                       repository; a mirror of it)
#   DEBIAN_MIRROR=URL   where the pinned Debian files are downloaded from (default
#                       http://deb.debian.org/debian; their pool paths follow it)
#   HARNESS_CACHE=DIR   cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#
# Steps (each writes its stamp last; a failed step removes only its own output, so the next
# call resumes at that step; a stopped make goes on where it stopped): deps (the pinned Debian
# files, checked by sha256; zlib unpacked), source (a copy of the pinned source's tracked files
# with elfutils unpacked into third_party/elfutils), configure, make, home (the build tree
# without its objects), then the stamp `installed` (commit, checksum of libdynamorio.so, time).
#
# Why these inputs (../shared/reference/arm64-vm-dynamorio.md):
# - the commit: DynamoRIO's master snapshot cronbuild-11.91.20672; SVE support runs from 11.0 on,
#   and this is the one the guest's counts were checked with.
# - elfutils: drsyms needs its source in the submodule third_party/elfutils even when drsyms is
#   not built (configure stops without it), and DynamoRIO applies three patches to it. The
#   submodule's repository (DynamoRIO/elfutils) is a fork some machines cannot reach; Debian 13's
#   elfutils 0.192 source takes the patches (Debian 12's 0.188 does not). The other submodules
#   are not needed on AArch64 Linux: libipt is Intel PT (x86), zlib is built on Windows only.
# - zlib: drsyms's configure requires it, and the cross toolchain file only looks in the arm64
#   sysroot, so Debian 12's arm64 zlib1g-dev is unpacked and named to cmake.
set -euo pipefail

ME="setup/dynamorio.sh"
PINNED_COMMIT="05e316505beb69586142243af1647449945772b7"
PINNED_TAG="cronbuild-11.91.20672"
UPSTREAM="${DYNAMORIO_GIT:-https://github.com/DynamoRIO/dynamorio.git}"
# Debian's archive: pool path and sha256 of each pinned file (the elfutils tarball's is the one
# its elfutils_0.192-4.dsc lists; zlib1g-dev is Debian 12's 1:1.2.13.dfsg-1).
DEB_FILES=(elfutils_0.192.orig.tar.bz2 zlib1g-dev_1.2.13.dfsg-1_arm64.deb)
declare -A DEB_POOL=(
    [elfutils_0.192.orig.tar.bz2]="pool/main/e/elfutils"
    [zlib1g-dev_1.2.13.dfsg-1_arm64.deb]="pool/main/z/zlib")
declare -A DEB_SHA256=(
    [elfutils_0.192.orig.tar.bz2]="616099beae24aba11f9b63d86ca6cc8d566d968b802391334c91df54eab416b4"
    [zlib1g-dev_1.2.13.dfsg-1_arm64.deb]="afb60f0bae432f2f0edfe2d674e99c1a13a147c9aa2b52f2f23e3df19ece76f5")
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The targets the ROI client links (armie_clients/dynamorio/CMakeLists.txt), and drrun.
TARGETS=(dynamorio drrun drmgr_static drreg_static drx_static)
# Measured: source copy 107 MB, build tree 184 MB, home 73 MB, downloads 13 MB (376 MB).
NEED_GIB=${DYNAMORIO_NEED_GIB:-1}
FIX="./harness setup --with-arm64-vm"
# The compilers: the cross ones and DynamoRIO's toolchain file on x86-64, the host's own on arm64
# (Debian's arm64 gcc has no cross sysroot for the toolchain file to search).
HOST_ARCH="${HARNESS_HOST_ARCH:-$(dpkg --print-architecture 2>/dev/null || echo amd64)}"
COMPILERS=(aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu aarch64-linux-gnu-g++:g++-aarch64-linux-gnu)
HOW="for aarch64 (cross, make/toolchain-aarch64.cmake)"
if [[ $HOST_ARCH == arm64 ]]; then
    COMPILERS=(gcc:gcc g++:g++)
    HOW="natively (this arm64 host's gcc)"
    FIX="./harness setup --with-dynamorio"
fi

# Bad input (source, Debian files, disk): exit 2 before anything under the cache is created.
# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
DIR="$CACHE/dynamorio-${PINNED_COMMIT:0:12}"
HOME_DIR="$DIR/home"
LIB="$HOME_DIR/lib64/release/libdynamorio.so"
STAMP="$DIR/installed"

built() { stamp_current "$LIB" "$STAMP" "$PINNED_COMMIT" && [[ -x "$HOME_DIR/bin64/drrun" ]]; }
MODE=build
case "${1:-}" in
    --path)
        built && { echo "$HOME_DIR"; exit 0; }
        echo "$ME: DynamoRIO ${PINNED_COMMIT:0:12} is not built (it would be $HOME_DIR; fix: $FIX)" >&2
        exit 1 ;;
    --where) echo "$HOME_DIR"; exit 0 ;;
    --check) MODE=check ;;
    "") ;;
    *) bad "unknown option '$1'; usage: $ME [--path | --where | --check]" ;;
esac

if [[ $MODE == build ]] && built; then
    say "DynamoRIO ${PINNED_COMMIT:0:12} ($PINNED_TAG) is built: $HOME_DIR"
    exit 0
fi

# Print why the git checkout $1 is not the pinned commit (nothing when it is).
source_problem() {
    local src=$1 have
    [[ -f "$src/make/toolchain-aarch64.cmake" && -d "$src/core" ]] \
        || { echo "$src is not a DynamoRIO source tree (no make/toolchain-aarch64.cmake)"; return; }
    have=$(git -C "$src" rev-parse HEAD 2>/dev/null) && [[ -e "$src/.git" ]] \
        || { echo "$src is not a git checkout; clone $UPSTREAM and check out $PINNED_COMMIT"; return; }
    [[ "$have" == "$PINNED_COMMIT" ]] \
        || { echo "$src is at commit $have, not the pinned $PINNED_COMMIT ($PINNED_TAG)"; return; }
    # The submodules are not used (see above), so their state is not a local change.
    git -C "$src" diff --quiet --ignore-submodules HEAD -- 2>/dev/null \
        || { echo "$src has local changes to tracked files (git -C $src status)"; return; }
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Bad input first: nothing under the cache is created and no build tool is needed to refuse it.
if [[ -n "${DYNAMORIO_SRC:-}" ]]; then
    command -v git >/dev/null 2>&1 || die "git not found; fix: apt-get install git (needed to check DYNAMORIO_SRC)"
    problem=$(source_problem "$DYNAMORIO_SRC")
    [[ -z "$problem" ]] || bad "refusing DYNAMORIO_SRC: $problem"
fi
if [[ -n "${DYNAMORIO_DEPS:-}" ]]; then
    [[ -d "$DYNAMORIO_DEPS" ]] || bad "DYNAMORIO_DEPS=$DYNAMORIO_DEPS is not a directory"
    for f in "${DEB_FILES[@]}"; do
        [[ -f "$DYNAMORIO_DEPS/$f" ]] || continue
        got=$(sha256_of "$DYNAMORIO_DEPS/$f")
        [[ "$got" == "${DEB_SHA256[$f]}" ]] \
            || bad "refusing DYNAMORIO_DEPS/$f: checksum mismatch (sha256 $got, pinned ${DEB_SHA256[$f]})"
    done
fi
need_disk "$DIR" "$NEED_GIB" "the DynamoRIO build"

# Tools, each named with the Debian package that provides it.
for entry in cmake:cmake "${COMPILERS[@]}" \
             make:make perl:perl patch:patch bzip2:bzip2 dpkg-deb:dpkg git:git python3:python3; do
    command -v "${entry%%:*}" >/dev/null 2>&1 \
        || die "${entry%%:*} not found; fix: apt-get install ${entry#*:} (or $FIX, which installs it)"
done
[[ $MODE == check ]] && exit 0

started=$(date +%s)
mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
# A step is done when its stamp names the pin and its output is still there (a user may remove
# src and build once the home is built; a later rebuild then makes them again).
declare -A STEP_OUTPUT=([deps]=zlib [source]=src [configure]=build/CMakeCache.txt [make]=build/bin64/drrun)
done_step() {
    [[ -f "$DIR/.done-$1" && "$(cat "$DIR/.done-$1")" == "$PINNED_COMMIT" && -e "$DIR/${STEP_OUTPUT[$1]}" ]]
}
mark_done() { echo "$PINNED_COMMIT" >"$DIR/.done-$1"; }

# --- fetch: the pinned commit, when no DYNAMORIO_SRC is given ---------------------------------------
# First: of the downloads, the one most likely to fail (GitHub, a commit by its id).
from="${DYNAMORIO_SRC:-$DIR/clone}"
if [[ -z "${DYNAMORIO_SRC:-}" ]] && ! done_step source; then
    if [[ ! -e "$from/.git" ]] || [[ -n "$(source_problem "$from")" ]]; then
        rm -rf "$from"
        say "fetching DynamoRIO $PINNED_COMMIT ($PINNED_TAG) from $UPSTREAM"
        # GitHub serves a commit by its id: one commit, not the whole history (150 MB); no
        # submodules (see above).
        if ! { git init -q "$from" && git -C "$from" remote add origin "$UPSTREAM" \
               && git -C "$from" fetch -q --depth 1 origin "$PINNED_COMMIT" \
               && git -C "$from" checkout -q --detach FETCH_HEAD; } >"$DIR/clone.log" 2>&1; then
            rm -rf "$from"
            die "fetching $UPSTREAM failed ($(tail -n 1 "$DIR/clone.log")); offline: set DYNAMORIO_SRC to a checkout of $PINNED_COMMIT"
        fi
    fi
    problem=$(source_problem "$from")
    [[ -z "$problem" ]] || { rm -rf "$from"; die "refusing the clone: $problem"; }
fi

# --- deps: the pinned Debian files -------------------------------------------------------------
# Downloaded to a .part file, checked, then renamed: a file under downloads/ is always a good one.
fetch_deb_file() {
    local f=$1 url="$MIRROR/${DEB_POOL[$1]}/$1" out="$DIR/downloads/$1" got
    if [[ -n "${DYNAMORIO_DEPS:-}" && -f "$DYNAMORIO_DEPS/$f" ]]; then
        cp "$DYNAMORIO_DEPS/$f" "$out.part" && mv "$out.part" "$out" || die "copying $DYNAMORIO_DEPS/$f failed"
        return
    fi
    say "downloading $url"
    if ! python3 - "$url" "$out.part" 2>"$DIR/download.log" <<'EOF'
import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], "wb") as f:
    shutil.copyfileobj(r, f)
EOF
    then
        rm -f "$out.part"
        die "downloading $url failed ($(tail -n 1 "$DIR/download.log")); offline: put $f in a directory named by DYNAMORIO_DEPS"
    fi
    got=$(sha256_of "$out.part")
    [[ "$got" == "${DEB_SHA256[$f]}" ]] \
        || { rm -f "$out.part"; die "refusing $url: checksum mismatch (sha256 $got, pinned ${DEB_SHA256[$f]})"; }
    mv "$out.part" "$out"
}
if ! done_step deps; then
    rm -rf "$DIR/zlib"; mkdir -p "$DIR/downloads"
    for f in "${DEB_FILES[@]}"; do
        [[ -f "$DIR/downloads/$f" && "$(sha256_of "$DIR/downloads/$f")" == "${DEB_SHA256[$f]}" ]] || fetch_deb_file "$f"
    done
    dpkg-deb -x "$DIR/downloads/zlib1g-dev_1.2.13.dfsg-1_arm64.deb" "$DIR/zlib" \
        || { rm -rf "$DIR/zlib"; die "unpacking zlib1g-dev failed (dpkg-deb -x; see the line above)"; }
    mark_done deps
fi

# --- source ------------------------------------------------------------------------------------
# The given checkout was checked above; the clone was fetched at the pin and checked.
if ! done_step source; then
    rm -rf "$DIR/src" "$DIR/src.part"; mkdir -p "$DIR/src.part/third_party/elfutils"
    # Tracked files only ("H": in the work tree; a sparse checkout's skipped files are "S"), so
    # an in-tree build or a checked-out elfutils submodule in the given checkout is not copied.
    if ! (git -C "$from" ls-files -z -t | sed -z -n 's/^H //p' \
          | tar -C "$from" --null --no-recursion -T - -cf - | tar -C "$DIR/src.part" -xf -) 2>"$DIR/source.log"; then
        rm -rf "$DIR/src.part"; die "copying $from to $DIR/src failed: $(tail -n 1 "$DIR/source.log")"
    fi
    tar -C "$DIR/src.part/third_party/elfutils" --strip-components=1 -xjf "$DIR/downloads/elfutils_0.192.orig.tar.bz2" 2>>"$DIR/source.log" \
        || { rm -rf "$DIR/src.part"; die "unpacking elfutils failed: $(tail -n 1 "$DIR/source.log")"; }
    mv "$DIR/src.part" "$DIR/src"
    mark_done source
fi

# --- configure and make ------------------------------------------------------------------------
BUILD="$DIR/build"
LOG="$DIR/build.log"
if ! done_step configure; then
    rm -rf "$BUILD" "$DIR/.done-make"
    say "configuring DynamoRIO $HOW; log: $LOG"
    toolchain=(-DCMAKE_TOOLCHAIN_FILE="$DIR/src/make/toolchain-aarch64.cmake")
    [[ $HOST_ARCH != arm64 ]] || toolchain=()
    if ! cmake -S "$DIR/src" -B "$BUILD" "${toolchain[@]}" \
            -DDEBUG=OFF -DBUILD_DOCS=OFF -DBUILD_CLIENTS=OFF -DBUILD_TESTS=OFF -DBUILD_SAMPLES=OFF \
            -DZLIB_INCLUDE_DIR="$DIR/zlib/usr/include" \
            -DZLIB_LIBRARY="$DIR/zlib/usr/lib/aarch64-linux-gnu/libz.a" >"$LOG" 2>&1; then
        rm -rf "$BUILD"
        die "DynamoRIO's configure failed: $(grep -m 1 'CMake Error\|FATAL' "$LOG" || tail -n 1 "$LOG") (log: $LOG)"
    fi
    mark_done configure
fi
if ! done_step make; then
    jobs=$(nproc)
    say "building DynamoRIO ${TARGETS[*]} ($jobs jobs; 800 s on 2 busy cores, make alone 133 s on 2 idle ones; a stopped make goes on where it stopped); log: $LOG"
    echo "--- make $(date -u +%FT%TZ)" >>"$LOG"
    # A stopped make keeps its objects: the next call goes on where it stopped.
    make -C "$BUILD" -j"$jobs" "${TARGETS[@]}" >>"$LOG" 2>&1 \
        || die "the DynamoRIO build failed: $(grep -m 1 'error:' "$LOG" || tail -n 1 "$LOG") (log: $LOG)"
    mark_done make
fi

# --- home: the build tree without its objects ----------------------------------------------------
# `make install` would build every target first; the build tree is a DynamoRIO home already
# (cmake/DynamoRIOConfig.cmake, bin64, lib64, ext), and its objects are most of it.
rm -rf "$HOME_DIR" "$DIR/home.part" "$STAMP"
mkdir -p "$DIR/home.part"
(tar -C "$BUILD" --exclude=CMakeFiles --exclude='*.o' -cf - . | tar -C "$DIR/home.part" -xf -) \
    || { rm -rf "$DIR/home.part"; die "copying $BUILD to $HOME_DIR failed"; }
[[ -x "$DIR/home.part/bin64/drrun" && -f "$DIR/home.part/lib64/release/libdynamorio.so" ]] \
    || { rm -rf "$DIR/home.part"; die "the DynamoRIO build ended without bin64/drrun or lib64/release/libdynamorio.so; see $LOG"; }
# Provenance: setup/arm64-vm.sh copies the home into the guest and names this in guest.txt.
echo "commit $PINNED_COMMIT ($PINNED_TAG), built by $ME" >"$DIR/home.part/harness-source.txt"
mv "$DIR/home.part" "$HOME_DIR"
printf 'commit=%s\ntag=%s\nsha256=%s\nbuild_seconds=%s\n' "$PINNED_COMMIT" "$PINNED_TAG" "$(sha256_of "$LIB")" \
    "$(( $(date +%s) - started ))" >"$STAMP"
# CPU time of this call's children (cmake, make, the compilers), written by this shell itself.
times >"$DIR/times.txt"
cpu=$(cpu_seconds "$DIR/times.txt")
say "DynamoRIO ${PINNED_COMMIT:0:12} ($PINNED_TAG) is built: $HOME_DIR"
say "took $(( $(date +%s) - started )) s wall, ${cpu} s CPU; the cache holds $(du -sh "$DIR" | cut -f1) at $DIR"
