"""Slurm on an SVE node (issue 52 item 5), without a Slurm: the A64FX profile on a node smaller
than A64FX's, the local Slurm started by an ordinary user with sudo (the arm64 node's `harness`),
the installer's arm64 choice, and the checks of ci/aarch64-node's slurm step on canned Slurm
records and tables. Nothing here starts or asks the host's Slurm: every Slurm command is a fake."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.commands import slurm
from analysis.core import config
from conftest import REPO

SLURM_SH = REPO / "setup" / "slurm.sh"
CI_NODE = REPO / "ci" / "node"


def exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# --- the A64FX profile on the nodes there are ------------------------------------------------------

def a64fx() -> tuple[dict, slurm.Groups]:
    prof = slurm.load_profile("a64fx", "acct", "harness")
    return {k: v for k, v in prof.items() if k not in slurm.HARNESS_KEYS}, slurm.groups_of(prof, "a64fx")


def test_the_a64fx_profile_on_a_node_of_one_cpu_asks_for_what_the_node_has() -> None:
    """The arm64 node under -icount has one vCPU and about 3.9 GB: Slurm never starts a job asking
    for A64FX's 48 cores or 16 GB ("Requested node configuration is not available")."""
    prof, grouped = a64fx()
    out, fitted, cut = slurm.fit_to_nodes(prof, grouped, 1, 3915)
    perf = out["set-resources"]["measure_perf"]
    assert (perf["cpus_per_task"], perf["mem_mb"], perf["runtime"]) == (1, 3915, 240)
    assert perf["slurm_extra"] == "'--exclusive'"  # still the whole node
    assert out["set-threads"]["measure_perf"] == 1
    assert fitted == slurm.Groups(1, 4, 48, 0)
    assert out["set-resources"]["count_qemu"] == {"runtime": 5, "mem_mb": 600}  # fits: untouched
    assert cut == ["harness-groups.cores 48 -> 1", "set-resources.simulate_gem5.mem_mb 4000 -> 3915",
                   "set-resources.measure_perf.mem_mb 16000 -> 3915", "set-resources.measure_perf.cpus_per_task 48 -> 1",
                   "set-threads.measure_perf 48 -> 1"]
    assert prof["set-resources"]["measure_perf"]["cpus_per_task"] == 48  # the profile read is left as it was


def test_a_profile_that_fits_is_left_as_it_is() -> None:
    prof, grouped = a64fx()
    assert slurm.fit_to_nodes(prof, grouped, 48, 28000) == (prof, grouped, [])


def test_prepare_cuts_the_profile_to_the_partition_and_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"%P|%N|%t|%E": "harness*|node|idle|none\n", "%N|%m|%t": "node|3915|idle\n", "%N|%c|%t": "node|1|idle\n"}

    def sinfo(cmd: list[str]) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(cmd, 0, answers.get(cmd[-1], ""), "")

    monkeypatch.setattr(slurm, "_run", sinfo)
    monkeypatch.setattr(slurm, "use_local_conf", lambda: None)
    monkeypatch.setattr(slurm.shutil, "which", lambda c: f"/usr/bin/{c}")
    plan = slurm.prepare("a64fx", "acct", "harness")
    assert plan.groups.cores == 1 and plan.profile["set-resources"]["measure_perf"]["mem_mb"] == 3915
    assert plan.fitted == ("slurm: the profile a64fx asks more than partition harness's nodes have (at most 1 CPU "
                           "and 3915 MB), so its jobs ask for that: harness-groups.cores 48 -> 1, "
                           "set-resources.simulate_gem5.mem_mb 4000 -> 3915, set-resources.measure_perf.mem_mb "
                           "16000 -> 3915, set-resources.measure_perf.cpus_per_task 48 -> 1, "
                           "set-threads.measure_perf 48 -> 1")


# --- setup/slurm.sh by an ordinary user ----------------------------------------------------------

