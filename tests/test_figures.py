"""The figures read right, checked on the matplotlib figures themselves (not on pixels): every
figure of the default sweep's plan, built from a synthetic table that has a line for each of its
series, keeps its texts inside the figure (the Fig. 4 ratio titles ran past its edge), has no two
legend entries alike, and draws each series in one colour in every figure it appears in (a
series had another colour in its ratio companion)."""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import matplotlib
import pandas as pd
import pytest
from matplotlib import pyplot as plt
from matplotlib.colors import to_hex

from analysis.backends import perf
from analysis.core import config
from analysis.stages import figures
from conftest import REPO

matplotlib.use("Agg")
DEFAULT = config.load(REPO / "configs" / "default.yaml")


def synthetic_counts(sweep: config.Sweep) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(counts, provenance): every series of every figure of the sweep (the cycle figures too)
    at every VL, VLA and VLS builds, each line a different 1/VL curve."""
    rows, prov = [], []
    for f in sweep.figures:
        for sel in f.selectors():
            for selection in [s for s in sweep.selections if s.kernel == sel.kernel]:
                size = sweep.sizes[selection.family][0]
                for i, variant in enumerate(v for v in selection.variants if sel.variant in (None, v)):
                    prov.append({"kernel": sel.kernel, "variant": variant, "size": size, "roi_symbol": "kernel_fn"})
                    for op, dtype in selection.op_dtypes:
                        if sel.op not in (None, op) or sel.dtype not in (None, dtype):
                            continue
                        for build, vls in (("vla", sweep.vector_lengths), ("vls", sweep.vls_vector_lengths)):
                            for vl in vls:
                                rows.append({"kernel": sel.kernel, "variant": variant, "op": op, "dtype": dtype,
                                             "build": build, "cpu_model": f.cpu_model, "backend": f.backend,
                                             "compiler": f.compiler, "vl": vl, "size": size, "metric": f.metric,
                                             "value": (i + 1) * 1_000_000 * 128 // vl})
    counts = pd.DataFrame(rows).drop_duplicates(["kernel", "variant", "op", "dtype", "build", "cpu_model", "backend",
                                                 "compiler", "vl", "metric"])
    return counts, pd.DataFrame(prov).drop_duplicates()


def synthetic_perf(sweep: config.Sweep) -> pd.DataFrame:
    """The perf table of the sweep's perf figures: host baselines and SVE runs at three VLs."""
    assert sweep.perf is not None
    rows = []
    for fig in sweep.perf.figures:
        for sel in fig.series:
            for variant in [sel.variant] if sel.variant else sweep.table.variants(sel.kernel):
                for build, vl in (("host", 0), ("vla", 128), ("vla", 256), ("vla", 512)):
                    for size in (4096, 65536):
                        for metric in (perf.TIME, perf.BANDWIDTH):
                            rows.append({"kernel": sel.kernel, "variant": variant, "op": sel.op or config.NO_OP,
                                         "dtype": sel.dtype or "float", "build": build, "vl": vl, "size": size,
                                         "metric": metric, "status": perf.OK, "mean": 1000.0 + size, "std": 10.0})
    return pd.DataFrame(rows).drop_duplicates()


def default_figures() -> list[tuple[str, Any]]:
    counts, prov = synthetic_counts(DEFAULT)
    built = figures.count_figures(counts, prov, DEFAULT, Path("synthetic.csv"))
    df = synthetic_perf(DEFAULT)
    assert DEFAULT.perf is not None
    return built + [(f.name, figures.size_figure(df, DEFAULT.table, f, "host cpu")) for f in DEFAULT.perf.figures]


@pytest.fixture(scope="module")
def drawn() -> Iterator[list[tuple[str, Any]]]:
    """Every figure of the default plan (count, ratio, cycle and perf figures), drawn."""
    out = default_figures()
    for _, fig in out:
        fig.canvas.draw()
    yield out
    for _, fig in out:
        plt.close(fig)


