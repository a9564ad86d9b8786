# Measure stage: native runs under perf stat, counters scoped to the ROI (paper Fig. 11, 12).
# SVE runs where the host has SVE (A64FX), host baselines where perf can count; each part the
# machine cannot run is skipped with one line. A measurement takes every core the workflow
# has, so nothing else runs beside it.
from analysis.backends import perf as PF

_PLAN = PF.plan(SWEEP)
PERF_MESSAGES = _PLAN.status.messages if _PLAN else []
if PERF_MESSAGES and not os.environ.get("SVE_HARNESS_PERF_SKIP_SAID"):
    for _m in PERF_MESSAGES:
        print(_m, file=sys.stderr)
    os.environ["SVE_HARNESS_PERF_SKIP_SAID"] = "1"
PERF_JOBS = _PLAN.jobs if _PLAN else []
if PERF_JOBS:
    T.write_stamp(SWEEP.build_dir / "stamps" / "perf.txt", _PLAN.status.version + "\n")
PERF_FIGURES = [f"{RESULTS}/figures/{f['name']}.png" for f in SWEEP.raw.get("perf", {}).get("figures", [])]
PERF_OUTPUTS = [f"{RESULTS}/perf.csv", f"{RESULTS}/perf_summary.md", *PERF_FIGURES] if PERF_JOBS else []


def _perf_job(wc):
    for job in PERF_JOBS:
        if (job.binary.build, job.binary.kernel, job.binary.variant) == (wc.build, wc.kernel, wc.variant):
            return job
    raise WorkflowError(f"no perf job for {wc}")


rule measure_perf:
    input:
        binary=f"{BUILD}/native/{{build}}/bin/perf/{{kernel}}-{{variant}}",
        perf=stamp("perf"),
    output:
        f"{RESULTS}/raw/perf/native/{{build}}/native/{{kernel}}-{{variant}}.json",
    log:
        f"{RESULTS}/logs/measure/perf/{{build}}/{{kernel}}-{{variant}}.log",
    threads: workflow.cores
    params:
        # What is measured and how: a change re-runs the job.
        runs=lambda wc: json.dumps([r.argv() for r in _perf_job(wc).runs]),
        perf=json.dumps({k: v for k, v in SWEEP.raw.get("perf", {}).items() if k not in ("sizes", "figures")}, sort_keys=True),
        args=SWEEP_ARGS,
    shell:
        "{PY} -m analysis.count {params.args} --backend perf --compiler native --cpu native --build {wildcards.build:q} "
        "--kernel {wildcards.kernel:q} --variant {wildcards.variant:q} --out {output:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"


rule perf_table:
    input:
        raw=[job_output(j) for j in PERF_JOBS],
    output:
        f"{RESULTS}/perf.csv",
    log:
        f"{RESULTS}/logs/perf_table.log",
    shell:
        "{PY} -m analysis.perftable --out {output:q} {input.raw:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"


rule perf_plot:
    input:
        table=f"{RESULTS}/perf.csv",
        raw=[job_output(j) for j in PERF_JOBS],
    output:
        figures=PERF_FIGURES,
        summary=f"{RESULTS}/perf_summary.md",
    log:
        f"{RESULTS}/logs/perf_plot.log",
    params:
        args=SWEEP_ARGS,
        messages=" ".join(f"--message {shlex.quote(m)}" for m in PERF_MESSAGES),
    shell:
        "{PY} -m analysis.perfplot {params.args} --table {input.table:q} --summary {output.summary:q} "
        "{params.messages} {input.raw:q} 2> {log:q} || {{ tail -n 1 {log:q} >&2; exit 1; }}"
