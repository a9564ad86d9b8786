"""Fig. 10 on Open MPI 5.0.9 (its NEON/SVE op component, ompi/mca/op/aarch64): one source and
one library for three lines, the component off (stock C loop), on (SVE), and on under a CPU
without SVE (NEON). Each line verifies its output at every VL the sweep runs, the ROI's
opcodes prove which implementation ran, counts repeat exactly, and the source check of
setup/ompi5.sh refuses what is not the pinned release.

All but the source checks need the build (./harness setup --with-ompi5) and skip without it.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

from analysis.backends import qemu
from analysis.core import config, decode, mpi
from analysis.stages import build
from conftest import REPO, path_without, snakemake
from disasm import OBJDUMP, run

MPI_SWEEP = REPO / "configs" / "mpi.yaml"
OMPI5 = mpi.library("ompi5")
KERNEL = "mpi5_reduce"
MAX_FLOAT = (("op", "max"), ("dtype", "float"), ("nan", 0))  # and no signed zeros: -DREDUCE_IEEE_FILLS
SIZE = 65536  # bytes of each array: 16384 floats
SVE_REG = re.compile(r"\b[zp]\d+\.[bhsdq]\b|\b(whilelo|ptrue|rdvl|incw|cntw)\b")


@pytest.fixture(scope="module")
def sweep_path(work: Path) -> Path:
    """configs/mpi.yaml's Open MPI 5 part alone (its Debian rows need ./harness setup --with-mpi)."""
    path = work / "mpi5.yaml"
    path.write_text(f"""\
kernel_table: {REPO}/configs/kernels.yaml
results_dir: {work / 'mpi5-results'}
build_dir: {work / 'build'}
vector_lengths: {list(config.load(MPI_SWEEP).vector_lengths)}
sizes: {{mpi5_reduce: [4194304]}}
kernels:
  - {{kernel: {KERNEL}, ops: [max], dtypes: [float]}}
""")
    return path


@pytest.fixture(scope="module")
def sweep(sweep_path: Path) -> config.Sweep:
    return config.load(sweep_path)


@pytest.fixture(scope="module")
def rows(sweep: config.Sweep) -> list[config.KernelRow]:
    return [r for r in sweep.table.rows if r.kernel == KERNEL]


def build_of(row: config.KernelRow) -> str:
    return "vla" if row.sve else config.NOSVE


