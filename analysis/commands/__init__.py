"""The user's commands behind `./harness`: cli (sweep, count, validate, setup, explain ...),
regress and bless, bench, ab, report, slurm; guard holds what every command checks around a
Snakemake run (stale locks, Ctrl-C, stale results)."""
