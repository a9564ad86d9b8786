"""Which jobs of a sweep share one Slurm job (Snakemake's `group:`), for `./harness sweep --slurm`.

A Slurm job costs its queueing, a Snakemake start on the node and a status poll, whatever it
runs; a count cell runs for a second. So through Slurm the workflow's jobs travel in groups:

- `tools`: the QEMU counting plugins;
- `build_<compiler>`: every object and link of one compiler (the host's native builds too);
- `cells_<i>of<n>`: the cells of the backends whose cells are short (Backend.GROUPED), in at most
  n groups (the profile's `count-jobs`, fewer when a group would hold under `min-cells`) of about
  equal planned time, one family after another;
- `tail`: collect and plot; `perf_tail`: perf's table and plot.

Or all of them in one group, `sweep`: where the profile says a sweep of its size fits one
allocation (`one-job-cells`, `one_job`): on a single node the groups above would take the node
in turn, each paying the fixed cost of a Slurm job, for no job side by side.

A cell of a backend that is not GROUPED (gem5: hours on one core; perf: a whole node) stays one
Slurm job, its time limit the sum of its plan's (the sweep's time_limit).

Snakemake runs a group as one Slurm job with its members side by side only when the group is one
connected piece of the workflow (snakemake-executor-plugin-slurm#469: otherwise one job step
after the other). Each build and cell group therefore ends in a marker job (`group_done`) that
takes every member's output as input: the marker files are the only outputs a local sweep lacks.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from analysis.core.model import Job

TOOLS = "tools"
TAIL = "tail"
PERF_TAIL = "perf_tail"
SWEEP = "sweep"


def build_group(compiler: str) -> str:
    return f"build_{compiler}"


def one_job(cells: int, alone: int, one_job_cells: int) -> bool:
    """Whether the sweep's counts travel as one Slurm job (group SWEEP: tools, their compilers'
    builds, the cells, the tail): it has at most `one_job_cells` short cells (the profile's
    `one-job-cells`; 0: never) and no cell of counts.csv that is a Slurm job of its own (`alone`:
    gem5 cells). Such a job depends on the builds and feeds the tail, so with it the one group
    would leave the group and come back, which Snakemake refuses. (perf's measurements have a
    chain of their own: native builds, perf_tail.)"""
    return alone == 0 and 0 < cells <= one_job_cells


def in_one_job(group: str, compilers: Iterable[str]) -> bool:
    """The groups that the sweep's one group takes in: the tools, the builds of the short cells'
    compilers, the cells (already SWEEP) and the tail."""
    return group in (TOOLS, TAIL, SWEEP) or group in {build_group(c) for c in compilers}


def cell_minutes(time_limits: Iterable[float]) -> int:
    """Slurm minutes for one cell: the sum of its runs' limits (each run is killed at its own),
    plus a minute to start."""
    return math.ceil(sum(time_limits) / 60) + 1


def sort_key(job: Job, family: str) -> tuple[str, ...]:
    """One compiler's cells first (its build group finishes first), then family by family."""
    b = job.binary
    return (b.compiler, family, b.kernel, b.variant, b.build, b.backend, job.cpu_model)


@dataclass(frozen=True)
class CellGroups:
    """The groups of the GROUPED backends' cells: `of[key]` is a cell's group, `members[group]`
    its cells' keys (the keys are what the caller names a cell by: its raw file)."""
    of: dict[str, str]
    members: dict[str, list[str]]


def cell_groups(cells: list[tuple[str, Job]], family: Callable[[Job], str], weight: Callable[[Job], float],
                count_jobs: int, min_cells: int = 1) -> CellGroups:
    """Cut the cells, in `sort_key` order, into at most `count_jobs` runs of about equal weight
    (planned seconds), and no more runs than leave `min_cells` to each (a smaller Slurm job is not
    worth its queueing): a group holds neighbouring cells (a family, a kernel's variants)."""
    ordered = sorted(cells, key=lambda kc: sort_key(kc[1], family(kc[1])))
    n = max(1, min(count_jobs, len(ordered) // max(1, min_cells)))
    total = sum(weight(j) for _, j in ordered) or 1.0
    index: list[int] = []
    done = 0.0
    for _, job in ordered:
        w = weight(job)
        # The n-th of the total that holds the middle of this cell's weight.
        index.append(min(n - 1, int((done + w / 2) / total * n)))
        done += w
    # A cell heavier than a share leaves a share empty: the groups are numbered as they come.
    number = {i: k for k, i in enumerate(sorted(set(index)), 1)}
    of: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for (key, _), i in zip(ordered, index):
        name = f"cells_{number[i]}of{len(number)}"
        of[key] = name
        members.setdefault(name, []).append(key)
    return CellGroups(of, members)
