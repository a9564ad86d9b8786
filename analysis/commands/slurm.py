"""Sweeps through Slurm: `./harness sweep --config F --slurm [PROFILE]`.

Snakemake's Slurm executor plugin submits every job of the workflow (builds, count, gem5, perf,
collect, plot) with sbatch; this module prepares what it needs and reads what went wrong:

- the profile: configs/profiles/slurm (any cluster) with PROFILE laid over it key by key
  (`a64fx` = configs/profiles/slurm-a64fx, or a directory of your own), the account and
  partition of the command line on top; a CHANGE_ME account or partition is refused before
  anything is submitted;
- the cluster: sinfo must answer and the partition must have a node that can take jobs; a
  cluster without slurmdbd (accounting_storage/none, like the local one of setup/slurm.sh) gets
  its job states from squeue instead of sacct;
- the run: a watchdog stops the sweep with one line when every node of the partition goes
  down (pending jobs would otherwise wait forever), and a failed Slurm job is reported in one
  line naming its cells, Slurm's state and reason (CANCELLED, TIMEOUT, NODE_FAIL, ...) and its
  log (analysis.commands.slurm_failures).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from analysis.commands import guard
from analysis.commands.slurm_groups import (  # noqa: F401 (slurm.X, as before)
    GROUP_KEYS, GROUPS_KEY, Groups, SlurmError, fit_to_nodes, fitted_line, groups_of)
from analysis.commands.slurm_failures import cancel_left, cancelled_line, echo, failure_line, failures, slurm_state
from analysis.core import config

PROFILES = config.REPO / "configs" / "profiles"
# true: the executor's status checks at the profile's interval every time, not 10 s longer after
# each that saw no Slurm job end (analysis/commands/slurm_snakemake.py); a number: every that many
# seconds (the plugin's own interval takes whole seconds only). For a small or local Slurm.
STEADY_KEY = "harness-steady-status-checks"
# true: a Slurm job's Snakemake runs its jobs itself, not through a second Snakemake under srun
# (the jobstep executor's way, which places each step in its CPUs on a cluster). For a node that
# binds no CPU (the local Slurm: TaskPlugin=task/none) the second start is only cost.
DIRECT_KEY = "harness-direct-job-step"
HARNESS_KEYS = (GROUPS_KEY, STEADY_KEY, DIRECT_KEY)
GENERIC = PROFILES / "slurm"
PLACEHOLDER = "CHANGE_ME"
# Keys whose values are mappings (per resource, per rule): an overlay merges into them.
MERGED_KEYS = ("default-resources", "set-resources", "set-threads", GROUPS_KEY)
# sinfo's short states of a node that can run (or is running) jobs.
UP_STATES = {"idle", "mix", "alloc", "comp", "resv", "plnd"}
# A drained node (maintenance) finishes the jobs it runs and takes no new one until it is
# resumed: a sweep under way waits for it, saying so, instead of cancelling what runs there.
DRAINED_STATES = {"drng", "drain"}
WATCH_SECONDS = 5.0
# The local Slurm of setup/slurm.sh, used when the environment names no other.
LOCAL_CONF = Path(os.environ.get("HARNESS_CACHE") or
                  Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sve-harness") / "slurm" / "slurm.conf"


def profile_dirs(name: str | None) -> list[Path]:
    """The generic profile, then the one asked for (if any) laid over it."""
    if not name or name in ("slurm", "generic"):
        return [GENERIC]
    named = PROFILES / f"slurm-{name}"
    path = named if (named / "config.yaml").is_file() else Path(name)
    if path.is_file():
        path = path.parent
    if not (path / "config.yaml").is_file():
        known = sorted(p.name[len("slurm-"):] for p in PROFILES.glob("slurm-*") if (p / "config.yaml").is_file())
        raise SlurmError(f"--slurm {name}: no such profile; use one of {', '.join(known)} or a directory with a config.yaml")
    return [GENERIC, path]


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`: scalars replace, the per-resource and per-rule mappings merge
    (an overlay that sizes measure_perf keeps the generic profile's other rules and resources)."""
    out = dict(base)
    for key, value in over.items():
        if key in MERGED_KEYS and isinstance(value, dict) and isinstance(out.get(key), dict):
            merged = dict(out[key])
            for k, v in value.items():
                merged[k] = {**merged[k], **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
            out[key] = merged
        else:
            out[key] = value
    return out


def load_profile(name: str | None, account: str | None = None, partition: str | None = None) -> dict[str, Any]:
    """The merged profile with the command line's account and partition; refuses placeholders."""
    prof: dict[str, Any] = {}
    for d in profile_dirs(name):
        try:
            data = yaml.safe_load((d / "config.yaml").read_text()) or {}
        except yaml.YAMLError as e:
            raise SlurmError(f"{d / 'config.yaml'} is not valid YAML: {str(e).splitlines()[0]}")
        prof = merge(prof, data)
    defaults = dict(prof.get("default-resources") or {})
    for key, value in (("slurm_account", account), ("slurm_partition", partition)):
        if value:
            defaults[key] = value
            for res in (prof.get("set-resources") or {}).values():
                res.pop(key, None)
    prof["default-resources"] = defaults
    check_placeholders(prof, name)
    return prof


def check_placeholders(prof: dict[str, Any], name: str | None) -> None:
    places = [("default-resources", prof.get("default-resources") or {})]
    places += [(f"set-resources.{rule}", res) for rule, res in (prof.get("set-resources") or {}).items()]
    for where, res in places:
        for key, flag in (("slurm_account", "--slurm-account"), ("slurm_partition", "--slurm-partition")):
            if str(res.get(key, "")).strip() == PLACEHOLDER:
                raise SlurmError(f"the Slurm profile {name or 'slurm'} has {key}: {PLACEHOLDER} ({where}); "
                                 f"give {flag} VALUE or write your site's value into the profile; nothing was submitted")


def partition_of(prof: dict[str, Any]) -> str | None:
    return (prof.get("default-resources") or {}).get("slurm_partition") or None


def use_local_conf() -> str | None:
    """Point the Slurm commands at the local Slurm when nothing else is configured."""
    if os.environ.get("SLURM_CONF") or Path("/etc/slurm/slurm.conf").exists() or not LOCAL_CONF.exists():
        return None
    os.environ["SLURM_CONF"] = str(LOCAL_CONF)
    return str(LOCAL_CONF)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def nodes(partition: str | None) -> tuple[str, list[tuple[str, str, str]]]:
    """(partition, [(node, state, reason)]) of the given or the default partition."""
    proc = _run(["sinfo", "-h", "-N", "-o", "%P|%N|%t|%E"])
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1]
        raise SlurmError(f"Slurm does not answer (sinfo: {said}); check the cluster, or start the local one with "
                         "./harness setup --with-slurm; nothing was submitted")
    rows = [line.split("|", 3) for line in proc.stdout.splitlines() if line.count("|") >= 3]
    if partition is None:
        default = [r[0] for r in rows if r[0].endswith("*")]
        if not default:
            raise SlurmError("the cluster has no default partition: give --slurm-partition P")
        partition = default[0]
    want = partition.rstrip("*")
    found = [(n, s.rstrip("*~#!%$@^-"), e) for p, n, s, e in rows if p.rstrip("*") == want]
    if not found:
        raise SlurmError(f"Slurm has no partition {want}; sinfo lists {', '.join(sorted({r[0].rstrip('*') for r in rows}))}")
    return want, found


