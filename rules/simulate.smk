# Simulate stage: the cycle sweep in gem5 (SE mode, O3 core after an atomic fast-forward to
# the ROI), one job per (binary, system); present only where gem5 is found.


rule simulate_gem5:
    input:
        binary=f"{BUILD}/{{compiler}}/{{build}}/bin/gem5/{{kernel}}-{{variant}}",
        script="gem5_scripts/se_sve.py",
        systems="configs/gem5_systems.yaml",
        gem5=stamp("gem5"),
    output:
        f"{RESULTS}/raw/gem5/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.json",
    log:
        f"{RESULTS}/logs/simulate/gem5/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.log",
    params:
        runs=lambda wc: _runs_param(wc, "gem5"),
        args=SWEEP_ARGS,
    shell:
        "{PY} -m analysis.count {params.args} --backend gem5 --compiler {wildcards.compiler} "
        "--build {wildcards.build} --cpu {wildcards.cpu} --kernel {wildcards.kernel} "
        "--variant {wildcards.variant} --out {output} 2> {log} || {{ tail -n 1 {log} >&2; exit 1; }}"
