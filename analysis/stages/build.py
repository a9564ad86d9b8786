"""Build stage: the exact compile and link command lines, in one place.

The Snakemake build rules run these commands, the provenance sidecar records them, and
`./harness explain` prints them, so what is reported is what was run.
"""
from __future__ import annotations

import functools
import hashlib
import re
import shlex
import shutil
from pathlib import Path

from analysis.backends.registry import REGISTRY
from analysis.core import mpi
from analysis.core.config import REPO, KernelTable, Sweep, parse_build, vl_rule_defines
from analysis.core.toolchain import (COMPILERS, DIRECT_LINK, LINK_IN, LINK_OUT, compiler_cflags, compiler_for,
                                     linker_command)

INCLUDE = REPO / "kernels" / "include"
ROI_SOURCES = REPO / "kernels" / "roi"
HARNESS_SOURCE = REPO / "kernels" / "harness" / "harness.c"
PLUGIN_SOURCES = REPO / "armie_clients"
# The counting core the clients share: its own shared object, loaded once per QEMU process
# (the clients find it beside them), so all clients share one TB counter.
PLUGIN_CORE = "tbstats"
PLUGIN_FLAGS = ("-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-std=gnu11")
# clang 14's arm_sve.h is 1.5 MB of declarations, which every ACLE object parsed anew. It is
# precompiled once per clang build (the header below includes it alone) and read from there; the
# objects are byte-identical to those compiled without it. clang refuses a precompiled header
# made with other language options or macros, so a row with flags of its own parses the header
# itself. GCC's arm_sve.h is a pragma: nothing to share.
SVE_HEADER = "arm_sve.h"
SVE_PCH_SOURCE = REPO / "kernels" / "pch" / "sve.h"
SVE_PCH_COMPILERS = ("clang",)


def vls_bits(build: str) -> int | None:
    return parse_build(build).vls_bits


def gen_dir(build_dir: Path) -> Path:
    return build_dir / "gen"


def obj_dir(build_dir: Path, compiler: str, build: str) -> Path:
    return build_dir / compiler / build / "obj"


def binary_path(build_dir: Path, compiler: str, build: str, backend: str, name: str) -> Path:
    return build_dir / compiler / build / "bin" / backend / name


def roi_source(backend: str) -> Path:
    """The backend's marker source (analysis.backends.Backend.MARKER)."""
    return ROI_SOURCES / REGISTRY[backend].MARKER


def marker_per_build(backend: str) -> bool:
    """A C marker (perf's: control, timing) is compiled per build; an assembly one serves every build."""
    return roi_source(backend).suffix == ".c"


def roi_object(build_dir: Path, compiler: str, backend: str, build: str = "vla") -> Path:
    """The marker object: one per cross compiler and backend (assembly, any build links it),
    or one per build (C)."""
    name = roi_source(backend).with_suffix(".o").name
    if marker_per_build(backend):
        return obj_dir(build_dir, compiler, build) / name
    return build_dir / compiler / "roi" / name


def plugin_path(build_dir: Path, client: str) -> Path:
    return build_dir / "plugins" / f"lib{client}.so"


def compile_cmd(build_dir: Path, compiler: str, build: str, source: Path, out: Path, extra: tuple[str, ...] = ()) -> list[str]:
    comp = compiler_for(compiler, build)
    return [
        *comp.cc, *compiler_cflags(compiler, build, vls_bits(build), extra),
        f"-I{INCLUDE}", f"-I{gen_dir(build_dir)}", "-c", str(source), "-o", str(out),
    ]


def family_flags(table: KernelTable, family: str) -> tuple[str, ...]:
    """Flags of every object of a family: its own cflags, and the MPI include path."""
    fam = table.families[family]
    lib = mpi.family_library(table, family)
    return (*fam.cflags, *(mpi.compile_flags(lib) if lib else ()))


def kernel_flags(table: KernelTable, kernel: str, variant: str, compiler: str) -> tuple[str, ...]:
    row = table.row(kernel, variant)
    lib = mpi.family_library(table, row.family)
    mpi_inc = mpi.compile_flags(lib) if lib else ()
    # A row naming a glibc memcpy variant calls it through HARNESS_MEMCPY (harness.h); rows
    # on libc's memcpy get no define, so their commands and objects stay as they were.
    memcpy = () if row.memcpy == "libc" else (f"-DHARNESS_MEMCPY={row.memcpy_symbol}",)
    # Native builds use gcc: the table's gcc flags (e.g. "keep it scalar") apply to them.
    return (*row.cflags.get("gcc" if compiler == "native" else compiler, ()), *memcpy, *mpi_inc)


