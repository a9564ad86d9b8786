"""The user's commands behind `./harness`: cli (sweep, count, validate, setup, explain ...),
regress and bless, bench, ab, report, slurm; guard holds what every command checks around a
Snakemake run (a stopped run's lock, stop signals), keep what a results folder keeps through
every failure (its lock, the last good set, checksummed tables)."""
