"""ArmIE's output formats, as its sample clients print them (shared/reference/armie.md): read by
the armie backend (real ArmIE on an AArch64 host) and by its stand-in, DynamoRIO's ROI client in
the emulated guest (analysis.backends.armie_guest), whose output has the same lines.

Lines starting with `#` are ignored by every parser, so fixtures can say what they are.
"""
from __future__ import annotations

import re

# `<N> instructions executed of which <M> were emulated instructions` (printed with %llu).
_INSCOUNT_RE = re.compile(
    r"^\s*(\d+) instructions executed of which (\d+) were emulated instructions\s*$"
)
# The stand-in's batch mode (armie_clients/dynamorio/roi_inscount.c): one process runs several
# cells and the client prints each run's line as `run <k>: <the line it prints alone>`.
_RUN_RE = re.compile(r"^run (\d+): (.*)$")
# undecoded.txt / undecoded.<app>.<pid>.log line: `%9lu : 0x%08x`.
_UNDECODED_RE = re.compile(r"^\s*(\d+)\s*:\s*0x([0-9a-fA-F]{8})\s*$")


def _content_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) for every line that is not blank and not a `#` comment."""
    return [
        (i, line)
        for i, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def parse_inscount(text: str) -> dict:
    """Parse `libinscount_emulated.so` output into `{"total": N, "sve": M, "classes": None}`.

    `text` is the client's output (stderr/stdout of the run, possibly mixed with the program's
    own output). Exactly one count line must be present: none means the client did not run or
    the program did not exit normally; two or more mean several processes (e.g. MPI ranks)
    shared one stream, and picking one would silently give a wrong number. `classes` is None
    because ArmIE does not classify instructions the way our QEMU inscount client does.
    """
    found: list[tuple[int, int, int]] = []
    for lineno, line in _content_lines(text):
        m = _INSCOUNT_RE.match(line)
        if m:
            found.append((lineno, int(m.group(1)), int(m.group(2))))
    if not found:
        # The stand-in says why it printed no count (unbalanced markers, a run cut short).
        said = [line.strip() for _, line in _content_lines(text) if line.lstrip().startswith("roi_inscount: ")]
        if said:
            raise ValueError(f"ArmIE inscount: no count line; the client said: {said[-1][:200]}")
        raise ValueError(
            "ArmIE inscount: no '<N> instructions executed of which <M> were emulated instructions' "
            "line found: was the run made with -i libinscount_emulated.so and did it exit normally?"
        )
    if len(found) > 1:
        lines = ", ".join(str(f[0]) for f in found)
        raise ValueError(
            f"ArmIE inscount: {len(found)} count lines (lines {lines}); expected exactly one: "
            "give each process (MPI rank) its own output file"
        )
    lineno, total, emulated = found[0]
    if emulated > total:
        raise ValueError(
            f"ArmIE inscount line {lineno}: {emulated} emulated > {total} executed; the total "
            "includes the emulated instructions, so this output is corrupt"
        )
    return {"total": total, "sve": emulated, "classes": None}


def split_runs(text: str, runs: int) -> list[str]:
    """A batch's client output (one process ran `runs` runs) as `runs` outputs: run k's is the
    text of its `run <k>: ` lines without the prefix, what the client prints for a process of
    that run alone, so `parse_inscount` reads each. A run the client printed nothing for (the
    batch stopped before it) gets "", which parse_inscount refuses as a missing count. Other
    lines (the program's, DynamoRIO's) belong to no run and are left out. ValueError when a run
    number is outside the batch or printed twice, or when a count line has no run number (a
    client without batch mode counted the whole batch as one run)."""
    out: list[list[str]] = [[] for _ in range(runs)]
    counted: dict[int, int] = {}
    for lineno, line in _content_lines(text):
        m = _RUN_RE.match(line.strip())
        if m is None:
            if _INSCOUNT_RE.match(line):
                raise ValueError(f"ArmIE inscount line {lineno} has no run number in a batch of {runs} runs: "
                                 "the client counted the batch as one run (is it built with batch mode?)")
            continue
        k, rest = int(m.group(1)), m.group(2)
        if k >= runs:
            raise ValueError(f"ArmIE inscount line {lineno}: run {k} in a batch of {runs} runs")
        if _INSCOUNT_RE.match(rest):
            if k in counted:
                raise ValueError(f"ArmIE inscount line {lineno}: run {k} already counted on line {counted[k]}")
            counted[k] = lineno
        out[k].append(rest)
    return ["".join(f"{line}\n" for line in lines) for lines in out]


def parse_opcodes(undecoded_text: str) -> list[dict]:
    """Parse `undecoded.txt` / `undecoded.<app>.<pid>.log` into `[{"encoding": "0x%08x", "count": N}]`.

    Each non-blank, non-`#` line must be `%9lu : 0x%08x` (count : 32-bit encoding of an emulated
    SVE instruction). Encodings are normalised to lower-case 8-digit hex, as in our opcodes JSON,
    so both backends decode through the same objdump cache. A malformed line or an encoding that
    appears twice (e.g. two files concatenated) raises ValueError naming the line. The result is
    sorted by count descending, then encoding, so it does not depend on ArmIE's tie order.
    """
    seen: dict[str, int] = {}
    out: list[dict] = []
    for lineno, line in _content_lines(undecoded_text):
        m = _UNDECODED_RE.match(line)
        if not m:
            raise ValueError(
                f"ArmIE undecoded line {lineno}: {line.strip()[:80]!r} is not '<count> : 0x<8 hex digits>'"
            )
        encoding = f"0x{int(m.group(2), 16):08x}"
        if encoding in seen:
            raise ValueError(
                f"ArmIE undecoded line {lineno}: encoding {encoding} already listed on line "
                f"{seen[encoding]}: pass one undecoded file per run"
            )
        seen[encoding] = lineno
        out.append({"encoding": encoding, "count": int(m.group(1))})
    out.sort(key=lambda e: (-e["count"], e["encoding"]))
    return out
