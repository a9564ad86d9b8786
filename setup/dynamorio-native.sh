#!/usr/bin/env bash
# DynamoRIO with the harness's ROI client on this AArch64 host (issue 52 item 4): the armie
# backend's stand-in run natively (`armie: {via: native}`), as setup/arm64-vm.sh gives the
# emulated guest one on an x86-64 host. Installed into a cache directory outside the repository.
#
#   setup/dynamorio-native.sh          install what is missing (a second call does nothing)
#   setup/dynamorio-native.sh --path   print the install folder (dynamorio/: the DynamoRIO home;
#                                      libroi_inscount.so: the client; version); "not installed"
#                                      on stderr and exit 1 when there is none; install nothing
#   setup/dynamorio-native.sh --where  print where the install folder is or will be
#
# Environment:
#   DYNAMORIO_HOME=DIR  an AArch64 DynamoRIO install tree (DynamoRIO's AArch64 Linux release
#                       package unpacked, or the home of a build), version 11.0 or newer: copied
#                       into the install folder (the tree given may go away) and the client built
#                       against the copy by this host's gcc. Without it, setup/dynamorio.sh
#                       builds DynamoRIO at its pinned commit natively into the cache, unless the
#                       folder holds a DynamoRIO copied from a DYNAMORIO_HOME given earlier (kept).
#   HARNESS_CACHE=DIR   cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#   HARNESS_HOST_ARCH   the host's architecture as setup/install.sh reads it (default: dpkg's)
#
# Called by `setup/install.sh --with-dynamorio` on an arm64 host, after cmake and the DynamoRIO
# build's tools went through its no-removal apt guard.
set -euo pipefail

ME="setup/dynamorio-native.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
# shellcheck source=setup/dynamorio-tree.sh
source "$(dirname "$0")/dynamorio-tree.sh"
DIR="$CACHE/dynamorio-native"
DR_DIR="$DIR/dynamorio"
CLIENT="$DIR/libroi_inscount.so"
SOURCE="$DIR/source"  # the DynamoRIO tree installed and its version: "PATH VERSION"
FIX="./harness setup --with-dynamorio"
HOST_ARCH="${HARNESS_HOST_ARCH:-$(dpkg --print-architecture 2>/dev/null || echo amd64)}"

installed() { [[ -f "$DIR/installed" && -f "$CLIENT" && -x "$DR_DIR/bin64/drrun" ]]; }
case "${1:-}" in
    --path)
        installed && { echo "$DIR"; exit 0; }
        echo "$ME: DynamoRIO with the ROI client is not installed on this host (it would be $DIR; fix: $FIX, or DYNAMORIO_HOME=<AArch64 DynamoRIO release tree> $FIX)" >&2
        exit 1 ;;
    --where) echo "$DIR"; exit 0 ;;
    "") ;;
    *) bad "unknown option '$1'; usage: $ME [--path | --where]" ;;
esac
[[ $HOST_ARCH == arm64 ]] \
    || bad "this host is $HOST_ARCH, and DynamoRIO for AArch64 runs on an arm64 host only; here the emulated guest runs it: ./harness setup --with-arm64-vm and armie: {via: guest}"

# The tree to install: the one given, else the copy of one given earlier (kept), else the
# pinned commit built from source on this host (setup/dynamorio.sh's home, linked, not copied).
home="${DYNAMORIO_HOME:-}"
if [[ -z "$home" ]]; then
    given=$(cut -d' ' -f1 "$SOURCE" 2>/dev/null || true)
    if [[ -n "$given" && "$given" != "$CACHE"/dynamorio-*/home && -x "$DR_DIR/bin64/drrun" ]]; then
        wanted=$(cat "$SOURCE")  # the copy stands for the tree it came from
    else
        "$ROOT/setup/dynamorio.sh" || exit $?
        home=$("$ROOT/setup/dynamorio.sh" --path) || exit 1
    fi
fi
if [[ -n "$home" ]]; then
    check_dr_home "$home" "the armie backend"
    wanted="$home $(dr_version "$home")"
fi
client_stale() {
    local src="$ROOT/armie_clients/dynamorio"
    [[ ! -f "$CLIENT" || "$src/roi_inscount.c" -nt "$CLIENT" || "$src/CMakeLists.txt" -nt "$CLIENT" ]]
}
if installed && [[ "$(cat "$SOURCE")" == "$wanted" ]] && ! client_stale; then
    say "DynamoRIO $(cat "$DIR/version") with the ROI client is installed: $DIR"
    exit 0
fi
command -v cmake >/dev/null 2>&1 || die "cmake not found; fix: $FIX (installs cmake)"
mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
rm -f "$DIR/installed"

if [[ "$(cat "$SOURCE" 2>/dev/null)" != "$wanted" || ! -x "$DR_DIR/bin64/drrun" ]]; then
    rm -rf "$DR_DIR" "$DIR/dynamorio.part" "$SOURCE" "$CLIENT"
    if [[ "$home" == "$CACHE"/dynamorio-*/home ]]; then
        ln -s "$home" "$DR_DIR"
    else
        say "copying DynamoRIO $(dr_version "$home") from $home"
        mkdir -p "$DIR/dynamorio.part" && cp -a "$home/." "$DIR/dynamorio.part/" && mv "$DIR/dynamorio.part" "$DR_DIR" \
            || { rm -rf "$DIR/dynamorio.part"; die "copying $home to $DR_DIR failed"; }
        # A build tree's home (setup/dynamorio.sh's on another host, a build of your own) names
        # its build folder in its CMake export (cmake/DynamoRIOTarget64.cmake): in the copy, the
        # copy. A release package has no CMakeCache.txt and is relocatable as it is.
        built_in=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$DR_DIR/CMakeCache.txt" 2>/dev/null || true)
        [[ -z "$built_in" ]] || sed -i "s|$built_in/|$DR_DIR/|g; s|$built_in\"|$DR_DIR\"|g" "$DR_DIR"/cmake/*.cmake
    fi
    echo "$wanted" >"$SOURCE"
fi
if client_stale; then
    build_client "$DR_DIR" "$DIR/client-build" "$DIR/client.log"
    cp "$DIR/client-build/libroi_inscount.so" "$CLIENT"
fi
# The version, and the commit when setup/dynamorio.sh built it (its harness-source.txt).
echo "$(dr_version "$DR_DIR")$(sed 's/^/ /' "$DR_DIR/harness-source.txt" 2>/dev/null)" >"$DIR/version"
# DynamoRIO runs here: its own start-up, without the client (a tree for another CPU dies here).
"$DR_DIR/bin64/drrun" -- /bin/true >"$DIR/check.log" 2>&1 \
    || die "DynamoRIO does not run on this host: $DR_DIR/bin64/drrun -- /bin/true failed: $(tail -n 1 "$DIR/check.log") (log: $DIR/check.log)"
date -u +%FT%TZ >"$DIR/installed"
say "DynamoRIO $(cat "$DIR/version") with the ROI client is installed: $DIR"
