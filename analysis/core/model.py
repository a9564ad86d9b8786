"""The sweep as typed objects, built once from the validated sweep file (analysis.core.config).

Every default is the schema's (configs/schema/sweep.schema.yaml), already written into the
document when these are built; what a figure or check takes from the sweep when it names none
(the first compiler, counting backend and CPU model) is resolved here, once. Below
analysis/core the configuration is read through these attributes only, never as a dict.
"""
from __future__ import annotations

import fnmatch
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from analysis.core import perf_cells
from analysis.core.checks import Check
from analysis.core.kernels import NOSVE, KernelRow, KernelTable, Selector, parse_build, run_params
from analysis.core.run import Run


@dataclass(frozen=True)
class Firsts:
    """What a figure or check reads when it names no compiler, backend or CPU model: the sweep's
    first; a gem5 line's system is the cycle sweep's first (None: the sweep has no cycle sweep,
    so such a line has no rows)."""
    compiler: str
    backend: str
    cpu_model: str
    gem5_system: str | None

    def cpu_for(self, backend: str) -> str | None:
        return self.gem5_system if backend == "gem5" else self.cpu_model


@dataclass(frozen=True)
class Selection:
    """One entry of the sweep's `kernels`, expanded: the variants and op/dtype pairs it runs."""
    kernel: str
    variants: tuple[str, ...]
    op_dtypes: tuple[tuple[str, str], ...]
    family: str
    time_limit: float | None  # seconds per run, replacing the sweep's time_limit for these rows


@dataclass(frozen=True)
class CountFigure:
    """A figure of the counts table (sweep parameter figures): a metric against VL, one line per
    variant of each series, and a ratio figure against `baseline` when there is one."""
    name: str
    title: str
    series: tuple[Selector, ...]
    baseline: Selector | None
    metric: str
    backend: str
    cpu_model: str | None
    compiler: str
    ylabel: str | None
    scale: float
    ratio_table: bool

    @property
    def is_gem5(self) -> bool:
        return self.backend == "gem5"

    def selectors(self) -> list[Selector]:
        return [*self.series, *([self.baseline] if self.baseline else [])]


def count_figure(doc: dict[str, Any], firsts: Firsts) -> CountFigure:
    backend = doc.get("backend", firsts.backend)
    return CountFigure(
        doc["name"], doc["title"], tuple(Selector.of(s) for s in doc["series"]),
        Selector.of(doc["baseline"]) if "baseline" in doc else None, doc["metric"], backend,
        doc.get("cpu_model", firsts.cpu_for(backend)), doc.get("compiler", firsts.compiler), doc.get("ylabel"),
        doc["scale"], doc["ratio_table"],
    )


@dataclass(frozen=True)
class PerfCheck:
    """A timing claim (perf: checks): mean(numerator) / mean(denominator) of a metric per VL."""
    id: str
    figure: int
    claim: str
    numerator: Selector
    denominator: Selector
    metric: str
    vector_lengths: tuple[int, ...] | None  # None: every SVE VL measured
    size: int | None  # None: the family's largest perf size
    target: float
    tolerance: float

    def evaluate(self, ratio: float) -> bool:
        return abs(ratio / self.target - 1) <= self.tolerance


@dataclass(frozen=True)
class PerfFigure:
    """A figure of the perf table (perf: figures): time or bandwidth against message size."""
    name: str
    title: str
    kind: str  # time | bandwidth
    series: tuple[Selector, ...]
    vl: int | None  # None: a panel per VL measured


@dataclass(frozen=True)
class TimeLimits:
    """How long one run may take (sweep parameter time_limit)."""
    base_seconds: float
    seconds_per_mib: float
    gem5_factor: float  # gem5's O3 core is that much slower than QEMU


@dataclass(frozen=True)
class Gem5System:
    """A system of configs/gem5_systems.yaml: the VLs it simulates, and its whole description,
    which the gem5 script reads (handed over as it is)."""
    name: str
    vector_lengths: tuple[int, ...]
    description: dict[str, Any]


def system_has_caches(description: dict[str, Any]) -> bool:
    """Whether a gem5 system description has data caches: L1D and L2 come together or not at
    all (configs/schema/gem5_systems.schema.yaml); without them the gem5 script puts the core's
    data port on the memory bus and gem5 prints no data cache statistics."""
    return "l1d" in description


@dataclass(frozen=True)
class Gem5Sampling:
    """The sampled cycle mode's units, in instructions (sweep parameter gem5/sampling)."""
    unit: int
    warmup: int
    period: int
    prefix: int
    growth: int  # the period doubles after every this many units (0: never)