def down_message(partition: str, found: list[tuple[str, str, str]]) -> str | None:
    """One line when no node of the partition can take a job, else None."""
    if any(state in UP_STATES for _, state, _ in found):
        return None
    listed = ", ".join(f"{n} {s}" + (f" (reason: {e})" if e and e != "none" else "") for n, s, e in found)
    return (f"Slurm partition {partition} has no node that can run jobs: {listed}; "
            f"fix the node (scontrol update nodename=NODE state=resume) and rerun the same command")


def drained_message(partition: str, found: list[tuple[str, str, str]]) -> str | None:
    """While a sweep runs: one line when the partition's only usable nodes are drained (their
    running jobs finish, the sweep's other jobs wait for a resume), else None."""
    if any(state in UP_STATES for _, state, _ in found):
        return None
    drained = [(n, s, e) for n, s, e in found if s in DRAINED_STATES]
    if not drained:
        return None
    listed = ", ".join(n + (f" (reason: {e})" if e and e != "none" else "") for n, _, e in drained)
    return (f"slurm: partition {partition}: {listed} drained; the Slurm jobs running there finish and keep their "
            f"results, the others wait until it is resumed (scontrol update nodename=NODE state=resume); "
            f"Ctrl-C stops the sweep, and the same command then completes only what is missing")


