# Build stage: cross-compile every kernel once per build (VLA, VLS-N) into an object,
# link it with one marker object per backend, and build the QEMU counting plugins.
import glob
import os
import shlex
from pathlib import Path


def _cmd(words):
    return shlex.join(words)


# What harness.c and roi_perf.c include of kernels/include: the harness API and the VL rule.
HARNESS_HEADERS = ["kernels/include/harness.h", "kernels/include/sve_vl.h"]


def _headers(source):
    """Headers a source can include: those beside it and the harness API. Snakemake reads
    no depfiles, so a header edit must show up as an input change."""
    return sorted(glob.glob(os.path.join(os.path.dirname(str(source)), "*.h"))) + ["kernels/include/harness.h"]


# Each build job runs its command from a file (`bash FILE`) that is rewritten only when the command's
# text changes: a changed flag, compiler or VL rule then makes the job out of date by the file's
# mtime. Commands as params would be recorded too, but checking recorded params imports pandas into
# the main Snakemake process (snakemake.persistence): 0.3 s of every start, a tenth of a re-run with
# nothing to do. One directory per job: Snakemake lists a directory the first time it looks into it
# and would take a file written there afterwards for missing.
def _command(rule_name, make):
    def command_file(wc):
        path = Path(BUILD, "cmds", rule_name, *wc, "command.sh")
        # A Slurm job reads the workflow again on its node: the main process wrote the file.
        if workflow.is_main_process:
            T.write_stamp(path, make(wc) + "\n")
        return str(path)

    return command_file


# Build jobs go first (priority 1, the other rules 0). Among ready jobs Snakemake's greedy scheduler
# prefers those with the largest inputs, which put every count job (a static binary, its plan)
# before every compile: in the full matrix the last VLA job (2,048 runs) could start only at 162 s
# of 259 s and ran alone on one core at the end. With the build done first, the longest count jobs
# start first and the short ones fill in beside them.
BUILD_PRIORITY = 1


# Through Slurm a group's time limit is the sum of its members' (per layer of side-by-side jobs):
# a compile or link takes well under Slurm's least unit of a minute, so the steps count none and
# a build group's time is its marker's (build_group_done, from the profile).
STEP_MINUTES = 0


def _build_group(wc):
    return G.build_group(wc.compiler)


# A header printed from the kernel table: through Slurm, written by the submitting Snakemake.
localrules: reduce_matrix


# lib{PLUGIN_CORE}.so would also match rule plugin's lib{client}.so
ruleorder: plugin_core > plugin


rule plugin_core:
    priority: BUILD_PRIORITY
    group: grouped(G.TOOLS)
    input:
        src="armie_clients/tbstats.c",
        common=["armie_clients/tbstats.h", "armie_clients/qemu_plugin_api.h"],
        host_gcc=stamp("host_gcc"),
        cmd=_command("plugin_core", lambda wc: _cmd(B.plugin_cmd(B.PLUGIN_CORE, B.plugin_path(SWEEP.build_dir, B.PLUGIN_CORE)))),
    output:
        f"{BUILD}/plugins/lib{B.PLUGIN_CORE}.so",
    log:
        f"{BUILD}/logs/plugin-{B.PLUGIN_CORE}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1"


rule plugin:
    priority: BUILD_PRIORITY
    group: grouped(G.TOOLS)
    input:
        src="armie_clients/{client}.c",
        common=["armie_clients/decode.c", "armie_clients/decode.h", "armie_clients/tbstats.h",
                "armie_clients/qemu_plugin_api.h"],
        core=f"{BUILD}/plugins/lib{B.PLUGIN_CORE}.so",
        host_gcc=stamp("host_gcc"),
        cmd=_command("plugin", lambda wc: _cmd(B.plugin_cmd(wc.client, B.plugin_path(SWEEP.build_dir, wc.client)))),
    output:
        f"{BUILD}/plugins/lib{{client}}.so",
    log:
        f"{BUILD}/logs/plugin-{{client}}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1"


