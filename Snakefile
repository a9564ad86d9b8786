# SVE kernel evaluation harness: instruction counts at every SVE vector length.
# Stages, one rule file each: build -> count (every backend: qemu, armie, gem5, perf; one rule)
# -> collect (counts.csv) and measure (perf.csv) -> plot.
# Run it through ./harness (which installs what is missing first), or directly:
#   snakemake --cores 2 --config sweep=configs/default.yaml
from snakemake.utils import min_version

min_version("8.0")


include: "rules/common.smk"
include: "rules/build.smk"
include: "rules/count.smk"
include: "rules/measure.smk"
include: "rules/collect.smk"
include: "rules/plot.smk"


# Every count job's raw file, asked for directly: one that went missing is counted again (as
# inputs of collect only, Snakemake would take the table that exists for up to date).
rule raw_all:
    input:
        [job_output(j) for j in JOBS],
        # Through Slurm: the markers that tie each group into one piece (analysis/core/groups.py).
        group_markers(JOBS),


# Everything but the native perf measurements (bench times the two apart).
rule counts_all:
    input:
        raw=rules.raw_all.input,
        counts=f"{RESULTS}/counts.csv",
        provenance=f"{RESULTS}/provenance.csv",
        figures=FIGURES,
        summary=f"{RESULTS}/summary.md",
        explained=EXPLAINED,


rule perf_all:
    input:
        PERF_OUTPUTS,
        group_markers(PERF_JOBS),


rule all:
    default_target: True
    input:
        # A perf-only sweep (backends: []) counts nothing.
        rules.counts_all.input if JOBS else [],
        rules.perf_all.input,
