"""perf in the emulated AArch64 guest (issue 35 item 4, analysis.backends.perf_guest): the perf
backend's SVE jobs run in one -icount boot each where no SVE host is at hand, and their
instructions:u counts are the QEMU plugins' ROI totals plus the control window's instructions.

The measured tests need the guest (`./harness setup --with-arm64-vm`; DynamoRIO is not needed).
A batch that hangs is killed at its limit and named: tests/test_arm64_vm.py tests that for every
batch the guest runs."""
from __future__ import annotations

import dataclasses

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.backends import Plan, perf, perf_guest, qemu
from analysis.core import config
from analysis.stages import build, checks, count, figures
from conftest import REPO, snakemake

DEFAULT = REPO / "configs" / "default.yaml"
# Per enabled window, the instructions perf counts besides the QEMU plugins' ROI, measured in the
# guest on 2026-11-27 and the same at every VL and size of a binary: the control round trip's 327
# (roi_perf.c: the end of the enable ack's read, two clock_gettime calls, the start of the disable
# write, less the QEMU marker function's ret), plus 1 where the window runs an SVE instruction (the
# ack's read system call discards the SVE state, the first SVE instruction after it traps, and the
# guest's PMU counts it once more: inferred, it fits all seven binaries measured), less what the QEMU build's call of the kernel sets up
# more than the perf build's (objdump: pack 8 instructions against 6 in the perf build, reduce 5
# against 5); and the one ack read a process's first window does not make (its FIFO holds no NUL
# from an ack before): perf_guest.FIRST_ACK.
WINDOW = {"pack-acle": 327 + 1 - 2, "reduce-acle": 327 + 1 - 0}
# A process now and then counts more in its windows: one more pass of 9 instructions in a
# clock_gettime call of the window (two a window): over the 126 cells of pack's and unpack's
# (3,780 processes), 66 processes counted more than the fewest of their cell, at most 4 in a cell
# (docs/guide/arm64-vm.md).
EXTRA = 9
ABOVE = 4
CELLS = [(name, vl, size) for name in WINDOW for vl in (128, 512) for size in (4096, 65536)]


def guest_sweep() -> config.Sweep:
    """The default sweep with its SVE perf runs in the guest (perf/sve: guest: asked for, never
    the default, for their cost)."""
    sweep = config.load(DEFAULT)
    assert sweep.perf is not None
    return dataclasses.replace(sweep, perf=dataclasses.replace(sweep.perf, sve="guest"))


def _job_plan(sweep: config.Sweep, name: str, binary: Path, runs: list[config.Run], processes: int) -> Plan:
    ready = perf.preflight(sweep)
    assert ready is not None and ready.found["guest"], ready
    job = next(j for j in perf.jobs(sweep, ready) if j.binary.name == name)
    settings = {**perf.settings(sweep, job, ready), "processes": processes}
    return Plan("perf", str(binary), "native", tuple(runs), tuple(60.0 for _ in runs), {}, {}, settings)


@pytest.fixture(scope="module")
def guest_measured(work: Path) -> dict[str, Any]:
    """The cells' perf binaries (the workflow's native SVE build) measured in the guest, 30
    processes of the first cell and 3 of the others, one boot per binary; and the QEMU plugins'
    records of the QEMU-marker binaries for the same runs."""
    bd = work / "perf-guest-build"
    names = sorted(WINDOW)
    targets = {(n, b): build.binary_path(bd, c, "vla", b, n) for n in names for c, b in (("native", "perf"), ("gcc", "qemu"))}
    plugins = [build.plugin_path(bd, c) for c in qemu.CLIENTS]
    proc = snakemake(DEFAULT, bd, work / "perf-guest-results", [str(p) for p in [*targets.values(), *plugins]])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep = guest_sweep()
    out: dict[str, Any] = {"records": {}, "qemu": {}, "extra": {}}
    for name in names:
        job_runs = next(j for j in perf.perf_jobs(sweep, True, False) if j.binary.name == name).runs
        runs = [r for r in job_runs if (name, r.vl, r.size) in CELLS]
        for processes, part in ((30, runs[:1]), (3, runs[1:])):
            extra, recs = perf.run_job(_job_plan(sweep, name, targets[(name, "perf")], part, processes), open("/dev/null", "w"))
            out["extra"][name] = extra
            for run, rec in zip(part, recs):
                out["records"][(name, run.vl, run.size)] = rec
                out["qemu"][(name, run.vl, run.size)] = qemu.run_once(targets[(name, "qemu")], "max", run,
                                                                     plugins[0].parent, None, 300)
    return out


