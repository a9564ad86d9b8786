"""What the reports make of the simeng backend's rows: SimEng/gem5 cycles per cell with their
spread and SimEng's ROI instructions against QEMU's (results/summary.md), and the perf figures'
times estimated from SimEng's cycles (Fig. 11, 12 without an A64FX; analysis.stages.plot draws
them apart from perf's)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analysis.backends import Estimate
from analysis.backends.perf_table import BANDWIDTH, OK, TIME, traffic_bytes
from analysis.backends.simeng_output import END_MARKER

if TYPE_CHECKING:  # annotations only
    from pandas import DataFrame

    from analysis.core.kernels import KernelTable

NAME = "simeng"  # the backend whose rows these are (analysis.backends.simeng.NAME)
# What SimEng's times are wherever they stand beside measured ones: a model's estimate (the
# A64FX configuration's; another core's label names that core).
LABEL = "SimEng A64FX core model, fixed-latency memory"
CORE_NAMES = {"a64fx": "A64FX"}


def label(core: str) -> str:
    """What SimEng's times of a core are, wherever they are shown."""
    return LABEL.replace("A64FX", CORE_NAMES.get(core, core))


# The other cycle model its cycles are compared with, and what its rows say when it has none.
OTHER = "gem5"
OTHER_NOT_RUN = "gem5 not run: gem5 not found (./harness setup --with-gem5)"
# The counting backend its instructions are compared with, and on which CPU model (gem5's the same).
COUNTED_BY, COUNTED_ON = "qemu", "max"
KEY = ["kernel", "variant", "op", "dtype", "compiler", "vl", "size"]


def cycle_ratios(counts: DataFrame, prov: DataFrame) -> DataFrame:
    """One row per SimEng cell (run or not) and gem5 system: its cycles, gem5's of the same kernel
    object, VL and size on that system (`system`; "" where gem5 has no rows), SimEng/gem5, and
    what stands in the ratio's place when either has no cycles."""
    mine = prov[(prov["backend"] == NAME) & (prov["build"] == "vla")]
    cells = mine[KEY + ["cpu_model"] + (["not_run"] if "not_run" in mine else [])].rename(columns={"cpu_model": "core"})
    if "not_run" not in cells:
        cells["not_run"] = ""
    cyc = counts[(counts["metric"] == f"{NAME}.cycles") & (counts["backend"] == NAME)]
    cells = cells.merge(cyc[KEY + ["value"]].rename(columns={"value": "simeng"}), on=KEY, how="left")
    other = counts[(counts["metric"] == f"{OTHER}.cycles") & (counts["backend"] == OTHER)]
    any_gem5 = len(other) > 0

    def status(r: Any) -> str:
        if isinstance(r.not_run, str) and r.not_run:
            return f"SimEng not run: {r.not_run}"
        if r.gem5 != r.gem5:  # NaN: gem5 has no such cell
            return "gem5 not run: no gem5 cell at this VL and size" if any_gem5 else OTHER_NOT_RUN
        return ""
    if any_gem5:  # each SimEng cell once per gem5 system
        systems = other[["cpu_model"]].drop_duplicates().rename(columns={"cpu_model": "system"})
        on = other[KEY + ["cpu_model", "value"]].rename(columns={"cpu_model": "system", "value": "gem5"})
        out = cells.merge(systems, how="cross").merge(on, on=KEY + ["system"], how="left")
    else:
        out = cells.assign(system="", gem5=float("nan"))
    out["status"] = [status(r) for r in out.itertuples()]
    ok = out["status"] == ""
    out["ratio"] = float("nan")
    out.loc[ok, "ratio"] = out.loc[ok, "simeng"] / out.loc[ok, "gem5"]
    return out.sort_values(KEY + ["system"], kind="stable").reset_index(drop=True)


def spread(ratios: DataFrame) -> str:
    """The ratios' spread in one line: how many, min, median, max (and where)."""
    r = ratios.dropna(subset=["ratio"])
    if not len(r):
        return "no cell has cycles from both models"
    lo, hi = r.loc[r["ratio"].idxmin()], r.loc[r["ratio"].idxmax()]
    return (f"{len(r)} cells: min {lo['ratio']:.3g} ({lo['kernel']} {lo['variant']} VL {lo['vl']}), median "
            f"{r['ratio'].median():.3g}, max {hi['ratio']:.3g} ({hi['kernel']} {hi['variant']} VL {hi['vl']})")


def spreads(ratios: DataFrame) -> str:
    """The spread over each gem5 system, named where there are several."""
    systems = sorted(set(ratios["system"]))
    if len(systems) == 1:
        return f"Spread: {spread(ratios)}."
    return " ".join(f"Spread over gem5 {s}: {spread(ratios[ratios['system'] == s])}." for s in systems)