@dataclass(frozen=True)
class Gem5Section:
    """The cycle sweep (sweep parameter gem5); the Sweep has none when the file has none."""
    systems: dict[str, Gem5System]  # the chosen systems by name, in the sweep file's order
    vector_lengths: tuple[int, ...]
    compilers: tuple[str, ...]
    binary: str | None  # the gem5 executable, when not from GEM5 or the built cache
    # Sizes per family to simulate, where the cycle sweep takes fewer than the sweep counts (a
    # family absent here: the sweep's sizes).
    sizes: dict[str, tuple[int, ...]]
    mode: str = "full"  # full | sampled
    sampling: Gem5Sampling | None = None  # mode sampled: its units


@dataclass(frozen=True)
class SimengSection:
    """SimEng's cycle sweep (sweep parameter simeng); the Sweep has none when the file has none."""
    binary: str | None  # the simeng executable, when not from SIMENG or the built cache
    config: str  # a configuration of SimEng's configs/ by name, or a yaml's path
    vector_lengths: tuple[int, ...]
    compilers: tuple[str, ...]
    sizes: dict[str, tuple[int, ...]]  # per family, where it runs other sizes than the sweep's
    time_factor: float  # a run's time limit is the sweep's times this


def simeng_section(s: dict[str, Any], compilers: list[str]) -> SimengSection:
    return SimengSection(s["binary"], s["config"], tuple(s["vector_lengths"]), tuple(s.get("compilers", compilers)),
                         {family: tuple(v) for family, v in s["sizes"].items()}, float(s["time_factor"]))


@dataclass(frozen=True)
class PerfSection:
    """Native runs under perf (sweep parameter perf)."""
    perf: str
    events: tuple[str, ...]
    sve: str  # auto | guest | off
    host_baselines: bool
    vector_lengths: tuple[int, ...]
    sizes: dict[str, tuple[int, ...]]
    processes: int
    guest_processes: int | None  # per cell in the emulated guest; None: processes
    calls: int
    warmup: int
    flush: dict[str, int]  # bytes streamed through before every call, per family
    core: int
    checks: tuple[PerfCheck, ...]
    figures: tuple[PerfFigure, ...]


def perf_section(p: dict[str, Any]) -> PerfSection:
    checks = tuple(PerfCheck(
        c["id"], c["figure"], c["claim"], Selector.of(c["numerator"]), Selector.of(c["denominator"]), c["metric"],
        tuple(c["vector_lengths"]) if "vector_lengths" in c else None, c.get("size"), c["target"], c["tolerance"],
    ) for c in p["checks"])
    figures = tuple(PerfFigure(f["name"], f["title"], f["kind"], tuple(Selector.of(s) for s in f["series"]), f.get("vl"))
                    for f in p["figures"])
    return PerfSection(
        perf=p["perf"], events=tuple(p["events"]), sve=p["sve"], host_baselines=p["host_baselines"],
        vector_lengths=tuple(p["vector_lengths"]), sizes={k: tuple(v) for k, v in p["sizes"].items()},
        processes=p["processes"], guest_processes=p.get("guest_processes"), calls=p["calls"], warmup=p["warmup"], flush=dict(p["flush"]), core=p["core"],
        checks=checks, figures=figures,
    )


@dataclass(frozen=True)
class ToleranceRule:
    """A relative tolerance for the values whose kernel, variant and metric match its patterns."""
    kernel: str
    variant: str
    metric: str
    relative: float

    def matches(self, kernel: str, variant: str, metric: str) -> bool:
        return all(fnmatch.fnmatchcase(value, pattern) for value, pattern in
                   ((kernel, self.kernel), (variant, self.variant), (metric, self.metric)))


def tolerance_rules(docs: list[dict[str, Any]]) -> tuple[ToleranceRule, ...]:
    return tuple(ToleranceRule(r["kernel"], r["variant"], r["metric"], r["relative"]) for r in docs)


@dataclass(frozen=True)
class RegressionSection:
    """The golden counts a sweep is checked against (sweep parameter regression)."""
    golden_dir: str
    metrics: tuple[str, ...]
    tolerance: tuple[ToleranceRule, ...]
    tolerance_sets: dict[str, tuple[ToleranceRule, ...]]
    on_fingerprint_change: dict[str, str]  # fingerprint part -> the name of its tolerance set


