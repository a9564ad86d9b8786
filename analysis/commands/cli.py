"""Command-line front end behind ./harness: validate first, then hand over to Snakemake or pytest.

Every check that can fail on bad input (schema, kernel table, VLs, sizes, toolchain) runs
here before any job starts and prints one line naming the fix; nothing under results/ is
touched in that case.

`./harness sweep` with nothing changed since its last complete run is answered before this
module's imports (pandas alone is 0.35 s of them): analysis.commands.uptodate.
"""
from __future__ import annotations

import sys

from analysis.commands import uptodate

if __name__ == "__main__" and uptodate.answer(sys.argv[1:]):
    sys.exit(0)

# Imported only past the check above, on purpose.
import argparse
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TextIO

from analysis.backends import RunError, clean_stale_stages, perf, qemu, registry
from analysis.commands import guard, keep, regress, report, slurm
from analysis.commands.guard import snakemake_cmd
from analysis.core import config, files, mpi, table, toolchain
from analysis.stages import build, explain

REPO = config.REPO
MPI_HINT = ("Open MPI figures (paper Fig. 9, 10): ./harness sweep --config configs/mpi.yaml "
            "(installs Debian's arm64 Open MPI on first use)")


def validate(sweep_path: str, overrides: dict[str, str]) -> config.Sweep:
    sweep = config.load(sweep_path, overrides)
    config.check_writable(sweep)
    registry.preflight(sweep)
    unbuilt = mpi.unbuilt(sweep)
    if unbuilt:  # Open MPI 5 is built on request only: its rows skip, in one line
        print(mpi.skip_message(unbuilt), flush=True)
        sweep = mpi.without_unbuilt(sweep)
    mpi.check(sweep)
    return sweep


def install_mpi_if_asked_for(sweep_path: str, overrides: dict[str, str]) -> None:
    """A sweep with MPI rows (configs/mpi.yaml) installs the arm64 Open MPI on first use, through
    the same guarded installer as everything else; other sweeps never need it."""
    sweep = config.load(sweep_path, overrides)
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
    install_mpi_if_asked_for(ns.config, overrides)
    sweep = validate(ns.config, overrides)
    jobs = sweep.jobs()
    runs = sum(len(j.runs) for j in jobs)
    if writes_nothing(ns.snakemake_args):  # a dry run, a listing, an unlock: nothing to guard
        return run_snakemake(ns, sweep, overrides, on_slurm)
    lock, kept, lines = keep.take(sweep.results_dir, f"./harness sweep --config {ns.config}")
    try:
        for line in lines:
            say(line)
        print(f"sweep {ns.config}: {len(jobs)} count jobs, {runs} runs, results in {sweep.results_dir}", flush=True)
        say_perf_plan(sweep)
        try:
            rc = run_snakemake(ns, sweep, overrides, on_slurm, lock.fileno())
            if rc == 0:
                with guard.signals_held():  # the report and the record of the new good set, whole
                    page = report.write(sweep)
                    say(keep.record_good(sweep.results_dir, str(ns.config), kept))
                    if on_slurm is None:  # last: the folder as this run leaves it (never raises)
                        uptodate.record(sweep_command(ns), sweep)
                print(f"report: {page}", flush=True)
        except guard.Interrupted as e:
            raise guard.Interrupted(e.signum, keep.after_failure(sweep.results_dir, kept) or "") from None
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
    try:
        if on_slurm:
            # The Slurm path reads Snakemake's own record of a failed job to name the cell and
            # the Slurm reason, so it keeps Snakemake's plain output.
            return slurm.run(snakemake_cmd(ns.config, overrides, ns.cores, ns.snakemake_args, slurm=True), on_slurm)
        # Targets first: Snakemake 9's --logger takes several names and would read a target after it as one.
        return guard.run(snakemake_cmd(ns.config, overrides, ns.cores, ns.snakemake_args + logger_args(ns.verbose)),
                         env=snakemake_env(), pass_fds=() if lock_fd is None else (lock_fd,))
    finally:
        kept = keep_full_log(before, sweep.results_dir)
        if kept:
            say(f"full log: {kept}", sys.stdout)


def say(line: str | None, stream: TextIO = sys.stderr) -> None:
    """One line, if any. A terminal that hung up (SIGHUP) cannot take it: that must not turn a
    clean stop into a traceback."""
    if not line:
        return
    try:
        print(line, file=stream, flush=True)
    except OSError:
        pass


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


def snakemake_env() -> dict[str, str]:
    return guard.pythonpath_env(PLUGINS)


