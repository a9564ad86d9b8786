"""What a test needs, as pytest markers (registered by tests/conftest.py; pytest.ini makes an
unregistered one an error).

`slow`: the test builds kernels or plugins, runs QEMU, Snakemake or a sweep, or takes more
than about 2 s; `./harness test --fast` runs the rest (`pytest -m "not slow"`). A `needs_*`
test runs only where its part is installed: elsewhere it is skipped with one line saying what
is missing and the command that provides it (the probes below, asked once per session).

Markers must not drift from what a test does. The fixtures are the suite's expensive parts, so
every fixture defined under tests/ is listed in FIXTURE_MARKS with the markers a test using it
(directly or through another fixture) must carry; tests/test_markers.py checks every collected
test against the table, and the table against the fixtures the test files define.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import pytest

from analysis.backends import gem5, perf, perf_guest
from analysis.core import arm64_node, arm64_vm, config, mpi

TESTS = Path(__file__).resolve().parent
SLOW = "slow"
EXCLUSIVE = "exclusive"

# Marker -> the line `pytest --markers` prints for it.
MARKERS = {
    SLOW: "builds kernels or plugins, runs QEMU, Snakemake or a sweep, or takes more than about 2 s; "
          "./harness test --fast leaves it out",
    EXCLUSIVE: "runs alone when the suite runs on several cores (pytest-xdist): it reads or writes the "
               "repository's Snakemake state (its locks, the Snakemakes running in the tree) or times something",
    "needs_root": "needs root: it creates a throwaway user or changes the machine (run the suite as root)",
    "needs_clang": "needs clang-14 (./harness setup --with-clang; ./harness test installs it)",
    "needs_chromium": "needs Debian's chromium, run headless (./harness test installs it)",
    "needs_gem5": "needs a gem5 binary (./harness setup --with-gem5, or GEM5=/path/to/gem5.fast)",
    "needs_mpi": "needs Debian's arm64 Open MPI (./harness setup --with-mpi)",
    "needs_ompi5": "needs the Open MPI 5.0.9 build (./harness setup --with-ompi5)",
    "needs_ompi_src": "needs an Open MPI 5.0.9 source tree (OMPI_SRC, or the clone ./harness setup --with-ompi5 makes)",
    "needs_slurm": "needs slurm-wlm and munge (./harness setup --with-slurm), and root: the local Slurm's daemons run as root",
    "needs_perf": "needs a perf that can count on this host (linux-perf, perf_event_paranoid)",
    "needs_arm64_vm": "needs the emulated AArch64 guest with DynamoRIO (./harness setup --with-arm64-vm, which "
                      "builds DynamoRIO at its pinned commit; or DYNAMORIO_HOME=<AArch64 DynamoRIO>)",
    "needs_arm64_guest": "needs the emulated AArch64 guest, DynamoRIO or not (./harness setup --with-arm64-vm)",
    "needs_arm64_node": "needs the arm64 node, a Debian 12 arm64 disk image (./harness setup --with-arm64-node)",
    "needs_simeng": "needs SimEng built with the harness's patch (./harness setup --with-simeng)",
}


def _root() -> str | None:
    return None if os.geteuid() == 0 else "not root: the test creates a throwaway user or changes the machine"


def _clang() -> str | None:
    return None if shutil.which("clang-14") else "clang-14 not installed (./harness setup --with-clang)"


def _chromium() -> str | None:
    return None if shutil.which("chromium") else \
        "chromium not found: ./harness test installs it (setup/install.sh --with-chromium)"


def _gem5() -> str | None:
    found = gem5.find_gem5(config.load(config.REPO / "configs" / "default.yaml"))
    return None if found else f"gem5 not found: {gem5.ENABLE}, to run the cycle tests"


def _mpi() -> str | None:
    return None if mpi.installed() else "Debian's arm64 Open MPI is not installed (run ./harness setup --with-mpi)"


def _ompi5() -> str | None:
    """Both prefixes: one command builds them."""
    missing = [lib for lib in (mpi.library("ompi5"), mpi.library("ompi5-sve")) if not lib.installed()]
    return f"{missing[0].what} is not built (run {missing[0].fix})" if missing else None


def _ompi_src() -> str | None:
    return None if mpi.ompi5_source() else \
        f"no Open MPI {mpi.OMPI5_VERSION} source (set OMPI_SRC to a checkout, or run ./harness setup --with-ompi5)"


def _slurm() -> str | None:
    """Every Slurm test starts the local Slurm, whose daemons run as root (setup/slurm.sh)."""
    present = all(shutil.which(t) for t in ("slurmctld", "slurmd", "munged"))
    if not present:
        return "slurm-wlm is not installed (./harness setup --with-slurm)"
    return None if os.geteuid() == 0 else "not root: the local Slurm of setup/slurm.sh runs its daemons as root"


def _perf() -> str | None:
    status = perf.detect(config.load(TESTS / "configs" / "perf_host.yaml"))
    assert status is not None  # the sweep has a perf section
    return None if status.host else "; ".join(status.messages)


def _arm64_vm() -> str | None:
    return arm64_vm.missing()


def _arm64_guest() -> str | None:
    return perf_guest.missing()


def _arm64_node() -> str | None:
    return arm64_node.missing()


def _simeng() -> str | None:
    """setup/simeng.sh --path answers only for a SimEng built with the repository's patches."""
    path = subprocess.run([str(config.REPO / "setup" / "simeng.sh"), "--path"], capture_output=True, text=True,
                          timeout=60)
    return None if path.returncode == 0 else \
        "SimEng is not built with the harness's patch (./harness setup --with-simeng)"


