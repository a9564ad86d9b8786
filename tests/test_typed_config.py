"""Issue 29 items 2 and 3: the configuration is typed below analysis/core/ (checks, selectors and
figures built once from the validated sweep, every default from the schemas), and no module under
analysis/ grows past 400 lines."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from analysis.core import checks as core_checks
from analysis.core import config, schema
from analysis.core.table import COLUMNS, STATS_COLUMNS
from analysis.stages import checks
from conftest import REPO

ANALYSIS = REPO / "analysis"
CONFIG_SCHEMAS = ("sweep.schema.yaml", "kernels.schema.yaml", "gem5_systems.schema.yaml")
# Names the harness's own records share with configuration keys. Below analysis/core/ they are
# read from those records (JSON a job wrote or reads, a results folder's files), never from the
# sweep file or the kernel table; the typed model (test below) leaves no dict of configuration to
# read them from. Key -> the records.
RECORD_KEYS = {
    "binary": "a plan's and a raw file's binary path, provenance.csv's binary column",
    "sve": "a run's SVE instruction count (raw counts, ROI functions) and a plan run's sve flag",
    "gem5": "a run's gem5 statistics in its raw file, the gem5 executable in a plan's settings, bench's report",
    "simeng": "a run's SimEng ROI counters in its raw file, the simeng executable in a plan's settings",
    "memory": "a run's memory-client counts in its raw file",
    "env": "a plan's guest environment",
    "params": "a plan run's arguments",
    "perf": "a perf plan's settings and a perf raw file's meta (the perf command and version)",
    "events": "a perf plan's settings and a perf raw file's meta (the events as probed)",
    "calls": "a perf plan's settings and a perf raw file's meta",
    "warmup": "a perf plan's settings and a perf raw file's meta",
    "core": "a perf plan's settings and a perf raw file's meta",
    "processes": "a perf plan's settings, a perf raw file's meta and runs, bench's report",
    "traffic": "the traffic a perf plan's settings carry for the bandwidth",
    "read": "the read bytes of that traffic",
    "write": "the written bytes of that traffic",
    "config": "the sweep file a results folder's good.json names",
    "qemu": "the QEMU version among the tool versions of a fingerprint",
    "mpi": "the MPI library's version among a raw file's tool versions",
    "sampling": "a sampled gem5 run's record of its units (sampling.json) and its plan's settings",
    "period": "the sampling period of perf record in ab's report, a sampled gem5 run's settings",
    "prefix": "a sampled gem5 run's settings in its sampling.json",
    "unit": "a sampled gem5 run's settings in its sampling.json",
    "via": "an armie plan's settings: where its job counts (ArmIE, or DynamoRIO in the guest)",
}
# (module, key) -> why that read of the configuration cannot go through the typed model. None today.
ALLOWED: dict[tuple[str, str], str] = {}
# Modules allowed over 400 lines, with why. None today.
OVER_400: dict[str, str] = {}
# Model fields that hold configuration as it is, on purpose. (class, field) -> why.
PAYLOADS = {
    ("Family", "params"): "key=value arguments handed to every binary of the family as they are",
    ("KernelRow", "params"): "key=value arguments handed to the row's binaries as they are",
    ("KernelRow", "expect"): "codegen facts the tests assert; the one the harness reads (loop) is KernelRow.loop",
    ("Gem5System", "description"): "the system as the gem5 script reads it, handed over as it is",
    ("Sweep", "sections"): "a backend's own section, read by that backend (the harness's own have typed sections)",
}


def _property_names(node: Any, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out.update(value)
            _property_names(value, out)
    elif isinstance(node, list):
        for value in node:
            _property_names(value, out)
    return out


def config_keys() -> set[str]:
    """Every key the configuration files can hold, but the columns of the tables (`kernel`,
    `metric`, `min`, ...: read from a DataFrame everywhere) and the records' names above."""
    keys: set[str] = set()
    for name in CONFIG_SCHEMAS:
        _property_names(schema.load_schema(name), keys)
    return keys - set(COLUMNS) - set(STATS_COLUMNS) - set(RECORD_KEYS)


