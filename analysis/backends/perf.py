"""Measure backend: native runs under `perf stat`, counters scoped to the ROI.

Each process is started as

    perf stat -x ';' -o perf.csv --control fd:CTL_R,ACK_W -D -1 -e EVENTS -- taskset -c CORE ./k ARGS

with counting disabled until the kernel's roi_perf.o writes "enable" to the control pipe at
a measured ROI and "disable" after it (docs/contracts.md section 5). The process repeats its
call (warm-up calls, then `calls` measured ones), so perf's totals are per process and
`stats_rows` divides them by `calls`. Events this machine cannot count are kept as
rows with status unsupported; the run goes on.
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO

from analysis.backends import (GUEST_META, Bench, Plan, Ready, RecordError, RunError, cell_name, check_vl_seen,
                               no_estimates, no_report, parse_ok_line, perf_guest, staged)
from analysis.backends.perf_table import (  # its table, perf.csv (TABLE): perf.X names them as before
    BANDWIDTH, NOT_COUNTED, OK, SEP, TIME, UNKNOWN, UNSUPPORTED, describe, parse_csv, parse_times, stat_command,
    stats_rows, traffic_bytes)
from analysis.backends import perf_vls
from analysis.backends.perf_guest_check import stats_report  # perf_summary.md: its counts in the guest vs QEMU's
from analysis.core import config, perf_cells
from analysis.core.config import Job, Run, Sweep
from analysis.core.perf_cells import native_build, native_jobs  # noqa: F401 (perf.native_build, as before)
from analysis.core.toolchain import EMULATED_MACHINE, emulated_machine, host_has_sve  # noqa: F401 (perf.X)

NAME = "perf"
STAGE = "measure"
MARKER = "roi_perf.c"  # perf control, timing and repetitions, built per native build
EXCLUSIVE = True  # a measurement takes every core, so nothing else runs beside it
GROUPED = False  # through Slurm one Slurm job per measurement, alone on its node
TABLE = "perf.csv"  # where its rows go: statistics over processes (stats_rows, analysis.stages.collect --stats)
SHARES_PREPARATIONS = False
NOT_RUN = None  # its rows go to perf.csv, whose figures and checks are its section's own (analysis.stages.plot --stats)
HIDE_ENV: dict[str, str] = {}  # bench times its measurements apart (target perf_all)
EVIDENCE = "perf on A64FX"  # its claims compare SVE runs, native on an A64FX (perf_summary.md)
GUEST_EVIDENCE = "perf in the guest"  # its SVE runs in the emulated AArch64 guest (perf_guest)
NODE_EVIDENCE = "perf on an emulated AArch64 node"  # the harness itself runs on QEMU's virt machine
# host_cpu() of an A64FX: Fujitsu's implementer code 'F' and its part number.
A64FX_CPU = "aarch64 implementer 0x46 part 0x001"
report = no_report  # results/perf_summary.md is its report (analysis.stages.summary.stats_summary)
estimates = no_estimates  # its figures are its own measurements (a model's estimates are drawn apart)
HOST_FIX = "sysctl kernel.perf_event_paranoid=2 (or run as root)"
# Debian's kernels default to 3, which no upstream kernel knows: no ordinary user may count at
# all. 2 lets a user count its own processes in user space, which is all the harness asks.
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
USER_PARANOID = 2


def evidence(meta: dict[str, Any]) -> str:
    """Where a raw file's processes ran: in the guest or on an emulated node (its meta records
    the emulator), else on the CPU it names (A64FX by name; a host baseline on its host's model)."""
    if meta.get(GUEST_META):
        return NODE_EVIDENCE if meta[GUEST_META].get("node") else GUEST_EVIDENCE
    return f"perf on {'A64FX' if meta['cpu'] == A64FX_CPU else meta['cpu']}"


@dataclass
class PerfStatus:
    """What this machine can measure, and one line for each part it cannot."""
    perf: str | None
    version: str | None
    sve: bool
    host: bool
    messages: list[str] = field(default_factory=list)
    guest: bool = False  # the SVE runs go to the emulated AArch64 guest (perf_guest)
    node: bool = False  # the SVE runs are native on an emulated AArch64 node (emulated_machine)


def host_cpu() -> str:
    """The CPU's model name (x86) or implementer/part (AArch64, A64FX = 0x46/0x001)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in info.splitlines()) if v
    )
    if "model name" in fields:
        return fields["model name"]
    return f"{platform.machine()} implementer {fields.get('CPU implementer', '?')} part {fields.get('CPU part', '?')}"


def other_isa_note(sweep: Sweep, machine: str) -> str | None:
    """One line naming the sweep's host-only rows written for another ISA than `machine` (the
    x86-64 AVX2 copies on an AArch64 host): perf skips them (native_build), and says so."""
    rows = sorted({(row.host_isa, f"{row.kernel}/{row.variant}") for sel in sweep.selections for v in sel.variants
                   if (row := sweep.table.row(sel.kernel, v)).host_isa and row.host_isa != machine})
    if not rows:
        return None
    isas = "/".join(sorted({isa for isa, _ in rows}))
    return (f"perf: {len(rows)} {isas} host-only rows skipped on this {machine} host: "
            f"{', '.join(name for _, name in rows)}")


def detect(sweep: Sweep) -> PerfStatus | None:
    """None when the sweep has no perf section."""
    p = sweep.perf
    if p is None:
        return None
    perf = shutil.which(p.perf)
    if perf is None:
        return PerfStatus(None, None, False, False, [
            f"perf: skipped: '{p.perf}' not found (Debian: apt-get install linux-perf; Ubuntu: linux-tools-generic)"])
    version = subprocess.run([perf, "--version"], capture_output=True, text=True).stdout.strip()
    probe = subprocess.run([perf, "stat", "-x", SEP, "-e", "task-clock", "--", "true"],
                           capture_output=True, text=True, env=_env({}))
    if probe.returncode != 0 or "task-clock" not in probe.stderr:
        return PerfStatus(perf, version, False, False, [refusal(probe.stderr, paranoid_level(), os.geteuid() == 0)])
    status = PerfStatus(perf, version, False, p.host_baselines)
    if p.host_baselines and (note := other_isa_note(sweep, platform.machine())):
        status.messages.append(note)
    place = perf_cells.sve_place(sweep)
    if place == "off":
        status.messages.append("perf: SVE runs off (perf/sve: off in the sweep)")
    elif place in ("native", "node"):
        status.sve, status.node = True, place == "node"
        if status.node:
            status.messages.append(f"perf: this AArch64 node is emulated ({emulated_machine()}): SVE runs count "
                                   f"{perf_guest.EVENT} only ({perf_guest.LABEL}; exact only under -icount on one vCPU)")
    elif place == "guest" and perf_guest.missing() is None:
        status.sve = status.guest = True
        status.messages.append(f"perf: SVE runs in the emulated AArch64 guest ({perf_guest.LABEL})")
    elif place == "guest":
        status.messages.append(f"perf: SVE runs skipped: perf/sve: guest, but the emulated AArch64 guest is not "
                               f"built: {perf_guest.arm64_vm.FIX}")
    else:
        # The guest only when asked for: with the paper's 30 processes a cell its runs cost most of
        # an hour of two cores for the default sweep's Fig. 11/12 jobs (docs/guide/arm64-vm.md).
        after = "" if perf_guest.missing() is None else f", after {perf_guest.arm64_vm.FIX}"
        status.messages.append(
            f"perf: SVE runs skipped: this host ({platform.machine()}) has no SVE; run the sweep on an "
            "AArch64 SVE machine such as A64FX (docs/guide/perf.md: perf on A64FX), or count their instructions "
            f"in the emulated AArch64 guest: perf/sve: guest in the sweep{after}")
    return status


def paranoid_level() -> int | None:
    """The kernel's perf_event_paranoid, None where it cannot be read."""
    try:
        return int(PARANOID.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def refusal(stderr: str, level: int | None, root: bool) -> str:
    """One line on why perf cannot count here and what root does about it: the kernel's
    perf_event_paranoid when it forbids an ordinary user, else perf's first line past
    'Error:' (its refusal runs over many lines, and the last is an example, not the cause)."""
    if level is not None and level > USER_PARANOID and not root:
        return (f"perf: skipped: kernel.perf_event_paranoid is {level} here, which lets no ordinary user count; "
                f"fix (as root): sysctl kernel.perf_event_paranoid={USER_PARANOID}")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() not in ("", "Error:")]
    why = (lines or ["no output"])[0]
    return f"perf: skipped: perf cannot count here ({why}); fix: {HOST_FIX}"


