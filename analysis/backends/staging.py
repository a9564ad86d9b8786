"""Staging directories: every run executes a private copy of its binary at a path of one fixed
length, in a directory that names the process that made it (analysis.backends re-exports these)."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# QEMU puts the program's absolute path on the guest stack, and glibc's start-up runs a few
# instructions more or fewer with its length. Every run therefore executes a copy named
# STAGED_NAME in a fresh directory of one fixed length, whatever the caller's paths or TMPDIR.
STAGE_ROOT = "/tmp"
STAGE_PREFIX = "sve-count-"
STAGED_NAME = "k"


# The process that made a staging directory (its pid and start time: a test suite's processes
# wrap pid_max's 32,768 within minutes, and a killed job's pid was taken by a live process, so
# its directory outlived the next sweep), so that one left by a killed job (SIGKILL runs no
# clean-up) is recognised and removed by the next job.
OWNER_FILE = "owner.pid"
# When set (the test suite sets it for its session), its value is the owner file's second line:
# /tmp is shared by every user of the machine, and a session must tell its own staging
# directories from other sessions' to check that it left none behind (tests/conftest.py).
STAGE_TAG_ENV = "HARNESS_STAGE_TAG"


@contextmanager
def staged(binary: Path) -> Iterator[Path]:
    """A private copy of `binary` at /tmp/sve-count-XXXXXXXX/k; the directory also takes the
    clients' output files and is removed afterwards (on SIGTERM and SIGINT too, see
    `exit_on_signals`)."""
    with tempfile.TemporaryDirectory(prefix=STAGE_PREFIX, dir=STAGE_ROOT) as tmp:
        tag = os.environ.get(STAGE_TAG_ENV)
        (Path(tmp) / OWNER_FILE).write_text(f"{os.getpid()} {started(os.getpid())}\n" + (f"{tag}\n" if tag else ""))
        exe = Path(tmp) / STAGED_NAME
        shutil.copy2(binary, exe)
        yield exe


def started(pid: int) -> int | None:
    """When the process started (clock ticks after boot: /proc/PID/stat's 22nd field), if it runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])  # the fields after the command's name start at the 3rd


def _alive(pid: int, start: int | None) -> bool:
    """The process runs, and is the one that started at `start` (if given: an owner file of
    before the start time was written names the pid alone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None or started(pid) in (start, None)


def clean_stale_stages(root: str = STAGE_ROOT) -> list[Path]:
    """Remove the staging directories whose owner process is gone; returns them. Directories
    without an owner file, or of another user, are left alone."""
    removed = []
    for d in Path(root).glob(f"{STAGE_PREFIX}*"):
        try:
            if d.stat().st_uid != os.getuid():
                continue
            owner = [int(w) for w in (d / OWNER_FILE).read_text().splitlines()[0].split()]  # then the tag, if any
        except (OSError, ValueError, IndexError):
            continue
        if not _alive(owner[0], owner[1] if len(owner) > 1 else None):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed
