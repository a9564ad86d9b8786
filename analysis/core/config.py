"""Load the sweep configuration and the kernel table, validate them, and build the typed sweep.

Everything that can be wrong with the input is found here, before any job runs, and
reported as one line naming the fix (ConfigError). Snakemake's rule files and the
command-line front end both go through `load()`. The parts live beside it: reading and the
schemas (schema), the kernel table (kernels), the cross-checks (validate), the typed sweep
(model) and its checks (checks); this module names what the rest of the harness uses of them,
so `config.X` stays the one way in.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from analysis.core import validate
from analysis.core.checks import Check, Condition, build_check
from analysis.core.kernels import (  # re-exported: config.X is the way in
    BUILD_PATTERN, CPU_MODEL_VLS, NO_OP, NOSVE, SIZE_MAX, VALID_VLS, VL_MAX, VL_MIN, VL_STEP, VLS_ALLOWED, KernelRow,
    KernelTable, Machine, Selector, check_size_fits, check_vl, layout_of, load_table, parse_build, run_params, slurm_nodes,
    vl_rule_arg, vl_rule_defines,
)
from analysis.core.model import (  # re-exported: config.X is the way in
    Binary, CountFigure, Firsts, Gem5Sampling, Gem5Section, Gem5System, Job, PerfCheck, PerfFigure, PerfSection, Selection, Sweep,
    TimeLimits, ToleranceRule, count_figure, cross_build, regression_section,
)
from analysis.core import model
from analysis.core.run import Run  # (its own module, for the count jobs; config.Run names it as before)
from analysis.core.schema import (  # re-exported: config.X is the way in
    REPO, SCHEMA_DIR, SWEEP_SCHEMA, ConfigError, backend_sections, base_dir, filled, read_yaml, resolve_path, schema_message, strict_validator,
    schema_default, validate_doc,
)
from analysis.core.validate import ROW_FACTORS, condition_doc, condition_factors, selection  # re-exported: config.X is the way in

GEM5_SYSTEMS = REPO / "configs" / "gem5_systems.yaml"


def read_sweep(path: Path, overrides: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """The sweep file's parameters as given: the file it extends merged in, then the overrides;
    and the files read (the sweep file, the one it extends). Not validated: `load` does that."""
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of parameters")
    read = [path]
    if "extends" in raw:
        raw, parent = _extended(path, raw)
        read.append(parent)
    return {**raw, **(overrides or {})}, read


def _extended(path: Path, raw: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """`extends: other.yaml`: that sweep's parameters, each top-level key given here replacing
    the other's whole (one level only, so a file says everything that differs); and its path."""
    parent_path = resolve_path(raw["extends"], base_dir(path))
    parent = read_yaml(parent_path)
    if not isinstance(parent, dict):
        raise ConfigError(f"{parent_path}: expected a mapping of parameters")
    if "extends" in parent:
        raise ConfigError(f"{path}: extends {parent_path}, which extends another file; extend the last one directly")
    return {**parent, **{k: v for k, v in raw.items() if k != "extends"}}, parent_path


