# Count, simulate and measure stages: the one rule every backend's jobs run through
# (analysis/backends/registry.py). One job per (binary, CPU model): its plan (runs, time
# limits, tool versions; written once by common.smk) is an input, so changing the VL or size
# list re-runs exactly the jobs it affects.
#
# The rule is written once and instantiated per backend (count_qemu, count_armie,
# simulate_gem5, measure_perf), the backend fixed in its paths: Slurm profiles size jobs by
# rule name (a perf measurement needs a whole node where a QEMU count needs one core), and a
# job's name shows the same wildcards whatever the backend.
for _backend in R.REGISTRY.values():
    _where = f"{_backend.NAME}/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}"

    rule:
        name:
            f"{_backend.STAGE}_{_backend.NAME}"
        input:
            binary=f"{BUILD}/{{compiler}}/{{build}}/bin/{_backend.NAME}/{{kernel}}-{{variant}}",
            plan=f"{RESULTS}/plans/{_where}.json",
            tools=_backend.inputs(SWEEP.build_dir),
        output:
            f"{RESULTS}/raw/{_where}.json",
        log:
            f"{RESULTS}/logs/{_backend.STAGE}/{_where}.log",
        # Through Slurm: short cells share a Slurm job with their neighbours, long ones are one each.
        group: grouped(cell_group(_backend.NAME) if _backend.GROUPED else None)
        # A measurement takes every core the workflow has, so nothing else runs beside it (its plan
        # may say it needs one: perf's runs in the emulated guest, one single-threaded QEMU each).
        threads: job_threads(_backend)
        resources:
            runtime=cell_minutes(_backend.NAME),
        shell:
            logged("{PY} -m analysis.stages.count --plan {input.plan:q} --out {output:q}")