rule reduce_matrix:
    priority: BUILD_PRIORITY
    input:
        cmd=_command("reduce_matrix", lambda wc: _cmd(["printf", "%s", B.reduce_matrix_header(TABLE)])),
    output:
        f"{BUILD}/gen/reduce_matrix.h",
    # A shell command, not a run: block: Snakemake executes a run: job in a new Snakemake process.
    shell:
        "bash {input.cmd:q} > {output:q}"


def _harness_cmd(wc, build):
    return _cmd(B.harness_compile_cmd(SWEEP.build_dir, wc.compiler, build))


def _driver_cmd(wc, build):
    return _cmd(B.driver_compile_cmd(SWEEP.build_dir, TABLE, wc.compiler, build, wc.family))


def _kernel_cmd(wc, build):
    return _cmd(B.kernel_compile_cmd(SWEEP.build_dir, TABLE, wc.compiler, build, wc.kernel, wc.variant))


def _link_cmd(wc, build):
    """A kernel whose objects never call the ROI markers is refused with a message saying what
    to add (analysis.stages.build.checked_link_shell), else linked."""
    return B.checked_link_shell(f"{wc.kernel}-{wc.variant}", B.binary_link_cmd(
        SWEEP.build_dir, TABLE, wc.compiler, build, wc.backend, wc.kernel, wc.variant))


def _binary_objects(wc, build):
    return [str(o) for o in B.kernel_objects(SWEEP.build_dir, TABLE, wc.compiler, build, wc.kernel, wc.variant).values()]


def _this_build(fn):
    return lambda wc: fn(wc, wc.build)


rule harness_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        src="kernels/harness/harness.c",
        hdr=HARNESS_HEADERS,
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("harness_object", _this_build(_harness_cmd)),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/harness.o",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/harness.log",
    # A VLS build links the VLA build's harness.o (analysis.stages.build.harness_build) and has
    # none of its own: asked for one, the rule compiled the VLA object and failed on the missing output.
    wildcard_constraints:
        build="vla|host|nosve",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


rule driver_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        src=lambda wc: str(TABLE.families[wc.family].driver or f"(family {wc.family} has no driver)"),
        hdr=lambda wc: _headers(TABLE.families[wc.family].driver),
        gen=f"{BUILD}/gen/reduce_matrix.h",
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("driver_object", _this_build(_driver_cmd)),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/driver_{{family}}.o",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/driver_{{family}}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


# A family's vl_agnostic_sources (the reduce driver's references): compiled in the VLA build and
# linked by every SVE build (analysis.stages.build.shared_build).
rule driver_part_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        src=lambda wc: str(B.driver_part_source(TABLE, wc.family, wc.stem)),
        hdr=lambda wc: _headers(B.driver_part_source(TABLE, wc.family, wc.stem)),
        gen=f"{BUILD}/gen/reduce_matrix.h",
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("driver_part_object", lambda wc: _cmd(B.driver_part_compile_cmd(
            SWEEP.build_dir, TABLE, wc.compiler, wc.build, wc.family, wc.stem))),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/driver/{{family}}/{{stem}}.o",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/driver-{{family}}-{{stem}}.log",
    wildcard_constraints:
        stem="[a-z][a-z0-9_]*",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


# Further sources of a row (extra_sources) and the MPI session of an `mpi: true` family.
rule extra_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        src=lambda wc: str(B.extra_source(TABLE, wc.stem)),
        hdr=lambda wc: _headers(B.extra_source(TABLE, wc.stem)),
        gen=f"{BUILD}/gen/reduce_matrix.h",
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("extra_object", lambda wc: _cmd(B.extra_compile_cmd(SWEEP.build_dir, TABLE, wc.compiler, wc.build, wc.stem))),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/extra/{{stem}}.o",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/extra-{{stem}}.log",
    wildcard_constraints:
        stem="[a-z][a-z0-9_]*",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


