"""The submitting Snakemake of `./harness sweep --slurm` under a profile that asks for steady
status checks (`harness-steady-status-checks: true`, the local profile): Snakemake itself, with
the Slurm executor plugin's status checks at the profile's interval every time.

The plugin (2.8.0) checks `slurm-init-seconds-before-status-checks` after a check that saw a Slurm
job end, and 10 s later than the last wait after each check that saw none, up to 180 s: kind to a
large cluster's slurmctld, but a Slurm job is noticed up to that grown wait after it ended (a
two-minute job: up to 50 s; on the local Slurm, where a sweep is one Slurm job, that wait is the
sweep's). Run as a file (`python slurm_steady.py SNAKEMAKE-ARGS`), like `python -m snakemake`.
"""
from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Callable
from typing import Any

Check = Callable[[Any, list[Any]], AsyncGenerator[Any, None]]


def steady(check: Check) -> Check:
    """The plugin's `check_active_jobs`, then the next check after the profile's interval, not a grown one."""
    async def steady_check(self: Any, active_jobs: list[Any]) -> AsyncGenerator[Any, None]:
        async for job in check(self, active_jobs):
            yield job
        self.next_seconds_between_status_checks = self.workflow.executor_settings.init_seconds_before_status_checks

    return steady_check


def main() -> None:
    # Only here: the plugin is on the path of the Slurm path's Snakemake alone (slurm.executor_env).
    from snakemake_executor_plugin_slurm import Executor
    from snakemake.cli import main as snakemake_main

    Executor.check_active_jobs = steady(Executor.check_active_jobs)
    sys.exit(snakemake_main())


if __name__ == "__main__":
    main()
