"""gem5 SE-mode runs of one SVE kernel binary on an out-of-order ARM core (gem5 v24), at
one or more VLs.

Usage (the harness builds this command; run from any directory):
  gem5.fast --listener-mode=off -d OUTDIR gem5_scripts/se_sve.py --system SYSTEM.json \
      --vl 128,512 --vl-dir 'OUTDIR/vl{vl}' --vl-rule 128:2048:128 -- ./kernel 0128 000001048576 ...

SYSTEM.json is one entry of configs/gem5_systems.yaml (converted to JSON by the harness,
because gem5's embedded Python has no YAML). The kernel is linked with the gem5 marker
object (kernels/roi/roi_gem5.S): roi_begin executes m5 work_begin then reset_stats,
roi_end executes dump_stats then work_end. The run starts on an atomic CPU (filling the
inputs is not worth O3 time, and it warms the caches) at the first VL and stops at
work_begin. The program up to there does not depend on the VL (the harness keeps it off SVE),
so this one simulation serves every VL: at work_begin gem5 forks (m5.fork) once per VL, one
fork after the other. A fork switches to its VL's O3 core (an ISA object of its own holds the
VL: sve_vl_se, fixed once gem5 runs), so the statistics reset by reset_stats and dumped by
dump_stats are that O3 core's ROI, then back to its VL's atomic CPU at work_end for the
verification; the kernel's ok line reads the VL again at its end. Each fork writes stats.txt,
simout.txt and simerr.txt into its --vl-dir; the parent prints "se_sve.py: done vl=N code=C"
as each ends. gem5 writes config.ini/config.json into OUTDIR: every run records what it
simulated. Measured: a fork's cycles equal those of a gem5 started at its VL, to the cycle.

Two modes (--mode). full: the whole ROI on O3, as above. sampled: SMARTS-style sampling
(analysis/core/sampling.py states the estimate): the ROI's first --prefix instructions run on
O3 (a shorter ROI is simply a full run), then in every period of --period instructions one
unit of --unit instructions is measured on O3 after --warmup instructions of detailed warm-up,
at a random offset inside the period (--seed), the period doubling after every --growth units;
the atomic CPU runs the rest and keeps the caches (the same objects) and the branch predictor
(the O3's, shared) warm. Every instruction is still simulated: the ROI's instruction count is
exact. The measured parts go to sampling.json in the VL's directory; the harness turns them
into cycles and an interval.
"""
import argparse
import atexit
import ctypes
import itertools
import json
import os
import random
import signal
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


def caches(system, desc):
    """The L1s and the L2 of the system description. The L1s are children of the atomic CPU
    (system.cpu.icache/dcache); an O3 core takes over their ports when it is switched in."""
    system.l2bus = O.L2XBar()
    system.l2 = cache(desc["l2"], desc["cache_line"], level=2)
    system.cpu.addPrivateSplitL1Caches(cache(desc["l1i"], desc["cache_line"], read_only=True),
                                       cache(desc["l1d"], desc["cache_line"]))
    system.cpu.connectAllPorts(system.l2bus.cpu_side_ports, system.membus.cpu_side_ports,
                               system.membus.mem_side_ports)
    system.l2.cpu_side = system.l2bus.mem_side_ports
    system.l2.mem_side = system.membus.cpu_side_ports


def memory(desc, addr_range, sampled):
    """SimpleMemory (one fixed latency) or a DRAM interface behind gem5's memory controller."""
    mem = desc["memory"]
    if mem["type"] == "SimpleMemory":
        return O.SimpleMemory(range=addr_range, latency=mem["latency"], latency_var="0ns",
                              bandwidth=mem["bandwidth"])
    dram = getattr(O, mem["type"])(range=addr_range)
    # Sampled: the controller keeps its write queue, open rows and refresh grid over the CPU
    # switches (the harness's gem5 patch; without it every unit began with an empty write queue
    # and never met a refresh: cycles up to 11 % low, docs/guide/gem5.md).
    return O.MemCtrl(dram=dram, keep_queues_over_drain=sampled)


