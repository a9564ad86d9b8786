"""The backend protocol, the registry and the plans the workflow hands its jobs (issue 13
items 1, 2): in-process, no emulator runs."""
from __future__ import annotations

import dataclasses

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.backends import Plan, gem5, qemu, registry
from analysis.core import backend_path, config
from analysis.core import schema as config_schema
from analysis.stages import build, checks, count, parse, plotplan, rawcheck
from conftest import REPO

PY = sys.executable
PROTOCOL = ("NAME", "STAGE", "MARKER", "EXCLUSIVE", "GROUPED", "TABLE", "preflight", "jobs", "time_factor", "settings", "inputs",
            "run_job", "metrics", "EVIDENCE", "evidence", "estimates")
BACKEND_NAMES = re.compile(r"""["'](%s)["']""" % "|".join(registry.REGISTRY))


def fake_gem5(tmp_path: Path) -> Path:
    """An executable that only prints gem5's banner: enough to plan a cycle sweep, never to run one."""
    exe = tmp_path / "gem5.fast"
    exe.write_text("#!/bin/sh\necho 'gem5 version 24.0.0.1'\n")
    exe.chmod(0o755)
    return exe


def test_every_backend_implements_the_protocol_under_its_own_name() -> None:
    for name, backend in registry.REGISTRY.items():
        missing = [attr for attr in PROTOCOL if not hasattr(backend, attr)]
        assert not missing, f"backend {name} lacks {missing}"
        assert backend.NAME == name
        assert (build.ROI_SOURCES / backend.MARKER).is_file()
        assert backend.TABLE in ("counts.csv", "perf.csv")


def test_the_sweep_schema_takes_the_backends_from_the_registry() -> None:
    """Issue 29: the `backends` enum and the backends' sections come from the backends' own
    schema files (<name>.schema.yaml beside each module), not from configs/schema/."""
    doc = config_schema.sweep_schema()
    props = doc["properties"]
    listed, sections = [], []
    for name, place in backend_path.places().items():
        part = yaml.safe_load(place.schema.read_text()) if place.schema.exists() else {"listed": name}
        assert set(part) and set(part) <= {"listed", "section"}, place.schema
        listed += [name] if "listed" in part else []
        if "section" in part:
            sections.append(name)
            assert props[name] == part["section"]
    assert props["backends"]["items"]["enum"] == listed == ["qemu", "armie"]
    assert sections == ["armie", "gem5", "simeng", "perf"]  # armie: where its counts come from (via)
    assert list(registry.REGISTRY) == list(backend_path.places())
    # The file in configs/schema names no backend of its own.
    base = yaml.safe_load((REPO / "configs" / "schema" / "sweep.schema.yaml").read_text())["properties"]
    assert "enum" not in base["backends"]["items"] and not set(base) & set(registry.REGISTRY)
    # A sweep names a backend the registry does not know: the enum says which it knows.
    with pytest.raises(config.ConfigError, match=r"backends/0: 'nosuch' is not one of \['qemu', 'armie'\]"):
        config.validate_doc({"kernel_table": "k", "kernels": [{"kernel": "copy"}], "vector_lengths": [128],
                             "backends": ["nosuch"]}, config.SWEEP_SCHEMA, Path("s.yaml"))


# Where a backend's name may appear outside analysis/backends/ (as a quoted string, or as an
# import of its module), which names, and why. Everything else asks the backend.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "analysis/core/config.py": ({"gem5", "perf", "simeng"}, "builds the typed sections of the sweep file (its keys gem5, "
                                "perf and simeng): the configuration loads without importing any backend"),
    "analysis/core/model.py": ({"gem5", "perf"}, "the typed sweep: a gem5 figure's or check's CPU model is a gem5 system; "
                               "perf's section has a key named perf (the command)"),
    "analysis/core/checks.py": ({"gem5"}, "a cycle check explains itself with gem5's IPC and misses (core imports no backend)"),
    "analysis/commands/regress.py": ({"qemu"}, "the golden files' fingerprint has a part named qemu (a file format)"),
    "analysis/commands/report.py": ({"perf"}, "the HTML report's section of perf_summary.md (an element id)"),
    "analysis/commands/ab.py": ({"qemu", "perf"}, "ab compares two lines under QEMU's clients; perf is one of its modes"),
    "analysis/commands/ab_lines.py": ({"qemu", "perf"}, "writes the sweep file ab runs: qemu, or a perf section in perf mode"),
    "analysis/commands/ab_perf.py": ({"perf"}, "ab's perf mode: perf record of the perf backend's native binaries"),
    "analysis/commands/cell.py": ({"qemu"}, "./harness cell reruns one cell under QEMU, as counted"),
    "analysis/commands/bench.py": ({"qemu", "perf"}, "the counting clients' overhead and the share outside the ROI are "
                                   "QEMU's own figures; the memcpy family's host timing is perf's"),
    "analysis/commands/sweep.py": ({"perf"}, "says what perf will measure before the sweep starts (perf.plan)"),
    "analysis/commands/watched.py": ({"qemu", "armie", "gem5", "simeng", "perf"}, "the up-to-date check stats each "
                                     "backend's tool and every place gem5 and SimEng are looked for, importing nothing heavy"),
    "analysis/stages/figures.py": ({"perf"}, "draws perf.csv, perf's table, by its statuses and metric names"),
    "rules/build.smk": ({"perf"}, "the rule of perf's C marker, compiled per native build (the other markers share one rule)"),
}


