"""`./harness ab`: exact count deltas, interleaved perf runs, git revisions, bad input."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from analysis.backends import perf
from analysis.commands import ab_perf
from analysis.core import config
from conftest import PY, REPO

FIXTURE = REPO / "tests" / "fixtures" / "ab" / "sweep.yaml"


@pytest.fixture(scope="module")
def ab_sweep(work: Path) -> Path:
    """The fixture sweep, building into the session's tree: `ab` builds into its sweep's
    build_dir, the repository's build/ in the fixture (as in configs/default.yaml), which the
    tests used to leave full of their binaries."""
    path = work / "ab-sweep.yaml"
    text = FIXTURE.read_text()
    for old, new in (("kernel_table: configs/kernels.yaml", f"kernel_table: {REPO / 'configs' / 'kernels.yaml'}"),
                     ("extra_kernel_tables: [kernels.yaml]", f"extra_kernel_tables: [{FIXTURE.parent / 'kernels.yaml'}]"),
                     ("build_dir: build", f"build_dir: {work / 'ab-build'}"),
                     ("results_dir: results/ab-test", f"results_dir: {work / 'ab-results'}")):
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


def harness_ab(sweep: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([PY, "-m", "analysis.commands.ab", *args, "--config", str(sweep), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    doc = json.loads((out / "ab.json").read_text()) if (out / "ab.json").exists() else {}
    return proc, doc


@pytest.mark.slow
def test_identical_lines_no_change_exit_0(ab_sweep: Path, tmp_path: Path) -> None:
    proc, doc = harness_ab(ab_sweep, tmp_path, "buffer_is_zero/sve", "buffer_is_zero/sve", "--vl", "128,2048", "--size", "4096")
    assert proc.returncode == 0, proc.stderr
    assert [r["verdict"] for r in doc["rows"]] == ["no change"] * 2
    assert "| 128 | 4096 |" in proc.stdout and (tmp_path / "ab.png").stat().st_size > 0


@pytest.mark.slow
def test_extra_pass_counts_twice_exit_1(ab_sweep: Path, tmp_path: Path) -> None:
    """B runs the scalar kernel twice: exactly twice A's ROI net count, at every VL; CI fails."""
    proc, doc = harness_ab(ab_sweep, tmp_path, "buffer_is_zero/scalar", "buffer_is_zero/scalar_twice", "--vl", "128,1152",
                           "--size", "4096,65536")
    assert proc.returncode == 1, proc.stderr
    assert len(doc["rows"]) == 4
    for r in doc["rows"]:
        assert r["b"] == 2 * r["a"] and r["verdict"] == "more instructions", r
    assert "B is worse than A" in proc.stdout


@pytest.mark.slow
def test_git_revision_of_the_kernel_source(ab_sweep: Path, tmp_path: Path) -> None:
    """The source at HEAD (committed) against the working tree's: the same code, no change."""
    proc, doc = harness_ab(ab_sweep, tmp_path, "buffer_is_zero/sve@HEAD", "buffer_is_zero/sve", "--vl", "256", "--size", "65536")
    assert proc.returncode == 0, proc.stderr
    assert doc["rows"][0]["delta"] == 0 and doc["rows"][0]["a"] > 0
    assert list(tmp_path.glob("rev-*/kernels/zero/sve.c"))


