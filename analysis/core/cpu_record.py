"""CPU seconds a sweep's processes record for `./harness bench` (analysis/commands/bench_parts.py),
only where HARNESS_CPU_DIR is set: each job's shell writes bash's `times` and its command
(rules/common.smk), a count job writes what its QEMU processes took, and Snakemake writes its own
at the start of the jobs and at the end. Nothing here starts a process."""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

ENV = "HARNESS_CPU_DIR"

# Appended to every job's shell command: `times` and printf are bash builtins (no process is
# started, so the record costs the job microseconds and adds no CPU of its own to its children);
# the name carries the time as well as the PID, since PIDs wrap (pid_max is 32768 here).
SHELL_SUFFIX = '\n{ times; printf "%s" "$BASH_EXECUTION_STRING"; } > "$' + ENV + '/job-$$-$EPOCHREALTIME"'


def directory() -> Path | None:
    where = os.environ.get(ENV)
    return Path(where) if where else None


def seconds(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def write(kind: str, values: dict[str, float]) -> None:
    """One record `<kind>-<pid>-<ns>.json` in HARNESS_CPU_DIR, when it is set."""
    where = directory()
    if where is None:
        return
    (where / f"{kind}-{os.getpid()}-{time.time_ns()}.json").write_text(json.dumps(values))


def count_job(backend: str) -> None:
    """A count job's tool processes (QEMU for the qemu backend): every child its Python waited
    for (a job starts no other)."""
    write(f"children_{backend}", {"children_s": seconds(resource.RUSAGE_CHILDREN)})


def snakemake(stage: str) -> None:
    """Snakemake's own CPU and its children's so far (`stage`: start, before any job; end)."""
    write(f"snakemake_{stage}", {"self_s": seconds(resource.RUSAGE_SELF),
                                 "children_s": seconds(resource.RUSAGE_CHILDREN)})