def guarded_files() -> list[Path]:
    """Every file of the workflow and the analysis but the backends' own."""
    return sorted([*(p for p in (REPO / "analysis").rglob("*.py") if "backends" not in p.relative_to(REPO).parts[:2]),
                   *(REPO / "rules").glob("*.smk"), REPO / "Snakefile"])


def backend_names_in(path: Path) -> set[str]:
    """The backends a file names: quoted ("gem5"), or imported (from analysis.backends import gem5;
    in Python read from its syntax tree, so that a docstring may name a module)."""
    text = path.read_text()
    found = set(BACKEND_NAMES.findall(text))
    if path.suffix == ".py":
        imported = {n for node in ast.walk(ast.parse(text)) for n in _imported(node)}
    else:
        imported = set(re.findall(r"analysis\.backends\.(\w+)", text))
        for m in re.finditer(r"from analysis\.backends import \(?([\w\s,]+)", text):
            imported.update(re.findall(r"\w+", m.group(1)))
    return found | (imported & set(registry.REGISTRY))


def _imported(node: ast.AST) -> set[str]:
    if isinstance(node, ast.ImportFrom) and node.module == "analysis.backends":
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analysis.backends."):
        return {node.module.split(".")[2]}  # type: ignore[union-attr]
    if isinstance(node, ast.Import):
        return {a.name.split(".")[2] for a in node.names if a.name.startswith("analysis.backends.")}
    return set()


def test_no_backend_name_outside_the_backends_but_the_allowed() -> None:
    """Issue 29: the workflow and the analysis ask the backend, never test its name; the few
    places that must name one are listed in ALLOWED with the names and the reason."""
    files = guarded_files()
    assert REPO / "Snakefile" in files and REPO / "analysis" / "stages" / "plot.py" in files
    assert not [p for p in files if p.parent.name == "backends"]
    seen = {}
    for path in files:
        rel = str(path.relative_to(REPO))
        names = backend_names_in(path)
        allowed, _ = ALLOWED.get(rel, (set(), ""))
        assert names <= allowed, f"{rel} names backends {sorted(names - allowed)}: ask the backend instead (or allow it here, with the reason)"
        seen[rel] = names
    stale = [rel for rel, (names, _) in ALLOWED.items() if not seen.get(rel)]
    assert not stale, f"allowed but naming no backend any more: {stale}"


def test_the_guard_finds_a_name_and_an_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text('"""Docstring naming analysis.backends.gem5 only."""\nimport os\n')
    assert backend_names_in(f) == set()
    f.write_text('from analysis.backends import Plan, perf\nx = os.environ["GEM5"] if b == "gem5" else 0\n')
    assert backend_names_in(f) == {"perf", "gem5"}
    smk = tmp_path / "x.smk"
    smk.write_text('_FIGS = P.figures(SWEEP, has_gem5="gem5" in RUNNING)\n')
    assert backend_names_in(smk) == {"gem5"}


