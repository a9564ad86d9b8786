"""Count stage: plan every job of a sweep once, and run one planned job.

The workflow plans at start (`write_plans`): one JSON plan per job (analysis.backends.Plan:
its runs, binary, CPU model, time limits, guest environment, the meta its raw file records,
the tool versions the workflow's preflight found, what its backend needs) under
<results>/plans/. The job's rule hands it its plan:

    python -m analysis.stages.count --plan PLAN [PLAN ...] --out RAW [RAW ...]

and the job runs it through its backend (analysis.backends.registry), without reading the
sweep again or importing what reads it. It writes one JSON file of raw per-run records, or
fails with one line naming the cell (the rule then leaves no output, so no later stage reads
a partial job). Several plans are run one after the other, each into its own raw file: a local
sweep runs the jobs of one row's builds as one (merged_builds).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterable

from analysis.backends import Plan, Ready, RunError, clean_stale_stages, exit_on_signals, write_raw
from analysis.backends.registry import REGISTRY
from analysis.core import cpu_record, files, toolchain

# What planning needs (the sweep, its kernel table, build commands and MPI libraries), in the
# workflow's process. A job (`python -m`: this module is __main__) runs its plan without them
# (main() must not call the planning functions), and the registry imports its one backend:
# these and the other backends cost each of a sweep's ~200 jobs about 60 ms of CPU at start
# (yaml, the build stage, statistics, ...).
if __name__ != "__main__":
    from analysis.core import config, mpi
    from analysis.stages import build


def job_path(root: Path, job: config.Job, suffix: str) -> Path:
    """<root>/<backend>/<compiler>/<build>/<cpu model>/<kernel>-<variant><suffix>: where a
    job's plan (root <results>/plans) and raw file (root <results>/raw) live."""
    b = job.binary
    return root / b.backend / b.compiler / b.build / job.cpu_model / f"{b.name}{suffix}"


def time_limits(sweep: config.Sweep, job: config.Job) -> tuple[float, ...]:
    """Seconds each run of the job may take (the sweep's time_limit, times the backend's factor)."""
    factor = REGISTRY[job.binary.backend].time_factor(sweep)
    return tuple(sweep.time_limit(job.binary.kernel, job.binary.variant, r.size, factor) for r in job.runs)


def plan_job(sweep: config.Sweep, job: config.Job, ready: Ready, versions: dict[str, str],
             mpi_versions: dict[str | None, str]) -> Plan:
    """One job's plan. `versions`: the workflow's preflight (compilers, host); `mpi_versions`:
    a cache of the MPI libraries' versions, filled as rows need them."""
    b = job.binary
    backend = REGISTRY[b.backend]
    row = sweep.table.row(b.kernel, b.variant)
    binary = build.binary_path(sweep.build_dir, b.compiler, b.build, b.backend, b.name)
    job_versions = {k: versions[k] for k in (toolchain.stamp_name(b.compiler, b.build), f"libc.{b.compiler}", "host")
                    if k in versions}
    job_versions.update(ready.versions)
    env = mpi.run_env(sweep.table, b.kernel, b.variant)
    if env:  # the runs load an arm64 Open MPI: its version is part of what ran
        lib = mpi.row_library(sweep.table, b.kernel, b.variant)
        key = lib.name if lib else None
        if key not in mpi_versions:
            mpi_versions[key] = mpi.version(sweep.table, b.kernel, b.variant)
        job_versions["mpi"] = mpi_versions[key]
    meta = {
        "kernel": b.kernel, "variant": b.variant, "family": row.family, "role": row.role, "label": row.label,
        "layout": config.layout_of(sweep.table, row), "compiler": b.compiler, "build": b.build, "backend": b.backend,
        "cpu_model": job.cpu_model, "binary": str(binary),
        "build_commands": build.binary_commands(sweep, b.compiler, b.build, b.backend, b.kernel, b.variant),
        "versions": job_versions,
    }
    limits = time_limits(sweep, job)
    settings = backend.settings(sweep, job, ready)
    if backend.SHARES_PREPARATIONS:
        settings["prep_cache"] = str(build.prep_cache_dir(sweep.build_dir, sweep.table, b.compiler, b.kernel, b.variant))
    return Plan(b.backend, str(binary), job.cpu_model, job.runs, limits, env, meta, settings)


