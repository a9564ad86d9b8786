# Collect stage: parse every raw count file into one tidy table, subtract the baseline
# (size 0) and write results/counts.csv with its provenance sidecar, atomically.


rule collect:
    group: grouped(G.TAIL)
    input:
        raw=[job_output(j) for j in JOBS],
        objdump=stamp("compiler.gcc") if "gcc" in SWEEP.compilers else [],
    output:
        counts=f"{RESULTS}/counts.csv",
        provenance=f"{RESULTS}/provenance.csv",
    log:
        f"{RESULTS}/logs/collect.log",
    shell:
        logged(STAGE_PY + " -m analysis.stages.collect " + literal(SWEEP_ARGS) + " --counts {output.counts:q} "
               "--provenance {output.provenance:q} {input.raw:q}")
