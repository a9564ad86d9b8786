"""The reports the plot stage writes: results/summary.md (the verdict table with the data each
verdict rests on, every claim and its lines, the codegen reasons, the backends' own sections
(gem5 against QEMU), the explained cells, linearity, the ratio tables) and results/perf_summary.md
(machine, settings, the timing claims, every cell's statistics).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from analysis.backends import perf_table  # perf.csv: its statuses
from analysis.core import config
from analysis.stages.checks import Claim
from analysis.stages.plotplan import discussed_cells
from analysis.stages.series import select

# The metric a check compares when it names none, as the summary states it.
CHECK_METRIC = config.schema_default(config.SWEEP_SCHEMA, "properties", "checks", "items", "properties", "metric")


def verdict_table(claims: list[Claim]) -> list[str]:
    """The summary's opening table (and the README's): claim, paper, ours, verdict, and whose data
    the verdict rests on (Claim.evidence: from the provenance of the rows it read)."""
    out = ["| claim | paper | ours | verdict | evidence |", "|---|---|---|---|---|"]
    for r in claims:
        cell = r.verdict.text() if r.verdict is not None else r.result
        out.append(f"| Fig. {r.check.figure}: {r.check.claim} | {r.paper} | {r.ours} | {cell} | {r.evidence} |")
    if not claims:
        out.append("| (no checks configured) | | | | |")
    return out


def judgment(claim: Claim) -> str:
    """A check's one judgment, wherever the summary names it: its verdict and the cause or line
    after the colon. The own line's pass or FAIL alone read as a second verdict that contradicted
    the first (FAIL beside 'reproduced under the paper's conditions')."""
    return claim.verdict.verdict if claim.verdict is not None else claim.result


def ratio_tables(counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> list[str]:
    """Markdown: baseline / series per VL for each figure that asks for it (`ratio_table: true`),
    with the baseline's own counts first: the measured ratios a reader compares with the paper's."""
    lines: list[str] = []
    for f in sweep.figures:
        if not f.ratio_table or f.baseline is None:
            continue
        base = select(counts, prov, sweep, f.baseline, f)
        series = [s for sel in f.series for s in select(counts, prov, sweep, sel, f)]
        if len(base) != 1 or not series:
            continue
        vls = sorted(base[0].vla.index)
        lines += ["", f"## {f.title}: ratios per VL", "",
                  f"ROI net instructions of the baseline ({base[0].variant}: {base[0].label}), then baseline / line.", "",
                  "| line | " + " | ".join(f"VL {v}" for v in vls) + " |", "|---|" + "---|" * len(vls),
                  f"| {base[0].variant} (instructions) | " + " | ".join(f"{base[0].vla[v]:.0f}" for v in vls) + " |"]
        for s in series:
            if s.variant == base[0].variant:
                continue
            cells = [f"{base[0].vla[v] / s.vla[v]:.3g}" if v in s.vla.index and s.vla[v] else "-" for v in vls]
            lines.append(f"| {base[0].variant} / {s.variant} | " + " | ".join(cells) + " |")
    return lines


def write_summary(claims: list[Claim], counts: pd.DataFrame, path: Path, sweep: config.Sweep,
                  reports: Sequence[str] = ()) -> None:
    """`reports`: the backends' own lines on their rows (Backend.report), after the reasons."""
    flags = counts[(counts["metric"] == "roi_net.nonlinear") & (counts["value"] == 1)]
    cells = discussed_cells(sweep)
    lines = [
        "# Summary: the paper's mechanical claims against this sweep",
        "",
        "Verdicts: `reproduced` (the harness as built gives the paper's number); `reproduced under the paper's "
        "conditions` (a line with the paper's condition does, e.g. 2019's non-SVE memcpy; the pair names the one "
        "factor); `differs: <cause>`, with the isolating pair: two lines that differ in one factor, and their numbers.",
        "",
        *verdict_table(claims),
        "",
        f"Sweep `{sweep.path}`; metric `{CHECK_METRIC}` (ROI count at size n minus at size 0), VLA build, "
        f"CPU model {next(iter(sweep.cpu_models), None)}, compiler {sweep.compilers[0]}, backend {sweep.backends[0]}. "
        "Toolchain differs from the paper's (GCC 12 vs Arm HPC Compiler 19.2 / GCC 8.2; QEMU plugins vs ArmIE): "
        "compare ratios and trends, not absolute counts.",
        "",
        "Each check's own line beside its verdict (the table above; the lines below give every line's number):",
        "",
        "| check | fig | paper's claim | paper | ours (own line) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in claims:
        lines.append(f"| {r.check.id} | {r.check.figure} | {r.check.claim} | {r.paper} | {r.ours} | {judgment(r)} |")
    if not claims:
        lines.append("| (no checks configured) | | | | | |")
    lines += ["", "## Lines per check (each condition differs from the check's own line in one factor)", "",
              "| check | line | factor | ours | paper's number |", "|---|---|---|---|---|"]
    for r in claims:
        for ln in r.lines:
            got = "no data" if ln.ok is None else ("yes" if ln.ok else "no")
            lines.append(f"| {r.check.id} | {ln.name}{' (paper)' if ln.paper else ''} | {ln.factor or '(own line)'} | "
                         f"{ln.ours} | {got} |")
    lines += ["", "## Why (codegen per check)", ""]
    for r in claims:
        note = r.check.note
        lines.append(f"- **{r.check.id}** ({judgment(r).split(':', 1)[0]}): {r.reason}." + (f" Note: {note}" if note else ""))
        lines += [f"  - hot loops, {x}" for x in r.loops]
    lines += reports
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


def stats_summary(df: pd.DataFrame, metas: list[dict[str, Any]], messages: list[str], checks: list[str] | None = None,
                  reports: Sequence[str] = ()) -> str:
    """results/perf_summary.md. `metas`: the perf raw files' records of what each job ran with;
    `reports`: the backends' own lines (stats_report), after the claims."""
    lines_ = ["# perf measurements (native runs)", ""]
    lines_ += [f"- {m}" for m in messages]
    for meta in {(m["build"], m["cpu"]): m for m in metas}.values():
        # Runs in the emulated AArch64 guest name the guest's counting tool, their compiler and the guest.
        guest = meta.get("guest")
        where = "on the node" if guest and guest.get("node") else "in the guest"
        tools = (f"{guest['counter']} {where} ({guest['kernel']}; {guest['emulator']}); {guest['compiler']}" if guest
                 else f"{meta['versions'][meta['backend']]}; {_compiler(meta['versions'])}")
        lines_.append(f"- build {meta['build']}: {meta['cpu']}; {tools}; {meta['processes']} processes x {meta['calls']} "
                      f"calls (+{meta['warmup']} warm-up)" + ("" if guest else f", pinned to CPU {meta['core']}"))
    if metas:
        probe = metas[0]["events"]
        bad = {e: s for e, s in probe.items() if s != perf_table.OK}
        lines_.append("- events: " + ", ".join(f"{e} ({s})" if e in bad else e for e, s in probe.items()))
    if checks:
        lines_ += ["", "## The paper's claims", "", "| Fig. | claim | VL | ours | paper | verdict | evidence |",
                   "|---|---|---:|---|---:|---|---|", *checks]
    lines_ += reports
    lines_ += ["", "## Every cell", "", "Statistics are over processes; each process contributes its value per call.", "",
               "| kernel | variant | op/dtype | build | VL | size | metric | mean | std | min | max | unit |",
               "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    # Events without a value are listed once above; the table keeps the measured rows.
    for _, r in df[df["status"] == perf_table.OK].iterrows():
        stats = [f"{r[k]:.4g}" for k in ("mean", "std", "min", "max")]
        opd = "" if r["op"] == config.NO_OP else f"{r['op']}/{r['dtype']}"
        lines_.append(f"| {r['kernel']} | {r['variant']} | {opd} | {r['build']} | {r['vl']} | {r['size']} | "
                      f"{r['metric']} | " + " | ".join(stats) + f" | {r['unit']} |")
    return "\n".join(lines_) + "\n"


def _compiler(versions: dict[str, str]) -> str:
    """The version line of the compiler that built a job's binary (its plan records one:
    toolchain.stamp_name)."""
    return next((v for k, v in versions.items() if k.startswith("compiler.")), "?")
