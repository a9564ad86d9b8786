"""Plot/check stage: the paper's figures from the tidy table, and results/summary.md.

Figures show a metric, `roi_net.total` (ROI count at size n minus at size 0) by default or
gem5's ROI cycles/IPC, against VL on a log2 axis, one line per variant (VLA build; VLS
builds as open markers on the same colour), plus a ratio figure (baseline / variant). The
summary evaluates each mechanical claim of the paper declared under `checks:` in the sweep
configuration, and compares gem5's ROI instructions with QEMU's where both ran.

With `--stats perf.csv` it draws the perf table instead: time per call and bandwidth against
message size (paper Fig. 11, 12) and results/perf_summary.md (machine, settings, every cell's
statistics, the paper's claims at the measured VLs).

The work is done beside it: figures (drawing), checks (evaluation), summary (the reports);
this module is the rule's command line.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from analysis.backends.registry import REGISTRY
from analysis.core import config, mpi, table
from analysis.stages import explain
from analysis.stages.checks import claim, perf_claims
from analysis.stages.figures import draw_counts, plot_by_size
from analysis.stages.plotplan import discussed_cells
from analysis.stages.series import by_category
from analysis.stages.summary import ratio_tables, stats_summary, write_summary


def main_stats(ns: argparse.Namespace) -> int:
    try:
        sweep = config.load_from_args(ns)
        df = table.read_stats(ns.stats)
        metas = [json.loads(f.read_text())["meta"] for f in ns.raw]
        cpu = next((m["cpu"] for m in metas if m["build"] == "host"), "host")
        # SVE runs made in the emulated AArch64 guest say so (their caveat): instruction counts only.
        guest = next((m["caveat"] for m in metas if m.get("caveat")), None)
        if sweep.perf is None:
            raise config.ConfigError(f"{ns.sweep}: no perf section")
        for fig in sweep.perf.figures:
            plot_by_size(df, sweep.table, fig, sweep.results_dir / "figures" / f"{fig.name}.png", cpu, guest)
        # Each backend's own lines (perf in the guest against the counts: --counts, where the sweep counts).
        counts = table.read_counts(ns.counts) if ns.counts else None
        reports = [ln for b in dict.fromkeys(m["backend"] for m in metas)
                   for ln in REGISTRY[b].stats_report(df, metas, counts, sweep)]
        ns.summary.write_text(stats_summary(df, metas, ns.message, perf_claims(df, sweep.perf, sweep.table, guest, metas),
                                            reports))
    except (config.ConfigError, OSError, KeyError, table.TableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def estimate_name(fig: config.PerfFigure, backend: str) -> str:
    """The file stem of a perf figure drawn from a backend's estimate: apart from perf's own."""
    return f"{fig.name}_{backend}_estimate"


def draw_estimates(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> None:
    """Each perf figure of the sweep again from each backend's estimate of perf's times (SimEng's
    A64FX core: Fig. 11, 12 without the hardware), labelled as the model's, in files of their own."""
    if sweep.perf is None:
        return
    for name, backend in REGISTRY.items():
        est = backend.estimates(counts, prov, sweep.table)
        if est is None:
            continue
        for fig in sweep.perf.figures:
            plot_by_size(pd.DataFrame(est.rows), sweep.table, fig,
                         sweep.results_dir / "figures" / f"{estimate_name(fig, name)}.png", "-", model=est.label)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    p.add_argument("--counts", type=Path)
    p.add_argument("--provenance", type=Path)
    p.add_argument("--summary", required=True, type=Path)
    p.add_argument("--stats", type=Path, help="draw the perf table (perf.csv) instead")
    p.add_argument("--message", action="append", default=[], help="a skip line to repeat in the perf summary")
    p.add_argument("raw", nargs="*", type=Path, help="with --stats: the perf raw files (machine, settings)")
    ns = p.parse_args(argv)
    if ns.stats:
        return main_stats(ns)
    if not (ns.counts and ns.provenance):
        p.error("--counts and --provenance are required (or --stats)")
    try:
        sweep = mpi.without_unbuilt(config.load_from_args(ns))  # as the workflow ran it
        counts = by_category(table.read_counts(ns.counts))
        prov = table.read_provenance(ns.provenance)
        draw_counts(counts, prov, sweep, sweep.results_dir / "figures", ns.counts)
        draw_estimates(counts, prov, sweep)
        ran = set(counts["backend"])
        claims = [claim(c, counts, prov, sweep, ran) for c in sweep.checks]
        explain.write_cells(sweep, counts, prov, discussed_cells(sweep), ns.summary.parent / "explain")
        reports = [ln for b in REGISTRY.values() for ln in b.report(counts, prov)]
        write_summary(claims, counts, ns.summary, sweep, reports)
        extra = ratio_tables(counts, prov, sweep)
        if extra:
            with ns.summary.open("a") as out:
                out.write("\n".join(extra) + "\n")
    except (config.ConfigError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
