"""Command-line front end behind ./harness: validate first, then hand over to Snakemake or pytest.

Every check that can fail on bad input (schema, kernel table, VLs, sizes, toolchain) runs
here before any job starts and prints one line naming the fix; nothing under results/ is
touched in that case.

`./harness sweep` with nothing changed since its last complete run is answered before this
module's imports (pandas alone is 0.35 s of them): analysis.commands.uptodate. The sweep
itself is analysis.commands.sweep's, one cell's count analysis.commands.cell's.
"""
from __future__ import annotations

import sys

from analysis.commands import uptodate

if __name__ == "__main__" and uptodate.answer(sys.argv[1:]):
    sys.exit(0)

# Imported only past the check above, on purpose.
import argparse
import os
import signal
import subprocess
import time

from analysis.backends import RunError
from analysis.commands import guard, keep, regress, report
from analysis.commands.cell import cmd_count
from analysis.commands.guard import say
from analysis.commands.sweep import cmd_sweep, validate
from analysis.core import config, files, table, toolchain
from analysis.stages import explain

REPO = config.REPO


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


def workers() -> list[str]:
    """pytest-xdist's options: a worker per core, each test file on one worker (its module's
    fixtures, a sweep or a local Slurm, are made once). Most of the suite waits on Snakemake's
    start and on one QEMU at a time, so one process left a core idle. A user's -n 0 after these
    runs the suite in one process (pytest keeps the last -n). The files go out in collection
    order, which tests/conftest.py makes the heaviest first (xdist's own order is by number of
    tests, which left the longest file to the end)."""
    cores = len(os.sched_getaffinity(0))
    return ["-n", str(cores), "--dist", "loadfile", "--no-loadscope-reorder"] if cores > 1 else []


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
                          "-o", f"cache_dir={REPO / '.venv' / 'pytest-cache'}", *workers(), *selection,
                          *ns.pytest_args], cwd=REPO)
    if ns.fast:
        after = os.times()
        # a difference of float sums: -0.0 when pytest's children used nothing
        cpu = max(0.0, (after.children_user - before.children_user) + (after.children_system - before.children_system))
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
                   help="through Slurm, the jobs in few grouped Slurm jobs: the generic profile, or a64fx / local / a profile directory laid over it")
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
