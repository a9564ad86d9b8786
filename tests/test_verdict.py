"""The verdict table: the decision on evaluated lines, the isolating-pair rules of the sweep
file, and the summary built in-process from a synthetic table."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from analysis.core import config
from analysis.stages import checks, series, summary
from analysis.stages.verdict import Line, decide
from conftest import REPO

DEFAULT = REPO / "configs" / "default.yaml"
OWN_FAIL = Line("gcc: blocks_call", False, "12 %")
GENERIC = Line("per-block __memcpy_generic", True, "0 %", "series memcpy memcpy vs __memcpy_generic", paper=True)
CLANG_OK = Line("clang 14", True, "0.7", "compiler gcc vs clang")
CLANG_NO = Line("clang 14", False, "1.2", "compiler gcc vs clang")


def test_own_line_reproducing_is_reproduced_without_pair() -> None:
    v = decide(Line("gcc", True, "4.0"), [CLANG_NO])
    assert (v.verdict, v.pair) == ("reproduced", None)


def test_paper_condition_reproducing_names_the_line_and_the_pair() -> None:
    v = decide(OWN_FAIL, [CLANG_NO, GENERIC], cause="ignored when a paper line reproduces it")
    assert v.verdict == "reproduced under the paper's conditions: per-block __memcpy_generic"
    assert v.pair == (OWN_FAIL, GENERIC)
    assert v.text().endswith("Pair (series memcpy memcpy vs __memcpy_generic): gcc: blocks_call = 12 %; "
                             "per-block __memcpy_generic = 0 %")


def test_other_line_reproducing_is_a_difference_with_that_pair() -> None:
    v = decide(OWN_FAIL, [CLANG_OK], cause="GCC vectorizes the element-wise loop as tightly as ACLE")
    assert v.verdict == "differs: GCC vectorizes the element-wise loop as tightly as ACLE; reproduced with clang 14"
    assert v.pair == (OWN_FAIL, CLANG_OK)


def test_nothing_reproducing_differs_with_the_first_pair_that_ran() -> None:
    nodata = Line("clang 14 (gem5)", None, "no data", "compiler gcc vs clang")
    v = decide(OWN_FAIL, [nodata, CLANG_NO], cause="the per-block memcpy costs more here")
    assert v.verdict == "differs: the per-block memcpy costs more here"
    assert v.pair == (OWN_FAIL, CLANG_NO)


def test_no_pair_is_never_a_bare_fail() -> None:
    v = decide(OWN_FAIL, [])
    assert v.pair is None and v.verdict.startswith("differs: cause not isolated")
    assert decide(OWN_FAIL, [Line("x", None, "no data", "f")]).verdict.startswith("differs: cause not isolated")


def test_not_run() -> None:
    v = decide(Line("gcc", None, "-"), [GENERIC], not_run="gem5 not found")
    assert (v.verdict, v.pair) == ("not run: gem5 not found", None)


def _with_checks(tmp_path: Path, checks: list[dict]) -> Path:
    import yaml

    raw = yaml.safe_load(DEFAULT.read_text())
    raw["checks"] = checks
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    return tmp_path / "s.yaml"


FLAT = {"id": "f", "figure": 4, "claim": "flat", "kind": "flat", "series": {"kernel": "pack", "variant": "blocks_call"}}


@pytest.mark.parametrize("cond, needle", [
    ({"line": "same", "series": {"kernel": "pack", "variant": "blocks_call"}}, "the same line as the check's own"),
    ({"line": "two", "series": {"kernel": "pack", "variant": "blocks_generic"}, "compiler": "clang"},
     r"differs from the check's line in 2 factors \(compiler gcc vs clang, series memcpy memcpy vs __memcpy_generic\)"),
    ({"line": "cc", "compiler": "gcc"}, "the same line"),
])
def test_a_condition_must_isolate_one_factor(tmp_path: Path, cond: dict, needle: str) -> None:
    with pytest.raises(config.ConfigError, match=needle):
        config.load(_with_checks(tmp_path, [{**FLAT, "conditions": [cond]}]))


def test_a_declared_factor_names_a_wider_pair(tmp_path: Path) -> None:
    cond = {"line": "two", "series": {"kernel": "pack", "variant": "blocks_generic"}, "compiler": "clang",
            "factor": "paper-era memcpy with clang"}
    (built,) = config.load(_with_checks(tmp_path, [{**FLAT, "conditions": [cond]}])).checks[0].conditions
    assert (built.line, built.factor, built.paper) == ("two", "paper-era memcpy with clang", False)
    assert (built.check.compiler, built.check.selectors()) == ("clang", {"series": config.Selector("pack", "blocks_generic")})


def test_a_condition_compiler_must_be_swept(tmp_path: Path) -> None:
    import yaml

    path = _with_checks(tmp_path, [{**FLAT, "conditions": [{"line": "clang", "compiler": "clang"}]}])
    raw = yaml.safe_load(path.read_text())
    raw["compilers"] = ["gcc"]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(config.ConfigError, match="compiler clang is not swept"):
        config.load(path)


def _counts(values: dict[tuple[str, str, str], dict[int, int]]) -> pd.DataFrame:
    """A tidy table with roi_net.total of (kernel, variant, compiler) per VL, paper sizes."""
    rows = []
    for (kernel, variant, compiler), per_vl in values.items():
        size = 4194304 if kernel == "reduce" else 1048576
        op, dtype = ("max", "float") if kernel == "reduce" else ("-", "float")
        for vl, v in per_vl.items():
            rows.append({"kernel": kernel, "variant": variant, "op": op, "dtype": dtype, "layout": "x", "build": "vla",
                         "cpu_model": "max", "backend": "qemu", "compiler": compiler, "vl": vl, "size": size,
                         "metric": "roi_net.total", "value": v})
    return pd.DataFrame(rows)


def _shipped_summary(tmp_path: Path) -> str:
    """summary.md of the shipped Fig. 4, 5 and 6 checks on synthetic counts: a zig-zagging IFUNC
    line beside a flat paper-era line, a GCC/clang pair where neither reproduces 0.66, and a
    cycle check without gem5 rows."""
    sweep = config.load(DEFAULT)
    vls = [128, 256, 384, 512]
    counts = _counts({
        ("pack", "blocks_call", "gcc"): {vl: 7_000_000 if (vl // 8) & 16 else 6_200_000 for vl in vls},
        ("pack", "blocks_generic", "gcc"): {vl: 6_815_751 for vl in vls},
        ("pack", "blocks_call", "clang"): {vl: 7_000_000 if (vl // 8) & 16 else 6_200_000 for vl in vls},
        ("reduce", "acle", "gcc"): {vl: 8 * 4194304 * 8 // vl for vl in vls},
        ("reduce", "c_autovec", "gcc"): {vl: 8 * 4194304 * 8 // vl for vl in vls},
        ("reduce", "acle", "clang"): {vl: 8 * 4194304 * 8 // vl for vl in vls},
        ("reduce", "c_autovec", "clang"): {vl: 13 * 4194304 * 8 // (2 * vl) for vl in vls},
    })
    prov = pd.DataFrame(columns=["kernel", "variant", "size", "roi_symbol"])
    by_id = {c.id: c for c in sweep.checks}
    sweep.checks = [by_id["fig4_baseline_flat"],
                    dataclasses.replace(by_id["fig6_ratio"], cause="both compilers vectorize the element-wise loop as tightly as ACLE"),
                    by_id["fig5_speedup"]]
    rows = [checks.claim(c, counts, prov, sweep, ran={"qemu"}) for c in sweep.checks]
    out = tmp_path / "summary.md"
    summary.write_summary(rows, counts, out, sweep)
    return out.read_text()


def test_summary_opens_with_the_verdict_table(tmp_path: Path) -> None:
    text = _shipped_summary(tmp_path)
    table = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert table[0] == "| claim | paper | ours | verdict | evidence |"
    assert table[2].startswith("| Fig. 4: memcpy block by block: count constant across VL | constant | max/min - 1 = 12.903% | "
                               "reproduced under the paper's conditions: per-block __memcpy_generic (paper-era). Pair "
                               "(series memcpy memcpy vs __memcpy_generic): ")
    assert table[2].endswith("per-block __memcpy_generic (paper-era) = max/min - 1 = 0.000% | QEMU plugins |")
    assert "| differs: both compilers vectorize the element-wise loop as tightly as ACLE. Pair (compiler gcc vs clang): " \
           "GCC 12: ACLE / element-wise = 1 .. 1 (VL 128 .. 128); clang 14: ACLE / element-wise = 1.23 .. 1.23" in table[3]
    assert table[4].endswith("| not run: gem5 not found, the cycle sweep did not run | gem5 |")
    assert "FAIL |" not in "\n".join(table[:5])


def test_the_summary_never_judges_a_check_twice(tmp_path: Path) -> None:
    """Below the verdict table the checks' own numbers sat beside a bare FAIL (and the reasons
    said '(FAIL)'), which read as a second verdict contradicting 'reproduced under the paper's
    conditions': every place that names a check's result gives its verdict."""
    text = _shipped_summary(tmp_path)
    cells = [c.strip() for ln in text.splitlines() if ln.startswith("|") for c in ln.strip("|").split("|")]
    assert "FAIL" not in cells and "pass" not in cells and "skipped" not in cells
    assert "(FAIL)" not in text and "(skipped)" not in text
    check_table = text.split("| check | fig |")[1].split("\n\n")[0]
    rows = {ln.split(" | ")[0]: ln for ln in check_table.splitlines() if ln.startswith("| fig")}
    assert rows["| fig4_baseline_flat"].endswith(
        "| max/min - 1 = 12.903% | reproduced under the paper's conditions: per-block __memcpy_generic (paper-era) |")
    assert rows["| fig6_ratio"].endswith(
        "| differs: both compilers vectorize the element-wise loop as tightly as ACLE |")
    assert rows["| fig5_speedup"].endswith("| - | not run: gem5 not found, the cycle sweep did not run |")
    assert "- **fig4_baseline_flat** (reproduced under the paper's conditions): " in text
    assert "- **fig6_ratio** (differs): " in text and "- **fig5_speedup** (not run): " in text


def test_gem5_plan_has_the_paper_era_lines_for_gcc_only() -> None:
    """The cycle checks (Fig. 3, 5, 7) read the paper-era lines: they are in the gem5 plan,
    at VL 128..2048, GCC's objects only (the compiler axis is a count question)."""
    from analysis.backends import gem5

    sweep = config.load(DEFAULT)
    jobs = gem5.jobs(sweep, None)
    assert {j.binary.compiler for j in jobs} == {"gcc"}
    names = {j.binary.name for j in jobs}
    assert {"pack-blocks_generic", "unpack-blocks_generic", "copy-memcpy_a64fx", "pack-blocks_call"} <= names
    assert {r.vl for j in jobs for r in j.runs} == {128, 256, 512, 1024, 2048}
    gem5_checks = {c.id: c for c in sweep.checks if c.is_gem5}
    assert {"fig3_speedup_vl128", "fig3_speedup_overall", "fig5_speedup", "fig5_unpack_speedup", "fig7_speedup"} \
        <= set(gem5_checks)
    paper = [x.check.selectors()["numerator"].variant for c in gem5_checks.values() for x in c.conditions if x.paper]
    assert paper == ["blocks_generic", "blocks_generic"]
    # Measured with gem5 v24.0.0.1: where a cycle claim differs, its verdict names the cause, never
    # "see the pair" alone.
    assert [c.id for c in gem5_checks.values() if not c.cause] == []


