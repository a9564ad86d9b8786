"""The whole workflow on the tiny configuration (two kernels, two VLs), and the table writer."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.core import config, table
from analysis.core.model import Binary, Job
from analysis.core.run import Run
from analysis.stages import count
from conftest import REPO, kernels_tree_lock, snakemake

TINY = REPO / "configs" / "tiny.yaml"


@pytest.fixture(scope="module")
def tiny(tiny_sweep: tuple[Path, subprocess.CompletedProcess]) -> Path:
    results, proc = tiny_sweep
    # Without a terminal: plain lines, no per-job record; Snakemake's full log is kept.
    out = proc.stdout + proc.stderr
    assert "Select jobs to execute" not in out and len(out.splitlines()) < 40, out
    assert f"full log: {results / 'logs' / 'snakemake.log'}" in out
    assert "steps (100%) done" in (results / "logs" / "snakemake.log").read_text()
    return results


@pytest.mark.slow
def test_tiny_sweep_produces_table_figures_summary(tiny: Path) -> None:
    for name in ("counts.csv", "provenance.csv", "summary.md", "figures/tiny_copy.png", "figures/tiny_copy_ratio.png"):
        assert (tiny / name).stat().st_size > 0, name
    counts = table.read_counts(tiny / "counts.csv")
    assert list(counts.columns) == table.COLUMNS
    assert not counts.duplicated(table.KEY).any()
    net = counts[counts["metric"] == "roi_net.total"]
    cells = set(zip(net["variant"], net["build"], net["vl"]))
    assert {("c_vec", "vla", 128), ("c_vec", "vla", 512), ("c_vec", "vls", 512),
            ("acle_4v", "vla", 128), ("blocks_call", "vla", 512), ("acle", "vls", 512)} <= cells
    assert (net["value"] > 0).all()
    assert not counts[(counts["metric"] == "roi_net.nonlinear")]["value"].any()
    summary = (tiny / "summary.md").read_text()
    assert "| copy_ratio |" in summary and "| pack_flat |" in summary


@pytest.mark.slow
def test_net_is_measured_minus_baseline(tiny: Path) -> None:
    counts = table.read_counts(tiny / "counts.csv")
    c = counts[(counts["variant"] == "acle_4v") & (counts["vl"] == 128) & (counts["build"] == "vla")]
    value = dict(zip(zip(c["metric"], c["size"]), c["value"]))
    for metric in ("total", "sve", "class.sve_contig_load"):
        assert value[(f"roi_net.{metric}", 65536)] == value[(f"roi.{metric}", 65536)] - value[(f"roi.{metric}", 0)]
        assert value[(f"whole_net.{metric}", 65536)] == value[(f"whole.{metric}", 65536)] - value[(f"whole.{metric}", 0)]


@pytest.mark.slow
def test_provenance_per_run(tiny: Path) -> None:
    prov = pd.read_csv(tiny / "provenance.csv", keep_default_na=False)
    assert (prov["vl"] == prov["vl_seen"]).all()
    assert prov["binary_sha256"].str.fullmatch(r"[0-9a-f]{64}").all()
    assert prov["backend_version"].str.contains("7.2", regex=False).all()
    assert prov["compiler_version"].str.contains("aarch64-linux-gnu-gcc").all()
    assert prov["build_commands"].str.contains("-march=armv8-a+sve", regex=False).all()
    vls = prov[prov["build"] == "vls"]
    assert vls["build_commands"].str.contains("-msve-vector-bits=512", regex=False).all()


@pytest.mark.slow
def test_rerun_does_nothing(tiny: Path, all_sweep) -> None:
    with kernels_tree_lock(all_sweep.build_dir):  # the tiny sweep's build tree, which other workers write
        proc = snakemake(TINY, all_sweep.build_dir, tiny, extra=["--dry-run"])
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_the_data_dictionary_matches_writer() -> None:
    page = (REPO / "docs" / "data.md").read_text()
    section = page.split("## Data dictionary: `counts.csv`")[1].split("Primary key")[0]
    documented = re.findall(r"^\| (\w+) \|", section, re.M)
    assert documented[1:] == table.COLUMNS  # the first row is the table header


def test_writer_refuses_duplicate_keys_and_keeps_old_table(tmp_path: Path) -> None:
    row = dict(kernel="copy", variant="c_vec", op="-", dtype="uint8", layout="contiguous", build="vla",
               cpu_model="max", backend="qemu", compiler="gcc", vl=128, size=0, metric="roi.total", value=1)
    out = tmp_path / "counts.csv"
    out.write_text("old\n")
    with pytest.raises(table.TableError, match="share a primary key"):
        table.write_counts(pd.DataFrame([row, {**row, "value": 2}]), out)
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["counts.csv"]


def test_the_workflow_start_loads_neither_pandas_nor_matplotlib() -> None:
    """Every Snakemake start imports what the rule files import; the plot rule's outputs were
    listed through the modules that read the tables and draw. The data libraries belong to the
    jobs that use them."""
    sources = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    modules = sorted({f"{pkg}.{name.split()[0]}" for src in sources
                      for pkg, names in re.findall(r"^from (analysis[\w.]*) import (.+)$", src.read_text(), re.M)
                      for name in names.split(",")})
    assert "analysis.stages.plotplan" in modules, modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    try: importlib.import_module(m)\n"
            "    except ModuleNotFoundError: importlib.import_module(m.rsplit('.', 1)[0])\n"
            "print(sorted(n for n in ('pandas', 'matplotlib') if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", (modules, out)


@pytest.mark.slow
def test_the_scheduler_looks_once_per_finished_job(tmp_path: Path) -> None:
    """Snakemake's job rate limiter re-ran the scheduler from timers that multiply with every
    finished job (rules/common.smk): at the end of a default sweep's build, hundreds of passes
    a second over every ready job. Without it the scheduler looks once at the start and once
    per finished job. Seven compile jobs on one core take seconds, long enough for the timers."""
    build = tmp_path / "build"
    targets = [str(build / "plugins" / f"lib{c}.so") for c in ("inscount", "opcodes", "memory")]
    # Three builds that compile a harness.o of their own (a VLS build links the VLA build's).
    targets += [str(build / c / b / "obj" / "harness.o") for c, b in (("gcc", "vla"), ("gcc", "nosve"), ("native", "host"))]
    cmd = [sys.executable, "-m", "snakemake", *targets, "--verbose", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(REPO), "--cores", "1", "--config", f"sweep={TINY}", f"build_dir={build}",
           f"results_dir={tmp_path / 'results'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    finished = proc.stderr.count("Finished jobid")
    passes = proc.stderr.count("Ready jobs:")
    assert finished == 7 and passes <= finished + 1, (finished, passes)


@pytest.mark.slow
def test_a_rerun_with_nothing_to_do_does_not_load_pandas(tmp_path: Path) -> None:
    """Snakemake checks the params a rule records against every existing output, and the check
    imports pandas into the main process (snakemake.persistence): 0.3 s of each start, the most
    of any one step of a re-run with nothing to do. The build commands live in files
    (rules/build.smk) and the other rules' values in their command text, so no rule has params."""
    build = tmp_path / "build"
    args = [str(build / "gcc" / "vla" / "obj" / "harness.o"), str(build / "plugins" / "libinscount.so"),
            "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO), "--cores", "1",
            "--config", f"sweep={TINY}", f"build_dir={build}", f"results_dir={tmp_path / 'results'}"]
    first = subprocess.run([sys.executable, "-m", "snakemake", *args], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    probe = ("import atexit, runpy, sys\n"
             "atexit.register(lambda: print('pandas loaded:', 'pandas' in sys.modules, file=sys.stderr))\n"
             f"sys.argv = ['snakemake', *{args!r}]\n"
             "runpy.run_module('snakemake', run_name='__main__')\n")
    again = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stderr, again.stderr[-3000:]
    assert "pandas loaded: False" in again.stderr, again.stderr[-3000:]
    # The collect, plot and perf rules run in no test's re-run: none of them may have params either.
    with_params = [p.name for p in [REPO / "Snakefile", *(REPO / "rules").glob("*.smk")]
                   if re.search(r"^\s+params:", p.read_text(), re.M)]
    assert with_params == []


@pytest.mark.slow
def test_every_build_job_runs_before_the_count_jobs(tmp_path: Path) -> None:
    """Snakemake's greedy scheduler prefers the ready jobs with the largest inputs: a count job
    (a static binary and its plan) beat every compile, so the binaries of the longest count jobs
    were built last and their jobs ran alone at the end (the full matrix's last VLA job, 2,048
    runs, started after two minutes). The build rules have a higher priority (rules/build.smk).
    One core: the order in which jobs start is the scheduler's choice alone."""
    results, build = tmp_path / "results", tmp_path / "build"
    targets = [str(results / "raw" / "qemu" / "gcc" / b / "max" / "copy-c_vec.json") for b in ("vla", "vls512")]
    cmd = [sys.executable, "-m", "snakemake", *targets, "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(REPO), "--cores", "1", "--scheduler", "greedy",
           "--config", f"sweep={TINY}", f"build_dir={build}", f"results_dir={results}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    started = re.findall(r"^(?:local)?rule (\w+):", proc.stderr, re.M)
    counts = [i for i, r in enumerate(started) if r == "count_qemu"]
    assert len(counts) == 2 and counts[0] == len(started) - 2, started


def _jobs(builds: dict[str, list[str]], runs: int = 3) -> list[Job]:
    """Count jobs of rows named in `builds` (kernel-variant -> its builds), `runs` runs each."""
    return [Job(Binary("gcc", b, "qemu", *name.split("-")), "max", tuple(Run(128, s, "-", "uint8", ()) for s in range(runs)))
            for name, bs in builds.items() for b in bs]


def test_a_rows_vls_jobs_merge_where_they_are_short() -> None:
    """A local sweep runs a row's VLS jobs as one job (rules/count.smk) where each is a few runs:
    the default sweep's 170 VLS jobs of 3 runs become 34. Not where a row lacks some of them
    (the merged rule's outputs are one list), where one build is all there is, or where the
    merged job would hold more than a default VLA job's 48 runs (the full matrix's)."""
    vls = [f"vls{n}" for n in (128, 256, 512, 1024, 2048)]
    default = config.load(REPO / "configs" / "default.yaml").count_jobs("qemu")
    assert count.merged_builds(default) == tuple(vls)
    assert count.merged_builds(config.load(REPO / "configs" / "full.yaml").count_jobs("qemu")) == ()
    assert count.merged_builds(_jobs({"copy-acle": ["vla", *vls], "copy-c": ["nosve"]})) == tuple(vls)
    assert count.merged_builds(_jobs({"copy-acle": ["vla", *vls], "copy-c": ["vla", *vls[:2]]})) == ()
    assert count.merged_builds(_jobs({"copy-acle": ["vla", "vls512"]})) == ()
    assert count.merged_builds(_jobs({"copy-acle": vls[:4]}, runs=12)) == tuple(vls[:4])
    assert count.merged_builds(_jobs({"copy-acle": vls[:4]}, runs=13)) == ()


@pytest.mark.slow
def test_the_default_sweep_plans_a_count_job_per_rows_vls_builds(tmp_path: Path) -> None:
    """The default sweep's count jobs, as Snakemake plans them: a VLA job and a merged VLS job per
    row and compiler (34 each; 204 jobs before), each merged job writing its five raw files where
    they were (results/raw/qemu/<compiler>/<build>/max/<row>.json)."""
    proc = snakemake(REPO / "configs" / "default.yaml", tmp_path / "build", tmp_path / "results",
                     targets=["raw_all"], extra=["--dry-run"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = dict(re.findall(r"^(count_qemu\w*)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    assert jobs == {"count_qemu": "34", "count_qemu_vls": "34"}, jobs


@pytest.mark.slow
def test_a_merged_vls_job_writes_each_builds_raw_file(tmp_path: Path) -> None:
    """The merged job runs each VLS build's plan into that build's raw file, and its one log sits
    beside the builds' folders (a sweep of tiny's copy row at two VLS builds)."""
    sweep = yaml.safe_load(TINY.read_text())
    sweep.update(vls_vector_lengths=[256, 512], kernels=[{"kernel": "copy", "variants": ["c_vec"]}],
                 figures=[], checks=[])
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    results = tmp_path / "results"
    raw = {b: results / "raw" / "qemu" / "gcc" / f"vls{b}" / "max" / "copy-c_vec.json" for b in (256, 512)}
    proc = snakemake(path, tmp_path / "build", results, targets=[str(p) for p in raw.values()])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.findall(r"^(?:local)?rule (count_\w+):", proc.stderr, re.M) == ["count_qemu_vls"], proc.stderr[-3000:]
    for bits, p in raw.items():
        runs = json.loads(p.read_text())["runs"]
        assert {r["vl_seen"] for r in runs} == {bits}, p
    assert (results / "logs" / "count" / "qemu" / "gcc" / "vls" / "max" / "copy-c_vec.log").is_file()
