"""The kernel table's `memcpy` field: a row calls one of glibc's memcpy variants directly
(the paper-era per-block `__memcpy_generic`, A64FX's `__memcpy_a64fx`), from the same source
as the row on libc's IFUNC memcpy; each such line verifies its output at every VL it runs
and has an exact count."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import yaml

from analysis.backends import perf
from analysis.core import config
from analysis.stages import build, explain
from conftest import PY, REPO, count_cells, run_cell, run_plain, run_plain_batch

ALL_VLS = list(range(128, 2049, 128))
TABLE = config.load_table([REPO / "configs" / "kernels.yaml"])
VECTOR_PARAMS = {d: (("dir", d), ("dtype", "float"), ("blocklen", 1), ("stride", 2)) for d in ("pack", "unpack")}


def test_memcpy_field_names_the_symbol_and_only_variant_rows_get_a_define() -> None:
    assert TABLE.row("pack", "blocks_generic").memcpy_symbol == "__memcpy_generic"
    assert TABLE.row("copy", "memcpy_a64fx").memcpy_symbol == "__memcpy_a64fx"
    assert TABLE.row("pack", "blocks_call").memcpy_symbol == "memcpy"
    for compiler in ("gcc", "clang"):
        assert "-DHARNESS_MEMCPY=__memcpy_generic" in build.kernel_flags(TABLE, "unpack", "blocks_generic", compiler)
        # Rows on libc's memcpy keep the very flags (and so objects) they had before the field.
        assert not [f for f in build.kernel_flags(TABLE, "pack", "blocks_call", compiler) if "HARNESS_MEMCPY" in f]
    # The same source, one field apart: the pair isolates the memcpy.
    a, b = TABLE.row("pack", "blocks_call"), TABLE.row("pack", "blocks_generic")
    assert [f for f in config.ROW_FACTORS if getattr(a, f) != getattr(b, f)] == ["memcpy"]


def _table_with(tmp_path: Path, **fields) -> Path:
    row = {"kernel": "mine", "variant": "v", "family": "copy", "source": str(REPO / "kernels/copy/glibc_memcpy.c"),
           "label": "x", "role": "extra", **fields}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"families": {}, "kernels": [row]}))
    sweep = yaml.safe_load((REPO / "configs" / "tiny.yaml").read_text())
    sweep.update(extra_kernel_tables=["t.yaml"], results_dir=str(tmp_path / "r"), build_dir=str(tmp_path / "b"))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    return tmp_path / "s.yaml"


@pytest.mark.parametrize("fields, needle", [
    ({"memcpy": "fast"}, "'fast' is not one of ['libc', 'generic', 'simd', 'sve', 'a64fx']"),
    ({"memcpy": "generic", "host_native": True}, "memcpy: generic needs the static cross link; drop host_native"),
])
def test_bad_memcpy_field_is_one_line(tmp_path: Path, fields: dict, needle: str) -> None:
    proc = subprocess.run([PY, "-m", "analysis.commands.cli", "validate", "--config", str(_table_with(tmp_path, **fields))],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


def test_perf_builds_leave_out_variant_rows() -> None:
    """Native builds link libc.so, which keeps glibc's variants local: no perf job for them."""
    sweep = config.load(REPO / "configs" / "default.yaml")
    names = {j.binary.name for j in perf.perf_jobs(sweep, sve=True, host=True)}
    assert "pack-blocks_call" in names
    assert not names & {"pack-blocks_generic", "unpack-blocks_generic", "copy-memcpy_a64fx"}


@pytest.mark.slow
@pytest.mark.parametrize("kernel, variant, size, params", [
    ("copy", "memcpy_a64fx", 100003, ()),
    ("copy", "memcpy_a64fx", 1 << 20, ()),
    ("pack", "blocks_generic", 4000, VECTOR_PARAMS["pack"]),
    ("unpack", "blocks_generic", 4000, VECTOR_PARAMS["unpack"]),
])
def test_variant_lines_verify_at_every_vl(binaries, kernel: str, variant: str, size: int, params: tuple) -> None:
    """The driver checks the output against its scalar reference: ok at all 16 VLs, the same
    checksum as the libc line."""
    ref = {"copy": "glibc_memcpy", "pack": "blocks_call", "unpack": "blocks_call"}[kernel]
    want = run_plain(binaries(kernel, ref), 256, size, params).stdout.split("checksum=")[1].strip()
    cells = [(vl, size, params) for vl in ALL_VLS]
    for (vl, _, _), res in zip(cells, run_plain_batch(binaries(kernel, variant), cells), strict=True):
        assert res.passed(vl), (vl, res.stderr)
        assert res.fields()["checksum"] == want, vl


