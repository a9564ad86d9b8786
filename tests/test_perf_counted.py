"""perf's SVE cells counted by the sweep's counting backend at perf's sizes (issue 52 item 2(c)):
perf in the guest is compared with the QEMU plugins cell by cell (perf_guest_check), and the perf
section's sizes (4 KiB to 16 MiB) are not the count sweep's (1 MiB, 4 MiB), so 252 of the default
sweep's 294 guest cells had no count to be compared with. Where a sweep plans perf's SVE runs, the
first counting backend's jobs now also run those cells (analysis.core.perf_cells); nothing else of
the count matrix changes. Plans and synthetic tables only: nothing runs."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.backends import perf, perf_guest_check, qemu
from analysis.commands import sweep as sweep_command
from analysis.core import config, perf_cells
from analysis.stages import subtract
from conftest import REPO

@pytest.fixture(autouse=True)
def host_without_sve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's host has no SVE (an x86-64 one), unless it says otherwise: on an SVE node perf
    measures SVE cells natively, which changes what the count jobs add."""
    monkeypatch.setattr(perf_cells, "host_has_sve", lambda: False)
    monkeypatch.setattr(perf_cells, "emulated_machine", lambda: None)


SWEEP = f"""kernel_table: {REPO}/configs/kernels.yaml
compilers: [gcc, clang]
backends: [qemu]
cpu_models: [{{name: max}}, {{name: a64fx}}]
vector_lengths: [128, 256, 512, 1024]
vls_vector_lengths: [512]
sizes: {{copy: [65536], reduce: [65536]}}
linearity_check: true
kernels:
  - kernel: copy
    variants: [c_vec, memcpy_a64fx]
  - kernel: reduce
    variants: [acle]
    ops: [max]
    dtypes: [float]
perf:
  events: [instructions]
  sve: guest
  vector_lengths: [128, 512, 2048]
  sizes: {{copy: [4096, 131072, 262144], reduce: [4096, 65536]}}
  processes: 2
"""
CALLS = 2


def load(tmp_path: Path, sve: str = "guest") -> config.Sweep:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.replace("sve: guest", f'sve: "{sve}"'))
    return config.load(path, {"results_dir": str(tmp_path / "results"), "build_dir": str(tmp_path / "build")})


def added(sweep: config.Sweep) -> set[tuple[str, str, str, str, int, int, str, str]]:
    """The runs qemu's jobs hold beyond the count matrix: (binary, compiler, build, CPU, VL, size, op, dtype)."""
    base = {(j.binary.name, j.binary.compiler, j.binary.build, j.cpu_model): set(j.runs) for j in sweep.count_jobs("qemu")}
    out = set()
    for j in qemu.jobs(sweep, None):
        key = (j.binary.name, j.binary.compiler, j.binary.build, j.cpu_model)
        assert base[key] <= set(j.runs) and len(set(j.runs)) == len(j.runs), key  # nothing lost, nothing twice
        out |= {(*key, r.vl, r.size, r.op, r.dtype) for r in set(j.runs) - base[key]}
    return out


def test_the_count_jobs_run_perfs_sve_cells_at_perfs_sizes(tmp_path: Path) -> None:
    """Exactly perf's cells without a count: its rows (not memcpy_a64fx: perf runs no glibc-internal
    memcpy), the perf VLs the count backend runs (2048 is not one), perf's sizes the job does not
    run already (copy's 131072 is 65536's linearity double, reduce's 65536 its own size), in the
    cross gcc's VLA build on CPU max only; the baseline (0) of each is in the job already."""
    sweep = load(tmp_path)
    copy = {("copy-c_vec", "gcc", "vla", "max", vl, size, "-", "uint8") for vl in (128, 512) for size in (4096, 262144)}
    reduce = {("reduce-acle", "gcc", "vla", "max", vl, 4096, "max", "float") for vl in (128, 512)}
    assert added(sweep) == copy | reduce
    jobs = {(j.binary.name, j.binary.compiler, j.binary.build, j.cpu_model): j for j in qemu.jobs(sweep, None)}
    assert {(r.vl, r.size) for r in jobs["copy-c_vec", "gcc", "vla", "max"].runs if r.size == 0} == {
        (vl, 0) for vl in (128, 256, 512, 1024)}


@pytest.mark.parametrize("sve", ["auto", "off"])
def test_without_perfs_sve_runs_the_count_jobs_are_the_count_matrix(tmp_path: Path, sve: str) -> None:
    """This host has no SVE: perf/sve auto measures no SVE cell here, off nowhere."""
    assert added(load(tmp_path, sve)) == set()


def test_an_emulated_sve_node_counts_perfs_native_sve_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf_cells, "host_has_sve", lambda: True)
    monkeypatch.setattr(perf_cells, "emulated_machine", lambda: "QEMU virt machine")
    assert len(added(load(tmp_path, "auto"))) == 6
    assert added(load(tmp_path, "off")) == set()


