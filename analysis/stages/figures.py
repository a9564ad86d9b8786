"""Drawing: the count figures (a metric against VL on a log2 axis, one line per variant, VLS
builds as open markers on the same colour, and a ratio figure against the baseline) and the perf
figures (time per call or bandwidth against message size, one panel per VL, paper Fig. 11, 12).
"""
from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import to_hex

from analysis.backends import perf
from analysis.core import config
from analysis.stages.plotplan import figures
from analysis.stages.series import Series, match_stats, select

# The y axis of a count figure that declares no ylabel.
ROI_NET_LABEL = "instructions in ROI, n minus baseline (roi_net)"
LINESTYLES = ["-", "--", ":", "-."]
# Series colours: tab10's ten, then Dark2's eight for the figures with more lines (the memcpy
# family); series_colours hands them out.
PALETTE = [to_hex(c) for c in (*colormaps["tab10"].colors, *colormaps["Dark2"].colors)]
# A metric's interval, where the table has one (sampled gem5: gem5.cycles_ci_low/high): drawn
# as error bars on its line.
INTERVAL = ("_ci_low", "_ci_high")
# Characters per title line: a 10 pt title over the axes of the 8-inch figure holds about 95.
TITLE_WIDTH = 90
SIZE_YLABEL = {"time": "time per call (us), mean and std over processes", "bandwidth": "bandwidth (GB/s), (read + write) / time",
               "instructions": "instructions per call (perf, user mode), mean over processes"}
# What a perf figure draws from runs in the emulated AArch64 guest, whose times are virtual.
GUEST_METRIC = "instructions"
# A perf figure drawn from a model's estimate (Backend.estimates): one simulated call, no spread.
MODEL_YLABEL = {"time": "estimated time per call (us): ROI cycles / clock", "bandwidth":
                "estimated bandwidth (GB/s), (read + write) / estimated time"}


def _pyplot() -> Any:
    """matplotlib.pyplot on first use: the workflow imports this module to list the figures,
    and every Snakemake start (a no-op re-run too) would pay for pyplot's import."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colour_key(s: Series) -> tuple[str, str, str, str]:
    """What a series' colour stands for: kernel, variant, op and dtype. The compiler is left
    out: a figure reads one compiler's objects, and the GCC and clang figures read alike. The
    kernel stays in: pack and unpack coincide exactly, and a dashed line over a solid one of the
    same colour would hide that there are two."""
    return (s.kernel, s.variant, s.op, s.dtype)


def series_colours(groups: list[list[Series]]) -> dict[tuple[str, str, str, str], str]:
    """One colour per series identity (colour_key) for every figure of the sweep, decided once
    so that a figure and its ratio companion agree: each identity, in the order they first
    appear, takes the first colour of PALETTE that no identity sharing a figure with it holds.
    Colours repeat only across figures that never meet, so the first colours serve most."""
    neighbours: dict[tuple[str, str, str, str], set[tuple[str, str, str, str]]] = {}
    for group in groups:
        keys = list(dict.fromkeys(colour_key(s) for s in group))  # in order: the same colours every run
        for k in keys:
            neighbours.setdefault(k, set()).update(set(keys) - {k})
    colours: dict[tuple[str, str, str, str], str] = {}
    for i, key in enumerate(neighbours):
        held = {colours[n] for n in neighbours[key] if n in colours}
        colours[key] = next((c for c in PALETTE if c not in held), PALETTE[i % len(PALETTE)])
    return colours


def line_styles(series: list[Series]) -> dict[str, str]:
    """Kernels of one figure (pack, unpack) can coincide exactly: one line style per kernel, the
    same in the figure and its ratio companion."""
    return {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(dict.fromkeys(s.kernel for s in series))}


def series_id(s: Series) -> str:
    """The line's gid: which series it draws (tests/test_figures.py reads it back)."""
    return f"{s.compiler}/{s.kernel}/{s.variant}/{s.op}/{s.dtype}"


