"""Fig. 9 inside Open MPI 5.0.9: the same MPI_Pack/MPI_Unpack sources linked with the stock
build and with the build carrying our SVE datatype engine (install-sve, made by setup/ompi5.sh
from a copy of the stock build). Each binary verifies its output; the SVE rows load the patched
libopen-pal, produce the stock bytes, and cost what the engine's loop says: the stock engine 6
instructions per float at every VL, ours the same at VL 128 (the paper's exception) and 7 per
vector from VL 256, with one gather (pack) or scatter (unpack) per vector.

Needs the build (./harness setup --with-ompi5) and skips without it.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest

from analysis.backends import qemu
from analysis.core import config, decode, mpi
from analysis.stages import build
from conftest import REPO, snakemake
from disasm import run

ROWS = {  # kernel: (variant, library)
    "mpi5_pack": ("stock", "ompi5"), "mpi5sve_pack": ("sve_engine", "ompi5-sve"),
    "mpi5_unpack": ("stock", "ompi5"), "mpi5sve_unpack": ("sve_engine", "ompi5-sve"),
}
# Open MPI's own datatype tests (test/datatype/Makefile.am's TESTS), which setup/ompi5.sh builds
# against the patched tree.
OMPI_TESTS = ("opal_datatype_test", "unpack_hetero", "checksum", "position", "position_noncontig", "ddt_test",
              "ddt_raw", "ddt_raw2", "unpack_ooo", "ddt_pack", "external32", "large_data", "partial")
SIZE = 65536  # bytes of packed floats: 16384 floats, 64 vectors at VL 2048
VLS = (128, 256, 2048)


@pytest.fixture(scope="module")
def ddt_sweep(work: Path) -> config.Sweep:
    """configs/mpi.yaml's Fig. 9 rows on Open MPI 5 alone."""
    path = work / "mpi5-ddt.yaml"
    path.write_text(f"""\
kernel_table: {REPO}/configs/kernels.yaml
results_dir: {work / 'mpi5-ddt-results'}
build_dir: {work / 'build'}
vector_lengths: [128, 256, 2048]
sizes: {{mpi5_vector: [{SIZE}], mpi5sve_vector: [{SIZE}]}}
kernels:
""" + "".join(f"  - {{kernel: {k}, dtypes: [float]}}\n" for k in ROWS))
    return config.load(path)


@pytest.fixture(scope="module")
def ddt_bin(ddt_sweep: config.Sweep) -> Callable[[str], Path]:
    """The four rows' binaries (QEMU markers) and the plugins, built through the workflow."""
    bd = ddt_sweep.build_dir
    targets = [str(build.binary_path(bd, "gcc", "vla", "qemu", f"{k}-{v}")) for k, (v, _) in ROWS.items()]
    targets += [str(build.plugin_path(bd, c)) for c in qemu.CLIENTS]
    proc = snakemake(ddt_sweep.path, bd, ddt_sweep.results_dir, targets)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return lambda kernel: build.binary_path(bd, "gcc", "vla", "qemu", f"{kernel}-{ROWS[kernel][0]}")


