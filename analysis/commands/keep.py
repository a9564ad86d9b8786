"""A results folder's last good set outlives every failure: the lock, the kept set, the checks.

A sweep that writes a results folder takes its lock first (`ResultsLock`), so a second sweep on
the same folder is refused before it touches anything; the lock is an flock, which the kernel
releases when its holder dies, so a killed sweep's lock is taken over with one line.

A sweep that finishes records its set (`good.json`: every table, figure, report and raw file
with its size and modification time). The next sweep hard-links that set into
`kept/<when>/` before Snakemake starts: Snakemake deletes a job's old outputs before it runs it
and never writes a file in place, so the links keep the old contents at no cost in disk. When
the sweep fails or is stopped, the set stays whole in `kept/` and this run's partial tables and
figures go to `failed/` (`after_failure`); a sweep that finishes drops the kept copy of the set it
replaced. Several failures in a row keep the same last good set, and nothing is ever the only
copy being overwritten.

The tables (counts.csv, provenance.csv, perf.csv) carry a checksum file written with them
(analysis.core.table); `set_aside_edited` moves an edited or truncated one out of the way
before a sweep, so it is rebuilt from the raw records instead of being plotted.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from analysis.commands import uptodate
from analysis.core import files, table

GOOD = "good.json"
KEPT = "kept"
FAILED = "failed"
SET_ASIDE = "set-aside"  # edited tables, kept apart from every sweep's folders
LOCK = ".lock"
# What a sweep derives from its raw files; raw counts and logs are not derived.
DERIVED = ["counts.csv", "provenance.csv", "summary.md", "perf.csv", "perf_summary.md", "figures", "explain",
           "report.html", "drift.csv", "drift.png", *(f"{t}{table.CHECKSUM_SUFFIX}" for t in table.CHECKED_TABLES)]
# A good set also holds the raw records its tables came from (a failed job's old raw file is
# deleted by Snakemake before the job runs).
RAW = "raw"


class LockError(Exception):
    """Another sweep holds the results folder, or it cannot be written: one line naming the fix."""


@dataclass
class ResultsLock:
    """An exclusive flock on `<results>/.lock` for one command's whole run."""
    results_dir: Path
    handle: IO[str] | None = None

    def acquire(self, what: str) -> str | None:
        """Take the lock or raise LockError; returns the line to print when a dead holder's lock
        was taken over."""
        path = self.results_dir / LOCK
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a+")
        except OSError as e:
            raise LockError(f"cannot write the results folder {self.results_dir} ({e.strerror}): "
                            "make it writable or choose another with --set results_dir=DIR") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            if holder.startswith("pid ") and not _alive(holder):
                # Its Snakemake inherited the lock and still finishes the jobs it was running.
                raise LockError(f"a stopped command's Snakemake is still finishing its running jobs in "
                                f"{self.results_dir} ({holder}): wait for it to end; nothing was touched") from None
            raise LockError(f"another command is writing {self.results_dir} ({holder}): wait for it to finish; "
                            "nothing was touched") from None
        handle.seek(0)
        previous = handle.read().strip()
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, {what}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        self.handle = handle
        if previous and not _alive(previous):
            return f"took over the lock of a stopped command on {self.results_dir} ({previous})"
        return None

    def fileno(self) -> int:
        """The lock's descriptor, for Snakemake to inherit: the lock then lasts as long as it
        runs, even when the command is killed before it."""
        assert self.handle is not None
        return self.handle.fileno()

    def release(self) -> None:
        if self.handle is None:
            return
        self.handle.seek(0)
        self.handle.truncate()  # an empty lock file: nobody to take over from
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
        self.handle = None


def take(results_dir: Path, what: str) -> tuple[ResultsLock, Path | None, list[str]]:
    """Before a command writes a results folder (sweep, regress): its lock, the up-to-date record
    removed (analysis.commands.uptodate), edited tables set aside, the last good set kept. Returns the lock (the caller releases it), the kept set (for
    `after_failure` and `record_good`) and the lines to print."""
    lock = ResultsLock(results_dir)
    lines = [lock.acquire(what)]
    try:
        # First: from here until the command finishes, nothing says the folder is up to date.
        uptodate.invalidate(results_dir)
        lines += set_aside_edited(results_dir)
        kept = snapshot(results_dir)
    except BaseException:
        lock.release()
        raise
    return lock, kept, [line for line in lines if line]


