"""Debian's arm64 Open MPI for the rows of families declared `mpi: true` (paper Fig. 9, 10).

Installed only on request (`./harness setup --with-mpi`, or by `./harness sweep` when the
sweep selects MPI rows), because the arm64 multiarch packages are large and an unguarded
install once removed the host compilers (setup/install.sh explains the guard). Everything
else about these rows is as for the static kernels: same compile flags, same drivers, same
staged runs; they link -lmpi dynamically and run with OMPI_MCA_ess_singleton_isolated=1.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from analysis.config import REPO, KernelTable, Sweep
from analysis.toolchain import ToolchainError

PREFIX = Path("/usr/lib/aarch64-linux-gnu/openmpi")
INCLUDE = PREFIX / "include"
LIB = PREFIX / "lib"
PACKAGE = "libopenmpi-dev:arm64"
SESSION_SOURCE = REPO / "kernels" / "mpi" / "session.c"
# A singleton without this tries to start an orted daemon (an arm64 executable the host
# cannot exec directly) and MPI_Init fails.
RUN_ENV = {"OMPI_MCA_ess_singleton_isolated": "1"}
FIX = "./harness setup --with-mpi"


def is_mpi(table: KernelTable, kernel: str, variant: str) -> bool:
    return table.families[table.row(kernel, variant).family].mpi


def needs_mpi(sweep: Sweep) -> bool:
    return any(sweep.table.families[sel["family"]].mpi for sel in sweep.selections)


def installed() -> bool:
    return (INCLUDE / "mpi.h").exists() and (LIB / "libmpi.so").exists()


def check(sweep: Sweep) -> None:
    """Fail before any job runs when the sweep selects MPI rows and the stack is absent."""
    if needs_mpi(sweep) and not installed():
        raise ToolchainError(
            f"this sweep has MPI rows (paper Fig. 9, 10) but Debian's arm64 Open MPI is not installed "
            f"({INCLUDE / 'mpi.h'} missing): run {FIX}"
        )


def version() -> str:
    """The installed package version, for provenance."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True)
    return f"Open MPI {PACKAGE} {out.stdout.strip() or '?'}"


def compile_flags() -> tuple[str, ...]:
    return (f"-I{INCLUDE}",)


def link_flags() -> tuple[str, ...]:
    """Dynamic link (the static kernels link -static): Debian ships no static libmpi."""
    return (f"-L{LIB}", "-lmpi")


def run_env(table: KernelTable, kernel: str, variant: str) -> dict[str, str]:
    return dict(RUN_ENV) if is_mpi(table, kernel, variant) else {}
