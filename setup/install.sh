#!/usr/bin/env bash
# Self-installer of the SVE evaluation harness (Debian 12, x86-64).
#
#   setup/install.sh                 install what is missing (silent no-op when nothing is);
#                                    `./harness setup` runs it --with-clang --with-chromium
#                                    (what sweep and test need). A user who is neither root nor
#                                    let in by sudo gets one line: the missing packages and
#                                    the command root runs for them
#   setup/install.sh --check         preflight: list what is missing, install nothing;
#                                    exit 0 if all present, else 1
#   setup/install.sh --with-clang    also the clang cross toolchain (clang-14)
#   setup/install.sh --with-chromium also Debian's chromium, which the tests use headless to
#                                    load results/report.html (./harness test asks for it)
#   setup/install.sh --with-mpi      also Debian's arm64 Open MPI (libopenmpi-dev:arm64,
#                                    multiarch) for the MPI figures (configs/mpi.yaml)
#   setup/install.sh --with-gem5     also gem5's Debian build dependencies, then build the pinned
#                                    gem5 into a cache outside the repository (setup/gem5.sh)
#   setup/install.sh --with-slurm    also Debian's slurm-wlm and munge, then configure and start a
#                                    single-node Slurm for this host (setup/slurm.sh)
#   setup/install.sh --stop-slurm    stop that Slurm (setup/slurm.sh stop); installs nothing
#   setup/install.sh --with-ompi5    also Open MPI 5's build dependencies (autotools, flex, the arm64
#                                    hwloc), then cross-build the pinned Open MPI 5.0.9 with its
#                                    NEON/SVE op component into a cache outside the repository
#                                    (setup/ompi5.sh); Debian's Open MPI 4.1 is left as it is
#   setup/install.sh --with-arm64-vm also qemu-system-arm, cpio, cmake, the cross g++, patch and
#                                    bzip2, then build the emulated AArch64 Linux guest (Debian's
#                                    arm64 kernel, an initramfs with perf; DynamoRIO built at a
#                                    pinned commit by setup/dynamorio.sh, or given by
#                                    DYNAMORIO_HOME) into a cache outside the repository
#                                    (setup/arm64-vm.sh)
#   setup/install.sh --with-arm64-node also qemu-system-arm, qemu-utils, cpio, debootstrap and
#                                    e2fsprogs, then build the arm64 node: a whole Debian 12
#                                    arm64 system on a disk image, booted under
#                                    qemu-system-aarch64 (setup/arm64-node.sh; needs root)
#   setup/install.sh --with-dynamorio also cmake and DynamoRIO's build tools, then DynamoRIO with the
#                                    harness's ROI client on this host (setup/dynamorio-native.sh:
#                                    built from source natively, or DYNAMORIO_HOME's copied), for
#                                    the armie backend's `via: native`; arm64 hosts only (an x86-64
#                                    host skips it in one line: its DynamoRIO is the guest's)
#   setup/install.sh --with-simeng   also cmake and g++, then SimEng 0.9.6 (a cycle-level AArch64
#                                    simulator with an A64FX core) at pinned commits, patched
#                                    to run the harness's binaries, into a cache outside the
#                                    repository (setup/simeng.sh)
#   setup/install.sh --print-packages
#                                    print the apt packages the other options name (installed
#                                    or not), install nothing
#   setup/install.sh --force         ignore the stamp and recheck everything
#   setup/install.sh --venv-only     only the Python venv: no apt, no tool checks (a cluster
#                                    without apt or root, e.g. A64FX nodes; ./harness does
#                                    this when HARNESS_VENV_ONLY=1)
#   setup/install.sh --check-simulation FILE
#                                    apply the apt removal guard to a saved
#                                    `apt-get install -s` output (used by tests)
#
# Why it is careful with apt: installing arm64 packages once REMOVED the host
# compilers on a machine like this (shared/reference/mpi-under-qemu.md). So every
# install is simulated first (`apt-get install -s`) and refused if the simulation
# has any `Remv` line; the host toolchain is named in the same install command
# (naming a package makes apt refuse to remove it rather than remove it), and
# the host compiler is checked afterwards. An installed toolchain package is
# named as pkg=<installed version>: apt then keeps it without upgrading it.
# `--no-upgrade` is deliberately NOT used: with it apt "skips" the named
# installed packages and would remove them after all (checked on Debian 12).
#
# --with-mpi: libopenmpi-dev:arm64 depends on "gfortran-12 | gfortran-mod-15"
# (of arm64). gfortran-12:arm64 needs gcc-12:arm64, which cannot sit beside
# the host's gcc-12, so that choice REMOVES gcc, g++, clang-14, binutils and the
# cross gcc (17 packages, tests/fixtures/apt/sim-mpi-gfortran-remv.txt). With
# the host and cross toolchains named at their installed versions, apt picks
# another provider (flang-NN:arm64 on Debian 12.15) and removes nothing
# (sim-mpi-named-clean.txt). The arm64 Multi-Arch: same libraries must have
# the host's versions, so apt may upgrade some host libraries (libssl3,
# libsystemd0, ...) to the archive's current ones; it never removes any.
#
# Why a stamp: ./harness runs this before every command, so the no-op path must
# be fast. `.venv/.installed` holds one key per satisfied configuration: the
# sha256 of requirements.txt + the apt package list + this script's version +
# the venv path. Matching key + the required commands on PATH = nothing to do.
set -euo pipefail

