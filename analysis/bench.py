"""Benchmark: how long the sweeps take and what the counting costs. Prints figures and
writes results/bench.json; it asserts nothing (timing belongs here, not in the tests).

1. setup: `setup/install.sh` on an installed machine (the no-op path every command pays);
2. the default sweep from a clean results and build tree (target < 120 s on 2 cores);
3. the same sweep again with nothing changed (target < 5 s);
4. the regression set (`./harness regress`) from a clean tree (target < 60 s);
   where gem5 is found: the default cycle sweep on that tree (target < 30 min) and gem5's
   simulated instructions per host second, O3 and fast-forward;
5. the default sweep's perf measurements (host baselines here, SVE runs on A64FX);
6. plugin overhead: a kernel whose plain QEMU run takes >= 2 s, plain vs all three
   counting clients, median of 5 (target < 1.3x);
7. the full reduction op x dtype matrix (configs/full.yaml), unless --skip-full.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from analysis import build, config
from analysis.backends import perf, qemu
from analysis.cli import snakemake_cmd
from analysis.table import read_counts

REPO = config.REPO


def config_hash(path: Path) -> str:
    sweep = config.load(path)
    h = hashlib.sha256()
    for p in [path, *sweep.table_paths]:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def timed(cmd: list[str], **kw: Any) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:4])} ... failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - t0


def sweep_time(cfg: str, work: Path, cores: int, gem5: bool = True, target: str = "counts_all") -> float:
    """Wall time of one sweep's target (counts_all: everything but the perf measurements);
    gem5=False hides gem5 so that only the counts are timed."""
    over = {"results_dir": str(work / "results"), "build_dir": str(work / "build")}
    env = os.environ if gem5 else {k: v for k, v in os.environ.items() if k != "GEM5"}
    return timed(snakemake_cmd(cfg, over, cores, [target, "--quiet", "all"]), cwd=REPO, env=env)


def perf_measurements(work: Path, cores: int) -> dict[str, Any] | None:
    """The default sweep's perf part on this machine (host baselines here; SVE on A64FX)."""
    p = perf.plan(config.load(REPO / "configs" / "default.yaml"))
    for m in p.status.messages if p else []:
        print(m, flush=True)
    if not p or not p.jobs:
        return None
    return {"seconds": round(sweep_time("configs/default.yaml", work, cores, gem5=False, target="perf_all"), 1),
            "jobs": len(p.jobs), "processes": p.processes, "sve": p.status.sve, "host": p.status.host}


def overhead(work: Path, cores: int, repeats: int = 5) -> dict[str, Any]:
    """Plain QEMU vs QEMU with every counting client on the scalar copy, sized to run >= 2 s."""
    over = {"results_dir": str(work / "results"), "build_dir": str(work / "build")}
    sweep = config.load(REPO / "configs" / "default.yaml", over)
    binary = build.binary_path(sweep.build_dir, "gcc", "vla", "qemu", "copy-c_scalar")
    plugins = build.plugin_path(sweep.build_dir, "inscount").parent
    size, vl = 1 << 20, 512
    while True:
        run = config.Run(vl, size, "-", "uint8", ())
        plain = ["env", "-i", "qemu-aarch64", "-cpu", f"max,sve-default-vector-length={vl // 8}", f"./{binary.name}", *run.argv()]
        if timed(plain, cwd=binary.parent) >= 2.0 or size >= 1 << 31:
            break
        size *= 2
    with tempfile.TemporaryDirectory() as tmp:
        counted = qemu.qemu_command(binary, "max", run, plugins, Path(tmp))
        t_plain = [timed(plain, cwd=binary.parent) for _ in range(repeats)]
        t_count = [timed(counted, cwd=binary.parent) for _ in range(repeats)]
    return {
        "kernel": "copy-c_scalar", "vl": vl, "size": size, "repeats": repeats,
        "plain_median_s": round(statistics.median(t_plain), 3),
        "counted_median_s": round(statistics.median(t_count), 3),
        "ratio": round(statistics.median(t_count) / statistics.median(t_plain), 3),
        "clients": list(qemu.CLIENTS), "target_ratio": 1.3,
    }


