"""Explain one cell of results/counts.csv: how it was produced and where its count comes from.

For a (kernel, variant, op, dtype, build, cpu_model, backend, compiler, vl, size) cell it
prints, as Markdown: the exact build and run command lines; the disassembly of the hot loop
of the ROI with instructions per iteration and iterations at that VL (the back-edge branch's
execution count from the opcodes client); the functions executed inside the ROI; the class
and opcode breakdown. `./harness explain ...` prints it; the plot stage writes one file per
cell that results/summary.md discusses.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.core import config, files, table
from analysis.core.toolchain import OBJDUMP
from analysis.stages.plotplan import Cell

SKIP_FUNCS = ("roi_begin", "roi_end", "main", "?")


def cell_mask(cell: Cell, df: pd.DataFrame) -> pd.Series:
    """The rows of a counts or provenance table that are this cell."""
    m = pd.Series(True, index=df.index)
    for k, v in cell.__dict__.items():
        m &= df[k] == v
    return m


@dataclass(frozen=True)
class Insn:
    addr: int
    word: int
    text: str

    @property
    def mnemonic(self) -> str:
        return self.text.split()[0]

    def target(self) -> int | None:
        m = re.search(r"\b([0-9a-f]+) <", self.text)
        return int(m.group(1), 16) if m else None


def disassemble(binary: Path, function: str) -> list[Insn]:
    out = subprocess.run([OBJDUMP, "-d", f"--disassemble={function}", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    insns = []
    for line in out.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+([0-9a-f]{8})\s+(.*)$", line)
        if m:
            insns.append(Insn(int(m.group(1), 16), int(m.group(2), 16), m.group(3).split("//")[0].strip()))
    return insns


def loops(insns: list[Insn]) -> list[tuple[Insn, list[Insn]]]:
    """(back-edge branch, body) for every backward branch inside the function."""
    found = []
    for i, ins in enumerate(insns):
        t = ins.target()
        if t is not None and t <= ins.addr and ins.mnemonic.startswith(("b", "cb", "tb")) and ins.mnemonic != "bl":
            body = [x for x in insns[: i + 1] if x.addr >= t]
            if body and body[0].addr == t:
                found.append((ins, body))
    return found


def find_cell(counts: pd.DataFrame, cell: Cell) -> pd.DataFrame:
    rows = counts[cell_mask(cell, counts)]
    if rows.empty:
        keys = ["kernel", "variant", "op", "dtype", "build", "cpu_model", "compiler", "backend", "vl", "size"]
        near = counts[(counts["kernel"] == cell.kernel) & (counts["variant"] == cell.variant)][keys].drop_duplicates()
        hint = "; cells of that variant: " + ", ".join(
            f"{r.build}/{r.cpu_model}/vl={r.vl}/size={r.size}/{r.op}/{r.dtype}" for r in near.head(8).itertuples()
        ) if len(near) else "; that kernel variant is not in the table"
        raise config.ConfigError(f"no cell {cell.slug} in the table{hint}")
    return rows


def raw_run(results_dir: Path, cell: Cell, size: int, sve: bool = True) -> dict[str, Any]:
    """`sve`: False for a row declared `sve: false`, whose raw JSON is under its own build."""
    build = ("vla" if sve else config.NOSVE) if cell.build == "vla" else f"vls{cell.vl}"
    path = results_dir / "raw" / cell.backend / cell.compiler / build / cell.cpu_model / f"{cell.kernel}-{cell.variant}.json"
    doc = json.loads(path.read_text())
    for run in doc["runs"]:
        if (run["vl"], run["size"], run["op"], run["dtype"]) == (cell.vl, size, cell.op, cell.dtype):
            return run
    raise config.ConfigError(f"{path} has no run at vl={cell.vl} size={size}")


def _metric_table(rows: pd.DataFrame, prefix: str, title: str, limit: int = 40) -> list[str]:
    d = rows[rows["metric"].str.startswith(prefix) & (rows["value"] != 0)].sort_values("value", ascending=False)
    if d.empty:
        return []
    out = [f"| {title} | roi_net |", "|---|---|"]
    out += [f"| `{m[len(prefix):]}` | {v} |" for m, v in zip(d["metric"].head(limit), d["value"].head(limit))]
    return out + [""]


def explain(cell: Cell, sweep: config.Sweep, counts: pd.DataFrame, prov: pd.DataFrame) -> str:
    rows = find_cell(counts, cell)
    p = prov[cell_mask(cell, prov)].iloc[0]
    binary = Path(p["binary"])
    value = dict(zip(rows["metric"], rows["value"]))
    row = sweep.table.row(cell.kernel, cell.variant)
    lines = [
        f"# {cell.kernel} {cell.variant}" + (f" {cell.op}/{cell.dtype}" if cell.op != config.NO_OP else "")
        + f", {cell.build.upper()} build, VL {cell.vl}, size {cell.size}",
        "",
        f"{row.label}. CPU model `{cell.cpu_model}`, compiler `{cell.compiler}`, backend `{cell.backend}`; "
        f"VL seen by the kernel: {p['vl_seen']}; checksum {p['checksum']}.",
        "",
        f"- ROI net instructions (`roi_net.total`): **{value.get('roi_net.total')}** (SVE: {value.get('roi_net.sve')})",
        f"- whole-program net (`whole_net.total`, includes copying the inputs and verifying): {value.get('whole_net.total')}",
        "",
        "## How it was produced (runnable as they are)",
        "",
        "```sh",
        *p["build_commands"].split(" && "),
        "```",
        "",
        "```sh",
        p["run_command"],
        "```",
        "",
    ]
    run_n, run_0 = raw_run(sweep.results_dir, cell, cell.size, row.sve), raw_run(sweep.results_dir, cell, 0, row.sve)
    funcs = [f for f in run_n["inscount"].get("roi_functions") or []]
    lines += ["## Functions executed inside the ROI (size n run)", "", "| function | instructions | SVE |", "|---|---|---|"]
    lines += [f"| `{f['symbol']}` | {f['total']} | {f['sve']} |" for f in funcs] + [""]
    lines += _hot_loop(binary, roi_functions(run_n), run_n, run_0, cell, row)
    lines += ["## Class breakdown", ""] + _metric_table(rows, "roi_net.class.", "class")
    lines += ["## Opcodes (mnemonics)", ""] + _metric_table(rows, "roi_net.op.", "mnemonic")
    lines += ["## Memory (ROI)", ""] + _metric_table(rows, "roi_net.mem.", "class.measure")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class HotLoop:
    function: str
    branch: Insn
    body: list[Insn]
    iterations: int  # back-edge executions at size n minus at size 0


def hot_loop(binary: Path, functions: list[str], run_n: dict[str, Any], run_0: dict[str, Any]) -> HotLoop | None:
    """The loop of the ROI: in the functions by instructions executed, the first loop whose
    back edge ran (a callee such as memcpy may run straight-line code on every call)."""
    counts_n = {int(e["encoding"], 16): e["count"] for e in run_n["opcodes"]["roi"]}
    counts_0 = {int(e["encoding"], 16): e["count"] for e in run_0["opcodes"]["roi"]}
    for func in functions:
        found = [(b, body, counts_n.get(b.word, 0) - counts_0.get(b.word, 0)) for b, body in loops(disassemble(binary, func))]
        found = [f for f in found if f[2] > 0]
        if found:
            # Several loops: the one whose back edge ran most (its encoding is unique enough in the ROI).
            branch, body, taken = max(found, key=lambda f: f[2])
            return HotLoop(func, branch, body, taken)
    return None


def roi_functions(run: dict[str, Any]) -> list[str]:
    """The ROI's functions to look for the hot loop in, by instructions executed."""
    funcs = [f["symbol"] for f in run["inscount"].get("roi_functions") or []]
    # A kernel inlined into main(): its loop is there.
    return [f for f in funcs if f not in SKIP_FUNCS] or [f for f in funcs if f == "main"]


