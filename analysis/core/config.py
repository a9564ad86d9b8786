"""Load the sweep configuration and the kernel table, validate them, and expand the plan.

Everything that can be wrong with the input is found here, before any job runs, and
reported as one line naming the fix (ConfigError). Snakemake's rule files and the
command-line front end both go through `load()`.
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from analysis.core.run import Run  # its own module, for the count jobs; config.Run names it as before

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "configs" / "schema"

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
GEM5_VLS = (128, 256, 512, 1024, 2048)
GEM5_SYSTEMS = REPO / "configs" / "gem5_systems.yaml"
# The binaries take the size as 12 decimal digits (docs/contracts.md 1): larger ones are refused there.
SIZE_MAX = 10**12 - 1
NOSVE = "nosve"  # the build of rows declared `sve: false` (-march=armv8-a)
IEEE_FILLS_FLAG = "-DREDUCE_IEEE_FILLS"  # kernels/reduce/driver.c: fills for FMAX/FMIN semantics
PERF_VLS = (128, 256, 512)  # what A64FX offers


class ConfigError(Exception):
    """Bad input: the message is one line that says what to change."""


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
    params: dict[str, Any]
    ops: dict[str, OpSpec]
    traffic: dict[str, float]  # bytes read/written per call as multiples of size; {} = undeclared
    mpi: bool = False  # links an arm64 Open MPI (analysis/core/mpi.py)
    mpi_library: str = "debian"  # which one: analysis.core.mpi.LIBRARIES
    cflags: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelRow:
    kernel: str
    variant: str
    family: str
    source: Path
    cflags: dict[str, tuple[str, ...]]
    params: dict[str, Any]
    label: str
    role: str
    expect: dict[str, Any]
    host_native: bool = False
    extra_sources: tuple[Path, ...] = ()
    memcpy: str = "libc"  # which memcpy HARNESS_MEMCPY calls: libc (IFUNC) or a glibc variant
    host_isa: str | None = None  # host-only code for this ISA (platform.machine()): never cross-built
    not_simulated: str | None = None  # why gem5 cannot run this row: left out of the cycle sweep, said in one line
    env: tuple[tuple[str, str], ...] = ()  # guest environment of its runs, besides the family's
    sve: bool = True  # False: built without SVE (build NOSVE) and run under -cpu <model>,sve=off

    @property
    def name(self) -> str:
        return f"{self.kernel}-{self.variant}"

    @property
    def memcpy_symbol(self) -> str:
        """The function HARNESS_MEMCPY calls: `memcpy` or glibc's `__memcpy_<variant>`."""
        return "memcpy" if self.memcpy == "libc" else f"__memcpy_{self.memcpy}"


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

    def selector_family(self, sel: dict[str, Any]) -> Family:
        """The family of a figure's or check's selector (its variant, else the kernel's first)."""
        return self.families[self.row(sel["kernel"], sel.get("variant") or self.variants(sel["kernel"])[0]).family]


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


@dataclass(frozen=True)
class Binary:
    """One linked executable: a kernel row built one way for one backend."""
    compiler: str
    build: str  # "vla" or "vls<N>"
    backend: str
    kernel: str
    variant: str

    @property
    def name(self) -> str:
        return f"{self.kernel}-{self.variant}"

    @property
    def vls_bits(self) -> int | None:
        return parse_build(self.build).vls_bits


@dataclass(frozen=True)
class Job:
    """The runs of one binary on one CPU model: the unit of work of a count rule."""
    binary: Binary
    cpu_model: str
    runs: tuple[Run, ...]


@dataclass(frozen=True)
class TimeLimits:
    """How long one run may take (sweep parameter time_limit)."""
    base_seconds: float = 120.0
    seconds_per_mib: float = 60.0
    gem5_factor: float = 20.0  # gem5's O3 core is that much slower than QEMU


@dataclass(frozen=True)
class Gem5Section:
    """The cycle sweep (sweep parameter gem5); the Sweep has none when the file has none."""
    systems: dict[str, dict[str, Any]]  # the chosen systems' descriptions (configs/gem5_systems.yaml)
    vector_lengths: tuple[int, ...]
    compilers: tuple[str, ...]
    binary: str | None  # the gem5 executable, when not from GEM5 or the built cache
    # Sizes per family to simulate, where the cycle sweep takes fewer than the sweep counts (a
    # family absent here: the sweep's sizes).
    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class PerfSection:
    """Native runs under perf (sweep parameter perf)."""
    perf: str
    events: tuple[str, ...]
    sve: str  # auto | off
    host_baselines: bool
    vector_lengths: tuple[int, ...]
    sizes: dict[str, tuple[int, ...]]
    processes: int
    calls: int
    warmup: int
    flush: dict[str, int]
    core: int
    checks: list[dict[str, Any]]
    figures: list[dict[str, Any]]