# needs_* marker -> its probe: None when the part is here, else the line that says what is
# missing and how to get it (the skip's reason).
PROBES: dict[str, Callable[[], str | None]] = {
    "needs_root": _root, "needs_clang": _clang, "needs_chromium": _chromium, "needs_gem5": _gem5, "needs_mpi": _mpi,
    "needs_ompi5": _ompi5, "needs_ompi_src": _ompi_src, "needs_slurm": _slurm, "needs_perf": _perf,
    "needs_arm64_vm": _arm64_vm, "needs_arm64_guest": _arm64_guest, "needs_arm64_node": _arm64_node,
    "needs_simeng": _simeng,
}

# Every fixture defined under tests/ -> the markers of the tests that use it. A fixture that
# builds, sweeps or runs QEMU makes its tests slow; one that needs a part makes them need it.
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    # conftest.py
    "leaves_nothing_behind": (),
    "work": (),
    "all_sweep": (),  # the kernel table loaded, nothing built
    "binaries": (SLOW,),
    "plugin_dir": (SLOW,),
    "tiny_sweep": (SLOW,),
    # test_ab.py
    "ab_sweep": (),  # a sweep file written; `ab` builds when a test runs it
    # test_arm64_vm.py
    "cache_env": (),
    "dr_binaries": (SLOW,),
    "dr_measured": (SLOW, "needs_arm64_vm"),
    # test_arm64_node.py
    "node_cache": (),
    # test_armie_native.py
    "native_cache": (),  # an empty harness cache; nothing is built
    # test_bad_input.py
    "harness": (),
    "read_only_dir": (),
    "full_disk": (),
    # test_dynamorio_setup.py
    "dr_env": (),
    "other_commit": (),
    "mirror": (),
    # test_figures.py
    "drawn": (SLOW,),  # every figure of the default plan drawn: about 10 s
    # test_gem5_setup.py
    "env": (),
    # test_install.py
    "shims": (),
    # test_nonroot.py
    "ordinary_user": ("needs_root", "needs_clang", "needs_chromium"),
    # test_keep.py
    "good": (SLOW,),
    # test_kernels.py
    "checksums": (SLOW,),
    "family_objects": (SLOW,),
    # test_mpi.py
    "mpi_sweep": (),
    "mpi_bin": (SLOW, "needs_mpi"),
    # test_mpi5.py
    "sweep_path": (),
    "sweep": (),
    "rows": (),
    "mpi5_bin": (SLOW, "needs_ompi5"),
    "plugin_dir_mpi5": (SLOW, "needs_ompi5"),
    "records": (SLOW, "needs_ompi5"),
    "ddt_sweep": (),
    "ddt_bin": (SLOW, "needs_ompi5"),
    "ddt_records": (SLOW, "needs_ompi5"),
    # test_ompi5_sve_ddt.py
    "ddt_check": (SLOW, "needs_ompi_src"),
    "ddt_plugins": (SLOW,),
    "ddt_counts": (SLOW, "needs_ompi_src"),
    # test_own_kernel.py
    "swept": (SLOW,),
    "broken_build": (),  # an empty folder; the tests that use it build
    # test_perf.py
    "sve_native": (SLOW,),
    "host_run": (SLOW, "needs_perf"),
    # test_perf_guest.py
    "guest_measured": (SLOW, "needs_arm64_guest"),
    # test_perf_counted.py
    "host_without_sve": (),  # the SVE probes patched: nothing runs
    # test_plugins.py
    "plugin_build": (SLOW,),
    "prog": (SLOW,),
    # test_prep_cache.py
    "built": (SLOW,),
    # test_progress.py
    "on_terminal": (SLOW,),
    # test_regress.py
    "tree": (SLOW,),
    "golden_reg": (),
    # test_reliability.py
    "clone": (SLOW,),
    "reference": (SLOW,),
    "golden_copy": (),
    # test_report.py
    "reported": (SLOW,),
    # test_shared_locks.py
    "first": (SLOW, EXCLUSIVE),  # a tiny sweep stopped holding the repository's Snakemake lock
    # test_slurm.py
    "local_slurm": (SLOW, "needs_slurm"),
    "slurm_work": (),
    "local_counts": (SLOW,),
    "slurm_run": (SLOW, "needs_slurm"),
    # test_slurm_node.py
    "as_user": (),  # fake id, sudo and daemons: nothing real starts
    # test_uptodate.py
    "own": (SLOW,),
    # test_workflow.py
    "tiny": (SLOW,),
}


