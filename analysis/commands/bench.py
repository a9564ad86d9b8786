"""Benchmark: how long the sweeps take and what the counting costs. Prints every figure beside
its target and writes results/bench.json; it asserts nothing (timing belongs here, not in the
tests). Each timed step also records the CPU seconds of its processes: on a machine shared
with other work the wall time says little, the CPU time stays comparable.

1. setup: `setup/install.sh` on an installed machine (the no-op path every command pays);
2. the default count sweep from a clean results and build tree (targets on 2 cores: <= 30 s and
   <= 60 CPU s), its CPU seconds in parts (QEMU, builds, the count jobs' Python, the other jobs,
   Snakemake: bench_parts), and where its guest instructions go: the share outside the ROI
   (filling the inputs, computing the reference, verifying) per kernel, from the sweep's own counts;
3. the same sweep again with nothing changed, as a user re-runs it (`./harness sweep`), median of 3
   (target <= 1 s);
4. the regression set (`./harness regress`) from a clean tree (target <= 5 s);
   where gem5 is found: the default cycle sweep on that tree (target <= 30 min) and gem5's
   simulated instructions per host second, O3 and fast-forward; then the same sweep in gem5's
   sampled mode, validated
   against it cell by cell (gem5_sampled.bench_sampled: bench.json's gem5_sampled; targets
   <= 4 min, every cell within 2 %, at most 1 in 100 outside its interval);
   where the arm64 guest is built (./harness setup --with-arm64-vm): the default sweep's cells at VL
   128/256/512 counted by DynamoRIO in the guest, ArmIE's stand-in, against QEMU's ROI totals and
   SVE counts, cell by cell (target <= 5 min; the other VLs named as not run);
5. the default sweep's perf measurements (host baselines here, SVE runs on A64FX): native
   timing, no emulation, its length set by the method (processes x calls x sizes); reported
   beside the count sweep, not inside its target;
6. counting clients' overhead: a kernel whose plain QEMU run takes >= 2 s, plain vs all
   three counting clients, median of 5 (target <= 1.05x);
7. the memcpy family sweep (configs/memcpy.yaml) from a clean tree: counts at every VL, then
   its host timing under perf;
8. where slurm-wlm is installed: the tiny and the default sweep through the local Slurm beside the
   local run (target <= 1.5x, counts.csv byte-identical), the Slurm jobs each submitted (the
   default sweep: target <= 24) and their re-run with nothing changed (no Slurm job); the
   default sweep's local side is the one timed in 2 (--skip-slurm-default: the tiny one only);
9. the full reduction op x dtype matrix (configs/full.yaml, target <= 80 s), unless --skip-full;
10. the Open MPI 5 build time (from its stamp) and the MPI sweep from a clean tree, with the
   MPI libraries that are here;
11. the default sweep's report.html: its size in bytes (target <= 1.5 MB) and how long chromium
   takes to open it, from navigation to the load event, median of 3 (target <= 2 s).
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
from pathlib import Path
from typing import Any

import yaml

from analysis.backends import Bench, perf, qemu
from analysis.backends.registry import REGISTRY
from analysis.commands import bench_parts, report as report_page
from analysis.commands.bench_common import HIDDEN, TARGETS, timed, verdict
from analysis.commands.bench_slurm import slurm_sweeps
from analysis.commands.guard import snakemake_cmd
from analysis.core import config, cpu_record, mpi
from analysis.core.table import TableError, read_counts, read_provenance
from analysis.stages import build
from analysis.stages.checks import claim
from analysis.stages.series import by_category
from analysis.stages.verdict import Verdict

REPO = config.REPO


def config_hash(path: Path) -> str:
    sweep = config.load(path)
    h = hashlib.sha256()
    for p in [path, *sweep.table_paths]:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]

def figure(seconds: float, cpu: float, target: float | None = None, cpu_target: float | None = None,
           **extra: Any) -> dict[str, Any]:
    """A timing; `met` when it is within its target and, where it has one, its CPU target (the
    CPU seconds as printed)."""
    out: dict[str, Any] = {"seconds": round(seconds, 2), "cpu_s": round(cpu, 1), **extra}
    if target is not None:
        out.update(target_s=target, met=seconds <= target)
    if cpu_target is not None:
        out.update(cpu_target_s=cpu_target, met=out.get("met", True) and out["cpu_s"] <= cpu_target)
    return out

def sweep_time(cfg: str, work: Path, cores: int, hidden: bool = False, target: str = "counts_all",
               results: Path | None = None, cpu_dir: Path | None = None) -> tuple[float, float]:
    """Wall and CPU time of one sweep's target (counts_all: everything but the perf
    measurements); hidden=True hides the backends that say how (Backend.HIDE_ENV: gem5), so
    that only the counts are timed. `results`: other than work/results; `cpu_dir`: see bench_parts."""
    over = {"results_dir": str(results or work / "results"), "build_dir": str(work / "build")}
    env = {**os.environ, **(HIDDEN if hidden else {}), **({cpu_record.ENV: str(cpu_dir)} if cpu_dir else {})}
    # Snakemake 9's --quiet takes choices and would read a target after it as one: targets first.
    wall, cpu, _ = timed(snakemake_cmd(cfg, over, cores, [target, "--quiet", "all"]), cwd=REPO, env=env)
    return wall, cpu

def rerun_time(cfg: str, work: Path, cores: int) -> tuple[float, float]:
    """Wall and CPU time of `./harness sweep ... -- counts_all` on a tree with nothing to do, as
    a user re-runs it (entry script and installer check included; gem5 hidden, as above)."""
    cmd = [str(REPO / "harness"), "sweep", "--config", cfg, "--cores", str(cores),
           "--set", f"results_dir={work / 'results'}", "--set", f"build_dir={work / 'build'}", "--", "counts_all"]
    wall, cpu, _ = timed(cmd, cwd=REPO, env={**os.environ, **HIDDEN})
    return wall, cpu

def out_of_roi(counts_csv: Path) -> dict[str, Any]:
    """Guest instructions of the sweep's QEMU runs, whole program and ROI, per kernel variant:
    the share outside the ROI is what filling, the reference and the verification cost."""
    c = read_counts(counts_csv)
    q = c[(c["backend"] == "qemu") & c["metric"].isin(["whole.total", "roi.total"])]
    q = q.assign(name=q["kernel"] + "-" + q["variant"])
    p = q.pivot_table(index="name", columns="metric", values="value", aggfunc="sum")
    rows = {name: {"whole": int(r["whole.total"]), "roi": int(r["roi.total"]),
                   "outside_share": round(1 - r["roi.total"] / r["whole.total"], 4)}
            for name, r in p.iterrows()}
    whole, roi = int(p["whole.total"].sum()), int(p["roi.total"].sum())
    return {"whole": whole, "roi": roi, "outside_share": round(1 - roi / whole, 4) if whole else 0.0, "per_kernel": rows}

def overhead_kernel(sweep: config.Sweep) -> config.Job:
    """The scalar copy where the sweep has it (the most instructions per byte), else its first
    VLA job."""
    vla = [j for j in sweep.jobs() if j.binary.build == "vla"]
    return next((j for j in vla if j.binary.name == "copy-c_scalar"), vla[0])

def overhead(cfg: str, work: Path, min_seconds: float, repeats: int = 5) -> dict[str, Any]:
    """Plain QEMU vs QEMU with every counting client, on a run sized to take >= min_seconds."""
    over = {"results_dir": str(work / "results"), "build_dir": str(work / "build")}
    sweep = config.load(REPO / cfg, over)
    job = overhead_kernel(sweep)
    binary = build.binary_path(sweep.build_dir, "gcc", "vla", "qemu", job.binary.name)
    plugins = build.plugin_path(sweep.build_dir, "inscount").parent
    first = max(job.runs, key=lambda r: r.size)
    size, vl = max(first.size, 4096), 512
    while True:
        run = config.Run(vl, size, first.op, first.dtype, first.params)
        plain = ["env", "-i", "qemu-aarch64", "-cpu", f"max,sve-default-vector-length={vl // 8}", f"./{binary.name}", *run.argv()]
        if timed(plain, cwd=binary.parent)[0] >= min_seconds or size >= 1 << 31:
            break
        size *= 2
    with tempfile.TemporaryDirectory() as tmp:
        counted = qemu.qemu_command(binary, "max", [run], plugins, Path(tmp))
        t_plain = [timed(plain, cwd=binary.parent)[0] for _ in range(repeats)]
        t_count = [timed(counted, cwd=binary.parent)[0] for _ in range(repeats)]
    return {
        "kernel": job.binary.name, "vl": vl, "size": size, "repeats": repeats,
        "plain_median_s": round(statistics.median(t_plain), 3),
        "counted_median_s": round(statistics.median(t_count), 3),
        "ratio": round(statistics.median(t_count) / statistics.median(t_plain), 3),
        "clients": list(qemu.CLIENTS), "target_ratio": TARGETS["overhead_ratio"],
        "met": statistics.median(t_count) / statistics.median(t_plain) <= TARGETS["overhead_ratio"],
    }

def verdicts(cfg: str, results: Path) -> dict[str, str]:
    """Each check of a sweep file evaluated on the tables in `results`: its verdict (the word and
    its cause or paper line, without the numbers: sampled cycles are estimates, so a result's
    numbers move with any cycle while the verdict must not)."""
    sweep = mpi.without_unbuilt(config.load(Path(cfg) if Path(cfg).is_absolute() else REPO / cfg,
                                            {"results_dir": str(results)}))
    counts = by_category(read_counts(results / "counts.csv"))
    prov = read_provenance(results / "provenance.csv")
    ran = set(counts["backend"])
    out = {}
    for c in sweep.checks:
        row = claim(c, counts, prov, sweep, ran)
        out[c.id] = verdict_of(row.verdict)
    return out


def verdict_of(v: Verdict | None) -> str:
    """A verdict as two modes must agree on it: its word and cause or paper line, not its pair's
    numbers."""
    return v.verdict if v else "-"


def build_binaries(cfg: str, work: Path, cores: int, wanted: list[config.Binary]) -> dict[config.Binary, Path]:
    """Build these binaries of the sweep on the tree under `work` (Snakemake; any backend's
    markers, whether the sweep lists that backend or not) and return their paths."""
    over = {"results_dir": str(work / "results"), "build_dir": str(work / "build")}
    sweep = config.load(REPO / cfg, over)
    paths = {b: build.binary_path(sweep.build_dir, b.compiler, b.build, b.backend, b.name) for b in wanted}
    if paths:
        timed(snakemake_cmd(cfg, over, cores, [*map(str, paths.values()), "--quiet", "all"]), cwd=REPO)
    return paths


def backend_parts(cfg: str, work: Path, cores: int, only: str | None = None) -> dict[str, Any]:
    """What each backend (or only the one named) times beyond the count sweep (Backend.bench:
    gem5's cycle sweep, perf's measurements, ArmIE's stand-in in the guest), on the tree the
    count sweep was timed in; its lines printed as they come."""
    b = Bench(cfg, work, lambda target, hidden: sweep_time(cfg, work, cores, hidden, target), figure, verdict, TARGETS,
              read_counts,
              lambda other, results, hidden, target: sweep_time(other, work, cores, hidden, target, results),
              verdicts, binaries=lambda wanted: build_binaries(cfg, work, cores, wanted), cores=cores)
    out = {}
    for name, backend in REGISTRY.items():
        if only is not None and name != only:
            continue
        entry, lines = backend.bench(b)
        for line in lines:
            print(line, flush=True)
        if entry is not None:
            out[name] = entry
    out.update(b.extra)
    return out

def sweep_figure(cfg: str, work: Path, cores: int, target: float, cpu_target: float | None = None,
                 with_parts: bool = False) -> dict[str, Any]:
    """A sweep from a clean tree; `with_parts`: its CPU seconds in parts (bench_parts) as well."""
    sweep = config.load(REPO / cfg)
    cpu_dir = bench_parts.record_dir(work) if with_parts else None
    wall, cpu = sweep_time(cfg, work, cores, hidden=True, cpu_dir=cpu_dir)
    extra = {"cpu_parts": bench_parts.parts(cpu, cpu_dir)} if cpu_dir is not None else {}
    return figure(wall, cpu, target, cpu_target, config=cfg, config_hash=config_hash(REPO / cfg), jobs=len(sweep.jobs()),
                  runs=sum(len(j.runs) for j in sweep.jobs()), **extra)

def memcpy_family(cfg: str, work: Path, cores: int) -> dict[str, Any]:
    """The memcpy family sweep (configs/memcpy.yaml) from a clean tree: its counts at every VL
    (gem5 hidden), then its host timing under perf where perf can count."""
    sweep = config.load(REPO / cfg)
    out: dict[str, Any] = {"config": cfg, "runs": sum(len(j.runs) for j in sweep.jobs()),
                           "counts_s": round(sweep_time(cfg, work, cores, hidden=True)[0], 1)}
    p = perf.plan(sweep)
    if p and p.jobs:
        out["perf_s"] = round(sweep_time(cfg, work, cores, hidden=True, target="perf_all")[0], 1)
        out["perf_processes"] = p.processes
    return out


def report_figure(cfg: str, work: Path, repeats: int = 3) -> dict[str, Any]:
    """The sweep's report.html written from its results under `work` (counts and perf): its size,
    and chromium's load time where chromium is installed."""
    sweep = config.load(REPO / cfg, {"results_dir": str(work / "results"), "build_dir": str(work / "build")})
    page = report_page.write(sweep)
    size = page.stat().st_size
    out: dict[str, Any] = {"bytes": size, "target_bytes": TARGETS["report_bytes"], "load_s": None,
                           "target_s": TARGETS["report_load_s"]}
    chromium = shutil.which("chromium")
    if chromium is None:
        print("report load time: skipped (chromium is not installed: ./harness test installs it)", flush=True)
        out["met"] = size <= TARGETS["report_bytes"]
        return out
    loads = [report_page.page_load(page, chromium) for _ in range(repeats)]
    out.update(load_s=round(statistics.median(loads), 3), loads_s=[round(x, 3) for x in loads],
               met=size <= TARGETS["report_bytes"] and statistics.median(loads) <= TARGETS["report_load_s"])
    return out


def mpi_timings(work: Path, cores: int) -> dict[str, Any]:
    """The Open MPI 5 build time (setup/ompi5.sh writes it into its stamp) and the MPI sweep
    (configs/mpi.yaml) from a clean tree, restricted to the rows whose library is here: each
    part absent says why in one line."""
    out: dict[str, Any] = {}
    lib = mpi.library("ompi5")
    for key, name, what in (("ompi5_build_s", "ompi5", "Open MPI 5 build"),
                            ("ompi5_sve_build_s", "ompi5-sve", "its SVE datatype engine build")):
        x = mpi.library(name)
        stamp = dict(ln.split("=", 1) for ln in x.stamp.read_text().split()) if x.installed() and x.stamp else {}
        out[key] = int(stamp["build_seconds"]) if "build_seconds" in stamp else None
        print(f"{what} (setup --with-ompi5): {out[key]} s" if out[key] is not None
              else f"{what}: not measured ({'built before its stamp recorded the time' if x.installed() else 'not built: run ' + x.fix})",
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
    cfg = work / "mpi-present.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(yaml.safe_dump(mpi.sweep_doc_without(src, sweep, drop), sort_keys=False))
    runs = sum(len(j.runs) for j in config.load(cfg).jobs())
    seconds = round(sweep_time(str(cfg), work, cores, target="all")[0], 1)
    out["mpi_sweep"] = {"config": str(src.relative_to(REPO)), "libraries": sorted(present), "without": missing,
                        "runs": runs, "seconds": seconds}
    print(f"MPI sweep (configs/mpi.yaml, {', '.join(sorted(present))}"
          + (f"; without {', '.join(missing)}: not installed" if missing else "") + f"), clean tree: {seconds} s for {runs} runs",
          flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--config", default="configs/default.yaml", help="the sweep timed as 'default'")
    p.add_argument("--full-config", default="configs/full.yaml", help="the sweep timed as 'full matrix'")
    p.add_argument("--regress-config", default="configs/regress.yaml", help="the regression set")
    p.add_argument("--skip-full", action="store_true", help="skip the full op x dtype matrix")
    p.add_argument("--overhead-seconds", type=float, default=2.0,
                   help="size the overhead run to take at least this long without clients")
    p.add_argument("--memcpy-config", default="configs/memcpy.yaml", help="the sweep timed as 'memcpy family'")
    p.add_argument("--skip-slurm-default", action="store_true", help="through the local Slurm, the tiny sweep only")
    p.add_argument("--skip-slurm", action="store_true", help="skip the sweeps through the local Slurm")
    p.add_argument("--skip-mpi", action="store_true", help="skip the Open MPI 5 build time and the MPI sweep")
    p.add_argument("--only", choices=list(REGISTRY),
                   help="after the default count sweep, time this backend's part alone (gem5: the cycle sweep, full "
                        "and sampled) and stop")
    p.add_argument("--counted", type=Path, default=None, metavar="TREE",
                   help="with --only: a tree (TREE/results, TREE/build) the sweep was already counted into, e.g. . "
                        "after ./harness sweep: its backend's part runs there, the count sweep is not timed again")
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench.json")
    ns = p.parse_args(argv)
    if ns.counted is not None:
        if not ns.only:
            p.error("--counted goes with --only (the other parts time sweeps from a clean tree)")
        if not (ns.counted / "results" / "counts.csv").is_file():
            p.error(f"--counted {ns.counted}: no results/counts.csv there: run ./harness sweep first")
    try:
        return run_parts(ns)
    except (config.ConfigError, TableError, bench_parts.PartsError) as e:
        # A sweep file or a counted tree a part cannot use: one line, as the other commands say it.
        print(f"error: {e}", file=sys.stderr)
        return 2


def run_parts(ns: argparse.Namespace) -> int:
    """bench's parts as `ns` asks (main's checked arguments); bench.json written at the end."""
    if ns.counted is not None:
        report = {"cores": ns.cores, "host": os.uname().nodename, "load_avg_start": os.getloadavg()[0],
                  "counted": str(ns.counted.resolve())}
        report.update(backend_parts(ns.config, ns.counted.resolve(), ns.cores, ns.only))
        return finish(report, ns.out, None)
    report: dict[str, Any] = {"cores": ns.cores, "host": os.uname().nodename, "load_avg_start": os.getloadavg()[0]}
    wall, cpu, _ = timed([str(REPO / "setup" / "install.sh")])
    report["setup_noop_s"] = round(wall, 3)
    print(f"setup (no-op path): {report['setup_noop_s']} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="sve-bench-"))
    try:
        d = report["default"] = sweep_figure(ns.config, work / "default", ns.cores, TARGETS["default_s"],
                                             TARGETS["default_cpu_s"], with_parts=True)
        print(f"default count sweep, clean tree: {d['seconds']} s ({d['cpu_s']} CPU s) for {d['runs']} runs "
              f"({verdict(d['seconds'], d['target_s'])}; {verdict(d['cpu_s'], d['cpu_target_s'], 'CPU target')})",
              flush=True)
        print("\n".join(bench_parts.lines(d["cpu_parts"], d["seconds"], report["load_avg_start"])), flush=True)
        o = report["out_of_roi"] = out_of_roi(work / "default" / "results" / "counts.csv")
        print(f"guest instructions: {o['whole']:,} whole program, {o['roi']:,} in the ROI; "
              f"{100 * o['outside_share']:.1f} % outside the ROI (copying prepared inputs back, poison loops, "
              "verification)", flush=True)
        for name, r in o["per_kernel"].items():
            print(f"  {name:28s} {100 * r['outside_share']:5.1f} % outside the ROI ({r['whole']:,} whole)", flush=True)
        if ns.only:
            report.update(backend_parts(ns.config, work / "default", ns.cores, ns.only))
            return finish(report, ns.out, work)
        # A no-op start varies by a second between identical runs on a shared VM: the median of three.
        # First, untimed, the user's own `./harness sweep` on the tree counted above (by Snakemake
        # directly): it records what the re-runs' up-to-date check compares.
        rerun_time(ns.config, work / "default", ns.cores)
        reruns = [rerun_time(ns.config, work / "default", ns.cores) for _ in range(3)]
        wall, cpu = statistics.median(w for w, _ in reruns), statistics.median(c for _, c in reruns)
        r = report["rerun_noop"] = figure(wall, cpu, TARGETS["rerun_noop_s"], runs_s=[round(w, 2) for w, _ in reruns])
        print(f"re-run, nothing changed: {r['seconds']} s, the median of {', '.join(map(str, r['runs_s']))} s "
              f"({verdict(r['seconds'], r['target_s'])})", flush=True)
        # regress exits 1 when counts moved: still a timing; 2 (unusable golden files) stops the bench.
        wall, cpu, rc = timed([sys.executable, "-m", "analysis.commands.regress", "regress", "--config", ns.regress_config,
                               "--set", f"results_dir={work / 'regress' / 'results'}",
                               "--set", f"build_dir={work / 'regress' / 'build'}"], ok=(0, 1), cwd=REPO)
        g = report["regression_set"] = figure(wall, cpu, TARGETS["regression_set_s"], config=ns.regress_config, passed=rc == 0)
        print(f"regression set (./harness regress), clean tree: {g['seconds']} s "
              f"({verdict(g['seconds'], g['target_s'])}; counts {'match' if rc == 0 else 'MOVED'})", flush=True)
        report.update(backend_parts(ns.config, work / "default", ns.cores))
        rp = report["report"] = report_figure(ns.config, work / "default")
        print(f"report.html of the default sweep: {rp['bytes']:,} bytes ({verdict(rp['bytes'], rp['target_bytes'], 'size')})"
              + (f"; chromium opens it in {rp['load_s']} s, the median of {', '.join(map(str, rp['loads_s']))} s "
                 f"({verdict(rp['load_s'], rp['target_s'])})" if rp["load_s"] is not None else ""), flush=True)
        report["memcpy_family"] = mf = memcpy_family(ns.memcpy_config, work / "memcpy", ns.cores)
        print(f"memcpy family sweep, clean tree: counts {mf['counts_s']} s for {mf['runs']} runs"
              + (f", perf {mf['perf_s']} s for {mf['perf_processes']} processes" if "perf_s" in mf else ""), flush=True)
        o = report["overhead"] = overhead(ns.config, work / "default", ns.overhead_seconds)
        print(f"counting clients' overhead ({o['kernel']}, size {o['size']}): {o['counted_median_s']} s / "
              f"{o['plain_median_s']} s = {o['ratio']}x ({verdict(o['ratio'], o['target_ratio'])})", flush=True)
        if not ns.skip_slurm:
            sweeps = [("tiny", "configs/tiny.yaml")] + ([] if ns.skip_slurm_default else [("default", ns.config)])
            report["slurm"] = slurm_sweeps(work, ns.cores, work / "default" / "results", report["default"]["seconds"], sweeps)
        if not ns.skip_full:
            f = report["full_matrix"] = sweep_figure(ns.full_config, work / "full", ns.cores, TARGETS["full_matrix_s"])
            print(f"full op x dtype matrix: {f['seconds']} s ({f['cpu_s']} CPU s) for {f['runs']} runs "
                  f"({verdict(f['seconds'], f['target_s'])})", flush=True)
        if not ns.skip_mpi:
            report["mpi"] = mpi_timings(work / "mpi", ns.cores)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(report, ns.out, work)


def finish(report: dict[str, Any], out: Path, work: Path | None) -> int:
    if work is not None:
        shutil.rmtree(work, ignore_errors=True)
    report["load_avg_end"] = os.getloadavg()[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
