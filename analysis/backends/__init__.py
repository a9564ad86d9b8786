"""What every backend shares: the protocol a backend implements (`Backend`), the plan the
workflow hands each job (`Plan`), and the run machinery (staging, time limits, the job loop,
the atomic raw file). The backends themselves are listed in `analysis.backends.registry`.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence, TextIO

from analysis.core import files
from analysis.core.run import Run

if TYPE_CHECKING:  # annotations only: a count job runs its plan without loading the sweep's configuration
    from pandas import DataFrame

    from analysis.core.config import Binary, Job, Sweep
    from analysis.core.kernels import KernelTable


class RunError(Exception):
    """A kernel run failed or produced no usable ROI: one line naming the cell."""


class RecordError(Exception):
    """A raw record that is not what its backend writes (`Backend.check_record`): one line naming
    the part; the caller adds the file and the fix."""


@dataclass
class Ready:
    """What a backend's preflight found on this machine."""
    versions: dict[str, str]  # tool -> version line: the stamps, and the provenance of every raw file
    notes: list[str] = field(default_factory=list)  # one line for each part this machine skips
    found: dict[str, Any] = field(default_factory=dict)  # what its plans need (gem5's path, what perf can count)


@dataclass(frozen=True)
class Bench:
    """What `./harness bench` hands a backend (Backend.bench): the sweep it times, the tree that
    sweep was counted into, and bench's own ways to time and report (analysis.commands.bench)."""
    config: str  # the sweep file, relative to the repository
    work: Path  # results/ and build/ of the timed sweep
    # Wall and CPU seconds of one Snakemake target of the sweep on that tree; hidden=True: with
    # every backend's HIDE_ENV set (the counts timed alone).
    time_target: Callable[[str, bool], tuple[float, float]]
    figure: Callable[..., dict[str, Any]]  # a timing entry of bench.json: figure(seconds, cpu, target, **extra)
    verdict: Callable[[float, float], str]  # "target <= T: met" (value, target)
    targets: dict[str, float]  # bench's targets by name
    read_counts: Callable[[Path], DataFrame]
    # Wall and CPU seconds of a Snakemake target of another sweep file on the same build tree,
    # its results in a folder of its own: (sweep file, results folder, hidden, target).
    time_sweep: Callable[[str, Path, bool, str], tuple[float, float]]
    # Each check's result and verdict ("pass | verdict text") from a sweep file's results folder.
    verdicts: Callable[[str, Path], dict[str, str]]
    # Further top-level entries of bench.json a backend adds (gem5: gem5_sampled), by key.
    extra: dict[str, Any] = field(default_factory=dict)
    # Builds binaries of the timed sweep on its tree (any backend's markers) and returns their
    # paths (armie: its stand-in's runs in the guest); None: bench cannot build here.
    binaries: Callable[[list[Binary]], dict[Binary, Path]] | None = None
    cores: int = 1  # bench's --cores