def regression_section(r: dict[str, Any]) -> RegressionSection:
    return RegressionSection(
        golden_dir=r["golden_dir"], metrics=tuple(r["metrics"]), tolerance=tolerance_rules(r["tolerance"]),
        tolerance_sets={name: tolerance_rules(rules) for name, rules in r["tolerance_sets"].items()},
        on_fingerprint_change=dict(r["on_fingerprint_change"]),
    )


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
    selections: list[Selection]
    # The count figures and checks; none in a sweep without a counting backend (it counts nothing).
    figures: list[CountFigure]
    checks: list[Check]
    time_limits: TimeLimits
    gem5: Gem5Section | None = None
    simeng: SimengSection | None = None
    perf: PerfSection | None = None
    regression: RegressionSection | None = None
    # Each backend's section as the sweep file states it (its schema's defaults written in), by
    # backend name: what a backend without a typed section above reads (docs/extending/backend.md).
    sections: dict[str, Any] = field(default_factory=dict)

    def builds(self) -> list[str]:
        return ["vla"] + [f"vls{n}" for n in self.vls_vector_lengths]

    def build_vls(self) -> list[tuple[str, tuple[int, ...] | None]]:
        """The cross builds and the VLs each runs at (None: the sweep's vector_lengths)."""
        return [(b, (n,) if (n := parse_build(b).vls_bits) else None) for b in self.builds()]

    def selects(self, kernel: str, variant: str) -> bool:
        """Whether the sweep's selections include this kernel row."""
        return any(sel.kernel == kernel and variant in sel.variants for sel in self.selections)

    def selection_of(self, kernel: str, variant: str | None = None) -> Selection:
        """The selection that runs this kernel (and variant, when given)."""
        return next(s for s in self.selections if s.kernel == kernel and (variant is None or variant in s.variants))

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
                sel.variants, compilers, builds, cpus.items()
            ):
                row = self.table.row(sel.kernel, variant)
                actual = build_for(row, build)
                if actual is None:
                    continue
                vls = [v for v in (build_vls or self.vector_lengths) if cpu_vls is None or v in cpu_vls]
                if not vls:
                    continue
                sve = actual != NOSVE
                runs = tuple(
                    Run(vl, size, op, dtype, run_params(self.table, row, op, dtype), sve=sve)
                    for vl in vls for op, dtype in sel.op_dtypes for size in sizes(row.family)
                )
                jobs.append(Job(Binary(compiler, actual, backend, row.kernel, row.variant), cpu, runs))
        return jobs

    def jobs(self) -> list[Job]:
        """The count backends' jobs (parameter backends)."""
        return [j for b in self.backends for j in self.count_jobs(b)]

    def count_jobs(self, backend: str, perf_reference: bool = False) -> list[Job]:
        """One instruction-counting backend's jobs (QEMU's clients, ArmIE's): every cross build
        at every CPU model, each size with its baseline (0) and, for the linearity check, its
        double; none when the sweep does not use it. `perf_reference`: the backend is the one perf's
        instruction counts are compared with (the sweep's first counting backend), so its jobs
        also count perf's SVE cells at perf's sizes where the sweep plans them (perf_cells.with_perf_cells)."""
        if backend not in self.backends:
            return []
        jobs = self.expand(backend, self.compilers, self.build_vls(), dict(self.cpu_models), self.run_sizes)
        return perf_cells.with_perf_cells(self, jobs) if perf_reference and perf_cells.sve_planned(self) else jobs

    def time_limit(self, kernel: str, variant: str, size: int, factor: float = 1.0) -> float:
        """Seconds one run may take before it is killed: the kernel selection's own limit, else
        derived from the size (the instruction count grows with it) times the backend's
        slowness `factor`."""
        for sel in self.selections:
            if sel.kernel == kernel and variant in sel.variants and sel.time_limit:
                return float(sel.time_limit)
        t = self.time_limits
        return float((t.base_seconds + t.seconds_per_mib * size / (1 << 20)) * factor)

    def measured_sizes(self) -> dict[tuple[str, str], tuple[int, ...]]:
        """The sweep's sizes (parameter sizes) of each (kernel, variant) it selects: the sizes its
        figures, checks and linearity check read (a count job may hold more: perf_cells)."""
        return {(sel.kernel, v): self.sizes.get(sel.family, ()) for sel in self.selections for v in sel.variants}

    def run_sizes(self, family: str) -> list[int]:
        sizes = {0}
        for s in self.sizes[family]:
            sizes.add(s)
            if self.linearity_check:
                sizes.add(2 * s)
        return sorted(sizes)