def _instructions(rec: dict[str, Any]) -> list[int]:
    return [int(c["value"]) for p in rec["processes"] for c in p["counters"] if c["event"] == perf_guest.EVENT]


@pytest.mark.slow
@pytest.mark.needs_arm64_guest
def test_thirty_processes_of_a_cell_count_the_same(guest_measured: dict[str, Any]) -> None:
    """All but at most ABOVE processes count the same; those at most one more pass of EXTRA in
    each clock_gettime of each window."""
    first = guest_measured["records"][CELLS[0]]
    counts = _instructions(first)
    calls = guest_measured["extra"][CELLS[0][0]]["calls"]
    low = min(counts)
    assert len(counts) == 30 and counts.count(low) >= 30 - ABOVE, counts
    assert all((c - low) % EXTRA == 0 and c - low <= 2 * EXTRA * calls for c in counts), counts


@pytest.mark.slow
@pytest.mark.needs_arm64_guest
def test_counts_are_the_qemu_plugins_roi_totals_plus_the_window(guest_measured: dict[str, Any]) -> None:
    """Per process: calls x (roi.total + WINDOW) - FIRST_ACK, on every cell at VL 128 and 512, two
    sizes (the fewest a cell's processes count; none counts less); the checksum is QEMU's."""
    calls = guest_measured["extra"][CELLS[0][0]]["calls"]
    for cell in CELLS:
        rec, ref = guest_measured["records"][cell], guest_measured["qemu"][cell]
        want = calls * (ref["inscount"]["roi"]["total"] + WINDOW[cell[0]]) - perf_guest.FIRST_ACK
        assert min(_instructions(rec)) == want, (cell, _instructions(rec), want)
        assert rec["checksum"] == ref["checksum"], cell


@pytest.mark.slow
@pytest.mark.needs_arm64_guest
def test_the_guest_rows_say_what_they_are(guest_measured: dict[str, Any]) -> None:
    extra = guest_measured["extra"][CELLS[0][0]]
    assert extra["cpu"] == perf_guest.GUEST_CPU and "no A64FX timing" in extra["caveat"]
    assert "-icount shift=0" in extra["guest"]["guest_command"]
    assert {ev: st for ev, st in extra["events"].items() if st == "ok"} == {"instructions": "ok"}


def test_a_cell_command_runs_each_process_with_fresh_control_fifos() -> None:
    run = config.Run(256, 4096, "-", "float", (("dir", "pack"),), sve=True)
    s = {"calls": 10, "warmup": 2, "flush_bytes": 0, "processes": 30}
    cmd = perf_guest.cell_command("./bin/k", run, s)
    assert "rm -f /tmp/perf.csv /tmp/perf-times.txt /tmp/ctl /tmp/ack; mkfifo /tmp/ctl /tmp/ack" in cmd
    assert "perf stat -x ';' -o /tmp/perf.csv --control fd:3,4 -D -1 -e instructions:u -- ./bin/k 0256" in cmd
    assert "while [ $k -lt 30 ]" in cmd
    # From the guest's tmpfs (a copy of the share's bin/), in a folder named as long as the share.
    assert cmd.startswith(f"cd {perf_guest.WORKDIR}\n") and len(perf_guest.WORKDIR) == len(perf_guest.arm64_vm.GUEST_BATCH)


def test_a_process_that_failed_in_the_guest_names_the_cell_and_its_error() -> None:
    text = "@@proc 3\n\n@@csv\n@@times\n@@err\nFAIL: asked 384 bits, running at 256 bits\n"
    with pytest.raises(perf.RunError, match=r"k vl=384: exit 3 in the guest: FAIL: asked 384 bits, running at 256 bits"):
        perf_guest.parse_cell(text, "k vl=384", 10)


def _guest_table() -> pd.DataFrame:
    """A perf table as the guest's runs make it: instructions and (virtual) time per call."""
    rows = []
    for vl in (128, 256, 512):
        for kernel, variant, op, dtype in [("pack", "blocks_call", "-", "float"), ("pack", "acle", "-", "float"),
                                           ("unpack", "acle", "-", "float"), ("reduce", "acle", "max", "float"),
                                           ("reduce", "c_autovec", "max", "float"), ("copy", "glibc_memcpy", "-", "uint8")]:
            for size in (4096, 16777216):
                for metric, mean in (("instructions", size / vl), ("time_per_call", size / vl), ("bandwidth", 1.0)):
                    rows.append({"kernel": kernel, "variant": variant, "op": op, "dtype": dtype, "layout": "-",
                                 "build": "vla", "cpu_model": "native", "backend": "perf", "compiler": "native",
                                 "vl": vl, "size": size, "metric": metric, "status": "ok", "unit": "", "n": 30,
                                 "mean": mean, "std": 0.0, "min": mean, "max": mean, "running_pct": math.nan})
    return pd.DataFrame(rows)