def dirs(config_path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """results_dir and build_dir as `load` resolves them, from the sweep file alone (no kernel
    table, no validation): what `./harness sweep`'s up-to-date check needs before anything else."""
    path = Path(config_path)
    raw, _ = read_sweep(path, overrides)
    base = base_dir(path)
    return dir_value(raw, "results_dir", base), dir_value(raw, "build_dir", base)


def dir_value(raw: dict[str, Any], key: str, base: Path) -> Path:
    """results_dir or build_dir of the sweep (the schema's default where the file has none). An
    empty value (`--set results_dir=`) resolved to the base directory itself: the repository root
    got logs/ and raw/."""
    value = raw[key] if key in raw else schema_default(SWEEP_SCHEMA, "properties", key)
    if not str(value).strip():
        raise ConfigError(f"{key} is empty: give a directory (--set {key}=DIR) or leave it out for the default")
    return resolve_path(value, base)


def portable_doc(src: Path) -> dict[str, Any]:
    """The sweep file `src` as a document that can be written anywhere (bench writes variants of
    a sweep next to its results): its kernel table named by an absolute path."""
    raw = read_yaml(src)
    raw["kernel_table"] = str(resolve_path(raw["kernel_table"], base_dir(src)))
    return raw


def load_gem5_systems(path: Path = GEM5_SYSTEMS) -> dict[str, dict[str, Any]]:
    """The gem5 system presets (configs/gem5_systems.yaml), validated."""
    doc = read_yaml(path)
    validate_doc(doc, "gem5_systems.schema.yaml", path, fill_defaults=True)
    return doc["systems"]


def gem5_section(g: dict[str, Any], systems: dict[str, dict[str, Any]], compilers: list[str]) -> Gem5Section:
    return Gem5Section(
        {name: Gem5System(name, tuple(systems[name]["vector_lengths"]), systems[name]) for name in g["systems"]},
        tuple(g["vector_lengths"]), tuple(g.get("compilers", compilers)), g.get("binary"),
        {family: tuple(v) for family, v in g["sizes"].items()}, g["mode"],
        Gem5Sampling(**g["sampling"]) if g["mode"] == "sampled" else None,
    )


def perf_section(doc: dict[str, Any]) -> PerfSection:
    """A perf section from what a caller states (the schema's defaults for the rest)."""
    return model.perf_section(filled(doc, SWEEP_SCHEMA, "properties", "perf"))


def check_of(sweep: Sweep, doc: dict[str, Any]) -> Check:
    """One check as the sweep file would state it (the schema's defaults for the rest), on this
    sweep: for a caller that evaluates a check of its own."""
    return _checks(sweep, [filled(doc, SWEEP_SCHEMA, "properties", "checks", "items")], _firsts(sweep))[0]


def _firsts(sweep: Sweep) -> Firsts:
    return Firsts(sweep.compilers[0], sweep.backends[0], next(iter(sweep.cpu_models)),
                  next(iter(sweep.gem5.systems)) if sweep.gem5 else None)


def _check(doc: dict[str, Any], firsts: Firsts, conditions: tuple[Condition, ...] = ()) -> Check:
    backend = doc.get("backend", firsts.backend)
    return build_check(doc, backend, doc.get("cpu_model", firsts.cpu_for(backend)), doc.get("compiler", firsts.compiler),
                       conditions)


def _checks(sweep: Sweep, docs: list[dict[str, Any]], firsts: Firsts) -> list[Check]:
    """The checks, each with its conditions as checks of their own and the factor each isolates."""
    return [_check(doc, firsts, tuple(
        Condition(c["line"], c["paper"], c.get("factor") or "; ".join(condition_factors(sweep, doc, c)),
                  _check(condition_doc(doc, c), firsts))
        for c in doc["conditions"])) for doc in docs]


def load(config_path: str | Path, overrides: dict[str, Any] | None = None, machine: Machine | None = None) -> Sweep:
    """Read, validate and build a sweep configuration; raise ConfigError on bad input. `machine`:
    where its runs run, for the size check (None: this machine; a Slurm partition's nodes)."""
    path = Path(config_path)
    raw, _ = read_sweep(path, overrides)
    validate_doc(raw, SWEEP_SCHEMA, path, fill_defaults=True)
    base = base_dir(path)
    # A config kept elsewhere may still name the shipped table (configs/kernels.yaml).
    main_table = resolve_path(raw["kernel_table"], base)
    if not main_table.exists() and (REPO / raw["kernel_table"]).exists():
        main_table = REPO / raw["kernel_table"]
    tables = [main_table] + [resolve_path(p, path.resolve().parent) for p in raw["extra_kernel_tables"]]
    table = load_table(tables)

    vls = tuple(raw["vector_lengths"])
    for vl in vls:
        check_vl(vl, "vector_lengths")
    vls_builds = tuple(raw["vls_vector_lengths"])
    validate.vls_builds(vls_builds)
    cpu_models = validate.cpu_models(raw["cpu_models"], vls, vls_builds)

    selections = [selection(table, s) for s in raw["kernels"]]
    compilers, backends = list(raw["compilers"]), list(raw["backends"])
    sizes = {k: list(v) for k, v in raw["sizes"].items()}
    gem5 = None
    if raw.get("gem5") is not None:  # null: no cycle sweep
        systems = load_gem5_systems()
        validate.gem5_systems(raw["gem5"], systems, sizes)
        gem5 = gem5_section(raw["gem5"], systems, compilers)
    if backends or gem5:  # a perf-only sweep has no count sizes
        validate.sizes(table, sizes, selections, linearity=raw["linearity_check"], machine=machine)
    perf = model.perf_section(raw["perf"]) if "perf" in raw else None
    if perf:
        validate.perf(perf, table, selections)

    sweep = Sweep(
        path=path, table=table, table_paths=tables,
        results_dir=check_dir("results_dir", dir_value(raw, "results_dir", base)),
        build_dir=check_dir("build_dir", dir_value(raw, "build_dir", base)),
        compilers=compilers, backends=backends, cpu_models=cpu_models, vector_lengths=vls,
        vls_vector_lengths=vls_builds, sizes={k: tuple(v) for k, v in sizes.items()},
        linearity_check=raw["linearity_check"], selections=selections, figures=[], checks=[],
        time_limits=TimeLimits(**raw["time_limit"]), gem5=gem5, perf=perf,
        simeng=model.simeng_section(raw["simeng"], compilers) if raw.get("simeng") is not None else None,
        regression=regression_section(raw["regression"]) if "regression" in raw else None,
        sections={name: raw[name] for name in backend_sections() if raw.get(name) is not None},
    )
    validate.figures(sweep, raw["figures"])
    validate.checks(sweep, raw["checks"])
    if gem5:
        for c in gem5.compilers:
            validate.compiler(sweep, c, "gem5/compilers")
    for c in sweep.simeng.compilers if sweep.simeng else ():
        validate.compiler(sweep, c, "simeng/compilers")
    # Count figures and checks read a counting backend's rows: a perf-only sweep has neither.
    if backends:
        firsts = _firsts(sweep)
        sweep.figures = [count_figure(f, firsts) for f in raw["figures"]]
        sweep.checks = _checks(sweep, raw["checks"], firsts)
    return sweep


def check_dir(key: str, path: Path) -> Path:
    """A results or build directory the workflow can use: Snakemake reads braces in a path as
    wildcards, QEMU's -plugin option splits the plugin path at ',' and '=', no part of the
    path may be an existing file or a dangling symbolic link (mkdir failed on it inside a job)."""
    text = str(path.resolve())
    bad = sorted({c for c in text if c in "{}" or (key == "build_dir" and c in ",=") or ord(c) < 32})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise ConfigError(f"{key} {text!r} contains {shown}, which the workflow cannot use in a path: choose another "
                          f"directory (--set {key}=DIR)")
    for p in (path, *path.parents):
        if p.is_symlink() and not p.exists():
            raise ConfigError(f"{key} {path}: {p} is a symbolic link to {os.readlink(p)}, which does not exist: "
                              f"create that directory, remove the link or choose another directory (--set {key}=DIR)")
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"{key} {path}: {p} is a file, not a directory: remove it or choose another "
                                  f"directory (--set {key}=DIR)")
            break
    return path


