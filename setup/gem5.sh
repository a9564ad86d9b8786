#!/usr/bin/env bash
# Build the pinned gem5 (ARM, classic caches only, gem5.fast) into a cache directory outside
# the repository, so that every sweep finds it without GEM5=.
#
#   setup/gem5.sh            build it unless the cache already holds this version (then: nothing)
#   setup/gem5.sh --path     print the built binary; "not built" on stderr and exit 1 when
#                            there is none yet; build nothing
#   setup/gem5.sh --where    print where the binary is or will be; build nothing
#
# Environment:
#   GEM5_SRC=DIR       a gem5 source tree to build from (offline, tests); a git checkout must be
#                      at the pinned commit, a plain tree must say the pinned version
#   GEM5_VERSION=TAG   the version to build; only the pinned one is known
#   GEM5_PATCH=F       the patch applied to the source (tests; default: the repository's
#                      setup/patches/gem5-VERSION-sve-switch.patch)
#   HARNESS_CACHE=DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#
# The source is patched (setup/patches/gem5-VERSION-sve-switch.patch): gem5's CPU switch drops
# the SVE predicate registers, which the sampled cycle mode's switches need. The stamp names the
# patch's checksum, so a build of the unpatched source, or of another patch, is rebuilt (only
# the changed files: 47 s here for this patch) and --path does not answer for it.
#
# Called by `setup/install.sh --with-gem5` after it installed the Debian build dependencies
# with its no-removal rule. Why RUBY=n and gem5.fast: the harness uses classic caches only,
# and this halves the build (about 80 minutes on 2 cores) and gives the fastest simulator.
set -euo pipefail

ME="setup/gem5.sh"
PINNED_VERSION="v24.0.0.1"
PINNED_COMMIT="b1a44b89c7bae73fae2dc547bc1f871452075b85"
UPSTREAM="https://github.com/gem5/gem5.git"
# Measured: the source tree (120 MB) plus build/ARMNR after gem5.fast is built.
NEED_GIB=${GEM5_NEED_GIB:-6}

# Bad input (version, disk, source tree): exit 2 before anything under the cache is created.
# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"

VERSION="${GEM5_VERSION:-$PINNED_VERSION}"
[[ "$VERSION" == "$PINNED_VERSION" ]] \
    || bad "unknown gem5 version '$VERSION'; this harness pins $PINNED_VERSION (unset GEM5_VERSION)"

DIR="$CACHE/gem5-$VERSION"
SRC="$DIR/src"
BIN="$SRC/build/ARMNR/gem5.fast"
STAMP="$DIR/installed"
LOG="$DIR/build.log"
PATCH="${GEM5_PATCH:-$(cd "$(dirname "$0")" && pwd)/patches/gem5-$VERSION-sve-switch.patch}"
[[ -f "$PATCH" ]] || bad "the gem5 patch $PATCH is missing; restore it from git"
BUILD_ID="$PINNED_COMMIT+patch-$(sha256sum "$PATCH" | cut -c1-16)"

# --path answers "is it there" (rc 1 when not: a caller that trusted a path of nothing built
# would run a binary that does not exist); --where is for messages that say where it will go.
if [[ "${1:-}" == --path ]]; then
    [[ -x "$BIN" && -f "$STAMP" ]] \
        || { echo "$ME: gem5 $VERSION is not built (it would be $BIN; fix: ./harness setup --with-gem5)" >&2; exit 1; }
    grep -qx "commit=$BUILD_ID" "$STAMP" \
        || { echo "$ME: gem5 $VERSION at $BIN was built without the harness's current patch (fix: ./harness setup --with-gem5; it rebuilds what the patch changes)" >&2; exit 1; }
    echo "$BIN"; exit 0
