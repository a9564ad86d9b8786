"""Shared fixtures: one build tree for the whole session, built through the workflow itself."""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import random
import subprocess
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import hygiene  # noqa: E402
import markers  # noqa: E402
from analysis import backends  # noqa: E402
from analysis.backends import qemu  # noqa: E402
from analysis.core import config  # noqa: E402
from analysis.stages import build  # noqa: E402

PY = sys.executable
ALL = REPO / "tests" / "configs" / "all_kernels.yaml"
# As the harness starts it (analysis.commands.guard.SNAKEMAKE): never the console script, a
# /bin/sh script with the clone's path in it.
SNAKEMAKE = [PY, "-m", "snakemake"]
# The builds whose ArmIE and gem5 binaries the tests read (test_kernels compares the three).
OTHER_MARKER_BUILDS = ("vla", "vls512")


# Every test this session collected, before -m and -k deselect any: tests/test_markers.py checks
# the markers of all of them, whichever ran.
COLLECTED = pytest.StashKey[list[pytest.Item]]()


# Under pytest-xdist (./harness test runs a worker per core) the workers share the repository's
# Snakemake state: its locks in .snakemake/locks, and the Snakemakes running in the tree, which a
# command looks for before it takes over a lock. A test marked `exclusive` reads or writes that
# state (or times something) and runs alone: it holds the file named here exclusively, every other
# test holds it shared, from the setup of its fixtures to their teardown.
STATE_LOCK_ENV = "HARNESS_TEST_STATE_LOCK"
# The folder of that file, made by this process (the controller) and removed by it alone: a test
# that runs pytest inherits the variable, and its own session must not remove the file.
STATE_DIR = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The markers of tests/markers.py (pytest.ini makes any other one an error); on xdist's
    controller, the workers' shared lock file (inherited by the workers it starts)."""
    for name, text in markers.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses"):
        config.stash[STATE_DIR] = Path(tempfile.mkdtemp(prefix="sve-harness-tests-"))
        os.environ[STATE_LOCK_ENV] = str(config.stash[STATE_DIR] / "state.lock")


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE_DIR in config.stash:
        shutil.rmtree(config.stash[STATE_DIR], ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    path = os.environ.get(STATE_LOCK_ENV) if hasattr(item.config, "workerinput") else None
    if path is None:
        return (yield)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if item.get_closest_marker(markers.EXCLUSIVE) else fcntl.LOCK_SH)
        return (yield)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shuffle", type=int, metavar="SEED",
                     help="run the test files in a random order and each file's tests in a random order "
                          "(no test may rely on another's leftovers); the same SEED repeats the order")


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return None if seed is None else f"shuffled with --shuffle {seed}"


@functools.cache
def missing_part(marker: str) -> str | None:
    """Asked once per session: None when a needs_* marker's part is here, else the skip's line."""
    return markers.PROBES[marker]()


# The files that take the most CPU, the heaviest first (as measured: docs/guide/tests.md, "Time").
# ./harness test hands each worker a file at a time in collection order (--dist loadfile
# --no-loadscope-reorder; xdist's own order is by number of tests): the heavy files start
# first, so that the run ends on short files with both workers busy, not on one long file with
# the other worker idle. test_kernels builds every kernel, which the next ones wait for.
HEAVY_FIRST = ("test_kernels.py", "test_uptodate.py", "test_keep.py", "test_mpi.py", "test_reliability.py",
               "test_bench.py", "test_own_kernel.py", "test_build.py", "test_mpi5.py", "test_counts.py")


def heavy_rank(name: str) -> int:
    """A test file's place in HEAVY_FIRST; every other file after them, in collection order."""
    return HEAVY_FIRST.index(name) if name in HEAVY_FIRST else len(HEAVY_FIRST)


