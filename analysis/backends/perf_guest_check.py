"""perf in the emulated AArch64 guest against the QEMU plugins, in results/perf_summary.md (issue
35 item 4): its instruction counts equal the QEMU plugins' per cell, up to the stated constant.

Per cell, the fewest instructions:u a process of the guest counted (perf.csv's min per call, times
the calls) is calls x (the QEMU plugins' roi.total + w) - FIRST_ACK: w is what one enabled window
counts besides the ROI: 327 for perf's control round trip, +1 where the window runs SVE code, -
the QEMU build's longer call set-up (0 to 2): 326 to 328 and the same for every cell of one
binary (perf_guest; docs/guide/arm64-vm.md). The check is the one the DynamoRIO
stand-in's counts get (armie_guest): against the sweep's counting backend, cell by cell, with the
same reference, counts and tally; here the reference cells are those of the cross compiler that
built the guest's binaries, at the QEMU CPU model the guest emulates.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from analysis.backends import GUEST_META, armie_guest
from analysis.backends.perf_guest import EVENT, FIRST_ACK
from analysis.backends.perf_table import OK
from analysis.backends.registry import REGISTRY
from analysis.core.config import ConfigError
from analysis.core import perf_cells

if TYPE_CHECKING:
    from pandas import DataFrame

    from analysis.core.model import Sweep

# The instructions of an enabled window besides the ROI, as measured (the least and the most).
WINDOW = (326, 328)
# The QEMU CPU model the guest runs (-cpu max,...): the reference rows' cpu_model.
CPU_MODEL = perf_cells.REFERENCE_CPU
TITLE = "## perf in the guest against the QEMU plugins"


def compare(stats: DataFrame, metas: Sequence[dict[str, Any]], counts: DataFrame, sweep: Sweep) -> tuple[
        armie_guest.Result, dict[str, set[int]]]:
    """Each cell of the guest's raw files (`metas`) in the perf table against the reference
    backend's roi.total: the tally, and the windows w each binary's cells gave. In the guest w
    lies in WINDOW; on an emulated node (its meta says node) w is one per binary: the value most
    of the binary's cells give."""
    guest = {(m["kernel"], m["variant"], m["build"]): m for m in metas if m.get(GUEST_META)}
    backend = metas[0]["backend"]
    reference = armie_guest.reference_backend(sweep, backend)
    result = armie_guest.Result(REGISTRY[reference].EVIDENCE)
    want = armie_guest.reference_counts(counts, reference)
    windows: dict[str, set[int]] = {}
    # binary -> (w of the fewest, w of the most, line) of each of its cells on a node
    node: dict[str, list[tuple[float, float, str]]] = {}
    rows = stats[(stats["metric"] == EVENT) & (stats["status"] == OK)]
    for r in rows.itertuples(index=False):
        meta = guest.get((r.kernel, r.variant, r.build))
        # Not a run in the guest, or a host baseline of an emulated node (no SVE, no QEMU count).
        if meta is None or r.build != "vla":
            continue
        # glibc picks its memcpy by the CPU (ifunc): an emulated A64FX's runs compare with QEMU's a64fx model.
        cpu = meta[GUEST_META].get("cpu_model", CPU_MODEL)
        n_calls = meta["calls"]
        binary = f"{r.kernel}-{r.variant}"
        cell = f"{binary}{'' if r.op == '-' else f' {r.op}/{r.dtype}'} VL {r.vl} size {r.size}"
        result.compared += 1
        # The compiler the count jobs count perf's cells with.
        compiler = perf_cells.reference_compiler(sweep, r.compiler, r.build)
        ref = want.get((r.kernel, r.variant, r.op, r.dtype, r.build, cpu, compiler, r.vl, r.size))
        if ref is None or "roi.total" not in ref:
            result.failed.append(f"{cell}: no {result.reference} count ({compiler}, cpu {cpu})")
            continue
        fewest = round(r.min * n_calls)
        w = (fewest + FIRST_ACK) / n_calls - ref["roi.total"]
        line = (f"{cell}: perf {fewest} in a process of {n_calls} calls; {result.reference} roi.total "
                f"{ref['roi.total']}: w = {w:g}")
        if meta[GUEST_META].get("node"):
            most = (round(r.max * n_calls) + FIRST_ACK) / n_calls - ref["roi.total"]
            node.setdefault(binary, []).append((w, most, line))
        elif w.is_integer() and WINDOW[0] <= w <= WINDOW[1]:
            result.equal += 1
            windows.setdefault(binary, set()).add(int(w))
        else:
            result.differ.append(line)
    for binary, cells in node.items():
        # A node's window is not the guest's (docs/guide/arm64-node.md): the binary's usual w stands
        # for it. A node's process now and then counts less as well as more (measured: one of three
        # 30 a call fewer), so a cell whose fewest or most gives that w is equal; else it differs.
        usual = Counter(w for w, _, _ in cells if w.is_integer()).most_common(1)
        for w, most, line in cells:
            if usual and usual[0][0] in (w, most):
                result.equal += 1
                windows.setdefault(binary, set()).add(int(usual[0][0]))
            else:
                result.differ.append(line)
    return result, windows


def stats_report(stats: DataFrame, metas: Sequence[dict[str, Any]], counts: DataFrame | None,
                 sweep: Sweep) -> list[str]:
    """perf_summary.md's section on the guest's counts ([] when no job ran in the guest)."""
    if not any(m.get(GUEST_META) for m in metas):
        return []
    head = ["", TITLE, ""]
    if counts is None:
        return head + ["Not compared: the sweep counts no cell with a counting backend (backends: [])."]
    try:
        result, windows = compare(stats, metas, counts, sweep)
    except ConfigError as e:
        return head + [f"Not compared: {e}"]
    on_node = any(m[GUEST_META].get("node") for m in metas if m.get(GUEST_META))
    where, span = (("on the emulated node", "one per binary: the value most of its cells give") if on_node
                   else ("in the guest", f"{WINDOW[0]} to {WINDOW[1]}, one per binary"))
    lines = head + [
        f"Per cell, the fewest instructions:u of its processes {where} against calls x (the roi.total of the "
        f"{result.reference} + w) - {FIRST_ACK}, w the instructions of perf's control round trip in each window "
        f"({span}): {result.equal} of {result.compared} cells equal.", ""]
    lines += ["| binary | w |", "|---|---|"] + [f"| {b} | {', '.join(map(str, sorted(w)))} |" for b, w in sorted(windows.items())]
    several = [b for b, w in sorted(windows.items()) if len(w) > 1]
    if several:
        lines += ["", f"Not one w a binary: {', '.join(several)}."]
    lines += [""] * bool(result.differ or result.failed)
    lines += [f"- differs: {d}" for d in result.differ] + [f"- no count: {f}" for f in result.failed]
    return lines
