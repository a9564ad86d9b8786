#!/usr/bin/env bash
# Cross-build the pinned Open MPI 5.0.9 for aarch64 into a cache directory outside the
# repository (paper Fig. 10 on the release that carries Open MPI's own NEON/SVE op component,
# ompi/mca/op/aarch64). Debian's arm64 Open MPI 4.1 stays installed beside it. Then the same
# release with our SVE datatype engine (setup/patches/ompi-v5.0.9-sve-datatype.patch: paper
# Fig. 9, issue 33) into a second prefix beside the first, install-sve, made from a copy of the
# stock build tree (a few minutes; see build_sve): both libraries exist side by side, each with
# its own stamp, and a second call builds only what is missing.
#
#   setup/ompi5.sh             build both unless the cache already holds them (then: nothing)
#   setup/ompi5.sh --path      print the stock install prefix (or where it will be); build nothing
#   setup/ompi5.sh --path-sve  print the patched install prefix; build nothing
#
# Environment:
#   OMPI_SRC=DIR       an Open MPI source tree to build from (offline, tests): a git checkout of
#                      v5.0.9 with its submodules (openpmix, prrte, oac), every commit as pinned
#   HARNESS_CACHE=DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness)
#   OMPI5_SVE_PATCH=F  the datatype patch (tests; default: the repository's)
#
# The patch is refused, in one line and before anything is created, when it was made against
# another commit than the pinned one (its Base-commit line) or no longer applies to the source
# (git apply --check in the source checkout, which it does not change); it is applied to a
# copy of the source only.
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
NEED_GIB=${OMPI5_NEED_GIB:-4}  # the stock build (3 GiB) and the copy install-sve is made in

# Bad input (OMPI_SRC, disk): exit 2 before anything under the cache is created and before
# any build tool is needed.
# shellcheck source=setup/cache.sh
source "$(dirname "$0")/cache.sh"
DIR="$CACHE/ompi-$VERSION"
PREFIX="$DIR/install"
LIB="$PREFIX/lib/libmpi.so"
STAMP="$DIR/installed"
# The patched build: its own source and build tree (copies of the stock ones), prefix, log and
# stamp. Its stamp names the commit and the patch's checksum (a changed patch is rebuilt) and
# the checksum of libopen-pal, where opal/datatype lands.
SVE_PATCH="${OMPI5_SVE_PATCH:-$(cd "$(dirname "$0")" && pwd)/patches/ompi-$VERSION-sve-datatype.patch}"
SVE_PREFIX="$DIR/install-sve"
SVE_LIB="$SVE_PREFIX/lib/libopen-pal.so"
SVE_STAMP="$DIR/installed-sve"