def extra_sources(table: KernelTable, kernel: str, variant: str) -> list[Path]:
    """Sources linked besides driver, kernel and harness: the row's extra_sources and, for an
    MPI family, the MPI session (MPI_Init before main)."""
    row = table.row(kernel, variant)
    return [*row.extra_sources, *([mpi.SESSION_SOURCE] if table.families[row.family].mpi else [])]


def extra_source(table: KernelTable, stem: str) -> Path:
    """The extra source whose object is extra/<stem>.o (stems are unique across the table)."""
    found = {s for r in table.rows for s in extra_sources(table, r.kernel, r.variant) if s.stem == stem}
    if len(found) != 1:
        raise ValueError(f"extra source {stem}: {'not declared' if not found else 'ambiguous: ' + str(sorted(found))}")
    return found.pop()


def kernel_objects(build_dir: Path, table: KernelTable, compiler: str, build: str, kernel: str, variant: str) -> dict[str, Path]:
    """The objects a kernel binary links, in link order (the marker object comes last)."""
    row = table.row(kernel, variant)
    d = obj_dir(build_dir, compiler, build)
    objs = {"driver": d / f"driver_{row.family}.o"} if table.families[row.family].driver else {}
    for src in table.families[row.family].vl_agnostic_sources:
        objs[f"driver:{src.stem}"] = driver_part_object(build_dir, compiler, build, row.family, src)
    objs["kernel"] = kernel_object(build_dir, table, compiler, build, kernel, variant)
    for src in extra_sources(table, kernel, variant):
        objs[f"extra:{src.stem}"] = d / "extra" / f"{src.stem}.o"
    return {**objs, "harness": harness_object(build_dir, compiler, build)}


def shared_build(build: str) -> str:
    """The build whose object of code that is the same in every SVE build `build` links: VLA's."""
    return "vla" if vls_bits(build) else build


def kernel_build(table: KernelTable, kernel: str, variant: str, build: str) -> str:
    """The build whose kernel object `build` links: shared_build's for a row declared
    vl_agnostic_object (baselines without SVE code: 80 compiles of a default sweep, 4.8 CPU s)."""
    return shared_build(build) if table.row(kernel, variant).vl_agnostic_object else build


def driver_part_object(build_dir: Path, compiler: str, build: str, family: str, source: Path) -> Path:
    """The object of one of a family's vl_agnostic_sources that `build` links (shared_build)."""
    return obj_dir(build_dir, compiler, shared_build(build)) / "driver" / family / f"{source.stem}.o"


def driver_part_source(table: KernelTable, family: str, stem: str) -> Path:
    found = [s for s in table.families[family].vl_agnostic_sources if s.stem == stem]
    if len(found) != 1:
        raise ValueError(f"family {family}: vl_agnostic source {stem}: {'not declared' if not found else 'ambiguous'}")
    return found[0]


def driver_part_compile_cmd(build_dir: Path, table: KernelTable, compiler: str, build: str, family: str, stem: str) -> list[str]:
    """The command of the driver part `build` links: the family's flags, the shared build's."""
    src = driver_part_source(table, family, stem)
    shared = shared_build(build)
    return compile_cmd(build_dir, compiler, shared, src, driver_part_object(build_dir, compiler, shared, family, src),
                       family_flags(table, family))


def kernel_object(build_dir: Path, table: KernelTable, compiler: str, build: str, kernel: str, variant: str) -> Path:
    return obj_dir(build_dir, compiler, kernel_build(table, kernel, variant, build)) / f"{kernel}-{variant}.o"


def harness_build(build: str) -> str:
    """The build whose harness.o `build` links (shared_build): its code runs at any VL, outside
    every ROI, and checks a VLS binary's VL against the bits its driver passes (harness_init);
    per VLS build it cost 0.2-0.35 CPU s and only its registers and SVE byte fill differed."""
    return shared_build(build)


