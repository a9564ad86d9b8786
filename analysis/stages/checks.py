"""Check evaluation: each of the sweep's checks (config.Check, one class per kind) evaluated on
the counts, on its own line and on each of its conditions, with its verdict and the codegen facts
the summary gives as the reason; and the perf table's timing claims.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.backends import perf_table  # perf.csv: its statuses
from analysis.backends.registry import REGISTRY
from analysis.core import config
from analysis.stages import explain, verdict
from analysis.stages.plotplan import Cell
from analysis.stages.series import Series, match_stats, rows, select


@dataclass
class TableData:
    """config.CountData over the tables: what a check reads (analysis.core.checks)."""
    counts: pd.DataFrame
    prov: pd.DataFrame
    sweep: config.Sweep

    def one(self, check: config.Check, key: str, sel: config.Selector) -> Series:
        found = select(self.counts, self.prov, self.sweep, sel, check)
        if len(found) != 1:
            raise ValueError(f"check {check.id}: {key} selects {len(found)} series (need exactly one)")
        return found[0]

    def _top(self, s: Series, vl: int, prefix: str) -> pd.DataFrame:
        d = rows(self.counts, kernel=s.kernel, variant=s.variant, vl=vl, size=s.size, build="vla", op=s.op, dtype=s.dtype)
        return d[d["metric"].str.startswith(prefix)]

    def hot_ops(self, s: Series, vl: int, n: int = 6) -> str:
        d = self._top(s, vl, "roi_net.op.").sort_values("value", ascending=False).head(n)
        return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))

    def functions(self, s: Series, vl: int, n: int = 3) -> str:
        d = self._top(s, vl, "roi_net.func.")
        d = d[d["value"] != 0].sort_values("value", ascending=False).head(n)
        return ", ".join(f"{m.split('.', 2)[2]} {v}" for m, v in zip(d["metric"], d["value"]))

    def gem5_context(self, check: config.Check, s: Series, vl: int) -> str:
        d = rows(self.counts, kernel=s.kernel, variant=s.variant, vl=vl, size=s.size, backend=check.backend,
                 cpu_model=check.cpu_model, op=s.op, dtype=s.dtype)
        v = dict(zip(d["metric"], d["value"]))
        return (f"{s.variant} at VL {vl}: IPC {v.get('gem5.ipc_milli', 0) / 1000:.2f}, "
                f"L1D misses {v.get('gem5.l1d_misses')}, L2 misses {v.get('gem5.l2_misses')}")


@dataclass
class Claim:
    """One row of the summary: a check, the paper's value, ours, pass/fail, the reason, and the
    verdict from the check's own line and its conditions."""
    check: config.Check
    paper: str
    ours: str
    result: str  # pass | FAIL | skipped
    reason: str
    verdict: verdict.Verdict | None = None
    lines: list[verdict.Line] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    evidence: str = ""  # whose data the verdict rests on (`evidence`)


def evidence(check: config.Check, prov: pd.DataFrame) -> str:
    """Whose data a check's verdict rests on: as the provenance of the runs its own line and each
    condition read records it (provenance.csv's evidence column: DynamoRIO in the guest, not the
    ArmIE the sweep file names, where the armie rows were counted there); a line without runs
    names its backend's data as designed (Backend.EVIDENCE: the data it would rest on)."""
    names: list[str] = []
    for line in (check, *(c.check for c in check.conditions)):
        found: list[str] = []
        if "evidence" in prov:  # a provenance table of an older harness has no such column
            d = rows(prov, backend=line.backend, cpu_model=line.cpu_model, compiler=line.compiler)
            read = pd.Series(False, index=d.index)
            for sel in line.selectors().values():
                read |= (d["kernel"] == sel.kernel) & ((d["variant"] == sel.variant) if sel.variant is not None else True)
            found = sorted(set(d[read]["evidence"]))
        names += found or [REGISTRY[line.backend].EVIDENCE]
    return ", ".join(dict.fromkeys(names))


def loop_facts(check: config.Check, counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep) -> str:
    """Per-iteration instructions of the hot loop of each series of a count check at the
    lowest VL (what `./harness explain` prints): where a ratio between two lines comes from."""
    if not check.metric.startswith("roi_net.") or check.is_gem5 or check.cpu_model is None:
        return ""
    out = []
    for sel in check.selectors().values():
        for s in select(counts, prov, sweep, sel, check):
            vl = int(min(s.vla.index))
            cell = Cell(s.kernel, s.variant, s.op, s.dtype, "vla", check.cpu_model, check.backend, s.compiler, vl, s.size)
            try:
                loop = explain.cell_hot_loop(cell, sweep, prov)
            except (config.ConfigError, FileNotFoundError, IndexError, KeyError):
                loop = None
            out.append(f"{s.compiler} {s.variant}: " + (
                f"`{loop.function}` {len(loop.body)} insns per iteration x {loop.iterations} iterations at VL {vl}"
                if loop else "no loop in the ROI's own code"))
    return "; ".join(out)


