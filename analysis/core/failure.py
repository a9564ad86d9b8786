"""Why a job failed, in one line: the cause from its log (the compiler's error line, the
kernel's FAIL: line, the linker's, the ROI check's), never the source quote and caret lines
that GCC and clang print under an error. Used by the build rules when a command fails (the line
they print is what `--quiet` runs such as `count` and `regress` show) and by the sweep's
logger plugin for its failure line.

    python -m analysis.core.failure LOG WHAT    prints "WHAT: CAUSE (log: LOG)" on stderr, exits 1

Under the sweep's logger plugin the job prints nothing (the environment says SHOWN_BY_LOGGER):
the job's stderr reaches the console beside the logger's own failure line, and the console
said the same cause twice.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# A line that says why: a compiler's or linker's error, the harness contract's FAIL: and usage
# error: lines, the link-time ROI check, a time limit.
CAUSE = re.compile(r"(^|: )(fatal )?error: |^FAIL: |^usage error: |undefined reference to |never calls roi_|time limit")
# GCC and clang quote the source under a diagnostic ("   48 |     code", "      |   ^~~").
QUOTE = re.compile(r"^\s*\d*\s*\|")
# Set by `./harness sweep` for its jobs when its logger plugin prints each failure's line.
SHOWN_BY_LOGGER = "HARNESS_FAILURE_SHOWN_BY_LOGGER"


def cause(text: str) -> str:
    """The first line that says why, else the last line that is not a source quote."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not QUOTE.match(ln)]
    return next((ln for ln in lines if CAUSE.search(ln)), lines[-1] if lines else "(empty log)")


def main(argv: list[str]) -> int:
    log, what = Path(argv[0]), argv[1]
    text = log.read_text(errors="replace") if log.is_file() else ""
    if not os.environ.get(SHOWN_BY_LOGGER):
        print(f"{what}: {cause(text)} (log: {log})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
