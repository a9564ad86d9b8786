"""What a sweep depended on, as digests: what the up-to-date check (analysis.commands.uptodate)
records after a sweep that finished and recomputes before answering the same command again.

The parts (PARTS), and why:
- sources: size, mtime and SHA-256 of every file of the workflow (TREES) and of every file the
  loaded sweep names outside them (the sweep file and the one it extends, kernel tables,
  sources, drivers, and the headers beside them, which rules/build.smk takes as inputs). The
  content, because the workflow's Python decides what plans and commands say; the mtime, because
  Snakemake re-runs a job whose input is newer than its output even when its content is the same;
- tools: where each tool the checks look for resolves on PATH and the size, mtime and inode of
  what it resolves to (an upgrade replaces the file); Debian's package database (any apt install
  or upgrade: the cross libc, the perf behind Debian's wrapper script), the Python executable and
  the venv's site-packages folder (pip adds and removes entries there); gem5 and the MPI
  libraries where the sweep looks for them;
- env: the variables the workflow and Snakemake read (ENV);
- host: what the workflow reads of the machine: uname (the host stamp), user, memory (the size
  checks), perf_event_paranoid (whether perf may count);
- outputs: every file under results_dir and build_dir (size, mtime, inode) but the lock and the
  up-to-date record, and Snakemake's metadata and incomplete-job records of each (a deleted,
  touched or edited output, or a job a killed run left marked incomplete, makes Snakemake work).

Light on purpose, like uptodate: neither pandas, Snakemake nor jsonschema (tested).
"""
from __future__ import annotations

import base64
import glob
import hashlib
import os
import shutil
import site
import sys
from pathlib import Path
from typing import Iterator

from analysis.backends import gem5, qemu, simeng
from analysis.core import backend_path, config, mpi, toolchain

REPO = config.REPO
SNAKEMAKE_DIR = REPO / ".snakemake"  # the workflow runs with --directory REPO
# The results folder's files that are no output: its lock, rewritten by every command that takes
# it (keep.LOCK: keep imports pandas through the tables, so it is named here again, tested
# equal), and the up-to-date record with its temporary files.
LOCK = ".lock"
RECORD = ".uptodate.json"
# The workflow's own files: what Snakemake reads (Snakefile, rules), the Python it and its jobs
# run, the sources its rules build, the configs and schemas, gem5's script and the script that
# says where gem5 is built.
TREES = ("Snakefile", "rules", "analysis", "kernels", "armie_clients", "configs", "gem5_scripts", "setup/gem5.sh",
         "setup/simeng.sh")
# What the workflow and Snakemake read from the environment: gem5 (GEM5), the user's backends
# (HARNESS_BACKENDS_PATH, analysis.core.backend_path), the cache where gem5
# and Open MPI 5 are built (HARNESS_CACHE, XDG_CACHE_HOME, HOME; HOME also for `~` in paths),
# where tools and modules are found (PATH, PYTHONPATH, PYTHONHOME), the tools' language (their
# version lines are stamps), and Snakemake's own settings (every SNAKEMAKE* variable).
ENV = ("GEM5", "SIMENG", backend_path.PATH_ENV, "HARNESS_CACHE", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME", "PATH", "PYTHONPATH", "PYTHONHOME",
       "LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES")
ENV_PREFIX = "SNAKEMAKE"
# Debian's record of every installed package: it changes with any apt install, upgrade or removal.
DPKG_STATUS = "/var/lib/dpkg/status"
PERF_PARANOID = "/proc/sys/kernel/perf_event_paranoid"
# The order the check compares them in: the cheap parts first.
PARTS = ("env", "host", "tools", "sources", "outputs")


def watch(sweep_file: str, sweep: config.Sweep) -> dict[str, list[str]]:
    """What the check recomputes besides the fixed parts, from the loaded sweep, so the check
    needs neither the schema nor the kernel table: the files the sweep names outside TREES, the
    folders whose headers its sources may include, the tools to look up, the paths to stat."""
    # Paths as the sweep names them, links not followed: a link pointed elsewhere is a change
    # (identity and content follow it when the check runs).
    sweep_files = set(config.read_sweep(Path(sweep_file))[1])
    # The user's backends are Python the workflow runs, kept outside the trees.
    user_backends = [p for folder in backend_path.folders() if folder.is_dir() for p in folder.iterdir() if p.is_file()]
    named = {os.path.abspath(p) for p in (*sweep_files, *sweep.table_paths, config.GEM5_SYSTEMS, *user_backends)}
    sources = {os.path.abspath(mpi.SESSION_SOURCE)}
    for row in sweep.table.rows:
        sources.update(os.path.abspath(p) for p in (row.source, *row.extra_sources))
    for fam in sweep.table.families.values():
        sources.update(os.path.abspath(p) for p in ((fam.driver,) if fam.driver else ()) + fam.vl_agnostic_sources)
    trees = [str(REPO / t) for t in TREES]

    def outside_trees(path: str) -> bool:
        return not any(path == t or path.startswith(t + os.sep) for t in trees)

    outside = sorted(p for p in named | sources if outside_trees(p))
    # rules/build.smk's _headers: *.h in the source's folder as named (os.path.dirname).
    header_dirs = sorted({os.path.dirname(p) for p in sources if outside_trees(os.path.dirname(p))})

    tools = {c.cc[0] for c in toolchain.COMPILERS.values()} | {toolchain.OBJDUMP, qemu.QEMU, "armie", "perf"}
    if sweep.perf is not None:
        tools.add(sweep.perf.perf)
    probes = {DPKG_STATUS, sys.executable, *site.getsitepackages()}
    for name in mpi.NAMES:
        lib = mpi.library(name)
        probes.update((str(lib.include / "mpi.h"), str(lib.lib / "libmpi.so")))
        if lib.stamp:  # a rebuilt library with the same files' names (install-sve: a new patch)
            probes.add(str(lib.stamp))
    if sweep.gem5 is not None:  # every place gem5 is looked for (analysis.backends.gem5.find_gem5)
        given = [os.environ.get("GEM5") or "", sweep.gem5.binary or ""]
        probes.update(str(Path(g).expanduser()) for g in given if g and g != gem5.OFF)
        probes.add(str(gem5.cached_gem5_place()))
    if sweep.simeng is not None:  # the same for SimEng, and the stamp a rebuild rewrites
        given = [os.environ.get("SIMENG") or "", sweep.simeng.binary or ""]
        probes.update(str(Path(g).expanduser()) for g in given if g and g != simeng.OFF)
        probes.update(str(p) for p in simeng.cached_places())
    return {"files": outside, "header_dirs": header_dirs, "tools": sorted(tools), "probes": sorted(probes)}


