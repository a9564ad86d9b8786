"""The two lines of `./harness ab` (analysis.commands.ab): `[COMPILER:]KERNEL/VARIANT[@GITREV]`
read against the kernel table, a line@REV's kernel source taken from git into a table of its
own, and the comparison written as a sweep file of its own, which the build rules build.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from analysis.backends import RunError
from analysis.commands import guard
from analysis.commands.guard import snakemake_cmd
from analysis.core import config, toolchain
from analysis.core.config import REPO, ConfigError

LINE = re.compile(r"^(?:(?P<compiler>[a-z]+):)?(?P<kernel>[a-z][a-z0-9_]*)/(?P<variant>[a-z][a-z0-9_]*)(?:@(?P<rev>\S+))?$")
# Verdicts, in both modes' tables.
NO_CHANGE, SLOWER, FASTER = "no change", "slower", "faster"


@dataclass(frozen=True)
class Line:
    spec: str
    compiler: str
    kernel: str
    variant: str  # the variant in the table the comparison builds (a revision gets its own)
    rev: str | None = None


def parse_line(spec: str, table: config.KernelTable) -> Line:
    m = LINE.match(spec)
    if not m:
        raise ConfigError(f"line '{spec}': write [COMPILER:]KERNEL/VARIANT[@GITREV], e.g. copy/acle_4v or clang:copy/c_vec@HEAD~1")
    compiler = m["compiler"] or "gcc"
    if compiler not in toolchain.CROSS_COMPILERS:
        raise ConfigError(f"line '{spec}': unknown compiler '{compiler}'; use {' or '.join(toolchain.CROSS_COMPILERS)}")
    table.row(m["kernel"], m["variant"])  # names the known variants if not
    return Line(spec, compiler, m["kernel"], m["variant"], m["rev"])


def git_toplevel(path: Path) -> Path:
    proc = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"{path} is not in a git repository: a line@REV needs the kernel source under git")
    return Path(proc.stdout.strip())


def source_at(line: Line, table: config.KernelTable, out: Path) -> tuple[Path, str]:
    """Extract the directory of the line's kernel source as it was at line.rev into `out`;
    return the source's path there and the revision's short hash."""
    src = table.row(line.kernel, line.variant).source.resolve()
    top = git_toplevel(src)
    rev = subprocess.run(["git", "-C", str(top), "rev-parse", "--short=10", f"{line.rev}^{{commit}}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        raise ConfigError(f"line '{line.spec}': '{line.rev}' is not a git revision of {top}")
    short = rev.stdout.strip()
    rel_dir = src.parent.relative_to(top)
    tar = subprocess.run(["git", "-C", str(top), "archive", short, "--", str(rel_dir)], capture_output=True)
    if tar.returncode != 0 or not tar.stdout:
        raise ConfigError(f"line '{line.spec}': {rel_dir} does not exist at {line.rev}")
    dest = out / f"rev-{short}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
    extracted = dest / rel_dir / src.name
    if not extracted.exists():
        raise ConfigError(f"line '{line.spec}': {src.relative_to(top)} does not exist at {line.rev}")
    return extracted, short


def rev_table(lines: list[Line], table: config.KernelTable, out: Path) -> tuple[list[Line], Path | None]:
    """A kernel table of one row per line@REV: the row as today, its source from the revision,
    its variant renamed <variant>_<hash>. Lines without a revision are returned as they are."""
    rows, resolved = {}, []
    for line in lines:
        if line.rev is None:
            resolved.append(line)
            continue
        src, short = source_at(line, table, out)
        row = table.row(line.kernel, line.variant)
        variant = f"{line.variant}_{short}"
        rows[variant] = {
            "kernel": row.kernel, "variant": variant, "family": row.family, "source": str(src),
            "label": f"{row.label} (source at {line.rev} = {short})", "role": row.role,
            "host_native": row.host_native, "params": dict(row.params),
            **({"cflags": {c: list(f) for c, f in row.cflags.items()}} if row.cflags else {}),
            **({"extra_sources": [str(p) for p in row.extra_sources]} if row.extra_sources else {}),
        }
        resolved.append(Line(line.spec, line.compiler, line.kernel, variant, line.rev))
    if not rows:
        return resolved, None
    path = out / "rev_kernels.yaml"
    path.write_text(yaml.safe_dump({"families": {}, "kernels": list(rows.values())}, sort_keys=False))
    return resolved, path


def make_sweep(base: config.Sweep, lines: list[Line], families: set[str], extra: Path | None, vls: list[int],
               sizes: list[int], op: str | None, dtype: str | None, perf_mode: bool, out: Path) -> config.Sweep:
    """The comparison as a sweep file of its own (so the build rules build it and the
    configuration checks check it), kept beside its results."""
    sel = [{"kernel": ln.kernel, "variants": [ln.variant], **({"ops": [op]} if op else {}), **({"dtypes": [dtype]} if dtype else {})}
           for ln in dict.fromkeys(lines)]
    doc: dict[str, Any] = {
        "kernel_table": str(base.table_paths[0].resolve()),
        "extra_kernel_tables": [str(p.resolve()) for p in base.table_paths[1:]] + ([str(extra)] if extra else []),
        "results_dir": str(out), "build_dir": str(base.build_dir.resolve()),
        "compilers": sorted({ln.compiler for ln in lines}), "backends": [] if perf_mode else ["qemu"],
        "vector_lengths": vls, "sizes": {f: sizes for f in families}, "linearity_check": False, "kernels": sel,
    }
    if perf_mode:
        doc["perf"] = {"events": ["task-clock"], "sve": "off", "sizes": {f: sizes for f in families}, "processes": 1}
    path = out / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return config.load(path)


def build_targets(sweep: config.Sweep, targets: list[Path]) -> None:
    proc = subprocess.run(snakemake_cmd(str(sweep.path), {}, 2, [*map(str, targets), "--quiet", "all"]),
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RunError("building the two lines failed:\n" + "\n".join(guard.failure_tail(proc)))


def run_args(sweep: config.Sweep, line: Line, vl: int, size: int) -> config.Run:
    op, dtype = sweep.selection_of(line.kernel, line.variant).op_dtypes[0]
    row = sweep.table.row(line.kernel, line.variant)
    return config.Run(vl, size, op, dtype, config.run_params(sweep.table, row, op, dtype))
