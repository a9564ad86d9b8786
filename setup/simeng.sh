#!/usr/bin/env bash
# Build SimEng (University of Bristol's cycle-level AArch64 simulator) at a pinned release, patched
# to run the harness's binaries and print their region of interest's statistics, into a cache
# directory outside the repository (issue 54 items 1 and 2). The binary runs
# `simeng <config.yaml> <static AArch64 binary> [args]`; its A64FX core is the source's
# configs/a64fx.yaml. docs/guide/simeng.md says what it runs and how that was checked.
#
#   setup/simeng.sh           build it unless the cache already holds it (then: nothing)
#   setup/simeng.sh --path    print the simeng binary; "not built" on stderr and exit 1 when
#                             there is none yet; build nothing
#   setup/simeng.sh --where   print where the binary is or will be; build nothing
#   setup/simeng.sh --check   refuse bad input (exit 2) and missing tools (exit 1) as a build
#                             would; create and build nothing
#
# Environment:
#   SIMENG_SRC=DIR      a git repository (a clone or a bare mirror) that holds the pinned SimEng
#                       commit (offline, tests); only that commit's files are read, never changed.
#                       Without it the pinned commit is fetched from SIMENG_GIT into the cache.
#   CAPSTONE_SRC=DIR    the same for the pinned Capstone commit
#   SIMENG_GIT=URL      where SimEng's pinned commit is fetched from (default its GitHub repository)
#   CAPSTONE_GIT=URL    where Capstone's pinned commit is fetched from (default its GitHub repository)
#   SIMENG_PATCH=F, CAPSTONE_PATCH=F   the patches applied (tests; default: the repository's
#                       setup/patches/simeng-0.9.6-harness.patch and capstone-5.0.1-opcode.patch)
#   HARNESS_CACHE=DIR   cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#
# Steps (each writes its stamp last; a failed step removes only its own output, so the next call
# resumes at that step; a stopped make goes on where it stopped): source (the pinned commits'
# files, patched), configure, make, then the stamp `installed` (commits, patch checksums,
# checksum of the binary, time). The stamp names the patches' checksums: a build with other
# patches is rebuilt, and --path does not answer for it.
#
# Why these inputs (measured in issue 54; ../shared/reference/simeng.md):
# - SimEng 0.9.6 (the last release): it runs glibc 2.36's static start-up, which 0.9.3 does not
#   (rseq, then Advanced SIMD loads, string and SVE instructions: 26 opcodes missing against 15).
# - Capstone 5.0.1 with a 5-line patch, not SimEng's fork (UoB-HPC/capstone): the fork's commits
#   that 0.9.4-0.9.6 pin are not reachable, and 5.0.1 carries the fork's AArch64 tables; the patch
#   adds the one field the fork adds (cs_insn.opcode).
# - -include cstdint: GCC 12 needs it for SimEng 0.9.3's Pool.hh; kept for 0.9.6 (not tried
#   without). Unix Makefiles, not Ninja: no build tool beyond cmake and g++.
set -euo pipefail

ME="setup/simeng.sh"
SIMENG_COMMIT="f2c1feccf4012b79e7ec9d32b3bb42034947f053"
SIMENG_TAG="0.9.6"
CAPSTONE_COMMIT="097c04d9413c59a58b00d4d1c8d5dc0ac158ffaa"
CAPSTONE_TAG="5.0.1"
SIMENG_UPSTREAM="${SIMENG_GIT:-https://github.com/UoB-HPC/SimEng.git}"
CAPSTONE_UPSTREAM="${CAPSTONE_GIT:-https://github.com/capstone-engine/capstone.git}"
# The SimEng files the build reads: the rest (docs, tests, the SST wrapper) is not built, and the
# three large blobs some mirrors lack are among it.
SIMENG_PATHS=(CMakeLists.txt src configs docs/CMakeLists.txt LICENSE.txt LICENSE_CAPSTONE.txt LICENSE_RYML.txt)
# Measured: sources 60 MB, build 17 MB, fetched commits 8 MB (85 MB); 163 s wall, 154 s CPU on 2 cores.
NEED_GIB=${SIMENG_NEED_GIB:-1}
FIX="setup/simeng.sh"

# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
PATCHES="$(cd "$(dirname "$0")" && pwd)/patches"
SIMENG_PATCH="${SIMENG_PATCH:-$PATCHES/simeng-$SIMENG_TAG-harness.patch}"
CAPSTONE_PATCH="${CAPSTONE_PATCH:-$PATCHES/capstone-$CAPSTONE_TAG-opcode.patch}"
[[ -f "$SIMENG_PATCH" ]] || bad "the SimEng patch $SIMENG_PATCH is missing; restore it from git"
[[ -f "$CAPSTONE_PATCH" ]] || bad "the Capstone patch $CAPSTONE_PATCH is missing; restore it from git"
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
BUILD_ID="$SIMENG_COMMIT+patch-$(sha256_of "$SIMENG_PATCH" | cut -c1-16)+capstone-$CAPSTONE_COMMIT+patch-$(sha256_of "$CAPSTONE_PATCH" | cut -c1-16)"

