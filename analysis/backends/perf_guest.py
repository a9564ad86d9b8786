"""The perf backend's SVE runs in the emulated AArch64 guest (issue 35 item 4), where no SVE host
(A64FX) is at hand and `./harness setup --with-arm64-vm` has built the guest.

The measurement is the native one (analysis.backends.perf): per cell `processes` processes, each
`perf stat --control fd:CTL,ACK -D -1 -e instructions:u -- ./k ARGS`, the kernel's roi_perf.o
setting the VL with prctl, flushing before every call and enabling the counter around each
measured call. What changes is where it runs: one guest boot per job (one binary, every cell of
it, all their processes: a batch of cells, never a boot per process), booted with
`-icount shift=0`, without which the guest's PMU has no instructions event
(../shared/reference/arm64-vm-dynamorio.md). Only `instructions:u` is counted: the guest's cycles
are virtual time and its cache and stall events read 0, so the other configured events are
recorded as unsupported, and the times per call are the guest's virtual time. Rows made here say
so (GUEST_CPU): "emulated AArch64: instruction counts only, no A64FX timing".

Each process gets fresh control FIFOs, as the native backend gives each its own pipes: perf
follows each "ack\n" with a NUL that the kernel's next read skips, and a NUL left over from a
process before would add one read (27 user instructions) to the next process's first window.

What the counts are (measured, docs/guide/arm64-vm.md): per process, `calls` x (the QEMU
plugins' roi.total of the cell + w) - FIRST_ACK, w = 327 (the control round trip) + 1 where the
window runs SVE code (its first SVE instruction traps after the ack's read system call, counted
once more) - what the QEMU build's call of the kernel sets up more than the perf build's (0 to 2
instructions, objdump): 326 to 328, the same for every cell of one binary, not one number because
the two builds' drivers are compiled apart. Now and then one process of a cell counts a multiple
of 9 more (clock_gettime in the window).
"""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any, TextIO

from analysis.backends import RunError, cell_name, check_vl_seen, parse_ok_line
from analysis.backends.perf_table import OK, UNSUPPORTED, parse_csv, parse_times, stat_command
from analysis.core import arm64_vm
from analysis.core.toolchain import compiler_for
from analysis.core.run import Run

GUEST_CPU = "emulated AArch64 guest (QEMU -icount shift=0): instruction counts only, no A64FX timing"
LABEL = "emulated AArch64: instruction counts only, no A64FX timing"
EVENT = "instructions"  # the one event the guest counts: as instructions:u (user mode, the ROI)
# Boot and power-off, and what one perf process costs besides its calls (perf's own start-up
# under single-threaded TCG: about 0.4 s measured, on a loaded host several times that).
BOOT_SECONDS = 120.0
PROCESS_SECONDS = 5.0
# The longest a batch may take (subprocess's poll takes at most about 24 days in milliseconds).
MAX_BATCH_SECONDS = 1e6
# The instructions counted per enabled window besides the ROI the QEMU plugins count (roi_perf.c's
# control round trip: the end of the "enable" ack's read, clock_gettime, and the start of the
# "disable" write), measured per process as calls x WINDOW - FIRST_ACK: FIRST_ACK is the one
# window of a process whose ack read finds no NUL before it (its first).
FIRST_ACK = 27


def missing() -> str | None:
    """None when the guest can run perf, else the line naming the setup command."""
    if shutil.which(arm64_vm.QEMU) is None:
        return f"{arm64_vm.QEMU} is not installed (fix: {arm64_vm.FIX})"
    try:
        arm64_vm.find_guest()
    except arm64_vm.GuestError as e:
        return str(e)
    return None


def env_line(s: dict[str, Any]) -> str:
    """The kernel's ROI settings (roi_perf.c), as the native backend passes them."""
    return " ".join(f"{k}={v}" for k, v in {
        "LC_ALL": "C", "SVE_HARNESS_CALLS": s["calls"], "SVE_HARNESS_WARMUP": s["warmup"],
        "SVE_HARNESS_FLUSH_BYTES": s["flush_bytes"], "SVE_HARNESS_TIMES": "/tmp/perf-times.txt",
        "SVE_HARNESS_PERF_CTL_FD": 3, "SVE_HARNESS_PERF_ACK_FD": 4}.items())


def process_command(exe: str, argv: list[str]) -> list[str]:
    """One process's perf command, as analysis.backends.perf.perf_command builds it natively (no
    taskset: the guest has one vCPU)."""
    return stat_command("perf", [f"{EVENT}:u"], "/tmp/perf.csv", (3, 4), [exe, *argv])


