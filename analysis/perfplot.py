"""Plot stage of the perf backend: the paper's Fig. 11 (time per call vs message size, one
panel per VL) and Fig. 12 (bandwidth vs size at one VL) from results/perf.csv, and
results/perf_summary.md (machine, settings, every cell's statistics, unsupported events).

Host baselines (build host, VL 0: the host's own ISA) are drawn in every panel, dashed.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import config, perftable  # noqa: E402
from analysis.backends import perf as P  # noqa: E402

YLABEL = {"time": "time per call (us), mean and std over processes", "bandwidth": "bandwidth (GB/s), (read + write) / time"}


def _match(df: pd.DataFrame, sel: dict[str, Any]) -> pd.DataFrame:
    d = df[df["kernel"] == sel["kernel"]]
    for k in ("variant", "op", "dtype"):
        if k in sel:
            d = d[d[k] == sel[k]]
    return d


def lines(df: pd.DataFrame, table: config.KernelTable, fig: dict[str, Any], vl: int) -> list[tuple[str, bool, pd.DataFrame]]:
    """(label, is_host, rows by size) for one panel: the series at `vl`, then host baselines."""
    metric = perftable.TIME if fig["kind"] == "time" else perftable.BANDWIDTH
    d = df[(df["metric"] == metric) & (df["status"] == P.OK)]
    out = []
    for sel in fig["series"]:
        m = _match(d, sel)
        for (variant, build, op, dtype), g in m.groupby(["variant", "build", "op", "dtype"], sort=False):
            g = g[g["vl"] == (vl if build == "vla" else 0)].sort_values("size")
            if g.empty:
                continue
            # No ROI symbol is recorded for native runs: drop the placeholder.
            label = f"{sel['kernel']} {variant}: {table.row(sel['kernel'], variant).label.replace(' ({roi_symbol})', '')}"
            if op != config.NO_OP:
                label += f" [{op} {dtype}]"
            out.append((("host ISA, " if build == "host" else "") + label, build == "host", g))
    return sorted(out, key=lambda line: line[1])  # SVE lines first, host baselines after


def plot(df: pd.DataFrame, table: config.KernelTable, fig: dict[str, Any], out: Path, cpu: str) -> None:
    vls = sorted(v for v in df["vl"].unique() if v > 0)
    if "vl" in fig:
        vls = [fig["vl"]] if fig["vl"] in vls else []
    panels = vls or [0]  # host baselines only: one panel
    f, axes = plt.subplots(1, len(panels), figsize=(max(8, 5 * len(panels)), 5), squeeze=False, sharey=True)
    scale = 1e-3 if fig["kind"] == "time" else 1.0
    for ax, vl in zip(axes[0], panels):
        for label, host, g in lines(df, table, fig, vl):
            ax.errorbar(g["size"], g["mean"] * scale, yerr=g["std"] * scale, marker="o", ms=3, capsize=2,
                        ls="--" if host else "-", lw=1 if host else 1.8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        if fig["kind"] == "time":
            ax.set_yscale("log")
        ax.set_title(f"VL {vl} bits" if vl else f"host ISA ({cpu})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(YLABEL[fig["kind"]])
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    f.suptitle(textwrap.fill(fig["title"], 100), fontsize=10)
    f.legend(handles, labels, fontsize=7, loc="lower center", ncol=1, frameon=False)
    f.tight_layout(rect=(0, 0.06 + 0.035 * len(labels), 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    f.savefig(out, dpi=120)
    plt.close(f)


def check_rows(df: pd.DataFrame, checks: list[dict[str, Any]], sizes: dict[str, list[int]], table: config.KernelTable) -> list[str]:
    """One Markdown row per (claim, VL): our ratio beside the paper's, or why there is none."""
    out = []
    sve_vls = sorted(v for v in df["vl"].unique() if v > 0)
    for chk in checks:
        metric = chk.get("metric", perftable.TIME)
        size = chk.get("size", max(sizes[table.selector_family(chk["numerator"]).name]))
        vls = chk.get("vector_lengths", sve_vls)
        if not sve_vls:
            out.append(f"| {chk['figure']} | {chk['claim']} | - | not measured: no SVE runs on this machine | {chk['target']} | - |")
            continue
        for vl in vls:
            def mean(sel: dict[str, Any]) -> float | None:
                d = _match(df, sel)
                d = d[(d["metric"] == metric) & (d["vl"] == vl) & (d["size"] == size) & (d["status"] == P.OK)]
                return float(d["mean"].iloc[0]) if len(d) == 1 else None

            num, den = mean(chk["numerator"]), mean(chk["denominator"])
            if num is None or not den:
                out.append(f"| {chk['figure']} | {chk['claim']} | {vl} | no data at size {size} | {chk['target']} | - |")
                continue
            ratio = num / den
            ok = abs(ratio / chk["target"] - 1) <= chk["tolerance"]
            out.append(f"| {chk['figure']} | {chk['claim']} | {vl} | {ratio:.3g} ({metric}, {size} B) | {chk['target']} | {'pass' if ok else 'FAIL'} |")
    return out


