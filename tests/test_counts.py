"""ROI counts against oracles independent of the counters: closed forms from objdump of the
loop body, the class table against objdump's mnemonics, and reproducibility."""
from __future__ import annotations

import functools
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.core import config
from conftest import ALL, PY, REPO, count_cells, decode_driver_cmd, kernels_tree_lock, run_cell, run_cell_once
from disasm import branch_target, expected_class, function_words, objdump_words

EVERY_VL = list(config.CPU_MODEL_VLS["max"])
# Multiples of 4 bytes (one float of the vector and reduce rows), none but 65536 a multiple of
# any loop's chunk: a wrong rounding moves the constant between sizes. 4100 B exceed one
# iteration of every declared loop at VL 2048 (4 vectors x 256 B), so the loop always runs.
CLOSED_FORM_SIZES = [4100, 12292, 65536]
# The table's rows that declare their hot loop (every static one the session builds).
LOOP_ROWS = [r.name for r in config.load(ALL).table.rows if "loop" in r.expect and not r.host_isa]


@functools.lru_cache(maxsize=None)
def back_edges(binary: Path, function: str) -> list[tuple[int, int, int]]:
    """(encoding of the backward conditional branch, instructions from its target to it,
    instructions in the function) for every loop of `function`, from objdump."""
    insns = function_words(binary, function)
    index = {a: i for i, (a, _, _, _) in enumerate(insns)}
    return [(w, i - index[branch_target(o)] + 1, len(insns)) for i, (a, w, m, o) in enumerate(insns)
            if m.startswith(("b.", "cb", "tb")) and branch_target(o) in index and branch_target(o) < a]


def loop_body(binary: Path, function: str = "copy_kernel") -> tuple[int, int]:
    """(instructions per iteration, instructions in the function) of a function with one loop."""
    loops = back_edges(binary, function)
    assert len(loops) == 1, f"{function}: expected one loop, found back edges {loops}"
    return loops[0][1], loops[0][2]


def default_params(table: config.KernelTable, row: config.KernelRow) -> tuple:
    """The arguments a sweep passes to the row's binary (reductions: float MAX)."""
    fam = table.families[row.family]
    op, dtype = ("max", "float") if fam.ops else (config.NO_OP, (fam.dtypes or ("uint8",))[0])
    return config.run_params(table, row, op, dtype)


def iterations(n: int, vl: int, loop: dict) -> int:
    chunk = loop["vectors_per_iteration"] * vl // 8
    return math.ceil(n / chunk) if loop["rounding"] == "ceil" else n // chunk


def closed_form_misses(table: config.KernelTable, row: config.KernelRow, binary: Path, plugin_dir: Path,
                       loop: dict) -> list[str]:
    """Where the ROI counts break `loop` at every VL: the hot loop's back edge (objdump; the one
    that ran, in the ROI's busiest function) must run iterations(n) times, and
    roi(n) - roi(0) - iterations(n) x body must be one constant, bounded by the code outside the loop."""
    params = default_params(table, row)
    cells = [(vl, n, params) for vl in EVERY_VL for n in (0, *CLOSED_FORM_SIZES)]
    counted = dict(zip(cells, count_cells(binary, plugin_dir, cells)))
    misses, rest, bound = [], set(), 0
    for vl in EVERY_VL:
        run0 = counted[(vl, 0, params)]
        for n in CLOSED_FORM_SIZES:
            run = counted[(vl, n, params)]
            ran = {int(e["encoding"], 16): e["count"] for e in run["opcodes"]["roi"]}
            for e in run0["opcodes"]["roi"]:
                ran[int(e["encoding"], 16)] = ran.get(int(e["encoding"], 16), 0) - e["count"]
            function = run["inscount"]["roi_functions"][0]["symbol"]
            hot = {(body, length) for word, body, length in back_edges(binary, function) if ran.get(word, 0) > 0}
            if len(hot) != 1:
                return [f"VL {vl} size {n}: {function} has {len(hot)} loops that ran ({hot}); expected one"]
            (body, length), = hot
            want = iterations(n, vl, loop)
            taken = max(ran[word] for word, b, _ in back_edges(binary, function) if b == body and ran.get(word, 0) > 0)
            if taken != want:
                misses.append(f"VL {vl} size {n}: the back edge ran {taken} times, the closed form says {want}")
            rest.add(run["inscount"]["roi"]["total"] - run0["inscount"]["roi"]["total"] - want * body)
            bound = length - body
    if len(rest) != 1 or not 0 <= min(rest) <= bound:
        misses.append(f"roi(n) - roi(0) - iterations x body takes {sorted(rest)}: expected one value in 0..{bound}")
    return misses


