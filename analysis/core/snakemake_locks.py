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
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # Snakemake is imported by the Snakemake process alone (guard runs without it)
    from snakemake.persistence.file import FilePersistence

FLOCK = "harness-locks.flock"  # beside the locks folder, which a `--unlock` removes


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
    folder that another run's end may have removed since this run started."""
    from snakemake.exceptions import LockException

    try:
        with held(self.path):
            os.makedirs(self._lockdir, exist_ok=True)
            if self.locked:
                raise LockException()
            self._write_locks("input", (str(f) for f in self.all_inputfiles()))
            self._write_locks("output", (str(f) for f in self.all_outputfiles()))
        yield
    finally:
        self.unlock()  # this run's own lock files, if it wrote any


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
        self._lockfile.clear()


def cleanup_locks(self: FilePersistence) -> None:
    """`snakemake --unlock`: every lock file of the clone, as Snakemake removes them."""
    with held(self.path):
        self._delete_locks()


def serialise() -> None:
    """Install them in this Snakemake process (it persists to files: the default). Before the
    workflow runs: Snakemake binds a dry run's `lock` to `lock_warn_only` as it makes its
    persistence."""
    from snakemake.persistence.file import FilePersistence

    FilePersistence.lock = lock  # type: ignore[method-assign]
    FilePersistence.lock_warn_only = lock_warn_only  # type: ignore[method-assign]
    FilePersistence.unlock = unlock  # type: ignore[method-assign]
    FilePersistence.cleanup_locks = cleanup_locks  # type: ignore[method-assign]
