"""Compare the ROI counts of two counts.csv files of the same sweep, cell by cell, and explain
each cell that differs by the toolchain part that makes it differ, or say it is unexplained.

    ci/compare-roi-counts [--cells FILE] HOST.csv NODE.csv

A cell is a row's every column but its value; the ROI metrics are roi.* and roi_net.*; a
counter that one side's run never saw (counts.csv leaves it out) is 0 there. A differing cell
is explained when both hold (analysis.core.roi_evidence):
  (a) this host's QEMU plugins count the node's binary (build/ beside NODE.csv, as
      ci/aarch64-node's sweep step copies it) through the host's plan of the job (plans/ beside
      HOST.csv) at that cell as the node did: counting is the same
      on both machines, only the binary differs ("counting differs" otherwise);
  (b) some of the cell's ROI functions have different code in the two binaries, and each such
      function's toolchain part (libc: a name libc.a defines; else compiler) is one the two
      provenance.csv show different for the cell's compiler (the compiler's version line, the
      static libc's package version and libc.a hash).
Prints one line per cause (its cells, functions and versions), one line per cell that is not
explained, and a summary line; every differing cell with its verdict goes to FILE (CSV; without
--cells, one line each on stdout). Exit 0 when every differing cell is explained, 1 otherwise,
2 on bad input. ci/aarch64-node runs it on the x86-64 host's and the arm64 node's results of
configs/tiny.yaml, in the harness's venv (the recount runs the harness's count stage).
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from collections import Counter
from pathlib import Path

from analysis.core import roi_evidence
from analysis.core.roi_evidence import Evidence, Run, run_of
from analysis.core.toolchain import ToolchainError

ROI = ("roi.", "roi_net.")
# provenance.csv's columns that name a compiler's toolchain (docs/data.md), and the part of it.
TOOLCHAIN = (("compiler_version", "compiler"), ("libc_version", "libc"))
Cell = tuple[Run, str]  # (run, metric)
EXPLAINED, UNEXPLAINED, COUNTING = "explained", "unexplained", "counting differs"


def roi_cells(path: Path) -> dict[Cell, str]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and not {"metric", "value"} <= set(rows[0]):
        raise ValueError(f"{path} has no metric and value columns: is it a counts.csv?")
    return {(run_of(row), row["metric"]): row["value"] for row in rows if row["metric"].startswith(ROI)}


def cell_name(cell: Cell) -> str:
    return " ".join([*(f"{k}={v}" for k, v in cell[0]), f"metric={cell[1]}"])


def with_zeros(cells: dict[Cell, str], other: dict[Cell, str]) -> dict[Cell, str]:
    """`cells` with a 0 for each counter `other` has of a run that `cells` has too: counts.csv
    leaves out a counter a run never saw (an opcode it never executed)."""
    runs = {r for r, _ in cells}
    return {**{c: "0" for c in other if c[0] in runs}, **cells}


def differing(host: dict[Cell, str], node: dict[Cell, str]) -> list[Cell]:
    return [c for c in sorted(host.keys() | node.keys()) if host.get(c) != node.get(c)]


def toolchain(counts: Path) -> dict[str, str]:
    """Each compiler's toolchain versions in the provenance.csv beside `counts` ({} without it):
    {"libc of gcc": "2.36-8cross1 libc.a:e8e5..."}."""
    path = counts.with_name("provenance.csv")
    if not path.is_file():
        return {}
    seen: dict[str, set[str]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for col, what in TOOLCHAIN:
                if row.get(col):
                    seen.setdefault(f"{what} of {row['compiler']}", set()).add(row[col])
    return {k: "; ".join(sorted(v)) for k, v in seen.items()}


def toolchain_differs(host: Path, node: Path) -> dict[str, str] | None:
    """Each toolchain part whose version differs between the two sweeps -> "host X, node Y"
    (None: a side has no provenance.csv to say)."""
    a, b = toolchain(host), toolchain(node)
    if not a or not b:
        return None
    return {k: f"host {a.get(k, '(none)')}, node {b.get(k, '(none)')}"
            for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


def roi_functions(cells: dict[Cell, str], run: Run) -> set[str]:
    """The functions that ran in `run`'s ROI (its roi.func.* and roi_net.func.* metrics)."""
    return {m.split(".", 2)[2] for r, m in cells if r == run and m.startswith(("roi.func.", "roi_net.func."))}