def _roi(rec: dict) -> int:
    return rec["inscount"]["roi"]["total"]


@pytest.mark.slow
def test_a64fx_memcpy_closed_form_at_every_vl(binaries, plugin_dir) -> None:
    """__memcpy_a64fx's loop (objdump: 20 instructions, 8 vectors per iteration) runs
    ceil(n / (8 x VL bytes)) - 2 times on 1 MiB (its tail code copies the last two blocks),
    and everything else is one constant wherever 8 vectors divide 1 MiB (the powers of two);
    elsewhere the tail takes the same or a shorter path for the remainder."""
    b, n = binaries("copy", "memcpy_a64fx"), 1 << 20
    rest, other = set(), set()
    cells = [(vl, size, ()) for vl in ALL_VLS for size in (n, 0)]
    counted = dict(zip(cells, count_cells(b, plugin_dir, cells)))
    for vl in ALL_VLS:
        r_n, r_0 = counted[(vl, n, ())], counted[(vl, 0, ())]
        assert r_n["inscount"]["roi_functions"][0]["symbol"] == "__memcpy_a64fx", vl
        loop = explain.hot_loop(b, explain.roi_functions(r_n), r_n, r_0)
        assert loop is not None and loop.function == "__memcpy_a64fx" and len(loop.body) == 20, vl
        assert loop.iterations == math.ceil(n / (8 * vl // 8)) - 2, vl
        (rest if n % (8 * vl // 8) == 0 else other).add(_roi(r_n) - _roi(r_0) - 20 * loop.iterations)
    assert len(rest) == 1, rest
    assert all(0 < x <= min(rest) for x in other), (rest, other)
    # Identical over two runs, each alone, and as counted in the batch above.
    again = run_cell(b, plugin_dir, 384, n)
    assert again["inscount"] == run_cell(b, plugin_dir, 384, n)["inscount"] == counted[(384, n, ())]["inscount"]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["pack", "unpack"])
def test_generic_per_block_closed_form_and_flat(binaries, plugin_dir, kernel: str) -> None:
    """Per block: the block loop's body (objdump), copy_block's one tail branch and a fixed
    number of __memcpy_generic instructions; no SVE; the same count at every VL, twice."""
    b, params = binaries(kernel, "blocks_generic"), VECTOR_PARAMS[kernel]
    counts = {}
    cells = [(vl, n, params) for vl in ALL_VLS for n in (0, 4000, 1 << 20)]
    counted = dict(zip(cells, count_cells(b, plugin_dir, cells)))
    for vl in ALL_VLS:
        r = {n: counted[(vl, n, params)] for n in (0, 4000, 1 << 20)}
        funcs = {f["symbol"]: f["total"] for f in r[1 << 20]["inscount"]["roi_functions"]}
        blocks = (1 << 20) // 4
        loop = explain.hot_loop(b, explain.roi_functions(r[1 << 20]), r[1 << 20], r[0])
        assert loop.function == "vector_kernel" and loop.iterations == blocks, vl
        assert funcs["copy_block"] == blocks  # `b __memcpy_generic`: one instruction per block
        per_call, left = divmod(funcs["__memcpy_generic"], blocks)
        assert left == 0 and r[1 << 20]["inscount"]["roi"]["sve"] == 0, vl
        per_block = len(loop.body) + 1 + per_call
        assert _roi(r[1 << 20]) - _roi(r[4000]) == per_block * (blocks - 1000), vl
        counts[vl] = _roi(r[1 << 20]) - _roi(r[0])
    assert len(set(counts.values())) == 1, counts  # flat: the paper's Fig. 4 baseline
    again = run_cell(b, plugin_dir, 384, 1 << 20, params, dtype="float")
    assert _roi(again) - _roi(run_cell(b, plugin_dir, 384, 0, params, dtype="float")) == counts[384]


@pytest.mark.needs_clang
def test_clang_links_the_libc_gcc_links() -> None:
    """The gcc vs clang pair must differ in the compiler only: clang takes the cross libc
    (whose memcpy variants the lines call), not the multiarch arm64 one --with-mpi installs.
    On an arm64 host both take the host's own libc (libc6-dev), as there is no cross one."""
    from analysis.core.toolchain import COMPILERS, host_arch

    libc = {c: Path(subprocess.run([*COMPILERS[c].cc, "-print-file-name=libc.a"], capture_output=True, text=True,
                                   check=True).stdout.strip()).resolve() for c in ("gcc", "clang")}
    want = "/usr/lib/aarch64-linux-gnu/libc.a" if host_arch() == "arm64" else "/usr/aarch64-linux-gnu/lib/libc.a"
    assert libc["gcc"] == libc["clang"] == Path(want), libc
