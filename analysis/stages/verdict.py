"""Verdicts: one line per paper claim, in the words a reader takes in at a glance.

A check (sweep file, `checks:`) is evaluated on its own line (the harness as built) and on
each of its `conditions`: the same check on another line that differs from it in one
factor (a glibc memcpy variant, the compiler, an Open MPI component...). The verdict is

- `reproduced`: the check's own line gives the paper's number;
- `reproduced under the paper's conditions: <line>`: the own line does not, a condition
  marked `paper: true` (e.g. 2019's non-SVE memcpy) does; the pair names the factor;
- `differs: <cause>`: no paper condition reproduces it; the isolating pair (two lines that
  differ in one factor, with their numbers) shows what the number depends on. Without a
  declared condition the verdict says the cause is not isolated.

Only `decide` makes the choice; it takes evaluated lines, so it is tested without a sweep.
"""
from __future__ import annotations

from dataclasses import dataclass

REPRODUCED = "reproduced"
UNDER_PAPER = "reproduced under the paper's conditions"
DIFFERS = "differs"
NOT_RUN = "not run"


@dataclass(frozen=True)
class Line:
    """One evaluated line of a claim: its name, whether it gives the paper's number (None:
    no data), our number, and the factor in which it differs from the check's own line."""
    name: str
    ok: bool | None
    ours: str
    factor: str = ""
    paper: bool = False


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of the four words above, with the line or cause after a colon
    pair: tuple[Line, Line] | None  # the isolating pair: the check's own line and a condition

    @property
    def kind(self) -> str:
        return self.verdict.split(":", 1)[0]

    def text(self) -> str:
        """The verdict cell: the verdict and, when there is one, its isolating pair."""
        if self.pair is None:
            return self.verdict
        a, b = self.pair
        return f"{self.verdict}. Pair ({b.factor}): {a.name} = {a.ours}; {b.name} = {b.ours}"


def decide(own: Line, conditions: list[Line], cause: str | None = None, not_run: str | None = None) -> Verdict:
    """The verdict of one claim from its own line and its conditions (see the module doc)."""
    if not_run:
        return Verdict(f"{NOT_RUN}: {not_run}", None)
    if own.ok:
        return Verdict(REPRODUCED, None)
    with_data = [c for c in conditions if c.ok is not None]
    for c in with_data:
        if c.paper and c.ok:
            return Verdict(f"{UNDER_PAPER}: {c.name}", (own, c))
    # The pair that shows most: a line that does reproduce it, else the first with data.
    pair_with = next((c for c in with_data if c.ok), with_data[0] if with_data else None)
    if own.ok is None:
        return Verdict(f"{NOT_RUN}: no data for {own.name}", None)
    if pair_with is None:
        return Verdict(f"{DIFFERS}: {cause or 'cause not isolated'} (no line differing in one factor was run)", None)
    also = f"; reproduced with {pair_with.name}" if pair_with.ok else ""
    return Verdict(f"{DIFFERS}: {cause or 'see the pair'}{also}", (own, pair_with))
