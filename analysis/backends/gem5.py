"""Cycle backend: run kernel binaries in gem5 SE mode (gem5_scripts/se_sve.py) and read the
ROI block of stats.txt.

gem5 is found from the GEM5 environment variable, else the sweep's `gem5.binary`, else the
cache that `./harness setup --with-gem5` builds into (setup/gem5.sh --path); when none is
there the cycle sweep is skipped with one line saying how to enable it (GEM5=none skips it
on purpose). Each run keeps its
own output directory (config.ini/config.json, stats.txt, simout) under
results/gem5/<system>/<kernel>-<variant>/vl<N>-<size>/.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from analysis import config
from analysis.backends import RunError, cell_name, parse_ok_line, run_limited, staged
from analysis.config import REPO, Run

SCRIPT = REPO / "gem5_scripts" / "se_sve.py"
SYSTEMS = REPO / "configs" / "gem5_systems.yaml"
# Statistics of the ROI block: name in stats.txt (system built by se_sve.py) -> metric.
STATS = {
    "system.switch_cpu.numCycles": "cycles",
    "system.switch_cpu.commitStats0.numInsts": "insts",
    "system.switch_cpu.commitStats0.numOps": "ops",
    "system.switch_cpu.ipc": "ipc",
    "system.cpu.dcache.overallMisses::total": "l1d_misses",
    "system.l2.overallMisses::total": "l2_misses",
}
HOST_STATS = ("hostSeconds", "hostInstRate", "simInsts")
# gem5 prints a cache's miss counts (vector statistics flagged nozero) only when they are
# not zero: a 1 MiB copy that fits in the a64fx-like system's 8 MiB L2 has no
# system.l2.overallMisses line at all. A miss count is 0 when the same cache's access
# count is printed; both missing is still an error.
ZERO_WHEN_ABSENT = {
    "system.cpu.dcache.overallMisses::total": "system.cpu.dcache.overallAccesses::total",
    "system.l2.overallMisses::total": "system.l2.overallAccesses::total",
}
# Inside gem5's ROI, roi_end's two movs and dump_stats commit before the statistics are
# dumped; QEMU's ROI stops at its hint marker. Measured, see README "gem5".
MARKER_INSTRUCTIONS = 3
ENABLE = "./harness setup --with-gem5 builds it once (about 80 minutes on 2 cores), or set GEM5=/path/to/gem5.fast"
# GEM5=none: skip the cycle sweep although gem5 is built (bench times the counts alone).
OFF = "none"


def cached_gem5() -> Path:
    """Where `./harness setup --with-gem5` puts gem5: setup/gem5.sh is the one place that
    knows (HARNESS_CACHE, XDG_CACHE_HOME, the pinned version)."""
    out = subprocess.run([str(REPO / "setup" / "gem5.sh"), "--path"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _given(sweep: config.Sweep) -> str | None:
    return os.environ.get("GEM5") or (sweep.raw.get("gem5") or {}).get("binary")


def find_gem5(sweep: config.Sweep) -> Path | None:
    """The gem5 binary to use (GEM5, then gem5.binary, then the built cache), or None when
    there is none (the cycle sweep is then skipped). A named binary that is missing is not
    replaced by the cached one: the user asked for that one."""
    given = _given(sweep)
    if given == OFF:
        return None
    path = Path(given).expanduser() if given else cached_gem5()
    return path if path.is_file() and os.access(path, os.X_OK) else None


def skipped_message(sweep: config.Sweep) -> str:
    given = _given(sweep)
    if given == OFF:
        return "gem5: cycle sweep skipped (GEM5=none)"
    why = f"{given} is not an executable file" if given else f"gem5 is not built at {cached_gem5()}"
    return f"gem5: cycle sweep skipped ({why}); to run it, {ENABLE}"


def gem5_version(gem5: Path) -> str:
    """gem5 has no --version: its banner, printed before running an (empty) script, says it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([str(gem5), "-d", tmp, "/dev/null"], capture_output=True, text=True, cwd=tmp)
    m = re.search(r"gem5 version (\S+)", out.stdout + out.stderr)
    return f"gem5 {m.group(1)}" if m else "gem5 (version unknown)"


def load_systems(path: Path = SYSTEMS) -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    config.validate_doc(doc, "gem5_systems.schema.yaml", path)
    return doc["systems"]


