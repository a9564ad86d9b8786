"""gem5 SE-mode run of one SVE kernel binary on an out-of-order ARM core (gem5 v23+).

Usage (the harness builds this command; run from any directory):
  gem5.fast -d OUTDIR gem5_scripts/se_sve.py --system SYSTEM.json --vl 512 --vl-rule 128:2048:128 -- ./kernel 0512 000001048576 ...

SYSTEM.json is one entry of configs/gem5_systems.yaml (converted to JSON by the harness,
because gem5's embedded Python has no YAML). The kernel is linked with the gem5 marker
object (kernels/roi/roi_gem5.S): roi_begin executes m5 work_begin then reset_stats,
roi_end executes dump_stats then work_end. The run starts on an atomic CPU (filling the
inputs is not worth O3 time, and it warms the caches), switches to the O3 core at
work_begin, so the statistics reset by reset_stats and dumped by dump_stats are the O3
core's ROI, and switches back to the atomic CPU at work_end for verification. The SVE VL is
the ISA's sve_vl_se (quadwords); the kernel itself checks it with rdvl. gem5 writes
config.ini/config.json into OUTDIR: every run records what it simulated.

Two modes (--mode). full: the whole ROI on O3, as above. sampled: SMARTS-style sampling
(analysis/core/sampling.py states the estimate): the ROI's first --prefix instructions run on
O3 (a shorter ROI is simply a full run), then in every period of --period instructions one
unit of --unit instructions is measured on O3 after --warmup instructions of detailed warm-up,
at a random offset inside the period (--seed); the atomic CPU runs the rest and keeps the
caches (the same objects) and the branch predictor (the O3's, shared) warm. Every instruction
is still simulated: the ROI's instruction count is exact. The measured parts go to
OUTDIR/sampling.json; the harness turns them into cycles and an interval.
"""
import argparse
import itertools
import json
import os
import random
import sys

import m5
from m5 import objects as O


def cache(spec, line, read_only=False, level=1):
    """A classic cache from the system description; latencies as gem5's common Caches.py."""
    latency = 2 if level == 1 else 20
    return O.Cache(
        size=spec["size"], assoc=spec["assoc"], tag_latency=latency, data_latency=latency,
        response_latency=latency, mshrs=4 if level == 1 else 20, tgts_per_mshr=20 if level == 1 else 12,
        write_buffers=8, is_read_only=read_only, writeback_clean=read_only,
    )


