"""The tidy tables: `counts.csv` (one integer per key) with its provenance sidecar, and
`perf.csv` (statistics over processes per key): schema, writer, reader.

The writer refuses duplicate keys and writes atomically (temporary file, then rename), so a
failed run never leaves a table that a later step reads as complete. Beside each table it writes
`<table>.sha256` (the format of `sha256sum -c`), and the reader refuses a table that no longer
matches it: an edited or truncated table is never plotted, reported or explained.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.core import files

# Bump when a column or a metric name changes meaning; readers (regress) compare it.
SCHEMA_VERSION = 2
KEY = ["kernel", "variant", "op", "dtype", "layout", "build", "cpu_model", "backend", "compiler", "vl", "size", "metric"]
COLUMNS = KEY + ["value", "schema_version"]
PROVENANCE_KEY = KEY[:-1]
# perf.csv: n, mean, std, min, max over a cell's processes; status says why a row has none.
STATS_COLUMNS = KEY + ["status", "unit", "n", "mean", "std", "min", "max", "running_pct", "schema_version"]
STATS = ("n", "mean", "std", "min", "max", "running_pct")


# The derived tables whose checksum is written with them and checked on every read (golden
# files carry their own fingerprint instead: analysis.commands.regress).
CHECKED_TABLES = ("counts.csv", "provenance.csv", "perf.csv")
CHECKSUM_SUFFIX = ".sha256"


class TableError(Exception):
    pass


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    files.write_atomic(path, lambda tmp: df.to_csv(tmp, index=False))
    if path.name in CHECKED_TABLES:
        # After the table: a stop between the two leaves a mismatch, which is rebuilt, never trusted.
        files.write_text_atomic(checksum_path(path), f"{files.sha256(path)}  {path.name}\n")


def verify(path: Path) -> None:
    """Raise TableError (one line naming the file) unless `path` is what the harness wrote."""
    if path.name not in CHECKED_TABLES or not path.exists():  # a missing table is the reader's FileNotFoundError
        return
    side = checksum_path(path)
    try:
        want = side.read_text().split()[0]
    except (OSError, IndexError):
        raise TableError(f"{path} has no checksum file {side.name} (written by hand or by an older harness): "
                         "rebuild it with ./harness sweep") from None
    if files.sha256(path) != want:
        raise TableError(f"{path} was changed after the harness wrote it (edited or truncated: its checksum differs "
                         f"from {side.name}): rebuild it with ./harness sweep") from None


def check_unique(df: pd.DataFrame, key: list[str], what: str) -> None:
    dup = df[df.duplicated(key, keep=False)]
    if len(dup):
        first = dup.iloc[0]
        raise TableError(f"{what}: {len(dup)} rows share a primary key, e.g. " + ", ".join(f"{k}={first[k]}" for k in key))


def write_counts(df: pd.DataFrame, path: Path) -> None:
    df = df.assign(schema_version=SCHEMA_VERSION)[COLUMNS].sort_values(KEY, kind="stable").reset_index(drop=True)
    check_unique(df, KEY, str(path))
    df["value"] = df["value"].astype("int64")
    write_csv(df, path)


def write_provenance(df: pd.DataFrame, path: Path) -> None:
    df = df.sort_values(PROVENANCE_KEY, kind="stable").reset_index(drop=True)
    check_unique(df, PROVENANCE_KEY, str(path))
    write_csv(df, path)


def read_counts(path: Path) -> pd.DataFrame:
    verify(path)
    # op "-" and dtype names must stay strings, not NaN.
    return pd.read_csv(path, dtype={"op": str, "dtype": str}, keep_default_na=False)


def read_provenance(path: Path) -> pd.DataFrame:
    return read_counts(path)  # the same key columns, read the same way


def write_stats(df: pd.DataFrame, path: Path) -> None:
    df = df.assign(schema_version=SCHEMA_VERSION)[STATS_COLUMNS].sort_values(KEY, kind="stable").reset_index(drop=True)
    check_unique(df, KEY, str(path))
    write_csv(df, path)


def read_stats(path: Path) -> pd.DataFrame:
    df = read_counts(path)
    for col in STATS:
        df[col] = pd.to_numeric(df[col], errors="coerce")  # empty: no statistics (unsupported)
    return df
