"""./harness bench's CPU parts (issue 53): the default sweep's CPU seconds split into QEMU,
builds, the count jobs' Python, the other jobs and Snakemake, from the records the sweep's
processes write with HARNESS_CPU_DIR set. The parts are computed in whole milliseconds with
Snakemake's as the rest, so they must add up to the sweep's measured CPU exactly; no timing is
asserted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.commands import bench, bench_parts
from analysis.core import config
from conftest import REPO

# One kernel, one VL, one size: two builds (VLA and VLS), two count jobs.
TINY = f"""\
kernel_table: {REPO / "configs" / "kernels.yaml"}
compilers: [gcc]
backends: [qemu]
vector_lengths: [256]
vls_vector_lengths: [256]
sizes: {{copy: [4096]}}
linearity_check: false
kernels:
  - {{kernel: copy, variants: [acle_4v]}}
"""

BUILD = "set -euo pipefail;  bash '/w/build/cmds/link/gcc/vla/qemu/copy/acle_4v/command.sh' > '/w/l.log' 2>&1"
COUNT = "set -euo pipefail;  /v/python -m analysis.stages.count --plan '/w/p.json' --out '/w/r.json' 2> '/w/c.log'"


def record(where: Path, name: str, own: str, children: str, command: str) -> None:
    (where / name).write_text(f"{own}\n{children}\n{command}\n" + '{ times; ... }')


def test_a_job_record_reads_to_milliseconds_and_its_kind() -> None:
    job = bench_parts.parse_job("0m0.003s 0m0.001s\n1m2.345s 0m0.120s\n" + BUILD)
    assert (job.own_ms, job.children_ms, job.ms, job.kind) == (4, 62_465, 62_469, "link")
    assert bench_parts.parse_job("0m0.000s 0m0.000s\n0m0.000s 0m0.000s\n" + COUNT).kind == "count"
    assert bench_parts.parse_job("0m0.000s 0m0.000s\n0m0.000s 0m0.000s\npython -m analysis.stages.plot").kind == "other"


def test_parts_partition_the_total(tmp_path: Path) -> None:
    record(tmp_path, "job-1-1.0", "0m0.002s 0m0.001s", "0m1.000s 0m0.500s", BUILD)
    record(tmp_path, "job-2-1.0", "0m0.002s 0m0.001s", "0m3.000s 0m0.200s", COUNT)
    record(tmp_path, "job-3-1.0", "0m0.010s 0m0.000s", "0m0.000s 0m0.000s", "python -m analysis.stages.collect")
    (tmp_path / "children_qemu-9-1.json").write_text(json.dumps({"children_s": 3.1}))
    (tmp_path / "snakemake_start-5-1.json").write_text(json.dumps({"self_s": 1.5, "children_s": 0.25}))
    (tmp_path / "snakemake_end-5-2.json").write_text(json.dumps({"self_s": 1.8, "children_s": 4.97}))
    p = bench_parts.parts(7.0, tmp_path)
    assert p["parts_ms"] == {"qemu": 3100, "builds": 1503, "count_python": 103, "other_jobs": 10, "snakemake": 2284}
    assert sum(p["parts_ms"].values()) == p["total_cpu_ms"] == 7000
    assert p["jobs"] == {"count": 1, "build": 1, "other": 1} and p["builds_by_rule_ms"] == {"link": 1503}
    # Snakemake's part: its own 1.8 s until its end record, its exit (7 - 1.8 - 4.97), the tools
    # it ran while planning and what the job records miss (4.97 - 4.716 - 0.25).
    assert (p["snakemake_self_ms"], p["snakemake_exit_ms"], p["snakemake_tools_ms"], p["unrecorded_jobs_ms"]) == (1800, 230, 250, 4)
    assert p["snakemake_planning_ms"] == 1500 and p["snakemake_per_job_ms"] == 100 and p["count_python_per_job_ms"] == 103

def test_a_count_job_without_its_tools_record_is_named(tmp_path: Path) -> None:
    record(tmp_path, "job-2-1.0", "0m0.002s 0m0.001s", "0m3.000s 0m0.200s", COUNT)
    with pytest.raises(bench_parts.PartsError, match="1 count jobs recorded their shell but 0 their tools"):
        bench_parts.parts(4.0, tmp_path)


@pytest.mark.slow
def test_a_swept_tree_accounts_for_every_job(tmp_path: Path) -> None:
    """A real sweep from a clean tree: every count job recorded, each part present and positive,
    the parts adding up to the measured CPU, and the printout naming every part."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    fig = bench.sweep_figure(str(cfg), tmp_path / "w", 2, 45.0, with_parts=True)
    p = fig["cpu_parts"]
    assert set(p["parts_ms"]) == {"qemu", *bench_parts.PARTS}
    # bench.json's cpu_s is the same total to a tenth of a second.
    assert sum(p["parts_ms"].values()) == p["total_cpu_ms"] and abs(p["total_cpu_ms"] / 1000 - fig["cpu_s"]) <= 0.05
    assert all(v > 0 for k, v in p["parts_ms"].items() if k != "snakemake"), p
    assert p["jobs"]["count"] == len(config.load(cfg).jobs()) == 2
    assert {"kernel_object", "link"} <= set(p["builds_by_rule_ms"]) and p["jobs"]["other"] >= 2
    assert 0 < p["snakemake_planning_ms"] <= p["snakemake_self_ms"]
    pieces = ("snakemake_self_ms", "snakemake_exit_ms", "snakemake_tools_ms", "unrecorded_jobs_ms")
    assert sum(p[k] for k in pieces) == p["parts_ms"]["snakemake"]
    # What the job records miss: `times` rounds each of its four figures to the nearest
    # millisecond (+-2 ms a job) and each shell exits after its record (a fraction of a
    # millisecond); a job without a record would miss a whole job (a compile: 100 ms or more).
    n = sum(p["jobs"].values())
    assert -2 * n <= p["unrecorded_jobs_ms"] <= 4 * n, p
    printed = "\n".join(bench_parts.lines(p, fig["seconds"], 1.0))
    for part in ("qemu", *bench_parts.PARTS):
        assert f"    {part} " in printed
    assert "the parts add up to the total" in printed
