"""Snakemake's scheduler, made to look up each input's size once.

Snakemake 9's scheduler (the pinned 9.27.1, scheduling/job_scheduler.py) stats every input of
every ready job on each scheduling pass (`update_input_sizes`: the greedy scheduler ranks ready
jobs by their inputs' sizes), one asyncio task per file. In a default count sweep about 200
count jobs wait at once while some 670 passes run: about 660,000 stat calls and as many tasks
(a cProfile of the sweep's Snakemake). A ready job's inputs are finished files that nothing
writes while it waits, so a size once known is kept: the ranking reads the same sizes."""
from __future__ import annotations

from typing import Any, Iterable


def stat_inputs_once(scheduler: Any) -> None:
    """Make `scheduler` (Snakemake's JobScheduler) look up only the sizes it does not know yet (a
    missing file's, None, is looked up again), as its own update_input_sizes does: `size()` where
    the file exists. Nothing is dropped from what it knows (Snakemake drops the sizes of files
    no ready job reads once it knows 10,000, which would look up a waiting job's inputs again)."""

    async def update_unknown(jobs: Iterable[Any]) -> None:
        known = scheduler._input_sizes
        for path in {path for job in jobs for path in job.input if known.get(path) is None}:
            known[path] = await path.size() if await path.exists() else None

    scheduler.update_input_sizes = update_unknown
