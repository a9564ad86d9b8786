# Shared set-up: load and validate the sweep (schema, kernel table, VLs, sizes) and check
# the toolchain before any job runs; bad input stops here with one line naming the fix.
import json
import os
import shlex
import sys

sys.path.insert(0, workflow.basedir)

from analysis import build as B
from analysis import config as C
from analysis import toolchain as T

SWEEP_PATH = config.get("sweep", "configs/default.yaml")
OVERRIDES = {k: config[k] for k in ("results_dir", "build_dir") if k in config}
try:
    SWEEP = C.load(SWEEP_PATH, OVERRIDES)
    VERSIONS = T.preflight(SWEEP.compilers, SWEEP.backends)
    # Rows on an unbuilt Open MPI 5 skip (./harness sweep said so in one line); Debian's MPI
    # rows (configs/mpi.yaml) need ./harness setup --with-mpi.
    SWEEP = B.mpi.without_unbuilt(SWEEP)
    B.mpi.check(SWEEP)
except (C.ConfigError, T.ToolchainError) as e:
    raise WorkflowError(f"error: {e}")

from analysis.backends import gem5 as G

# The cycle sweep runs only where gem5 is found; elsewhere one line says how to enable it.
GEM5 = G.find_gem5(SWEEP) if SWEEP.raw.get("gem5") else None
# Snakemake may read the workflow more than once per run: say it once.
if SWEEP.raw.get("gem5") and GEM5 is None and not os.environ.get("SVE_HARNESS_GEM5_SKIP_SAID"):
    print(G.skipped_message(SWEEP), file=sys.stderr)
    os.environ["SVE_HARNESS_GEM5_SKIP_SAID"] = "1"
if GEM5:
    VERSIONS["gem5"] = G.gem5_version(GEM5)

# Quoted once here: every shell command of the rules starts with it, and the clone path may
# hold spaces or shell characters.
PY = shlex.quote(sys.executable)
BUILD = str(SWEEP.build_dir)
RESULTS = str(SWEEP.results_dir)
TABLE = SWEEP.table
JOBS = SWEEP.jobs() + (SWEEP.gem5_jobs(G.load_systems()) if GEM5 else [])
SWEEP_ARGS = shlex.join(["--sweep", SWEEP_PATH, *(a for k, v in OVERRIDES.items() for a in ("--set", f"{k}={v}"))])

# Tool versions as files: a rule that lists one re-runs when that tool is upgraded. Every
# installed cross compiler gets one, so targets outside the sweep (tests, `count`) build too.
VERSIONS.update(T.installed_compiler_versions())
for _name, _text in VERSIONS.items():
    T.write_stamp(SWEEP.build_dir / "stamps" / f"{_name}.txt", _text + "\n")


def stamp(name):
    return f"{BUILD}/stamps/{name}.txt"


def job_output(job):
    b = job.binary
    return f"{RESULTS}/raw/{b.backend}/{b.compiler}/{b.build}/{job.cpu_model}/{b.name}.json"


def find_job(wc, backend):
    for job in JOBS:
        b = job.binary
        if (b.backend, b.compiler, b.build, job.cpu_model, b.kernel, b.variant) == (
            backend, wc.compiler, wc.build, wc.cpu, wc.kernel, wc.variant
        ):
            return job
    raise WorkflowError(f"no job for {wc}")


wildcard_constraints:
    compiler="gcc|clang|native",
    build=r"vla|vls\d+|host|nosve",
    backend="qemu|armie|gem5|perf",
    kernel="[a-z][a-z0-9_]*",
    variant="[a-z][a-z0-9_]*",
    family="[a-z][a-z0-9_]*",
    client="[a-z]+",
