"""What a test session must leave as it found it (tests/conftest.py checks it at the session's
end): no staging directory of its own in /tmp (analysis/backends: sve-count-*), nothing new
or changed under the repository's results/ and build/ (the tests write into temporary
directories), no new untracked or ignored path in the repository (a file a test forgot in the
tree, a __pycache__ beside the sources) other than what is allowed below.

/tmp is shared with every other session on the machine, so staging directories are told apart
by the tag the session puts in their owner file (backends.STAGE_TAG_ENV), not by their age.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from analysis import backends

# Untracked paths a session may add: the virtualenv (the harness's own, made by setup) and
# Snakemake's state directory (every workflow run with --directory REPO keeps its metadata and
# locks there, as a sweep does; .gitignore lists it with the build and results).
ALLOWED = (".venv/", ".snakemake/")
# The harness's output directories, compared file by file (.gitignore hides what is in them).
OUTPUT_DIRS = ("results", "build")


@dataclass(frozen=True)
class Snapshot:
    untracked: frozenset[str]  # `git status` lines of untracked (??) and ignored (!!) paths
    outputs: dict[str, int]  # every file under OUTPUT_DIRS (relative path) -> mtime in ns
    pycache_checked: bool  # bytecode goes elsewhere (PYTHONPYCACHEPREFIX) or nowhere


def _untracked(repo: Path) -> frozenset[str]:
    # --no-optional-locks: the status must not take the index lock from a concurrent git command.
    proc = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain", "--ignored"],
                          capture_output=True, text=True)
    if proc.returncode != 0:  # not a git checkout (an unpacked tarball): nothing to compare
        return frozenset()
    return frozenset(ln for ln in proc.stdout.splitlines() if ln[:2] in ("??", "!!"))


def _outputs(repo: Path) -> dict[str, int]:
    files = {}
    for name in OUTPUT_DIRS:
        for root, _dirs, names in os.walk(repo / name):
            for n in names:
                p = Path(root) / n
                try:
                    files[str(p.relative_to(repo))] = p.lstat().st_mtime_ns
                except OSError:
                    continue
    return files


def snapshot(repo: Path, pycache_checked: bool) -> Snapshot:
    return Snapshot(_untracked(repo), _outputs(repo), pycache_checked)


def own_stages(tag: str, root: str = backends.STAGE_ROOT) -> list[Path]:
    """The staging directories whose owner file carries `tag` (this session's)."""
    own = []
    for d in Path(root).glob(f"{backends.STAGE_PREFIX}*"):
        try:
            lines = (d / backends.OWNER_FILE).read_text().splitlines()
        except OSError:
            continue
        if len(lines) > 1 and lines[1] == tag:
            own.append(d)
    return own


def leftovers(repo: Path, before: Snapshot, tag: str, stage_root: str = backends.STAGE_ROOT) -> list[str]:
    """One line per thing the session left behind since `before` (empty: nothing)."""
    found = [f"staging directory {d} (owner: {(d / backends.OWNER_FILE).read_text().split()[0]})"
             for d in own_stages(tag, stage_root)]
    after = _outputs(repo)
    found += [f"{path} written in the repository" for path, mtime in sorted(after.items())
              if before.outputs.get(path) != mtime]
    for line in sorted(_untracked(repo) - before.untracked):
        path = line[3:]
        if path.startswith(ALLOWED) or path.startswith(tuple(f"{d}/" for d in OUTPUT_DIRS)):
            continue
        if "__pycache__" in path.split("/") and not before.pycache_checked:
            continue
        found.append(f"{path} is new in the repository ({'ignored' if line.startswith('!!') else 'untracked'})")
    return found
