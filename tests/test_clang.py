"""clang is selectable: the same kernels build with clang-14 and compute the same results."""
from __future__ import annotations


import pytest

from analysis.stages import build
from conftest import ALL, kernels_tree_lock, run_plain, snakemake
from disasm import OBJDUMP, run

CELLS = [("copy", "c_vec", 100003, ()), ("copy", "acle_4v", 100003, ()),
         ("reduce", "acle", 65544, (("op", "max"), ("dtype", "float"), ("nan", 1))),
         ("pack", "acle", 4000, (("dir", "pack"), ("dtype", "float"), ("blocklen", 1), ("stride", 2)))]


@pytest.mark.slow
@pytest.mark.needs_clang
def test_clang_builds_run_and_match_gcc(binaries, all_sweep) -> None:
    bd = all_sweep.build_dir
    targets = [str(build.binary_path(bd, "clang", b, "qemu", f"{k}-{v}")) for k, v, _, _ in CELLS for b in ("vla", "vls512")]
    with kernels_tree_lock(bd):
        proc = snakemake(ALL, bd, all_sweep.results_dir, targets)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for kernel, variant, size, params in CELLS:
        for b, vl in (("vla", 256), ("vla", 2048), ("vls512", 512)):
            got = run_plain(build.binary_path(bd, "clang", b, "qemu", f"{kernel}-{variant}"), vl, size, params)
            want = run_plain(binaries(kernel, variant), vl, size, params)
            assert got.returncode == 0, got.stderr
            assert got.stdout == want.stdout, (kernel, variant, b, vl)
    text = run([OBJDUMP, "-d", str(bd / "clang" / "vla" / "obj" / "copy-c_vec.o")]).stdout
    assert "whilelo" in text and "ld1b" in text
