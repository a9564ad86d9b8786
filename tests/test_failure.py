"""analysis.core.failure: the one line that says why a job failed."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from analysis.core import failure
from analysis.core.failure import cause
from conftest import PY, REPO

GCC = """/tmp/own/my_kernel.c: In function 'main':
/tmp/own/my_kernel.c:48:22: error: conflicting types for 'x'; have 'int'
   48 |     roi_begin(); int x = ;
      |                      ^
/tmp/own/my_kernel.c:48:26: error: expected expression before ';' token
"""
CLANG = """/tmp/k.c:3:9: error: use of undeclared identifier 'z'
    y = z;
        ^
1 error generated.
"""


def test_the_cause_is_the_first_error_line_never_a_quote_or_caret() -> None:
    assert cause(GCC) == "/tmp/own/my_kernel.c:48:22: error: conflicting types for 'x'; have 'int'"
    assert cause(CLANG) == "/tmp/k.c:3:9: error: use of undeclared identifier 'z'"
    assert cause("ran 3 runs\nFAIL: y at index 0: got 0 expected 1\n") == "FAIL: y at index 0: got 0 expected 1"
    assert cause("ld: k.o: in function `main':\nk.c:(.text+0x8): undefined reference to `roi_begin'\n") == \
        "k.c:(.text+0x8): undefined reference to `roi_begin'"
    assert cause("something odd\nlast words\n") == "last words"
    assert cause("   48 |  x\n      |  ^\n") == "(empty log)"


def test_the_command_prints_what_the_cause_and_the_log(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    log.write_text(GCC)
    proc = subprocess.run([PY, "-m", "analysis.core.failure", str(log), "kernel k-acle does not compile"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"kernel k-acle does not compile: /tmp/own/my_kernel.c:48:22: error: conflicting types "
                           f"for 'x'; have 'int' (log: {log})\n")


def test_under_the_sweep_s_logger_the_job_leaves_the_line_to_it(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    log.write_text("k.c:1:1: error: expected ';'\n")
    env = {**os.environ, failure.SHOWN_BY_LOGGER: "1"}
    proc = subprocess.run([PY, "-m", "analysis.core.failure", str(log), "kernel k-acle does not compile"],
                          cwd=REPO, capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stderr) == (1, "")
