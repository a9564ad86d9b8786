"""The submitting Snakemake of `./harness sweep --slurm`: Snakemake itself (run as a file:
`python slurm_snakemake.py [--steady] [--direct] SNAKEMAKE-ARGS`), with six changes to the
Slurm executor plugin's side of it (snakemake-executor-plugin-slurm 2.8.0) and Snakemake's:

- the plugin's efficiency report (pandas, a quarter of a second to import) is imported when a
  run asks for it (--slurm-efficiency-report), not at every start: Snakemake and the workflow
  import no pandas.

- its Slurm jobs do not import the plugin: it is on this process's path (slurm.executor_env),
  and sbatch passes the environment on (--export=ALL), so every Snakemake of every job (two a
  job: the job's own and the one under srun) found it and imported it, running `which` and
  `scontrol show config` as it did: 0.5 CPU seconds a start, 1 of a tiny sweep's 14. Those
  Snakemakes use the jobstep and the local executor, not this one.
- `--steady=SECONDS` (the profile's harness-steady-status-checks): the status checks at that
  interval every time (the local profile: a quarter of a second; squeue answers in 10 ms there). The plugin checks `slurm-init-seconds-before-status-checks` after a check
  that saw a Slurm job end, and 10 s later than the last wait after each check that saw none, up
  to 180 s: kind to a large cluster's slurmctld, but a job is noticed up to that grown wait after
  it ended (a two-minute job: up to 50 s; on the local Slurm a sweep is one Slurm job, so that
  wait is the sweep's).
- the wait between status checks ends as soon as the run is over. Snakemake's shutdown joins the
  status thread, which sleeps the whole interval after its last check: every sweep through Slurm
  ended that long after its last job (2 s of a tiny sweep's 12.5 on the local Slurm; on a
  cluster the interval is 40 s or more).
- the job rate limiter's timer (this process keeps the limiter: it submits to a cluster) does
  not hold the finished run: Snakemake 9 arms a one-second threading.Timer after scheduling
  passes, and Python's exit waits for it (1.4 s of the tiny sweep's end, seen with py-spy: the
  main thread in threading._shutdown, a Timer pending). It only wakes the scheduler.
- `--direct` (the profile's harness-direct-job-step): the Snakemake of a Slurm job runs the job's
  rules itself. The jobstep executor starts a second Snakemake under srun for them, which on a
  cluster puts them in the job's CPUs; a node that binds no CPU gains nothing from it, and each
  Snakemake start reads the workflow again (1.3 s of the tiny sweep's 10.8 on the local Slurm).
"""
from __future__ import annotations

import asyncio
import importlib
import os
import sys
import threading
import time
import types
from collections.abc import AsyncGenerator, Callable
from typing import Any

Check = Callable[[Any, list[Any]], AsyncGenerator[Any, None]]
STEADY = "--steady"
DIRECT = "--direct"


def steady(check: Check, seconds: float) -> Check:
    """The plugin's `check_active_jobs`, then the next check after `seconds`, not a grown wait."""
    async def steady_check(self: Any, active_jobs: list[Any]) -> AsyncGenerator[Any, None]:
        async for job in check(self, active_jobs):
            yield job
        self.next_seconds_between_status_checks = seconds

    return steady_check


REPORT = "snakemake_executor_plugin_slurm.efficiency_report"


def efficiency_report_on_use() -> types.ModuleType:
    """Stands for the plugin's efficiency_report module until its one function is called (the
    plugin imports that name at its own import)."""
    def create_efficiency_report(*args: Any, **kwargs: Any) -> Any:
        del sys.modules[REPORT]
        return importlib.import_module(REPORT).create_efficiency_report(*args, **kwargs)

    stand_in = types.ModuleType(REPORT)
    stand_in.create_efficiency_report = create_efficiency_report  # type: ignore[attr-defined]
    return stand_in


# How often a status wait looks whether the run is over.
SLICE_SECONDS = 0.1


async def sleep_until_due_or_done(self: Any) -> None:
    """The executor's wait before the next status check (snakemake-interface-executor-plugins'
    RemoteExecutor.sleep, the same interval), in slices that end once shutdown cleared `wait`."""
    settings = self.workflow.remote_execution_settings
    interval = settings.seconds_between_status_checks if self.next_seconds_between_status_checks is None \
        else self.next_seconds_between_status_checks
    due = time.monotonic() + interval
    while self.wait and (left := due - time.monotonic()) > 0:
        await asyncio.sleep(min(SLICE_SECONDS, left))


def daemon_reevaluation(self: Any, delay: float) -> None:
    """Snakemake's JobScheduler._schedule_reevalutation (9.27.1), its timer a daemon thread."""
    timer = threading.Timer(delay, self._open_jobs.release)
    timer.daemon = True
    timer.start()


def direct_job_step(self: Any) -> str:
    """The Slurm executor's arguments for its jobs' Snakemake (additional_general_args): no
    jobstep executor, so the local one, on the CPUs the job may use (the jobstep executor gives
    its srun'd Snakemake the same `--cores all`; this comes after the job's own `--cores`)."""
    return "--cores all"


def without_plugin_path(pythonpath: str, plugin_dir: str) -> str:
    """PYTHONPATH without the plugin's directory (the jobs' Snakemakes need not import it)."""
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(plugin_dir))


def main() -> None:
    # Only here: the plugin is on the path of the Slurm path's Snakemake alone (slurm.executor_env).
    sys.modules[REPORT] = efficiency_report_on_use()
    import snakemake_executor_plugin_slurm as plugin
    from snakemake.cli import main as snakemake_main

    # This process keeps it (sys.path is read at start); the jobs get the environment without it.
    plugin_dir = os.path.dirname(os.path.dirname(plugin.__file__))
    rest = without_plugin_path(os.environ.get("PYTHONPATH", ""), plugin_dir)
    if rest:
        os.environ["PYTHONPATH"] = rest
    else:
        os.environ.pop("PYTHONPATH", None)
    from snakemake.scheduling.job_scheduler import JobScheduler

    plugin.Executor.sleep = sleep_until_due_or_done
    JobScheduler._schedule_reevalutation = daemon_reevaluation
    args = sys.argv[1:]
    while args and (args[0].startswith(STEADY + "=") or args[0] == DIRECT):
        if args[0] != DIRECT:
            seconds = float(args[0].split("=", 1)[1])
            plugin.Executor.check_active_jobs = steady(plugin.Executor.check_active_jobs, seconds)
        else:
            plugin.Executor.additional_general_args = direct_job_step
        args = args[1:]
    sys.exit(snakemake_main(args))


if __name__ == "__main__":
    main()
