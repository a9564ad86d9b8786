"""ArmIE's stand-in, measured (issue 35 item 3): a sweep's count cells at the VLs DynamoRIO
supports, counted by DynamoRIO with the harness's ROI client (armie_clients/dynamorio/) in the
emulated AArch64 guest, against the ROI totals and SVE counts the sweep's counting backend (the
QEMU plugins) wrote into counts.csv.

Each cell runs the ArmIE-marker build of its binary (kernels/roi/roi_armie.S; the same code and
addresses as the QEMU-marker build: kernels/roi/roi_slot.inc), and its output is read by the
armie backend's parser, as real ArmIE's would be. A binary's cells at one VL run in one drrun
process, the driver's batch mode (`--batch <run> -- <run> ...`, as the QEMU plugins run them):
DynamoRIO's start-up and code cache, most of a cell's cost under system-mode TCG, are paid once
per binary and VL, and the client prints one count line per run (armie_format.split_runs). Not
one process for several VLs: DynamoRIO does not follow a VL change inside a process (its issue
#6625). The processes go into a few batches, one guest boot each (never one per run), balanced
by the instructions QEMU counted for their cells and booted side by side, one per core. A cell
at a VL DynamoRIO cannot run (it crashes at start-up at VL 384, 640, 1024, 2048) is reported as
not run, never dropped.

`./harness bench --only armie` runs it on the default sweep (armie.bench); the test is
tests/test_arm64_vm.py. A sweep file with `armie: {via: guest}` runs the same processes as the
armie backend's jobs (armie_guest_job: one boot per job, its binary's runs one drrun process per
VL), and results/summary.md compares its rows with QEMU's (`agreement`, the comparison bench prints).
"""
from __future__ import annotations

import heapq
import resource
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from analysis.backends import RunError, parse_ok_line
from analysis.backends.armie_format import parse_inscount, split_runs
from analysis.backends.qemu import batch_argv
from analysis.backends.registry import REGISTRY, first_counting
from analysis.core import arm64_vm
from analysis.core.config import REPO, ConfigError
from analysis.core.kernels import parse_build
from analysis.core.model import Binary
from analysis.core.run import Run

if TYPE_CHECKING:
    from pandas import DataFrame

    from analysis.core.model import Sweep

# The client counts every module: the kernels are static (glibc inside), but the MPI rows' ROIs
# run Open MPI's shared libraries, and the QEMU plugins count those instructions too.
CLIENT_ARGS = ("-shared_libs",)
# How much longer than the sweep's time limit for a QEMU run a run in the guest may take
# (DynamoRIO's code cache under system-mode TCG), and what a boot and power-off may take.
TIME_FACTOR = 6.0
BOOT_SECONDS = 120.0
# The counts compared, as the counts table names them.
METRICS = ("roi.total", "roi.sve")
KEY = ["kernel", "variant", "op", "dtype", "build", "cpu_model", "compiler", "vl", "size"]
# What rows counted here are (provenance.csv's evidence column, the verdict tables, the summary).
EVIDENCE = "DynamoRIO in the guest"


@dataclass(frozen=True)
class Cell:
    """One run of a sweep's count job, as DynamoRIO in the guest runs it."""
    binary: Binary  # the ArmIE-marker binary (backend armie)
    cpu_model: str
    run: Run

    def key(self) -> tuple[Any, ...]:
        """The cell as the counts table keys it (KEY; its build column says vls, not vls512)."""
        b, r = self.binary, self.run
        return (b.kernel, b.variant, r.op, r.dtype, parse_build(b.build).column, self.cpu_model, b.compiler, r.vl, r.size)

    def name(self) -> str:
        b, r = self.binary, self.run
        opd = f" {r.op}/{r.dtype}" if r.op != "-" else ""
        return f"{b.name}{opd} {b.compiler} {b.build} VL {r.vl} size {r.size}"

    def guest_path(self) -> str:
        """Where the binary is in the guest's share (relative to its working directory)."""
        b = self.binary
        return f"bin/{b.compiler}/{b.build}/{b.name}"


