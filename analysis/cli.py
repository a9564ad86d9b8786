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

from analysis import config, toolchain

REPO = config.REPO


def validate(sweep_path: str, overrides: dict[str, str]) -> config.Sweep:
    sweep = config.load(sweep_path, overrides)
    toolchain.preflight(sweep.compilers, sweep.backends)
    return sweep


def snakemake_cmd(sweep_path: str, overrides: dict[str, str], cores: int, extra: list[str]) -> list[str]:
    conf = [f"sweep={sweep_path}"] + [f"{k}={v}" for k, v in overrides.items()]
    return [
        str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(REPO), "--cores", str(cores), "--config", *conf, *extra,
    ]


def cmd_sweep(ns: argparse.Namespace) -> int:
    overrides = dict(kv.split("=", 1) for kv in ns.set)
    sweep = validate(ns.config, overrides)
    jobs = sweep.jobs()
    runs = sum(len(j.runs) for j in jobs)
    print(f"sweep {ns.config}: {len(jobs)} count jobs, {runs} runs, results in {sweep.results_dir}", flush=True)
    return subprocess.call(snakemake_cmd(ns.config, overrides, ns.cores, ns.snakemake_args))


def cmd_validate(ns: argparse.Namespace) -> int:
    overrides = dict(kv.split("=", 1) for kv in ns.set)
    sweep = validate(ns.config, overrides)
    print(f"{ns.config}: valid; {len(sweep.jobs())} count jobs")
    return 0


def cmd_test(ns: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", "pytest", str(REPO / "tests"), *ns.pytest_args], cwd=REPO)


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
    t = sub.add_parser("test", help="run the test suite")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    t.set_defaults(func=cmd_test)
    ns = p.parse_args(argv)
    if getattr(ns, "snakemake_args", None) and ns.snakemake_args[0] == "--":
        ns.snakemake_args = ns.snakemake_args[1:]
    try:
        return ns.func(ns)
    except (config.ConfigError, toolchain.ToolchainError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
