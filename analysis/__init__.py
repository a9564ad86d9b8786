"""SVE kernel evaluation harness: the Python stages (config, build, count, collect, plot, regress)."""

# Part of the regression fingerprint: bump it when a change to the harness moves counts.
__version__ = "0.1.0"
