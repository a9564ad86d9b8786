"""Plot/check stage: the paper's figures from the tidy table, and results/summary.md.

Figures show a metric, `roi_net.total` (ROI count at size n minus at size 0) by default or
gem5's ROI cycles/IPC, against VL on a log2 axis, one line per variant (VLA build; VLS
builds as open markers on the same colour), plus a ratio figure (baseline / variant). The
summary evaluates each mechanical claim of the paper declared under `checks:` in the sweep
configuration, and compares gem5's ROI instructions with QEMU's where both ran.

With `--stats perf.csv` it draws the perf table instead: time per call and bandwidth against
message size (paper Fig. 11, 12) and results/perf_summary.md (machine, settings, every cell's
statistics, the paper's claims at the measured VLs).
"""
from __future__ import annotations

import argparse
import json
import textwrap
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.backends import perf
from analysis.backends.gem5 import MARKER_INSTRUCTIONS
from analysis.core import config, mpi, table
from analysis.stages import explain, verdict
from analysis.stages.plotplan import Cell, discussed_cells, figures, is_gem5

METRIC = "roi_net.total"


@dataclass
class Series:
    kernel: str
    variant: str
    op: str
    dtype: str
    label: str
    role: str
    size: int
    compiler: str
    vla: pd.Series  # VL -> count
    vls: pd.Series


def _first(values: list[Any]) -> Any:
    return values[0] if values else None


def where(sweep: config.Sweep, spec: dict[str, Any]) -> tuple[str, str, str]:
    """(metric, backend, cpu model or gem5 system) a figure or check reads."""
    backend = spec.get("backend", sweep.backends[0])
    default_cpu = _first(list(sweep.gem5.systems) if sweep.gem5 else ["paper"]) if backend == "gem5" \
        else _first(list(sweep.cpu_models))
    return spec.get("metric", METRIC), backend, spec.get("cpu_model", default_cpu)


# The key columns the summary filters on, held as categories: comparing a category with a value
# compares integer codes, where comparing strings took a quarter of the stage's time.
CATEGORY_COLUMNS = ("kernel", "variant", "op", "dtype", "compiler", "build", "backend", "cpu_model", "metric")


def by_category(counts: pd.DataFrame) -> pd.DataFrame:
    return counts.astype({c: "category" for c in CATEGORY_COLUMNS if c in counts})


def rows(df: pd.DataFrame, **equal: Any) -> pd.DataFrame:
    """The rows whose columns hold these values, in the table's order. One column at a time, each
    compared on the rows the one before kept: the summary filters the whole table (270,000 rows
    in a default sweep) hundreds of times, and comparing every column on every row was most of
    the plot stage's 16 CPU seconds."""
    for column, value in equal.items():
        df = df[df[column] == value]
    return df


def select(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, sel: dict[str, Any],
           spec: dict[str, Any] | None = None) -> list[Series]:
    """Expand a selector (variant optional) into series of the figure's or check's metric
    (default roi_net.total) at the family's first size."""
    metric, backend, cpu = where(sweep, spec or {})
    kernel = sel["kernel"]
    variants = [sel["variant"]] if "variant" in sel else sweep.table.variants(kernel)
    compiler = (spec or {}).get("compiler", sweep.compilers[0])
    df = rows(counts, kernel=kernel, metric=metric, cpu_model=cpu, compiler=compiler, backend=backend)
    if "op" in sel:
        df = df[df["op"] == sel["op"]]
    if "dtype" in sel:
        df = df[df["dtype"] == sel["dtype"]]
    out = []
    for v in variants:
        row = sweep.table.row(kernel, v)
        d = df[df["variant"] == v]
        if d.empty:
            continue
        size = sweep.sizes[row.family][0]
        d = d[d["size"] == size]
        for (op, dtype), g in d.groupby(["op", "dtype"]):
            label = row.label
            if "{roi_symbol}" in label:
                p = rows(prov, kernel=kernel, variant=v, size=size)
                # "?" is a backend that cannot name the function (gem5): the counting backends can.
                label = label.replace("{roi_symbol}", "/".join(sorted(set(p["roi_symbol"]) - {"?"})) or "?")
            if op != config.NO_OP and "op" not in sel:
                label += f" [{op} {dtype}]"
            out.append(Series(
                kernel, v, op, dtype, label, row.role, size, compiler,
                g[g["build"] == "vla"].set_index("vl")["value"].sort_index(),
                g[g["build"] == "vls"].set_index("vl")["value"].sort_index(),
            ))
    return out


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


