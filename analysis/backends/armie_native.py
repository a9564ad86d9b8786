"""The armie backend's jobs where the sweep file says `armie: {via: native}` (issue 52 item 4): on
an AArch64 host (an SVE node), DynamoRIO with the harness's ROI client runs natively as ArmIE's
stand-in, installed by `./harness setup --with-dynamorio` (setup/dynamorio-native.sh). The same
processes as in the emulated guest (armie_guest_job): the ArmIE-marker build of the job's binary,
one DynamoRIO process per VL in the driver's batch mode, VL 128/256/512 only (armie.jobs), each
process's output read by the armie backend's parser.

What the guest does as root for every process, each process does for itself here, as an ordinary
user: its VL set before drrun starts (sve_vl_exec.py: DynamoRIO reads it once at start-up), and
qemu-user's bottom-up memory layout (`setarch -L`: where a kernel's path depends on the order of
its buffers, the QEMU plugins counted that order's; docs/guide/arm64-vm.md) with no address
randomisation (`setarch -R`).
"""
from __future__ import annotations

import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from analysis.backends import Plan, Ready, RunError, cell_name, log_record, run_cells, staged
from analysis.backends import perf_vls
from analysis.backends.armie_guest import CLIENT_ARGS, one_process_each, split_output
from analysis.backends.armie_guest_job import record
from analysis.backends.qemu import batch_argv
from analysis.core import arm64_vm
from analysis.core.config import REPO
from analysis.core.run import Run
from analysis.core.toolchain import ToolchainError, emulated_machine

SETUP = REPO / "setup" / "dynamorio-native.sh"
FIX = "./harness setup --with-dynamorio"
WITH_VL = Path(__file__).with_name("sve_vl_exec.py")
# What rows counted here are (provenance.csv's evidence column, the verdict tables, the summary).
EVIDENCE = "DynamoRIO natively"
# The key of a raw file's meta under which a native job records its DynamoRIO and host.
NATIVE_META = "dynamorio_native"
# DynamoRIO's start-up before a process's first run (its code cache, the client's), added to that
# run's time limit: measured 1 to 3 s natively under the emulated node's TCG, more on a busy host.
START_SECONDS = 60.0


@dataclass(frozen=True)
class Install:
    """setup/dynamorio-native.sh's install folder: a DynamoRIO home and the client built against it."""
    dir: Path

    @property
    def drrun(self) -> Path:
        return self.dir / "dynamorio" / "bin64" / "drrun"

    @property
    def client(self) -> Path:
        return self.dir / "libroi_inscount.so"

    def version(self) -> str:
        return (self.dir / "version").read_text().strip()


def aarch64_host() -> bool:
    return platform.machine().lower() in ("aarch64", "arm64")


