"""The perf backend's native jobs, and its SVE cells counted by the sweep's counting backend at
perf's sizes (issue 52 item 2(c)).

perf's instruction counts of its SVE cells (in the emulated guest, analysis.backends.perf_guest,
or natively on an emulated AArch64 node)
are compared with the counting backend's roi.total of the same cell (perf_guest_check). The perf
section's sizes (4 KiB to 16 MiB in the default sweep) are not the count sweep's (1 and 4 MiB),
so where a sweep plans perf's SVE runs, the first counting backend's jobs also run perf's cells
(with_perf_cells): 252 more runs for the default sweep with perf/sve guest, which had 252 of its
294 guest cells without a count.
"""
from __future__ import annotations

import platform
from dataclasses import replace
from typing import TYPE_CHECKING

from analysis.core import arm64_vm
from analysis.core.toolchain import COMPILERS, GUEST_NATIVE, compiler_for, emulated_machine, host_has_sve

if TYPE_CHECKING:  # model imports this module
    from analysis.core.kernels import KernelRow
    from analysis.core.model import Job, Sweep
    from analysis.core.run import Run

# The QEMU CPU model the emulated AArch64 guest runs (-cpu max,...): perf's SVE cells are compared
# with the counting backend's cells on it (analysis.backends.perf_guest_check).
REFERENCE_CPU = arm64_vm.CPU.split(",")[0]


def native_build(row: KernelRow, build: str) -> str | None:
    """The native builds perf runs a row with: the host baseline only for host_native rows,
    host-only code only on its ISA, and no glibc memcpy variant (libc.so hides them)."""
    if build == "host" and not row.host_native:
        return None
    if row.host_isa and (build != "host" or row.host_isa != platform.machine()):
        return None
    if row.memcpy != "libc":
        return None
    return build


def native_jobs(sweep: Sweep, backend: str, sve: bool, host: bool) -> list[Job]:
    """The perf backend's native runs (`backend`: its name): one Job per (build, kernel row).
    `sve`: the VLA build at every perf VL (prctl); `host`: the host_native rows built for the
    host's ISA, VL 0."""
    p = sweep.perf
    if p is None:
        return []
    builds: list[tuple[str, tuple[int, ...] | None]] = (
        ([("vla", p.vector_lengths)] if sve else []) + ([("host", (0,))] if host else []))
    return sweep.expand(backend, ["native"], builds, {"native": None}, lambda family: p.sizes[family], native_build)


def sve_place(sweep: Sweep) -> str | None:
    """Where the sweep sends perf's SVE runs, whether or not perf and the guest are ready here
    (analysis.backends.perf.detect adds readiness): "off" (perf/sve: off), "native" (SVE
    hardware), "node" (natively on an emulated AArch64 node), "guest" (perf/sve: guest on a host
    without SVE), "none" (a host without SVE and no guest asked), None (no perf section)."""
    p = sweep.perf
    if p is None:
        return None
    if p.sve == "off":
        return "off"
    if host_has_sve():
        return "node" if emulated_machine() is not None else "native"
    return "guest" if p.sve == "guest" else "none"


def sve_planned(sweep: Sweep) -> bool:
    """Whether perf's SVE runs go where their instruction counts are exact and compared: an
    emulated node or the guest; not SVE hardware, whose counts are not compared. Readiness is
    not asked: the count jobs must be the same where collect checks their raw files."""
    return sve_place(sweep) in ("node", "guest")


def reference_compiler(sweep: Sweep, compiler: str, build: str) -> str | None:
    """The sweep's cross compiler that builds what `compiler` builds for `build` in the guest, or
    None. The guest's native SVE build is the cross gcc's (GUEST_NATIVE) wherever the tables are
    read: on an arm64 host compiler_for names that host's own gcc, which built none of them."""
    cc = (GUEST_NATIVE if (compiler, build) == ("native", "vla") else compiler_for(compiler, build)).cc
    return next((c for c in sweep.compilers if COMPILERS[c].cc == cc), None)


def _cell(run: Run) -> tuple[int, int, str, str]:
    return (run.vl, run.size, run.op, run.dtype)


def with_perf_cells(sweep: Sweep, jobs: list[Job]) -> list[Job]:
    """`jobs` (a counting backend's) with perf's SVE cells added where they are missing: a row
    perf measures gets, in its job of the reference compiler's VLA build on REFERENCE_CPU, perf's
    runs (its sizes, the selection's op/dtype pairs) at the perf VLs that job runs. Each cell's
    baseline (size 0) is in the job already; no other job, VL or size changes."""
    if not jobs:
        return jobs
    compiler = reference_compiler(sweep, "native", "vla")
    # perf's jobs for their runs only: whose name they carry is not read.
    perf_runs = {(j.binary.kernel, j.binary.variant): j.runs
                 for j in native_jobs(sweep, jobs[0].binary.backend, sve=True, host=False)}
    out = []
    for job in jobs:
        b = job.binary
        runs = perf_runs.get((b.kernel, b.variant), ())
        if runs and (b.compiler, b.build, job.cpu_model) == (compiler, "vla", REFERENCE_CPU):
            have = {_cell(r) for r in job.runs}
            vls = {r.vl for r in job.runs}
            job = replace(job, runs=job.runs + tuple(r for r in runs if r.vl in vls and _cell(r) not in have))
        out.append(job)
    return out
