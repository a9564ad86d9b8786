"""Statistics stage of the perf backend: raw process records -> results/perf.csv.

One row per (cell, metric) with n, mean, std, min, max over the cell's processes, where
each process contributes its value per call (its total over the measured calls / calls):
- every configured event (status ok, or unsupported / not_counted / unknown_event with
  empty statistics: a missing counter is never a zero);
- time_per_call (ns): the mean of the process's per-call wall times;
- bandwidth (GB/s): (read + write bytes declared in the kernel table) / time per call.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import table
from analysis.backends import perf as P

KEY = list(table.KEY)  # the count table's key: kernel ... vl, size, metric
COLUMNS = KEY + ["status", "unit", "n", "mean", "std", "min", "max", "running_pct", "schema_version"]
TIME, BANDWIDTH = "time_per_call", "bandwidth"


def describe(values: list[float]) -> dict[str, float]:
    """n, mean, sample standard deviation (0 for one value), min, max."""
    return {"n": len(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "min": min(values), "max": max(values)}


def traffic_bytes(traffic: dict[str, float], size: int) -> float | None:
    """Bytes one call moves as the kernel table declares them (no write-allocate), or None."""
    if not traffic:
        return None
    return (traffic["read"] + traffic["write"]) * size


def cell_rows(meta: dict[str, Any], rec: dict[str, Any]) -> list[dict[str, Any]]:
    calls = meta["calls"]
    procs = rec["processes"]
    key = {"kernel": meta["kernel"], "variant": meta["variant"], "op": rec["op"], "dtype": rec["dtype"],
           "layout": meta["layout"], "build": meta["build"], "cpu_model": meta["cpu_model"], "backend": "perf",
           "compiler": meta["compiler"], "vl": rec["vl"], "size": rec["size"]}
    rows = []
    # Each process's counters by event (the backend names them as configured).
    by_event = [{c["event"]: c for c in p["counters"]} for p in procs]
    for event, probed in meta["events"].items():
        row = {**key, "metric": event, "unit": "", "running_pct": math.nan}
        if probed == P.UNKNOWN:
            rows.append({**row, "status": P.UNKNOWN, "n": 0})
            continue
        counters = [counts[event] for counts in by_event]
        bad = [c["status"] for c in counters if c["status"] != P.OK]
        if bad:
            rows.append({**row, "status": bad[0], "unit": counters[0]["unit"], "n": 0})
            continue
        pct = [c["running_pct"] for c in counters if c["running_pct"] is not None]
        rows.append({**row, "status": P.OK, "unit": counters[0]["unit"],
                     "running_pct": min(pct) if pct else math.nan,
                     **describe([c["value"] / calls for c in counters])})
    per_proc_ns = [statistics.fmean(p["times_ns"]) for p in procs]
    rows.append({**key, "metric": TIME, "status": P.OK, "unit": "ns", "running_pct": math.nan, **describe(per_proc_ns)})
    moved = traffic_bytes(meta.get("traffic") or {}, rec["size"])
    if moved is not None:
        rows.append({**key, "metric": BANDWIDTH, "status": P.OK, "unit": "GB/s", "running_pct": math.nan,
                     **describe([moved / ns for ns in per_proc_ns])})  # bytes per ns = GB/s
    return rows


def collect(raw_files: list[Path]) -> pd.DataFrame:
    rows = []
    for f in raw_files:
        doc = json.loads(Path(f).read_text())
        for rec in doc["runs"]:
            rows += cell_rows(doc["meta"], rec)
    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "schema_version"])
    return df.assign(schema_version=table.SCHEMA_VERSION)


def write(df: pd.DataFrame, path: Path) -> None:
    df = df[COLUMNS].sort_values(KEY, kind="stable").reset_index(drop=True)
    table.check_unique(df, KEY, str(path))
    table.write_csv(df, path)


def read(path: Path) -> pd.DataFrame:
    df = table.read_counts(path)  # op "-" and dtype names stay strings
    for col in ("n", "mean", "std", "min", "max", "running_pct"):
        df[col] = pd.to_numeric(df[col], errors="coerce")  # empty: no statistics (unsupported)
    return df


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("raw", nargs="*", type=Path)
    ns = p.parse_args(argv)
    try:
        write(collect(ns.raw), ns.out)
    except (OSError, KeyError, ValueError, table.TableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
