"""Benchmark: how long the sweeps take and what the counting costs. Prints figures and
writes results/bench.json; it asserts nothing (timing belongs here, not in the tests).

1. setup: `setup/install.sh` on an installed machine (the no-op path every command pays);
2. the default sweep from a clean results and build tree (target < 120 s on 2 cores);
3. the same sweep again with nothing changed (target < 5 s);
4. the regression set (`./harness regress`) from a clean tree (target < 60 s);
   where gem5 is found: the default cycle sweep on that tree (target < 30 min) and gem5's
   simulated instructions per host second, O3 and fast-forward;
5. the default sweep's perf measurements (host baselines here, SVE runs on A64FX);
6. the memcpy family sweep (configs/memcpy.yaml) from a clean tree: counts at every VL, then
   its host timing under perf;
7. plugin overhead: a kernel whose plain QEMU run takes >= 2 s, plain vs all three
   counting clients, median of 5 (target < 1.3x);
8. where slurm-wlm is installed: the tiny and the default sweep through the local Slurm beside the
   local run, and their re-run with nothing changed (--skip-slurm-default: the tiny one only);
9. the full reduction op x dtype matrix (configs/full.yaml), unless --skip-full;
10. the Open MPI 5 build time (from its stamp) and the MPI sweep from a clean tree, with the
   MPI libraries that are here.
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
    env = os.environ if gem5 else {**os.environ, "GEM5": "none"}
    return timed(snakemake_cmd(cfg, over, cores, ["--quiet", target]), cwd=REPO, env=env)


def perf_measurements(work: Path, cores: int) -> dict[str, Any] | None:
    """The default sweep's perf part on this machine (host baselines here; SVE on A64FX)."""
    p = perf.plan(config.load(REPO / "configs" / "default.yaml"))
    for m in p.status.messages if p else []:
        print(m, flush=True)
    if not p or not p.jobs:
        return None
    return {"seconds": round(sweep_time("configs/default.yaml", work, cores, gem5=False, target="perf_all"), 1),
            "jobs": len(p.jobs), "processes": p.processes, "sve": p.status.sve, "host": p.status.host}


def memcpy_family(work: Path, cores: int) -> dict[str, Any]:
    """The memcpy family sweep (configs/memcpy.yaml) from a clean tree: its counts at every VL
    (gem5 hidden), then its host timing under perf where perf can count."""
    cfg = "configs/memcpy.yaml"
    sweep = config.load(REPO / cfg)
    out: dict[str, Any] = {"config": cfg, "runs": sum(len(j.runs) for j in sweep.jobs()),
                           "counts_s": round(sweep_time(cfg, work, cores, gem5=False), 1)}
    p = perf.plan(sweep)
    if p and p.jobs:
        out["perf_s"] = round(sweep_time(cfg, work, cores, gem5=False, target="perf_all"), 1)
        out["perf_processes"] = p.processes
    return out


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


def slurm_sweeps(work: Path, cores: int, local_default_s: float | None, with_default: bool) -> dict[str, Any] | None:
    """The tiny (and default) sweep through the local Slurm (setup/slurm.sh, profile `local`)
    beside the same sweep run locally: the executor's overhead (one sbatch, one Snakemake job step
    and status queries per job)."""
    if shutil.which("slurmctld") is None:
        print("slurm: skipped (slurm-wlm is not installed: ./harness setup --with-slurm)", flush=True)
        return None
    subprocess.run([str(REPO / "setup" / "slurm.sh"), "start"], check=True, capture_output=True)
    out: dict[str, Any] = {}
    for name, cfg in (("tiny", "configs/tiny.yaml"), ("default", "configs/default.yaml")):
        if name == "default" and not with_default:
            continue
        def cli(tree: Path, *slurm: str) -> list[str]:
            return [sys.executable, "-m", "analysis.cli", "sweep", "--config", cfg, "--cores", str(cores), *slurm,
                    "--set", f"results_dir={tree / 'results'}", "--set", f"build_dir={tree / 'build'}", "--", "counts_all"]

        args = cli(work / f"slurm-{name}", "--slurm", "local")
        env = {k: v for k, v in os.environ.items() if k != "GEM5"}
        t0 = time.monotonic()
        proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            sys.exit(f"bench: the {name} sweep through Slurm failed:\n{proc.stderr[-2000:]}")
        jobs = proc.stderr.count("has been submitted with SLURM jobid")
        # The same front end without --slurm, on trees of its own (the default sweep: as timed above).
        local = local_default_s if name == "default" and local_default_s else timed(cli(work / f"local-{name}"), cwd=REPO, env=env)
        rerun = timed(args, cwd=REPO, env=env)
        out[name] = {"config": cfg, "slurm_s": round(seconds, 1), "local_s": round(local, 1), "slurm_jobs": jobs,
                     "rerun_noop_slurm_s": round(rerun, 1)}
        print(f"{name} sweep through the local Slurm: {out[name]['slurm_s']} s for {jobs} Slurm jobs, locally "
              f"{out[name]['local_s']} s; re-run with nothing changed {out[name]['rerun_noop_slurm_s']} s", flush=True)


