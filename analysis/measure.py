"""Measure stage entry point: one native perf job (a kernel row, one native build) at every
VL and size of the sweep's perf section, `processes` processes per cell.

Called by the measure rule; writes one raw JSON file with every process's counters and
per-call times, or fails with one line naming the cell (no partial output).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, TextIO

from analysis import build, config, toolchain
from analysis.backends import RunError, cell_name
from analysis.backends import perf as P


def measure_job(sweep: config.Sweep, job: config.Job, binary: Path, out: Path, log: TextIO = sys.stderr) -> None:
    status = P.detect(sweep)
    if status is None or status.perf is None or not (status.sve if job.binary.build == "vla" else status.host):
        reason = "; ".join(status.messages) if status else "the sweep has no perf section"
        raise toolchain.ToolchainError(f"cannot measure {job.binary.name} ({job.binary.build}) here: {reason}")
    p = sweep.raw["perf"]
    row = sweep.table.row(job.binary.kernel, job.binary.variant)
    probe = P.probe_events(status.perf, list(p["events"]))
    accepted = [ev for ev, st in probe.items() if st != P.UNKNOWN]
    if not accepted:
        raise RunError(f"perf accepts none of the events {list(p['events'])} here")
    s = P.settings_for(sweep, row.family, status.perf, accepted)
    processes = int(p.get("processes", 30))
    records = []
    for i, run in enumerate(job.runs, 1):
        procs = []
        for _ in range(processes):
            rec = P.run_process(binary, run, s)
            if rec["vl_seen"] != run.vl:
                raise RunError(f"{cell_name(binary, 'native', run)}: ran at VL {rec['vl_seen']} bits, not the {run.vl} asked for")
            procs.append(rec)
        mean_ns = statistics.mean(t for r in procs for t in r["times_ns"])
        print(f"[{i}/{len(job.runs)}] {cell_name(binary, 'native', run)}: {processes} processes x {s.calls} calls, "
              f"{mean_ns / 1000:.1f} us/call", file=log, flush=True)
        records.append({"vl": run.vl, "size": run.size, "op": run.op, "dtype": run.dtype, "argv": run.argv(),
                        "checksum": procs[0]["checksum"], "command": procs[0]["command"],
                        "processes": [{k: r[k] for k in ("counters", "times_ns", "seconds")} for r in procs]})
    meta: dict[str, Any] = {
        "kernel": row.kernel, "variant": row.variant, "family": row.family, "role": row.role, "label": row.label,
        "layout": config.layout_of(sweep.table, row), "compiler": "native", "build": job.binary.build,
        "backend": "perf", "cpu_model": "native", "cpu": P.host_cpu(), "traffic": sweep.table.families[row.family].traffic,
        "binary": str(binary), "binary_sha256": toolchain.sha256(binary),
        "build_commands": build.binary_commands(sweep, "native", job.binary.build, "perf", row.kernel, row.variant),
        "versions": {"perf": status.version, "compiler.native": toolchain.COMPILERS["native"].version()},
        "events": probe, "calls": s.calls, "warmup": s.warmup, "flush_bytes": s.flush_bytes, "core": s.core,
        "processes": processes,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "runs": records}))
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    for key in ("build", "kernel", "variant", "out"):
        p.add_argument(f"--{key}", required=True)
    ns = p.parse_args(argv)
    try:
        sweep = config.load_from_args(ns)
        job = next(j for j in sweep.perf_jobs(sve=True, host=True)
                   if (j.binary.build, j.binary.kernel, j.binary.variant) == (ns.build, ns.kernel, ns.variant))
        binary = build.binary_path(sweep.build_dir, "native", ns.build, "perf", job.binary.name)
        measure_job(sweep, job, binary, Path(ns.out))
    except StopIteration:
        print(f"error: the sweep's perf section has no job {ns.build}/{ns.kernel}-{ns.variant}", file=sys.stderr)
        return 2
    except (config.ConfigError, toolchain.ToolchainError, RunError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
