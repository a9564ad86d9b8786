"""Regression of instruction counts: `bless` records golden counts, `regress` recounts and
compares them.

The regression set is an ordinary sweep file with a `regression:` section (see
configs/regress.yaml). Golden files live in results/golden/<name>.csv (a subset of the tidy
table) and <name>.fingerprint.json (what produced them). Values must match exactly unless a
tolerance rule of the config says otherwise; when the fingerprint differs, the differing
parts are named, and values that moved within the tolerance set the config assigns to them are
named too and pass only with --accept-toolchain-tolerance.

Exit status: 0 every value matches (or moved within an accepted tolerance set); 1 a value
moved beyond its tolerance, or is missing or new; 2 bad input (configuration, golden files);
3 the fingerprint changed (toolchain) and values moved within its tolerance set, which was not
accepted (EXIT_TOOLCHAIN).
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import analysis
from analysis.backends import registry
from analysis.commands import guard, keep
from analysis.core import config, files, table, toolchain

REPO = config.REPO
# Sources whose change can move counts without any kernel changing: part of the fingerprint.
HARNESS_SOURCES = ["armie_clients", "kernels/harness", "kernels/include", "kernels/roi"]
# When several parts differ, the first in this order names the tolerance set.
PART_ORDER = ["compiler", "libc", "qemu", "harness", "config"]
# regress's own exit status for "the toolchain changed and counts moved" (within the tolerance
# set of the changed part): neither a pass nor a regression until someone looks.
EXIT_TOOLCHAIN = 3
ACCEPT_FLAG = "--accept-toolchain-tolerance"
ACCEPT_HELP = (f"pass when the fingerprint (compiler, libc, QEMU, harness, config) changed and values moved only "
               f"within the tolerance set regression/on_fingerprint_change names for it; without it such a run "
               f"names every moved value and exits {EXIT_TOOLCHAIN}")
DRIFT_COLUMNS = ["kernel", "variant", "op", "dtype", "build", "cpu_model", "compiler", "vl", "size", "metric",
                 "golden", "now", "delta", "percent", "status"]


class RegressError(Exception):
    """Golden files missing or unreadable, or the regression set misconfigured: one line."""


@dataclass
class Regression:
    sweep: config.Sweep
    name: str
    golden_dir: Path
    metrics: list[str]
    tolerance: list[config.ToleranceRule]
    tolerance_sets: dict[str, tuple[config.ToleranceRule, ...]]
    on_change: dict[str, str]

    @property
    def golden_csv(self) -> Path:
        return self.golden_dir / f"{self.name}.csv"

    @property
    def golden_fingerprint(self) -> Path:
        return self.golden_dir / f"{self.name}.fingerprint.json"

    @property
    def work_dir(self) -> Path:
        return self.sweep.results_dir


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> Regression:
    sweep = config.load(path, overrides)
    reg = sweep.regression
    if reg is None:
        raise RegressError(f"{path}: no 'regression' section: it names the metrics, golden_dir and tolerances")
    for part, name in reg.on_fingerprint_change.items():
        if name not in reg.tolerance_sets:
            raise RegressError(f"{path}: regression/on_fingerprint_change/{part} names unknown tolerance set '{name}'")
    return Regression(
        sweep=sweep, name=Path(path).stem,
        golden_dir=config.resolve_path(reg.golden_dir, config.base_dir(Path(path))),
        metrics=list(reg.metrics), tolerance=list(reg.tolerance),
        tolerance_sets=reg.tolerance_sets, on_change=dict(reg.on_fingerprint_change),
    )


def _hash_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(REPO) if p.is_relative_to(REPO) else p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def fingerprint(reg: Regression) -> dict[str, Any]:
    sweep = reg.sweep
    _, _, versions = registry.preflight(sweep)
    flags = sorted({" ".join(r.cflags.get(c, ())) for r in sweep.table.rows for c in sweep.compilers})
    harness_files = [p for d in HARNESS_SOURCES for p in (REPO / d).rglob("*") if p.is_file()]
    return {
        "compiler": {c: {"version": versions[f"compiler.{c}"], "flags": " ".join(toolchain.BASE_CFLAGS),
                         "row_flags": flags} for c in sweep.compilers},
        "qemu": versions.get("qemu", ""),
        "libc": {c: versions[f"libc.{c}"] for c in sweep.compilers},
        "harness": f"{analysis.__version__} sources:{_hash_files(harness_files)}",
        "config": _hash_files([sweep.path.resolve(), *sweep.table_paths]),
    }


def differing_parts(golden: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return [p for p in PART_ORDER if golden.get(p) != now.get(p)]


def run_sweep(reg: Regression, cores: int) -> pd.DataFrame:
    """Recount the regression set into its own results folder, under that folder's lock and
    with its last good set kept as a sweep keeps it (analysis.commands.keep)."""
    over = {"results_dir": str(reg.sweep.results_dir), "build_dir": str(reg.sweep.build_dir)}
    lock, kept, lines = keep.take(reg.work_dir, f"./harness regress --config {reg.sweep.path}")
    try:
        for line in lines:
            print(line, file=sys.stderr, flush=True)
        # raw_all too: a raw file that went missing is counted again, not taken as up to date.
        targets = ["raw_all", str(reg.work_dir / "counts.csv"), "--quiet", "all"]
        proc = subprocess.run(guard.snakemake_cmd(str(reg.sweep.path), over, cores, targets),
                              cwd=REPO, capture_output=True, text=True, pass_fds=(lock.fileno(),))
        if proc.returncode != 0:
            tail = guard.failure_tail(proc)
            where = keep.after_failure(reg.work_dir, kept)
            raise RegressError("the regression sweep failed:\n" + "\n".join(tail + ([where] if where else [])))
        counts = select(reg, table.read_counts(reg.work_dir / "counts.csv"))
        keep.record_good(reg.work_dir, str(reg.sweep.path), kept)
        return counts
    finally:
        lock.release()


def select(reg: Regression, counts: pd.DataFrame) -> pd.DataFrame:
    keep = counts["metric"].map(lambda m: any(fnmatch.fnmatchcase(m, pat) for pat in reg.metrics))
    return counts[keep].reset_index(drop=True)


def bless(reg: Regression, cores: int) -> str:
    counts = run_sweep(reg, cores)
    reg.golden_dir.mkdir(parents=True, exist_ok=True)
    table.write_counts(counts, reg.golden_csv)
    fp = {**fingerprint(reg), **golden_shape(reg.golden_csv)}
    files.write_text_atomic(reg.golden_fingerprint, json.dumps(fp, indent=2, sort_keys=True) + "\n")
    return f"blessed {len(counts)} values into {reg.golden_csv}"


def golden_shape(path: Path) -> dict[str, Any]:
    """What the fingerprint records of the golden CSV itself: its data rows and its bytes' hash."""
    data = path.read_bytes()
    return {"rows": max(data.count(b"\n") - 1, 0), "csv_sha256": hashlib.sha256(data).hexdigest()}


