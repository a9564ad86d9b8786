"""The perf backend's table, results/perf.csv: each cell's statistics over its processes
(analysis.stages.collect --stats), the statuses a counter can have, and the readers of what a
process leaves (perf stat's CSV, roi_perf.c's call times), natively or in the guest (perf_guest).
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from analysis.backends import RunError

OK, UNSUPPORTED, NOT_COUNTED, UNKNOWN = "ok", "unsupported", "not_counted", "unknown_event"
TIME, BANDWIDTH = "time_per_call", "bandwidth"  # the metrics stats_rows adds to the events
SEP = ";"  # perf does not quote fields; event names may contain commas


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


def stat_command(perf: str, events: list[str], csv: str, ctl: tuple[int, int], argv: list[str]) -> list[str]:
    """One measured process, natively and in the guest: `perf stat` with its counters disabled
    until the kernel's roi_perf.o writes "enable" to the control descriptor ctl[0] (acks on
    ctl[1]), CSV to `csv`, the process `argv` (its own command, or taskset's)."""
    return [perf, "stat", "-x", SEP, "-o", csv, "--control", f"fd:{ctl[0]},{ctl[1]}", "-D", "-1",
            "-e", ",".join(events), "--", *argv]


def parse_csv(text: str) -> list[dict[str, Any]]:
    """`perf stat -x ';'` lines as dicts: value (float or None), unit, event, status, running
    percentage. Layout (shared/reference/a64fx-perf.md, observed with perf 6.1): value;unit;
    event;[variance% with -r];runtime;percent;[metric;metric unit]."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split(SEP)
        if len(f) < 3:
            continue
        rest = f[3:]
        if rest and rest[0].endswith("%"):  # the variance column of -r
            rest = rest[1:]
        value: float | None
        if f[0] == "<not supported>":
            value, status = None, UNSUPPORTED
        elif f[0] == "<not counted>":
            value, status = None, NOT_COUNTED
        else:
            try:
                value, status = float(f[0]), OK
            except ValueError:
                raise RunError(f"perf stat printed an unreadable value: {line!r}") from None
        pct = float(rest[1]) if len(rest) > 1 and rest[1] else None
        rows.append({"event": f[2], "value": value, "unit": f[1], "status": status, "running_pct": pct})
    return rows


def parse_times(text: str, cell: str, calls: int) -> list[int]:
    lines = text.split("\n")
    head = dict(ln.split() for ln in lines[:3] if len(ln.split()) == 2)
    measured = int(head.get("measured", -1))
    if measured != calls:
        raise RunError(
            f"{cell}: {measured} of {calls} calls were measured (warm-up {head.get('warmup')}); the kernel must "
            "run its call through HARNESS_ROI(reset, call) (kernels/include/harness.h) so it can be repeated")
    return [int(x) for x in lines[3:3 + measured]]
