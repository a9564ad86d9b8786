"""Count backend: run kernel binaries under qemu-aarch64 with the counting plugins.

`run_batch` runs several cells of one binary in one QEMU process (the binary's `--batch`
mode, docs/contracts.md section 1): QEMU and its plugins start once per job instead of once
per run, and the plugins write one file per run. `run_once` is a batch of one. Each run's
counts are what it executed between its run markers, whatever else the process ran, so a
cell counts the same alone or in a batch. Runs are reproducible: an empty environment
(`env -i`), a copy of the binary staged at a path of fixed length
(`analysis.backends.staged`), and fixed-width arguments, so that whole-program counts do not
depend on the caller's shell, paths or TMPDIR.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TextIO

from analysis.backends import (STAGE_PREFIX, STAGE_ROOT, STAGED_NAME, Plan, Ready, RunError, cell_name,
                               fixed_evidence, log_record, no_bench, no_estimates, no_report, parse_ok_line,
                               run_cells, staged)
from analysis.backends import registry
from analysis.backends.clients import check_client_record, client_metrics
from analysis.core.run import Run
from analysis.core.toolchain import ToolchainError, first_line

if TYPE_CHECKING:  # annotations only: a count job runs its plan without loading the sweep's configuration
    from analysis.core.config import Job, Sweep

NAME = "qemu"
STAGE = "count"
MARKER = "roi_qemu.S"
EXCLUSIVE = False
GROUPED = True  # through Slurm its cells (a second or two each) share grouped Slurm jobs
TABLE = "counts.csv"  # where its rows go (analysis.stages.collect)
NOT_RUN = None  # it runs wherever the sweep lists it (preflight fails where it cannot)
HIDE_ENV: dict[str, str] = {}
EVIDENCE = "QEMU plugins"  # the summary names its rows' verdicts so
evidence = fixed_evidence(EVIDENCE)  # it runs in one place
SHARES_PREPARATIONS = True  # its plans name a folder of shared preparations (run_batch's prep_cache)

QEMU = "qemu-aarch64"
SUPPORTED_QEMU = "7.2"  # the plugin API (version 1) and its struct layouts are those of 7.2
CLIENTS = ("inscount", "opcodes", "memory")


def check_qemu() -> str:
    if shutil.which(QEMU) is None:
        raise ToolchainError(f"{QEMU} not found: run ./harness setup (Debian package qemu-user)")
    line = first_line([QEMU, "--version"])
    m = re.search(r"version (\d+\.\d+)", line)
    if not m:
        raise ToolchainError(f"cannot read the version of {QEMU}: {line!r}")
    if m.group(1) != SUPPORTED_QEMU:
        raise ToolchainError(
            f"{QEMU} is version {m.group(1)}; the counting plugins are written for QEMU {SUPPORTED_QEMU} "
            f"(plugin API 1): install Debian 12's qemu-user"
        )
    return line


def check_tools() -> dict[str, str]:
    """QEMU 7.2 and the host gcc that builds the plugins: their version lines."""
    versions = {"qemu": check_qemu()}
    if shutil.which("gcc") is None:
        raise ToolchainError("host gcc not found (it builds the QEMU plugins): run ./harness setup")
    versions["host_gcc"] = first_line(["gcc", "--version"])
    return versions


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    return Ready(check_tools()) if NAME in sweep.backends else None


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    # The first counting backend also counts perf's SVE cells at perf's sizes (analysis.core.perf_cells).
    return sweep.count_jobs(NAME, perf_reference=registry.first_counting(sweep) == NAME)


def time_factor(sweep: Sweep) -> float:
    return 1.0


def plugin_dir(build_dir: Path) -> Path:
    return build_dir / "plugins"


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    # An MPI family's runs one per process: MPI_Init may be called once per process.
    family = sweep.table.families[sweep.table.row(job.binary.kernel, job.binary.variant).family]
    return {"plugin_dir": str(plugin_dir(sweep.build_dir)), "batch": not family.mpi}


def inputs(build_dir: Path) -> list[str]:
    return [str(plugin_dir(build_dir) / f"lib{c}.so") for c in CLIENTS]


def batches(plan: Plan) -> list[list[int]]:
    """The plan's runs (indices) grouped into processes: consecutive runs on the same CPU
    (with or without SVE) share one, unless the plan says its runs take one each (MPI). In a
    process the runs of one size and parameter set are consecutive, each VL after the other:
    the harness keeps the preparation of one such set (docs/contracts.md section 1)."""
    groups: list[list[int]] = []
    for i, run in enumerate(plan.runs):
        if groups and plan.settings.get("batch", True) and plan.runs[groups[-1][0]].sve == run.sve:
            groups[-1].append(i)
        else:
            groups.append([i])
    return [sorted(g, key=lambda i: (plan.runs[i].argv()[1:], plan.runs[i].vl)) for g in groups]


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    binary, plugins = Path(plan.binary), Path(plan.settings["plugin_dir"])
    records: dict[int, dict[str, Any]] = {}
    for group in batches(plan):
        runs = [plan.runs[i] for i in group]
        limits = [plan.time_limits[i] for i in group]

        def ran(k: int, seconds: float, group: list[int] = group) -> None:
            print(f"[{group[k] + 1}/{len(plan.runs)}] {cell_name(binary, plan.cpu_model, plan.runs[group[k]])} "
                  f"ran in {seconds:.3f}s", file=log, flush=True)

        prep = plan.settings.get("prep_cache")
        for i, rec in zip(group, run_batch(binary, plan.cpu_model, runs, plugins, plan.env, limits, ran,
                                           Path(prep) if prep else None)):
            records[i] = rec
            log_record(binary, plan, i + 1, rec, log)
    return {}, [records[i] for i in range(len(plan.runs))]


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    return client_metrics(run, mnemonics)


check_record = check_client_record  # the counting clients' shape
report = no_report
bench = no_bench  # bench times it as the count sweep
estimates = no_estimates  # counts, no times


# --- one run ----------------------------------------------------------------------------------


def batch_argv(runs: Sequence[Run]) -> list[str]:
    """The binary's arguments for these runs: `--batch <run> -- <run> ...` (one run too)."""
    words = ["--batch"]
    for k, run in enumerate(runs):
        words += (["--"] if k else []) + run.argv()
    return words