def read_fingerprint(reg: Regression) -> dict[str, Any]:
    """The golden fingerprint, checked against its schema: a missing key or a wrong type is
    corruption (exit 2), never a reason to widen the tolerance."""
    path = reg.golden_fingerprint
    try:
        fp = json.loads(path.read_text())
    except FileNotFoundError:
        raise RegressError(f"no fingerprint {path} beside the golden file: restore it from git or re-bless") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RegressError(f"golden fingerprint {path} is corrupt ({e}): restore it from git or re-bless") from None
    schema = yaml.safe_load((config.SCHEMA_DIR / "fingerprint.schema.yaml").read_text())
    # The same strict types as every schema (json reads NaN, Infinity and 12.0).
    errors = sorted(config.strict_validator(schema).iter_errors(fp), key=lambda e: list(e.absolute_path))
    if errors:
        raise RegressError(f"golden fingerprint {path} is corrupt ({config.schema_message(errors[0])}): restore it from git "
                           f"or re-bless with ./harness bless --config {reg.sweep.path}")
    return fp


def check_complete(path: Path) -> None:
    """A golden CSV cut mid-line: its last row lacks fields, which pandas reads as an empty
    schema_version, and the file was blamed on the table schema. Every line bless writes ends
    with a newline and has one field per column."""
    text = path.read_bytes().decode(errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    if text and not text.endswith("\n"):
        raise RegressError(f"golden file {path} is truncated: its last line ({len(rows)}) is cut off mid-line "
                           f"({','.join(rows[-1])[-60:]!r}): restore it from git or re-bless")
    bad = next((i for i, row in enumerate(rows[1:], 2) if len(row) != len(rows[0])), None)
    if bad is not None:
        raise RegressError(f"golden file {path} is corrupt (line {bad} has {len(rows[bad - 1])} fields, its header "
                           f"{len(rows[0])}): restore it from git or re-bless")


def read_golden(reg: Regression) -> tuple[pd.DataFrame, dict[str, Any]]:
    if not reg.golden_csv.exists():
        raise RegressError(f"no golden file {reg.golden_csv}: record one with ./harness bless --config {reg.sweep.path}")
    check_complete(reg.golden_csv)
    try:
        golden = table.read_counts(reg.golden_csv)
        if list(golden.columns) != table.COLUMNS:
            raise ValueError(f"columns {list(golden.columns)} are not {table.COLUMNS}")
        versions = set(golden["schema_version"])
        if versions != {table.SCHEMA_VERSION}:
            raise RegressError(f"golden file {reg.golden_csv} has table schema version {sorted(versions)}, this harness "
                               f"writes {table.SCHEMA_VERSION}: re-bless with ./harness bless --config {reg.sweep.path}")
        golden["value"] = pd.to_numeric(golden["value"], errors="raise").astype("int64")
        table.check_unique(golden, table.KEY, str(reg.golden_csv))
    except (ValueError, pd.errors.ParserError, table.TableError) as e:
        raise RegressError(f"golden file {reg.golden_csv} is corrupt ({str(e).splitlines()[0]}): restore it from git or re-bless") from None
    fp = read_fingerprint(reg)
    shape = golden_shape(reg.golden_csv)
    if len(golden) != fp["rows"] or shape["rows"] != fp["rows"]:
        raise RegressError(f"golden file {reg.golden_csv} has {len(golden)} rows, its fingerprint records {fp['rows']}: "
                           "it was truncated or edited; restore it from git or re-bless")
    if shape["csv_sha256"] != fp["csv_sha256"]:
        raise RegressError(f"golden file {reg.golden_csv} does not match the checksum in its fingerprint: it was edited "
                           "after bless; restore it from git or re-bless")
    return golden, fp


def tolerance_of(rules: list[config.ToleranceRule], row: pd.Series) -> float:
    """Relative tolerance of one value: the first rule whose patterns all match, else exact."""
    for rule in rules:
        if rule.matches(str(row["kernel"]), str(row["variant"]), str(row["metric"])):
            return float(rule.relative)
    return 0.0


def compare(golden: pd.DataFrame, now: pd.DataFrame, rules: list[config.ToleranceRule],
            wider: list[config.ToleranceRule] | None = None) -> pd.DataFrame:
    """Every value's status: ok (within `rules`), tolerated (beyond them but within `wider`, the
    tolerance set of a changed fingerprint part, ahead of `rules`), moved, missing or new."""
    key = table.KEY
    merged = golden.drop(columns="schema_version").merge(now.drop(columns="schema_version"), on=key, how="outer",
                                                         suffixes=("_golden", "_now"), indicator=True)
    rows = []
    for _, r in merged.iterrows():
        g, n = r["value_golden"], r["value_now"]
        if r["_merge"] == "left_only":
            status, delta, pct = "missing", None, None
        elif r["_merge"] == "right_only":
            status, delta, pct = "new", None, None
        else:
            delta = int(n - g)
            pct = 100.0 * delta / g if g else (0.0 if delta == 0 else float("inf"))
            status = "ok" if abs(delta) <= tolerance_of(rules, r) * abs(g) else \
                "tolerated" if wider and abs(delta) <= tolerance_of(wider + rules, r) * abs(g) else "moved"
        rows.append({**{k: r[k] for k in key if k not in ("layout", "backend")},
                     "golden": None if pd.isna(g) else int(g), "now": None if pd.isna(n) else int(n),
                     "delta": delta, "percent": None if pct is None else round(pct, 4), "status": status})
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def drift_figure(drift: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    moved = drift[drift["status"].isin(["moved", "tolerated"])]
    fig, ax = plt.subplots(figsize=(8, 5))
    for (k, v, m), g in moved.groupby(["kernel", "variant", "metric"]):
        g = g.sort_values("vl")
        ax.plot(g["vl"], g["percent"], marker="o", label=f"{k} {v} {m}")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("SVE vector length (bits)")
    ax.set_ylabel("drift from golden (%)")
    ax.set_title("Instruction-count drift per VL" + ("" if len(moved) else ": none"))
    if len(moved):
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def regress(reg: Regression, cores: int, out=sys.stdout, accept_tolerance: bool = False) -> int:
    golden, golden_fp = read_golden(reg)  # fail on bad golden files before spending time
    now_fp = fingerprint(reg)
    parts = differing_parts(golden_fp, now_fp)
    wider: list[config.ToleranceRule] = []
    chosen = named = None
    if parts:
        for p in parts:
            print(f"fingerprint differs in {p}: golden {json.dumps(golden_fp.get(p))}, now {json.dumps(now_fp.get(p))}", file=out)
        # The first differing part that has a tolerance set names it (not merely the first that differs).
        named = next((p for p in parts if p in reg.on_change), None)
        if named:
            chosen = reg.on_change[named]
            print(f"tolerance set '{chosen}' (regression/on_fingerprint_change/{named}) applies to values that moved"
                  + ("" if accept_tolerance else f" only with {ACCEPT_FLAG}"), file=out)
            wider = list(reg.tolerance_sets[chosen])
    now = run_sweep(reg, cores)
    drift = compare(golden, now, list(reg.tolerance), wider)
    reg.work_dir.mkdir(parents=True, exist_ok=True)
    files.write_atomic(reg.work_dir / "drift.csv", lambda tmp: drift.to_csv(tmp, index=False))
    drift_figure(drift, reg.work_dir / "drift.png")
    bad = drift[drift["status"] != "ok"]
    if bad.empty:
        print(f"regress: {len(drift)} values match {reg.golden_csv}", file=out)
        return 0
    counts = {s: int((bad["status"] == s).sum()) for s in ("moved", "tolerated", "missing", "new")}
    show = bad.sort_values(["status", "kernel", "variant", "vl", "metric"])
    print(f"regress: {counts['moved']} moved, {counts['missing']} missing, {counts['new']} new, {counts['tolerated']} "
          f"moved within tolerance set '{chosen}' (of {len(drift)}); golden {reg.golden_csv}", file=out)
    # Every cell that moved is named, the tolerated ones too: a wider tolerance never passes a
    # count change without saying so.
    print(show[["status", "kernel", "variant", "op", "dtype", "build", "vl", "size", "metric", "golden", "now", "delta", "percent"]]
          .to_string(index=False, max_rows=60), file=out)
    print(f"drift table: {reg.work_dir / 'drift.csv'}; figure: {reg.work_dir / 'drift.png'}", file=out)
    if counts["moved"] or counts["missing"] or counts["new"]:
        return 1
    if accept_tolerance:
        print(f"regress: the {counts['tolerated']} values above moved within tolerance set '{chosen}' "
              f"({named} changed), accepted by {ACCEPT_FLAG}", file=out)
        return 0
    print(f"regress: toolchain changed ({named}), counts moved: {counts['tolerated']} values, each within tolerance set "
          f"'{chosen}'; accept them with ./harness regress {ACCEPT_FLAG}, or re-bless with ./harness bless "
          f"(exit {EXIT_TOOLCHAIN})", file=out)
    return EXIT_TOOLCHAIN


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("action", choices=["bless", "regress"])
    p.add_argument("--config", default="configs/regress.yaml")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(ACCEPT_FLAG, dest="accept_tolerance", action="store_true", help=ACCEPT_HELP)
    ns = p.parse_args(argv)
    try:
        if ns.cores < 1:
            raise RegressError(f"--cores {ns.cores}: give a whole number of cores >= 1")
        guard.check_lock()
        reg = load(ns.config, config.parse_overrides(ns.set))
        config.check_writable(reg.sweep)
        if ns.action == "bless":
            print(bless(reg, ns.cores))
            return 0
        return regress(reg, ns.cores, accept_tolerance=ns.accept_tolerance)
    except (RegressError, config.ConfigError, toolchain.ToolchainError, guard.LockError, keep.LockError, files.WriteError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
