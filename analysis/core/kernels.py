"""The kernel table (configs/kernels.yaml and a sweep's extra tables) as typed rows, the rules
every row and run obey (the SVE vector-length rule, build names, sizes), and the selector by
which a sweep's figures and checks name rows.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.core.schema import REPO, ConfigError, read_yaml, resolve_path, validate_doc

# The SVE vector-length rule, stated once: multiples of 128 bits from 128 to 2048. The C
# clients (armie_clients/memory.c, built with -DSVE_VL_*) and the gem5 script
# (gem5_scripts/se_sve.py --vl-rule) receive it as data: vl_rule_defines(), vl_rule_arg().
VL_MIN, VL_MAX, VL_STEP = 128, 2048, 128
VALID_VLS = tuple(range(VL_MIN, VL_MAX + 1, VL_STEP))
VLS_ALLOWED = (128, 256, 512, 1024, 2048)  # what -msve-vector-bits accepts in GCC and clang
CPU_MODEL_VLS = {"max": VALID_VLS, "a64fx": (128, 256, 512)}
DTYPE_SIZE = {
    "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float": 4, "double": 8,
}
NO_OP = "-"  # the op column of kernels that are not reductions
# The binaries take the size as 12 decimal digits (docs/contracts.md 1): larger ones are refused there.
SIZE_MAX = 10**12 - 1
NOSVE = "nosve"  # the build of rows declared `sve: false` (-march=armv8-a)
IEEE_FILLS_FLAG = "-DREDUCE_IEEE_FILLS"  # kernels/reduce/driver.c: fills for FMAX/FMIN semantics


@dataclass(frozen=True)
class OpSpec:
    name: str
    dtypes: tuple[str, ...]
    nan: str
    nan_note: str


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    driver: Path | None  # None: the kernel source has its own main()
    size: str
    layout: str
    dtypes: tuple[str, ...]
    params: dict[str, Any]  # key=value arguments handed to every binary as they are
    ops: dict[str, OpSpec]
    traffic: dict[str, float]  # bytes read/written per call as multiples of size; {} = undeclared
    mpi: bool  # links an arm64 Open MPI (analysis/core/mpi.py)
    mpi_library: str  # which one: a name analysis.core.mpi.library() knows
    cflags: tuple[str, ...]
    vl_agnostic_sources: tuple[Path, ...]  # driver parts compiled once per compiler, in the VLA build


@dataclass(frozen=True)
class Loop:
    """The kernel's single hot loop as the table declares it (expect: loop):
    iterations = rounding(size / (vectors_per_iteration x VL bytes))."""
    vectors_per_iteration: int
    rounding: str  # ceil | floor


@dataclass(frozen=True)
class KernelRow:
    kernel: str
    variant: str
    family: str
    source: Path
    cflags: dict[str, tuple[str, ...]]
    params: dict[str, Any]  # key=value arguments handed to the row's binaries as they are
    label: str
    role: str
    expect: dict[str, Any]  # codegen facts the tests assert, as the table states them
    loop: Loop | None  # expect's hot loop, which `explain` compares with the one that ran
    host_native: bool
    extra_sources: tuple[Path, ...]
    memcpy: str  # which memcpy HARNESS_MEMCPY calls: libc (IFUNC) or a glibc variant
    host_isa: str | None  # host-only code for this ISA (platform.machine()): never cross-built
    not_simulated: str | None  # why gem5 cannot run this row: left out of the cycle sweep, said in one line
    env: tuple[tuple[str, str], ...]  # guest environment of its runs, besides the family's
    sve: bool  # False: built without SVE (build NOSVE) and run under -cpu <model>,sve=off
    vl_agnostic_object: bool  # the same object bytes in every SVE build: compiled once, in the VLA build

    @property
    def name(self) -> str:
        return f"{self.kernel}-{self.variant}"

    @property
    def memcpy_symbol(self) -> str:
        """The function HARNESS_MEMCPY calls: `memcpy` or glibc's `__memcpy_<variant>`."""
        return "memcpy" if self.memcpy == "libc" else f"__memcpy_{self.memcpy}"


@dataclass(frozen=True)
class Selector:
    """The rows a figure's or check's line reads: a kernel, one variant (None: every variant of
    the kernel), an op and a dtype (None: any)."""
    kernel: str
    variant: str | None = None
    op: str | None = None
    dtype: str | None = None

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Selector:
        return cls(doc["kernel"], doc.get("variant"), doc.get("op"), doc.get("dtype"))

    def words(self) -> list[str]:
        """What it names, in the sweep file's order (kernel, variant, op, dtype), for captions."""
        return [v for v in (self.kernel, self.variant, self.op, self.dtype) if v is not None]