def texts(fig: Any) -> list[Any]:
    """The texts a reader must see whole: titles, axis labels, legend titles and entries."""
    found = [fig._suptitle] if fig._suptitle is not None else []
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    for ax in fig.axes:
        found += [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
    for leg in legends:
        found += [*leg.get_texts(), *([leg.get_title()] if leg.get_title().get_text() else [])]
    return found


def outside(fig: Any) -> list[str]:
    """The texts whose box leaves the figure's."""
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    out = []
    for t in texts(fig):
        b = t.get_window_extent(renderer)
        if b.x0 < box.x0 - 0.5 or b.x1 > box.x1 + 0.5 or b.y0 < box.y0 - 0.5 or b.y1 > box.y1 + 0.5:
            out.append(t.get_text()[:60])
    return out


@pytest.mark.slow
def test_the_plan_draws_every_figure_of_the_default_sweep(drawn: list[tuple[str, Any]]) -> None:
    names = {name for name, _ in drawn}
    assert {"fig2_copy", "fig4_pack_unpack_ratio", "fig6_reduce_max_clang_ratio", "fig5_pack_unpack_cycles", "ipc",
            "fig11_pack_unpack_time", "fig12_reduce_bandwidth"} <= names


@pytest.mark.slow
def test_every_text_lies_inside_its_figure(drawn: list[tuple[str, Any]]) -> None:
    bad = {name: out for name, fig in drawn if (out := outside(fig))}
    assert not bad, bad


@pytest.mark.slow
def test_the_check_sees_a_clipped_title(drawn: list[tuple[str, Any]]) -> None:
    """A title as long as the Fig. 4 ratio title was, unwrapped: the check catches it."""
    name, fig = next((n, f) for n, f in drawn if n == "fig4_pack_unpack_ratio")
    title = fig.axes[0].title
    wrapped = title.get_text()
    title.set_text(wrapped.replace("\n", " ") + " and then some more words")
    try:
        fig.canvas.draw()
        assert outside(fig), name
    finally:
        title.set_text(wrapped)


def legend_labels(fig: Any) -> list[list[str]]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return [[t.get_text() for t in leg.get_texts()] for leg in legends]


@pytest.mark.slow
def test_no_legend_has_a_label_twice(drawn: list[tuple[str, Any]]) -> None:
    dups = {name: [lab for lab, n in Counter(labels).items() if n > 1]
            for name, fig in drawn for labels in legend_labels(fig)}
    assert not any(dups.values()), dups


def test_a_selector_naming_the_op_only_labels_each_dtype() -> None:
    """{kernel: reduce, op: max} over float and double: two lines per variant, which the legend
    told apart only when the selector left the op open too."""
    fig6 = next(f for f in DEFAULT.figures if f.name == "fig6_reduce_max")
    counts, prov = synthetic_counts(DEFAULT)
    reduce = counts[(counts["kernel"] == "reduce") & (counts["compiler"] == fig6.compiler)
                    & (counts["backend"] == fig6.backend)]
    counts = pd.concat([counts, reduce.assign(dtype="double", value=reduce["value"] * 2)])
    sweep = dataclasses.replace(DEFAULT, figures=[dataclasses.replace(
        fig6, series=(config.Selector("reduce", None, "max", None),))])
    ((_, fig), (_, ratio)) = figures.count_figures(counts, prov, sweep, Path("synthetic.csv"))
    for f in (fig, ratio):
        (labels,) = legend_labels(f)
        assert len(labels) == len(set(labels)), labels
    assert sum("[max double]" in lab for lab in legend_labels(fig)[0]) == 3


def lines(fig: Any) -> list[tuple[str, str, str]]:
    """(series id, colour, line style) of every series line (the lines with a gid)."""
    return [(ln.get_gid(), to_hex(ln.get_color()), ln.get_linestyle())
            for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()]


@pytest.mark.slow
def test_each_series_has_one_colour_in_every_figure(drawn: list[tuple[str, Any]]) -> None:
    colour: dict[str, set[str]] = {}
    for name, fig in drawn:
        if name.startswith(("fig11", "fig12")):
            continue  # perf figures: lines by size, not series of the counts table
        drawn_lines = lines(fig)
        assert drawn_lines, name
        # Within a figure two series never look alike: each has its own colour and line style.
        looks = [(c, ls) for _, c, ls in drawn_lines]
        assert len(set(looks)) == len(looks), (name, drawn_lines)
        for gid, c, _ in drawn_lines:
            # The compiler is not part of a colour: the gcc and clang figures read alike.
            colour.setdefault(gid.split("/", 1)[1], set()).add(c)
    assert {k: v for k, v in colour.items() if len(v) > 1} == {}


def labelled(fig: Any) -> dict[str, tuple[str, str]]:
    """Legend label -> (colour, line style) of every labelled line."""
    return {ln.get_label(): (to_hex(ln.get_color()), ln.get_linestyle())
            for ax in fig.axes for ln in ax.get_lines() if not ln.get_label().startswith("_")}


@pytest.mark.slow
def test_a_ratio_figure_draws_each_line_as_its_count_figure_does(drawn: list[tuple[str, Any]]) -> None:
    """Its lines are the count figure's but the baseline's: in the same colour and line style
    (the Fig. 4 ratio figure had drawn pack's ACLE line green, red in the count figure)."""
    by_name = dict(drawn)
    pairs = [(by_name[name.removesuffix("_ratio")], fig) for name, fig in drawn if name.endswith("_ratio")]
    assert len(pairs) == 9
    for main, ratio in pairs:
        looks, ratio_looks = labelled(main), labelled(ratio)
        assert len(ratio_looks) == len(looks) - 1
        assert {lab: looks.get(lab) for lab in ratio_looks} == ratio_looks


def test_sampled_cycles_draw_their_interval_as_error_bars() -> None:
    """A cycle figure whose metric has gem5.cycles_ci_low/high rows (sampled gem5) draws each
    VL's interval as a bar on its line; a figure without such rows draws none."""
    counts, prov = synthetic_counts(DEFAULT)
    cyc = counts[counts["metric"] == "gem5.cycles"]
    bounds = pd.concat([cyc.assign(metric="gem5.cycles_ci_low", value=cyc["value"] * 9 // 10),
                        cyc.assign(metric="gem5.cycles_ci_high", value=cyc["value"] * 11 // 10)])
    drawn = dict(figures.count_figures(pd.concat([counts, bounds]), prov, DEFAULT, Path("synthetic.csv")))
    try:
        def bars(name: str) -> dict[str, list[tuple[float, float]]]:
            return {c.get_gid(): sorted((seg[0][1], seg[1][1]) for seg in c.get_segments())
                    for ax in drawn[name].axes for c in ax.collections if (c.get_gid() or "").endswith("/interval")}

        fig3 = bars("fig3_copy_cycles")
        drawn_ids = {gid for gid, _, _ in lines(drawn["fig3_copy_cycles"])}
        assert set(fig3) == {f"{gid}/interval" for gid in drawn_ids} and drawn_ids
        acle = fig3["gcc/copy/acle_4v/-/uint8/interval"]
        # Variant i of the synthetic table: (i + 1) * 1e6 * 128 / VL; acle_4v is the second.
        values = sorted(v for v in cyc[(cyc["variant"] == "acle_4v") & (cyc["build"] == "vla")]["value"])
        assert acle == sorted((v * 9 // 10, v * 11 // 10) for v in values)
        assert not bars("fig2_copy") and not bars("ipc")
        drawn["fig3_copy_cycles"].canvas.draw()
        assert not outside(drawn["fig3_copy_cycles"])
    finally:
        for fig in drawn.values():
            plt.close(fig)
