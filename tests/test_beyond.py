"""Beyond the paper (configs/beyond.yaml): buffer_is_zero and the memcpy family, verified at
every VL, with the closed-form count the kernel table declares for the SVE loops."""
from __future__ import annotations

import platform
import subprocess

import pytest
import yaml

from analysis.backends import perf
from analysis.core import config
from analysis.stages import build
from conftest import count_cells, run_cell, run_plain, run_plain_batch, snakemake
from test_counts import CLOSED_FORM_SIZES, iterations, loop_body

EVERY_VL = list(config.CPU_MODEL_VLS["max"])
# Odd sizes exercise the tails; 1 MiB is the family's largest.
ZERO_SIZES = [1, 7, 255, 4096 + 24, 65536 + 13, 1 << 20]
ZERO_VARIANTS = ["scalar", "advsimd", "sve"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ZERO_VARIANTS)
def test_buffer_is_zero_verified_at_every_vl(binaries, variant: str) -> None:
    """Each run checks the kernel against the scalar reference on all four inputs and on bytes
    off the early-test words (outside the ROI), and the ROI call's answer."""
    b = binaries("buffer_is_zero", variant)
    cells = [(vl, n, (("where", where),)) for n in ZERO_SIZES
             for where in (("none", "start", "middle", "end") if n == 4096 + 24 else ("none",)) for vl in EVERY_VL]
    failures = [f"vl={vl} size={n} {params}: {res.stderr.strip()[-200:]}"
                for (vl, n, params), res in zip(cells, run_plain_batch(b, cells), strict=True) if not res.passed(vl)]
    assert not failures, "\n".join(failures[:10])


@pytest.mark.slow
def test_buffer_is_zero_sve_closed_form_at_every_vl(binaries, plugin_dir, all_sweep) -> None:
    """roi(n) = iterations(n) x body + one constant at every VL: the table's expect: loop
    (4 vectors per iteration, floor) with the body counted by objdump. A buffer shorter than
    one block (256 B at VL >= 640) skips the loop on its own path: a second constant."""
    loop = all_sweep.table.row("buffer_is_zero", "sve").expect["loop"]
    b = binaries("buffer_is_zero", "sve")
    body, length = loop_body(b, "buffer_is_zero")
    rest: dict[bool, set[int]] = {True: set(), False: set()}
    # The closed-form sizes of test_counts (the same runs, made once) and one short buffer.
    cells = [(vl, n, (("where", "none"),)) for vl in EVERY_VL for n in (256, *CLOSED_FORM_SIZES)]
    for (vl, n, _), rec in zip(cells, count_cells(b, plugin_dir, cells)):
        roi = rec["inscount"]["roi"]["total"]
        rest[iterations(n, vl, loop) > 0].add(roi - iterations(n, vl, loop) * body)
    assert len(rest[True]) == 1 and len(rest[False]) == 1, rest
    for r in rest.values():
        assert 0 < r.pop() <= length - body


@pytest.mark.slow
@pytest.mark.parametrize("variant", ZERO_VARIANTS)
def test_buffer_is_zero_early_exit_is_constant(binaries, plugin_dir, variant: str) -> None:
    """A non-zero byte at the start, middle or end is found by the first-middle-last test:
    the same few instructions whatever the VL and the size."""
    b = binaries("buffer_is_zero", variant)
    counts = {(where, vl, n): run_cell(b, plugin_dir, vl, n, (("where", where),))["inscount"]["roi"]["total"]
              for where in ("start", "middle", "end") for vl in (128, 1152, 2048) for n in (256, 1 << 20)}
    assert len(set(counts.values())) == 1, counts
    full = run_cell(b, plugin_dir, 128, 1 << 20, (("where", "none"),))["inscount"]["roi"]["total"]
    assert set(counts.values()).pop() < 40 < full


@pytest.mark.slow
def test_buffer_is_zero_needs_a_byte_to_set(binaries) -> None:
    proc = run_plain(binaries("buffer_is_zero", "sve"), 256, 0, (("where", "end"),))
    assert proc.returncode == 2 and "size >= 1" in proc.stderr


# --- memcpy family ---------------------------------------------------------------------------

MEMCPY_SIZES = [1, 4096 + 13, 65536 + 7]  # none a multiple of any unroll width: the tails run


def memcpy_params(row: config.KernelRow, src_offset: int = 0, dst_offset: int = 0) -> tuple:
    return (("align", row.params["align"]), ("src_offset", src_offset), ("dst_offset", dst_offset))


def counted_memcpy_rows(table: config.KernelTable) -> list[config.KernelRow]:
    return [r for r in table.rows if r.family == "memcpy" and not r.host_isa]


