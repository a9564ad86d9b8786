"""The submitting Snakemake of `./harness sweep --slurm`: Snakemake itself (run as a file:
`python slurm_snakemake.py [--steady] [--direct] SNAKEMAKE-ARGS`), with eight changes to the
Slurm executor plugin's side of it (snakemake-executor-plugin-slurm 2.8.0) and Snakemake's:

- a stopped run (Ctrl-C, SIGTERM: the harness hands it a SIGINT) cancels every Slurm job of
  the run that has not ended, found by the run's job name, and says how many on a line of
  its own (CANCELLED_MARK, read by the harness). The plugin cancels the jobs it holds as
  active, and a status check takes them out of that list while it runs
  (snakemake-interface-executor-plugins' _wait_for_jobs): a stop during one left a waiting
  job behind (seen once, with a status check every 2 s).

- the plugin's efficiency report (pandas, a quarter of a second to import) is imported when a
  run asks for it (--slurm-efficiency-report), not at every start: Snakemake and the workflow
  import no pandas.

- the end of a run leaves the folders of `.snakemake/slurm_logs` in place. The plugin removes
  every empty one there at each run's end (clean_old_logs), and a job waiting in the queue has
  an empty one: its log is opened when it starts. Another sweep of the clone ending in the
  meantime made such a job fail to start (Slurm: JobLaunchFailure, slurmd: "Could not open
  stdout file ... No such file or directory"; seen in a full test suite run, 2026-11-28). Old
  logs are still deleted after the plugin's 10 days; only their empty folders stay.
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
import pwd
import subprocess
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


# The line of a stopped run's cancelled Slurm jobs: this prefix, then their ids.
CANCELLED_MARK = "harness-slurm-cancelled:"
# squeue's states of a job that has not ended (a COMPLETING one is ending already).
NOT_ENDED = "PENDING,RUNNING,SUSPENDED,CONFIGURING,REQUEUED,REQUEUE_HOLD,REQUEUE_FED,RESIZING,STOPPED,SIGNALING"


def cancel_run(run_id: str) -> list[str]:
    """Cancel this user's Slurm jobs of one Snakemake run that have not ended; returns their ids.
    The executor names every job of a run by the run's id (a uuid4, its `SLURM run ID`), so no
    other sweep's or user's job is touched."""
    user = pwd.getpwuid(os.getuid()).pw_name
    ids = subprocess.run(["squeue", "-h", "--name", run_id, "--user", user, "-t", NOT_ENDED, "-o", "%i"],
                         capture_output=True, text=True, timeout=60).stdout.split()
    if ids:  # one that ended since squeue answered makes scancel complain: nothing to cancel there
        subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
    return ids


def cancel_whole_run(self: Any, active_jobs: list[Any]) -> None:
    """The plugin's cancel_jobs (Snakemake calls it when the run is stopped): every job of the
    run, not only those it holds as active, then the line that says which."""
    print(CANCELLED_MARK + " ".join(cancel_run(self.run_uuid)), file=sys.stderr, flush=True)


def keep_dirs(path: Any) -> None:
    """The plugin's delete_empty_dirs, which its clean_old_logs calls: nothing (the folders are
    the waiting jobs' too, other runs' included)."""


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
    plugin.Executor.cancel_jobs = cancel_whole_run
    plugin.delete_empty_dirs = keep_dirs
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