SNAKEMAKE_LOGS = REPO / ".snakemake" / "log"


def snakemake_logs() -> set[Path]:
    return set(SNAKEMAKE_LOGS.glob("*.snakemake.log"))


def keep_full_log(before: set[Path], results_dir: Path) -> Path | None:
    """Copy the log Snakemake wrote for this run (the newest one that was not there before)
    to results/logs/snakemake.log, beside the jobs' own logs."""
    new = sorted(snakemake_logs() - before, key=lambda p: p.stat().st_mtime)
    if not new:
        return None
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


def cmd_report(ns: argparse.Namespace) -> int:
    """results/report.html from what the last sweep of this configuration left in its results."""
    sweep = config.load(ns.config, config.parse_overrides(ns.set))
    lock = keep.ResultsLock(sweep.results_dir)
    if sweep.results_dir.is_dir():  # else there is nothing to report, and nothing is created to say so
        say(lock.acquire(f"./harness report --config {ns.config}"))
    try:
        page = report.write(sweep)
        keep.update_good(sweep.results_dir, report.NAME)  # written from the good set: it belongs to it
    finally:
        lock.release()
    print(f"report: {page}")
    return 0


def cmd_validate(ns: argparse.Namespace) -> int:
    overrides = config.parse_overrides(ns.set)
    sweep = validate(ns.config, overrides)
    print(f"{ns.config}: valid; {len(sweep.jobs())} count jobs")
    return 0


def single_cell(ns: argparse.Namespace) -> tuple[config.Sweep, config.Job]:
    """Validate a one-cell request (kernel, variant, build, VL, size, op, dtype) like a sweep."""
    overrides = config.parse_overrides(ns.set)
    sweep = config.load(ns.config, overrides)
    config.check_writable(sweep)
    sel = config.selection(sweep.table, {
        "kernel": ns.kernel, "variants": [ns.variant],
        **({"ops": [ns.op]} if ns.op else {}), **({"dtypes": [ns.dtype]} if ns.dtype else {}),
    })
    config.check_vl(ns.vl, "--vl")
    if ns.build != "vla":
        try:
            bits = config.parse_build(ns.build).vls_bits
        except config.ConfigError:
            bits = None
        if bits not in config.VLS_ALLOWED:
            raise config.ConfigError(f"--build {ns.build}: use vla or vls<N> with N in {', '.join(map(str, config.VLS_ALLOWED))}")
        if bits != ns.vl:
            raise config.ConfigError(
                f"the VLS binary {ns.build} is built for {bits} bits and cannot run at {ns.vl} bits: use --build vla or --vl {bits}"
            )
    if ns.vl not in config.CPU_MODEL_VLS[ns.cpu]:
        raise config.ConfigError(f"QEMU's {ns.cpu} model does not support VL {ns.vl}; it supports {', '.join(map(str, config.CPU_MODEL_VLS[ns.cpu]))}")
    if not 0 <= ns.size <= config.SIZE_MAX:
        raise config.ConfigError(f"--size {ns.size}: sizes are byte counts from 0 to {config.SIZE_MAX}")
    row = sweep.table.row(ns.kernel, ns.variant)
    config.check_size_fits(sweep.table.families[row.family], ns.size, f"--size {ns.size}")
    op, dtype = sel["op_dtypes"][0]
    params = config.run_params(sweep.table, row, op, dtype)
    runs = tuple(config.Run(ns.vl, s, op, dtype, params, sve=row.sve) for s in sorted({0, ns.size}))
    build = ns.build if row.sve else config.NOSVE  # a row without SVE has its own build
    return sweep, config.Job(config.Binary(ns.compiler, build, qemu.NAME, ns.kernel, ns.variant), ns.cpu, runs)