@dataclass(frozen=True)
class RegressionSection:
    """The golden counts a sweep is checked against (sweep parameter regression)."""
    golden_dir: str
    metrics: tuple[str, ...]
    tolerance: list[dict[str, Any]]
    tolerance_sets: dict[str, list[dict[str, Any]]]
    on_fingerprint_change: dict[str, str]


def cross_build(row: KernelRow, build: str) -> str | None:
    """The build a cross-built backend runs a row with: none for host-only rows, the one
    without SVE (NOSVE, instead of the VLA and VLS builds) for rows declared `sve: false`."""
    if row.host_isa:
        return None
    if not row.sve:
        return NOSVE if build == "vla" else None
    return build


@dataclass
class Sweep:
    path: Path
    raw: dict[str, Any]
    table: KernelTable
    table_paths: list[Path]
    results_dir: Path
    build_dir: Path
    compilers: list[str]
    backends: list[str]
    cpu_models: dict[str, tuple[int, ...]]
    vector_lengths: tuple[int, ...]
    vls_vector_lengths: tuple[int, ...]
    sizes: dict[str, tuple[int, ...]]
    linearity_check: bool
    selections: list[dict[str, Any]]
    figures: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    time_limits: TimeLimits = TimeLimits()
    gem5: Gem5Section | None = None
    perf: PerfSection | None = None
    regression: RegressionSection | None = None

    def builds(self) -> list[str]:
        return ["vla"] + [f"vls{n}" for n in self.vls_vector_lengths]

    def build_vls(self) -> list[tuple[str, tuple[int, ...] | None]]:
        """The cross builds and the VLs each runs at (None: the sweep's vector_lengths)."""
        return [(b, (n,) if (n := parse_build(b).vls_bits) else None) for b in self.builds()]

    def selects(self, kernel: str, variant: str) -> bool:
        """Whether the sweep's selections include this kernel row."""
        return any(sel["kernel"] == kernel and variant in sel["variants"] for sel in self.selections)

    def expand(self, backend: str, compilers: Iterable[str], builds: list[tuple[str, tuple[int, ...] | None]],
               cpus: dict[str, tuple[int, ...] | None], sizes: Callable[[str], Iterable[int]],
               build_for: Callable[[KernelRow, str], str | None] = cross_build) -> list[Job]:
        """The one job expander: one Job per (row, compiler, build, CPU model) of the selections.
        `builds`: (build, its VLs or None for the sweep's vector_lengths); `cpus`: model -> the
        VLs it runs (None: any); `sizes`: a family's sizes; `build_for`: the build a row takes
        (None: the row is not run by this backend)."""
        jobs: list[Job] = []
        for sel in self.selections:
            for variant, compiler, (build, build_vls), (cpu, cpu_vls) in itertools.product(
                sel["variants"], compilers, builds, cpus.items()
            ):
                row = self.table.row(sel["kernel"], variant)
                actual = build_for(row, build)
                if actual is None:
                    continue
                vls = [v for v in (build_vls or self.vector_lengths) if cpu_vls is None or v in cpu_vls]
                if not vls:
                    continue
                sve = actual != NOSVE
                runs = tuple(
                    Run(vl, size, op, dtype, run_params(self.table, row, op, dtype), sve=sve)
                    for vl in vls for op, dtype in sel["op_dtypes"] for size in sizes(row.family)
                )
                jobs.append(Job(Binary(compiler, actual, backend, row.kernel, row.variant), cpu, runs))
        return jobs

    def jobs(self) -> list[Job]:
        """The count backends' jobs (parameter backends)."""
        return [j for b in self.backends for j in self.count_jobs(b)]

    def count_jobs(self, backend: str) -> list[Job]:
        """One instruction-counting backend's jobs (QEMU's clients, ArmIE's): every cross build
        at every CPU model, each size with its baseline (0) and, for the linearity check, its
        double; none when the sweep does not use it."""
        if backend not in self.backends:
            return []
        return self.expand(backend, self.compilers, self.build_vls(), dict(self.cpu_models), self.run_sizes)

    def time_limit(self, kernel: str, variant: str, size: int, factor: float = 1.0) -> float:
        """Seconds one run may take before it is killed: the kernel selection's own limit, else
        derived from the size (the instruction count grows with it) times the backend's
        slowness `factor`."""
        for sel in self.selections:
            if sel["kernel"] == kernel and variant in sel["variants"] and sel.get("time_limit"):
                return float(sel["time_limit"])
        t = self.time_limits
        return float((t.base_seconds + t.seconds_per_mib * size / (1 << 20)) * factor)

    def run_sizes(self, family: str) -> list[int]:
        sizes = {0}
        for s in self.sizes[family]:
            sizes.add(s)
            if self.linearity_check:
                sizes.add(2 * s)
        return sorted(sizes)


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