@pytest.fixture
def as_user(tmp_path: Path):
    """setup/slurm.sh as uid 1000 (a fake `id`), with a logging fake sudo and daemons that only
    log: nothing real starts, whatever the script does."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    log.write_text("")
    exe(bindir / "id", '#!/bin/bash\n[[ "$1" == -u ]] && { echo 1000; exit 0; }\nexec /usr/bin/id "$@"\n')
    for d in ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "scontrol", "squeue", "scancel"):
        exe(bindir / d, f'#!/bin/bash\necho "{d} $*" >>"$SHIM_LOG"\nexit 1\n')

    def run(action: str, sudo_rc: int) -> tuple[subprocess.CompletedProcess, list[str]]:
        exe(bindir / "sudo", f'#!/bin/bash\necho "sudo $*" >>"$SHIM_LOG"\nexit {sudo_rc}\n')
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SHIM_LOG": str(log),
               "HARNESS_CACHE": str(tmp_path / "cache")}
        proc = subprocess.run(["bash", str(SLURM_SH), action], capture_output=True, text=True, env=env, timeout=60)
        return proc, log.read_text().splitlines()

    return run


@pytest.mark.parametrize("action", ["start", "stop"])
def test_a_user_with_sudo_starts_and_stops_the_local_slurm_through_it(as_user, tmp_path: Path, action: str) -> None:
    """The daemons run as root (slurmd starts each job as its user). The arm64 node's user (sudo,
    no root) ran the script itself: slurmctld and the link in /run could not start or be made.
    `stop` asks for root only when a daemon runs: here a process named munged, in its pid file."""
    cache = tmp_path / "cache"
    daemon = tmp_path / "daemon" / "munged"
    daemon.parent.mkdir()
    shutil.copy2("/bin/sleep", daemon)
    with subprocess.Popen([str(daemon), "60"]) as munged:
        try:
            if action == "stop":
                (cache / "slurm" / "run").mkdir(parents=True)
                (cache / "slurm" / "run" / "munged.pid").write_text(f"{munged.pid}\n")
            proc, calls = as_user(action, 0)
        finally:
            munged.kill()
    assert proc.returncode == 0, proc.stderr
    assert calls == ["sudo -n true", f"sudo -n env HARNESS_CACHE={cache} bash {SLURM_SH} {action}"]
    assert cache.is_dir()  # made by the user, before root writes into it


def test_a_user_without_sudo_is_told_who_can_start_it(as_user, tmp_path: Path) -> None:
    proc, calls = as_user("start", 1)
    assert proc.returncode == 1
    assert proc.stderr == ("setup/slurm.sh: the local Slurm's daemons run as root (slurmd starts each job as its "
                           "user), and this user has no sudo: run it as root, or as a user with password-less sudo\n")
    assert calls == ["sudo -n true"]  # no daemon was asked
    assert not (tmp_path / "cache").exists()


# --- the installer on arm64 ------------------------------------------------------------------------

def test_on_arm64_with_slurm_the_installer_adds_slurm_and_munge_to_the_native_toolchain() -> None:
    proc = subprocess.run(["bash", str(REPO / "setup" / "install.sh"), "--print-packages", "--with-slurm"],
                          capture_output=True, text=True, env={**os.environ, "HARNESS_HOST_ARCH": "arm64"}, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.split() == ["binutils", "qemu-user", "gcc", "libc6-dev", "make", "python3", "python3-venv",
                                   "git", "linux-perf", "slurm-wlm", "munge"]


# --- ci/aarch64-node's slurm step ----------------------------------------------------------------

def test_the_slurm_step_boots_as_the_perf_steps_and_runs_a_small_a64fx_sweep() -> None:
    text = (REPO / "ci" / "aarch64-node").read_text()
    assert "slurm" in text.split("STEPS=(")[1].split(")")[0].split()
    start = text.index("slurm) start slurm ")
    line = text[start:text.index(";;", start)]
    assert "ci/node/slurm-check.sh ci/node/slurm.yaml" in line and "--cpu a64fx --icount --smp 1" in line
    small, whole = (config.load(REPO / "ci" / "node" / f) for f in ("slurm.yaml", "a64fx.yaml"))
    assert small.perf is not None and small.perf.sve != "off" and small.backends == ["qemu"]
    assert list(small.cpu_models) == ["a64fx"] and set(small.perf.vector_lengths) < set(whole.perf.vector_lengths)


def test_the_slurm_check_s_bad_usage_is_one_line() -> None:
    proc = subprocess.run([str(CI_NODE / "slurm-check.sh")], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, "ci/node/slurm-check.sh: usage: ci/node/slurm-check.sh CONFIG "
                                                 "(a sweep file with a perf section)\n")


JOB = ("JobId={id} JobName={name} UserId=harness(1000) Comment={comment} JobState={state} Reason=None "
       "StartTime={start} EndTime={end} Partition=harness NodeList=node NumCPUs=1 OverSubscribe={over} Contiguous=0")


def scontrol(tmp_path: Path, jobs: list[dict[str, str]]) -> dict[str, str]:
    """PATH with a fake `scontrol show job -o` printing these jobs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "jobs.txt").write_text("".join(JOB.format(**j) + "\n" for j in jobs))
    exe(bindir / "scontrol", f'#!/bin/bash\ncat {tmp_path / "jobs.txt"}\n')
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def job(i: int, comment: str, start: str, end: str, over: str = "NO", name: str = "run1") -> dict[str, str]:
    return {"id": str(i), "name": name, "comment": comment, "state": "COMPLETED", "over": over,
            "start": f"2026-11-28T16:00:{start}", "end": f"2026-11-28T16:00:{end}"}


def exclusive_jobs(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CI_NODE / "exclusive-jobs"), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_measurement_jobs_that_ran_exclusive_and_alone_pass(tmp_path: Path) -> None:
    env = scontrol(tmp_path, [job(1, "group_build_gcc", "00", "10", over="OK"),
                              job(2, "rule_measure_perf_wildcards_a", "10", "20"),
                              job(3, "rule_measure_perf_wildcards_b", "20", "30")])
    proc = exclusive_jobs(env, "run1", "2")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1] == ("ci/node/exclusive-jobs: run run1: 3 Slurm jobs, 2 measurement jobs of "
                                            "2 planned, 2 exclusive and alone")


