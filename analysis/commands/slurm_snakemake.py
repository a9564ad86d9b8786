"""The submitting Snakemake of `./harness sweep --slurm`: Snakemake itself (run as a file:
`python slurm_snakemake.py [--steady] SNAKEMAKE-ARGS`), with two changes to the Slurm executor
plugin's side of it (snakemake-executor-plugin-slurm 2.8.0):

- its Slurm jobs do not import the plugin: it is on this process's path (slurm.executor_env),
  and sbatch passes the environment on (--export=ALL), so every Snakemake of every job (two a
  job: the job's own and the one under srun) found it and imported it, running `which` and
  `scontrol show config` as it did: 0.5 CPU seconds a start, 1 of a tiny sweep's 14. Those
  Snakemakes use the jobstep and the local executor, not this one.
- `--steady` (the profile's harness-steady-status-checks): the status checks at the profile's
  interval every time. The plugin checks `slurm-init-seconds-before-status-checks` after a check
  that saw a Slurm job end, and 10 s later than the last wait after each check that saw none, up
  to 180 s: kind to a large cluster's slurmctld, but a job is noticed up to that grown wait after
  it ended (a two-minute job: up to 50 s; on the local Slurm a sweep is one Slurm job, so that
  wait is the sweep's).
"""
from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator, Callable
from typing import Any

Check = Callable[[Any, list[Any]], AsyncGenerator[Any, None]]
STEADY = "--steady"


def steady(check: Check) -> Check:
    """The plugin's `check_active_jobs`, then the next check after the profile's interval, not a grown one."""
    async def steady_check(self: Any, active_jobs: list[Any]) -> AsyncGenerator[Any, None]:
        async for job in check(self, active_jobs):
            yield job
        self.next_seconds_between_status_checks = self.workflow.executor_settings.init_seconds_before_status_checks

    return steady_check


def without_plugin_path(pythonpath: str, plugin_dir: str) -> str:
    """PYTHONPATH without the plugin's directory (the jobs' Snakemakes need not import it)."""
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(plugin_dir))


def main() -> None:
    # Only here: the plugin is on the path of the Slurm path's Snakemake alone (slurm.executor_env).
    import snakemake_executor_plugin_slurm as plugin
    from snakemake.cli import main as snakemake_main

    # This process keeps it (sys.path is read at start); the jobs get the environment without it.
    plugin_dir = os.path.dirname(os.path.dirname(plugin.__file__))
    rest = without_plugin_path(os.environ.get("PYTHONPATH", ""), plugin_dir)
    if rest:
        os.environ["PYTHONPATH"] = rest
    else:
        os.environ.pop("PYTHONPATH", None)
    args = sys.argv[1:]
    if args[:1] == [STEADY]:
        plugin.Executor.check_active_jobs = steady(plugin.Executor.check_active_jobs)
        args = args[1:]
    sys.exit(snakemake_main(args))


if __name__ == "__main__":
    main()