INSTALLER_VERSION=1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQS="$ROOT/requirements.txt"
# The Slurm executor plugin runs `scontrol show config` when Snakemake collects its plugins, at
# every start (9 s without a running controller): it lives beside the venv's site-packages, on PYTHONPATH only
# for `sweep --slurm` (analysis/commands/cli.py, SLURM_SITE).
REQS_SLURM="$ROOT/requirements-slurm.txt"
SLURM_SITE="$VENV/slurm-executor"
STAMP="$VENV/.installed"
# The installed packages' top-level files and folders (site-packages/pandas, ...), written with the
# stamp: the no-op path checks that each still exists (a deleted package made every command a
# ModuleNotFoundError while the stamp said all was installed).
MANIFEST="$VENV/.installed-files"
ME="setup/install.sh"
MIN_PY="3.11"

# Debian 12 package names. The cross gcc also provides what clang-14 needs to
# link aarch64 static binaries (it calls aarch64-linux-gnu-ld and uses the
# gcc-cross crt files and libgcc), so --with-clang adds clang-14 only; lld-14 is
# needed only for -fuse-ld=lld, which the harness does not use.
APT_BASE=(gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
          qemu-user gcc libc6-dev make python3 python3-venv git)
# On an arm64 Debian (an SVE node) the native gcc provides aarch64-linux-gnu-gcc and binutils
# aarch64-linux-gnu-objdump; the x86-64 cross packages have no arm64 candidate.
# HARNESS_HOST_ARCH: the architecture to install for (default: dpkg's).
HOST_ARCH="${HARNESS_HOST_ARCH:-$(dpkg --print-architecture 2>/dev/null || echo amd64)}"
if [[ $HOST_ARCH == arm64 ]]; then
    APT_BASE=(binutils qemu-user gcc libc6-dev make python3 python3-venv git)
fi
APT_CLANG=(clang-14)
APT_CHROMIUM=(chromium)
# perf, for the native measurements: Debian's package. Elsewhere perf is optional: the
# workflow says in one line that it skipped the measurements and why.
if grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then APT_BASE+=(linux-perf); fi
APT_MPI=(libopenmpi-dev:arm64)
# A real single-node Slurm for the --slurm sweeps and their tests (slurmctld + slurmd, munge).
APT_SLURM=(slurm-wlm munge)
# gem5's build dependencies (the minimal set for an ARM build without Ruby; tcmalloc for speed).
APT_GEM5=(scons python3-dev zlib1g-dev m4 libprotobuf-dev protobuf-compiler
          libgoogle-perftools-dev pkg-config g++)
# Open MPI 5's build from a git checkout (autogen.pl) and its external hwloc (arm64 multiarch,
# as for --with-mpi: the same guard, no removal).
APT_OMPI5=(autoconf automake libtool flex perl libhwloc-dev:arm64)
# The emulated AArch64 guest (issue 35): the system emulator, the initramfs packer, and what
# DynamoRIO's cross build (setup/dynamorio.sh) and the client need: cmake, the cross g++, patch
# (DynamoRIO patches elfutils) and bzip2 (elfutils' tarball). Its arm64 packages are downloaded
# (apt-get download), not installed.
APT_ARM64_VM=(qemu-system-arm cpio cmake g++-aarch64-linux-gnu patch bzip2)
# The arm64 node (issue 52): the emulator, qemu-img (ci/aarch64-node's overlays), the
# initramfs packer, debootstrap and mke2fs (-d: the image without a loop mount).
APT_ARM64_NODE=(qemu-system-arm qemu-utils cpio debootstrap e2fsprogs)
# DynamoRIO on an arm64 host (issue 52 item 4): cmake for the ROI client, and what DynamoRIO's
# native build (setup/dynamorio.sh) needs beside the base packages: g++, patch (DynamoRIO
# patches elfutils) and bzip2 (elfutils' tarball).
APT_DYNAMORIO=(cmake g++ patch bzip2)
# SimEng's build (setup/simeng.sh): CMake and the host's C++ compiler.
APT_SIMENG=(cmake g++)
# Where Debian's arm64 Open MPI puts its headers (the file the cheap recheck looks for).
MPI_HEADER=/usr/lib/aarch64-linux-gnu/openmpi/include/mpi.h
# Host toolchain named in every apt install command (protects it from removal).
HOST_TOOLCHAIN=(gcc libc6-dev make binutils)
# Also named when already installed, for the same reason.
HOST_TOOLCHAIN_IF_PRESENT=(g++ build-essential clang clang-14 lld-14 cpp dpkg-dev
                           gcc-12 g++-12 cpp-12 gcc-aarch64-linux-gnu gcc-12-aarch64-linux-gnu
                           binutils-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)

# command -> package that provides it (for messages and the cheap recheck)
CMDS_BASE=(aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu
           aarch64-linux-gnu-objdump:binutils-aarch64-linux-gnu
           qemu-aarch64:qemu-user gcc:gcc make:make git:git)
if [[ $HOST_ARCH == arm64 ]]; then
    CMDS_BASE=(aarch64-linux-gnu-gcc:gcc aarch64-linux-gnu-objdump:binutils
               qemu-aarch64:qemu-user gcc:gcc make:make git:git)
fi
# The fix when the AArch64 compiler stops compiling.
AARCH64_GCC_PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
[[ $HOST_ARCH != arm64 ]] || AARCH64_GCC_PKGS="gcc libc6-dev"
CMDS_CLANG=(clang-14:clang-14)
CMDS_CHROMIUM=(chromium:chromium)

die() { echo "$ME: $*" >&2; exit 1; }
say() { echo "$ME: $*" >&2; }

# ---------------------------------------------------------------------------
# apt removal guard (pure: reads a simulation output file)
# ---------------------------------------------------------------------------

