# Count stage: run every binary at every VL and size of the sweep through a backend.
# One job per (binary, CPU model); its runs are a param, so changing the VL or size list
# re-runs exactly the jobs it affects.

CLIENTS = ["inscount", "opcodes", "memory"]


def _runs_param(wc, backend):
    return json.dumps([r.argv() for r in find_job(wc, backend).runs])


rule count_qemu:
    input:
        binary=f"{BUILD}/{{compiler}}/{{build}}/bin/qemu/{{kernel}}-{{variant}}",
        plugins=expand(f"{BUILD}/plugins/lib{{client}}.so", client=CLIENTS),
        qemu=stamp("qemu"),
    output:
        f"{RESULTS}/raw/qemu/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.json",
    log:
        f"{RESULTS}/logs/count/qemu/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.log",
    params:
        runs=lambda wc: _runs_param(wc, "qemu"),
        args=SWEEP_ARGS,
    shell:
        "{PY} -m analysis.count {params.args} --backend qemu --compiler {wildcards.compiler:q} "
        "--build {wildcards.build:q} --cpu {wildcards.cpu:q} --kernel {wildcards.kernel:q} "
        "--variant {wildcards.variant:q} --out {output:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"


rule count_armie:
    input:
        binary=f"{BUILD}/{{compiler}}/{{build}}/bin/armie/{{kernel}}-{{variant}}",
        armie=stamp("armie"),
    output:
        f"{RESULTS}/raw/armie/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.json",
    log:
        f"{RESULTS}/logs/count/armie/{{compiler}}/{{build}}/{{cpu}}/{{kernel}}-{{variant}}.log",
    params:
        runs=lambda wc: _runs_param(wc, "armie"),
        args=SWEEP_ARGS,
    shell:
        "{PY} -m analysis.count {params.args} --backend armie --compiler {wildcards.compiler:q} "
        "--build {wildcards.build:q} --cpu {wildcards.cpu:q} --kernel {wildcards.kernel:q} "
        "--variant {wildcards.variant:q} --out {output:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"