DIR="$CACHE/simeng-$SIMENG_TAG"
BUILD="$DIR/build"
BIN="$BUILD/src/tools/simeng/simeng"
STAMP="$DIR/installed"

built() { stamp_current "$BIN" "$STAMP" "$BUILD_ID"; }
MODE=build
case "${1:-}" in
    --path)
        built && { echo "$BIN"; exit 0; }
        if [[ -x "$BIN" ]]; then
            echo "$ME: SimEng $SIMENG_TAG at $BIN was built without the harness's current patches (fix: $FIX; it rebuilds what they change)" >&2
        else
            echo "$ME: SimEng $SIMENG_TAG is not built (it would be $BIN; fix: $FIX)" >&2
        fi
        exit 1 ;;
    --where) echo "$BIN"; exit 0 ;;
    --check) MODE=check ;;
    "") ;;
    *) bad "unknown option '$1'; usage: $ME [--path | --where | --check]" ;;
esac

if [[ $MODE == build ]] && built; then
    say "SimEng $SIMENG_TAG is built: $BIN"
    exit 0
fi

# Bad input first: the patches must be the ones for the pins, and a given repository must hold
# the pinned commit; nothing under the cache is created and no build tool is needed to refuse it.
for entry in "$SIMENG_PATCH:SimEng:$SIMENG_TAG:$SIMENG_COMMIT" "$CAPSTONE_PATCH:Capstone:$CAPSTONE_TAG:$CAPSTONE_COMMIT"; do
    IFS=: read -r patch project tag commit <<<"$entry"
    problem=$(patch_base_problem "$patch" "$project" "$tag" "$commit")
    [[ -z "$problem" ]] || bad "$problem"
done
command -v git >/dev/null 2>&1 || die "git not found; fix: apt-get install git"
# Print why the git repository $1 does not hold commit $2 (nothing when it does).
repo_problem() {
    local repo=$1 commit=$2 tag=$3 upstream=$4
    [[ -d "$repo" ]] || { echo "$repo is not a directory"; return; }
    git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 \
        || { echo "$repo is not a git repository; clone $upstream (or mirror it) and point to the clone"; return; }
    git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null \
        || echo "$repo does not hold commit $commit ($tag); fetch it there (git -C $repo fetch $upstream $commit)"
}
if [[ -n "${SIMENG_SRC:-}" ]]; then
    problem=$(repo_problem "$SIMENG_SRC" "$SIMENG_COMMIT" "$SIMENG_TAG" "$SIMENG_UPSTREAM")
    [[ -z "$problem" ]] || bad "refusing SIMENG_SRC: $problem"
fi
if [[ -n "${CAPSTONE_SRC:-}" ]]; then
    problem=$(repo_problem "$CAPSTONE_SRC" "$CAPSTONE_COMMIT" "$CAPSTONE_TAG" "$CAPSTONE_UPSTREAM")
    [[ -z "$problem" ]] || bad "refusing CAPSTONE_SRC: $problem"
fi
need_disk "$DIR" "$NEED_GIB" "the SimEng build"

# Tools, each named with the Debian package that provides it.
for entry in cmake:cmake g++:g++ gcc:gcc make:make tar:tar; do
    command -v "${entry%%:*}" >/dev/null 2>&1 \
        || die "${entry%%:*} not found; fix: apt-get install ${entry#*:}"
done
[[ $MODE == check ]] && exit 0

started=$(date +%s)
mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
# A step is done when its stamp names the build and its output is still there.
declare -A STEP_OUTPUT=([source]=src/simeng/CMakeLists.txt [configure]=build/CMakeCache.txt [make]=build/src/tools/simeng/simeng)
done_step() {
    [[ -f "$DIR/.done-$1" && "$(cat "$DIR/.done-$1")" == "$BUILD_ID" && -e "$DIR/${STEP_OUTPUT[$1]}" ]]
}
mark_done() { echo "$BUILD_ID" >"$DIR/.done-$1"; }

