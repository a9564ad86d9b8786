"""Second cycle backend: run the QEMU build's binaries (ROI markers `hint #0x40/#0x41`) whole on
SimEng's out-of-order core, patched by `./harness setup --with-simeng` to print one
`[SimEng:ROI] run=R roi=K cycles=.. retired=.. <counters>` line per ROI (docs/guide/simeng.md).

SimEng's VL is its configuration's: each VL runs a copy of the configuration (`simeng: config`,
default SimEng's A64FX core) with `Vector-Length` set, written under
results/simeng/<core>/<kernel>-<variant>/ and named by its SHA-256 in the run's provenance. A
cell SimEng cannot run (an instruction or system call it lacks, a crash, a wrong ROI, its time
limit) is a record `not_run: <reason>`, one row `simeng.not_run` = 1 in the table: counted,
never dropped. Its cycles sit beside gem5's in results/summary.md (`report`: SimEng/gem5 per cell).
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, TextIO

import yaml

from analysis.backends import (Estimate, Plan, Ready, RecordError, RunError, cell_name, find_tool, fixed_evidence,
                               no_bench, parse_ok_line, run_limited, staged)
from analysis.backends.perf_table import BANDWIDTH, OK, TIME, traffic_bytes
from analysis.core import config
from analysis.core.config import REPO, Job, Run, Sweep, cross_build

if TYPE_CHECKING:  # annotations only: a simulation job does not load pandas
    from pandas import DataFrame

    from analysis.core.kernels import KernelTable

NAME = "simeng"
STAGE = "simulate"
MARKER = "roi_qemu.S"  # QEMU's hint markers: NOPs elsewhere, SimEng's patch acts on them
EXCLUSIVE = False
GROUPED = False  # minutes per cell on one core: one Slurm job each
TABLE = "counts.csv"
SHARES_PREPARATIONS = False
NOT_RUN = ("SimEng not built", "the SimEng cycle sweep did not run")
ENABLE = "./harness setup --with-simeng builds it (about 3 minutes on 2 cores), or set SIMENG=/path/to/simeng"
OFF = "none"  # SIMENG=none: skip SimEng although it is built
HIDE_ENV = {"SIMENG": OFF}
EVIDENCE = "SimEng"
evidence = fixed_evidence(EVIDENCE)
bench = no_bench  # timed by its own sweep (docs/guide/simeng.md), not by ./harness bench
# What SimEng's times are wherever they stand beside measured ones: a model's estimate (the
# A64FX configuration's; another core's label names that core).
LABEL = "SimEng A64FX core model, fixed-latency memory"
CORE_NAMES = {"a64fx": "A64FX"}

SETUP = REPO / "setup" / "simeng.sh"
STAMP = "installed"  # setup/simeng.sh's record of a build, four folders above the binary
# SimEng counts the end marker retired before it records the ROI: retired = QEMU roi.total + 1.
END_MARKER = 1
ROI_TAG = "[SimEng:ROI] "
# Each run's own special-files directory, relative to the run's staging directory: SimEng deletes
# and rewrites it at every start, and a relative path keeps the configuration's checksum the same
# wherever the run is.
SPECIAL_DIR = "specialFiles"
# The lines SimEng prints when it stops on something it cannot do (besides the program's exit).
HALT = re.compile(r"\[SimEng:ExceptionHandler\] (Encountered .*|Unrecognised syscall.*|Unsupported arguments.*)")
INSTRUCTION = re.compile(r"\[SimEng:ExceptionHandler\]\s+0x[0-9a-f]+:[ 0-9a-f]*\s+(.+)")
EXIT = re.compile(r"\[SimEng:ExceptionHandler\] Received exit_group syscall: terminating with exit code (-?\d+)")
SPEED = re.compile(r"\[SimEng\] Finished (\d+) ticks in (\d+)ms .*?([\d.]+) MIPS\)")
WHOLE_RETIRED = re.compile(r"^\[SimEng\] retired: (\d+)$", re.M)


# --- SimEng's output, read ---------------------------------------------------------------------

@dataclass(frozen=True)
class Output:
    """What one SimEng run printed, read: its ROI records, unbalanced-marker lines, the program's
    exit code (None: it did not exit), SimEng's line when it halted on something it cannot do
    (with the instruction), and what it simulated: the whole program's instructions and the
    milliseconds it took (None where it did not say)."""
    rois: tuple[dict[str, int], ...]
    unbalanced: tuple[str, ...]
    exit_code: int | None
    halted: str | None
    whole_retired: int | None
    milliseconds: int | None


def parse_output(stdout: str) -> Output:
    """SimEng's stdout, the program's own output mixed in: a ROI line may follow program output
    that did not end its line, so the tag is looked for anywhere in a line."""
    rois: list[dict[str, int]] = []
    unbalanced: list[str] = []
    for line in stdout.splitlines():
        at = line.find(ROI_TAG)
        if at < 0:
            continue
        words = line[at + len(ROI_TAG):].split()
        fields = dict(w.split("=", 1) for w in words if "=" in w)
        if len(fields) == len(words) and all(re.fullmatch(r"-?\d+", v) for v in fields.values()):
            rois.append({k: int(v) for k, v in fields.items()})
        else:
            unbalanced.append(line[at:].strip())
    exit_code = EXIT.search(stdout)
    halted = HALT.search(stdout)
    instruction = INSTRUCTION.search(stdout, halted.end()) if halted else None
    speed, whole = SPEED.search(stdout), WHOLE_RETIRED.search(stdout)
    why = None
    if halted:
        why = halted.group(1).strip() + (f" at `{instruction.group(1).strip()}`" if instruction else "")
    return Output(tuple(rois), tuple(unbalanced), int(exit_code.group(1)) if exit_code else None, why,
                  int(whole.group(1)) if whole else None, int(speed.group(2)) if speed else None)


def not_run_reason(out: Output, returncode: int, stdout: str, stderr: str) -> str | None:
    """Why a run gives no cycles (None: it gives them): one balanced ROI and an exit 0 with the
    kernel's `ok` line, or else the first thing that went wrong."""
    if out.halted:
        return f"SimEng halted: {out.halted}"
    if returncode != 0:
        what = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        last = next((ln for ln in reversed((stderr + "\n" + stdout).splitlines()) if ln.strip()), "no output")
        return f"SimEng stopped with {what}: {last.strip()[:160]}"
    if out.exit_code is None:
        return "SimEng ended without the program's exit"
    if out.exit_code != 0:
        fail = next((ln for ln in stdout.splitlines() if "FAIL" in ln), "")
        return f"the program exited with {out.exit_code}" + (f": {fail.strip()[:160]}" if fail else "")
    if out.unbalanced:
        return f"unbalanced ROI markers: {out.unbalanced[0]}"
    if len(out.rois) != 1:
        return f"{len(out.rois)} ROI lines, not 1"
    if not any(ln.startswith("ok ") for ln in stdout.splitlines()):
        return "the kernel printed no 'ok' line"
    return None


