"""Run a command at an SVE vector length: `python3 sve_vl_exec.py VL COMMAND [ARG...]`.

DynamoRIO reads the VL once, when it starts, and does not follow a program's own
PR_SVE_SET_VL (its issue #6625), so the armie backend's native runs (armie_native) set it here,
in the process that then becomes drrun: PR_SVE_SET_VL with PR_SVE_VL_INHERIT keeps it across
exec for drrun and the program it starts. As an ordinary user, where the emulated guest writes
the kernel's default for every process (/proc/sys/abi/sve_default_vector_length, root's).
prctl grants the largest VL the CPU offers below the one asked: a VL not granted as asked is
one FAIL line and exit 1, never a run at another VL. Standalone (run by path, no package
imports), so the records' command lines run as they are.
"""
from __future__ import annotations

import ctypes
import os
import sys

PR_SVE_SET_VL = 50  # linux/prctl.h
PR_SVE_VL_INHERIT = 1 << 17
PR_SVE_VL_LEN_MASK = 0xFFFF


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) % 128:
        print("usage error: sve_vl_exec.py VL COMMAND [ARG...] (VL in bits, a multiple of 128)", file=sys.stderr)
        return 2
    bits = int(argv[0])
    got = ctypes.CDLL(None, use_errno=True).prctl(PR_SVE_SET_VL, (bits // 8) | PR_SVE_VL_INHERIT, 0, 0, 0)
    if got < 0:
        print(f"FAIL: prctl(PR_SVE_SET_VL, {bits // 8} bytes): {os.strerror(ctypes.get_errno())} (no SVE here?)",
              file=sys.stderr)
        return 1
    if 8 * (got & PR_SVE_VL_LEN_MASK) != bits:
        print(f"FAIL: this CPU does not offer VL {bits} (prctl grants {8 * (got & PR_SVE_VL_LEN_MASK)})",
              file=sys.stderr)
        return 1
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as e:
        print(f"FAIL: {argv[1]}: {e.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
