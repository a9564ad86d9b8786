"""The sweep's output: a live progress panel on a terminal (the rich logger plugin), plain
lines without one, Snakemake's own record of every job with --verbose, and Snakemake's full
log under results/logs/ in every case."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PY, REPO, own_env

TINY = REPO / "configs" / "tiny.yaml"


def sweep(work: Path, results: Path, *extra: str) -> list[str]:
    return [PY, "-m", "analysis.commands.cli", "sweep", "--config", str(TINY), "--cores", "2",
            "--set", f"results_dir={results}", "--set", f"build_dir={work / 'build'}", *extra]


@pytest.fixture(scope="module")
def on_terminal(work: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int, str]:
    """The tiny sweep under a real terminal (script's pty): results dir, what the terminal got,
    exit code, and Snakemake's log of that run (read now: a later sweep into the same results,
    as test_verbose_restores_snakemakes_record runs, rewrites it)."""
    if shutil.which("script") is None:
        pytest.skip("script is not installed (run apt-get install bsdutils)")
    tmp = tmp_path_factory.mktemp("tty")
    results = tmp / "r"
    proc = subprocess.run(["script", "-qec", " ".join(sweep(work, results)), str(tmp / "typescript")], cwd=REPO,
                          capture_output=True, text=True,
                          env=own_env(TERM="xterm-256color", COLUMNS="100", LINES="40", PATH="/usr/bin:/bin"))
    log = results / "logs" / "snakemake.log"
    return (results, (tmp / "typescript").read_text(errors="replace"), proc.returncode,
            log.read_text() if log.exists() else "")


@pytest.mark.slow
def test_terminal_shows_the_progress_panel_not_the_job_record(on_terminal: tuple[Path, str, int, str]) -> None:
    results, screen, rc, log = on_terminal
    assert rc == 0, screen[-3000:]
    assert "\x1b[" in screen  # drawn for a terminal, not as plain text
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert "Workflow Progress" in text
    # Steps done of total, percent, elapsed and estimated time left, on the total's line.
    assert re.search(r"Total Progress\s+\S+\s+\d+/\d+\s+\d+%\s+\d:\d\d:\d\d\s+(\d:\d\d:\d\d|-:--:--)", text), text[-3000:]
    for record in ("Select jobs to execute", "rule count_qemu:", "jobid:"):
        assert record not in screen
    assert "steps (100%) done" in log


@pytest.mark.slow
def test_verbose_restores_snakemakes_record(work: Path, on_terminal: tuple[Path, str, int, str]) -> None:
    """A re-run with nothing to do: --verbose prints Snakemake's own lines, the default does not."""
    results = on_terminal[0]
    quiet = subprocess.run(sweep(work, results), cwd=REPO, capture_output=True, text=True)
    loud = subprocess.run(sweep(work, results, "--verbose"), cwd=REPO, capture_output=True, text=True)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr[-2000:] + loud.stderr[-2000:]
    assert "Building DAG of jobs" not in quiet.stdout + quiet.stderr
    assert "Building DAG of jobs" in loud.stdout + loud.stderr
    assert "Nothing to be done" in loud.stdout + loud.stderr


@pytest.mark.slow
def test_a_failed_job_is_one_line_with_its_log_tail(tmp_path: Path) -> None:
    """The template kernel, broken so that it fails its own verification: one line names the
    rule, the cell and the log's last line and path; the log itself is not dumped."""
    from test_own_kernel import own_tree

    root = own_tree(tmp_path)
    src = root / "my_kernel.c"
    src.write_text(src.read_text().replace("y[i] = a * x[i];", "y[i] = a * x[i] + 1.0f;", 1))
    proc = subprocess.run([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(root / "sweep.yaml"), "--cores", "2"],
                          cwd=REPO, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    failed = [ln for ln in out.splitlines() if ln.startswith("✗ ")]
    log = root / "results" / "logs" / "count" / "qemu" / "gcc" / "vla" / "max" / "scale-acle.log"
    assert len(failed) == 1, out[-3000:]
    assert failed[0].startswith("✗ count_qemu (compiler=gcc, build=vla, cpu=max, kernel=scale, variant=acle): error: ")
    assert "FAIL: y at index 0" in failed[0] and failed[0].endswith(f"(log: {log})")
    assert "[1/" not in out  # the log's progress lines stay in the log


@pytest.mark.slow
def test_a_target_after_the_double_dash_is_a_target_not_a_logger(tmp_path: Path) -> None:
    """`./harness sweep -- counts_all` (bench's Slurm part runs it so): Snakemake 9's --logger takes
    several names, and with the logger options before the target it read `counts_all` as a logger
    name and refused. A dry run writes nothing, so it gets no report and no stale marking."""
    results = tmp_path / "r"
    proc = subprocess.run(sweep(tmp_path, results, "--", "counts_all", "--dry-run"), cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "invalid choice" not in proc.stderr
    assert not (results / "report.html").exists()
    assert not any((results / d).exists() for d in ("kept", "failed", "good.json", ".lock"))