# Print the packages that an `apt-get install -s` output would remove, one a line.
sim_removals() {
    # Lines look like: "Remv gcc-aarch64-linux-gnu [4:12.2.0-3]" (arch may be qualified).
    awk '$1 == "Remv" { print $2 }' "$1"
}

# Refuse (return 1, with messages) when the simulation in FILE removes anything.
# $2.. = the apt-get install arguments, to print the command to investigate.
guard_simulation() {
    local file="$1"; shift
    local removed
    removed="$(sim_removals "$file" | tr '\n' ' ' | sed 's/ *$//')"
    if [[ -n "$removed" ]]; then
        local n; n="$(wc -w <<<"$removed")"
        say "refusing to install: apt would REMOVE $n package(s): $removed"
        say "nothing was installed; investigate with: apt-get install -s $*"
        return 1
    fi
    return 0
}

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

pick_python() {
    # The system (Debian) python3: python3-venv provides its ensurepip. PYTHON overrides.
    if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"
    elif [[ -x /usr/bin/python3 ]]; then echo /usr/bin/python3
    else command -v python3 || true
    fi
}

# Print "ok" or a reason why PYTHON is unusable.
python_status() {
    local py="$1"
    [[ -n "$py" && -x "$(command -v "$py" 2>/dev/null || true)" ]] || { echo "python3 not found (fix: apt-get install python3)"; return; }
    "$py" -c "import sys; sys.exit(0 if sys.version_info >= (${MIN_PY/./,}) else 1)" 2>/dev/null \
        || { echo "$py is Python $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo '?'); need >= $MIN_PY (Debian 12 ships 3.11; or set PYTHON=/path/to/python3.11+)"; return; }
    echo ok
}

# Print the packages of "$@" that dpkg does not report as installed (status "i" whatever the
# selection: a package the admin holds, "hi", is installed as much as an "ii" one).
missing_apt() {
    local installed
    # Both "pkg" and "pkg:arch" per installed package, so arch-qualified names match too.
    installed="$(dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Architecture}\n' "$@" 2>/dev/null \
                 | awk 'substr($1, 2, 1) == "i" { print $2; print $2 ":" $3 }' || true)"
    local p
    for p in "$@"; do
        grep -qxF "$p" <<<"$installed" || echo "$p"
    done
}

# Print "cmd (from pkg)" for each missing command in the list "cmd:pkg" ...
missing_cmds() {
    local e
    for e in "$@"; do
        # Also root's sbin: the Slurm daemons are there, which an ordinary user's PATH (Debian's
        # /etc/profile) lacks; setup/slurm.sh starts them as root, through sudo.
        PATH="$PATH:/usr/sbin:/sbin" command -v "${e%%:*}" >/dev/null 2>&1 || echo "${e%%:*} (from ${e#*:})"
    done
}

# Compare the venv's installed versions with the pins of requirements.txt (site-packages) and
# requirements-slurm.txt (SLURM_SITE, and not in site-packages, where an older venv has it).
# Prints one line per mismatch; exit 1 if any. Fast: importlib.metadata only.
venv_pin_mismatches() {
    local bad=0
    pins_in "$REQS" "" || bad=1
    pins_in "$REQS_SLURM" "$SLURM_SITE" || bad=1
    if "$VENV/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None)' 2>/dev/null; then
        echo "snakemake-executor-plugin-slurm: in .venv's site-packages, belongs in $SLURM_SITE"; bad=1
    fi
    return $bad
}
# pins_in FILE EXTRA_PATH [MODE]: the pins of FILE, looked up with EXTRA_PATH first on the path.
# MODE check (default): one line per pin that is missing, at another version, or whose files are
# gone although its metadata is there (a deleted package folder); broken: name==version of each
# of the last (pip takes them as installed: they need --force-reinstall); tops: the top-level
# files and folders of every pinned package (the MANIFEST).
pins_in() {
    PYTHONPATH="$2" "$VENV/bin/python" - "$1" "${3:-check}" <<'PY'
import os, sys, importlib.metadata as md
mode = sys.argv[2]


def tops(name):
    """The package's importable top-level entries in site-packages: folders and module files of
    its RECORD (not bin/ scripts, not stray data files); for an egg-info, whose SOURCES.txt lists
    sources rather than what was installed, the names of its top_level.txt."""
    dist = md.distribution(name)
    if dist.read_text("RECORD") is not None:
        return sorted({str(dist.locate_file(f.parts[0])) for f in dist.files or ()
                       if f.parts[0] not in ("..", "__pycache__") and (len(f.parts) > 1 or f.suffix in (".py", ".so", ".pth"))})
    out = []
    for n in (dist.read_text("top_level.txt") or "").split():
        folder, module = str(dist.locate_file(n)), str(dist.locate_file(n + ".py"))
        out.append(module if os.path.exists(module) and not os.path.isdir(folder) else folder)
    return sorted(out)


bad = 0
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, sep, want = line.partition("==")
    if not sep:
        print(f"{sys.argv[1]} line '{line}' is not pinned with ==")
        bad = 1
        continue
    name = name.split("[", 1)[0].strip()
    try:
        have = md.version(name)
    except md.PackageNotFoundError:  # broken: pip installs it with the others
        print(f"{name}=={want.strip()}" if mode == "broken" else
              f"{name}: not installed, {sys.argv[1].rsplit('/', 1)[-1]} pins {want}")
        bad = 1
        continue
    if have != want.strip():
        if mode == "check":
            print(f"{name}: installed {have}, {sys.argv[1].rsplit('/', 1)[-1]} pins {want}")
        bad = 1
        continue
    entries = tops(name)
    if mode == "tops":  # the code only: the fast path stats each (~13 us), the metadata is checked above
        print("\n".join(e for e in entries if not e.endswith((".dist-info", ".egg-info"))))
        continue
    gone = [e for e in entries if not os.path.lexists(e)]
    if gone:
        print(f"{name}=={want.strip()}" if mode == "broken" else
              f"{name}: installed {have} by its metadata, but {gone[0]} is gone")
        bad = 1
sys.exit(bad)
PY
}

