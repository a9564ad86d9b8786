"""Every backend the harness knows, in one table. Adding one is a module implementing
`analysis.backends.Backend` and a line here (README: Add a backend).
"""
from __future__ import annotations

from analysis.backends import Backend, Ready, armie, gem5, perf, qemu
from analysis.core import toolchain
from analysis.core.config import Job, Sweep

REGISTRY: dict[str, Backend] = {b.NAME: b for b in (qemu, armie, gem5, perf)}


def readiness(sweep: Sweep) -> dict[str, Ready]:
    """Each backend the sweep uses, checked on this machine (its tools and their versions);
    raises ToolchainError naming the fix when a tool it needs is missing."""
    out = {}
    for name, backend in REGISTRY.items():
        ready = backend.preflight(sweep)
        if ready is not None:
            out[name] = ready
    return out


def jobs(sweep: Sweep, ready: dict[str, Ready]) -> list[Job]:
    """Every job of the sweep this machine runs, backend by backend."""
    return [j for name, r in ready.items() for j in REGISTRY[name].jobs(sweep, r)]


def all_jobs(sweep: Sweep) -> list[Job]:
    """Every job the sweep declares, whatever this machine has (to check raw files against
    their jobs, where no tool runs)."""
    return [j for b in REGISTRY.values() for j in b.jobs(sweep, None)]


def preflight(sweep: Sweep) -> tuple[dict[str, Ready], list[Job], dict[str, str]]:
    """Everything checked before any job runs: each backend's tools, then the compilers its
    jobs are built with. Returns the backends ready here, their jobs, and every version line
    (tool -> line: stamps and provenance)."""
    ready = readiness(sweep)
    planned = jobs(sweep, ready)
    versions = toolchain.preflight(list(dict.fromkeys(j.binary.compiler for j in planned)))
    for r in ready.values():
        versions.update(r.versions)
    return ready, planned, versions
