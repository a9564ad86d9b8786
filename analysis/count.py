"""Count stage entry point: run one job (a binary on a CPU model) through a backend
(qemu, armie, gem5, or perf for the native measurements).

Called by the count rules; writes one JSON file of raw per-run counts, or fails with one
line naming the cell (the rule then leaves no output, so no later stage reads a partial job).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import build, config, mpi, toolchain
from analysis.backends import RunError, armie, clean_stale_stages, count_job, exit_on_signals, gem5, perf, qemu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    config.add_sweep_args(p)
    p.add_argument("--backend", required=True, choices=["qemu", "armie", "gem5", "perf"])
    for key in ("compiler", "build", "cpu", "kernel", "variant", "out"):
        p.add_argument(f"--{key}", required=True)
    ns = p.parse_args(argv)
    exit_on_signals()
    clean_stale_stages()
    try:
        sweep = config.load_from_args(ns)
        systems = gem5.load_systems() if ns.backend == "gem5" else {}
        jobs = (sweep.gem5_jobs(systems) if ns.backend == "gem5" else
                sweep.perf_jobs(sve=True, host=True) if ns.backend == "perf" else sweep.jobs())
        job = next(
            j for j in jobs
            if (j.binary.backend, j.binary.compiler, j.binary.build, j.cpu_model, j.binary.kernel, j.binary.variant)
            == (ns.backend, ns.compiler, ns.build, ns.cpu, ns.kernel, ns.variant)
        )
        binary = build.binary_path(sweep.build_dir, ns.compiler, ns.build, ns.backend, job.binary.name)
        if ns.backend == "perf":  # native runs: no cross toolchain to check, statistics over processes
            perf.measure_job(sweep, job, binary, Path(ns.out))
            return 0
        row = sweep.table.row(ns.kernel, ns.variant)
        meta = {
            "kernel": ns.kernel, "variant": ns.variant, "family": row.family, "role": row.role,
            "label": row.label, "layout": config.layout_of(sweep.table, row),
            "compiler": ns.compiler, "build": ns.build, "backend": ns.backend, "cpu_model": ns.cpu,
            "binary": str(binary), "binary_sha256": toolchain.sha256(binary),
            "build_commands": build.binary_commands(sweep, ns.compiler, ns.build, ns.backend, ns.kernel, ns.variant),
            "versions": toolchain.preflight([ns.compiler], [] if ns.backend == "gem5" else [ns.backend]),
        }
        env = mpi.run_env(sweep.table, ns.kernel, ns.variant)

        def limit(run: config.Run) -> float:
            return sweep.time_limit(ns.kernel, ns.variant, ns.backend, run.size)

        if env:
            mpi.check_row(sweep.table, ns.kernel, ns.variant)
            meta["versions"]["mpi"] = mpi.version(sweep.table, ns.kernel, ns.variant)
        if ns.backend == "gem5":
            gem5_bin = gem5.find_gem5(sweep)
            if gem5_bin is None:
                raise toolchain.ToolchainError(gem5.skipped_message(sweep))
            meta["versions"]["gem5"] = gem5.gem5_version(gem5_bin)
            meta["system"] = systems[ns.cpu]
            runs_dir = sweep.results_dir / "gem5" / ns.cpu / job.binary.name

            def one(run: config.Run) -> dict:
                tag = f"vl{run.vl}-{run.size}" + ("" if run.op == config.NO_OP else f"-{run.op}-{run.dtype}")
                return gem5.run_once(gem5_bin, binary, ns.cpu, systems[ns.cpu], run, runs_dir / tag, limit(run))

            count_job(job, one, binary, Path(ns.out), meta)
        elif ns.backend == "qemu":
            plugins = build.plugin_path(sweep.build_dir, "inscount").parent
            count_job(job, lambda run: qemu.run_once(binary, ns.cpu, run, plugins, env, limit(run)), binary, Path(ns.out), meta)
        else:
            count_job(job, lambda run: armie.run_once(binary, ns.cpu, run, limit(run)), binary, Path(ns.out), meta)
    except StopIteration:
        print(f"error: the sweep has no job {ns.backend}/{ns.compiler}/{ns.build}/{ns.cpu}/{ns.kernel}-{ns.variant}", file=sys.stderr)
        return 2
    except (config.ConfigError, toolchain.ToolchainError, RunError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