class Item(Protocol):
    """What the check reads of a collected test (pytest.Item has it)."""
    nodeid: str
    fixturenames: list[str]

    def iter_markers(self, name: str | None = None) -> Iterable[pytest.Mark]: ...


def unmet_need(item: Item, missing: Callable[[str], str | None]) -> str | None:
    """The line saying what is missing for the first needs_* marker of `item` whose part is not
    here (`missing`: a marker's probe, asked once per session), or None: the test can run."""
    for marker in PROBES:
        if next(iter(item.iter_markers(marker)), None) is not None and (why := missing(marker)) is not None:
            return why
    return None


def missing_markers(items: Iterable[Item], table: dict[str, tuple[str, ...]] = FIXTURE_MARKS) -> list[str]:
    """One line per test that lacks a marker one of its fixtures implies (empty: none)."""
    found = []
    for item in items:
        has = {m.name for m in item.iter_markers()}
        for fixture in item.fixturenames:  # every fixture the test uses, through others too
            lacking = [m for m in table.get(fixture, ()) if m not in has]
            if lacking:
                found.append(f"{item.nodeid}: uses {fixture}, so needs the marker(s) {', '.join(lacking)}")
    return found


def defined_fixtures(paths: Iterable[Path]) -> list[tuple[str, str]]:
    """(file name, fixture name) of every function decorated with pytest.fixture in `paths`."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if ast.unparse(target) == "pytest.fixture":
                        found.append((path.name, node.name))
    return found