@dataclass
class PerfPlan:
    """What a sweep's perf section measures on this machine."""
    status: PerfStatus
    jobs: list[Job]
    processes: int  # over every job and cell

    def line(self) -> str:
        return (f"perf: {len(self.jobs)} measurement jobs, {self.processes} processes "
                f"(SVE: {'yes' if self.status.sve else 'no'}, host baselines: {'yes' if self.status.host else 'no'})")


def plan(sweep: Sweep) -> PerfPlan | None:
    """None when the sweep has no perf section."""
    status = detect(sweep)
    if status is None:
        return None
    jobs = perf_jobs(sweep, status.sve, status.host)
    assert sweep.perf is not None
    p = sweep.perf
    guest = (p.guest_processes or p.processes) if status.guest else p.processes
    return PerfPlan(status, jobs, sum(len(j.runs) * (guest if j.binary.build == "vla" else p.processes) for j in jobs))


def perf_jobs(sweep: Sweep, sve: bool, host: bool) -> list[Job]:
    """Native runs: one Job per (build, kernel row) (perf_cells.native_jobs)."""
    return native_jobs(sweep, NAME, sve, host)


# --- the backend protocol (analysis.backends.Backend) ---------------------------------------

def preflight(sweep: Sweep) -> Ready | None:
    """What this machine can measure (perf found and allowed to count, SVE, host baselines);
    a note for each part it cannot. A VL the SVE CPU does not offer refuses the sweep."""
    status = detect(sweep)
    if status is None:
        return None
    if status.sve and not status.guest and sweep.perf is not None:
        perf_vls.check_offered(list(sweep.perf.vector_lengths), perf_vls.granted_vls(list(sweep.perf.vector_lengths)))
    versions = {"perf": status.version} if status.version and (status.sve or status.host) else {}
    return Ready(versions, notes=list(status.messages),
                 found={"perf": status.perf, "sve": status.sve, "host": status.host, "guest": status.guest,
                        "node": status.node})