def cell_hot_loop(cell: Cell, sweep: config.Sweep, prov: pd.DataFrame) -> HotLoop | None:
    """The hot loop of one counted cell (for the summary's per-iteration comparison)."""
    p = prov[cell_mask(cell, prov)].iloc[0]
    run_n, run_0 = raw_run(sweep.results_dir, cell, cell.size), raw_run(sweep.results_dir, cell, 0)
    return hot_loop(Path(p["binary"]), roi_functions(run_n), run_n, run_0)


def _hot_loop(binary: Path, functions: list[str], run_n: dict[str, Any], run_0: dict[str, Any], cell: Cell,
              row: config.KernelRow) -> list[str]:
    found = hot_loop(binary, functions, run_n, run_0)
    if found is None:
        return ["## Hot loop", "", f"No loop ran in the ROI's functions ({', '.join(functions) or 'none'}): "
                "straight-line code only.", ""]
    func, branch, body, taken = found.function, found.branch, found.body, found.iterations
    out = [
        f"## Hot loop: `{func}`",
        "",
        f"- instructions per iteration: **{len(body)}** ({body[0].addr:#x} .. {branch.addr:#x})",
        f"- iterations at VL {cell.vl}: **{taken}** (executions of the back-edge `{branch.text}`, one per "
        f"iteration, at size {cell.size} minus at size 0)",
    ]
    loop = row.loop
    if loop:
        chunk = loop.vectors_per_iteration * cell.vl // 8
        want = math.ceil(cell.size / chunk) if loop.rounding == "ceil" else cell.size // chunk
        out.append(f"- declared in the kernel table: {loop.rounding}(size / ({loop.vectors_per_iteration} x "
                   f"{cell.vl // 8} bytes)) = {want} iterations")
    out += ["", "```", *(f"{i.addr:8x}:  {i.word:08x}  {i.text}" for i in body), "```", ""]
    return out


