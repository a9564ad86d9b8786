"""gem5 cycle backend: the stats parser on trimmed real stats.txt blocks (tests/fixtures/gem5/,
each with its provenance), the one-line skip without gem5, and, where gem5 is found (GEM5),
a real run whose committed ROI instructions match QEMU's count (GEM5 or the gem5 that
`./harness setup --with-gem5` built)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis.backends import RunError, gem5
from analysis.backends.gem5_output import ZERO_WHEN_ABSENT
from analysis.core import config
from analysis.core.config import Run
from analysis.core.schema import ConfigError
from conftest import PY, REPO, run_cell

FIXTURES = REPO / "tests" / "fixtures" / "gem5"
_found = gem5.find_gem5(config.load(REPO / "configs" / "default.yaml"))
GEM5 = str(_found) if _found else None


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


def test_a_system_without_caches_has_no_miss_counts_and_needs_none() -> None:
    """The ideal-memory system (SimpleMemory, no data caches) prints no data cache statistics:
    its rows have no miss counts, none made up as 0; a system with caches still needs them."""
    stats = (FIXTURES / "copy-c_scalar-a64fx-like-vl128-1048576" / "stats.txt").read_text()
    uncached = "\n".join(ln for ln in stats.splitlines() if not ln.startswith(("system.cpu.dcache.", "system.l2.")))
    values = gem5.parse_stats(uncached, "cell", caches=False)
    assert not set(ZERO_WHEN_ABSENT) & set(values)
    assert values["system.switch_cpu.numCycles"] > 0
    with pytest.raises(RunError, match="lacks system.cpu.dcache.overallMisses::total"):
        gem5.parse_stats(uncached, "cell")


def test_the_ideal_memory_system_is_the_paper_core_without_data_caches() -> None:
    systems = config.load_gem5_systems()
    ideal, paper = systems["ideal-memory"], systems["paper"]
    assert not {"l1d", "l2"} & set(ideal) and ideal["l1i"] == paper["l1i"]
    assert ideal["memory"]["type"] == "SimpleMemory" and ideal["o3"] == paper["o3"]
    assert (ideal["clock"], ideal["cache_line"]) == (paper["clock"], paper["cache_line"])


@pytest.mark.parametrize("change, refused", [
    (lambda s: s["memory"].pop("latency"), "latency"),
    (lambda s: s["memory"].update(type="DDR4_2400_8x8"), "memory/(latency|bandwidth): not used here: remove it"),
    (lambda s: s.update(l1d={"size": "32KiB", "assoc": 4}), "'l2' is a dependency of 'l1d'"),
    (lambda s: s["bus"].update(widht=64), "Additional properties are not allowed"),
], ids=["simple-memory-without-latency", "latency-on-dram", "one-cache-alone", "unknown-bus-parameter"])
def test_a_system_description_that_cannot_be_built_is_refused_in_one_line(
        tmp_path: Path, change: Any, refused: str) -> None:
    doc = yaml.safe_load(config.GEM5_SYSTEMS.read_text())
    change(doc["systems"]["ideal-memory"])
    path = tmp_path / "systems.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=refused) as e:
        config.load_gem5_systems(path)
    assert "\n" not in str(e.value)


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.needs_gem5
def test_one_gem5_for_three_vls_matches_qemu_and_a_gem5_per_vl(binaries, plugin_dir, tmp_path: Path) -> None:
    """Real gem5 runs (small size: this checks agreement, not the paper's cache regime): one gem5
    runs the program up to the ROI at VL 128 and forks there for 128, 384 and 2048. Each fork's
    kernel says it ran at its VL, its ROI instructions are QEMU's plus the markers', and its
    statistics are those of a gem5 started at its own VL, to the cycle."""
    runs = [Run(vl, 65536, "-", "uint8", ()) for vl in (128, 384, 2048)]
    paper = config.load_gem5_systems()["paper"]
    exe = binaries("copy", "acle_4v", "vla", "gem5")
    recs = gem5.run_vls(Path(GEM5), exe, "paper", paper, runs, tmp_path / "all", [None] * len(runs))
    assert (tmp_path / "all" / "start-65536" / "config.json").exists()
    for run, rec in zip(runs, recs):
        qemu_roi = run_cell(binaries("copy", "acle_4v"), plugin_dir, run.vl, 65536)["inscount"]["roi"]["total"]
        assert rec["vl_seen"] == run.vl
        assert rec["gem5"]["insts"] == qemu_roi + gem5.MARKER_INSTRUCTIONS
        assert rec["gem5"]["cycles"] > 0
        alone = gem5.run_vls(Path(GEM5), exe, "paper", paper, [run], tmp_path / f"vl{run.vl}", [None])[0]
        assert rec["gem5"] == alone["gem5"]


@pytest.mark.slow
@pytest.mark.needs_gem5
def test_the_ideal_memory_system_runs_the_same_roi_without_cache_rows(binaries, plugin_dir, tmp_path: Path) -> None:
    """gem5's ideal-memory system (the L1I only, SimpleMemory) runs the same ROI instructions as
    the paper system and has no miss counts; at one fixed latency and no line fills its copy
    takes fewer cycles than through the paper system's caches and DRAM."""
    systems = config.load_gem5_systems()
    exe = binaries("copy", "acle_4v", "vla", "gem5")
    run = Run(512, 65536, "-", "uint8", ())
    ideal, paper = (gem5.run_vls(Path(GEM5), exe, name, systems[name], [run], tmp_path / name, [None])[0]["gem5"]
                    for name in ("ideal-memory", "paper"))
    qemu_roi = run_cell(binaries("copy", "acle_4v"), plugin_dir, run.vl, run.size)["inscount"]["roi"]["total"]
    assert ideal["insts"] == paper["insts"] == qemu_roi + gem5.MARKER_INSTRUCTIONS
    assert "l1d_misses" not in ideal and "l1d_misses" in paper
    assert 0 < ideal["cycles"] < paper["cycles"]


@pytest.mark.slow
@pytest.mark.needs_gem5
def test_the_roi_starts_with_the_prepared_buffers_in_the_l2(binaries, tmp_path: Path) -> None:
    """A 1 MiB copy touches 2 MiB, the paper system's L2: the ROI starts with what the program
    prepared (the source's fill, the destination's poison) in the L2, so its reads and writes
    miss the L2 only for the few lines the program's other data displaced. Keeping each
    preparation and copying it back (as a batch does for its later runs) touched 4 MiB before
    the ROI and left every source line to miss: 16,389 L2 misses."""
    paper = config.load_gem5_systems()["paper"]
    exe = binaries("copy", "acle_4v", "vla", "gem5")
    run = Run(512, 1 << 20, "-", "uint8", ())
    rec = gem5.run_vls(Path(GEM5), exe, "paper", paper, [run], tmp_path, [None])[0]["gem5"]
    lines = (1 << 20) // paper["cache_line"]
    assert rec["l2_misses"] < lines // 16, rec


def test_a_gem5_panic_is_the_line_the_failure_names() -> None:
    """gem5 v24 on memcpy sve_nt: simerr holds the panic above a backtrace, simout ends with its
    banner; the failure used to name the banner's last line ("Global frequency set ...")."""
    simerr = ("src/sim/simulate.cc:199: info: Entering event queue @ 3707823000.  Starting simulation...\n"
              "src/arch/arm/faults.cc:783: panic: Attempted to execute unknown instruction (inst 0xa403c021)\n"
              "Memory Usage: 4342996 KBytes\nProgram aborted at tick 3708036500\n--- BEGIN LIBC BACKTRACE ---\n"
              "/root/gem5.fast(_ZN4gem58simulateEm+0x24e)[0x55e2860031ce]\n--- END LIBC BACKTRACE ---\n")
    simout = "command line: gem5.fast ...\n\ninfo: Standard input is not a terminal, disabling listeners.\n" \
             "Global frequency set at 1000000000000 ticks per second\n"
    assert gem5.failure_line(simerr, simout, "") == \
        "src/arch/arm/faults.cc:783: panic: Attempted to execute unknown instruction (inst 0xa403c021)"
    assert gem5.failure_line("warn: x\n", "se_sve.py: expected exactly one ROI\n", "") == "se_sve.py: expected exactly one ROI"


def test_a_row_gem5_cannot_run_is_left_out_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """memcpy sve_nt (LDNT1B, which gem5 v24 does not decode) is counted but not simulated, and
    the sweep says so."""
    sweep = config.load(REPO / "configs" / "memcpy.yaml")
    assert "memcpy-sve_nt" in {j.binary.name for j in sweep.jobs()}
    assert "memcpy-sve_nt" not in {j.binary.name for j in gem5.jobs(sweep, None)}
    monkeypatch.setattr(gem5, "find_gem5", lambda s: Path("/bin/true"))
    monkeypatch.setattr(gem5, "gem5_version", lambda p: "gem5 24.0.0.1")
    assert gem5.preflight(sweep).notes == [
        "gem5: memcpy sve_nt not simulated: gem5 v24.0.0.1 does not decode SVE LDNT1B (scalar plus scalar, 0xa403c021)"]
