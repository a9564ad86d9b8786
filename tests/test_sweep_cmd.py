"""The Snakemake command line every local run uses (sweep, regress, count, bench, ab)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.commands import guard, slurm


def test_local_runs_use_the_greedy_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = guard.snakemake_cmd("configs/tiny.yaml", {}, 2, ["counts_all"])
    assert cmd[cmd.index("--scheduler") + 1] == "greedy"
    # --config takes every word after it: it stays last.
    assert cmd[-2:] == ["--config", "sweep=configs/tiny.yaml"]


@pytest.mark.slow
def test_a_local_snakemake_start_never_asks_slurm(tmp_path: Path) -> None:
    """Snakemake imports every executor plugin it finds at each start, and the Slurm one ran
    `scontrol show config` (9 s where slurm-wlm is installed without a running controller).
    setup/install.sh keeps it out of site-packages; `sweep --slurm`
    alone puts it on the path (slurm.executor_env)."""
    called = tmp_path / "called"
    (tmp_path / "scontrol").write_text(f"#!/bin/sh\necho \"$@\" >> {called}\n")
    (tmp_path / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "PYTHONPATH")}
    env["PATH"] = f"{tmp_path}{os.pathsep}{env['PATH']}"
    cmd = guard.snakemake_cmd("configs/tiny.yaml", {}, 2, ["--version"])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip()[0].isdigit(), proc.stderr
    assert not called.exists(), called.read_text()
    # Through Slurm the plugin is there (and it starts with Snakemake's words: the profile follows).
    assert guard.snakemake_cmd("configs/tiny.yaml", {}, 2, [], slurm=True)[:3] == [sys.executable, "-m", "snakemake"]
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('snakemake_executor_plugin_slurm') is None)"
    assert subprocess.run([sys.executable, "-c", code], env={**env, **slurm.executor_env()}).returncode == 0
