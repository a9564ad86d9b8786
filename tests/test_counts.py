"""ROI counts against oracles independent of the counters: closed forms from objdump of the
loop body, the class table against objdump's mnemonics, and reproducibility."""
from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest

from analysis import config
from conftest import REPO, run_cell
from disasm import branch_target, disasm_functions, expected_class, is_branch, objdump_words

CLOSED_FORM_VLS = [128, 384, 512, 1152, 2048]
CLOSED_FORM_SIZES = [65536, 100003, 1048576]


def loop_body(binary: Path, function: str = "copy_kernel") -> tuple[int, int]:
    """(instructions per iteration, instructions in the function) from objdump: the loop is
    the range from the target of the one backward conditional branch to that branch."""
    insns = disasm_functions(binary, {function})[function]
    back = [(i, a, o) for i, (a, m, o) in enumerate(insns)
            if is_branch(m) and m.startswith(("b.", "cb", "tb")) and (branch_target(o) or a) < a]
    assert len(back) == 1, f"{function}: expected one loop, found back edges {back}"
    i_branch, _, ops = back[0]
    i_target = next(i for i, (a, _, _) in enumerate(insns) if a == branch_target(ops))
    return i_branch - i_target + 1, len(insns)


def default_params(table: config.KernelTable, row: config.KernelRow) -> tuple:
    """The arguments a sweep passes to the row's binary (reductions: float MAX)."""
    fam = table.families[row.family]
    op, dtype = ("max", "float") if fam.ops else (config.NO_OP, (fam.dtypes or ("uint8",))[0])
    return config.run_params(table, row, op, dtype)


def iterations(n: int, vl: int, loop: dict) -> int:
    chunk = loop["vectors_per_iteration"] * vl // 8
    return math.ceil(n / chunk) if loop["rounding"] == "ceil" else n // chunk


@pytest.mark.parametrize("variant", ["acle_1v", "acle_4v"])
def test_closed_form_roi_counts(binaries, plugin_dir, all_sweep, variant: str) -> None:
    """roi(n2) - roi(n1) = (iters(n2) - iters(n1)) x body exactly at every VL, and
    roi_net(n) - iters(n) x body is one constant everywhere, bounded by the code outside the loop."""
    loop = all_sweep.table.row("copy", variant).expect["loop"]
    binary = binaries("copy", variant)
    body, length = loop_body(binary)
    rest = set()
    for vl in CLOSED_FORM_VLS:
        roi = {n: run_cell(binary, plugin_dir, vl, n)["inscount"]["roi"]["total"] for n in [0, *CLOSED_FORM_SIZES]}
        for n1, n2 in zip(CLOSED_FORM_SIZES, CLOSED_FORM_SIZES[1:]):
            assert roi[n2] - roi[n1] == (iterations(n2, vl, loop) - iterations(n1, vl, loop)) * body, (vl, n1, n2)
        for n in CLOSED_FORM_SIZES:
            rest.add(roi[n] - roi[0] - iterations(n, vl, loop) * body)
    assert len(rest) == 1, rest
    assert 0 <= rest.pop() <= length - body


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
    src = REPO / "armie_clients"
    proc = subprocess.run(["gcc", "-O2", "-std=gnu11", f"-I{src}", "-o", str(tool),
                           str(REPO / "tests" / "decode_driver.c"), str(src / "decode.c")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return tool


def test_class_table_agrees_with_objdump_on_executed_encodings(binaries, plugin_dir, all_sweep, tmp_path) -> None:
    """Every distinct encoding executed in any kernel's ROI is classified as objdump's mnemonic says."""
    words: set[int] = set()
    for row in all_sweep.table.rows:
        params = default_params(all_sweep.table, row)
        rec = run_cell(binaries(row.kernel, row.variant), plugin_dir, 256, 4096, params)
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


def test_cpu_model_a64fx_picks_glibc_a64fx_memcpy(binaries, plugin_dir) -> None:
    """The CPU model is a dimension: under -cpu a64fx glibc's ifunc picks __memcpy_a64fx."""
    b = binaries("copy", "glibc_memcpy")
    funcs = {cpu: run_cell(b, plugin_dir, 256, 65536, cpu=cpu)["inscount"]["roi_functions"] for cpu in ("max", "a64fx")}
    assert funcs["max"][0]["symbol"] == "__memcpy_sve"
    assert funcs["a64fx"][0]["symbol"] == "__memcpy_a64fx"


def test_armie_backend_plumbing_with_a_fake_armie(binaries, monkeypatch, tmp_path) -> None:
    """SYNTHETIC: a stand-in `armie` script (QEMU underneath, ArmIE's output formats on top)
    drives analysis.backends.armie.run_once into the same record shape the table reads.
    It checks our plumbing only; real ArmIE is untested (it runs only on AArch64)."""
    from analysis import parse
    from analysis.backends import armie
    from analysis.config import Run

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
    open("undecoded.txt", "w").write("# SYNTHETIC\\n      100 : 0xa400a000\\n")
sys.exit(p.returncode)
""")
    fake.chmod(0o755)
    monkeypatch.setattr(armie, "armie_available", lambda: str(fake))
    # The qemu-linked binary: ArmIE's marker words would SIGILL under the QEMU underneath.
    rec = armie.run_once(binaries("copy", "acle_4v"), "max", Run(512, 4096, "-", "uint8", ()))
    assert rec["vl_seen"] == 512 and rec["inscount"]["roi"]["total"] == 1000
    doc = {"meta": {"kernel": "copy", "variant": "acle_4v", "layout": "contiguous", "build": "vla",
                    "cpu_model": "max", "backend": "armie", "compiler": "gcc"}, "runs": [rec]}
    rows = {r["metric"]: r["value"] for r in parse.job_rows(doc, parse.decode_mnemonics([doc]))}
    assert rows == {"whole.total": 50000, "whole.sve": 200, "roi.total": 1000, "roi.sve": 100, "roi.op.ld1b": 100}