def config_reads(source: str, keys: set[str]) -> list[tuple[int, str]]:
    """(line, key) of every `x["key"]`, `x.get("key")` and `"key" in x` whose key is a configuration key."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            key = node.left
        else:
            continue
        if isinstance(key, ast.Constant) and key.value in keys:
            found.append((node.lineno, key.value))
    return sorted(found)


def test_the_guard_finds_dictionary_reads_of_the_configuration() -> None:
    """What plot.py did 102 times: a check, a selector or a figure read as a dict."""
    source = ('ok = abs(r - check["target"]) <= check.get("tolerance", 0.1) * check["target"]\n'
              'if "baseline" in fig: title = fig["title"]\n'
              'value = df["metric"]; sve = rec["sve"]; n = meta["processes"]\n')
    assert config_reads(source, config_keys()) == [(1, "target"), (1, "target"), (1, "tolerance"), (2, "baseline"),
                                                   (2, "title")]


def test_no_dictionary_reads_of_the_configuration_below_core() -> None:
    keys = config_keys()
    found = []
    for path in sorted(ANALYSIS.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel.startswith("analysis/core/"):
            continue
        found += [f"{rel}:{line}: [{key!r}]" for line, key in config_reads(path.read_text(), keys)
                  if (rel, key) not in ALLOWED]
    assert not found, "read the typed model (analysis.core.model, checks) instead:\n" + "\n".join(found)


def _types(hint: Any) -> list[Any]:
    return [hint, *(t for arg in typing.get_args(hint) for t in _types(arg))]


def test_the_model_holds_no_untyped_configuration() -> None:
    """Every field reachable from the Sweep (and every check kind) is typed: no `Any` but the
    payloads above, so a figure, check or selector cannot be read as a dict; and no raw document."""
    assert "raw" not in {f.name for f in dataclasses.fields(config.Sweep)}
    todo: list[Any] = [config.Sweep, *(cls for cls, _ in core_checks.KINDS.values())]
    seen, untyped = set(), []
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            types = _types(hints[f.name])
            if Any in types and (cls.__name__, f.name) not in PAYLOADS:
                untyped.append(f"{cls.__name__}.{f.name}: {hints[f.name]}")
            todo += [t for t in types if dataclasses.is_dataclass(t)]
    assert {config.CountFigure, config.Selector, config.PerfFigure, config.PerfCheck, core_checks.Condition} <= seen
    assert not untyped, untyped


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in ANALYSIS.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert set(long) <= set(OVER_400), {k: v for k, v in long.items() if k not in OVER_400}


# --- defaults come from the schemas only --------------------------------------------------------

MINIMAL = """\
kernel_table: configs/kernels.yaml
vector_lengths: [128]
sizes: {copy: [65536]}
kernels: [{kernel: copy, variants: [c_vec, acle_4v]}]
figures: [{name: f, title: t, series: [{kernel: copy}]}]
checks: [{id: c, figure: 2, claim: x, kind: ratio, target: 4.0,
          numerator: {kernel: copy, variant: c_vec}, denominator: {kernel: copy, variant: acle_4v}}]
perf: {events: [task-clock], sizes: {copy: [4096]}}
regression: {metrics: [roi_net.total], tolerance_sets: {wide: [{relative: 0.5}]}}
"""


def _default(*where: str) -> Any:
    """A property's default in the sweep schema: the names down to it (items of an array: [])."""
    path = []
    for key in where:
        path += ["items"] if key == "[]" else ["properties", key]
    return schema.schema_default("sweep.schema.yaml", *path)


def _minimal(tmp_path: Path) -> config.Sweep:
    path = tmp_path / "minimal.yaml"
    path.write_text(MINIMAL)
    return config.load(path)


def test_what_a_sweep_leaves_out_is_the_schemas_default(tmp_path: Path) -> None:
    d = _default
    sweep = _minimal(tmp_path)
    assert (sweep.compilers, sweep.backends) == (d("compilers"), d("backends"))
    assert list(sweep.cpu_models) == [m["name"] for m in d("cpu_models")]
    assert sweep.linearity_check is d("linearity_check") and sweep.vls_vector_lengths == tuple(d("vls_vector_lengths"))
    assert dataclasses.astuple(sweep.time_limits) == tuple(d("time_limit", k) for k in ("base_seconds", "seconds_per_mib",
                                                                                        "gem5_factor"))
    (fig,) = sweep.figures
    assert (fig.metric, fig.scale, fig.ratio_table) == tuple(d("figures", "[]", k) for k in ("metric", "scale", "ratio_table"))
    (chk,) = sweep.checks
    assert isinstance(chk, core_checks.RatioCheck) and chk.conditions == ()
    assert (chk.metric, chk.tolerance, chk.aggregate, chk.note) == tuple(
        d("checks", "[]", k) for k in ("metric", "tolerance", "aggregate", "note"))
    assert sweep.perf is not None and (sweep.perf.processes, sweep.perf.calls, sweep.perf.warmup, sweep.perf.core,
                                       sweep.perf.vector_lengths) == \
        (d("perf", "processes"), d("perf", "calls"), d("perf", "warmup"), d("perf", "core"), tuple(d("perf", "vector_lengths")))
    assert sweep.regression is not None and sweep.regression.golden_dir == d("regression", "golden_dir")
    assert sweep.regression.tolerance_sets["wide"] == (config.ToleranceRule("*", "*", "*", 0.5),)
    assert sweep.results_dir == tmp_path / d("results_dir")
    assert config.dirs(tmp_path / "minimal.yaml") == (tmp_path / d("results_dir"), tmp_path / d("build_dir"))


