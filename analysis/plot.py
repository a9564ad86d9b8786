"""Plot/check stage: the paper's figures from the tidy table, and results/summary.md.

Figures show `roi_net.total` (ROI count at size n minus at size 0) against VL on a log2
axis, one line per variant (VLA build; VLS builds as open markers on the same colour),
plus a ratio figure (baseline / variant) per figure. The summary evaluates each
mechanical claim of the paper declared under `checks:` in the sweep configuration.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import config, explain, table  # noqa: E402

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
    vla: pd.Series  # VL -> count
    vls: pd.Series


def _first(values: list[Any]) -> Any:
    return values[0] if values else None


def select(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, sel: dict[str, Any]) -> list[Series]:
    """Expand a selector (variant optional) into series of roi_net.total at the family's first size."""
    kernel = sel["kernel"]
    variants = [sel["variant"]] if "variant" in sel else sweep.table.variants(kernel)
    df = counts[(counts["kernel"] == kernel) & (counts["metric"] == METRIC)]
    df = df[(df["cpu_model"] == _first(list(sweep.cpu_models))) & (df["compiler"] == sweep.compilers[0])
            & (df["backend"] == sweep.backends[0])]
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
                p = prov[(prov["kernel"] == kernel) & (prov["variant"] == v) & (prov["size"] == size)]
                label = label.replace("{roi_symbol}", "/".join(sorted(set(p["roi_symbol"]))) or "?")
            if op != config.NO_OP and "op" not in sel:
                label += f" [{op} {dtype}]"
            out.append(Series(
                kernel, v, op, dtype, label, row.role, size,
                g[g["build"] == "vla"].set_index("vl")["value"].sort_index(),
                g[g["build"] == "vls"].set_index("vl")["value"].sort_index(),
            ))
    return out


def _axes_vl(ax: plt.Axes, vls: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(vls)
    ax.set_xticklabels([str(v) for v in vls], rotation=90, fontsize=7)
    ax.set_xlabel("SVE vector length (bits)")
    ax.grid(True, which="both", alpha=0.3)


LINESTYLES = ["-", "--", ":", "-."]


def plot_figure(fig_cfg: dict[str, Any], series: list[Series], out: Path, vls: list[int]) -> None:
    # Kernels of one figure (pack, unpack) can coincide exactly: one line style per kernel.
    style = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(dict.fromkeys(s.kernel for s in series))}
    fig, ax = plt.subplots(figsize=(8, 6))
    for s in series:
        (line,) = ax.plot(s.vla.index, s.vla.values, marker="o", ms=3, label=s.label, ls=style[s.kernel],
                          lw=2.2 if s.role != "extra" else 1.2)
        if len(s.vls):
            ax.plot(s.vls.index, s.vls.values, ls="none", marker="s", mfc="none", color=line.get_color(), ms=7)
    ax.set_yscale("log")
    ax.set_ylabel("instructions in ROI, n minus baseline (roi_net)")
    ax.set_title(fig_cfg["title"], fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, title="lines: VLA build; squares: VLS build", title_fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_ratio(fig_cfg: dict[str, Any], base: Series, series: list[Series], out: Path, vls: list[int]) -> None:
    fig, ax = plt.subplots(figsize=(8, 6))
    for s in series:
        if s is base or (s.kernel, s.variant, s.op, s.dtype) == (base.kernel, base.variant, base.op, base.dtype):
            continue
        ratio = (base.vla / s.vla).dropna()
        ax.plot(ratio.index, ratio.values, marker="o", ms=3, label=s.label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"roi_net ratio: {base.variant} / variant")
    ax.set_title(f"{fig_cfg['title']}: ratio to {base.kernel} {base.variant}", fontsize=10)
    _axes_vl(ax, vls)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def per_vector(s: Series, sweep: config.Sweep, vl: int) -> float:
    """Instructions per VL-sized chunk of the measured data: the loop cost the ratio comes from."""
    return float(s.vla[vl]) / (s.size / (vl // 8))


def top_ops(counts: pd.DataFrame, s: Series, vl: int, n: int = 6) -> str:
    d = counts[(counts["kernel"] == s.kernel) & (counts["variant"] == s.variant) & (counts["op"] == s.op)
               & (counts["dtype"] == s.dtype) & (counts["vl"] == vl) & (counts["size"] == s.size)
               & (counts["build"] == "vla") & counts["metric"].str.startswith("roi_net.op.")]
    d = d.sort_values("value", ascending=False).head(n)
    return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))


def top_funcs(counts: pd.DataFrame, s: Series, vl: int, n: int = 3) -> str:
    d = counts[(counts["kernel"] == s.kernel) & (counts["variant"] == s.variant) & (counts["op"] == s.op)
               & (counts["dtype"] == s.dtype) & (counts["vl"] == vl) & (counts["build"] == "vla")
               & (counts["size"] == s.size) & counts["metric"].str.startswith("roi_net.func.")]
    d = d[d["value"] != 0].sort_values("value", ascending=False).head(n)
    return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))


