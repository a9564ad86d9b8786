"""The ROI's cycles estimated from gem5's sampled run (gem5_scripts/se_sve.py --mode sampled):
SMARTS statistics (Wunderlich et al., ISCA 2003) over a detailed prefix.

What the script measures, as instruction and cycle counts of the O3 core:
- the prefix: the ROI's first `prefix` instructions run wholly on O3, cut into periods. A ROI
  that ends inside it is a full O3 run (its cycles are exact and its interval has no width);
- the units: after the prefix, one unit of U instructions per period, at a random offset
  inside the period (stratified, so a loop whose timing repeats with the period cannot alias),
  each after W instructions of detailed warm-up; between units the atomic CPU runs the program
  and warms the caches and the (shared) branch predictor. The period is P for the first G units
  and doubles after every G (`growth`; 0: P throughout), so a long ROI costs O3 time that grows
  with the logarithm of its length, not with its length.

The estimate is the prefix's exact cycles plus the units' mean CPI, each unit weighted by the
length of its period (w_k, summing to 1), times the instructions after the prefix; its interval
is z * s * sqrt(sum w_k^2) (s / sqrt(n) when the periods are equal) with the finite-population
correction sqrt(1 - n/N) (N: the units the part after the prefix holds), z = 3 (99.7 %). When the part after the prefix
held fewer than two whole units (a ROI just longer than the prefix) the prefix's periods are the
sample instead (measured on the same code, but not a random sample of the rest: no correction).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

# 99.7 % two-sided (SMARTS's "3 sigma").
Z = 3.0
# Which CPIs the interval comes from.
FULL, UNITS, PREFIX_PERIODS = "full", "units", "prefix periods"


@dataclass(frozen=True)
class Part:
    """One measured stretch of O3 execution."""
    insts: int
    cycles: int

    @property
    def cpi(self) -> float:
        return self.cycles / self.insts


@dataclass(frozen=True)
class Estimate:
    cycles: float
    low: float
    high: float
    source: str  # FULL, UNITS or PREFIX_PERIODS
    n: int  # CPIs the mean is over (0: full)
    population: float  # units of that size the estimated part holds (0: full)
    cpi_mean: float  # of the estimated part (0: full)
    cpi_std: float  # sample standard deviation (n - 1)
    estimated_insts: int  # instructions whose cycles are estimated, not measured

    @property
    def rel_half_width(self) -> float:
        return (self.high - self.cycles) / self.cycles if self.cycles else 0.0


def estimate(roi_insts: int, prefix: Part, periods: list[Part], units: list[Part], unit: int, period: int,
             z: float = Z, unit_periods: list[int] | None = None) -> Estimate:
    """The ROI's cycles and interval. `prefix` is the O3 part at the ROI's start (all of the ROI
    when it ended there), `periods` the prefix cut into periods, `units` the measured units
    after it (U instructions each, give or take the few the O3 commits in the cycle it stops),
    `unit_periods` the length of each unit's period (None: all `period`)."""
    rest = roi_insts - prefix.insts
    if rest <= 0:
        return Estimate(prefix.cycles, prefix.cycles, prefix.cycles, FULL, 0, 0.0, 0.0, 0.0, 0)
    if len(units) >= 2:
        sample, source, size = units, UNITS, unit
        lengths = unit_periods if unit_periods is not None else [period] * len(units)
    elif len(periods) >= 2:
        sample, source, size = periods, PREFIX_PERIODS, period
        lengths = [period] * len(periods)
    else:
        raise ValueError(f"{len(units)} units after the prefix and {len(periods)} periods in it: "
                         "no sample to estimate the cycles from (need 2)")
    if len(lengths) != len(sample):
        raise ValueError(f"{len(sample)} units but {len(lengths)} period lengths")
    cpis = [p.cpi for p in sample]
    weights = [length / sum(lengths) for length in lengths]
    n, std = len(cpis), statistics.stdev(cpis)
    mean = math.fsum(length * c for length, c in zip(lengths, cpis)) / math.fsum(lengths)
    population = rest / size
    # The correction holds for units drawn from the estimated part itself; the prefix's periods
    # are not drawn from it.
    fpc = math.sqrt(max(0.0, 1.0 - n / population)) if source == UNITS else 1.0
    cycles = prefix.cycles + mean * rest
    half = z * std * math.sqrt(sum(w * w for w in weights)) * fpc * rest
    return Estimate(cycles, cycles - half, cycles + half, source, n, population, mean, std, rest)


def from_record(doc: dict[str, Any], stats_cycles: float) -> Estimate:
    """The estimate from what se_sve.py wrote (sampling.json). A ROI that ended inside the prefix
    takes the ROI block's own cycle count, as a full run does, so both modes report the same."""
    prefix = Part(doc["prefix"]["insts"], doc["prefix"]["cycles"])
    if doc["ended_in_prefix"]:
        prefix = Part(doc["roi_insts"], round(stats_cycles))
    parts = [Part(i, c) for i, c in doc["prefix"]["periods"]]
    units = [Part(i, c) for i, c in doc["units"]]
    s = doc["settings"]
    return estimate(doc["roi_insts"], prefix, parts, units, s["unit"], s["period"], unit_periods=doc.get("unit_periods"))
