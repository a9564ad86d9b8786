"""Beyond the paper (configs/beyond.yaml): buffer_is_zero and the memcpy family, verified at
every VL, with the closed-form count the kernel table declares for the SVE loops."""
from __future__ import annotations

import pytest

from analysis import config
from conftest import run_cell, run_plain
from test_counts import iterations, loop_body

EVERY_VL = list(config.CPU_MODEL_VLS["max"])
# Odd sizes exercise the tails; 1 MiB is the family's largest.
ZERO_SIZES = [1, 7, 255, 4096 + 24, 65536 + 13, 1 << 20]
ZERO_VARIANTS = ["scalar", "advsimd", "sve"]


@pytest.mark.parametrize("variant", ZERO_VARIANTS)
def test_buffer_is_zero_verified_at_every_vl(binaries, variant: str) -> None:
    """Each run checks the kernel against the scalar reference on all four inputs and on bytes
    off the early-test words (outside the ROI), and the ROI call's answer."""
    b = binaries("buffer_is_zero", variant)
    failures = []
    for vl in EVERY_VL:
        for n in ZERO_SIZES:
            for where in (("none", "start", "middle", "end") if n == 4096 + 24 else ("none",)):
                proc = run_plain(b, vl, n, (("where", where),))
                if proc.returncode != 0 or not proc.stdout.startswith(f"ok vl={vl} "):
                    failures.append(f"vl={vl} size={n} where={where}: {proc.stderr.strip()[-200:]}")
    assert not failures, "\n".join(failures[:10])


def test_buffer_is_zero_sve_closed_form_at_every_vl(binaries, plugin_dir, all_sweep) -> None:
    """roi(n) = iterations(n) x body + one constant at every VL: the table's expect: loop
    (4 vectors per iteration, floor) with the body counted by objdump. A buffer shorter than
    one block (256 B at VL >= 640) skips the loop on its own path: a second constant."""
    loop = all_sweep.table.row("buffer_is_zero", "sve").expect["loop"]
    b = binaries("buffer_is_zero", "sve")
    body, length = loop_body(b, "buffer_is_zero")
    rest: dict[bool, set[int]] = {True: set(), False: set()}
    for vl in EVERY_VL:
        for n in (256, 4096, 65536 + 13, 1 << 20):
            roi = run_cell(b, plugin_dir, vl, n, (("where", "none"),))["inscount"]["roi"]["total"]
            rest[iterations(n, vl, loop) > 0].add(roi - iterations(n, vl, loop) * body)
    assert len(rest[True]) == 1 and len(rest[False]) == 1, rest
    for r in rest.values():
        assert 0 < r.pop() <= length - body


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


def test_buffer_is_zero_needs_a_byte_to_set(binaries) -> None:
    proc = run_plain(binaries("buffer_is_zero", "sve"), 256, 0, (("where", "end"),))
    assert proc.returncode == 2 and "size >= 1" in proc.stderr
