"""Build stage: a flag change rebuilds exactly what it affects, a sweep run after another on the
same build tree rebuilds nothing the other built, and a kernel without markers is refused."""
from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.stages import build
from conftest import REPO, SNAKEMAKE, snakemake

TEMPLATE = REPO / "kernels" / "template"


def own_tree(root: Path, cflags: str = "") -> Path:
    """The template kernel in a table of its own (`cflags`: its row's cflags mapping, YAML)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(TEMPLATE / "my_kernel.c", root)
    table = (TEMPLATE / "my_kernels.yaml").read_text()
    (root / "my_kernels.yaml").write_text(table + (f"    cflags: {cflags}\n" if cflags else ""))
    (root / "sweep.yaml").write_text(f"""\
kernel_table: configs/kernels.yaml
extra_kernel_tables: [my_kernels.yaml]
results_dir: {root / 'results'}
build_dir: {root / 'build'}
compilers: [gcc, clang]
vector_lengths: [128, 256]
vls_vector_lengths: [256]
sizes: {{standalone: [4096]}}
kernels:
  - kernel: scale
""")
    return root


def make(root: Path, targets: list[Path], dry: bool = False):
    return snakemake(root / "sweep.yaml", root / "build", root / "results", [str(t) for t in targets], ["-n"] if dry else [])


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["gcc", pytest.param("clang", marks=pytest.mark.needs_clang)])
def test_a_new_flag_in_the_kernel_table_rebuilds_the_object(tmp_path: Path, compiler: str) -> None:
    root = own_tree(tmp_path / "own")
    objs = [root / "build" / compiler / b / "obj" / "scale-acle.o" for b in ("vla", "vls256")]
    proc = make(root, objs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = [o.stat().st_mtime_ns for o in objs]
    # -O1 after the base -O3 changes the code, so a stale object would also count the wrong thing.
    own_tree(root, cflags=f"{{{compiler}: [-O1]}}")
    proc = make(root, objs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(o.stat().st_mtime_ns != t for o, t in zip(objs, before)), "object not rebuilt after its flags changed"
    log = root / "build" / "logs" / compiler / "vla" / "scale-acle.log"
    assert proc.returncode == 0 and log.exists()
    # ... and once rebuilt, nothing is left to do.
    proc = make(root, objs, dry=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def test_only_clangs_acle_objects_without_flags_of_their_own_read_the_precompiled_arm_sve_h() -> None:
    """The ACLE rows (arm_sve.h included by the source or by a header it includes) read the
    header precompiled once per clang build; GCC's, the C rows' and a row with flags of its own
    (clang refuses a precompiled header made with other options) compile as before."""
    from analysis.core import config
    table = config.load(REPO / "configs" / "default.yaml").table
    bd = Path("/b")
    pch = {(c, k, v): build.kernel_pch(bd, table, c, "vls256", k, v)
           for c in ("gcc", "clang") for k, v in [("copy", "acle_4v"), ("pack", "acle"), ("reduce", "acle"),
                                                    ("copy", "c_vec"), ("reduce", "c_autovec"), ("reduce", "c_scalar")]}
    want = bd / "clang" / "vls256" / "obj" / "sve.pch"
    assert {key for key, p in pch.items() if p is not None} == {("clang", "copy", "acle_4v"), ("clang", "pack", "acle"),
                                                                 ("clang", "reduce", "acle")}
    assert {p for p in pch.values() if p is not None} == {want}
    cmd = build.kernel_compile_cmd(bd, table, "clang", "vls256", "pack", "acle")
    assert cmd[cmd.index("-include-pch") + 1] == str(want) and "-include-pch" not in \
        build.kernel_compile_cmd(bd, table, "gcc", "vls256", "pack", "acle")
    # The precompiling command is the objects' own flags, the header alone as input.
    assert build.sve_pch_cmd(bd, "clang", "vls256")[:-5] == cmd[:cmd.index("-include-pch")]


def test_every_sve_build_of_a_compiler_links_one_harness_object() -> None:
    """harness.c runs outside every ROI and at any VL: the VLA build's object (its own flags, no
    -msve-vector-bits) serves the VLS builds of the same compiler, compiled once instead of once
    per build; the no-SVE build keeps its own (SVE code would not run under sve=off), and so do
    the native builds."""
    from analysis.core import config
    table = config.load(REPO / "configs" / "default.yaml").table
    bd = Path("/b")
    for compiler in ("gcc", "clang"):
        shared = bd / compiler / "vla" / "obj" / "harness.o"
        for b in ("vla", "vls128", "vls512", "vls2048"):
            assert build.kernel_objects(bd, table, compiler, b, "reduce", "acle")["harness"] == shared
            assert build.harness_compile_cmd(bd, compiler, b) == build.harness_compile_cmd(bd, compiler, "vla")
        assert not any(w.startswith("-msve-vector-bits") for w in build.harness_compile_cmd(bd, compiler, "vls512"))
        assert build.harness_object(bd, compiler, "nosve") == bd / compiler / "nosve" / "obj" / "harness.o"
    assert build.harness_object(bd, "native", "host") == bd / "native" / "host" / "obj" / "harness.o"


def test_a_vl_agnostic_rows_vls_binaries_link_the_vla_builds_kernel_object() -> None:
    """A row declared vl_agnostic_object (configs/kernels.yaml) is compiled once per compiler, in
    the VLA build, and every VLS binary of it links that object; the other rows keep one object
    per build, and the no-SVE build keeps its own."""
    from analysis.core import config
    table = config.load(REPO / "configs" / "default.yaml").table
    bd = Path("/b")
    agnostic = {r.name for r in table.rows if r.vl_agnostic_object}
    assert agnostic == {"copy-c_scalar", "copy-glibc_memcpy", "copy-memcpy_a64fx", "pack-blocks_call",
                        "pack-blocks_generic", "unpack-blocks_call", "unpack-blocks_generic", "reduce-c_scalar"}
    for compiler in ("gcc", "clang"):
        vla = build.kernel_objects(bd, table, compiler, "vla", "reduce", "c_scalar")["kernel"]
        assert vla == bd / compiler / "vla" / "obj" / "reduce-c_scalar.o"
        for b in ("vls128", "vls512", "vls2048"):
            assert build.kernel_objects(bd, table, compiler, b, "reduce", "c_scalar")["kernel"] == vla
            assert build.kernel_compile_cmd(bd, table, compiler, b, "reduce", "c_scalar") == \
                build.kernel_compile_cmd(bd, table, compiler, "vla", "reduce", "c_scalar")
            own = build.kernel_objects(bd, table, compiler, b, "reduce", "c_autovec")["kernel"]
            assert own == bd / compiler / b / "obj" / "reduce-c_autovec.o"
            assert f"-msve-vector-bits={b[3:]}" in build.kernel_compile_cmd(bd, table, compiler, b, "reduce", "c_autovec")
        assert build.kernel_object(bd, table, compiler, "nosve", "reduce", "c_scalar") == \
            bd / compiler / "nosve" / "obj" / "reduce-c_scalar.o"


def test_the_reduce_drivers_references_are_one_object_per_compiler_linked_by_every_sve_build() -> None:
    """The reduce driver's 66 references (kernels/reduce/reference.c, the family's
    vl_agnostic_sources) were most of its compile in each of the six SVE builds: every reduce
    binary of a compiler now links the VLA build's object, compiled with the family's flags; the
    driver itself stays one object per build (its fills and its VL check are the build's)."""
    from analysis.core import config
    sweep = config.load(REPO / "configs" / "default.yaml", {"build_dir": "/b"})
    table, bd = sweep.table, Path("/b")
    ref = REPO / "kernels" / "reduce" / "reference.c"
    assert table.families["reduce"].vl_agnostic_sources == (ref,)
    for compiler in ("gcc", "clang"):
        shared = bd / compiler / "vla" / "obj" / "driver" / "reduce" / "reference.o"
        for b in ("vla", "vls128", "vls2048"):
            objs = build.kernel_objects(bd, table, compiler, b, "reduce", "acle")
            assert list(objs) == ["driver", "driver:reference", "kernel", "harness"]
            assert objs["driver:reference"] == shared and objs["driver"] == bd / compiler / b / "obj" / "driver_reduce.o"
            cmd = build.driver_part_compile_cmd(bd, table, compiler, b, "reduce", "reference")
            assert cmd == build.driver_part_compile_cmd(bd, table, compiler, "vla", "reduce", "reference")
            assert shlex.join(cmd) in build.binary_commands(sweep, compiler, b, "qemu", "reduce", "acle")
        assert build.kernel_objects(bd, table, compiler, "nosve", "reduce", "acle")["driver:reference"] == \
            bd / compiler / "nosve" / "obj" / "driver" / "reduce" / "reference.o"


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["gcc", pytest.param("clang", marks=pytest.mark.needs_clang)])
def test_every_object_declared_vl_agnostic_compiles_to_the_same_bytes_in_every_sve_build(tmp_path: Path,
                                                                                        compiler: str) -> None:
    """The declarations are true: each vl_agnostic_object row of the kernel table and each
    family's vl_agnostic_sources, compiled with each VLS build's own flags (-msve-vector-bits=N,
    as before the declaration), is the same bytes as the VLA build's object its VLS binaries link."""
    from analysis.core import config
    from analysis.core.kernels import VLS_ALLOWED
    sweep = config.load(REPO / "configs" / "default.yaml", {"build_dir": str(tmp_path / "build")})
    table, bd = sweep.table, sweep.build_dir
    (bd / "gen").mkdir(parents=True)
    (bd / "gen" / "reduce_matrix.h").write_text(build.reduce_matrix_header(table))
    # Each row's kernel object, and each family's driver parts (the families that need no MPI to compile).
    declared = [(r.name, r.source, build.kernel_flags(table, r.kernel, r.variant, compiler))
                for r in table.rows if r.vl_agnostic_object]
    declared += [(f"{name}-{src.stem}", src, build.family_flags(table, name))
                 for name, fam in table.families.items() if not fam.mpi for src in fam.vl_agnostic_sources]
    assert len(declared) == 9
    differ = []
    for name, source, flags in declared:
        objs = {}
        for b in ("vla", *(f"vls{v}" for v in VLS_ALLOWED)):
            objs[b] = tmp_path / b / f"{name}.o"
            objs[b].parent.mkdir(exist_ok=True)
            subprocess.run(build.compile_cmd(bd, compiler, b, source, objs[b], flags), check=True)
        differ += [f"{name} {b}" for b, o in objs.items() if o.read_bytes() != objs["vla"].read_bytes()]
    assert differ == []