def test_a_default_changed_in_the_schema_changes_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No default is repeated in code: change it in the schema and the typed sweep follows."""
    original = schema.load_schema

    def changed(name: str) -> dict[str, Any]:
        doc = original(name)
        if name == "sweep.schema.yaml":
            props = doc["properties"]
            props["time_limit"]["properties"]["base_seconds"]["default"] = 7
            props["checks"]["items"]["properties"]["tolerance"]["default"] = 0.25
            props["figures"]["items"]["properties"]["scale"]["default"] = 3
            props["perf"]["properties"]["processes"]["default"] = 4
            props["results_dir"]["default"] = "elsewhere"
        if name == "kernels.schema.yaml":
            doc["properties"]["families"]["additionalProperties"]["properties"]["mpi_library"]["default"] = "ompi5"
        return doc

    monkeypatch.setattr(schema, "load_schema", changed)
    sweep = _minimal(tmp_path)
    assert (sweep.time_limits.base_seconds, sweep.checks[0].tolerance, sweep.figures[0].scale) == (7, 0.25, 3)
    assert sweep.perf is not None and sweep.perf.processes == 4
    assert sweep.results_dir == tmp_path / "elsewhere" and config.dirs(tmp_path / "minimal.yaml")[0] == tmp_path / "elsewhere"
    assert sweep.table.families["copy"].mpi_library == "ompi5"


def test_the_schema_is_left_as_it_was_after_filling_a_document(tmp_path: Path) -> None:
    """The defaults written into one document are copies: a second document gets them fresh."""
    doc = yaml.safe_load(MINIMAL)
    config.validate_doc(doc, "sweep.schema.yaml", tmp_path / "m.yaml", fill_defaults=True)
    doc["compilers"].append("clang")
    assert _minimal(tmp_path).compilers == ["gcc"]


# --- each kind reads what it needs --------------------------------------------------------------

def _with(tmp_path: Path, check: dict[str, Any]) -> Path:
    doc = yaml.safe_load(MINIMAL)
    doc["checks"] = [check]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


RATIO = yaml.safe_load(MINIMAL)["checks"][0]


@pytest.mark.parametrize("check, needle", [
    ({k: v for k, v in RATIO.items() if k != "target"}, "checks/0: 'target' is a required property"),
    ({**RATIO, "kind": "flat"}, "checks/0: 'series' is a required property"),
    ({**RATIO, "series": RATIO["numerator"]}, "checks/0/series: not used here: remove it"),
    ({**RATIO, "conditions": [{"line": "x", "series": RATIO["numerator"]}]},
     "checks/0/conditions/0/series: not used here: remove it"),
])
def test_a_check_states_what_its_kind_reads(tmp_path: Path, check: dict[str, Any], needle: str) -> None:
    """A ratio without its target failed in the plot job (KeyError: 'target') after the whole
    sweep had run; a selector the kind does not read was ignored. Both are refused at load now."""
    with pytest.raises(config.ConfigError, match=needle):
        config.load(_with(tmp_path, check))


def test_every_kind_is_its_own_class_with_its_own_evaluate() -> None:
    assert set(core_checks.KINDS) == set(schema.load_schema("sweep.schema.yaml")["properties"]["checks"]["items"]
                                         ["properties"]["kind"]["enum"])
    for cls, _ in core_checks.KINDS.values():
        assert "evaluate" in vars(cls) and "paper_value" in vars(cls), cls


@pytest.mark.parametrize("kind, paper", [("flat", "constant"), ("inverse_vl", "count x VL constant"),
                                         ("ratio_range", "1.15 .. 1.2"), ("ratio", "1.25")])
def test_a_cycle_check_not_run_shows_the_papers_value(tmp_path: Path, kind: str, paper: str) -> None:
    """Without gem5 a cycle check is `skipped`: its paper column showed `None .. None` for the
    kinds with neither target nor min/max (flat, inverse_vl)."""
    own = {"flat": {"series": {"kernel": "copy", "variant": "c_vec"}},
           "inverse_vl": {"series": {"kernel": "copy", "variant": "c_vec"}},
           "ratio_range": {**{k: RATIO[k] for k in ("numerator", "denominator")}, "min": 1.15, "max": 1.20},
           "ratio": {**{k: RATIO[k] for k in ("numerator", "denominator")}, "target": 1.25}}[kind]
    sweep = config.load(_with(tmp_path, {"id": "c", "figure": 3, "claim": "x", "kind": kind, "metric": "gem5.cycles",
                                         "backend": "gem5", **own}))
    row = checks.claim(sweep.checks[0], pd.DataFrame(), pd.DataFrame(), sweep, ran=set())
    assert (row.result, row.paper) == ("skipped", paper)