def qemu_command(binary: Path, cpu_model: str, runs: Sequence[Run], plugin_dir: Path, out_dir: Path,
                 env: dict[str, str] | None = None) -> list[str]:
    """One QEMU process for `runs` (all with SVE or all without), which starts at the first
    run's VL; the binary sets each run's. `env`: the only variables the guest sees (the MPI
    rows' OMPI_MCA_ess_singleton_isolated=1)."""
    first = runs[0]
    # A row without SVE (`sve: false`): the CPU has none, so rdvl and every SVE instruction trap.
    cpu = f"{cpu_model},sve-default-vector-length={first.vl // 8}" if first.sve else f"{cpu_model},sve=off"
    cmd = ["env", "-i", *(f"{k}={v}" for k, v in sorted((env or {}).items())), QEMU, "-cpu", cpu]
    for client in CLIENTS:
        extra = f",vl={':'.join(str(r.vl) for r in runs)}" if client == "memory" else ""
        cmd += ["-plugin", f"{(plugin_dir / f'lib{client}.so').resolve()},out={out_dir / (client + '.json')}{extra}"]
    return cmd + [f"./{binary.name}", *batch_argv(runs)]


def replay_command(binary: Path, cpu_model: str, run: Run, plugin_dir: Path, env: dict[str, str] | None = None,
                   out: str = "out") -> str:
    """A shell line that reruns the cell exactly as counted, writing the clients' JSON to
    ./<out> (as <client>.json.0: the cell is a batch of one). It runs in a subshell that removes
    its staging directory on exit (it used to stay in /tmp, with no owner file for the jobs'
    clean-up to find, after every replay) and leaves the caller's shell where it was."""
    d = f"{STAGE_ROOT}/{STAGE_PREFIX}XXXXXXXX"
    qemu = qemu_command(Path("$d") / STAGED_NAME, cpu_model, [run], plugin_dir, Path("$d"), env)
    # Every word quoted (paths may hold spaces or shell characters) except the $d it refers to.
    words = ['"$d"'.join(shlex.quote(part) if part else "" for part in w.split("$d")) for w in qemu]
    return (f'(d=$(mktemp -d {d}) && trap \'rm -rf "$d"\' EXIT && '
            f'cp {shlex.quote(str(binary.resolve()))} "$d/{STAGED_NAME}" && cd "$d" && '
            + " ".join(words) + f' && mkdir -p "$OLDPWD"/{shlex.quote(out)} && cp "$d"/*.json.* "$OLDPWD"/{shlex.quote(out)}/)')


def run_once(binary: Path, cpu_model: str, run: Run, plugin_dir: Path, env: dict[str, str] | None = None,
             timeout: float | None = None) -> dict[str, Any]:
    """Run one cell (a batch of one) and return its record."""
    return run_batch(binary, cpu_model, [run], plugin_dir, env, [timeout])[0]


