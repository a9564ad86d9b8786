# Shared set-up: load and validate the sweep (schema, kernel table, VLs, sizes), check every
# tool its backends need, and plan every job once, before any job runs; bad input stops here
# with one line naming the fix.
import shlex
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)

from analysis.backends import registry as R
from analysis.core import config as C
from analysis.core import cpu_record
from analysis.core import failure as F
from analysis.core import files as FS
from analysis.core import groups as G
from analysis.core import snakemake_locks
from analysis.core import snakemake_sizes
from analysis.core import toolchain as T
from analysis.stages import build as B
from analysis.stages import count as N

SWEEP_PATH = config.get("sweep", "configs/default.yaml")
OVERRIDES = {k: config[k] for k in ("results_dir", "build_dir") if k in config}
# Through Slurm (./harness sweep --slurm passes the partition's largest node) the sizes are judged
# by the nodes' memory where the jobs are submitted; a job's own Snakemake judges its node's.
MACHINE = C.slurm_nodes(config["slurm_partition"], config["slurm_node"], int(config["slurm_node_memory_mb"])) \
    if workflow.is_main_process and "slurm_node_memory_mb" in config else None
try:
    SWEEP = C.load(SWEEP_PATH, OVERRIDES, MACHINE)
    # Rows on an unbuilt Open MPI 5 skip (./harness sweep said so in one line); Debian's MPI
    # rows (configs/mpi.yaml) need ./harness setup --with-mpi.
    SWEEP = B.mpi.without_unbuilt(SWEEP)
    B.mpi.check(SWEEP)
    # Each backend the sweep uses and its compilers, checked here (a part this machine
    # cannot run is a note), and every job planned.
    READY, PLANNED, VERSIONS = R.preflight(SWEEP)
except (C.ConfigError, T.ToolchainError) as e:
    raise WorkflowError(f"error: {e}")
# Several Snakemakes run in one clone (sweeps into other results folders, regress, the test
# suite's workers): their lock files are checked, written and removed one run at a time, each
# with a record of who holds them (a run that needs files another one holds waits for it).
snakemake_locks.serialise(str(SWEEP.results_dir), str(SWEEP.build_dir))
NOTES = {name: r.notes for name, r in READY.items()}
# Said by the main Snakemake process only: a job that reads the workflow again (a Slurm job)
# does not repeat them.
if workflow.is_main_process:
    for _line in (n for notes in NOTES.values() for n in notes):
        print(_line, file=sys.stderr)

# Quoted once here: every shell command of the rules starts with it, and the clone path may
# hold spaces or shell characters.
PY = shlex.quote(sys.executable)
# The command of each stage that turns raw files into tables, checks and figures names the
# harness's Python by its digest: Snakemake re-runs a job whose command text changed (its code
# trigger), not one whose imported modules changed, so an upgraded harness kept the tables and
# summaries an older one wrote. The count jobs' raw files are measurements, kept.
STAGE_PY = f"HARNESS_CODE={FS.python_digest(Path(workflow.basedir) / 'analysis')} {{PY}}"
BUILD = str(SWEEP.build_dir)
RESULTS = str(SWEEP.results_dir)
TABLE = SWEEP.table
SWEEP_ARGS = shlex.join(["--sweep", SWEEP_PATH, *(a for k, v in OVERRIDES.items() for a in ("--set", f"{k}={v}"))])
# The jobs whose raw files make counts.csv, and the backends that run here.
JOBS = [j for j in PLANNED if R.REGISTRY[j.binary.backend].TABLE == "counts.csv"]
RUNNING = {j.binary.backend for j in PLANNED}

# Tool versions as files: a rule that lists one re-runs when that tool is upgraded (a compiler's
# also names the libc it links: T.stamp_text). Every installed cross compiler gets one, so
# targets outside the sweep (tests, `count`) build too.
VERSIONS.update(T.installed_compiler_versions())
# Written by the main process only: a Slurm job reads the workflow again on its compute node,
# whose host line (and maybe tools) differ, and rewriting the stamps and plans there would make
# every job of the sweep out of date for the next run.
if workflow.is_main_process:
    for _name, _text in VERSIONS.items():
        T.write_stamp(SWEEP.build_dir / "stamps" / f"{_name}.txt", T.stamp_text(_name, _text))
    # One plan file per job: the job runs it without reading the sweep again.
    N.write_plans(SWEEP, READY, PLANNED, VERSIONS)