def gem5_cycle_sweep(work: Path, cores: int) -> dict[str, Any] | None:
    """The default cycle sweep (where gem5 is found) on top of an already counted tree, and
    gem5's simulation speed: O3 from the ROI blocks, fast-forward from the rest of each run."""
    from analysis.backends import gem5 as G

    sweep = config.load(REPO / "configs" / "default.yaml")
    if G.find_gem5(sweep) is None:
        print(G.skipped_message(sweep), flush=True)
        return None
    seconds = sweep_time("configs/default.yaml", work, cores)
    o3_insts = o3_secs = ff_insts = ff_secs = 0.0
    for raw in (work / "results" / "raw" / "gem5").rglob("*.json"):
        for run in json.loads(raw.read_text())["runs"]:
            # simInsts counts every CPU since start-up (gem5 does not reset it): use the O3
            # core's committed ROI instructions.
            o3_insts += run["gem5"]["insts"]
            o3_secs += run["host"]["hostSeconds"]
            ff_secs += run["seconds"] - run["host"]["hostSeconds"]
    counts = read_counts(work / "results" / "counts.csv")
    whole = counts[(counts["backend"] == "qemu") & (counts["metric"] == "whole.total") & (counts["build"] == "vla")]
    ff_insts = float(whole[whole["vl"].isin(sweep.raw["gem5"]["vector_lengths"])]["value"].sum()) - o3_insts
    return {"seconds": round(seconds, 1), "target_s": 1800,
            "o3_insts_per_host_s": round(o3_insts / o3_secs) if o3_secs else None,
            "fast_forward_insts_per_host_s_approx": round(ff_insts / ff_secs) if ff_secs > 0 else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--skip-full", action="store_true", help="skip the full op x dtype matrix")
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench.json")
    ns = p.parse_args(argv)
    report: dict[str, Any] = {"cores": ns.cores, "host": os.uname().nodename}
    report["setup_noop_s"] = round(timed([str(REPO / "setup" / "install.sh")]), 3)
    print(f"setup (no-op path): {report['setup_noop_s']} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="sve-bench-"))
    try:
        default = "configs/default.yaml"
        sweep = config.load(REPO / default)
        report["default"] = {
            "config": default, "config_hash": config_hash(REPO / default),
            "jobs": len(sweep.jobs()), "runs": sum(len(j.runs) for j in sweep.jobs()),
            "seconds": round(sweep_time(default, work / "default", ns.cores, gem5=False), 1), "target_s": 120,
        }
        print(f"default sweep, clean tree: {report['default']['seconds']} s for {report['default']['runs']} runs (target < 120 s)", flush=True)
        report["rerun_noop_s"] = round(sweep_time(default, work / "default", ns.cores, gem5=False), 2)
        print(f"re-run, nothing changed: {report['rerun_noop_s']} s (target < 5 s)", flush=True)
        report["regression_set"] = {
            "config": "configs/regress.yaml",
            "seconds": round(timed([sys.executable, "-m", "analysis.regress", "regress", "--set",
                                    f"results_dir={work / 'regress' / 'results'}", "--set",
                                    f"build_dir={work / 'regress' / 'build'}"], cwd=REPO), 1),
            "target_s": 60,
        }
        print(f"regression set (./harness regress), clean tree: {report['regression_set']['seconds']} s (target < 60 s)", flush=True)
        report["gem5"] = gem5_cycle_sweep(work / "default", ns.cores)
        if report["gem5"]:
            g = report["gem5"]
            print(f"gem5 default cycle sweep: {g['seconds']} s (target < 1800 s); O3 {g['o3_insts_per_host_s']} "
                  f"insts/host s, fast-forward ~{g['fast_forward_insts_per_host_s_approx']} insts/host s", flush=True)
        report["perf"] = perf_measurements(work / "default", ns.cores)
        if report["perf"]:
            pm = report["perf"]
            print(f"perf measurements of the default sweep: {pm['seconds']} s for {pm['processes']} processes "
                  f"({pm['jobs']} jobs; SVE: {pm['sve']}, host baselines: {pm['host']})", flush=True)
        report["overhead"] = overhead(work / "default", ns.cores)
        o = report["overhead"]
        print(f"plugin overhead: {o['counted_median_s']} s / {o['plain_median_s']} s = {o['ratio']}x (target < 1.3x)", flush=True)
        if not ns.skip_full:
            full = "configs/full.yaml"
            fs = config.load(REPO / full)
            report["full_matrix"] = {
                "config": full, "config_hash": config_hash(REPO / full),
                "jobs": len(fs.jobs()), "runs": sum(len(j.runs) for j in fs.jobs()),
                "seconds": round(sweep_time(full, work / "full", ns.cores), 1),
            }
            print(f"full op x dtype matrix: {report['full_matrix']['seconds']} s for {report['full_matrix']['runs']} runs", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