def summary(df: pd.DataFrame, metas: list[dict[str, Any]], messages: list[str], checks: list[str] | None = None) -> str:
    lines_ = ["# perf measurements (native runs)", ""]
    lines_ += [f"- {m}" for m in messages]
    for meta in {(m["build"], m["cpu"]): m for m in metas}.values():
        lines_.append(f"- build {meta['build']}: {meta['cpu']}; {meta['versions']['perf']}; "
                      f"{meta['versions']['compiler.native']}; {meta['processes']} processes x {meta['calls']} calls "
                      f"(+{meta['warmup']} warm-up), pinned to CPU {meta['core']}")
    if metas:
        probe = metas[0]["events"]
        bad = {e: s for e, s in probe.items() if s != P.OK}
        lines_.append("- events: " + ", ".join(f"{e} ({s})" if e in bad else e for e, s in probe.items()))
    if checks:
        lines_ += ["", "## The paper's claims (A64FX)", "", "| Fig. | claim | VL | ours | paper | verdict |", "|---|---|---:|---|---:|---|", *checks]
    lines_ += ["", "## Every cell", "", "Statistics are over processes; each process contributes its value per call.", "",
               "| kernel | variant | op/dtype | build | VL | size | metric | mean | std | min | max | unit |",
               "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    # Events without a value are listed once above; the table keeps the measured rows.
    for _, r in df[df["status"] == P.OK].iterrows():
        stats = [f"{r[k]:.4g}" for k in ("mean", "std", "min", "max")]
        opd = "" if r["op"] == config.NO_OP else f"{r['op']}/{r['dtype']}"
        lines_.append(f"| {r['kernel']} | {r['variant']} | {opd} | {r['build']} | {r['vl']} | {r['size']} | "
                      f"{r['metric']} | " + " | ".join(stats) + f" | {r['unit']} |")
    return "\n".join(lines_) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--summary", type=Path, required=True)
    p.add_argument("--message", action="append", default=[], help="a skip line to repeat in the summary")
    p.add_argument("raw", nargs="*", type=Path)
    ns = p.parse_args(argv)
    try:
        sweep = config.load_from_args(ns)
        df = perftable.read(ns.table)
        metas = [json.loads(f.read_text())["meta"] for f in ns.raw]
        cpu = next((m["cpu"] for m in metas if m["build"] == "host"), "host")
        perf = sweep.perf
        if perf is None:
            raise config.ConfigError(f"{ns.sweep}: no perf section")
        for fig in perf.figures:
            plot(df, sweep.table, fig, sweep.results_dir / "figures" / f"{fig['name']}.png", cpu)
        checks = check_rows(df, perf.checks, {k: list(v) for k, v in perf.sizes.items()}, sweep.table)
        ns.summary.write_text(summary(df, metas, ns.message, checks))
    except (config.ConfigError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
