"""The Snakemake command line every local run uses (sweep, regress, count, bench, ab)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.commands import guard


def test_local_runs_use_the_greedy_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = guard.snakemake_cmd("configs/tiny.yaml", {}, 2, ["counts_all"])
    assert cmd[cmd.index("--scheduler") + 1] == "greedy"
    # --config takes every word after it: it stays last.
    assert cmd[-2:] == ["--config", "sweep=configs/tiny.yaml"]


def test_local_runs_keep_scontrol_from_waiting_for_a_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(guard.shutil, "which", lambda name: "/usr/bin/scontrol" if name == "scontrol" else None)
    cmd = guard.snakemake_cmd("configs/tiny.yaml", {}, 2, [])
    assert cmd[:2] == ["env", "SLURM_CONF=/dev/null"] and cmd[2].endswith("snakemake")
    # Through Slurm the first word is Snakemake's (analysis.commands.slurm inserts its profile after it).
    assert guard.snakemake_cmd("configs/tiny.yaml", {}, 2, [], slurm=True)[0].endswith("snakemake")
    # A configuration of the caller's is theirs; without scontrol there is nothing to wait for.
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    assert guard.snakemake_cmd("configs/tiny.yaml", {}, 2, [])[0].endswith("snakemake")
    monkeypatch.delenv("SLURM_CONF")
    monkeypatch.setattr(guard.shutil, "which", lambda name: None)
    assert guard.snakemake_cmd("configs/tiny.yaml", {}, 2, [])[0].endswith("snakemake")


def test_the_prefixed_command_runs_snakemake() -> None:
    cmd = guard.local_env_prefix() + [str(Path(sys.executable).parent / "snakemake"), "--version"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip()[0].isdigit(), proc.stderr
