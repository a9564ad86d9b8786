"""Where a sweep's CPU seconds go (issue 53), from the records its processes write with
HARNESS_CPU_DIR set (analysis/core/cpu_record.py): five parts that add up to the sweep's CPU
seconds as bench measures them (the rusage of Snakemake and every process under it):

- one per backend the sweep ran (qemu where gem5 is hidden): the count jobs' tool processes, QEMU
  for qemu (what each count job's Python waited for);
- builds: the build rules' jobs (compilers, linkers and the shells that start them);
- count jobs' Python: the rest of each count job (its Python and its shell);
- other jobs: collect and plot (the tables, figures and summary);
- Snakemake: the sweep's CPU minus every job's: its planning, its per-job cost, the tools it
  runs while planning, and what no record holds (each shell's exit after its record, `times`'s
  millisecond rounding), which is printed beside it.

Every part is computed in whole milliseconds, Snakemake's as the total minus the others, so the
parts are a partition of the total: they add up to it exactly."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# bash's `times`: the shell's user and system time, then its children's: "0m1.234s 0m0.056s".
TIMES = re.compile(r"(\d+)m(\d+)\.(\d{3})s")
# A build rule's shell runs its command file, <build_dir>/cmds/<rule>/... (rules/build.smk).
BUILD_RULE = re.compile(r"\bbash '?[^ ']*/cmds/([a-z_]+)/")
COUNT_JOB = "-m analysis.stages.count "
# Beside one part per backend whose count jobs ran (named as the backend).
PARTS = ("builds", "count_python", "other_jobs", "snakemake")


class PartsError(Exception):
    """The records do not account for the sweep (a job without its record): one line saying so."""


@dataclass(frozen=True)
class Job:
    """One job's shell: its own and its children's CPU milliseconds, and what it ran."""
    own_ms: int
    children_ms: int
    command: str

    @property
    def ms(self) -> int:
        return self.own_ms + self.children_ms

    @property
    def kind(self) -> str:
        """count, the build rule's name, or other."""
        if COUNT_JOB in self.command:
            return "count"
        m = BUILD_RULE.search(self.command)
        return m.group(1) if m else "other"


def record_dir(work: Path) -> Path:
    """A new folder for a sweep's records under `work` (HARNESS_CPU_DIR)."""
    (work / "cpu").mkdir(parents=True)
    return work / "cpu"


def parse_job(text: str) -> Job:
    """A job record: two lines of `times`, then the command."""
    head, _, command = text.partition("\n")
    second, _, command = command.partition("\n")
    own, children = _times_ms(head), _times_ms(second)
    return Job(own, children, command)


def _times_ms(line: str) -> int:
    fields = TIMES.findall(line)
    if len(fields) != 2:
        raise PartsError(f"a job record's `times` line is unreadable: {line!r}")
    return sum(int(m) * 60_000 + int(s) * 1000 + int(ms) for m, s, ms in fields)


def read(where: Path) -> tuple[list[Job], dict[str, int], dict[str, dict[str, float]]]:
    """The jobs' records, the count jobs' tool processes per backend (milliseconds) and
    Snakemake's two records (start, end)."""
    jobs = [parse_job(p.read_text()) for p in sorted(where.glob("job-*"))]
    tools: dict[str, int] = {}
    snakemake: dict[str, dict[str, float]] = {}
    for p in sorted(where.glob("*.json")):
        kind = p.name.split("-", 1)[0]
        values = json.loads(p.read_text())
        if kind.startswith("children_"):
            backend = kind.removeprefix("children_")
            tools[backend] = tools.get(backend, 0) + round(1000 * values["children_s"])
        elif kind.startswith("snakemake_"):
            snakemake[kind.removeprefix("snakemake_")] = values
    # Every count job writes both records: a count job whose shell record has no tools record
    # beside it (or the reverse) would put its tools' CPU in the wrong part.
    counts, with_tools = sum(j.kind == "count" for j in jobs), len(list(where.glob("children_*")))
    if counts != with_tools:
        raise PartsError(f"{counts} count jobs recorded their shell but {with_tools} their tools: the records do not pair")
    return jobs, tools, snakemake