def build(desc, vls, cmd, sampled=False):
    system = O.System(
        mem_mode="atomic",
        mem_ranges=[O.AddrRange(desc["memory"]["size"])],
        cache_line_size=desc["cache_line"],
        exit_on_work_items=True,
    )
    system.voltage_domain = O.VoltageDomain()
    system.clk_domain = O.SrcClockDomain(clock=desc["clock"], voltage_domain=system.voltage_domain)

    process = O.Process(cmd=cmd, executable=cmd[0])
    # The program up to the ROI: once, on this atomic CPU, at the first VL.
    system.cpu = O.ArmAtomicSimpleCPU(cpu_id=0)
    system.cpu.clk_domain = system.clk_domain
    system.cpu.workload = process

    # The memory bus as gem5's SystemXBar, but for what the description changes (the ideal
    # memory's: its width and latencies, which otherwise bound the data at 16 bytes a cycle).
    system.membus = O.SystemXBar(**desc.get("bus", {}))
    system.system_port = system.membus.cpu_side_ports
    system.cpu.createInterruptController()
    if "l1d" in desc:
        caches(system, desc)
    else:
        # An instruction cache only (SimEng's kind of memory: instructions fetched from a flat
        # memory, data at one fixed latency): the data port and the table walkers straight on the
        # memory bus. Without the L1I every fetch paid the memory's latency: the scalar loops ran
        # 2 to 4 times the paper system's cycles.
        system.cpu.icache = cache(desc["l1i"], desc["cache_line"], read_only=True)
        system.cpu.icache_port = system.cpu.icache.cpu_side
        system.cpu._cached_ports = ["icache.mem_side", "dcache_port", *system.cpu.ArchMMU.walkerPorts()]
        system.cpu.connectAllPorts(system.membus.cpu_side_ports, system.membus.cpu_side_ports,
                                   system.membus.mem_side_ports)
    system.mem_ctrl = memory(desc, system.mem_ranges[0], sampled)
    system.mem_ctrl.port = system.membus.mem_side_ports

    system.workload = O.SEWorkload.init_compatible(cmd[0])
    system.cpu.createThreads()
    for isa in system.cpu.isa:
        isa.sve_vl_se = vls[0] // 128

    # Per VL an O3 core for the ROI and an atomic CPU for what follows it (the verification; in
    # the sampled mode also the functional warming between units), sharing one ISA object set
    # to that VL. The VL is an ISA parameter, fixed once gem5 has started, so each VL has its
    # own; a switch copies every register into the ISA of the CPU switched in.
    for vl in vls:
        o3 = O.ArmO3CPU(cpu_id=0, switched_out=True, **desc["o3"])
        after = O.ArmAtomicSimpleCPU(cpu_id=0, switched_out=True)
        for cpu in (o3, after):
            cpu.clk_domain = system.clk_domain
            cpu.workload = process
            cpu.createInterruptController()
        o3.createThreads()
        for isa in o3.isa:
            isa.sve_vl_se = vl // 128
        after.isa = o3.isa
        after.createThreads()
        if sampled:
            # The atomic CPU between units predicts and trains the O3 core's own branch
            # predictor object (a second reference, not a copy), so a unit does not start with
            # the history the O3 had at the end of the unit before. The CPU before the ROI has
            # none: trained by the code before the ROI, the predictor made a ROI inside the
            # prefix up to 0.7 % off the full run.
            after.branchPred = o3.branchPred
        setattr(system, o3_name(vl), o3)
        setattr(system, atomic_name(vl), after)
    return system


def o3_name(vl):
    """The statistics of VL 512's CPUs are system.switch_cpu_vl512.* and system.warm_cpu_vl512.*."""
    return f"switch_cpu_vl{vl}"


def atomic_name(vl):
    return f"warm_cpu_vl{vl}"


def switch(system, old, new):
    m5.switchCpus(system, [(old, new)], verbose=False)


def run_full(system, o3, after):
    """From the ROI's work_begin: the ROI whole on O3, the rest on the atomic CPU after it.
    Returns the exit event and the ROI pairs seen (the work_begin the caller stopped at counted)."""
    switches = {"workbegin": 1, "workend": 0}
    switch(system, system.cpu, o3)
    while True:
        event = m5.simulate()
        cause = event.getCause()
        if cause not in switches:
            return event, switches
        switches[cause] += 1  # a second ROI is counted, not simulated apart: an error below
        if cause == "workend" and switches[cause] == 1:
            switch(system, o3, after)