def preflight(prof: dict[str, Any]) -> str:
    """Slurm answers and the partition can run jobs; returns the partition."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        raise SlurmError("Slurm's sinfo/sbatch are not on PATH: run on a cluster's login node, "
                         "or start the local Slurm with ./harness setup --with-slurm")
    partition, found = nodes(partition_of(prof))
    msg = down_message(partition, found)
    if msg:
        raise SlurmError(msg + "; nothing was submitted")
    return partition


def up_nodes(partition: str, field: str, what: str) -> list[tuple[int, str]]:
    """[(value, node)] of one sinfo field (%m memory in MB, %c CPUs) of the partition's nodes that
    can run jobs; refuses (one line) when Slurm does not say it."""
    proc = _run(["sinfo", "-h", "-N", "-p", partition, "-o", f"%N|{field}|%t"])
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.count("|") == 2]
    found = [(int(v), n) for n, v, t in rows if v.isdigit() and t.rstrip("*~#!%$@^-") in UP_STATES]
    if proc.returncode != 0 or not found:
        raise SlurmError(f"Slurm did not say the {what} of partition {partition}'s nodes (sinfo -o {field}: "
                         f"{(proc.stderr or proc.stdout or 'no answer').strip()}); nothing was submitted")
    return found


def largest_node(partition: str) -> tuple[str, int]:
    """(node, its memory in MB): the partition's node with the most memory (RealMemory) among
    those that can run jobs, which the size check judges a sweep through it by."""
    memory_mb, node = max(up_nodes(partition, "%m", "memory"))
    return node, memory_mb


def most_cpus(partition: str) -> int:
    """The most CPUs of a node of the partition that can run jobs: more a job never gets there."""
    return max(up_nodes(partition, "%c", "CPUs"))[0]


def without_slurmdbd() -> bool:
    if shutil.which("scontrol") is None:
        return False
    proc = _run(["scontrol", "show", "config"])
    return bool(re.search(r"^AccountingStorageType\s*=\s*accounting_storage/none", proc.stdout, re.M))


def write_profile(prof: dict[str, Any], directory: Path) -> Path:
    if "slurm-status-command" not in prof and without_slurmdbd():
        # sacct has nothing to read without slurmdbd; squeue keeps finished jobs for MinJobAge.
        prof = {**prof, "slurm-status-command": "squeue"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    return directory


# --- the run ----------------------------------------------------------------------------------

@dataclass
class Plan:
    name: str | None
    profile: dict[str, Any]  # what Snakemake gets (without the harness's own section)
    partition: str
    local_conf: str | None
    groups: Groups
    largest: tuple[str, int]  # the partition's node with the most memory, and its MB (largest_node)
    steady: float | None = None  # the seconds between status checks, each time (harness-steady-status-checks)
    direct: bool = False  # the profile's harness-direct-job-step
    fitted: str | None = None  # the line saying what of the profile was cut to the partition's nodes (fit_to_nodes)

    def machine(self) -> config.Machine:
        """Where the jobs run, for the size check (not the submitting host)."""
        return config.slurm_nodes(self.partition, *self.largest)

    def config(self) -> dict[str, str]:
        """The Snakemake config entries of the Slurm path: the groups, and the largest node for
        the submitting Snakemake's own size check (rules/common.smk)."""
        node, memory_mb = self.largest
        return self.groups.config() | {"slurm_partition": self.partition, "slurm_node": node,
                                       "slurm_node_memory_mb": str(memory_mb)}

    def line(self) -> str:
        dirs = [str(d.relative_to(config.REPO)) if d.is_relative_to(config.REPO) else str(d) for d in profile_dirs(self.name)]
        return (f"slurm: partition {self.partition}, profile {' + '.join(dirs)}, count cells in at most "
                f"{self.groups.count_jobs} Slurm jobs of {self.groups.cores} CPUs (at least {self.groups.min_cells} cells each)"
                + (f", a sweep of at most {self.groups.one_job_cells} cells one Slurm job" if self.groups.one_job_cells else "")
                + (f", local Slurm (SLURM_CONF={self.local_conf})" if self.local_conf else ""))


def prepare(name: str | None, account: str | None, partition: str | None) -> Plan:
    """Everything that can refuse, before any work: profile, placeholders, Slurm, partition."""
    prof = load_profile(name, account, partition)
    groups = groups_of(prof, name)
    steady, direct = steady_seconds(prof, name), flag(prof, DIRECT_KEY, name)
    prof = {k: v for k, v in prof.items() if k not in HARNESS_KEYS}
    conf = use_local_conf()
    partition = preflight(prof)
    largest = largest_node(partition)
    cpus = most_cpus(partition)
    prof, groups, cut = fit_to_nodes(prof, groups, cpus, largest[1])
    fitted = fitted_line(name, partition, cpus, largest[1], cut) if cut else None
    return Plan(name, prof, partition, conf, groups, largest, steady, direct, fitted)


