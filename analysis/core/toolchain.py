"""The compilers the harness builds with, objdump, and the host.

Their versions are inputs of the build rules (written to stamp files) and of every job's plan,
so an upgrade re-runs exactly what it affects. `preflight()` names the missing piece and its
fix in one line before any job runs; each backend checks its own tools
(analysis.backends.registry.preflight).
"""
from __future__ import annotations

import functools
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from analysis.core import files

BASE_CFLAGS = ("-O3", "-march=armv8-a+sve", "-std=gnu11", "-Wall", "-Wextra")
OBJDUMP = "aarch64-linux-gnu-objdump"
FIX = "run ./harness setup (or: apt-get install gcc-aarch64-linux-gnu qemu-user)"


class ToolchainError(Exception):
    """A tool is missing or unsupported: one line naming the fix."""


@dataclass(frozen=True)
class Compiler:
    name: str
    cc: tuple[str, ...]  # the command and its target flags
    link: tuple[str, ...]  # extra flags for the static link

    def version(self) -> str:
        return first_line([*self.cc[:1], "--version"])


def host_arch() -> str:
    """The host's architecture in dpkg's names (amd64, arm64): HARNESS_HOST_ARCH when set, as
    setup/install.sh reads it (tests model the other host with it), else the machine's."""
    machine = platform.machine()
    return os.environ.get("HARNESS_HOST_ARCH") or {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def host_has_sve(cpuinfo: str | None = None) -> bool:
    """AArch64 with the `sve` hardware capability (listed in /proc/cpuinfo's Features)."""
    if cpuinfo is None:
        if platform.machine() != "aarch64":
            return False
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    return any(line.startswith("Features") and "sve" in line.split(":", 1)[1].split() for line in cpuinfo.splitlines())


# The device tree's board names (NUL-separated); QEMU's virt machine is "linux,dummy-virt".
DEVICE_TREE = Path("/proc/device-tree/compatible")
QEMU_VIRT = b"linux,dummy-virt"
EMULATED_MACHINE = "QEMU virt machine (device tree: linux,dummy-virt)"


def emulated_machine(compatible: bytes | None = None) -> str | None:
    """The emulator this AArch64 Linux runs on, or None on hardware: QEMU's virt machine names
    itself in the device tree (`linux,dummy-virt`). Its PMU counts instructions exactly only with
    -icount, and its cycles and times are virtual however it runs, so nothing measured there is
    A64FX timing even where the CPU reads as an A64FX (QEMU's -cpu a64fx)."""
    if compatible is None:
        if platform.machine() != "aarch64":
            return None
        try:
            compatible = DEVICE_TREE.read_bytes()
        except OSError:
            return None
    return EMULATED_MACHINE if QEMU_VIRT in compatible.split(b"\0") else None


# The cross builds' static link: GNU gold (binutils ships it beside ld.bfd). A kernel binary is a
# few small objects and glibc's libc.a, and ld.bfd took 43-51 ms of CPU per link where gold takes
# 23-26 (one copy binary, 30 links each, load average 7-9); a default sweep links 204 of them.
# The layout differs, not the code: every ROI count is the same, whole-program counts moved
# (docs/contracts.md).
STATIC_LINK = ("-static", "-fuse-ld=gold")


def compilers(arch: str) -> dict[str, Compiler]:
    """The compilers on a host of `arch`: on arm64 clang-14 is the host's own compiler and
    links the host's libc, as gcc does; elsewhere both cross-compile."""
    # The cross sysroot, named: from the bare triple clang prefers the multiarch arm64 libc
    # (/usr/lib/aarch64-linux-gnu, libc6-dev:arm64, which --with-mpi installs) over the cross
    # libc that gcc links, and the two glibc builds have different memcpy code: the gcc vs
    # clang pair would then differ in the C library too. An arm64 host has no cross sysroot.
    cross = () if arch == "arm64" else ("--target=aarch64-linux-gnu", "--sysroot=/usr/aarch64-linux-gnu")
    return {
        "gcc": Compiler("gcc", ("aarch64-linux-gnu-gcc",), STATIC_LINK),
        "clang": Compiler("clang", ("clang-14", *cross), STATIC_LINK),
        # The perf backend's native builds: the host's own gcc, dynamically linked like any
        # program on that machine. Its kernels take the gcc cflags of the kernel table.
        "native": Compiler("native", ("gcc",), ()),
    }


def libc_package(arch: str) -> str:
    """The Debian package of the libc.a the compilers link: the host's own on arm64, the
    cross one elsewhere (setup/install.sh installs it)."""
    return "libc6-dev" if arch == "arm64" else "libc6-dev-arm64-cross"


COMPILERS = compilers(host_arch())
CROSS_COMPILERS = ("gcc", "clang")
# The SVE native build on a host that is not AArch64 (x86-64): its binaries run in the emulated
# AArch64 guest (analysis.core.arm64_vm, perf in the guest), so the cross gcc builds them, static
# like the cross builds (the guest's initramfs has no matching compiler and no libc to share).
GUEST_NATIVE = Compiler("native", ("aarch64-linux-gnu-gcc",), ("-static",))


def compiler_for(compiler: str, build: str) -> Compiler:
    """The compiler that builds `build` for `compiler`: the native compiler's SVE build on an
    x86-64 host is the guest's (GUEST_NATIVE); everything else is COMPILERS[compiler]."""
    if compiler == "native" and build == "vla" and host_arch() != "arm64":
        return GUEST_NATIVE
    return COMPILERS[compiler]


def stamp_name(compiler: str, build: str) -> str:
    """The stamp (and plan version key) of the compiler that builds `build` for `compiler`
    (compiler_for): every object it compiles lists it, so an upgrade of that compiler rebuilds
    them. The native SVE build on an x86-64 host has a stamp of its own, the cross gcc's version:
    under the host gcc's stamp an upgraded cross gcc rebuilt none of its binaries."""
    other = compiler in COMPILERS and compiler_for(compiler, build) != COMPILERS[compiler]
    return f"compiler.{compiler}.{build}" if other else f"compiler.{compiler}"

# Native builds: "vla" = SVE, VL set at run time by prctl (an AArch64 host with SVE);
# "host" = the host's plain ISA (x86-64, or AArch64 without SVE) for the baselines.
# Both repeat the measured call (HARNESS_REPEAT, see harness.h).
NATIVE_CFLAGS = {
    "vla": ("-O3", "-march=armv8.2-a+sve", "-std=gnu11", "-Wall", "-Wextra", "-DHARNESS_REPEAT"),
    "host": ("-O3", "-std=gnu11", "-Wall", "-Wextra", "-DHARNESS_REPEAT"),
}


def cflags(vls_bits: int | None, extra: tuple[str, ...] = ()) -> list[str]:
    flags = list(BASE_CFLAGS)
    if vls_bits:
        flags.append(f"-msve-vector-bits={vls_bits}")
    return flags + list(extra)


# The build of rows that run without SVE (`sve: false`, under -cpu max,sve=off): no SVE
# instruction anywhere in the binary (GCC 12 -O3 would vectorize the driver's fill with SVE).
NOSVE_MARCH = "-march=armv8-a"


# clang's driver costs about 30 ms of CPU per process before it does any work (`clang-14
# --version` alone: it loads LLVM's shared libraries), more than a gold link itself (25 ms), and a
# default sweep links 102 clang binaries. Their links run the linker command clang runs (`-###`),
# asked once per process: the same command, the same binary. GCC's driver costs about 1.5 ms.
DIRECT_LINK = ("clang",)
LINK_OUT, LINK_IN = "LINK-OUTPUT", "LINK-INPUT"


@functools.cache
def linker_command(compiler: str) -> tuple[str, ...]:
    """The command `compiler`'s driver runs to link one object into LINK_OUT statically, with
    the object's place marked by LINK_IN (the driver checks that its inputs exist)."""
    comp = COMPILERS[compiler]
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp, "in.o")
        obj.touch()
        cmd = [*comp.cc, *comp.link, "-###", "-o", LINK_OUT, str(obj)]
        try:
            lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr.strip().splitlines()
        except FileNotFoundError:
            raise ToolchainError(f"{cmd[0]} not found: {FIX}") from None
        words = [LINK_IN if w == str(obj) else w for w in shlex.split(lines[-1] if lines else "")]
    if words.count(LINK_OUT) != 1 or words.count(LINK_IN) != 1:
        raise ToolchainError(f"{shlex.join(cmd)} printed no link command: {lines[-1:]}")
    return tuple(words)


