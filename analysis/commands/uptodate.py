"""`./harness sweep` again with nothing changed: answered without starting Snakemake (issue 28).

Snakemake takes 1.1-1.2 s to start and find nothing to do, and the command around it (its
imports, the validation, the report) as long again. A local sweep that finished (Snakemake's
exit status 0, the report and the good set written) records in `<results_dir>/.uptodate.json`
what that run depended on, as digests; the same command run again recomputes them before
anything heavy is imported and, when every one is equal, prints

    sweep configs/default.yaml: up to date (nothing changed since the sweep of ...; results in ...)

and exits 0: no Snakemake, no lock taken, nothing written. Anything else (a difference, a file
it cannot read, the results folder held by another command, a Snakemake lock in the tree, a
Snakemake profile, a command line it does not read) goes the normal way, unchanged: the answer
is never a guess. `keep.take` deletes the record under the results folder's lock before a
command writes the folder, so a failed, stopped or partial run leaves none.

What the record covers (PARTS), and why:
- the command: the sweep file as given and resolved, the working directory, the --set overrides,
  the Snakemake targets (--cores and --verbose change nothing Snakemake decides);
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
- outputs: every file under results_dir and build_dir (size, mtime, inode) but the lock and this
  record, and Snakemake's metadata and incomplete-job records of each (a deleted, touched or
  edited output, or a job a killed run left marked incomplete, makes Snakemake work).

Imported by analysis.commands.cli before its own imports (pandas among them): this module and
what it imports (analysis.core.config for the results folder, the backends' tool names) load
neither pandas, Snakemake nor jsonschema (tested).
"""
from __future__ import annotations

import base64
import fcntl
import glob
import hashlib
import json
import os
import shutil
import site
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

# Light on purpose (PyYAML is the largest): neither pandas, Snakemake nor jsonschema (tested).
from analysis.backends import gem5, qemu
from analysis.core import config, files, mpi, toolchain

REPO = config.REPO
NAME = ".uptodate.json"
FORMAT = 1
# keep.LOCK: keep imports pandas (through the tables), so it is named here again (tested equal).
LOCK = ".lock"
DEFAULT_CONFIG = "configs/default.yaml"  # cli's --config default (tested equal)
SNAKEMAKE_DIR = REPO / ".snakemake"  # the workflow runs with --directory REPO

# The workflow's own files: what Snakemake reads (Snakefile, rules), the Python it and its jobs
# run, the sources its rules build, the configs and schemas, gem5's script and the script that
# says where gem5 is built.
TREES = ("Snakefile", "rules", "analysis", "kernels", "armie_clients", "configs", "gem5_scripts", "setup/gem5.sh")
# What the workflow and Snakemake read from the environment: gem5 (GEM5), the cache where gem5
# and Open MPI 5 are built (HARNESS_CACHE, XDG_CACHE_HOME, HOME; HOME also for `~` in paths),
# where tools and modules are found (PATH, PYTHONPATH, PYTHONHOME), the tools' language (their
# version lines are stamps), and Snakemake's own settings (every SNAKEMAKE* variable).
ENV = ("GEM5", "HARNESS_CACHE", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME", "PATH", "PYTHONPATH", "PYTHONHOME",
       "LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES")
ENV_PREFIX = "SNAKEMAKE"
# Debian's record of every installed package: it changes with any apt install, upgrade or removal.
DPKG_STATUS = "/var/lib/dpkg/status"
PERF_PARANOID = "/proc/sys/kernel/perf_event_paranoid"
# The order the check compares them in: the cheap parts first.
PARTS = ("env", "host", "tools", "sources", "outputs")


