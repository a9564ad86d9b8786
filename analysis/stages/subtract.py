"""Subtract stage: baseline subtraction, done once, where the measurements are made.

`roi_net.X = roi.X(n) - roi.X(0)` is the primary metric; `whole_net.X = whole.X(n) - whole.X(0)`
is the paper's Eq. 1 taken literally (whole program, so it includes copying the prepared inputs and verifying).
A counter that a run did not report (an opcode that never executed) counts as 0.
Linearity: with sizes 0, n and 2n, `roi_net.linearity_ppm` is
|(R(2n) - R(n)) - (R(n) - R(0))| / (R(n) - R(0)) in parts per million of the ROI total, and
`roi_net.nonlinear` is 1 above 1 % (10000 ppm).
"""
from __future__ import annotations

import pandas as pd

CELL = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl"]
NONLINEAR_PPM = 10_000
NET_PREFIX = {"roi.": "roi_net.", "whole.": "whole_net."}


def net_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """Net metrics for every measured size > 0 whose cell also ran at size 0."""
    raw = raw[raw["metric"].str.startswith(tuple(NET_PREFIX))]
    wide = raw.pivot_table(index=CELL + ["metric"], columns="size", values="value", aggfunc="first", fill_value=0)
    ran = raw[raw["metric"] == "roi.total"].groupby(CELL)["size"].apply(set).to_dict()
    if 0 not in wide.columns:
        raise ValueError("no baseline run (size 0) in the raw counts: cannot subtract")
    frames = []
    for size in [s for s in wide.columns if s > 0]:
        net = (wide[size] - wide[0]).rename("value").reset_index()
        net["size"] = size
        frames.append(net)
    if not frames:
        return raw.iloc[0:0]
    out = pd.concat(frames, ignore_index=True)
    keep = [size in ran.get(tuple(r), set()) and 0 in ran.get(tuple(r), set())
            for r, size in zip(out[CELL].itertuples(index=False), out["size"])]
    out = out[keep]
    for old, new in NET_PREFIX.items():
        hit = out["metric"].str.startswith(old)
        out.loc[hit, "metric"] = new + out.loc[hit, "metric"].str[len(old):]
    return out


def linearity_rows(raw: pd.DataFrame) -> pd.DataFrame:
    roi = raw[raw["metric"] == "roi.total"].set_index(CELL + ["size"])["value"]
    rows = []
    for cell, sizes in roi.groupby(level=CELL):
        by_size = {k[-1]: v for k, v in sizes.items()}
        for n in by_size:
            if n > 0 and 2 * n in by_size and 0 in by_size:
                first = by_size[n] - by_size[0]
                second = by_size[2 * n] - by_size[n]
                ppm = round(abs(second - first) * 1_000_000 / first) if first else 1_000_000
                base = dict(zip(CELL, cell), size=n)
                rows.append({**base, "metric": "roi_net.linearity_ppm", "value": ppm})
                rows.append({**base, "metric": "roi_net.nonlinear", "value": int(ppm > NONLINEAR_PPM)})
    return pd.DataFrame(rows)


def subtract(raw: pd.DataFrame) -> pd.DataFrame:
    """Raw rows plus their net and linearity rows, one tidy table."""
    parts = [raw, net_rows(raw), linearity_rows(raw)]
    return pd.concat([p for p in parts if len(p)], ignore_index=True)
