"""An upgraded harness re-draws what its Python draws: the stages that turn raw files into
tables, checks and figures run again when the harness's Python changed, though no count did.

Snakemake re-runs a job whose command text changed, not one whose imported modules changed: a
sweep after an edit of analysis/stages/plot.py said "Nothing to be done" and kept the summary the
old code wrote. The stages' commands now carry a digest of analysis/ (rules/common.smk).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from analysis.core import files
from conftest import PY, REPO
from test_uptodate import sweep_yaml  # the template kernel's sweep, its kernel table read from the clone

TEMPLATE = REPO / "kernels" / "template"


def test_the_digest_follows_every_python_file_s_name_and_content(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not Python\n")
    first = files.python_digest(tmp_path)
    assert files.python_digest(tmp_path) == first and len(first) == 16
    (tmp_path / "notes.txt").write_text("changed, still not Python\n")
    assert files.python_digest(tmp_path) == first
    (tmp_path / "a" / "x.py").write_text("x = 2\n")
    edited = files.python_digest(tmp_path)
    assert edited != first
    (tmp_path / "a" / "x.py").rename(tmp_path / "a" / "y.py")
    assert files.python_digest(tmp_path) not in (first, edited)


def sweep(clone: Path, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "analysis.commands.cli", "sweep", "--config", str(root / "sweep.yaml"),
                           "--cores", "2"], cwd=clone, capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(900)
def test_an_edit_of_the_harness_s_python_draws_the_summary_again(tmp_path: Path, work: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    root = tmp_path / "own"
    root.mkdir()
    for name in ("my_kernel.c", "my_kernels.yaml"):
        (root / name).write_text((TEMPLATE / name).read_text())
    (root / "sweep.yaml").write_text(sweep_yaml(root, work / "stage-code-build", [128]))
    first = sweep(clone, root)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    summary, counts = root / "results" / "summary.md", root / "results" / "counts.csv"
    before = (summary.stat().st_mtime_ns, counts.stat().st_mtime_ns, counts.read_bytes())
    raw = sorted((root / "results" / "raw").rglob("*.json"))
    raw_before = [p.stat().st_mtime_ns for p in raw]

    plot = clone / "analysis" / "stages" / "plot.py"
    plot.write_text(plot.read_text() + "\n# an upgrade that changes no count\n")
    again = sweep(clone, root)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert summary.stat().st_mtime_ns != before[0], "summary.md kept what the old code wrote"
    assert counts.stat().st_mtime_ns != before[1] and counts.read_bytes() == before[2]
    # The measurements are not taken again: the raw files stay as they were.
    assert raw and [p.stat().st_mtime_ns for p in raw] == raw_before