def find() -> Install:
    """The installed DynamoRIO and client, or ToolchainError naming the setup command."""
    proc = subprocess.run([str(SETUP), "--path"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(proc.stderr.strip() or f"DynamoRIO with the ROI client is not installed (fix: {FIX})")
    return Install(Path(proc.stdout.strip()))


def preflight(vls: list[int]) -> Ready:
    """`via: native` on this host: an AArch64 host, DynamoRIO and the client installed, and each of
    `vls` (the VLs its jobs run) offered by the CPU; else one line naming the fix. Nothing runs."""
    if not aarch64_host():
        raise ToolchainError(f"backend armie with via: native runs DynamoRIO on this host, which is "
                             f"{platform.machine()}: DynamoRIO for AArch64 runs natively on an AArch64 host only; here "
                             "use armie: {via: guest} (DynamoRIO in the emulated guest: ./harness setup --with-arm64-vm)")
    try:
        install = find()
    except ToolchainError as e:
        raise ToolchainError(f"backend armie with via: native counts with DynamoRIO on this host: {e}") from None
    check_offered(vls, perf_vls.granted_vls(vls))
    return Ready({"armie": f"DynamoRIO {install.version()} with the harness's ROI client, natively "
                           f"({platform.machine()}, kernel {platform.release()})"})


def check_offered(vls: list[int], grants: dict[int, int]) -> None:
    """One line when the CPU lacks a VL the jobs run at: natively a run's VL is the CPU's (the
    guest's CPU offers every VL, QEMU's max)."""
    lacking = [vl for vl in vls if grants.get(vl) != vl]
    if lacking:
        raise ToolchainError(
            "backend armie with via: native: this CPU does not offer "
            + ", ".join(f"VL {vl} (prctl grants {grants.get(vl)})" for vl in lacking)
            + ": remove it from vector_lengths, or count it with armie: {via: guest} (the emulated guest's CPU offers "
              "every VL)")


def command(install: Install, vl: int, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The process that runs `argv` (one binary, the driver's batch mode) under DynamoRIO with the
    ROI client at `vl` bits on this host: only `env` in its environment, as QEMU's runs; its VL set
    before drrun starts (sve_vl_exec.py); qemu-user's layout, without randomisation (setarch -L -R).
    ValueError for a VL DynamoRIO cannot run."""
    if vl not in arm64_vm.DYNAMORIO_VLS:
        raise ValueError(f"VL {vl}: {arm64_vm.NOT_RUN_VL}")
    return ["env", "-i", *(f"{k}={v}" for k, v in sorted((env or {}).items())), sys.executable, str(WITH_VL), str(vl),
            shutil.which("setarch") or "setarch", platform.machine(), "-L", "-R",
            str(install.drrun), "-c", str(install.client), *CLIENT_ARGS, "--", *argv]


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One job (one binary, its runs at VL 128/256/512: armie.jobs) natively: one DynamoRIO process
    per VL in the driver's batch mode, from a private copy of the binary (staged, as QEMU's runs);
    each run's record as in the guest (armie_guest_job.record), its raw file's meta naming this
    host's DynamoRIO (NATIVE_META)."""
    try:
        install = find()
    except ToolchainError as e:
        raise RunError(str(e)) from None
    binary = Path(plan.binary)
    groups = one_process_each(range(len(plan.runs)), lambda i: plan.runs[i].vl, lambda i: plan.runs[i])
    records: dict[int, dict[str, Any]] = {}
    t0 = time.monotonic()
    with staged(binary) as exe:
        for g in groups:
            runs = [plan.runs[i] for i in g]
            cmd = command(install, runs[0].vl, [f"./{exe.name}", *batch_argv(runs)], plan.env)
            limits = [plan.time_limits[i] + (START_SECONDS if k == 0 else 0.0) for k, i in enumerate(g)]
            t = time.monotonic()
            proc = run_cells(cmd, limits, [cell_name(binary, plan.cpu_model, r) for r in runs], b"ok ", cwd=exe.parent)
            out = arm64_vm.Output(shlex.join(cmd), proc.returncode, proc.stdout, proc.stderr)
            seconds = round(time.monotonic() - t, 3)
            for i, one in zip(g, split_output(g, out)):
                records[i] = _record(install, binary, plan, plan.runs[i], exe.name, one, seconds)
                log_record(binary, plan, i + 1, records[i], log)
    meta = {"dynamorio": install.version(), "drrun": str(install.drrun), "client": str(install.client),
            "machine": platform.machine(), "kernel": platform.release(), "emulator": emulated_machine(),
            "seconds": round(time.monotonic() - t0, 3)}
    return {NATIVE_META: meta}, [records[i] for i in range(len(plan.runs))]


def _record(install: Install, binary: Path, plan: Plan, run: Run, staged_name: str, out: arm64_vm.Output,
            seconds: float) -> dict[str, Any]:
    argv = [f"./{staged_name}", *batch_argv([run])]
    # The cell alone on the binary where the build put it: the command to run it again by hand.
    alone = shlex.join(command(install, run.vl, [str(binary.resolve()), *batch_argv([run])], plan.env))
    return record(binary, plan, run, argv, out, seconds, command(install, run.vl, argv, plan.env), alone, alone)
