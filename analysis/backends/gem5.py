"""Cycle backend: run kernel binaries in gem5 SE mode (gem5_scripts/se_sve.py) and read the
ROI block of stats.txt.

gem5 is found from the GEM5 environment variable, else the sweep's `gem5.binary`, else the
cache that `./harness setup --with-gem5` builds into (setup/gem5.sh --path); when none is
there the cycle sweep is skipped with one line saying how to enable it (GEM5=none skips it
on purpose). Each run keeps its
own output directory (config.ini/config.json, stats.txt, simout) under
results/gem5/<system>/<kernel>-<variant>/vl<N>-<size>/.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence, TextIO

from analysis.backends import (Bench, Plan, Ready, RecordError, RunError, cell_name, find_tool, fixed_evidence,
                               log_record, no_estimates, parse_ok_line, run_cells, staged)
from analysis.backends import gem5_sampled
from analysis.backends.gem5_output import HOST_STATS, STATS, failure_line, parse_stats, read_output
from analysis.core import config
from analysis.core.config import REPO, Job, Run, Sweep, cross_build
from analysis.core.model import system_has_caches

if TYPE_CHECKING:  # annotations only: a simulation job does not load pandas
    from pandas import DataFrame

NAME = "gem5"
STAGE = "simulate"
MARKER = "roi_gem5.S"
EXCLUSIVE = False
# Through Slurm one Slurm job per cell (hours of O3 simulation on one core), its time limit the plan's.
GROUPED = False
TABLE = "counts.csv"  # where its rows go (analysis.stages.collect)
SHARES_PREPARATIONS = False
# Where gem5 is not found the sweep goes on without its rows: its figures are left out and its
# checks skipped, saying why and what did not run.
NOT_RUN = ("gem5 not found", "the cycle sweep did not run")

SCRIPT = REPO / "gem5_scripts" / "se_sve.py"
FULL, SAMPLED = gem5_sampled.FULL, gem5_sampled.SAMPLED
# Inside gem5's ROI, roi_end's two movs and dump_stats commit before the statistics are
# dumped; QEMU's ROI stops at its hint marker. Measured, see docs/guide/gem5.md.
MARKER_INSTRUCTIONS = 3
ENABLE = "./harness setup --with-gem5 builds it once (about 80 minutes on 2 cores), or set GEM5=/path/to/gem5.fast"
# GEM5=none: skip the cycle sweep although gem5 is built (bench times the counts alone).
OFF = "none"
HIDE_ENV = {"GEM5": OFF}
EVIDENCE = "gem5"  # the summary names its rows' verdicts so
evidence = fixed_evidence(EVIDENCE)  # it runs in one place
estimates = no_estimates  # its cycles are compared, not turned into the perf figures' times


def cached_gem5() -> Path | None:
    """The gem5 that `./harness setup --with-gem5` built, or None: setup/gem5.sh is the one
    place that knows (HARNESS_CACHE, XDG_CACHE_HOME, the pinned version)."""
    out = subprocess.run([str(REPO / "setup" / "gem5.sh"), "--path"], capture_output=True, text=True)
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def cached_gem5_place() -> Path:
    """Where `./harness setup --with-gem5` puts gem5, built or not (for messages)."""
    out = subprocess.run([str(REPO / "setup" / "gem5.sh"), "--where"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    """The cycle sweep runs only where gem5 is found; elsewhere a note says how to enable it."""
    if sweep.gem5 is None:
        return None
    gem5 = find_gem5(sweep)
    if gem5 is None:
        return Ready({}, notes=[skipped_message(sweep)])
    left_out = [f"gem5: {r.kernel} {r.variant} not simulated: {r.not_simulated}"
                for r in sweep.table.rows if r.not_simulated and sweep.selects(r.kernel, r.variant)]
    return Ready({"gem5": gem5_version(gem5)}, notes=left_out, found={"gem5": str(gem5)})


def simulated(row: config.KernelRow, build: str) -> str | None:
    """cross_build, for the rows gem5 can run."""
    return None if row.not_simulated else cross_build(row, build)


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    """The VLA build at each system's VLs, the measured sizes only (the ROI is reset and dumped
    by the markers: no baseline run to subtract), or the subset `gem5: sizes` names."""
    g = sweep.gem5
    if g is None or (ready is not None and "gem5" not in ready.found):
        return []
    cpus: dict[str, tuple[int, ...] | None] = {name: s.vector_lengths for name, s in g.systems.items()}
    return sweep.expand(NAME, g.compilers, [("vla", g.vector_lengths)], cpus,
                        lambda family: list(g.sizes.get(family, sweep.sizes[family])), simulated)


def time_factor(sweep: Sweep) -> float:
    return sweep.time_limits.gem5_factor


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    g = sweep.gem5
    assert g is not None
    out = {"gem5": ready.found["gem5"], "system": g.systems[job.cpu_model].description,
           "runs_dir": str(sweep.results_dir / "gem5" / job.cpu_model / job.binary.name)}
    if g.mode == SAMPLED:  # a full run's plan stays as it was: its jobs are not re-run
        assert g.sampling is not None
        out["sampling"] = dataclasses.asdict(g.sampling)
    return out


def inputs(build_dir: Path) -> list[str]:
    return [str(SCRIPT.relative_to(REPO)), str(config.GEM5_SYSTEMS.relative_to(REPO))]


def batches(plan: Plan) -> list[list[int]]:
    """The plan's runs (indices) grouped into gem5 processes: the runs of one size and parameter
    set, each VL ascending, share one simulation up to the ROI (gem5_scripts/se_sve.py forks
    there, one VL after the other)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, run in enumerate(plan.runs):
        groups.setdefault(tuple(run.argv()[1:]), []).append(i)
    return [sorted(g, key=lambda i: plan.runs[i].vl) for g in groups.values()]


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    s = plan.settings
    binary, runs_dir = Path(plan.binary), Path(s["runs_dir"])
    records: dict[int, dict[str, Any]] = {}
    for group in batches(plan):
        runs = [plan.runs[i] for i in group]
        for i, rec in zip(group, run_vls(Path(s["gem5"]), binary, plan.cpu_model, s["system"], runs, runs_dir,
                                         [plan.time_limits[i] for i in group], s.get("sampling"))):
            records[i] = rec
            log_record(binary, plan, i + 1, rec, log)
    return {"system": s["system"]}, [records[i] for i in range(len(plan.runs))]


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    # The table holds integers: IPC in thousandths.
    for metric, value in run["gem5"].items():
        yield (f"gem5.{metric}", round(value)) if metric != "ipc" else ("gem5.ipc_milli", round(1000 * value))