class Sampler:
    """The sampled ROI as a small state machine driven by gem5's exit events. Every stop is
    scheduled on the CPU that runs (scheduleInstStop counts that CPU's own instructions, from
    now) under a cause of its own, so a stop left over when the ROI ended early is recognised
    and ignored if it ever fires. Positions are read from the CPUs' instruction counters at
    every exit (a stop on O3 fires a few instructions late: the cycle's other commits)."""

    def __init__(self, system, o3, atomic, unit, warmup, period, prefix, growth, seed):
        self.system, self.atomic, self.o3 = system, atomic, o3
        self.unit, self.warmup, self.period, self.prefix, self.growth = unit, warmup, period, prefix, growth
        self.rng = random.Random(seed)
        self.causes = itertools.count()
        self.expect = None
        self.phase = "before"
        self.switches = {"workbegin": 1, "workend": 0}  # the caller stopped at the ROI's work_begin
        self.periods, self.units, self.dropped = [], [], 0
        self.unit_periods = []  # the length of each kept unit's period
        self.work_end_in_drain = False
        self.cpu_switches = 0
        self.ended_in_prefix = True  # until the prefix is over
        self.end_cpu = None  # the CPU the ROI ended on, "o3" or "atomic" (the count depends on it)
        self.period_index = 0
        self.stratum = 0  # where period period_index starts, after the prefix
        self.current_period = period

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
                self.switches[cause] += 1  # a second ROI: an error below
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
        """At the ROI's work_begin (the caller stopped there): the prefix starts on O3."""
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

    def period_of(self, k):
        """Period k after the prefix: `period` instructions, doubled after every `growth` periods."""
        return self.period << (k // self.growth) if self.growth else self.period

    def next_unit(self):
        """Period k after the prefix gets its unit (warm-up and unit) at a random offset inside it."""
        k = self.period_index
        self.period_index += 1
        self.current_period = self.period_of(k)
        offset = self.rng.randrange(0, self.current_period - self.warmup - self.unit + 1)
        begin = self.rest_start + self.stratum + offset
        self.stratum += self.current_period
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
        self.unit_periods.append(self.current_period)
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
            "settings": {"unit": self.unit, "warmup": self.warmup, "period": self.period, "prefix": self.prefix,
                         "growth": self.growth},
            "roi_insts": self.roi_insts, "ended_in_prefix": self.ended_in_prefix,
            "prefix": dict(self.prefix_part, periods=self.periods), "units": self.units, "unit_periods": self.unit_periods, "dropped": self.dropped,
            "cpu_switches": self.cpu_switches, "end_cpu": self.end_cpu, "work_end_in_drain": self.work_end_in_drain,
            "detailed_insts": self.o3.totalInsts() - self.o3_start[0],
        }


PR_SET_PDEATHSIG = 1


