"""The paper's mechanical claims (sweep parameter checks): one class per kind, each with its own
`evaluate`, built once from the validated sweep file (`build_check`).

A check reads the counts through `CountData`, which the plot stage implements over the tables
(analysis.stages.checks): this module imports neither pandas nor the stages, so the workflow's
start and the up-to-date check stay light; the series it is handed are pandas Series indexed by VL.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from analysis.core.kernels import Selector

if TYPE_CHECKING:
    import pandas as pd


class CountSeries(Protocol):
    """One line of the counts: a variant's metric at the VLA build, by VL."""
    variant: str
    vla: pd.Series

    def per_vector(self, vl: int) -> float: ...


class CountData(Protocol):
    """What a check reads from the counts table (analysis.stages.checks.TableData)."""

    def one(self, check: Check, key: str, sel: Selector) -> CountSeries:
        """The single series `sel` selects on the check's line; ValueError unless exactly one."""

    def hot_ops(self, s: CountSeries, vl: int) -> str:
        """The most executed opcodes of a series at one VL (QEMU's count)."""

    def functions(self, s: CountSeries, vl: int) -> str:
        """The functions that ran in a series' ROI at one VL."""

    def gem5_context(self, check: Check, s: CountSeries, vl: int) -> str:
        """IPC and cache misses of a gem5 series at one VL."""


@dataclass(frozen=True)
class Evaluation:
    ok: bool
    paper: str  # the paper's value as the summary shows it
    ours: str
    reason: str  # where our number comes from (codegen, hot loop, IPC)


@dataclass(frozen=True)
class Condition:
    """The check on another line, differing from the check's own in one factor."""
    line: str
    paper: bool  # this line is the paper's condition
    factor: str  # the declared factor, else the differences found between the two lines
    check: Check  # the check evaluated on this line


@dataclass(frozen=True)
class Check:
    """What every kind has; the kinds below add what they compare and how."""
    id: str
    figure: int
    claim: str
    note: str
    metric: str
    backend: str
    cpu_model: str | None  # None: a gem5 line in a sweep without a cycle sweep (it has no rows)
    compiler: str
    tolerance: float
    line: str | None  # the own line's name in the verdict; None: compiler and variants
    cause: str | None
    conditions: tuple[Condition, ...]

    @property
    def is_gem5(self) -> bool:
        return self.backend == "gem5"

    def selectors(self) -> dict[str, Selector]:
        """The check's selectors by key (numerator, denominator, series)."""
        raise NotImplementedError

    def evaluate(self, data: CountData) -> Evaluation:
        raise NotImplementedError

    def paper_value(self) -> str:
        """The paper's value where the check could not be evaluated (its rows were not run)."""
        raise NotImplementedError

    def own_line_name(self) -> str:
        """The check's own line in the verdict: its `line`, else compiler and variants."""
        if self.line is not None:
            return self.line
        variants = [s.variant for s in self.selectors().values() if s.variant is not None]
        return f"{self.compiler}: {' / '.join(variants)}"

    def _one(self, data: CountData, key: str) -> CountSeries:
        return data.one(self, key, self.selectors()[key])


@dataclass(frozen=True)
class PairCheck(Check):
    """numerator / denominator at every VL both have (or at `vl` only)."""
    numerator: Selector
    denominator: Selector
    vl: int | None

    def selectors(self) -> dict[str, Selector]:
        return {"numerator": self.numerator, "denominator": self.denominator}

    def ratios(self, data: CountData) -> tuple[CountSeries, CountSeries, pd.Series]:
        """The two series and numerator / denominator by VL."""
        num, den = self._one(data, "numerator"), self._one(data, "denominator")
        ratio = (num.vla / den.vla).dropna()
        if self.vl is not None:
            ratio = ratio[ratio.index == self.vl]
        if ratio.empty:
            raise ValueError(f"check {self.id}: no VL where both series have data")
        return num, den, ratio

    def evaluation(self, data: CountData, num: CountSeries, den: CountSeries, ratio: pd.Series, ok: bool, paper: str,
                   ours: str) -> Evaluation:
        """The verdict on the ratios with its reason: each line's cost per vector of data and its
        hottest opcodes at the lowest and highest VL (and gem5's IPC and misses for cycles)."""
        lo, hi = min(ratio.index), max(ratio.index)
        unit = "cycles" if ".cycles" in self.metric else "insns"  # gem5.cycles, simeng.cycles
        reason = (
            f"{num.variant}: {num.per_vector(lo):.3g} {unit} per vector of data at VL {lo}, "
            f"{num.per_vector(hi):.3g} at VL {hi}; {den.variant}: {den.per_vector(lo):.3g} / "
            f"{den.per_vector(hi):.3g}. Hot opcodes (QEMU count) at VL {lo}: {num.variant}: "
            f"{data.hot_ops(num, lo)}; {den.variant}: {data.hot_ops(den, lo)}"
        )
        if self.is_gem5:
            reason += "; " + "; ".join(data.gem5_context(self, s, lo) for s in (num, den))
        return Evaluation(ok, paper, ours, reason)

    @staticmethod
    def span(ratio: pd.Series) -> str:
        return f"{ratio.min():.3g} .. {ratio.max():.3g} (VL {ratio.idxmin()} .. {ratio.idxmax()})"