def _axes_vl(ax: Any, vls: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(vls)
    ax.set_xticklabels([str(v) for v in vls], rotation=90, fontsize=7)
    ax.set_xlabel("SVE vector length (bits)")
    ax.grid(True, which="both", alpha=0.3)


def _title(text: str) -> str:
    # A title longer than the axes are wide runs past the figure's edge and is cut off in the
    # PNG (the Fig. 4 ratio titles): wrapped, the layout makes room for its lines.
    return textwrap.fill(text, TITLE_WIDTH)


def _height(axes: float, entries: int) -> float:
    """The figure's height: the axes' inches plus the legend's below them (its entries and its
    title at 7 pt), so that a long legend (the IPC figure's 17 lines) stays inside the figure."""
    return axes + 0.16 * (entries + 1) + 0.2


Bounds = dict[tuple[str, str, str, str], tuple[pd.Series, pd.Series]]


def intervals(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, f: config.CountFigure) -> Bounds:
    """The lower and upper bound of each series of a figure whose metric has an interval in the
    table (colour_key -> (low, high) by VL); {} for the rest."""
    out: Bounds = {}
    low_f, high_f = (dataclasses.replace(f, metric=f.metric + end) for end in INTERVAL)
    if not (counts["metric"] == low_f.metric).any():
        return out
    for sel in f.series:
        highs = {colour_key(s): s.vla for s in select(counts, prov, sweep, sel, high_f)}
        for s in select(counts, prov, sweep, sel, low_f):
            if colour_key(s) in highs:
                out[colour_key(s)] = (s.vla, highs[colour_key(s)])
    return out


def count_figure(fig_cfg: config.CountFigure, series: list[Series], vls: list[int],
                 colours: dict[tuple[str, str, str, str], str], bounds: Bounds | None = None) -> Any:
    """A count figure (a metric against VL, one line per series) as a matplotlib Figure; a series
    with an interval in `bounds` gets error bars (sampled gem5 cycles, 99.7 %)."""
    style = line_styles(series)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, _height(4.5, len(series))), layout="constrained")
    scale = fig_cfg.scale
    for s in series:
        colour = colours[colour_key(s)]
        ax.plot(s.vla.index, s.vla.values / scale, marker="o", ms=3, label=s.label, ls=style[s.kernel],
                lw=2.2 if s.role != "extra" else 1.2, color=colour, gid=series_id(s))
        if len(s.vls):
            ax.plot(s.vls.index, s.vls.values / scale, ls="none", marker="s", mfc="none", color=colour, ms=7)
        if bounds and colour_key(s) in bounds:
            low, high = (b.reindex(s.vla.index) for b in bounds[colour_key(s)])
            bars = ax.errorbar(s.vla.index, s.vla.values / scale,
                               yerr=[(s.vla - low).values / scale, (high - s.vla).values / scale],
                               fmt="none", ecolor=colour, capsize=3, lw=1)
            for col in bars.lines[2]:
                col.set_gid(f"{series_id(s)}/interval")
    ax.set_yscale("log" if scale == 1 else "linear")
    ax.set_ylabel(fig_cfg.ylabel or ROI_NET_LABEL)
    ax.set_title(_title(fig_cfg.title), fontsize=10)
    _axes_vl(ax, vls)
    bars = "; bars: 99.7 % interval of the sampled estimate" if bounds else ""
    fig.legend(fontsize=7, title=f"{fig_cfg.compiler} objects; lines: VLA build; squares: VLS build{bars}", title_fontsize=7,
               loc="outside lower center", ncol=1, frameon=False)
    return fig


def ratio_figure(fig_cfg: config.CountFigure, base: Series, series: list[Series], vls: list[int],
                 colours: dict[tuple[str, str, str, str], str]) -> Any:
    """The ratio companion (baseline / series per VL): each line in its count figure's colour and style."""
    style = line_styles(series)
    shown = [s for s in series if (s.kernel, s.variant, s.op, s.dtype) != (base.kernel, base.variant, base.op, base.dtype)]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, _height(4.5, len(shown))), layout="constrained")
    for s in shown:
        ratio = (base.vla / s.vla).dropna()
        ax.plot(ratio.index, ratio.values, marker="o", ms=3, label=s.label, ls=style[s.kernel],
                color=colours[colour_key(s)], gid=series_id(s))
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"{fig_cfg.metric} ratio: {base.variant} / variant")
    ax.set_title(_title(f"{fig_cfg.title}: ratio to {base.kernel} {base.variant}"), fontsize=10)
    _axes_vl(ax, vls)
    fig.legend(fontsize=7, title=f"{fig_cfg.compiler} objects", title_fontsize=7, loc="outside lower center",
               frameon=False)
    return fig


