"""The scheduler's input sizes (analysis/core/snakemake_sizes.py): each file looked up once."""
from __future__ import annotations

import asyncio
import inspect
from typing import Any

from analysis.core import snakemake_sizes


class File(str):
    """An input as Snakemake's scheduler sees it (its async exists() and size()), counting lookups."""
    lookups: list[str] = []

    async def exists(self) -> bool:
        File.lookups.append(str(self))
        return not self.startswith("missing")

    async def size(self) -> int:
        return len(self)


class Job:
    def __init__(self, *inputs: str) -> None:
        self.input = [File(i) for i in inputs]


class Scheduler:
    def __init__(self) -> None:
        self._input_sizes: dict[Any, int | None] = {}

    async def update_input_sizes(self, jobs: Any) -> None:  # Snakemake's: every input, every pass
        for job in jobs:
            for path in job.input:
                self._input_sizes[path] = await path.size() if await path.exists() else None


def test_each_input_is_looked_up_once_and_a_missing_one_again() -> None:
    """Snakemake stats every ready job's every input on each scheduling pass: 660,000 stats in a
    default sweep. With the wrapper a pass looks up only what it does not know, and the sizes
    the ranking reads are the same."""
    scheduler = Scheduler()
    snakemake_sizes.stat_inputs_once(scheduler)
    a, b = Job("plugin.so", "binary-a", "plan-a"), Job("plugin.so", "binary-b", "missing-plan")
    File.lookups = []
    asyncio.run(scheduler.update_input_sizes([a]))
    asyncio.run(scheduler.update_input_sizes([a, b]))
    asyncio.run(scheduler.update_input_sizes([a, b]))
    assert sorted(File.lookups) == sorted(["plugin.so", "binary-a", "plan-a", "binary-b", "missing-plan",
                                           "missing-plan"])
    assert scheduler._input_sizes == {"plugin.so": 9, "binary-a": 8, "plan-a": 6, "binary-b": 8, "missing-plan": None}


def test_snakemakes_scheduler_still_keeps_its_sizes_where_the_wrapper_reads_them() -> None:
    """The pinned Snakemake's scheduler: the method replaced, the dict it fills, and the greedy
    ranking reading that dict."""
    from snakemake.scheduling import greedy, job_scheduler
    assert "self._input_sizes.update(" in inspect.getsource(job_scheduler.JobScheduler.update_input_sizes)
    assert "self.update_input_sizes(jobs)" in inspect.getsource(job_scheduler.JobScheduler.job_selector)
    assert "input_sizes[f]" in inspect.getsource(greedy.Scheduler.job_reward)
