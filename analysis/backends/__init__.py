"""Count backends: each provides `run_once(binary, cpu_model, run) -> record`; `count_job`
runs every cell of a job through one and writes the job's raw JSON atomically."""
from __future__ import annotations

import json
import shutil
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


@contextmanager
def staged(binary: Path) -> Iterator[Path]:
    """A private copy of `binary` at /tmp/sve-count-XXXXXXXX/k; the directory also takes the
    clients' output files and is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=STAGE_PREFIX, dir=STAGE_ROOT) as tmp:
        exe = Path(tmp) / STAGED_NAME
        shutil.copy2(binary, exe)
        yield exe


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


def write_raw(out: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """A job's raw JSON, atomically: a failed job leaves no file for a later stage to read."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "runs": records}))
    tmp.replace(out)
