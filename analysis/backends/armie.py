"""ArmIE backend: command builder and parsers of the Arm Instruction Emulator's client output.

Why this exists although ArmIE cannot run here: the seed paper's numbers were produced with
ArmIE 19.1 and `libinscount_emulated.so`, and ArmIE runs only on AArch64 Linux hosts. The harness
measures with QEMU TCG plugins instead (docs/contracts.md section 3); this module lets a user on
an AArch64 machine with ArmIE produce the same shapes, so that the rest of `analysis/` needs no
ArmIE-specific code. Formats follow shared/reference/armie.md (taken from the public sample
client sources); the tests use SYNTHETIC fixtures written from that description, not real runs.

Shapes returned (same as the QEMU clients' JSON `roi` parts, as far as ArmIE gives them):
- `parse_inscount` -> `{"total": N, "sve": M, "classes": None}`; ArmIE counts emulated
  instructions, which equal the SVE-encoded ones when the host has no SVE, and has no classes.
- `parse_opcodes` -> `[{"encoding": "0x%08x", "count": N}, ...]`.
- `split_runs` -> one output per run of a batch (the stand-in's batch mode prints `run <k>: `
  before each run's line), each read by `parse_inscount`.

Where its counts come from is the sweep file's `armie: {via: ...}`: `armie` (the default), ArmIE
itself on an AArch64 host; its stand-in, DynamoRIO with the harness's ROI client, either `guest`,
in the emulated AArch64 guest on any host (armie_guest_job), or `native`, on an AArch64 host
itself (armie_native); the stand-in at VL 128/256/512 only: the sweep's other cells are not
planned, and said so (preflight's note, results/summary.md).

Lines starting with `#` are ignored by every parser, so fixtures can say what they are.
"""
from __future__ import annotations

import functools
import glob
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, TextIO

from analysis.backends import (GUEST_META, Bench, Plan, Ready, RunError, cell_name, count_job, no_estimates,
                               parse_ok_line, run_limited, staged)
from analysis.backends import armie_guest, armie_guest_job, armie_native
from analysis.backends.armie_format import parse_inscount, parse_opcodes, split_runs  # ArmIE's outputs (and the stand-in's)
from analysis.backends import registry
from analysis.backends.clients import check_client_record, client_metrics
from analysis.core import arm64_vm
from analysis.core.config import (REPO, SWEEP_SCHEMA, VALID_VLS, VL_MAX, VL_MIN, VL_STEP, Job, Run, Sweep, filled,
                                  load)
from analysis.core.toolchain import ToolchainError, first_line

if TYPE_CHECKING:
    from pandas import DataFrame

NAME = "armie"
STAGE = "count"
MARKER = "roi_armie.S"
EXCLUSIVE = False
GROUPED = True  # through Slurm its cells share grouped Slurm jobs, as QEMU's
TABLE = "counts.csv"  # where its rows go (analysis.stages.collect)
NOT_RUN = None  # it runs wherever the sweep lists it (preflight fails where it cannot)
HIDE_ENV: dict[str, str] = {}
SHARES_PREPARATIONS = False
EVIDENCE = "ArmIE"  # what a verdict resting on its rows names: ArmIE itself, on an AArch64 host
estimates = no_estimates  # counts, no times
# Its rows where they were counted by its stand-in, DynamoRIO with the harness's ROI client: in the
# emulated AArch64 guest (armie_guest), whose raw files record the guest (GUEST_META), or natively
# on an AArch64 host (armie_native, NATIVE_META).
GUEST_EVIDENCE = armie_guest.EVIDENCE
NATIVE_EVIDENCE = armie_native.EVIDENCE
# Where its counts come from (its section's `via`): ArmIE itself, or DynamoRIO in the guest or here.
VIA_ARMIE, VIA_GUEST, VIA_NATIVE = "armie", "guest", "native"
STAND_IN = (VIA_GUEST, VIA_NATIVE)  # DynamoRIO, at VL 128/256/512 only

INSCOUNT_CLIENT = "libinscount_emulated.so"
OPCODES_CLIENT = "libopcodes_emulated.so"


def evidence(meta: dict[str, Any]) -> str:
    return GUEST_EVIDENCE if meta.get(GUEST_META) else NATIVE_EVIDENCE if meta.get(armie_native.NATIVE_META) else EVIDENCE


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