fi
if [[ "${1:-}" == --where ]]; then echo "$BIN"; exit 0; fi
[[ $# -eq 0 ]] || bad "unknown option '$1'; usage: $ME [--path | --where]"

# A second call does nothing: the stamp names the commit and the binary's checksum.
if [[ -x "$BIN" ]] && stamp_current "$BIN" "$STAMP" "$BUILD_ID"; then
    say "gem5 $VERSION is built: $BIN"
    exit 0
fi

# The patch must be the one for this commit (gem5's pin moved without it: refused).
problem=$(patch_base_problem "$PATCH" "gem5" "$VERSION" "$PINNED_COMMIT")
[[ -z "$problem" ]] || bad "$problem"

# Bad input (disk, a given source) is refused before the build tools are looked for, so a
# machine that never ran --with-gem5 gets the refusal that names the input.
need_disk "$DIR" "$NEED_GIB" "the gem5 build"

# A given source is checked against the pinned release before anything is copied or built.
if [[ ! -f "$SRC/SConstruct" && -n "${GEM5_SRC:-}" ]]; then
    [[ -f "$GEM5_SRC/SConstruct" ]] || bad "GEM5_SRC=$GEM5_SRC is not a gem5 source tree (no SConstruct)"
    if [[ -d "$GEM5_SRC/.git" ]] && git -C "$GEM5_SRC" rev-parse HEAD >/dev/null 2>&1; then
        have=$(git -C "$GEM5_SRC" rev-parse HEAD)
        [[ "$have" == "$PINNED_COMMIT" ]] \
            || bad "GEM5_SRC=$GEM5_SRC is at commit $have, not $VERSION ($PINNED_COMMIT); check out $VERSION"
    else
        grep -q "\"${VERSION#v}\"" "$GEM5_SRC/src/base/version.cc" 2>/dev/null \
            || bad "GEM5_SRC=$GEM5_SRC is not gem5 $VERSION (src/base/version.cc says otherwise)"
    fi
fi

# The build tools: only after the bad input above.
for tool in scons g++ m4 python3-config; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; fix: setup/install.sh --with-gem5 (installs gem5's build dependencies)"
done

mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"
if [[ ! -f "$SRC/SConstruct" ]]; then
    rm -rf "$SRC"
    if [[ -n "${GEM5_SRC:-}" ]]; then
        say "copying the gem5 source from $GEM5_SRC"
        cp -a "$GEM5_SRC/." "$SRC/" || die "copying $GEM5_SRC to $SRC failed"
    else
        command -v git >/dev/null 2>&1 || die "git not found; fix: apt-get install git, or set GEM5_SRC to a gem5 $VERSION source tree"
        say "cloning gem5 $VERSION"
        git clone -q --depth 1 --branch "$VERSION" "$UPSTREAM" "$SRC" >"$DIR/clone.log" 2>&1 \
            || die "cloning $UPSTREAM failed (log: $DIR/clone.log); or set GEM5_SRC to a gem5 $VERSION source tree"
        have=$(git -C "$SRC" rev-parse HEAD)
        [[ "$have" == "$PINNED_COMMIT" ]] \
            || { rm -rf "$SRC"; die "the $VERSION tag is at commit $have, not the pinned $PINNED_COMMIT; refusing to build it"; }
    fi
fi

# Patch the cache's copy (never GEM5_SRC itself). Applied already (a resumed or earlier build):
# nothing to do; neither applied nor applicable: refused before scons starts.
# The ceiling keeps git from taking a repository above a plain source tree for the tree's own
# (it would then apply the paths relative to that repository, or skip them).
export GIT_CEILING_DIRECTORIES="$(dirname "$SRC")"
# A copy of what was applied: a changed patch (a new version of the harness) first takes the old
# one out, or the new one would meet a source it no longer fits.
APPLIED="$DIR/applied.patch"
if [[ -f "$APPLIED" ]] && ! cmp -s "$APPLIED" "$PATCH"; then
    (cd "$SRC" && git apply --reverse "$APPLIED") >/dev/null 2>&1 \
        || die "cannot take the earlier patch $APPLIED out of $SRC; remove $SRC to start from a fresh clone"
    rm -f "$APPLIED"
    say "took the earlier patch out of the source"
fi
if (cd "$SRC" && git apply --reverse --check "$PATCH") >/dev/null 2>&1; then
    say "the source is patched already ($(basename "$PATCH"))"
elif out=$(cd "$SRC" && git apply --check "$PATCH" 2>&1); then
    (cd "$SRC" && git apply "$PATCH") || die "applying $PATCH to $SRC failed"
    say "patched the source: $(basename "$PATCH")"
else
    die "refusing $PATCH: it does not apply to $SRC (git apply --check: $(head -n 1 <<<"$out")); remove $SRC to start from a fresh clone"
fi
cp "$PATCH" "$APPLIED"

jobs=$(nproc)
if [[ -d "$SRC/build/ARMNR" ]]; then
    say "updating the gem5 $VERSION build (only what changed since it stopped or was patched); log: $LOG"
else
    say "building gem5 $VERSION (ARM, RUBY=n, gem5.fast, $jobs jobs; about 80 minutes on 2 cores); log: $LOG"
fi
opts="$DIR/ARMNR.opts"
printf 'BUILD_ISA=y\nUSE_ARM_ISA=y\nRUBY=n\n' >"$opts"
# A resumed build keeps its configuration: re-running defconfig rewrites the config header
# and scons then recompiles the CPU models (measured: an interrupted build lost ~20 minutes).
config="$SRC/build/ARMNR/gem5.build/config"
configure=(scons defconfig build/ARMNR "$opts")
if [[ -f "$config" ]] && grep -qx 'USE_ARM_ISA=y' "$config" && grep -qx '# RUBY is not set' "$config"; then
    configure=(true)
fi
if ! (cd "$SRC" && "${configure[@]}" && \
      scons "build/ARMNR/gem5.fast" -j"$jobs" --ignore-style) >"$LOG" 2>&1; then
    die "the gem5 build failed; see $LOG"
fi
[[ -x "$BIN" ]] || die "the gem5 build ended without $BIN; see $LOG"
"$BIN" --help >/dev/null 2>&1 || die "$BIN was built but does not run; see $LOG"
printf 'version=%s\ncommit=%s\nsha256=%s\n' "$VERSION" "$BUILD_ID" \
    "$(sha256sum "$BIN" | cut -d' ' -f1)" >"$STAMP"
say "gem5 $VERSION is built: $BIN"