@pytest.mark.parametrize("args, needle", [
    (["buffer_is_zero/nope", "buffer_is_zero/sve"], "unknown variant"),
    (["buffer_is_zero/sve@no-such-rev", "buffer_is_zero/sve"], "not a git revision"),
    (["buffer_is_zero/sve", "buffer_is_zero/sve", "--vl", "100"], "VL 100"),
    (["buffer_is_zero/sve", "buffer_is_zero/sve", "--size", "0"], "--size"),
    (["buffer_is_zero sve", "buffer_is_zero/sve"], "KERNEL/VARIANT"),
    (["icc:buffer_is_zero/sve", "buffer_is_zero/sve"], "unknown compiler"),
    (["--perf", "buffer_is_zero/sve", "buffer_is_zero/scalar"], "not host_native"),
    (["memcpy/x86_avx2", "memcpy/libc"], "compare it with --perf"),
])
def test_bad_input_exit_2_before_any_work(tmp_path, args, needle) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([PY, "-m", "analysis.commands.ab", *args, "--config", str(FIXTURE), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (out / "ab.json").exists()


# Debian's refusal at kernel.perf_event_paranoid=3, as a perf that cannot count prints it.
REFUSING_PERF = """#!/bin/sh
echo "Error:" >&2
echo "Access to performance monitoring and observability operations is limited." >&2
echo "  kernel.perf_event_paranoid = <setting>" >&2
exit 255
"""


def test_a_bad_line_is_named_before_perf_s_refusal(tmp_path: Path) -> None:
    """On a host whose perf cannot count (Debian's default paranoid level), a line that cannot
    be timed is still the one line: it is what to fix first, and the check runs nothing."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "perf").write_text(REFUSING_PERF)
    (tmp_path / "bin" / "perf").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.run([PY, "-m", "analysis.commands.ab", "--perf", "buffer_is_zero/sve", "buffer_is_zero/scalar",
                           "--config", str(FIXTURE), "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "not host_native" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out" / "ab.json").exists()


def test_a_kernel_that_lets_no_user_count_is_one_line_naming_root_s_sysctl() -> None:
    """Debian's kernel.perf_event_paranoid=3: the setting and root's one command, not the last
    line of perf's refusal (an example of the sysctl.conf syntax)."""
    assert perf.refusal(REFUSING_PERF, 3, root=False) == (
        "perf: skipped: kernel.perf_event_paranoid is 3 here, which lets no ordinary user count; "
        "fix (as root): sysctl kernel.perf_event_paranoid=2")
    assert perf.refusal("Error:\nno PMU\n", 2, root=False) == (
        "perf: skipped: perf cannot count here (no PMU); fix: sysctl kernel.perf_event_paranoid=2 (or run as root)")


@pytest.mark.parametrize("a, b, want", [
    ([10, 11, 12], [11.5, 13, 14], "no change"),   # ranges overlap
    ([10, 11, 12], [12.5, 13, 14], "slower"),
    ([10, 11, 12], [7, 8, 9.9], "faster"),
    ([5, 5, 5], [5, 5, 5], "no change"),
])
def test_verdict_is_range_overlap(a, b, want) -> None:
    assert ab_perf.verdict(a, b) == want
    s = ab_perf.summary(a, b)
    assert s["a_min"] <= s["a_avg"] <= s["a_max"] and s["change_pct"] == pytest.approx(100 * (sum(b) / 3 - sum(a) / 3) / (sum(a) / 3))



def _perf_sweep() -> config.Sweep:
    sweep = config.load(FIXTURE)
    sweep.perf = config.perf_section({"events": ["task-clock"], "sizes": {"zero": [4096]}})
    return sweep


@pytest.mark.exclusive
@pytest.mark.slow
@pytest.mark.needs_perf
def test_perf_identical_lines_interleaved_no_change(ab_sweep: Path, tmp_path: Path) -> None:
    """Two identical host lines, A and B interleaved: every verdict 'no change', exit 0, and
    per-symbol sample counts at a fixed period that include the kernel."""
    status = perf.detect(_perf_sweep())
    if not status.host:
        pytest.skip("; ".join(status.messages))
    proc, doc = harness_ab(ab_sweep, tmp_path, "--perf", "buffer_is_zero/scalar", "buffer_is_zero/scalar", "--size", "65536",
                           "--runs", "8", "--calls", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["order"] == ["A", "B"] * 8
    assert [r["verdict"] for r in doc["rows"]] == ["no change"]
    assert len(doc["samples"]["A:65536"]) == len(doc["samples"]["B:65536"]) == 8
    assert any(h["symbol"] == "buffer_is_zero" and h["a"] > 0 for h in doc["hot"]), doc["hot"]
    assert "-c 10000" in proc.stdout


@pytest.mark.slow
def test_line_that_fails_its_check_exits_3(ab_sweep: Path, tmp_path: Path) -> None:
    """Not a verdict: the broken line's FAIL line is reported and CI sees exit 3, not 1."""
    proc, doc = harness_ab(ab_sweep, tmp_path, "buffer_is_zero/scalar", "buffer_is_zero/always_zero", "--vl", "128", "--size", "4096")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "FAIL" in proc.stderr and "always_zero" in proc.stderr
    assert not doc
