"""The armie backend's jobs where the sweep file says `armie: {via: guest}` (issue 52 item 4):
each job (one binary on one CPU model, its runs at VL 128/256/512: armie.jobs) in one boot of the
emulated AArch64 guest, its runs one DynamoRIO process per VL in the driver's batch mode, as
`./harness bench --only armie` runs them (analysis.backends.armie_guest). A job stays one binary,
as every count job: its raw file, log and re-run when its binary or plan changes are the
workflow's; the workflow runs as many side by side as it has cores, one guest each.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from analysis.backends import GUEST_META, Plan, RunError, cell_name, log_record
from analysis.backends.armie_guest import BOOT_SECONDS, drrun, one_process_each, read_run, split_output
from analysis.backends.qemu import batch_argv
from analysis.core import arm64_vm
from analysis.core.run import Run

# The inscount client a record of a run here names: it counts between the markers only.
CLIENT_NAME = "dynamorio-roi-inscount"


def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One job of a sweep (one binary, its planned runs: VL 128/256/512 only, armie.jobs) in one
    guest boot, one drrun process per VL (the driver's batch mode); each run's record in the
    counting clients' shape, the ROI's total and SVE count (the client counts nothing outside
    the markers, so no whole-program counts), its raw file's meta naming the guest (GUEST_META)."""
    binary = Path(plan.binary)
    # Where bench's batches put it (Cell.guest_path): the path is part of the run's stack.
    path = f"bin/{plan.meta['compiler']}/{plan.meta['build']}/{binary.name}"
    groups = one_process_each(range(len(plan.runs)), lambda i: plan.runs[i].vl, lambda i: plan.runs[i])
    commands = [drrun(path, [plan.runs[i] for i in g]) for g in groups]
    try:
        batch = arm64_vm.run_batch(arm64_vm.find_guest(), commands, {path: binary},
                                   BOOT_SECONDS + sum(plan.time_limits), f"DynamoRIO batch {binary.name}")
    except arm64_vm.GuestError as e:
        raise RunError(f"{binary.name}: {e}") from None
    records: dict[int, dict[str, Any]] = {}
    for g, out in zip(groups, batch.outputs):
        for i, one in zip(g, split_output(g, out)):
            alone = drrun(path, [plan.runs[i]])  # the cell as a batch of one: the command to run it again by hand
            records[i] = record(binary, plan, plan.runs[i], [f"./{path}", *batch_argv([plan.runs[i]])], one,
                                batch.seconds, ["sh", "-c", alone],
                                f"in the arm64 guest (./harness setup --with-arm64-vm): {alone}",
                                f"in the arm64 guest: {alone}")
            log_record(binary, plan, i + 1, records[i], log)
    return {GUEST_META: {**batch.provenance, "seconds": batch.seconds}}, [records[i] for i in range(len(plan.runs))]


def record(binary: Path, plan: Plan, run: Run, argv: list[str], out: arm64_vm.Output, seconds: float,
           command: list[str], command_line: str, rerun: str) -> dict[str, Any]:
    """One run's record in the counting clients' shape, read from its output (a DynamoRIO process's
    part, split_output), in the guest or natively (armie_native): `command` runs the cell alone,
    `command_line` says so for the provenance, `rerun` for a failure's line."""
    cell = cell_name(binary, plan.cpu_model, run)
    try:
        fields, roi = read_run(cell, run.vl, out)
    except RunError as e:
        why = str(e)  # the kernel's `ok` line check names the cell already
        raise RunError(why if why.startswith(cell) else f"{cell}: {why} ({rerun})") from None
    return {"vl": run.vl, "vl_seen": int(fields["vl"]), "size": run.size, "op": run.op, "dtype": run.dtype,
            "argv": argv, "command": command, "command_line": command_line,
            "checksum": fields["checksum"], "seconds": seconds, "batch_runs": len(plan.runs),  # the process's, shared
            "inscount": {"client": CLIENT_NAME, "markers": {"begin": None, "end": None, "balanced": True},
                         "whole": None, "roi": roi}}
