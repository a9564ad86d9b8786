"""bless / regress: golden counts, fingerprint, drift report, in a temporary copy of the tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PY, REPO

SMALL = """\
kernel_table: configs/kernels.yaml
results_dir: results/regress_small
build_dir: build
vector_lengths: [128, 384]
sizes: {copy: [65536]}
linearity_check: false
kernels:
  - {kernel: copy, variants: [acle_1v, acle_4v]}
regression:
  golden_dir: results/golden
  metrics: [roi_net.total, "roi_net.class.*", roi.total, whole.total]
  tolerance_sets:
    qemu_changed: [{metric: "whole.*", relative: 0.01}]
  on_fingerprint_change: {qemu: qemu_changed}
"""
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "results", ".snakemake", "__pycache__", ".pytest_cache")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository with a small regression set, blessed once."""
    root = tmp_path_factory.mktemp("tree") / "repo"
    shutil.copytree(REPO, root, ignore=IGNORE)
    (root / "configs" / "regress_small.yaml").write_text(SMALL)
    proc = harness(root, "bless")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "results" / "golden" / "regress_small.csv").exists()
    return root


def harness(root: Path, action: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "analysis.cli", action, "--config", "configs/regress_small.yaml"],
                          cwd=root, capture_output=True, text=True, env=env)


def golden(root: Path) -> Path:
    return root / "results" / "golden" / "regress_small.csv"


def test_unchanged_tree_passes(tree: Path) -> None:
    proc = harness(tree, "regress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "values match" in proc.stdout


def test_regress_in_two_environments_gives_identical_results(tree: Path) -> None:
    env = {**os.environ, "LANG": "C", "SOME_VARIABLE": "y" * 3000, "PATH": os.environ["PATH"] + ":/opt/nothing"}
    first = harness(tree, "regress")
    drift1 = (tree / "results" / "regress_small" / "drift.csv").read_text()
    second = harness(tree, "regress", env=env)
    drift2 = (tree / "results" / "regress_small" / "drift.csv").read_text()
    assert first.returncode == second.returncode == 0
    assert drift1 == drift2


def test_one_extra_instruction_in_a_loop_fails_naming_the_kernel(tree: Path, tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(tree, changed, ignore=shutil.ignore_patterns("build", "regress_small"))
    src = changed / "kernels" / "copy" / "acle_4v.c"
    text = src.read_text()
    loop = "        svst4_u8(all, dst + i, svld4_u8(all, src + i));\n"
    assert loop in text
    src.write_text(text.replace(loop, "    {" + loop.strip() + " __asm__ volatile(\"nop\"); }\n"))
    proc = harness(changed, "regress")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "acle_4v" in proc.stdout
    drift = (changed / "results" / "regress_small" / "drift.csv").read_text().splitlines()
    header = drift[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in drift[1:]]
    moved = [r for r in rows if r["status"] == "moved"]
    assert moved and all(r["variant"] == "acle_4v" for r in moved)
    for r in moved:
        if r["metric"] == "roi_net.total":
            vl = int(r["vl"])
            assert int(r["delta"]) == 65536 // (4 * vl // 8), r  # one more instruction per iteration
    assert {r["metric"] for r in moved} >= {"roi_net.total", "roi.total", "whole.total", "roi_net.class.scalar_other"}
    assert (changed / "results" / "regress_small" / "drift.png").stat().st_size > 0


def reshape_fingerprint(root: Path) -> None:
    """Record the golden CSV's new shape in its fingerprint, as bless does: the golden set
    differs on purpose (a value now counted that was not, one no longer counted)."""
    from analysis import regress

    fp_path = root / "results" / "golden" / "regress_small.fingerprint.json"
    fp_path.write_text(json.dumps({**json.loads(fp_path.read_text()), **regress.golden_shape(golden(root))}))


def test_missing_golden_row_is_reported(tree: Path, tmp_path: Path) -> None:
    changed = tmp_path / "t"
    shutil.copytree(tree, changed, ignore=shutil.ignore_patterns("regress_small"))
    lines = golden(changed).read_text().splitlines()
    dropped = next(line for line in lines if ",roi_net.total," in line)
    golden(changed).write_text("\n".join(line for line in lines if line != dropped) + "\n")
    proc = harness(changed, "regress")
    assert proc.returncode == 2 and "1 rows" not in proc.stderr and "truncated or edited" in proc.stderr
    reshape_fingerprint(changed)
    proc = harness(changed, "regress")
    assert proc.returncode == 1
    assert "1 new" in proc.stdout and "new" in proc.stdout
    lines = golden(changed).read_text().splitlines()
    golden(changed).write_text("\n".join(lines + [dropped.replace(",roi_net.total,", ",roi_net.bogus,")]) + "\n")
    reshape_fingerprint(changed)
    proc = harness(changed, "regress")
    assert proc.returncode == 1
    assert "1 missing" in proc.stdout and "roi_net.bogus" in proc.stdout


def test_corrupt_golden_file(tree: Path, tmp_path: Path) -> None:
    changed = tmp_path / "t"
    shutil.copytree(tree, changed, ignore=shutil.ignore_patterns("regress_small"))
    golden(changed).write_text("kernel,variant\n\x00garbage,,,\n")
    proc = harness(changed, "regress")
    assert proc.returncode == 2
    assert "is corrupt" in proc.stderr and "re-bless" in proc.stderr
    golden(changed).unlink()
    proc = harness(changed, "regress")
    assert proc.returncode == 2 and "no golden file" in proc.stderr and "bless" in proc.stderr


def test_fingerprint_mismatch_names_the_part_and_its_tolerance_set(tree: Path, tmp_path: Path) -> None:
    changed = tmp_path / "t"
    shutil.copytree(tree, changed, ignore=shutil.ignore_patterns("regress_small"))
    fp_path = changed / "results" / "golden" / "regress_small.fingerprint.json"
    fp = json.loads(fp_path.read_text())
    fp["qemu"] = "qemu-aarch64 version 7.2.0 (an older build)"
    # Two parts differ; the first (compiler) has no tolerance set here, so qemu's applies and is named.
    fp["compiler"]["gcc"]["version"] = "aarch64-linux-gnu-gcc (an older build) 12.1.0"
    fp_path.write_text(json.dumps(fp))
    proc = harness(changed, "regress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fingerprint differs in compiler" in proc.stdout and "fingerprint differs in qemu" in proc.stdout
    assert "applying tolerance set 'qemu_changed' (regression/on_fingerprint_change/qemu)" in proc.stdout
    fp_path.write_text("{not json")
    proc = harness(changed, "regress")
    assert proc.returncode == 2 and "fingerprint" in proc.stderr and "corrupt" in proc.stderr


def test_user_ci_workflow_is_a_valid_github_workflow(tmp_path: Path) -> None:
    """The workflow for users' repositories cannot run here: validate it against the GitHub
    workflow schema that check-jsonschema ships (offline)."""
    tool = Path(PY).parent / "check-jsonschema"
    wf = REPO / "ci" / "github" / "sve-regress.yml"
    proc = subprocess.run([str(tool), "--builtin-schema", "vendor.github-workflows", str(wf)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = wf.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest")
    bad = tmp_path / "broken-workflow.yml"
    bad.write_text(broken)
    proc = subprocess.run([str(tool), "--builtin-schema", "vendor.github-workflows", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0