LINESTYLES = ["-", "--", ":", "-."]


def plot_figure(fig_cfg: dict[str, Any], series: list[Series], out: Path, vls: list[int]) -> None:
    # Kernels of one figure (pack, unpack) can coincide exactly: one line style per kernel.
    style = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(dict.fromkeys(s.kernel for s in series))}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    scale = fig_cfg.get("scale", 1)
    for s in series:
        (line,) = ax.plot(s.vla.index, s.vla.values / scale, marker="o", ms=3, label=s.label, ls=style[s.kernel],
                          lw=2.2 if s.role != "extra" else 1.2)
        if len(s.vls):
            ax.plot(s.vls.index, s.vls.values / scale, ls="none", marker="s", mfc="none", color=line.get_color(), ms=7)
    ax.set_yscale("log" if scale == 1 else "linear")
    ax.set_ylabel(fig_cfg.get("ylabel", "instructions in ROI, n minus baseline (roi_net)"))
    ax.set_title(fig_cfg["title"], fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, title="lines: VLA build; squares: VLS build", title_fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_ratio(fig_cfg: dict[str, Any], base: Series, series: list[Series], out: Path, vls: list[int]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    for s in series:
        if s is base or (s.kernel, s.variant, s.op, s.dtype) == (base.kernel, base.variant, base.op, base.dtype):
            continue
        ratio = (base.vla / s.vla).dropna()
        ax.plot(ratio.index, ratio.values, marker="o", ms=3, label=s.label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"{where_metric(fig_cfg)} ratio: {base.variant} / variant")
    ax.set_title(f"{fig_cfg['title']}: ratio to {base.kernel} {base.variant}", fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def where_metric(spec: dict[str, Any]) -> str:
    return spec.get("metric", METRIC)


def per_vector(s: Series, vl: int) -> float:
    """Instructions per VL-sized chunk of the measured data: the loop cost the ratio comes from."""
    return float(s.vla[vl]) / (s.size / (vl // 8))


def top_ops(counts: pd.DataFrame, s: Series, vl: int, n: int = 6) -> str:
    d = rows(counts, kernel=s.kernel, variant=s.variant, vl=vl, size=s.size, build="vla", op=s.op, dtype=s.dtype)
    d = d[d["metric"].str.startswith("roi_net.op.")]
    d = d.sort_values("value", ascending=False).head(n)
    return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))


def top_funcs(counts: pd.DataFrame, s: Series, vl: int, n: int = 3) -> str:
    d = rows(counts, kernel=s.kernel, variant=s.variant, vl=vl, size=s.size, build="vla", op=s.op, dtype=s.dtype)
    d = d[d["metric"].str.startswith("roi_net.func.")]
    d = d[d["value"] != 0].sort_values("value", ascending=False).head(n)
    return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))


def evaluate(check: dict[str, Any], counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> dict[str, Any]:
    """One row of the summary: the paper's value, ours, pass/fail and the codegen reason."""
    tol = check.get("tolerance", 0.1)
    kind = check["kind"]

    def one(key: str) -> Series:
        found = select(counts, prov, sweep, check[key], check)
        if len(found) != 1:
            raise ValueError(f"check {check['id']}: {key} selects {len(found)} series (need exactly one)")
        return found[0]

    if kind in ("ratio", "ratio_range"):
        num, den = one("numerator"), one("denominator")
        ratio = (num.vla / den.vla).dropna()
        if "vl" in check:
            ratio = ratio[ratio.index == check["vl"]]
        if ratio.empty:
            raise ValueError(f"check {check['id']}: no VL where both series have data")
        if kind == "ratio" and check.get("aggregate") == "mean":
            mean = float(ratio.mean())
            ok = abs(mean - check["target"]) <= tol * check["target"]
            paper = f"{check['target']:g} (mean over VLs)"
        elif kind == "ratio":
            ok = bool(((ratio - check["target"]).abs() <= tol * check["target"]).all())
            paper = f"{check['target']:g}" + (f" at VL {check['vl']}" if "vl" in check else "")
        else:
            ok = bool(((ratio >= check["min"]) & (ratio <= check["max"])).all())
            paper = f"{check['min']:g} .. {check['max']:g}"
        ours = f"{ratio.min():.3g} .. {ratio.max():.3g} (VL {ratio.idxmin()} .. {ratio.idxmax()})"
        if kind == "ratio" and check.get("aggregate") == "mean":
            ours = f"mean {ratio.mean():.3g}; " + ours
        lo, hi = min(ratio.index), max(ratio.index)
        unit = "cycles" if where_metric(check).startswith("gem5.cycles") else "insns"
        reason = (
            f"{num.variant}: {per_vector(num, lo):.3g} {unit} per vector of data at VL {lo}, "
            f"{per_vector(num, hi):.3g} at VL {hi}; {den.variant}: {per_vector(den, lo):.3g} / "
            f"{per_vector(den, hi):.3g}. Hot opcodes (QEMU count) at VL {lo}: {num.variant}: "
            f"{top_ops(counts, num, lo)}; {den.variant}: {top_ops(counts, den, lo)}"
        )
        if is_gem5(check):
            reason += "; " + "; ".join(gem5_context(counts, s, check, sweep, lo) for s in (num, den))
    else:
        s = one("series")
        v = s.vla
        if kind == "vl_ratio":
            r = float(v[check["vl_a"]] / v[check["vl_b"]])
            ok = abs(r - check["target"]) <= tol * check["target"]
            paper, ours = f"{check['target']:g}", f"{r:.3g}"
        elif kind == "flat":
            spread = float(v.max() / v.min() - 1)
            ok = spread <= tol
            paper, ours = "constant", f"max/min - 1 = {spread:.3%}"
        else:  # inverse_vl
            prod = v * v.index.to_series()
            spread = float(prod.max() / prod.min() - 1)
            ok = spread <= tol
            paper, ours = "count x VL constant", f"max/min - 1 = {spread:.3%}"
        lo, hi = min(v.index), max(v.index)
        reason = (f"{s.variant}: {per_vector(s, lo):.3g} insns per vector of data at VL {lo}, "
                  f"{per_vector(s, hi):.3g} at VL {hi}; functions in the ROI at VL {lo}: "
                  f"{top_funcs(counts, s, lo)}; at VL {hi}: {top_funcs(counts, s, hi)}")
    return {"id": check["id"], "figure": check["figure"], "claim": check["claim"], "paper": paper,
            "ours": ours, "result": "pass" if ok else "FAIL", "reason": reason, "note": check.get("note", "")}


def own_line_name(check: dict[str, Any], sweep: config.Sweep) -> str:
    """The check's own line in the verdict: its `line`, else compiler and variants."""
    if "line" in check:
        return check["line"]
    variants = [check[k]["variant"] for k in ("numerator", "denominator", "series") if "variant" in check.get(k, {})]
    return f"{check.get('compiler', sweep.compilers[0])}: {' / '.join(variants)}"


def loop_facts(check: dict[str, Any], counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> str:
    """Per-iteration instructions of the hot loop of each series of a count check at the
    lowest VL (what `./harness explain` prints): where a ratio between two lines comes from."""
    metric, backend, cpu = where(sweep, check)
    if not metric.startswith("roi_net.") or backend == "gem5":
        return ""
    out = []
    for key in ("numerator", "denominator", "series"):
        if key not in check:
            continue
        for s in select(counts, prov, sweep, check[key], check):
            vl = int(min(s.vla.index))
            cell = Cell(s.kernel, s.variant, s.op, s.dtype, "vla", cpu, backend, s.compiler, vl, s.size)
            try:
                loop = explain.cell_hot_loop(cell, sweep, prov)
            except (config.ConfigError, FileNotFoundError, IndexError, KeyError):
                loop = None
            out.append(f"{s.compiler} {s.variant}: " + (
                f"`{loop.function}` {len(loop.body)} insns per iteration x {loop.iterations} iterations at VL {vl}"
                if loop else "no loop in the ROI's own code"))
    return "; ".join(out)


def claim(check: dict[str, Any], counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep,
          has_gem5: bool) -> dict[str, Any]:
    """A check evaluated on its own line and on each of its conditions, with its verdict."""
    not_run = None if has_gem5 or not is_gem5(check) else "gem5 not found, the cycle sweep did not run"
    row = skipped(check) if not_run else evaluate(check, counts, prov, sweep)
    own = verdict.Line(own_line_name(check, sweep), None if not_run else row["result"] == "pass", row["ours"])
    lines, loops = [own], [f"{own.name}: {loop_facts(check, counts, prov, sweep)}"] if not not_run else []
    for cond in check.get("conditions", []):
        c = config.condition_check(check, cond)
        factor = cond.get("factor") or "; ".join(config.condition_factors(sweep, check, cond))
        try:
            r = None if not_run else evaluate(c, counts, prov, sweep)
        except ValueError:  # this sweep has no rows for the condition's line
            r = None
        lines.append(verdict.Line(cond["line"], None if r is None else r["result"] == "pass",
                                  "no data" if r is None else r["ours"], factor, bool(cond.get("paper", False))))
        if r is not None:
            loops.append(f"{cond['line']}: {loop_facts(c, counts, prov, sweep)}")
    row["verdict"] = verdict.decide(own, lines[1:], check.get("cause"), not_run)
    row["lines"] = lines
    row["loops"] = [x for x in loops if not x.endswith(": ")]
    return row


def gem5_context(counts: pd.DataFrame, s: Series, check: dict[str, Any], sweep: config.Sweep, vl: int) -> str:
    """IPC and cache misses of a gem5 series at one VL: what the cycle ratio comes from."""
    _, backend, cpu = where(sweep, check)
    d = rows(counts, kernel=s.kernel, variant=s.variant, vl=vl, size=s.size, backend=backend, cpu_model=cpu,
             op=s.op, dtype=s.dtype)
    v = dict(zip(d["metric"], d["value"]))
    return (f"{s.variant} at VL {vl}: IPC {v.get('gem5.ipc_milli', 0) / 1000:.2f}, "
            f"L1D misses {v.get('gem5.l1d_misses')}, L2 misses {v.get('gem5.l2_misses')}")


def skipped(check: dict[str, Any]) -> dict[str, Any]:
    return {"id": check["id"], "figure": check["figure"], "claim": check["claim"],
            "paper": str(check.get("target", f"{check.get('min')} .. {check.get('max')}")), "ours": "-",
            "result": "skipped", "reason": "no gem5 rows: the cycle sweep did not run (gem5 not found)",
            "note": check.get("note", "")}


def agreement(counts: pd.DataFrame) -> pd.DataFrame:
    """gem5's committed ROI instructions against QEMU's ROI count of the same kernel object,
    VL and size (VLA build), minus the documented marker instructions: expected all zero."""
    g = counts[(counts["backend"] == "gem5") & (counts["metric"] == "gem5.insts")]
    q = counts[(counts["backend"] == "qemu") & (counts["metric"] == "roi.total") & (counts["build"] == "vla")
               & (counts["cpu_model"] == "max")]
    key = ["kernel", "variant", "op", "dtype", "compiler", "vl", "size"]
    m = g.merge(q, on=key, suffixes=("_gem5", "_qemu"))
    m["difference"] = m["value_gem5"] - m["value_qemu"] - MARKER_INSTRUCTIONS
    return m[key + ["cpu_model_gem5", "value_gem5", "value_qemu", "difference"]].rename(
        columns={"cpu_model_gem5": "system", "value_gem5": "gem5_insts", "value_qemu": "qemu_roi"})


def verdict_table(rows: list[dict[str, Any]]) -> list[str]:
    """The summary's opening table (and the README's): claim, paper, ours, verdict."""
    out = ["| claim | paper | ours | verdict |", "|---|---|---|---|"]
    for r in rows:
        cell = r["verdict"].text() if "verdict" in r else r["result"]
        out.append(f"| Fig. {r['figure']}: {r['claim']} | {r['paper']} | {r['ours']} | {cell} |")
    if not rows:
        out.append("| (no checks configured) | | | |")
    return out


def ratio_tables(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> list[str]:
    """Markdown: baseline / series per VL for each figure that asks for it (`ratio_table: true`),
    with the baseline's own counts first: the measured ratios a reader compares with the paper's."""
    lines: list[str] = []
    for f in sweep.figures:
        if not f.get("ratio_table") or "baseline" not in f:
            continue
        base = select(counts, prov, sweep, f["baseline"], f)
        series = [s for sel in f["series"] for s in select(counts, prov, sweep, sel, f)]
        if len(base) != 1 or not series:
            continue
        vls = sorted(base[0].vla.index)
        lines += ["", f"## {f['title']}: ratios per VL", "",
                  f"ROI net instructions of the baseline ({base[0].variant}: {base[0].label}), then baseline / line.", "",
                  "| line | " + " | ".join(f"VL {v}" for v in vls) + " |", "|---|" + "---|" * len(vls),
                  f"| {base[0].variant} (instructions) | " + " | ".join(f"{base[0].vla[v]:.0f}" for v in vls) + " |"]
        for s in series:
            if s.variant == base[0].variant:
                continue
            cells = [f"{base[0].vla[v] / s.vla[v]:.3g}" if v in s.vla.index and s.vla[v] else "-" for v in vls]
            lines.append(f"| {base[0].variant} / {s.variant} | " + " | ".join(cells) + " |")
    return lines


def write_summary(rows: list[dict[str, Any]], counts: pd.DataFrame, path: Path, sweep: config.Sweep,
                  agree: pd.DataFrame | None = None) -> None:
    flags = counts[(counts["metric"] == "roi_net.nonlinear") & (counts["value"] == 1)]
    cells = discussed_cells(sweep)
    lines = [
        "# Summary: the paper's mechanical claims against this sweep",
        "",
        "Verdicts: `reproduced` (the harness as built gives the paper's number); `reproduced under the paper's "
        "conditions` (a line with the paper's condition does, e.g. 2019's non-SVE memcpy; the pair names the one "
        "factor); `differs: <cause>`, with the isolating pair: two lines that differ in one factor, and their numbers.",
        "",
        *verdict_table(rows),
        "",
        f"Sweep `{sweep.path}`; metric `{METRIC}` (ROI count at size n minus at size 0), VLA build, "
        f"CPU model {_first(list(sweep.cpu_models))}, compiler {sweep.compilers[0]}, backend {sweep.backends[0]}. "
        "Toolchain differs from the paper's (GCC 12 vs Arm HPC Compiler 19.2 / GCC 8.2; QEMU plugins vs ArmIE): "
        "compare ratios and trends, not absolute counts.",
        "",
        "| check | fig | paper's claim | paper | ours | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['id']} | {r['figure']} | {r['claim']} | {r['paper']} | {r['ours']} | {r['result']} |")
    if not rows:
        lines.append("| (no checks configured) | | | | | |")
    lines += ["", "## Lines per check (each condition differs from the check's own line in one factor)", "",
              "| check | line | factor | ours | paper's number |", "|---|---|---|---|---|"]
    for r in rows:
        for ln in r.get("lines", []):
            got = "no data" if ln.ok is None else ("yes" if ln.ok else "no")
            lines.append(f"| {r['id']} | {ln.name}{' (paper)' if ln.paper else ''} | {ln.factor or '(own line)'} | "
                         f"{ln.ours} | {got} |")
    lines += ["", "## Why (codegen per check)", ""]
    for r in rows:
        lines.append(f"- **{r['id']}** ({r['result']}): {r['reason']}." + (f" Note: {r['note']}" if r["note"] else ""))
        lines += [f"  - hot loops, {x}" for x in r.get("loops", [])]
    if agree is not None and len(agree):
        bad = agree[agree["difference"] != 0]
        lines += ["", "## gem5 and QEMU agree on the ROI's instructions", "",
                  f"gem5's committed ROI instructions minus QEMU's ROI count of the same kernel object, VL and size, "
                  f"minus the {MARKER_INSTRUCTIONS} marker instructions only gem5's ROI holds (roi_end's two movs and "
                  f"dump_stats): expected 0 everywhere; {len(agree) - len(bad)} of {len(agree)} cells agree.", "",
                  "| kernel | variant | op | dtype | system | VL | size | gem5 | QEMU | difference |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in (bad if len(bad) else agree).itertuples():
            lines.append(f"| {r.kernel} | {r.variant} | {r.op} | {r.dtype} | {r.system} | {r.vl} | {r.size} | "
                         f"{r.gem5_insts} | {r.qemu_roi} | {r.difference} |")
    if cells:
        lines += ["", "## Cells explained (command lines, hot loop, functions, classes, opcodes)", ""]
        lines += [f"- [{c.kernel} {c.variant} VL {c.vl}](explain/{c.slug}.md)" for c in cells]
    lines += ["", "## Linearity", ""]
    if len(flags):
        for _, f in flags.iterrows():
            lines.append(f"- non-linear (> 1 %): {f['kernel']} {f['variant']} {f['op']} {f['dtype']} {f['build']} VL {f['vl']} size {f['size']}")
    else:
        lines.append("Every ROI count is linear in size within 1 % (ROI(2n) - ROI(n) vs ROI(n) - ROI(0)).")
    path.write_text("\n".join(lines) + "\n")


# The perf table (results/perf.csv, statistics over processes): time per call or bandwidth
# against message size, one panel per VL (paper Fig. 11, 12), host baselines dashed in every
# panel; its claims and results/perf_summary.md.

SIZE_YLABEL = {"time": "time per call (us), mean and std over processes", "bandwidth": "bandwidth (GB/s), (read + write) / time"}


def _match_stats(df: pd.DataFrame, sel: dict[str, Any]) -> pd.DataFrame:
    d = df[df["kernel"] == sel["kernel"]]
    for k in ("variant", "op", "dtype"):
        if k in sel:
            d = d[d[k] == sel[k]]
    return d


def size_lines(df: pd.DataFrame, table: config.KernelTable, fig: dict[str, Any], vl: int) -> list[tuple[str, bool, pd.DataFrame]]:
    """(label, is_host, rows by size) for one panel: the series at `vl`, then host baselines."""
    metric = perf.TIME if fig["kind"] == "time" else perf.BANDWIDTH
    d = df[(df["metric"] == metric) & (df["status"] == perf.OK)]
    out = []
    for sel in fig["series"]:
        m = _match_stats(d, sel)
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


def plot_by_size(df: pd.DataFrame, table: config.KernelTable, fig: dict[str, Any], out: Path, cpu: str) -> None:
    vls = sorted(v for v in df["vl"].unique() if v > 0)
    if "vl" in fig:
        vls = [fig["vl"]] if fig["vl"] in vls else []
    panels = vls or [0]  # host baselines only: one panel
    plt = _pyplot()
    f, axes = plt.subplots(1, len(panels), figsize=(max(8, 5 * len(panels)), 5), squeeze=False, sharey=True)
    scale = 1e-3 if fig["kind"] == "time" else 1.0
    for ax, vl in zip(axes[0], panels):
        for label, host, g in size_lines(df, table, fig, vl):
            ax.errorbar(g["size"], g["mean"] * scale, yerr=g["std"] * scale, marker="o", ms=3, capsize=2,
                        ls="--" if host else "-", lw=1 if host else 1.8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        if fig["kind"] == "time":
            ax.set_yscale("log")
        ax.set_title(f"VL {vl} bits" if vl else f"host ISA ({cpu})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(SIZE_YLABEL[fig["kind"]])
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


def stats_check_rows(df: pd.DataFrame, checks: list[dict[str, Any]], sizes: dict[str, list[int]], table: config.KernelTable) -> list[str]:
    """One Markdown row per (claim, VL): our ratio beside the paper's, or why there is none."""
    out = []
    sve_vls = sorted(v for v in df["vl"].unique() if v > 0)
    for chk in checks:
        metric = chk.get("metric", perf.TIME)
        size = chk.get("size", max(sizes[table.selector_family(chk["numerator"]).name]))
        vls = chk.get("vector_lengths", sve_vls)
        if not sve_vls:
            out.append(f"| {chk['figure']} | {chk['claim']} | - | not measured: no SVE runs on this machine | {chk['target']} | - |")
            continue
        for vl in vls:
            def mean(sel: dict[str, Any]) -> float | None:
                d = _match_stats(df, sel)
                d = d[(d["metric"] == metric) & (d["vl"] == vl) & (d["size"] == size) & (d["status"] == perf.OK)]
                return float(d["mean"].iloc[0]) if len(d) == 1 else None

            num, den = mean(chk["numerator"]), mean(chk["denominator"])
            if num is None or not den:
                out.append(f"| {chk['figure']} | {chk['claim']} | {vl} | no data at size {size} | {chk['target']} | - |")
                continue
            ratio = num / den
            ok = abs(ratio / chk["target"] - 1) <= chk["tolerance"]
            out.append(f"| {chk['figure']} | {chk['claim']} | {vl} | {ratio:.3g} ({metric}, {size} B) | {chk['target']} | {'pass' if ok else 'FAIL'} |")
    return out


def stats_summary(df: pd.DataFrame, metas: list[dict[str, Any]], messages: list[str], checks: list[str] | None = None) -> str:
    lines_ = ["# perf measurements (native runs)", ""]
    lines_ += [f"- {m}" for m in messages]
    for meta in {(m["build"], m["cpu"]): m for m in metas}.values():
        lines_.append(f"- build {meta['build']}: {meta['cpu']}; {meta['versions']['perf']}; "
                      f"{meta['versions']['compiler.native']}; {meta['processes']} processes x {meta['calls']} calls "
                      f"(+{meta['warmup']} warm-up), pinned to CPU {meta['core']}")
    if metas:
        probe = metas[0]["events"]
        bad = {e: s for e, s in probe.items() if s != perf.OK}
        lines_.append("- events: " + ", ".join(f"{e} ({s})" if e in bad else e for e, s in probe.items()))
    if checks:
        lines_ += ["", "## The paper's claims (A64FX)", "", "| Fig. | claim | VL | ours | paper | verdict |", "|---|---|---:|---|---:|---|", *checks]
    lines_ += ["", "## Every cell", "", "Statistics are over processes; each process contributes its value per call.", "",
               "| kernel | variant | op/dtype | build | VL | size | metric | mean | std | min | max | unit |",
               "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    # Events without a value are listed once above; the table keeps the measured rows.
    for _, r in df[df["status"] == perf.OK].iterrows():
        stats = [f"{r[k]:.4g}" for k in ("mean", "std", "min", "max")]
        opd = "" if r["op"] == config.NO_OP else f"{r['op']}/{r['dtype']}"
        lines_.append(f"| {r['kernel']} | {r['variant']} | {opd} | {r['build']} | {r['vl']} | {r['size']} | "
                      f"{r['metric']} | " + " | ".join(stats) + f" | {r['unit']} |")
    return "\n".join(lines_) + "\n"


def main_stats(ns: argparse.Namespace) -> int:
    try:
        sweep = config.load_from_args(ns)
        df = table.read_stats(ns.stats)
        metas = [json.loads(f.read_text())["meta"] for f in ns.raw]
        cpu = next((m["cpu"] for m in metas if m["build"] == "host"), "host")
        if sweep.perf is None:
            raise config.ConfigError(f"{ns.sweep}: no perf section")
        for fig in sweep.perf.figures:
            plot_by_size(df, sweep.table, fig, sweep.results_dir / "figures" / f"{fig['name']}.png", cpu)
        checks = stats_check_rows(df, sweep.perf.checks, {k: list(v) for k, v in sweep.perf.sizes.items()}, sweep.table)
        ns.summary.write_text(stats_summary(df, metas, ns.message, checks))
    except (config.ConfigError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


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
        vls = sorted(set(sweep.vector_lengths) | set(sweep.vls_vector_lengths))
        fig_dir = sweep.results_dir / "figures"
        for f in figures(sweep, has_gem5=bool((counts["backend"] == "gem5").any())):
            series = [s for sel in f["series"] for s in select(counts, prov, sweep, sel, f)]
            if not series:
                raise ValueError(f"figure {f['name']}: no data for its series in {ns.counts}")
            if len({s.kernel for s in series}) > 1:
                for s in series:
                    s.label = f"{s.kernel}: {s.label}"
            plot_figure(f, series, fig_dir / f"{f['name']}.png", vls)
            if "baseline" in f:
                base = select(counts, prov, sweep, f["baseline"], f)
                if len(base) != 1:
                    raise ValueError(f"figure {f['name']}: baseline selects {len(base)} series (need one)")
                plot_ratio(f, base[0], series, fig_dir / f"{f['name']}_ratio.png", vls)
        has_gem5 = bool((counts["backend"] == "gem5").any())
        rows = [claim(c, counts, prov, sweep, has_gem5) for c in sweep.checks]
        explain.write_cells(sweep, counts, prov, discussed_cells(sweep), ns.summary.parent / "explain")
        write_summary(rows, counts, ns.summary, sweep, agreement(counts))
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
