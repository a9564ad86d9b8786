# Plot stage: the paper's figures (ROI count vs VL, one line per variant), a ratio figure
# per family, and results/summary.md checking the paper's mechanical ratios.

FIGURES = [f"{RESULTS}/figures/{f['name']}.png" for f in SWEEP.figures] + [
    f"{RESULTS}/figures/{f['name']}_ratio.png" for f in SWEEP.figures if "baseline" in f
]


rule plot:
    input:
        counts=f"{RESULTS}/counts.csv",
        provenance=f"{RESULTS}/provenance.csv",
    output:
        figures=FIGURES,
        summary=f"{RESULTS}/summary.md",
    log:
        f"{RESULTS}/logs/plot.log",
    params:
        args=SWEEP_ARGS,
    shell:
        "{PY} -m analysis.plot {params.args} --counts {input.counts} --provenance {input.provenance} "
        "--summary {output.summary} 2> {log} || {{ tail -n 1 {log} >&2; exit 1; }}"
