"""gem5 cycle backend: the stats parser on trimmed real stats.txt blocks (tests/fixtures/gem5/,
each with its provenance), the one-line skip without gem5, and, where gem5 is found (GEM5),
a real run whose committed ROI instructions match QEMU's count (GEM5 or the gem5 that
`./harness setup --with-gem5` built)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from analysis.backends import RunError, gem5
from analysis.core import config
from analysis.core.config import Run
from conftest import PY, REPO, run_cell

FIXTURES = REPO / "tests" / "fixtures" / "gem5"
_found = gem5.find_gem5(config.load(REPO / "configs" / "default.yaml"))
GEM5 = str(_found) if _found else None
needs_gem5 = pytest.mark.skipif(GEM5 is None, reason=f"gem5 not found: {gem5.ENABLE}, to run the cycle tests")


def fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*/stats.txt"))


def test_fixtures_are_real_and_traced() -> None:
    """Every fixture comes from a real gem5 run and says which (never hand-written)."""
    found = fixtures()
    if not found:
        pytest.skip("no gem5 fixtures committed yet")
    for stats in found:
        prov = json.loads((stats.parent / "provenance.json").read_text())
        assert prov["gem5_version"].startswith("gem5 2"), prov
        assert len(prov["config_json_sha256"]) == 64 and prov["command"]
        assert "trimmed" in prov["note"]


@pytest.mark.parametrize("stats", fixtures(), ids=lambda p: p.parent.name)
def test_parser_reads_the_roi_block(stats: Path) -> None:
    prov = json.loads((stats.parent / "provenance.json").read_text())
    values = gem5.parse_stats(stats.read_text(), str(stats))
    got = {metric: values[name] for name, metric in gem5.STATS.items()}
    assert got == prov["expected"]
    assert got["cycles"] > 0 and got["insts"] > 0 and got["ops"] >= got["insts"]


def test_parser_fails_loudly() -> None:
    with pytest.raises(RunError, match="no complete statistics block"):
        gem5.parse_stats("warn: unallocated hint\n", "cell")
    block = ("---------- Begin Simulation Statistics ----------\n"
             "simSeconds 0.001 # Number of seconds simulated\n"
             "---------- End Simulation Statistics   ----------\n")
    with pytest.raises(RunError, match="lacks system.switch_cpu.numCycles"):
        gem5.parse_stats(block, "cell")


def test_absent_miss_count_is_zero_only_beside_its_access_count() -> None:
    """gem5 omits zero miss counts (nozero); the parser reads 0 only when the same cache's
    access count is printed (the a64fx-like fixture is a real case)."""
    stats = (FIXTURES / "copy-c_scalar-a64fx-like-vl128-1048576" / "stats.txt").read_text()
    assert "system.l2.overallMisses" not in stats
    assert gem5.parse_stats(stats, "cell")["system.l2.overallMisses::total"] == 0
    no_access = "\n".join(ln for ln in stats.splitlines() if not ln.startswith("system.l2.overallAccesses"))
    with pytest.raises(RunError, match="lacks system.l2.overallMisses::total"):
        gem5.parse_stats(no_access, "cell")


def test_without_gem5_the_cycle_sweep_is_skipped_in_one_line(tmp_path: Path) -> None:
    # An empty cache: the gem5 that `setup --with-gem5` may have built is not there.
    env = {**{k: v for k, v in os.environ.items() if k != "GEM5"}, "HARNESS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([PY, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO),
                           "--cores", "1", "--config", "sweep=configs/default.yaml", f"results_dir={tmp_path / 'r'}",
                           f"build_dir={tmp_path / 'b'}"], capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cycle sweep skipped" in ln]
    assert len(lines) == 1 and "GEM5=" in lines[0]
    assert "simulate_gem5" not in proc.stdout


@needs_gem5
def test_gem5_roi_instructions_match_qemu(binaries, plugin_dir, tmp_path: Path) -> None:
    """A real gem5 run (small size: this checks agreement, not the paper's cache regime)."""
    run = Run(512, 65536, "-", "uint8", ())
    systems = config.load_gem5_systems()
    rec = gem5.run_once(Path(GEM5), binaries("copy", "acle_4v", "vla", "gem5"), "paper", systems["paper"], run,
                        tmp_path / "out")
    qemu_roi = run_cell(binaries("copy", "acle_4v"), plugin_dir, 512, 65536)["inscount"]["roi"]["total"]
    assert rec["vl_seen"] == 512
    assert rec["gem5"]["insts"] == qemu_roi + gem5.MARKER_INSTRUCTIONS
    assert rec["gem5"]["cycles"] > 0
    assert (tmp_path / "out" / "config.json").exists()
