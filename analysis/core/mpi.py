"""The arm64 Open MPI libraries of the rows of families declared `mpi: true` (paper Fig. 9, 10).

Three libraries, chosen per family (`mpi_library`):
- debian: Debian 12's arm64 Open MPI 4.1 (multiarch), installed only on request
  (`./harness setup --with-mpi`, or by `./harness sweep` when the sweep selects its rows),
  because the arm64 packages are large and an unguarded install once removed the host
  compilers (setup/install.sh explains the guard). A sweep that needs it and lacks it stops.
- ompi5: the pinned Open MPI 5.0.9, cross-built with its NEON/SVE op component into the
  harness cache by `./harness setup --with-ompi5` (setup/ompi5.sh; long). A sweep
  whose rows need it and lacks it skips those rows, checks and figures in one line.
- ompi5-sve: the same release with our SVE datatype engine (paper Fig. 9), built by the same
  command beside it (prefix install-sve). Its libraries name the stock prefix in their RUNPATH
  (setup/ompi5.sh, build_sve): its rows link libopen-pal themselves, so the loader takes the
  patched one first.
Everything else about these rows is as for the static kernels: same compile flags, same
drivers, same staged runs; they link -lmpi dynamically and run as singletons.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from analysis.core.config import REPO, KernelTable, Selector, Sweep, read_yaml
from analysis.core.toolchain import ToolchainError

SESSION_SOURCE = REPO / "kernels" / "mpi" / "session.c"
# A 4.1 singleton without this tries to start an orted daemon (an arm64 executable the host
# cannot exec directly) and MPI_Init fails.
RUN_ENV = {"OMPI_MCA_ess_singleton_isolated": "1"}
# 5.0's singleton starts no daemon, but its MCA variable system fails in MPI_Init without HOME
# (mca_base_var_init: it reads $HOME/.openmpi/mca-params.conf); a fixed home that does not
# exist keeps the run independent of the caller.
RUN_ENV_OMPI5 = {"HOME": "/nonexistent"}
OMPI5_VERSION = "v5.0.9"  # as setup/ompi5.sh pins it
# Our SVE datatype engine (paper Fig. 9, issue 33), applied by setup/ompi5.sh for install-sve.
OMPI5_SVE_PATCH = REPO / "setup" / "patches" / f"ompi-{OMPI5_VERSION}-sve-datatype.patch"


def ompi5_prefix() -> Path:
    """Where setup/ompi5.sh installs Open MPI 5 (its --path, computed the same way)."""
    cache = os.environ.get("HARNESS_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sve-harness")
    return Path(cache) / f"ompi-{OMPI5_VERSION}" / "install"


def ompi5_source() -> Path | None:
    """An Open MPI 5 source tree whose opal/datatype the SVE patch can be checked against
    without building Open MPI (tests): OMPI_SRC, else the clone setup/ompi5.sh made; None
    without either."""
    found = [Path(os.environ["OMPI_SRC"])] if os.environ.get("OMPI_SRC") else []
    found.append(ompi5_prefix().parent / "clone")
    return next((d for d in found if (d / "opal" / "datatype" / "opal_datatype_pack.h").is_file()), None)


@dataclass(frozen=True)
class Library:
    name: str
    prefix: Path
    what: str  # for messages
    fix: str  # the command that provides it
    # The file its build writes last, after checking the library (setup/ompi5.sh: `installed`);
    # None for a distribution package. Headers and libmpi.so exist long before a build ends, and
    # stay after one that failed its last check.
    stamp: Path | None = None

    @property
    def include(self) -> Path:
        return self.prefix / "include"

    @property
    def lib(self) -> Path:
        return self.prefix / "lib"

    def installed(self) -> bool:
        return (self.include / "mpi.h").exists() and (self.lib / "libmpi.so").exists() \
            and (self.stamp is None or self.stamp.is_file())


DEBIAN = Library("debian", Path("/usr/lib/aarch64-linux-gnu/openmpi"), "Debian's arm64 Open MPI 4.1",
                 "./harness setup --with-mpi")
PACKAGE = "libopenmpi-dev:arm64"
NAMES = ("debian", "ompi5", "ompi5-sve")  # every library() knows


def library(name: str) -> Library:
    if name == "ompi5":
        prefix = ompi5_prefix()
        return Library("ompi5", prefix, f"Open MPI {OMPI5_VERSION} (NEON/SVE op component)",
                       "./harness setup --with-ompi5", prefix.parent / "installed")
    if name == "ompi5-sve":
        prefix = ompi5_prefix().parent / "install-sve"
        return Library("ompi5-sve", prefix, f"Open MPI {OMPI5_VERSION} with our SVE datatype engine",
                       "./harness setup --with-ompi5", prefix.parent / "installed-sve")
    return DEBIAN


def family_library(table: KernelTable, family: str) -> Library | None:
    fam = table.families[family]
    return library(fam.mpi_library) if fam.mpi else None


def row_library(table: KernelTable, kernel: str, variant: str) -> Library | None:
    return family_library(table, table.row(kernel, variant).family)


def libraries(sweep: Sweep) -> dict[str, Library]:
    """The libraries the sweep's rows link, by name."""
    libs = (family_library(sweep.table, sel.family) for sel in sweep.selections)
    return {lib.name: lib for lib in libs if lib}


def needs_mpi(sweep: Sweep) -> bool:
    """The sweep needs Debian's Open MPI (the one the sweep installs on first use)."""
    return "debian" in libraries(sweep)


def installed() -> bool:
    return DEBIAN.installed()