@pytest.mark.slow
@pytest.mark.parametrize("name", LOOP_ROWS)
def test_closed_form_roi_counts(binaries, plugin_dir, all_sweep, name: str) -> None:
    """Every row declaring `expect: loop` in the kernel table, at all 16 VLs: the loop runs
    rounding(size / (vectors_per_iteration x VL bytes)) times and the rest of the ROI is constant."""
    row = next(r for r in all_sweep.table.rows if r.name == name)
    misses = closed_form_misses(all_sweep.table, row, binaries(row.kernel, row.variant), plugin_dir, row.expect["loop"])
    assert not misses, f"{name} {row.expect['loop']}:\n" + "\n".join(misses[:10])


def test_the_table_declares_the_acle_loops() -> None:
    """The paper's hand-written SVE loops and the beyond-the-paper ones carry their closed form
    (the compiler-vectorized lines do not: their loop is the compiler's choice, per compiler)."""
    assert set(LOOP_ROWS) >= {"copy-acle_1v", "copy-acle_4v", "pack-acle", "unpack-acle", "reduce-acle",
                              "buffer_is_zero-sve", "memcpy-sve_aligned", "memcpy-sve_x2", "memcpy-sve_x4",
                              "memcpy-sve_nt", "memcpy-sve_prefetch"}


@pytest.mark.slow
def test_a_wrong_closed_form_fails(binaries, plugin_dir, all_sweep) -> None:
    """The check can fail: copy acle_4v's loop declared with the wrong rounding or width."""
    row = all_sweep.table.row("copy", "acle_4v")
    for wrong in ({"vectors_per_iteration": 4, "rounding": "ceil"}, {"vectors_per_iteration": 2, "rounding": "floor"}):
        assert closed_form_misses(all_sweep.table, row, binaries("copy", "acle_4v"), plugin_dir, wrong), wrong