# arm_sve.h precompiled once per clang build for the ACLE objects (analysis.stages.build.SVE_HEADER).
rule sve_pch:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    wildcard_constraints:
        compiler="|".join(B.SVE_PCH_COMPILERS),
    input:
        src=str(B.SVE_PCH_SOURCE.relative_to(B.REPO)),
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("sve_pch", lambda wc: _cmd(B.sve_pch_cmd(SWEEP.build_dir, wc.compiler, wc.build))),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/sve.pch",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/sve_pch.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


def _kernel_pch(wc):
    pch = B.kernel_pch(SWEEP.build_dir, TABLE, wc.compiler, wc.build, wc.kernel, wc.variant)
    return [str(pch)] if pch else []


rule kernel_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        src=lambda wc: str(TABLE.row(wc.kernel, wc.variant).source),
        hdr=lambda wc: _headers(TABLE.row(wc.kernel, wc.variant).source),
        pch=_kernel_pch,
        gen=f"{BUILD}/gen/reduce_matrix.h",
        cc=lambda wc: stamp(T.stamp_name(wc.compiler, wc.build)),
        cmd=_command("kernel_object", _this_build(_kernel_cmd)),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/obj/{{kernel}}-{{variant}}.o",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/{{kernel}}-{{variant}}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} 'kernel {wildcards.kernel}-{wildcards.variant} does not compile'"


rule roi_object:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    wildcard_constraints:
        compiler="gcc|clang",
        # The backends whose marker is assembly (analysis.backends.Backend.MARKER).
        backend="|".join(n for n in R.REGISTRY if not B.marker_per_build(n)),
    input:
        src=lambda wc: str(B.roi_source(wc.backend).relative_to(B.REPO)),
        inc="kernels/roi/roi_slot.inc",
        cc=lambda wc: stamp(f"compiler.{wc.compiler}"),
        cmd=_command("roi_object", lambda wc: _cmd(B.roi_compile_cmd(SWEEP.build_dir, wc.compiler, wc.backend))),
    output:
        f"{BUILD}/{{compiler}}/roi/roi_{{backend}}.o",
    log:
        f"{BUILD}/logs/{{compiler}}/roi_{{backend}}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


# The perf backend's markers are C (perf control, timing, repetitions), built per native build.
rule roi_perf_object:
    priority: BUILD_PRIORITY
    group: grouped(G.build_group("native"))
    resources:
        runtime=STEP_MINUTES,
    input:
        src="kernels/roi/roi_perf.c",
        hdr=HARNESS_HEADERS,
        cc=lambda wc: stamp(T.stamp_name("native", wc.build)),
        cmd=_command("roi_perf_object", lambda wc: _cmd(B.roi_compile_cmd(SWEEP.build_dir, "native", "perf", wc.build))),
    output:
        f"{BUILD}/native/{{build}}/obj/roi_perf.o",
    log:
        f"{BUILD}/logs/native/{{build}}/roi_perf.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"


rule link:
    priority: BUILD_PRIORITY
    group: grouped(_build_group)
    resources:
        runtime=STEP_MINUTES,
    input:
        objs=lambda wc: _binary_objects(wc, wc.build),
        roi=lambda wc: str(B.roi_object(SWEEP.build_dir, wc.compiler, wc.backend, wc.build)),
        cmd=_command("link", _this_build(_link_cmd)),
    output:
        f"{BUILD}/{{compiler}}/{{build}}/bin/{{backend}}/{{kernel}}-{{variant}}",
    log:
        f"{BUILD}/logs/{{compiler}}/{{build}}/link-{{backend}}-{{kernel}}-{{variant}}.log",
    shell:
        "bash {input.cmd:q} > {log:q} 2>&1 || {PY} -m analysis.core.failure {log:q} {rule}"
