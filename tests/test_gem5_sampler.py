"""The sampled mode's state machine (gem5_scripts/se_sve.py, class Sampler) driven by a small
model of what it uses of gem5, without gem5: two CPUs with their own instruction counters and
per-CPU relative instruction stops (scheduleInstStop), an O3 core that commits a few
instructions past a stop (the rest of its cycle) and a few more while it drains at a switch,
and gem5's drain swallowing an exit that fires meanwhile (the ROI's work_end among them: seen
only in the O3's work-item count). Each case checks what the script records: the ROI's
instructions, the prefix, whole units only, the ROI's end seen once; and, with a constant CPI,
an estimate equal to the cycles the model spent."""
from __future__ import annotations

import importlib.util
import random
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from analysis.core import sampling
from conftest import REPO


@dataclass
class Stat:
    value: float


@dataclass
class FakeCPU:
    name: str
    o3: bool
    insts: int = 0
    cycles: float = 0.0
    work_items_completed: int = 0
    stops: list[tuple[int, str]] = field(default_factory=list)  # (own count to stop at, cause)

    def totalInsts(self) -> int:  # noqa: N802 (gem5's name)
        return self.insts

    def scheduleInstStop(self, tid: int, insts: int, cause: str) -> None:  # noqa: N802
        assert tid == 0 and insts >= 1
        self.stops.append((self.insts + insts, cause))

    def resolveStat(self, name: str) -> Stat | None:  # noqa: N802
        return {"numCycles": Stat(int(self.cycles)), "numWorkItemsCompleted": Stat(self.work_items_completed)}.get(name)


@dataclass
class Event:
    cause: str

    def getCause(self) -> str:  # noqa: N802
        return self.cause

    def getCode(self) -> int:  # noqa: N802
        return 0


class World:
    """A program of `pre` instructions before work_begin, a ROI of `roi` (its last instruction
    work_end) and `post` after it, run by whichever CPU is switched in."""

    def __init__(self, pre: int, roi: int, post: int, cpi: Callable[[int], float], rng: random.Random,
                 overshoot: int = 3, drain: int = 2) -> None:
        # pre: the atomic CPU up to the ROI (system.cpu); atomic: the one between units (warm_cpu_vlN)
        self.pre, self.atomic, self.o3 = FakeCPU("pre", False), FakeCPU("atomic", False), FakeCPU("o3", True)
        self.running = self.pre
        self.pos, self.begin, self.end, self.exit = 0, pre, pre + roi, pre + roi + post
        self.cpi, self.rng, self.overshoot, self.drain = cpi, rng, overshoot, drain
        self.pending: list[str] = []  # exits scheduled in a cycle that already returned one
        self.swallowed: list[str] = []
        self.switches: list[tuple[int, bool]] = []  # (position after the switch, to O3)

    def step(self, n: int, cpu: FakeCPU) -> list[str]:
        """Commit n instructions on `cpu`; the m5op exits they pass."""
        exits = []
        for _ in range(n):
            if self.pos >= self.exit:
                break
            self.pos += 1
            cpu.insts += 1
            if cpu.o3:
                cpu.cycles += self.cpi(self.pos)
            if self.pos == self.begin:
                exits.append("workbegin")
            if self.pos == self.end:
                exits.append("workend")
                cpu.work_items_completed += cpu.o3
        return exits

    def simulate(self) -> Event:
        if self.pending:
            return Event(self.pending.pop(0))
        cpu = self.running
        while True:
            stop = min(cpu.stops, default=None)
            if stop is not None and stop[0] <= cpu.insts:
                cpu.stops.remove(stop)
                extra = self.step(self.rng.randint(0, self.overshoot), cpu) if cpu.o3 else []
                self.pending += extra
                return Event(stop[1])
            if self.pos >= self.exit:
                return Event("exiting with last active thread context")
            exits = self.step(1, cpu)
            if exits:
                self.pending += exits[1:]
                return Event(exits[0])

    def switch(self, system: Any, pairs: list[tuple[FakeCPU, FakeCPU]], verbose: bool = True) -> None:
        (old, new), = pairs
        assert old is self.running and new is not old
        if old.o3:  # the drain: the macro-op in flight completes; exits meanwhile are lost
            self.swallowed += self.pending + self.step(self.rng.randint(0, self.drain), old)
            self.pending = []
        self.running = new
        self.switches.append((self.pos, new.o3))


