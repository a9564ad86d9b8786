"""The perf backend's table, results/perf.csv: each cell's statistics over its processes
(analysis.stages.collect --stats), and the statuses a counter can have.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

OK, UNSUPPORTED, NOT_COUNTED, UNKNOWN = "ok", "unsupported", "not_counted", "unknown_event"
TIME, BANDWIDTH = "time_per_call", "bandwidth"  # the metrics stats_rows adds to the events


def describe(values: list[float]) -> dict[str, float]:
    """n, mean, sample standard deviation (0 for one value), min, max."""
    return {"n": len(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "min": min(values), "max": max(values)}


def traffic_bytes(traffic: dict[str, float], size: int) -> float | None:
    """Bytes one call moves as the kernel table declares them (no write-allocate), or None."""
    if not traffic:
        return None
    return (traffic["read"] + traffic["write"]) * size


def stats_rows(meta: dict[str, Any], rec: dict[str, Any]) -> list[dict[str, Any]]:
    """One cell's rows of perf.csv: each configured event (a missing counter is a status, never
    a zero), the time per call and, where the kernel table declares its traffic, the bandwidth."""
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
        if probed == UNKNOWN:
            rows.append({**row, "status": UNKNOWN, "n": 0})
            continue
        counters = [counts[event] for counts in by_event]
        bad = [c["status"] for c in counters if c["status"] != OK]
        if bad:
            rows.append({**row, "status": bad[0], "unit": counters[0]["unit"], "n": 0})
            continue
        pct = [c["running_pct"] for c in counters if c["running_pct"] is not None]
        rows.append({**row, "status": OK, "unit": counters[0]["unit"],
                     "running_pct": min(pct) if pct else math.nan,
                     **describe([c["value"] / calls for c in counters])})
    per_proc_ns = [statistics.fmean(p["times_ns"]) for p in procs]
    rows.append({**key, "metric": TIME, "status": OK, "unit": "ns", "running_pct": math.nan, **describe(per_proc_ns)})
    moved = traffic_bytes(meta.get("traffic") or {}, rec["size"])
    if moved is not None:
        rows.append({**key, "metric": BANDWIDTH, "status": OK, "unit": "GB/s", "running_pct": math.nan,
                     **describe([moved / ns for ns in per_proc_ns])})  # bytes per ns = GB/s
    return rows