# --- the parts --------------------------------------------------------------------------------

class Digest:
    """SHA-256 over a sequence of small tuples (strings, integers, None)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def add(self, *items: object) -> None:
        self.h.update(repr(items).encode() + b"\n")

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def identity(path: str | Path) -> tuple[int, int, int] | None:
    """Size, mtime and inode of what `path` names (links followed); None when absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def content(path: str | Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def part(name: str, watched: dict[str, list[str]], results_dir: Path, build_dir: Path) -> str:
    d = Digest()
    if name == "env":
        for var in ENV:
            d.add(var, os.environ.get(var))
        for var in sorted(v for v in os.environ if v.startswith(ENV_PREFIX)):
            d.add(var, os.environ[var])
    elif name == "host":
        try:
            with open(PERF_PARANOID) as f:
                paranoid: str | None = f.read().strip()
        except OSError:
            paranoid = None
        # The interpreter too: Snakemake is started as `sys.executable -m snakemake`.
        d.add(tuple(os.uname()), os.getuid(), os.geteuid(), os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
              paranoid, sys.executable, sys.prefix, sys.version)
    elif name == "tools":
        for tool in watched["tools"]:
            where = shutil.which(tool)
            d.add(tool, where, where and os.path.realpath(where), where and identity(where))
        for path in watched["probes"]:
            d.add(path, os.path.realpath(path), identity(path))
    elif name == "sources":
        for tree in TREES:
            for path in _files(REPO / tree):
                d.add(str(path.relative_to(REPO)), identity(path), content(path))
        for path in watched["files"]:
            d.add(path, identity(path), content(path))
        for folder in watched["header_dirs"]:  # rules/build.smk's _headers: *.h beside a source
            for path in sorted(glob.glob(os.path.join(folder, "*.h"))):
                d.add(path, identity(path), content(path))
    elif name == "outputs":
        records = Records()
        for root in (results_dir, build_dir):  # either may lie in the other: the skip is by folder
            d.add(str(root))
            for rel, kind, ident in _walk(root, str(results_dir)):
                key = f"{root}/{rel}"
                d.add(rel, kind, ident, records.stat("metadata", key), records.stat("incomplete", key))
    else:
        raise ValueError(name)
    return d.hexdigest()


def _files(top: Path) -> list[Path]:
    """Every file under `top` (or `top` itself), sorted, without bytecode caches."""
    if not top.is_dir():
        return [top]
    out = []
    for root, dirs, names in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        out += [Path(root, n) for n in sorted(names) if not n.endswith(".pyc")]
    return out


def _walk(top: Path, results_dir: str, rel: str = "") -> Iterator[tuple[str, str, object]]:
    """(relative path, kind, identity) of everything under `top`, depth first in name order,
    but the results folder's lock (rewritten by every command that takes it), the up-to-date
    record and its temporary files."""
    folder = os.path.join(top, rel) if rel else str(top)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return
    for e in entries:
        if folder == results_dir and (e.name in (LOCK, RECORD) or e.name.startswith(f".{RECORD}.tmp")):
            continue
        path = f"{rel}/{e.name}" if rel else e.name
        if e.is_symlink():
            yield path, "link", (os.readlink(e.path), identity(e.path))
        elif e.is_dir():
            yield path, "dir", None
            yield from _walk(top, results_dir, path)
        else:
            st = e.stat(follow_symlinks=False)
            yield path, "file", (st.st_size, st.st_mtime_ns, st.st_ino)


class Records:
    """Snakemake's per-output records (snakemake.persistence.file: the output's path as given in
    the rule, urlsafe base64, cut into PC_NAME_MAX - 1 pieces, all but the last prefixed `@`).
    The workflow names its outputs by absolute path, so the key is that path."""

    def __init__(self) -> None:
        try:
            self.name_max = os.pathconf(SNAKEMAKE_DIR, "PC_NAME_MAX") or 255
        except OSError:
            self.name_max = 255

    def stat(self, kind: str, key: str) -> tuple[int, int, int] | None:
        b64 = base64.urlsafe_b64encode(key.encode()).decode()
        cut = self.name_max - 1
        pieces = [b64[i:i + cut] for i in range(0, len(b64), cut)]
        return identity(os.path.join(SNAKEMAKE_DIR, kind, *("@" + p for p in pieces[:-1]), pieces[-1]))