# --- the configuration at each VL --------------------------------------------------------------

def config_at(source: str, vl: int) -> str:
    """The configuration's text at `vl`: Vector-Length set, the L1 bandwidths at least VL/8 bytes
    (SimEng refuses a vector that one access cannot move), the special files in the run's own
    directory. Everything else as the source says."""
    cfg = yaml.safe_load(source)
    cfg["Core"]["Vector-Length"] = vl
    lsq = cfg.setdefault("LSQ-L1-Interface", {})
    for key in ("Load-Bandwidth", "Store-Bandwidth"):
        lsq[key] = max(int(lsq.get(key, 0)), vl // 8)
    cpu_info = cfg.setdefault("CPU-Info", {})
    cpu_info["Generate-Special-Dir"] = True
    cpu_info["Special-File-Dir-Path"] = SPECIAL_DIR
    return yaml.safe_dump(cfg, sort_keys=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- finding SimEng ------------------------------------------------------------------------------

def section(sweep: Sweep) -> dict[str, Any] | None:
    return sweep.sections.get(NAME)


def _given(sweep: Sweep) -> str | None:
    s = section(sweep)
    return os.environ.get("SIMENG") or (s or {}).get("binary")


def cached_simeng() -> Path | None:
    """The SimEng `./harness setup --with-simeng` built with the current patches, or None:
    setup/simeng.sh is the one place that knows."""
    out = subprocess.run([str(SETUP), "--path"], capture_output=True, text=True)
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def cached_places() -> tuple[Path, Path]:
    """Where `./harness setup --with-simeng` puts SimEng and the stamp of its build, built or not
    (the up-to-date check stats both: a rebuild with another patch rewrites the stamp)."""
    out = subprocess.run([str(SETUP), "--where"], capture_output=True, text=True, check=True)
    binary = Path(out.stdout.strip())
    return binary, binary.parents[4] / STAMP


def find_simeng(sweep: Sweep) -> Path | None:
    """SIMENG, then simeng: binary, then the built cache; None when there is none."""
    return find_tool(_given(sweep), OFF, cached_simeng)


def skipped_message(sweep: Sweep) -> str:
    given = _given(sweep)
    if given == OFF:
        return "simeng: SimEng cycle sweep skipped (SIMENG=none)"
    why = f"{given} is not an executable file" if given else "SimEng is not built with the harness's patch"
    return f"simeng: SimEng cycle sweep skipped ({why}); to run it, {ENABLE}"


def stamp(simeng: Path) -> dict[str, str]:
    """setup/simeng.sh's record of a build (`installed` beside build/): commits, patch checksums,
    the source's configs; {} for a SimEng built elsewhere."""
    path = simeng.parents[4] / STAMP if len(simeng.parents) > 4 else None
    if path is None or not path.is_file():
        return {}
    return dict(ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)


def config_source(simeng: Path, name: str) -> Path:
    """The configuration a sweep names: a yaml path, or one of the SimEng source's configs/."""
    if name.endswith((".yaml", ".yml")):
        return Path(name).expanduser()
    built = stamp(simeng).get("config")
    configs = Path(built).parent if built else simeng.parents[4] / "src" / "simeng" / "configs"
    return configs / f"{name}.yaml"


def core_name(name: str) -> str:
    """The rows' cpu_model: the configuration's name, or its file's stem."""
    return Path(name).stem if name.endswith((".yaml", ".yml")) else name


def version(simeng: Path, source: Path) -> str:
    """The provenance of every row: SimEng's release and build (commits, patches) and the
    configuration's checksum."""
    s = stamp(simeng)
    banner = subprocess.run([str(simeng)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
    release = re.search(r"Version: (\S+)", banner)
    build = f"build {s['commit']}" if "commit" in s else f"binary {simeng}"
    return (f"SimEng {release.group(1) if release else '?'} ({build}); {source.name} "
            f"sha256:{sha256_text(source.read_text())}")


# --- the backend protocol (analysis.backends.Backend) -----------------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    """SimEng runs where the sweep has a simeng section and SimEng is found; else one line."""
    s = section(sweep)
    if s is None:
        return None
    simeng = find_simeng(sweep)
    if simeng is None:
        return Ready({}, notes=[skipped_message(sweep)])
    source = config_source(simeng, s["config"])
    if not source.is_file():
        raise config.ConfigError(f"simeng/config: {source} is not a file; name one of {source.parent}'s *.yaml "
                                 "or give the path of your own")
    return Ready({NAME: version(simeng, source)}, found={"simeng": str(simeng), "config": str(source)})


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    """The VLA build at the section's VLs, the measured sizes (or the subset it names)."""
    s = section(sweep)
    if s is None or (ready is not None and "simeng" not in ready.found):
        return []
    compilers = s.get("compilers") or sweep.compilers
    return sweep.expand(NAME, compilers, [("vla", tuple(s["vector_lengths"]))], {core_name(s["config"]): None},
                        lambda family: list(s["sizes"].get(family, sweep.sizes[family])), cross_build)


def time_factor(sweep: Sweep) -> float:
    s = section(sweep)
    return float(s["time_factor"]) if s else 1.0


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    return {"simeng": ready.found["simeng"], "config": ready.found["config"],
            "runs_dir": str(sweep.results_dir / NAME / job.cpu_model / job.binary.name)}


def inputs(build_dir: Path) -> list[str]:
    return []


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each run in a SimEng of its own, at its VL's copy of the configuration."""
    s = plan.settings
    binary, runs_dir = Path(plan.binary), Path(s["runs_dir"])
    runs_dir.mkdir(parents=True, exist_ok=True)
    source = Path(s["config"]).read_text()
    clock_ghz = float(yaml.safe_load(source)["Core"]["Clock-Frequency-GHz"])
    configs: dict[int, Path] = {}
    for vl in sorted({r.vl for r in plan.runs}):
        configs[vl] = runs_dir / f"{plan.cpu_model}-vl{vl}.yaml"
        configs[vl].write_text(config_at(source, vl))
    records = []
    for i, (run, limit) in enumerate(zip(plan.runs, plan.time_limits), 1):
        rec = run_once(Path(s["simeng"]), configs[run.vl], binary, plan.cpu_model, run, limit, runs_dir)
        records.append(rec)
        what = rec.get("not_run") or f"cycles={rec['simeng']['cycles']} retired={rec['simeng']['retired']}"
        print(f"[{i}/{len(plan.runs)}] {cell_name(binary, plan.cpu_model, run)} {what} {rec['seconds']}s", file=log,
              flush=True)
    return {"label": label(plan.cpu_model), "clock_ghz": clock_ghz,
            "configs": {str(vl): sha256_text(p.read_text()) for vl, p in configs.items()}}, records


def label(core: str) -> str:
    """What SimEng's times of a core are, wherever they are shown."""
    return LABEL.replace("A64FX", CORE_NAMES.get(core, core))


def run_once(simeng: Path, cfg: Path, binary: Path, core: str, run: Run, limit: float | None,
             runs_dir: Path) -> dict[str, Any]:
    """One cell: its record, with cycles, or with the reason SimEng could not run it."""
    cell = cell_name(binary, f"simeng:{core}", run)
    cfg_sha = sha256_text(cfg.read_text())
    with staged(binary) as exe:
        cmd = [str(simeng), str(cfg.resolve()), f"./{exe.name}", *run.argv()]
        t0 = time.monotonic()
        try:
            proc = run_limited(cmd, limit, cell, cwd=exe.parent)
        except RunError as e:  # its time limit: a cell SimEng did not finish is not run, and says so
            return not_run_record(run, cmd, binary, cfg_sha, round(time.monotonic() - t0, 3),
                                  str(e).split(": ", 1)[-1])
        seconds = round(time.monotonic() - t0, 3)
    (runs_dir / f"vl{run.vl}-{run.size}.out").write_text(proc.stdout + proc.stderr)
    return record(run, cmd, binary, cfg_sha, seconds, proc.returncode, proc.stdout, proc.stderr)


def command_line(cmd: list[str], binary: Path, cfg_sha: str) -> str:
    """The shell line that reruns the cell (the binary where the build left it, not its staged
    copy), the configuration's checksum beside it."""
    return " ".join([*cmd[:2], str(binary), *cmd[3:]]) + f"  # {Path(cmd[1]).name} sha256:{cfg_sha}"


def record(run: Run, cmd: list[str], binary: Path, cfg_sha: str, seconds: float, returncode: int, stdout: str,
           stderr: str) -> dict[str, Any]:
    """A run's record from SimEng's output: the ROI's counters, or why there are none."""
    out = parse_output(stdout)
    reason = not_run_reason(out, returncode, stdout, stderr)
    if reason is not None:
        return not_run_record(run, cmd, binary, cfg_sha, seconds, reason)
    ok = parse_ok_line(stdout, binary.name)
    roi = {k: v for k, v in out.rois[0].items() if k not in ("run", "roi")}
    return {"vl": run.vl, "vl_seen": int(ok["vl"]), "size": run.size, "op": run.op, "dtype": run.dtype,
            "checksum": ok["checksum"], "command": cmd, "command_line": command_line(cmd, binary, cfg_sha),
            "seconds": seconds, "config_sha256": cfg_sha, "simeng": roi,
            "host": {"whole_retired": out.whole_retired, "milliseconds": out.milliseconds}}


def not_run_record(run: Run, cmd: list[str], binary: Path, cfg_sha: str, seconds: float,
                   reason: str) -> dict[str, Any]:
    """A cell SimEng could not run: kept, with its reason. Its VL is the configuration's (the
    program did not report one)."""
    return {"vl": run.vl, "vl_seen": run.vl if run.sve else 0, "size": run.size, "op": run.op, "dtype": run.dtype,
            "checksum": "", "command": cmd, "command_line": command_line(cmd, binary, cfg_sha), "seconds": seconds,
            "config_sha256": cfg_sha, "simeng": {}, "not_run": reason}


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    if "not_run" in run:
        yield "simeng.not_run", 1
        return
    for name, value in run["simeng"].items():
        yield f"simeng.{name}", value
    if run["simeng"].get("cycles"):  # the table holds integers: IPC in thousandths, as gem5's
        yield "simeng.ipc_milli", round(1000 * run["simeng"]["retired"] / run["simeng"]["cycles"])
    # The configuration's clock: what turns the cycles into the times `estimates` draws.
    if "clock_ghz" in meta:
        yield "simeng.clock_mhz", round(1000 * meta["clock_ghz"])


def check_record(run: dict[str, Any], where: str) -> None:
    s = run.get("simeng")
    if not isinstance(s, dict) or not all(isinstance(v, int) for v in s.values()):
        raise RecordError(f"{where}.simeng is not a table of integers")
    if "not_run" in run:
        if not isinstance(run["not_run"], str) or not run["not_run"] or s:
            raise RecordError(f"{where}: a cell not run carries its reason and no counters")
    elif not {"cycles", "retired"} <= set(s):
        raise RecordError(f"{where}.simeng lacks cycles or retired")


# --- what the reports make of its rows ----------------------------------------------------------------

# The other cycle model its cycles are compared with, and what its rows say when it has none.
OTHER = "gem5"
OTHER_NOT_RUN = "gem5 not run: gem5 not found (./harness setup --with-gem5)"
# The counting backend its instructions are compared with, and on which CPU model (gem5's the same).
COUNTED_BY, COUNTED_ON = "qemu", "max"
KEY = ["kernel", "variant", "op", "dtype", "compiler", "vl", "size"]


def cycle_ratios(counts: DataFrame, prov: DataFrame) -> DataFrame:
    """One row per SimEng cell (run or not): its cycles, gem5's of the same kernel object, VL and
    size (gem5's first system in name order where there are several), SimEng/gem5, and what
    stands in the ratio's place when either has no cycles."""
    mine = prov[(prov["backend"] == NAME) & (prov["build"] == "vla")]
    cells = mine[KEY + ["cpu_model"] + (["not_run"] if "not_run" in mine else [])].rename(columns={"cpu_model": "core"})
    if "not_run" not in cells:
        cells["not_run"] = ""
    cyc = counts[(counts["metric"] == f"{NAME}.cycles") & (counts["backend"] == NAME)]
    cells = cells.merge(cyc[KEY + ["value"]].rename(columns={"value": "simeng"}), on=KEY, how="left")
    other = counts[(counts["metric"] == f"{OTHER}.cycles") & (counts["backend"] == OTHER)]
    if len(other):
        first = sorted(other["cpu_model"].unique())[0]
        other = other[other["cpu_model"] == first]
    cells = cells.merge(other[KEY + ["value"]].rename(columns={"value": "gem5"}), on=KEY, how="left")
    any_gem5 = len(other) > 0

    def status(r: Any) -> str:
        if isinstance(r.not_run, str) and r.not_run:
            return f"SimEng not run: {r.not_run}"
        if r.gem5 != r.gem5:  # NaN: gem5 has no such cell
            return "gem5 not run: no gem5 cell at this VL and size" if any_gem5 else OTHER_NOT_RUN
        return ""
    cells["status"] = [status(r) for r in cells.itertuples()]
    ok = cells["status"] == ""
    cells["ratio"] = float("nan")
    cells.loc[ok, "ratio"] = cells.loc[ok, "simeng"] / cells.loc[ok, "gem5"]
    return cells.sort_values(KEY, kind="stable").reset_index(drop=True)


def spread(ratios: DataFrame) -> str:
    """The ratios' spread in one line: how many, min, median, max (and where)."""
    r = ratios.dropna(subset=["ratio"])
    if not len(r):
        return "no cell has cycles from both models"
    lo, hi = r.loc[r["ratio"].idxmin()], r.loc[r["ratio"].idxmax()]
    return (f"{len(r)} cells: min {lo['ratio']:.3g} ({lo['kernel']} {lo['variant']} VL {lo['vl']}), median "
            f"{r['ratio'].median():.3g}, max {hi['ratio']:.3g} ({hi['kernel']} {hi['variant']} VL {hi['vl']})")


def report(counts: DataFrame, prov: DataFrame) -> list[str]:
    """results/summary.md's section on SimEng: SimEng/gem5 cycles per cell with their spread,
    its cells not run (counted), and its ROI instructions against QEMU's."""
    if "backend" not in prov or not (prov["backend"] == NAME).any():
        return []
    r = cycle_ratios(counts, prov)
    not_run = r[r["status"].str.startswith("SimEng not run")]
    cores = sorted(set(r["core"]))
    lines = ["", "## SimEng/gem5 cycles per cell", "",
             f"ROI cycles of SimEng's {', '.join(cores)} core ({label(cores[0])}) over gem5's O3 ROI cycles of the "
             f"same binary's code, VL and size. Spread: {spread(r)}. "
             f"SimEng cells not run: {len(not_run)} of {len(r)}.",
             "", "| kernel | variant | op | dtype | compiler | VL | size | SimEng cycles | gem5 cycles | SimEng/gem5 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in r.itertuples():
        sim = "-" if c.simeng != c.simeng else f"{c.simeng:.0f}"
        g = "-" if c.gem5 != c.gem5 else f"{c.gem5:.0f}"
        ratio = c.status or f"{c.ratio:.3f}"
        lines.append(f"| {c.kernel} | {c.variant} | {c.op} | {c.dtype} | {c.compiler} | {c.vl} | {c.size} | {sim} | "
                     f"{g} | {ratio} |")
    return lines + agreement_report(counts)


def agreement_report(counts: DataFrame) -> list[str]:
    """SimEng's retired ROI instructions against QEMU's roi.total of the same binary's code: the
    end marker apart, expected equal."""
    s = counts[(counts["backend"] == NAME) & (counts["metric"] == f"{NAME}.retired")]
    q = counts[(counts["backend"] == COUNTED_BY) & (counts["metric"] == "roi.total") & (counts["build"] == "vla")
               & (counts["cpu_model"] == COUNTED_ON)]
    m = s.merge(q, on=KEY, suffixes=("_s", "_q"))
    if not len(m):
        return []
    bad = m[m["value_s"] - m["value_q"] != END_MARKER]
    shown = ", ".join(f"{b.kernel} {b.variant} VL {b.vl} ({b.value_s} vs {b.value_q})" for b in bad.head(5).itertuples())
    return ["", f"SimEng's retired ROI instructions equal QEMU's roi.total + {END_MARKER} (the end marker) on "
            f"{len(m) - len(bad)} of {len(m)} cells" + (f": not on {shown}." if len(bad) else ".")]


# --- A64FX-like times for the perf figures (Fig. 11, 12) ----------------------------------------------

CELL = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl", "size"]


def estimates(counts: DataFrame, prov: DataFrame, table: KernelTable) -> Estimate | None:
    """Each SimEng cell's ROI (one kernel call) as perf.csv's time per call, cycles at the
    configuration's clock, and bandwidth where the kernel table declares the traffic: a model's
    estimate under its label (analysis.stages.plot draws the perf figures of it, apart from
    perf's). None without cells at two sizes: a figure against size needs them."""
    mine = counts[counts["backend"] == NAME]
    cycles = mine[mine["metric"] == f"{NAME}.cycles"]
    if cycles["size"].nunique() < 2:
        return None
    clock = mine[mine["metric"] == f"{NAME}.clock_mhz"][CELL + ["value"]].rename(columns={"value": "mhz"})
    rows = []
    for r in cycles.merge(clock, on=CELL).to_dict("records"):
        ns = r["value"] * 1000 / r["mhz"]
        key = {k: r[k] for k in CELL}
        rows.append({**key, "metric": TIME, "status": OK, "unit": "ns", "n": 1, "mean": ns, "std": 0.0, "min": ns,
                     "max": ns})
        moved = traffic_bytes(table.families[table.row(r["kernel"], r["variant"]).family].traffic or {}, r["size"])
        if moved is not None:
            rows.append({**key, "metric": BANDWIDTH, "status": OK, "unit": "GB/s", "n": 1, "mean": moved / ns,
                         "std": 0.0, "min": moved / ns, "max": moved / ns})
    return Estimate(label(str(cycles["cpu_model"].iloc[0])), rows)