def evaluate(check: dict[str, Any], counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> dict[str, Any]:
    """One row of the summary: the paper's value, ours, pass/fail and the codegen reason."""
    tol = check.get("tolerance", 0.1)
    kind = check["kind"]

    def one(key: str) -> Series:
        found = select(counts, prov, sweep, check[key])
        if len(found) != 1:
            raise ValueError(f"check {check['id']}: {key} selects {len(found)} series (need exactly one)")
        return found[0]

    if kind in ("ratio", "ratio_range"):
        num, den = one("numerator"), one("denominator")
        ratio = (num.vla / den.vla).dropna()
        if kind == "ratio":
            ok = bool(((ratio - check["target"]).abs() <= tol * check["target"]).all())
            paper = f"{check['target']:g}"
        else:
            ok = bool(((ratio >= check["min"]) & (ratio <= check["max"])).all())
            paper = f"{check['min']:g} .. {check['max']:g}"
        ours = f"{ratio.min():.3g} .. {ratio.max():.3g} (VL {ratio.idxmin()} .. {ratio.idxmax()})"
        lo, hi = min(ratio.index), max(ratio.index)
        reason = (
            f"{num.variant}: {per_vector(num, sweep, lo):.3g} insns per vector of data at VL {lo}, "
            f"{per_vector(num, sweep, hi):.3g} at VL {hi}; {den.variant}: {per_vector(den, sweep, lo):.3g} / "
            f"{per_vector(den, sweep, hi):.3g}. Hot opcodes at VL {lo}: {num.variant}: "
            f"{top_ops(counts, num, lo)}; {den.variant}: {top_ops(counts, den, lo)}"
        )
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
        reason = (f"{s.variant}: {per_vector(s, sweep, lo):.3g} insns per vector of data at VL {lo}, "
                  f"{per_vector(s, sweep, hi):.3g} at VL {hi}; functions in the ROI at VL {lo}: "
                  f"{top_funcs(counts, s, lo)}; at VL {hi}: {top_funcs(counts, s, hi)}")
    return {"id": check["id"], "figure": check["figure"], "claim": check["claim"], "paper": paper,
            "ours": ours, "result": "pass" if ok else "FAIL", "reason": reason, "note": check.get("note", "")}


def write_summary(rows: list[dict[str, Any]], counts: pd.DataFrame, path: Path, sweep: config.Sweep) -> None:
    flags = counts[(counts["metric"] == "roi_net.nonlinear") & (counts["value"] == 1)]
    cells = explain.discussed_cells(sweep)
    lines = [
        "# Summary: the paper's mechanical claims against this sweep",
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
    lines += ["", "## Why (codegen per check)", ""]
    for r in rows:
        lines.append(f"- **{r['id']}** ({r['result']}): {r['reason']}." + (f" Note: {r['note']}" if r["note"] else ""))
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    p.add_argument("--counts", required=True, type=Path)
    p.add_argument("--provenance", required=True, type=Path)
    p.add_argument("--summary", required=True, type=Path)
    ns = p.parse_args(argv)
    try:
        sweep = config.load_from_args(ns)
        counts = table.read_counts(ns.counts)
        prov = pd.read_csv(ns.provenance, dtype={"op": str, "dtype": str}, keep_default_na=False)
        vls = sorted(set(sweep.vector_lengths) | set(sweep.vls_vector_lengths))
        fig_dir = sweep.results_dir / "figures"
        for f in sweep.figures:
            series = [s for sel in f["series"] for s in select(counts, prov, sweep, sel)]
            if not series:
                raise ValueError(f"figure {f['name']}: no data for its series in {ns.counts}")
            if len({s.kernel for s in series}) > 1:
                for s in series:
                    s.label = f"{s.kernel}: {s.label}"
            plot_figure(f, series, fig_dir / f"{f['name']}.png", vls)
            if "baseline" in f:
                base = select(counts, prov, sweep, f["baseline"])
                if len(base) != 1:
                    raise ValueError(f"figure {f['name']}: baseline selects {len(base)} series (need one)")
                plot_ratio(f, base[0], series, fig_dir / f"{f['name']}_ratio.png", vls)
        rows = [evaluate(c, counts, prov, sweep) for c in sweep.checks]
        explain.write_cells(sweep, counts, prov, explain.discussed_cells(sweep), ns.summary.parent / "explain")
        write_summary(rows, counts, ns.summary, sweep)
    except (config.ConfigError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
