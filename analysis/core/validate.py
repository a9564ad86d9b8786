"""What the schema cannot check: the sweep file against the kernel table, the CPU models, the
gem5 systems and itself (a check's conditions each isolate one factor, every line a check
compares is swept, sizes fit the kernels and this machine). Each problem is one line (ConfigError).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.core.kernels import (
    CPU_MODEL_VLS, DTYPE_SIZE, NO_OP, SIZE_MAX, VLS_ALLOWED, KernelTable, Machine, Selector, check_size_fits, check_vl,
)
from analysis.core.model import PerfSection, Selection, Sweep
from analysis.core.schema import REPO, ConfigError

SELECTOR_KEYS = ("numerator", "denominator", "series")


def vls_builds(vls: tuple[int, ...]) -> None:
    for vl in vls:
        check_vl(vl, "vls_vector_lengths")
        if vl not in VLS_ALLOWED:
            raise ConfigError(
                f"vls_vector_lengths: no VLS build at {vl} bits: -msve-vector-bits accepts only "
                f"{', '.join(map(str, VLS_ALLOWED))}; run {vl} with the VLA build (vector_lengths)"
            )


def cpu_models(docs: list[dict[str, Any]], vls: tuple[int, ...], vls_builds: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """Each CPU model's VLs (default: every VL of the sweep the model supports), checked."""
    out: dict[str, tuple[int, ...]] = {}
    for m in docs:
        supported = CPU_MODEL_VLS[m["name"]]
        wanted = tuple(m["vector_lengths"]) if "vector_lengths" in m else tuple(v for v in vls + vls_builds if v in supported)
        for vl in wanted:
            check_vl(vl, f"cpu_models/{m['name']}")
            if vl not in supported:
                raise ConfigError(
                    f"cpu_models/{m['name']}: QEMU's {m['name']} model does not support VL {vl}; it supports {', '.join(map(str, supported))}"
                )
        out[m["name"]] = wanted
    for vl in vls_builds:
        if not any(vl in v for v in out.values()):
            raise ConfigError(
                f"vls_vector_lengths: the VLS build for {vl} bits runs only at {vl} bits, which no cpu model "
                f"runs ({', '.join(f'{k}: {list(v)}' for k, v in out.items())}); add it there or drop the build"
            )
    return out


def selection(table: KernelTable, sel: dict[str, Any]) -> Selection:
    """One entry of `kernels` (or a one-cell request in its form), checked and expanded: omitted
    variants are all of the kernel's, omitted ops all of the family's, omitted dtypes each op's
    (reductions) or the family's first."""
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
    return Selection(kernel, tuple(variants), tuple(pairs), fam.name, sel.get("time_limit"))


def sizes(table: KernelTable, by_family: dict[str, list[int]], selections: list[Selection], where: str = "sizes",
          linearity: bool = False, machine: Machine | None = None) -> None:
    for fam_name, values in by_family.items():
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
                            " (the linearity check also runs twice the size)" if linearity else "", machine)
    for sel in selections:
        fam = table.families[sel.family]
        if fam.name not in by_family:
            raise ConfigError(f"{where}: no size for family '{fam.name}' (kernel {sel.kernel}); add {where}/{fam.name}")
        for _, dtype in sel.op_dtypes:
            unit = DTYPE_SIZE[dtype] * int(fam.params.get("blocklen", 1))
            for s in by_family[fam.name]:
                if s % unit:
                    raise ConfigError(
                        f"{where}/{fam.name}: {s} bytes is not a multiple of {unit} (one block of {dtype}) for kernel {sel.kernel}"
                    )


def gem5_systems(g: dict[str, Any], systems: dict[str, dict[str, Any]], sweep_sizes: dict[str, list[int]]) -> None:
    for vl in g["vector_lengths"]:
        check_vl(vl, "gem5/vector_lengths")
    s = g["sampling"]
    if s["period"] < s["warmup"] + s["unit"]:
        raise ConfigError(f"gem5/sampling: period {s['period']} is shorter than warmup + unit ({s['warmup'] + s['unit']}): "
                          "each period holds one warmed-up unit")
    if s["prefix"] < 2 * s["period"]:
        raise ConfigError(f"gem5/sampling: prefix {s['prefix']} is shorter than 2 periods ({2 * s['period']}): the "
                          "prefix's periods are the sample when the ROI is too short for 2 units after it")
    for name in g["systems"]:
        if name not in systems:
            raise ConfigError(f"gem5/systems: unknown system '{name}'; configs/gem5_systems.yaml has {', '.join(systems)}")
        if not [v for v in g["vector_lengths"] if v in systems[name]["vector_lengths"]]:
            raise ConfigError(f"gem5: system {name} supports none of the VLs asked for ({systems[name]['vector_lengths']})")
    for family, chosen_sizes in g["sizes"].items():
        extra = sorted(set(chosen_sizes) - set(sweep_sizes.get(family, ())))
        if extra:
            raise ConfigError(f"gem5/sizes/{family}: {', '.join(map(str, extra))} not among the sweep's sizes of {family} "
                              f"({', '.join(map(str, sweep_sizes.get(family, ()))) or 'none'}); the cycle sweep simulates "
                              "a subset of what is counted")