def test_an_mpi_claim_is_data(tmp_path: Path) -> None:
    """An Open MPI claim takes a verdict the same way: a check on the MPI rows and a condition
    naming the other line (here the stock op vs the ACLE user op: the kernel source differs)."""
    import yaml

    raw = yaml.safe_load((REPO / "configs" / "mpi.yaml").read_text())
    chk = {"id": "fig10", "figure": 10, "claim": "50% fewer at VL 128", "kind": "ratio", "vl": 128, "target": 2.0,
           "numerator": {"kernel": "mpi_reduce", "variant": "stock"},
           "denominator": {"kernel": "mpi_reduce", "variant": "c_scalar"},
           "conditions": [{"line": "SVE user op", "denominator": {"kernel": "mpi_reduce", "variant": "acle"},
                           "factor": "the user op: element-wise C kept scalar vs ACLE"}]}
    raw["checks"] = [chk]
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(raw))
    sweep = config.load(tmp_path / "m.yaml")
    factors = config.condition_factors(sweep, chk, chk["conditions"][0])
    assert factors[0] == "denominator source kernels/reduce/elementwise.c vs kernels/reduce/acle.c"
    assert factors[1].startswith("denominator cflags ")
    assert sweep.checks[0].conditions[0].factor == "the user op: element-wise C kept scalar vs ACLE"


