#!/usr/bin/env bash
# Cross-build the pinned Open MPI 5.0.9 for aarch64 into a cache directory outside the
# repository (paper Fig. 10 on the release that carries Open MPI's own NEON/SVE op component,
# ompi/mca/op/aarch64). Debian's arm64 Open MPI 4.1 stays installed beside it.
#
#   setup/ompi5.sh            build it unless the cache already holds this version (then: nothing)
#   setup/ompi5.sh --path     print the install prefix (or where it will be); build nothing
#
# Environment:
#   OMPI_SRC=DIR       an Open MPI source tree to build from (offline, tests): a git checkout of
#                      v5.0.9 with its submodules (openpmix, prrte, oac), every commit as pinned
#   HARNESS_CACHE=DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#
# Called by `setup/install.sh --with-ompi5` after autotools, flex and the arm64 hwloc/libevent
# development packages went through its no-removal apt guard. Why these configure choices:
# - no -march: the library is built for plain armv8-a (as a distribution builds it), so its
#   stock MPI_MAX loop and everything around it hold no SVE code and the same library runs
#   under `-cpu max,sve=off` (the NEON line). The op component's SVE half is still built: its
#   configure test falls back to __attribute__((target("+sve"))) per function, which GCC 12
#   accepts. Built with -march=armv8-a+sve instead, GCC 12 -O3 would vectorize the stock C loop
#   itself with SVE (as it does our Fig. 6 c_autovec row), and there would be no stock line.
# - external hwloc (Debian's arm64 libhwloc-dev, which --with-mpi installs anyway): the
#   tag's bundled hwloc tarball is the one large file some mirrors do not hold; libevent and
#   PMIx are the tag's bundled ones.
# - CXX=no: Open MPI has no C++ code (only the mpic++ wrapper wants one), and the host g++ would
#   be taken for the cross C++ compiler and fail the link check.
# - no Fortran, OpenSHMEM, UCX, PRRTE, ROMIO, OMPIO: a singleton's MPI_Reduce_local needs none,
#   and they are most of the build time.
set -euo pipefail

ME="setup/ompi5.sh"
VERSION="v5.0.9"
PINNED_COMMIT="b79100b3fbbf45b3c6ed82a6b67b6346f8cfdc41"
# Submodules as the tag records them (path commit), checked before anything is built.
PINNED_SUBMODULES=(
    "3rd-party/openpmix a84ed686ae84fb6a4b251b29b75ecc38f4621ad9"
    "3rd-party/prrte 2e893392405afd914717a2c077accf1c1ec9ee55"
    "config/oac dfff67569fb72dbf8d73a1dcf74d091dad93f71b"
)
UPSTREAM="https://github.com/open-mpi/ompi.git"
NEED_GIB=${OMPI5_NEED_GIB:-3}

die() { echo "$ME: $*" >&2; exit 1; }
# Bad input (OMPI_SRC, disk): exit 2 before anything under the cache is created and before
# any build tool is needed.
bad() { echo "$ME: $*" >&2; exit 2; }
say() { echo "$ME: $*" >&2; }

# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
DIR="$CACHE/ompi-$VERSION"
SRC="$DIR/src"
BUILD="$DIR/build"
PREFIX="$DIR/install"
LIB="$PREFIX/lib/libmpi.so"
STAMP="$DIR/installed"
LOG="$DIR/build.log"