def stamp(name):
    return f"{BUILD}/stamps/{name}.txt"


def job_output(job):
    return str(N.job_path(SWEEP.results_dir / "raw", job, ".json"))


def job_threads(backend):
    """A job's `threads:` every core for a backend whose jobs take the machine (timing runs),
    unless the job's plan says otherwise (analysis.stages.count.exclusive); else one."""
    if not backend.EXCLUSIVE:
        return 1
    return lambda wildcards, input: workflow.cores if N.exclusive(Path(input.plan)) else 1


def literal(text):
    """Text put into a rule's shell command as it is (Snakemake would format its braces). Values
    go into the command's text, not params: the code trigger re-runs a job whose text changed,
    and a rule without params spares every start the pandas import that checking them costs
    (build.smk)."""
    return text.replace("{", "{{").replace("}", "}}")


def logged(cmd):
    """A rule's shell command with its stderr to the rule's log; on failure the log's last
    line (the one-line error) is shown, unless the sweep's logger shows it (analysis.core.failure)."""
    return cmd + (" 2> {log:q} || {{ [ -n \"${{%s:-}}\" ] || tail -n 1 {log:q} >&2; exit 1; }}" % F.SHOWN_BY_LOGGER)


# Through Slurm (./harness sweep --slurm passes the profile's count-jobs, min-cells and
# one-job-cells): the jobs travel in Snakemake groups, each one Slurm job (analysis.core.groups),
# or all in one group where the sweep fits one allocation. Locally Snakemake ignores groups;
# without count-jobs no rule has one.
SLURM_COUNT_JOBS = int(config.get("slurm_count_jobs", 0))
_SHORT = [(job_output(j), j) for j in PLANNED if R.REGISTRY[j.binary.backend].GROUPED]
# Cells of counts.csv that are Slurm jobs of their own (gem5's).
_ALONE = [j for j in PLANNED if not R.REGISTRY[j.binary.backend].GROUPED and R.REGISTRY[j.binary.backend].TABLE == "counts.csv"]
SLURM_ONE_JOB = bool(SLURM_COUNT_JOBS) and G.one_job(len(_SHORT), len(_ALONE), int(config.get("slurm_one_job_cells", 0)))
_SHORT_COMPILERS = {j.binary.compiler for _, j in _SHORT}
if SLURM_ONE_JOB:
    CELLS = G.CellGroups({k: G.SWEEP for k, _ in _SHORT}, {G.SWEEP: [k for k, _ in _SHORT]})
elif SLURM_COUNT_JOBS:
    CELLS = G.cell_groups(
        _SHORT,
        lambda j: TABLE.row(j.binary.kernel, j.binary.variant).family,
        lambda j: sum(N.time_limits(SWEEP, j)),
        SLURM_COUNT_JOBS,
        int(config.get("slurm_min_cells", 1)),
    )
else:
    CELLS = G.CellGroups({}, {})
PLANNED_BY_OUTPUT = {job_output(j): j for j in PLANNED}
# Each compiler's binaries: the last jobs of its build group, the inputs of its marker.
BINARIES = {}
for _j in PLANNED:
    BINARIES.setdefault(_j.binary.compiler, set()).add(
        str(B.binary_path(SWEEP.build_dir, _j.binary.compiler, _j.binary.build, _j.binary.backend, _j.binary.name)))


def grouped(group):
    """The `group:` of a rule: `group` (a name or a function of the wildcards) through Slurm, the
    one group of the whole sweep where it is one Slurm job, else none."""
    if not SLURM_COUNT_JOBS or group is None:
        return None
    if not SLURM_ONE_JOB:
        return group
    if callable(group):
        return lambda wildcards: _one_job(group(wildcards))
    return _one_job(group)


def _one_job(group):
    return G.SWEEP if G.in_one_job(group, _SHORT_COMPILERS) else group