@dataclass(frozen=True)
class Section:
    """Its section of the sweep file (armie.schema.yaml), typed: where its counts come from."""
    via: str  # VIA_ARMIE: ArmIE on an AArch64 host; VIA_GUEST, VIA_NATIVE: DynamoRIO in the guest, or here


def section(sweep: Sweep) -> Section:
    """The sweep's armie section, its schema's defaults where the sweep file has none."""
    stated = sweep.sections.get(NAME)
    return Section(**stated) if stated else _default_section()


@functools.cache
def _default_section() -> Section:
    """Read from the schema once: the workflow asks per job (time limits, settings)."""
    return Section(**filled({}, SWEEP_SCHEMA, "properties", NAME))


def via(sweep: Sweep) -> str:
    return section(sweep).via


def preflight(sweep: Sweep) -> Ready | None:
    if NAME not in sweep.backends:
        return None
    if via(sweep) == VIA_GUEST:
        return guest_preflight(sweep)
    if via(sweep) == VIA_NATIVE:
        return native_preflight(sweep)
    if armie_available() is None:
        raise ToolchainError(
            "backend armie needs an AArch64 host with armie on PATH (module load armie); remove it from backends here")
    return Ready({"armie": first_line(["armie", "--version"])})


def guest_preflight(sweep: Sweep) -> Ready:
    """`via: guest`: a sweep with cells DynamoRIO runs and the guest with DynamoRIO built (else one
    line naming the fix), their versions, and one line for the cells DynamoRIO does not run."""
    _some_cells(sweep)
    why = arm64_vm.missing()
    if why is not None:
        raise ToolchainError(f"backend armie with via: guest counts with DynamoRIO in the arm64 guest: {why}")
    about = arm64_vm.find_guest().describe()
    ready = Ready({"armie": f"DynamoRIO {about.get('dynamorio', '?')} with the harness's ROI client in the arm64 guest "
                            f"(kernel {about.get('kernel', '?')}; {arm64_vm.qemu_version()})"})
    return _noted(sweep, ready, "in the guest")


def native_preflight(sweep: Sweep) -> Ready:
    """`via: native`: an AArch64 host with DynamoRIO and the client installed, a sweep with cells
    DynamoRIO runs, each at a VL this CPU offers (armie_native.preflight; else one line naming the
    fix), and one line for the cells DynamoRIO does not run."""
    ready = armie_native.preflight(sorted({r.vl for j in jobs(sweep, None) for r in j.runs}))
    _some_cells(sweep)
    return _noted(sweep, ready, "natively")


def _some_cells(sweep: Sweep) -> None:
    """One line when DynamoRIO would run none of the sweep's cells: its checks would read no row
    and fail after every run."""
    if not jobs(sweep, None):
        raise ToolchainError(f"backend armie with via: {via(sweep)}: {arm64_vm.NOT_RUN_VL.removeprefix('not run: ')}, "
                             f"and the sweep runs none of them (vector_lengths: {list(sweep.vector_lengths)}): add one, "
                             "or remove armie from backends")


def _noted(sweep: Sweep, ready: Ready, where: str) -> Ready:
    left = not_run(sweep)
    if left:
        ready.notes.append(f"armie (DynamoRIO {where}): VL {', '.join(map(str, sorted(left)))}: "
                           f"{sum(left.values())} cells {arm64_vm.NOT_RUN_VL}")
    return ready


def not_run(sweep: Sweep) -> dict[int, int]:
    """The sweep's armie cells DynamoRIO does not run, by VL (none via ArmIE)."""
    if via(sweep) not in STAND_IN:
        return {}
    out: dict[int, int] = {}
    for run in (r for j in _planned(sweep) for r in j.runs if not armie_guest.runs_here(r)):
        out[run.vl] = out.get(run.vl, 0) + 1
    return out


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    """The sweep's count jobs; via DynamoRIO (the guest or natively), each with the runs DynamoRIO
    runs (VL 128/256/512) and none left without one: one drrun process per VL (armie_guest), one
    guest boot per job in the guest."""
    planned = _planned(sweep)
    if via(sweep) not in STAND_IN:
        return planned
    kept = [replace(j, runs=tuple(r for r in j.runs if armie_guest.runs_here(r))) for j in planned]
    return [j for j in kept if j.runs]


def _planned(sweep: Sweep) -> list[Job]:
    # The first counting backend also counts perf's SVE cells at perf's sizes (analysis.core.perf_cells).
    return sweep.count_jobs(NAME, perf_reference=registry.first_counting(sweep) == NAME)