@pytest.mark.slow
def test_count_command_prints_the_cell(binaries, plugin_dir, all_sweep, tmp_path) -> None:
    """./harness count end to end, on the session's build tree (nothing to rebuild): the ROI net
    counts by class of one cell, equal to the runs' difference, and the QEMU command."""
    with kernels_tree_lock(all_sweep.build_dir):  # its Snakemake checks the tree
        proc = subprocess.run([PY, "-m", "analysis.commands.cli", "count", "copy", "acle_4v", "--vl", "256", "--size", "4100",
                               "--set", f"build_dir={all_sweep.build_dir}", "--set", f"results_dir={tmp_path}"],
                              cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    b = binaries("copy", "acle_4v")
    roi_n, roi_0 = (run_cell_once(b, plugin_dir, 256, n)["inscount"]["roi"] for n in (4100, 0))
    lines = proc.stdout.splitlines()
    assert f"  roi_net total {roi_n['total'] - roi_0['total']}  sve {roi_n['sve'] - roi_0['sve']}" in lines
    printed = {ln.split()[2]: int(ln.split()[3]) for ln in lines if ln.startswith("  roi_net class ")}
    assert printed == {c: roi_n["classes"][c] - roi_0["classes"][c] for c in roi_n["classes"]
                       if roi_n["classes"][c] - roi_0["classes"][c]}
    # The printed lines reproduce the net count where a user pastes them (they used to print a
    # QEMU command for ./k in a staging folder that was already deleted).
    at = lines.index(next(ln for ln in lines if ln.startswith("  reproduce ")))
    replays = [ln.strip() for ln in lines[at + 1:at + 3]]
    assert all(" qemu-aarch64 -cpu max,sve-default-vector-length=32 " in r for r in replays), replays
    for r in replays:
        done = subprocess.run(["bash", "-c", r], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    roi = {n: json.loads((tmp_path / f"out-{n}" / "inscount.json.0").read_text())["roi"] for n in (0, 4100)}
    assert roi[4100]["total"] - roi[0]["total"] == roi_n["total"] - roi_0["total"]


@pytest.mark.slow
def test_four_vector_copy_scales_16x(binaries, plugin_dir) -> None:
    b = binaries("copy", "acle_4v")
    net = {}
    for vl in (128, 2048):
        net[vl] = (run_cell(b, plugin_dir, vl, 1 << 20)["inscount"]["roi"]["total"]
                   - run_cell(b, plugin_dir, vl, 0)["inscount"]["roi"]["total"])
    assert 15.5 <= net[128] / net[2048] <= 16.5, net


def _classifier(tmp: Path) -> Path:
    """The host driver of the clients' shared decoder: `<word> <class> ...` per word."""
    tool = tmp / "decode_driver"
    proc = subprocess.run(decode_driver_cmd(tool), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return tool


@pytest.mark.slow
def test_class_table_agrees_with_objdump_on_executed_encodings(binaries, plugin_dir, all_sweep, tmp_path) -> None:
    """Every distinct encoding executed in any kernel's ROI is classified as objdump's mnemonic says."""
    words: set[int] = set()
    for row in all_sweep.table.rows:
        params = default_params(all_sweep.table, row)
        # A cell test_a_cell_counts_the_same_alone_and_in_a_batch counts alone too: run once.
        rec = run_cell_once(binaries(row.kernel, row.variant), plugin_dir, 256, 4096, params)
        words |= {int(e["encoding"], 16) for e in rec["opcodes"]["roi"]}
    tool = _classifier(tmp_path)
    got = subprocess.run([str(tool), "256"], input="\n".join(f"{w:08x}" for w in sorted(words)),
                         capture_output=True, text=True, check=True).stdout.split("\n")
    classes = {int(line.split()[0], 16): line.split()[1] for line in got if line.strip()}
    wrong = []
    for word, mnem, ops in objdump_words(sorted(words), tmp_path):
        assert mnem is not None, f"{word:08x} executed but objdump calls it undefined"
        if classes[word] != expected_class(word, mnem, ops):
            wrong.append(f"{word:08x} {mnem} {ops}: table {classes[word]}, objdump {expected_class(word, mnem, ops)}")
    assert len(words) > 30
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_declared_roi_behaviour(binaries, plugin_dir, all_sweep) -> None:
    """`expect: sve_in_roi` and `lacks_class` from the kernel table, on the net ROI counts."""
    for row in all_sweep.table.rows:
        exp = row.expect
        if "sve_in_roi" not in exp and "lacks_class" not in exp:
            continue
        params = default_params(all_sweep.table, row)
        b = binaries(row.kernel, row.variant)
        roi_n, roi_0 = (run_cell(b, plugin_dir, 256, n, params)["inscount"]["roi"] for n in (65536, 0))
        if "sve_in_roi" in exp:
            assert (roi_n["sve"] - roi_0["sve"] > 0) == exp["sve_in_roi"], (row.name, roi_n["sve"])
            if not exp["sve_in_roi"]:
                assert roi_n["sve"] == 0, row.name
        for cls in exp.get("lacks_class", []):
            assert roi_n["classes"][cls] == 0, (row.name, cls)


@pytest.mark.slow
def test_same_cell_twice_and_in_another_environment(binaries, plugin_dir, monkeypatch, tmp_path) -> None:
    """Whole-program counts are identical across runs and across the caller's environment."""
    b = binaries("copy", "c_vec")
    first = run_cell(b, plugin_dir, 384, 65536)
    second = run_cell(b, plugin_dir, 384, 65536)
    monkeypatch.setenv("SOME_LONG_VARIABLE", "x" * 5000)
    monkeypatch.setenv("PATH", os.environ["PATH"] + ":/nonexistent/dir")
    longer = tmp_path / ("a-much-longer-temporary-directory-name" * 3)
    longer.mkdir()
    monkeypatch.setenv("TMPDIR", str(longer))
    monkeypatch.chdir(longer)
    third = run_cell(b, plugin_dir, 384, 65536)
    for part in ("inscount", "opcodes", "memory"):
        assert first[part] == second[part] == third[part], part


@pytest.mark.slow
def test_a_cell_counts_the_same_alone_and_in_a_batch(binaries, plugin_dir, all_sweep) -> None:
    """A count job runs its cells in one QEMU process (the binary's --batch mode): each cell's
    record, every client and the whole-program part included, is the one it gets alone (a
    batch of one), for every kernel, with the VL changing between runs and sizes small enough
    for alignment-dependent paths (memcpy, string functions) to show a difference. The last
    run copies the preparation the run before it computed (harness_prep_begin), alone it
    computes it."""
    from analysis.backends import qemu
    cells = [(256, 4096), (2048, 0), (128, 12288), (1152, 4096), (256, 4096)]
    differ = []
    for row in all_sweep.table.rows:
        if not row.sve:
            continue
        params = default_params(all_sweep.table, row)
        runs = [config.Run(vl, n, "-", "-", params) for vl, n in cells]
        b = binaries(row.kernel, row.variant)
        batch = qemu.run_batch(b, "max", runs, plugin_dir)
        assert [r["vl_seen"] for r in batch] == [vl for vl, _ in cells], row.name
        for run, rec in zip(runs, batch):
            alone = run_cell_once(b, plugin_dir, run.vl, run.size, run.params)  # a batch of one, once a cell
            differ += [f"{row.name} vl={run.vl} size={run.size} {c}" for c in qemu.CLIENTS if rec[c] != alone[c]]
            # the output checked against the run's own preparation, not another run's
            differ += [f"{row.name} vl={run.vl} size={run.size} checksum"] if rec["checksum"] != alone["checksum"] else []
    assert not differ, "\n".join(differ)


@pytest.mark.slow
def test_a_record_carries_its_own_command_not_its_batch(binaries, plugin_dir) -> None:
    """A record's command is its cell's alone (a batch of one). The batch's command in every
    record made a raw file grow with the square of its runs: 300 MB for a 2,048-run job of the
    full matrix, most of the collect stage's 34 s."""
    from analysis.backends import qemu
    runs = [config.Run(vl, n, "-", "-", ()) for vl, n in ((128, 4096), (512, 0), (2048, 8192))]
    for run, rec in zip(runs, qemu.run_batch(binaries("copy", "acle_4v"), "max", runs, plugin_dir)):
        words = rec["command"]
        assert words[words.index("--batch"):] == rec["argv"][1:] == qemu.batch_argv([run]), words


@pytest.mark.slow
def test_the_replay_line_reproduces_the_cell(binaries, plugin_dir, tmp_path) -> None:
    """provenance.csv's run_command (a record's command_line), run in a shell, counts the cell
    exactly as the sweep did: every client's file, whole-program counts included."""
    import json

    rec = run_cell(binaries("reduce", "acle"), plugin_dir, 384, 4100, (("op", "max"), ("dtype", "float"), ("nan", 1)))
    # mktemp, logging the staging directory it makes (other sessions' come and go in /tmp).
    made = tmp_path / "made"
    shim = tmp_path / "bin" / "mktemp"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nd=$({shutil.which("mktemp")} "$@") && echo "$d" >>{made} && echo "$d"\n')
    shim.chmod(0o755)
    proc = subprocess.run(["bash", "-c", rec["command_line"]], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    for client in ("inscount", "opcodes", "memory"):
        assert json.loads((tmp_path / "out" / f"{client}.json.0").read_text()) == rec[client], client
    # The replay removes its staging directory (it was left in /tmp after every replay).
    (stage,) = made.read_text().split()
    assert stage.startswith("/tmp/sve-count-") and not Path(stage).exists(), stage


@pytest.mark.slow
def test_a_failing_run_of_a_batch_is_named(binaries, plugin_dir) -> None:
    """The batch stops at the first run that fails; the error names that run, not the first."""
    from analysis.backends import RunError, qemu
    runs = [config.Run(256, 4096, "-", "-", ()), config.Run(384, 0, "-", "-", (("bogus", 1),)),
            config.Run(512, 0, "-", "-", ())]
    with pytest.raises(RunError, match=r"copy-acle_4v cpu=max vl=384 size=0: usage error: unknown parameter 'bogus'"):
        qemu.run_batch(binaries("copy", "acle_4v"), "max", runs, plugin_dir)


@pytest.mark.slow
def test_cpu_model_a64fx_picks_glibc_a64fx_memcpy(binaries, plugin_dir) -> None:
    """The CPU model is a dimension: under -cpu a64fx glibc's ifunc picks __memcpy_a64fx."""
    b = binaries("copy", "glibc_memcpy")
    funcs = {cpu: run_cell(b, plugin_dir, 256, 65536, cpu=cpu)["inscount"]["roi_functions"] for cpu in ("max", "a64fx")}
    assert funcs["max"][0]["symbol"] == "__memcpy_sve"
    assert funcs["a64fx"][0]["symbol"] == "__memcpy_a64fx"


# The names ArmIE versions give the opcodes client's encodings file (shared/reference/armie.md).
@pytest.mark.slow
@pytest.mark.parametrize("undecoded", ["undecoded.txt", "undecoded.copy-acle_4v.4242.log"])
def test_armie_backend_plumbing_with_a_fake_armie(binaries, monkeypatch, tmp_path, undecoded: str) -> None:
    """SYNTHETIC: a stand-in `armie` script (QEMU underneath, ArmIE's output formats on top)
    drives analysis.backends.armie.run_once into the same record shape the table reads, with
    either name of the encodings file. It checks our plumbing only; real ArmIE is untested (it
    runs only on AArch64)."""
    from analysis.stages import parse
    from analysis.backends import armie
    from analysis.core.config import Run

    fake = tmp_path / "armie"
    fake.write_text("""#!/usr/bin/env python3
# SYNTHETIC stand-in for ArmIE: runs the program under QEMU, prints ArmIE-format output.
import subprocess, sys
args = sys.argv[1:]
vl = int(args[0].split("=")[1]); client = args[2]; prog = args[args.index("--") + 1:]
roi = "-noROI" not in args
p = subprocess.run(["qemu-aarch64", "-cpu", f"max,sve-default-vector-length={vl // 8}", *prog], capture_output=True, text=True)
sys.stdout.write(p.stdout)
if "inscount" in client:
    print(f"{1000 if roi else 50000} instructions executed of which {100 if roi else 200} were emulated instructions", file=sys.stderr)
else:
    open("UNDECODED", "w").write("# SYNTHETIC\\n      100 : 0xa400a000\\n")
sys.exit(p.returncode)
""".replace("UNDECODED", undecoded))
    fake.chmod(0o755)
    monkeypatch.setattr(armie, "armie_available", lambda: str(fake))
    # The qemu-linked binary: ArmIE's marker words would SIGILL under the QEMU underneath.
    rec = armie.run_once(binaries("copy", "acle_4v"), "max", Run(512, 4096, "-", "uint8", ()))
    assert rec["vl_seen"] == 512 and rec["inscount"]["roi"]["total"] == 1000
    doc = {"meta": {"kernel": "copy", "variant": "acle_4v", "layout": "contiguous", "build": "vla",
                    "cpu_model": "max", "backend": "armie", "compiler": "gcc"}, "runs": [rec]}
    rows = {r["metric"]: r["value"] for r in parse.job_rows(doc, parse.decode_mnemonics([doc]))}
    assert rows == {"whole.total": 50000, "whole.sve": 200, "roi.total": 1000, "roi.sve": 100, "roi.op.ld1b": 100}


@pytest.mark.slow
@pytest.mark.parametrize("kernel, variant, params", [
    ("copy", "c_vec", ()), ("copy", "acle_4v", ()),
    ("reduce", "acle", (("op", "max"), ("dtype", "float"), ("nan", 1))),
    ("reduce", "c_autovec", (("op", "max"), ("dtype", "float"), ("nan", 1)))])
def test_outside_the_roi_nothing_runs_per_byte_in_vector_code(binaries, plugin_dir, kernel, variant, params) -> None:
    """What copy and reduce run outside the ROI per byte of output is scalar or the host's: the
    poison and reduce's copy of inout are preparations, a kept preparation goes back by pread,
    and the check compares 64-bit words. So, in a batch (as a count job runs), the Advanced SIMD
    and SVE instructions outside the ROI do not grow with the size (QEMU runs both several times
    slower per byte than scalar code; docs/speed.md)."""
    cells = [(vl, n, params) for n in (65536, 131072) for vl in (128, 512)]
    recs = count_cells(binaries(kernel, variant), plugin_dir, cells)

    def outside(rec: dict) -> tuple[int, int, int]:
        w, r = rec["inscount"]["whole"], rec["inscount"]["roi"]
        return (w["classes"]["simd_ldst"] - r["classes"]["simd_ldst"], w["classes"]["simd"] - r["classes"]["simd"],
                w["sve"] - r["sve"])

    by = {(vl, n): outside(rec) for (vl, n, _), rec in zip(cells, recs)}
    assert by[(128, 65536)] == by[(128, 131072)] and by[(512, 65536)] == by[(512, 131072)], by
