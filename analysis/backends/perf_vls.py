"""The VLs an SVE CPU offers the perf backend's native runs (issue 52): the driver sets its VL
with prctl(PR_SVE_SET_VL), which does not fail on a length the CPU lacks but grants the largest
offered one below it. The preflight asks for every VL of the perf section first, so a VL the CPU
lacks refuses the sweep in one line naming what it grants, before anything is built or run
(measured on QEMU's -cpu a64fx: 384 -> 256, 1024 -> 512)."""
from __future__ import annotations

import subprocess
import sys

from analysis.core.toolchain import ToolchainError

# Each asked VL (bits) set in a child process, as the driver sets it: PR_SVE_SET_VL (50) grants the
# largest length the CPU offers not above the one asked, in the low 16 bits of its result (bytes).
GRANTS = ("import ctypes, sys\nc = ctypes.CDLL(None, use_errno=True)\n"
          "print(*(c.prctl(50, int(v) // 8, 0, 0, 0) & 0xffff for v in sys.argv[1:]))\n")


def granted_vls(vls: list[int]) -> dict[int, int]:
    """The VL (bits) this CPU grants for each asked one."""
    out = subprocess.run([sys.executable, "-c", GRANTS, *map(str, vls)], capture_output=True, text=True, check=True)
    return {vl: 8 * int(g) for vl, g in zip(vls, out.stdout.split())}


def check_offered(vls: list[int], grants: dict[int, int]) -> None:
    """One line, before anything is built or written, when the CPU lacks a VL the perf section asks."""
    lacking = [vl for vl in vls if grants.get(vl) != vl]
    if lacking:
        offered = ", ".join(str(v) for v in vls if v not in lacking) or "none"
        raise ToolchainError(
            "perf: this CPU does not offer " + ", ".join(f"VL {vl} (prctl grants {grants.get(vl)})" for vl in lacking)
            + f"; of the VLs asked it offers {offered}: set perf: vector_lengths in the sweep file to VLs it offers")
