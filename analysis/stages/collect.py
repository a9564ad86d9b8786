"""Collect stage entry point: raw files -> one tidy table.

- count backends: results/counts.csv (baseline subtracted) + provenance.csv;
- `--stats`: the raw process records of a backend whose TABLE is perf.csv -> results/perf.csv,
  statistics over processes per cell (its stats_rows: analysis.backends.perf.stats_rows).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.backends.registry import REGISTRY, all_jobs
from analysis.core import config, files, table
from analysis.stages import parse, rawcheck, subtract


def provenance_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    meta = doc["meta"]
    versions = meta["versions"]
    rows = []
    for run in doc["runs"]:
        rows.append({
            "kernel": meta["kernel"], "variant": meta["variant"], "op": run["op"], "dtype": run["dtype"],
            "layout": meta["layout"], "build": config.parse_build(meta["build"]).column, "cpu_model": meta["cpu_model"],
            "backend": meta["backend"], "compiler": meta["compiler"], "vl": run["vl"], "size": run["size"],
            "vl_seen": run["vl_seen"], "roi_symbol": parse.roi_symbol(run), "checksum": run["checksum"],
            "binary": meta["binary"], "binary_sha256": meta["binary_sha256"],
            "compiler_version": versions.get(f"compiler.{meta['compiler']}", ""),
            # The static libc's package version: its memcpy runs inside copying ROIs.
            "libc_version": versions.get(f"libc.{meta['compiler']}", ""),
            # An MPI row also ran the dynamically linked arm64 Open MPI: its version is part of what ran.
            "backend_version": "; ".join(v for v in (versions.get(meta["backend"], ""), versions.get("mpi", "")) if v),
            "build_commands": " && ".join(meta["build_commands"]),
            "run_command": run.get("command_line") or " ".join(run["command"]), "host": versions.get("host", ""),
            "seconds": run["seconds"],
            # Whose data the row is, from where its job ran (the verdict tables name it).
            "evidence": REGISTRY[meta["backend"]].evidence(meta),
            # A cell its backend could not run (SimEng's: an instruction it lacks) is kept, with why.
            "not_run": run.get("not_run", ""),
        })
    return rows


def stats(raw_files: list[Path]) -> pd.DataFrame:
    rows = []
    for f in raw_files:
        doc = json.loads(Path(f).read_text())
        for rec in doc["runs"]:
            rows += REGISTRY[doc["meta"]["backend"]].stats_rows(doc["meta"], rec)
    return pd.DataFrame(rows, columns=[c for c in table.STATS_COLUMNS if c != "schema_version"])


def main_stats(out: Path, raw: list[Path]) -> int:
    try:
        table.write_stats(stats(raw), out)
    except (OSError, KeyError, ValueError, table.TableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    p.add_argument("--counts", type=Path)
    p.add_argument("--provenance", type=Path)
    p.add_argument("--stats", type=Path, help="write perf.csv from perf raw files instead")
    p.add_argument("raw", nargs="*", type=Path)
    ns = p.parse_args(argv)
    if ns.stats:
        return main_stats(ns.stats, ns.raw)
    if not (ns.counts and ns.provenance and ns.raw):
        p.error("--counts, --provenance and raw files are required (or --stats)")
    try:
        sweep = config.load_from_args(ns)
        docs = rawcheck.load_checked(ns.raw, all_jobs(sweep))
        mnemonics = parse.decode_mnemonics(docs)
        raw = pd.DataFrame([row for d in docs for row in parse.job_rows(d, mnemonics)])
        counts = subtract.subtract(raw, sweep.measured_sizes())
        prov = pd.DataFrame([row for d in docs for row in provenance_rows(d)])
        table.write_provenance(prov, ns.provenance)
        table.write_counts(counts, ns.counts)
    except (rawcheck.RawError, config.ConfigError, table.TableError, files.WriteError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"collect: {len(counts)} rows from {len(docs)} jobs -> {ns.counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
