"""Comments that name a file of the repository name one that exists.

Files move (analysis/ was grouped into stages/, backends/, commands/, core/) and the comments
that pointed at the old places stayed: eight C comments named build.py and config.py at the
top of analysis/ long after both had moved. This reads the comments (and #error messages)
of the C sources, and the comments and docstrings of the Python (analysis/, rules/, the
Snakefile, gem5_scripts/, tests/), and fails on a repository path that does not exist.
"""
from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

from conftest import REPO

# The repository's own top-level folders a comment can point into. results/ is left out (what a
# run writes, often a pattern), and so is shared/ (beside the repository, not in it).
TOP = ("analysis", "armie_clients", "ci", "configs", "docs", "gem5_scripts", "kernels", "rules", "setup", "tests")
# A path starts a word and ends on a word character (a full stop or comma after it is prose).
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/[\w./-]*\w)")
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|^\s*#\s*(?:error|warning)\b[^\n]*", re.S | re.M)
C_SUFFIXES = (".c", ".h", ".S", ".inc")
PY_SUFFIXES = (".py", ".smk")
NEWLINE = "\n"


def tracked(*folders: str) -> list[Path]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "--", *folders], capture_output=True, text=True,
                         check=True).stdout
    return [REPO / line for line in out.splitlines() if (REPO / line).is_file()]


def c_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and #error/#warning message."""
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in C_COMMENT.finditer(text)]


def py_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and of every string that stands as a statement of its own
    (docstrings). Tokens, not a parse: Snakemake's rule files are not Python."""
    out: list[tuple[int, str]] = []
    before = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                                        tokenize.NL):
            out.append((tok.start[0], tok.string))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            before = tok.type
    return out


def missing_paths(comments: list[tuple[int, str]]) -> list[str]:
    """`line N: path` of every repository path the comments name that does not exist."""
    out = []
    for line, text in comments:
        for m in PATH.finditer(text):
            if not (REPO / m.group(1)).exists():
                out.append(f"line {line + text.count(NEWLINE, 0, m.start())}: {m.group(1)}")
    return out


def sources() -> list[Path]:
    files = tracked("kernels", "armie_clients", "gem5_scripts", "analysis", "rules", "tests", "Snakefile")
    return [f for f in files if f.suffix in C_SUFFIXES + PY_SUFFIXES or f.name == "Snakefile"]


def test_paths_named_in_comments_exist() -> None:
    missing = []
    for source in sources():
        text = source.read_text()
        comments = c_comments(text) if source.suffix in C_SUFFIXES else py_comments(text)
        missing += [f"{source.relative_to(REPO)} {where}" for where in missing_paths(comments)]
    assert not missing, "comments name paths that do not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_moved_path_in_a_comment_and_nothing_in_code() -> None:
    c = '#include "harness.h"\n/* Built by\n * analysis/build.py; see kernels/harness/harness.c */\n' \
        'const char *p = "analysis/nowhere.py"; // analysis/config.py, kernels/include\n' \
        '#error "build with analysis/build.py plugin_cmd"\n'
    assert missing_paths(c_comments(c)) == ["line 3: analysis/build.py", "line 4: analysis/config.py",
                                            "line 5: analysis/build.py"]
    py = '"""Reads analysis/stages/nowhere.py."""\nX = "analysis/code.py"  # and rules/gone.smk\n\n' \
         'def f():\n    """See docs/contracts.md and docs/gone.md."""\n    return "docs/also_code.md"\n'
    assert missing_paths(py_comments(py)) == ["line 1: analysis/stages/nowhere.py", "line 2: rules/gone.smk",
                                              "line 5: docs/gone.md"]
