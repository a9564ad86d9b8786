# Count, simulate and measure stages: the one rule every backend's jobs run through
# (analysis/backends/registry.py). One job per (binary, CPU model): its plan (runs, time
# limits, tool versions; written once by common.smk) is an input, so changing the VL or size
# list re-runs exactly the jobs it affects.
#
# The rule is written once and named per backend (count_qemu, count_armie, simulate_gem5,
# measure_perf): Slurm profiles size jobs by rule name, and a perf measurement needs a whole
# node where a QEMU count needs one core.

for _backend in R.REGISTRY.values():

    rule:
        name:
            f"{_backend.STAGE}_{_backend.NAME}"
        input:
            binary=f"{BUILD}/{{compiler}}/{{build}}/bin/{{backend}}/{{kernel}}-{{variant}}",
            plan=f"{RESULTS}/plans/{{backend}}/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.json",
            tools=lambda wc: R.REGISTRY[wc.backend].inputs(SWEEP.build_dir),
        output:
            f"{RESULTS}/raw/{{backend}}/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.json",
        log:
            f"{RESULTS}/logs/{_backend.STAGE}/{{backend}}/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.log",
        wildcard_constraints:
            backend=_backend.NAME,
        # A measurement takes every core the workflow has, so nothing else runs beside it.
        threads: workflow.cores if _backend.EXCLUSIVE else 1
        shell:
            logged("{PY} -m analysis.count --plan {input.plan:q} --out {output:q}")