def report(counts: DataFrame, prov: DataFrame) -> list[str]:
    """results/summary.md's section on SimEng: SimEng/gem5 cycles per cell and gem5 system with
    their spread, its cells not run (counted), and its ROI instructions against QEMU's."""
    if "backend" not in prov or not (prov["backend"] == NAME).any():
        return []
    r = cycle_ratios(counts, prov)
    cells = r.drop_duplicates(KEY)
    not_run = cells[cells["status"].str.startswith("SimEng not run")]
    cores = sorted(set(r["core"]))
    lines = ["", "## SimEng/gem5 cycles per cell", "",
             f"ROI cycles of SimEng's {', '.join(cores)} core ({label(cores[0])}) over gem5's O3 ROI cycles of the "
             f"same binary's code, VL and size, on each gem5 system. {spreads(r)} "
             f"SimEng cells not run: {len(not_run)} of {len(cells)}.",
             "", "| kernel | variant | op | dtype | compiler | VL | size | SimEng cycles | gem5 system | gem5 cycles "
             "| SimEng/gem5 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in r.itertuples():
        sim = "-" if c.simeng != c.simeng else f"{c.simeng:.0f}"
        g = "-" if c.gem5 != c.gem5 else f"{c.gem5:.0f}"
        ratio = c.status or f"{c.ratio:.3f}"
        lines.append(f"| {c.kernel} | {c.variant} | {c.op} | {c.dtype} | {c.compiler} | {c.vl} | {c.size} | {sim} | "
                     f"{c.system or '-'} | {g} | {ratio} |")
    return lines + agreement_report(counts)


def agreement_report(counts: DataFrame) -> list[str]:
    """SimEng's retired ROI instructions against QEMU's roi.total of the same binary's code: the
    end marker apart, expected equal."""
    s = counts[(counts["backend"] == NAME) & (counts["metric"] == f"{NAME}.retired")]
    q = counts[(counts["backend"] == COUNTED_BY) & (counts["metric"] == "roi.total") & (counts["build"] == "vla")
               & (counts["cpu_model"] == COUNTED_ON)]
    m = s.merge(q, on=KEY, suffixes=("_s", "_q"))
    if not len(m):
        return []
    bad = m[m["value_s"] - m["value_q"] != END_MARKER]
    shown = ", ".join(f"{b.kernel} {b.variant} VL {b.vl} ({b.value_s} vs {b.value_q})" for b in bad.head(5).itertuples())
    return ["", f"SimEng's retired ROI instructions equal QEMU's roi.total + {END_MARKER} (the end marker) on "
            f"{len(m) - len(bad)} of {len(m)} cells" + (f": not on {shown}." if len(bad) else ".")]


CELL = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl", "size"]


def estimates(counts: DataFrame, prov: DataFrame, table: KernelTable) -> Estimate | None:
    """Each SimEng cell's ROI (one kernel call) as perf.csv's time per call, cycles at the
    configuration's clock, and bandwidth where the kernel table declares the traffic: a model's
    estimate under its label (analysis.stages.plot draws the perf figures of it, apart from
    perf's). None unless a line (kernel, variant, VL) has two sizes: a figure against size needs
    them (configs/simeng.yaml's one size per family draws none)."""
    mine = counts[counts["backend"] == NAME]
    cycles = mine[mine["metric"] == f"{NAME}.cycles"]
    if not len(cycles) or cycles.groupby(["kernel", "variant", "op", "dtype", "vl"])["size"].nunique().max() < 2:
        return None
    clock = mine[mine["metric"] == f"{NAME}.clock_mhz"][CELL + ["value"]].rename(columns={"value": "mhz"})
    rows = []
    for r in cycles.merge(clock, on=CELL).to_dict("records"):
        ns = r["value"] * 1000 / r["mhz"]
        key = {k: r[k] for k in CELL}
        rows.append({**key, "metric": TIME, "status": OK, "unit": "ns", "n": 1, "mean": ns, "std": 0.0, "min": ns,
                     "max": ns})
        moved = traffic_bytes(table.families[table.row(r["kernel"], r["variant"]).family].traffic or {}, r["size"])
        if moved is not None:
            rows.append({**key, "metric": BANDWIDTH, "status": OK, "unit": "GB/s", "n": 1, "mean": moved / ns,
                         "std": 0.0, "min": moved / ns, "max": moved / ns})
    return Estimate(label(str(cycles["cpu_model"].iloc[0])), rows)