def compiler_cflags(compiler: str, build: str, vls_bits: int | None, extra: tuple[str, ...] = ()) -> list[str]:
    if compiler == "native":
        return [*NATIVE_CFLAGS[build], *extra]
    if build == "nosve":
        return [NOSVE_MARCH if f.startswith("-march=") else f for f in cflags(None, extra)]
    return cflags(vls_bits, extra)


def run(cmd: list[str]) -> str:
    """A tool's standard output; ToolchainError naming the tool when it is missing or fails."""
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise ToolchainError(f"{cmd[0]} not found: {FIX}") from None
    except subprocess.CalledProcessError as e:
        raise ToolchainError(f"{' '.join(cmd)} failed: {e.stderr.strip().splitlines()[-1:]}") from None


def first_line(cmd: list[str]) -> str:
    """The version line a tool prints first (`gcc --version`)."""
    return _first_line(shutil.which(cmd[0]) or cmd[0], tuple(cmd[1:]))


# The workflow asks each compiler for its version twice at every start (the sweep's preflight,
# then the stamps of every installed compiler): one subprocess per tool found on PATH is enough.
@functools.cache
def _first_line(tool: str, args: tuple[str, ...]) -> str:
    return run([tool, *args]).splitlines()[0].strip()


def host() -> str:
    return f"{platform.node()} {platform.machine()} {platform.system()} {platform.release()}"