def _alive(holder: str) -> bool:
    try:
        os.kill(int(holder.split(",")[0].removeprefix("pid ")), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    return True


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H-%M-%S")


def _files(results_dir: Path, names: list[str]) -> list[Path]:
    """The files under `names` (files or folders) of a results folder, relative to it."""
    out = []
    for name in names:
        p = results_dir / name
        if p.is_file():
            out.append(Path(name))
        elif p.is_dir():
            out += sorted(f.relative_to(results_dir) for f in p.rglob("*") if f.is_file())
    return out


def _identity(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def record_good(results_dir: Path, config_path: str, superseded: Path | None) -> str | None:
    """After a sweep that finished: what is in place is the last good set. The kept copy of the
    set before it (`superseded`, what `snapshot` returned) goes as far as the new set has each
    of its files in place; a run of part of the workflow (one target) leaves the rest kept.
    Returns a line when something stays kept."""
    good = {"made": _stamp(), "config": config_path,
            "files": {str(f): _identity(results_dir / f) for f in _files(results_dir, DERIVED + [RAW])}}
    if superseded is not None and superseded.name == good["made"]:
        good["made"] += f"-{os.getpid()}"  # two sweeps within a second: their kept sets stay apart
    files.write_text_atomic(results_dir / GOOD, json.dumps(good, indent=1) + "\n")
    if superseded is None or not superseded.is_dir():
        return None
    left = [rel for rel in _files(superseded, DERIVED + [RAW]) if not (results_dir / rel).exists()]
    if not left:
        shutil.rmtree(superseded, ignore_errors=True)
        _remove_if_empty(results_dir / KEPT)
        return None
    for rel in _files(superseded, DERIVED + [RAW]):
        if (results_dir / rel).exists():
            (superseded / rel).unlink()
    for name in DERIVED + [RAW]:
        if (superseded / name).is_dir():
            _remove_empty_dirs(superseded / name)
    return f"{len(left)} files of the earlier good set that this run did not write again stay in {superseded}"


def update_good(results_dir: Path, name: str) -> None:
    """A file rewritten from the good set (the report) stays part of it."""
    good = _read_good(results_dir)
    if good and name in good["files"]:
        good["files"][name] = _identity(results_dir / name)
        files.write_text_atomic(results_dir / GOOD, json.dumps(good, indent=1) + "\n")


def _read_good(results_dir: Path) -> dict | None:
    try:
        good = json.loads((results_dir / GOOD).read_text())
        return good if isinstance(good.get("files"), dict) and isinstance(good.get("made"), str) else None
    except (OSError, ValueError, AttributeError):
        return None


def snapshot(results_dir: Path) -> Path | None:
    """Hard-link the last good set, as far as it is still in place unchanged, into
    `kept/<when it was made>/` (once per set: a second failure finds it there); returns it.
    Tables and figures with no record (a harness before this one wrote them) are kept the same
    way: nobody can tell they are not good."""
    good = _read_good(results_dir) or _unrecorded(results_dir)
    if not good:
        return None
    kept = results_dir / KEPT / good["made"]
    for name, ident in good["files"].items():
        src, dst = results_dir / name, kept / name
        if dst.exists() or not src.is_file() or _identity(src) != ident:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(src, dst)
    if not kept.is_dir():
        return None
    (kept / GOOD).write_text(json.dumps(good, indent=1) + "\n")
    return kept


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link costs no disk; a filesystem without them (vfat, some network mounts) or a
    folder on another device gets a copy."""
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copy2(src, dst)


def _unrecorded(results_dir: Path) -> dict | None:
    derived = _files(results_dir, DERIVED)
    if not derived:
        return None
    newest = max((results_dir / f).stat().st_mtime for f in derived)
    return {"made": time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(newest)),
            "config": "unknown (written before the harness recorded its sweeps)",
            "files": {str(f): _identity(results_dir / f) for f in _files(results_dir, DERIVED + [RAW])}}


def after_failure(results_dir: Path, kept: Path | None) -> str | None:
    """After a failed or stopped sweep: no table or figure of it may look current. Its partial
    tables and figures go to `failed/` (replacing the previous failure's); the last good set
    stays whole in `kept/`. Nothing is put back in place: Snakemake's records describe the
    failed attempt, and a file restored behind its back could be taken for up to date. Raw
    files stay: each is a finished job's record, and a missing one is counted again. Returns
    the line that says where everything is (None when there was nothing to move)."""
    good = json.loads((kept / GOOD).read_text()) if kept else None
    failed = results_dir / FAILED
    moved = 0
    for rel in _files(results_dir, DERIVED):
        src = results_dir / rel
        if kept is not None and (kept / rel).exists() and src.samefile(kept / rel):
            src.unlink()  # its copy in kept/ is the one that counts
            continue
        if not moved:
            shutil.rmtree(failed, ignore_errors=True)
        (failed / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(src, failed / rel)  # a rename, or a copy where a folder is on another device
        moved += 1
    for name in DERIVED:
        if (results_dir / name).is_dir():
            _remove_empty_dirs(results_dir / name)
    partial = f"; its {moved} partial tables and figures are in {failed}" if moved else ""
    if good is None:
        return (f"the sweep did not finish and {results_dir} held no complete sweep before it{partial}"
                if moved else None)
    return (f"the sweep did not finish: the last good tables, figures and report (the sweep of {good['made']}, "
            f"--config {good['config']}) are kept in {kept} (open {kept / 'report.html'}){partial}")


def _remove_empty_dirs(root: Path) -> None:
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        _remove_if_empty(d)
    _remove_if_empty(root)


def _remove_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


def set_aside_edited(results_dir: Path) -> list[str]:
    """Move every table whose checksum file does not match (edited, truncated, or written
    without one) to `set-aside/<now>/`, so the sweep rebuilds it from the raw records;
    returns one line per table."""
    lines = []
    for name in table.CHECKED_TABLES:
        path = results_dir / name
        if not path.exists():
            continue
        try:
            table.verify(path)
        except table.TableError as e:
            aside = results_dir / SET_ASIDE / _stamp()
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(path, aside / name)
            lines.append(f"{e}; moved it to {aside / name} and rebuilding it from the raw records")
    return lines