# Every top-level entry of the MANIFEST still exists: cheap enough for the no-op path (no Python).
venv_files_present() {
    local f entries
    [[ -s "$MANIFEST" ]] || return 1
    mapfile -t entries <"$MANIFEST"  # one read (`while read` takes a byte at a time)
    for f in "${entries[@]}"; do [[ -e "$f" ]] || return 1; done
}

# Reasons the venv is unusable (empty output = usable apart from pins).
venv_problems() {
    if [[ ! -x "$VENV/bin/python" ]]; then echo ".venv missing"; return; fi
    if ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= ('"${MIN_PY/./,}"') else 1)' 2>/dev/null; then
        echo ".venv python is broken or older than $MIN_PY"; return
    fi
    # A venv moved with the repo keeps old script paths; detect via snakemake's launcher.
    if [[ -f "$VENV/bin/snakemake" ]] && ! launcher_here "$VENV/bin/snakemake"; then
        echo ".venv was created at another path (scripts point elsewhere)"; return
    fi
}

# The pip launcher FILE starts this venv's python: a shebang line, or for a path with a space
# (or too long for a shebang) a /bin/sh polyglot whose second line execs the quoted path (it was
# taken for a venv made at another path, so a clone path with a space never passed --check).
launcher_here() {
    local first="" second=""
    { IFS= read -r first; IFS= read -r second; } <"$1" || true
    [[ "$first" == "#!$VENV/bin/python"* ]] && return 0
    [[ "$first" == "#!/bin/sh" && "$second" == "'''exec' \"$VENV/bin/python"* ]]
}

stamp_key() {
    # $@ = apt package list of this configuration
    { echo "installer=$INSTALLER_VERSION venv=$VENV"; cat "$REQS" "$REQS_SLURM"; printf '%s\n' "$@"; } \
        | sha256sum | cut -d' ' -f1
}

# ---------------------------------------------------------------------------
# apt install (simulate, guard, install, verify)
# ---------------------------------------------------------------------------

SUDO=()
APT_UPDATED=0

# Root, or a user sudo lets in (without a password, or a member of Debian's sudo group, whose
# sudo asks for the password): sets SUDO. Anyone else cannot install; a sudo that would only say
# "not in the sudoers file" counts as none.
can_admin() {
    if [[ $EUID -eq 0 ]]; then SUDO=(); return 0; fi
    command -v sudo >/dev/null 2>&1 || return 1
    if sudo -n true 2>/dev/null || [[ " $(id -nG) " == *" sudo "* ]]; then SUDO=(sudo); return 0; fi
    return 1
}

need_root_or_explain() {
    # $1 = what is missing, $2 = the command root runs for it
    can_admin && return 0
    die "$1; not root and no sudo: ask root to run: $2"
}

# The ./harness setup line that installs this configuration (as root, in a clone of root's own:
# run in the user's clone it would leave a .venv the user cannot write).
setup_command() {
    local c="./harness setup" f
    for f in MPI:mpi GEM5:gem5 SLURM:slurm OMPI5:ompi5 ARM64_VM:arm64-vm ARM64_NODE:arm64-node DYNAMORIO:dynamorio SIMENG:simeng; do
        local v="WITH_${f%%:*}"
        [[ ${!v} -eq 1 ]] && c+=" --with-${f#*:}"
    done
    echo "$c"
}

# The one command root runs for the missing packages "$@": the plain apt-get line when its
# simulation (any user may simulate) removes nothing; otherwise the guarded setup, which names
# the host toolchain to keep it.
root_command() {
    local sim rc=0
    sim="$(mktemp)"
    LC_ALL=C apt-get install -s --no-install-recommends "$@" >"$sim" 2>&1 || rc=$?
    if [[ $rc -eq 0 && -z "$(sim_removals "$sim")" && "$*" != *:* ]]; then
        echo "apt-get install --no-install-recommends $*"
    else
        echo "$(setup_command) (in a clone of root's own)"
    fi
    rm -f "$sim"
}

# A user who may not install: one line with only the missing packages and that command.
refuse_missing() {
    die "missing apt packages: $*; not root and no sudo: ask root to run: $(root_command "$@")"
}

apt_lists_empty() {
    ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null
}

apt_update_once() {
    [[ $APT_UPDATED -eq 0 ]] || return 0
    APT_UPDATED=1
    need_root_or_explain "the apt package lists are missing or stale" "apt-get update"
    say "running apt-get update (package lists are missing or stale)"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
        || die "apt-get update failed; fix the apt sources, then rerun $ME"
}