def count_figures(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, source: Path) -> list[tuple[str, Any]]:
    """(file stem, Figure) of every count figure of the sweep (the cycle figures only where gem5
    rows exist) and of the ratio figure of each that has a baseline."""
    vls = sorted(set(sweep.vector_lengths) | set(sweep.vls_vector_lengths))
    plan: list[tuple[config.CountFigure, list[Series], Series | None, Bounds]] = []
    for f in figures(sweep, set(counts["backend"])):
        series = [s for sel in f.series for s in select(counts, prov, sweep, sel, f)]
        if not series:
            raise ValueError(f"figure {f.name}: no data for its series in {source}")
        if len({s.kernel for s in series}) > 1:
            for s in series:
                s.label = f"{s.kernel}: {s.label}"
        base = None
        if f.baseline is not None:
            found = select(counts, prov, sweep, f.baseline, f)
            if len(found) != 1:
                raise ValueError(f"figure {f.name}: baseline selects {len(found)} series (need one)")
            base = found[0]
        plan.append((f, series, base, intervals(counts, prov, sweep, f)))
    colours = series_colours([series for _, series, _, _ in plan])
    out = []
    for f, series, base, bounds in plan:
        out.append((f.name, count_figure(f, series, vls, colours, bounds)))
        if base is not None:
            out.append((f"{f.name}_ratio", ratio_figure(f, base, series, vls, colours)))
    return out


def draw_counts(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, fig_dir: Path, source: Path) -> None:
    """Every count figure of the sweep and its ratio figure, as PNG files in fig_dir."""
    plt = _pyplot()
    fig_dir.mkdir(parents=True, exist_ok=True)
    for name, fig in count_figures(counts, prov, sweep, source):
        fig.savefig(fig_dir / f"{name}.png", dpi=120)
        plt.close(fig)


# The perf table (results/perf.csv, statistics over processes): time per call or bandwidth
# against message size, one panel per VL (paper Fig. 11, 12), host baselines dashed in every panel.

def size_lines(df: pd.DataFrame, table: config.KernelTable, fig: config.PerfFigure, vl: int,
               metric: str | None = None) -> list[tuple[str, bool, pd.DataFrame]]:
    """(label, is_host, rows by size) for one panel: the series at `vl`, then host baselines.
    `metric`: another metric than the figure's kind (instructions, from the emulated guest)."""
    metric = metric or (perf.TIME if fig.kind == "time" else perf.BANDWIDTH)
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


def size_figure(df: pd.DataFrame, table: config.KernelTable, fig: config.PerfFigure, cpu: str, guest: str | None = None,
                model: str | None = None) -> Any:
    """A perf figure (time per call or bandwidth against message size, one panel per VL). `guest`:
    the SVE runs were made in the emulated AArch64 guest, whose times are virtual: the figure then
    draws instructions per call instead, and says so in its title (`guest` is that label). `model`:
    the rows are a model's estimate (its label), never a measurement: its title and axis say so."""
    metric = GUEST_METRIC if guest else None
    vls = sorted(v for v in df["vl"].unique() if v > 0)
    if fig.vl is not None:
        vls = [fig.vl] if fig.vl in vls else []
    panels = vls or [0]  # host baselines only: one panel
    lines = {vl: size_lines(df, table, fig, vl, metric) for vl in panels}
    entries = len({label for found in lines.values() for label, _, _ in found})
    plt = _pyplot()
    f, axes = plt.subplots(1, len(panels), figsize=(max(8, 5 * len(panels)), _height(4.0, entries)), squeeze=False,
                           sharey=True, layout="constrained")
    scale = 1e-3 if fig.kind == "time" and not guest else 1.0
    for ax, vl in zip(axes[0], panels):
        for label, host, g in lines[vl]:
            ax.errorbar(g["size"], g["mean"] * scale, yerr=g["std"] * scale, marker="o", ms=3, capsize=2,
                        ls="--" if host else "-", lw=1 if host else 1.8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        if fig.kind == "time" or guest:
            ax.set_yscale("log")
        ax.set_title(f"VL {vl} bits" if vl else f"host ISA ({cpu})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(MODEL_YLABEL[fig.kind] if model else SIZE_YLABEL[GUEST_METRIC if guest else fig.kind])
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    f.suptitle(_title(fig.title + (f" ({guest})" if guest else "") +
                      (f" - MODEL ESTIMATE, not measured: {model}" if model else "")), fontsize=10)
    f.legend(handles, labels, fontsize=7, loc="outside lower center", ncol=1, frameon=False)
    return f


def plot_by_size(df: pd.DataFrame, table: config.KernelTable, fig: config.PerfFigure, out: Path, cpu: str,
                 guest: str | None = None, model: str | None = None) -> None:
    plt = _pyplot()
    f = size_figure(df, table, fig, cpu, guest, model)
    out.parent.mkdir(parents=True, exist_ok=True)
    f.savefig(out, dpi=120)
    plt.close(f)
