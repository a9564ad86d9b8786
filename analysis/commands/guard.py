"""What every command checks around a Snakemake run: a lock left by a killed run, Ctrl-C, and
the tables and figures a failed sweep leaves behind.

- A killed Snakemake leaves its lock in `<repo>/.snakemake/locks`; the next run would stop
  with Snakemake's LockException (or, for `count` and `regress`, print nothing useful). A
  lock with no Snakemake running in the tree is stale: every command reports it in one line
  naming `./harness unlock`, before any work.
- Ctrl-C: Snakemake receives the same SIGINT and stops its jobs; the command waits for it to
  finish (so its lock is released) and ends with one line.
- A failed or interrupted sweep moves the tables and figures of its results directory to
  `<results>/stale/`, so nothing out of date is left looking current.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from analysis.core.config import REPO

LOCK_DIR = REPO / ".snakemake" / "locks"
# Derived outputs of a sweep (tables, figures, summaries); raw counts, logs and golden files stay.
DERIVED = ["counts.csv", "provenance.csv", "summary.md", "perf.csv", "perf_summary.md", "drift.csv", "drift.png",
           "figures", "explain", "report.html"]
STALE_DIR = "stale"


def pythonpath_env(first: Path) -> dict[str, str]:
    """This environment with `first` at the head of PYTHONPATH (plugins Snakemake must find)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{first}{os.pathsep}{path}" if path else str(first)}


# Snakemake as a module of this Python, never pip's console script .venv/bin/snakemake: for a
# clone path with a space (or a long one) that script is a /bin/sh polyglot with the path in
# double quotes, so a folder named `x$(cmd)y` ran cmd.
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake_cmd(sweep_path: str, overrides: dict[str, str], cores: int, extra: list[str],
                  slurm: bool = False) -> list[str]:
    """`slurm`: the command analysis.commands.slurm runs (it starts with SNAKEMAKE)."""
    conf = [f"sweep={sweep_path}"] + [f"{k}={v}" for k, v in overrides.items()]
    return [
        # --config takes every word after it: targets and options go first.
        *SNAKEMAKE, *extra, "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(REPO), "--cores", str(cores),
        # Snakemake's default ILP scheduler solves a CBC problem over every ready job each time it
        # looks (once per finished job, and more often with the rate limiter rules/common.smk
        # drops): a third of a default sweep's CPU time. Every job takes one core and nothing else:
        # greedy picks as well.
        "--scheduler", "greedy",
        # A killed run leaves its jobs marked incomplete: resume by redoing them (raw files are
        # written atomically and carry a checksum, so nothing partial is ever read).
        "--rerun-incomplete", "--config", *conf,
    ]


class LockError(Exception):
    """A stale Snakemake lock, or another sweep running in the tree: one line naming the fix."""


class Interrupted(Exception):
    """Ctrl-C: the workflow was stopped; one line says how to resume."""


def snakemake_running(root: Path = REPO) -> list[int]:
    """Process ids of Snakemake processes working in `root` (their working directory)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes().split(b"\0")
            if not is_snakemake(cmdline):
                continue
            if Path(os.readlink(d / "cwd")) == root.resolve():
                pids.append(int(d.name))
        except (OSError, ValueError):
            continue
    return pids


def is_snakemake(cmdline: list[bytes]) -> bool:
    """A Snakemake process: `python -m snakemake ...` (how the harness starts it), or its
    console script (`snakemake ...` or `python .../snakemake ...`)."""
    return cmdline[1:3] == [b"-m", b"snakemake"] or \
        any(Path(w.decode(errors="replace")).name == "snakemake" for w in cmdline[:2])


def failure_tail(proc: subprocess.CompletedProcess, lines: int = 15) -> list[str]:
    """The last lines a failed quiet Snakemake (`--quiet all`) printed. It prints nothing when
    another run in the clone holds files it needs (every config shares build/): then name that
    run and say to wait, not a bare exit status."""
    out = proc.stderr.strip() or proc.stdout.strip()
    if out:
        return out.splitlines()[-lines:]
    others = snakemake_running()
    if others:
        return [f"another Snakemake is running in {REPO} (pid {', '.join(map(str, others))}) and holds files this "
                "sweep needs: wait for it to finish, then run the command again"]
    return [f"snakemake exited with {proc.returncode}"]


def check_lock(root: Path = REPO) -> None:
    """Refuse to start when a Snakemake lock is left with no Snakemake running in the tree."""
    locks = sorted((root / ".snakemake" / "locks").glob("*.lock"))
    if locks and not snakemake_running(root):
        raise LockError(f"a killed sweep left its Snakemake lock in {locks[0].parent}: clear it with ./harness unlock, "
                        "then run the command again (finished results are kept)")


def unlock(root: Path = REPO) -> str:
    locks = sorted((root / ".snakemake" / "locks").glob("*.lock"))
    running = snakemake_running(root)
    if running:
        raise LockError(f"Snakemake is running in {root} (pid {', '.join(map(str, running))}): wait for it or stop it "
                        "with Ctrl-C; its lock is not stale")
    for lock in locks:
        lock.unlink()
    return f"unlock: removed {len(locks)} stale lock files from {root / '.snakemake' / 'locks'}" if locks else "unlock: no lock to remove"


def run(cmd: list[str], **kwargs: object) -> int:
    """Run Snakemake in the foreground. On Ctrl-C it got the same SIGINT: wait until it has
    stopped its jobs and released its lock, then raise Interrupted (a second Ctrl-C
    terminates it)."""
    proc = subprocess.Popen(cmd, **kwargs)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
        raise Interrupted() from None


def mark_stale(results_dir: Path) -> str | None:
    """Move the tables and figures of a results directory whose sweep failed to
    `<results>/stale/` (replacing an older stale set); returns the line that says so."""
    present = [results_dir / n for n in DERIVED if (results_dir / n).exists()]
    if not present:
        return None
    stale = results_dir / STALE_DIR
    shutil.rmtree(stale, ignore_errors=True)
    stale.mkdir(parents=True)
    for p in present:
        p.rename(stale / p.name)
    return (f"the sweep did not finish: its tables and figures no longer match {results_dir}; moved "
            f"{len(present)} of them to {stale} (a complete run writes them anew)")