apt_install() {
    # $@ = packages to install (missing ones)
    # Host toolchain: an installed package is named as pkg=<installed version> so
    # that apt neither removes it nor upgrades it; a missing one is named plainly.
    local tool=() p v
    for p in "${HOST_TOOLCHAIN[@]}" "${HOST_TOOLCHAIN_IF_PRESENT[@]}"; do
        printf '%s\n' "$@" | grep -qxF "$p" && continue
        if dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^.i'; then
            # One line per installed architecture (libc6-dev:arm64 after --with-mpi); Multi-Arch:
            # same packages share one version. (Not `| head -n 1`: SIGPIPE under pipefail.)
            v="$(dpkg-query -W -f='${Version}\n' "$p")"; v="${v%%$'\n'*}"
            tool+=("$p=$v")
        elif printf '%s\n' "${HOST_TOOLCHAIN[@]}" | grep -qxF "$p"; then
            tool+=("$p")
        fi
    done
    local args=(--no-install-recommends "$@" "${tool[@]}")
    # de-duplicate while keeping order
    local -A seen=(); local uniq=()
    for p in "${args[@]}"; do [[ -n "${seen[$p]:-}" ]] || { seen[$p]=1; uniq+=("$p"); }; done
    args=("${uniq[@]}")

    local sim; sim="$(mktemp)"
    if apt_lists_empty; then apt_update_once; fi
    local rc=0
    LC_ALL=C apt-get install -s "${args[@]}" >"$sim" 2>&1 || rc=$?
    if [[ $rc -ne 0 ]] && grep -qE 'Unable to locate package|has no installation candidate' "$sim" && [[ $APT_UPDATED -eq 0 ]]; then
        apt_update_once
        rc=0; LC_ALL=C apt-get install -s "${args[@]}" >"$sim" 2>&1 || rc=$?
    fi
    if [[ $rc -ne 0 ]]; then
        say "apt simulation failed: $(grep -E '^E:' "$sim" | head -n1 | cut -c1-200)"
        rm -f "$sim"
        die "nothing was installed; investigate with: apt-get install -s ${args[*]}"
    fi
    guard_simulation "$sim" "${args[@]}" || { rm -f "$sim"; exit 1; }
    rm -f "$sim"

    need_root_or_explain "missing apt packages: $*" "apt-get install --no-install-recommends $*"
    say "installing apt packages: $*"
    local log; log="$(mktemp)"
    if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=900 -y -q "${args[@]}" >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "apt-get install failed (full log: $log); fix apt, then rerun $ME"
    fi
    rm -f "$log"
    check_compilers
}

# The compilers still compile and link (an apt run once removed them; see the header).
check_compilers() {
    local t; t="$(mktemp -d)"
    echo 'int main(void) { return 0; }' >"$t/t.c"
    gcc -o "$t/host" "$t/t.c" >/dev/null 2>&1 \
        || { rm -rf "$t"; die "host gcc no longer compiles after apt install; fix: apt-get install --reinstall gcc libc6-dev binutils"; }
    if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
        aarch64-linux-gnu-gcc -static -o "$t/cross" "$t/t.c" >/dev/null 2>&1 \
            || { rm -rf "$t"; die "aarch64-linux-gnu-gcc no longer compiles after apt install; fix: apt-get install --reinstall $AARCH64_GCC_PKGS"; }
    fi
    if command -v clang-14 >/dev/null 2>&1; then
        clang-14 -c -o "$t/clang.o" "$t/t.c" >/dev/null 2>&1 \
            || { rm -rf "$t"; die "clang-14 no longer compiles after apt install; fix: apt-get install --reinstall clang-14"; }
    fi
    rm -rf "$t"
}

# ---------------------------------------------------------------------------
# arm64 Open MPI (--with-mpi)
# ---------------------------------------------------------------------------

arm64_enabled() {
    dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64
}

enable_arm64() {
    arm64_enabled && compgen -G '/var/lib/apt/lists/*binary-arm64_Packages*' >/dev/null && return 0
    need_root_or_explain "the arm64 architecture or its package lists are missing" "$(setup_command) (in a clone of root's own)"
    if ! arm64_enabled; then
        say "enabling the arm64 architecture (dpkg --add-architecture arm64) for Debian's arm64 packages"
        "${SUDO[@]}" dpkg --add-architecture arm64 || die "dpkg --add-architecture arm64 failed"
    fi
    APT_UPDATED=0
    apt_update_once
}

# A program against the arm64 Open MPI builds and starts under QEMU as a singleton.
check_mpi() {
    local t; t="$(mktemp -d)"
    cat >"$t/m.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    printf("rank %d\n", rank);
    return rank != 0;
}
C
    local inc="${MPI_HEADER%/mpi.h}" lib="${MPI_HEADER%/include/mpi.h}/lib"
    aarch64-linux-gnu-gcc -I"$inc" -o "$t/m" "$t/m.c" -L"$lib" -lmpi >"$t/log" 2>&1 \
        || { cat "$t/log" >&2; rm -rf "$t"; die "cannot build an MPI program against $inc; fix: apt-get install --reinstall libopenmpi-dev:arm64"; }
    local out
    out="$(cd "$t" && env -i OMPI_MCA_ess_singleton_isolated=1 qemu-aarch64 ./m 2>&1)" \
        || { echo "$out" >&2; rm -rf "$t"; die "an MPI program built against the arm64 Open MPI does not start under qemu-aarch64 (output above)"; }
    rm -rf "$t"
}

# ---------------------------------------------------------------------------
# venv
# ---------------------------------------------------------------------------

