"""Where the backends are: one answer for the registry, which imports them
(analysis.backends.registry), and for the sweep schema, which must not (analysis.core.schema
assembles the `backends` list and the backends' own sections from their schema files, and the
configuration loads without importing any backend).

The harness's own backends are listed in analysis/backends/registry.txt, in the order the
workflow asks them. A user's backends live in the folders named by the environment variable
HARNESS_BACKENDS_PATH (folders separated by os.pathsep, as in PATH): every <name>.py there is a
backend, after the harness's own, in name order. Beside each module, <name>.schema.yaml states
its part of the sweep file (docs/extending/backend.md); a module without one runs when the sweep
lists it in `backends` and has no section.

No yaml here: a count job imports this module (through the registry) and nothing heavier.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "backends"
BUILTIN_LIST = BUILTIN_DIR / "registry.txt"
PATH_ENV = "HARNESS_BACKENDS_PATH"
# A backend's name is a column value, a folder, a Snakemake wildcard value and part of a rule
# name (count_<name>): lower-case letters, digits and underscores.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")


class BackendPathError(Exception):
    """A backend folder or name the harness cannot use: one line naming the fix."""


@dataclass(frozen=True)
class Place:
    """Where one backend is: its module, and the harness's own or a user's."""
    name: str
    module: Path
    builtin: bool

    @property
    def schema(self) -> Path:
        """Its part of the sweep file (absent: listed in `backends`, no section)."""
        return self.module.with_name(f"{self.name}.schema.yaml")


def _listed(path: Path) -> list[str]:
    """registry.txt: one name a line; blank lines and `#` comments are skipped."""
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def folders() -> list[Path]:
    """The user's backend folders, from HARNESS_BACKENDS_PATH (empty parts skipped, as in PATH)."""
    return [Path(p).expanduser() for p in os.environ.get(PATH_ENV, "").split(os.pathsep) if p]


def places() -> dict[str, Place]:
    """Every backend, name -> place, in the order the workflow asks them."""
    out = {name: Place(name, BUILTIN_DIR / f"{name}.py", True) for name in _listed(BUILTIN_LIST)}
    for folder in folders():
        if not folder.is_dir():
            raise BackendPathError(f"{PATH_ENV} names {folder}, which is not a folder: give folders of backend "
                                   "modules (docs/extending/backend.md)")
        for module in sorted(folder.glob("*.py")):
            name = module.stem
            if name.startswith("_"):  # __init__.py, a helper the backend imports
                continue
            if not NAME_PATTERN.fullmatch(name):
                raise BackendPathError(f"{module}: a backend's name is lower-case letters, digits and underscores "
                                       "(it names a rule, a folder and a column value): rename the module")
            if name in out:
                raise BackendPathError(f"{module}: backend {name} exists already ({out[name].module}): rename the module")
            out[name] = Place(name, module, False)
    return out