def build(desc, vl_bits, cmd, sampled=False):
    system = O.System(
        mem_mode="atomic",
        mem_ranges=[O.AddrRange(desc["memory"]["size"])],
        cache_line_size=desc["cache_line"],
        exit_on_work_items=True,
    )
    system.voltage_domain = O.VoltageDomain()
    system.clk_domain = O.SrcClockDomain(clock=desc["clock"], voltage_domain=system.voltage_domain)

    process = O.Process(cmd=cmd, executable=cmd[0])
    system.cpu = O.ArmAtomicSimpleCPU(cpu_id=0)
    system.switch_cpu = O.ArmO3CPU(cpu_id=0, switched_out=True, **desc["o3"])
    for cpu in (system.cpu, system.switch_cpu):
        cpu.clk_domain = system.clk_domain
        cpu.workload = process

    system.membus = O.SystemXBar()
    system.system_port = system.membus.cpu_side_ports
    system.l2bus = O.L2XBar()
    system.l2 = cache(desc["l2"], desc["cache_line"], level=2)
    # The L1s are children of the atomic CPU (system.cpu.icache/dcache); the O3 core takes
    # over their ports when it is switched in.
    system.cpu.addPrivateSplitL1Caches(cache(desc["l1i"], desc["cache_line"], read_only=True),
                                       cache(desc["l1d"], desc["cache_line"]))
    system.cpu.createInterruptController()
    system.switch_cpu.createInterruptController()
    system.cpu.connectAllPorts(system.l2bus.cpu_side_ports, system.membus.cpu_side_ports,
                               system.membus.mem_side_ports)
    system.l2.cpu_side = system.l2bus.mem_side_ports
    system.l2.mem_side = system.membus.cpu_side_ports

    dram = getattr(O, desc["memory"]["type"])(range=system.mem_ranges[0])
    # Sampled: the controller keeps its write queue, open rows and refresh grid over the CPU
    # switches (the harness's gem5 patch; without it every unit began with an empty write queue
    # and never met a refresh: cycles up to 11 % low, docs/guide/gem5.md).
    system.mem_ctrl = O.MemCtrl(dram=dram, keep_queues_over_drain=sampled)
    system.mem_ctrl.port = system.membus.mem_side_ports

    system.workload = O.SEWorkload.init_compatible(cmd[0])
    system.cpu.createThreads()
    # One ISA object for both CPUs (as gem5's Simulation.py does), so one VL setting.
    system.switch_cpu.isa = system.cpu.isa
    system.switch_cpu.createThreads()
    if sampled:
        # The atomic CPU between units (functional warming): it predicts and trains the O3 core's
        # own branch predictor object (a second reference, not a copy), so a unit does not start
        # with the history the O3 had at the end of the unit before. It is not system.cpu, which
        # runs up to the ROI as in a full run: trained by the code before the ROI, the predictor
        # made a ROI inside the prefix up to 0.7 % off the full run.
        system.warm_cpu = O.ArmAtomicSimpleCPU(cpu_id=0, switched_out=True)
        system.warm_cpu.clk_domain = system.clk_domain
        system.warm_cpu.workload = process
        system.warm_cpu.createInterruptController()
        system.warm_cpu.isa = system.cpu.isa
        system.warm_cpu.createThreads()
        system.warm_cpu.branchPred = system.switch_cpu.branchPred
    for isa in system.cpu.isa:
        isa.sve_vl_se = vl_bits // 128
    return system


def switch(system, old, new):
    m5.switchCpus(system, [(old, new)], verbose=False)


def run_full(system):
    """The whole ROI on O3. Returns the exit event and the ROI pairs seen."""
    switches = {"workbegin": 0, "workend": 0}
    while True:
        event = m5.simulate()
        cause = event.getCause()
        if cause == "workbegin":
            switch(system, system.cpu, system.switch_cpu)
        elif cause == "workend":
            switch(system, system.switch_cpu, system.cpu)
        else:
            return event, switches
        switches[cause] += 1


