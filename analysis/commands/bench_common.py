"""What every part of `./harness bench` shares: the targets, the environment that hides the
backends that can be hidden, and how a command is timed (wall and CPU seconds)."""
from __future__ import annotations

import resource
import subprocess
import sys
import time
from typing import Any

from analysis.backends.registry import REGISTRY

# The targets of issue 53 (2 cores, a fresh clone, a quiet machine; gem5's from issue 14); bench
# prints each figure beside its own. The default sweep has two: its wall and its CPU seconds.
# The environment that hides the backends that can be hidden (gem5: GEM5=none): the counts timed alone.
HIDDEN = {k: v for b in REGISTRY.values() for k, v in b.HIDE_ENV.items()}
TARGETS = {"default_s": 30.0, "default_cpu_s": 60.0, "rerun_noop_s": 1.0, "regression_set_s": 5.0, "gem5_s": 1800.0,
           "overhead_ratio": 1.05, "full_matrix_s": 80.0, "report_load_s": 2.0, "report_bytes": 1.5e6,
           # Issue 32: a sweep through the local Slurm beside the same sweep run locally, and the
           # Slurm jobs of the default sweep.
           "slurm_ratio": 1.5, "slurm_jobs": 24,
           # Issue 35: the default sweep's VL 128/256/512 cells through DynamoRIO in the arm64 guest.
           "dynamorio_s": 300.0}


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], ok: tuple[int, ...] = (0,), **kw: Any) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the command and its children, exit status); any status
    outside `ok` stops the bench with the command's output."""
    t0, c0 = time.monotonic(), children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode not in ok:
        sys.exit(f"bench: {' '.join(cmd[:4])} ... failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - t0, children_cpu() - c0, proc.returncode


def verdict(value: float, target: float, what: str = "target") -> str:
    return f"{what} <= {target:g}: {'met' if value <= target else 'MISSED'}"