@dataclass(frozen=True)
class KernelTable:
    families: dict[str, Family]
    rows: tuple[KernelRow, ...]

    def row(self, kernel: str, variant: str) -> KernelRow:
        for r in self.rows:
            if r.kernel == kernel and r.variant == variant:
                return r
        raise ConfigError(f"unknown variant '{variant}' of kernel '{kernel}'; known: {', '.join(self.variants(kernel))}")

    def kernels(self) -> list[str]:
        return sorted({r.kernel for r in self.rows})

    def variants(self, kernel: str) -> list[str]:
        return [r.variant for r in self.rows if r.kernel == kernel]

    def selector_family(self, sel: Selector) -> Family:
        """The family of a figure's or check's selector (its variant, else the kernel's first)."""
        return self.families[self.row(sel.kernel, sel.variant or self.variants(sel.kernel)[0]).family]


# Build names, parsed here only: `vla` (VL set at run time), `vls<N>` (compiled for N bits),
# `host` (the native baselines' own ISA), `nosve` (rows declared `sve: false`).
BUILD_PATTERN = r"vla|vls\d+|host|nosve"


@dataclass(frozen=True)
class BuildName:
    name: str
    vls_bits: int | None  # N of vls<N>, else None

    @property
    def column(self) -> str:
        """The counts table's build column: vls for the fixed-length builds, else vla."""
        return "vla" if self.vls_bits is None else "vls"


def parse_build(name: str) -> BuildName:
    if not re.fullmatch(BUILD_PATTERN, name):
        raise ConfigError(f"build {name!r}: use vla, vls<N>, host or nosve")
    return BuildName(name, int(name[3:]) if name.startswith("vls") else None)


def vl_rule_arg() -> str:
    """The VL rule as the gem5 script takes it (--vl-rule MIN:MAX:STEP)."""
    return f"{VL_MIN}:{VL_MAX}:{VL_STEP}"


def vl_rule_defines() -> tuple[str, ...]:
    """The VL rule as the C clients take it (compiler definitions)."""
    return (f"-DSVE_VL_MIN={VL_MIN}", f"-DSVE_VL_MAX={VL_MAX}", f"-DSVE_VL_STEP={VL_STEP}")


def check_vl(vl: int, what: str) -> None:
    if vl % VL_STEP or not VL_MIN <= vl <= VL_MAX:
        raise ConfigError(
            f"{what}: VL {vl} is not valid; SVE vector lengths are multiples of {VL_STEP} from {VL_MIN} to {VL_MAX} bits"
        )


def run_params(table: KernelTable, row: KernelRow, op: str, dtype: str) -> tuple[tuple[str, Any], ...]:
    """Arguments after size, in a fixed order: row params, op, dtype, family params, nan."""
    fam = table.families[row.family]
    params: list[tuple[str, Any]] = list(row.params.items())
    if op != NO_OP:
        params.append(("op", op))
    if fam.dtypes or fam.ops:
        params.append(("dtype", dtype))
    params += list(fam.params.items())
    if op != NO_OP:
        params.append(("nan", 1 if fam.ops[op].nan == "reference" else 0))
    return tuple(params)


def layout_of(table: KernelTable, row: KernelRow) -> str:
    fam = table.families[row.family]
    return fam.layout.format(**fam.params)


def memory_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Machine:
    """Where a sweep's runs run, as the size check judges it: this machine, or (a sweep through
    Slurm) the nodes of its partition, whose memory the submitting host does not share."""
    memory: int  # bytes
    name: str = "this machine"  # "too large for <name>"
    holder: str = "this machine"  # "<holder> has N GiB of memory"
    fix: str = "choose a smaller size"


def slurm_nodes(partition: str, node: str, memory_mb: int) -> Machine:
    """The nodes of a Slurm partition, by the largest one's memory (Slurm's RealMemory, in MB):
    a run that does not fit there fits on none of them."""
    return Machine(memory_mb * 2**20, f"the nodes of Slurm partition {partition}", f"its largest node ({node})",
                   "choose a smaller size, or a partition with larger nodes (--slurm-partition P)")


def run_buffers(family: Family, size: int) -> int:
    """A lower bound of the memory one run of `size` bytes allocates: the bytes its kernel reads
    and writes (the family's declared traffic, at least the size itself)."""
    return int(size * max(1.0, sum(family.traffic.values())))


