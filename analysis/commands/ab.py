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

Here the command and the counts mode; the lines and the comparison's sweep file are
analysis.commands.ab_lines', the perf mode analysis.commands.ab_perf's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from analysis.backends import RunError, qemu
from analysis.commands.ab_lines import NO_CHANGE, SLOWER, Line, build_targets, make_sweep, parse_line, rev_table, run_args
from analysis.commands.ab_perf import compare_perf, perf_figure, perf_markdown
from analysis.core import config, mpi, toolchain
from analysis.core.config import REPO, ConfigError
from analysis.stages import build


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
