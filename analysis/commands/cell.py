"""`./harness count`: one cell (kernel, variant, build, VL, size, op, dtype), validated like a
sweep, built if needed and counted at size 0 and n; its ROI net counts printed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from analysis.backends import clean_stale_stages, qemu
from analysis.commands import guard
from analysis.commands.guard import snakemake_cmd
from analysis.core import config, mpi, toolchain
from analysis.stages import build


def single_cell(ns: argparse.Namespace) -> tuple[config.Sweep, config.Job]:
    """Validate a one-cell request (kernel, variant, build, VL, size, op, dtype) like a sweep."""
    overrides = config.parse_overrides(ns.set)
    sweep = config.load(ns.config, overrides)
    config.check_writable(sweep)
    sel = config.selection(sweep.table, {
        "kernel": ns.kernel, "variants": [ns.variant],
        **({"ops": [ns.op]} if ns.op else {}), **({"dtypes": [ns.dtype]} if ns.dtype else {}),
    })
    config.check_vl(ns.vl, "--vl")
    if ns.build != "vla":
        try:
            bits = config.parse_build(ns.build).vls_bits
        except config.ConfigError:
            bits = None
        if bits not in config.VLS_ALLOWED:
            raise config.ConfigError(f"--build {ns.build}: use vla or vls<N> with N in {', '.join(map(str, config.VLS_ALLOWED))}")
        if bits != ns.vl:
            raise config.ConfigError(
                f"the VLS binary {ns.build} is built for {bits} bits and cannot run at {ns.vl} bits: use --build vla or --vl {bits}"
            )
    if ns.vl not in config.CPU_MODEL_VLS[ns.cpu]:
        raise config.ConfigError(f"QEMU's {ns.cpu} model does not support VL {ns.vl}; it supports {', '.join(map(str, config.CPU_MODEL_VLS[ns.cpu]))}")
    if not 0 <= ns.size <= config.SIZE_MAX:
        raise config.ConfigError(f"--size {ns.size}: sizes are byte counts from 0 to {config.SIZE_MAX}")
    row = sweep.table.row(ns.kernel, ns.variant)
    config.check_size_fits(sweep.table.families[row.family], ns.size, f"--size {ns.size}")
    op, dtype = sel.op_dtypes[0]
    params = config.run_params(sweep.table, row, op, dtype)
    runs = tuple(config.Run(ns.vl, s, op, dtype, params, sve=row.sve) for s in sorted({0, ns.size}))
    build = ns.build if row.sve else config.NOSVE  # a row without SVE has its own build
    return sweep, config.Job(config.Binary(ns.compiler, build, qemu.NAME, ns.kernel, ns.variant), ns.cpu, runs)


def cmd_count(ns: argparse.Namespace) -> int:
    """Build one binary if needed, run it at size 0 and n, print its ROI counts."""

    sweep, job = single_cell(ns)
    toolchain.preflight([ns.compiler])
    qemu.check_tools()
    mpi.check_row(sweep.table, ns.kernel, ns.variant)
    bd = sweep.build_dir
    binary = build.binary_path(bd, ns.compiler, job.binary.build, qemu.NAME, job.binary.name)
    targets = [str(binary)] + [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    over = {"build_dir": str(bd), "results_dir": str(sweep.results_dir)}
    proc = subprocess.run(snakemake_cmd(ns.config, over, 2, [*targets, "--quiet", "all"]), capture_output=True, text=True)
    if proc.returncode != 0:
        text = proc.stdout[-3000:] + proc.stderr[-3000:]
        print(text if text.strip() else guard.failure_tail(proc)[0], file=sys.stderr)
        return 1
    plugins = build.plugin_path(bd, "inscount").parent
    env = mpi.run_env(sweep.table, ns.kernel, ns.variant)
    clean_stale_stages()
    recs = [qemu.run_once(binary, job.cpu_model, r, plugins, env, sweep.time_limit(ns.kernel, ns.variant, r.size))
            for r in job.runs]
    base, meas = recs[0]["inscount"]["roi"], recs[-1]["inscount"]["roi"]
    print(f"{job.binary.name} {ns.build} cpu={ns.cpu} vl={ns.vl} size={ns.size} op={job.runs[0].op} dtype={job.runs[0].dtype}")
    print(f"  roi_net total {meas['total'] - base['total']}  sve {meas['sve'] - base['sve']}")
    for cls in meas["classes"]:
        d = meas["classes"][cls] - base["classes"][cls]
        if d:
            print(f"  roi_net class {cls:18s} {d}")
    # The binary stays in the build folder; each line copies it to a staging folder of its own
    # (the runs' folder is gone by now) and leaves the clients' JSON in ./out-<size>.
    print(f"  reproduce (roi_net = roi of out-{job.runs[-1].size} minus roi of out-{job.runs[0].size}, "
          "in inscount.json.0):")
    for r in job.runs:
        print(f"    {qemu.replay_command(binary, job.cpu_model, r, plugins, env, out=f'out-{r.size}')}")
    return 0