@dataclass(frozen=True)
class RatioCheck(PairCheck):
    """kind ratio: numerator / denominator within the tolerance of the target at every VL, or
    their mean (aggregate: mean)."""
    target: float
    aggregate: str  # every | mean

    def evaluate(self, data: CountData) -> Evaluation:
        num, den, ratio = self.ratios(data)
        if self.aggregate == "mean":
            ok = abs(float(ratio.mean()) - self.target) <= self.tolerance * self.target
            return self.evaluation(data, num, den, ratio, ok, f"{self.target:g} (mean over VLs)",
                                   f"mean {ratio.mean():.3g}; " + self.span(ratio))
        ok = bool(((ratio - self.target).abs() <= self.tolerance * self.target).all())
        return self.evaluation(data, num, den, ratio, ok,
                               f"{self.target:g}" + (f" at VL {self.vl}" if self.vl is not None else ""), self.span(ratio))

    def paper_value(self) -> str:
        return str(self.target)


@dataclass(frozen=True)
class RatioRangeCheck(PairCheck):
    """kind ratio_range: min <= numerator / denominator <= max at every VL."""
    min: float
    max: float

    def evaluate(self, data: CountData) -> Evaluation:
        num, den, ratio = self.ratios(data)
        ok = bool(((ratio >= self.min) & (ratio <= self.max)).all())
        return self.evaluation(data, num, den, ratio, ok, f"{self.min:g} .. {self.max:g}", self.span(ratio))

    def paper_value(self) -> str:
        return f"{self.min} .. {self.max}"


@dataclass(frozen=True)
class SeriesCheck(Check):
    """A claim about one series' shape across VL."""
    series: Selector

    def selectors(self) -> dict[str, Selector]:
        return {"series": self.series}

    def evaluation(self, data: CountData, s: CountSeries, ok: bool, paper: str, ours: str) -> Evaluation:
        """The verdict with its reason: the series' cost per vector of data and the functions in
        its ROI at the lowest and highest VL."""
        lo, hi = min(s.vla.index), max(s.vla.index)
        reason = (f"{s.variant}: {s.per_vector(lo):.3g} insns per vector of data at VL {lo}, "
                  f"{s.per_vector(hi):.3g} at VL {hi}; functions in the ROI at VL {lo}: "
                  f"{data.functions(s, lo)}; at VL {hi}: {data.functions(s, hi)}")
        return Evaluation(ok, paper, ours, reason)


@dataclass(frozen=True)
class VlRatioCheck(SeriesCheck):
    """kind vl_ratio: series(vl_a) / series(vl_b) within the tolerance of the target."""
    vl_a: int
    vl_b: int
    target: float

    def evaluate(self, data: CountData) -> Evaluation:
        s = self._one(data, "series")
        r = float(s.vla[self.vl_a] / s.vla[self.vl_b])
        return self.evaluation(data, s, abs(r - self.target) <= self.tolerance * self.target, f"{self.target:g}", f"{r:.3g}")

    def paper_value(self) -> str:
        return str(self.target)


@dataclass(frozen=True)
class FlatCheck(SeriesCheck):
    """kind flat: max / min - 1 of the series across VL within the tolerance."""

    def evaluate(self, data: CountData) -> Evaluation:
        s = self._one(data, "series")
        spread = float(s.vla.max() / s.vla.min() - 1)
        return self.evaluation(data, s, spread <= self.tolerance, "constant", f"max/min - 1 = {spread:.3%}")

    def paper_value(self) -> str:
        return "constant"


@dataclass(frozen=True)
class InverseVlCheck(SeriesCheck):
    """kind inverse_vl: series x VL constant across VL, within the tolerance."""

    def evaluate(self, data: CountData) -> Evaluation:
        s = self._one(data, "series")
        prod = s.vla * s.vla.index.to_series()
        spread = float(prod.max() / prod.min() - 1)
        return self.evaluation(data, s, spread <= self.tolerance, "count x VL constant", f"max/min - 1 = {spread:.3%}")

    def paper_value(self) -> str:
        return "count x VL constant"


def _ratio(doc: dict[str, Any]) -> dict[str, Any]:
    return {**_pair(doc), "target": doc["target"], "aggregate": doc["aggregate"]}


def _ratio_range(doc: dict[str, Any]) -> dict[str, Any]:
    return {**_pair(doc), "min": doc["min"], "max": doc["max"]}


def _pair(doc: dict[str, Any]) -> dict[str, Any]:
    return {"numerator": Selector.of(doc["numerator"]), "denominator": Selector.of(doc["denominator"]),
            "vl": doc.get("vl")}


def _vl_ratio(doc: dict[str, Any]) -> dict[str, Any]:
    return {"series": Selector.of(doc["series"]), "vl_a": doc["vl_a"], "vl_b": doc["vl_b"], "target": doc["target"]}


def _series(doc: dict[str, Any]) -> dict[str, Any]:
    return {"series": Selector.of(doc["series"])}


# The kinds of the schema's `kind` enum: the class and what it reads from the check's document
# (which the schema has checked holds the kind's keys).
KINDS: dict[str, tuple[type[Check], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "ratio": (RatioCheck, _ratio),
    "ratio_range": (RatioRangeCheck, _ratio_range),
    "vl_ratio": (VlRatioCheck, _vl_ratio),
    "flat": (FlatCheck, _series),
    "inverse_vl": (InverseVlCheck, _series),
}


def build_check(doc: dict[str, Any], backend: str, cpu_model: str | None, compiler: str,
                conditions: tuple[Condition, ...] = ()) -> Check:
    """A validated check document (defaults written in) as its kind's class; `backend`,
    `cpu_model` and `compiler` as resolved against the sweep."""
    cls, own = KINDS[doc["kind"]]
    return cls(id=doc["id"], figure=doc["figure"], claim=doc["claim"], note=doc["note"], metric=doc["metric"],
               backend=backend, cpu_model=cpu_model, compiler=compiler, tolerance=doc["tolerance"],
               line=doc.get("line"), cause=doc.get("cause"), conditions=conditions, **own(doc))
