"""Sweeps through Slurm (`./harness sweep --slurm`): the profiles and the refusals without a
Slurm, then a real single-node Slurm (setup/slurm.sh, slurm-wlm) for the tiny sweep, a cancelled
job and its recovery, nodes set down, and a gem5 cycle job (where gem5 is found)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from analysis.commands import bench, cli, slurm, slurm_failures
from analysis.core import config, groups, kernels
from conftest import REPO, SNAKEMAKE as SNAKEMAKE_CMD, snakemake

TINY = REPO / "tests" / "configs" / "slurm_tiny.yaml"
GEM5_TINY = REPO / "tests" / "configs" / "slurm_gem5.yaml"
PY = sys.executable


def harness_sweep(results: Path, build: Path, *extra: str, env: dict[str, str] | None = None,
                  config_file: Path = TINY, **kw) -> subprocess.CompletedProcess:
    cmd = [PY, "-m", "analysis.commands.cli", "sweep", "--config", str(config_file), "--set", f"results_dir={results}",
           "--set", f"build_dir={build}", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=1500, **kw)


# --- without a Slurm --------------------------------------------------------------------------

def test_a64fx_profile_is_laid_over_the_generic_one() -> None:
    prof = slurm.load_profile("a64fx", "acct1", "a64fx-part")
    perf = prof["set-resources"]["measure_perf"]
    # From the A64FX profile: a whole 48-core node for 4 hours; from the generic one: exclusive.
    assert (perf["cpus_per_task"], perf["runtime"], perf["mem_mb"]) == (48, 240, 16000)
    assert perf["slurm_extra"] == "'--exclusive'" and prof["set-threads"]["measure_perf"] == 48
    # Rules the A64FX profile does not mention keep the generic sizes; gem5's time is the sweep's.
    assert prof["set-resources"]["simulate_gem5"] == {"mem_mb": 4000}
    # A count cell: one A64FX core's minutes and share of the node's memory.
    assert prof["set-resources"]["count_qemu"] == {"runtime": 5, "mem_mb": 600}
    assert prof["default-resources"]["mem_mb"] == 600
    assert prof["harness-groups"] == {"cores": 48, "count-jobs": 4, "min-cells": 48, "one-job-cells": 0}
    assert prof["default-resources"]["slurm_account"] == "acct1"
    assert prof["default-resources"]["slurm_partition"] == "a64fx-part"
    assert prof["executor"] == "slurm"


def test_change_me_is_refused_in_one_line_before_anything(tmp_path: Path) -> None:
    """The A64FX profile's CHANGE_ME account reaches no sbatch: one line, exit 2, nothing written."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("sbatch", "sinfo", "squeue", "scontrol"):
        (fake / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {tmp_path / 'called'}\nexit 1\n")
        (fake / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    proc = harness_sweep(tmp_path / "r", tmp_path / "b", "--slurm", "a64fx", env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "slurm_account: CHANGE_ME" in lines[0] and "--slurm-account" in lines[0], lines
    assert not (tmp_path / "called").exists() and not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


def test_partition_change_me_is_refused_too() -> None:
    with pytest.raises(slurm.SlurmError, match="slurm_partition: CHANGE_ME .*--slurm-partition"):
        slurm.load_profile("a64fx", account="acct1")


def test_unknown_profile_is_one_line(tmp_path: Path) -> None:
    proc = harness_sweep(tmp_path / "r", tmp_path / "b", "--slurm", "nosuch")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --slurm nosuch: no such profile; use one of a64fx, local or a "
                                   "directory with a config.yaml")


def test_own_profile_directory_is_laid_over_the_generic_one(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("default-resources: {slurm_account: mylab}\n"
                                          "set-resources: {simulate_gem5: {runtime: 600}}\n")
    prof = slurm.load_profile(str(tmp_path))
    assert prof["default-resources"] == {"runtime": 10, "mem_mb": 1000, "cpus_per_task": 1, "slurm_account": "mylab"}
    assert prof["set-resources"]["simulate_gem5"] == {"runtime": 600, "mem_mb": 4000}


def test_a_slurm_that_does_not_answer_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for tool in ("sinfo", "sbatch"):
        (tmp_path / tool).write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller "
                                     "(connect failure)' >&2\nexit 1\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(slurm.SlurmError) as e:
        slurm.preflight(slurm.load_profile("local"))
    assert str(e.value) == ("Slurm does not answer (sinfo: slurm_load_partitions: Unable to contact slurm controller "
                            "(connect failure)); check the cluster, or start the local one with ./harness setup "
                            "--with-slurm; nothing was submitted")


# Snakemake's report of a job the executor saw fail (copied from a run against the local Slurm).
ERROR_LOG = """\
[Mon Nov 23 00:10:05 2026]
Error in rule count_qemu:
    message: SLURM-job '57' failed, SLURM status is: 'TIMEOUT'. Detailed failure reason unavailable (status command is not 'sacct').For further error details see the cluster/cloud log and the log files of the involved rule(s).
    jobid: 3
    input: /b/gcc/vla/bin/qemu/copy-acle_4v, /b/plugins/libinscount.so
    output: /r/raw/qemu/gcc/vla/max/copy-acle_4v.json
    log: /r/logs/count/qemu/gcc/vla/max/copy-acle_4v.log, /repo/.snakemake/slurm_logs/rule_count_qemu/gcc_vla_max_copy_acle_4v/57.log (check log file(s) for error details)
    shell:
        python -m analysis.stages.count --out /r/raw/qemu/gcc/vla/max/copy-acle_4v.json
        (command exited with non-zero exit code)
    external_jobid: 57
Shutting down, this might take some time.
"""


def test_failure_line_names_the_cell_and_the_slurm_reason() -> None:
    (f,) = slurm_failures.failures(ERROR_LOG)
    assert (f.rule, f.output, f.jobid) == ("count_qemu", "/r/raw/qemu/gcc/vla/max/copy-acle_4v.json", "57")
    assert slurm_failures.failure_line(f, "TIMEOUT", "TimeLimit") == (
        "error: count_qemu copy-acle_4v (qemu gcc vla max): Slurm job 57 TIMEOUT, killed at its time limit; "
        "Slurm log: /repo/.snakemake/slurm_logs/rule_count_qemu/gcc_vla_max_copy_acle_4v/57.log; "
        "rerun the same command to complete only what is missing")
    # Without scontrol's answer (job gone): the state from the executor's message.
    assert "Slurm job 57 TIMEOUT" in slurm_failures.failure_line(f, "", "")


# Snakemake's record of a group job that was cancelled (copied from a run against the local Slurm):
# the group's Slurm log, its members, then each member's own record, indented.
GROUP_ERROR_LOG = """\
[Thu Nov 26 05:05:35 2026]
    message: Error in group cells_2of2
    log: /repo/.snakemake/slurm_logs/group_cells_2of2_cell_group_done_count_qemu/26.log (check log file(s) for error details)
    jobs:
        rule cell_group_done:
            jobid: 17
            output: /r/logs/groups/cells_2of2.done
        rule count_qemu:
            jobid: 1
            output: /r/raw/qemu/gcc/vla/max/copy-c_vec.json
            log: /r/logs/count/qemu/gcc/vla/max/copy-c_vec.log (check log file(s) for error details)
        rule count_qemu:
            jobid: 2
            output: /r/raw/qemu/gcc/vls512/max/copy-c_vec.json
            log: /r/logs/count/qemu/gcc/vls512/max/copy-c_vec.log (check log file(s) for error details)
    [Thu Nov 26 05:05:35 2026]
    Error in rule cell_group_done:
        message: None
        jobid: 17
        output: /r/logs/groups/cells_2of2.done
        shell:
            touch /r/logs/groups/cells_2of2.done
            (command exited with non-zero exit code)
    [Thu Nov 26 05:05:35 2026]
    Error in rule count_qemu:
        message: None
        jobid: 1
        output: /r/raw/qemu/gcc/vla/max/copy-c_vec.json
        log: /r/logs/count/qemu/gcc/vla/max/copy-c_vec.log (check log file(s) for error details)
Shutting down, this might take some time.
"""


def test_a_failed_group_job_is_one_line_naming_its_group_cells_and_log() -> None:
    """A failed group job was not reported at all: its members' records are indented under the
    group's, which the `Error in rule` parser never matched."""
    (f,) = slurm_failures.failures(GROUP_ERROR_LOG)
    assert (f.group, f.jobid) == ("cells_2of2", "26")
    assert slurm_failures.failure_line(f, "CANCELLED", "Resources") == (
        "error: group cells_2of2 (count_qemu copy-c_vec (qemu gcc vla max), count_qemu copy-c_vec (qemu gcc vls512 max)): "
        "Slurm job 26 CANCELLED, cancelled (scancel); "
        "Slurm log: /repo/.snakemake/slurm_logs/group_cells_2of2_cell_group_done_count_qemu/26.log; "
        "rerun the same command to complete only what is missing")
    many = slurm_failures.Failure("count_qemu", "", "9", "", "", "cells_1of2", tuple(("count_qemu", f"/r/raw/qemu/gcc/vla/max/k-v{i}.json")
                                                                           for i in range(5)))
    assert slurm_failures.what_failed(many) == ("group cells_1of2 (count_qemu k-v0 (qemu gcc vla max), count_qemu k-v1 (qemu gcc vla max), "
                                       "count_qemu k-v2 (qemu gcc vla max) and 2 more)")


def test_down_partition_message() -> None:
    assert slurm.down_message("p", [("n1", "idle", "none"), ("n2", "down", "fan")]) is None
    assert slurm.down_message("p", [("n1", "down", "maintenance"), ("n2", "drain", "x")]) == (
        "Slurm partition p has no node that can run jobs: n1 down (reason: maintenance), n2 drain (reason: x); "
        "fix the node (scontrol update nodename=NODE state=resume) and rerun the same command")


def test_stop_with_nothing_to_stop_needs_no_sudo() -> None:
    """A user without sudo whose Slurm is not running (a test suite's teardown, a second
    `./harness sweep --slurm` shell) is told so; `stop` asked for root first and failed
    (ci/fresh-machine --as user). Run as nobody where the suite runs as root."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, subprocess.Popen(["sleep", "60"]) as stranger:
        try:
            os.chmod(tmp, 0o755)
            script = Path(tmp) / "slurm.sh"  # a clone may sit where only root can enter (CI's)
            shutil.copy2(REPO / "setup" / "slurm.sh", script)
            run = Path(tmp) / "cache" / "slurm" / "run"
            run.mkdir(parents=True)
            for daemon in ("munged", "slurmctld", "slurmd"):  # dead daemons' files; a pid taken by another
                (run / f"{daemon}.pid").write_text(f"{stranger.pid}\n")
            fake = Path(tmp) / "bin"
            fake.mkdir()
            (fake / "sudo").write_text("#!/bin/sh\nexit 1\n")  # no password-less sudo
            (fake / "sudo").chmod(0o755)
            cmd = ["bash", str(script), "stop"]
            if os.geteuid() == 0:
                if not shutil.which("setpriv"):
                    pytest.skip("root without setpriv: cannot drop to nobody")
                cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
            env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": tmp, "HARNESS_CACHE": str(Path(tmp) / "cache")}
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=60)
            assert (proc.returncode, proc.stderr) == (0, "setup/slurm.sh: Slurm was not running\n")
            assert stranger.poll() is None
        finally:
            stranger.kill()


def test_stop_leaves_alone_a_process_that_took_a_dead_daemons_pid(tmp_path: Path) -> None:
    """The daemons die with the session that started them and leave their pid files; the pid
    wraps within minutes. `stop` killed whatever process had taken a dead daemon's number (and
    `start` took it for the daemon and did not start it)."""
    run = tmp_path / "slurm" / "run"
    run.mkdir(parents=True)
    with subprocess.Popen(["sleep", "60"]) as stranger:
        try:
            for daemon in ("munged", "slurmctld", "slurmd"):
                (run / f"{daemon}.pid").write_text(f"{stranger.pid}\n")
            proc = subprocess.run([str(REPO / "setup" / "slurm.sh"), "stop"], capture_output=True, text=True,
                                  env={**os.environ, "HARNESS_CACHE": str(tmp_path)}, timeout=60)
            assert (proc.returncode, proc.stderr) == (0, "setup/slurm.sh: Slurm was not running\n")
            assert stranger.poll() is None, "stop killed a process that was not its daemon"
        finally:
            stranger.kill()


# --- with the local Slurm ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    proc = subprocess.run([str(REPO / "setup" / "slurm.sh"), "start"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    conf = subprocess.run([str(REPO / "setup" / "slurm.sh"), "--conf"], capture_output=True, text=True).stdout.strip()
    return {**os.environ, "SLURM_CONF": conf}


@pytest.fixture(scope="module")
def slurm_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm")


@pytest.fixture(scope="module")
def local_counts(slurm_work: Path, work: Path) -> bytes:
    """The same sweep run by Snakemake on this machine, into its own results on the session's
    build tree (the Slurm run builds its own)."""
    proc = snakemake(TINY, work / "build", slurm_work / "local-results")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (slurm_work / "local-results" / "counts.csv").read_bytes()


@pytest.fixture(scope="module")
def slurm_run(local_slurm: dict[str, str], slurm_work: Path) -> subprocess.CompletedProcess:
    """The tiny sweep through the local Slurm; its build tree serves the later tests."""
    return harness_sweep(slurm_work / "slurm-results", slurm_work / "slurm-build", "--slurm", "local", env=local_slurm)


def run_id(log: str) -> str:
    return re.search(r"SLURM run ID: (\S+)", log).group(1)


def run_jobs(env: dict[str, str], rid: str) -> list[tuple[str, str, str]]:
    """(job id, state, comment) of the Slurm jobs of one Snakemake run (its job name)."""
    out = subprocess.run(["squeue", "--states=all", "-h", "--name", rid, "-o", "%i|%T|%k"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|", 2)) for line in out.splitlines()]


ENDED = {"COMPLETED", "CANCELLED", "FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"}


def job_state(env: dict[str, str], jid: str) -> str:
    return subprocess.run(["squeue", "-h", "-t", "all", "-j", jid, "-o", "%T"], env=env, capture_output=True,
                          text=True).stdout.strip()


def wait_for(cond, seconds: float = 300, step: float = 1.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"timed out after {seconds} s")


def dead(pid: int) -> bool:
    """The process is gone or a zombie (its /proc entry may vanish between two reads)."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def blocker(env: dict[str, str]) -> str:
    """A job that holds the whole node, so the sweep's jobs wait in the queue."""
    jid = subprocess.run(["sbatch", "--parsable", "--exclusive", "-p", "harness", "-J", "harness-test-blocker",
                          "-o", "/dev/null", "--wrap", "sleep 900"], env=env, capture_output=True, text=True,
                         check=True, cwd="/tmp").stdout.strip()
    wait_for(lambda: subprocess.run(["squeue", "-h", "-j", jid, "-o", "%T"], env=env, capture_output=True,
                                    text=True).stdout.strip() == "RUNNING", 120)
    return jid


class Background:
    """`./harness sweep --slurm` running while the test acts on its Slurm jobs. The local Slurm is
    shared by every test session on the machine (and by a user's sweeps): a test acts on the
    jobs named by its own sweep's run id, never on whatever job of the queue matches a rule name
    (a pending `rule_` job of another session's sweep was taken for this one's)."""

    def __init__(self, env: dict[str, str], results: Path, build: Path, profile: str = "local",
                 sigint_ignored: bool = False, extra: tuple[str, ...] = ()) -> None:
        """`sigint_ignored`: started as `cmd &` in a script (or under nohup) starts it."""
        self.env = env
        self.proc = subprocess.Popen([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(TINY),
                                      "--set", f"results_dir={results}", "--set", f"build_dir={build}",
                                      "--slurm", profile, *extra],
                                     cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def err(self) -> str:
        return "".join(self.lines)

    def run_id(self) -> str:
        """The id naming its Slurm jobs (printed before its first submission)."""
        return wait_for(lambda: (m := re.search(r"^SLURM run ID: (\S+)", self.err, re.M)) and m.group(1), 300, 0.2)

    def jobs(self, states: str) -> list[tuple[str, str]]:
        """(job id, comment) of its Slurm jobs in these squeue states."""
        out = subprocess.run(["squeue", "-h", "--name", self.run_id(), "-t", states, "-o", "%i|%k"], env=self.env,
                             capture_output=True, text=True, timeout=60).stdout
        return [tuple(line.split("|", 1)) for line in out.splitlines()]

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit status and everything it printed on stderr."""
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=60)
        return rc, self.err

    def stop(self) -> None:
        """Ends it, if a failed test left it running (its Snakemake cancels its jobs)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_local_slurm_is_this_host_and_starts_once(local_slurm: dict[str, str]) -> None:
    run = Path(local_slurm["SLURM_CONF"]).parent / "run"
    pids = {d: (run / f"{d}.pid").read_text() for d in ("munged", "slurmctld", "slurmd")}
    again = subprocess.run([str(REPO / "setup" / "slurm.sh"), "start"], capture_output=True, text=True)
    assert again.returncode == 0 and again.stderr.startswith("setup/slurm.sh: Slurm is up: harness* 1 node(s)")
    assert pids == {d: (run / f"{d}.pid").read_text() for d in pids}
    cpus = subprocess.run(["sinfo", "-h", "-p", "harness", "-o", "%c"], env=local_slurm, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert int(cpus) == os.cpu_count()


@pytest.mark.slow
@pytest.mark.needs_slurm
@pytest.mark.exclusive
def test_start_after_the_daemons_died_and_their_pids_were_taken(local_slurm: dict[str, str]) -> None:
    """CI ran out of its 90 minutes: the daemons had died with the session before, and a live
    process had taken munged's pid. start took it for munged and did not start it; slurmctld
    then never answered, and each of start's 60 sinfo calls waited more than 90 s for it."""
    script = str(REPO / "setup" / "slurm.sh")
    run = Path(local_slurm["SLURM_CONF"]).parent / "run"
    subprocess.run([script, "stop"], capture_output=True, text=True, check=True, timeout=120)
    with subprocess.Popen(["sleep", "300"]) as stranger:
        try:
            (run / "munged.pid").write_text(f"{stranger.pid}\n")
            t0 = time.monotonic()
            proc = subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0 and "Slurm is up: harness* 1 node(s)" in proc.stderr, proc.stderr
            assert time.monotonic() - t0 < 30
            assert stranger.poll() is None
            munged = (run / "munged.pid").read_text().strip()
            assert munged != str(stranger.pid) and Path(f"/proc/{munged}/comm").read_text() == "munged\n"
        finally:
            stranger.kill()
            subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.needs_slurm
@pytest.mark.exclusive
def test_a_job_that_died_with_the_daemons_is_cancelled_at_the_next_start(local_slurm: dict[str, str]) -> None:
    """slurmctld recovers a job it saved as running after the session that ran it (and its
    daemons) ended: it held a core with no process until its time limit, and Slurm's default
    (JobRequeue=1) would start it again with its Snakemake gone."""
    script = str(REPO / "setup" / "slurm.sh")
    run = Path(local_slurm["SLURM_CONF"]).parent / "run"
    # The job's sleep has a name of its own: the kill below must not reach another process of the
    # machine (a plain `pkill -f '^sleep 300$'` ended a user's `sleep 300` in another terminal).
    marker = f"harness-test-job-{os.getpid()}-{time.monotonic_ns()}"
    job = subprocess.run(["sbatch", "--parsable", "-t", "30", "-o", "/dev/null", "--wrap", f"exec bash -c 'exec -a {marker} sleep 300'"],
                         env=local_slurm,
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    try:
        wait_for(lambda: job_state(local_slurm, job) == "RUNNING", 60, 0.5)
        time.sleep(8)  # slurmctld saves its job state every few seconds
        # The session ends: every process dies at once.
        pids = [int((run / f"{d}.pid").read_text()) for d in ("slurmd", "slurmctld", "munged")]
        # This job's step only: other Slurm jobs of the machine keep theirs.
        steps = subprocess.run(["pgrep", "-f", rf"^slurmstepd: \[{job}\."], capture_output=True, text=True).stdout.split()
        for pid in pids + [int(s) for s in steps]:
            os.kill(pid, 9)
        subprocess.run(["pkill", "-9", "-f", f"^{marker} "])
        for pid in pids:
            wait_for(lambda: dead(pid), 30, 0.1)
        proc = subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"cancelled job(s) {job}:" in proc.stderr, proc.stderr
        # COMPLETING for a moment while slurmd answers the kill
        wait_for(lambda: job_state(local_slurm, job) != "COMPLETING", 60, 0.5)
        assert job_state(local_slurm, job) in ("CANCELLED", ""), job_state(local_slurm, job)
        shown = subprocess.run(["scontrol", "show", "config"], env=local_slurm, capture_output=True, text=True,
                               check=True, timeout=60).stdout
        assert re.search(r"^JobRequeue\s*=\s*0$", shown, re.M), shown
    finally:
        subprocess.run(["scancel", job], env=local_slurm, capture_output=True, timeout=60)
        subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_a_running_slurm_takes_the_scripts_changed_config_at_start(local_slurm: dict[str, str]) -> None:
    """A Slurm started by an earlier setup/slurm.sh kept that one's slurm.conf: start returned as
    soon as the node was up, so a changed setting (batch_sched_delay=0) never reached it."""
    conf = Path(local_slurm["SLURM_CONF"])
    text = conf.read_text()
    assert "SchedulerParameters=batch_sched_delay=0\n" in text
    conf.write_text(text.replace("SchedulerParameters=batch_sched_delay=0\n", ""))
    proc = subprocess.run([str(REPO / "setup" / "slurm.sh"), "start"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("setup/slurm.sh: the running Slurm took the changed config (scontrol reconfigure)\n")
    assert conf.read_text() == text
    shown = subprocess.run(["scontrol", "show", "config"], env=local_slurm, capture_output=True, text=True, check=True).stdout
    assert re.search(r"^SchedulerParameters\s*=\s*batch_sched_delay=0$", shown, re.M), shown


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_tiny_sweep_through_slurm_equals_the_local_run(local_slurm: dict[str, str], slurm_work: Path,
                                                        local_counts: bytes, slurm_run: subprocess.CompletedProcess) -> None:
    results, build = slurm_work / "slurm-results", slurm_work / "slurm-build"
    proc = slurm_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (results / "counts.csv").read_bytes() == local_counts
    # The jobs travel in groups (issue 32), each one Slurm job named by its group and its rules.
    # On the local profile's one node the sweep (2 cells: under its one-job-cells) is ONE Slurm
    # job: the QEMU plugins, the builds, the cells and the tail side by side on its two cores
    # (it was 4, tools, build_gcc, cells_1of1 and tail, taking the node in turn).
    jobs = run_jobs(local_slurm, run_id(proc.stderr))
    assert [c for _, _, c in jobs] == ["rule_sweep_collect_count_qemu_driver_object_harness_object_kernel_object_..."]
    assert {s for _, s, _ in jobs} == {"COMPLETED"}
    submitted = re.findall(r"has been submitted with SLURM jobid", proc.stderr)
    assert len(jobs) == len(submitted) == 1
    # Nothing changed: nothing is submitted.
    again = harness_sweep(results, build, "--slurm", "local", env=local_slurm)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "submitted with SLURM jobid" not in again.stderr and "Nothing to be done" in again.stderr


# Exclusive (under pytest-xdist, nothing else runs meanwhile): the test holds the machine's one
# Slurm node (a job that takes the whole node, or the node down or drained) while its sweep's
# Snakemake runs in the repository for minutes, and it stops that sweep at moments set by time
# (a job still pending, the watchdog's next look, deadlines of 120 to 300 s). The other
# worker's builds and QEMU runs on the same two cores stretch those times, and its sweeps'
# Snakemakes work in the same tree. Two of them failed under xdist in an earlier run (its log
# is gone; these are the ways the code allows).
@pytest.mark.exclusive
@pytest.mark.slow
@pytest.mark.needs_slurm
def test_cancelled_job_fails_in_one_line_and_the_rerun_completes_the_rest(
        local_slurm: dict[str, str], slurm_work: Path, local_counts: bytes, slurm_run: subprocess.CompletedProcess) -> None:
    assert slurm_run.returncode == 0, slurm_run.stderr[-3000:]
    results, build = slurm_work / "cancel-results", slurm_work / "slurm-build"  # built by slurm_run
    block = blocker(local_slurm)
    sweep = Background(local_slurm, results, build)
    try:
        pending = wait_for(lambda: [j for j, c in sweep.jobs("PD") if c.startswith("rule_sweep_")], 300)
        victim = pending[0]
        subprocess.run(["scancel", victim], env=local_slurm, check=True)
    finally:
        subprocess.run(["scancel", block], env=local_slurm)
    try:
        rc, err = sweep.wait(900)
    finally:
        sweep.stop()
    assert rc == 1, err[-3000:]
    # The sweep's one Slurm job (the builds were done: its cells and the tail), its cells first.
    assert (f"error: group sweep (count_qemu copy-acle_4v (qemu gcc vla max), count_qemu copy-c_vec (qemu gcc vla max), "
            f"collect {results}/counts.csv and 1 more): "
            f"Slurm job {victim} CANCELLED, cancelled (scancel); Slurm log: "
            f"{REPO}/.snakemake/slurm_logs/group_sweep_collect_count_qemu_plot/{victim}.log; "
            "rerun the same command to complete only what is missing") in err.splitlines(), err[-3000:]
    assert not (results / "counts.csv").exists()
    # The rerun submits the cancelled group and what depends on it: the builds are done.
    again = harness_sweep(results, build, "--slurm", "local", env=local_slurm)
    assert again.returncode == 0, again.stderr[-3000:]
    comments = sorted(c for _, _, c in run_jobs(local_slurm, run_id(again.stderr)))
    assert comments == ["rule_sweep_collect_count_qemu_plot"]
    assert (results / "counts.csv").read_bytes() == local_counts


@pytest.mark.exclusive  # as test_cancelled_job_fails_in_one_line_and_the_rerun_completes_the_rest
@pytest.mark.slow
@pytest.mark.needs_slurm
def test_node_down_is_a_clear_message_not_a_hang(local_slurm: dict[str, str], slurm_work: Path) -> None:
    node = subprocess.run(["sinfo", "-h", "-p", "harness", "-o", "%N"], env=local_slurm, capture_output=True,
                          text=True, check=True).stdout.strip()
    results = slurm_work / "down-results"
    block = sweep = None
    try:
        # Down before the sweep: refused before anything is submitted.
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=harness-test"],
                       env=local_slurm, check=True)
        proc = harness_sweep(results, slurm_work / "down-build", "--slurm", "local", env=local_slurm)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            f"error: Slurm partition harness has no node that can run jobs: {node} down (reason: harness-test); "
            "fix the node (scontrol update nodename=NODE state=resume) and rerun the same command; nothing was submitted"]
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=local_slurm, check=True)
        wait_for(lambda: subprocess.run(["sinfo", "-h", "-p", "harness", "-o", "%t"], env=local_slurm,
                                        capture_output=True, text=True).stdout.strip() == "idle", 60)
        # Down while the sweep's jobs wait in the queue: the sweep stops and cancels them.
        # Started as a script's `cmd &` starts it, with SIGINT ignored (a full suite run in the
        # background): the watchdog's SIGINT never reached the submitting Snakemake, which
        # inherited that, and the sweep waited on (the test timed out after 300 s).
        block = blocker(local_slurm)
        sweep = Background(local_slurm, results, slurm_work / "down-build", sigint_ignored=True)
        wait_for(lambda: sweep.jobs("PD"), 300)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=harness-test"],
                       env=local_slurm, check=True)
        rc, err = sweep.wait(300)
        assert rc == 1, err[-3000:]
        assert err.strip().splitlines()[-1] == (
            f"error: Slurm partition harness has no node that can run jobs: {node} down (reason: harness-test); "
            "fix the node (scontrol update nodename=NODE state=resume) and rerun the same command; "
            "the sweep was stopped and its Slurm jobs cancelled")
        # None of this sweep's jobs is left (the local Slurm may run other clones' tests too).
        assert sweep.jobs("PD,R") == []
    finally:
        # A failed assertion must not leave the blocker holding the node for 15 minutes.
        if block:
            subprocess.run(["scancel", block], env=local_slurm)
        if sweep:
            sweep.stop()
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=local_slurm)


@pytest.mark.exclusive  # as test_cancelled_job_fails_in_one_line_and_the_rerun_completes_the_rest
@pytest.mark.slow
@pytest.mark.needs_slurm
def test_a_node_drained_mid_sweep_loses_no_result(local_slurm: dict[str, str], slurm_work: Path, local_counts: bytes,
                                                   slurm_run: subprocess.CompletedProcess) -> None:
    """Drained while a group of cells runs: that group finishes and keeps its raw files, the
    sweep waits (it used to stop and cancel what ran there), and goes on when the node is resumed.
    With the local profile's groups (one-job-cells: 0): the sweep as one Slurm job has nothing
    left to wait for when its job ends."""
    assert slurm_run.returncode == 0, slurm_run.stderr[-3000:]
    groups_profile = slurm_work / "groups-profile"
    groups_profile.mkdir(exist_ok=True)
    local = yaml.safe_load((slurm.PROFILES / "slurm-local" / "config.yaml").read_text())
    local["harness-groups"]["one-job-cells"] = 0
    (groups_profile / "config.yaml").write_text(yaml.safe_dump(local))
    node = subprocess.run(["sinfo", "-h", "-p", "harness", "-o", "%N"], env=local_slurm, capture_output=True,
                          text=True, check=True).stdout.strip()
    results = slurm_work / "drain-results"
    sweep = Background(local_slurm, results, slurm_work / "slurm-build", str(groups_profile))
    try:
        running = wait_for(lambda: [j for j in sweep.jobs("R") if j[1].startswith("rule_cells_")], 300, 0.2)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=harness-test"],
                       env=local_slurm, check=True)
        jid, comment = running[0]
        group = comment.removeprefix("rule_").split("_cell_group_done")[0]
        # (Before: the sweep was stopped and this job cancelled.)
        state = wait_for(lambda: job_state(local_slurm, jid) in ENDED and job_state(local_slurm, jid), 300)
        assert state == "COMPLETED", f"the group running on the drained node ended {state}"
        # Three of the watchdog's looks later the sweep was not stopped (it waits, or went on if another
        # clone's test resumed the shared node), the finished group's cells are there.
        time.sleep(3 * slurm.WATCH_SECONDS)
        assert sweep.proc.poll() in (None, 0), sweep.err[-3000:]
        assert (results / "logs" / "groups" / f"{group}.done").exists()
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=local_slurm)
    try:
        rc, err = sweep.wait(900)
    finally:
        sweep.stop()
    assert rc == 0, err[-3000:]
    assert f"slurm: partition harness: {node} (reason: harness-test) drained;" in err
    assert (results / "counts.csv").read_bytes() == local_counts


