"""Snakemake's locks, made safe for several Snakemakes in one clone.

Every sweep runs Snakemake in the clone (`--directory` is the clone), so every Snakemake of
the clone keeps its lock in the same `.snakemake/locks` folder: two sweeps into different
results folders, a `regress` beside a sweep, the test suite's two workers. Snakemake 9's file
persistence (the pinned 9.27.1, persistence/file.py) races there:

- A run that ends removes the whole folder (`shutil.rmtree`), the other runs' lock files with
  it. A run taking its lock at that moment fails with `FileNotFoundError` on its own lock file
  (it made the folder when it started, before building its DAG): the test suite met it now and
  then (four of session 22's five CI-style runs failed on one such test). A run that started
  later no longer sees the running one's locks, and may write the files it writes.
- A run opens the lock files it has just listed (one may be gone by then), and picks the number
  of its own by looking for a free one (two runs may pick the same).

rules/common.smk, which every Snakemake of the workflow reads, calls `serialise()`: a run
checks the others' locks (a dry run too) and writes its own, and later removes them, holding
an exclusive flock on `.snakemake/harness-locks.flock`, and a run removes its own lock files
only.
Snakemake's `--unlock` still removes every lock file; `./harness unlock` and the take-over of a
killed run's lock (analysis.commands.guard) hold the same flock.

Beside its lock files each run writes who holds them (`<pid>@<host>.owner.json`: host, pid,
results and build folder): a lock is taken over as stale only on the host that holds it, when
its process is gone (a clone on storage shared between hosts), and a sweep that needs files
another one locks (every sweep of the clone shares its build folder) names that sweep. Snakemake
plans its DAG before it takes its lock, so a run that finds the files it needs locked by a live
sweep of this host waits (one line), then starts again: it plans anew and finds done what the
other one made meanwhile. Where it cannot wait safely (the holder runs on another host, or is a
Snakemake that wrote no record) it stops with one line naming the holder and `--set build_dir=`.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Iterator

if TYPE_CHECKING:  # Snakemake is imported by the Snakemake process alone (guard runs without it)
    from snakemake.dag import DAG
    from snakemake.jobs import Job
    from snakemake.persistence.file import FilePersistence

FLOCK = "harness-locks.flock"  # beside the locks folder, which a `--unlock` removes
OWNER_SUFFIX = ".owner.json"  # in the locks folder, so that a `--unlock` removes it with them
LOCK_FILE = re.compile(r"[0-9]+\.(input|output)\.lock")  # Snakemake's names (persistence/file.py)
WAIT_SECONDS = 1.0  # how often a waiting run looks at the locks again
# The owner records a Snakemake waited for, handed to itself as it starts again.
WAITED_ENV = "HARNESS_LOCK_WAITED"
# Snakemake's own `DAG.finish`, which `finish` runs first (kept once, however often serialise runs).
DAG_FINISH: list[Callable[..., Awaitable[None]]] = []
# What this Snakemake works on, for its owner record (rules/common.smk sets it).
RUN = {"results_dir": "", "build_dir": ""}


def this_host() -> str:
    return socket.gethostname()


def is_snakemake(cmdline: list[bytes]) -> bool:
    """A Snakemake process: `python -m snakemake ...` (how the harness starts it), or its
    console script (`snakemake ...` or `python .../snakemake ...`)."""
    return cmdline[1:3] == [b"-m", b"snakemake"] or \
        any(Path(w.decode(errors="replace")).name == "snakemake" for w in cmdline[:2])


@dataclass(frozen=True)
class Owner:
    """Who holds some lock files of the clone: one Snakemake run's record."""
    record: Path
    host: str
    pid: int
    results_dir: str
    build_dir: str
    since: str
    locks: tuple[str, ...]

    def here(self) -> bool:
        return self.host == this_host()

    def alive(self) -> bool:
        """On this host: its Snakemake still runs (a reused pid runs something else). Another
        host's cannot be seen from here: taken as alive."""
        if not self.here():
            return True
        try:
            return is_snakemake(Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0"))
        except OSError:
            return False

    def who(self) -> str:
        where = "" if self.here() else f" on host {self.host}"
        return f"the sweep into {self.results_dir}{where} (pid {self.pid}, since {self.since})"


def owners(lockdir: str | Path) -> list[Owner]:
    """The owner records in a locks folder (one a run may be writing or removing is skipped)."""
    found = []
    for path in sorted(Path(lockdir).glob(f"*{OWNER_SUFFIX}")):
        try:
            r = json.loads(path.read_text())
            found.append(Owner(path, str(r["host"]), int(r["pid"]), str(r["results_dir"]), str(r["build_dir"]),
                               str(r["since"]), tuple(map(str, r["locks"]))))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def owner_of(name: str, found: list[Owner]) -> Owner | None:
    """The record that lists lock file `name`; None for a run that wrote none (another tool's
    Snakemake, or a harness before the records)."""
    return next((o for o in found if name in o.locks), None)


def remove(lockdir: str | Path, owner: Owner) -> None:
    """A stopped run's lock files and record (the caller holds the flock)."""
    for name in owner.locks:
        Path(lockdir, name).unlink(missing_ok=True)
    owner.record.unlink(missing_ok=True)


@contextmanager
def held(snakemake_dir: str | Path) -> Iterator[None]:
    """The clone's lock phase: one process at a time checks, writes or removes lock files
    (`snakemake_dir`: the clone's .snakemake)."""
    os.makedirs(snakemake_dir, exist_ok=True)
    with open(os.path.join(snakemake_dir, FLOCK), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield  # closing the file releases the flock


@contextmanager
def lock(self: FilePersistence) -> Iterator[None]:
    """Snakemake's `PersistenceBase.lock`, its check and writes under the flock, in a lock
    folder that another run's end may have removed since this run started; files another live
    run locks are waited for (then this Snakemake starts again), or refused in one line."""
    waited = set(filter(None, os.environ.pop(WAITED_ENV, "").split(",")))
    inputs = {str(f) for f in self.all_inputfiles()}
    outputs = {str(f) for f in self.all_outputfiles()}
    try:
        with held(self.path):
            os.makedirs(self._lockdir, exist_ok=True)
            shared = conflicts(self._lockdir, inputs, outputs)
            found = owners(self._lockdir)  # read with the lock files: a run ending now removes both
            if not shared:
                self._write_locks("input", sorted(inputs))
                self._write_locks("output", sorted(outputs))
                write_owner(self._lockdir, [os.path.basename(p) for p in self._lockfile.values()])
        if shared:
            wait_then_restart(self._lockdir, inputs, outputs, {owner_of(name, found) for name in shared},
                              set().union(*shared.values()), waited)
        yield
    finally:
        self.unlock()  # this run's own lock files, if it wrote any


def conflicts(lockdir: str, inputs: set[str], outputs: set[str]) -> dict[str, set[str]]:
    """The lock files of other runs that stop this one, each with the files it shares with it:
    Snakemake's `locked` (an output of another run that this one reads or writes, an input of
    another run that this one writes), lock file by lock file."""
    found = {}
    for name in sorted(os.listdir(lockdir)):
        m = LOCK_FILE.fullmatch(name)
        if not m:
            continue
        try:
            with open(os.path.join(lockdir, name)) as f:
                keys = {line.strip() for line in f}
        except FileNotFoundError:  # removed by its run as it ended
            continue
        common = keys & (outputs if m[1] == "input" else outputs | inputs)
        if common:
            found[name] = common
    return found


def write_owner(lockdir: str, locks: list[str]) -> None:
    """This run's record beside its lock files (the caller holds the flock)."""
    if not locks:
        return
    Path(lockdir, own_record()).write_text(json.dumps({"host": this_host(), "pid": os.getpid(), **RUN,
                                                        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                                                        "locks": locks}) + "\n")


def own_record() -> str:
    return f"{os.getpid()}@{this_host()}{OWNER_SUFFIX}"


def wait_then_restart(lockdir: str, inputs: set[str], outputs: set[str], holders: set[Owner | None],
                      shared: set[str], waited: set[str]) -> None:
    """Files this run needs are locked by other runs. Live sweeps of this host are waited for
    until they have made those files (a run releases each output as its job finishes: `made`),
    or, when this run would write files they read, until they end; a stopped run's lock is
    taken over; then this Snakemake starts again (its DAG, planned before the lock, took for
    missing what the other run made meanwhile). Another host's run, or one without a record,
    cannot be watched from here: one line, and exit. `holders`: whose locks stop it (None: a
    run without a record); `shared`: the files; `waited`: the records of the runs waited for
    before this start."""
    folder = shared_folder(shared)
    if None in holders:
        stop(f"error: another Snakemake in {os.getcwd()} (not started by this harness, or by an older one) "
             f"holds files this sweep needs in {folder}: wait for it to finish and run this again, or give this "
             "sweep a build folder of its own with --set build_dir=DIR")
    known = [o for o in holders if o is not None]
    away = [o for o in known if not o.here()]
    if away:
        stop(elsewhere(away[0], folder))
    live = [o for o in known if o.alive()]
    # The same runs in the way after a start that waited for their files: this run writes files
    # they read (a build they made is out of date for it), which waits for their end.
    until_end = any(o.record.name in waited for o in live)
    try:
        if live and in_the_way(lockdir, inputs, outputs, until_end):
            whom = " and ".join(o.who() for o in live)
            say(f"waiting for {whom}, which reads files in {folder} that this sweep would write again: this sweep "
                "goes on when it ends (Ctrl-C stops this one)" if until_end else
                f"waiting for {whom}, which is making files in {folder} that this sweep needs: this sweep goes on "
                "once they are made (Ctrl-C stops this one)")
            while live and in_the_way(lockdir, inputs, outputs, until_end):
                time.sleep(WAIT_SECONDS)
                live = [o for o in owners(lockdir) if o in live and o.alive()]
    except KeyboardInterrupt:
        raise SystemExit(130) from None  # the harness's one line says it stopped
    take_over_stopped(lockdir)
    os.environ[WAITED_ENV] = ",".join(o.record.name for o in known)
    restart()


def in_the_way(lockdir: str, inputs: set[str], outputs: set[str], until_end: bool) -> bool:
    """Whether other runs still lock what this one needs: any of their locks (`until_end`), or
    their outputs only (what they have yet to make)."""
    with held(os.path.dirname(lockdir)):
        found = conflicts(lockdir, inputs, outputs) if os.path.isdir(lockdir) else {}
    return any(until_end or name.endswith(".output.lock") for name in found)


async def finish(self: DAG, job: Job, update_checkpoint_dependencies: bool = True) -> None:
    """Snakemake's `DAG.finish` (a job, or a group of jobs, ended well), then the job's outputs
    leave this run's output lock: it will not write them again, and a sweep waiting for them
    may go on."""
    await DAG_FINISH[0](self, job, update_checkpoint_dependencies)
    persistence = self.workflow.persistence
    if hasattr(persistence, "_lockfile"):  # files, the default (a database persistence has no lock files)
        made(persistence, {str(f) for j in (job if job.is_group() else [job]) for f in j.output})


def made(self: FilePersistence, files: set[str]) -> None:
    """Drop `files` from this run's output lock file (written anew: a reader holds the flock)."""
    path = self._lockfile.get("output")
    # The results folder is this run's alone (its flock, analysis.commands.keep): nobody waits
    # for its files, and rewriting the lock for each of them cost 2.8 CPU s per 3,000 jobs.
    files = {f for f in files if not f.startswith(RUN["results_dir"] + os.sep)} if RUN["results_dir"] else files
    if not path or not files:
        return
    with held(self.path):
        try:
            keys = Path(path).read_text().splitlines()
        except FileNotFoundError:
            return
        left = [k for k in keys if k not in files]
        if len(left) < len(keys):
            Path(path + ".tmp").write_text("".join(k + "\n" for k in left))
            os.replace(path + ".tmp", path)


def take_over_stopped(lockdir: str) -> None:
    """The lock files of this host's runs that are gone (a killed sweep's), with one line."""
    with held(os.path.dirname(lockdir)):
        for o in remove_stopped(lockdir, owners(lockdir)):
            say(f"took over the Snakemake lock of {o.who()}, which has stopped; finished steps are kept")


def remove_stopped(lockdir: str | Path, found: list[Owner]) -> list[Owner]:
    """The runs of `found` on this host whose Snakemake is gone, their lock files and records
    removed (the caller holds the flock); another host's run is never taken for stopped."""
    stopped = [o for o in found if o.here() and not o.alive()]
    for o in stopped:
        remove(lockdir, o)
    return stopped


def elsewhere(owner: Owner, folder: str) -> str:
    """The line for files held by a run on another host (a clone on shared storage)."""
    return (f"error: {owner.who()} holds Snakemake locks on files in {folder}, which this sweep uses too: wait for "
            "it to finish, or run ./harness unlock if that sweep is known to be dead (nothing on this host can tell); "
            "or give this sweep a build folder of its own with --set build_dir=DIR")


def shared_folder(paths: set[str]) -> str:
    """Where the shared files are, as the user named it (relative to the clone where inside)."""
    common = os.path.commonpath(sorted(paths)) if paths else "."
    rel = os.path.relpath(common)
    return (common if rel.startswith("..") else rel) + "/"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def stop(line: str) -> None:
    """End this Snakemake with one line: nothing of it has run or been locked."""
    say(line)
    raise SystemExit(2)


def restart() -> None:
    """Start this Snakemake again, same process (the harness waits on its pid, its signals and
    the results folder's lock stay): it reads the workflow and plans its DAG anew."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


@contextmanager
def lock_warn_only(self: FilePersistence) -> Iterator[None]:
    """Snakemake's check of a dry run (it takes no lock), reading the lock files under the flock."""
    from snakemake.logging import logger

    with held(self.path):
        locked = os.path.isdir(self._lockdir) and self.locked
    if locked:
        logger.info("Error: Directory cannot be locked. Another Snakemake instance is running.")
    yield


def unlock(self: FilePersistence) -> None:
    """This run's own lock files, not the folder with the other runs' ones."""
    with held(self.path):
        for path in self._lockfile.values():
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        if self._lockfile:
            Path(self._lockdir, own_record()).unlink(missing_ok=True)
        self._lockfile.clear()


def cleanup_locks(self: FilePersistence) -> None:
    """`snakemake --unlock`: every lock file of the clone, as Snakemake removes them."""
    with held(self.path):
        self._delete_locks()


def serialise(results_dir: str, build_dir: str) -> None:
    """Install them in this Snakemake process (it persists to files: the default), for a run on
    these folders. Before the workflow runs: Snakemake binds a dry run's `lock` to
    `lock_warn_only` as it makes its persistence."""
    from snakemake.dag import DAG
    from snakemake.persistence.file import FilePersistence

    RUN.update(results_dir=results_dir, build_dir=build_dir)
    if not DAG_FINISH:  # a second call must not wrap the wrapper
        DAG_FINISH.append(DAG.finish)
    DAG.finish = finish  # type: ignore[method-assign]
    FilePersistence.lock = lock  # type: ignore[method-assign]
    FilePersistence.lock_warn_only = lock_warn_only  # type: ignore[method-assign]
    FilePersistence.unlock = unlock  # type: ignore[method-assign]
    FilePersistence.cleanup_locks = cleanup_locks  # type: ignore[method-assign]
