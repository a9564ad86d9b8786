"""The Open MPI figures (paper Fig. 9, 10): the MPI programs verify their results at two VLs,
the user paths count exactly the count sweep's kernels plus a measured constant, the stock
library is flat across VL, and a sweep without the arm64 Open MPI stops early naming the fix.

All but the last need Debian's arm64 Open MPI (./harness setup --with-mpi) and skip without it.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from analysis.backends import qemu
from analysis.commands import cli
from analysis.core import config, mpi, toolchain
from analysis.stages import build
from conftest import REPO, count_cells, kernels_tree_lock, snakemake
from disasm import OBJDUMP, run

MPI_SWEEP = REPO / "configs" / "mpi.yaml"
VECTOR = (("dtype", "float"), ("blocklen", 1), ("stride", 2))
MAX_FLOAT = (("op", "max"), ("dtype", "float"), ("nan", 1))


def debian_rows(table: config.KernelTable) -> list[config.KernelRow]:
    """The MPI rows this file builds and checks: those on Debian's library. The Open MPI 5 rows
    need their own build (./harness setup --with-ompi5) and are tests/test_mpi5.py's, behind its
    own skip (they were once iterated here too, and their unbuilt binary failed this file on a
    machine with Debian's Open MPI but without Open MPI 5)."""
    return [r for r in table.rows if (lib := mpi.family_library(table, r.family)) and lib.name == "debian"]


@pytest.fixture(scope="module")
def mpi_sweep(all_sweep: config.Sweep, work: Path) -> config.Sweep:
    """On the kernels' shared build tree: test_user_pack_counts_exactly_the_count_sweeps_kernel
    compares an MPI row's object with the count sweep's one built there."""
    return config.load(MPI_SWEEP, {"build_dir": str(all_sweep.build_dir), "results_dir": str(work / "mpi-results")})


@pytest.fixture(scope="module")
def mpi_bin(mpi_sweep: config.Sweep, binaries) -> Callable[[str, str], Path]:
    """Every MPI row's VLA binary (QEMU markers), built through the workflow; `binaries` has
    built the static kernels and the plugins into the same tree."""
    bd = mpi_sweep.build_dir
    targets = [str(build.binary_path(bd, "gcc", "vla", "qemu", r.name)) for r in debian_rows(mpi_sweep.table)]
    with kernels_tree_lock(bd):
        proc = snakemake(MPI_SWEEP, bd, mpi_sweep.results_dir, targets)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return lambda kernel, variant: build.binary_path(bd, "gcc", "vla", "qemu", f"{kernel}-{variant}")


def run_mpi(binary: Path, vl: int, size: int, params: tuple, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run an MPI program under QEMU without plugins, in the environment the runner gives it."""
    argv = config.Run(vl, size, "-", "-", params).argv()
    e = mpi.RUN_ENV if env is None else env
    cmd = ["env", "-i", *(f"{k}={v}" for k, v in e.items()), "qemu-aarch64", "-cpu",
           f"max,sve-default-vector-length={vl // 8}", f"./{binary.name}", *argv]
    return subprocess.run(cmd, cwd=binary.parent, capture_output=True, text=True)


def roi_net(binary: Path, plugin_dir: Path, vl: int, size: int, params: tuple, env: dict[str, str]) -> int:
    def roi(n: int) -> int:
        return qemu.run_once(binary, "max", config.Run(vl, n, "-", "-", params), plugin_dir, env)["inscount"]["roi"]["total"]
    return roi(size) - roi(0)


@pytest.mark.slow
@pytest.mark.needs_mpi
@pytest.mark.parametrize("kernel, params, size", [
    ("mpi_pack", VECTOR, 65536), ("mpi_unpack", VECTOR, 65536),
    ("mpi_pack", (("dtype", "double"), ("blocklen", 3), ("stride", 5)), 24000),
    ("mpi_unpack", (("dtype", "double"), ("blocklen", 3), ("stride", 5)), 24000),
    ("mpi_reduce", MAX_FLOAT, 65544), ("mpi_reduce", (("op", "sum"), ("dtype", "int32"), ("nan", 0)), 65544),
])
def test_every_mpi_program_verifies_at_two_vls(mpi_bin, mpi_sweep, kernel: str, params: tuple, size: int) -> None:
    """Each row checks its output against the scalar reference (the count sweep's driver); the
    stock library and the user kernels produce the same bytes at VL 128 and 2048."""
    sums = {}
    for row in (r for r in mpi_sweep.table.rows if r.kernel == kernel):
        for vl in (128, 2048):
            proc = run_mpi(mpi_bin(kernel, row.variant), vl, size, tuple(row.params.items()) + params)
            assert proc.returncode == 0 and proc.stdout.startswith(f"ok vl={vl} "), (row.name, vl, proc.stderr[-2000:])
            sums[(row.variant, vl)] = proc.stdout.split("checksum=")[1].strip()
    assert len(sums) >= 6 and len(set(sums.values())) == 1, sums


@pytest.mark.slow
@pytest.mark.needs_mpi
def test_mpi_program_fails_without_singleton_isolation(mpi_bin) -> None:
    """Without OMPI_MCA_ess_singleton_isolated=1 the singleton tries to exec orted and MPI_Init
    fails: the runner's environment for MPI rows is what makes them run."""
    proc = run_mpi(mpi_bin("mpi_reduce", "stock"), 256, 4096, MAX_FLOAT, env={})
    assert proc.returncode != 0
    assert "ok " not in proc.stdout
    assert "orted" in proc.stderr and "MPI_Init" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.needs_mpi
def test_user_pack_counts_exactly_the_count_sweeps_kernel(mpi_bin, binaries, plugin_dir, mpi_sweep) -> None:
    """The user pack path is the count sweep's pack-acle object (same source and flags, same
    code) called in an MPI process: its ROI net count equals the Fig. 4 count exactly."""
    obj = mpi_sweep.build_dir / "gcc" / "vla" / "obj"
    dis = {n: re.sub(r"^.*file format.*$", "", run([OBJDUMP, "-d", str(obj / f"{n}.o")]).stdout, flags=re.M)
           for n in ("pack-acle", "mpi_pack-acle")}
    assert dis["pack-acle"] == dis["mpi_pack-acle"]
    params = (("dir", "pack"),) + VECTOR
    for vl in (128, 2048):
        mpi_net = roi_net(mpi_bin("mpi_pack", "acle"), plugin_dir, vl, 65536, params, mpi.RUN_ENV)
        plain_net = roi_net(binaries("pack", "acle"), plugin_dir, vl, 65536, params, {})
        assert mpi_net == plain_net, (vl, mpi_net, plain_net)


@pytest.mark.slow
@pytest.mark.needs_mpi
def test_user_op_runs_the_count_sweeps_kernel_plus_a_constant_call(mpi_bin, binaries, plugin_dir) -> None:
    """MPI_Reduce_local with a count-sweep kernel as a user-defined op. In the ROI the kernel
    function executes exactly the instructions it executes in the count sweep, at every VL and
    size; everything else in the ROI (libmpi's MPI_Reduce_local, our trampoline user_fn_* and
    the mpi_reduce_* caller) is one constant for both kernels at every VL and size. So
    roi_net(MPI) = roi_net(count sweep) + C + k0, where C (measured: 92 = 86 in libmpi + 6 in
    the trampoline) is the part of the call that runs only for a non-empty message (with
    count 0 Open MPI runs 630 instructions but never calls the op), and k0 the kernel's own
    size-0 cost, which the count sweep's baseline contains and MPI's does not."""
    fn = {"acle": "acle_max_float", "c_scalar": "elementwise_max_float"}
    rest, call = set(), set()
    for variant, kernel_fn in fn.items():
        # The count sweep's kernel counted as a count job counts it (one process); an MPI
        # program runs one run per process.
        cells = [(vl, n, MAX_FLOAT) for vl in (128, 512, 2048) for n in (0, 65536, 100000)]
        plain = dict(zip(cells, count_cells(binaries("reduce", variant), plugin_dir, cells)))
        for vl in (128, 512, 2048):
            recs = {}
            for n in (0, 65536, 100000):
                mpi_rec = qemu.run_once(mpi_bin("mpi_reduce", variant), "max", config.Run(vl, n, "-", "-", MAX_FLOAT),
                                        plugin_dir, mpi.RUN_ENV)
                for path, rec in (("mpi", mpi_rec), ("plain", plain[(vl, n, MAX_FLOAT)])):
                    roi = rec["inscount"]
                    recs[(path, n)] = (roi["roi"]["total"], {f["symbol"]: f["total"] for f in roi["roi_functions"]})
            for n in (65536, 100000):
                (mpi_total, mpi_fns), (_, plain_fns) = recs[("mpi", n)], recs[("plain", n)]
                assert mpi_fns[kernel_fn] == plain_fns[kernel_fn], (variant, vl, n)
                rest.add(mpi_total - mpi_fns[kernel_fn])
                net = {p: recs[(p, n)][0] - recs[(p, 0)][0] for p in ("mpi", "plain")}
                call.add(net["mpi"] - net["plain"] - recs[("plain", 0)][1].get(kernel_fn, 0))
    assert len(rest) == 1, rest
    assert len(call) == 1 and 0 < next(iter(call)) < 200, call


@pytest.mark.slow
@pytest.mark.needs_mpi
def test_stock_library_is_flat_across_vl(mpi_bin, plugin_dir) -> None:
    """Open MPI 4.1 has no SVE: its MAX and its pack engine execute the same instructions at
    every VL (the paper's stock lines of Fig. 9 and 10 are flat)."""
    for kernel, params in (("mpi_pack", (("dir", "pack"),) + VECTOR), ("mpi_reduce", MAX_FLOAT)):
        nets = {vl: roi_net(mpi_bin(kernel, "stock"), plugin_dir, vl, 65536, params, mpi.RUN_ENV) for vl in (128, 2048)}
        assert abs(nets[128] / nets[2048] - 1) < 0.01, (kernel, nets)


@pytest.mark.slow
@pytest.mark.needs_mpi
def test_declared_roi_behaviour_of_mpi_rows(mpi_bin, mpi_sweep, plugin_dir) -> None:
    """The kernel table's `sve_in_roi` and `lacks_class` facts of the MPI rows on their ROI
    (library code included), and `has` on their kernel objects."""
    checked = 0
    for row in (r for r in debian_rows(mpi_sweep.table) if r.expect):
        params = tuple(row.params.items()) + (MAX_FLOAT if row.family == "mpi_reduce" else VECTOR)
        recs = [qemu.run_once(mpi_bin(row.kernel, row.variant), "max", config.Run(256, n, "-", "-", params),
                              plugin_dir, mpi.RUN_ENV)["inscount"]["roi"] for n in (0, 65536)]
        if "sve_in_roi" in row.expect:
            assert (recs[1]["sve"] - recs[0]["sve"] > 0) == row.expect["sve_in_roi"], (row.name, recs[1]["sve"])
        for cls in row.expect.get("lacks_class", []):
            assert recs[1]["classes"][cls] == 0, (row.name, cls)
        text = run([OBJDUMP, "-d", str(mpi_sweep.build_dir / "gcc" / "vla" / "obj" / f"{row.name}.o")]).stdout
        for m in row.expect.get("has", []):
            assert re.search(rf"\s{m}\s", text), (row.name, m)
        checked += 1
    assert checked >= 3


def test_the_rows_checked_here_are_debians_and_built_here() -> None:
    """No test of this file reads an Open MPI 5 row, stock or with our SVE engine (no library
    check needed to run this): the rows it checks are the rows mpi_bin builds, all on Debian's
    library, with declared facts."""
    table = config.load(MPI_SWEEP).table
    rows = debian_rows(table)
    assert {r.kernel for r in rows} == {"mpi_pack", "mpi_unpack", "mpi_reduce"}, [r.name for r in rows]
    assert all(mpi.family_library(table, r.family) == mpi.DEBIAN for r in rows)
    others = [r for r in table.rows if table.families[r.family].mpi and r not in rows]
    assert others and {mpi.family_library(table, r.family).name for r in others} == {"ompi5", "ompi5-sve"}
    assert len([r for r in rows if r.expect]) >= 3


def test_mpi_sweep_without_the_stack_stops_early_naming_the_fix(monkeypatch, tmp_path: Path, capsys) -> None:
    """No arm64 Open MPI: validate (and the workflow's preflight, same check) stops with one line
    naming ./harness setup --with-mpi before any job, and writes nothing."""
    monkeypatch.setattr(mpi, "DEBIAN", dataclasses.replace(mpi.DEBIAN, prefix=tmp_path / "no-such-openmpi"))
    results = tmp_path / "results"
    rc = cli.main(["validate", "--config", str(MPI_SWEEP), "--set", f"results_dir={results}"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "./harness setup --with-mpi" in err and len(err.strip().splitlines()) == 1, err
    assert not results.exists()
    with pytest.raises(toolchain.ToolchainError, match="--with-mpi"):
        mpi.check(config.load(MPI_SWEEP))
    mpi.check(config.load(REPO / "configs" / "default.yaml"))  # the default sweep never needs it
