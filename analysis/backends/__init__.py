"""Count backends: each provides `run_once(binary, cpu_model, run) -> record`; `count_job`
runs every cell of a job through one and writes the job's raw JSON atomically."""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from analysis.config import Job, Run


class RunError(Exception):
    """A kernel run failed or produced no usable ROI: one line naming the cell."""


# QEMU puts the program's absolute path on the guest stack, and glibc's start-up runs a few
# instructions more or fewer with its length. Every run therefore executes a copy named
# STAGED_NAME in a fresh directory of one fixed length, whatever the caller's paths or TMPDIR.
STAGE_ROOT = "/tmp"
STAGE_PREFIX = "sve-count-"
STAGED_NAME = "k"


# The process that made a staging directory, so that one left by a killed job (SIGKILL runs no
# clean-up) is recognised and removed by the next job.
OWNER_FILE = "owner.pid"


@contextmanager
def staged(binary: Path) -> Iterator[Path]:
    """A private copy of `binary` at /tmp/sve-count-XXXXXXXX/k; the directory also takes the
    clients' output files and is removed afterwards (on SIGTERM and SIGINT too, see
    `exit_on_signals`)."""
    with tempfile.TemporaryDirectory(prefix=STAGE_PREFIX, dir=STAGE_ROOT) as tmp:
        (Path(tmp) / OWNER_FILE).write_text(f"{os.getpid()}\n")
        exe = Path(tmp) / STAGED_NAME
        shutil.copy2(binary, exe)
        yield exe


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_stages(root: str = STAGE_ROOT) -> list[Path]:
    """Remove the staging directories whose owner process is gone; returns them. Directories
    without an owner file, or of another user, are left alone."""
    removed = []
    for d in Path(root).glob(f"{STAGE_PREFIX}*"):
        try:
            if d.stat().st_uid != os.getuid():
                continue
            pid = int((d / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def exit_on_signals() -> None:
    """SIGTERM (Snakemake stopping a job) and SIGINT unwind the stack like an exception, so the
    process group of a running emulator is killed and staging directories are removed."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def run_limited(cmd: list[str], timeout: float | None, cell: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True)` in a process group of its own,
    killed whole (QEMU, gem5 and whatever they started) when the run exceeds `timeout`
    seconds or this process is stopped."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, preexec_fn=_die_with_parent, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise RunError(f"{cell}: stopped after its time limit of {timeout:g} s (killed); if the kernel is "
                           "merely slow, raise time_limit in the sweep file (per kernel: kernels/time_limit)") from None
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _die_with_parent() -> None:
    """In the child: SIGKILL when the job that started it dies, even by SIGKILL (which runs no
    clean-up), so no emulator outlives its job."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


PR_SET_PDEATHSIG = 1


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def cell_name(binary: Path, cpu_model: str, run: Run) -> str:
    return f"{binary.name} cpu={cpu_model} vl={run.vl} size={run.size}" + (f" {run.op}/{run.dtype}" if run.op != "-" else "")


def parse_ok_line(stdout: str, cell: str) -> dict[str, str]:
    """The kernel's `ok vl=... size=... checksum=...` line as a dict (docs/contracts.md 1)."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith("ok ")), "")
    fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    if "vl" not in fields or "checksum" not in fields:
        raise RunError(f"{cell}: the kernel printed no 'ok vl=... size=... checksum=...' line: {stdout[:200]!r}")
    return fields


def check_vl_seen(binary: Path, cpu_model: str, run: Run, seen: int) -> None:
    asked = run.vl if run.sve else 0  # a run without SVE has no VL (its binary is told 0)
    if seen != asked:
        raise RunError(f"{cell_name(binary, cpu_model, run)}: ran at VL {seen} bits, not the {asked} asked for")


def count_job(job: Job, run_once: Callable[[Run], dict[str, Any]], binary: Path, out: Path,
              meta: dict[str, Any], log: TextIO = sys.stderr) -> None:
    records = []
    for i, run in enumerate(job.runs, 1):
        rec = run_once(run)
        check_vl_seen(binary, job.cpu_model, run, rec["vl_seen"])
        records.append(rec)
        what = (f"roi={rec['inscount']['roi']['total']}" if "inscount" in rec
                else f"cycles={rec['gem5']['cycles']:.0f} insts={rec['gem5']['insts']:.0f}")
        print(f"[{i}/{len(job.runs)}] {cell_name(binary, job.cpu_model, run)} {what} {rec['seconds']}s", file=log, flush=True)
    write_raw(out, meta, records)


def content_sha256(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The checksum a raw file carries of its own content (canonical JSON of meta and runs)."""
    text = json.dumps({"meta": meta, "runs": records}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_raw(out: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """A job's raw JSON, atomically: a failed job leaves no file for a later stage to read.
    It carries a checksum of its content, so an edit or truncation afterwards is detected."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "runs": records, "sha256": content_sha256(meta, records)}))
    tmp.replace(out)
