"""Every backend the harness knows, in one table. Adding one is a module implementing
`analysis.backends.Backend`, its part of the sweep file beside it (<name>.schema.yaml) and its
name in analysis/backends/registry.txt; or, for a user's backend kept outside the repository,
the module in a folder named by HARNESS_BACKENDS_PATH (analysis.core.backend_path;
docs/extending/backend.md).

The table names the modules and imports each where it is first looked up: a count job asks for
the one backend its plan names and imports no other, nor what the others import (the sweep's
configuration and yaml, statistics, ...); each of a sweep's ~200 jobs paid for them at start.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from analysis.backends import Backend, Ready
from analysis.core import backend_path, toolchain

if TYPE_CHECKING:  # annotations only (a count job imports this module)
    from analysis.core.config import Job, Sweep

# The backends, in the order the workflow asks them: the harness's own (registry.txt), then the
# user's (HARNESS_BACKENDS_PATH).
PLACES = backend_path.places()
NAMES = tuple(PLACES)
# A user's backend module is imported under this prefix: its file name alone could shadow a
# module of the standard library or of the harness.
USER_PREFIX = "harness_user_backends."


def _load(place: backend_path.Place) -> Backend:
    if place.builtin:
        return importlib.import_module(f"{__package__}.{place.name}")  # type: ignore[return-value]
    name = USER_PREFIX + place.name
    if name not in sys.modules:  # the import system's recipe for a module given by its file
        spec = importlib.util.spec_from_file_location(name, place.module)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]  # type: ignore[return-value]


class Registry(Mapping[str, Backend]):
    """NAMES as a mapping name -> backend module, a module imported when it is first looked
    up (iterating `values()` or `items()` imports them all)."""

    def __getitem__(self, name: str) -> Backend:
        if name not in NAMES:
            raise KeyError(name)
        return _load(PLACES[name])

    def __contains__(self, name: object) -> bool:  # without importing it
        return name in NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


REGISTRY: Mapping[str, Backend] = Registry()


def first_counting(sweep: Sweep, but: str | None = None) -> str | None:
    """The sweep's first counting backend (stage count) other than `but`: the one whose counts a
    guest's are compared with (armie_guest, perf_guest_check); None when it lists none."""
    return next((b for b in sweep.backends if b != but and REGISTRY[b].STAGE == "count"), None)


def readiness(sweep: Sweep) -> dict[str, Ready]:
    """Each backend the sweep uses, checked on this machine (its tools and their versions);
    raises ToolchainError naming the fix when a tool it needs is missing."""
    out = {}
    for name, backend in REGISTRY.items():
        ready = backend.preflight(sweep)
        if ready is not None:
            out[name] = ready
    return out


def jobs(sweep: Sweep, ready: dict[str, Ready]) -> list[Job]:
    """Every job of the sweep this machine runs, backend by backend."""
    return [j for name, r in ready.items() for j in REGISTRY[name].jobs(sweep, r)]


def all_jobs(sweep: Sweep) -> list[Job]:
    """Every job the sweep declares, whatever this machine has (to check raw files against
    their jobs, where no tool runs)."""
    return [j for b in REGISTRY.values() for j in b.jobs(sweep, None)]


def preflight(sweep: Sweep) -> tuple[dict[str, Ready], list[Job], dict[str, str]]:
    """Everything checked before any job runs: each backend's tools, then the compilers its
    jobs are built with. Returns the backends ready here, their jobs, and every version line
    (tool -> line: stamps and provenance)."""
    ready = readiness(sweep)
    planned = jobs(sweep, ready)
    versions = toolchain.preflight(list(dict.fromkeys(j.binary.compiler for j in planned)))
    for r in ready.values():
        versions.update(r.versions)
    return ready, planned, versions