def flag(prof: dict[str, Any], key: str, name: str | None) -> bool:
    """One of the profile's harness switches: true or false (absent: false), else refused."""
    value = prof.get(key, False)
    if not isinstance(value, bool):
        raise SlurmError(f"the Slurm profile {name or 'slurm'} has {key}: {value!r}: true or false; nothing was submitted")
    return value


# The plugin's default wait before its first status check (snakemake-executor-plugin-slurm 2.8.0).
PLUGIN_INIT_SECONDS = 40


def steady_seconds(prof: dict[str, Any], name: str | None) -> float | None:
    """The profile's harness-steady-status-checks as seconds between checks: absent or false,
    none (the plugin's growing waits); true, its slurm-init-seconds-before-status-checks."""
    value = prof.get(STEADY_KEY, False)
    if value is False:
        return None
    if value is True:
        value = prof.get("slurm-init-seconds-before-status-checks", PLUGIN_INIT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise SlurmError(f"the Slurm profile {name or 'slurm'} has {STEADY_KEY}: {prof.get(STEADY_KEY)!r}: "
                         "true, false or a number of seconds above 0; nothing was submitted")
    return float(value)


# setup/install.sh keeps the Slurm executor plugin out of site-packages (requirements-slurm.txt:
# Snakemake would import it at every local start, and it asks scontrol); only this path puts it in reach.
SLURM_SITE = Path(sys.prefix) / "slurm-executor"


def executor_env() -> dict[str, str]:
    return guard.pythonpath_env(SLURM_SITE)


def run(cmd: list[str], plan: Plan, pass_fds: tuple[int, ...] = ()) -> int:
    """Run Snakemake (cmd) through Slurm; returns its exit code (1 on a stopped or failed run).
    Ctrl-C, SIGTERM or SIGHUP to the command: Snakemake (a process group of its own, as
    guard.run starts it) gets a SIGINT and cancels the run's Slurm jobs; then Interrupted, whose
    line says how many were cancelled."""
    print(plan.line(), flush=True)
    if plan.fitted:
        print(plan.fitted, flush=True)
    prof, part = plan.profile, plan.partition
    with tempfile.TemporaryDirectory(prefix="sve-slurm-profile-") as tmp:
        pdir = write_profile(prof, Path(tmp) / "profile")
        # Before --config, which takes every word after it.
        n = len(guard.SNAKEMAKE)
        # Snakemake with the executor plugin's side adjusted (analysis/commands/slurm_snakemake.py).
        snakemake = [sys.executable, str(Path(__file__).with_name("slurm_snakemake.py")),
                     *([f"--steady={plan.steady}"] if plan.steady else []), *(["--direct"] if plan.direct else [])]
        log: list[str] = []
        stopped: list[str] = []
        done = threading.Event()
        with guard.started([*snakemake, "--profile", str(pdir), *cmd[n:]], stderr=subprocess.PIPE, text=True,
                           env=executor_env(), pass_fds=pass_fds) as (proc, caught):
            reader = threading.Thread(target=echo, args=(proc, log, caught), daemon=True)
            watcher = threading.Thread(target=_watch, args=(proc, part, stopped, done), daemon=True)
            reader.start()
            watcher.start()
            rc = guard.wait(proc, caught)
            done.set()
            reader.join()
            watcher.join()
    if caught:
        guard.end_group(proc)
        raise guard.Interrupted(caught[0], cancelled_line("".join(log)))
    if stopped:
        cancel_left("".join(log))
        print(f"error: {stopped[0]}", file=sys.stderr, flush=True)
        return 1
    if rc != 0:
        for f in failures("".join(log)):
            print(failure_line(f, *slurm_state(f.jobid)), file=sys.stderr, flush=True)
    return rc


def _watch(proc: subprocess.Popen, partition: str, stopped: list[str], done: threading.Event) -> None:
    """Stop the sweep (SIGINT: Snakemake cancels its Slurm jobs) when the partition has no node
    that can run jobs twice in a row, instead of waiting forever for pending jobs. A drained
    node is not down: its running jobs finish and are kept, the sweep waits for the resume (one
    line says so)."""
    strikes = 0
    said = False
    while not done.wait(WATCH_SECONDS):
        try:
            found = nodes(partition)
        except (SlurmError, subprocess.TimeoutExpired):
            continue
        drained = drained_message(*found)
        if drained:
            if not said:
                print(drained, file=sys.stderr, flush=True)
            said, strikes = True, 0
            continue
        said = False
        msg = down_message(*found)
        strikes = strikes + 1 if msg else 0
        if msg and strikes >= 2:
            stopped.append(msg + "; the sweep was stopped and its Slurm jobs cancelled")
            proc.send_signal(signal.SIGINT)
            return