if [[ "${1:-}" == --path ]]; then echo "$PREFIX"; exit 0; fi
if [[ "${1:-}" == --path-sve ]]; then echo "$SVE_PREFIX"; exit 0; fi
[[ $# -eq 0 ]] || die "unknown option '$1'; usage: $ME [--path | --path-sve]"

[[ -f "$SVE_PATCH" ]] || bad "the datatype patch $SVE_PATCH is missing"
SVE_COMMIT="$PINNED_COMMIT+patch-$(sha256sum "$SVE_PATCH" | cut -c1-16)"

# A second call does nothing: each stamp names the commit and the library's checksum.
stock_built() { stamp_current "$LIB" "$STAMP" "$PINNED_COMMIT"; }
sve_built() { stamp_current "$SVE_LIB" "$SVE_STAMP" "$SVE_COMMIT"; }
if stock_built && sve_built; then
    say "Open MPI $VERSION is built: $PREFIX, and with the SVE datatype engine: $SVE_PREFIX"
    exit 0
fi

# The patch must be the one for this commit (Open MPI's pin moved without it: refused).
problem=$(patch_base_problem "$SVE_PATCH" "Open MPI" "$VERSION" "$PINNED_COMMIT")
[[ -z "$problem" ]] || bad "$problem"

# Print why the patch does not apply to the git checkout $1 (nothing when it does); the
# checkout is not changed.
patch_problem() {
    local out
    out=$(git -C "$1" apply --check "$SVE_PATCH" 2>&1) \
        || echo "refusing $SVE_PATCH: it does not apply to $1 (git apply --check: $(head -n 1 <<<"$out"))"
}

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
    problem=$(patch_problem "$OMPI_SRC")
    [[ -z "$problem" ]] || bad "$problem"
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
    problem=$(patch_problem "$clone")
    [[ -z "$problem" ]] || bad "$problem"
    from="$clone"
fi

# The stock build: source copy, build tree, prefix, stamp; both trees stay (build_sve copies
# them). A build stopped after its configure (a killed session, a full disk) resumes with make
# on the next call: $DIR/configured, written when configure and its SVE check passed, names the
# commit the trees were configured from.
build_stock() {
    local src="$DIR/src" build="$DIR/build" prefix="$PREFIX" log="$DIR/build.log" mark="$DIR/configured" jobs started
    jobs=$(nproc)
    started=$(date +%s)
    if [[ -f "$mark" && "$(cat "$mark")" == "$PINNED_COMMIT" && -f "$build/config.status" ]]; then
        say "resuming the stopped Open MPI $VERSION build in $build ($jobs jobs; make goes on where it stopped); log: $log"
        echo "--- resumed $(date -u +%FT%TZ)" >>"$log"
    else
        # Build from a copy (autogen writes into the tree), without the git metadata.
        rm -rf "$src" "$build" "$prefix" "$STAMP" "$mark"
        mkdir -p "$src" "$build"
        (cd "$from" && tar --exclude=.git -cf - .) | (cd "$src" && tar -xf -) || die "copying $from to $src failed"
        say "building Open MPI $VERSION for aarch64 ($jobs jobs; configure alone took 15 minutes on 2 busy cores); log: $log"
        : >"$log"
        if [[ ! -x "$src/configure" ]]; then
            (cd "$src" && ./autogen.pl --no-3rdparty hwloc,prrte,romio341) >>"$log" 2>&1 \
                || die "Open MPI's autogen.pl failed; see $log"
        fi
        (cd "$build" && "$src/configure" --host=aarch64-linux-gnu --build=x86_64-linux-gnu \
            CC=aarch64-linux-gnu-gcc CXX=no --prefix="$prefix" \
            --with-hwloc=external \
            --with-libevent=internal --with-pmix=internal --without-prrte \
            --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-sphinx \
            --without-ucx --without-ofi --without-cuda --without-psm2 --without-ucc --without-hcoll \
            --enable-mca-no-build=io-ompio,fcoll,fbtl,fs,sharedfp,coll-han,coll-adapt,topo-treematch,vprotocol) \
            >>"$log" 2>&1 || die "Open MPI's configure failed; see $log"
        grep -q "^#define OMPI_MCA_OP_HAVE_SVE 1" "$build/opal/include/opal_config.h" 2>/dev/null \
            || grep -q 'op_cv_sve_support=yes' "$build/config.log" \
            || die "Open MPI's configure found no SVE support for the op/aarch64 component; see $build/config.log"
        echo "$PINNED_COMMIT" >"$mark"
    fi
    (cd "$build" && make -j"$jobs" && make install) >>"$log" 2>&1 || die "the Open MPI build failed; see $log"
    [[ -f "$prefix/lib/libmpi.so" ]] || die "the Open MPI build ended without $prefix/lib/libmpi.so; see $log"
    # Open MPI 5 links its components into libmpi (no DSOs by default): the SVE half must be there.
    defines_symbol "$prefix/lib/libmpi.so" ompi_op_aarch64_functions_sve \
        || die "the Open MPI build ended without the SVE half of the op/aarch64 component in $prefix/lib/libmpi.so; see $log"
    # Its own libopen-pal (5.0's soname .80), not Debian's 4.1 one (.40) of libopenmpi-dev:arm64: a
    # -L of the multiarch directory ahead of the prefix made libtool's install-time relink take it.
    needs_library "$prefix/lib/libmpi.so" libopen-pal.so.80 \
        || die "the Open MPI build linked $prefix/lib/libmpi.so against another libopen-pal (not $prefix/lib/libopen-pal.so.80); see $log"
    # build_seconds: autogen (when the source has no configure yet), configure, make, install; read by bench.
    write_stamp "$STAMP" "$PINNED_COMMIT" "$LIB" "$started"
}

write_stamp() {
    local stamp=$1 commit=$2 lib=$3 started=$4
    printf 'version=%s\ncommit=%s\nsha256=%s\nbuild_seconds=%s\n' "$VERSION" "$commit" \
        "$(sha256sum "$lib" | cut -d' ' -f1)" "$(( $(date +%s) - started ))" >"$stamp"
}

# The patched build, from copies of the stock source and build tree: the patch changes four
# headers of opal/datatype, and a second configure and build of the whole release (80 minutes
# on 2 cores) would recompile 2,000 files to change four objects. In the copies, the make and
# libtool files (Makefiles, dependency files, .la, config.status, libtool) are moved to name
# the copies instead of the stock trees, with their times kept, so make sees only the patched
# headers as new: it recompiles the four pack/unpack objects that include them, relinks
# libopen-pal and what links it, and `make install` puts the result in install-sve through
# DESTDIR. The configure line is the stock one, prefix included: the libraries' RUNPATH and
# compiled-in prefix name the stock prefix (its help files and share/ are the same), so rows
# on install-sve link libopen-pal themselves (analysis/core/mpi.py) and the loader takes the
# patched one ahead of the one libmpi's RUNPATH would find.
build_sve() {
    local src="$DIR/src-sve" build="$DIR/build-sve" stage="$DIR/stage-sve" log="$DIR/build-sve.log" started left root
    # The folder the stock trees were configured in, as their make files name it: the cache may
    # be reached another way now (a symlink), and those names are what the copies must change.
    root=$(sed -n 's#^abs_top_builddir = \(.*\)/build$#\1#p' "$DIR/build/Makefile")
    [[ -n "$root" && "$root/build" -ef "$DIR/build" ]] \
        || die "the stock build tree $DIR/build does not name itself (abs_top_builddir in its Makefile); remove $DIR/build and run again"
    rm -rf "$src" "$build" "$stage" "$SVE_PREFIX" "$SVE_STAMP"
    : >"$log"
    started=$(date +%s)
    say "building Open MPI $VERSION with the SVE datatype engine from a copy of the stock build (minutes); log: $log"
    cp -a "$DIR/src" "$src" && cp -a "$DIR/build" "$build" || die "copying the stock trees in $DIR failed"
    # The copy has no .git; the ceiling keeps git from taking a repository above the cache for
    # it (git apply would then skip the paths outside the current directory).
    (cd "$src" && GIT_CEILING_DIRECTORIES="$DIR" git apply "$SVE_PATCH") >>"$log" 2>&1 \
        || die "applying $SVE_PATCH to $src failed; see $log"
    find "$build" -type f \( -name Makefile -o -name '*.Plo' -o -name '*.Po' -o -name '*.la' -o -name '*.lai' \
        -o -name config.status -o -name libtool -o -name config.lt \) -print0 | xargs -0 grep -lZF "$root/" \
        | xargs -0 -r perl -e '
            my $dir = shift;
            for my $f (@ARGV) {
                my @st = stat $f or die "$f: $!";
                open my $in, "<", $f or die "$f: $!"; my $t = do { local $/; <$in> }; close $in;
                $t =~ s{\Q$dir\E/(src|build)(?=[/\s\x27"\\:;,)]|$)}{$dir/$1-sve}gm;
                open my $out, ">", $f or die "$f: $!"; print $out $t; close $out or die "$f: $!";
                utime $st[8], $st[9], $f or die "$f: $!";
            }' "$root" || die "moving the make files of $build to name the copies failed"
    # A make file still naming a stock tree would build or install into it.
    left=$(find "$build" -type f \( -name Makefile -o -name '*.la' -o -name config.status -o -name libtool \) -print0 \
        | xargs -0 grep -lE "$root/(src|build)([/ '\"]|$)" | head -n 1 || true)
    [[ -z "$left" ]] || die "the copy's make file $left still names the stock tree; see $log"
    (cd "$build" && make -j"$(nproc)" && make install DESTDIR="$stage") >>"$log" 2>&1 \
        || die "the patched Open MPI build failed; see $log"
    # DESTDIR prefixes the configured prefix, as the stock make files name it.
    [[ -d "$stage$root/install/lib" ]] || die "the patched Open MPI install ended without $stage$root/install/lib; see $log"
    mv "$stage$root/install" "$SVE_PREFIX" && rm -rf "$stage" || die "moving the patched install to $SVE_PREFIX failed"
    # The datatype engine's SVE kernels (static functions in libopen-pal: found when configure's
    # OMPI_MCA_OP_HAVE_SVE reached opal/datatype), and still the release's own libopen-pal.
    defines_symbol "$SVE_LIB" opal_datatype_sve_pack_blocklen_one_4 \
        || die "the patched Open MPI build ended without the SVE datatype kernels in $SVE_LIB; see $log"
    needs_library "$SVE_PREFIX/lib/libmpi.so" libopen-pal.so.80 \
        || die "the patched Open MPI build linked $SVE_PREFIX/lib/libmpi.so against another libopen-pal; see $log"
    # Open MPI's own datatype tests (`make check`'s list in test/datatype), built against the
    # patched tree and kept there with it: arm64 programs, run under QEMU at several VLs by
    # tests/test_mpi5_datatype.py.
    (cd "$build/test/datatype" && make -j"$(nproc)" check TESTS=) >>"$log" 2>&1 \
        || die "building Open MPI's test/datatype programs against the patched tree failed; see $log"
    write_stamp "$SVE_STAMP" "$SVE_COMMIT" "$SVE_LIB" "$started"
}

if ! stock_built; then
    build_stock
elif [[ ! -f "$DIR/build/config.status" || ! -f "$DIR/src/configure" ]]; then
    # A stock prefix whose build trees were removed: install-sve is made from them.
    sve_built || { say "the stock build trees in $DIR are gone (install-sve is made from them): building the stock release again"; build_stock; }
fi
say "Open MPI $VERSION is built: $PREFIX"
if ! sve_built; then
    build_sve
fi
say "Open MPI $VERSION with the SVE datatype engine is built: $SVE_PREFIX"
