"""The external tools the harness drives: cross compilers, QEMU, objdump, host gcc.

Their versions are inputs of the build and count rules (written to stamp files), so an
upgrade re-runs exactly what it affects. `preflight()` names the missing piece and its fix
in one line before any job runs.
"""
from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_QEMU = "7.2"  # the plugin API (version 1) and its struct layouts are those of 7.2
BASE_CFLAGS = ("-O3", "-march=armv8-a+sve", "-std=gnu11", "-Wall", "-Wextra")
OBJDUMP = "aarch64-linux-gnu-objdump"
QEMU = "qemu-aarch64"
FIX = "run ./harness setup (or: apt-get install gcc-aarch64-linux-gnu qemu-user)"


class ToolchainError(Exception):
    """A tool is missing or unsupported: one line naming the fix."""


@dataclass(frozen=True)
class Compiler:
    name: str
    cc: tuple[str, ...]  # the command and its target flags
    link: tuple[str, ...]  # extra flags for the static link

    def version(self) -> str:
        out = _run([*self.cc[:1], "--version"])
        return out.splitlines()[0].strip()


COMPILERS = {
    "gcc": Compiler("gcc", ("aarch64-linux-gnu-gcc",), ("-static",)),
    # The cross sysroot, named: from the bare triple clang prefers the multiarch arm64 libc
    # (/usr/lib/aarch64-linux-gnu, libc6-dev:arm64, which --with-mpi installs) over the cross
    # libc that gcc links, and the two glibc builds have different memcpy code: the gcc vs
    # clang pair would then differ in the C library too.
    "clang": Compiler("clang", ("clang-14", "--target=aarch64-linux-gnu", "--sysroot=/usr/aarch64-linux-gnu"),
                      ("-static",)),
    # The perf backend's native builds: the host's own gcc, dynamically linked like any
    # program on that machine. Its kernels take the gcc cflags of the kernel table.
    "native": Compiler("native", ("gcc",), ()),
}
CROSS_COMPILERS = ("gcc", "clang")

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


def compiler_cflags(compiler: str, build: str, vls_bits: int | None, extra: tuple[str, ...] = ()) -> list[str]:
    if compiler == "native":
        return [*NATIVE_CFLAGS[build], *extra]
    if build == "nosve":
        return [NOSVE_MARCH if f.startswith("-march=") else f for f in cflags(None, extra)]
    return cflags(vls_bits, extra)


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise ToolchainError(f"{cmd[0]} not found: {FIX}") from None
    except subprocess.CalledProcessError as e:
        raise ToolchainError(f"{' '.join(cmd)} failed: {e.stderr.strip().splitlines()[-1:]}") from None


def qemu_version() -> str:
    out = _run([QEMU, "--version"])
    m = re.search(r"version (\d+\.\d+(?:\.\d+)?)", out)
    if not m:
        raise ToolchainError(f"cannot read the version of {QEMU}: {out.splitlines()[:1]}")
    return out.splitlines()[0].strip()


def check_qemu() -> str:
    line = qemu_version()
    ver = re.search(r"version (\d+\.\d+)", line).group(1)  # type: ignore[union-attr]
    if ver != SUPPORTED_QEMU:
        raise ToolchainError(
            f"{QEMU} is version {ver}; the counting plugins are written for QEMU {SUPPORTED_QEMU} "
            f"(plugin API 1): install Debian 12's qemu-user"
        )
    return line


def preflight(compilers: list[str], backends: list[str]) -> dict[str, str]:
    """Check every tool the sweep needs; return their version lines (for stamps and provenance)."""
    versions: dict[str, str] = {}
    if not backends:  # a perf-only sweep: nothing is cross-built or counted
        compilers = []
    for c in compilers:
        comp = COMPILERS[c]
        if shutil.which(comp.cc[0]) is None:
            fix = "./harness setup --with-clang" if c == "clang" else "./harness setup"
            raise ToolchainError(f"cross compiler {comp.cc[0]} not found: run {fix}")
        versions[f"compiler.{c}"] = comp.version()
    if backends and shutil.which(OBJDUMP) is None:
        raise ToolchainError(f"{OBJDUMP} not found: run ./harness setup (binutils-aarch64-linux-gnu)")
    if "qemu" in backends:
        if shutil.which(QEMU) is None:
            raise ToolchainError(f"{QEMU} not found: run ./harness setup (Debian package qemu-user)")
        versions["qemu"] = check_qemu()
        if shutil.which("gcc") is None:
            raise ToolchainError("host gcc not found (it builds the QEMU plugins): run ./harness setup")
        versions["host_gcc"] = _run(["gcc", "--version"]).splitlines()[0].strip()
    if "armie" in backends:
        from analysis.backends import armie

        if armie.armie_available() is None:
            raise ToolchainError(
                "backend armie needs an AArch64 host with armie on PATH (module load armie); remove it from backends here"
            )
        versions["armie"] = _run(["armie", "--version"]).splitlines()[0].strip()
    versions["host"] = f"{platform.node()} {platform.machine()} {platform.system()} {platform.release()}"
    return versions


def installed_compiler_versions() -> dict[str, str]:
    return {f"compiler.{name}": c.version() for name, c in COMPILERS.items() if shutil.which(c.cc[0])}


def write_stamp(path: Path, text: str) -> None:
    """Rewrite a stamp only when its content changes, so its mtime marks real upgrades."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
