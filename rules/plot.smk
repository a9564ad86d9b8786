# Plot stage: the paper's figures (ROI count vs VL, one line per variant), a ratio figure
# per family, results/summary.md checking the paper's mechanical ratios, and one Markdown
# explanation per cell the summary discusses (results/explain/).
# The outputs are known from the sweep alone (plotplan); drawing is the job's.
from analysis.stages import plotplan as P

_FIGS = P.figures(SWEEP, RUNNING)
FIGURES = [f"{RESULTS}/figures/{f.name}.png" for f in _FIGS] + [
    f"{RESULTS}/figures/{f.name}_ratio.png" for f in _FIGS if f.baseline is not None
]


EXPLAINED = [f"{RESULTS}/explain/{c.slug}.md" for c in P.discussed_cells(SWEEP)]


rule plot:
    group: grouped(G.TAIL)
    input:
        counts=f"{RESULTS}/counts.csv",
        provenance=f"{RESULTS}/provenance.csv",
        raw=[job_output(j) for j in JOBS],
        # The figures, checks and causes come from these files: an edit that moves no count
        # (a title, a threshold, a cause) must still draw again.
        config=[str(SWEEP.path), *map(str, SWEEP.table_paths)],
    output:
        figures=FIGURES,
        summary=f"{RESULTS}/summary.md",
        explained=EXPLAINED,
    log:
        f"{RESULTS}/logs/plot.log",
    shell:
        logged(STAGE_PY + " -m analysis.stages.plot " + literal(SWEEP_ARGS) + " --counts {input.counts:q} --provenance {input.provenance:q} "
               "--summary {output.summary:q}")