class Sampler:
    """The sampled ROI as a small state machine driven by gem5's exit events. Every stop is
    scheduled on the CPU that runs (scheduleInstStop counts that CPU's own instructions, from
    now) under a cause of its own, so a stop left over when the ROI ended early is recognised
    and ignored if it ever fires. Positions are read from the CPUs' instruction counters at
    every exit (a stop on O3 fires a few instructions late: the cycle's other commits)."""

    def __init__(self, system, unit, warmup, period, prefix, seed):
        self.system, self.atomic, self.o3 = system, system.warm_cpu, system.switch_cpu
        self.unit, self.warmup, self.period, self.prefix = unit, warmup, period, prefix
        self.rng = random.Random(seed)
        self.causes = itertools.count()
        self.expect = None
        self.phase = "before"
        self.switches = {"workbegin": 0, "workend": 0}
        self.periods, self.units, self.dropped = [], [], 0
        self.work_end_in_drain = False
        self.cpu_switches = 0
        self.ended_in_prefix = True  # until the prefix is over
        self.end_cpu = None  # the CPU the ROI ended on, "o3" or "atomic" (the count depends on it)
        self.period_index = 0

    def total(self):
        return self.atomic.totalInsts() + self.o3.totalInsts()

    def o3_stat(self, name):
        stat = self.o3.resolveStat(name)
        if stat is None:
            sys.exit(f"se_sve.py: the O3 core has no statistic {name} (gem5 version?)")
        return int(stat.value)

    def snapshot(self):
        return self.o3.totalInsts(), self.o3_stat("numCycles")

    def stop(self, cpu, insts):
        self.expect = f"sample stop {next(self.causes)}"
        cpu.scheduleInstStop(0, max(1, int(insts)), self.expect)

    def to_o3(self):
        switch(self.system, self.atomic, self.o3)
        self.cpu_switches += 1

    def to_atomic(self):
        """Back to the atomic CPU. The O3 drains first (it completes the macro-op in flight), and
        gem5 swallows an exit that fires while it drains: a work_end among those instructions is
        seen in the O3's work-item count instead. Returns whether the ROI ended there."""
        switch(self.system, self.o3, self.atomic)
        self.cpu_switches += 1
        if self.o3_stat("numWorkItemsCompleted") > 0:
            self.work_end_in_drain = True
            return True
        return False

    def run(self):
        while True:
            event = m5.simulate()
            cause = event.getCause()
            if cause == "workbegin":
                self.switches[cause] += 1
                self.begin()
            elif cause == "workend":
                self.switches[cause] += 1
                self.end(self.phase in ("prefix", "warm", "unit"))
            elif cause == self.expect:
                self.expect = None
                handlers = {"prefix": self.on_prefix, "ff": self.on_ff, "warm": self.on_warm, "unit": self.on_unit}
                handlers[self.phase]()
            elif cause.startswith("sample stop "):
                continue  # a stop the ROI's end left behind
            else:
                return event

    def begin(self):
        self.start = self.total()
        switch(self.system, self.system.cpu, self.o3)  # as a full run does
        self.cpu_switches += 1
        # roi_begin's reset_stats, a few instructions on, zeroes the O3's cycle count (not its
        # instruction counter, which is no statistic): the prefix's cycles count from 0.
        self.o3_start = (self.o3.totalInsts(), 0)
        self.last = self.o3_start
        self.phase = "prefix"
        self.stop(self.o3, self.period)

    def on_prefix(self):
        now = self.snapshot()
        self.periods.append([now[0] - self.last[0], now[1] - self.last[1]])
        self.last = now
        if len(self.periods) < self.prefix // self.period:
            done = now[0] - self.o3_start[0]
            self.stop(self.o3, (len(self.periods) + 1) * self.period - done)
            return
        ended = self.to_atomic()
        self.prefix_part = self.o3_part()
        if ended:
            self.finish(in_prefix=True)
            return
        self.ended_in_prefix = False
        self.rest_start = self.total() - self.start
        self.next_unit()

    def o3_part(self):
        insts, cycles = self.snapshot()
        return {"insts": insts - self.o3_start[0], "cycles": cycles - self.o3_start[1]}

    def next_unit(self):
        """Period k after the prefix gets its unit (warm-up and unit) at a random offset inside it."""
        k = self.period_index
        self.period_index += 1
        begin = self.rest_start + k * self.period + self.rng.randrange(0, self.period - self.warmup - self.unit + 1)
        self.phase = "ff"
        self.stop(self.atomic, begin - (self.total() - self.start))

    def on_ff(self):
        self.to_o3()
        self.phase = "warm"
        self.stop(self.o3, self.warmup)

    def on_warm(self):
        self.mark = self.snapshot()
        self.phase = "unit"
        self.stop(self.o3, self.unit)

    def on_unit(self):
        now = self.snapshot()
        self.units.append([now[0] - self.mark[0], now[1] - self.mark[1]])
        if self.to_atomic():
            self.finish(in_prefix=False)  # the unit was whole: the ROI ended in the drain after it
            return
        self.next_unit()

    def end(self, on_o3):
        """work_end, seen: the ROI ends here; a unit it cuts short is dropped."""
        if self.phase in ("warm", "unit"):
            self.dropped += 1
        self.roi_insts = self.total() - self.start
        if self.phase == "prefix":
            self.prefix_part = self.o3_part()
        self.end_cpu = "o3" if on_o3 else "atomic"
        if on_o3:
            switch(self.system, self.o3, self.atomic)
            self.cpu_switches += 1
        self.phase, self.expect = "after", None

    def finish(self, in_prefix):
        """The ROI ended while the O3 drained (see to_atomic): it ends where the drain ended."""
        self.switches["workend"] += 1
        self.end_cpu = "o3"
        self.roi_insts = self.total() - self.start
        self.ended_in_prefix = in_prefix
        self.phase, self.expect = "after", None

    def record(self):
        return {
            "settings": {"unit": self.unit, "warmup": self.warmup, "period": self.period, "prefix": self.prefix},
            "roi_insts": self.roi_insts, "ended_in_prefix": self.ended_in_prefix,
            "prefix": dict(self.prefix_part, periods=self.periods), "units": self.units, "dropped": self.dropped,
            "cpu_switches": self.cpu_switches, "end_cpu": self.end_cpu, "work_end_in_drain": self.work_end_in_drain,
            "detailed_insts": self.o3.totalInsts() - self.o3_start[0],
        }


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--system", required=True, help="system description (JSON)")
    p.add_argument("--vl", type=int, required=True, help="SVE vector length in bits")
    # The VL rule is stated once, in the harness (analysis/core/config.py), and passed here.
    p.add_argument("--vl-rule", required=True, metavar="MIN:MAX:STEP", help="valid VLs, in bits")
    p.add_argument("--mode", choices=["full", "sampled"], default="full", help="the ROI on O3 whole or sampled")
    p.add_argument("--unit", type=int, default=4000, help="sampled: instructions measured per unit")
    p.add_argument("--warmup", type=int, default=2000, help="sampled: detailed warm-up before each unit")
    p.add_argument("--period", type=int, default=20000, help="sampled: one unit per this many instructions")
    p.add_argument("--prefix", type=int, default=200000, help="sampled: the ROI's first instructions, all on O3")
    p.add_argument("--seed", type=int, default=1, help="sampled: the units' offsets inside their periods")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- binary and its arguments")
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    lo, hi, step = (int(x) for x in args.vl_rule.split(":"))
    if args.vl % step or not lo <= args.vl <= hi or not cmd:
        sys.exit(f"se_sve.py: need --vl (multiple of {step}, {lo}..{hi}) and -- binary args")
    sampled = args.mode == "sampled"
    if sampled and not (args.unit > 0 and args.warmup >= 0 and args.period >= args.unit + args.warmup
                        and args.prefix >= 2 * args.period):
        sys.exit("se_sve.py: need unit > 0, period >= warmup + unit and prefix >= 2 periods")
    with open(args.system) as f:
        desc = json.load(f)

    system = build(desc, args.vl, cmd, sampled)
    root = O.Root(full_system=False, system=system)
    m5.instantiate()

    if sampled:
        sampler = Sampler(system, args.unit, args.warmup, args.period, args.prefix, args.seed)
        event, switches = sampler.run(), sampler.switches
    else:
        event, switches = run_full(system)
    cause = event.getCause()
    print(f"se_sve.py: exit cause: {cause}; code {event.getCode()}; "
          f"roi pairs: {switches['workbegin']}/{switches['workend']}; tick {m5.curTick()}")
    if switches["workbegin"] != 1 or switches["workend"] != 1:
        sys.exit("se_sve.py: expected exactly one ROI (work_begin/work_end pair); is the kernel linked with roi_gem5.o?")
    if sampled:
        rec = sampler.record()
        with open(os.path.join(m5.options.outdir, "sampling.json"), "w") as f:
            json.dump(rec, f)
        print(f"se_sve.py: sampled: {rec['roi_insts']} ROI instructions, {rec['detailed_insts']} on O3, "
              f"{len(rec['units'])} units ({rec['dropped']} dropped), {rec['cpu_switches']} switches"
              + ("; the ROI ended inside the prefix: a full O3 run" if rec["ended_in_prefix"] else ""))
    sys.exit(event.getCode())


if __name__ == "__m5_main__":
    main()