def own_output(outdir):
    """A forked child's stdout and stderr (the kernel's ok line, gem5's messages) to files of its
    own directory; gem5 moves the files it opened itself (stats.txt) when the fork sets it. The
    child dies with its parent, as the parent dies with the harness's job (run_cells)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, name in ((1, "simout.txt"), (2, "simerr.txt")):
        f = os.open(os.path.join(outdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)


def roi_at(system, vl, seed, args):
    """In a forked child stopped at the ROI's work_begin: the ROI and the rest of the program at
    this VL. Exits gem5 with the program's exit code."""
    # gem5 dumps the statistics once more at exit; the harness reads the ROI's block only, and a
    # dump of eleven CPUs' statistics takes about a tenth of a second per VL.
    atexit.unregister(m5.stats.dump)
    o3, after = getattr(system, o3_name(vl)), getattr(system, atomic_name(vl))
    if args.mode == "sampled":
        sampler = Sampler(system, o3, after, args.unit, args.warmup, args.period, args.prefix, args.growth, seed)
        sampler.begin()
        event, switches = sampler.run(), sampler.switches
    else:
        event, switches = run_full(system, o3, after)
    cause = event.getCause()
    print(f"se_sve.py: vl {vl}: exit cause: {cause}; code {event.getCode()}; "
          f"roi pairs: {switches['workbegin']}/{switches['workend']}; tick {m5.curTick()}")
    if switches["workend"] != 1 or switches["workbegin"] != 1:
        sys.exit("se_sve.py: expected exactly one ROI (work_begin/work_end pair); is the kernel linked with roi_gem5.o?")
    if args.mode == "sampled":
        rec = sampler.record()
        with open(os.path.join(m5.options.outdir, "sampling.json"), "w") as f:
            json.dump(rec, f)
        print(f"se_sve.py: sampled: {rec['roi_insts']} ROI instructions, {rec['detailed_insts']} on O3, "
              f"{len(rec['units'])} units ({rec['dropped']} dropped), {rec['cpu_switches']} switches"
              + ("; the ROI ended inside the prefix: a full O3 run" if rec["ended_in_prefix"] else ""))
    sys.exit(event.getCode())


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--system", required=True, help="system description (JSON)")
    p.add_argument("--vl", required=True, metavar="BITS[,BITS...]",
                   help="SVE vector lengths in bits: the program runs once up to its ROI (at the first), "
                        "then the ROI and the rest at each, in a forked gem5 of its own")
    p.add_argument("--vl-dir", required=True, metavar="TEMPLATE",
                   help="the output directory of each VL's fork, {vl} replaced by the VL")
    # The VL rule is stated once, in the harness (analysis/core/config.py), and passed here.
    p.add_argument("--vl-rule", required=True, metavar="MIN:MAX:STEP", help="valid VLs, in bits")
    p.add_argument("--mode", choices=["full", "sampled"], default="full", help="the ROI on O3 whole or sampled")
    p.add_argument("--unit", type=int, default=4000, help="sampled: instructions measured per unit")
    p.add_argument("--warmup", type=int, default=2000, help="sampled: detailed warm-up before each unit")
    p.add_argument("--period", type=int, default=20000, help="sampled: one unit per this many instructions")
    p.add_argument("--prefix", type=int, default=200000, help="sampled: the ROI's first instructions, all on O3")
    p.add_argument("--growth", type=int, default=0, help="sampled: the period doubles after every this many units (0: never)")
    p.add_argument("--seed", default="1", metavar="SEED[,SEED...]",
                   help="sampled: the units' offsets inside their periods, one seed per VL (or one for all)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- binary and its arguments")
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    lo, hi, step = (int(x) for x in args.vl_rule.split(":"))
    vls = [int(v) for v in args.vl.split(",") if v.strip().isdigit()]
    if (len(vls) != len(args.vl.split(",")) or len(set(vls)) != len(vls)
            or any(v % step or not lo <= v <= hi for v in vls) or not cmd):
        sys.exit(f"se_sve.py: need --vl (distinct multiples of {step}, {lo}..{hi}, comma-separated) and -- binary args")
    seeds = [int(x) for x in args.seed.split(",")]
    seeds = seeds * len(vls) if len(seeds) == 1 else seeds
    if len(seeds) != len(vls):
        sys.exit("se_sve.py: need one --seed, or one per VL")
    sampled = args.mode == "sampled"
    if sampled and not (args.unit > 0 and args.warmup >= 0 and args.period >= args.unit + args.warmup
                        and args.prefix >= 2 * args.period and args.growth >= 0):
        sys.exit("se_sve.py: need unit > 0, period >= warmup + unit, prefix >= 2 periods and growth >= 0")
    with open(args.system) as f:
        desc = json.load(f)

    system = build(desc, vls, cmd, sampled)
    root = O.Root(full_system=False, system=system)
    m5.instantiate()

    event = m5.simulate()
    if event.getCause() != "workbegin":
        print(f"se_sve.py: exit cause: {event.getCause()}; code {event.getCode()}; no ROI; tick {m5.curTick()}")
        sys.exit("se_sve.py: the program ended before its ROI (work_begin); is the kernel linked with roi_gem5.o?")
    # The program up to here does not depend on the VL (the harness keeps it off SVE): one
    # simulation of it serves every VL. Each VL's ROI runs in a fork of this gem5, one after
    # the other (the job holds one core); the fork starts from this very state, caches included.
    worst = 0
    for vl, seed in zip(vls, seeds):
        outdir = args.vl_dir.format(vl=vl)
        os.makedirs(outdir, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = m5.fork(outdir)
        if pid == 0:
            own_output(outdir)
            roi_at(system, vl, seed, args)  # exits
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        worst = worst or code
        print(f"se_sve.py: done vl={vl} code={code} dir={outdir}", flush=True)
    sys.exit(worst)


if __name__ == "__m5_main__":
    main()