# Where the processes run: the job's binary is copied once from the 9p share to the guest's
# tmpfs (an exec from the share reads the binary's pages over 9p: 0.09 of a 4 KiB process's 0.33 s,
# measured), into a folder whose path is as long as the share's, so that the processes' working
# directory (PWD in their environment) and so their stacks are laid out as before.
WORKDIR = "/tmp/batch"
STAGE = f"mkdir -p {WORKDIR}/bin && cp ./bin/* {WORKDIR}/bin/"
# A cell's command: `processes` processes, each with new FIFOs on the guest's tmpfs (the 9p share
# cannot hold FIFOs), each printing its status, output, perf's CSV and the call times between
# @@ lines that `parse_cell` splits.
CELL = """cd {workdir}
p() {{ rm -f /tmp/perf.csv /tmp/perf-times.txt /tmp/ctl /tmp/ack; mkfifo /tmp/ctl /tmp/ack
( exec 3<>/tmp/ctl 4<>/tmp/ack; {env} exec {cmd} >/tmp/o 2>/tmp/e ); rc=$?
echo "@@proc $rc"; cat /tmp/o; echo @@csv; cat /tmp/perf.csv; echo @@times; cat /tmp/perf-times.txt; echo @@err; tail -n 3 /tmp/e; }}
mkdir -p /tmp; k=0; while [ $k -lt {n} ]; do p; k=$((k+1)); done"""


def cell_command(exe: str, run: Run, s: dict[str, Any]) -> str:
    return CELL.format(workdir=WORKDIR, env=env_line(s), cmd=shlex.join(process_command(exe, run.argv())),
                       n=s["processes"])


def parse_cell(text: str, cell: str, calls: int) -> list[dict[str, Any]]:
    """A cell command's output as one dict per process: vl_seen, checksum, instructions, times_ns."""
    procs = []
    for chunk in text.split("@@proc ")[1:]:
        head, _, rest = chunk.partition("\n")
        out, _, rest = rest.partition("@@csv\n")
        csv, _, rest = rest.partition("@@times\n")
        times, _, err = rest.partition("@@err\n")
        if head.strip() != "0":
            raise RunError(f"{cell}: exit {head.strip()} in the guest: {(err.strip().splitlines() or ['no output'])[-1]}")
        fields = parse_ok_line(out, cell)
        rows = parse_csv(csv)
        if len(rows) != 1 or rows[0]["status"] != OK:
            raise RunError(f"{cell}: perf in the guest counted no {EVENT}:u ({rows}); the guest must run with -icount")
        procs.append({"vl_seen": int(fields["vl"]), "checksum": fields["checksum"],
                      "instructions": int(rows[0]["value"]), "unit": rows[0]["unit"],
                      "times_ns": parse_times(times, cell, calls)})
    return procs


def run_job(plan: Any, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job's cells in one boot of the guest; the records as analysis.backends.perf.run_job
    writes them (instructions the one counted event, every other configured event unsupported)."""
    s = plan.settings
    binary = Path(plan.binary)
    guest = arm64_vm.find_guest()
    exe = f"./bin/{binary.name}"
    # Each process gets the time limit of one QEMU run of its cell: that is for one call under the
    # counting plugins, and a call in the guest, without plugins, is many times faster.
    limit = min(MAX_BATCH_SECONDS, BOOT_SECONDS + sum(s["processes"] * (PROCESS_SECONDS + t) for t in plan.time_limits))
    commands = ["perf --version", STAGE] + [cell_command(exe, run, s) for run in plan.runs]
    batch = arm64_vm.run_batch(guest, commands, {exe[2:]: binary}, limit, f"perf batch {binary.name}", icount=True)
    events = {ev: (OK if ev == EVENT else UNSUPPORTED) for ev in s["events"]}
    records = []
    if batch.outputs[1].rc != 0:
        raise RunError(f"{binary.name}: cannot copy the binary to the guest's {WORKDIR}: {batch.outputs[1].stderr.strip()[-200:]!r}")
    for i, (run, out) in enumerate(zip(plan.runs, batch.outputs[2:]), 1):
        cell = cell_name(binary, "native", run)
        procs = parse_cell(out.stdout, cell, s["calls"])
        if len(procs) != s["processes"]:
            raise RunError(f"{cell}: {len(procs)} of {s['processes']} processes ran in the guest "
                           f"(exit {out.rc}): {out.stderr.strip()[-200:]!r}")
        for p in procs:
            check_vl_seen(binary, "native", run, p["vl_seen"])
        counts = sorted({p["instructions"] for p in procs})
        print(f"[{i}/{len(plan.runs)}] {cell}: {len(procs)} processes x {s['calls']} calls in the guest, "
              f"instructions:u per process {counts}", file=log, flush=True)
        records.append({"vl": run.vl, "size": run.size, "op": run.op, "dtype": run.dtype, "argv": run.argv(),
                        "checksum": procs[0]["checksum"], "command": process_command(exe, run.argv()),
                        "processes": [{"counters": [_counter(ev, st, p) for ev, st in events.items()],
                                       "times_ns": p["times_ns"], "seconds": None} for p in procs]})
    extra = {"cpu": GUEST_CPU, "caveat": LABEL, "traffic": s["traffic"], "events": events, "calls": s["calls"],
             "warmup": s["warmup"], "flush_bytes": s["flush_bytes"], "core": 0, "processes": s["processes"],
             "guest": {**batch.provenance, "seconds": batch.seconds, "counter": batch.outputs[0].stdout.strip(),
                       "compiler": compiler_for("native", "vla").version()}}
    return extra, records


def _counter(event: str, status: str, proc: dict[str, Any]) -> dict[str, Any]:
    if status == OK:
        return {"event": event, "value": float(proc["instructions"]), "unit": proc["unit"], "status": OK,
                "running_pct": 100.0}
    return {"event": event, "value": None, "unit": "", "status": UNSUPPORTED, "running_pct": None}