def cmd_count(ns: argparse.Namespace) -> int:
    """Build one binary if needed, run it at size 0 and n, print its ROI counts."""

    sweep, job = single_cell(ns)
    toolchain.preflight([ns.compiler])
    qemu.check_tools()
    mpi.check_row(sweep.table, ns.kernel, ns.variant)
    bd = sweep.build_dir
    binary = build.binary_path(bd, ns.compiler, job.binary.build, qemu.NAME, job.binary.name)
    targets = [str(binary)] + [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    over = {"build_dir": str(bd), "results_dir": str(sweep.results_dir)}
    proc = subprocess.run(snakemake_cmd(ns.config, over, 2, [*targets, "--quiet", "all"]), capture_output=True, text=True)
    if proc.returncode != 0:
        text = proc.stdout[-3000:] + proc.stderr[-3000:]
        print(text if text.strip() else guard.failure_tail(proc)[0], file=sys.stderr)
        return 1
    plugins = build.plugin_path(bd, "inscount").parent
    env = mpi.run_env(sweep.table, ns.kernel, ns.variant)
    clean_stale_stages()
    recs = [qemu.run_once(binary, job.cpu_model, r, plugins, env, sweep.time_limit(ns.kernel, ns.variant, r.size))
            for r in job.runs]
    base, meas = recs[0]["inscount"]["roi"], recs[-1]["inscount"]["roi"]
    print(f"{job.binary.name} {ns.build} cpu={ns.cpu} vl={ns.vl} size={ns.size} op={job.runs[0].op} dtype={job.runs[0].dtype}")
    print(f"  roi_net total {meas['total'] - base['total']}  sve {meas['sve'] - base['sve']}")
    for cls in meas["classes"]:
        d = meas["classes"][cls] - base["classes"][cls]
        if d:
            print(f"  roi_net class {cls:18s} {d}")
    print(f"  command: {' '.join(recs[-1]['command'])}  (cwd {binary.parent})")
    return 0


def cmd_unlock(ns: argparse.Namespace) -> int:
    print(guard.unlock())
    return 0


# Commands that run Snakemake in the tree (or check what a sweep would meet) look for a stale lock first.
LOCKING = ("sweep", "validate", "count", "bless", "regress", "test")


def cmd_regress(ns: argparse.Namespace) -> int:

    args = [ns.cmd, "--config", ns.config, "--cores", str(ns.cores)] + [a for kv in ns.set for a in ("--set", kv)]
    return regress.main(args + ([regress.ACCEPT_FLAG] if getattr(ns, "accept_tolerance", False) else []))


def cmd_explain(ns: argparse.Namespace) -> int:
    return explain.main(ns.pytest_args)


# `./harness test --fast`: the tests not marked slow (tests/markers.py), without the regression.
FAST_MARKERS = "not slow"


def cmd_test(ns: argparse.Namespace) -> int:
    """The test suite, then the regression of the committed golden counts (so a change that
    moves counts fails until it is re-blessed on purpose). --fast: the tests not marked slow,
    no regression, and how long that took."""
    # The slowest tests are named at the end, so the suite's time is watched (issue 29: at most 8 minutes
    # on 2 cores for the whole command, 60 s for --fast).
    # pytest's cache (--lf, --ff) goes under .venv like the bytecode (./harness sets
    # PYTHONPYCACHEPREFIX): the suite leaves nothing beside the sources (tests/hygiene.py checks
    # the rest; the cache is written after that check, so it is kept out here).
    # The user's own -m comes after --fast's, so it replaces it (pytest keeps the last -m).
    selection = ["-m", FAST_MARKERS] if ns.fast else []
    wall, before = time.monotonic(), os.times()
    rc = subprocess.call([sys.executable, "-m", "pytest", str(REPO / "tests"), "--durations=15",
                          "-o", f"cache_dir={REPO / '.venv' / 'pytest-cache'}", *selection, *ns.pytest_args], cwd=REPO)
    if ns.fast:
        after = os.times()
        cpu = after.children_user + after.children_system - before.children_user - before.children_system
        print(f"test --fast: {time.monotonic() - wall:.1f} s ({cpu:.1f} s CPU), pytest -m \"{FAST_MARKERS}\" "
              "without the regression; ./harness test runs everything", flush=True)
        return rc
    if rc != 0 or ns.pytest_args:
        return rc

    print("regress: configs/regress.yaml against results/golden/ (re-bless with ./harness bless)", flush=True)
    return regress.main(["regress", "--config", "configs/regress.yaml"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; argparse's error (exit 2) on what it does not take."""
    p = argparse.ArgumentParser(prog="harness", description="SVE kernel instruction counts at every vector length.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="build, count, tabulate and plot a sweep (default: the paper's figures)")
    s.add_argument("--config", default=uptodate.DEFAULT_CONFIG)
    s.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override results_dir/build_dir")
    s.add_argument("--verbose", action="store_true", help="Snakemake's record of every job instead of the progress display")
    s.add_argument("--slurm", nargs="?", const="", metavar="PROFILE",
                   help="every job as a Slurm job: the generic profile, or a64fx / a profile directory laid over it")
    s.add_argument("--slurm-account", metavar="A", help="with --slurm: sbatch --account")
    s.add_argument("--slurm-partition", metavar="P", help="with --slurm: sbatch --partition")
    s.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="after --: passed to snakemake")
    s.set_defaults(func=cmd_sweep)
    rp = sub.add_parser("report", help="write results/report.html (figures, summary, provenance, explained cells)")
    rp.add_argument("--config", default="configs/default.yaml")
    rp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    rp.set_defaults(func=cmd_report)
    v = sub.add_parser("validate", help="check a sweep configuration and the toolchain, run nothing")
    v.add_argument("--config", default="configs/default.yaml")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    v.set_defaults(func=cmd_validate)
    c = sub.add_parser("count", help="count one cell: one kernel variant at one VL and size (ROI net)")
    c.add_argument("kernel")
    c.add_argument("variant")
    c.add_argument("--vl", type=int, required=True, help="vector length in bits")
    c.add_argument("--size", type=int, default=1 << 20, help="bytes (default 1 MiB)")
    c.add_argument("--build", default="vla", help="vla (default) or vls<N>")
    c.add_argument("--cpu", default="max", choices=sorted(config.CPU_MODEL_VLS))
    c.add_argument("--compiler", default="gcc", choices=["gcc", "clang"])
    c.add_argument("--op")
    c.add_argument("--dtype")
    c.add_argument("--config", default="configs/default.yaml", help="sweep whose kernel table and dirs to use")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.set_defaults(func=cmd_count)
    for action, text in (("bless", "record the regression set's counts as golden files"),
                         ("regress", "recount the regression set and compare with the golden files; exit 0 all "
                                     "match, 1 a value moved (or is missing or new), 2 bad input, "
                                     f"{regress.EXIT_TOOLCHAIN} the toolchain changed and values moved within its "
                                     "tolerance set")):
        r = sub.add_parser(action, help=text, description=text)
        r.add_argument("--config", default="configs/regress.yaml")
        r.add_argument("--cores", type=int, default=os.cpu_count() or 1)
        r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
        if action == "regress":
            r.add_argument(regress.ACCEPT_FLAG, dest="accept_tolerance", action="store_true", help=regress.ACCEPT_HELP)
        r.set_defaults(func=cmd_regress)
    e = sub.add_parser("explain", help="explain one cell of results/counts.csv (commands, hot loop, functions, classes)",
                       add_help=False)
    e.set_defaults(func=cmd_explain)
    u = sub.add_parser("unlock", help="remove the Snakemake lock a killed sweep left behind")
    u.set_defaults(func=cmd_unlock)
    t = sub.add_parser("test", help="run the test suite, then the regression of the golden counts")
    t.add_argument("--fast", action="store_true",
                   help=f'only the tests not marked slow (pytest -m "{FAST_MARKERS}"), no regression: about a minute')
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    t.set_defaults(func=cmd_test)
    # pytest's own options (-q, -k ...) pass through `./harness test` untouched.
    ns, unknown = p.parse_known_args(argv)
    if ns.cmd in ("test", "explain"):
        ns.pytest_args = unknown + getattr(ns, "pytest_args", [])
        if ns.cmd == "test":  # --fast anywhere among pytest's options (after `-k EXPR` argparse leaves it there)
            ns.fast = ns.fast or "--fast" in ns.pytest_args
            ns.pytest_args = [a for a in ns.pytest_args if a != "--fast"]
    elif unknown:
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(ns, "snakemake_args", None) and ns.snakemake_args[0] == "--":
        ns.snakemake_args = ns.snakemake_args[1:]
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    try:
        if getattr(ns, "cores", 1) < 1:  # 0 makes Snakemake wait forever
            raise config.ConfigError(f"--cores {ns.cores}: give a whole number of cores >= 1")
        if ns.cmd in LOCKING and "--unlock" not in (getattr(ns, "snakemake_args", None) or []):
            say(guard.check_lock())
        return ns.func(ns)
    except (config.ConfigError, toolchain.ToolchainError, RunError, guard.LockError, keep.LockError,
            table.TableError, files.WriteError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return stopped(ns.cmd, guard.Interrupted())
    except guard.Interrupted as e:
        return stopped(ns.cmd, e)


def stopped(cmd: str, e: guard.Interrupted) -> int:
    """One line for a command stopped by a signal; the exit status says which (128 + its number)."""
    detail = f"; {e.detail}" if e.detail else ""
    say(f"interrupted: ./harness {cmd} stopped by {signal.Signals(e.signum).name}{detail}; run it again to resume "
        "(finished steps are kept)")
    return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
