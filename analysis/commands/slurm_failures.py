"""After a sweep through Slurm failed: one line per failed Slurm job (analysis.commands.slurm);
after it was stopped, the one line of its cancelled jobs.

Snakemake's log records each failed job: a job alone as an `Error in rule` block, a group job as
the group's record (its Slurm log, its members) with the members' own records indented under
it. Each becomes one line naming the cells, Slurm's state and reason (scontrol keeps a finished
job for MinJobAge) and the Slurm job's log.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from analysis.commands.slurm_snakemake import CANCELLED_MARK, cancel_run


@dataclass
class Failure:
    rule: str  # the rule, or for a group job its first member's
    output: str
    jobid: str
    message: str
    log: str = ""  # the Slurm job's log (.snakemake/slurm_logs/...)
    group: str = ""  # a group job's group
    members: tuple[tuple[str, str], ...] = ()  # a group job's (rule, output), its markers left out


ERROR_BLOCK = re.compile(r"^Error in rule (\w+):\n((?:[ \t]+.*\n?)*)", re.M)
# Snakemake's record of a failed group job: the group, the Slurm log, then each member.
GROUP_BLOCK = re.compile(r"^    message: Error in group (\S+)\n    log: (\S+).*\n    jobs:\n((?:        .*\n?)*)", re.M)
GROUP_MEMBER = re.compile(r"^        rule (\w+):\n(?:            (?!output:).*\n)*            output: (.*)$", re.M)
# The marker jobs that tie a group together (analysis/core/groups.py): never the cause.
MARKERS = ("build_group_done", "cell_group_done")


def slurm_log(paths: str) -> str:
    """The Slurm job's log among a `log:` field's paths."""
    found = [p.strip() for p in paths.split(" (check")[0].split(",") if "slurm_logs" in p]
    return found[0] if found else ""


def failures(log: str) -> list[Failure]:
    """The failed Slurm jobs of Snakemake's log: its `Error in rule` blocks (a job alone) and its
    group records (a group job, whose members' own records are indented under it)."""
    found = []
    for m in ERROR_BLOCK.finditer(log):
        fields = dict(re.findall(r"^\s+(\w+): (.*)$", m.group(2), re.M))
        jobid = fields.get("external_jobid", "")
        if not jobid:
            ids = re.findall(r"SLURM-job '(\d+)'", fields.get("message", ""))
            jobid = ids[0] if ids else ""
        found.append(Failure(m.group(1), fields.get("output", "").split(",")[0].strip(), jobid, fields.get("message", ""),
                             slurm_log(fields.get("log", ""))))
    for m in GROUP_BLOCK.finditer(log):
        members = tuple((r, out.split(",")[0].strip()) for r, out in GROUP_MEMBER.findall(m.group(3)) if r not in MARKERS)
        ids = re.findall(r"/(\d+)\.log$", m.group(2))
        rule, output = members[0] if members else ("", "")
        found.append(Failure(rule, output, ids[0] if ids else "", "", m.group(2), m.group(1), members))
    return found


def what_failed(f: Failure, shown: int = 3) -> str:
    """A job alone: its rule and cell; a group job: its group and its first cells."""
    if not f.group:
        return f"{f.rule} {cell_name(f.output)}"
    # Sorted: Snakemake lists a group's members in no fixed order; the cells first (a group of
    # the whole sweep holds builds and the tail too).
    names = [name for _, name in sorted((not is_cell(out), f"{rule} {cell_name(out)}") for rule, out in f.members)]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"group {f.group} ({', '.join(names[:shown])}{more})"


def is_cell(output: str) -> bool:
    """`<results>/raw/<backend>/<compiler>/<build>/<cpu>/<kernel>-<variant>.json`: a count cell."""
    parts = Path(output).parts
    return "raw" in parts and len(parts) - parts.index("raw") == 6


def cell_name(output: str) -> str:
    """`<results>/raw/<backend>/<compiler>/<build>/<cpu>/<kernel>-<variant>.json` as a cell."""
    parts = Path(output).parts
    if is_cell(output):
        backend, compiler, build, cpu, name = parts[parts.index("raw") + 1:]
        return f"{name.removesuffix('.json')} ({backend} {compiler} {build} {cpu})"
    return output or "?"


def slurm_state(jobid: str) -> tuple[str, str]:
    """(state, reason) of a Slurm job from scontrol, which keeps finished jobs for MinJobAge."""
    if not jobid:
        return "", ""
    proc = subprocess.run(["scontrol", "-o", "show", "job", jobid], capture_output=True, text=True, timeout=60)
    fields = dict(re.findall(r"(\w+)=(\S*)", proc.stdout))
    return fields.get("JobState", ""), fields.get("Reason", "")


REASON_TEXT = {"TimeLimit": "killed at its time limit", "NodeDown": "its node went down",
               "NonZeroExitCode": "its command failed (its log is above)", "None": "", "": ""}


def failure_line(f: Failure, state: str, reason: str) -> str:
    if not state:
        m = re.search(r"SLURM status is: '(\w+)'", f.message)
        state = m.group(1) if m else "FAILED"
    why = REASON_TEXT.get(reason, reason)
    if state == "CANCELLED":
        # Slurm keeps the reason the job last waited for (Resources, Priority): not why it ended.
        why = "cancelled (scancel)"
    if state == "FAILED" and not why:
        why = REASON_TEXT["NonZeroExitCode"]
    return (f"error: {what_failed(f)}: Slurm job {f.jobid or '?'} {state}" + (f", {why}" if why else "")
            + (f"; Slurm log: {f.log}" if f.log else "") + "; rerun the same command to complete only what is missing")


def echo(proc: subprocess.Popen, log: list[str], caught: list[int]) -> None:
    """Snakemake's output to the terminal and the log. After a stop signal only to the log: its
    shutdown says nothing the one line of the stop (cancelled_line) does not."""
    assert proc.stderr is not None
    for line in proc.stderr:
        log.append(line)
        if not caught and not line.startswith(CANCELLED_MARK):
            sys.stderr.write(line)
            sys.stderr.flush()


def run_id(log: str) -> str | None:
    """The executor's id of the run, which names each of its Slurm jobs (printed before the first
    submission)."""
    found = re.search(r"^SLURM run ID: (\S+)", log, re.M)
    return found.group(1) if found else None


def cancel_left(log: str) -> list[str]:
    """Cancel what is left of the run's Slurm jobs after Snakemake stopped (it cancels them
    itself, slurm_snakemake.cancel_whole_run; not when it was killed before); returns their ids."""
    rid = run_id(log)
    return cancel_run(rid) if rid else []


def cancelled_line(log: str) -> str:
    """What a stopped run did to its Slurm jobs, for the command's one line."""
    rid = run_id(log)
    if rid is None:
        return "no Slurm job had been submitted"
    ids = {i for line in log.splitlines() if line.startswith(CANCELLED_MARK) for i in line[len(CANCELLED_MARK):].split()}
    ids |= set(cancel_left(log))
    return f"{len(ids)} Slurm job{'' if len(ids) == 1 else 's'} of this sweep cancelled (scancel; run {rid})"
