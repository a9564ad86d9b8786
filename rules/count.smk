# Count, simulate and measure stages: the one rule every backend's jobs run through
# (analysis/backends/registry.py). One job per (binary, CPU model): its plan (runs, time
# limits, tool versions; written once by common.smk) is an input, so changing the VL or size
# list re-runs exactly the jobs it affects.
#
# The rule is written once and instantiated per backend (count_qemu, count_armie,
# simulate_gem5, measure_perf), the backend fixed in its paths: Slurm profiles size jobs by
# rule name (a perf measurement needs a whole node where a QEMU count needs one core), and a
# job's name shows the same wildcards whatever the backend.
#
# Locally, a backend with short cells (GROUPED) runs the VLS jobs of one row, compiler and CPU
# model as one job of the rule <rule>_vls, one plan after the other
# (analysis.stages.count.merged_builds): a default sweep's VLS job runs about 40 ms of QEMU, less
# than the Python process and Snakemake's share of a job that each job costs. Plans and raw files
# stay one per binary. Through Slurm every binary stays a job of its own (its cells are grouped
# into Slurm jobs there).
for _backend in R.REGISTRY.values():
    _name = f"{_backend.STAGE}_{_backend.NAME}"
    _where = f"{_backend.NAME}/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}"
    _merged = N.merged_builds(j for j in PLANNED if j.binary.backend == _backend.NAME) \
        if _backend.GROUPED and not SLURM_COUNT_JOBS else ()

    if _merged:
        _each = [f"{_backend.NAME}/{{compiler}}/{b}/{{cpu}}/{{kernel}}-{{variant}}" for b in _merged]

        rule:
            name:
                f"{_name}_vls"
            input:
                binaries=[f"{BUILD}/{{compiler}}/{b}/bin/{_backend.NAME}/{{kernel}}-{{variant}}" for b in _merged],
                plans=[f"{RESULTS}/plans/{w}.json" for w in _each],
                tools=_backend.inputs(SWEEP.build_dir),
            output:
                [f"{RESULTS}/raw/{w}.json" for w in _each],
            log:
                f"{RESULTS}/logs/{_backend.STAGE}/{_backend.NAME}/{{compiler}}/vls/{{cpu}}/{{kernel}}-{{variant}}.log",
            threads: job_threads(_backend)
            # The command's text names no loop variable: Snakemake formats it when the job runs.
            shell:
                logged("{PY} -m analysis.stages.count --plan {input.plans:q} --out {output:q}")

    rule:
        name:
            _name
        input:
            binary=f"{BUILD}/{{compiler}}/{{build}}/bin/{_backend.NAME}/{{kernel}}-{{variant}}",
            plan=f"{RESULTS}/plans/{_where}.json",
            tools=_backend.inputs(SWEEP.build_dir),
        output:
            f"{RESULTS}/raw/{_where}.json",
        log:
            f"{RESULTS}/logs/{_backend.STAGE}/{_where}.log",
        # The merged rule's builds are its outputs alone (a build is followed by / in every path).
        wildcard_constraints:
            build=f"(?!(?:{'|'.join(_merged)})/)(?:{C.BUILD_PATTERN})" if _merged else C.BUILD_PATTERN,
        # Through Slurm: short cells share a Slurm job with their neighbours, long ones are one each.
        group: grouped(cell_group(_backend.NAME) if _backend.GROUPED else None)
        # A measurement takes every core the workflow has, so nothing else runs beside it (its plan
        # may say it needs one: perf's runs in the emulated guest, one single-threaded QEMU each).
        threads: job_threads(_backend)
        resources:
            runtime=cell_minutes(_backend.NAME),
        shell:
            logged("{PY} -m analysis.stages.count --plan {input.plan:q} --out {output:q}")
