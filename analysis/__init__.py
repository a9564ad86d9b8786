"""SVE kernel evaluation harness, in Python: core/ (config, table, toolchains), stages/ (build,
count, collect, plot: the pipeline), backends/ (qemu, armie, gem5, perf), commands/ (./harness)."""

# Part of the regression fingerprint: bump it when a change to the harness moves counts.
__version__ = "0.1.0"
