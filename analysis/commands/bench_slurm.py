"""`./harness bench`'s Slurm part: the tiny and the default sweep through the local Slurm beside
the same sweep run locally (issue 32)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from analysis.commands.bench_common import HIDDEN, TARGETS, children_cpu, timed, verdict
from analysis.core import config

REPO = config.REPO
SUBMITTED = "has been submitted with SLURM jobid"


def slurm_sweeps(work: Path, cores: int, local_default: Path | None, local_default_s: float | None,
                 sweeps: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The tiny and the default sweep through the local Slurm (setup/slurm.sh, profile `local`:
    its job groups, analysis/core/groups.py) beside the same sweep run locally: wall time, the
    Slurm jobs submitted, counts.csv byte for byte, and the re-run with nothing changed (no Slurm
    job); CPU seconds of the local run and of the submitting command (the Slurm jobs' own run
    under slurmd, which no rusage of ours sees, and the local Slurm keeps no accounting).
    `local_default`: the results folder of the default sweep timed above (its counts and
    `local_default_s` are the local side), else the local run is timed here."""
    if shutil.which("slurmctld") is None:
        print("slurm: skipped (slurm-wlm is not installed: ./harness setup --with-slurm)", flush=True)
        return None
    subprocess.run([str(REPO / "setup" / "slurm.sh"), "start"], check=True, capture_output=True)
    out: dict[str, Any] = {}
    for name, cfg in sweeps:
        def cli(tree: Path, *slurm: str) -> list[str]:
            return [sys.executable, "-m", "analysis.commands.cli", "sweep", "--config", cfg, "--cores", str(cores), *slurm,
                    "--set", f"results_dir={tree / 'results'}", "--set", f"build_dir={tree / 'build'}", "--", "counts_all"]

        args = cli(work / f"slurm-{name}", "--slurm", "local")
        env = {**os.environ, **HIDDEN}
        t0, c0 = time.monotonic(), children_cpu()
        proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
        seconds, submit_cpu = time.monotonic() - t0, children_cpu() - c0
        if proc.returncode != 0:
            sys.exit(f"bench: the {name} sweep through Slurm failed:\n{proc.stderr[-2000:]}")
        jobs = proc.stderr.count(SUBMITTED)
        # The same front end without --slurm, on trees of its own (the default sweep: as timed above).
        local_cpu: float | None = None
        if name == "default" and local_default is not None and local_default_s:
            local, local_counts = local_default_s, local_default / "counts.csv"
        else:
            local, local_cpu, _ = timed(cli(work / f"local-{name}"), cwd=REPO, env=env)
            local_counts = work / f"local-{name}" / "results" / "counts.csv"
        identical = (work / f"slurm-{name}" / "results" / "counts.csv").read_bytes() == local_counts.read_bytes()
        t0 = time.monotonic()
        again = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
        rerun = time.monotonic() - t0
        if again.returncode != 0:
            sys.exit(f"bench: the {name} sweep's re-run through Slurm failed:\n{again.stderr[-2000:]}")
        ratio = seconds / local if local else float("inf")
        fig = out[name] = {"config": cfg, "slurm_s": round(seconds, 1), "local_s": round(local, 1), "ratio": round(ratio, 2),
                           "target_ratio": TARGETS["slurm_ratio"], "slurm_jobs": jobs, "counts_identical": identical,
                           "slurm_submit_cpu_s": round(submit_cpu, 1), "local_cpu_s": None if local_cpu is None else round(local_cpu, 1),
                           "rerun_noop_slurm_s": round(rerun, 1), "rerun_slurm_jobs": again.stderr.count(SUBMITTED)}
        fig["met"] = ratio <= TARGETS["slurm_ratio"] and identical and fig["rerun_slurm_jobs"] == 0
        if name == "default":
            fig["target_jobs"] = TARGETS["slurm_jobs"]
            fig["met"] = fig["met"] and jobs <= TARGETS["slurm_jobs"]
        print(f"{name} sweep through the local Slurm: {fig['slurm_s']} s ({fig['slurm_submit_cpu_s']} CPU s submitting) for {jobs} Slurm jobs"
              + (f" ({verdict(jobs, TARGETS['slurm_jobs'], 'jobs target')})" if name == "default" else "")
              + f", locally {fig['local_s']} s" + (f" ({fig['local_cpu_s']} CPU s)" if local_cpu is not None else "")
              + f": {fig['ratio']}x ({verdict(ratio, TARGETS['slurm_ratio'])}); "
              f"counts.csv {'byte-identical' if identical else 'DIFFERS'}; re-run with nothing changed "
              f"{fig['rerun_noop_slurm_s']} s, {fig['rerun_slurm_jobs']} Slurm jobs", flush=True)
    return out