def time_factor(sweep: Sweep) -> float:
    """Via DynamoRIO: a run may take armie_guest.TIME_FACTOR times QEMU's (DynamoRIO's code cache,
    under system-mode TCG in the guest and on an emulated node); a job's boot adds
    armie_guest.BOOT_SECONDS in the guest, DynamoRIO's start-up armie_native.START_SECONDS here."""
    return armie_guest.TIME_FACTOR if via(sweep) in STAND_IN else 1.0


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    return {"via": via(sweep)}  # the job reads its plan, not the sweep


def inputs(build_dir: Path) -> list[str]:
    return []


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if plan.settings.get("via") == VIA_GUEST:
        return armie_guest_job.run_job(plan, log)
    if plan.settings.get("via") == VIA_NATIVE:
        return armie_native.run_job(plan, log)
    binary = Path(plan.binary)
    return {}, count_job(plan, lambda run, limit: run_once(binary, plan.cpu_model, run, limit), log)


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    return client_metrics(run, mnemonics)


def check_record(run: dict[str, Any], where: str) -> None:
    """The counting clients' shape; a run of DynamoRIO (in the guest or natively) has the ROI's
    counts only (its client counts nothing outside the markers)."""
    guest = isinstance(run.get("inscount"), dict) and run["inscount"].get("client") == armie_guest_job.CLIENT_NAME
    check_client_record(run, where, whole=not guest)


def report(counts: DataFrame, prov: DataFrame) -> list[str]:
    """results/summary.md's section on its rows: their ROI total and SVE count against the other
    counting backend's (QEMU's), cell by cell, as bench prints them (armie_guest.agreement): the
    cells that differ with both counts, those without a row, and, counted by DynamoRIO (in the
    guest or natively), the cells at the VLs it does not run, as not run."""
    mine = prov[prov["backend"] == NAME]
    if mine.empty:
        return []
    # A provenance table of an older harness has no evidence column: its rows are ArmIE's own.
    evidence = sorted(set(mine["evidence"])) if "evidence" in mine else [EVIDENCE]
    stand_in = set(evidence) <= {GUEST_EVIDENCE, NATIVE_EVIDENCE}
    result = armie_guest.agreement(counts, NAME, " and ".join(evidence), arm64_vm.DYNAMORIO_VLS if stand_in else None)
    if result is None:
        return ["", f"## {NAME}'s counts ({', '.join(evidence)})", "",
                "No other counting backend's rows to compare them with: list qemu in the sweep's backends."]
    cells = [f"- {ln.strip()}" for ln in result.cell_lines()]
    return ["", f"## {NAME}'s counts ({result.counted_by}) against the {result.reference}'", "",
            f"{result.verdict()}.", *([""] + cells if cells else [])]


def bench(b: Bench) -> tuple[dict[str, Any] | None, list[str]]:
    """Its stand-in measured (issue 35 item 3): the timed sweep's cells at VL 128/256/512 counted
    by DynamoRIO in the emulated guest, against the sweep's counts (analysis.backends.armie_guest);
    one line naming the setup command where the guest is not built."""
    why = arm64_vm.missing()
    if why is not None or b.binaries is None:
        return None, [f"DynamoRIO in the guest (ArmIE's stand-in): skipped ({why or 'no way to build its binaries'})"]
    sweep = load(REPO / b.config, {"results_dir": str(b.work / "results"), "build_dir": str(b.work / "build")})
    result = armie_guest.compare(sweep, b.read_counts(sweep.results_dir / "counts.csv"), NAME, b.binaries, b.cores)
    entry = {**result.entry(), "target_s": b.targets["dynamorio_s"], "met": result.seconds <= b.targets["dynamorio_s"]
             and result.equal == result.compared}
    lines = result.lines()
    lines[0] += f" ({b.verdict(result.seconds, b.targets['dynamorio_s'])})"
    return entry, lines


# --- ArmIE's command line (its outputs: analysis.backends.armie_format) --------------------------