# --- every check kind, in-process on synthetic counts: one case that passes, one that fails ---

VLS = [128, 256, 512, 1024]
COPY_N = 1048576
NUM, DEN = {"kernel": "copy", "variant": "c_vec"}, {"kernel": "copy", "variant": "acle_4v"}


def _check(kind: str, **keys) -> dict:
    return {"id": kind, "figure": 2, "claim": kind, "kind": kind, **keys}


def _result(check: dict, per_vl: dict[str, dict[int, float]]) -> dict:
    """The check (as a sweep file states it) evaluated on synthetic counts, as the summary's row."""
    sweep = config.load(DEFAULT)
    counts = _counts({("copy", v, "gcc"): values for v, values in per_vl.items()})
    data = checks.TableData(counts, pd.DataFrame(columns=["kernel", "variant", "size", "roi_symbol"]), sweep)
    ev = config.check_of(sweep, check).evaluate(data)
    return {"result": "pass" if ev.ok else "FAIL", "paper": ev.paper, "ours": ev.ours}


@pytest.mark.parametrize("den, result", [({128: 100, 256: 100, 512: 100, 1024: 100}, "pass"),
                                         ({128: 100, 256: 100, 512: 100, 1024: 50}, "FAIL")])
def test_ratio_range(den: dict, result: str) -> None:
    """Every VL's numerator / denominator lies in [min, max]; one VL outside fails the check."""
    num = {vl: 200 + vl // 8 for vl in VLS}  # ratios 2.16 .. 3.28
    r = _result(_check("ratio_range", numerator=NUM, denominator=DEN, min=2.0, max=3.5),
                {"c_vec": num, "acle_4v": den})
    assert (r["result"], r["paper"]) == (result, "2 .. 3.5")
    assert r["ours"] == ("2.16 .. 3.28 (VL 128 .. 1024)" if result == "pass" else "2.16 .. 6.56 (VL 128 .. 1024)")


@pytest.mark.parametrize("at_2048, result", [(1000 / 16, "pass"), (1000 / 8, "FAIL")])
def test_vl_ratio(at_2048: float, result: str) -> None:
    """count(vl_a) / count(vl_b) against the target: 16 for a count that scales with VL."""
    series = {128: 1000, 512: 250, 2048: at_2048}
    r = _result(_check("vl_ratio", series=DEN, vl_a=128, vl_b=2048, target=16, tolerance=0.05), {"acle_4v": series})
    assert (r["result"], r["paper"], r["ours"]) == (result, "16", "16" if result == "pass" else "8")


@pytest.mark.parametrize("shape, result", [("inverse", "pass"), ("flat", "FAIL")])
def test_inverse_vl(shape: str, result: str) -> None:
    """count x VL constant (within the tolerance): a count that halves as VL doubles passes,
    a flat one fails."""
    series = {vl: (2_048_000 // vl if shape == "inverse" else 16_000) for vl in VLS}
    r = _result(_check("inverse_vl", series=DEN, tolerance=0.01), {"acle_4v": series})
    assert (r["result"], r["paper"]) == (result, "count x VL constant")
    assert r["ours"] == ("max/min - 1 = 0.000%" if result == "pass" else "max/min - 1 = 700.000%")


@pytest.mark.parametrize("num, result", [({128: 3.0, 256: 5.0, 512: 3.5, 1024: 4.5}, "pass"),
                                         ({128: 3.0, 256: 3.0, 512: 3.5, 1024: 3.5}, "FAIL")])
def test_ratio_aggregate_mean(num: dict, result: str) -> None:
    """aggregate: mean judges the mean ratio over VLs: 4.0 passes although no single VL is
    within 10 % of 4 (the same check without aggregate fails); a mean of 3.25 fails."""
    per_vl = {"c_vec": {vl: 100 * x for vl, x in num.items()}, "acle_4v": {vl: 100 for vl in VLS}}
    mean = _result(_check("ratio", numerator=NUM, denominator=DEN, target=4.0, tolerance=0.1, aggregate="mean"), per_vl)
    assert (mean["result"], mean["paper"]) == (result, "4 (mean over VLs)")
    assert mean["ours"].startswith("mean 4; " if result == "pass" else "mean 3.25; ")
    each = _result(_check("ratio", numerator=NUM, denominator=DEN, target=4.0, tolerance=0.1), per_vl)
    assert each["result"] == "FAIL"


def test_nonlinear_cell_is_flagged_in_the_summary(tmp_path: Path) -> None:
    """ROI(2n) - ROI(n) against ROI(n) - ROI(0): 2 % apart is flagged (non-linear), 0.5 % is not;
    the summary lists the flagged cell only."""
    from analysis.stages import subtract

    cell = {"op": "-", "dtype": "uint8", "layout": "contiguous", "build": "vla", "cpu_model": "max",
            "backend": "qemu", "compiler": "gcc", "metric": "roi.total"}
    n = 65536
    roi = {("acle_4v", 512): {0: 100, n: 10_100, 2 * n: 20_150}, ("c_vec", 512): {0: 100, n: 10_100, 2 * n: 20_300}}
    raw = pd.DataFrame([{"kernel": "copy", "variant": v, "vl": vl, "size": s, "value": x, **cell}
                        for (v, vl), by_size in roi.items() for s, x in by_size.items()])
    lin = subtract.linearity_rows(raw)
    ppm = dict(zip(lin[lin["metric"] == "roi_net.linearity_ppm"]["variant"], lin[lin["metric"] == "roi_net.linearity_ppm"]["value"]))
    flag = dict(zip(lin[lin["metric"] == "roi_net.nonlinear"]["variant"], lin[lin["metric"] == "roi_net.nonlinear"]["value"]))
    assert ppm == {"acle_4v": 5000, "c_vec": 20000} and flag == {"acle_4v": 0, "c_vec": 1}
    sweep = config.load(REPO / "configs" / "tiny.yaml")
    out = tmp_path / "summary.md"
    summary.write_summary([], subtract.subtract(raw), out, sweep)
    listed = [ln for ln in out.read_text().splitlines() if ln.startswith("- non-linear")]
    assert listed == ["- non-linear (> 1 %): copy c_vec - uint8 vla VL 512 size 65536"]


def test_gem5_sizes_are_a_subset_of_the_counted_ones(tmp_path: Path) -> None:
    """`gem5: sizes` keeps the cycle sweep to the sizes it names (memcpy.yaml: no 16 MiB runs in
    gem5); a size the sweep does not count is refused in one line."""
    from analysis.backends import gem5

    sweep = config.load(REPO / "configs" / "memcpy.yaml")
    assert {r.size for j in gem5.jobs(sweep, None) for r in j.runs} == {4096, 1048576}
    assert 16777216 in {r.size for j in sweep.jobs() for r in j.runs}
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: " + str(REPO / "configs" / "beyond.yaml") + "\n"
                   "gem5: {systems: [paper], vector_lengths: [512], sizes: {memcpy: [8192]}}\n")
    with pytest.raises(config.ConfigError, match=r"gem5/sizes/memcpy: 8192 not among the sweep's sizes of memcpy"):
        config.load(bad)


def test_explain_defaults_to_the_sweeps_own_compiler_backend_and_cpu() -> None:
    """Once gem5 had run, `./harness explain copy acle_4v --vl 128` picked clang and gem5 (first
    in alphabetical order) and found no such cell; unnamed, they are the sweep's first."""
    import argparse

    from analysis.stages import explain

    sweep = config.load(DEFAULT)
    rows = [{"kernel": "copy", "variant": "acle_4v", "op": "-", "dtype": "uint8", "layout": "contiguous", "build": "vla",
             "cpu_model": cpu, "backend": backend, "compiler": compiler, "vl": 128, "size": size, "metric": "roi_net.total",
             "value": 1}
            for compiler, backend, cpu in (("gcc", "qemu", "max"), ("clang", "qemu", "max"), ("gcc", "gem5", "paper"))
            for size in (0, 1048576)]
    ns = argparse.Namespace(kernel="copy", variant="acle_4v", op=None, dtype=None, build="vla", cpu=None, backend=None,
                            compiler=None, vl=128, size=None)
    cell = explain.cell_from_args(ns, pd.DataFrame(rows), sweep)
    assert (cell.compiler, cell.backend, cell.cpu_model, cell.size) == ("gcc", "qemu", "max", 1048576)


def test_a_label_names_the_roi_function_the_counting_backend_saw() -> None:
    """gem5 records no ROI function ("?"); the memcpy cycle figure's legend read
    "libc memcpy (?/__memcpy_sve)"."""
    sweep = config.load(REPO / "configs" / "memcpy.yaml")
    counts = pd.DataFrame([{"kernel": "memcpy", "variant": "libc", "op": "-", "dtype": "uint8", "layout": "contiguous",
                            "build": "vla", "cpu_model": "paper", "backend": "gem5", "compiler": "gcc", "vl": vl,
                            "size": 1048576, "metric": "gem5.cycles", "value": 1} for vl in (128, 512)])
    prov = pd.DataFrame([{"kernel": "memcpy", "variant": "libc", "size": 1048576, "roi_symbol": sym}
                         for sym in ("?", "__memcpy_sve")])
    cycles = next(f for f in sweep.figures if f.metric == "gem5.cycles" and f.backend == "gem5")
    (s,) = series.select(counts, prov, sweep, config.Selector("memcpy", "libc"), cycles)
    assert s.label.endswith("(__memcpy_sve)"), s.label