def run_batch(binary: Path, cpu_model: str, runs: Sequence[Run], plugin_dir: Path,
              env: dict[str, str] | None = None, limits: Sequence[float | None] | None = None,
              on_done: Callable[[int, float], None] | None = None, prep_cache: Path | None = None) -> list[dict[str, Any]]:
    """Run cells of one binary in one QEMU process and return their records: argv, stdout,
    VL seen and every client's output. A dynamically linked (MPI) binary is staged the same
    way: its libraries come from the multiarch paths, not from beside the binary. `limits`:
    seconds each run may take before QEMU is killed (None: no limit); `on_done(k, seconds)`: as
    run k ends. A run that fails is named by its place: the runs before it printed their `ok`
    lines, it did not. `prep_cache`: the folder whose preparations the binary shares with the
    other binaries of its key (build.prep_cache_dir), linked as ./prep; counts are the same
    with or without it."""
    with staged(binary) as exe:
        out_dir = exe.parent
        if prep_cache is not None:
            prep_cache.mkdir(parents=True, exist_ok=True)
            (out_dir / "prep").symlink_to(prep_cache.resolve())
        cmd = qemu_command(exe, cpu_model, runs, plugin_dir, out_dir, env)
        t0 = time.monotonic()
        proc = run_cells(cmd, limits or [None] * len(runs), [cell_name(binary, cpu_model, r) for r in runs],
                         b"ok ", on_done, cwd=out_dir)
        seconds = time.monotonic() - t0
        oks = [ln for ln in proc.stdout.splitlines() if ln.startswith("ok ")]
        if proc.returncode != 0 or len(oks) != len(runs):
            failed = runs[min(len(oks), len(runs) - 1)]
            cell = cell_name(binary, cpu_model, failed)
            msg = failure_message(proc)
            raise RunError(f"{cell}: {msg} (exit {proc.returncode}; replay: "
                           f"{replay_command(binary, cpu_model, failed, plugin_dir, env)})")
        # Each record carries its cell's own command (a batch of one): the batch's, repeated in
        # every record, grew a raw file with the square of its runs (300 MB for 2,048 runs).
        return [record(binary, cpu_model, k, run, oks[k], out_dir, plugin_dir, env,
                       qemu_command(exe, cpu_model, [run], plugin_dir, out_dir, env), seconds, len(runs))
                for k, run in enumerate(runs)]


def failure_message(proc: subprocess.CompletedProcess) -> str:
    """Why a batch failed: the kernel's own error line (contract: FAIL or usage error), not what
    follows it; a run that exited 0 without its `ok` line broke the contract, and "exit status 0"
    read as if 0 were the failure."""
    lines = proc.stderr.strip().splitlines()
    if lines:
        return next((ln for ln in reversed(lines) if ln.startswith(("FAIL: ", "usage error: "))), lines[-1])
    if proc.returncode == 0:
        out = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        return ("the run printed no `ok` line (docs/contracts.md 1), though it exited 0; its last output line: "
                + (repr(out[-1].strip()[:200]) if out else "none"))
    return f"exit status {proc.returncode}"


def record(binary: Path, cpu_model: str, k: int, run: Run, ok_line: str, out_dir: Path, plugin_dir: Path,
           env: dict[str, str] | None, cmd: list[str], seconds: float, batch_runs: int) -> dict[str, Any]:
    """Run k of a batch as a record: its ok line and each client's file <client>.json.<k>."""
    cell = cell_name(binary, cpu_model, run)
    fields = parse_ok_line(ok_line, cell)
    clients: dict[str, Any] = {}
    for client in CLIENTS:
        path = out_dir / f"{client}.json.{k}"
        if not path.exists():
            raise RunError(f"{cell}: plugin {client} wrote no output for run {k} of its batch")
        data = json.loads(path.read_text())
        m = data.get("markers", {})
        if not m.get("balanced"):
            raise RunError(
                f"{cell}: ROI markers missing or unbalanced (begin={m.get('begin')}, end={m.get('end')}); "
                "the kernel must call roi_begin() and roi_end() around its work; no count is reported for it"
            )
        clients[client] = data
    return {
        "vl": run.vl,
        "vl_seen": int(fields["vl"]),
        "size": run.size,
        "op": run.op,
        "dtype": run.dtype,
        "argv": [f"./{STAGED_NAME}", *batch_argv([run])],
        "command": cmd,
        # Runnable as it is: the same staging (a copy at a path of the same length), the cell
        # alone (a batch of one counts it as the batch did).
        "command_line": replay_command(binary, cpu_model, run, plugin_dir, env),
        "checksum": fields.get("checksum"),
        # The process's wall time: shared by the runs of its batch.
        "seconds": round(seconds, 3),
        "batch_runs": batch_runs,
        **clients,
    }