@pytest.mark.slow
@pytest.mark.needs_clang
def test_an_acle_object_made_with_the_precompiled_arm_sve_h_is_the_one_made_without(tmp_path: Path) -> None:
    """clang 14 parsed its 1.5 MB arm_sve.h in every ACLE object; the workflow precompiles it once
    per clang build, and the object it then makes is byte for byte the one made without it (so
    are the binaries and every count)."""
    root = own_tree(tmp_path / "own")
    obj = root / "build" / "clang" / "vls256" / "obj" / "scale-acle.o"
    proc = make(root, [obj])
    assert proc.returncode == 0, proc.stderr[-3000:]
    words = shlex.split((root / "build" / "cmds" / "kernel_object" / "clang" / "vls256" / "scale" / "acle"
                         / "command.sh").read_text())
    at = words.index("-include-pch")
    assert words[at + 1] == str(root / "build" / "clang" / "vls256" / "obj" / "sve.pch")
    plain = tmp_path / "plain.o"
    words[words.index("-o") + 1] = str(plain)
    subprocess.run(words[:at] + words[at + 2:], check=True)
    assert obj.read_bytes() == plain.read_bytes()


@pytest.mark.slow
def test_a_kernel_without_markers_is_refused_at_link(tmp_path: Path) -> None:
    root = own_tree(tmp_path / "own")
    src = root / "my_kernel.c"
    src.write_text(src.read_text().replace("    roi_end();\n", "", 1))
    target = build.binary_path(root / "build", "gcc", "vla", "qemu", "scale-acle")
    proc = make(root, [target])
    assert proc.returncode != 0
    assert "kernel scale-acle: never calls roi_end()" in proc.stdout + proc.stderr
    assert not target.exists()
    # The log's last line is the reason (the progress display shows it for a failed job).
    log = root / "build" / "logs" / "gcc" / "vla" / "link-qemu-scale-acle.log"
    assert log.read_text().strip().splitlines()[-1].startswith("kernel scale-acle: never calls roi_end()")