def perf(p: PerfSection, table: KernelTable, selections: list[Selection]) -> None:
    for vl in p.vector_lengths:
        check_vl(vl, "perf/vector_lengths")
    for key, fams in (("sizes", p.sizes), ("flush", p.flush)):
        for fam in fams:
            if fam not in table.families:
                raise ConfigError(f"perf/{key}: unknown family '{fam}'; known: {', '.join(table.families)}")
    for sel in selections:
        if sel.family not in p.sizes:
            raise ConfigError(f"perf/sizes: no size for family '{sel.family}' (kernel {sel.kernel}); add perf/sizes/{sel.family}")
    sizes(table, {k: list(v) for k, v in p.sizes.items()}, selections, "perf/sizes")
    for chk in p.checks:
        for s in (chk.numerator, chk.denominator):
            selector(table, s, f"perf/checks/{chk.id}")
    for fig in p.figures:
        for s in fig.series:
            selector(table, s, f"perf/figures/{fig.name}")
        if fig.kind == "bandwidth":
            for s in fig.series:
                fam = table.selector_family(s)
                if not fam.traffic:
                    raise ConfigError(f"perf/figures/{fig.name}: family {fam.name} declares no traffic in the kernel table; bandwidth is undefined")


def selector(table: KernelTable, sel: Selector, where: str) -> None:
    if sel.kernel not in table.kernels():
        raise ConfigError(f"{where}: unknown kernel '{sel.kernel}'; known: {', '.join(table.kernels())}")
    if sel.variant is not None:
        table.row(sel.kernel, sel.variant)


def swept(sweep: Sweep, sel: Selector, where: str) -> None:
    """A check compares lines the sweep counts: a kernel or variant of the table that the sweep
    does not run has no data (and no cell for the summary to explain)."""
    found = [s for s in sweep.selections if s.kernel == sel.kernel]
    if not found:
        raise ConfigError(f"{where}: kernel {sel.kernel} is not part of this sweep: add it under kernels: or remove "
                          "the check")
    if sel.variant is not None and not any(sel.variant in s.variants for s in found):
        raise ConfigError(f"{where}: {sel.kernel} {sel.variant} is not part of this sweep: add the variant to its "
                          "kernels: entry or remove the check")


def compiler(sweep: Sweep, name: str | None, where: str) -> None:
    if name is not None and name not in sweep.compilers:
        raise ConfigError(f"{where}: compiler {name} is not swept; add it to compilers ({', '.join(sweep.compilers)})")


def figures(sweep: Sweep, docs: list[dict[str, Any]]) -> None:
    for fig in docs:
        for sel in fig["series"] + ([fig["baseline"]] if "baseline" in fig else []):
            selector(sweep.table, Selector.of(sel), f"figures/{fig['name']}")
    for fig in docs:
        compiler(sweep, fig.get("compiler"), f"figures/{fig['name']}")


def checks(sweep: Sweep, docs: list[dict[str, Any]]) -> None:
    for chk in docs:
        for key in SELECTOR_KEYS:
            if key in chk:
                selector(sweep.table, Selector.of(chk[key]), f"checks/{chk['id']}")
                swept(sweep, Selector.of(chk[key]), f"checks/{chk['id']}/{key}")
        compiler(sweep, chk.get("compiler"), f"checks/{chk['id']}")
        for cond in chk["conditions"]:
            where = f"checks/{chk['id']}/conditions/{cond['line']}"
            for key in SELECTOR_KEYS:
                if key in cond:
                    selector(sweep.table, Selector.of(cond[key]), where)
                    swept(sweep, Selector.of(cond[key]), f"{where}/{key}")
            compiler(sweep, cond.get("compiler"), where)
            diff = condition_factors(sweep, chk, cond)
            if not diff:
                raise ConfigError(f"{where}: the same line as the check's own; change one factor (variant, compiler, ...)")
            if len(diff) > 1 and "factor" not in cond:
                raise ConfigError(
                    f"{where}: differs from the check's line in {len(diff)} factors ({', '.join(diff)}), so it does not "
                    "isolate one; pick a line that differs in one, or name the factor it stands for with factor:"
                )


def condition_doc(check: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    """A check's condition as a check of its own: the check with the condition's keys replaced."""
    over = {k: v for k, v in cond.items() if k not in ("line", "paper", "factor")}
    return {**{k: v for k, v in check.items() if k not in ("conditions", "line", "cause")}, **over}


# Fields of a kernel row that change its code or run (label, role and expect only describe it).
ROW_FACTORS = ("family", "source", "memcpy", "cflags", "params", "extra_sources")


def condition_factors(sweep: Sweep, check: dict[str, Any], cond: dict[str, Any]) -> list[str]:
    """What a condition's line changes against its check's line (both as the sweep file states
    them): `compiler`, `backend`, `cpu_model`, and per selector the kernel-row fields that differ
    (e.g. `memcpy`); a selector on another kernel or op counts as one factor, named by the key."""
    out: list[str] = []
    for key in ("compiler", "backend", "cpu_model"):
        own = check.get(key, sweep.compilers[0] if key == "compiler" else None)
        if key in cond and cond[key] != own:
            out.append(f"{key} {own} vs {cond[key]}")
    for key in SELECTOR_KEYS:
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