# --- fetch: the pinned commits, when no repository is given ---------------------------------------
# GitHub serves a commit by its id: one commit, not the whole history.
fetch_commit() {
    local name=$1 upstream=$2 commit=$3 into=$4
    [[ -z "$(repo_problem "$into" "$commit" "" "$upstream")" ]] && return
    rm -rf "$into"
    say "fetching $name $commit from $upstream"
    if ! { git init -q --bare "$into" && git -C "$into" fetch -q --depth 1 "$upstream" "$commit"; } >"$DIR/fetch.log" 2>&1; then
        rm -rf "$into"
        die "fetching $upstream failed ($(tail -n 1 "$DIR/fetch.log")); offline: set ${name^^}_SRC to a git repository holding $commit"
    fi
}
simeng_repo="${SIMENG_SRC:-$DIR/git/simeng}"
capstone_repo="${CAPSTONE_SRC:-$DIR/git/capstone}"
if ! done_step source; then
    [[ -n "${SIMENG_SRC:-}" ]] || fetch_commit simeng "$SIMENG_UPSTREAM" "$SIMENG_COMMIT" "$simeng_repo"
    [[ -n "${CAPSTONE_SRC:-}" ]] || fetch_commit capstone "$CAPSTONE_UPSTREAM" "$CAPSTONE_COMMIT" "$capstone_repo"
fi

# --- source: the pinned commits' files, patched -----------------------------------------------------
if ! done_step source; then
    rm -rf "$DIR/src" "$DIR/src.part" "$DIR/.done-configure" "$DIR/.done-make"
    mkdir -p "$DIR/src.part/simeng" "$DIR/src.part/capstone"
    LOG="$DIR/source.log"
    # git archive reads the commit's objects, not a work tree: local changes in a given clone are
    # not copied. Some mirrors lack blobs outside SIMENG_PATHS; git archive warns and goes on.
    if ! { git -C "$simeng_repo" archive "$SIMENG_COMMIT" -- "${SIMENG_PATHS[@]}" | tar -C "$DIR/src.part/simeng" -xf - \
           && git -C "$capstone_repo" archive "$CAPSTONE_COMMIT" | tar -C "$DIR/src.part/capstone" -xf -; } 2>"$LOG"; then
        rm -rf "$DIR/src.part"; die "copying the pinned sources failed: $(grep -v '^error: invalid object' "$LOG" | tail -n 1) (log: $LOG)"
    fi
    for entry in "simeng:$SIMENG_PATCH" "capstone:$CAPSTONE_PATCH"; do
        tree="$DIR/src.part/${entry%%:*}"
        if ! git -C "$tree" apply --check "${entry#*:}" 2>>"$LOG" || ! git -C "$tree" apply "${entry#*:}" 2>>"$LOG"; then
            rm -rf "$DIR/src.part"; die "${entry#*:} does not apply to the pinned ${entry%%:*} source: $(tail -n 1 "$LOG")"
        fi
    done
    mv "$DIR/src.part" "$DIR/src"
    mark_done source
fi

# --- configure and make ------------------------------------------------------------------------
LOG="$DIR/build.log"
if ! done_step configure; then
    rm -rf "$BUILD" "$DIR/.done-make"
    say "configuring SimEng $SIMENG_TAG with Capstone $CAPSTONE_TAG; log: $LOG"
    if ! cmake -S "$DIR/src/simeng" -B "$BUILD" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
            -DFETCHCONTENT_FULLY_DISCONNECTED=ON "-DFETCHCONTENT_SOURCE_DIR_CAPSTONE-LIB=$DIR/src/capstone" \
            "-DCMAKE_CXX_FLAGS=-include cstdint" >"$LOG" 2>&1; then
        rm -rf "$BUILD"
        die "SimEng's configure failed: $(grep -m 1 'CMake Error' "$LOG" || tail -n 1 "$LOG") (log: $LOG)"
    fi
    mark_done configure
fi
if ! done_step make; then
    jobs=$(nproc)
    say "building SimEng ($jobs jobs; about 150 s of CPU; a stopped make goes on where it stopped); log: $LOG"
    echo "--- make $(date -u +%FT%TZ)" >>"$LOG"
    make -C "$BUILD" -j"$jobs" simeng >>"$LOG" 2>&1 \
        || die "the SimEng build failed: $(grep -m 1 'error:' "$LOG" || tail -n 1 "$LOG") (log: $LOG)"
    mark_done make
fi
[[ -x "$BIN" ]] || die "the SimEng build ended without $BIN; see $LOG"

printf 'commit=%s\nsimeng=%s (%s)\ncapstone=%s (%s)\nsha256=%s\nconfig=%s\nbuild_seconds=%s\n' "$BUILD_ID" \
    "$SIMENG_COMMIT" "$SIMENG_TAG" "$CAPSTONE_COMMIT" "$CAPSTONE_TAG" "$(sha256_of "$BIN")" \
    "$DIR/src/simeng/configs/a64fx.yaml" "$(( $(date +%s) - started ))" >"$STAMP"
# CPU time of this call's children (cmake, make, the compilers), written by this shell itself.
times >"$DIR/times.txt"
cpu=$(cpu_seconds "$DIR/times.txt")
say "SimEng $SIMENG_TAG (Capstone $CAPSTONE_TAG, patched) is built: $BIN"
say "took $(( $(date +%s) - started )) s wall, ${cpu} s CPU; the cache holds $(du -sh "$DIR" | cut -f1) at $DIR"