def check_writable(sweep: Sweep) -> None:
    """Commands that run jobs (sweep, count, bless, regress) write into results_dir and
    build_dir: a read-only one (or the nearest existing directory above it) is named here, before
    any job, not in a job's log that cannot be written. Reading commands (explain, report of a
    finished sweep) leave a read-only results folder alone."""
    for key, path in (("results_dir", sweep.results_dir), ("build_dir", sweep.build_dir)):
        existing = next(p for p in (path, *path.parents) if p.exists())
        # os.access also answers for a read-only mount, which binds root too.
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"{key} {path}: {existing} is read-only: make it writable or choose another directory "
                              f"(--set {key}=DIR)")


def add_sweep_args(parser: argparse.ArgumentParser) -> None:
    """The two options every stage's command line shares: the sweep file and overrides."""
    parser.add_argument("--sweep", "--config", dest="sweep", default="configs/default.yaml",
                        help="sweep configuration (YAML)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a top-level string parameter (results_dir, build_dir)")


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """`--set KEY=VALUE` options as a dict."""
    for kv in pairs:
        if "=" not in kv or not kv.split("=", 1)[0]:
            raise ConfigError(f"--set {kv}: write KEY=VALUE, e.g. --set results_dir=results/mine")
    return dict(kv.split("=", 1) for kv in pairs)


def load_from_args(ns: argparse.Namespace) -> Sweep:
    return load(ns.sweep, parse_overrides(ns.set))