@pytest.mark.slow
def test_memcpy_every_variant_verified_at_every_vl(binaries, all_sweep) -> None:
    """Every cross-built variant copies exactly (and nothing past the end) at all 16 VLs, on
    sizes that leave a tail; variants without an alignment need are run misaligned too. The
    checksums of a size agree across every variant and VL."""
    failures, sums = [], {}
    for row in counted_memcpy_rows(all_sweep.table):
        offsets = [(0, 0)] + ([(3, 5)] if row.params["align"] == 1 else [(64, 128)])
        cells = [(vl, n, memcpy_params(row, so, do)) for n in MEMCPY_SIZES for so, do in offsets for vl in EVERY_VL]
        for (vl, n, params), res in zip(cells, run_plain_batch(binaries("memcpy", row.variant), cells), strict=True):
            if not res.passed(vl):
                failures.append(f"{row.name} vl={vl} size={n} {params}: {res.stderr.strip()[-200:]}")
            else:
                sums.setdefault(n, set()).add(res.fields()["checksum"])
    assert not failures, "\n".join(failures[:10])
    assert all(len(v) == 1 for v in sums.values()), sums


@pytest.mark.slow
def test_memcpy_misaligned_pointer_refused_by_aligned_variants(binaries, all_sweep) -> None:
    aligned = [r for r in counted_memcpy_rows(all_sweep.table) if r.params["align"] > 1]
    assert {r.variant for r in aligned} == {"sve_aligned", "sve_nt"}
    for row in aligned:
        proc = run_plain(binaries("memcpy", row.variant), 256, 4096, memcpy_params(row, 0, 3))
        assert proc.returncode == 2, (row.name, proc.stderr)
        assert f"requires {row.params['align']}-byte aligned pointers" in proc.stderr and "dst_offset=3" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["glibc_generic", "glibc_simd", "glibc_sve", "glibc_a64fx"])
def test_memcpy_glibc_variant_called_directly(binaries, plugin_dir, all_sweep, variant: str) -> None:
    """The row's memcpy field (shared with the paper-era lines) names the glibc function that
    runs in the ROI, whatever -cpu max's IFUNC would pick."""
    row = all_sweep.table.row("memcpy", variant)
    rec = run_cell(binaries("memcpy", variant), plugin_dir, 512, 65536, memcpy_params(row))
    assert rec["inscount"]["roi_functions"][0]["symbol"] == row.memcpy_symbol


def test_host_only_rows_are_never_counted(all_sweep) -> None:
    sweep = config.load(config.REPO / "configs" / "beyond.yaml")
    host_only = {r.name for r in sweep.table.rows if r.host_isa}
    assert len(host_only) == 5
    assert not host_only & {j.binary.name for j in sweep.jobs()}
    perf_names = {j.binary.name for j in perf.perf_jobs(sweep, sve=True, host=True) if j.binary.build == "host"}
    assert (host_only <= perf_names) == (platform.machine() == "x86_64")
    assert not host_only & {j.binary.name for j in perf.perf_jobs(sweep, sve=True, host=True) if j.binary.build == "vla"}


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 host rows")
def test_x86_host_copies_verified(tmp_path) -> None:
    """The x86-64 counterparts, built for this host through the workflow, copy exactly with
    tails and (where allowed) misaligned pointers; the aligned ones refuse misalignment."""
    sweep = config.load(config.REPO / "configs" / "beyond.yaml",
                        {"build_dir": str(tmp_path / "build"), "results_dir": str(tmp_path / "results")})
    rows = [r for r in sweep.table.rows if r.family == "memcpy" and r.host_native]
    bins = {r.name: build.binary_path(sweep.build_dir, "native", "host", "perf", r.name) for r in rows}
    proc = snakemake(sweep.path, sweep.build_dir, sweep.results_dir, [str(b) for b in bins.values()])
    assert proc.returncode == 0, proc.stderr[-2000:]
    sums = set()
    for row in rows:
        offsets = [(0, 0), (3, 5)] if row.params["align"] == 1 else [(0, 0), (32, 96)]
        for n in (1, 4096 + 13, (1 << 20) + 7):
            for so, do in offsets:
                run = config.Run(0, n, "-", "uint8", memcpy_params(row, so, do))
                p = subprocess.run([str(bins[row.name]), *run.argv()], capture_output=True, text=True)
                assert p.returncode == 0 and p.stdout.startswith("ok "), (row.name, n, so, do, p.stderr)
                sums.add((n, p.stdout.split("checksum=")[1].strip()))
        if row.params["align"] > 1:
            run = config.Run(0, 4096, "-", "uint8", memcpy_params(row, 0, 3))
            p = subprocess.run([str(bins[row.name]), *run.argv()], capture_output=True, text=True)
            assert p.returncode == 2 and "aligned pointers" in p.stderr, (row.name, p.stderr)
    assert len(sums) == 3, sums  # one checksum per size, whatever the variant


def test_host_isa_needs_host_native(tmp_path) -> None:
    row = {"kernel": "mine", "variant": "v", "family": "memcpy", "source": str(config.REPO / "kernels/memcpy/x86_avx2.c"),
           "label": "x", "role": "extra", "host_isa": "x86_64", "params": {"align": 32}}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"families": {}, "kernels": [row]}))
    with pytest.raises(config.ConfigError, match="add host_native: true"):
        config.load_table([config.REPO / "configs" / "kernels.yaml", tmp_path / "t.yaml"])