setup_venv() {
    local py="$1" problem
    problem="$(venv_problems)"
    if [[ -n "$problem" ]]; then
        [[ -d "$VENV" ]] && say "recreating .venv ($problem)"
        rm -rf "$VENV"
        "$py" -m venv "$VENV" >/dev/null \
            || die "'$py -m venv' failed; fix: apt-get install python3-venv"
    fi
    if ! venv_pin_mismatches >/dev/null 2>&1; then
        say "installing Python packages from requirements.txt into .venv"
        local log="$VENV/pip-install.log"
        if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
                -r "$REQS" >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            die "pip install failed (log: $log); fix the network/requirements.txt, then rerun $ME"
        fi
        "$VENV/bin/python" -m pip uninstall -q -y --disable-pip-version-check snakemake-executor-plugin-slurm >>"$log" 2>&1 || true
        if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --upgrade \
                --target "$SLURM_SITE" -r "$REQS_SLURM" >>"$log" 2>&1; then
            tail -n 20 "$log" >&2
            die "pip install of the Slurm executor plugin failed (log: $log); fix the network, then rerun $ME"
        fi
        # A package whose metadata is there but whose files are gone: pip takes it as installed.
        local broken
        broken="$(pins_in "$REQS" "" broken || true)"
        if [[ -n "$broken" ]]; then
            say "reinstalling packages whose files are missing: $(echo $broken)"
            # shellcheck disable=SC2086  # one requirement per word
            "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
                $broken >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "pip reinstall failed (log: $log); fix the network, then rerun $ME"; }
        fi
        "$VENV/bin/python" -m pip check --disable-pip-version-check >"$log.check" 2>&1 \
            || { cat "$log.check" >&2; die "pip check failed: requirements.txt lacks a dependency; regenerate it (see its header)"; }
        venv_pin_mismatches >&2 || die "venv does not match requirements.txt after install; fix: rm -rf .venv && $ME"
    fi
}

# ---------------------------------------------------------------------------
# modes
# ---------------------------------------------------------------------------

MODE=install
WITH_CLANG=0
WITH_CHROMIUM=0
VENV_ONLY=0
WITH_MPI=0
WITH_GEM5=0
WITH_SLURM=0
WITH_OMPI5=0
WITH_ARM64_VM=0
WITH_ARM64_NODE=0
WITH_DYNAMORIO=0
WITH_SIMENG=0
FORCE=0
SIMFILE=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --check) MODE=check ;;
        --with-clang) WITH_CLANG=1 ;;
        --with-chromium) WITH_CHROMIUM=1 ;;
        --with-mpi) WITH_MPI=1 ;;
        --with-gem5) WITH_GEM5=1 ;;
        --with-slurm) WITH_SLURM=1 ;;
        --stop-slurm) exec "$ROOT/setup/slurm.sh" stop ;;
        --with-ompi5) WITH_OMPI5=1 ;;
        --with-arm64-vm) WITH_ARM64_VM=1 ;;
        --with-arm64-node) WITH_ARM64_NODE=1 ;;
        --with-dynamorio) WITH_DYNAMORIO=1 ;;
        --with-simeng) WITH_SIMENG=1 ;;
        --print-packages) MODE=print ;;
        --force) FORCE=1 ;;
        --check-simulation)
            # Bad input: exit 2 with the fix (a bare `shift` past the end exited 1 without a word).
            if [[ $# -lt 2 ]]; then
                echo "$ME: --check-simulation needs a file: the saved output of 'apt-get install -s PACKAGES' ($ME --check-simulation FILE)" >&2
                exit 2
            fi
            MODE=simcheck; SIMFILE=$2; shift ;;
        --venv-only) VENV_ONLY=1 ;;
        -h|--help) awk 'NR > 3 && /^#$/ { exit } NR > 1' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1'; see $ME --help" ;;
    esac
    shift
done

# The emulated AArch64 guest and node stand in for an AArch64 host: on one they have no job.
if [[ $HOST_ARCH == arm64 && ( $WITH_ARM64_VM -eq 1 || $WITH_ARM64_NODE -eq 1 ) ]]; then
    say "skipping --with-arm64-vm and --with-arm64-node: they emulate an AArch64 machine for an x86-64 host, and this host is arm64"
    WITH_ARM64_VM=0; WITH_ARM64_NODE=0
fi
# DynamoRIO for AArch64 runs natively on an AArch64 host only; an x86-64 host's is the guest's.
if [[ $HOST_ARCH != arm64 && $WITH_DYNAMORIO -eq 1 ]]; then
    say "skipping --with-dynamorio: DynamoRIO for AArch64 runs natively on an arm64 host only, and this host is $HOST_ARCH; here the emulated guest runs it (--with-arm64-vm; armie: {via: guest})"
    WITH_DYNAMORIO=0
fi
if [[ $MODE == simcheck ]]; then
    [[ -r "$SIMFILE" ]] || die "--check-simulation needs a readable file"
    guard_simulation "$SIMFILE" "<packages>" && echo "$ME: simulation removes nothing: ok"
    exit $?
fi

APT_PKGS=("${APT_BASE[@]}")
CMDS=("${CMDS_BASE[@]}")
if [[ $WITH_CLANG -eq 1 ]]; then APT_PKGS+=("${APT_CLANG[@]}"); CMDS+=("${CMDS_CLANG[@]}"); fi
if [[ $WITH_CHROMIUM -eq 1 ]]; then APT_PKGS+=("${APT_CHROMIUM[@]}"); CMDS+=("${CMDS_CHROMIUM[@]}"); fi
if [[ $VENV_ONLY -eq 1 ]]; then APT_PKGS=(); CMDS=(); fi
if [[ $WITH_MPI -eq 1 ]]; then APT_PKGS+=("${APT_MPI[@]}"); fi
if [[ $WITH_GEM5 -eq 1 ]]; then APT_PKGS+=("${APT_GEM5[@]}"); fi
if [[ $WITH_SLURM -eq 1 ]]; then APT_PKGS+=("${APT_SLURM[@]}"); CMDS+=(slurmctld:slurmctld slurmd:slurmd sinfo:slurm-client munged:munge); fi
if [[ $WITH_OMPI5 -eq 1 ]]; then APT_PKGS+=("${APT_OMPI5[@]}"); fi
if [[ $WITH_ARM64_VM -eq 1 ]]; then APT_PKGS+=("${APT_ARM64_VM[@]}"); CMDS+=(qemu-system-aarch64:qemu-system-arm cpio:cpio cmake:cmake
    aarch64-linux-gnu-g++:g++-aarch64-linux-gnu patch:patch bzip2:bzip2); fi
