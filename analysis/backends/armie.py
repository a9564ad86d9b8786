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

Lines starting with `#` are ignored by every parser, so fixtures can say what they are.
"""
from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, TextIO

from analysis.backends import (Plan, Ready, RunError, cell_name, count_job,
                               no_bench, no_report, parse_ok_line, run_limited, staged)
from analysis.backends.clients import check_client_record, client_metrics
from analysis.core.config import VALID_VLS, VL_MAX, VL_MIN, VL_STEP, Job, Run, Sweep
from analysis.core.toolchain import ToolchainError, first_line

NAME = "armie"
STAGE = "count"
MARKER = "roi_armie.S"
EXCLUSIVE = False
GROUPED = True  # through Slurm its cells share grouped Slurm jobs, as QEMU's
TABLE = "counts.csv"  # where its rows go (analysis.stages.collect)
NOT_RUN = None  # it runs wherever the sweep lists it (preflight fails where it cannot)
HIDE_ENV: dict[str, str] = {}
SHARES_PREPARATIONS = False

INSCOUNT_CLIENT = "libinscount_emulated.so"
EVIDENCE = "ArmIE"  # what a verdict resting on its rows names (its stand-in's runs are bench's, not rows)
OPCODES_CLIENT = "libopcodes_emulated.so"


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    if NAME not in sweep.backends:
        return None
    if armie_available() is None:
        raise ToolchainError(
            "backend armie needs an AArch64 host with armie on PATH (module load armie); remove it from backends here")
    return Ready({"armie": first_line(["armie", "--version"])})


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    return sweep.count_jobs(NAME)


def time_factor(sweep: Sweep) -> float:
    return 1.0


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    return {}


def inputs(build_dir: Path) -> list[str]:
    return []


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    binary = Path(plan.binary)
    return {}, count_job(plan, lambda run, limit: run_once(binary, plan.cpu_model, run, limit), log)


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    return client_metrics(run, mnemonics)


check_record = check_client_record  # the counting clients' shape
report = no_report
bench = no_bench  # bench times it as the count sweep


# --- ArmIE's command line and outputs ----------------------------------------------------------

# `<N> instructions executed of which <M> were emulated instructions` (printed with %llu).
_INSCOUNT_RE = re.compile(
    r"^\s*(\d+) instructions executed of which (\d+) were emulated instructions\s*$"
)
# undecoded.txt / undecoded.<app>.<pid>.log line: `%9lu : 0x%08x`.
_UNDECODED_RE = re.compile(r"^\s*(\d+)\s*:\s*0x([0-9a-fA-F]{8})\s*$")


def _content_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) for every line that is not blank and not a `#` comment."""
    return [
        (i, line)
        for i, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


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


def parse_inscount(text: str) -> dict:
    """Parse `libinscount_emulated.so` output into `{"total": N, "sve": M, "classes": None}`.

    `text` is the client's output (stderr/stdout of the run, possibly mixed with the program's
    own output). Exactly one count line must be present: none means the client did not run or
    the program did not exit normally; two or more mean several processes (e.g. MPI ranks)
    shared one stream, and picking one would silently give a wrong number. `classes` is None
    because ArmIE does not classify instructions the way our QEMU inscount client does.
    """
    found: list[tuple[int, int, int]] = []
    for lineno, line in _content_lines(text):
        m = _INSCOUNT_RE.match(line)
        if m:
            found.append((lineno, int(m.group(1)), int(m.group(2))))
    if not found:
        raise ValueError(
            "ArmIE inscount: no '<N> instructions executed of which <M> were emulated instructions' "
            "line found: was the run made with -i libinscount_emulated.so and did it exit normally?"
        )
    if len(found) > 1:
        lines = ", ".join(str(f[0]) for f in found)
        raise ValueError(
            f"ArmIE inscount: {len(found)} count lines (lines {lines}); expected exactly one: "
            "give each process (MPI rank) its own output file"
        )
    lineno, total, emulated = found[0]
    if emulated > total:
        raise ValueError(
            f"ArmIE inscount line {lineno}: {emulated} emulated > {total} executed; the total "
            "includes the emulated instructions, so this output is corrupt"
        )
    return {"total": total, "sve": emulated, "classes": None}


def parse_opcodes(undecoded_text: str) -> list[dict]:
    """Parse `undecoded.txt` / `undecoded.<app>.<pid>.log` into `[{"encoding": "0x%08x", "count": N}]`.

    Each non-blank, non-`#` line must be `%9lu : 0x%08x` (count : 32-bit encoding of an emulated
    SVE instruction). Encodings are normalised to lower-case 8-digit hex, as in our opcodes JSON,
    so both backends decode through the same objdump cache. A malformed line or an encoding that
    appears twice (e.g. two files concatenated) raises ValueError naming the line. The result is
    sorted by count descending, then encoding, so it does not depend on ArmIE's tie order.
    """
    seen: dict[str, int] = {}
    out: list[dict] = []
    for lineno, line in _content_lines(undecoded_text):
        m = _UNDECODED_RE.match(line)
        if not m:
            raise ValueError(
                f"ArmIE undecoded line {lineno}: {line.strip()[:80]!r} is not '<count> : 0x<8 hex digits>'"
            )
        encoding = f"0x{int(m.group(2), 16):08x}"
        if encoding in seen:
            raise ValueError(
                f"ArmIE undecoded line {lineno}: encoding {encoding} already listed on line "
                f"{seen[encoding]}: pass one undecoded file per run"
            )
        seen[encoding] = lineno
        out.append({"encoding": encoding, "count": int(m.group(1))})
    out.sort(key=lambda e: (-e["count"], e["encoding"]))
    return out


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