def verdict(cell: Cell, host: str | None, node: str | None, ev: Evidence | None,
            differs: dict[str, str] | None) -> tuple[str, str]:
    """(verdict, why) of a differing cell: explained (why: its cause), unexplained or counting differs."""
    if host is None or node is None:
        return UNEXPLAINED, f"only the {'node' if host is None else 'host'} has this run"
    if ev is None or ev.missing:
        return UNEXPLAINED, f"not recounted: {ev.missing if ev else 'no evidence gathered'}"
    again = ev.recount.get(cell[1], "0" if ev.recount else None)  # a counter its run never saw: 0
    if again != node:
        return COUNTING, f"this host's plugins count the node's binary {again or '(none)'}, the node counted {node}"
    if not ev.functions:
        return UNEXPLAINED, "no function of its ROI has different code in the two binaries"
    if differs is None:
        return UNEXPLAINED, "no provenance.csv beside both counts.csv to name the toolchain parts"
    compiler = dict(cell[0]).get("compiler", "?")
    parts: dict[str, list[str]] = {}
    for f, part in ev.functions.items():
        parts.setdefault(f"{part} of {compiler}", []).append(f)
    same = [p for p in parts if p not in differs]
    if same:
        return UNEXPLAINED, "; ".join(f"{', '.join(parts[p])} differ(s), but {p} is the same in both provenance.csv"
                                      for p in same)
    return EXPLAINED, "; ".join(f"{p} ({differs[p]}): {', '.join(fs)}" for p, fs in sorted(parts.items()))


def judge(host: dict[Cell, str], node: dict[Cell, str], evidence: dict[Run, Evidence],
          differs: dict[str, str] | None) -> list[tuple[Cell, str, str]]:
    """Every differing cell with its verdict and why."""
    return [(c, *verdict(c, host.get(c), node.get(c), evidence.get(c[0]), differs)) for c in differing(host, node)]


def cell_line(cell: Cell, host: dict[Cell, str], node: dict[Cell, str], kind: str, why: str) -> str:
    return f"{cell_name(cell)}: host {host.get(cell, '(none)')}, node {node.get(cell, '(none)')}: {kind}: {why}"


def summary(judged: list[tuple[Cell, str, str]], total: int) -> list[str]:
    """One line per cause of the explained cells, then the count line."""
    causes = Counter(why for _, kind, why in judged if kind == EXPLAINED)
    lines = [f"explained: {n} cells by {why}" for why, n in sorted(causes.items())]
    n_explained = sum(causes.values())
    return lines + [f"{total} ROI cells, {len(judged)} differ: {n_explained} explained, "
                    f"{len(judged) - n_explained} not"]


def write_cells(path: Path, judged: list[tuple[Cell, str, str]], host: dict[Cell, str], node: dict[Cell, str],
                evidence: dict[Run, Evidence]) -> None:
    columns = list(dict.fromkeys(k for c, _, _ in judged for k, _ in c[0]))
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*columns, "metric", "host", "node", "node_binary_here", "verdict", "why"])
        for c, kind, why in judged:
            ev = evidence.get(c[0])
            again = ev.recount.get(c[1], "0" if ev.recount else "") if ev else ""
            w.writerow([*(dict(c[0]).get(k, "") for k in columns), c[1], host.get(c, ""), node.get(c, ""), again,
                        kind, why])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ci/compare-roi-counts", description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=Path, help="write every differing cell with its verdict to this CSV file")
    p.add_argument("host", type=Path)
    p.add_argument("node", type=Path)
    ns = p.parse_args(argv)
    try:
        host, node = roi_cells(ns.host), roi_cells(ns.node)
        host, node = with_zeros(host, node), with_zeros(node, host)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare-roi-counts: {e}", file=sys.stderr)
        return 2
    cells = differing(host, node)
    runs = {c[0]: roi_functions(host, c[0]) | roi_functions(node, c[0]) for c in cells}
    try:
        evidence = roi_evidence.gather(runs, ns.host, ns.node) if runs else {}
    except (ToolchainError, subprocess.CalledProcessError) as e:
        print(f"compare-roi-counts: {e}", file=sys.stderr)
        return 2
    differs = toolchain_differs(ns.host, ns.node)
    judged = judge(host, node, evidence, differs)
    if cells:
        print("\n".join(f"toolchain differs: {k}: {v}" for k, v in (differs or {}).items())
              or ("toolchain: the same in both provenance.csv" if differs is not None
                  else "toolchain: not compared (no provenance.csv beside both counts.csv)"))
    if ns.cells:
        write_cells(ns.cells, judged, host, node, evidence)
        shown = [j for j in judged if j[1] != EXPLAINED]
        print(f"every differing cell with its verdict: {ns.cells}") if judged else None
    else:
        shown = judged
    for c, kind, why in shown:
        print(cell_line(c, host, node, kind, why))
    print("\n".join(summary(judged, len(host.keys() | node.keys()))))
    return 0 if host and all(kind == EXPLAINED for _, kind, _ in judged) else 1


if __name__ == "__main__":
    sys.exit(main())