def held_profile(where: Path) -> Path:
    """The local profile whose Slurm jobs are submitted held (sbatch --hold): they wait in the
    queue without taking the node, whatever else runs on the shared Slurm."""
    where.mkdir(exist_ok=True)
    local = yaml.safe_load((slurm.PROFILES / "slurm-local" / "config.yaml").read_text())
    local["default-resources"]["slurm_extra"] = "'--hold'"
    (where / "config.yaml").write_text(yaml.safe_dump(local))
    return where


def snakemakes_writing(results: Path) -> list[int]:
    """Pids of the Snakemakes whose command line names this results folder."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and f"results_dir={results}".encode() in (d / "cmdline").read_bytes():
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
@pytest.mark.needs_slurm
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_the_command_alone_cancels_exactly_its_slurm_jobs(
        local_slurm: dict[str, str], tmp_path: Path, signum: int) -> None:
    """Snakemake ran in the command's process group: a SIGTERM to the command alone (not its
    terminal's group) killed it, and its Snakemake went on with its Slurm job waiting in the queue;
    a SIGINT to it alone was swallowed while the job waited. Now either cancels the sweep's own
    jobs (named by its run id; another job waiting beside them stays), in one line, and leaves the
    results folder's lock as a stopped local sweep does."""
    results = tmp_path / "results"
    other = subprocess.run(["sbatch", "--parsable", "--hold", "-J", "harness-test-other-sweep", "-o", "/dev/null",
                            "--wrap", "true"], env=local_slurm, capture_output=True, text=True, check=True,
                           cwd="/tmp", timeout=60).stdout.strip()
    sweep = Background(local_slurm, results, tmp_path / "build", str(held_profile(tmp_path / "held")))
    rid = None
    try:
        # Until its one Slurm job waits in the queue.
        wait_for(lambda: "has been submitted with SLURM jobid" in sweep.err, 300, 0.2)
        rid, said = sweep.run_id(), len(sweep.lines)
        os.kill(sweep.proc.pid, signum)  # the command alone
        rc, err = sweep.wait(180)
        assert rc == 128 + signum, err[-3000:]
        assert sweep.lines[said:] == [
            f"interrupted: ./harness sweep stopped by {signal.Signals(signum).name}; 1 Slurm job of this sweep cancelled "
            f"(scancel; run {rid}); run it again to resume (finished steps are kept)\n"]
        ((_, state, comment),) = run_jobs(local_slurm, rid)
        assert (state, comment.startswith("rule_sweep_")) == ("CANCELLED", True)
        assert job_state(local_slurm, other) == "PENDING"
        assert snakemakes_writing(results) == []
        assert (results / ".lock").read_text() == ""  # released, as by a stopped local sweep
    finally:
        # A Snakemake left running (a failed run of this test) would hold the job in the queue.
        for pid in snakemakes_writing(results):
            os.kill(pid, signal.SIGKILL)
        sweep.stop()
        for job in ([f"--name={rid}"] if rid else []) + [other]:
            subprocess.run(["scancel", job], env=local_slurm, capture_output=True, timeout=60)