def claim(check: config.Check, counts: pd.DataFrame, prov: pd.DataFrame, sweep: config.Sweep, ran: Collection[str]) -> Claim:
    """A check evaluated on its own line and on each of its conditions, with its verdict; skipped
    when its backend may not run (Backend.NOT_RUN) and did not (`ran`: the backends with rows)."""
    missing = None if check.backend in ran else REGISTRY[check.backend].NOT_RUN
    not_run = f"{missing[0]}, {missing[1]}" if missing else None
    data = TableData(counts, prov, sweep)
    if missing:
        row = Claim(check, check.paper_value(), "-", "skipped", f"no {check.backend} rows: {missing[1]} ({missing[0]})")
    else:
        ev = check.evaluate(data)
        row = Claim(check, ev.paper, ev.ours, "pass" if ev.ok else "FAIL", ev.reason)
    own = verdict.Line(check.own_line_name(), None if not_run else row.result == "pass", row.ours)
    lines, loops = [own], [f"{own.name}: {loop_facts(check, counts, prov, sweep)}"] if not not_run else []
    for cond in check.conditions:
        try:
            r = None if not_run else cond.check.evaluate(data)
        except ValueError:  # this sweep has no rows for the condition's line
            r = None
        lines.append(verdict.Line(cond.line, None if r is None else r.ok, "no data" if r is None else r.ours,
                                  cond.factor, cond.paper))
        if r is not None:
            loops.append(f"{cond.line}: {loop_facts(cond.check, counts, prov, sweep)}")
    row.verdict = verdict.decide(own, lines[1:], check.cause, not_run)
    row.evidence = evidence(check, prov)
    row.lines = lines
    row.loops = [x for x in loops if not x.endswith(": ")]
    return row


def stats_evidence(metas: Sequence[dict[str, Any]], *sels: config.Selector) -> str:
    """Whose data a claim on the perf table rests on: as the raw files of its SVE runs record it
    (Backend.evidence: perf in the guest, perf on A64FX), "-" where none ran."""
    names = {REGISTRY[m["backend"]].evidence(m) for m in metas if m["build"] == "vla" and any(
        m["kernel"] == s.kernel and s.variant in (None, m["variant"]) for s in sels)}
    return ", ".join(sorted(names)) or "-"


def perf_claims(df: pd.DataFrame, section: config.PerfSection, table: config.KernelTable,
                guest: str | None = None, metas: Sequence[dict[str, Any]] = ()) -> list[str]:
    """One Markdown row per (timing claim, VL): our ratio beside the paper's, or why there is none,
    and whose data it rests on (`metas`: the raw files' meta). `guest`: the SVE runs were made in
    the emulated guest (its label): no timing claim is checked."""
    out = []
    sve_vls = sorted(v for v in df["vl"].unique() if v > 0)
    for chk in section.checks:
        ev = stats_evidence(metas, chk.numerator, chk.denominator)
        if guest and chk.metric in (perf_table.TIME, perf_table.BANDWIDTH):
            out.append(f"| {chk.figure} | {chk.claim} | - | not measured: {guest} | {chk.target} | - | {ev} |")
            continue
        size = chk.size if chk.size is not None else max(section.sizes[table.selector_family(chk.numerator).name])
        vls = chk.vector_lengths if chk.vector_lengths is not None else sve_vls
        if not sve_vls:
            out.append(f"| {chk.figure} | {chk.claim} | - | not measured: no SVE runs on this machine | {chk.target} | - | "
                       f"{ev} |")
            continue
        for vl in vls:
            def mean(sel: config.Selector) -> float | None:
                d = match_stats(df, sel)
                d = d[(d["metric"] == chk.metric) & (d["vl"] == vl) & (d["size"] == size) & (d["status"] == perf_table.OK)]
                return float(d["mean"].iloc[0]) if len(d) == 1 else None

            num, den = mean(chk.numerator), mean(chk.denominator)
            if num is None or not den:
                out.append(f"| {chk.figure} | {chk.claim} | {vl} | no data at size {size} | {chk.target} | - | {ev} |")
                continue
            ratio = num / den
            out.append(f"| {chk.figure} | {chk.claim} | {vl} | {ratio:.3g} ({chk.metric}, {size} B) | {chk.target} | "
                       f"{'pass' if chk.evaluate(ratio) else 'FAIL'} | {ev} |")
    return out
