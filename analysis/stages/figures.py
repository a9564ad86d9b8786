"""Drawing: the count figures (a metric against VL on a log2 axis, one line per variant, VLS
builds as open markers on the same colour, and a ratio figure against the baseline) and the perf
figures (time per call or bandwidth against message size, one panel per VL, paper Fig. 11, 12).
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.backends import perf
from analysis.core import config
from analysis.stages.plotplan import figures
from analysis.stages.series import Series, match_stats, select

# The y axis of a count figure that declares no ylabel.
ROI_NET_LABEL = "instructions in ROI, n minus baseline (roi_net)"
LINESTYLES = ["-", "--", ":", "-."]
SIZE_YLABEL = {"time": "time per call (us), mean and std over processes", "bandwidth": "bandwidth (GB/s), (read + write) / time"}


def _pyplot() -> Any:
    """matplotlib.pyplot on first use: the workflow imports this module to list the figures,
    and every Snakemake start (a no-op re-run too) would pay for pyplot's import."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes_vl(ax: Any, vls: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(vls)
    ax.set_xticklabels([str(v) for v in vls], rotation=90, fontsize=7)
    ax.set_xlabel("SVE vector length (bits)")
    ax.grid(True, which="both", alpha=0.3)


def plot_figure(fig_cfg: config.CountFigure, series: list[Series], out: Path, vls: list[int]) -> None:
    # Kernels of one figure (pack, unpack) can coincide exactly: one line style per kernel.
    style = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(dict.fromkeys(s.kernel for s in series))}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    scale = fig_cfg.scale
    for s in series:
        (line,) = ax.plot(s.vla.index, s.vla.values / scale, marker="o", ms=3, label=s.label, ls=style[s.kernel],
                          lw=2.2 if s.role != "extra" else 1.2)
        if len(s.vls):
            ax.plot(s.vls.index, s.vls.values / scale, ls="none", marker="s", mfc="none", color=line.get_color(), ms=7)
    ax.set_yscale("log" if scale == 1 else "linear")
    ax.set_ylabel(fig_cfg.ylabel or ROI_NET_LABEL)
    ax.set_title(fig_cfg.title, fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, title="lines: VLA build; squares: VLS build", title_fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_ratio(fig_cfg: config.CountFigure, base: Series, series: list[Series], out: Path, vls: list[int]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    for s in series:
        if s is base or (s.kernel, s.variant, s.op, s.dtype) == (base.kernel, base.variant, base.op, base.dtype):
            continue
        ratio = (base.vla / s.vla).dropna()
        ax.plot(ratio.index, ratio.values, marker="o", ms=3, label=s.label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"{fig_cfg.metric} ratio: {base.variant} / variant")
    ax.set_title(f"{fig_cfg.title}: ratio to {base.kernel} {base.variant}", fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def draw_counts(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, fig_dir: Path, source: Path) -> None:
    """Every count figure of the sweep (those of a backend that may not run, gem5's cycle
    figures, only where its rows exist) and the ratio figure of each that has a baseline."""
    vls = sorted(set(sweep.vector_lengths) | set(sweep.vls_vector_lengths))
    for f in figures(sweep, set(counts["backend"])):
        series = [s for sel in f.series for s in select(counts, prov, sweep, sel, f)]
        if not series:
            raise ValueError(f"figure {f.name}: no data for its series in {source}")
        if len({s.kernel for s in series}) > 1:
            for s in series:
                s.label = f"{s.kernel}: {s.label}"
        plot_figure(f, series, fig_dir / f"{f.name}.png", vls)
        if f.baseline is not None:
            base = select(counts, prov, sweep, f.baseline, f)
            if len(base) != 1:
                raise ValueError(f"figure {f.name}: baseline selects {len(base)} series (need one)")
            plot_ratio(f, base[0], series, fig_dir / f"{f.name}_ratio.png", vls)


# The perf table (results/perf.csv, statistics over processes): time per call or bandwidth
# against message size, one panel per VL (paper Fig. 11, 12), host baselines dashed in every panel.

def size_lines(df: pd.DataFrame, table: config.KernelTable, fig: config.PerfFigure, vl: int) -> list[tuple[str, bool, pd.DataFrame]]:
    """(label, is_host, rows by size) for one panel: the series at `vl`, then host baselines."""
    metric = perf.TIME if fig.kind == "time" else perf.BANDWIDTH
    d = df[(df["metric"] == metric) & (df["status"] == perf.OK)]
    out = []
    for sel in fig.series:
        m = match_stats(d, sel)
        for (variant, build, op, dtype), g in m.groupby(["variant", "build", "op", "dtype"], sort=False):
            g = g[g["vl"] == (vl if build == "vla" else 0)].sort_values("size")
            if g.empty:
                continue
            # No ROI symbol is recorded for native runs: drop the placeholder.
            label = f"{sel.kernel} {variant}: {table.row(sel.kernel, variant).label.replace(' ({roi_symbol})', '')}"
            if op != config.NO_OP:
                label += f" [{op} {dtype}]"
            out.append((("host ISA, " if build == "host" else "") + label, build == "host", g))
    return sorted(out, key=lambda line: line[1])  # SVE lines first, host baselines after


def plot_by_size(df: pd.DataFrame, table: config.KernelTable, fig: config.PerfFigure, out: Path, cpu: str) -> None:
    vls = sorted(v for v in df["vl"].unique() if v > 0)
    if fig.vl is not None:
        vls = [fig.vl] if fig.vl in vls else []
    panels = vls or [0]  # host baselines only: one panel
    plt = _pyplot()
    f, axes = plt.subplots(1, len(panels), figsize=(max(8, 5 * len(panels)), 5), squeeze=False, sharey=True)
    scale = 1e-3 if fig.kind == "time" else 1.0
    for ax, vl in zip(axes[0], panels):
        for label, host, g in size_lines(df, table, fig, vl):
            ax.errorbar(g["size"], g["mean"] * scale, yerr=g["std"] * scale, marker="o", ms=3, capsize=2,
                        ls="--" if host else "-", lw=1 if host else 1.8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        if fig.kind == "time":
            ax.set_yscale("log")
        ax.set_title(f"VL {vl} bits" if vl else f"host ISA ({cpu})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(SIZE_YLABEL[fig.kind])
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    f.suptitle(textwrap.fill(fig.title, 100), fontsize=10)
    f.legend(handles, labels, fontsize=7, loc="lower center", ncol=1, frameon=False)
    f.tight_layout(rect=(0, 0.06 + 0.035 * len(labels), 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    f.savefig(out, dpi=120)
    plt.close(f)
