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
