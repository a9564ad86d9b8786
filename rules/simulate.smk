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
        "{PY} -m analysis.count {params.args} --backend gem5 --compiler {wildcards.compiler:q} "
        "--build {wildcards.build:q} --cpu {wildcards.cpu:q} --kernel {wildcards.kernel:q} "
        "--variant {wildcards.variant:q} --out {output:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"
