"""What every command checks around a Snakemake run: a lock left by a killed run, and a stop
by Ctrl-C, SIGTERM or SIGHUP.

- A killed Snakemake leaves its lock in `<repo>/.snakemake/locks`, which would stop the next
  run with Snakemake's LockException (or, for `count` and `regress`, print nothing useful). A
  lock whose Snakemake no longer runs on this host (its record says which, see
  analysis.core.snakemake_locks; a lock without one: no Snakemake runs in the tree) is stale:
  the next command removes it with one line and goes on, so the killed command resumes as it is
  run again. Another host's lock is never taken over (a clone on shared storage).
- Snakemake runs in a process group of its own, so a signal from the terminal (Ctrl-C, a
  closed terminal's SIGHUP) or `kill` reaches the command alone; it hands Snakemake's group a
  SIGINT, as a terminal's Ctrl-C would (the jobs stop and remove their staging, Snakemake
  releases its lock), waits for it, and raises Interrupted. Should the command itself be
  killed (SIGKILL), the kernel hands Snakemake a SIGINT (PR_SET_PDEATHSIG): it starts no new
  job and exits when its running ones end (each has its time limit), so nothing runs on
  unwatched for long. What a stopped sweep leaves in its results folder is
  analysis.commands.keep's.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, TextIO
from contextlib import contextmanager

from analysis.core import snakemake_locks
from analysis.core.snakemake_locks import is_snakemake
from analysis.core.config import REPO


def say(line: str | None, stream: TextIO = sys.stderr) -> None:
    """One line, if any. A terminal that hung up (SIGHUP) cannot take it: that must not turn a
    clean stop into a traceback."""
    if not line:
        return
    try:
        print(line, file=stream, flush=True)
    except OSError:
        pass


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
    """Ctrl-C, SIGTERM or SIGHUP: the workflow was stopped; one line says how to resume."""

    def __init__(self, signum: int = signal.SIGINT, detail: str = "") -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.detail = detail


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


def check_lock(root: Path = REPO) -> str | None:
    """Remove the Snakemake lock files no running Snakemake holds (a killed run's); returns the
    line that says so. A run's record (analysis.core.snakemake_locks) says whose files are
    whose: a lock of this host whose Snakemake is gone is stale, another host's is never taken
    over (its Snakemake cannot be seen from here). Lock files without a record (an older
    harness's) are stale when no Snakemake runs in the clone on this host."""
    lockdir = root / ".snakemake" / "locks"
    if not list(lockdir.glob("*.lock")):
        return None
    local = bool(snakemake_running(root))
    with snakemake_locks.held(root / ".snakemake"):  # a Snakemake starting now waits for it
        found = snakemake_locks.owners(lockdir)
        stopped = snakemake_locks.remove_stopped(lockdir, found)
        bare = [] if local else [p for p in lockdir.glob("*.lock") if snakemake_locks.owner_of(p.name, found) is None]
        for lock in bare:
            lock.unlink(missing_ok=True)
    if not stopped and not bare:
        return None
    why = f"{stopped[0].who()} has ended" if stopped else f"no Snakemake runs in {root}"
    return f"took over the Snakemake lock a stopped run left in {lockdir} ({why}); finished steps are kept"


def check_shared_build(sweep_build_dir: Path, root: Path = REPO) -> None:
    """Before a sweep touches anything: a sweep on another host (a clone on shared storage) that
    holds Snakemake locks on the same build folder cannot be waited for safely (nothing here can
    tell whether it still runs): refused, naming it and the fixes."""
    lockdir = root / ".snakemake" / "locks"
    for owner in snakemake_locks.owners(lockdir):
        holds = any((lockdir / name).exists() for name in owner.locks)  # not a record left alone
        if holds and not owner.here() and Path(owner.build_dir).resolve() == sweep_build_dir.resolve():
            raise LockError(snakemake_locks.elsewhere(owner, str(sweep_build_dir)).removeprefix("error: "))


def unlock(root: Path = REPO) -> str:
    locks = sorted((root / ".snakemake" / "locks").glob("*.lock"))
    running = snakemake_running(root)
    if running:
        raise LockError(f"Snakemake is running in {root} (pid {', '.join(map(str, running))}): wait for it or stop it "
                        "with Ctrl-C; its lock is not stale")
    if not locks:
        return "unlock: no lock to remove"
    with snakemake_locks.held(root / ".snakemake"):
        away = sorted({o.host for o in snakemake_locks.owners(root / ".snakemake" / "locks") if not o.here()})
        for lock in locks:
            lock.unlink(missing_ok=True)
        for record in (root / ".snakemake" / "locks").glob(f"*{snakemake_locks.OWNER_SUFFIX}"):
            record.unlink(missing_ok=True)
    hosts = f" (of host {', '.join(away)} too)" if away else ""
    return f"unlock: removed {len(locks)} stale lock files{hosts} from {root / '.snakemake' / 'locks'}"


# Signals that stop a command; each is handed to Snakemake as the SIGINT it stops cleanly on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long Snakemake may take to stop its jobs after the SIGINT before its whole process group
# is terminated, then killed (its jobs' own clean-up takes well under a second).
STOP_GRACE_SECONDS = 60


@contextmanager
def signals_held() -> Iterator[None]:
    """Stop signals wait until a short step that must not be cut in half is done."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextmanager
def forwarded_signals(proc: subprocess.Popen) -> Iterator[list[int]]:
    """While Snakemake runs: each stop signal is noted and handed to its process group as SIGINT
    (a second one terminates the group); yields the signals caught."""
    caught: list[int] = []

    def forward(signum: int, frame: object) -> None:
        caught.append(signum)
        try:
            if len(caught) == 1:
                # To the whole group, as Ctrl-C on a terminal: Snakemake's local executor waits
                # for its running jobs, which stop on their own SIGINT.
                os.killpg(proc.pid, signal.SIGINT)
            else:
                os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in STOP_SIGNALS}
    try:
        yield caught
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _stop_with_parent(parent: int) -> Callable[[], None]:
    """What the child runs before exec: a SIGINT when the command dies, whatever kills it. A
    command started with SIGINT ignored (`nohup ... &`) would hand that on, and blocked
    signals too (run() blocks them around the start): both are reset first."""
    def arm() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
        if os.getppid() != parent:  # it died before the request took effect
            os.kill(os.getpid(), signal.SIGINT)
    return arm


@contextmanager
def started(cmd: list[str], **kwargs: object) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """Snakemake started in a process group of its own (a SIGINT when the command dies), and,
    while the block runs, each stop signal handed to it (forwarded_signals); yields it and the
    signals caught."""
    # A stop signal between the start and the handlers would miss Snakemake (its own group):
    # held back until the handlers are in place.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        proc = subprocess.Popen(cmd, process_group=0, preexec_fn=_stop_with_parent(os.getpid()), **kwargs)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        raise
    with forwarded_signals(proc) as caught:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        yield proc, caught


def wait(proc: subprocess.Popen, caught: list[int]) -> int:
    """Its exit status; once a stop signal was caught, at most STOP_GRACE_SECONDS more, then its
    group is ended."""
    deadline = None
    while True:
        try:
            return proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        if caught and deadline is None:
            deadline = time.monotonic() + STOP_GRACE_SECONDS
        if deadline is not None and time.monotonic() > deadline:
            end_group(proc)


def run(cmd: list[str], **kwargs: object) -> int:
    """Run Snakemake in the foreground, in a process group of its own. On a stop signal it gets
    a SIGINT: wait until it has stopped its jobs and released its lock (at most
    STOP_GRACE_SECONDS, then its group is ended), then raise Interrupted."""
    with started(cmd, **kwargs) as (proc, caught):
        rc = wait(proc, caught)
    if caught:
        end_group(proc)  # anything its jobs left running in the group
        raise Interrupted(caught[0])
    return rc


def end_group(proc: subprocess.Popen) -> None:
    """Terminate, then kill, what is left of a process group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)