def load_script(world: World) -> Any:
    """se_sve.py with the model standing in for gem5's m5 module."""
    m5 = types.ModuleType("m5")
    m5.simulate = world.simulate  # type: ignore[attr-defined]
    m5.switchCpus = world.switch  # type: ignore[attr-defined]
    m5.objects = types.ModuleType("m5.objects")  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("m5", "m5.objects")}
    sys.modules.update({"m5": m5, "m5.objects": m5.objects})  # type: ignore[attr-defined]
    try:
        spec = importlib.util.spec_from_file_location("se_sve_under_test", REPO / "gem5_scripts" / "se_sve.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


UNIT, WARMUP, PERIOD, PREFIX = 100, 200, 1000, 3000


def sample(roi: int, seed: int = 1, cpi: Callable[[int], float] = lambda pos: 2.0, growth: int = 0,
           **world: int) -> tuple[World, dict]:
    w = World(5000, roi, 4000, cpi, random.Random(seed), **world)
    script = load_script(w)
    system = types.SimpleNamespace(cpu=w.pre)
    s = script.Sampler(system, w.o3, w.atomic, UNIT, WARMUP, PERIOD, PREFIX, growth, seed)
    assert w.simulate().getCause() == "workbegin"  # main() stops there, forks, and each fork begins
    s.begin()
    event = s.run()
    assert event.getCause() == "exiting with last active thread context" and w.pos == w.exit
    assert s.switches == {"workbegin": 1, "workend": 1}
    assert w.pre.insts == w.begin  # system.cpu runs up to the ROI only, as in a full run
    return w, s.record()


@pytest.mark.parametrize("roi", [10, 2999, 3000, 3500, 4000, 4321, 20_000, 123_457])
@pytest.mark.parametrize("seed", range(6))
def test_the_roi_is_counted_whole_and_only_whole_units_are_kept(roi: int, seed: int) -> None:
    w, rec = sample(roi, seed)
    lost = "workend" in w.swallowed
    assert rec["work_end_in_drain"] == lost
    # The ROI's end is read at its exit; when a drain swallowed it, where the drain stopped.
    assert roi <= rec["roi_insts"] <= roi + (3 + 2 if lost else 3)
    if rec["ended_in_prefix"]:
        assert roi <= PREFIX + 3 + 2 and not rec["units"]
        assert rec["prefix"]["insts"] <= rec["roi_insts"] + 2
    else:
        assert len(rec["prefix"]["periods"]) == PREFIX // PERIOD
        # Their ends are aimed at multiples of the period: each is late by the overshoot of its stop.
        assert all(PERIOD - 3 <= i <= PERIOD + 3 for i, _ in rec["prefix"]["periods"])
        # One unit per whole period after the prefix; the last may be cut by the ROI's end.
        rest = roi - rec["prefix"]["insts"]
        assert rest // PERIOD - 1 <= len(rec["units"]) + rec["dropped"] <= rest // PERIOD + 1 and rec["dropped"] <= 1
        assert all(UNIT <= i <= UNIT + 3 and c == pytest.approx(2.0 * i, abs=2) for i, c in rec["units"])
    assert rec["detailed_insts"] == w.o3.insts  # the O3 ran nothing before the ROI


def test_units_fall_at_random_offsets_inside_their_periods() -> None:
    """Stratified: period k's unit (its warm-up first) starts at a random offset in
    [0, period - warmup - unit] from the period's start, the periods counted from where the
    atomic CPU took over after the prefix."""
    w, rec = sample(60_000, 4)
    back, *starts = [pos for pos, to_o3 in w.switches[1:] if to_o3 or pos == w.switches[1][0]]
    offsets = [start - back - k * PERIOD for k, start in enumerate(starts)]
    assert len(offsets) == len(rec["units"]) + rec["dropped"] >= 50
    assert all(0 <= o <= PERIOD - WARMUP - UNIT for o in offsets)
    assert len(set(offsets)) > len(offsets) // 2


def test_the_period_doubles_after_every_growth_units() -> None:
    """growth 10: periods 0-9 are PERIOD long, 10-19 twice that, 20-29 four times; each unit
    starts inside its own period and the record says each kept unit's period."""
    w, rec = sample(3000 + 10 * PERIOD * (1 + 2 + 4) + 5 * 8 * PERIOD, 2, growth=10)
    back, *starts = [pos for pos, to_o3 in w.switches[1:] if to_o3 or pos == w.switches[1][0]]
    lengths = [PERIOD << (k // 10) for k in range(len(starts))]
    bounds = [back + sum(lengths[:k]) for k in range(len(starts) + 1)]
    assert len(starts) == 35 and rec["unit_periods"] == lengths[:len(rec["units"])]
    assert all(bounds[k] <= start <= bounds[k + 1] - WARMUP - UNIT for k, start in enumerate(starts))


def test_a_cpi_that_changes_along_the_roi_is_weighted_by_the_periods() -> None:
    """CPI 1 in the first half of the part after the prefix, 3 in the second: with growing
    periods the later units are fewer but weigh more, and the estimate still lands on the mean
    (2), where the units' plain mean (most of them in the first half) would not."""
    half = 3000 + 5000 + 10 * PERIOD * (1 + 2 + 4 + 8) // 2
    w, rec = sample(10 * PERIOD * (1 + 2 + 4 + 8), 5, cpi=lambda pos: 1.0 if pos < half else 3.0, growth=10)
    est = sampling.from_record(rec, w.o3.cycles)
    plain = sum(c / i for i, c in rec["units"]) / len(rec["units"])
    rest = rec["roi_insts"] - rec["prefix"]["insts"]
    assert plain < 1.8 and abs((est.cycles - rec["prefix"]["cycles"]) / rest - 2.0) < 0.2


def test_a_constant_cpi_is_estimated_exactly() -> None:
    w, rec = sample(123_457, 3)
    est = sampling.from_record(rec, w.o3.cycles)
    assert est.cycles == pytest.approx(2.0 * rec["roi_insts"], rel=1e-3)
    assert est.low <= 2.0 * rec["roi_insts"] <= est.high


def test_a_work_end_swallowed_by_a_drain_ends_the_roi() -> None:
    """Zero overshoot, a long drain: a work_end 5 instructions after the prefix's end falls in
    the drain most of the time, and one after a unit's end now and then; either way the ROI
    ends there, seen once, and the unit before it is kept."""
    kinds = set()
    for seed in range(60):
        for roi in (PREFIX + 5, PREFIX + 650):
            w, rec = sample(roi, seed, overshoot=0, drain=40)
            if rec["work_end_in_drain"]:
                kinds.add("prefix" if rec["ended_in_prefix"] else "unit")
                assert rec["ended_in_prefix"] or rec["units"]
    assert kinds == {"prefix", "unit"}