def harness_object(build_dir: Path, compiler: str, build: str) -> Path:
    return obj_dir(build_dir, compiler, harness_build(build)) / "harness.o"


def link_cmd(compiler: str, objects: list[Path], out: Path, use_mpi: bool | mpi.Library = False,
             build: str = "vla") -> list[str]:
    """`use_mpi`: the MPI library to link (True: Debian's), dynamically: neither ships a static libmpi."""
    comp = compiler_for(compiler, build)
    if use_mpi:
        return [*comp.cc, "-o", str(out), *map(str, objects), *mpi.link_flags(None if use_mpi is True else use_mpi)]
    if compiler in DIRECT_LINK:
        # The driver's own linker command (toolchain.DIRECT_LINK), with these objects and output.
        words = linker_command(compiler)
        at = words.index(LINK_IN)
        return [str(out) if w == LINK_OUT else w for w in words[:at]] + [*map(str, objects), *words[at + 1:]]
    return [*comp.cc, *comp.link, "-o", str(out), *map(str, objects)]


# A linker run directly takes its options as they are; a compiler driver passes them on with -Wl.
LINKER_NAME = re.compile(r"(?:^|-)ld(?:\.[a-z]+)?$")


def linker_options(link: list[str], *options: str) -> list[str]:
    """`options` as the command `link` takes them (a linker's or a compiler driver's)."""
    return list(options) if LINKER_NAME.search(Path(link[0]).name) else ["-Wl," + ",".join(options)]


def plugin_cmd(client: str, out: Path | str) -> list[str]:
    """A client links the decoder and the core lib{PLUGIN_CORE}.so of its own directory (build
    that first, with plugin_cmd(PLUGIN_CORE, ...))."""
    out = Path(out)
    if client == PLUGIN_CORE:
        return ["gcc", *PLUGIN_FLAGS, "-o", str(out), str(PLUGIN_SOURCES / f"{PLUGIN_CORE}.c")]
    # The VL rule comes from analysis.core.config (vl_rule_defines): the clients do not restate it.
    return ["gcc", *PLUGIN_FLAGS, *vl_rule_defines(), "-o", str(out), str(PLUGIN_SOURCES / f"{client}.c"),
            str(PLUGIN_SOURCES / "decode.c"),
            f"-L{out.parent}", f"-l{PLUGIN_CORE}", "-Wl,-rpath,$ORIGIN"]


# Preparations (harness_prep_begin) that processes share: one folder per compiler, family and
# the content of every source that can compute one. Every input of the key is read once per
# process (a workflow plans hundreds of jobs).
PREP_CACHE = "prep"


def prep_cache_dir(build_dir: Path, table: KernelTable, compiler: str, kernel: str, variant: str) -> Path:
    """Where the binaries of (compiler, kernel, variant) share their preparations: the same
    folder for every build (VLA, VLS-N) and, in a family with a driver, every variant, since a
    preparation depends only on its size and parameters (docs/contracts.md section 1) and on
    the code that computes it: the driver (with its vl_agnostic_sources) or the row's own source, the extra sources, the
    harness, the headers beside them, the family's flags and the compiler's version."""
    row = table.row(kernel, variant)
    fam = table.families[row.family]
    own = fam.driver or row.source
    sources = [own, *fam.vl_agnostic_sources, *extra_sources(table, kernel, variant), HARNESS_SOURCE,
               *sorted(INCLUDE.glob("*.h")), *sorted(Path(own).parent.glob("*.h"))]
    name = row.family if fam.driver else f"{row.family}-{kernel}-{variant}"
    key = _prep_key(compiler, tuple(str(s) for s in sources), family_flags(table, row.family),
                    reduce_matrix_header(table))
    return build_dir / PREP_CACHE / f"{compiler}-{name}-{key}"


def prune_prep_caches(folder: Path) -> None:
    """Remove the folders of the same compiler and family made for code that has changed since
    (each holds up to a sweep's inputs and references, hundreds of MiB for the full matrix).
    A job still reading one computes instead: the folders only save time."""
    stem = folder.name.rsplit("-", 1)[0]
    for old in folder.parent.glob(f"{stem}-*"):
        if old != folder and re.fullmatch(rf"{re.escape(stem)}-[0-9a-f]{{16}}", old.name):
            shutil.rmtree(old, ignore_errors=True)