def jobs(sweep: Sweep, ready: Ready | None) -> list[Job]:
    if ready is None:
        return perf_jobs(sweep, sve=True, host=True)
    return perf_jobs(sweep, bool(ready.found.get("sve")), bool(ready.found.get("host")))


def time_factor(sweep: Sweep) -> float:
    return 1.0  # perf runs are not time-limited


def settings(sweep: Sweep, job: Job, ready: Ready) -> dict[str, Any]:
    p = sweep.perf
    assert p is not None
    row = sweep.table.row(job.binary.kernel, job.binary.variant)
    guest = bool(ready.found.get("guest")) and job.binary.build == "vla"
    return {"perf": ready.found["perf"], "events": list(p.events), "calls": p.calls, "warmup": p.warmup,
            "flush_bytes": int(p.flush.get(row.family, 0)), "core": p.core,
            "processes": p.guest_processes if guest and p.guest_processes else p.processes,
            "traffic": sweep.table.families[row.family].traffic, "guest": guest,
            # A guest job is one single-threaded QEMU (-icount): two run side by side on two cores.
            "exclusive": not guest}


def inputs(build_dir: Path) -> list[str]:
    return []


def metrics(meta: dict[str, Any], run: dict[str, Any], mnemonics: dict[int, str]) -> Iterator[tuple[str, int]]:
    """Per call, the mean over processes of each counted event, and the time in ns (perf.csv,
    stats_rows, has their spread)."""
    procs = run["processes"]
    for event, probed in meta["events"].items():
        values = [c["value"] for p in procs for c in p["counters"] if c["event"] == event and c["status"] == OK]
        if probed == OK and len(values) == len(procs):
            yield f"perf.{event}", round(statistics.fmean(values) / meta["calls"])
    yield "perf.time_per_call_ns", round(statistics.fmean(t for p in procs for t in p["times_ns"]))


def check_record(run: dict[str, Any], where: str) -> None:
    if not isinstance(run.get("processes"), list) or not run["processes"]:
        raise RecordError(f"{where}.processes is {run.get('processes')!r}, not a list of processes")


