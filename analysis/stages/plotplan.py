"""What the plot stage writes, known from the sweep alone: its figures and the cells it explains.

The workflow lists these outputs at every start, so the rule files need only the sweep here, not
the data libraries: analysis.stages.plot and analysis.stages.explain read the tables and draw.
(Snakemake itself imports pandas when pandas is installed, to hash rule params, so this saves no
time on a no-op re-run; measured.)
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from analysis.backends.registry import REGISTRY
from analysis.core import config


@dataclass(frozen=True)
class Cell:
    """One cell of counts.csv: a row of results/summary.md's discussion, or what `explain` prints."""
    kernel: str
    variant: str
    op: str
    dtype: str
    build: str
    cpu_model: str
    backend: str
    compiler: str
    vl: int
    size: int

    @property
    def slug(self) -> str:
        op = "" if self.op == config.NO_OP else f"-{self.op}"
        return f"{self.kernel}-{self.variant}{op}-{self.dtype}-{self.build}-{self.cpu_model}-{self.compiler}-{self.backend}-vl{self.vl}-{self.size}"


def figures(sweep: config.Sweep, ran: Collection[str]) -> list[config.CountFigure]:
    """The configured figures; those of a backend that may not run (Backend.NOT_RUN: gem5's cycle
    figures) only when it ran (`ran`: the backends that did, or whose jobs are planned)."""
    return [f for f in sweep.figures if f.backend in ran or REGISTRY[f.backend].NOT_RUN is None]


def discussed_cells(sweep: config.Sweep) -> list[Cell]:
    """The cells results/summary.md discusses: the series of each check and of its conditions
    at the smallest and the largest VL of the VLA build (first CPU model and backend of the
    sweep; the check's compiler)."""
    cells: list[Cell] = []
    if not sweep.backends:  # a perf-only sweep counts nothing
        return cells
    for chk in [c for chk in sweep.checks for c in [chk, *(x.check for x in chk.conditions)]]:
        for sel in chk.selectors().values():
            if sel.variant is None:
                continue
            pairs = sweep.selection_of(sel.kernel).op_dtypes
            op, dtype = next(((o, d) for o, d in pairs if sel.op in (None, o) and sel.dtype in (None, d)), pairs[0])
            family = sweep.table.row(sel.kernel, sel.variant).family
            for vl in (min(sweep.vector_lengths), max(sweep.vector_lengths)):
                cell = Cell(sel.kernel, sel.variant, op, dtype, "vla", next(iter(sweep.cpu_models)),
                            sweep.backends[0], chk.compiler, vl, sweep.sizes[family][0])
                if cell not in cells:
                    cells.append(cell)
    return cells