@functools.cache
def _prep_key(compiler: str, sources: tuple[str, ...], flags: tuple[str, ...], generated: str) -> str:
    h = hashlib.sha256("\0".join([compiler, COMPILERS[compiler].version(), *flags, generated]).encode())
    for s in sources:
        h.update(b"\0" + Path(s).read_bytes())
    return h.hexdigest()[:16]


def kernel_compile_cmd(build_dir: Path, table: KernelTable, compiler: str, build: str, kernel: str, variant: str) -> list[str]:
    """The command of the kernel object that `build` links (kernel_build)."""
    row = table.row(kernel, variant)
    shared = kernel_build(table, kernel, variant, build)
    pch = kernel_pch(build_dir, table, compiler, shared, kernel, variant)
    return compile_cmd(build_dir, compiler, shared, row.source, kernel_object(build_dir, table, compiler, shared, kernel, variant),
                       kernel_flags(table, kernel, variant, compiler) + (("-include-pch", str(pch)) if pch else ()))


def sve_pch_path(build_dir: Path, compiler: str, build: str) -> Path:
    return obj_dir(build_dir, compiler, build) / "sve.pch"


def sve_pch_cmd(build_dir: Path, compiler: str, build: str) -> list[str]:
    """The command that precompiles arm_sve.h for one build (its flags are the objects')."""
    comp = compiler_for(compiler, build)
    return [*comp.cc, *compiler_cflags(compiler, build, vls_bits(build)), "-x", "c-header", str(SVE_PCH_SOURCE),
            "-o", str(sve_pch_path(build_dir, compiler, build))]


def kernel_pch(build_dir: Path, table: KernelTable, compiler: str, build: str, kernel: str, variant: str) -> Path | None:
    """The precompiled arm_sve.h a kernel object reads, or None: one per clang build, for the
    rows that include the header and add no flags of their own (SVE_HEADER)."""
    row = table.row(kernel, variant)
    if compiler not in SVE_PCH_COMPILERS or kernel_flags(table, kernel, variant, compiler):
        return None
    shared = kernel_build(table, kernel, variant, build)
    return sve_pch_path(build_dir, compiler, shared) if includes_sve_header(Path(row.source)) else None


INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