def mpi_timings(work: Path, cores: int) -> dict[str, Any]:
    """The Open MPI 5 build time (setup/ompi5.sh writes it into its stamp) and the MPI sweep
    (configs/mpi.yaml) from a clean tree, restricted to the rows whose library is here: each
    part absent says why in one line."""
    import yaml

    from analysis import mpi

    out: dict[str, Any] = {}
    lib = mpi.library("ompi5")
    stamp = dict(ln.split("=", 1) for ln in (lib.prefix.parent / "installed").read_text().split()) \
        if lib.installed() and (lib.prefix.parent / "installed").exists() else {}
    out["ompi5_build_s"] = int(stamp["build_seconds"]) if "build_seconds" in stamp else None
    print(f"Open MPI 5 build (setup --with-ompi5): {out['ompi5_build_s']} s" if out["ompi5_build_s"] is not None
          else f"Open MPI 5 build: not measured ({'built before its stamp recorded the time' if lib.installed() else 'not built: run ' + lib.fix})",
          flush=True)
    src = REPO / "configs" / "mpi.yaml"
    sweep = config.load(src)
    present = {name for name, x in mpi.libraries(sweep).items() if x.installed()}
    missing = sorted(set(mpi.libraries(sweep)) - present)
    if not present:
        print(f"MPI sweep: skipped, no MPI library here ({mpi.DEBIAN.fix}, {lib.fix})", flush=True)
        out["mpi_sweep"] = None
        return out
    # The same sweep without the rows, figures and checks of the absent libraries.
    drop = {f for f, fam in sweep.table.families.items() if fam.mpi and fam.mpi_library not in present}
    raw = yaml.safe_load(src.read_text())
    raw["kernel_table"] = str(REPO / raw["kernel_table"])

    def keeps(spec: dict[str, Any]) -> bool:
        sels = [spec.get(k) for k in ("series", "numerator", "denominator", "baseline")]
        return all(sweep.table.selector_family(s).name not in drop
                   for x in sels if x for s in (x if isinstance(x, list) else [x]))

    raw["kernels"] = [k for k in raw["kernels"] if sweep.table.row(k["kernel"], sweep.table.variants(k["kernel"])[0]).family not in drop]
    raw["figures"] = [f for f in raw.get("figures", []) if keeps(f)]
    raw["checks"] = [c for c in raw.get("checks", []) if keeps(c)]
    cfg = work / "mpi-present.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    runs = sum(len(j.runs) for j in config.load(cfg).jobs())
    seconds = round(sweep_time(str(cfg), work, cores, target="all"), 1)
    out["mpi_sweep"] = {"config": str(src.relative_to(REPO)), "libraries": sorted(present), "without": missing,
                        "runs": runs, "seconds": seconds}
    print(f"MPI sweep (configs/mpi.yaml, {', '.join(sorted(present))}"
          + (f"; without {', '.join(missing)}: not installed" if missing else "") + f"), clean tree: {seconds} s for {runs} runs",
          flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--skip-full", action="store_true", help="skip the full op x dtype matrix")
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench.json")
    p.add_argument("--skip-slurm-default", action="store_true", help="through the local Slurm, the tiny sweep only")
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
        report["memcpy_family"] = mf = memcpy_family(work / "memcpy", ns.cores)
        print(f"memcpy family sweep, clean tree: counts {mf['counts_s']} s for {mf['runs']} runs"
              + (f", perf {mf['perf_s']} s for {mf['perf_processes']} processes" if "perf_s" in mf else ""), flush=True)
        report["overhead"] = overhead(work / "default", ns.cores)
        o = report["overhead"]
        print(f"plugin overhead: {o['counted_median_s']} s / {o['plain_median_s']} s = {o['ratio']}x (target < 1.3x)", flush=True)
        report["slurm"] = slurm_sweeps(work, ns.cores, report["default"]["seconds"], not ns.skip_slurm_default)
        if not ns.skip_full:
            full = "configs/full.yaml"
            fs = config.load(REPO / full)
            report["full_matrix"] = {
                "config": full, "config_hash": config_hash(REPO / full),
                "jobs": len(fs.jobs()), "runs": sum(len(j.runs) for j in fs.jobs()),
                "seconds": round(sweep_time(full, work / "full", ns.cores), 1),
            }
            print(f"full op x dtype matrix: {report['full_matrix']['seconds']} s for {report['full_matrix']['runs']} runs", flush=True)
        report["mpi"] = mpi_timings(work / "mpi", ns.cores)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