# libyaml's loader where PyYAML has it: every Snakemake start (a no-op re-run too) reads the
# sweep, the kernel table and the schemas.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        with open(path) as f:
            return yaml.load(f, Loader=_LOADER)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory: name a sweep file (YAML) such as configs/default.yaml") from None
    except (UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path}: cannot be read as a YAML file ({e}): name a sweep file such as configs/default.yaml") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON Schema counts 128.0 as an integer; the binaries' fixed-width arguments and range()
    # do not, and a float there failed inside a job (a traceback) instead of here.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    # YAML's .nan and .inf are floats: .nan compares false with every limit (it disabled the
    # time limit) and .inf overflows where a number becomes an integer.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def strict_validator(schema: dict[str, Any]) -> Any:
    """A Draft 7 validator whose `integer` is a whole number written without a point and whose
    `number` is finite, for every schema the harness reads (sweep, kernel table, fingerprint)."""
    import jsonschema

    checker = jsonschema.Draft7Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    return jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=checker)(schema)


def schema_message(e: Any) -> str:
    """One schema error as `where: what to change`."""
    where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
    value = e.instance
    if e.validator == "type" and isinstance(value, float) and not isinstance(value, bool):
        wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        if not math.isfinite(value) and {"number", "integer"} & set(wanted):
            return f"{where}: {value} is not a finite number: give a number such as 1 or 0.5"
        if "integer" in wanted and value.is_integer():
            return f"{where}: {value} is not a whole number: write {int(value)} (without a decimal point)"
    if e.validator == "minLength" and value == "":
        return f"{where}: empty: give a value"
    return f"{where}: {e.message}"