@pytest.fixture(scope="module")
def mpi5_bin(sweep: config.Sweep, sweep_path: Path, rows) -> Callable[[str], Path]:
    """The three rows' binaries (QEMU markers) and the plugins, built through the workflow."""
    bd = sweep.build_dir
    targets = [str(build.binary_path(bd, "gcc", build_of(r), "qemu", r.name)) for r in rows]
    targets += [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    proc = snakemake(sweep_path, bd, sweep.results_dir, targets)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_variant = {r.variant: r for r in rows}
    return lambda variant: build.binary_path(bd, "gcc", build_of(by_variant[variant]), "qemu", f"{KERNEL}-{variant}")


def plain_run(binary: Path, run_: config.Run, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The runner's QEMU command without plugins."""
    cmd = qemu.qemu_command(binary, "max", [run_], Path("/nonexistent"), binary.parent, env)
    cmd = [w for i, w in enumerate(cmd) if w != "-plugin" and (i == 0 or cmd[i - 1] != "-plugin")]
    return subprocess.run(cmd, cwd=binary.parent, capture_output=True, text=True)


def roi_ops(rec: dict) -> Counter[str]:
    """The ROI's executed instructions as objdump text (mnemonic and operands), with counts."""
    encs = [int(e["encoding"], 16) for e in rec["opcodes"]["roi"]]
    text = decode.decode(encs)
    return Counter({text[int(e["encoding"], 16)]: e["count"] for e in rec["opcodes"]["roi"]})


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_each_line_verifies_its_output_at_every_vl(mpi5_bin, sweep, rows) -> None:
    """Stock, NEON and SVE check MPI_Reduce_local's result against the scalar reference at every
    VL of the sweep, and all produce the same bytes; the NEON line's binary is told VL 0."""
    sums = {}
    for row in rows:
        env = mpi.run_env(sweep.table, KERNEL, row.variant)
        for vl in sweep.vector_lengths:
            r = config.Run(vl, SIZE + 8, "max", "float", MAX_FLOAT, sve=row.sve)
            proc = plain_run(mpi5_bin(row.variant), r, env)
            assert proc.returncode == 0, (row.name, vl, proc.stderr[-2000:])
            ok = [ln for ln in proc.stdout.splitlines() if ln.startswith("ok ")]  # after the batch's first line
            assert len(ok) == 1 and ok[0].startswith(f"ok vl={vl if row.sve else 0} "), (row.name, vl, proc.stdout)
            sums[(row.variant, vl)] = ok[0].split("checksum=")[1].strip()
    assert len(sums) == 3 * len(sweep.vector_lengths) and len(set(sums.values())) == 1, sums


@pytest.fixture(scope="module")
def plugin_dir_mpi5(mpi5_bin, sweep) -> Path:
    return build.plugin_path(sweep.build_dir, "inscount").parent


@pytest.fixture(scope="module")
def records(mpi5_bin, sweep, rows, plugin_dir_mpi5) -> dict[tuple[str, int, int], dict]:
    """Each row counted at VL 128 and 2048, sizes 0 and SIZE (the runner's environment and CPU)."""
    out = {}
    for row in rows:
        for vl in (128, 2048):
            for n in (0, SIZE):
                out[(row.variant, vl, n)] = qemu.run_once(
                    mpi5_bin(row.variant), "max", config.Run(vl, n, "max", "float", MAX_FLOAT, sve=row.sve),
                    plugin_dir_mpi5, mpi.run_env(sweep.table, KERNEL, row.variant))
    return out


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_the_op_rows_run_the_implementation_they_declare(records, rows) -> None:
    """From the ROI's opcodes: SVE whilelo/fmax on z registers when the component is on, AdvSIMD
    fmax v.4s on a CPU without SVE, neither with the component excluded (the kernel table's
    expect: sve_in_roi, roi_has, roi_lacks)."""
    for row in rows:
        for vl in (128, 2048):
            rec = records[(row.variant, vl, SIZE)]
            ops = roi_ops(rec)
            sve = rec["inscount"]["roi"]["sve"]
            assert (sve > 0) == row.expect["sve_in_roi"], (row.name, vl, sve)
            for pat in row.expect.get("roi_has", []):
                assert any(re.search(pat, t) for t in ops), (row.name, vl, pat, ops.most_common(12))
            for pat in row.expect.get("roi_lacks", []):
                assert not any(re.search(pat, t) for t in ops), (row.name, vl, pat, ops.most_common(12))
    # The declarations themselves are the ones the issue names.
    by = {r.variant: r for r in rows}
    assert not by["stock"].expect["sve_in_roi"] and by["sve"].expect["sve_in_roi"] and not by["neon"].sve
    assert dict(by["stock"].env) == {"OMPI_MCA_op": "^aarch64"} and not by["sve"].env and not by["neon"].env


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_counts_repeat_and_follow_the_vector_length(records, mpi5_bin, sweep, rows, plugin_dir_mpi5) -> None:
    """ROI counts (total, classes, opcodes) are identical over two runs; stock and NEON do not
    depend on VL; the SVE line costs exactly 10 instructions per vector of data, so its loop is
    16x shorter at VL 2048 than at 128."""
    for row in rows:
        again = qemu.run_once(mpi5_bin(row.variant), "max", config.Run(128, SIZE, "max", "float", MAX_FLOAT, sve=row.sve),
                              plugin_dir_mpi5, mpi.run_env(sweep.table, KERNEL, row.variant))
        first = records[(row.variant, 128, SIZE)]
        assert again["inscount"]["roi"] == first["inscount"]["roi"], row.name
        assert again["opcodes"]["roi"] == first["opcodes"]["roi"], row.name
    net = {(v, vl): records[(v, vl, SIZE)]["inscount"]["roi"]["total"] - records[(v, vl, 0)]["inscount"]["roi"]["total"]
           for v in ("stock", "neon", "sve") for vl in (128, 2048)}
    assert net[("stock", 128)] == net[("stock", 2048)], net
    assert net[("neon", 128)] == net[("neon", 2048)], net
    # SVE: 10 instructions per vector (whilelt, 2 ld1w, fmax, st1w, 3 add, cmp, b.gt) plus one
    # constant (MPI_Reduce_local's path and the loop's set-up): 4096 vectors at VL 128, 256 at 2048.
    assert net[("sve", 128)] - net[("sve", 2048)] == 10 * (SIZE // 16 - SIZE // 256), net
    # The C loop (NEON-vectorized by GCC: 8 per 4 floats) loses to the NEON half (7 per 4 floats)
    # and beats the SVE half at VL 128 (10 per 4 floats), which wins from VL 256 on.
    assert net[("neon", 128)] < net[("stock", 128)] < net[("sve", 128)] and net[("sve", 2048)] < net[("neon", 128)], net


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_one_library_and_no_sve_of_our_own_in_the_neon_binary(mpi5_bin, sweep) -> None:
    """All three lines load the same libmpi (RUNPATH to the Open MPI 5 build; Open MPI 5 links its
    components into it, both halves of the op component included); the NEON line's own code
    holds no SVE instruction (it runs where rdvl traps)."""
    for variant in ("stock", "sve", "neon"):
        dyn = run(["aarch64-linux-gnu-readelf", "-d", str(mpi5_bin(variant))]).stdout
        assert f"[{OMPI5.lib}]" in dyn and "libmpi.so.40" in dyn, (variant, dyn)
    syms = run(["aarch64-linux-gnu-nm", str(OMPI5.lib / "libmpi.so")]).stdout  # components are linked into libmpi
    assert "ompi_op_aarch64_functions_sve" in syms and "ompi_op_aarch64_functions_neon" in syms
    dis = run([OBJDUMP, "-d", str(mpi5_bin("neon"))]).stdout
    assert not [ln for ln in dis.splitlines() if SVE_REG.search(ln)]
    assert SVE_REG.search(run([OBJDUMP, "-d", str(mpi5_bin("sve"))]).stdout)  # the check can fail


# --- setup/ompi5.sh refuses a source that is not the pinned release (no build needed) ---

# What only the build needs (setup/install.sh --with-ompi5 installs it): hidden from every
# refusal below, which must come first (a fresh machine has none of it; it used to stop these
# refusals at "autoconf not found").
BUILD_TOOLS = ("aarch64-linux-gnu-gcc", "autoconf", "automake", "libtoolize", "flex", "make")


def ompi5_sh(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "cache"),
           "PATH": path_without(tmp_path / "path", *BUILD_TOOLS), **env}
    return subprocess.run([str(REPO / "setup" / "ompi5.sh")], env=env, capture_output=True, text=True)


def fake_tree(path: Path) -> Path:
    (path / "ompi").mkdir(parents=True)
    (path / "VERSION").write_text("major=5\nminor=0\nrelease=9\n")
    return path


def test_ompi5_refuses_a_source_at_another_commit(tmp_path: Path) -> None:
    src = fake_tree(tmp_path / "src")
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "not the release"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    proc = ompi5_sh(tmp_path, OMPI_SRC=str(src))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert f"is at commit {head}, not v5.0.9 (b79100b3fbbf45b3c6ed82a6b67b6346f8cfdc41)" in err[0], err
    assert not (tmp_path / "cache").exists()  # nothing created, copied or built


def test_ompi5_refuses_a_tree_that_is_not_a_checkout(tmp_path: Path) -> None:
    proc = ompi5_sh(tmp_path, OMPI_SRC=str(fake_tree(tmp_path / "plain")))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is not a git checkout; clone tag v5.0.9 with --recursive" in proc.stderr
    proc = ompi5_sh(tmp_path, OMPI_SRC=str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "is not an Open MPI source tree" in proc.stderr
    assert not (tmp_path / "cache").exists()


def test_ompi5_refuses_too_little_disk_before_creating_anything(tmp_path: Path) -> None:
    """Bad input like gem5.sh's: exit 2 with the GiB needed, and the cache directory untouched
    (it used to be created first, and the refusal exited 1)."""
    proc = ompi5_sh(tmp_path, OMPI5_NEED_GIB="1000000")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"setup/ompi5.sh: not enough disk at {tmp_path}: {proc.stderr.split(': ')[2].split(' GiB')[0]} GiB free, "
        "the Open MPI build needs 1000000 GiB; free space or set HARNESS_CACHE"]
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(not os.environ.get("OMPI_SRC"), reason="needs OMPI_SRC, a v5.0.9 checkout with submodules (run git clone --recursive --branch v5.0.9 https://github.com/open-mpi/ompi.git and set OMPI_SRC to it)")
def test_ompi5_refuses_a_submodule_at_another_commit(tmp_path: Path) -> None:
    """The real tag with one submodule (prrte) replaced by a repository at another commit."""
    src = tmp_path / "src"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", os.environ["OMPI_SRC"], str(src)], check=True)
    subprocess.run(["git", "-C", str(src), "-c", "advice.detachedHead=false", "checkout", "-q",
                    "b79100b3fbbf45b3c6ed82a6b67b6346f8cfdc41", "--", "VERSION"], check=True)
    subprocess.run(["git", "-C", str(src), "update-ref", "--no-deref", "HEAD", "b79100b3fbbf45b3c6ed82a6b67b6346f8cfdc41"], check=True)
    (src / "ompi").mkdir()
    for path in ("3rd-party/openpmix", "3rd-party/prrte", "config/oac"):
        sub = Path(os.environ["OMPI_SRC"]) / path
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(sub), str(src / path)], check=True)
        want = subprocess.run(["git", "-C", str(sub), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        subprocess.run(["git", "-C", str(src / path), "update-ref", "--no-deref", "HEAD", want], check=True)
    other = subprocess.run(["git", "-C", str(src / "3rd-party/prrte"), "rev-parse", "HEAD~1"], capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "-C", str(src / "3rd-party/prrte"), "update-ref", "--no-deref", "HEAD", other], check=True)
    proc = ompi5_sh(tmp_path, OMPI_SRC=str(src))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"submodule 3rd-party/prrte of {src} is at {other}, not the pinned 2e893392405afd914717a2c077accf1c1ec9ee55" in proc.stderr


def test_sweep_without_the_build_skips_its_rows_in_one_line(monkeypatch, tmp_path: Path) -> None:
    """No Open MPI 5 build: the sweep keeps every other row, check and figure and drops these,
    saying so in one line that names the command."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "empty-cache"))
    sweep = config.load(MPI_SWEEP)
    assert [lib.name for lib in mpi.unbuilt(sweep)] == ["ompi5", "ompi5-sve"]
    msg = mpi.skip_message(mpi.unbuilt(sweep))
    assert len(msg.splitlines()) == 1 and "./harness setup --with-ompi5" in msg
    kept = mpi.without_unbuilt(sweep)
    fig9 = {"mpi5_pack", "mpi5sve_pack", "mpi5_unpack", "mpi5sve_unpack"}  # tests/test_mpi5_datatype.py
    assert {s.kernel for s in kept.selections} == {s.kernel for s in sweep.selections} - {KERNEL} - fig9
    assert all("ompi5" not in c.id for c in kept.checks) and len(kept.checks) < len(sweep.checks)
    assert all("ompi5" not in f.name for f in kept.figures) and len(kept.figures) == len(sweep.figures) - 2
    assert not [j for j in kept.jobs() if j.binary.kernel == KERNEL]
    # The NEON row is its own build, run without SVE at every VL.
    neon = [j for j in sweep.jobs() if j.binary.name == f"{KERNEL}-neon"]
    assert [j.binary.build for j in neon] == [config.NOSVE]
    assert {r.vl for r in neon[0].runs} == set(sweep.vector_lengths) and not any(r.sve for r in neon[0].runs)
    assert neon[0].runs[0].argv()[0] == "0000"


def test_a_build_that_did_not_finish_is_not_built(monkeypatch, tmp_path: Path) -> None:
    """Headers and libmpi.so of a build still running, or of one that failed its last check (no
    SVE half): the sweep dropped nothing and every job linked against the broken library. Built
    means the stamp setup/ompi5.sh writes last."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    lib = mpi.library("ompi5")
    lib.include.mkdir(parents=True)
    lib.lib.mkdir(parents=True)
    (lib.include / "mpi.h").write_text("")
    (lib.lib / "libmpi.so").write_text("")
    assert not lib.installed()
    assert [u.name for u in mpi.unbuilt(config.load(MPI_SWEEP))] == ["ompi5", "ompi5-sve"]
    (tmp_path / "cache" / f"ompi-{mpi.OMPI5_VERSION}" / "installed").write_text("version=v5.0.9\ncommit=b79100b\n")
    assert lib.installed()


def test_the_sve_half_check_reads_the_whole_symbol_table(tmp_path: Path) -> None:
    """setup/ompi5.sh's last check was `nm | grep -q` under pipefail: grep left at the match, nm
    died of SIGPIPE on a table larger than a pipe, and a complete build was refused."""
    shim = tmp_path / "bin"
    shim.mkdir()
    nm = shim / "aarch64-linux-gnu-nm"
    nm.write_text("#!/bin/sh\necho '0000 D ompi_op_aarch64_functions_sve'\n"
                  "yes '0000 t ompi_op_aarch64_2buff_max_int32_t_neon' | head -n 200000\n")
    nm.chmod(0o755)
    script = (f"set -euo pipefail; source {REPO / 'setup' / 'cache.sh'}; "
              "defines_symbol lib ompi_op_aarch64_functions_sve && echo yes; "
              "defines_symbol lib no_such_symbol || echo no")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"})
    assert (proc.returncode, proc.stdout.split()) == (0, ["yes", "no"]), proc.stderr
    assert not re.search(r"nm \S+( 2>\S+)? \| grep -q", (REPO / "setup" / "ompi5.sh").read_text())


def test_bench_says_why_without_the_mpi_libraries(monkeypatch, tmp_path: Path, capsys) -> None:
    """bench's MPI part with neither library: nothing runs, each part says why in one line."""
    import dataclasses

    from analysis.commands import bench

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(mpi, "DEBIAN", dataclasses.replace(mpi.DEBIAN, prefix=tmp_path / "no-openmpi"))
    assert bench.mpi_timings(tmp_path / "work", 1) == {"ompi5_build_s": None, "ompi5_sve_build_s": None, "mpi_sweep": None}
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["Open MPI 5 build: not measured (not built: run ./harness setup --with-ompi5)",
                   "its SVE datatype engine build: not measured (not built: run ./harness setup --with-ompi5)",
                   "MPI sweep: skipped, no MPI library here (./harness setup --with-mpi, ./harness setup --with-ompi5)"]
    assert not (tmp_path / "work").exists()


def test_ieee_policy_needs_the_driver_flag(tmp_path: Path) -> None:
    """A family whose MAX/MIN follow FMAX/FMIN (nan: ieee) must build its driver with
    -DREDUCE_IEEE_FILLS (no signed zeros), else its rows would fail verification: refused early."""
    text = (REPO / "configs" / "kernels.yaml").read_text()
    assert text.count(", -DREDUCE_IEEE_FILLS]") == 1
    bad = tmp_path / "kernels.yaml"
    bad.write_text(text.replace(", -DREDUCE_IEEE_FILLS]", "]").replace("source: kernels/", f"source: {REPO}/kernels/")
                   .replace("driver: kernels/", f"driver: {REPO}/kernels/").replace("extra_sources: [kernels/", f"extra_sources: [{REPO}/kernels/"))
    with pytest.raises(config.ConfigError, match="family mpi5_reduce: nan policy ieee needs cflags: \\[-DREDUCE_IEEE_FILLS\\]"):
        config.load_table([bad])
    config.load_table([REPO / "configs" / "kernels.yaml"])


# --- a row declared `sve: false`, end to end without Open MPI (the NEON line's machinery) ---

NOSVE_TABLE = """\
families: {}
kernels:
  - kernel: reduce_nosve
    variant: c_autovec
    family: reduce
    source: %s/kernels/reduce/elementwise.c
    sve: false
    label: "element-wise C loop built without SVE, on a CPU without SVE"
    role: extra
    expect: {sve_in_roi: false}
"""


@pytest.mark.slow
def test_a_row_without_sve_runs_through_the_workflow(tmp_path: Path) -> None:
    """Built as `nosve` (-march=armv8-a: no SVE instruction in the binary), run under
    -cpu max,sve=off with VL argument 0, listed at every swept VL with identical counts."""
    (tmp_path / "extra.yaml").write_text(NOSVE_TABLE % REPO)
    (tmp_path / "sweep.yaml").write_text(f"""\
kernel_table: {REPO}/configs/kernels.yaml
extra_kernel_tables: [extra.yaml]
results_dir: {tmp_path / 'results'}
build_dir: {tmp_path / 'build'}
vector_lengths: [128, 1024]
sizes: {{reduce: [4096]}}
kernels:
  - {{kernel: reduce_nosve, ops: [max], dtypes: [float]}}
""")
    sweep = config.load(tmp_path / "sweep.yaml")
    proc = snakemake(tmp_path / "sweep.yaml", sweep.build_dir, sweep.results_dir, ["counts_all"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Our objects (the static libc holds SVE variants of its own, chosen at run time by ifunc).
    objs = build.kernel_objects(sweep.build_dir, sweep.table, "gcc", config.NOSVE, "reduce_nosve", "c_autovec")
    dis = "".join(run([OBJDUMP, "-d", str(o)]).stdout for o in objs.values())
    assert len(objs) == 4 and "fcmgt" in dis and not [ln for ln in dis.splitlines() if SVE_REG.search(ln)]
    raw = __import__("json").loads((sweep.results_dir / "raw" / "qemu" / "gcc" / config.NOSVE / "max"
                                    / "reduce_nosve-c_autovec.json").read_text())
    assert {r["vl"] for r in raw["runs"]} == {128, 1024} and {r["vl_seen"] for r in raw["runs"]} == {0}
    assert all("max,sve=off" in r["command"] and r["argv"][1:3] == ["--batch", "0000"] for r in raw["runs"])
    counts = __import__("analysis.core.table", fromlist=["read_counts"]).read_counts(sweep.results_dir / "counts.csv")
    net = counts[(counts["kernel"] == "reduce_nosve") & (counts["metric"] == "roi_net.total") & (counts["size"] == 4096)]
    assert len(net) == 2 and net["value"].nunique() == 1 and net["value"].iloc[0] > 0, net
    sve = counts[(counts["kernel"] == "reduce_nosve") & (counts["metric"] == "roi.sve")]
    assert (sve["value"] == 0).all()


def test_needs_library_tells_open_mpi_5s_libopen_pal_from_debians(tmp_path: Path) -> None:
    """libmpi.so of an Open MPI 5 build once needed Debian's libopen-pal.so.40 (4.1), taken by
    libtool's install-time relink through a -L of the multiarch directory: the build must be
    refused unless libmpi.so needs 5.0's own libopen-pal.so.80."""
    for soname in ("libopen-pal.so.80", "libopen-pal.so.40"):
        (tmp_path / "pal.c").write_text("int pal(void) { return 1; }\n")
        subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o",
                        str(tmp_path / soname), str(tmp_path / "pal.c")], check=True)
    (tmp_path / "mpi.c").write_text("int pal(void); int mpi(void) { return pal(); }\n")
    for soname in ("libopen-pal.so.80", "libopen-pal.so.40"):
        subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-o", str(tmp_path / f"mpi-{soname}.so"),
                        str(tmp_path / "mpi.c"), str(tmp_path / soname)], check=True)
    script = (f"set -euo pipefail; source {REPO / 'setup' / 'cache.sh'}; cd {tmp_path}; "
              "needs_library mpi-libopen-pal.so.80.so libopen-pal.so.80 && echo own; "
              "needs_library mpi-libopen-pal.so.40.so libopen-pal.so.80 || echo debians; "
              "needs_library no-such-file libopen-pal.so.80 || echo missing")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout.split()) == (0, ["own", "debians", "missing"]), proc.stderr
    text = (REPO / "setup" / "ompi5.sh").read_text()
    assert 'needs_library "$prefix/lib/libmpi.so" libopen-pal.so.80' in text
    # The cross compiler searches the multiarch directory by itself: no -L of it, which made the relink take Debian's.
    assert "--with-hwloc-libdir" not in text and "-L/usr/lib/aarch64-linux-gnu" not in text