def parse_stats(text: str, where: str) -> dict[str, float]:
    """The first statistics block (the ROI: reset at roi_begin, dumped at roi_end)."""
    begin = text.find("---------- Begin Simulation Statistics ----------")
    end = text.find("---------- End Simulation Statistics   ----------")
    if begin < 0 or end < 0:
        raise RunError(f"{where}: no complete statistics block in stats.txt (did gem5 reach dump_stats?)")
    values: dict[str, float] = {}
    for line in text[begin:end].splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                continue
    for name, accesses in ZERO_WHEN_ABSENT.items():
        if name not in values and accesses in values:
            values[name] = 0.0
    missing = [name for name in [*STATS, *HOST_STATS] if name not in values]
    if missing:
        raise RunError(f"{where}: stats.txt lacks {', '.join(missing)} (system names changed in gem5_scripts/se_sve.py?)")
    return values


def _read_first(outdir: Path, name: str) -> str:
    """gem5's redirected output: simout.txt in v24, simout before."""
    for candidate in (f"{name}.txt", name):
        if (outdir / candidate).exists():
            return (outdir / candidate).read_text(errors="replace")
    return ""


def command(gem5: Path, outdir: Path, system_json: Path, run: Run, exe: Path) -> list[str]:
    return [str(gem5), "-r", "-e", "-d", str(outdir), str(SCRIPT), "--system", str(system_json),
            "--vl", str(run.vl), "--", f"./{exe.name}", *run.argv()]


def run_once(gem5: Path, binary: Path, system: str, desc: dict[str, Any], run: Run, outdir: Path,
             timeout: float | None = None) -> dict[str, Any]:
    cell = cell_name(binary, f"gem5:{system}", run)
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    system_json = outdir / "system.json"
    system_json.write_text(json.dumps({"name": system, **desc}, indent=2))
    with staged(binary) as exe:
        cmd = command(gem5, outdir.resolve(), system_json.resolve(), run, exe)
        t0 = time.monotonic()
        proc = run_limited(cmd, timeout, cell, cwd=exe.parent)
        seconds = time.monotonic() - t0
    simout, simerr = (_read_first(outdir, name) for name in ("simout", "simerr"))
    if proc.returncode != 0:
        last = [ln for ln in (simerr + simout + proc.stderr).splitlines() if ln.strip() and "warn:" not in ln]
        raise RunError(f"{cell}: gem5 exited with {proc.returncode}: {last[-1] if last else '?'} (output in {outdir})")
    fields = parse_ok_line(simout, cell)
    stats = parse_stats((outdir / "stats.txt").read_text(), f"{cell} ({outdir})")
    (outdir / "command.txt").write_text(" ".join(cmd) + "\n")
    return {
        "vl": run.vl, "vl_seen": int(fields["vl"]), "size": run.size, "op": run.op, "dtype": run.dtype,
        "argv": [f"./{exe.name}", *run.argv()], "command": cmd, "checksum": fields["checksum"],
        "seconds": round(seconds, 3), "outdir": str(outdir),
        "gem5": {metric: stats[name] for name, metric in STATS.items()},
        "host": {name: stats[name] for name in HOST_STATS},
    }


KEEP = re.compile(r"^(sim\w+|host\w+|finalTick|system\.switch_cpu\.(numCycles|ipc|cpi|commitStats0\.\S+)"
                  r"|system\.cpu\.dcache\.overall\S+|system\.l2\.overall\S+)\s")


def make_fixture(outdir: Path, dest: Path) -> None:
    """Keep a real run as a parser test fixture: the ROI block of its stats.txt trimmed to the
    statistics the harness reads and their neighbours, with where it came from."""
    import hashlib

    text = (outdir / "stats.txt").read_text()
    begin = text.index("---------- Begin Simulation Statistics ----------")
    end = text.index("---------- End Simulation Statistics   ----------") + len("---------- End Simulation Statistics   ----------")
    block = text[begin:end].splitlines()
    kept = [block[0]] + [ln for ln in block[1:-1] if KEEP.match(ln)] + [block[-1]]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "stats.txt").write_text("\n".join(kept) + "\n")
    simout = _read_first(outdir, "simout")
    version = re.search(r"gem5 version (\S+)", simout)
    command_line = re.search(r"^command line: (.*)$", simout, re.M)
    values = parse_stats((dest / "stats.txt").read_text(), str(dest))
    (dest / "provenance.json").write_text(json.dumps({
        "gem5_version": f"gem5 {version.group(1)}" if version else "unknown",
        "config_json_sha256": hashlib.sha256((outdir / "config.json").read_bytes()).hexdigest(),
        "command": command_line.group(1) if command_line else "",
        "note": "trimmed: the ROI block (first block) of a real stats.txt, only the lines the harness reads and their group",
        "expected": {metric: values[name] for name, metric in STATS.items()},
    }, indent=2) + "\n")
