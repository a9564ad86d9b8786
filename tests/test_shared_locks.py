"""Sweeps that share a clone's build folder (issue 51, items 1 and 3b).

Two sweeps into two results folders of one clone share its build folder, and Snakemake's lock
check found them in each other's way: the second ended with LockException and a traceback.
Now it waits for the builds it shares, in one line naming the other sweep, and plans again
(analysis.core.snakemake_locks). On storage shared between hosts a lock records its host, and
another host's lock is never taken over as stale.

The sweeps here run the tiny sweep on a build folder of their own, so the first one builds
while the second starts. The first is stopped (SIGSTOP) right after it has taken its lock, so
the second meets it holding its builds for as long as the test needs: no timing assumed.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Iterator

import pytest

from analysis.commands import guard
from conftest import PY, REPO
from test_reliability import _locks_naming

LOCKS = REPO / ".snakemake" / "locks"
OWNER = ".owner.json"  # the records the fix writes beside the lock files


def sweep(results: Path, build: Path, root: Path = REPO) -> subprocess.Popen:
    return subprocess.Popen([PY, "-m", "analysis.commands.cli", "sweep", "--config", "configs/tiny.yaml", "--cores",
                             "2", "--set", f"results_dir={results}", "--set", f"build_dir={build}"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has exited (another test's Snakemake listed a
    moment before may be gone by the time it is read)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def snakemake_of(results: Path, deadline: float) -> tuple[int, list[Path]]:
    """The pid of the Snakemake sweeping into `results` and its output locks, as soon as it has its lock."""
    while time.monotonic() < deadline:
        locks = [lock for lock in _locks_naming(results) if lock.name.endswith(".output.lock")]
        pids = [pid for pid in guard.snakemake_running(REPO) if f"results_dir={results}".encode() in cmdline(pid)]
        if locks and pids:
            return pids[0], locks
        time.sleep(0.01)
    raise AssertionError(f"no Snakemake holds a lock for {results} in {LOCKS}")


def stop_outside_the_flock(pid: int, deadline: float) -> None:
    """SIGSTOP a Snakemake's process group at a moment it does not hold the clone's lock-phase
    flock (.snakemake/harness-locks.flock): stopped inside it, every other Snakemake of the clone
    would wait on the flock for as long as the test runs."""
    while time.monotonic() < deadline:
        os.killpg(pid, signal.SIGSTOP)
        with open(REPO / ".snakemake" / "harness-locks.flock", "a") as f:  # closing it gives the flock back
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
        os.killpg(pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"Snakemake {pid} held the clone's lock-phase flock whenever it was stopped")


def builds_held(locks: list[Path], build: Path) -> list[str]:
    """The files under `build` the run still has to make (in its output lock)."""
    return [k for lock in locks for k in lock.read_text().split() if k.startswith(str(build))]


def record_of(pid: int) -> dict:
    """The owner record of that Snakemake (written beside its lock files)."""
    records = [json.loads(p.read_text()) for p in LOCKS.glob(f"{pid}@*{OWNER}")]
    assert len(records) == 1, sorted(p.name for p in LOCKS.iterdir())
    return records[0]


def line_with(stream: IO[str], needle: str) -> tuple[str, list[str]]:
    """Read `stream` up to the line holding `needle` (the test's timeout bounds the wait)."""
    seen = []
    for line in stream:
        seen.append(line)
        if needle in line:
            return line.strip(), seen
    raise AssertionError(f"the stream ended without {needle!r}:\n{''.join(seen)[-3000:]}")


@pytest.fixture
def first(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    """A tiny sweep into a fresh build folder, stopped holding the lock on builds it has yet to
    make: (its command, its Snakemake's pid, the build folder). Resumed at the end of the test."""
    build = tmp_path / "build"
    proc = sweep(tmp_path / "a", build)
    pid, locks = snakemake_of(tmp_path / "a", time.monotonic() + 240)
    stop_outside_the_flock(pid, time.monotonic() + 60)  # Snakemake and its jobs, holding the lock
    try:
        assert builds_held(locks, build), "the first sweep had made its builds before it was stopped"
        yield proc, pid, build
    finally:
        if proc.returncode is None:
            os.killpg(pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, out[-2000:] + err[-2000:]


@pytest.mark.exclusive
@pytest.mark.slow
def test_a_second_sweep_waits_for_the_builds_it_shares_then_finishes_without_rebuilding(
        tmp_path: Path, first: tuple[subprocess.Popen, int, Path]) -> None:
    """Before the fix: rc 1, LockException, its advice to --unlock the live sweep's lock, and two
    traceback lines from analysis/core/snakemake_locks.py."""
    proc, pid, build = first
    second = sweep(tmp_path / "b", build)
    assert second.stderr is not None
    waiting, before = line_with(second.stderr, "waiting for")
    assert f"the sweep into {tmp_path / 'a'} (pid {pid}" in waiting and f"in {build}/" in waiting, waiting
    record = record_of(pid)  # who holds the lock, for the line above and for other hosts
    assert record["host"] == socket.gethostname() and record["build_dir"] == str(build)
    assert record["results_dir"] == str(tmp_path / "a")
    os.killpg(pid, signal.SIGCONT)
    out, err = second.communicate(timeout=600)
    err = "".join(before) + err
    assert second.returncode == 0, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err and "--unlock" not in out + err and "LockException" not in out + err
    assert sum("waiting for" in ln for ln in err.splitlines()) == 1, err
    # It planned again once the builds were made: its Snakemake ran no job of the build folder.
    log = (tmp_path / "b" / "logs" / "snakemake.log").read_text()
    made = [ln for ln in log.splitlines() if ln.strip().startswith("output:") and str(build) in ln]
    assert not made, made
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    assert (tmp_path / "b" / "counts.csv").read_bytes() == (tmp_path / "a" / "counts.csv").read_bytes()
    assert not list(LOCKS.glob("*.lock")) and not list(LOCKS.glob(f"*{OWNER}"))


@pytest.mark.exclusive
@pytest.mark.slow
def test_ctrl_c_while_waiting_stops_the_sweep_with_one_line(tmp_path: Path,
                                                            first: tuple[subprocess.Popen, int, Path]) -> None:
    """Before the fix the second sweep never waited (it failed with a traceback at once)."""
    _, pid, build = first
    second = sweep(tmp_path / "b", build)
    assert second.stderr is not None
    line_with(second.stderr, "waiting for")
    os.kill(second.pid, signal.SIGINT)  # the command, as a terminal's Ctrl-C
    out, err = second.communicate(timeout=120)
    assert second.returncode == 128 + signal.SIGINT, out[-2000:] + err[-2000:]
    lines = err.strip().splitlines()
    assert lines[-1].startswith("interrupted: ./harness sweep stopped by SIGINT"), err
    assert "Traceback" not in out + err
    # It left no lock of its own, and the first sweep's is whole.
    record = record_of(pid)
    assert [json.loads(p.read_text())["pid"] for p in LOCKS.glob(f"*{OWNER}")] == [pid]
    assert sorted(p.name for p in LOCKS.glob("*.lock")) == sorted(record["locks"])


# ---- 3(b): a clone on storage shared between hosts ----

def fake_lock(root: Path, host: str, pid: int, build: Path) -> list[Path]:
    """The lock files and record a sweep on `host` leaves in the clone at `root`."""
    locks = root / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.input.lock").write_text(f"{build}/gcc/vla/qemu/copy-acle_4v\n")
    (locks / "0.output.lock").write_text(f"{root}/results/elsewhere/counts.csv\n")
    (locks / f"{pid}@{host}{OWNER}").write_text(json.dumps({
        "host": host, "pid": pid, "results_dir": f"{root}/results/elsewhere", "build_dir": str(build),
        "since": "2026-11-28 09:00:00", "locks": ["0.input.lock", "0.output.lock"]}) + "\n")
    return sorted(locks.iterdir())


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_another_hosts_lock_is_never_taken_over(tmp_path: Path) -> None:
    """Before the fix: taken over as stale, because no Snakemake ran in the clone on this host."""
    left = fake_lock(tmp_path, "node-b", dead_pid(), tmp_path / "build")
    assert guard.check_lock(tmp_path) is None
    assert sorted((tmp_path / ".snakemake" / "locks").iterdir()) == left


def test_a_stopped_run_of_this_host_is_taken_over_with_its_record(tmp_path: Path) -> None:
    fake_lock(tmp_path, socket.gethostname(), dead_pid(), tmp_path / "build")
    line = guard.check_lock(tmp_path)
    assert line is not None and line.startswith("took over the Snakemake lock") and "results/elsewhere" in line
    assert not list((tmp_path / ".snakemake" / "locks").iterdir())


def test_a_lock_without_a_record_is_taken_over_as_before(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("x\n")
    line = guard.check_lock(tmp_path)
    assert line is not None and "no Snakemake runs in" in line and not list(locks.iterdir())


def test_unlock_removes_another_hosts_lock_and_names_the_host(tmp_path: Path) -> None:
    fake_lock(tmp_path, "node-b", 4242, tmp_path / "build")
    line = guard.unlock(tmp_path)
    assert "node-b" in line and not list((tmp_path / ".snakemake" / "locks").iterdir())


@pytest.mark.slow
def test_a_sweep_on_the_build_folder_of_another_hosts_sweep_is_refused_before_it_touches_anything(
        tmp_path: Path) -> None:
    """Before the fix the lock was taken over (no Snakemake of this host ran) and the sweep ran
    beside the other host's, on the same build folder."""
    root = tmp_path / "clone"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", ".venv", "build", "results", ".snakemake",
                                                              "__pycache__", ".pytest_cache"))
    left = fake_lock(root, "node-b", os.getpid(), root / "build")
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.md").write_text("an earlier sweep's\n")
    proc = sweep(results, root / "build", root)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out[-2000:] + err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in ("on host node-b", f"the sweep into {root}/results/elsewhere", "./harness unlock",
                   "--set build_dir="):
        assert needle in lines[0], lines[0]
    assert sorted(p.name for p in results.iterdir()) == ["summary.md"]
    assert sorted((root / ".snakemake" / "locks").iterdir()) == left
    assert not (root / "build").exists()


def as_host(host: str, cmd: list[str]) -> list[str]:
    """`cmd` on a host of its own name: a UTS namespace (root only), the clone's storage shared."""
    return ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *cmd]


@pytest.mark.exclusive
@pytest.mark.slow
def test_a_sweep_on_another_host_records_its_host_and_this_hosts_sweep_is_refused(tmp_path: Path) -> None:
    """Two hosts on one clone, as UTS namespaces: the lock of node-a's sweep names node-a, and a
    sweep of this host on the same build folder is refused in one line naming it (before the
    fix it failed with LockException, or took the lock over when node-a's Snakemake was not
    visible here)."""
    if os.geteuid() != 0 or subprocess.run(as_host("node-a", ["true"])).returncode != 0:
        pytest.skip("needs root and unshare --uts (a host name per process)")
    build = tmp_path / "build"
    first = subprocess.Popen(as_host("node-a", [PY, "-m", "analysis.commands.cli", "sweep", "--config",
                                                "configs/tiny.yaml", "--cores", "2", "--set",
                                                f"results_dir={tmp_path / 'a'}", "--set", f"build_dir={build}"]),
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    pid, _ = snakemake_of(tmp_path / "a", time.monotonic() + 240)
    stop_outside_the_flock(pid, time.monotonic() + 60)
    try:
        second = sweep(tmp_path / "b", build)
        out, err = second.communicate(timeout=300)
        assert second.returncode == 2, out[-2000:] + err[-2000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "on host node-a" in lines[0] and "--set build_dir=" in lines[0], err
        assert not (tmp_path / "b").exists()
        assert record_of(pid)["host"] == "node-a"
    finally:
        os.killpg(pid, signal.SIGCONT)
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out[-2000:] + err[-2000:]
