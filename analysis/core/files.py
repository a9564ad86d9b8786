"""Atomic writes of the harness's outputs (tables, raw counts, stamps, reports, golden
files): a temporary file beside the target, then a rename. A write that fails (a full disk, a
read-only folder) removes its temporary file and raises WriteError, one line that names the
path and the cause, so a failed write leaves neither a half file nor a stray temporary one.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Callable


class WriteError(OSError):
    """An output could not be written: one line naming the path and why. An OSError, so the
    stages' existing `except OSError` report it as they report any other."""

    def __str__(self) -> str:
        return str(self.strerror)  # the line itself, without OSError's "[Errno 28]"


def temp_path(path: Path) -> Path:
    """The temporary file beside `path` (hidden, per process: two writers never share one)."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def write_error(path: Path, e: OSError) -> WriteError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f"{shutil.disk_usage(path.parent).free // 1024} KiB free"
        except OSError:
            free = "free space unknown"
        return WriteError(e.errno, f"cannot write {path}: no space left on its device ({free}): free some space or "
                                   "choose another directory (--set results_dir=DIR, --set build_dir=DIR), then run again")
    return WriteError(e.errno, f"cannot write {path}: {e.strerror or e}")


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` into a temporary file beside `path`, then rename it to `path`."""
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise (e if isinstance(e, WriteError) else write_error(path, e)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def python_digest(root: Path) -> str:
    """A short digest of every Python file under `root`, names and contents, in a fixed order."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