if [[ "${1:-}" == --path ]]; then echo "$PREFIX"; exit 0; fi
[[ $# -eq 0 ]] || die "unknown option '$1'; usage: $ME [--path]"

# A second call does nothing: the stamp names the commit and the library's checksum.
if stamp_current "$LIB" "$STAMP" "$PINNED_COMMIT"; then
    say "Open MPI $VERSION is built: $PREFIX"
    exit 0
fi

# Print why the git checkout $1 is not the pinned release (nothing when it is).
source_problem() {
    local src="$1" have entry path want sub
    git -C "$src" rev-parse HEAD >/dev/null 2>&1 && [[ -e "$src/.git" ]] \
        || { echo "$src is not a git checkout; clone tag $VERSION with --recursive"; return; }
    have=$(git -C "$src" rev-parse HEAD)
    [[ "$have" == "$PINNED_COMMIT" ]] || { echo "$src is at commit $have, not $VERSION ($PINNED_COMMIT)"; return; }
    for entry in "${PINNED_SUBMODULES[@]}"; do
        path=${entry% *}; want=${entry#* }
        sub=$(git -C "$src/$path" rev-parse HEAD 2>/dev/null) \
            || { echo "submodule $path is missing in $src; run git submodule update --init --recursive"; return; }
        [[ "$sub" == "$want" ]] || { echo "submodule $path of $src is at $sub, not the pinned $want"; return; }
    done
    # Nested submodules (openpmix's and prrte's oac): the commit their parent records.
    while read -r path; do
        want=$(git -C "$src" ls-tree HEAD "$path" | awk '{print $3}')
        for sub in $(git -C "$src/$path" ls-tree -r HEAD | awk '$1 == "160000" { print $4 }'); do
            want=$(git -C "$src/$path" ls-tree HEAD "$sub" | awk '{print $3}')
            have=$(git -C "$src/$path/$sub" rev-parse HEAD 2>/dev/null) \
                || { echo "submodule $path/$sub is missing in $src; run git submodule update --init --recursive"; return; }
            [[ "$have" == "$want" ]] || { echo "submodule $path/$sub of $src is at $have, not $want as $path records"; return; }
        done
    done < <(printf '%s\n' "${PINNED_SUBMODULES[@]}" | cut -d' ' -f1)
    # Tracked files as committed (generated files of autogen are untracked and allowed).
    git -C "$src" diff --quiet HEAD -- 2>/dev/null \
        || { echo "$src has local changes to tracked files (git -C $src status)"; return; }
}

# Bad input first (a given source that is not the pinned release, too little disk): it is
# refused before the build tools are looked for, so a machine without autoconf (one that never
# ran --with-ompi5) gets the refusal that names the input, and nothing under the cache exists.
# Only git is needed to check a source.
if [[ -n "${OMPI_SRC:-}" ]]; then
    [[ -f "$OMPI_SRC/VERSION" && -d "$OMPI_SRC/ompi" ]] || bad "OMPI_SRC=$OMPI_SRC is not an Open MPI source tree"
    command -v git >/dev/null 2>&1 || die "git not found; fix: apt-get install git (needed to check OMPI_SRC)"
    problem=$(source_problem "$OMPI_SRC")
    [[ -z "$problem" ]] || bad "refusing OMPI_SRC: $problem"
fi
need_disk "$DIR" "$NEED_GIB" "the Open MPI build"

for tool in aarch64-linux-gnu-gcc autoconf automake libtoolize flex perl python3 make git; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; fix: setup/install.sh --with-ompi5 (installs the build dependencies)"
done
[[ -f /usr/include/hwloc.h && -f /usr/lib/aarch64-linux-gnu/libhwloc.so ]] \
    || die "the arm64 hwloc is missing; fix: setup/install.sh --with-ompi5"

mkdir -p "$DIR" || die "cannot create $DIR; set HARNESS_CACHE to a writable directory"

# The source: a given one was checked above; a clone is checked before anything is built.
if [[ -n "${OMPI_SRC:-}" ]]; then
    from="$OMPI_SRC"
else
    clone="$DIR/clone"
    if [[ ! -e "$clone/.git" ]]; then
        say "cloning Open MPI $VERSION with its submodules"
        git clone -q --depth 1 --recursive --shallow-submodules --branch "$VERSION" "$UPSTREAM" "$clone" >"$DIR/clone.log" 2>&1 \
            || { rm -rf "$clone"; die "cloning $UPSTREAM failed (log: $DIR/clone.log); or set OMPI_SRC to an Open MPI $VERSION checkout"; }
    fi
    problem=$(source_problem "$clone")
    [[ -z "$problem" ]] || { rm -rf "$clone"; die "refusing the clone: $problem"; }
    from="$clone"
fi

# Build from a copy (autogen writes into the tree), without the git metadata.
rm -rf "$SRC" "$BUILD" "$PREFIX" "$STAMP"
mkdir -p "$SRC" "$BUILD"
(cd "$from" && tar --exclude=.git -cf - .) | (cd "$SRC" && tar -xf -) || die "copying $from to $SRC failed"

jobs=$(nproc)
say "building Open MPI $VERSION for aarch64 ($jobs jobs; configure alone took 15 minutes on 2 busy cores); log: $LOG"
: >"$LOG"
started=$(date +%s)
if [[ ! -x "$SRC/configure" ]]; then
    (cd "$SRC" && ./autogen.pl --no-3rdparty hwloc,prrte,romio341) >>"$LOG" 2>&1 \
        || die "Open MPI's autogen.pl failed; see $LOG"
fi
(cd "$BUILD" && "$SRC/configure" --host=aarch64-linux-gnu --build=x86_64-linux-gnu \
    CC=aarch64-linux-gnu-gcc CXX=no --prefix="$PREFIX" \
    --with-hwloc=external \
    --with-libevent=internal --with-pmix=internal --without-prrte \
    --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-sphinx \
    --without-ucx --without-ofi --without-cuda --without-psm2 --without-ucc --without-hcoll \
    --enable-mca-no-build=io-ompio,fcoll,fbtl,fs,sharedfp,coll-han,coll-adapt,topo-treematch,vprotocol) \
    >>"$LOG" 2>&1 || die "Open MPI's configure failed; see $LOG"
grep -q "^#define OMPI_MCA_OP_HAVE_SVE 1" "$BUILD/opal/include/opal_config.h" 2>/dev/null \
    || grep -q 'op_cv_sve_support=yes' "$BUILD/config.log" \
    || die "Open MPI's configure found no SVE support for the op/aarch64 component; see $BUILD/config.log"
(cd "$BUILD" && make -j"$jobs" && make install) >>"$LOG" 2>&1 || die "the Open MPI build failed; see $LOG"
[[ -f "$LIB" ]] || die "the Open MPI build ended without $LIB; see $LOG"
# Open MPI 5 links its components into libmpi (no DSOs by default): the SVE half must be there.
defines_symbol "$LIB" ompi_op_aarch64_functions_sve \
    || die "the Open MPI build ended without the SVE half of the op/aarch64 component in $LIB; see $LOG"
# Its own libopen-pal (5.0's soname .80), not Debian's 4.1 one (.40) of libopenmpi-dev:arm64: a
# -L of the multiarch directory ahead of the prefix made libtool's install-time relink take it.
needs_library "$LIB" libopen-pal.so.80 \
    || die "the Open MPI build linked $LIB against another libopen-pal (not $PREFIX/lib/libopen-pal.so.80); see $LOG"
# build_seconds: autogen (when the source has no configure yet), configure, make, install; read by bench.
printf 'version=%s\ncommit=%s\nsha256=%s\nbuild_seconds=%s\n' "$VERSION" "$PINNED_COMMIT" \
    "$(sha256sum "$LIB" | cut -d' ' -f1)" "$(( $(date +%s) - started ))" >"$STAMP"
say "Open MPI $VERSION is built: $PREFIX"