@dataclass(frozen=True)
class Command:
    """What `./harness sweep` was asked, as far as Snakemake's answer depends on it."""
    config: str
    sets: tuple[str, ...]
    targets: tuple[str, ...]

    def overrides(self) -> dict[str, str] | None:
        """The --set overrides as config.parse_overrides reads them; None where it would refuse."""
        if any("=" not in kv or not kv.split("=", 1)[0] for kv in self.sets):
            return None
        return dict(kv.split("=", 1) for kv in self.sets)

    def covered(self) -> bool:
        """Runs the record describes: from the repository, as ./harness runs (Snakemake reads a
        relative sweep path from there, the command from its working directory), or with an
        absolute sweep path; targets only, no Snakemake option; no Snakemake profile."""
        here = os.path.isabs(self.config) or os.path.realpath(os.getcwd()) == str(REPO)
        return here and self.overrides() is not None and not profile_in_play() and \
            all(t and not t.startswith("-") for t in self.targets)

    def meaning(self) -> dict[str, Any]:
        overrides = self.overrides() or {}
        return {"config": self.config, "config_resolved": os.path.realpath(self.config), "cwd": os.getcwd(),
                "set": [[k, v] for k, v in overrides.items()], "targets": list(self.targets)}


def parse(argv: list[str]) -> Command | None:
    """`sweep` and the options of cli's sweep parser that can be read without it, in argparse's
    spellings (`--config F`, `--config=F`; a value never starts with `-`), then the targets
    (after `--`, or from the first plain word, as its REMAINDER takes them); None for anything
    else, which the normal path reads: --slurm, an abbreviation, a Snakemake option, and
    --verbose, which asks for Snakemake's own record of what it checked."""
    if not argv or argv[0] != "sweep":
        return None
    config, sets, i = DEFAULT_CONFIG, [], 1
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-"):
            targets = argv[i + 1:] if word == "--" else argv[i:]
            if any(not t or t.startswith("-") for t in targets):
                return None
            return Command(config, tuple(sets), tuple(targets))
        name, eq, value = word.partition("=")
        if name not in ("--config", "--cores", "--set"):
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            value = argv[i + 1]
            i += 1
        i += 1
        if not value or value.startswith("-"):
            return None
        if name == "--config":
            config = value
        elif name == "--set":
            sets.append(value)
        else:  # --cores: argparse's int, and cli refuses fewer than 1
            try:
                if int(value) < 1:
                    return None
            except ValueError:
                return None
    return Command(config, tuple(sets), ())


def profile_in_play() -> bool:
    """A Snakemake profile can set any option: SNAKEMAKE_PROFILE, or a workflow profile where
    Snakemake looks for one (`default` and `profiles/default` in the working directory, and
    `profiles/default` beside the Snakefile). Its content is not watched: no record then."""
    return bool(os.environ.get("SNAKEMAKE_PROFILE")) or \
        any(p.exists() for p in (Path("default"), Path("profiles") / "default", REPO / "profiles" / "default"))


# --- the check ------------------------------------------------------------------------------

def answer(argv: list[str]) -> bool:
    """True when this `./harness sweep` has nothing to do: its one line is printed. False: the
    normal path runs, exactly as without this check (whatever went wrong here, it reports)."""
    try:
        line = _check(argv)
    except Exception:  # a file it cannot read, a sweep file that no longer parses: the normal path says
        return False
    if line is None:
        return False
    print(line, flush=True)
    return True


def _check(argv: list[str]) -> str | None:
    command = parse(argv)
    if command is None or not command.covered():
        return None
    results_dir, build_dir = config.dirs(command.config, command.overrides())
    path = results_dir / NAME
    with open(path, "rb") as f:
        first = os.fstat(f.fileno())
        record = json.loads(f.read())
    if record.get("format") != FORMAT or record.get("command") != command.meaning() or \
            record.get("dirs") != [str(results_dir), str(build_dir)]:
        return None
    if snakemake_locked() or results_locked(results_dir) or not writable(results_dir) or not writable(build_dir):
        return None
    for name in PARTS:
        if part(name, record["watched"], results_dir, build_dir) != record["parts"][name]:
            return None
    # A command that took the results folder since the record was read deleted it first
    # (keep.take): the answer holds only if it is still the same file.
    now = os.stat(path)
    if (now.st_ino, now.st_mtime_ns, now.st_size) != (first.st_ino, first.st_mtime_ns, first.st_size):
        return None
    return (f"sweep {command.config}: up to date (nothing changed since the sweep of {record['made']}; "
            f"results in {results_dir})")