def group_markers(jobs):
    """The marker files of the groups these jobs belong to (their build groups, their cell groups):
    asked for by the sweep's targets, so that each group is one connected piece (groups.py). The
    sweep as one group needs none: every build and cell feeds the tail, which ties it together."""
    if not SLURM_COUNT_JOBS:
        return []
    compilers = sorted({j.binary.compiler for j in jobs} - (_SHORT_COMPILERS if SLURM_ONE_JOB else set()))
    cells = [] if SLURM_ONE_JOB else sorted({CELLS.of[job_output(j)] for j in jobs if job_output(j) in CELLS.of})
    return [f"{BUILD}/groups/{G.build_group(c)}.done" for c in compilers] + [f"{RESULTS}/logs/groups/{c}.done" for c in cells]


def _cell(backend, wc):
    return f"{RESULTS}/raw/{backend}/{wc.compiler}/{wc.build}/{wc.cpu}/{wc.kernel}-{wc.variant}.json"


def cell_group(backend):
    """A backend's cells' `group:`: the group of cells each belongs to."""
    return lambda wildcards: CELLS.of[_cell(backend, wildcards)]


def cell_minutes(backend):
    """A backend's cells' Slurm time limit: the plan's (the sweep's time_limit); profiles may restate it."""
    return lambda wildcards: G.cell_minutes(N.time_limits(SWEEP, PLANNED_BY_OUTPUT[_cell(backend, wildcards)]))


wildcard_constraints:
    compiler="|".join(T.COMPILERS),
    build=C.BUILD_PATTERN,
    backend="|".join(R.REGISTRY),
    kernel="[a-z][a-z0-9_]*",
    variant="[a-z][a-z0-9_]*",
    family="[a-z][a-z0-9_]*",
    client="[a-z]+",
    group="[a-z0-9_]+",


# Snakemake 9's job rate limiter (--max-jobs-per-timespan, 100/1s by default) arms a one-second
# timer on every scheduling pass that finds a ready job, and each timer's pass arms the next: after
# n jobs have finished, the scheduler re-examines every ready job about n times a second
# (snakemake/snakemake#3744). That was 46 of a default sweep's 282 CPU seconds. A local run submits
# nothing anywhere and needs no rate limit; a cluster run (Slurm) keeps it.
onstart:
    if workflow.local_exec:
        workflow.scheduler.job_rate_limiter = None
    # Each scheduling pass looked up the size of every ready job's every input (analysis/core/snakemake_sizes.py).
    snakemake_sizes.stat_inputs_once(workflow.scheduler)
    cpu_record.snakemake("start")


# ./harness bench's CPU parts (analysis/core/cpu_record.py): with HARNESS_CPU_DIR set, every job's
# shell records its CPU seconds and command, and Snakemake its own at the start and the end.
if cpu_record.directory() is not None:
    shell.suffix(literal(cpu_record.SHELL_SUFFIX))

    onsuccess:
        cpu_record.snakemake("end")

# The Snakemake that runs a group inside a Slurm job (srun's: the local executor, not the main
# process) is started with --no-hooks, so onstart does not run there: a sweep that is one Slurm
# job kept the limiter for all its jobs (that Snakemake took as much CPU as a QEMU run beside it).
# Its settings arrive after the workflow is read: dropped as it starts executing.
if workflow.local_exec and not workflow.is_main_process:
    _execute = workflow.execute

    def _execute_without_rate_limit(*args, **kwargs):
        workflow.scheduling_settings.max_jobs_per_timespan = None
        return _execute(*args, **kwargs)

    workflow.execute = _execute_without_rate_limit


if SLURM_COUNT_JOBS:

    # A group's marker: its members' outputs as inputs make the group one connected piece, which
    # Snakemake runs as one Slurm job with its members side by side (analysis/core/groups.py).
    rule build_group_done:
        input:
            lambda wc: sorted(BINARIES[wc.group.removeprefix("build_")]),
        output:
            f"{BUILD}/groups/{{group}}.done",
        group:
            lambda wc: wc.group
        shell:
            "touch {output:q}"

    rule cell_group_done:
        input:
            lambda wc: CELLS.members[wc.group],
        output:
            f"{RESULTS}/logs/groups/{{group}}.done",
        group:
            lambda wc: wc.group
        # The cells carry the group's time.
        resources:
            runtime=0,
        shell:
            "touch {output:q}"
