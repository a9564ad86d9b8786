# Measure stage: native runs under perf stat, counters scoped to the ROI (paper Fig. 11, 12).
# SVE runs where the host has SVE (A64FX), host baselines where perf can count; each part the
# machine cannot run is skipped with one line (common.smk). The runs themselves go through
# the one rule of count.smk; this file tabulates and plots them.

PERF_JOBS = [j for j in PLANNED if R.REGISTRY[j.binary.backend].TABLE == "perf.csv"]
PERF_MESSAGES = [n for name, notes in NOTES.items() if R.REGISTRY[name].TABLE == "perf.csv" for n in notes]
PERF_FIGURES = [f"{RESULTS}/figures/{f.name}.png" for f in (SWEEP.perf.figures if SWEEP.perf else [])]
PERF_OUTPUTS = [f"{RESULTS}/perf.csv", f"{RESULTS}/perf_summary.md", *PERF_FIGURES] if PERF_JOBS else []
# Where a backend's jobs run in the emulated AArch64 guest and the sweep counts, its summary
# compares the guest's counts with the counting backend's (Backend.stats_report).
# perf's counts in the guest, or natively on an emulated node, are compared with the sweep's counts
# (perf_guest_check): exact there, so every cell is checked.
PERF_COUNTS = ([f"{RESULTS}/counts.csv"] if JOBS and any(r.found.get("guest") or r.found.get("node")
                                                         for r in READY.values()) else [])


rule perf_table:
    group: grouped(G.PERF_TAIL)
    input:
        raw=[job_output(j) for j in PERF_JOBS],
    output:
        f"{RESULTS}/perf.csv",
    log:
        f"{RESULTS}/logs/perf_table.log",
    shell:
        logged(STAGE_PY + " -m analysis.stages.collect --stats {output:q} {input.raw:q}")


rule perf_plot:
    group: grouped(G.PERF_TAIL)
    input:
        table=f"{RESULTS}/perf.csv",
        raw=[job_output(j) for j in PERF_JOBS],
        counts=PERF_COUNTS,
    output:
        figures=PERF_FIGURES,
        summary=f"{RESULTS}/perf_summary.md",
    log:
        f"{RESULTS}/logs/perf_plot.log",
    shell:
        logged(STAGE_PY + " -m analysis.stages.plot " + literal(SWEEP_ARGS) + " --stats {input.table:q} --summary {output.summary:q} "
               + literal("".join(f"--counts {shlex.quote(c)} " for c in PERF_COUNTS))
               + literal(" ".join(f"--message {shlex.quote(m)}" for m in PERF_MESSAGES)) + " {input.raw:q}")