def snakemake_locked() -> bool:
    """A Snakemake lock in the tree: another Snakemake runs (it may be writing the shared build
    folder), or a killed one left it (the normal path takes it over, with a line)."""
    try:
        return any(os.scandir(SNAKEMAKE_DIR / "locks"))
    except FileNotFoundError:
        return False


def results_locked(results_dir: Path) -> bool:
    """Another command holds the results folder's lock (keep.ResultsLock): the normal path
    names it. Tested with a shared lock, given back at once; nothing is written."""
    try:
        fd = os.open(results_dir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and with it the shared lock
    return False


def writable(path: Path) -> bool:
    """config.check_writable's test: the folder, or the nearest one above it that exists."""
    existing = next(p for p in (path, *path.parents) if p.exists())
    return os.access(existing, os.W_OK | os.X_OK)


# --- the record -------------------------------------------------------------------------------

def invalidate(results_dir: Path) -> None:
    """Before a command writes the results folder (keep.take, under the folder's lock): until
    it finishes, nothing says the folder is up to date."""
    (results_dir / NAME).unlink(missing_ok=True)


def record(command: Command, sweep: config.Sweep) -> None:
    """After a local sweep that finished, as the last thing it writes: what the check compares.
    A record that cannot be written is left out (the next run takes the normal path)."""
    try:
        if not command.covered():
            return
        results_dir, build_dir = config.dirs(command.config, command.overrides())
        if (results_dir, build_dir) != (sweep.results_dir, sweep.build_dir):
            return  # not the folders this run wrote: nothing to vouch for
        # Through JSON and back: the check recomputes from what it reads.
        watched = json.loads(json.dumps(watch(command, sweep)))
        doc = {"format": FORMAT, "made": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command.meaning(),
               "dirs": [str(results_dir), str(build_dir)], "watched": watched,
               "parts": {name: part(name, watched, results_dir, build_dir) for name in PARTS}}
        files.write_text_atomic(results_dir / NAME, json.dumps(doc, indent=1) + "\n")
    except Exception as e:
        # Only a shortcut: the sweep finished and its results stand; without a record the next
        # run takes the normal path. Said, so that a re-run that is never answered has a reason.
        print(f"note: no up-to-date record written ({type(e).__name__}: {e}); the next run starts Snakemake",
              file=sys.stderr, flush=True)


def watch(command: Command, sweep: config.Sweep) -> dict[str, list[str]]:
    """What the check recomputes besides the fixed parts, from the loaded sweep, so the check
    needs neither the schema nor the kernel table: the files the sweep names outside TREES, the
    folders whose headers its sources may include, the tools to look up, the paths to stat."""
    # Paths as the sweep names them, links not followed: a link pointed elsewhere is a change
    # (identity and content follow it when the check runs).
    sweep_files = set(config.read_sweep(Path(command.config))[1])
    named = {os.path.abspath(p) for p in (*sweep_files, *sweep.table_paths, config.GEM5_SYSTEMS)}
    sources = {os.path.abspath(mpi.SESSION_SOURCE)}
    for row in sweep.table.rows:
        sources.update(os.path.abspath(p) for p in (row.source, *row.extra_sources))
    sources.update(os.path.abspath(f.driver) for f in sweep.table.families.values() if f.driver is not None)
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
    for name in ("debian", "ompi5"):
        lib = mpi.library(name)
        probes.update((str(lib.include / "mpi.h"), str(lib.lib / "libmpi.so")))
    if sweep.gem5 is not None:  # every place gem5 is looked for (analysis.backends.gem5.find_gem5)
        given = [os.environ.get("GEM5") or "", sweep.gem5.binary or ""]
        probes.update(str(Path(g).expanduser()) for g in given if g and g != gem5.OFF)
        probes.add(str(gem5.cached_gem5_place()))
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
    but the results folder's lock (rewritten by every command that takes it), this record and
    its temporary files."""
    folder = os.path.join(top, rel) if rel else str(top)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return
    for e in entries:
        if folder == results_dir and (e.name in (LOCK, NAME) or e.name.startswith(f".{NAME}.tmp")):
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