@functools.cache
def includes_sve_header(source: Path) -> bool:
    """Whether `source` includes arm_sve.h, itself or through the quoted headers it includes
    (beside it or in kernels/include), however deep."""
    seen: set[Path] = set()
    todo = [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for kind, name in INCLUDE_LINE.findall(path.read_text()):
            if kind == "<" and name == SVE_HEADER:
                return True
            if kind == '"':
                todo += [d / name for d in (path.parent, INCLUDE) if (d / name).is_file()][:1]
    return False


def driver_compile_cmd(build_dir: Path, table: KernelTable, compiler: str, build: str, family: str) -> list[str]:
    fam = table.families[family]
    out = obj_dir(build_dir, compiler, build) / f"driver_{family}.o"
    return compile_cmd(build_dir, compiler, build, fam.driver, out, family_flags(table, family))


def harness_compile_cmd(build_dir: Path, compiler: str, build: str) -> list[str]:
    """The command of the harness.o that `build` links (harness_build)."""
    shared = harness_build(build)
    return compile_cmd(build_dir, compiler, shared, HARNESS_SOURCE, harness_object(build_dir, compiler, shared))


def extra_compile_cmd(build_dir: Path, table: KernelTable, compiler: str, build: str, stem: str) -> list[str]:
    """One object per extra source for every family that links it (the MPI session serves both
    MPI libraries): the family's own flags are not in it."""
    return compile_cmd(build_dir, compiler, build, extra_source(table, stem),
                       obj_dir(build_dir, compiler, build) / "extra" / f"{stem}.o", mpi.compile_flags())


def roi_compile_cmd(build_dir: Path, compiler: str, backend: str, build: str = "vla") -> list[str]:
    """The marker object's command (roi_object: built with the VLA flags unless per build)."""
    return compile_cmd(build_dir, compiler, build if marker_per_build(backend) else "vla", roi_source(backend),
                       roi_object(build_dir, compiler, backend, build))


def binary_link_cmd(build_dir: Path, table: KernelTable, compiler: str, build: str, backend: str, kernel: str,
                    variant: str) -> list[str]:
    row = table.row(kernel, variant)
    objs = kernel_objects(build_dir, table, compiler, build, kernel, variant)
    roi = roi_object(build_dir, compiler, backend, build)
    return link_cmd(compiler, [*objs.values(), roi], binary_path(build_dir, compiler, build, backend, row.name),
                    mpi.family_library(table, row.family) or False, build)


def binary_commands(sweep: Sweep, compiler: str, build: str, backend: str, kernel: str, variant: str) -> list[str]:
    """Every command that produces one binary, as runnable shell lines (for provenance and explain)."""
    bd = sweep.build_dir
    table = sweep.table
    row = table.row(kernel, variant)
    objs = kernel_objects(bd, table, compiler, build, kernel, variant)
    roi = roi_object(bd, compiler, backend, build)
    fam = table.families[row.family]
    lines = [driver_compile_cmd(bd, table, compiler, build, row.family)] if fam.driver else []
    lines += [driver_part_compile_cmd(bd, table, compiler, build, row.family, s.stem) for s in fam.vl_agnostic_sources]
    if kernel_pch(bd, table, compiler, build, kernel, variant):
        lines += [sve_pch_cmd(bd, compiler, kernel_build(table, kernel, variant, build))]
    lines += [kernel_compile_cmd(bd, table, compiler, build, kernel, variant)]
    lines += [extra_compile_cmd(bd, table, compiler, build, src.stem) for src in extra_sources(table, kernel, variant)]
    lines += [
        harness_compile_cmd(bd, compiler, build),
        roi_compile_cmd(bd, compiler, backend, build),
        binary_link_cmd(bd, table, compiler, build, backend, kernel, variant),
    ]
    return [shlex.join(c) for c in lines]


def reduce_matrix_header(table: KernelTable) -> str:
    """The C X-macro list of every (op, dtype) pair the table declares for reductions."""
    ctype = {
        "float": "float", "double": "double", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
        "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    }
    # Families may share ops (reduce, mpi_reduce): each pair once, in first-seen order.
    entries = list(dict.fromkeys(
        f"    X({op.name}, {d}, {ctype[d]})"
        for fam in table.families.values()
        for op in fam.ops.values()
        for d in op.dtypes
    ))
    return (
        "/* Generated from the kernel table (configs/kernels.yaml) by analysis/stages/build.py: do not edit. */\n"
        "#ifndef REDUCE_MATRIX_H\n#define REDUCE_MATRIX_H\n"
        "#define REDUCE_MATRIX(X) \\\n" + " \\\n".join(entries) + "\n#endif\n"
    )


ROI_MARKERS = ("roi_begin", "roi_end")
ROI_FIX = "put roi_begin(); before and roi_end(); after the work to count (see kernels/template/my_kernel.c)"


def checked_link_shell(name: str, link: list[str]) -> str:
    """A kernel binary's link command (`link`, as binary_link_cmd gives it) as a shell command
    that refuses a kernel whose objects never call the ROI markers: status 1, the binary removed,
    a message on stderr that says what to add. The linker itself names every object that
    references a marker (-y: the binary is the same bytes), so the check starts no process of
    its own: an `nm` of the objects before each link cost the link job about a third of its CPU."""
    out = shlex.quote(link[link.index("-o") + 1])
    trace = shlex.join(w for m in ROI_MARKERS for w in linker_options(link, "-y", m))
    return (
        f"s=0 && t=$({shlex.join(link)} {trace} 2>&1) || s=$?; [ -z \"$t\" ] || printf '%s\\n' \"$t\" >&2; "
        f"[ \"$s\" = 0 ] || exit \"$s\"; nl=$'\\n' && miss= && "
        f"for m in {' '.join(ROI_MARKERS)}; do case \"$t$nl\" in *\": reference to $m$nl\"*) ;; "
        f"*) miss=\"$miss${{miss:+ or }}$m()\" ;; esac; done && "
        f"if [ -n \"$miss\" ]; then rm -f {out}; echo \"kernel {name}: never calls $miss: {ROI_FIX}\" >&2; false; fi"
    )