# First among the hooks, so that it sees every collected test (the -m and -k deselection is a
# hook of its own that runs after it).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A needs_* test without its part is skipped in one line naming what is missing.
    --shuffle: files in a random order, each file's tests in a random order. A file's tests
    stay together, so that its module-scoped fixtures (a build, a local Slurm) are made once."""
    config.stash[COLLECTED] = list(items)
    for item in items:
        if (why := markers.unmet_need(item, missing_part)) is not None:
            item.add_marker(pytest.mark.skip(reason=why))
    seed = config.getoption("--shuffle")
    if seed is None:
        items.sort(key=lambda item: heavy_rank(item.path.name))  # stable: each file's order kept
        return
    rng = random.Random(seed)
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(str(item.path), []).append(item)
    files = list(by_file)
    rng.shuffle(files)
    items[:] = []
    for f in files:
        rng.shuffle(by_file[f])
        items.extend(by_file[f])


def snakemake(sweep: Path, build_dir: Path, results_dir: Path, targets: list[str] | None = None,
              extra: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, *(targets or []), *(extra or []), "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(REPO), "--cores", "2",
           "--config", f"sweep={sweep}", f"build_dir={build_dir}", f"results_dir={results_dir}"]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="session", autouse=True)
def leaves_nothing_behind() -> Iterator[None]:
    """The session leaves no staging directory of its own in /tmp, nothing in the repository's
    results/ and build/, no new file in the tree (tests/hygiene.py says what is checked and
    what is allowed). Checked whatever tests ran, in whatever order: a failure here is an
    error at the teardown of the session's last test, listing what was left."""
    tag = f"pytest-{os.getpid()}-{time.time_ns()}"
    # Inherited by every process the session starts (sweeps, Snakemake jobs): their staging
    # directories carry the tag, so other sessions' ones in the shared /tmp are not counted.
    os.environ[backends.STAGE_TAG_ENV] = tag
    # Bytecode beside the sources is checked only when this session keeps it elsewhere, as
    # ./harness does (PYTHONPYCACHEPREFIX); a bare `python -m pytest` writes it like any Python.
    before = hygiene.snapshot(REPO, pycache_checked=bool(sys.pycache_prefix) or sys.dont_write_bytecode)
    yield
    left = hygiene.leftovers(REPO, before, tag)
    assert not left, "the test session left behind:\n  " + "\n  ".join(left)


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


