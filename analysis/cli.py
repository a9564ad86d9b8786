"""Command-line front end behind ./harness: validate first, then hand over to Snakemake or pytest.

Every check that can fail on bad input (schema, kernel table, VLs, sizes, toolchain) runs
here before any job starts and prints one line naming the fix; nothing under results/ is
touched in that case.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from analysis import config, mpi, toolchain
from analysis.backends import RunError, perf

REPO = config.REPO
MPI_HINT = ("Open MPI figures (paper Fig. 9, 10): ./harness sweep --config configs/mpi.yaml "
            "(installs Debian's arm64 Open MPI on first use)")


def validate(sweep_path: str, overrides: dict[str, str]) -> config.Sweep:
    sweep = config.load(sweep_path, overrides)
    toolchain.preflight(sweep.compilers, sweep.backends)
    unbuilt = mpi.unbuilt(sweep)
    if unbuilt:  # Open MPI 5 is built on request only: its rows skip, in one line
        print(mpi.skip_message(unbuilt), flush=True)
        sweep = mpi.without_unbuilt(sweep)
    mpi.check(sweep)
    return sweep


def install_mpi_if_asked_for(sweep_path: str, overrides: dict[str, str]) -> None:
    """A sweep with MPI rows (configs/mpi.yaml) installs the arm64 Open MPI on first use, through
    the same guarded installer as everything else; other sweeps never need it."""
    sweep = config.load(sweep_path, overrides)
    if mpi.needs_mpi(sweep) and not mpi.installed():
        print(f"sweep {sweep_path} needs Debian's arm64 Open MPI: running setup/install.sh --with-mpi", flush=True)
        if subprocess.call([str(REPO / "setup" / "install.sh"), "--with-mpi"]) != 0:
            raise toolchain.ToolchainError("installing the arm64 Open MPI failed (message above); nothing was run")


def snakemake_cmd(sweep_path: str, overrides: dict[str, str], cores: int, extra: list[str]) -> list[str]:
    conf = [f"sweep={sweep_path}"] + [f"{k}={v}" for k, v in overrides.items()]
    return [
        # --config takes every word after it: targets and options go first.
        str(Path(sys.executable).parent / "snakemake"), *extra, "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(REPO), "--cores", str(cores), "--config", *conf,
    ]


def cmd_sweep(ns: argparse.Namespace) -> int:
    overrides = config.parse_overrides(ns.set)
    install_mpi_if_asked_for(ns.config, overrides)
    sweep = validate(ns.config, overrides)
    jobs = sweep.jobs()
    runs = sum(len(j.runs) for j in jobs)
    print(f"sweep {ns.config}: {len(jobs)} count jobs, {runs} runs, results in {sweep.results_dir}", flush=True)
    say_perf_plan(sweep)
    rc = subprocess.call(snakemake_cmd(ns.config, overrides, ns.cores, ns.snakemake_args))
    if rc == 0 and not mpi.needs_mpi(sweep):
        print(MPI_HINT, flush=True)
    return rc


def say_perf_plan(sweep: config.Sweep) -> None:
    """What the perf part will measure here, and one line per part it skips (said here, so
    the workflow does not repeat them)."""
    p = perf.plan(sweep)
    if p is None:
        return
    if p.jobs:
        print(p.line(), flush=True)
    for line in p.status.messages:
        print(line, flush=True)
    os.environ["SVE_HARNESS_PERF_SKIP_SAID"] = "1"


def cmd_validate(ns: argparse.Namespace) -> int:
    overrides = config.parse_overrides(ns.set)
    sweep = validate(ns.config, overrides)
    print(f"{ns.config}: valid; {len(sweep.jobs())} count jobs")
    return 0


def single_cell(ns: argparse.Namespace) -> tuple[config.Sweep, config.Job]:
    """Validate a one-cell request (kernel, variant, build, VL, size, op, dtype) like a sweep."""
    overrides = config.parse_overrides(ns.set)
    sweep = config.load(ns.config, overrides)
    sel = config.selection(sweep.table, {
        "kernel": ns.kernel, "variants": [ns.variant],
        **({"ops": [ns.op]} if ns.op else {}), **({"dtypes": [ns.dtype]} if ns.dtype else {}),
    })
    config.check_vl(ns.vl, "--vl")
    if ns.build != "vla":
        bits = int(ns.build[3:]) if ns.build[3:].isdigit() and ns.build.startswith("vls") else -1
        if bits not in config.VLS_ALLOWED:
            raise config.ConfigError(f"--build {ns.build}: use vla or vls<N> with N in {', '.join(map(str, config.VLS_ALLOWED))}")
        if bits != ns.vl:
            raise config.ConfigError(
                f"the VLS binary {ns.build} is built for {bits} bits and cannot run at {ns.vl} bits: use --build vla or --vl {bits}"
            )
    if ns.vl not in config.CPU_MODEL_VLS[ns.cpu]:
        raise config.ConfigError(f"QEMU's {ns.cpu} model does not support VL {ns.vl}; it supports {', '.join(map(str, config.CPU_MODEL_VLS[ns.cpu]))}")
    if ns.size < 0:
        raise config.ConfigError(f"--size {ns.size}: sizes are byte counts >= 0")
    row = sweep.table.row(ns.kernel, ns.variant)
    op, dtype = sel["op_dtypes"][0]
    params = config.run_params(sweep.table, row, op, dtype)
    runs = tuple(config.Run(ns.vl, s, op, dtype, params, sve=row.sve) for s in sorted({0, ns.size}))
    build = ns.build if row.sve else config.NOSVE  # a row without SVE has its own build
    return sweep, config.Job(config.Binary(ns.compiler, build, "qemu", ns.kernel, ns.variant), ns.cpu, runs)


def cmd_count(ns: argparse.Namespace) -> int:
    """Build one binary if needed, run it at size 0 and n, print its ROI counts."""
    from analysis import build
    from analysis.backends import qemu

    sweep, job = single_cell(ns)
    toolchain.preflight([ns.compiler], ["qemu"])
    mpi.check_row(sweep.table, ns.kernel, ns.variant)
    bd = sweep.build_dir
    binary = build.binary_path(bd, ns.compiler, job.binary.build, "qemu", job.binary.name)
    targets = [str(binary)] + [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    over = {"build_dir": str(bd), "results_dir": str(sweep.results_dir)}
    proc = subprocess.run(snakemake_cmd(ns.config, over, 2, [*targets, "--quiet", "all"]), capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        return 1
    plugins = build.plugin_path(bd, "inscount").parent
    env = mpi.run_env(sweep.table, ns.kernel, ns.variant)
    recs = [qemu.run_once(binary, job.cpu_model, r, plugins, env) for r in job.runs]
    base, meas = recs[0]["inscount"]["roi"], recs[-1]["inscount"]["roi"]
    print(f"{job.binary.name} {ns.build} cpu={ns.cpu} vl={ns.vl} size={ns.size} op={job.runs[0].op} dtype={job.runs[0].dtype}")
    print(f"  roi_net total {meas['total'] - base['total']}  sve {meas['sve'] - base['sve']}")
    for cls in meas["classes"]:
        d = meas["classes"][cls] - base["classes"][cls]
        if d:
            print(f"  roi_net class {cls:18s} {d}")
    print(f"  command: {' '.join(recs[-1]['command'])}  (cwd {binary.parent})")
    return 0


def cmd_regress(ns: argparse.Namespace) -> int:
    from analysis import regress

    args = [ns.cmd, "--config", ns.config, "--cores", str(ns.cores)] + [a for kv in ns.set for a in ("--set", kv)]
    return regress.main(args)


def cmd_explain(ns: argparse.Namespace) -> int:
    from analysis import explain

    return explain.main(ns.pytest_args)


def cmd_test(ns: argparse.Namespace) -> int:
    """The test suite, then the regression of the committed golden counts (so a change that
    moves counts fails until it is re-blessed on purpose)."""
    rc = subprocess.call([sys.executable, "-m", "pytest", str(REPO / "tests"), *ns.pytest_args], cwd=REPO)
    if rc != 0 or ns.pytest_args:
        return rc
    from analysis import regress

    print("regress: configs/regress.yaml against results/golden/ (re-bless with ./harness bless)", flush=True)
    return regress.main(["regress", "--config", "configs/regress.yaml"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="harness", description="SVE kernel instruction counts at every vector length.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="build, count, tabulate and plot a sweep (default: the paper's figures)")
    s.add_argument("--config", default="configs/default.yaml")
    s.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override results_dir/build_dir")
    s.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="after --: passed to snakemake")
    s.set_defaults(func=cmd_sweep)
    v = sub.add_parser("validate", help="check a sweep configuration and the toolchain, run nothing")
    v.add_argument("--config", default="configs/default.yaml")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    v.set_defaults(func=cmd_validate)
    c = sub.add_parser("count", help="count one cell: one kernel variant at one VL and size (ROI net)")
    c.add_argument("kernel")
    c.add_argument("variant")
    c.add_argument("--vl", type=int, required=True, help="vector length in bits")
    c.add_argument("--size", type=int, default=1 << 20, help="bytes (default 1 MiB)")
    c.add_argument("--build", default="vla", help="vla (default) or vls<N>")
    c.add_argument("--cpu", default="max", choices=sorted(config.CPU_MODEL_VLS))
    c.add_argument("--compiler", default="gcc", choices=["gcc", "clang"])
    c.add_argument("--op")
    c.add_argument("--dtype")
    c.add_argument("--config", default="configs/default.yaml", help="sweep whose kernel table and dirs to use")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.set_defaults(func=cmd_count)
    for action, text in (("bless", "record the regression set's counts as golden files"),
                         ("regress", "recount the regression set and compare with the golden files")):
        r = sub.add_parser(action, help=text)
        r.add_argument("--config", default="configs/regress.yaml")
        r.add_argument("--cores", type=int, default=os.cpu_count() or 1)
        r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
        r.set_defaults(func=cmd_regress)
    e = sub.add_parser("explain", help="explain one cell of results/counts.csv (commands, hot loop, functions, classes)",
                       add_help=False)
    e.set_defaults(func=cmd_explain)
    t = sub.add_parser("test", help="run the test suite")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    t.set_defaults(func=cmd_test)
    # pytest's own options (-q, -k ...) pass through `./harness test` untouched.
    ns, unknown = p.parse_known_args(argv)
    if ns.cmd in ("test", "explain"):
        ns.pytest_args = unknown + getattr(ns, "pytest_args", [])
    elif unknown:
        p.error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(ns, "snakemake_args", None) and ns.snakemake_args[0] == "--":
        ns.snakemake_args = ns.snakemake_args[1:]
    try:
        return ns.func(ns)
    except (config.ConfigError, toolchain.ToolchainError, RunError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