def bench(b: Bench) -> tuple[dict[str, Any] | None, list[str]]:
    """The sweep's perf part here (host baselines; SVE on A64FX), timed apart from the counts."""
    p = plan(config.load(config.REPO / b.config))
    lines = list(p.status.messages) if p else []
    if not p or not p.jobs:
        return None, lines
    pm = b.figure(*b.time_target("perf_all", True), None, jobs=len(p.jobs), processes=p.processes, sve=p.status.sve,
                  host=p.status.host)
    return pm, lines + [f"perf measurements of the sweep (native, not in the count sweep's target): {pm['seconds']} s "
                        f"({pm['cpu_s']} CPU s) for {pm['processes']} processes ({pm['jobs']} jobs; SVE: {pm['sve']}, "
                        f"host baselines: {pm['host']})"]


def _env(extra: dict[str, str]) -> dict[str, str]:
    # A fixed, minimal environment (C locale: perf's decimal point) plus the ROI settings.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", **extra}


def probe_events(perf: str, events: list[str]) -> dict[str, str]:
    """Which configured events perf accepts here: {event: OK | UNKNOWN (perf rejects the
    name) | UNSUPPORTED | NOT_COUNTED}. Rejected names cannot be passed to the real runs
    (perf would refuse them all), so they are probed one at a time."""
    out = {}
    for ev in events:
        proc = subprocess.run([perf, "stat", "-x", SEP, "-e", ev, "--", "true"], capture_output=True, text=True, env=_env({}))
        rows = parse_csv(proc.stderr) if proc.returncode == 0 else []
        out[ev] = rows[0]["status"] if len(rows) == 1 else UNKNOWN
    return out


def perf_command(perf: str, events: list[str], csv: Path, ctl: tuple[int, int], core: int, exe: Path, argv: list[str]) -> list[str]:
    """ctl = (fd perf reads commands from, fd perf writes acks to); the process pinned to `core`."""
    return stat_command(perf, events, str(csv), ctl,
                        [shutil.which("taskset") or "taskset", "-c", str(core), f"./{exe.name}", *argv])


@dataclass(frozen=True)
class Settings:
    perf: str
    events: tuple[str, ...]  # those perf accepts here, in the configured order
    calls: int
    warmup: int
    flush_bytes: int
    core: int
    fixed_layout: bool = False  # no address randomisation (an emulated node: exact counts)


def run_process(binary: Path, run: Run, s: Settings) -> dict[str, Any]:
    """One process: its per-event totals over the measured calls and its per-call times."""
    cell = cell_name(binary, "native", run)
    with staged(binary) as exe:
        work = exe.parent
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        env = _env({
            "SVE_HARNESS_CALLS": str(s.calls), "SVE_HARNESS_WARMUP": str(s.warmup),
            "SVE_HARNESS_FLUSH_BYTES": str(s.flush_bytes), "SVE_HARNESS_TIMES": str(work / "times.txt"),
            "SVE_HARNESS_PERF_CTL_FD": str(ctl_w), "SVE_HARNESS_PERF_ACK_FD": str(ack_r),
        })
        cmd = perf_command(s.perf, list(s.events), work / "perf.csv", (ctl_r, ack_w), s.core, exe, run.argv())
        if s.fixed_layout:
            # No address randomisation (setarch -R) where counts are compared exactly: it moved a
            # whole process's count by 4 instructions (docs/guide/arm64-node.md).
            cmd = [shutil.which("setarch") or "setarch", platform.machine(), "-R", *cmd]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                                  pass_fds=(ctl_r, ctl_w, ack_r, ack_w))
        finally:
            for fd in (ctl_r, ctl_w, ack_r, ack_w):
                os.close(fd)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            msg = [ln for ln in proc.stderr.splitlines() if not ln.startswith("Events ")][-1:] or [f"exit {proc.returncode}"]
            if proc.returncode == 3:
                msg.append(f"the CPU does not offer VL {run.vl}: set perf/vector_lengths to VLs it offers (A64FX: 128, 256, 512)")
            raise RunError(f"{cell}: {'; '.join(msg)} (exit {proc.returncode}; command: {' '.join(cmd)})")
        fields = parse_ok_line(proc.stdout, cell)
        rows = parse_csv((work / "perf.csv").read_text())
        if len(rows) != len(s.events):
            raise RunError(f"{cell}: perf reported {len(rows)} counters for {len(s.events)} events ({[r['event'] for r in rows]})")
        if not (work / "times.txt").exists():
            raise RunError(f"{cell}: the kernel wrote no call times: is it linked with roi_perf.o?")
        times = parse_times((work / "times.txt").read_text(), cell, s.calls)
    for ev, row in zip(s.events, rows):
        row["event"] = ev  # perf may print it as e.g. cycles:u
    return {"vl_seen": int(fields["vl"]), "checksum": fields["checksum"], "counters": rows,
            "times_ns": times, "seconds": round(seconds, 3), "command": cmd}