def check_request(ns: argparse.Namespace, sweep: config.Sweep) -> None:
    """The kernel, variant and VL asked for exist and are part of the sweep, before any table is read."""
    config.check_vl(ns.vl, "--vl")
    if ns.kernel not in sweep.table.kernels():
        raise config.ConfigError(f"unknown kernel '{ns.kernel}'; known: {', '.join(sweep.table.kernels())}")
    sweep.table.row(ns.kernel, ns.variant)
    if not sweep.selects(ns.kernel, ns.variant):
        raise config.ConfigError(f"{ns.kernel} {ns.variant} is not part of the sweep {ns.sweep}: name a sweep that "
                                 "selects it with --config")
    vls = {vl for vls in sweep.cpu_models.values() for vl in vls}
    if ns.vl not in vls:
        raise config.ConfigError(f"--vl {ns.vl}: the sweep {ns.sweep} runs VLs {', '.join(map(str, sorted(vls)))}")


def cell_from_args(ns: argparse.Namespace, counts: pd.DataFrame, sweep: config.Sweep) -> Cell:
    d = counts[(counts["kernel"] == ns.kernel) & (counts["variant"] == ns.variant)]
    if d.empty:
        raise config.ConfigError(f"no rows for kernel {ns.kernel} variant {ns.variant} in the table; run the sweep first")
    # Unnamed, the sweep's own first compiler, counting backend and CPU model (as the summary's
    # checks read them), not the first in alphabetical order (clang, gem5).
    first = {"compiler": sweep.compilers[0], "backend": sweep.backends[0], "cpu_model": next(iter(sweep.cpu_models))}

    def pick(col: str, given: Any) -> Any:
        if given is not None:
            return given
        if col in first and first[col] in set(d[col]):
            return first[col]
        values = sorted(set(d[col]))
        if col == "size":
            values = [v for v in values if v > 0][:1] or values
        return values[0]

    return Cell(ns.kernel, ns.variant, pick("op", ns.op), pick("dtype", ns.dtype), ns.build, pick("cpu_model", ns.cpu),
                pick("backend", ns.backend), pick("compiler", ns.compiler), ns.vl, pick("size", ns.size))


def write_cells(sweep: config.Sweep, counts: pd.DataFrame, prov: pd.DataFrame, cells: list[Cell], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        files.write_text_atomic(out_dir / f"{cell.slug}.md", explain(cell, sweep, counts, prov))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    config.add_sweep_args(p)
    p.add_argument("kernel")
    p.add_argument("variant")
    p.add_argument("--vl", type=int, required=True)
    p.add_argument("--build", default="vla", choices=["vla", "vls"])
    p.add_argument("--size", type=int)
    p.add_argument("--op")
    p.add_argument("--dtype")
    p.add_argument("--cpu")
    p.add_argument("--backend")
    p.add_argument("--compiler")
    p.add_argument("--markdown", type=Path, help="also write the explanation to this file")
    ns = p.parse_args(argv)
    try:
        sweep = config.load_from_args(ns)
        check_request(ns, sweep)
        counts = table.read_counts(sweep.results_dir / "counts.csv")
        prov = table.read_provenance(sweep.results_dir / "provenance.csv")
        text = explain(cell_from_args(ns, counts, sweep), sweep, counts, prov)
    except FileNotFoundError as e:
        print(f"error: {e.filename} does not exist: run ./harness sweep --config {ns.sweep} first", file=sys.stderr)
        return 2
    except (config.ConfigError, table.TableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(text, end="")
    if ns.markdown:
        # Into a folder that does not exist yet too (it was a FileNotFoundError traceback).
        try:
            files.write_text_atomic(ns.markdown, text)
        except files.WriteError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