def parts(total_s: float, where: Path) -> dict[str, Any]:
    """The sweep's CPU seconds (`total_s`) in parts, from the records in `where`."""
    jobs, tools, snakemake = read(where)
    total = round(1000 * total_s)
    count_ms = sum(j.ms for j in jobs if j.kind == "count")
    builds = {k: sum(j.ms for j in jobs if j.kind == k) for k in sorted({j.kind for j in jobs} - {"count", "other"})}
    ms = {**dict(sorted(tools.items())),
          "builds": sum(builds.values()),
          "count_python": count_ms - sum(tools.values()),
          "other_jobs": sum(j.ms for j in jobs if j.kind == "other")}
    ms["snakemake"] = total - sum(ms.values())
    n_count = sum(j.kind == "count" for j in jobs)
    out: dict[str, Any] = {
        "total_cpu_ms": total, "parts_ms": ms,
        "jobs": {"count": n_count, "build": sum(1 for j in jobs if j.kind not in ("count", "other")),
                 "other": sum(j.kind == "other" for j in jobs)},
        "builds_by_rule_ms": builds,
        "count_python_per_job_ms": round(ms["count_python"] / n_count) if n_count else None,
    }
    if "start" in snakemake and "end" in snakemake:
        out.update(snakemake_split(ms["snakemake"], total, sum(j.ms for j in jobs), len(jobs), snakemake))
    return out


def snakemake_split(part: int, total: int, jobs_ms: int, n_jobs: int, rec: dict[str, dict[str, float]]) -> dict[str, int]:
    """Snakemake's part, from its records at the start of the jobs and at the end, in four pieces
    that add up to it: its own process until the end record (planning is what it took before the
    first job), its exit after that record, the tools it ran while planning (version checks), and
    the job CPU no record holds (each shell's exit after `times`, and `times`'s milliseconds)."""
    start, end = ({k: round(1000 * v) for k, v in rec[s].items()} for s in ("start", "end"))
    split = {"snakemake_self_ms": end["self_s"], "snakemake_exit_ms": total - end["self_s"] - end["children_s"],
             "snakemake_tools_ms": start["children_s"], "unrecorded_jobs_ms": end["children_s"] - jobs_ms - start["children_s"]}
    assert sum(split.values()) == part  # the pieces are the part's, by construction
    return {**split, "snakemake_planning_ms": start["self_s"],
            # Snakemake's own CPU while the jobs ran, per job: scheduling, checking outputs, logging.
            "snakemake_per_job_ms": round((end["self_s"] - start["self_s"]) / n_jobs) if n_jobs else 0}


def lines(p: dict[str, Any], wall_s: float, load: float) -> list[str]:
    """The printout: each part's CPU seconds and share, per-job figures for the count jobs'
    Python and Snakemake, and whether either is more than a tenth of the sweep."""
    total = p["total_cpu_ms"]
    share = {k: v / total if total else 0.0 for k, v in p["parts_ms"].items()}
    j = p["jobs"]
    notes = {
        "builds": f"{j['build']} build jobs: " + ", ".join(f"{k} {v / 1000:.1f}" for k, v in p["builds_by_rule_ms"].items()),
        "count_python": f"{j['count']} count jobs, {p['count_python_per_job_ms']} ms each{_tenth(share['count_python'])}",
        "other_jobs": f"{j['other']} jobs: collect, plot",
        "snakemake": (f"planning {p['snakemake_planning_ms'] / 1000:.1f} s before the first job, then "
                      f"{p['snakemake_per_job_ms']} ms per job for {sum(j.values())} jobs, its exit "
                      f"{p['snakemake_exit_ms'] / 1000:.1f}, tools it ran {p['snakemake_tools_ms'] / 1000:.1f}, job CPU "
                      f"no record holds {p['unrecorded_jobs_ms'] / 1000:.1f}{_tenth(share['snakemake'])}"
                      if "snakemake_self_ms" in p else "no Snakemake records: the rest of the sweep's CPU"),
    }
    out = [f"  CPU seconds by part ({total / 1000:.1f} CPU s, {wall_s:.1f} s wall, load average {load:.2f} at the start; "
           "the parts add up to the total):"]
    for k, v in p["parts_ms"].items():
        note = notes.get(k, f"{j['count']} count jobs' {k} processes")
        out.append(f"    {k:14s} {v / 1000:7.1f} CPU s {100 * share[k]:5.1f} %  ({note})")
    return out


def _tenth(share: float) -> str:
    """Issue 53 cuts the count jobs' Python and Snakemake where either is more than a tenth."""
    return "; more than a tenth of the sweep" if share > 0.1 else "; within a tenth of the sweep"