@pytest.mark.parametrize("sve", ["auto", "guest"])
def test_sve_hardware_counts_nothing_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sve: str) -> None:
    """On SVE hardware (A64FX) perf's counts are not compared (their w is the emulator's), so the
    count jobs stay the count matrix: perf/sve guest there runs natively too (perf.detect)."""
    monkeypatch.setattr(perf_cells, "host_has_sve", lambda: True)
    monkeypatch.setattr(perf_cells, "emulated_machine", lambda: None)
    assert added(load(tmp_path, sve)) == set()


def test_the_default_sweeps_count_jobs_are_unchanged() -> None:
    """Without perf/sve: guest the default sweep counts what it counted (its perf section asks for
    SVE runs, which this host cannot make)."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    assert qemu.jobs(sweep, None) == sweep.count_jobs("qemu")


def test_the_default_sweep_in_the_guest_counts_the_252_cells_it_lacked() -> None:
    sweep = config.load(REPO / "configs" / "default.yaml")
    assert sweep.perf is not None
    guest = dataclasses.replace(sweep, perf=dataclasses.replace(sweep.perf, sve="guest"))
    # 14 rows x 3 VLs x 7 sizes, one of which (1 MiB, or 4 MiB for reduce) is counted already.
    assert len(added(guest)) == 14 * 3 * 6 == 252
    assert sweep_command.perf_cells_line(guest) == (
        "qemu: 252 more runs count perf's SVE cells at perf's sizes (what perf's instruction counts are compared with)")
    assert sweep_command.perf_cells_line(sweep) is None


def _fixture(sweep: config.Sweep) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """perf.csv of every perf SVE cell as the guest counts it (w 327), counts.csv of every run the
    qemu jobs plan (roi.total a function of the cell), the perf raw files' metas."""
    def roi(vl: int, size: int) -> int:
        return 1000 + size // 16 + vl

    counts = [{"kernel": j.binary.kernel, "variant": j.binary.variant, "op": r.op, "dtype": r.dtype, "layout": "-",
               "build": j.binary.build, "cpu_model": j.cpu_model, "backend": "qemu", "compiler": j.binary.compiler,
               "vl": r.vl, "size": r.size, "metric": "roi.total", "value": roi(r.vl, r.size)}
              for j in qemu.jobs(sweep, None) for r in j.runs]
    stats, metas = [], []
    for j in perf.perf_jobs(sweep, sve=True, host=False):
        metas.append({"backend": "perf", "kernel": j.binary.kernel, "variant": j.binary.variant, "build": "vla",
                      "calls": CALLS, "cpu": "emulated", "guest": {"counter": "perf"}})
        for r in j.runs:
            fewest = (CALLS * (roi(r.vl, r.size) + 327) - 27) / CALLS
            stats.append({"kernel": j.binary.kernel, "variant": j.binary.variant, "op": r.op, "dtype": r.dtype,
                          "layout": "-", "build": "vla", "cpu_model": "native", "backend": "perf", "compiler": "native",
                          "vl": r.vl, "size": r.size, "metric": "instructions", "status": "ok", "unit": "", "n": 2,
                          "mean": fewest, "std": 0.0, "min": fewest, "max": fewest, "running_pct": math.nan})
    return pd.DataFrame(stats), pd.DataFrame(counts), metas


def test_every_guest_cell_has_its_count(tmp_path: Path) -> None:
    """Over the rows the planned jobs make, the check compares every guest cell: none lacks its
    count (before, the 4 cells at 4096 and 262144 bytes and the 2 of reduce at 4096 did)."""
    sweep = load(tmp_path)
    assert sweep.perf is not None
    sweep = dataclasses.replace(sweep, perf=dataclasses.replace(sweep.perf, vector_lengths=(128, 512)))
    stats, counts, metas = _fixture(sweep)
    result, windows = perf_guest_check.compare(stats, metas, counts, sweep)
    assert (result.failed, result.differ) == ([], [])
    assert result.equal == result.compared == 2 * 3 + 2 * 2  # copy-c_vec: 2 VLs x 3 sizes; reduce-acle: 2 x 2
    assert windows == {"copy-c_vec": {327}, "reduce-acle": {327}}


def test_linearity_is_checked_at_the_sweeps_sizes_only() -> None:
    """A cell counted at perf's sizes as well may hold n and 2n the sweep did not ask to compare
    (the default sweep's copy: 2 MiB, the double of its 1 MiB, and perf's 4 MiB): no linearity row
    there, so the summary's linearity section is the sweep's."""
    cell = {"kernel": "copy", "variant": "c_vec", "op": "-", "dtype": "-", "layout": "-", "build": "vla",
            "cpu_model": "max", "backend": "qemu", "compiler": "gcc", "vl": 128, "metric": "roi.total"}
    raw = pd.DataFrame([{**cell, "size": s, "value": v} for s, v in ((0, 100), (1 << 20, 1100), (2 << 20, 2100),
                                                                      (4 << 20, 5000))])
    everywhere = subtract.linearity_rows(raw)
    assert sorted(set(everywhere["size"])) == [1 << 20, 2 << 20]
    ours = subtract.linearity_rows(raw, {("copy", "c_vec"): (1 << 20,)})
    assert list(ours["size"]) == [1 << 20, 1 << 20] and list(ours["value"]) == [0, 0]
