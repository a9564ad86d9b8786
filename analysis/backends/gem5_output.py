"""What one gem5 run of gem5_scripts/se_sve.py leaves behind, read: the ROI's block of its
stats.txt, its output files, and the line that says why it stopped."""
from __future__ import annotations

from pathlib import Path

from analysis.backends import RunError

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


def parse_stats(text: str, where: str, vl: int | None = None, caches: bool = True) -> dict[str, float]:
    """The first statistics block (the ROI: reset at roi_begin, dumped at roi_end). `vl`: its
    VL's CPUs (system.switch_cpu_vl512, ...) are read as system.switch_cpu and system.warm_cpu,
    the other VLs' are left out. `caches`: whether the system has data caches; without them (the
    ideal-memory system: an L1I only) there are no miss counts, and none is made up."""
    begin = text.find("---------- Begin Simulation Statistics ----------")
    end = text.find("---------- End Simulation Statistics   ----------")
    if begin < 0 or end < 0:
        raise RunError(f"{where}: no complete statistics block in stats.txt (did gem5 reach dump_stats?)")
    values: dict[str, float] = {}
    for line in text[begin:end].splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            name = parts[0] if vl is None else parts[0].replace(f"_cpu_vl{vl}.", "_cpu.")
            try:
                values[name] = float(parts[1])
            except ValueError:
                continue
    for name, accesses in ZERO_WHEN_ABSENT.items():
        if name not in values and accesses in values:
            values[name] = 0.0
    wanted = [name for name in [*STATS, *HOST_STATS] if caches or name not in ZERO_WHEN_ABSENT]
    missing = [name for name in wanted if name not in values]
    if missing:
        raise RunError(f"{where}: stats.txt lacks {', '.join(missing)} (system names changed in gem5_scripts/se_sve.py?)")
    return values


def read_output(outdir: Path, name: str) -> str:
    """A fork's simout.txt or simerr.txt (se_sve.py's own_output writes them; "" when absent)."""
    path = outdir / f"{name}.txt"
    return path.read_text(errors="replace") if path.exists() else ""


def failure_line(simerr: str, simout: str, stderr: str) -> str:
    """The line that says why gem5 stopped: its panic or fatal line (simerr holds it above a
    backtrace, simout ends with its banner), else the last line that is not a warning."""
    lines = [ln.strip() for ln in (simerr + "\n" + stderr + "\n" + simout).splitlines() if ln.strip()]
    for ln in lines:
        if " panic: " in ln or " fatal: " in ln or ln.startswith(("panic:", "fatal:")):
            return ln
    rest = [ln for ln in lines if "warn:" not in ln and not ln.startswith("/")]
    return rest[-1] if rest else "?"