@pytest.fixture(scope="module")
def ddt_records(ddt_bin, ddt_sweep: config.Sweep) -> dict[tuple[str, int, int], dict]:
    """Each row counted at sizes 0, SIZE and 2 SIZE at each VL (the runner's environment); a run
    whose driver finds wrong bytes exits non-zero and fails here."""
    plugins = build.plugin_path(ddt_sweep.build_dir, "inscount").parent
    first = {j.binary.kernel: j.runs[0] for j in ddt_sweep.jobs()}
    out = {}
    for kernel, (variant, _) in ROWS.items():
        env = mpi.run_env(ddt_sweep.table, kernel, variant)
        for vl in VLS:
            for n in (0, SIZE, 2 * SIZE):
                out[(kernel, vl, n)] = qemu.run_once(ddt_bin(kernel), "max", replace(first[kernel], vl=vl, size=n),
                                                     plugins, env)
    return out


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_sve_rows_load_the_patched_libopen_pal(ddt_bin) -> None:
    """The SVE rows name libopen-pal themselves and find it in install-sve first (its libmpi's
    RUNPATH names the stock prefix); the stock rows do not; only the patched one holds the
    engine's kernels."""
    sve, stock = mpi.library("ompi5-sve"), mpi.library("ompi5")
    for kernel, (_, lib) in ROWS.items():
        dyn = run(["aarch64-linux-gnu-readelf", "-d", str(ddt_bin(kernel))]).stdout
        prefix = sve if lib == "ompi5-sve" else stock
        assert f"[{prefix.lib}]" in dyn and "libmpi.so.40" in dyn, (kernel, dyn)
        assert ("[libopen-pal.so.80]" in dyn) == (lib == "ompi5-sve"), (kernel, dyn)
    has = {p: "opal_datatype_sve_pack_blocklen_one_4" in run(["aarch64-linux-gnu-nm", str(p.lib / "libopen-pal.so")]).stdout
           for p in (sve, stock)}
    assert has == {sve: True, stock: False}


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_the_sve_engine_gives_the_stock_bytes(ddt_records) -> None:
    """Same checksum of the output for stock and SVE engine, at every VL and size."""
    for vl in VLS:
        for n in (SIZE, 2 * SIZE):
            for stock, sve in (("mpi5_pack", "mpi5sve_pack"), ("mpi5_unpack", "mpi5sve_unpack")):
                assert ddt_records[(stock, vl, n)]["checksum"] == ddt_records[(sve, vl, n)]["checksum"], (stock, vl, n)


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_counts_follow_the_engines_loops(ddt_records) -> None:
    """Per float, from the ROI counts at sizes n and 2n (the constant parts cancel): the stock
    engine 6 instructions at every VL and no SVE; ours the same at VL 128, where it keeps the
    stock path, and 7 per vector from VL 256, with one gather (pack) or scatter (unpack) per
    vector and none at VL 128."""
    floats = SIZE // 4

    def roi(kernel: str, vl: int, n: int) -> dict:
        return ddt_records[(kernel, vl, n)]["inscount"]["roi"]

    def slope(kernel: str, vl: int) -> int:
        return roi(kernel, vl, 2 * SIZE)["total"] - roi(kernel, vl, SIZE)["total"]

    for kernel, (variant, _) in ROWS.items():
        per_vector_class = "sve_scatter" if "unpack" in kernel else "sve_gather"
        for vl in VLS:
            vectors = floats // (vl // 32)
            net_class = roi(kernel, vl, SIZE)["classes"][per_vector_class] - roi(kernel, vl, 0)["classes"][per_vector_class]
            if variant == "stock" or vl == 128:
                assert slope(kernel, vl) == 6 * floats, (kernel, vl, slope(kernel, vl))
                assert net_class == 0, (kernel, vl)
            else:
                assert slope(kernel, vl) == 7 * vectors, (kernel, vl, slope(kernel, vl))
                assert net_class == vectors, (kernel, vl, net_class)
            if variant == "stock":
                assert roi(kernel, vl, 2 * SIZE)["sve"] == 0, (kernel, vl)


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_the_roi_holds_what_the_kernel_table_declares(ddt_records, ddt_sweep: config.Sweep) -> None:
    """From the ROI's decoded opcodes: the SVE rows' `expect: roi_has` (one gather for pack, one
    scatter for unpack) from `roi_has_from_vl` on and nowhere below it; the stock rows never."""
    table = ddt_sweep.table
    declared = {k: table.row(k, v).expect for k, (v, _) in ROWS.items()}
    patterns = {k.replace("sve", ""): e["roi_has"] for k, e in declared.items() if "roi_has" in e}
    assert set(patterns) == {"mpi5_pack", "mpi5_unpack"} and all(
        declared[k]["roi_has_from_vl"] == 256 for k in ("mpi5sve_pack", "mpi5sve_unpack"))
    for kernel in ROWS:
        exp = declared[kernel]
        for vl in VLS:
            ops = ddt_records[(kernel, vl, SIZE)]["opcodes"]["roi"]
            text = decode.decode([int(e["encoding"], 16) for e in ops]).values()
            for pat in patterns[kernel.replace("sve", "")]:
                found = any(re.search(pat, t) for t in text)
                should = "roi_has" in exp and vl >= exp["roi_has_from_vl"]
                assert found == should, (kernel, vl, pat, sorted(text)[:40])


@pytest.mark.slow
@pytest.mark.needs_ompi5
def test_open_mpis_own_datatype_tests_pass_on_the_sve_engine(ddt_bin, ddt_sweep: config.Sweep, tmp_path: Path) -> None:
    """Open MPI's test/datatype programs, run under QEMU at VL 128, 256, 512 and 2048 on the
    installed patched library (LD_LIBRARY_PATH ahead of their RUNPATH), all exit 0; the engine
    ran in them: position_noncontig (ints at stride 2, packed in 113-byte fragments) gathers and
    scatters from VL 256 on and not at 128."""
    sve = mpi.library("ompi5-sve")
    progs = sve.prefix.parent / "build-sve" / "test" / "datatype" / ".libs"
    assert all((progs / t).is_file() for t in OMPI_TESTS), f"{progs}: run ./harness setup --with-ompi5"
    plugin = build.plugin_path(ddt_sweep.build_dir, "inscount")
    for vl in (128, 256, 512, 2048):
        for test in OMPI_TESTS:
            out = tmp_path / f"{test}-{vl}.json"
            proc = subprocess.run(
                [qemu.QEMU, "-cpu", f"max,sve-default-vector-length={vl // 8}", "-E", f"LD_LIBRARY_PATH={sve.lib}",
                 "-E", "HOME=/nonexistent", "-plugin", f"{plugin},out={out}", str(progs / test)],
                cwd=tmp_path, capture_output=True, text=True, timeout=600, env={"HOME": "/nonexistent"})
            assert proc.returncode == 0, (test, vl, proc.stdout[-1500:], proc.stderr[-1500:])
            if test == "position_noncontig":
                classes = json.loads(out.read_text())["whole"]["classes"]
                moved = (classes["sve_gather"], classes["sve_scatter"])
                assert (moved[0] > 0 and moved[1] > 0) if vl >= 256 else moved == (0, 0), (vl, moved)
