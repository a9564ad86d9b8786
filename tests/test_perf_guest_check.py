"""perf in the guest against the QEMU plugins in results/perf_summary.md
(analysis.backends.perf_guest_check): per cell, the fewest instructions:u of a process is
calls x (roi.total + w) - 27, w in 326..328 and one per binary, checked as the DynamoRIO stand-in's
counts are (armie_guest's reference, counts and tally). Synthetic tables, nothing runs."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd
import pytest

from analysis.backends import perf, perf_guest_check
from analysis.core import config
from analysis.stages import summary
from conftest import REPO

CALLS = 10
GUEST = {"kernel": "Linux 6.1.0-56-arm64", "emulator": "QEMU 7.2", "guest_command": "qemu-system-aarch64 -icount shift=0",
         "counter": "perf version 6.1.192", "compiler": "aarch64-linux-gnu-gcc 12.2.0", "seconds": 1.0}
# (kernel, variant, op, dtype, VL, size): QEMU's roi.total, and the window w the guest's fewest count gives.
CELLS = {("pack", "acle", "-", "float", 128, 4096): (3000, 326), ("pack", "acle", "-", "float", 512, 4096): (900, 326),
         ("reduce", "acle", "max", "float", 256, 4096): (700, 328),
         ("reduce", "acle", "max", "float", 512, 4096): (400, 329),  # one more than the window allows: differs
         ("pack", "acle", "-", "float", 256, 65536): (None, 326)}  # QEMU did not count it


def guest_sweep() -> config.Sweep:
    sweep = config.load(REPO / "configs" / "default.yaml")
    assert sweep.perf is not None
    return dataclasses.replace(sweep, perf=dataclasses.replace(sweep.perf, sve="guest"))


def _meta(kernel: str, variant: str, build: str, guest: bool) -> dict[str, Any]:
    return {"backend": "perf", "kernel": kernel, "variant": variant, "build": build, "calls": CALLS,
            "cpu": "emulated" if guest else "x86", **({"guest": GUEST} if guest else {})}


def _tables() -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """perf.csv of the cells (and one host baseline, which is not compared), counts.csv of
    QEMU's rows, the raw files' metas."""
    stats, counts = [], []
    for (kernel, variant, op, dtype, vl, size), (roi, w) in CELLS.items():
        fewest = CALLS * ((roi or 1000) + w) - 27
        per_call = [fewest / CALLS, (fewest + 18 * CALLS) / CALLS]  # the fewest, and a process above it
        stats.append({"kernel": kernel, "variant": variant, "op": op, "dtype": dtype, "layout": "-", "build": "vla",
                      "cpu_model": "native", "backend": "perf", "compiler": "native", "vl": vl, "size": size,
                      "metric": "instructions", "status": "ok", "unit": "", "n": 30, "mean": sum(per_call) / 2,
                      "std": 1.0, "min": min(per_call), "max": max(per_call), "running_pct": 100.0})
        if roi is not None:
            for compiler, cpu, value in (("gcc", "max", roi), ("clang", "max", roi + 5), ("gcc", "a64fx", roi + 7)):
                counts.append({"kernel": kernel, "variant": variant, "op": op, "dtype": dtype, "layout": "-",
                               "build": "vla", "cpu_model": cpu, "backend": "qemu", "compiler": compiler, "vl": vl,
                               "size": size, "metric": "roi.total", "value": value})
    stats.append({**stats[0], "build": "host", "vl": 0, "min": 5.0, "variant": "blocks_call"})
    metas = [_meta("pack", "acle", "vla", True), _meta("reduce", "acle", "vla", True),
             _meta("pack", "blocks_call", "host", False)]
    return pd.DataFrame(stats).assign(running_pct=math.nan), pd.DataFrame(counts), metas


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_the_guest_s_counts_are_compared_cell_by_cell_with_qemu_s(arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on either host: the guest's binaries are the cross gcc's wherever the tables are
    read (on arm64 the native compiler is the host's own gcc; the node's test run saw 0 of 5)."""
    monkeypatch.setenv("HARNESS_HOST_ARCH", arch)
    stats, counts, metas = _tables()
    lines = perf.stats_report(stats, metas, counts, guest_sweep())
    assert lines == [
        "", "## perf in the guest against the QEMU plugins", "",
        "Per cell, the fewest instructions:u of its processes in the guest against calls x (the roi.total of the "
        "QEMU plugins + w) - 27, w the instructions of perf's control round trip in each window (326 to 328, one per "
        "binary): 3 of 5 cells equal.", "",
        "| binary | w |", "|---|---|", "| pack-acle | 326 |", "| reduce-acle | 328 |", "",
        "- differs: reduce-acle max/float VL 512 size 4096: perf 7263 in a process of 10 calls; QEMU plugins roi.total "
        "400: w = 329",
        "- no count: pack-acle VL 256 size 65536: no QEMU plugins count (gcc, cpu max)"]


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_a_binary_whose_cells_give_two_windows_is_named(arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_HOST_ARCH", arch)
    stats, counts, metas = _tables()
    counts.loc[(counts["variant"] == "acle") & (counts["vl"] == 512) & (counts["kernel"] == "pack"), "value"] -= 1
    lines = perf.stats_report(stats, metas, counts, guest_sweep())
    assert "| pack-acle | 326, 327 |" in lines and "Not one w a binary: pack-acle." in lines


def test_without_runs_in_the_guest_or_counts_the_summary_says_so() -> None:
    stats, counts, metas = _tables()
    sweep = guest_sweep()
    assert perf.stats_report(stats, [m for m in metas if "guest" not in m], counts, sweep) == []
    assert perf.stats_report(stats, metas, None, sweep)[-1] == (
        "Not compared: the sweep counts no cell with a counting backend (backends: []).")
    text = summary.stats_summary(stats, [], [], [], perf.stats_report(stats, metas, counts, sweep))
    assert "\n## perf in the guest against the QEMU plugins\n" in text
    assert text.index("## perf in the guest") < text.index("## Every cell")


def test_an_emulated_node_s_host_baselines_are_not_compared() -> None:
    """On an emulated AArch64 node every native run records the emulator, the host baselines too
    (build host: no SVE, no QEMU count of theirs): only the SVE cells are compared."""
    stats, counts, metas = _tables()
    node = {**GUEST, "node": True}
    metas = [{**m, "guest": node} for m in metas]
    lines = perf.stats_report(stats, metas, counts, guest_sweep())
    assert lines[3].endswith("3 of 5 cells equal.") and not any("blocks_call" in ln for ln in lines)


def test_on_an_emulated_node_w_is_each_binary_s_own_and_an_a64fx_compares_with_qemu_s_a64fx() -> None:
    """Measured on the node (-cpu a64fx, 2 calls a process): w 689 to 691 for the ACLE binaries,
    not the guest's 326 to 328, and the rows calling glibc's memcpy equal only QEMU's a64fx
    model (glibc picks its memcpy by the CPU). So on a node: one w per binary, the usual one, and
    the reference rows of the CPU model the node records."""
    stats, counts, metas = _tables()
    stats["min"] += 364  # every window 364 more: w 690, 690, 692, 693 and the uncounted cell's
    # QEMU's max model counts 1000 more (another memcpy), its a64fx model the cell's roi.total.
    maxes = counts[counts["cpu_model"] == "max"]
    counts = pd.concat([maxes.assign(value=maxes["value"] + 1000), maxes.assign(cpu_model="a64fx")])
    node = {**GUEST, "node": True, "cpu_model": "a64fx"}
    metas = [{**m, "guest": node} for m in metas]
    lines = perf.stats_report(stats, metas, counts, guest_sweep())
    assert lines[3] == (
        "Per cell, the fewest instructions:u of its processes on the emulated node against calls x (the roi.total "
        "of the QEMU plugins + w) - 27, w the instructions of perf's control round trip in each window (one per "
        "binary: the value most of its cells give): 3 of 5 cells equal.")
    assert lines[5:9] == ["| binary | w |", "|---|---|", "| pack-acle | 690 |", "| reduce-acle | 692 |"]
    assert [ln.split(": perf")[0] for ln in lines if ln.startswith("- ")] == [
        "- differs: reduce-acle max/float VL 512 size 4096", "- no count: pack-acle VL 256 size 65536: no QEMU plugins count (gcc, cpu a64fx)"]


def test_on_an_emulated_node_a_cell_whose_fewest_process_counted_less_is_equal_by_its_most() -> None:
    """Measured on the node: pack blocks_call VL 128 64 KiB, one of three processes 30 a call
    fewer than the two others, which gave the binary's w."""
    stats, counts, metas = _tables()
    stats["min"] += 364
    stats["max"] = stats["min"]  # every process the same ...
    low = (stats["kernel"] == "pack") & (stats["vl"] == 512)
    stats.loc[low, "min"] -= 30  # ... but one of this cell's, 30 a call fewer
    metas = [{**m, "guest": {**GUEST, "node": True}} for m in metas]
    lines = perf.stats_report(stats, metas, counts, guest_sweep())
    assert lines[3].endswith("3 of 5 cells equal.") and "| pack-acle | 690 |" in lines