@dataclass
class Result:
    """What `compare` found: the cells compared, those that differ (with both counts), the
    cells not run by VL and why, and the batches' times and provenance."""
    reference: str  # the backend the counts were compared with, as the verdicts name it
    counted_by: str = f"{EVIDENCE} (ArmIE's stand-in)"
    compared: int = 0
    equal: int = 0
    differ: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # a run that gave no count: the cell and why
    not_run: dict[int, int] = field(default_factory=dict)  # VL -> cells
    not_run_why: str = arm64_vm.NOT_RUN_VL
    processes: int = 0  # drrun processes (one per binary and VL), what most of the time goes to
    batch_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0
    # CPU seconds of the guests (QEMU's processes): what stays comparable on a shared machine.
    cpu_seconds: float = 0.0
    provenance: dict[str, Any] = field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        return {"reference": self.reference, "compared": self.compared, "equal": self.equal, "differ": self.differ,
                "failed": self.failed, "not_run": {str(v): n for v, n in sorted(self.not_run.items())},
                "not_run_why": self.not_run_why, "boots": len(self.batch_seconds), "processes": self.processes,
                "batch_seconds": self.batch_seconds, "seconds": round(self.seconds, 1),
                "cpu_s": round(self.cpu_seconds, 1), "provenance": self.provenance}

    def tally(self, name: str, got: tuple[int, int], ref: dict[str, int]) -> None:
        """One cell compared: (ROI total, SVE count) against the reference's counts of it."""
        expected = (ref["roi.total"], ref.get("roi.sve", 0))
        self.compared += 1
        if got == expected:
            self.equal += 1
        else:
            self.differ.append(f"{name}: {got[0]} total, {got[1]} SVE; {self.reference} {expected[0]} total, "
                               f"{expected[1]} SVE")

    def verdict(self) -> str:
        return (f"{self.counted_by} vs {self.reference}, ROI total and SVE count per cell: "
                f"{self.equal} of {self.compared} cells equal")

    def lines(self) -> list[str]:
        """What bench prints: the verdict with the boots' cost, then the cells (`cell_lines`)."""
        return [f"{self.verdict()}; {len(self.batch_seconds)} boots, {self.processes} DynamoRIO processes, "
                f"{self.seconds:.1f} s ({self.cpu_seconds:.0f} CPU s)"] + self.cell_lines()

    def cell_lines(self) -> list[str]:
        """Each cell that differs (both counts), each that gave no count, and the cells not run by VL."""
        out = [f"  differs: {d}" for d in self.differ]
        out += [f"  no count: {f}" for f in self.failed]
        if self.not_run:
            vls = ", ".join(str(v) for v in sorted(self.not_run))
            out.append(f"  VL {vls}: {sum(self.not_run.values())} cells {self.not_run_why}")
        return out


def runs_here(run: Run) -> bool:
    """Whether DynamoRIO in the guest runs this cell: an SVE run at a VL it supports."""
    return run.sve and run.vl in arm64_vm.DYNAMORIO_VLS


def cells(sweep: Sweep, backend: str) -> tuple[list[Cell], dict[int, int]]:
    """The sweep's count cells DynamoRIO can run (each job's twin built for `backend`, ArmIE's
    markers), and the number it cannot, by VL."""
    out: list[Cell] = []
    not_run: dict[int, int] = {}
    for job in sweep.jobs():
        if job.binary.backend == backend:
            continue
        twin = replace(job.binary, backend=backend)
        for run in job.runs:
            if runs_here(run):
                out.append(Cell(twin, job.cpu_model, run))
            else:
                not_run[run.vl] = not_run.get(run.vl, 0) + 1
    return out, not_run


def reference_counts(counts: DataFrame, backend: str) -> dict[tuple[Any, ...], dict[str, int]]:
    """The ROI total and SVE count of every cell of `backend` in the counts table, by cell key."""
    d = counts[(counts["backend"] == backend) & counts["metric"].isin([*METRICS, "whole.total"])]
    out: dict[tuple[Any, ...], dict[str, int]] = {}
    for row in d.itertuples(index=False):
        key = tuple(getattr(row, k) for k in KEY)
        out.setdefault(key, {})[row.metric] = int(row.value)
    return out


T = TypeVar("T")


def batches(items: Sequence[T], weight: Callable[[T], float], n: int) -> list[list[T]]:
    """`items` in at most `n` batches of about equal weight (largest first, each to the lightest
    batch), each batch in the items' order."""
    heap = [(0.0, i) for i in range(max(1, min(n, len(items))))]
    out: list[list[T]] = [[] for _ in heap]
    for item in sorted(items, key=weight, reverse=True):
        load, i = heapq.heappop(heap)
        out[i].append(item)
        heapq.heappush(heap, (load + weight(item), i))
    order = {id(c): k for k, c in enumerate(items)}
    return [sorted(b, key=lambda c: order[id(c)]) for b in out if b]


def processes(todo: Sequence[Cell]) -> list[list[Cell]]:
    """The cells grouped into drrun processes: one per binary and VL (`one_process_each`)."""
    return one_process_each(todo, lambda c: (c.binary, c.run.vl), lambda c: c.run)


