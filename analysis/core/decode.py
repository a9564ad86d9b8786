"""Decode 32-bit A64/SVE encodings to mnemonics with binutils objdump.

QEMU 7.2 disassembles SVE as `.byte`, so the opcode client records raw encodings and we
decode them here, once per distinct word, with the cross binutils (a well-kept decoder
that knows SVE).
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from analysis.core.toolchain import OBJDUMP

_LINE = re.compile(r"^\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(.*)$")


def decode(encodings: list[int]) -> dict[int, str]:
    """Map each encoding to objdump's text (mnemonic and operands); unknown -> 'undefined'."""
    words = sorted(set(encodings))
    if not words:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        blob = Path(tmp) / "words.bin"
        blob.write_bytes(b"".join(w.to_bytes(4, "little") for w in words))
        out = subprocess.run(
            [OBJDUMP, "-D", "-b", "binary", "-m", "aarch64", str(blob)],
            check=True, capture_output=True, text=True,
        ).stdout
    text: dict[int, str] = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            text[words[int(m.group(1), 16) // 4]] = m.group(3).split("//")[0].strip()
    return {w: text.get(w, "undefined") for w in words}


def mnemonic(text: str) -> str:
    """The mnemonic of an objdump line: 'ld1b\t{z0.b}, ...' -> 'ld1b'; 'b.ne 18' -> 'b.ne'."""
    return text.split()[0] if text.split() else "undefined"
