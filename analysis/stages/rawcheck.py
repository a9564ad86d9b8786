"""Integrity of the raw job files at the collect hand-over: each is checked against its
checksum and against the plan of its job before any number of it reaches the table.

A raw file (docs/contracts.md 3, written by `analysis.backends.write_raw`) must be complete
JSON, carry the checksum of its own content, hold exactly the runs its job plans (VL, size,
op, dtype), each at the VL asked for and in the shape its backend writes (Backend.check_record:
the counting clients' records with every count an integer, the instruction classes summing to
the total, the SVE classes to the SVE count, and balanced markers). Anything else is an error
naming the file and the fix; nothing is collected from it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.backends import RecordError, content_sha256
from analysis.backends.registry import REGISTRY
from analysis.core import config

FIX = "delete it and re-run the sweep, which recounts that job"


class RawError(Exception):
    """A raw file that cannot be trusted: one line naming the file and the fix."""


def read_raw(path: Path) -> dict[str, Any]:
    """A raw job file, parsed and checked against the checksum it carries."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise RawError(f"raw file {path} is missing: re-run the sweep") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RawError(f"raw file {path} is not complete JSON ({e}): it was truncated or edited; {FIX}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict) or not isinstance(doc.get("runs"), list):
        raise RawError(f"raw file {path} lacks its 'meta' and 'runs' parts; {FIX}")
    if "sha256" not in doc:
        raise RawError(f"raw file {path} carries no checksum (written by an older harness or by hand); {FIX}")
    if doc["sha256"] != content_sha256(doc["meta"], doc["runs"]):
        raise RawError(f"raw file {path} does not match its checksum: it was edited after its job wrote it; {FIX}")
    return doc


def _check_run(run: Any, where: str, backend: str, sve: bool = True) -> None:
    """The cell and VL every record carries, then what its backend writes (Backend.check_record)."""
    if not isinstance(run, dict):
        raise RawError(f"{where} is not a run record")
    for key, kind in (("vl", int), ("size", int), ("op", str), ("dtype", str), ("vl_seen", int)):
        if not isinstance(run.get(key), kind):
            raise RawError(f"{where}.{key} is {run.get(key)!r}, not {kind.__name__}")
    # A row without SVE (its CPU has none) is told VL 0 and reads 0; the table keeps the swept VL.
    asked = run["vl"] if sve else 0
    if run["vl_seen"] != asked:
        raise RawError(f"{where}: ran at VL {run['vl_seen']}, not the {asked} asked for")
    try:
        REGISTRY[backend].check_record(run, where)
    except RecordError as e:
        raise RawError(str(e)) from None


def check_plan(doc: dict[str, Any], path: Path, job: config.Job) -> None:
    """Every run the job plans is in the file, once, and nothing else."""
    planned = [(r.vl, r.size, r.op, r.dtype) for r in job.runs]
    sve = all(r.sve for r in job.runs)
    try:
        for i, run in enumerate(doc["runs"]):
            _check_run(run, f"runs[{i}]", job.binary.backend, sve)
    except RawError as e:
        raise RawError(f"raw file {path}: {e}; {FIX}") from None
    present = [(r["vl"], r["size"], r["op"], r["dtype"]) for r in doc["runs"]]
    # Sets: a job of the full matrix has 2,048 runs, and list lookups made this quadratic.
    planned_set, present_set = set(planned), set(present)
    missing = [p for p in planned if p not in present_set]
    extra = [p for p in present if p not in planned_set]
    dup = len(present) != len(present_set)
    if missing or extra or dup:
        def show(cells: list[tuple]) -> str:
            return ", ".join(f"vl={v} size={s}" + ("" if o == config.NO_OP else f" {o}/{d}") for v, s, o, d in cells[:4]) + (
                f" and {len(cells) - 4} more" if len(cells) > 4 else "")
        what = "; ".join(x for x in (f"{len(missing)} planned runs missing ({show(missing)})" if missing else "",
                                     f"{len(extra)} runs not in the plan ({show(extra)})" if extra else "",
                                     "runs repeated" if dup else "") if x)
        raise RawError(f"raw file {path}: {what}; {FIX}")


META_KEYS = ("kernel", "variant", "backend", "compiler", "build", "cpu_model", "layout")


def job_key(backend: str, compiler: str, build: str, cpu_model: str, kernel: str, variant: str) -> tuple[str, ...]:
    return (backend, compiler, build, cpu_model, kernel, variant)


def find_job(doc: dict[str, Any], path: Path, jobs: dict[tuple[str, ...], config.Job]) -> config.Job:
    """The planned job a raw file claims to be (`jobs` by job_key), checked against its path."""
    meta = doc["meta"]
    for key in META_KEYS:
        if not isinstance(meta.get(key), str):
            raise RawError(f"raw file {path}: meta.{key} is {meta.get(key)!r}, not a string; {FIX}")
    where = (meta["backend"], meta["compiler"], meta["build"], meta["cpu_model"], f"{meta['kernel']}-{meta['variant']}.json")
    if path.parts[-5:] != where:
        raise RawError(f"raw file {path} holds the job {'/'.join(where)}: it was copied or edited; {FIX}")
    key = job_key(meta["backend"], meta["compiler"], meta["build"], meta["cpu_model"], meta["kernel"], meta["variant"])
    if key not in jobs:
        raise RawError(f"raw file {path} is of {meta['backend']}/{meta['compiler']}/{meta['build']}/{meta['cpu_model']}/"
                       f"{meta['kernel']}-{meta['variant']}, which this sweep does not plan; {FIX}")
    return jobs[key]


def load_checked(paths: list[Path], jobs: list[config.Job]) -> list[dict[str, Any]]:
    """Every raw file, read and checked against the plan of its job."""
    by_key = {job_key(j.binary.backend, j.binary.compiler, j.binary.build, j.cpu_model, j.binary.kernel,
                      j.binary.variant): j for j in jobs}
    docs = []
    for path in paths:
        doc = read_raw(path)
        check_plan(doc, path, find_job(doc, path, by_key))
        docs.append(doc)
    return docs