def check_record(run: dict[str, Any], where: str) -> None:
    if not isinstance(run.get("gem5"), dict) or not all(isinstance(v, (int, float)) for v in run["gem5"].values()):
        raise RecordError(f"{where}.gem5 is not a table of numbers")
    g = run["gem5"]
    if ("cycles_ci_low" in g) != ("cycles_ci_high" in g) or ("cycles_ci_low" in g and not
                                                            g["cycles_ci_low"] <= g["cycles"] <= g["cycles_ci_high"]):
        raise RecordError(f"{where}.gem5: a sampled run's interval must hold its cycles")


# --- what the reports make of its rows --------------------------------------------------------

# The counting backend gem5's instructions are compared with, and on which CPU model.
COUNTED_BY, COUNTED_ON = "qemu", "max"


def agreement(counts: DataFrame) -> DataFrame:
    """gem5's committed ROI instructions against QEMU's ROI count of the same kernel object,
    VL and size (VLA build), minus the documented marker instructions: expected all zero."""
    g = counts[(counts["backend"] == NAME) & (counts["metric"] == "gem5.insts")]
    q = counts[(counts["backend"] == COUNTED_BY) & (counts["metric"] == "roi.total") & (counts["build"] == "vla")
               & (counts["cpu_model"] == COUNTED_ON)]
    key = ["kernel", "variant", "op", "dtype", "compiler", "vl", "size"]
    m = g.merge(q, on=key, suffixes=("_gem5", "_qemu"))
    m["difference"] = m["value_gem5"] - m["value_qemu"] - MARKER_INSTRUCTIONS
    return m[key + ["cpu_model_gem5", "value_gem5", "value_qemu", "difference"]].rename(
        columns={"cpu_model_gem5": "system", "value_gem5": "gem5_insts", "value_qemu": "qemu_roi"})


def report(counts: DataFrame, prov: DataFrame) -> list[str]:
    """results/summary.md's sections on gem5: its sampled cycles with their intervals (a sampled
    sweep), and its instructions against QEMU's (none without cells of both)."""
    return gem5_sampled.report(counts) + agreement_report(counts)