def one_process_each(items: Sequence[T], key: Callable[[T], Hashable], run: Callable[[T], Run]) -> list[list[T]]:
    """`items` grouped by `key` (one binary at one VL: a drrun process), in the order each group
    first appears; in a process the runs of one size and parameter set are consecutive (the
    driver keeps one set's preparation, docs/contracts.md section 1), as qemu.batches orders them."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return [sorted(g, key=lambda i: run(i).argv()[1:]) for g in groups.values()]


def command(group: Sequence[Cell]) -> str:
    """One drrun of the driver's batch mode for a process's cells (one binary, one VL)."""
    first = group[0]
    assert all(c.binary == first.binary and c.run.vl == first.run.vl for c in group), "one binary and VL a process"
    return drrun(first.guest_path(), [c.run for c in group])


def drrun(path: str, runs: Sequence[Run]) -> str:
    """The guest command running `runs` of the binary at `path` in the share (all at one VL) in
    one DynamoRIO process, the driver's batch mode."""
    return arm64_vm.dynamorio_command(runs[0].vl, [f"./{path}", *batch_argv(runs)], CLIENT_ARGS)


def split_output(group: Sequence[Cell], out: arm64_vm.Output) -> list[arm64_vm.Output]:
    """A process's output as one output per cell, each what the cell would print alone: its
    `ok` line and its count line (armie_format.split_runs). The driver stops at the first run
    that fails: the runs before it keep exit 0, that run gets the process's status and output
    (the kernel's FAIL line), the runs after it no status (not run)."""
    oks = [ln for ln in out.stdout.splitlines() if ln.startswith("ok ")]
    try:
        counts = split_runs(out.stderr, len(group))
    except ValueError as e:
        return [arm64_vm.Output(out.command, out.rc if out.rc else 1, "", f"{e}\n") for _ in group]
    outs = []
    for k in range(len(group)):
        if k < len(oks):
            outs.append(arm64_vm.Output(out.command, 0, oks[k] + "\n", counts[k]))
        elif k == len(oks):
            outs.append(arm64_vm.Output(out.command, out.rc, out.stdout, out.stderr))
        else:
            outs.append(arm64_vm.Output(out.command, None, "", f"not run: run {len(oks)} of its batch failed\n"))
    return outs


def read_output(cell: Cell, out: arm64_vm.Output) -> tuple[int, int]:
    """(ROI total, ROI SVE count) of one run in the guest (`read_run`)."""
    _, got = read_run(cell.name(), cell.run.vl, out)
    return got["total"], got["sve"]


def read_run(name: str, vl: int, out: arm64_vm.Output) -> tuple[dict[str, str], dict[str, Any]]:
    """The kernel's `ok` line and the client's count (armie_format.parse_inscount) of one run in
    the guest; RunError when the run failed, ran at another VL than `vl`, or printed no count."""
    if out.rc != 0:
        lines = (out.stderr.strip() or out.stdout.strip() or f"exit {out.rc}").splitlines()
        # The kernel's own error line (docs/contracts.md 1) over what DynamoRIO printed after it.
        last = next((ln for ln in reversed(lines) if ln.startswith(("FAIL: ", "usage error: "))), lines[-1])
        raise RunError(f"exit {out.rc}: {last[:200]}")
    fields = parse_ok_line(out.stdout, name)
    if int(fields["vl"]) != vl:
        raise RunError(f"the kernel ran at VL {fields['vl']}")
    try:
        got = parse_inscount(out.stdout + out.stderr)
    except ValueError as e:
        raise RunError(str(e)) from None
    return fields, got