def test_figures_from_the_guest_draw_instructions_and_say_so() -> None:
    """Figs. 11/12 from the guest's runs: instructions per call (its times are virtual), the
    label in the title; the same figure without the label draws time per call."""
    sweep = guest_sweep()
    assert sweep.perf is not None
    df = _guest_table()
    for fig in sweep.perf.figures:
        f = figures.size_figure(df, sweep.table, fig, "host", perf_guest.LABEL)
        try:
            assert perf_guest.LABEL in f._suptitle.get_text().replace("\n", " ")
            assert f.axes[0].get_ylabel() == figures.SIZE_YLABEL["instructions"]
        finally:
            figures._pyplot().close(f)
        lines = figures.size_lines(df, sweep.table, fig, 512, figures.GUEST_METRIC)
        assert lines and all(set(g["metric"]) == {"instructions"} for _, _, g in lines)


def test_timing_claims_are_not_measured_in_the_guest() -> None:
    sweep = guest_sweep()
    assert sweep.perf is not None
    rows = checks.perf_claims(_guest_table(), sweep.perf, sweep.table, perf_guest.LABEL)
    assert len(rows) == len(sweep.perf.checks)
    assert all(f"| - | not measured: {perf_guest.LABEL} |" in r for r in rows)


def test_the_guest_runs_perf_only_when_the_sweep_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guest's runs cost about an hour of two cores for the default sweep's Fig. 11/12 jobs:
    a machine with the guest built ran them in every default sweep before; now only with
    perf/sve: guest, and the default sweep's line says how to ask."""
    monkeypatch.setattr(perf.perf_cells, "host_has_sve", lambda cpuinfo=None: False)
    default = config.load(DEFAULT)
    for built in (True, False):
        monkeypatch.setattr(perf_guest, "missing", lambda built=built: None if built else "not built")
        status = perf.detect(default)
        assert status is not None
        if status.perf is None or not status.host:
            pytest.skip(f"perf cannot count here: {status.messages}")
        assert not status.sve and not status.guest
        assert "perf/sve: guest in the sweep" in status.messages[-1]
        assert ("setup --with-arm64-vm" in status.messages[-1]) is not built
        asked = perf.detect(guest_sweep())
        assert asked is not None and (asked.sve, asked.guest) == (built, built)
        assert built or "perf/sve: guest, but the emulated AArch64 guest is not built" in asked.messages[-1]


def test_a_guest_job_takes_one_core_a_native_measurement_every_core(tmp_path: Path) -> None:
    """perf's native measurements run alone (EXCLUSIVE); a job in the guest is one single-threaded
    QEMU (-icount), so its plan says so and the workflow gives it one core: two run side by side."""
    sweep = guest_sweep()
    jobs = {j.binary.build: j for j in perf.perf_jobs(sweep, True, True)}
    ready = perf.Ready({}, found={"perf": "perf", "sve": True, "host": True, "guest": True})
    for build_name, alone in (("vla", False), ("host", True)):
        settings = perf.settings(sweep, jobs[build_name], ready)
        plan = tmp_path / f"{build_name}.json"
        plan.write_text(Plan("perf", "k", "native", (), (), {}, {}, settings).to_json())
        assert count.exclusive(plan) is alone, build_name
    plan.write_text(Plan("qemu", "k", "max", (), (), {}, {}, {}).to_json())
    assert count.exclusive(plan) is False


def test_the_guest_runs_the_papers_30_processes_unless_the_sweep_says_fewer() -> None:
    """perf/guest_processes: a knob for the guest's runs only (counts, not timing); absent, the
    guest runs `processes` (the paper's 30) as the native runs do."""
    sweep = guest_sweep()
    assert sweep.perf is not None
    jobs = {j.binary.build: j for j in perf.perf_jobs(sweep, True, True)}
    ready = perf.Ready({}, found={"perf": "perf", "sve": True, "host": True, "guest": True})
    assert perf.settings(sweep, jobs["vla"], ready)["processes"] == 30
    fewer = dataclasses.replace(sweep, perf=dataclasses.replace(sweep.perf, guest_processes=3))
    assert perf.settings(fewer, jobs["vla"], ready)["processes"] == 3
    assert perf.settings(fewer, jobs["host"], ready)["processes"] == 30
