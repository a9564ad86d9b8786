"""`./harness sweep`: validate the sweep, take the results folder, run Snakemake, write the
report and the record of the good set (and of what the run depended on, analysis.commands.uptodate).

`validate` (`./harness validate` runs it alone) is every check of the sweep before any job starts.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from analysis.backends import perf, registry
from analysis.backends.staging import clean_stale_stages
from analysis.commands import guard, keep, report, slurm, uptodate
from analysis.commands.guard import say, snakemake_cmd
from analysis.core import config, failure, files, mpi, toolchain

REPO = config.REPO
MPI_HINT = ("Open MPI figures (paper Fig. 9, 10): ./harness sweep --config configs/mpi.yaml "
            "(installs Debian's arm64 Open MPI on first use)")


def validate(sweep_path: str, overrides: dict[str, str], machine: config.Machine | None = None) -> config.Sweep:
    """`machine`: where the runs run (through Slurm: the partition's nodes; None: here)."""
    sweep = config.load(sweep_path, overrides, machine)
    config.check_writable(sweep)
    registry.preflight(sweep)
    unbuilt = mpi.unbuilt(sweep)
    if unbuilt:  # Open MPI 5 is built on request only: its rows skip, in one line
        print(mpi.skip_message(unbuilt), flush=True)
        sweep = mpi.without_unbuilt(sweep)
    mpi.check(sweep)
    return sweep


def install_mpi_if_asked_for(sweep_path: str, overrides: dict[str, str], machine: config.Machine | None = None) -> None:
    """A sweep with MPI rows (configs/mpi.yaml) installs the arm64 Open MPI on first use, through
    the same guarded installer as everything else; other sweeps never need it."""
    sweep = config.load(sweep_path, overrides, machine)
    if mpi.needs_mpi(sweep) and not mpi.installed():
        print(f"sweep {sweep_path} needs Debian's arm64 Open MPI: running setup/install.sh --with-mpi", flush=True)
        if subprocess.call([str(REPO / "setup" / "install.sh"), "--with-mpi"]) != 0:
            why = (" (Debian 12's arm64 Open MPI 4.1 needs libmunge2:arm64 through PMIx, which cannot sit beside the "
                   "host Slurm's libmunge2:amd64: run its rows on a machine without slurm-wlm)") if shutil.which("slurmd") else ""
            raise toolchain.ToolchainError(f"installing the arm64 Open MPI failed (message above){why}; nothing was run")


def cmd_sweep(ns: argparse.Namespace) -> int:
    overrides = config.parse_overrides(ns.set)
    # A bad profile, a CHANGE_ME account or a cluster without a usable node stops here.
    on_slurm = slurm.prepare(ns.slurm, ns.slurm_account, ns.slurm_partition) if ns.slurm is not None else None
    # Sizes are judged by the memory of the machine that runs the jobs: through Slurm, its nodes.
    machine = on_slurm.machine() if on_slurm else None
    install_mpi_if_asked_for(ns.config, overrides, machine)
    sweep = validate(ns.config, overrides, machine)
    jobs = sweep.jobs()
    runs = sum(len(j.runs) for j in jobs)
    if writes_nothing(ns.snakemake_args):  # a dry run, a listing, an unlock: nothing to guard
        return run_snakemake(ns, sweep, overrides, on_slurm)
    guard.check_shared_build(sweep.build_dir)  # another host's sweep on this build folder: refused here
    lock, kept, lines = keep.take(sweep.results_dir, f"./harness sweep --config {ns.config}")
    # A job killed between writing its raw file and removing its staging copy leaves the resumed
    # run nothing to count, and only count jobs removed stale staging: the sweep's start does too.
    clean_stale_stages()
    try:
        for line in lines:
            say(line)
        print(f"sweep {ns.config}: {len(jobs)} count jobs, {runs} runs, results in {sweep.results_dir}", flush=True)
        say_perf_plan(sweep)
        try:
            rc = run_snakemake(ns, sweep, overrides, on_slurm, lock.fileno())
            if rc == 0:
                with guard.signals_held():  # the report and the record of the new good set, whole
                    # A run of a few targets (`-- <raw file>`) into a new folder makes no summary,
                    # and it did not fail: no page, and no error after it.
                    page = report.write(sweep) if report.has_summary(sweep.results_dir) else None
                    say(keep.record_good(sweep.results_dir, str(ns.config), kept))
                    if on_slurm is None:  # last: the folder as this run leaves it (never raises)
                        uptodate.record(sweep_command(ns), sweep)
                print(f"report: {page}" if page else "report: not written: the targets asked for made no summary "
                      "(a sweep without targets makes both)", flush=True)
        except guard.Interrupted as e:
            # The Slurm path's detail (its cancelled jobs) first, then what the results folder keeps.
            detail = "; ".join(d for d in (e.detail, keep.after_failure(sweep.results_dir, kept)) if d)
            raise guard.Interrupted(e.signum, detail) from None
        except BaseException:
            say(keep.after_failure(sweep.results_dir, kept))
            raise
        if rc != 0:
            say(keep.after_failure(sweep.results_dir, kept))
    finally:
        lock.release()
    if rc == 0 and not mpi.needs_mpi(sweep):
        print(MPI_HINT, flush=True)
    return rc


def sweep_command(ns: argparse.Namespace) -> uptodate.Command:
    """The sweep's command as the up-to-date check reads it from the command line."""
    return uptodate.Command(ns.config, tuple(ns.set), tuple(ns.snakemake_args))


def run_snakemake(ns: argparse.Namespace, sweep: config.Sweep, overrides: dict[str, str],
                  on_slurm: slurm.Plan | None, lock_fd: int | None = None) -> int:
    """`lock_fd`: the results folder's lock, which Snakemake inherits (it outlives a killed command)."""
    before = snakemake_logs()
    # A dry run or a listing writes no log of its own (Snakemake logs to a file only when it
    # runs): a new log there is another Snakemake's of the clone, and copying it wrote into the
    # results folder of a command that writes nothing (and moved its up-to-date record's outputs).
    keep_log = not writes_nothing(ns.snakemake_args)
    try:
        if on_slurm:
            # The Slurm path reads Snakemake's own record of a failed job to name the cell and
            # the Slurm reason, so it keeps Snakemake's plain output.
            # The profile's groups: the rules' `group:` on, each grouped Slurm job of its CPUs.
            return slurm.run(snakemake_cmd(ns.config, overrides | on_slurm.config(), on_slurm.groups.cores,
                                           ns.snakemake_args, slurm=True), on_slurm,
                             pass_fds=() if lock_fd is None else (lock_fd,))
        # Targets first: Snakemake 9's --logger takes several names and would read a target after it as one.
        return guard.run(snakemake_cmd(ns.config, overrides, ns.cores, ns.snakemake_args + logger_args(ns.verbose)),
                         env=snakemake_env(logger=not ns.verbose), pass_fds=() if lock_fd is None else (lock_fd,))
    finally:
        kept = keep_full_log(before, sweep.results_dir) if keep_log else None
        if kept:
            say(f"full log: {kept}", sys.stdout)


# Snakemake options under which it writes nothing (no lock, no kept set, no report): dry runs
# (also as a cluster of short flags, -np), listings, summaries, graphs, lint, unlock.
WRITES_NOTHING = {"--dry-run", "--dryrun", "--unlock", "--list", "--list-rules", "-l", "--list-target-rules", "--lt",
                  "--summary", "-S", "--detailed-summary", "-D", "--lint", "--dag", "--rulegraph", "--filegraph",
                  "--d3dag", "--list-changes", "--lc", "--list-code-changes", "--list-input-changes",
                  "--list-params-changes", "--list-untracked", "--lu", "--cleanup-metadata", "--cm"}


def writes_nothing(snakemake_args: list[str]) -> bool:
    return any(a in WRITES_NOTHING or (a.startswith("-") and not a.startswith("--") and "n" in a[1:])
               for a in snakemake_args)


# Our logger plugin (the rich plugin plus steps done of total and time left) lives here.
PLUGINS = REPO / "analysis" / "snakemake_plugins"


def logger_args(verbose: bool) -> list[str]:
    """The logger plugin draws a live progress panel on a terminal and prints only the job
    table, failures (with their log) and the end without one (CI); --verbose keeps Snakemake's
    own record of every job. Snakemake writes its full log to .snakemake/log/ either way."""
    return [] if verbose else ["--logger", "harness"]


def snakemake_env(logger: bool = False) -> dict[str, str]:
    """`logger`: the logger plugin prints each failed job's cause, so its job does not too."""
    return guard.pythonpath_env(PLUGINS) | ({failure.SHOWN_BY_LOGGER: "1"} if logger else {})


SNAKEMAKE_LOGS = REPO / ".snakemake" / "log"


def snakemake_logs() -> set[Path]:
    return set(SNAKEMAKE_LOGS.glob("*.snakemake.log"))


def keep_full_log(before: set[Path], results_dir: Path) -> Path | None:
    """Copy the log Snakemake wrote for this run (the newest one that was not there before;
    when another sweep of the clone ran meanwhile, the newest that names this results folder)
    to results/logs/snakemake.log, beside the jobs' own logs."""
    new = sorted(snakemake_logs() - before, key=lambda p: p.stat().st_mtime)
    if not new:
        return None
    if len(new) > 1:
        new = [p for p in new if str(results_dir) in p.read_text(errors="replace")] or new
    dest = results_dir / "logs" / "snakemake.log"
    files.write_atomic(dest, lambda tmp: shutil.copyfile(new[-1], tmp))
    return dest


def say_perf_plan(sweep: config.Sweep) -> None:
    """What the perf part will measure here (the workflow says, once, each part it skips)."""
    p = perf.plan(sweep)
    if p is None:
        return
    if p.jobs:
        print(p.line(), flush=True)
    if line := perf_cells_line(sweep):
        print(line, flush=True)


def perf_cells_line(sweep: config.Sweep) -> str | None:
    """The runs the first counting backend adds for perf's SVE cells at perf's sizes
    (analysis.core.perf_cells), beyond the count jobs the sweep's line names; None when none."""
    backend = registry.first_counting(sweep)
    if backend is None:
        return None
    added = (sum(len(j.runs) for j in registry.REGISTRY[backend].jobs(sweep, None))
             - sum(len(j.runs) for j in sweep.count_jobs(backend)))
    return (f"{backend}: {added} more runs count perf's SVE cells at perf's sizes (what perf's instruction counts "
            "are compared with)") if added else None