@pytest.mark.parametrize("linker", ["aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ld", "aarch64-linux-gnu-ld.gold"])
@pytest.mark.parametrize("calls,missing", [(("roi_begin", "roi_end"), None), (("roi_begin",), "roi_end()"),
                                           (("roi_end",), "roi_begin()"), ((), "roi_begin() or roi_end()")])
def test_the_link_rules_check_names_the_markers_never_called(tmp_path: Path, calls: tuple[str, ...],
                                                            missing: str | None, linker: str) -> None:
    """The link rule's check (the only one: a Python check beside it was never run), on objects
    that call some of the markers, one object each (a relocatable link, no libc). The linker names
    the objects that reference a marker: the check starts no `nm` (one that fails here would
    fail it), and a refused kernel leaves no binary. A compiler driver passes the request on with
    -Wl; clang's links run the linker itself (toolchain.DIRECT_LINK), which takes it as it is."""
    objs = []
    for i, name in enumerate(["work", *calls]):
        src = tmp_path / f"o{i}.c"
        src.write_text(f"void {name}(void); void f{i}(void) {{ {name}(); }}\n" if name != "work" else "int work;\n")
        objs.append(tmp_path / f"o{i}.o")
        subprocess.run(["aarch64-linux-gnu-gcc", "-c", str(src), "-o", str(objs[-1])], check=True)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "nm").write_text("#!/bin/sh\necho nm was run >&2\nexit 3\n")
    (stubs / "nm").chmod(0o755)
    out = tmp_path / "linked.o"
    want = None if missing is None else f"kernel k-v: never calls {missing}: {build.ROI_FIX}"
    link = [linker, *(["-nostdlib"] if linker.endswith("gcc") else []), "-r", "-o", str(out), *map(str, objs)]
    proc = subprocess.run(["bash", "-c", "set -euo pipefail; " + build.checked_link_shell("k-v", link)],
                          capture_output=True, text=True, env={**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"})
    last = proc.stderr.strip().splitlines()[-1:] if missing else []
    expected = (0, None, True) if want is None else (1, want, False)
    assert (proc.returncode, last[0] if last else None, out.exists()) == expected, proc.stderr


def test_the_kernel_binaries_link_with_gold_and_clangs_run_the_linker_itself() -> None:
    """ld.bfd took about twice gold's CPU per static link, and clang's driver about 30 ms of CPU
    to start (toolchain.STATIC_LINK, DIRECT_LINK): gcc's links pass -fuse-ld=gold, clang's run
    the gold command clang runs, objects in place and output named."""
    objs, out = [Path("/b/driver.o"), Path("/b/kernel.o")], Path("/b/bin/k-v")
    gcc = build.link_cmd("gcc", objs, out)
    assert gcc[:1] == ["aarch64-linux-gnu-gcc"] and "-fuse-ld=gold" in gcc and "-static" in gcc
    assert gcc[-3:] == ["/b/bin/k-v", "/b/driver.o", "/b/kernel.o"]


@pytest.mark.needs_clang
def test_clangs_direct_link_is_the_link_its_driver_runs(tmp_path: Path) -> None:
    """The linker command a clang binary's link runs is the one clang's driver prints (-###) for
    the same objects and output, and the binary it makes is the same bytes."""
    from analysis.core.toolchain import COMPILERS
    src = tmp_path / "main.c"
    src.write_text("int main(void) { return 0; }\n")
    obj = tmp_path / "main.o"
    clang = COMPILERS["clang"]
    subprocess.run([*clang.cc, "-c", str(src), "-o", str(obj)], check=True)
    direct = build.link_cmd("clang", [obj], tmp_path / "direct")
    assert Path(direct[0]).name.endswith("ld.gold"), direct
    printed = subprocess.run([*clang.cc, *clang.link, "-###", "-o", str(tmp_path / "direct"), str(obj)],
                             capture_output=True, text=True, check=True).stderr.strip().splitlines()[-1]
    assert direct == shlex.split(printed)
    subprocess.run(direct, check=True)
    subprocess.run([*clang.cc, *clang.link, "-o", str(tmp_path / "driver"), str(obj)], check=True)
    assert (tmp_path / "direct").read_bytes() == (tmp_path / "driver").read_bytes()


def test_a_failed_link_is_reported_as_the_linker_reported_it(tmp_path: Path) -> None:
    """A link that fails (here: an object that is not there) fails the check with the linker's
    status and its messages on stderr, the last line the driver's."""
    link = ["aarch64-linux-gnu-gcc", "-nostdlib", "-r", "-o", str(tmp_path / "out.o"), str(tmp_path / "missing.o")]
    proc = subprocess.run(["bash", "-c", build.checked_link_shell("k-v", link)], capture_output=True, text=True)
    assert proc.returncode == 1 and "missing.o: No such file or directory" in proc.stderr, proc.stderr
    assert "never calls" not in proc.stderr and not (tmp_path / "out.o").exists()


@pytest.mark.slow
def test_two_sweeps_with_other_build_groups_do_not_rebuild_each_others_objects(tmp_path: Path) -> None:
    """Every config shares build/. A job whose outputs or recorded inputs depend on the sweep (one
    job building all of a sweep's builds of a source did) makes a sweep run after another (the
    test suite's shared tree, `sweep --config configs/beyond.yaml` after `sweep`) rewrite the
    other's objects, and the other's re-run then relinks and recounts everything."""
    root = own_tree(tmp_path / "own")
    text = (root / "sweep.yaml").read_text()
    (root / "other.yaml").write_text(text.replace("vls_vector_lengths: [256]", "vls_vector_lengths: [256, 512]")
                                     .replace("compilers: [gcc, clang]", "compilers: [gcc]"))
    bins = [build.binary_path(root / "build", "gcc", b, "qemu", "scale-acle") for b in ("vla", "vls256")]
    assert make(root, bins).returncode == 0
    other = snakemake(root / "other.yaml", root / "build", root / "results",
                      [str(build.binary_path(root / "build", "gcc", "vls512", "qemu", "scale-acle"))])
    assert other.returncode == 0, other.stderr[-3000:]
    proc = make(root, bins, dry=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]


@pytest.mark.slow
def test_a_plugin_is_rebuilt_when_its_flags_change(tmp_path: Path) -> None:
    """The plugins' command (PLUGIN_FLAGS, the VL rule of analysis/core/config.py) was a param
    computed from the output path, which Snakemake does not record: a changed flag left the old
    plugin in place. Every build command is now a file the job runs, rewritten when the command
    changes. The flag change here is made in the Snakemake process itself, as an edit of
    analysis/stages/build.py would."""
    root = own_tree(tmp_path / "own")
    plugin = build.plugin_path(root / "build", "inscount")
    assert make(root, [plugin]).returncode == 0
    before = plugin.stat().st_mtime_ns
    args = [str(plugin), "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO), "--cores", "1",
            "--config", f"sweep={root / 'sweep.yaml'}", f"build_dir={root / 'build'}", f"results_dir={root / 'results'}"]
    probe = ("import runpy, sys\n"
             f"sys.path.insert(0, {str(REPO)!r})\n"
             "from analysis.stages import build\n"
             "build.PLUGIN_FLAGS += ('-DHARNESS_NEW_FLAG',)\n"
             f"sys.argv = ['snakemake', *{args!r}]\n"
             "runpy.run_module('snakemake', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert plugin.stat().st_mtime_ns != before, "plugin not rebuilt after its flags changed"
    assert "-DHARNESS_NEW_FLAG" in (root / "build" / "logs" / "plugin-inscount.log").read_text() + \
        (root / "build" / "cmds" / "plugin" / "inscount" / "command.sh").read_text()
    # Back to the flags of the code: rebuilt once more, then nothing to do.
    assert make(root, [plugin]).returncode == 0 and plugin.stat().st_mtime_ns != before
    dry = make(root, [plugin], dry=True)
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_the_reported_commands_are_the_commands_the_jobs_run(tmp_path: Path) -> None:
    """Provenance and `explain` show build.binary_commands; the jobs run their command files.
    A dry run writes the command files of every job a binary needs: each reported line is one."""
    root = own_tree(tmp_path / "own")
    target = build.binary_path(root / "build", "gcc", "vls256", "qemu", "scale-acle")
    assert make(root, [target], dry=True).returncode == 0
    run = [f.read_text() for f in (root / "build" / "cmds").rglob("command.sh")]
    from analysis.core import config
    reported = build.binary_commands(config.load(root / "sweep.yaml"), "gcc", "vls256", "qemu", "scale", "acle")
    assert len(reported) == 4 and all(any(line in text for text in run) for line in reported), (reported, run)


def test_the_mpi_session_object_is_reported_without_the_familys_flags() -> None:
    """One session object serves every MPI family (rules/build.smk: extra_object); provenance
    reported it compiled with the family's flags (mpi_reduce's -Dreduce_kernels=...), which it
    never was."""
    from analysis.core import config
    sweep = config.load(REPO / "configs" / "mpi.yaml")
    rows = [r for r in sweep.table.rows if sweep.table.families[r.family].mpi]
    assert {r.family for r in rows} >= {"mpi_vector", "mpi_reduce"}
    for r in rows:
        session = [c for c in build.binary_commands(sweep, "gcc", "vla", "qemu", r.kernel, r.variant) if "session.c" in c]
        assert len(session) == 1 and "-Dreduce_kernels" not in session[0], (r.name, session)


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() == "aarch64", reason="the native SVE build uses the host's gcc on AArch64")
def test_an_upgraded_cross_gcc_rebuilds_the_native_sve_objects(tmp_path: Path) -> None:
    """On x86-64 the native SVE build (the perf binaries the emulated guest runs) is compiled by
    the cross gcc (toolchain.compiler_for), but its objects listed the host gcc's stamp: a new
    cross gcc left them as they were. An `aarch64-linux-gnu-gcc` that reports another version
    (first on PATH, compiling as the real one) must make them out of date, and the host build's
    objects stay up to date."""
    root = own_tree(tmp_path / "own")
    # The ACLE kernel has no host build: the harness's object stands for the host build's.
    objs = [root / "build" / "native" / "vla" / "obj" / "scale-acle.o", root / "build" / "native" / "host" / "obj" / "harness.o"]
    proc = make(root, objs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("aarch64-linux-gnu-gcc")
    (fake / "aarch64-linux-gnu-gcc").write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "aarch64-linux-gnu-gcc (upgraded) 12.9.9"; exit 0; }}\nexec {real} "$@"\n')
    (fake / "aarch64-linux-gnu-gcc").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    dry = subprocess.run([*SNAKEMAKE, *map(str, objs), "-n", "--snakefile", str(REPO / "Snakefile"), "--directory",
                          str(REPO), "--cores", "1", "--config", f"sweep={root / 'sweep.yaml'}",
                          f"build_dir={root / 'build'}", f"results_dir={root / 'results'}"],
                         capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout + dry.stderr
    assert f"output: {objs[0]}\n" in out and out.count("\nrule ") == 1, out[-3000:]
    stamp = (root / "build" / "stamps" / "compiler.native.vla.txt").read_text().splitlines()
    assert stamp[0] == "aarch64-linux-gnu-gcc (upgraded) 12.9.9" and stamp[1].startswith("2.36"), stamp


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() == "aarch64", reason="models the cross libc of an x86-64 host")
def test_an_upgraded_libc_alone_relinks_what_links_it(tmp_path: Path) -> None:
    """The libc's memcpy is linked into every copying row's ROI, and the compiler stamps listed
    the compiler's version only: a libc upgrade alone (dpkg-query reporting another version of
    libc6-dev-arm64-cross) left every object and binary as it was. The cross gcc's objects must be
    out of date after it, and the stamp rewritten with the new version."""
    root = own_tree(tmp_path / "own")
    obj = root / "build" / "gcc" / "vla" / "obj" / "scale-acle.o"
    proc = make(root, [obj])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in (lambda d: d.stdout + d.stderr)(make(root, [obj], dry=True))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpkg-query").write_text('#!/bin/sh\nprintf 2.36-99upgraded\n')
    (fake / "dpkg-query").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    dry = subprocess.run([*SNAKEMAKE, str(obj), "-n", "--snakefile", str(REPO / "Snakefile"), "--directory",
                          str(REPO), "--cores", "1", "--config", f"sweep={root / 'sweep.yaml'}",
                          f"build_dir={root / 'build'}", f"results_dir={root / 'results'}"],
                         capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert f"output: {obj}\n" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-3000:]
    stamp = (root / "build" / "stamps" / "compiler.gcc.txt").read_text().splitlines()
    assert stamp[1].startswith("2.36-99upgraded libc.a:"), stamp
