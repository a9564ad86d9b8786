"""One execution of a kernel binary (`Run`): what a job's plan lists and its backend runs.

A module of its own, without the sweep's configuration: a count job reads its runs from its
plan (analysis.backends.Plan) and must not pay for yaml, the schemas and the kernel table at
each of a sweep's ~200 starts. `analysis.core.config` re-exports it (`config.Run`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """One execution of a binary: the runner formats these into the fixed-width argv."""
    vl: int
    size: int
    op: str
    dtype: str
    params: tuple[tuple[str, Any], ...]
    sve: bool = True  # False: the CPU has no SVE; the binary is told VL 0 (the table keeps `vl`)

    def argv(self) -> list[str]:
        return [f"{self.vl if self.sve else 0:04d}", f"{self.size:012d}"] + [f"{k}={v}" for k, v in self.params]