def run_root(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of the whole run: under pytest-xdist each worker is a session of its
    own with a folder of its own (popen-gwN) inside it, which every worker sees."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def kernels_tree_lock(build_dir: Path) -> Iterator[None]:
    """Held around every Snakemake (and ./harness command) that may write the kernels' build tree
    all workers share (`all_sweep`'s build_dir): two Snakemakes writing the same files refuse each
    other, and a worker must not read a binary another one is still linking."""
    with open(build_dir.parent / "build.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def all_sweep(tmp_path_factory: pytest.TempPathFactory, work: Path) -> config.Sweep:
    """Every static kernel of the table, built (by `binaries`) into one tree for the whole run:
    each xdist worker building it again was a minute of CPU. The MPI rows need the arm64 Open MPI
    (./harness setup --with-mpi), which the default suite must not require: tests/test_mpi.py
    covers them. Host-only rows (host_isa: x86-64 intrinsics) are never cross-built:
    tests/test_beyond.py builds them."""
    shared = run_root(tmp_path_factory) / "kernels"
    shared.mkdir(exist_ok=True)
    sweep = config.load(ALL, {"build_dir": str(shared / "build"), "results_dir": str(work / "results")})
    fams = sweep.table.families
    sweep.table = dataclasses.replace(sweep.table, rows=tuple(r for r in sweep.table.rows
                                                              if not fams[r.family].mpi and not r.host_isa))
    return sweep


@pytest.fixture(scope="session")
def binaries(all_sweep: config.Sweep) -> Callable[..., Path]:
    """Build every kernel (VLA and each VLS build) and the plugins, once per run (the other
    workers find it built); the ArmIE and gem5 marker objects are linked for the VLA and VLS-512
    builds only, the ones the tests read."""
    bd = all_sweep.build_dir
    targets = [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    for row in all_sweep.table.rows:
        for b in all_sweep.builds():
            for backend in ("qemu", "armie", "gem5") if b in OTHER_MARKER_BUILDS else ("qemu",):
                targets.append(str(build.binary_path(bd, "gcc", b, backend, row.name)))
    built = bd.parent / "binaries.built"  # written after the build succeeded, in this run's folder
    with kernels_tree_lock(bd):
        if not built.exists():
            proc = snakemake(ALL, bd, all_sweep.results_dir, targets)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            built.write_text("")

    def get(kernel: str, variant: str, build_name: str = "vla", backend: str = "qemu") -> Path:
        return build.binary_path(bd, "gcc", build_name, backend, f"{kernel}-{variant}")

    return get


def tree_digest(root: Path) -> dict[str, str]:
    """Each file under `root` by its path relative to it: its SHA-256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def tiny_sweep(all_sweep: config.Sweep) -> Iterator[tuple[Path, subprocess.CompletedProcess]]:
    """The tiny sweep (configs/tiny.yaml) through the command line, once per run (the first
    worker that needs it runs it, the others read what it printed), into a results directory of
    its own on the kernels' shared build tree: (results directory, the sweep's process).
    test_workflow checks the run, test_reliability and test_report read what it wrote (and copy
    what they break). No test may change its folder: checked when each worker ends."""
    bd = all_sweep.build_dir
    results, printed = bd.parent / "tiny-results", bd.parent / "tiny-sweep.json"
    with kernels_tree_lock(bd):
        if not printed.exists():
            args = [PY, "-m", "analysis.commands.cli", "sweep", "--config", str(REPO / "configs" / "tiny.yaml"),
                    "--cores", "2", "--set", f"results_dir={results}", "--set", f"build_dir={bd}"]
            done = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            printed.write_text(json.dumps({"args": args, "stdout": done.stdout, "stderr": done.stderr,
                                           "files": tree_digest(results)}))
    record = json.loads(printed.read_text())
    yield results, subprocess.CompletedProcess(record["args"], 0, record["stdout"], record["stderr"])
    now = tree_digest(results)
    changed = sorted(k for k in record["files"].keys() | now.keys() if record["files"].get(k) != now.get(k))
    assert not changed, (f"a test changed the tiny sweep's results in {results} (copy them to change them): "
                         + ", ".join(changed[:10]))


@pytest.fixture(scope="session")
def plugin_dir(binaries: Callable[..., Path], all_sweep: config.Sweep) -> Path:
    return build.plugin_path(all_sweep.build_dir, "inscount").parent


# What a process started with an environment of its own still gets from the session: where
# bytecode goes (./harness's PYTHONPYCACHEPREFIX, else none) and the session's staging tag.
# Without them a Python started from `env={...}` wrote __pycache__ beside the sources and its
# staging directories escaped the session's leftover check.
SESSION_ENV = ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", backends.STAGE_TAG_ENV)


def own_env(**env: str) -> dict[str, str]:
    """`env` plus what SESSION_ENV names from this session's environment."""
    return {**{k: os.environ[k] for k in SESSION_ENV if k in os.environ}, **env}


def path_without(where: Path, *tools: str) -> str:
    """A PATH that finds every command of this one except `tools`: a directory of links to the
    first of each name on PATH. A refusal that must come before a tool check is tested with the
    tool absent, whether or not this machine has it (a fresh one has no autoconf; this one may)."""
    where.mkdir(parents=True, exist_ok=True)
    for d in os.environ["PATH"].split(os.pathsep):
        if not Path(d).is_dir():
            continue
        for exe in Path(d).iterdir():
            link = where / exe.name
            if exe.name not in tools and not link.is_symlink() and os.access(exe, os.X_OK) and not exe.is_dir():
                link.symlink_to(exe)
    return str(where)


# What setup/dynamorio.sh checks for before it builds (its tool loop, in that order).
DYNAMORIO_BUILD_TOOLS = ("cmake", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "make", "perl", "patch", "bzip2",
                         "dpkg-deb", "git", "python3")


def stand_ins(where: Path, tools: tuple[str, ...]) -> None:
    """An `exit 0` script in `where` for each of `tools` this machine lacks: a test of a step after
    the tool check runs whatever is installed (a fresh Debian has no cmake: ./harness test does
    not install it, ./harness setup --with-arm64-vm does)."""
    where.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        if shutil.which(tool) is None and not (where / tool).exists():
            (where / tool).write_text("#!/bin/sh\nexit 0\n")
            (where / tool).chmod(0o755)


def decode_driver_cmd(out: Path) -> list[str]:
    """tests/decode_driver.c linked with the clients' decoder, compiled in the plugins' own C
    dialect, optimization and warnings (build.PLUGIN_FLAGS), not flags of the tests' own."""
    src = REPO / "armie_clients"
    flags = [f for f in build.PLUGIN_FLAGS if f.startswith(("-std=", "-O", "-W"))]
    return ["gcc", *flags, f"-I{src}", "-o", str(out), str(REPO / "tests" / "decode_driver.c"), str(src / "decode.c")]


def tbstats_driver_cmd(out: Path, plugin_dir: Path) -> list[str]:
    """tests/tbstats_driver.c, a stand-in for QEMU and a client, linked with the counting core
    lib<PLUGIN_CORE>.so of `plugin_dir` (built there by build.plugin_cmd); -rdynamic: the core
    finds the plugin API's functions in the driver, as it finds them in qemu-aarch64."""
    flags = [f for f in build.PLUGIN_FLAGS if f.startswith(("-std=", "-O", "-W"))]
    return ["gcc", *flags, f"-I{REPO / 'armie_clients'}", "-rdynamic", "-o", str(out),
            str(REPO / "tests" / "tbstats_driver.c"), f"-L{plugin_dir}", f"-l{build.PLUGIN_CORE}",
            f"-Wl,-rpath,{plugin_dir}"]


def run_cell(binary: Path, plugin_dir: Path, vl: int, size: int, params: tuple = (), cpu: str = "max",
             op: str = "-", dtype: str = "uint8") -> dict:
    return qemu.run_once(binary, cpu, config.Run(vl, size, op, dtype, params), plugin_dir)


@functools.lru_cache(maxsize=None)
def run_cell_once(binary: Path, plugin_dir: Path, vl: int, size: int, params: tuple = ()) -> dict:
    """run_cell under -cpu max, run once per session (counts are deterministic, tested by
    test_same_cell_twice_and_in_another_environment): tests that read the same cells share them.
    The record is shared: read it, never change it."""
    return run_cell(binary, plugin_dir, vl, size, params)


def run_plain(binary: Path, vl: int, size: int, params: tuple = (), cpu: str = "max") -> subprocess.CompletedProcess:
    """Run a kernel binary under QEMU without plugins (self-check and exit-code tests)."""
    run = config.Run(vl, size, "-", "-", params)
    cmd = ["env", "-i", "qemu-aarch64", "-cpu", f"{cpu},sve-default-vector-length={vl // 8}",
           f"./{binary.name}", *run.argv()]
    return subprocess.run(cmd, cwd=binary.parent, capture_output=True, text=True)


# A cell to run: (VL, size in bytes, the binary's parameters).
Cell = tuple[int, int, tuple]


@dataclasses.dataclass(frozen=True)
class PlainRun:
    """One run of run_plain_batch: its `ok` line ("" when it printed none) and, for a run that
    stopped its process, the process's exit status and stderr."""
    ok: str
    returncode: int = 0
    stderr: str = ""

    def passed(self, vl: int) -> bool:
        return self.returncode == 0 and self.ok.startswith(f"ok vl={vl} ")

    def fields(self) -> dict[str, str]:
        """The ok line's key=value fields (vl, size, checksum, ...)."""
        return dict(kv.split("=", 1) for kv in self.ok.split()[1:])


def run_plain_batch(binary: Path, cells: list[Cell], cpu: str = "max") -> list[PlainRun]:
    """run_plain for many cells of one binary, in as few QEMU processes as a count job uses: the
    binary's --batch mode, in which each run sets its own VL and checks its own output (the
    self-check tests run every cell of every kernel at several VLs; one process each was most of
    their time). A run that fails ends its process, and the runs after it go on in the next one,
    so every cell has its result, in the order given."""
    results: list[PlainRun] = []
    rest = [config.Run(vl, size, "-", "-", params) for vl, size, params in cells]
    while rest:
        cmd = ["env", "-i", "qemu-aarch64", "-cpu", f"{cpu},sve-default-vector-length={rest[0].vl // 8}",
               f"./{binary.name}", *qemu.batch_argv(rest)]
        proc = subprocess.run(cmd, cwd=binary.parent, capture_output=True, text=True)
        oks = [ln for ln in proc.stdout.splitlines() if ln.startswith("ok ")]
        results += [PlainRun(ln) for ln in oks]
        if len(oks) >= len(rest):  # every run printed its ok line: a failing exit is the last run's
            if proc.returncode != 0:
                results[-1] = PlainRun(results[-1].ok, proc.returncode, proc.stderr)
            break
        results.append(PlainRun("", proc.returncode, proc.stderr))  # the run after the last ok line
        rest = rest[len(oks) + 1:]
    return results


# Cells counted by count_cells, by (binary, plugin directory, cell).
_COUNTED: dict[tuple[Path, Path, Cell], dict] = {}


def count_cells(binary: Path, plugin_dir: Path, cells: list[Cell]) -> list[dict]:
    """The records of `cells` under -cpu max, counted as a count job counts them (one QEMU process
    for the binary's cells, qemu.run_batch; test_a_cell_counts_the_same_alone_and_in_a_batch
    checks that each cell counts there as it counts alone), each cell once per session: the
    closed-form tests read hundreds of cells, and several read the same. The records are shared:
    read them, never change them."""
    todo = [c for c in dict.fromkeys(cells) if (binary, plugin_dir, c) not in _COUNTED]
    # In the order a count job runs them: the runs of one size and parameter set next to each
    # other, so that the harness computes each preparation once (qemu.batches).
    runs = sorted((config.Run(vl, size, "-", "-", params) for vl, size, params in todo), key=lambda r: (r.argv()[1:], r.vl))
    if runs:
        for run, rec in zip(runs, qemu.run_batch(binary, "max", runs, plugin_dir), strict=True):
            assert (rec["vl"], rec["size"], rec["vl_seen"]) == (run.vl, run.size, run.vl), rec["argv"]
            _COUNTED[(binary, plugin_dir, (run.vl, run.size, run.params))] = rec
    return [_COUNTED[(binary, plugin_dir, c)] for c in cells]


def tiny_with_armie(tmp_path: Path, section: str, vls: str = "[128, 384, 512]") -> Path:
    """The tiny sweep with armie beside qemu (its section: where the counts come from), at VLs
    that may include one DynamoRIO does not run."""
    text = (REPO / "configs" / "tiny.yaml").read_text()
    cfg = tmp_path / "tiny-armie.yaml"
    cfg.write_text(text.replace("backends: [qemu]", f"backends: [qemu, armie]\n{section}")
                   .replace("vector_lengths: [128, 512]", f"vector_lengths: {vls}"))
    return cfg



def armie_refuses_a_sweep_of_no_dynamorio_vl(tmp_path: Path, via: str) -> None:
    """A sweep of which DynamoRIO runs no cell would give no armie row for its checks to read:
    its preflight is one line naming the fix."""
    from analysis.backends import armie
    from analysis.core.toolchain import ToolchainError
    cfg = tiny_with_armie(tmp_path, f"armie: {{via: {via}}}", "[384]")
    cfg.write_text(cfg.read_text().replace("vls_vector_lengths: [512]", "vls_vector_lengths: []"))
    with pytest.raises(ToolchainError) as e:
        armie.preflight(config.load(cfg))
    assert str(e.value) == (f"backend armie with via: {via}: DynamoRIO supports VL 128/256/512 only, and the sweep "
                            "runs none of them (vector_lengths: [384]): add one, or remove armie from backends")

def armie_plan(runs: list, binary: Path, via: str, cpu_model: str) -> backends.Plan:
    """An armie job's plan of copy acle_4v (gcc, VLA) with `runs`, counted `via` the guest or natively."""
    meta = {"kernel": "copy", "variant": "acle_4v", "layout": "contiguous", "build": "vla", "cpu_model": cpu_model,
            "backend": "armie", "compiler": "gcc", "binary": str(binary), "binary_sha256": "0" * 64,
            "build_commands": ["gcc ..."], "versions": {"armie": f"DynamoRIO 11.91.0 ({via})"}}
    return backends.Plan("armie", str(binary), cpu_model, tuple(runs), tuple(10.0 for _ in runs), {}, meta,
                         {"via": via})
