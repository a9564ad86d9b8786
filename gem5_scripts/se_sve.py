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
"""
import argparse
import json
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


def build(desc, vl_bits, cmd):
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
    system.mem_ctrl = O.MemCtrl(dram=dram)
    system.mem_ctrl.port = system.membus.mem_side_ports

    system.workload = O.SEWorkload.init_compatible(cmd[0])
    system.cpu.createThreads()
    # One ISA object for both CPUs (as gem5's Simulation.py does), so one VL setting.
    system.switch_cpu.isa = system.cpu.isa
    system.switch_cpu.createThreads()
    for isa in system.cpu.isa:
        isa.sve_vl_se = vl_bits // 128
    return system


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--system", required=True, help="system description (JSON)")
    p.add_argument("--vl", type=int, required=True, help="SVE vector length in bits")
    # The VL rule is stated once, in the harness (analysis/core/config.py), and passed here.
    p.add_argument("--vl-rule", required=True, metavar="MIN:MAX:STEP", help="valid VLs, in bits")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- binary and its arguments")
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    lo, hi, step = (int(x) for x in args.vl_rule.split(":"))
    if args.vl % step or not lo <= args.vl <= hi or not cmd:
        sys.exit(f"se_sve.py: need --vl (multiple of {step}, {lo}..{hi}) and -- binary args")
    with open(args.system) as f:
        desc = json.load(f)

    system = build(desc, args.vl, cmd)
    root = O.Root(full_system=False, system=system)
    m5.instantiate()

    switches = {"workbegin": 0, "workend": 0}
    while True:
        event = m5.simulate()
        cause = event.getCause()
        if cause == "workbegin":
            m5.switchCpus(system, [(system.cpu, system.switch_cpu)], verbose=False)
        elif cause == "workend":
            m5.switchCpus(system, [(system.switch_cpu, system.cpu)], verbose=False)
        else:
            break
        switches[cause] += 1
    print(f"se_sve.py: exit cause: {cause}; code {event.getCode()}; "
          f"roi pairs: {switches['workbegin']}/{switches['workend']}; tick {m5.curTick()}")
    if switches["workbegin"] != 1 or switches["workend"] != 1:
        sys.exit("se_sve.py: expected exactly one ROI (work_begin/work_end pair); is the kernel linked with roi_gem5.o?")
    sys.exit(event.getCode())


if __name__ == "__m5_main__":
    main()