def unsupported(event: str) -> dict[str, Any]:
    """A counter of an event the process was not asked to count here (an emulated node's)."""
    return {"event": event, "value": None, "unit": "", "status": UNSUPPORTED, "running_pct": None}


# --- the job: every cell of one native binary, `processes` processes each ---------------------

def run_job(plan: Plan, log: TextIO) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Probe the events, run every cell's processes; per process: counters, per-call times."""
    p = plan.settings
    if p.get("guest"):
        return perf_guest.run_job(plan, log)
    binary = Path(plan.binary)
    probe = probe_events(p["perf"], list(p["events"]))
    accepted = [ev for ev, st in probe.items() if st != UNKNOWN]
    if not accepted:
        raise RunError(f"perf accepts none of the events {list(p['events'])} here")
    machine = emulated_machine()
    if machine is not None:
        # The guest's rule (perf_guest): an emulated machine's cycles are virtual time and its
        # cache and bus events read 0 or nothing, so only instructions is a measurement there.
        if perf_guest.EVENT not in accepted:
            raise RunError(f"this AArch64 node is emulated ({machine}): only {perf_guest.EVENT} is measured there; "
                           f"add it to the sweep's perf: events")
        probe = {ev: st if ev == perf_guest.EVENT or st == UNKNOWN else UNSUPPORTED for ev, st in probe.items()}
        accepted = [perf_guest.EVENT]
    s = Settings(p["perf"], tuple(accepted), p["calls"], p["warmup"], p["flush_bytes"], p["core"],
                 fixed_layout=machine is not None)
    processes = p["processes"]
    records = []
    for i, run in enumerate(plan.runs, 1):
        procs = []
        for _ in range(processes):
            rec = run_process(binary, run, s)
            check_vl_seen(binary, "native", run, rec["vl_seen"])
            rec["counters"] += [unsupported(ev) for ev, st in probe.items() if st == UNSUPPORTED and ev not in s.events]
            procs.append(rec)
        mean_ns = statistics.mean(t for r in procs for t in r["times_ns"])
        print(f"[{i}/{len(plan.runs)}] {cell_name(binary, 'native', run)}: {processes} processes x {s.calls} calls, "
              f"{mean_ns / 1000:.1f} us/call", file=log, flush=True)
        records.append({"vl": run.vl, "size": run.size, "op": run.op, "dtype": run.dtype, "argv": run.argv(),
                        "checksum": procs[0]["checksum"], "command": procs[0]["command"],
                        "processes": [{k: r[k] for k in ("counters", "times_ns", "seconds")} for r in procs]})
    extra = {"cpu": host_cpu(), "traffic": p["traffic"], "events": probe, "calls": s.calls, "warmup": s.warmup,
             "flush_bytes": s.flush_bytes, "core": s.core, "processes": processes}
    if machine is not None:
        # Recorded as the guest's runs are (the summary's tools line, the labels, perf_guest_check).
        versions = plan.meta.get("versions", {})
        cpu = extra["cpu"]
        extra |= {"cpu": f"emulated AArch64 node ({cpu}; {machine}): {perf_guest.LABEL}",
                  "caveat": perf_guest.LABEL,
                  GUEST_META: {"node": True, "counter": versions.get(NAME, p["perf"]), "kernel": platform.release(),
                               "emulator": machine, "cpu_model": "a64fx" if cpu == A64FX_CPU else "max",
                               "compiler": next((v for k, v in versions.items() if k.startswith("compiler.")), "?")}}
    return extra, records
