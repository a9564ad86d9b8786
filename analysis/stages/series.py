"""The counts a figure or a check reads: the rows of the tidy table a selector names on the
figure's or check's line (metric, backend, CPU model, compiler), as series by VL."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from analysis.core import config


class Reads(Protocol):
    """Which rows a figure or a check reads (config.CountFigure and config.Check have these)."""
    @property
    def metric(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def cpu_model(self) -> str | None: ...
    @property
    def compiler(self) -> str: ...


@dataclass
class Series:
    kernel: str
    variant: str
    op: str
    dtype: str
    label: str
    role: str
    size: int
    compiler: str
    vla: pd.Series  # VL -> count
    vls: pd.Series

    def per_vector(self, vl: int) -> float:
        """Instructions per VL-sized chunk of the measured data: the loop cost the ratio comes from."""
        return float(self.vla[vl]) / (self.size / (vl // 8))


# The key columns the summary filters on, held as categories: comparing a category with a value
# compares integer codes, where comparing strings took a quarter of the stage's time.
CATEGORY_COLUMNS = ("kernel", "variant", "op", "dtype", "compiler", "build", "backend", "cpu_model", "metric")


def by_category(counts: pd.DataFrame) -> pd.DataFrame:
    return counts.astype({c: "category" for c in CATEGORY_COLUMNS if c in counts})


def rows(df: pd.DataFrame, **equal: Any) -> pd.DataFrame:
    """The rows whose columns hold these values, in the table's order. One column at a time, each
    compared on the rows the one before kept: the summary filters the whole table (270,000 rows
    in a default sweep) hundreds of times, and comparing every column on every row was most of
    the plot stage's 16 CPU seconds."""
    for column, value in equal.items():
        df = df[df[column] == value]
    return df


def select(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, sel: config.Selector,
           line: Reads) -> list[Series]:
    """Expand a selector (variant optional) into series of the figure's or check's metric at the
    family's first size."""
    kernel = sel.kernel
    variants = [sel.variant] if sel.variant is not None else sweep.table.variants(kernel)
    df = rows(counts, kernel=kernel, metric=line.metric, cpu_model=line.cpu_model, compiler=line.compiler,
              backend=line.backend)
    if sel.op is not None:
        df = df[df["op"] == sel.op]
    if sel.dtype is not None:
        df = df[df["dtype"] == sel.dtype]
    out = []
    for v in variants:
        row = sweep.table.row(kernel, v)
        d = df[df["variant"] == v]
        if d.empty:
            continue
        size = sweep.sizes[row.family][0]
        d = d[d["size"] == size]
        for (op, dtype), g in d.groupby(["op", "dtype"]):
            label = row.label
            if "{roi_symbol}" in label:
                p = rows(prov, kernel=kernel, variant=v, size=size)
                # "?" is a backend that cannot name the function (gem5): the counting backends can.
                label = label.replace("{roi_symbol}", "/".join(sorted(set(p["roi_symbol"]) - {"?"})) or "?")
            # A selector that leaves the op or the dtype open draws several lines of one
            # variant: each names its pair, or their legend labels are the same.
            if op != config.NO_OP and (sel.op is None or sel.dtype is None):
                label += f" [{op} {dtype}]"
            out.append(Series(
                kernel, v, op, dtype, label, row.role, size, line.compiler,
                g[g["build"] == "vla"].set_index("vl")["value"].sort_index(),
                g[g["build"] == "vls"].set_index("vl")["value"].sort_index(),
            ))
    return out


def match_stats(df: pd.DataFrame, sel: config.Selector) -> pd.DataFrame:
    """The rows of the perf table a selector names (any variant, op, dtype it leaves open)."""
    d = df[df["kernel"] == sel.kernel]
    for column, value in (("variant", sel.variant), ("op", sel.op), ("dtype", sel.dtype)):
        if value is not None:
            d = d[d[column] == value]
    return d