def test_no_import_of_the_harness_inside_a_function() -> None:
    """config -> backends.gem5 -> config and regress -> cli were hidden by function-level imports;
    every module of analysis/ now imports the harness at its top, so a loop fails at import."""
    for path in sorted((REPO / "analysis").rglob("*.py")):
        rel = path.relative_to(REPO)
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
                         and (isinstance(n, ast.Import) or (n.module or "").startswith("analysis"))]
                assert not [n for n in inner if isinstance(n, ast.ImportFrom)], f"{rel}: import inside {fn.name}"
    # The configuration does not need any backend to load.
    out = subprocess.run([PY, "-c", "import sys, analysis.core.config; print(sorted(m for m in sys.modules if m.startswith('analysis.')))"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "analysis.backends" not in out and "analysis.commands.cli" not in out


def test_one_parser_for_build_names() -> None:
    assert [config.parse_build(b).vls_bits for b in ("vla", "vls512", "host", "nosve")] == [None, 512, None, None]
    assert [config.parse_build(b).column for b in ("vla", "vls512", "host", "nosve")] == ["vla", "vls", "vla", "vla"]
    with pytest.raises(config.ConfigError, match="use vla, vls<N>, host or nosve"):
        config.parse_build("vls")


def test_the_vl_rule_is_data_for_the_clients_and_the_gem5_script(tmp_path: Path) -> None:
    assert config.VALID_VLS == tuple(range(128, 2049, 128))
    assert config.vl_rule_arg() == "128:2048:128"
    cmd = build.plugin_cmd("memory", tmp_path / "libmemory.so")
    assert all(d in cmd for d in config.vl_rule_defines())
    # The client compiles with the rule given, and not without it (it no longer restates it).
    check = ["gcc", "-fsyntax-only", "-std=gnu11", str(build.PLUGIN_SOURCES / "memory.c")]
    assert subprocess.run(check + list(config.vl_rule_defines()), capture_output=True).returncode == 0
    proc = subprocess.run(check, capture_output=True, text=True)
    assert proc.returncode != 0 and "SVE_VL_MIN" in proc.stderr
    assert "--vl-rule" in gem5.command(Path("gem5"), tmp_path, tmp_path / "s.json", [config.Run(512, 0, "-", "u8", ())],
                                       Path("k"), tmp_path)
    script = (REPO / "gem5_scripts" / "se_sve.py").read_text()
    assert "2048" not in script.split("def main")[1]


def test_the_kernels_vl_rule_agrees_with_the_python_one(tmp_path: Path) -> None:
    """kernels/include/sve_vl.h states the rule for the kernel binaries, analysis/core/config.py
    for the rest: a program built with the header lists what it accepts, and the harness and
    the perf marker state no VL of their own."""
    prog = tmp_path / "vls.c"
    prog.write_text('#include <stdio.h>\n#include "sve_vl.h"\nint main(void)\n{\n'
                    '    for (unsigned long bits = 0; bits <= 2 * SVE_VL_MAX; bits++)\n'
                    '        if (sve_vl_valid(bits))\n            printf("%lu ", bits);\n'
                    '    printf("\\n%d %d %d\\n%s\\n", SVE_VL_MIN, SVE_VL_MAX, SVE_VL_STEP, SVE_VL_RULE);\n'
                    '    return 0;\n}\n')
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", f"-I{build.INCLUDE}", str(prog), "-o", str(tmp_path / "vls")],
                   check=True)
    out = subprocess.run([str(tmp_path / "vls")], capture_output=True, text=True, check=True).stdout
    valid, limits, rule = out.splitlines()
    assert tuple(map(int, valid.split())) == config.VALID_VLS
    assert limits == f"{config.VL_MIN} {config.VL_MAX} {config.VL_STEP}"
    assert rule == f"a multiple of {config.VL_STEP} in [{config.VL_MIN}, {config.VL_MAX}]"
    for src in (build.HARNESS_SOURCE, build.ROI_SOURCES / "roi_perf.c"):
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", src.read_text(), flags=re.S)
        assert '#include "sve_vl.h"' in code and not re.findall(rf"\b({config.VL_MIN}|{config.VL_MAX})\b", code), src


def test_typed_sections_carry_the_defaults_once() -> None:
    sweep = config.load(REPO / "configs" / "default.yaml")
    raw = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    schema = config_schema.sweep_schema()["properties"]
    assert sweep.gem5 is not None and list(sweep.gem5.systems) == raw["gem5"].get("systems", schema["gem5"]["properties"]["systems"]["default"])
    assert sweep.perf is not None and sweep.perf.processes == raw["perf"].get("processes", schema["perf"]["properties"]["processes"]["default"])
    reg = config.load(REPO / "configs" / "regress.yaml").regression
    assert reg is not None and reg.golden_dir == "results/golden" and reg.metrics
    assert sweep.time_limit("copy", "c_vec", 1 << 20, gem5.time_factor(sweep)) == (120 + 60) * 20


def test_a_plan_round_trips_through_its_json(tmp_path: Path) -> None:
    """The plan's versions: the compiler's, its static libc's (glibc's memcpy runs in the ROI; a
    libc upgrade re-runs the job and provenance.csv names it), the host's, the backend's."""
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    job = qemu.jobs(sweep, None)[0]
    ready = registry.Ready({"qemu": "qemu-aarch64 version 7.2"})
    versions = {"compiler.gcc": "gcc 12", "libc.gcc": "2.36-8cross1 libc.a:e8", "libc.clang": "x", "host": "h"}
    plan = count.plan_job(sweep, job, ready, versions, {})
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.runs == job.runs and len(plan.time_limits) == len(job.runs)
    assert plan.meta["versions"] == {"compiler.gcc": "gcc 12", "libc.gcc": "2.36-8cross1 libc.a:e8", "host": "h",
                                     "qemu": "qemu-aarch64 version 7.2"}
    b = job.binary
    shared = build.prep_cache_dir(sweep.build_dir, sweep.table, b.compiler, b.kernel, b.variant)
    assert plan.settings == {"plugin_dir": str(sweep.build_dir / "plugins"), "batch": True, "prep_cache": str(shared)}


def test_a_count_job_runs_in_one_process_unless_its_family_is_mpi() -> None:
    """qemu.batches: a job's runs share one QEMU process (the binary's --batch mode), split only
    where the CPU changes (with or without SVE); an MPI family's job runs one run per process."""
    runs = tuple(config.Run(vl, n, "-", "u8", (), sve=vl > 0) for vl, n in ((128, 0), (256, 64), (0, 0), (0, 64), (512, 0)))
    plan = Plan("qemu", "k", "max", runs, (1.0,) * 5, {}, {}, {"plugin_dir": "p", "batch": True})
    assert qemu.batches(plan) == [[0, 1], [2, 3], [4]]
    assert qemu.batches(dataclasses.replace(plan, settings={"plugin_dir": "p", "batch": False})) == [[0], [1], [2], [3], [4]]
    # In a process, the runs of one size and parameter set are consecutive (the harness keeps
    # one set's preparation), each VL in turn, as the plan's VL-major order is not.
    sweep = [config.Run(vl, n, "-", "u8", (("k", k),)) for vl in (256, 128) for n in (64, 0) for k in (2, 1)]
    plan = Plan("qemu", "k", "max", tuple(sweep), (1.0,) * 8, {}, {}, {"plugin_dir": "p", "batch": True})
    [order] = qemu.batches(plan)
    assert [(sweep[i].size, sweep[i].params, sweep[i].vl) for i in order] == [
        (n, (("k", k),), vl) for n in (0, 64) for k in (1, 2) for vl in (128, 256)]
    ready = registry.Ready({})
    for name, mpi_family in (("configs/default.yaml", False), ("configs/mpi.yaml", True)):
        sweep = config.load(REPO / name)
        assert qemu.jobs(sweep, None), name
        for job in qemu.jobs(sweep, None):
            assert qemu.settings(sweep, job, ready)["batch"] is not mpi_family, (name, job.binary)


def test_gem5_plans_record_the_compiler_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 defect: gem5 rows had an empty compiler_version (the job's preflight dropped the
    compiler when no backend tool was checked)."""
    monkeypatch.setenv("GEM5", str(fake_gem5(tmp_path)))
    sweep = config.load(REPO / "configs" / "default.yaml")
    ready, planned, versions = registry.preflight(sweep)
    assert ready["gem5"].versions == {"gem5": "gem5 24.0.0.1"}
    job = next(j for j in planned if j.binary.backend == "gem5")
    plan = count.plan_job(sweep, job, ready["gem5"], versions, {})
    assert plan.meta["versions"]["compiler.gcc"].startswith("aarch64-linux-gnu-gcc")
    assert plan.meta["versions"]["gem5"] == "gem5 24.0.0.1"
    assert plan.settings["system"] == sweep.gem5.systems[job.cpu_model].description  # type: ignore[union-attr]
    assert plan.time_limits[0] == sweep.time_limit(job.binary.kernel, job.binary.variant, job.runs[0].size, 20.0)


@pytest.mark.slow
def test_the_workflow_plans_the_gem5_rule_and_says_the_skip_once(tmp_path: Path) -> None:
    """Planning only: a fake gem5 (never run) gives the cycle sweep its jobs and plan files."""
    def dry(gem5_path: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "GEM5": gem5_path}
        return subprocess.run([PY, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"), "--directory",
                               str(REPO), "--cores", "1", "--config", f"sweep={sweep_file}",
                               f"results_dir={tmp_path / 'r'}", f"build_dir={tmp_path / 'b'}"],
                              capture_output=True, text=True, env=env, cwd=REPO)
    text = (REPO / "configs" / "tiny.yaml").read_text() + "gem5: {systems: [paper], vector_lengths: [128, 512]}\n"
    sweep_file = tmp_path / "tiny_gem5.yaml"
    sweep_file.write_text(text.replace("kernel_table: configs/kernels.yaml", f"kernel_table: {REPO / 'configs/kernels.yaml'}")
                          .replace("results_dir: results/tiny", f"results_dir: {tmp_path / 'r'}"))
    proc = dry(str(fake_gem5(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "simulate_gem5" in proc.stdout
    plans = sorted((tmp_path / "r" / "plans" / "gem5").rglob("*.json"))
    assert len(plans) == 4  # two kernels x two variants, one system
    plan = Plan.from_json(plans[0].read_text())
    assert {r.vl for r in plan.runs} == {128, 512} and plan.meta["versions"]["compiler.gcc"]
    skipped = dry(str(tmp_path / "missing"))
    assert skipped.returncode == 0 and "simulate_gem5" not in skipped.stdout
    assert len([ln for ln in (skipped.stdout + skipped.stderr).splitlines() if "cycle sweep skipped" in ln]) == 1


def test_count_runs_its_plan_and_a_stop_iteration_is_not_a_missing_job(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """Issue 13 defect: count.py reported any StopIteration as "the sweep has no job"."""
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    job = qemu.jobs(sweep, None)[0]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(count.plan_job(sweep, job, registry.Ready({}), {}, {}).to_json())

    def broken(plan: Plan, log: object) -> None:
        raise StopIteration

    monkeypatch.setattr(qemu, "run_job", broken)
    with pytest.raises(StopIteration):
        count.main(["--plan", str(plan_file), "--out", str(tmp_path / "raw.json")])
    assert "no job" not in capsys.readouterr().err
    assert count.main(["--plan", str(tmp_path / "none.json"), "--out", str(tmp_path / "raw.json")]) == 2
    assert "no plan" in capsys.readouterr().err
    assert not (tmp_path / "raw.json").exists()


# A count job as its rule starts it (`python -m analysis.stages.count`), then the modules it imported.
JOB_MODULES = """\
import json, runpy, sys
try:
    runpy.run_module("analysis.stages.count", run_name="__main__", alter_sys=True)
except SystemExit as e:
    status = e.code
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def test_a_count_job_imports_its_own_backend_and_not_the_sweep_s_configuration(tmp_path: Path) -> None:
    """Issue 28 (lighter jobs): each of a sweep's ~200 count jobs imported every backend, the
    sweep's configuration (yaml) and the build stage, ~60 ms of CPU per job. A job imports the
    backend its plan names (the registry imports it there) and what that backend needs."""
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    binary = tmp_path / "k"
    binary.write_bytes(b"\x7fELF")  # a plan without runs reads its binary's checksum only
    plan = dataclasses.replace(count.plan_job(sweep, qemu.jobs(sweep, None)[0], registry.Ready({}), {}, {}),
                               binary=str(binary), runs=(), time_limits=())

    def job(plan: Plan) -> tuple[dict, subprocess.CompletedProcess]:
        (tmp_path / "plan.json").write_text(plan.to_json())
        proc = subprocess.run([PY, "-c", JOB_MODULES, "--plan", str(tmp_path / "plan.json"), "--out", str(tmp_path / "raw.json")],
                              cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc

    out, _ = job(plan)
    assert out["status"] == 0 and json.loads((tmp_path / "raw.json").read_text())["runs"] == []
    modules = set(out["modules"])
    assert {m for m in modules if m.split(".")[0] == "analysis"} == {
        "analysis", "analysis.backends", "analysis.backends.clients", "analysis.backends.qemu", "analysis.backends.registry",
        "analysis.backends.staging", "analysis.core",
        "analysis.core.backend_path", "analysis.core.cpu_record", "analysis.core.files", "analysis.core.run", "analysis.core.toolchain", "analysis.stages"}
    assert not modules & {"yaml", "jsonschema", "pandas", "numpy", "snakemake", "statistics"}
    # A backend the registry does not know: the same one line as before, and no backend imported.
    out, proc = job(dataclasses.replace(plan, backend="nosuch"))
    assert out["status"] == 2 and not [m for m in out["modules"] if m.startswith("analysis.backends.")
                                       and m not in ("analysis.backends.registry", "analysis.backends.staging")]
    assert proc.stderr == f"error: plan {tmp_path / 'plan.json'} names backend 'nosuch'; known: qemu, armie, gem5, simeng, perf\n"


def test_metrics_come_from_the_record_s_backend() -> None:
    meta = {"backend": "gem5"}
    rec = {"gem5": {"cycles": 1000.4, "insts": 500.0, "ipc": 0.5004}}
    assert dict(parse.run_metrics(meta, rec, {})) == {"gem5.cycles": 1000, "gem5.insts": 500, "gem5.ipc_milli": 500}
    perf_meta = {"backend": "perf", "calls": 10, "events": {"cycles": "ok", "bogus": "unknown_event"}}
    procs = [{"counters": [{"event": "cycles", "value": v, "status": "ok"}], "times_ns": [t, t]}
             for v, t in ((1000.0, 100), (3000.0, 300))]
    assert dict(parse.run_metrics(perf_meta, {"processes": procs}, {})) == {"perf.cycles": 200,
                                                                            "perf.time_per_call_ns": 200}


def test_the_rules_log_errors_through_one_helper() -> None:
    """`2> {log} || { tail ...; exit 1; }` is written once (common.smk's logged())."""
    rules = {p.name: p.read_text() for p in (REPO / "rules").glob("*.smk") if p.name != "build.smk"}
    assert sum(t.count("tail -n 1") for t in rules.values()) == 1
    assert "SKIP_SAID" not in "".join(rules.values()) + (REPO / "analysis" / "commands" / "sweep.py").read_text()


def test_analysis_is_grouped_by_role() -> None:
    """A newcomer finds a stage, a backend or a command by folder name: nothing else sits at
    the top of analysis/."""
    top = REPO / "analysis"
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py"]
    assert sorted(p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__") == \
        ["backends", "commands", "core", "snakemake_plugins", "stages"]


def test_the_reports_ask_each_row_s_backend(tmp_path: Path) -> None:
    """Issue 29: the raw-record checks, the figures left out, the skipped checks and the summary's
    gem5 section come from the backend (check_record, NOT_RUN, report), not from its name."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    drawn = plotplan.figures(sweep, {"qemu", "gem5"})
    without = plotplan.figures(sweep, {"qemu"})
    assert {f.backend for f in drawn if f not in without} == {"gem5"} and len(without) < len(drawn)
    cycle = next(c for c in sweep.checks if c.backend == "gem5")
    row = checks.claim(cycle, pd.DataFrame(), pd.DataFrame(), sweep, {"qemu"})
    assert row.result == "skipped" and row.reason == "no gem5 rows: the cycle sweep did not run (gem5 not found)"
    key = {"kernel": "copy", "variant": "c_vec", "op": "-", "dtype": "u8", "compiler": "gcc", "vl": 128, "size": 64,
           "build": "vla"}
    counts = pd.DataFrame([{**key, "backend": "gem5", "cpu_model": "paper", "metric": "gem5.insts", "value": 103},
                           {**key, "backend": "qemu", "cpu_model": "max", "metric": "roi.total", "value": 100}])
    prov = pd.DataFrame([{**key, "backend": b, "evidence": e} for b, e in (("gem5", "gem5"), ("qemu", "QEMU plugins"))])
    assert "expected 0 everywhere; 1 of 1 cells agree." in "\n".join(gem5.report(counts, prov))
    assert qemu.report(counts, prov) == [] and gem5.report(counts[counts["backend"] == "qemu"], prov) == []
    # A record is checked by its own backend.
    run = {"vl": 128, "size": 0, "op": "-", "dtype": "u8", "vl_seen": 128}
    with pytest.raises(rawcheck.RawError, match=r"runs\[0\]\.gem5 is not a table of numbers"):
        rawcheck._check_run({**run, "gem5": {"cycles": "many"}}, "runs[0]", "gem5")
    with pytest.raises(rawcheck.RawError, match=r"runs\[0\] has no inscount counts"):
        rawcheck._check_run({**run, "gem5": {"cycles": 1.0}}, "runs[0]", "qemu")
    rawcheck._check_run({**run, "gem5": {"cycles": 1.0}}, "runs[0]", "gem5")