def agreement_report(counts: DataFrame) -> list[str]:
    agree = agreement(counts)
    if not len(agree):
        return []
    bad = agree[agree["difference"] != 0]
    lines = ["", "## gem5 and QEMU agree on the ROI's instructions", "",
             f"gem5's committed ROI instructions minus QEMU's ROI count of the same kernel object, VL and size, "
             f"minus the {MARKER_INSTRUCTIONS} marker instructions only gem5's ROI holds (roi_end's two movs and "
             f"dump_stats): expected 0 everywhere; {len(agree) - len(bad)} of {len(agree)} cells agree.", "",
             "| kernel | variant | op | dtype | system | VL | size | gem5 | QEMU | difference |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in (bad if len(bad) else agree).itertuples():
        lines.append(f"| {r.kernel} | {r.variant} | {r.op} | {r.dtype} | {r.system} | {r.vl} | {r.size} | "
                     f"{r.gem5_insts} | {r.qemu_roi} | {r.difference} |")
    return lines


def bench(b: Bench) -> tuple[dict[str, Any] | None, list[str]]:
    """The default cycle sweep (where gem5 is found) on top of an already counted tree, and
    gem5's O3 speed (from the ROI blocks) beside the host time spent outside them (the program
    up to the ROI, once per size, and each VL's verification); then, when that sweep is full
    O3, its sampled mode validated against it (gem5_sampled)."""
    sweep = config.load(REPO / b.config)
    if sweep.gem5 is None:
        return None, []
    if find_gem5(sweep) is None:
        return None, [skipped_message(sweep)]
    wall, cpu = b.time_target("counts_all", False)
    o3_insts = o3_secs = outside_secs = 0.0
    for raw in (b.work / "results" / "raw" / NAME).rglob("*.json"):
        for run in json.loads(raw.read_text())["runs"]:
            # simInsts counts every CPU since start-up (gem5 does not reset it): use the O3
            # core's committed ROI instructions.
            o3_insts += run["gem5"]["insts"]
            o3_secs += run["host"]["hostSeconds"]
            # a run's seconds: from the end of the VL before it (the first's include the start)
            outside_secs += run["seconds"] - run["host"]["hostSeconds"]
    g = b.figure(wall, cpu, b.targets["gem5_s"],
                 o3_insts_per_host_s=round(o3_insts / o3_secs) if o3_secs else None,
                 outside_roi_host_s=round(outside_secs, 1))
    lines = [f"gem5 default cycle sweep: {g['seconds']} s ({b.verdict(g['seconds'], g['target_s'])}); O3 "
             f"{g['o3_insts_per_host_s']} insts/host s; {g['outside_roi_host_s']} host s outside the ROIs"]
    if sweep.gem5.mode == FULL:
        entry, more = gem5_sampled.bench_sampled(b, sweep, wall)
        b.extra["gem5_sampled"] = entry
        lines += more
    return g, lines


# --- finding gem5 -------------------------------------------------------------------------------

def _given(sweep: Sweep) -> str | None:
    return os.environ.get("GEM5") or (sweep.gem5.binary if sweep.gem5 else None)


def find_gem5(sweep: Sweep) -> Path | None:
    """The gem5 binary to use (GEM5, then gem5.binary, then the built cache), or None when
    there is none (the cycle sweep is then skipped)."""
    return find_tool(_given(sweep), OFF, cached_gem5)


def skipped_message(sweep: Sweep) -> str:
    given = _given(sweep)
    if given == OFF:
        return "gem5: cycle sweep skipped (GEM5=none)"
    place = cached_gem5_place()
    if not given and place.is_file():
        return (f"gem5: cycle sweep skipped (gem5 at {place} was built without the harness's current patch, "
                "setup/patches/); to run it, ./harness setup --with-gem5 rebuilds what the patch changes "
                "(about a minute on 2 cores)")
    why = f"{given} is not an executable file" if given else f"gem5 is not built at {place}"
    return f"gem5: cycle sweep skipped ({why}); to run it, {ENABLE}"


def gem5_version(gem5: Path) -> str:
    """gem5 has no --version: its banner, printed before running an (empty) script, says it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([str(gem5), "-d", tmp, "/dev/null"], capture_output=True, text=True, cwd=tmp)
    m = re.search(r"gem5 version (\S+)", out.stdout + out.stderr)
    return f"gem5 {m.group(1)}" if m else "gem5 (version unknown)"


def tag(run: Run) -> str:
    """A run's part of its directory's name, without the VL."""
    return f"{run.size}" + ("" if run.op == config.NO_OP else f"-{run.op}-{run.dtype}")


def run_dir(runs_dir: Path, run: Run) -> Path:
    """Where one VL's fork writes (stats.txt, simout.txt, sampling.json)."""
    return runs_dir / f"vl{run.vl}-{tag(run)}"


def command(gem5: Path, outdir: Path, system_json: Path, runs: Sequence[Run], exe: Path, runs_dir: Path,
            sampled: dict[str, int] | None = None, seeds: Sequence[int] = ()) -> list[str]:
    """One gem5 for runs that differ in their VL only: the program up to the ROI at the first."""
    mode = [] if sampled is None else ["--mode", SAMPLED, *(a for k, v in sampled.items() for a in (f"--{k}", str(v))),
                                       "--seed", ",".join(map(str, seeds))]
    return [str(gem5), "--listener-mode=off", "-d", str(outdir), str(SCRIPT), "--system", str(system_json),
            "--vl", ",".join(str(r.vl) for r in runs),
            "--vl-dir", str(runs_dir.resolve() / f"vl{{vl}}-{tag(runs[0])}"),
            "--vl-rule", config.vl_rule_arg(), *mode, "--", f"./{exe.name}", *runs[0].argv()]


def seed_of(binary: Path, run: Run) -> int:
    """The units' offsets are random but the same at every re-run of a cell: seeded from the cell."""
    return zlib.crc32(f"{binary.name} {run.vl} {run.size} {run.op} {run.dtype}".encode())


DONE = b"se_sve.py: done vl="  # the parent's line as each VL's fork ends


def run_vls(gem5: Path, binary: Path, system: str, desc: dict[str, Any], runs: Sequence[Run], runs_dir: Path,
            limits: Sequence[float | None], sampled: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Runs that differ in their VL only, in one gem5 (ascending VLs): full O3 (sampled None) or
    sampled with these units (gem5/sampling). Run k may take limits[k] seconds from the end of
    the one before (the first also simulates the program up to the ROI)."""
    assert runs and all(tuple(r.argv()[1:]) == tuple(runs[0].argv()[1:]) for r in runs), "one size and parameter set"
    cells = [cell_name(binary, f"gem5:{system}", r) for r in runs]
    outdir = runs_dir / f"start-{tag(runs[0])}"
    for d in (outdir, *(run_dir(runs_dir, r) for r in runs)):
        if d.exists():
            shutil.rmtree(d)
    outdir.mkdir(parents=True)
    system_json = outdir / "system.json"
    system_json.write_text(json.dumps({"name": system, **desc}, indent=2))
    seconds: list[float] = []
    with staged(binary) as exe:
        cmd = command(gem5, outdir.resolve(), system_json.resolve(), runs, exe, runs_dir, sampled,
                      [seed_of(binary, r) for r in runs])
        proc = run_cells(cmd, limits, cells, DONE, lambda k, t: seconds.append(t), cwd=exe.parent)
    (outdir / "command.txt").write_text(" ".join(cmd) + "\n")
    (outdir / "output.txt").write_text(proc.stdout + proc.stderr)
    records = []
    for k, (run, cell) in enumerate(zip(runs, cells)):
        where = run_dir(runs_dir, run)
        simout, simerr = (read_output(where, name) for name in ("simout", "simerr"))
        if k >= len(seconds) or not where.is_dir():
            raise RunError(f"{cell}: gem5 exited with {proc.returncode} before this VL's run: "
                           f"{failure_line(proc.stderr, proc.stdout, '')} (output in {outdir})")
        code = re.search(rf"{re.escape(DONE.decode())}{run.vl} code=(-?\d+)", proc.stdout)
        if code is None or code.group(1) != "0":
            raise RunError(f"{cell}: gem5 exited with {code.group(1) if code else '?'}: "
                           f"{failure_line(simerr, simout, '')} (output in {where})")
        records.append(record(run, cell, where, simout, cmd, round(seconds[k], 3), sampled, system_has_caches(desc)))
    return records


def run_once(gem5: Path, binary: Path, system: str, desc: dict[str, Any], run: Run, runs_dir: Path,
             timeout: float | None = None, sampled: dict[str, int] | None = None) -> dict[str, Any]:
    """One cell in a gem5 of its own (tests, experiments): run_vls with one VL."""
    return run_vls(gem5, binary, system, desc, [run], runs_dir, [timeout], sampled)[0]


def record(run: Run, cell: str, where: Path, simout: str, cmd: list[str], seconds: float,
           sampled: dict[str, int] | None, caches: bool = True) -> dict[str, Any]:
    """One VL's record from its fork's directory; a system without data caches has no miss rows."""
    fields = parse_ok_line(simout, cell)
    at = f"{cell} ({where})"
    stats = parse_stats((where / "stats.txt").read_text(), at, run.vl, caches)
    rec: dict[str, Any] = {
        "vl": run.vl, "vl_seen": int(fields["vl"]), "size": run.size, "op": run.op, "dtype": run.dtype,
        # the program's own argv: the first VL's (the forks start from it)
        "argv": cmd[cmd.index("--") + 1:], "command": cmd, "checksum": fields["checksum"],
        "seconds": seconds, "outdir": str(where),
        "gem5": {metric: stats[name] for name, metric in STATS.items() if name in stats},
        "host": {name: stats[name] for name in HOST_STATS},
    }
    if sampled is not None:
        doc = json.loads((where / "sampling.json").read_text())
        rec["gem5"] = gem5_sampled.metrics(rec["gem5"], stats, doc, at)
        rec["sampling"] = {k: doc[k] for k in ("settings", "roi_insts", "ended_in_prefix", "dropped", "cpu_switches",
                                                "work_end_in_drain", "detailed_insts", "end_cpu")}
        rec["sampling"]["units"] = len(doc["units"])
    return rec
