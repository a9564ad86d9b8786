"""Subtract stage: baseline subtraction, done once, where the measurements are made.

`roi_net.X = roi.X(n) - roi.X(0)` is the primary metric; `whole_net.X = whole.X(n) - whole.X(0)`
is the paper's Eq. 1 taken literally (whole program, so it includes copying the prepared inputs and verifying).
A counter that a run did not report (an opcode that never executed) counts as 0.
Linearity: with sizes 0, n and 2n, `roi_net.linearity_ppm` is
|(R(2n) - R(n)) - (R(n) - R(0))| / (R(n) - R(0)) in parts per million of the ROI total, and
`roi_net.nonlinear` is 1 above 1 % (10000 ppm), for the sweep's own sizes n: a cell counted at
more sizes (perf's: analysis.core.perf_cells) may hold an n and 2n the sweep never asked to compare.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping

import pandas as pd

CELL = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl"]
NONLINEAR_PPM = 10_000
NET_PREFIX = {"roi.": "roi_net.", "whole.": "whole_net."}


def net_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """Net metrics for every measured size > 0 whose cell also ran at size 0."""
    raw = raw[raw["metric"].str.startswith(tuple(NET_PREFIX))]
    if raw.empty:  # a backend that counts no instructions (gem5 alone, a user's): nothing to subtract
        return raw
    wide = raw.pivot_table(index=CELL + ["metric"], columns="size", values="value", aggfunc="first", fill_value=0)
    if 0 not in wide.columns:
        raise ValueError("no baseline run (size 0) in the raw counts: cannot subtract")
    frames = []
    for size in [s for s in wide.columns if s > 0]:
        net = (wide[size] - wide[0]).rename("value").reset_index()
        net["size"] = size
        frames.append(net)
    if not frames:
        return raw.iloc[0:0]
    # Only (cell, size) pairs that ran, in cells that also ran at size 0: the pivot filled the rest with 0.
    ran = raw.loc[raw["metric"] == "roi.total", CELL + ["size"]].drop_duplicates()
    baseline = ran.loc[ran["size"] == 0, CELL]
    out = pd.concat(frames, ignore_index=True).merge(ran[ran["size"] > 0].merge(baseline, on=CELL), on=CELL + ["size"])
    for old, new in NET_PREFIX.items():
        hit = out["metric"].str.startswith(old)
        out.loc[hit, "metric"] = new + out.loc[hit, "metric"].str[len(old):]
    return out


# The sizes whose linearity is checked, per (kernel, variant) (Sweep.measured_sizes); None: every
# size n that ran with 0 and 2n.
Sizes = Mapping[tuple[str, str], Collection[int]] | None


def linearity_rows(raw: pd.DataFrame, sizes: Sizes = None) -> pd.DataFrame:
    roi = raw[raw["metric"] == "roi.total"].pivot_table(index=CELL, columns="size", values="value", aggfunc="first")
    frames = []
    for n in [s for s in roi.columns if s > 0 and 2 * s in roi.columns and 0 in roi.columns]:
        cells = roi[[0, n, 2 * n]].dropna().astype("int64")
        if sizes is not None:
            rows = zip(cells.index.get_level_values("kernel"), cells.index.get_level_values("variant"))
            cells = cells[[n in sizes.get(row, ()) for row in rows]]
            if cells.empty:  # n is only perf's
                continue
        first = cells[n] - cells[0]
        second = cells[2 * n] - cells[n]
        # A Python int's true division, element by element: the same float, rounded half to even.
        ppm = ((second - first).abs() * 1_000_000 / first.where(first != 0)).round().fillna(1_000_000).astype("int64")
        for metric, value in (("roi_net.linearity_ppm", ppm), ("roi_net.nonlinear", (ppm > NONLINEAR_PPM).astype("int64"))):
            frames.append(value.rename("value").reset_index().assign(size=n, metric=metric))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def subtract(raw: pd.DataFrame, sizes: Sizes = None) -> pd.DataFrame:
    """Raw rows plus their net and linearity rows (at `sizes`), one tidy table."""
    parts = [raw, net_rows(raw), linearity_rows(raw, sizes)]
    return pd.concat([p for p in parts if len(p)], ignore_index=True)