def test_a_measurement_beside_another_job_or_not_exclusive_fails_naming_it(tmp_path: Path) -> None:
    env = scontrol(tmp_path, [job(1, "group_cells_1of1", "05", "15", over="OK"),
                              job(2, "rule_measure_perf_wildcards_a", "10", "20"),
                              job(3, "rule_measure_perf_wildcards_b", "20", "30", over="OK"),
                              job(4, "rule_measure_perf_wildcards_c", "40", "50", name="another-run")])
    proc = exclusive_jobs(env, "run1", "2")
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "ci/node/exclusive-jobs: job 2 rule_measure_perf_wildcards_a: job 1 (group_cells_1of1) ran beside it",
        "ci/node/exclusive-jobs: job 3 rule_measure_perf_wildcards_b: OverSubscribe=OK, not exclusive",
        "ci/node/exclusive-jobs: run run1: 3 Slurm jobs, 2 measurement jobs of 2 planned, 0 exclusive and alone"]


def test_fewer_measurement_jobs_than_planned_fail(tmp_path: Path) -> None:
    env = scontrol(tmp_path, [job(2, "rule_measure_perf_wildcards_a", "10", "20")])
    assert exclusive_jobs(env, "run1", "11").returncode == 1
    assert exclusive_jobs(env, "run1").returncode == 2


PERF_HEAD = "kernel,variant,vl,size,metric,status,unit,running_pct,n,mean,std,min,max\n"
COUNTS_HEAD = "kernel,variant,vl,size,metric,value,schema_version\n"


def results(path: Path, instructions: str, time_ns: str, roi: str = "20482", most: str | None = None) -> Path:
    """`most`: the most process's count of the cell where it is not `instructions`."""
    path.mkdir()
    (path / "counts.csv").write_text(COUNTS_HEAD + f"copy,acle_4v,512,4096,roi.total,{roi},2\n")
    (path / "perf.csv").write_text(
        PERF_HEAD + f"copy,acle_4v,512,4096,instructions,ok,,100.0,3,{instructions},0.0,{instructions},{most or instructions}\n"
        + "copy,acle_4v,512,4096,cycles,unsupported,,,0,,,,\n"
        + f"copy,acle_4v,512,4096,time_per_call,ok,ns,,3,{time_ns},1.0,{time_ns},{time_ns}\n")
    return path


def compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CI_NODE / "compare-tables"), str(a), str(b)], capture_output=True,
                          text=True, timeout=60)


def test_tables_equal_but_for_their_times_are_equal(tmp_path: Path) -> None:
    proc = compare(results(tmp_path / "a", "1543.0", "810.5"), results(tmp_path / "b", "1543.0", "799.0"))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines() == [
        "ci/node/compare-tables: counts.csv: 1 rows, all equal",
        "ci/node/compare-tables: perf.csv: 3 rows, all equal (times not compared: bandwidth, cpu-clock, cycles, "
        "task-clock, time_per_call: virtual under -icount), counted metrics by their fewest or most process"]


def test_one_process_counting_more_is_judged_as_the_perf_check_judges_it(tmp_path: Path) -> None:
    """Measured in the node: of 378 perf rows one differed, one process of three counting 9
    instructions a call more in the sweep without Slurm; the cell's fewest process counted the
    same in both, as the perf check asks (a cell is equal when its fewest or most process is)."""
    proc = compare(results(tmp_path / "a", "1482.5", "810.5"),
                   results(tmp_path / "b", "1482.5", "810.5", most="1491.5"))
    assert proc.returncode == 0, proc.stdout


def test_a_differing_count_or_instruction_row_fails_naming_it(tmp_path: Path) -> None:
    proc = compare(results(tmp_path / "a", "1543.0", "810.5"), results(tmp_path / "b", "1544.0", "810.5", roi="20483"))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "ci/node/compare-tables: counts.csv: copy/acle_4v/512/4096/roi.total: value 20482 != 20483" in lines
    assert ("ci/node/compare-tables: perf.csv: copy/acle_4v/512/4096/instructions: mean 1543.0 != 1544.0, "
            "min 1543.0 != 1544.0, max 1543.0 != 1544.0") in lines


@pytest.mark.skipif(not Path("/usr/sbin/slurmd").exists(), reason="slurm-wlm is not installed (./harness setup --with-slurm)")
def test_an_ordinary_user_s_path_finds_the_slurm_daemons() -> None:
    """Debian gives an ordinary user (the arm64 node's harness) no sbin on PATH, where slurmd,
    slurmctld and munged are: the installer took them for missing although installed."""
    proc = subprocess.run(["bash", str(REPO / "setup" / "install.sh"), "--check", "--with-slurm"], capture_output=True,
                          text=True, env={**os.environ, "PATH": "/usr/local/bin:/usr/bin:/bin"}, timeout=120)
    assert "setup/install.sh --check" in proc.stdout
    assert [line for line in proc.stdout.splitlines() if "not on PATH" in line] == []