def write_plans(sweep: config.Sweep, ready: dict[str, Ready], jobs: list[config.Job],
                versions: dict[str, str]) -> None:
    """Every job's plan file, rewritten only when its content changes: the plan is an input of
    the job's rule, so a change of runs, limits or tool versions re-runs exactly that job."""
    mpi_versions: dict[str | None, str] = {}
    shared: set[Path] = set()
    for job in jobs:
        plan = plan_job(sweep, job, ready[job.binary.backend], versions, mpi_versions)
        toolchain.write_stamp(job_path(sweep.results_dir / "plans", job, ".json"), plan.to_json())
        if "prep_cache" in plan.settings:
            shared.add(Path(plan.settings["prep_cache"]))
    for folder in shared:
        build.prune_prep_caches(folder)


# A merged job (merged_builds) holds at most a default sweep's VLA job's runs: it is no longer
# than the sweep's longest jobs, so the cores stay shared as they were.
MERGED_RUNS = 48


def merged_builds(jobs: Iterable[config.Job]) -> tuple[str, ...]:
    """The VLS builds whose jobs of one row, compiler and CPU model a local sweep runs as one
    job, one plan after the other: a default sweep's VLS job runs 3 runs, about 40 ms of QEMU,
    less than its own Python process and Snakemake's share of a job. None (every binary its own
    job) unless every row that runs one of them runs all of them (the merged rule's outputs are
    a fixed list), they are two or more, and one row's jobs of them hold at most MERGED_RUNS
    runs (the full matrix's VLS jobs hold 128 each: each is long enough alone)."""
    builds: dict[tuple[str, str, str, str], list[str]] = {}
    runs: dict[tuple[str, str, str, str], int] = {}
    for j in jobs:
        b = j.binary
        if b.vls_bits is None:
            continue
        key = (j.cpu_model, b.compiler, b.kernel, b.variant)
        builds.setdefault(key, []).append(b.build)
        runs[key] = runs.get(key, 0) + len(j.runs)
    sets = {tuple(v) for v in builds.values()}
    if len(sets) != 1:
        return ()
    merged = sets.pop()
    return merged if len(merged) > 1 and max(runs.values()) <= MERGED_RUNS else ()


def exclusive(plan: Path) -> bool:
    """Whether the planned job takes every core: its backend's EXCLUSIVE, unless its settings say
    otherwise (perf's runs in the emulated guest: one single-threaded QEMU each)."""
    p = Plan.from_json(plan.read_text())
    return bool(p.settings.get("exclusive", REGISTRY[p.backend].EXCLUSIVE))


def run(plan: Plan, out: Path) -> None:
    """Run a planned job through its backend and write its raw file."""
    extra, records = REGISTRY[plan.backend].run_job(plan, sys.stderr)
    meta = {**plan.meta, "binary_sha256": files.sha256(Path(plan.binary)), **extra}
    write_raw(out, meta, records)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True, type=Path, nargs="+",
                   help="a job's plan (written by the workflow); several: run one after the other")
    p.add_argument("--out", required=True, type=Path, nargs="+", help="the raw JSON file of each plan, in order")
    ns = p.parse_args(argv)
    if len(ns.plan) != len(ns.out):
        p.error(f"{len(ns.plan)} plans and {len(ns.out)} raw files: give one --out file per --plan file")
    exit_on_signals()
    clean_stale_stages()
    backend = ""
    for path, out in zip(ns.plan, ns.out):
        plan = read_plan(path)
        if plan is None:
            return 2
        try:
            run(plan, out)
        except (toolchain.ToolchainError, RunError, files.WriteError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        backend = plan.backend  # one rule per backend: a job's plans share it
    cpu_record.count_job(backend)
    return 0


def read_plan(path: Path) -> Plan | None:
    """The plan at `path`, or None after one line saying why it cannot be run."""
    try:
        plan = Plan.from_json(path.read_text())
    except FileNotFoundError:
        print(f"error: no plan {path}: the workflow writes one per job (run ./harness sweep)", file=sys.stderr)
        return None
    except (ValueError, KeyError, TypeError) as e:
        print(f"error: plan {path} is unreadable ({e!r}): run ./harness sweep to write it again", file=sys.stderr)
        return None
    if plan.backend not in REGISTRY:
        print(f"error: plan {path} names backend {plan.backend!r}; known: {', '.join(REGISTRY)}", file=sys.stderr)
        return None
    return plan


if __name__ == "__main__":
    sys.exit(main())