if [[ $WITH_ARM64_NODE -eq 1 ]]; then APT_PKGS+=("${APT_ARM64_NODE[@]}"); CMDS+=(qemu-system-aarch64:qemu-system-arm
    qemu-img:qemu-utils cpio:cpio debootstrap:debootstrap mke2fs:e2fsprogs); fi
if [[ $WITH_DYNAMORIO -eq 1 ]]; then APT_PKGS+=("${APT_DYNAMORIO[@]}"); CMDS+=(cmake:cmake g++:g++ patch:patch bzip2:bzip2); fi
if [[ $WITH_SIMENG -eq 1 ]]; then APT_PKGS+=("${APT_SIMENG[@]}"); CMDS+=(cmake:cmake g++:g++); fi
if [[ $MODE == print ]]; then
    # The same package once (--with-arm64-vm and --with-arm64-node share some).
    printf '%s\n' "${APT_PKGS[@]}" | awk '!seen[$0]++' | paste -sd' '
    exit 0
fi

[[ -f "$REQS" ]] || die "requirements.txt missing at $REQS; restore it from git"
[[ -f "$REQS_SLURM" ]] || die "requirements-slurm.txt missing at $REQS_SLURM; restore it from git"

if [[ $MODE == check ]]; then
    problems=()
    py="$(pick_python)"
    st="$(python_status "$py")"; [[ "$st" == ok ]] || problems+=("python: $st")
    mapfile -t MISSING < <(missing_apt "${APT_PKGS[@]}")
    for p in "${MISSING[@]}"; do problems+=("apt package $p not installed (fix: $ME)"); done
    while read -r c; do [[ -n "$c" ]] && problems+=("command $c not on PATH (fix: $ME)"); done < <(missing_cmds "${CMDS[@]}")
    if [[ $WITH_MPI -eq 1 ]]; then
        arm64_enabled || problems+=("dpkg architecture arm64 not enabled (fix: $ME --with-mpi)")
        [[ -f "$MPI_HEADER" ]] || problems+=("$MPI_HEADER missing (fix: $ME --with-mpi)")
    fi
    if [[ $WITH_OMPI5 -eq 1 ]] && [[ ! -f "$("$ROOT/setup/ompi5.sh" --path)/lib/libmpi.so" ]]; then
        problems+=("Open MPI 5 not built at $("$ROOT/setup/ompi5.sh" --path) (fix: $ME --with-ompi5)")
    fi
    vp="$(venv_problems)"
    if [[ -n "$vp" ]]; then
        problems+=("venv: $vp (fix: $ME)")
    else
        while read -r m; do [[ -n "$m" ]] && problems+=("venv pin: $m (fix: $ME)"); done < <(venv_pin_mismatches || true)
    fi
    if [[ $WITH_GEM5 -eq 1 ]] && ! "$ROOT/setup/gem5.sh" --path >/dev/null 2>&1; then
        problems+=("gem5 not built at $("$ROOT/setup/gem5.sh" --where) (fix: $ME --with-gem5)")
    fi
    if [[ $WITH_ARM64_VM -eq 1 ]]; then
        arm64_enabled || problems+=("dpkg architecture arm64 not enabled (fix: $ME --with-arm64-vm)")
        "$ROOT/setup/arm64-vm.sh" --path >/dev/null 2>&1 \
            || problems+=("the arm64 guest is not built at $("$ROOT/setup/arm64-vm.sh" --where) (fix: $ME --with-arm64-vm)")
    fi
    if [[ $WITH_ARM64_NODE -eq 1 ]]; then
        "$ROOT/setup/arm64-node.sh" --path >/dev/null 2>&1 \
            || problems+=("the arm64 node is not built at $("$ROOT/setup/arm64-node.sh" --where) (fix: $ME --with-arm64-node)")
    fi
    if [[ $WITH_DYNAMORIO -eq 1 ]] && ! "$ROOT/setup/dynamorio-native.sh" --path >/dev/null 2>&1; then
        problems+=("DynamoRIO with the ROI client is not installed at $("$ROOT/setup/dynamorio-native.sh" --where) (fix: $ME --with-dynamorio)")
    fi
    if [[ $WITH_SIMENG -eq 1 ]] && ! "$ROOT/setup/simeng.sh" --path >/dev/null 2>&1; then
        problems+=("SimEng is not built at $("$ROOT/setup/simeng.sh" --where) (fix: $ME --with-simeng)")
    fi
    if [[ ${#problems[@]} -eq 0 ]]; then
        echo "$ME --check: all present (python $py, ${#APT_PKGS[@]} apt packages, .venv matches requirements.txt)"
        exit 0
    fi
    echo "$ME --check: ${#problems[@]} missing:"
    printf '  - %s\n' "${problems[@]}"
    fixcmd="$ME"; [[ $WITH_CLANG -eq 1 ]] && fixcmd+=" --with-clang"; [[ $WITH_CHROMIUM -eq 1 ]] && fixcmd+=" --with-chromium"; [[ $WITH_MPI -eq 1 ]] && fixcmd+=" --with-mpi"
    [[ $WITH_GEM5 -eq 1 ]] && fixcmd+=" --with-gem5"
    [[ $WITH_SLURM -eq 1 ]] && fixcmd+=" --with-slurm"
    [[ $WITH_OMPI5 -eq 1 ]] && fixcmd+=" --with-ompi5"
    [[ $WITH_ARM64_VM -eq 1 ]] && fixcmd+=" --with-arm64-vm"
    [[ $WITH_ARM64_NODE -eq 1 ]] && fixcmd+=" --with-arm64-node"
    [[ $WITH_DYNAMORIO -eq 1 ]] && fixcmd+=" --with-dynamorio"
    [[ $WITH_SIMENG -eq 1 ]] && fixcmd+=" --with-simeng"
    if [[ ${#MISSING[@]} -gt 0 ]] && ! can_admin; then
        echo "fix: ask root to run: $(root_command "${MISSING[@]}"); then run $fixcmd"
    else
        echo "fix: run $fixcmd (as root, or as a user with sudo)"
    fi
    exit 1
fi

# --- install mode ----------------------------------------------------------
KEY="$(stamp_key "${APT_PKGS[@]}")"
fast_ok() {
    [[ $FORCE -eq 0 && -f "$STAMP" ]] && grep -qxF "$KEY" "$STAMP" \
        && [[ -x "$VENV/bin/python" && -x "$VENV/bin/snakemake" ]] && venv_files_present \
        && [[ -z "$(missing_cmds "${CMDS[@]}")" ]] \
        && [[ $WITH_MPI -eq 0 || -f "$MPI_HEADER" ]]
}
# Daemons and builds are not behind the stamp: slurm.sh starts what is not running, gem5.sh,
# ompi5.sh and arm64-vm.sh keep their own stamps (a second call does nothing).
run_builds() {
    if [[ $WITH_SLURM -eq 1 ]]; then "$ROOT/setup/slurm.sh" start || exit 1; fi
    if [[ $WITH_OMPI5 -eq 1 ]]; then "$ROOT/setup/ompi5.sh" || exit 1; fi
    if [[ $WITH_ARM64_VM -eq 1 ]]; then "$ROOT/setup/arm64-vm.sh" || exit 1; fi
    if [[ $WITH_ARM64_NODE -eq 1 ]]; then "$ROOT/setup/arm64-node.sh" || exit 1; fi
    if [[ $WITH_DYNAMORIO -eq 1 ]]; then "$ROOT/setup/dynamorio-native.sh" || exit 1; fi
    if [[ $WITH_SIMENG -eq 1 ]]; then "$ROOT/setup/simeng.sh" || exit 1; fi
    if [[ $WITH_GEM5 -eq 1 ]]; then exec "$ROOT/setup/gem5.sh"; fi
    exit 0
}
if fast_ok; then run_builds; fi

# Serialise concurrent runs (two ./harness commands started together).
exec 9>"${TMPDIR:-/tmp}/harness-install.$(id -u).$(echo "$ROOT" | cksum | cut -d' ' -f1).lock"
flock 9
if fast_ok; then exec 9>&-; run_builds; fi

mapfile -t MISSING < <(missing_apt "${APT_PKGS[@]}")
if [[ ${#MISSING[@]} -gt 0 ]] && ! can_admin; then refuse_missing "${MISSING[@]}"; fi
if [[ $WITH_MPI -eq 1 || $WITH_OMPI5 -eq 1 ]] && printf '%s\n' "${MISSING[@]}" | grep -q ':arm64$'; then enable_arm64; fi
# The guest's packages are downloaded for arm64: the architecture and its lists must be there.
if [[ $WITH_ARM64_VM -eq 1 || $WITH_ARM64_NODE -eq 1 ]]; then enable_arm64; fi
if [[ ${#MISSING[@]} -gt 0 ]]; then
    apt_install "${MISSING[@]}"
    mapfile -t STILL < <(missing_apt "${APT_PKGS[@]}")
    [[ ${#STILL[@]} -eq 0 ]] || die "still not installed after apt: ${STILL[*]}; fix: apt-get install ${STILL[*]}"
fi
mapfile -t MC < <(missing_cmds "${CMDS[@]}")
[[ ${#MC[@]} -eq 0 ]] || die "commands missing although their packages are installed: ${MC[*]}; fix: apt-get install --reinstall <package>"

PY="$(pick_python)"
st="$(python_status "$PY")"
[[ "$st" == ok ]] || die "$st"
setup_venv "$PY"

[[ $WITH_MPI -eq 0 ]] || check_mpi

pins_in "$REQS" "" tops >"$MANIFEST.tmp" && mv "$MANIFEST.tmp" "$MANIFEST"
grep -qxF "$KEY" "$STAMP" 2>/dev/null || echo "$KEY" >>"$STAMP"
# A set with extras contains the base set, and with clang the sweep's set (./harness setup's set
# has chromium too): a later run for either is a no-op too.
for sub in base clang; do
    [[ $VENV_ONLY -eq 0 && ( $sub == base || $WITH_CLANG -eq 1 ) ]] || continue
    if [[ $sub == base ]]; then SUB_KEY="$(stamp_key "${APT_BASE[@]}")"
    else SUB_KEY="$(stamp_key "${APT_BASE[@]}" "${APT_CLANG[@]}")"; fi
    grep -qxF "$SUB_KEY" "$STAMP" || echo "$SUB_KEY" >>"$STAMP"
done
exec 9>&-
run_builds