def preflight(compilers: list[str]) -> dict[str, str]:
    """Check the compilers a sweep builds with (and objdump, which decodes what the cross
    compilers build); return their version lines and the host's (stamps and provenance)."""
    versions: dict[str, str] = {}
    for c in compilers:
        comp = COMPILERS[c]
        if shutil.which(comp.cc[0]) is None:
            fix = "./harness setup --with-clang" if c == "clang" else "./harness setup"
            raise ToolchainError(f"cross compiler {comp.cc[0]} not found: run {fix}")
        versions[f"compiler.{c}"] = comp.version()
        versions.update(build_versions(c))
        if c in CROSS_COMPILERS:
            versions[f"libc.{c}"] = libc_version(c)
    if set(compilers) & set(CROSS_COMPILERS) and shutil.which(OBJDUMP) is None:
        raise ToolchainError(f"{OBJDUMP} not found: run ./harness setup (binutils-aarch64-linux-gnu)")
    versions["host"] = host()
    return versions


def libc_version(compiler: str) -> str:
    """The static libc `compiler` links: its Debian package's version (libc_package) and its
    archive's hash. Its memcpy is inside the ROI of every row that copies, so two hosts whose
    counts differ there differ here (the cross 2.36-8cross1 against an arm64 node's 2.36-9)."""
    return libc_of(COMPILERS[compiler])


def libc_of(c: Compiler) -> str:
    """The libc `c` links, as libc_version names it: the host's own (libc6-dev) for the host's gcc
    (the perf backend's native builds), else libc_package's."""
    return _libc_version(c.cc, "libc6-dev" if c.cc == COMPILERS["native"].cc else libc_package(host_arch()))


@functools.cache
def _libc_version(cc: tuple[str, ...], package: str) -> str:
    libc_a = subprocess.run([*cc, "-print-file-name=libc.a"], capture_output=True, text=True).stdout.strip()
    digest = files.sha256(Path(libc_a))[:16] if Path(libc_a).is_file() else "no libc.a"
    # Not a Debian host (no dpkg-query): the archive's hash still names the build.
    dpkg = shutil.which("dpkg-query")
    pkg = subprocess.run([dpkg, "-W", "-f=${Version}", package], capture_output=True, text=True).stdout if dpkg else ""
    return f"{pkg.strip() or 'unknown'} libc.a:{digest}"


def installed_compiler_versions() -> dict[str, str]:
    """A stamp per installed compiler, and per build a compiler builds with another command
    (stamp_name)."""
    out = {f"compiler.{name}": c.version() for name, c in COMPILERS.items() if shutil.which(c.cc[0])}
    for name in COMPILERS:
        out.update(build_versions(name))
    return out


def build_versions(compiler: str) -> dict[str, str]:
    """The stamps of the builds `compiler` makes with another command (stamp_name), where it is
    installed."""
    builds = NATIVE_CFLAGS if compiler == "native" else ()
    others = {stamp_name(compiler, b): compiler_for(compiler, b) for b in builds}
    others.pop(f"compiler.{compiler}", None)
    return {k: c.version() for k, c in others.items() if shutil.which(c.cc[0])}


def stamp_compiler(name: str) -> Compiler | None:
    """The compiler a stamp (stamp_name: compiler.X or compiler.X.BUILD) stands for; None for
    another tool's."""
    kind, _, rest = name.partition(".")
    compiler, _, build = rest.partition(".")
    if kind != "compiler" or compiler not in COMPILERS:
        return None
    return compiler_for(compiler, build) if build else COMPILERS[compiler]


def stamp_text(name: str, version: str) -> str:
    """A stamp file's text: the tool's version line, and under a compiler's the libc it links
    (libc_of). The libc's memcpy is linked into the ROI of every row that copies (the cross
    2.36-8cross1 against a native 2.36-9+deb12u14 changed 139 ROI cells): an upgrade of the libc
    alone must relink them, as an upgrade of the compiler does."""
    c = stamp_compiler(name)
    return f"{version}\n{libc_of(c)}\n" if c else f"{version}\n"


def write_stamp(path: Path, text: str) -> None:
    """Rewrite a stamp only when its content changes, so its mtime marks real upgrades."""
    if path.exists() and path.read_text() == text:
        return
    files.write_text_atomic(path, text)