def validate_doc(doc: Any, schema_name: str, path: Path) -> None:
    # jsonschema is imported in strict_validator, not at the top: it is 40 % of this module's
    # import time, and a module that imports the configuration without loading a sweep validates nothing.
    schema = yaml.load((SCHEMA_DIR / schema_name).read_text(), Loader=_LOADER)
    errors = sorted(strict_validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(f"{path}: {schema_message(errors[0])} (schema {schema_name})")


def base_dir(config_path: Path) -> Path:
    """What relative paths in a sweep file are relative to: the repository for the shipped
    configs, the file's own directory for a user's config kept elsewhere."""
    p = config_path.resolve()
    return REPO if p.is_relative_to(REPO) else p.parent


def resolve_path(p: str, base: Path) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() else base / q


def load_table(paths: list[Path]) -> KernelTable:
    """The main table (first) names sources relative to the repository; every further table
    (your own kernels, wherever they live) relative to itself."""
    families: dict[str, Family] = {}
    rows: list[KernelRow] = []
    for i, path in enumerate(paths):
        doc = _read_yaml(path)
        validate_doc(doc, "kernels.schema.yaml", path)
        base = REPO if i == 0 and path.resolve().is_relative_to(REPO) else path.resolve().parent
        for name, f in doc["families"].items():
            if name in families:
                raise ConfigError(f"{path}: family '{name}' is declared twice")
            ops = {
                op: OpSpec(op, tuple(o["dtypes"]), o["nan"], o.get("nan_note", ""))
                for op, o in (f.get("ops") or {}).items()
            }
            families[name] = Family(
                name, f["description"], resolve_path(f["driver"], base) if "driver" in f else None, f["size"], f["layout"],
                tuple(f.get("dtypes", [])), dict(f.get("params", {})), ops, dict(f.get("traffic", {})),
                mpi=bool(f.get("mpi", False)), mpi_library=f.get("mpi_library", "debian"),
                cflags=tuple(f.get("cflags", [])),
            )
        for r in doc["kernels"]:
            row = KernelRow(
                r["kernel"], r["variant"], r["family"], resolve_path(r["source"], base),
                {c: tuple(v) for c, v in (r.get("cflags") or {}).items()},
                dict(r.get("params", {})), r["label"], r["role"], dict(r.get("expect", {})),
                bool(r.get("host_native", False)),
                extra_sources=tuple(resolve_path(x, base) for x in r.get("extra_sources", [])),
                memcpy=r.get("memcpy", "libc"),
                host_isa=r.get("host_isa"),
                not_simulated=r.get("not_simulated"),
                env=tuple(sorted((r.get("env") or {}).items())), sve=bool(r.get("sve", True)),
            )
            if any(x.kernel == row.kernel and x.variant == row.variant for x in rows):
                raise ConfigError(f"{path}: kernel {row.kernel} variant {row.variant} is declared twice")
            rows.append(row)
    for fam in families.values():
        if any(o.nan == "ieee" for o in fam.ops.values()) and IEEE_FILLS_FLAG not in fam.cflags:
            raise ConfigError(f"family {fam.name}: nan policy ieee needs cflags: [{IEEE_FILLS_FLAG}] (the driver's fills without signed zeros)")
    for row in rows:
        if row.family not in families:
            raise ConfigError(f"kernel {row.name}: unknown family '{row.family}'; known: {', '.join(families)}")
        for src in (row.source, *row.extra_sources):
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


def check_vl(vl: int, what: str) -> None:
    if vl % VL_STEP or not VL_MIN <= vl <= VL_MAX:
        raise ConfigError(
            f"{what}: VL {vl} is not valid; SVE vector lengths are multiples of {VL_STEP} from {VL_MIN} to {VL_MAX} bits"
        )


def selection(table: KernelTable, sel: dict[str, Any]) -> dict[str, Any]:
    kernel = sel["kernel"]
    if kernel not in table.kernels():
        raise ConfigError(f"unknown kernel '{kernel}'; known: {', '.join(table.kernels())}")
    variants = sel.get("variants") or table.variants(kernel)
    for v in variants:
        table.row(kernel, v)
    fam = table.families[table.row(kernel, variants[0]).family]
    if fam.ops:
        ops = sel.get("ops") or list(fam.ops)
        for op in ops:
            if op not in fam.ops:
                raise ConfigError(f"kernel {kernel}: unknown op '{op}'; known: {', '.join(fam.ops)}")
        pairs = []
        for op in ops:
            dtypes = sel.get("dtypes") or list(fam.ops[op].dtypes)
            for d in dtypes:
                if d not in DTYPE_SIZE:
                    raise ConfigError(f"kernel {kernel}: unknown dtype '{d}'; known: {', '.join(DTYPE_SIZE)}")
                if d in fam.ops[op].dtypes:
                    pairs.append((op, d))
                elif sel.get("dtypes") and len(ops) == 1:
                    raise ConfigError(
                        f"kernel {kernel}: op {op} is not defined for dtype {d}; it is for {', '.join(fam.ops[op].dtypes)}"
                    )
        if not pairs:
            raise ConfigError(f"kernel {kernel}: no op/dtype pair of {ops} x {sel.get('dtypes')} is defined")
    else:
        if sel.get("ops"):
            raise ConfigError(f"kernel {kernel} is not a reduction: remove 'ops' from its selection")
        # A family without dtypes (copy) moves bytes: its dtype column is uint8.
        dtypes = sel.get("dtypes") or list(fam.dtypes[:1]) or ["uint8"]
        for d in dtypes:
            if d not in (fam.dtypes or ("uint8",)):
                raise ConfigError(f"kernel {kernel}: unknown dtype '{d}'; it accepts {', '.join(fam.dtypes or ('uint8',))}")
        pairs = [(NO_OP, d) for d in dtypes]
    return {"kernel": kernel, "variants": list(variants), "op_dtypes": pairs, "family": fam.name,
            "time_limit": sel.get("time_limit")}


def _check_sizes(table: KernelTable, sizes: dict[str, list[int]], selections: list[dict[str, Any]], where: str = "sizes",
                 linearity: bool = False) -> None:
    for fam_name, values in sizes.items():
        if fam_name not in table.families:
            raise ConfigError(f"{where}: unknown family '{fam_name}'; known: {', '.join(table.families)}")
        for s in values:
            if not isinstance(s, int) or s < 1:
                raise ConfigError(
                    f"{where}/{fam_name}: size {s} is not valid; sizes are byte counts >= 1 (0, the baseline, always runs)"
                )
            if s > SIZE_MAX or (linearity and 2 * s > SIZE_MAX):
                raise ConfigError(
                    f"{where}/{fam_name}: size {s} is too large; the kernels take at most {SIZE_MAX} bytes"
                    + (" (the linearity check also runs twice the size)" if linearity else "")
                )
            check_size_fits(table.families[fam_name], 2 * s if linearity else s, f"{where}/{fam_name}: size {s}",
                            " (the linearity check also runs twice the size)" if linearity else "")
    for sel in selections:
        fam = table.families[sel["family"]]
        if fam.name not in sizes:
            raise ConfigError(f"{where}: no size for family '{fam.name}' (kernel {sel['kernel']}); add {where}/{fam.name}")
        for _, dtype in sel["op_dtypes"]:
            unit = DTYPE_SIZE[dtype] * int(fam.params.get("blocklen", 1))
            for s in sizes[fam.name]:
                if s % unit:
                    raise ConfigError(
                        f"{where}/{fam.name}: {s} bytes is not a multiple of {unit} (one block of {dtype}) for kernel {sel['kernel']}"
                    )


def memory_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def run_buffers(family: Family, size: int) -> int:
    """A lower bound of the memory one run of `size` bytes allocates: the bytes its kernel reads
    and writes (the family's declared traffic, at least the size itself)."""
    return int(size * max(1.0, sum(family.traffic.values())))


def check_size_fits(family: Family, size: int, what: str, note: str = "") -> None:
    """A size whose buffers cannot be held in memory: the binary's allocation fails (or, with
    overcommit, the filling thrashes until the OOM killer stops it) after the build, and its
    time limit (60 s per MiB) is months. Refused here instead, in one line."""
    need, have = run_buffers(family, size), memory_bytes()
    if need > have:
        raise ConfigError(f"{what} is too large for this machine: a run of {size} bytes allocates at least "
                          f"{need / 2**30:.1f} GiB (family {family.name}), this machine has {have / 2**30:.1f} GiB of "
                          f"memory{note}; choose a smaller size")


def read_sweep(path: Path, overrides: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """The sweep file's parameters as given: the file it extends merged in, then the overrides;
    and the files read (the sweep file, the one it extends). Not validated: `load` does that."""
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of parameters")
    read = [path]
    if "extends" in raw:
        raw, parent = _extended(path, raw)
        read.append(parent)
    return {**raw, **(overrides or {})}, read


def dirs(config_path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """results_dir and build_dir as `load` resolves them, from the sweep file alone (no kernel
    table, no schema): what `./harness sweep`'s up-to-date check needs before anything else."""
    path = Path(config_path)
    raw, _ = read_sweep(path, overrides)
    base = base_dir(path)
    return dir_value(raw, "results_dir", base), dir_value(raw, "build_dir", base)


def load(config_path: str | Path, overrides: dict[str, Any] | None = None) -> Sweep:
    """Read, validate and expand a sweep configuration; raise ConfigError on bad input."""
    path = Path(config_path)
    raw, _ = read_sweep(path, overrides)
    validate_doc(raw, "sweep.schema.yaml", path)
    base = base_dir(path)
    # A config kept elsewhere may still name the shipped table (configs/kernels.yaml).
    main_table = resolve_path(raw["kernel_table"], base)
    if not main_table.exists() and (REPO / raw["kernel_table"]).exists():
        main_table = REPO / raw["kernel_table"]
    tables = [main_table] + [
        resolve_path(p, path.resolve().parent) for p in raw.get("extra_kernel_tables", [])
    ]
    table = load_table(tables)

    vls = tuple(raw["vector_lengths"])
    for vl in vls:
        check_vl(vl, "vector_lengths")
    vls_builds = tuple(raw.get("vls_vector_lengths", []))
    for vl in vls_builds:
        check_vl(vl, "vls_vector_lengths")
        if vl not in VLS_ALLOWED:
            raise ConfigError(
                f"vls_vector_lengths: no VLS build at {vl} bits: -msve-vector-bits accepts only "
                f"{', '.join(map(str, VLS_ALLOWED))}; run {vl} with the VLA build (vector_lengths)"
            )
    cpu_models: dict[str, tuple[int, ...]] = {}
    for m in raw.get("cpu_models", [{"name": "max"}]):
        supported = CPU_MODEL_VLS[m["name"]]
        wanted = tuple(m.get("vector_lengths", [v for v in vls + vls_builds if v in supported]))
        for vl in wanted:
            check_vl(vl, f"cpu_models/{m['name']}")
            if vl not in supported:
                raise ConfigError(
                    f"cpu_models/{m['name']}: QEMU's {m['name']} model does not support VL {vl}; it supports {', '.join(map(str, supported))}"
                )
        cpu_models[m["name"]] = wanted

    for vl in vls_builds:
        if not any(vl in m for m in cpu_models.values()):
            raise ConfigError(
                f"vls_vector_lengths: the VLS build for {vl} bits runs only at {vl} bits, which no cpu model "
                f"runs ({', '.join(f'{k}: {list(v)}' for k, v in cpu_models.items())}); add it there or drop the build"
            )

    selections = [selection(table, s) for s in raw["kernels"]]
    compilers = list(raw.get("compilers", ["gcc"]))
    backends = list(raw.get("backends", ["qemu"]))
    sizes = {k: list(v) for k, v in (raw.get("sizes") or {}).items()}
    gem5 = gem5_section(raw["gem5"], compilers, sizes) if raw.get("gem5") else None
    if backends or gem5:  # a perf-only sweep has no count sizes
        _check_sizes(table, sizes, selections, linearity=bool(raw.get("linearity_check", True)))
    perf = perf_section(raw["perf"]) if raw.get("perf") else None
    if perf:
        _check_perf(perf, table, selections)

    results_dir = check_dir("results_dir", dir_value(raw, "results_dir", base))
    build_dir = check_dir("build_dir", dir_value(raw, "build_dir", base))
    sweep = Sweep(
        path=path,
        raw=raw,
        table=table,
        table_paths=tables,
        results_dir=results_dir,
        build_dir=build_dir,
        compilers=compilers,
        backends=backends,
        cpu_models=cpu_models,
        vector_lengths=vls,
        vls_vector_lengths=vls_builds,
        sizes={k: tuple(v) for k, v in sizes.items()},
        linearity_check=bool(raw.get("linearity_check", True)),
        selections=selections,
        figures=list(raw.get("figures", [])),
        checks=list(raw.get("checks", [])),
        time_limits=TimeLimits(**raw.get("time_limit", {})),
        gem5=gem5,
        perf=perf,
        regression=regression_section(raw["regression"]) if raw.get("regression") else None,
    )
    for fig in sweep.figures:
        for sel in fig["series"] + ([fig["baseline"]] if "baseline" in fig else []):
            _check_selector(table, sel, f"figures/{fig['name']}")
    for fig in sweep.figures:
        _check_compiler(sweep, fig.get("compiler"), f"figures/{fig['name']}")
    for chk in sweep.checks:
        for key in ("numerator", "denominator", "series"):
            if key in chk:
                _check_selector(table, chk[key], f"checks/{chk['id']}")
                _check_swept(sweep, chk[key], f"checks/{chk['id']}/{key}")
        _check_compiler(sweep, chk.get("compiler"), f"checks/{chk['id']}")
        for cond in chk.get("conditions", []):
            where = f"checks/{chk['id']}/conditions/{cond['line']}"
            for key in ("numerator", "denominator", "series"):
                if key in cond:
                    _check_selector(table, cond[key], where)
                    _check_swept(sweep, cond[key], f"{where}/{key}")
            _check_compiler(sweep, cond.get("compiler"), where)
            diff = condition_factors(sweep, chk, cond)
            if not diff:
                raise ConfigError(f"{where}: the same line as the check's own; change one factor (variant, compiler, ...)")
            if len(diff) > 1 and "factor" not in cond:
                raise ConfigError(
                    f"{where}: differs from the check's line in {len(diff)} factors ({', '.join(diff)}), so it does not "
                    "isolate one; pick a line that differs in one, or name the factor it stands for with factor:"
                )
    if gem5:
        for c in gem5.compilers:
            _check_compiler(sweep, c, "gem5/compilers")
    return sweep


def dir_value(raw: dict[str, Any], key: str, base: Path) -> Path:
    """results_dir or build_dir of the sweep. An empty value (`--set results_dir=`) resolved
    to the base directory itself: the repository root got logs/ and raw/."""
    value = raw.get(key, key.removesuffix("_dir"))
    if not str(value).strip():
        raise ConfigError(f"{key} is empty: give a directory (--set {key}=DIR) or leave it out for the default")
    return resolve_path(value, base)


def check_dir(key: str, path: Path) -> Path:
    """A results or build directory the workflow can use: Snakemake reads braces in a path as
    wildcards, QEMU's -plugin option splits the plugin path at ',' and '=', no part of the
    path may be an existing file or a dangling symbolic link (mkdir failed on it inside a job)."""
    text = str(path.resolve())
    bad = sorted({c for c in text if c in "{}" or (key == "build_dir" and c in ",=") or ord(c) < 32})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise ConfigError(f"{key} {text!r} contains {shown}, which the workflow cannot use in a path: choose another "
                          f"directory (--set {key}=DIR)")
    for p in (path, *path.parents):
        if p.is_symlink() and not p.exists():
            raise ConfigError(f"{key} {path}: {p} is a symbolic link to {os.readlink(p)}, which does not exist: "
                              f"create that directory, remove the link or choose another directory (--set {key}=DIR)")
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"{key} {path}: {p} is a file, not a directory: remove it or choose another "
                                  f"directory (--set {key}=DIR)")
            break
    return path


def check_writable(sweep: Sweep) -> None:
    """Commands that run jobs (sweep, count, bless, regress) write into results_dir and
    build_dir: a read-only one (or the nearest existing directory above it) is named here, before
    any job, not in a job's log that cannot be written. Reading commands (explain, report of a
    finished sweep) leave a read-only results folder alone."""
    for key, path in (("results_dir", sweep.results_dir), ("build_dir", sweep.build_dir)):
        existing = next(p for p in (path, *path.parents) if p.exists())
        # os.access also answers for a read-only mount, which binds root too.
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"{key} {path}: {existing} is read-only: make it writable or choose another directory "
                              f"(--set {key}=DIR)")

def condition_check(check: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    """A check's condition as a check of its own: the check with the condition's keys replaced."""
    over = {k: v for k, v in cond.items() if k not in ("line", "paper", "factor")}
    return {**{k: v for k, v in check.items() if k not in ("conditions", "line", "cause")}, **over}


# Fields of a kernel row that change its code or run (label, role and expect only describe it).
ROW_FACTORS = ("family", "source", "memcpy", "cflags", "params", "extra_sources")


def condition_factors(sweep: "Sweep", check: dict[str, Any], cond: dict[str, Any]) -> list[str]:
    """What a condition's line changes against its check's line: `compiler`, `backend`,
    `cpu_model`, and per selector the kernel-row fields that differ (e.g. `memcpy`); a
    selector on another kernel or op counts as one factor, named by the key."""
    out: list[str] = []
    for key in ("compiler", "backend", "cpu_model"):
        own = check.get(key, sweep.compilers[0] if key == "compiler" else None)
        if key in cond and cond[key] != own:
            out.append(f"{key} {own} vs {cond[key]}")
    for key in ("numerator", "denominator", "series"):
        a, b = check.get(key), cond.get(key)
        if not b or a == b:
            continue
        if not a or (a["kernel"], a.get("op"), a.get("dtype")) != (b["kernel"], b.get("op"), b.get("dtype")) \
                or "variant" not in a or "variant" not in b:
            out.append(f"{key} selector")
            continue
        ra, rb = sweep.table.row(a["kernel"], a["variant"]), sweep.table.row(b["kernel"], b["variant"])
        for f in ROW_FACTORS:
            if getattr(ra, f) != getattr(rb, f):
                shown = (ra.memcpy_symbol, rb.memcpy_symbol) if f == "memcpy" else \
                    (_short(getattr(ra, f)), _short(getattr(rb, f)))
                out.append(f"{key} {f} {shown[0]} vs {shown[1]}")
    return out


def _short(value: Any) -> Any:
    """A source path relative to the repository, for one-line messages."""
    return value.relative_to(REPO) if isinstance(value, Path) and value.is_relative_to(REPO) else value


def _check_compiler(sweep: "Sweep", compiler: str | None, where: str) -> None:
    if compiler is not None and compiler not in sweep.compilers:
        raise ConfigError(f"{where}: compiler {compiler} is not swept; add it to compilers ({', '.join(sweep.compilers)})")


def _extended(path: Path, raw: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """`extends: other.yaml`: that sweep's parameters, each top-level key given here replacing
    the other's whole (one level only, so a file says everything that differs); and its path."""
    parent_path = resolve_path(raw["extends"], base_dir(path))
    parent = _read_yaml(parent_path)
    if not isinstance(parent, dict):
        raise ConfigError(f"{parent_path}: expected a mapping of parameters")
    if "extends" in parent:
        raise ConfigError(f"{path}: extends {parent_path}, which extends another file; extend the last one directly")
    return {**parent, **{k: v for k, v in raw.items() if k != "extends"}}, parent_path


def load_gem5_systems(path: Path = GEM5_SYSTEMS) -> dict[str, dict[str, Any]]:
    """The gem5 system presets (configs/gem5_systems.yaml), validated."""
    doc = _read_yaml(path)
    validate_doc(doc, "gem5_systems.schema.yaml", path)
    return doc["systems"]


def gem5_section(g: dict[str, Any], compilers: list[str], sweep_sizes: dict[str, list[int]]) -> Gem5Section:
    systems = load_gem5_systems()
    vls = tuple(g.get("vector_lengths", GEM5_VLS))
    for vl in vls:
        check_vl(vl, "gem5/vector_lengths")
    chosen = {}
    for name in g.get("systems", ["paper"]):
        if name not in systems:
            raise ConfigError(f"gem5/systems: unknown system '{name}'; configs/gem5_systems.yaml has {', '.join(systems)}")
        if not [v for v in vls if v in systems[name]["vector_lengths"]]:
            raise ConfigError(f"gem5: system {name} supports none of the VLs asked for ({systems[name]['vector_lengths']})")
        chosen[name] = systems[name]
    sizes = {family: tuple(v) for family, v in (g.get("sizes") or {}).items()}
    for family, chosen_sizes in sizes.items():
        extra = sorted(set(chosen_sizes) - set(sweep_sizes.get(family, ())))
        if extra:
            raise ConfigError(f"gem5/sizes/{family}: {', '.join(map(str, extra))} not among the sweep's sizes of {family} "
                              f"({', '.join(map(str, sweep_sizes.get(family, ()))) or 'none'}); the cycle sweep simulates "
                              "a subset of what is counted")
    return Gem5Section(chosen, vls, tuple(g.get("compilers", compilers)), g.get("binary"), sizes)


def perf_section(p: dict[str, Any]) -> PerfSection:
    return PerfSection(
        perf=p.get("perf", "perf"), events=tuple(p["events"]), sve=p.get("sve", "auto"),
        host_baselines=bool(p.get("host_baselines", True)), vector_lengths=tuple(p.get("vector_lengths", PERF_VLS)),
        sizes={k: tuple(v) for k, v in p["sizes"].items()}, processes=int(p.get("processes", 30)),
        calls=int(p.get("calls", 10)), warmup=int(p.get("warmup", 2)), flush=dict(p.get("flush", {})),
        core=int(p.get("core", 0)), checks=list(p.get("checks", [])), figures=list(p.get("figures", [])),
    )


def regression_section(r: dict[str, Any]) -> RegressionSection:
    return RegressionSection(
        golden_dir=r.get("golden_dir", "results/golden"), metrics=tuple(r["metrics"]),
        tolerance=list(r.get("tolerance", [])), tolerance_sets=dict(r.get("tolerance_sets", {})),
        on_fingerprint_change=dict(r.get("on_fingerprint_change", {})),
    )


def _check_perf(p: PerfSection, table: KernelTable, selections: list[dict[str, Any]]) -> None:
    for vl in p.vector_lengths:
        check_vl(vl, "perf/vector_lengths")
    for key, fams in (("sizes", p.sizes), ("flush", p.flush)):
        for fam in fams:
            if fam not in table.families:
                raise ConfigError(f"perf/{key}: unknown family '{fam}'; known: {', '.join(table.families)}")
    for sel in selections:
        if sel["family"] not in p.sizes:
            raise ConfigError(f"perf/sizes: no size for family '{sel['family']}' (kernel {sel['kernel']}); add perf/sizes/{sel['family']}")
    _check_sizes(table, {k: list(v) for k, v in p.sizes.items()}, selections, "perf/sizes")
    for chk in p.checks:
        for key in ("numerator", "denominator"):
            _check_selector(table, chk[key], f"perf/checks/{chk['id']}")
    for fig in p.figures:
        for sel in fig["series"]:
            _check_selector(table, sel, f"perf/figures/{fig['name']}")
        if fig["kind"] == "bandwidth":
            for sel in fig["series"]:
                fam = table.selector_family(sel)
                if not fam.traffic:
                    raise ConfigError(f"perf/figures/{fig['name']}: family {fam.name} declares no traffic in the kernel table; bandwidth is undefined")


def _check_selector(table: KernelTable, sel: dict[str, Any], where: str) -> None:
    if sel["kernel"] not in table.kernels():
        raise ConfigError(f"{where}: unknown kernel '{sel['kernel']}'; known: {', '.join(table.kernels())}")
    if "variant" in sel:
        table.row(sel["kernel"], sel["variant"])


def _check_swept(sweep: Sweep, sel: dict[str, Any], where: str) -> None:
    """A check compares lines the sweep counts: a kernel or variant of the table that the sweep
    does not run has no data (and no cell for the summary to explain)."""
    swept = [s for s in sweep.selections if s["kernel"] == sel["kernel"]]
    if not swept:
        raise ConfigError(f"{where}: kernel {sel['kernel']} is not part of this sweep: add it under kernels: or remove "
                          "the check")
    if "variant" in sel and not any(sel["variant"] in s["variants"] for s in swept):
        raise ConfigError(f"{where}: {sel['kernel']} {sel['variant']} is not part of this sweep: add the variant to its "
                          "kernels: entry or remove the check")


def add_sweep_args(parser: "argparse.ArgumentParser") -> None:
    """The two options every stage's command line shares: the sweep file and overrides."""
    parser.add_argument("--sweep", "--config", dest="sweep", default="configs/default.yaml",
                        help="sweep configuration (YAML)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a top-level string parameter (results_dir, build_dir)")


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """`--set KEY=VALUE` options as a dict."""
    for kv in pairs:
        if "=" not in kv or not kv.split("=", 1)[0]:
            raise ConfigError(f"--set {kv}: write KEY=VALUE, e.g. --set results_dir=results/mine")
    return dict(kv.split("=", 1) for kv in pairs)


def load_from_args(ns: "argparse.Namespace") -> Sweep:
    return load(ns.sweep, parse_overrides(ns.set))