def check_size_fits(family: Family, size: int, what: str, note: str = "", machine: Machine | None = None) -> None:
    """A size whose buffers cannot be held in memory: the binary's allocation fails (or, with
    overcommit, the filling thrashes until the OOM killer stops it) after the build, and its
    time limit (60 s per MiB) is months. Refused here instead, in one line. `machine`: where the
    runs run (None: this machine)."""
    machine = machine or Machine(memory_bytes())
    need, have = run_buffers(family, size), machine.memory
    if need > have:
        raise ConfigError(f"{what} is too large for {machine.name}: a run of {size} bytes allocates at least "
                          f"{need / 2**30:.1f} GiB (family {family.name}), {machine.holder} has {have / 2**30:.1f} GiB of "
                          f"memory{note}; {machine.fix}")


def _family(name: str, f: dict[str, Any], base: Path) -> Family:
    ops = {op: OpSpec(op, tuple(o["dtypes"]), o["nan"], o["nan_note"]) for op, o in f["ops"].items()}
    return Family(
        name, f["description"], resolve_path(f["driver"], base) if "driver" in f else None, f["size"], f["layout"],
        tuple(f["dtypes"]), dict(f["params"]), ops,
        dict(f["traffic"]) if "traffic" in f else {},  # undeclared: no bandwidth for this family
        mpi=f["mpi"], mpi_library=f["mpi_library"],
        cflags=tuple(f["cflags"]), vl_agnostic_sources=tuple(resolve_path(s, base) for s in f["vl_agnostic_sources"]),
    )


def _row(r: dict[str, Any], base: Path) -> KernelRow:
    loop = r["expect"].get("loop")
    return KernelRow(
        r["kernel"], r["variant"], r["family"], resolve_path(r["source"], base),
        {c: tuple(v) for c, v in r["cflags"].items()}, dict(r["params"]), r["label"], r["role"], dict(r["expect"]),
        Loop(loop["vectors_per_iteration"], loop["rounding"]) if loop else None,
        host_native=r["host_native"], extra_sources=tuple(resolve_path(x, base) for x in r["extra_sources"]),
        memcpy=r["memcpy"], host_isa=r.get("host_isa"), not_simulated=r.get("not_simulated"),
        env=tuple(sorted(r["env"].items())), sve=r["sve"], vl_agnostic_object=r["vl_agnostic_object"],
    )


def load_table(paths: list[Path]) -> KernelTable:
    """The main table (first) names sources relative to the repository; every further table
    (your own kernels, wherever they live) relative to itself."""
    families: dict[str, Family] = {}
    rows: list[KernelRow] = []
    for i, path in enumerate(paths):
        doc = read_yaml(path)
        validate_doc(doc, "kernels.schema.yaml", path, fill_defaults=True)
        base = REPO if i == 0 and path.resolve().is_relative_to(REPO) else path.resolve().parent
        for name, f in doc["families"].items():
            if name in families:
                raise ConfigError(f"{path}: family '{name}' is declared twice")
            families[name] = _family(name, f, base)
        for r in doc["kernels"]:
            row = _row(r, base)
            if any(x.kernel == row.kernel and x.variant == row.variant for x in rows):
                raise ConfigError(f"{path}: kernel {row.kernel} variant {row.variant} is declared twice")
            rows.append(row)
    for fam in families.values():
        if any(o.nan == "ieee" for o in fam.ops.values()) and IEEE_FILLS_FLAG not in fam.cflags:
            raise ConfigError(f"family {fam.name}: nan policy ieee needs cflags: [{IEEE_FILLS_FLAG}] (the driver's fills without signed zeros)")
    for row in rows:
        if row.family not in families:
            raise ConfigError(f"kernel {row.name}: unknown family '{row.family}'; known: {', '.join(families)}")
        for src in (row.source, *row.extra_sources, *families[row.family].vl_agnostic_sources):
            if not src.exists():
                raise ConfigError(f"kernel {row.name}: source {src} does not exist")
        if row.host_isa and not row.host_native:
            raise ConfigError(f"kernel {row.name}: host_isa: {row.host_isa} is host-only code; add host_native: true")
        # glibc's variants are global only in the static libc.a; libc.so (the MPI and the
        # native perf builds link it) keeps them local.
        if row.memcpy != "libc" and (row.host_native or families[row.family].mpi):
            raise ConfigError(
                f"kernel {row.name}: memcpy: {row.memcpy} needs the static cross link; drop "
                f"{'host_native' if row.host_native else 'the mpi family'} or use memcpy: libc"
            )
    return KernelTable(families, tuple(rows))
