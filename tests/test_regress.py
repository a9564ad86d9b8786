"""bless / regress: golden counts, fingerprint, drift report, in a temporary copy of the tree."""
from __future__ import annotations

import dataclasses
import io
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
    return subprocess.run([PY, "-m", "analysis.commands.cli", action, "--config", "configs/regress_small.yaml"],
                          cwd=root, capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_unchanged_tree_passes_alike_in_two_environments(tree: Path) -> None:
    env = {**os.environ, "LANG": "C", "SOME_VARIABLE": "y" * 3000, "PATH": os.environ["PATH"] + ":/opt/nothing"}
    first = harness(tree, "regress")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "values match" in first.stdout
    drift1 = (tree / "results" / "regress_small" / "drift.csv").read_text()
    second = harness(tree, "regress", env=env)
    drift2 = (tree / "results" / "regress_small" / "drift.csv").read_text()
    assert second.returncode == 0, second.stdout + second.stderr
    assert drift1 == drift2


@pytest.mark.slow
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


# --- the comparison logic, in-process on the committed golden files (no sweep) ---------------

@pytest.fixture
def golden_reg(tmp_path: Path):
    """The committed regression golden files copied to tmp_path, as a Regression."""
    from analysis.commands import regress

    for suffix in (".csv", ".fingerprint.json"):
        shutil.copy(REPO / "results" / "golden" / f"regress{suffix}", tmp_path / f"regress{suffix}")
    reg = regress.load(REPO / "configs" / "regress.yaml", {"results_dir": str(tmp_path / "results")})
    return dataclasses.replace(reg, golden_dir=tmp_path)


def reshape_fingerprint(reg) -> None:
    """Record the golden CSV's new shape in its fingerprint, as bless does: the golden set
    differs on purpose (a value now counted that was not, one no longer counted)."""
    from analysis.commands import regress

    fp = reg.golden_fingerprint
    fp.write_text(json.dumps({**json.loads(fp.read_text()), **regress.golden_shape(reg.golden_csv)}))


def run_regress(reg, monkeypatch: pytest.MonkeyPatch, now, now_fp: dict | None = None,
                accept: bool = False) -> tuple[int, str]:
    """regress() with the sweep's counts and the fingerprint given: its verdict and report."""
    from analysis.commands import regress

    golden_fp = json.loads(reg.golden_fingerprint.read_text())
    monkeypatch.setattr(regress, "run_sweep", lambda reg, cores: now)
    monkeypatch.setattr(regress, "fingerprint", lambda reg: now_fp or golden_fp)
    out = io.StringIO()
    return regress.regress(reg, 1, out=out, **({"accept_tolerance": True} if accept else {})), out.getvalue()


def test_missing_and_new_values_are_reported(golden_reg, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.core import table
    from analysis.commands import regress

    now = table.read_counts(golden_reg.golden_csv)
    lines = golden_reg.golden_csv.read_text().splitlines()
    dropped = next(line for line in lines if ",roi_net.total," in line)
    golden_reg.golden_csv.write_text("\n".join(line for line in lines if line != dropped) + "\n")
    with pytest.raises(regress.RegressError, match="truncated or edited") as e:
        regress.read_golden(golden_reg)
    assert "1 rows" not in str(e.value)
    reshape_fingerprint(golden_reg)
    rc, out = run_regress(golden_reg, monkeypatch, now)
    assert rc == 1 and "0 moved, 0 missing, 1 new" in out, out
    lines = golden_reg.golden_csv.read_text().splitlines()
    golden_reg.golden_csv.write_text("\n".join(lines + [dropped.replace(",roi_net.total,", ",roi_net.bogus,")]) + "\n")
    reshape_fingerprint(golden_reg)
    rc, out = run_regress(golden_reg, monkeypatch, now)
    assert rc == 1 and "0 moved, 1 missing, 1 new" in out and "roi_net.bogus" in out, out


def test_a_moved_value_within_a_tolerance_rule_passes(golden_reg, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact by default; a tolerance rule (relative, by kernel/variant/metric pattern) lets a
    value move that much and no more."""
    from analysis.core import config, table
    from analysis.commands import regress

    now = table.read_counts(golden_reg.golden_csv)
    whole = now.index[now["metric"] == "whole.total"][0]
    now.loc[whole, "value"] = int(now.loc[whole, "value"] * 1.02)
    drift = regress.compare(table.read_counts(golden_reg.golden_csv), now, [])
    assert list(drift[drift["status"] != "ok"]["metric"]) == ["whole.total"]
    assert regress.compare(table.read_counts(golden_reg.golden_csv), now, [config.ToleranceRule("*", "*", "whole.*", 0.05)])[
        "status"].eq("ok").all()
    assert not regress.compare(table.read_counts(golden_reg.golden_csv), now, [config.ToleranceRule("*", "*", "whole.*", 0.01)])[
        "status"].eq("ok").all()
    assert run_regress(golden_reg, monkeypatch, now)[0] == 1


def test_corrupt_golden_file(golden_reg) -> None:
    from analysis.commands import regress

    golden_reg.golden_csv.write_text("kernel,variant\n\x00garbage,,,\n")
    with pytest.raises(regress.RegressError, match="is corrupt.*re-bless"):
        regress.read_golden(golden_reg)
    golden_reg.golden_csv.unlink()
    with pytest.raises(regress.RegressError, match="no golden file.*bless"):
        regress.read_golden(golden_reg)


def test_fingerprint_mismatch_names_the_part_and_its_tolerance_set(golden_reg, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.core import table
    from analysis.commands import regress

    now_fp = json.loads(golden_reg.golden_fingerprint.read_text())
    now_fp["qemu"] = "qemu-aarch64 version 7.2.0 (a newer build)"
    now_fp["config"] = "another config"
    # Two parts with a tolerance set differ (qemu, then config without one): qemu's applies and is named.
    rc, out = run_regress(golden_reg, monkeypatch, table.read_counts(golden_reg.golden_csv), now_fp)
    assert rc == 0, out
    assert "fingerprint differs in qemu" in out and "fingerprint differs in config" in out
    assert "tolerance set 'qemu_changed' (regression/on_fingerprint_change/qemu)" in out
    # The first part that differs (qemu) has no tolerance set when on_fingerprint_change names only
    # harness: the set applied is harness's, and harness is the part named.
    reg = dataclasses.replace(golden_reg, on_change={"harness": "harness_changed"})
    now_fp["harness"] = "another harness"
    rc, out = run_regress(reg, monkeypatch, table.read_counts(golden_reg.golden_csv), now_fp)
    assert "tolerance set 'harness_changed' (regression/on_fingerprint_change/harness)" in out, out
    golden_reg.golden_fingerprint.write_text("{not json")
    with pytest.raises(regress.RegressError, match="fingerprint.*corrupt"):
        regress.read_golden(golden_reg)


def test_user_ci_workflow_is_a_valid_github_workflow(tmp_path: Path) -> None:
    """The workflow for users' repositories cannot run here: validate it against the GitHub
    workflow schema that check-jsonschema ships (offline)."""
    tool = [PY, "-m", "check_jsonschema"]  # the module, not the console script (a /bin/sh script for some paths)
    wf = REPO / "ci" / "github" / "sve-regress.yml"
    proc = subprocess.run([*tool, "--builtin-schema", "vendor.github-workflows", str(wf)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = wf.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest")
    bad = tmp_path / "broken-workflow.yml"
    bad.write_text(broken)
    proc = subprocess.run([*tool, "--builtin-schema", "vendor.github-workflows", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0


def test_a_sweep_blocked_by_another_run_in_the_tree_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Snakemake under --quiet all exits 1 without a word when another run holds the outputs it
    needs (two commands in one clone share build/): regress names the other run."""
    from analysis.commands import regress

    reg = regress.load("configs/regress.yaml", {"results_dir": str(tmp_path / "regress")})
    monkeypatch.setattr(regress.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 1, stdout="", stderr=""))
    monkeypatch.setattr(regress.guard, "snakemake_running", lambda root=None: [4242])
    monkeypatch.setattr(regress.keep, "after_failure", lambda d, kept: None)
    with pytest.raises(regress.RegressError, match=r"another Snakemake is running in .* \(pid 4242\)"):
        regress.run_sweep(reg, 1)


def test_compiler_change_with_moved_counts_has_its_own_exit_status(golden_reg, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the compiler version changed and an ACLE count moved 20 %: the compiler_changed set
    (25 %) passed it silently. Now every moved cell is named and regress exits 3 unless
    --accept-toolchain-tolerance is given; beyond 25 % it still fails (1)."""
    from analysis.core import table
    from analysis.commands import regress

    now_fp = json.loads(golden_reg.golden_fingerprint.read_text())
    compiler = next(iter(now_fp["compiler"]))
    now_fp["compiler"][compiler]["version"] += " (a newer build)"
    now = table.read_counts(golden_reg.golden_csv)
    cell = now.index[(now["variant"] == "acle_4v") & (now["metric"] == "roi_net.total") & (now["compiler"] == compiler)][0]
    now.loc[cell, "value"] = int(now.loc[cell, "value"] * 1.2)
    rc, out = run_regress(golden_reg, monkeypatch, now, now_fp)
    assert rc == 3, out  # regress.EXIT_TOOLCHAIN
    assert "fingerprint differs in compiler" in out
    assert "toolchain changed (compiler), counts moved: 1 values" in out and "--accept-toolchain-tolerance" in out, out
    assert "tolerated" in out and "acle_4v" in out and "roi_net.total" in out, out
    rc, out = run_regress(golden_reg, monkeypatch, now, now_fp, accept=True)
    assert rc == 0, out
    assert "acle_4v" in out and "accepted by --accept-toolchain-tolerance" in out, out
    drift = (golden_reg.work_dir / "drift.csv").read_text()
    assert drift.count(",tolerated") == 1
    now.loc[cell, "value"] = int(now.loc[cell, "value"] * 1.2)  # 44 %: beyond the set
    assert run_regress(golden_reg, monkeypatch, now, now_fp, accept=True)[0] == 1
    assert run_regress(golden_reg, monkeypatch, now, now_fp)[0] == 1


def test_regress_help_and_the_command_line_pass_the_flag(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from analysis.commands import cli, regress

    with pytest.raises(SystemExit):
        cli.main(["regress", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--accept-toolchain-tolerance" in help_text and "3 the toolchain changed" in help_text
    seen = {}
    monkeypatch.setattr(regress, "main", lambda argv: seen.setdefault("argv", argv) and 0)
    monkeypatch.setattr(cli.guard, "check_lock", lambda: None)
    cli.main(["regress", "--accept-toolchain-tolerance"])
    assert "--accept-toolchain-tolerance" in seen["argv"]


@pytest.mark.parametrize("cut", [-3, -20, -60])
def test_golden_file_cut_mid_line_is_named_truncated(golden_reg, cut: int) -> None:
    """It was blamed on the table's schema version (the cut row's schema_version is empty)."""
    from analysis.commands import regress

    data = golden_reg.golden_csv.read_bytes()
    golden_reg.golden_csv.write_bytes(data[:cut])
    with pytest.raises(regress.RegressError) as e:
        regress.read_golden(golden_reg)
    msg = str(e.value)
    assert "schema version" not in msg
    assert f"golden file {golden_reg.golden_csv} is truncated: its last line" in msg and "re-bless" in msg, msg


def test_golden_file_cut_mid_line_exits_2_with_one_line(golden_reg, capsys) -> None:
    from analysis.commands import regress

    data = golden_reg.golden_csv.read_bytes()
    golden_reg.golden_csv.write_bytes(data[:len(data) // 2])
    cfg = golden_reg.golden_dir / "regress.yaml"
    cfg.write_text((REPO / "configs" / "regress.yaml").read_text()
                   .replace("golden_dir: results/golden", f"golden_dir: {golden_reg.golden_dir}")
                   .replace("kernel_table: configs/kernels.yaml", f"kernel_table: {REPO / 'configs' / 'kernels.yaml'}")
                   .replace("results_dir: results/regress", f"results_dir: {golden_reg.golden_dir / 'out'}")
                   .replace("build_dir: build", f"build_dir: {golden_reg.golden_dir / 'build'}"))
    assert regress.main(["regress", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: golden file") and "is truncated" in err[0], err
