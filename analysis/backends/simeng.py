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
from pathlib import Path
from typing import Any, Iterator, TextIO

import yaml

from analysis.backends import (Plan, Ready, RecordError, RunError, cell_name, count_job, find_tool, fixed_evidence,
                               no_bench, parse_ok_line, run_limited, staged)
from analysis.backends.simeng_output import END_MARKER, not_run_reason, parse_output  # noqa: F401 (END_MARKER: the tests')
# What the reports make of its rows (SimEng/gem5 per cell; the perf figures' times): the protocol's report
# and estimates.
from analysis.backends.simeng_report import LABEL, estimates, label, report  # noqa: F401 (LABEL: the tests')
from analysis.core import config
from analysis.core.config import REPO, Job, Run, Sweep, cross_build


NAME = "simeng"  # simeng_report.NAME too
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

SETUP = REPO / "setup" / "simeng.sh"
STAMP = "installed"  # setup/simeng.sh's record of a build, four folders above the binary
# Each run's own special-files directory, relative to the run's staging directory: SimEng deletes
# and rewrites it at every start, and a relative path keeps the configuration's checksum the same
# wherever the run is.
SPECIAL_DIR = "specialFiles"


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

def _given(sweep: Sweep) -> str | None:
    return os.environ.get("SIMENG") or (sweep.simeng.binary if sweep.simeng else None)


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
    if sweep.simeng is None:
        return None
    simeng = find_simeng(sweep)
    if simeng is None:
        return Ready({}, notes=[skipped_message(sweep)])
    source = config_source(simeng, sweep.simeng.config)
    if not source.is_file():
        raise config.ConfigError(f"simeng/config: {source} is not a file; name one of {source.parent}'s *.yaml "
                                 "or give the path of your own")
    return Ready({NAME: version(simeng, source)}, found={"simeng": str(simeng), "config_file": str(source)})


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    """The VLA build at the section's VLs, the sweep's sizes (or those the section names)."""
    s = sweep.simeng
    if s is None or (ready is not None and "simeng" not in ready.found):
        return []
    return sweep.expand(NAME, s.compilers, [("vla", s.vector_lengths)], {core_name(s.config): None},
                        lambda family: list(s.sizes.get(family, sweep.sizes[family])), cross_build)


def time_factor(sweep: Sweep) -> float:
    return sweep.simeng.time_factor if sweep.simeng else 1.0


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    return {"simeng": ready.found["simeng"], "config_file": ready.found["config_file"],
            "runs_dir": str(sweep.results_dir / NAME / job.cpu_model / job.binary.name)}


def inputs(build_dir: Path) -> list[str]:
    return []


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each run in a SimEng of its own, at its VL's copy of the configuration."""
    s = plan.settings
    binary, runs_dir = Path(plan.binary), Path(s["runs_dir"])
    runs_dir.mkdir(parents=True, exist_ok=True)
    source = Path(s["config_file"]).read_text()
    clock_ghz = float(yaml.safe_load(source)["Core"]["Clock-Frequency-GHz"])
    configs: dict[int, tuple[Path, str]] = {}  # each VL's configuration file and its checksum
    for vl in sorted({r.vl for r in plan.runs}):
        text = config_at(source, vl)
        configs[vl] = (runs_dir / f"{plan.cpu_model}-vl{vl}.yaml", sha256_text(text))
        configs[vl][0].write_text(text)
    records = count_job(plan, lambda run, limit: run_once(Path(s["simeng"]), *configs[run.vl], binary, plan.cpu_model,
                                                         run, limit, runs_dir), log)
    return {"label": label(plan.cpu_model), "clock_ghz": clock_ghz,
            "configs": {str(vl): sha for vl, (_, sha) in configs.items()}}, records


def run_once(simeng: Path, cfg: Path, cfg_sha: str, binary: Path, core: str, run: Run, limit: float | None,
             runs_dir: Path) -> dict[str, Any]:
    """One cell: its record, with cycles, or with the reason SimEng could not run it
    (`cfg_sha`: the checksum of `cfg`, the configuration file at the run's VL)."""
    cell = cell_name(binary, f"simeng:{core}", run)
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