def largest_node(env: dict[str, str]) -> tuple[str, int]:
    """The local partition's node and its memory in MB, as sinfo says."""
    out = subprocess.run(["sinfo", "-h", "-N", "-p", "harness", "-o", "%N %m"], env=env, capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    return out[0], int(out[1])


def copy_sweep(tmp_path: Path, size: int) -> Path:
    cfg = yaml.safe_load(TINY.read_text())
    cfg["sizes"] = {"copy": [size]}
    cfg["kernel_table"] = str(REPO / "configs" / "kernels.yaml")
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "big.yaml"


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_sizes_through_slurm_are_judged_by_the_nodes_memory_not_the_submitting_hosts(
        local_slurm: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The size refusal read the memory of the host that submits (a login node), not of the
    nodes that run the jobs. The submitting host is this test's process (its memory set here); the
    nodes are the local Slurm's, as sinfo gives their RealMemory."""
    monkeypatch.setenv("SLURM_CONF", local_slurm["SLURM_CONF"])
    node, memory_mb = largest_node(local_slurm)
    over = ["--set", f"results_dir={tmp_path / 'r'}", "--set", f"build_dir={tmp_path / 'b'}", "--slurm", "local"]
    # A login node of 1 GiB: a copy of 1 GiB (2 GiB of buffers) fits the nodes and goes through.
    monkeypatch.setattr(kernels, "memory_bytes", lambda: 1 << 30)
    assert cli.main(["sweep", "--config", str(copy_sweep(tmp_path, 1 << 30)), *over, "--", "--dry-run"]) == 0, \
        capsys.readouterr().err[-3000:]
    shutil.rmtree(tmp_path / "r", ignore_errors=True)
    shutil.rmtree(tmp_path / "b", ignore_errors=True)
    capsys.readouterr()
    # A login node of 1 TiB: a copy larger than half the nodes' memory is refused in one line,
    # before anything is submitted or written.
    monkeypatch.setattr(kernels, "memory_bytes", lambda: 1 << 40)
    size = (memory_mb // 1024 + 1) << 29  # 2 x size: more than the node's memory
    assert cli.main(["sweep", "--config", str(copy_sweep(tmp_path, size)), *over]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: sizes/copy: size {size} is too large for the nodes of Slurm partition harness: a run of {size} bytes "
        f"allocates at least {2 * size / 2**30:.1f} GiB (family copy), its largest node ({node}) has "
        f"{memory_mb / 1024:.1f} GiB of memory; choose a smaller size, or a partition with larger nodes "
        "(--slurm-partition P)"]
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_the_submitting_snakemake_judges_sizes_by_the_nodes_it_is_given(tmp_path: Path) -> None:
    """Through Slurm the sweep is loaded again by the Snakemake that submits (rules/common.smk):
    it judges by the node the harness names, not by this host (here: a node of 512 MB, a copy
    of 512 MiB, which this host could hold)."""
    size = 1 << 29
    assert 2 * size < kernels.memory_bytes()
    proc = subprocess.run([*SNAKEMAKE_CMD, "--dry-run", "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO),
                           "--cores", "1", "--config", f"sweep={copy_sweep(tmp_path, size)}", f"build_dir={tmp_path / 'b'}",
                           f"results_dir={tmp_path / 'r'}", "slurm_partition=p", "slurm_node=n1", "slurm_node_memory_mb=512"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert (f"error: sizes/copy: size {size} is too large for the nodes of Slurm partition p: a run of {size} bytes "
            "allocates at least 1.0 GiB (family copy), its largest node (n1) has 0.5 GiB of memory;") in proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_a_sweep_that_ends_leaves_the_log_folder_of_a_job_still_waiting(
        local_slurm: dict[str, str], slurm_work: Path, slurm_run: subprocess.CompletedProcess, tmp_path: Path) -> None:
    """The executor plugin removed every empty folder of .snakemake/slurm_logs at the end of each
    run, and a waiting job's folder is empty until it starts: another sweep of the clone ending
    meanwhile made it fail to start (JobLaunchFailure: slurmd could not open its log; a full suite
    run, where a sweep left running by the node-down test ended beside the drained-node one)."""
    assert slurm_run.returncode == 0, slurm_run.stderr[-3000:]
    # Both sweeps' Slurm logs in a folder of their own (the clone's gathers every earlier run's).
    logs = ("--", "--slurm-logdir", str(tmp_path / "slurm_logs"))
    waiting = Background(local_slurm, tmp_path / "held-results", tmp_path / "held-build",
                         str(held_profile(tmp_path / "held")), extra=logs)
    try:
        ((jid, _),) = wait_for(lambda: waiting.jobs("PD"), 300)
        shown = subprocess.run(["scontrol", "show", "job", jid], env=local_slurm, capture_output=True, text=True,
                               check=True, timeout=60).stdout
        log = Path(re.search(r"StdOut=(\S+)", shown).group(1))
        assert log.parent.is_dir() and not any(log.parent.iterdir())
        # Another sweep of the clone runs to its end (its builds done by slurm_run).
        other = harness_sweep(tmp_path / "other-results", slurm_work / "slurm-build", "--slurm", "local", *logs,
                              env=local_slurm)
        assert other.returncode == 0, other.stderr[-3000:]
        assert log.parent.is_dir()
        # Released, the waiting job starts: Slurm opens its log.
        subprocess.run(["scontrol", "release", jid], env=local_slurm, check=True, timeout=60)
        wait_for(lambda: log.exists() or job_state(local_slurm, jid) in ENDED, 120, 0.2)
        assert log.exists(), job_state(local_slurm, jid)
    finally:
        waiting.stop()


def test_a_cancelled_pending_job_is_not_blamed_on_its_wait_reason() -> None:
    """scontrol keeps the reason a cancelled job last waited for (seen: Reason=Resources)."""
    (f,) = slurm_failures.failures(ERROR_LOG)
    assert slurm_failures.failure_line(f, "CANCELLED", "Resources").startswith(
        "error: count_qemu copy-acle_4v (qemu gcc vla max): Slurm job 57 CANCELLED, cancelled (scancel); ")


@pytest.mark.slow
@pytest.mark.needs_slurm
@pytest.mark.needs_gem5
def test_gem5_jobs_through_slurm_equal_the_local_run(local_slurm: dict[str, str], slurm_work: Path) -> None:
    """The cycle job is a Slurm job too (rule simulate_gem5, its own resources), and gem5's
    counts through Slurm are the local run's, byte for byte (gem5 is deterministic)."""
    local = snakemake(GEM5_TINY, slurm_work / "gem5-local-build", slurm_work / "gem5-local")
    assert local.returncode == 0, local.stderr[-3000:]
    proc = harness_sweep(slurm_work / "gem5-slurm", slurm_work / "gem5-slurm-build", "--slurm", "local",
                         env=local_slurm, config_file=GEM5_TINY)
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = (slurm_work / "gem5-slurm" / "counts.csv").read_bytes()
    assert counts == (slurm_work / "gem5-local" / "counts.csv").read_bytes()
    assert b",gem5,gcc,512,65536,gem5.cycles," in counts
    comments = sorted(c for _, _, c in run_jobs(local_slurm, run_id(proc.stderr)))
    assert [c for c in comments if c.startswith("rule_simulate_gem5")] == [
        "rule_simulate_gem5_wildcards_gcc_vla_paper_copy_acle_4v"]


@pytest.mark.slow
@pytest.mark.needs_slurm
def test_bench_reports_the_sweep_through_slurm_beside_the_local_run(
        local_slurm: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench's Slurm part (issue 15) returned nothing, so bench.json's "slurm" was always null."""
    monkeypatch.setenv("SLURM_CONF", local_slurm["SLURM_CONF"])
    got = bench.slurm_sweeps(tmp_path, 2, None, None, [("tiny", str(TINY))])
    fig = got["tiny"]
    # The whole sweep in one Slurm job (the local profile's one-job-cells).
    assert fig["config"] == str(TINY) and fig["slurm_jobs"] == 1
    assert fig["slurm_s"] > 0 and fig["local_s"] > 0 and fig["rerun_noop_slurm_s"] > 0
    assert fig["counts_identical"] is True and fig["rerun_slurm_jobs"] == 0 and fig["target_ratio"] == 1.5
    assert (tmp_path / "slurm-tiny" / "results" / "counts.csv").read_bytes() == \
        (tmp_path / "local-tiny" / "results" / "counts.csv").read_bytes()


# --- job groups (issue 32) --------------------------------------------------------------------

def cells(n: int, families: tuple[str, ...] = ("copy", "pack")) -> list[tuple[str, config.Job]]:
    out = []
    for i in range(n):
        fam = families[i * len(families) // n]
        out.append((f"raw/{fam}-{i:02d}", config.Job(config.Binary("gcc", "vla", "qemu", fam, f"v{i:02d}"), "max", ())))
    return out


def test_cells_are_cut_into_at_most_count_jobs_groups_of_neighbours() -> None:
    got = groups.cell_groups(cells(10), lambda j: j.binary.kernel, lambda j: 1.0, 4)
    assert sorted(got.members) == ["cells_1of4", "cells_2of4", "cells_3of4", "cells_4of4"]
    # In order, each group a run of neighbours, sizes within one of each other.
    order = [k for _, ks in sorted(got.members.items()) for k in ks]
    assert order == sorted(k for k, _ in cells(10))
    assert sorted(len(ks) for ks in got.members.values()) == [2, 2, 3, 3]
    assert all(got.of[k] == g for g, ks in got.members.items() for k in ks)
    # Fewer cells than groups: one cell each; weights move the cuts.
    assert len(groups.cell_groups(cells(3), lambda j: j.binary.kernel, lambda j: 1.0, 16).members) == 3
    # At least min_cells each: fewer groups.
    assert len(groups.cell_groups(cells(10), lambda j: j.binary.kernel, lambda j: 1.0, 4, 4).members) == 2
    assert len(groups.cell_groups(cells(3), lambda j: j.binary.kernel, lambda j: 1.0, 4, 16).members) == 1
    heavy = groups.cell_groups(cells(4), lambda j: j.binary.kernel, lambda j: 10.0 if j.binary.variant == "v00" else 1.0, 2)
    assert heavy.members == {"cells_1of2": ["raw/copy-00"], "cells_2of2": ["raw/copy-01", "raw/pack-02", "raw/pack-03"]}


def test_a_sweep_is_one_slurm_job_only_where_the_profile_says_it_fits_and_nothing_runs_alone() -> None:
    # The plans (short cells, cells of counts.csv that are Slurm jobs of their own) of the tiny
    # sweep (8 QEMU cells), the default one (204, and 5 perf measurements, which have a chain of
    # their own: not counted) and the gem5 test sweep (one gem5 cell beside 2 QEMU cells).
    tiny, default, gem5 = (8, 0), (204, 0), (2, 1)
    local, generic = 64, 0
    assert groups.one_job(*tiny, local) and not groups.one_job(*default, local) and groups.one_job(*default, 1000)
    # A gem5 cell or a perf measurement depends on the builds and feeds the tail: in one group
    # with them it would leave the group and come back, which Snakemake refuses.
    assert not groups.one_job(*gem5, local)
    assert not groups.one_job(*tiny, generic) and not groups.one_job(*default, generic)
    # The limit is inclusive; a sweep without short cells (perf alone) has nothing to group.
    assert groups.one_job(204, 0, 204) and not groups.one_job(205, 0, 204) and not groups.one_job(0, 0, local)
    # What the one group takes in: the counts' chain, not perf's native builds or its table and plot.
    assert [g for g in ("tools", "build_gcc", "build_clang", "build_native", "sweep", "tail", "perf_tail")
            if groups.in_one_job(g, {"gcc", "clang"})] == ["tools", "build_gcc", "build_clang", "sweep", "tail"]


def test_a_failed_sweep_job_names_its_cells_first() -> None:
    """A group of the whole sweep holds builds and the tail too: its cells are named first."""
    f = slurm_failures.Failure("", "", "7", "", "/l/7.log", "sweep", (
        ("collect", "/r/counts.csv"), ("link", "/b/gcc/vla/bin/qemu/copy-c_vec"),
        ("count_qemu", "/r/raw/qemu/gcc/vla/max/copy-c_vec.json"), ("count_qemu", "/r/raw/qemu/gcc/vla/max/copy-acle_4v.json")))
    assert slurm_failures.what_failed(f) == ("group sweep (count_qemu copy-acle_4v (qemu gcc vla max), "
                                             "count_qemu copy-c_vec (qemu gcc vla max), collect /r/counts.csv and 1 more)")


def test_steady_status_checks_wait_the_profiles_interval_after_every_check() -> None:
    """The plugin waits 10 s longer after each check that saw no Slurm job end (up to 180 s): a
    one-job sweep was noticed up to a minute after its end. The steady check resets the wait."""
    import asyncio
    from types import SimpleNamespace

    from analysis.commands import slurm_snakemake

    async def backing_off(self, active_jobs):  # the plugin's check: no job ended, so it backs off
        self.next_seconds_between_status_checks += 10
        for job in active_jobs:
            yield job

    executor = SimpleNamespace(next_seconds_between_status_checks=32)

    async def check() -> list[str]:
        return [j async for j in slurm_snakemake.steady(backing_off, 0.25)(executor, ["a", "b"])]

    assert asyncio.run(check()) == ["a", "b"]
    assert executor.next_seconds_between_status_checks == 0.25
    assert slurm.STEADY_KEY not in slurm.load_profile(None)


def test_the_local_profile_checks_four_times_a_second_and_true_means_the_plugins_interval(tmp_path: Path) -> None:
    """The plugin's interval takes whole seconds: at 1 s the local Slurm's one-job sweep was
    noticed half a second after its end on average, a tenth of a tiny sweep."""
    prof = slurm.load_profile("local")
    assert slurm.steady_seconds(prof, "local") == 0.25
    assert slurm.steady_seconds({slurm.STEADY_KEY: True, "slurm-init-seconds-before-status-checks": 3}, "x") == 3.0
    assert slurm.steady_seconds({slurm.STEADY_KEY: True}, "x") == slurm.PLUGIN_INIT_SECONDS
    assert slurm.steady_seconds({}, None) is None and slurm.steady_seconds({slurm.STEADY_KEY: False}, None) is None
    for bad in ("fast", 0, -1):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({slurm.STEADY_KEY: bad}))
        with pytest.raises(slurm.SlurmError, match=f"{slurm.STEADY_KEY}: {bad!r}: true, false or a number of seconds "
                                                   "above 0; nothing was submitted"):
            slurm.prepare(str(tmp_path), None, None)


def test_the_submitting_snakemake_imports_pandas_only_for_the_efficiency_report() -> None:
    """The plugin imported its efficiency report (pandas: 0.25 s) at every start of a sweep
    through Slurm; nothing else of the submitting Snakemake needs pandas."""
    code = """if True:
        import sys
        from analysis.commands import slurm_snakemake as s
        sys.modules[s.REPORT] = s.efficiency_report_on_use()
        import snakemake_executor_plugin_slurm as plugin
        assert "pandas" not in sys.modules, "pandas imported at the plugin's import"
        try:  # the stand-in hands over to the plugin's own function, which wants its arguments
            plugin.create_efficiency_report()
        except TypeError as e:
            assert "create_efficiency_report()" in str(e), e
        assert "pandas" in sys.modules and sys.modules[s.REPORT].__file__.endswith("efficiency_report.py")
    """
    proc = subprocess.run([PY, "-c", code], cwd=REPO, env={**os.environ, **slurm.executor_env()}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_status_wait_ends_when_the_run_is_over() -> None:
    """Snakemake's shutdown joins the status thread: before, its wait of a whole interval after the
    last check (2 s on the local Slurm, 40 s and more on a cluster) ended every sweep that late."""
    import asyncio
    from types import SimpleNamespace

    from analysis.commands import slurm_snakemake

    executor = SimpleNamespace(wait=False, next_seconds_between_status_checks=3600,
                               workflow=SimpleNamespace(remote_execution_settings=SimpleNamespace(seconds_between_status_checks=3600)))
    # A limit, not a timing: the interval's sleep would not return for an hour.
    asyncio.run(asyncio.wait_for(slurm_snakemake.sleep_until_due_or_done(executor), timeout=30))

    # While the run goes on, the wait is the whole interval.
    executor = SimpleNamespace(wait=True, next_seconds_between_status_checks=None,
                               workflow=SimpleNamespace(remote_execution_settings=SimpleNamespace(seconds_between_status_checks=0.3)))
    start = time.monotonic()
    asyncio.run(slurm_snakemake.sleep_until_due_or_done(executor))
    assert time.monotonic() - start >= 0.3


def test_the_rate_limiters_timer_does_not_hold_the_finished_run() -> None:
    """Before, Python's exit waited for Snakemake's pending one-second timer (a non-daemon
    threading.Timer): 1.4 s at the end of every sweep through Slurm."""
    import threading
    from types import SimpleNamespace

    from analysis.commands import slurm_snakemake
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert hasattr(JobScheduler, "_schedule_reevalutation")  # the pinned Snakemake's name (sic)
    scheduler = SimpleNamespace(_open_jobs=threading.Semaphore(0))
    before = set(threading.enumerate())
    slurm_snakemake.daemon_reevaluation(scheduler, 3600)
    (timer,) = set(threading.enumerate()) - before
    assert isinstance(timer, threading.Timer) and timer.daemon
    timer.cancel()


def test_the_local_profiles_jobs_run_their_rules_without_a_second_snakemake(tmp_path: Path) -> None:
    """The jobstep executor ran a second Snakemake under srun in every Slurm job (1.3 s a start);
    a node that binds no CPU (the local Slurm) runs the rules in the job's own Snakemake, on the
    CPUs it may use, as the srun'd one did. A cluster's profile keeps srun."""
    from analysis.commands import slurm_snakemake

    assert slurm.load_profile("local")[slurm.DIRECT_KEY] is True and slurm.DIRECT_KEY not in slurm.load_profile(None)
    assert slurm.load_profile("a64fx", "acct", "part").get(slurm.DIRECT_KEY) is None
    assert slurm_snakemake.direct_job_step(None) == "--cores all"
    (tmp_path / "config.yaml").write_text(f"{slurm.DIRECT_KEY}: 'yes'\n")
    with pytest.raises(slurm.SlurmError, match=f"{slurm.DIRECT_KEY}: 'yes': true or false; nothing was submitted"):
        slurm.prepare(str(tmp_path), None, None)


def test_the_slurm_jobs_do_not_import_the_executor_plugin() -> None:
    """Its directory left PYTHONPATH of the jobs' Snakemakes (they imported it: 0.5 CPU s each)."""
    from analysis.commands import slurm_snakemake

    site = str(slurm.SLURM_SITE)
    assert slurm_snakemake.without_plugin_path(f"{site}{os.pathsep}/x{os.pathsep}/y", site) == f"/x{os.pathsep}/y"
    assert slurm_snakemake.without_plugin_path(site, site + "/") == ""


def test_a_cells_slurm_time_is_its_plans_limits() -> None:
    assert groups.cell_minutes([120.0, 180.0]) == 6 and groups.cell_minutes([1.0]) == 2


def test_profiles_carry_the_grouping_and_snakemake_never_sees_it() -> None:
    # A cluster's profiles keep several groups for any sweep; the one-node local Slurm makes a sweep one job.
    for name, cores, count_jobs, min_cells, one_job_cells in ((None, 4, 16, 8, 0), ("local", 1, 2, 16, 64),
                                                               ("a64fx", 48, 4, 48, 0)):
        prof = slurm.load_profile(name, "acct", "part")
        assert slurm.groups_of(prof, name) == slurm.Groups(cores, count_jobs, min_cells, one_job_cells)
    (tmp := Path(tempfile.mkdtemp())).joinpath("config.yaml").write_text("harness-groups: {count-jobs: 0}\n")
    try:
        with pytest.raises(slurm.SlurmError, match="harness-groups: count-jobs: a whole number >= 1 .it has 0."):
            slurm.groups_of(slurm.load_profile(str(tmp)), str(tmp))
    finally:
        shutil.rmtree(tmp)


def test_the_local_node_runs_two_group_jobs_side_by_side() -> None:
    """The local profile's group jobs asked for the node's two CPUs (cores: 2), so the default
    sweep's six group jobs ran one after the other: each compiler's builds, then each group of
    cells, no job beside another (2026-11-27: 256 s through Slurm against 176 s with one CPU a
    group job). A group job of one CPU lets the node of 2 take the two compilers' builds, then the
    two groups of cells, side by side; inside, its Snakemake gets `--cores all`, which on this
    Slurm (no CPU binding) is still the node's 2."""
    g = slurm.groups_of(slurm.load_profile("local"), "local")
    assert (g.cores, g.count_jobs) == (1, 2)


def test_a_drained_node_lets_its_jobs_finish_and_the_sweep_wait() -> None:
    """A drained node (drng: its jobs still run) stopped the sweep as if it were down: the
    watchdog cancelled the jobs running there and their results were lost."""
    assert slurm.drained_message("p", [("n1", "drng", "maint")]) == (
        "slurm: partition p: n1 (reason: maint) drained; the Slurm jobs running there finish and keep their results, "
        "the others wait until it is resumed (scontrol update nodename=NODE state=resume); Ctrl-C stops the sweep, "
        "and the same command then completes only what is missing")
    assert slurm.drained_message("p", [("n1", "drain", "none"), ("n2", "idle", "none")]) is None
    assert slurm.drained_message("p", [("n1", "down", "fan")]) is None
    # Before a sweep a drained partition is refused: nothing there would start.
    assert slurm.down_message("p", [("n1", "drain", "maint")]) is not None


@pytest.mark.slow
def test_the_default_sweep_is_at_most_24_slurm_jobs_through_either_profile(tmp_path: Path) -> None:
    """Snakemake's dry run lists each group job once: the default sweep's jobs, through the
    generic and the local profile, make few Slurm jobs (issue 32: <= 24): the generic profile's
    groups, and the local profile's (204 cells: over its one-job-cells)."""
    for name in (None, "local"):
        g = slurm.groups_of(slurm.load_profile(name), name)
        # As the Slurm path starts it: the profile's cores, the groups' config entry.
        cmd = [*SNAKEMAKE_CMD, "counts_all", "--dry-run", "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO),
               "--cores", str(g.cores), "--config", f"sweep={REPO / 'configs' / 'default.yaml'}",
               f"build_dir={tmp_path / 'build'}", f"results_dir={tmp_path / 'results'}",
               *(f"{k}={v}" for k, v in g.config().items())]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "GEM5": "none"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        group_jobs = re.findall(r"^\[.*\] Group job (\S+) ", proc.stdout, re.M)
        # Outside the groups: only the local jobs (the header printed from the kernel table, the target).
        alone = set(re.findall(r"^rule (\w+):", proc.stdout, re.M))
        assert alone == {"reduce_matrix", "counts_all"}, alone
        assert len(group_jobs) == len(set(group_jobs)) <= 24
        assert sorted(group_jobs) == sorted(["tools", "build_gcc", "build_clang", "tail",
                                             *(f"cells_{i}of{g.count_jobs}" for i in range(1, g.count_jobs + 1))])
