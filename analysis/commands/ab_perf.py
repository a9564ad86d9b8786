"""`./harness ab --perf` (analysis.commands.ab): both lines built for this host and timed under
perf, A and B interleaved; a verdict per size from the min..max ranges; per-symbol samples of
one `perf record` process per side.
"""
from __future__ import annotations

import collections
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from analysis.backends import RunError, perf, staged
from analysis.commands.ab_lines import FASTER, NO_CHANGE, SLOWER, Line, build_targets, run_args
from analysis.core import config, toolchain
from analysis.core.config import ConfigError
from analysis.stages import build


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
    for ln in (a, b):
        isa = sweep.table.row(ln.kernel, ln.variant).host_isa
        if isa and isa != platform.machine():
            raise ConfigError(f"line '{ln.spec}' is {isa} code and this host is {platform.machine()}")
        if not sweep.table.row(ln.kernel, ln.variant).host_native:
            raise ConfigError(f"line '{ln.spec}' is not host_native in the kernel table: --perf times lines built for "
                              "this machine's ISA; pick a host_native row or compare counts (without --perf)")
    # Bad lines first: on a host where perf cannot count they are still what to fix.
    status = perf.detect(sweep)
    if status is None or not status.host:
        raise toolchain.ToolchainError("; ".join(status.messages) if status else "perf: not available")
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
