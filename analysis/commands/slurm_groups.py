"""A Slurm profile's harness-groups (how the sweep's jobs become Slurm jobs) and its requests cut
to the nodes a partition has (analysis/commands/slurm.py prepares a sweep through Slurm with them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.core import config

# The profile's own section, read by the harness and taken out of what Snakemake gets.
GROUPS_KEY = "harness-groups"


class SlurmError(config.ConfigError):
    """Bad profile or an unusable cluster: one line, exit 2, nothing submitted."""


@dataclass(frozen=True)
class Groups:
    """How the sweep's jobs become Slurm jobs (the profile's harness-groups, analysis/core/groups.py)."""
    cores: int  # CPUs of one grouped Slurm job: Snakemake's --cores, its members side by side
    count_jobs: int  # the count cells share at most this many Slurm jobs
    min_cells: int  # and each holds at least this many (fewer groups for a small sweep)
    one_job_cells: int = 0  # a sweep of short jobs with at most this many cells is one Slurm job (0: never)

    def config(self) -> dict[str, str]:
        """The Snakemake config entries that turn the rules' groups on."""
        return {"slurm_count_jobs": str(self.count_jobs), "slurm_min_cells": str(self.min_cells),
                "slurm_one_job_cells": str(self.one_job_cells)}


# harness-groups' keys and the least value of each.
GROUP_KEYS = {"cores": 1, "count-jobs": 1, "min-cells": 1, "one-job-cells": 0}


def groups_of(prof: dict[str, Any], name: str | None) -> Groups:
    section = prof.get(GROUPS_KEY) or {}
    values = {}
    for key, least in GROUP_KEYS.items():
        value = section.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise SlurmError(f"the Slurm profile {name or 'slurm'} needs {GROUPS_KEY}: {key}: a whole number >= {least} "
                             f"(it has {value!r}); nothing was submitted")
        values[key] = value
    return Groups(values["cores"], values["count-jobs"], values["min-cells"], values["one-job-cells"])


def fit_to_nodes(prof: dict[str, Any], grouped: Groups, cpus: int, memory_mb: int
                 ) -> tuple[dict[str, Any], Groups, list[str]]:
    """The profile's requests cut to the partition's largest node: a job asking more CPUs or
    memory than any node has never starts (sbatch: "Requested node configuration is not
    available"). So a profile written for other nodes (a64fx: 48 cores, 16 GB a measurement)
    runs on the nodes there are. Returns what was cut, each "where FROM -> TO", for the line
    that says so (fitted_line)."""
    cut: list[str] = []
    limits = {"cpus_per_task": cpus, "mem_mb": memory_mb}

    def cap(where: str, value: Any, most: int) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value > most:
            cut.append(f"{where} {value} -> {most}")
            return most
        return value

    def fit(where: str, res: dict[str, Any]) -> dict[str, Any]:
        return {k: cap(f"{where}.{k}", v, limits[k]) if k in limits else v for k, v in res.items()}

    cores = cap(f"{GROUPS_KEY}.cores", grouped.cores, cpus)
    out = {**prof, "default-resources": fit("default-resources", prof.get("default-resources") or {})}
    if prof.get("set-resources"):
        out["set-resources"] = {rule: fit(f"set-resources.{rule}", res) for rule, res in prof["set-resources"].items()}
    if prof.get("set-threads"):
        out["set-threads"] = {rule: cap(f"set-threads.{rule}", n, cpus) for rule, n in prof["set-threads"].items()}
    return out, Groups(cores, grouped.count_jobs, grouped.min_cells, grouped.one_job_cells), cut


def fitted_line(name: str | None, partition: str, cpus: int, memory_mb: int, cut: list[str]) -> str:
    return (f"slurm: the profile {name or 'slurm'} asks more than partition {partition}'s nodes have "
            f"(at most {cpus} CPU{'s' if cpus != 1 else ''} and {memory_mb} MB), so its jobs ask for that: "
            + ", ".join(cut))