def compare(sweep: Sweep, counts: DataFrame, backend: str, binaries: Callable[[list[Binary]], dict[Binary, Path]],
            boots: int, guest: arm64_vm.Guest | None = None) -> Result:
    """Every cell of the sweep at the VLs DynamoRIO supports, counted in the guest in `boots`
    batches booted side by side, against the rows of `counts` of the sweep's other counting
    backend. `backend`: whose binaries (markers) run in the guest; `binaries` builds them and
    returns their paths. Raises ConfigError, before anything is built or booted, when the sweep
    lists no other counting backend or `counts` lacks its counts of a cell; GuestError when a
    batch did not end (a hang, a guest that died)."""
    reference = reference_backend(sweep, backend)
    todo, not_run = cells(sweep, backend)
    want = reference_counts(counts, reference)
    missing = [c for c in todo if c.key() not in want]
    if missing:
        raise ConfigError(f"{len(missing)} cells of {_shown(sweep.path)} have no {reference} counts in "
                          f"{sweep.results_dir / 'counts.csv'} (e.g. {missing[0].name()}): count them there first "
                          f"({sweep_command(sweep)})")
    guest = guest or arm64_vm.find_guest()
    result = Result(REGISTRY[reference].EVIDENCE, not_run=not_run)
    paths = binaries(sorted({c.binary for c in todo}, key=lambda b: (b.compiler, b.build, b.name)))
    files = {c.guest_path(): paths[c.binary] for c in todo}
    groups = processes(todo)
    result.processes = len(groups)
    parts = batches(groups, lambda g: sum(want[c.key()].get("whole.total", 0) + 1 for c in g), boots)
    t0, c0 = time.monotonic(), _children_cpu()
    with ThreadPoolExecutor(len(parts)) as pool:
        runs = list(pool.map(lambda part: _run_batch(sweep, guest, part, files, reference), enumerate(parts)))
    result.seconds, result.cpu_seconds = time.monotonic() - t0, _children_cpu() - c0
    for part, batch in zip(parts, runs):
        result.batch_seconds.append(batch.seconds)
        result.provenance = batch.provenance
        for cell, out in ((c, o) for g, out in zip(part, batch.outputs) for c, o in zip(g, split_output(g, out))):
            try:
                got = read_output(cell, out)
            except RunError as e:
                result.compared += 1
                result.failed.append(f"{cell.name()}: {e}")
                continue
            result.tally(cell.name(), got, want[cell.key()])
    return result


def reference_backend(sweep: Sweep, backend: str) -> str:
    """The sweep's other counting backend (the QEMU plugins), whose counts DynamoRIO's are
    compared with; ConfigError naming the fix when the sweep lists none."""
    reference = first_counting(sweep, backend)
    if reference is None:
        raise ConfigError(f"{_shown(sweep.path)}: DynamoRIO's counts in the guest are compared with another counting "
                          f"backend's, and it lists none (backends: [{', '.join(sweep.backends)}]): add qemu to its "
                          f"backends, then {sweep_command(sweep)}")
    return reference


def sweep_command(sweep: Sweep) -> str:
    """The command that counts `sweep` into the tree it was loaded with."""
    return (f"./harness sweep --config {_shown(sweep.path)} --set results_dir={_shown(sweep.results_dir)} "
            f"--set build_dir={_shown(sweep.build_dir)}")


def _shown(path: Path) -> str:
    """A path as a command run from the repository takes it: relative when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run_batch(sweep: Sweep, guest: arm64_vm.Guest, numbered: tuple[int, list[list[Cell]]], files: dict[str, Path],
               reference: str) -> arm64_vm.Batch:
    i, part = numbered
    limit = BOOT_SECONDS + sum(sweep.time_limit(c.binary.kernel, c.binary.variant, c.run.size,
                                                REGISTRY[reference].time_factor(sweep) * TIME_FACTOR)
                               for g in part for c in g)
    needed = {g[0].guest_path() for g in part}
    return arm64_vm.run_batch(guest, [command(g) for g in part], {k: v for k, v in files.items() if k in needed}, limit,
                              f"DynamoRIO batch {i + 1}")


def agreement(counts: DataFrame, backend: str, counted_by: str, vls: Sequence[int] | None) -> Result | None:
    """`backend`'s rows of the counts table against the other counting backend's (QEMU's), cell
    by cell, as bench compares them: each of the reference's cells at `vls` (None: every VL)
    compared, those at other VLs not run. None when the table has no other counting backend."""
    others = sorted(b for b in set(counts["backend"])
                    if b != backend and b in REGISTRY and REGISTRY[b].STAGE == "count")
    if not others:
        return None
    reference = others[0]
    got, want = reference_counts(counts, backend), reference_counts(counts, reference)
    result = Result(REGISTRY[reference].EVIDENCE, counted_by)
    for key in sorted(want):
        name, vl = key_name(key), key[KEY.index("vl")]
        if vls is not None and vl not in vls:
            result.not_run[vl] = result.not_run.get(vl, 0) + 1
        elif key not in got:
            result.compared += 1
            result.failed.append(f"{name}: no {backend} row")
        else:
            result.tally(name, (got[key]["roi.total"], got[key].get("roi.sve", 0)), want[key])
    return result


def key_name(key: tuple[Any, ...]) -> str:
    """A cell of the counts table as Cell.name() names one (KEY order)."""
    k = dict(zip(KEY, key))
    opd = f" {k['op']}/{k['dtype']}" if k["op"] != "-" else ""
    return (f"{k['kernel']}-{k['variant']}{opd} {k['compiler']} {k['build']} {k['cpu_model']} VL {k['vl']} "
            f"size {k['size']}")