@dataclass(frozen=True)
class Estimate:
    """A model's estimate of perf's table (Backend.estimates): rows in perf.csv's shape (metrics
    time_per_call and bandwidth), and the label every figure of them carries."""
    label: str
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Plan:
    """One job as the workflow planned it, written to a JSON file the job reads: the job runs
    it as it is, without loading the sweep again."""
    backend: str
    binary: str
    cpu_model: str
    runs: tuple[Run, ...]
    time_limits: tuple[float, ...]  # seconds, one per run
    env: dict[str, str]  # the guest's environment (the MPI rows')
    meta: dict[str, Any]  # what the raw file records of the job: row, build commands, versions
    settings: dict[str, Any]  # what only this backend reads (plugin directory, gem5 system, perf events)

    def to_json(self) -> str:
        runs = [{"vl": r.vl, "size": r.size, "op": r.op, "dtype": r.dtype, "params": [list(p) for p in r.params],
                 "sve": r.sve} for r in self.runs]
        return json.dumps({"backend": self.backend, "binary": self.binary, "cpu_model": self.cpu_model, "runs": runs,
                           "time_limits": list(self.time_limits), "env": self.env, "meta": self.meta,
                           "settings": self.settings}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        d = json.loads(text)
        runs = tuple(Run(r["vl"], r["size"], r["op"], r["dtype"], tuple((k, v) for k, v in r["params"]), r["sve"])
                     for r in d["runs"])
        return cls(d["backend"], d["binary"], d["cpu_model"], runs, tuple(d["time_limits"]), d["env"], d["meta"],
                   d["settings"])


class Backend(Protocol):
    """One way to measure a kernel binary. A backend is one module of analysis/backends/ with
    these names, listed once in analysis.backends.registry.REGISTRY; the workflow and the
    analysis ask it, never test its name."""

    NAME: str  # the `backend` column of the tables, the folder of its binaries and raw files
    STAGE: str  # the workflow stage its jobs belong to (count, simulate, measure): their log folder
    MARKER: str  # kernels/roi/ source of the ROI marker object its binaries link (.S: one per
    #              compiler; .c: one per build)
    EXCLUSIVE: bool  # a job takes every core (timing measurements), unless its settings say "exclusive": false
    GROUPED: bool  # through Slurm its cells share grouped Slurm jobs (short cells); else one Slurm job per cell
    TABLE: str  # the table its rows go to: counts.csv, or perf.csv (statistics over processes: such a
    #             backend also has stats_rows(meta, record), its rows of that table, and
    #             stats_report(stats, metas, counts, sweep), its lines of results/perf_summary.md)
    SHARES_PREPARATIONS: bool  # its jobs get settings["prep_cache"] (analysis.stages.build.prep_cache_dir)

    def preflight(self, sweep: Sweep) -> Ready | None:
        """None when the sweep does not use this backend; raises ToolchainError naming the fix
        when a tool it needs is missing; a part it skips on this machine is a note."""

    def jobs(self, sweep: Sweep, ready: Ready | None) -> list[Job]:
        """The sweep's jobs for this backend (Sweep.expand), as far as this machine runs them
        (`ready`); ready=None: every job the sweep declares, whatever this machine has."""

    def time_factor(self, sweep: Sweep) -> float:
        """How much slower than QEMU a run is (scales the derived time limits)."""

    def settings(self, sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
        """What one job needs besides its runs (JSON-serialisable, written into its plan)."""

    def inputs(self, build_dir: Path) -> list[str]:
        """Files a job reads besides its binary and plan (the rule's inputs)."""

    def run_job(self, plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run every cell of the plan: what the raw file adds to the plan's meta, and one record
        per run; raises RunError naming the cell."""

    def metrics(self, meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
        """A raw record as (metric, integer value) pairs for the tidy table."""

    def check_record(self, run: dict[str, Any], where: str) -> None:
        """Raise RecordError when a raw record is not what this backend writes (docs/contracts.md 3):
        the collect stage checks every record so before any number of it reaches the table (its
        cell and VL are checked there, for every backend alike)."""

    # What the reports make of its rows.
    NOT_RUN: tuple[str, str] | None  # (why, what did not run) when a finished sweep may lack its
    #                      rows (a tool found on some machines only): its figures are then left out
    #                      and its checks skipped, saying so; None: its rows are there whenever the
    #                      sweep asks for them

    EVIDENCE: str  # the data a verdict resting on its rows names, in the summary's verdict table
    #                ("QEMU plugins", "gem5"), where the backend runs as designed: a check whose rows
    #                were not run names it

    def evidence(self, meta: dict[str, Any]) -> str:
        """The data one raw file's rows are, from what its job recorded of where it ran (its meta):
        provenance.csv's evidence column and the verdict tables' (perf in the guest or perf on
        A64FX; ArmIE, or DynamoRIO in the guest). `fixed_evidence(EVIDENCE)` for a backend that
        runs in one place."""

    def report(self, counts: DataFrame, prov: DataFrame) -> list[str]:
        """Lines of results/summary.md about its rows of the counts table (gem5, armie: their
        agreement with QEMU's counts); [] for none. `prov`: provenance.csv (where its rows ran:
        the evidence column)."""

    def estimates(self, counts: DataFrame, prov: DataFrame, table: KernelTable) -> Estimate | None:
        """Times its rows of counts.csv estimate for the perf figures (a cycle model's cycles at its
        clock: SimEng's A64FX core for Fig. 11, 12 without the hardware), drawn as figures of their
        own under the estimate's label, never into perf.csv; None for none (`no_estimates`)."""

    HIDE_ENV: dict[str, str]  # the environment under which a sweep goes on without it ({}: none; bench
    #                           times the counts alone with gem5's GEM5=none)

    def bench(self, bench: Bench) -> tuple[dict[str, Any] | None, list[str]]:
        """What `./harness bench` times of it beyond the count sweep (gem5's cycle sweep, perf's
        measurements): its entry of bench.json (None: nothing here) and the lines to print."""


# Staging directories (a fixed-length path for every run; their owners): analysis/backends/staging.py.
from analysis.backends.staging import (OWNER_FILE, STAGE_PREFIX, STAGE_ROOT, STAGE_TAG_ENV,  # noqa: E402,F401
                                       STAGED_NAME, clean_stale_stages, staged, started)


def exit_on_signals() -> None:
    """SIGTERM (Snakemake stopping a job) and SIGINT unwind the stack like an exception, so the
    process group of a running emulator is killed and staging directories are removed."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def run_limited(cmd: list[str], timeout: float | None, cell: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True)` in a process group of its own,
    killed whole (QEMU, gem5 and whatever they started) when the run exceeds `timeout`
    seconds or this process is stopped: `run_cells` with one cell."""
    return run_cells(cmd, [timeout], [cell], None, **kwargs)


# The longest single wait for output: poll() takes milliseconds in a C int, and a limit beyond
# ~24 days (a 999999999999-byte size, or a large time_limit) raised OverflowError. The loop
# wakes once a day and waits again until the limit is reached.
MAX_WAIT = 86400.0


def run_cells(cmd: list[str], limits: Sequence[float | None], cells: Sequence[str], done: bytes | None,
              on_done: Callable[[int, float], None] | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """`run_limited` for a process that runs cells one after another and prints a line starting
    with `done` as each ends (a batch): cell k may take limits[k] seconds from the end of the
    one before it, and the error names the cell that ran out of time. `on_done(k, seconds)`
    is called as cell k ends (the job's log shows progress within a long batch). done=None:
    the process is one cell."""
    out, err = bytearray(), bytearray()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                          preexec_fn=_die_with_parent, **kwargs) as proc:
        try:
            with selectors.DefaultSelector() as sel:
                assert proc.stdout is not None and proc.stderr is not None
                sel.register(proc.stdout, selectors.EVENT_READ, out)
                sel.register(proc.stderr, selectors.EVENT_READ, err)
                k, start = 0, time.monotonic()
                scanned, ended = 0, 0  # stdout before `scanned` holds `ended` done lines
                while sel.get_map():
                    limit = limits[k] if k < len(limits) else None
                    wait = None if limit is None else min(MAX_WAIT, max(0.0, start + limit - time.monotonic()))
                    events = sel.select(wait)
                    if limit is not None and not events and time.monotonic() >= start + limit:
                        _kill_group(proc)
                        raise RunError(f"{cells[k]}: stopped after its time limit of {limit:g} s (killed); if the "
                                       "kernel is merely slow, raise time_limit in the sweep file (per kernel: "
                                       "kernels/time_limit)")
                    for key, _ in events:
                        data = os.read(key.fd, 65536)
                        if not data:
                            sel.unregister(key.fileobj)
                            continue
                        key.data.extend(data)
                        if key.data is not out or done is None:
                            continue
                        # Only the lines completed since the last read: splitting the whole output
                        # at every read made a job of 2,048 runs quadratic in its output.
                        last = out.rfind(b"\n")
                        if last >= scanned:
                            ended += sum(1 for ln in out[scanned:last].split(b"\n") if ln.startswith(done))
                            scanned = last + 1
                        for _ in range(k, ended):
                            now = time.monotonic()
                            if on_done:
                                on_done(k, now - start)
                            k, start = k + 1, now
            proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def _die_with_parent() -> None:
    """In the child: SIGKILL when the job that started it dies, even by SIGKILL (which runs no
    clean-up), so no emulator outlives its job."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


PR_SET_PDEATHSIG = 1


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def cell_name(binary: Path, cpu_model: str, run: Run) -> str:
    return f"{binary.name} cpu={cpu_model} vl={run.vl} size={run.size}" + (f" {run.op}/{run.dtype}" if run.op != "-" else "")


def parse_ok_line(stdout: str, cell: str) -> dict[str, str]:
    """The kernel's `ok vl=... size=... checksum=...` line as a dict (docs/contracts.md 1)."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith("ok ")), "")
    fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    if "vl" not in fields or "checksum" not in fields:
        raise RunError(f"{cell}: the kernel printed no 'ok vl=... size=... checksum=...' line: {stdout[:200]!r}")
    return fields


def check_vl_seen(binary: Path, cpu_model: str, run: Run, seen: int) -> None:
    asked = run.vl if run.sve else 0  # a run without SVE has no VL (its binary is told 0)
    if seen != asked:
        raise RunError(f"{cell_name(binary, cpu_model, run)}: ran at VL {seen} bits, not the {asked} asked for")


def count_job(plan: Plan, run_once: Callable[[Run, float], dict[str, Any]], log: TextIO = sys.stderr) -> list[dict[str, Any]]:
    """Every run of a plan, one record each (`run_once(run, time_limit)`), each checked for the
    VL it ran at; a line per run to the log."""
    binary = Path(plan.binary)
    records = []
    for i, (run, limit) in enumerate(zip(plan.runs, plan.time_limits), 1):
        rec = run_once(run, limit)
        records.append(rec)
        log_record(binary, plan, i, rec, log)
    return records


def log_record(binary: Path, plan: Plan, i: int, rec: dict[str, Any], log: TextIO) -> None:
    """Check the VL record i (1-based) of a plan ran at and write its line to the job's log."""
    run = plan.runs[i - 1]
    check_vl_seen(binary, plan.cpu_model, run, rec["vl_seen"])
    what = (f" roi={rec['inscount']['roi']['total']}" if "inscount" in rec
            else f" cycles={rec['gem5']['cycles']:.0f} insts={rec['gem5']['insts']:.0f}" if "gem5" in rec
            else f" {rec['not_run']}" if "not_run" in rec
            else f" cycles={rec['simeng']['cycles']} retired={rec['simeng']['retired']}" if "simeng" in rec else "")
    print(f"[{i}/{len(plan.runs)}] {cell_name(binary, plan.cpu_model, run)}{what} {rec['seconds']}s", file=log, flush=True)


# The key of a raw file's meta under which a job run in the emulated AArch64 guest
# (analysis.core.arm64_vm) records the guest: its kernel, QEMU and command line.
GUEST_META = "guest"


def find_tool(given: str | None, off: str, cached: Callable[[], Path | None]) -> Path | None:
    """A simulator's executable (gem5's, SimEng's): the one `given` (its environment variable, else
    the sweep file), else the one `cached()` finds where setup builds it; None when there is none
    or given is `off`. A named binary that is missing is not replaced by the cached one: the
    user asked for that one."""
    if given == off:
        return None
    path = Path(given).expanduser() if given else cached()
    return path if path is not None and path.is_file() and os.access(path, os.X_OK) else None


def fixed_evidence(name: str) -> Callable[[dict[str, Any]], str]:
    """Backend.evidence of a backend that runs in one place: every raw file of it is `name`."""
    return lambda meta: name


def no_report(counts: DataFrame, prov: DataFrame) -> list[str]:
    """Backend.report of a backend that adds nothing to results/summary.md."""
    return []


def no_estimates(counts: DataFrame, prov: DataFrame, table: KernelTable) -> Estimate | None:
    """Backend.estimates of a backend whose rows estimate no time."""
    return None


def no_bench(bench: Bench) -> tuple[dict[str, Any] | None, list[str]]:
    """Backend.bench of a backend that `./harness bench` times within the count sweep alone."""
    return None, []


def content_sha256(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The checksum a raw file carries of its own content (canonical JSON of meta and runs)."""
    text = json.dumps({"meta": meta, "runs": records}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_raw(out: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """A job's raw JSON, atomically: a failed job leaves no file for a later stage to read.
    It carries a checksum of its content, so an edit or truncation afterwards is detected."""
    files.write_text_atomic(out, json.dumps({"meta": meta, "runs": records, "sha256": content_sha256(meta, records)}))
