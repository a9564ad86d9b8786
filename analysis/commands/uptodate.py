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

The record holds the command (the sweep file as given and resolved, the working directory, the
--set overrides, the Snakemake targets; --cores and --verbose change nothing Snakemake decides)
and the digests of what the run depended on: analysis.commands.watched says what, and why.

Imported by analysis.commands.cli before its own imports (pandas among them): this module and
what it imports (analysis.core.config for the results folder, the backends' tool names) load
neither pandas, Snakemake nor jsonschema (tested).
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Light on purpose (PyYAML is the largest): neither pandas, Snakemake nor jsonschema (tested).
from analysis.commands.watched import LOCK, PARTS, RECORD, SNAKEMAKE_DIR, part, watch
from analysis.core import config, files

REPO = config.REPO
NAME = RECORD
FORMAT = 1
DEFAULT_CONFIG = "configs/default.yaml"  # cli's --config default (tested equal)


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
    if snakemake_locked(results_dir, build_dir) or results_locked(results_dir) or not writable(results_dir) or not writable(build_dir):
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


def snakemake_locked(results_dir: Path, build_dir: Path) -> bool:
    """A Snakemake lock in the tree that names a file of this sweep's folders: another Snakemake
    is writing or reading them (the shared build folder), or a killed one left it (the normal
    path takes it over, with a line). A lock of a sweep into other folders is none of its business:
    it made every up-to-date sweep in the clone go to Snakemake while another one ran."""
    ours = tuple(f"{os.path.join(REPO, d)}{os.sep}" for d in (results_dir, build_dir))
    try:
        locks = list(os.scandir(SNAKEMAKE_DIR / "locks"))
    except FileNotFoundError:
        return False
    for lock in locks:
        try:
            with open(lock.path) as f:  # one path per line, as Snakemake's rules name it (relative to the tree)
                if any(os.path.join(REPO, line.rstrip("\n")).startswith(ours) for line in f):
                    return True
        except FileNotFoundError:  # released while we looked
            continue
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
        watched = json.loads(json.dumps(watch(command.config, sweep)))
        doc = {"format": FORMAT, "made": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command.meaning(),
               "dirs": [str(results_dir), str(build_dir)], "watched": watched,
               "parts": {name: part(name, watched, results_dir, build_dir) for name in PARTS}}
        files.write_text_atomic(results_dir / NAME, json.dumps(doc, indent=1) + "\n")
    except Exception as e:
        # Only a shortcut: the sweep finished and its results stand; without a record the next
        # run takes the normal path. Said, so that a re-run that is never answered has a reason.
        print(f"note: no up-to-date record written ({type(e).__name__}: {e}); the next run starts Snakemake",
              file=sys.stderr, flush=True)