def build_command(armie: str, vl_bits: int, client_lib: str, binary: str, args: list[str]) -> list[str]:
    """The argv that runs `binary args` under ArmIE at `vl_bits` with instrumentation client `client_lib`.

    `armie -msve-vector-bits=<VL> -i <client> -- <binary> <args>`: the VL is given in bits (not
    bytes as for QEMU's `sve-default-vector-length`), and `--` keeps the program's own arguments
    from being read as ArmIE options. Raises ValueError for a VL the SVE architecture does not
    allow, because ArmIE would otherwise fail only on the remote AArch64 machine.
    """
    if isinstance(vl_bits, bool) or not isinstance(vl_bits, int) or vl_bits not in VALID_VLS:
        raise ValueError(
            f"vl_bits={vl_bits!r} is not an SVE vector length: use a multiple of {VL_STEP} from {VL_MIN} to {VL_MAX}"
        )
    if not client_lib:
        raise ValueError("client_lib is empty: name an ArmIE client such as libinscount_emulated.so")
    if not binary:
        raise ValueError("binary is empty: name the program to run under ArmIE")
    return [armie, f"-msve-vector-bits={vl_bits}", "-i", client_lib, "--", binary, *map(str, args)]


def armie_available() -> str | None:
    """Path of `armie` if it is on PATH and this host is AArch64, else None.

    Both are needed: ArmIE is built for AArch64 Linux only, so an `armie` found on an x86-64
    host (e.g. a copied install tree) cannot run and must not be offered as a backend.
    """
    if platform.machine().lower() not in ("aarch64", "arm64"):
        return None
    return shutil.which("armie")




def _armie_run(cmd: list[str], cwd: Path, cell: str, timeout: float | None = None) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = run_limited(["env", "-i", f"PATH={os.environ.get('PATH', '')}", *cmd], timeout, cell, cwd=cwd)
    if proc.returncode != 0:
        raise RunError(f"{cell}: {(proc.stderr.strip().splitlines() or ['exit ' + str(proc.returncode)])[-1]} "
                       f"(command: {' '.join(cmd)})")
    return proc, time.monotonic() - t0


def run_once(binary: Path, cpu_model: str, run: Run, timeout: float | None = None) -> dict[str, Any]:
    """One cell under ArmIE, in the QEMU record's shape (UNTESTED: ArmIE runs only on AArch64).

    Three runs: inscount inside the markers (the sample client's default), inscount with
    `-noROI` for the whole program, and the opcodes client, whose encodings file ArmIE
    writes into the working directory. ArmIE cannot say whether the markers balanced; a ROI
    count of zero is taken as missing markers and is an error, as with QEMU.
    """
    armie = armie_available()
    if armie is None:
        raise RunError("armie backend: needs an AArch64 host with armie on PATH")
    cell = cell_name(binary, cpu_model, run)
    # Staged like the QEMU runs (fixed-length path, private directory for undecoded.*).
    with staged(binary) as exe:
        argv = [f"./{exe.name}", *run.argv()]
        roi_cmd = build_command(armie, run.vl, INSCOUNT_CLIENT, argv[0], argv[1:])
        roi, t_roi = _armie_run(roi_cmd, exe.parent, cell, timeout)
        whole_cmd = roi_cmd[:4] + ["-a", "-noROI"] + roi_cmd[4:]
        whole, _ = _armie_run(whole_cmd, exe.parent, cell, timeout)
        ops_cmd = build_command(armie, run.vl, OPCODES_CLIENT, argv[0], argv[1:])
        _armie_run(ops_cmd, exe.parent, cell, timeout)
        files = glob.glob(str(exe.parent / "undecoded*"))
        if len(files) != 1:
            raise RunError(f"{cell}: expected one undecoded.* file from {OPCODES_CLIENT}, found {len(files)}")
        undecoded = Path(files[0]).read_text()
    fields = parse_ok_line(roi.stdout, cell)
    roi_counts = parse_inscount(roi.stdout + roi.stderr)
    if roi_counts["total"] == 0:
        raise RunError(f"{cell}: ArmIE counted nothing between the markers: missing roi_begin()/roi_end()?")
    return {
        "vl": run.vl, "vl_seen": int(fields["vl"]), "size": run.size, "op": run.op, "dtype": run.dtype,
        "argv": argv, "command": roi_cmd, "checksum": fields["checksum"], "seconds": round(t_roi, 3),
        "inscount": {"client": "armie-inscount", "markers": {"begin": None, "end": None, "balanced": True},
                     "whole": parse_inscount(whole.stdout + whole.stderr), "roi": roi_counts},
        "opcodes": {"client": "armie-opcodes", "roi": parse_opcodes(undecoded)},
    }