def check(sweep: Sweep) -> None:
    """Fail before any job runs when the sweep selects Debian MPI rows and the stack is absent
    (rows of an unbuilt Open MPI 5 are dropped before this: without_unbuilt)."""
    for lib in libraries(sweep).values():
        if not lib.installed():
            raise ToolchainError(
                f"this sweep has MPI rows (paper Fig. 9, 10) but {lib.what} is not installed "
                f"({lib.include / 'mpi.h'} missing): run {lib.fix}"
            )


def check_row(table: KernelTable, kernel: str, variant: str) -> None:
    """One cell (count, explain): its library must be there."""
    lib = row_library(table, kernel, variant)
    if lib and not lib.installed():
        raise ToolchainError(f"{kernel} {variant} links {lib.what}, which is not installed ({lib.include / 'mpi.h'} missing): run {lib.fix}")


def unbuilt(sweep: Sweep) -> list[Library]:
    """Libraries the sweep's rows need that are built on request only and are absent."""
    return [lib for lib in libraries(sweep).values() if lib.name != "debian" and not lib.installed()]


def skip_message(libs: list[Library]) -> str:
    return "; ".join(f"skipping the rows, checks and figures on {lib.what}: not built at {lib.prefix} "
                     f"(run {lib.fix})" for lib in libs)


def unbuilt_families(sweep: Sweep) -> set[str]:
    names = {lib.name for lib in unbuilt(sweep)}
    return {f for f, fam in sweep.table.families.items() if fam.mpi and fam.mpi_library in names}


def without_unbuilt(sweep: Sweep) -> Sweep:
    """The sweep without the selections, figures and checks of an unbuilt library's rows."""
    drop = unbuilt_families(sweep)
    if not drop:
        return sweep

    def keeps(selectors: Iterable[Selector]) -> bool:
        return all(sweep.table.selector_family(s).name not in drop for s in selectors)

    return replace(
        sweep,
        selections=[s for s in sweep.selections if s.family not in drop],
        figures=[f for f in sweep.figures if keeps(f.selectors())],
        checks=[c for c in sweep.checks if keeps(c.selectors().values())],
    )


def sweep_doc_without(src: Path, sweep: Sweep, drop: set[str]) -> dict[str, Any]:
    """The sweep file `src` (loaded as `sweep`) as a document without the kernels, figures and
    checks on the families `drop`, its kernel table named by an absolute path: a sweep file that
    can be written anywhere (bench times the MPI sweep on the libraries that are here)."""
    raw = read_yaml(src)
    raw["kernel_table"] = str(REPO / raw["kernel_table"])

    def keeps(spec: dict[str, Any]) -> bool:
        sels = [spec.get(k) for k in ("series", "numerator", "denominator", "baseline")]
        return all(sweep.table.selector_family(Selector.of(s)).name not in drop
                   for x in sels if x for s in (x if isinstance(x, list) else [x]))

    raw["kernels"] = [k for k in raw["kernels"]
                      if sweep.table.row(k["kernel"], sweep.table.variants(k["kernel"])[0]).family not in drop]
    raw["figures"] = [f for f in raw.get("figures", []) if keeps(f)]
    raw["checks"] = [c for c in raw.get("checks", []) if keeps(c)]
    return raw


def version(table: KernelTable | None = None, kernel: str = "", variant: str = "") -> str:
    """The library's version, for provenance."""
    lib = row_library(table, kernel, variant) if table else DEBIAN
    if lib and lib.name != "debian":
        stamp = lib.stamp
        return f"Open MPI {OMPI5_VERSION} ({lib.prefix}; {stamp.read_text().split()[1] if stamp and stamp.exists() else '?'})"
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True, text=True)
    return f"Open MPI {PACKAGE} {out.stdout.strip() or '?'}"


def compile_flags(lib: Library | None = None) -> tuple[str, ...]:
    """The include path. Without a library: any installed one (the MPI session object, shared by
    the families of both libraries: it calls MPI_Init/MPI_Finalize only, the same ABI in 4.1 and
    5.0, whose libmpi are both libmpi.so.40)."""
    if lib is None:
        lib = next((x for x in (DEBIAN, library("ompi5")) if x.installed()), DEBIAN)
    return (f"-I{lib.include}",)


def link_flags(lib: Library | None = None) -> tuple[str, ...]:
    """Dynamic link (the static kernels link -static): neither library ships a static libmpi.
    Open MPI 5 lives outside the loader's paths: its lib directory goes into the binary's
    RUNPATH (both libraries are libmpi.so.40, so the path decides which one runs). The SVE
    datatype engine's libopen-pal is a direct dependency of the binary: libmpi's own RUNPATH
    names the stock prefix, and the loader takes a library already loaded by its soname."""
    lib = lib or DEBIAN
    if lib.name == "debian":
        return (f"-L{lib.lib}", "-lmpi")
    own_pal = ("-Wl,--push-state,--no-as-needed", "-lopen-pal", "-Wl,--pop-state") if lib.name == "ompi5-sve" else ()
    return (f"-L{lib.lib}", f"-Wl,-rpath,{lib.lib}", "-lmpi", *own_pal)


def run_env(table: KernelTable, kernel: str, variant: str) -> dict[str, str]:
    """The guest environment of a row's runs: the singleton setting of MPI rows and the row's own
    `env` (e.g. OMPI_MCA_op=^aarch64: the same library without its op component)."""
    row = table.row(kernel, variant)
    lib = family_library(table, row.family)
    base = {} if lib is None else RUN_ENV if lib.name == "debian" else RUN_ENV_OMPI5
    return {**base, **dict(row.env)}
