"""`./harness ab A B`: is line B better or worse than line A?

A line is `[COMPILER:]KERNEL/VARIANT[@GITREV]`: a row of the kernel table, optionally built
with another cross compiler (`clang:copy/c_vec`) or from its kernel source as it was at a git
revision (`copy/acle_4v@HEAD~3`: the source's directory at that revision, with today's
driver and harness). Two modes:

- counts (default): ROI net instructions (ROI at size n minus at size 0) of both lines at
  each VL under QEMU with the counting clients: exact, so any delta is real.
- `--perf`: both lines built for this host (`host_native` rows) and timed under perf, A and
  B interleaved (A B A B ...) for `--runs` processes each, so drift of the machine hits both
  sides alike; per side min/avg/max of the time per call, the change of the average, and the
  verdict "no change" wherever the two min..max ranges overlap. Then one `perf record -c`
  run per side with a fixed sample period on a software clock (it works without a PMU), so
  per-symbol sample counts of runs of different lengths compare directly (samples x period
  = CPU time in the symbol).

Writes `<out>/ab.md` (the table printed), `<out>/ab.png` and `<out>/ab.json` (every number,
and for --perf the order the processes ran in). Exit status for CI: 0 when B is
nowhere worse than A (more instructions at some VL, or slower with non-overlapping ranges),
1 when it is, 2 on bad input (one line naming the fix, before any work), 3 when a line does
not build or run (its message says which).
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from analysis.backends import RunError, perf, qemu, staged
from analysis.commands import guard
from analysis.commands.guard import snakemake_cmd
from analysis.core import config, mpi, toolchain
from analysis.core.config import REPO, ConfigError
from analysis.stages import build

LINE = re.compile(r"^(?:(?P<compiler>[a-z]+):)?(?P<kernel>[a-z][a-z0-9_]*)/(?P<variant>[a-z][a-z0-9_]*)(?:@(?P<rev>\S+))?$")
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


# --- counts ----------------------------------------------------------------------------------

def compare_counts(sweep: config.Sweep, a: Line, b: Line, vls: list[int], sizes: list[int]) -> list[dict[str, Any]]:
    bd = sweep.build_dir
    binaries = {ln: build.binary_path(bd, ln.compiler, "vla", "qemu", f"{ln.kernel}-{ln.variant}") for ln in (a, b)}
    build_targets(sweep, [*binaries.values(), *(build.plugin_path(bd, c) for c in qemu.CLIENTS)])
    plugins = build.plugin_path(bd, "inscount").parent
    net: dict[tuple[Line, int, int], dict[str, int]] = {}
    for ln in dict.fromkeys((a, b)):
        env = mpi.run_env(sweep.table, ln.kernel, ln.variant)
        for vl in vls:
            base = qemu.run_once(binaries[ln], "max", run_args(sweep, ln, vl, 0), plugins, env)["inscount"]["roi"]
            for n in sizes:
                roi = qemu.run_once(binaries[ln], "max", run_args(sweep, ln, vl, n), plugins, env)["inscount"]["roi"]
                net[(ln, vl, n)] = {"total": roi["total"] - base["total"], "sve": roi["sve"] - base["sve"]}
    rows = []
    for vl in vls:
        for n in sizes:
            ca, cb = net[(a, vl, n)]["total"], net[(b, vl, n)]["total"]
            rows.append({"vl": vl, "size": n, "a": ca, "b": cb, "delta": cb - ca,
                         "percent": 100.0 * (cb - ca) / ca if ca else float("nan"),
                         "verdict": NO_CHANGE if cb == ca else ("more instructions" if cb > ca else "fewer instructions")})
    return rows


def counts_markdown(a: Line, b: Line, rows: list[dict[str, Any]]) -> str:
    out = [f"A = `{a.spec}`, B = `{b.spec}`: ROI net instructions (QEMU counting clients; exact)", "",
           "| VL | size | A | B | B - A | change | verdict |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['vl']} | {r['size']} | {r['a']} | {r['b']} | {r['delta']:+d} | {r['percent']:+.2f} % | {r['verdict']} |")
    return "\n".join(out) + "\n"


def counts_figure(a: Line, b: Line, rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for n in sorted({r["size"] for r in rows}):
        rs = [r for r in rows if r["size"] == n]
        ax.plot([r["vl"] for r in rs], [r["a"] for r in rs], "o-", label=f"A {a.spec} ({n} B)")
        ax.plot([r["vl"] for r in rs], [r["b"] for r in rs], "s--", label=f"B {b.spec} ({n} B)")
        ax2.plot([r["vl"] for r in rs], [r["percent"] for r in rs], "o-", label=f"{n} B")
    ax.set(xlabel="VL (bits)", ylabel="ROI net instructions", yscale="log", title="instructions per line")
    ax2.axhline(0, color="grey", lw=0.8)
    ax2.set(xlabel="VL (bits)", ylabel="(B - A) / A, %", title="change of B against A")
    ax.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- perf ------------------------------------------------------------------------------------

def verdict(a: list[float], b: list[float]) -> str:
    """'no change' where the min..max ranges overlap; otherwise B is slower or faster."""
    if min(b) <= max(a) and min(a) <= max(b):
        return NO_CHANGE
    return SLOWER if min(b) > max(a) else FASTER


def summary(a: list[float], b: list[float]) -> dict[str, Any]:
    avg_a, avg_b = statistics.mean(a), statistics.mean(b)
    return {"a_min": min(a), "a_avg": avg_a, "a_max": max(a), "b_min": min(b), "b_avg": avg_b, "b_max": max(b),
            "change_pct": 100.0 * (avg_b - avg_a) / avg_a, "verdict": verdict(a, b)}


def sample_symbols(binary: Path, run: config.Run, period: int, calls: int, core: int, perf_bin: str) -> dict[str, int]:
    """Samples per symbol of one process under `perf record -e cpu-clock -c period` (the
    whole process: fill and verification too, which show under their own names)."""
    with staged(binary) as exe:
        data = exe.parent / "perf.data"
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "SVE_HARNESS_CALLS": str(calls), "SVE_HARNESS_WARMUP": "0"}
        cmd = [perf_bin, "record", "-q", "-e", "cpu-clock", "-c", str(period), "-o", str(data), "--",
               shutil.which("taskset") or "taskset", "-c", str(core), f"./{exe.name}", *run.argv()]
        proc = subprocess.run(cmd, cwd=exe.parent, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RunError(f"perf record of {binary.name} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        # "-F sym" alone prints nothing with perf 6.1; "ip,sym" prints "<ip> <symbol>".
        script = subprocess.run([perf_bin, "script", "-i", str(data), "-F", "ip,sym"], cwd=exe.parent,
                                capture_output=True, text=True, env=env)
    words = (ln.split(None, 1) for ln in script.stdout.splitlines() if ln.strip())
    return dict(collections.Counter(w[1].strip() if len(w) > 1 else "[unknown]" for w in words))


def compare_perf(sweep: config.Sweep, a: Line, b: Line, sizes: list[int], runs: int, calls: int, warmup: int,
                 core: int, period: int, sample_calls: int, log=sys.stderr) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    status = perf.detect(sweep)
    if status is None or not status.host:
        raise toolchain.ToolchainError("; ".join(status.messages) if status else "perf: not available")
    for ln in (a, b):
        isa = sweep.table.row(ln.kernel, ln.variant).host_isa
        if isa and isa != platform.machine():
            raise ConfigError(f"line '{ln.spec}' is {isa} code and this host is {platform.machine()}")
        if not sweep.table.row(ln.kernel, ln.variant).host_native:
            raise ConfigError(f"line '{ln.spec}' is not host_native in the kernel table: --perf times lines built for "
                              "this machine's ISA; pick a host_native row or compare counts (without --perf)")
    bd = sweep.build_dir
    binaries = {ln: build.binary_path(bd, "native", "host", "perf", f"{ln.kernel}-{ln.variant}") for ln in (a, b)}
    build_targets(sweep, list(binaries.values()))
    s = perf.Settings(status.perf, ("task-clock",), calls, warmup, 0, core)
    rows, order = [], []
    samples: dict[tuple[str, int], list[float]] = {}
    for n in sizes:
        times: dict[str, list[float]] = {"A": [], "B": []}
        for _ in range(runs):
            for side, ln in (("A", a), ("B", b)):  # interleaved: A B A B ...
                rec = perf.run_process(binaries[ln], run_args(sweep, ln, 0, n), s)
                times[side].append(statistics.mean(rec["times_ns"]))
                order.append(side)
        for side in "AB":
            samples[(side, n)] = times[side]
        rows.append({"size": n, **summary(times["A"], times["B"])})
        r = rows[-1]
        print(f"size {n}: A {r['a_avg'] / 1e3:.1f} us, B {r['b_avg'] / 1e3:.1f} us per call ({r['verdict']})", file=log, flush=True)
    n = max(sizes)
    syms = {side: sample_symbols(binaries[ln], run_args(sweep, ln, 0, n), period, sample_calls, core, status.perf)
            for side, ln in (("A", a), ("B", b))}
    top = sorted(set(syms["A"]) | set(syms["B"]), key=lambda k: -(syms["A"].get(k, 0) + syms["B"].get(k, 0)))[:8]
    hot = [{"symbol": k, "a": syms["A"].get(k, 0), "b": syms["B"].get(k, 0)} for k in top]
    return rows, hot, {"order": order, "samples": {f"{k[0]}:{k[1]}": v for k, v in samples.items()}, "size_sampled": n,
                       "period": period, "sample_calls": sample_calls, "perf": status.version}


def perf_markdown(a: Line, b: Line, rows: list[dict[str, Any]], hot: list[dict[str, Any]], info: dict[str, Any],
                  runs: int, calls: int) -> str:
    out = [f"A = `{a.spec}`, B = `{b.spec}`: time per call under perf on this host, {runs} processes per side "
           f"interleaved (A B A B ...), {calls} calls each; min / avg / max over processes", "",
           "| size | A min | A avg | A max | B min | B avg | B max | change of avg | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]
    us = lambda x: f"{x / 1e3:.2f} us"  # noqa: E731
    for r in rows:
        out.append(f"| {r['size']} | {us(r['a_min'])} | {us(r['a_avg'])} | {us(r['a_max'])} | {us(r['b_min'])} | "
                   f"{us(r['b_avg'])} | {us(r['b_max'])} | {r['change_pct']:+.1f} % | {r['verdict']} |")
    out += ["", f"Samples per symbol, `perf record -e cpu-clock -c {info['period']}` (one sample per "
            f"{info['period']} ns of CPU time), one process per side at size {info['size_sampled']} making "
            f"{info['sample_calls']} calls (the whole process: set-up and verification show under their own names):", "",
            "| symbol | A samples | B samples | B - A |", "|---|---|---|---|"]
    for h in hot:
        out.append(f"| `{h['symbol']}` | {h['a']} | {h['b']} | {h['b'] - h['a']:+d} |")
    return "\n".join(out) + "\n"


def perf_figure(a: Line, b: Line, rows: list[dict[str, Any]], info: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in rows]
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 4), squeeze=False)
    for ax, r in zip(axes[0], rows):
        for side, ln, mark in (("A", a, "o"), ("B", b, "s")):
            t = [x / 1e3 for x in info["samples"][f"{side}:{r['size']}"]]
            ax.plot(range(1, len(t) + 1), t, mark + "-", label=f"{side}: {ln.spec}")
            ax.axhspan(min(t), max(t), alpha=0.15, color="C0" if side == "A" else "C1")
        ax.set(xlabel="run (A and B interleaved)", ylabel="time per call (us)",
               title=f"{r['size']} B: {r['verdict']} ({r['change_pct']:+.1f} %)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise ConfigError(f"{what} {text!r}: give comma-separated integers, e.g. 128,512,2048") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="harness ab", description="Compare line B against line A (counts, or time under perf).")
    p.add_argument("a", help="[COMPILER:]KERNEL/VARIANT[@GITREV]")
    p.add_argument("b", help="[COMPILER:]KERNEL/VARIANT[@GITREV]")
    p.add_argument("--vl", default="128,256,512,1024,2048", help="VLs for the counts (default 128,256,512,1024,2048)")
    p.add_argument("--size", default="1048576", help="bytes, comma-separated (default 1048576)")
    p.add_argument("--op")
    p.add_argument("--dtype")
    p.add_argument("--perf", action="store_true", help="time host builds under perf instead of counting")
    p.add_argument("--runs", type=int, default=10, help="--perf: processes per side, interleaved (default 10)")
    p.add_argument("--calls", type=int, default=20, help="--perf: measured calls per process (default 20)")
    p.add_argument("--warmup", type=int, default=2, help="--perf: unmeasured calls per process first (default 2)")
    p.add_argument("--core", type=int, default=0, help="--perf: core to pin to (default 0)")
    p.add_argument("--sample-period", type=int, default=10000, help="--perf: perf record -c, ns of cpu-clock (default 10000)")
    p.add_argument("--sample-calls", type=int, default=200, help="--perf: calls of the sampled process (default 200)")
    p.add_argument("--config", default="configs/default.yaml", help="sweep whose kernel tables and build dir to use")
    p.add_argument("--out", default="results/ab", help="where ab.md, ab.png and the built sweep go (default results/ab)")
    ns = p.parse_args(argv)
    try:
        vls, sizes = int_list(ns.vl, "--vl"), int_list(ns.size, "--size")
        for vl in vls:
            config.check_vl(vl, "--vl")
        if not sizes or min(sizes) < 1:
            raise ConfigError(f"--size {ns.size}: sizes are byte counts >= 1")
        for name in ("runs", "calls", "sample_period", "sample_calls"):
            if getattr(ns, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(ns, name)}: must be >= 1")
        base = config.load(ns.config)
        lines = [parse_line(ns.a, base.table), parse_line(ns.b, base.table)]
        if ns.perf and any(ln.compiler != "gcc" for ln in lines):
            raise ConfigError("--perf builds with the host's gcc: drop the COMPILER: prefix")
        if not ns.perf:
            for ln in lines:
                if base.table.row(ln.kernel, ln.variant).host_isa:
                    raise ConfigError(f"line '{ln.spec}' is host-only code (host_isa in the kernel table): compare it with --perf")
            toolchain.preflight(sorted({ln.compiler for ln in lines}))
            qemu.check_tools()
        out = config.resolve_path(ns.out, REPO)
        out.mkdir(parents=True, exist_ok=True)
        families = {base.table.row(ln.kernel, ln.variant).family for ln in lines}
        lines, extra = rev_table(lines, base.table, out)
        sweep = make_sweep(base, lines, families, extra, vls, sizes, ns.op, ns.dtype, ns.perf, out)
        a, b = lines
        if ns.perf:
            rows, hot, info = compare_perf(sweep, a, b, sizes, ns.runs, ns.calls, ns.warmup, ns.core, ns.sample_period,
                                           ns.sample_calls)
            text = perf_markdown(a, b, rows, hot, info, ns.runs, ns.calls)
            perf_figure(a, b, rows, info, out / "ab.png")
            worse = any(r["verdict"] == SLOWER for r in rows)
            data: dict[str, Any] = {"mode": "perf", "rows": rows, "hot": hot, **info}
        else:
            rows = compare_counts(sweep, a, b, vls, sizes)
            text = counts_markdown(a, b, rows)
            counts_figure(a, b, rows, out / "ab.png")
            worse = any(r["delta"] > 0 for r in rows)
            data = {"mode": "counts", "rows": rows}
    except (ConfigError, toolchain.ToolchainError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunError as e:  # not a verdict: a line did not build or run
        print(f"error: {e}", file=sys.stderr)
        return 3
    (out / "ab.md").write_text(text)
    (out / "ab.json").write_text(json.dumps({"a": a.spec, "b": b.spec, "worse": worse, **data}, indent=1) + "\n")
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    print(text + f"\nB is {'worse than' if worse else 'no worse than'} A; table {shown / 'ab.md'}, figure {shown / 'ab.png'}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
