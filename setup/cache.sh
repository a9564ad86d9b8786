# Sourced by setup/gem5.sh, ompi5.sh, arm64-vm.sh, arm64-node.sh, dynamorio.sh and simeng.sh: their one-line messages,
# where their builds are cached, whether a stamp still describes what was built, and the disk
# check that runs before anything is created. The caller sets ME (its name in every line).

die() { echo "$ME: $*" >&2; exit 1; }
# Bad input: one line, exit 2 (the callers refuse it before anything under the cache is created).
bad() { echo "$ME: $*" >&2; exit 2; }
say() { echo "$ME: $*" >&2; }

CACHE="${HARNESS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sve-harness}"

# True when STAMP names COMMIT and the checksum of FILE: a second call builds nothing.
stamp_current() {
    local file=$1 stamp=$2 commit=$3
    [[ -f "$file" && -f "$stamp" ]] && grep -qx "commit=$commit" "$stamp" \
        && grep -qx "sha256=$(sha256sum "$file" | cut -d' ' -f1)" "$stamp"
}

# Print why PATCH was not made against COMMIT of PROJECT at VERSION (its Base-commit line:
# git apply skips the text before the diff), nothing when it was.
patch_base_problem() {
    local patch=$1 project=$2 version=$3 commit=$4 base
    base=$(sed -n 's/^Base-commit: \([0-9a-f]\{40\}\)$/\1/p' "$patch" | head -n 1)
    [[ "$base" == "$commit" ]] \
        || echo "refusing $patch: it was made against $project commit ${base:-(no Base-commit line)}, not $version ($commit); remake it with git diff in a checkout of $commit"
}

# True when the AArch64 ELF FILE defines SYMBOL. The whole table is read before grep answers:
# `nm | grep -q` under pipefail failed when grep left at the match while nm was still writing
# (SIGPIPE, exit 141), and refused a complete Open MPI build.
defines_symbol() {
    local file=$1 symbol=$2 table
    table=$(aarch64-linux-gnu-nm "$file" 2>/dev/null) || return 1
    grep -q -- "$symbol" <<<"$table"
}

# Does the AArch64 ELF FILE name SONAME among the libraries it needs (NEEDED)?
needs_library() {
    local file=$1 soname=$2 dynamic
    dynamic=$(aarch64-linux-gnu-readelf -d "$file" 2>/dev/null) || return 1
    awk -v lib="[$soname]" '/\(NEEDED\)/ && index($0, lib) { found = 1 } END { exit !found }' <<<"$dynamic"
}

# apt-get download of PACKAGE... (name:arm64=version, or name:arm64 for the mirror's current one)
# into DIR/debs, the log in DIR/debs.log; nothing is left of a failed download.
download_debs() {
    local dir=$1
    shift
    rm -rf "$dir/debs"; mkdir -p "$dir/debs"
    # _apt cannot write into a root-owned cache: download as the caller (the warning says so).
    if ! (cd "$dir/debs" && apt-get -q -o APT::Sandbox::User="$(id -un)" download "$@") >"$dir/debs.log" 2>&1; then
        rm -rf "$dir/debs"
        die "apt-get download failed (log: $dir/debs.log); if it says a pinned version is not found, the mirror moved on: update KERNEL_VERSION and PINNED in $ME"
    fi
}

# Unpack Debian's arm64 kernel package DIR/debs/linux-image-ABI_*.deb into DIR/vmlinuz and the
# modules named after FIX (paths under the package's kernel/ folder, without .ko) into
# DIR/modules: the whole package unpacks to 350 MB, the guests load a few modules. FIX: the
# setup command the messages name.
unpack_kernel() {
    local dir=$1 abi=$2 fix=$3 m
    shift 3
    rm -rf "$dir/kernel" "$dir/vmlinuz" "$dir/modules"; mkdir -p "$dir/kernel" "$dir/modules"
    dpkg-deb -x "$dir"/debs/linux-image-"$abi"_*_arm64.deb "$dir/kernel" \
        || { rm -rf "$dir/kernel" "$dir/modules"; die "unpacking the kernel package failed; fix: rm -f $dir/.done-debs and rerun $fix"; }
    for m in "$@"; do
        cp "$dir/kernel/lib/modules/$abi/kernel/$m.ko" "$dir/modules/" \
            || { rm -rf "$dir/kernel" "$dir/modules"; die "the kernel has no $m.ko; the module list in $ME no longer fits $abi"; }
    done
    cp "$dir/kernel/boot/vmlinuz-$abi" "$dir/vmlinuz"
    rm -rf "$dir/kernel"
}

# The CPU seconds (user + system) of the children in FILE, the output of bash's `times`. The
# caller writes FILE itself (`times >FILE`): in a pipeline's subshell or a $(...) `times` counts
# that subshell's children, not the caller's (cmake, make, the compilers).
cpu_seconds() {
    tail -n 1 "$1" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

# Refuse (exit 2) unless DIR, measured at its nearest existing parent, has NEED GiB free.
need_disk() {
    local dir=$1 need=$2 what=$3 probe=$1 free_kib
    while [[ ! -d "$probe" ]]; do probe=$(dirname "$probe"); done
    free_kib=$(df -Pk "$probe" | awk 'NR == 2 { print $4 }')
    (( free_kib >= need * 1024 * 1024 )) \
        || bad "not enough disk at $probe: $((free_kib / 1024 / 1024)) GiB free, $what needs $need GiB; free space or set HARNESS_CACHE"
}
