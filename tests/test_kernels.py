"""Kernels: self-checks at several VLs and builds, identical output everywhere, the VL
contract, code identical across marker objects, and the codegen facts the table declares."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Callable

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from analysis.stages import build
from conftest import OTHER_MARKER_BUILDS, REPO, run_plain, run_plain_batch
from disasm import NM, OBJDUMP, run

VLA_VLS = [128, 384, 512, 2048]
VLS_BUILDS = [128, 512, 2048]
REDUCE_SIZE = 65544  # a multiple of 8 bytes that no VL divides: exercises the predicated tail


def cells(table) -> list[tuple[str, str, int, tuple]]:
    """(kernel, variant, size, params) for every kernel, several layouts and every op x dtype."""
    out = []
    for row in table.rows:
        fam = table.families[row.family]
        base = tuple(row.params.items())
        if row.family == "copy":
            out += [(row.kernel, row.variant, n, base) for n in (100003, 65536)]
        elif row.family == "vector":
            for dtype in fam.dtypes:
                for bl, stride in ((1, 2), (3, 5), (40, 64)):
                    size = bl * {"float": 4, "double": 8}[dtype] * 1000
                    out.append((row.kernel, row.variant, size,
                                base + (("dtype", dtype), ("blocklen", bl), ("stride", stride))))
        elif row.family == "memcpy":
            out += [(row.kernel, row.variant, n, base + (("src_offset", 0), ("dst_offset", 0))) for n in (100003, 65536)]
        elif row.family == "zero":
            out += [(row.kernel, row.variant, n, base + (("where", w),)) for n in (100003, 65536) for w in ("none", "end")]
        elif row.family == "reduce":
            for op, spec in fam.ops.items():
                for dtype in spec.dtypes:
                    nan = 1 if spec.nan == "reference" else 0
                    out.append((row.kernel, row.variant, REDUCE_SIZE,
                                base + (("op", op), ("dtype", dtype), ("nan", nan))))
    return out


@pytest.fixture(scope="module")
def checksums(binaries, all_sweep) -> dict:
    """Run every cell at every VLA VL and on every VLS build at its own VL; collect checksums.
    The cells of one binary run in one process (run_plain_batch), each at its own VL."""
    by_binary: dict[tuple[str, str, str], list[tuple[int, int, tuple]]] = defaultdict(list)
    for kernel, variant, size, params in cells(all_sweep.table):
        runs = [("vla", vl) for vl in VLA_VLS] + [(f"vls{vl}", vl) for vl in VLS_BUILDS]
        for build_name, vl in runs:
            by_binary[(kernel, variant, build_name)].append((vl, size, params))
    sums: dict = defaultdict(dict)
    failures = []
    for (kernel, variant, build_name), binary_cells in by_binary.items():
        results = run_plain_batch(binaries(kernel, variant, build_name), binary_cells)
        for (vl, size, params), res in zip(binary_cells, results, strict=True):
            if res.returncode != 0 or not res.ok:
                failures.append(f"{kernel}-{variant} {build_name} vl={vl} {params}: {res.stderr.strip()[-300:]}")
                continue
            fields = res.fields()
            assert int(fields["vl"]) == vl and int(fields["size"]) == size
            sums[(kernel, size, params)][(variant, build_name, vl)] = fields["checksum"]
    assert not failures, "\n".join(failures[:20])
    return sums


@pytest.mark.slow
def test_every_kernel_passes_its_self_check(checksums) -> None:
    assert checksums  # the fixture asserts every run exited 0 with its ok line


@pytest.mark.slow
def test_output_identical_across_vls_builds_and_variants(checksums) -> None:
    for cell, by_run in checksums.items():
        assert len(set(by_run.values())) == 1, f"{cell}: {by_run}"


@pytest.mark.slow
def test_a_plain_batch_names_each_failing_run_and_runs_the_rest(binaries) -> None:
    """run_plain_batch, which the self-checks above run through: a run that fails (a VLS
    binary asked for another VL) has its exit status and message, and the runs after it run."""
    cells = [(512, 4096, ()), (256, 4096, ()), (512, 100003, ()), (384, 0, ()), (512, 0, ())]
    results = run_plain_batch(binaries("copy", "acle_4v", "vls512"), cells)
    assert [r.passed(vl) for (vl, _, _), r in zip(cells, results, strict=True)] == [True, False, True, False, True]
    assert results[1].returncode == 3 and "512" in results[1].stderr and "256" in results[1].stderr
    assert [r.fields()["size"] for r in results if r.ok] == ["4096", "100003", "0"]


@pytest.mark.slow
def test_vls_binary_refuses_other_vl(binaries) -> None:
    proc = run_plain(binaries("copy", "acle_4v", "vls512"), 256, 4096)
    assert proc.returncode == 3
    assert "512" in proc.stderr and "256" in proc.stderr


@pytest.mark.slow
def test_vl_mismatch_is_detected(binaries) -> None:
    """Ask for 1024 bits but give QEMU 256: the kernel reads rdvl and refuses."""
    b = binaries("copy", "acle_4v")
    proc = run(["env", "-i", "qemu-aarch64", "-cpu", "max,sve-default-vector-length=32",
                f"./{b.name}", "1024", f"{4096:012d}"], cwd=b.parent)
    assert proc.returncode == 3
    assert "VL mismatch" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["0512"], "usage"),
    (["0512", "-00000000001"], "size"),
    (["0512", "000000004096", "bogus=1"], "bogus"),
])
def test_bad_arguments_exit_2(binaries, args, needle) -> None:
    b = binaries("copy", "acle_4v")
    proc = run(["env", "-i", "qemu-aarch64", "-cpu", "max,sve-default-vector-length=64", f"./{b.name}", *args],
               cwd=b.parent)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr.lower()


def _marker_routines(paths: list[Path]) -> dict[Path, dict[str, tuple[int, int]]]:
    """roi_begin's and roi_end's address and size in each binary, as binutils nm reads them from
    the symbol tables, all binaries in one nm (pyelftools parsed each of a static binary's ~3,200
    symbols to find these two: 0.2 s a binary, most of the time of the comparison below)."""
    proc = run([NM, "--defined-only", "-S", *map(str, paths)])
    assert proc.returncode == 0, proc.stderr
    marks: dict[Path, dict[str, tuple[int, int]]] = {}
    for block in proc.stdout.split("\n\n"):  # one per file: "<path>:" then its symbols
        head, _, symbols = block.strip().partition("\n")
        found = marks.setdefault(Path(head.removesuffix(":")), {})
        for line in symbols.splitlines():
            words = line.split()
            if len(words) == 4 and words[3] in ("roi_begin", "roi_end"):
                found[words[3]] = (int(words[0], 16), int(words[1], 16))
    for path in paths:
        assert set(marks.get(path, {})) == {"roi_begin", "roi_end"}, path
    return marks


def _alloc_bytes(path: Path, marks: dict[str, tuple[int, int]]) -> dict[str, bytes]:
    """Every allocated section's bytes, with the two marker routines (`marks`: address and size
    of each) blanked out (the build-id note, a hash over the file, is left out)."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        out = {}
        for sec in elf.iter_sections():
            # The build-id is a hash of the whole file, markers included: not code.
            if not sec["sh_flags"] & SH_FLAGS.SHF_ALLOC or sec["sh_type"] == "SHT_NOBITS" or sec.name == ".note.gnu.build-id":
                continue
            data = bytearray(sec.data())
            for addr, size in marks.values():
                lo = addr - sec["sh_addr"]
                if 0 <= lo < len(data):
                    assert size > 0
                    data[lo:lo + size] = b"\0" * size
            out[sec.name] = bytes(data)
        return out


@pytest.mark.slow
def test_kernel_code_identical_across_marker_objects(binaries, all_sweep) -> None:
    paths = {(row.name, build_name, be): binaries(row.kernel, row.variant, build_name, be)
             for row in all_sweep.table.rows for build_name in OTHER_MARKER_BUILDS for be in ("qemu", "armie", "gem5")}
    marks = _marker_routines(list(paths.values()))
    for row in all_sweep.table.rows:
        for build_name in OTHER_MARKER_BUILDS:
            images = {be: _alloc_bytes(paths[(row.name, build_name, be)], marks[paths[(row.name, build_name, be)]])
                      for be in ("qemu", "armie", "gem5")}
            assert images["qemu"] == images["armie"] == images["gem5"], f"{row.name} {build_name}"


def _disassembly(obj: Path) -> str:
    proc = run([OBJDUMP, "-dr", "--no-show-raw-insn", str(obj)])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _mnemonics(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\s+[0-9a-f]+:\s+(\S+)", text, re.M)}


@pytest.mark.slow
def test_declared_codegen(binaries, all_sweep) -> None:
    """The kernel table's `expect: has/lacks` facts hold for the kernel objects."""
    checked = 0
    for row in all_sweep.table.rows:
        exp = row.expect
        if not exp.get("has") and not exp.get("lacks"):
            continue
        text = _disassembly(all_sweep.build_dir / "gcc" / "vla" / "obj" / f"{row.name}.o")
        for m in exp.get("has", []):
            assert m in _mnemonics(text), f"{row.name}: no {m} in\n{text}"
        for t in exp.get("lacks", []):
            assert t not in text, f"{row.name}: has {t!r}"
        checked += 1
    assert checked >= 4


@pytest.mark.slow
def test_block_baseline_has_no_gather_or_scatter(binaries, all_sweep) -> None:
    for kernel in ("pack", "unpack"):
        text = _disassembly(all_sweep.build_dir / "gcc" / "vla" / "obj" / f"{kernel}-blocks_call.o")
        assert not re.search(r"\[x\d+, z\d+", text), text
        assert "bl\t" in text  # a real call per block


@pytest.mark.slow
def test_inlined_block_loop_is_vectorized_into_gathers(binaries, all_sweep) -> None:
    pack = _disassembly(all_sweep.build_dir / "gcc" / "vla" / "obj" / "pack-blocks_autovec.o")
    unpack = _disassembly(all_sweep.build_dir / "gcc" / "vla" / "obj" / "unpack-blocks_autovec.o")
    assert re.search(r"ld1[wd]\s+\{z\d+\.[sd]\}, p\d+/z, \[x\d+, z\d+", pack), pack
    assert re.search(r"st1[wd]\s+\{z\d+\.[sd]\}, p\d+, \[x\d+, z\d+", unpack), unpack


# Deliberately broken kernels, one per family driver: each is right everywhere but one element,
# at the start, the middle or the end of its output (BAD(n), n in the kernel's own unit: bytes,
# elements or blocks), and its driver must still fail loudly, naming that element. The drivers'
# checks run in every count run; making them cheaper must not make them blind to any part of the
# output (a check of the first half, or of whole words only, fails here).
WHERE = {"start": "(0)", "middle": "((n) / 2)", "end": "((n) - 1)"}
VECTOR = "#include <string.h>\n#include \"vector.h\"\nconst char vector_kernel_dir[] = \"{dir}\";\n" \
         "void vector_kernel(void *restrict p, void *restrict u, size_t count, size_t bl, size_t st, size_t es)\n"
FLOAT_VECTOR = (("dtype", "float"), ("blocklen", 1), ("stride", 2))
# case: (family, kernel source, params, size in bytes, unit count, stderr line for the bad unit)
BROKEN = {
    # 16 KiB and 5 bytes: the end lies past the last whole word.
    "copy": ("copy", "#include \"copy.h\"\n"
             "void copy_kernel(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)\n"
             "{ for (size_t i = 0; i < n; i++) dst[i] = src[i]; if (n) dst[BAD(n)] ^= 1; }\n",
             (), 16384 + 5, 16384 + 5, "FAIL: dst at index {i}"),
    "pack": ("vector", VECTOR.replace("{dir}", "pack") +
             "{ for (size_t k = 0; k < count; k++) memcpy((char *)p + k * bl * es, (char *)u + k * st * es, bl * es);\n"
             "  size_t n = count * bl; if (n) ((char *)p)[BAD(n) * es + es - 1] ^= 1; }\n",
             (("dir", "pack"), *FLOAT_VECTOR), 16384, 4096, "FAIL: packed element at index {i}"),
    "unpack_block": ("vector", VECTOR.replace("{dir}", "unpack") +
                     "{ for (size_t k = 0; k < count; k++) memcpy((char *)u + k * st * es, (char *)p + k * bl * es, bl * es);\n"
                     "  size_t n = count; if (n) ((char *)u)[BAD(n) * st * es] ^= 1; }\n",
                     (("dir", "unpack"), *FLOAT_VECTOR), 16384, 4096, "FAIL: unpacked block element at index {2i}"),
    "unpack_gap": ("vector", VECTOR.replace("{dir}", "unpack") +
                   "{ for (size_t k = 0; k < count; k++) memcpy((char *)u + k * st * es, (char *)p + k * bl * es, bl * es);\n"
                   "  size_t n = count; if (n) ((char *)u)[BAD(n) * st * es + bl * es] ^= 1; }\n",
                   (("dir", "unpack"), *FLOAT_VECTOR), 16384, 4096, "FAIL: unpacked gap element at index {2i+1}"),
    "reduce": ("reduce", "#include \"ops.h\"\n"
               "static void broken(const void *in, void *inout, size_t n)\n"
               "{ const float *a = in; float *b = inout; for (size_t i = 0; i < n; i++) REDUCE_STEP_max(b[i], a[i]);\n"
               "  if (n) b[BAD(n)] += 1.0f; }\n"
               "const struct reduce_entry reduce_kernels[] = {{\"max\", \"float\", sizeof(float), broken}};\n"
               "const size_t reduce_kernels_count = 1;\n",
               (("op", "max"), ("dtype", "float"), ("nan", 0)), 16384, 4096, "FAIL: inout (max float) at index {i}"),
}


@pytest.fixture(scope="module")
def family_objects(binaries, all_sweep, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[Path]]:
    """The objects a broken kernel of a family links besides its own: the family's driver (with
    its vl_agnostic_sources) and the harness, compiled as the broken kernel is (the driver's
    folder on the include path), once per family for all its cases (BAD(n), the broken element,
    is in the kernel's source alone: no other file names it). Each case compiled them again: a
    third of its time."""
    binaries("copy", "acle_4v")  # the shared build tree (generated headers, marker object)
    bd, out = all_sweep.build_dir, tmp_path_factory.mktemp("family-objects")
    made: dict[str, list[Path]] = {}

    def get(family: str) -> list[Path]:
        if family not in made:
            drv = REPO / "kernels" / family / "driver.c"
            made[family] = []
            for s in (drv, *all_sweep.table.families[family].vl_agnostic_sources, build.HARNESS_SOURCE):
                obj = out / f"{family}-{s.parent.name}-{s.stem}.o"
                assert run(build.compile_cmd(bd, "gcc", "vla", s, obj, (f"-I{drv.parent}",))).returncode == 0
                made[family].append(obj)
        return made[family]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_kernel_wrong_in_one_element_fails_its_check(family_objects, all_sweep, tmp_path: Path, case: str,
                                                       where: str) -> None:
    family, source, params, size, units, needle = BROKEN[case]
    bd = all_sweep.build_dir
    src = tmp_path / "broken.c"
    src.write_text(source)
    drv = REPO / "kernels" / family / "driver.c"
    obj = tmp_path / "broken.o"
    flags = (f"-I{drv.parent}", f"-DBAD(n)={WHERE[where]}")
    assert run(build.compile_cmd(bd, "gcc", "vla", src, obj, flags)).returncode == 0
    *drivers, harness = family_objects(family)
    exe = tmp_path / "k"
    assert run(build.link_cmd("gcc", [*drivers, obj, harness, build.roi_object(bd, "gcc", "qemu")], exe)).returncode == 0
    i = {"start": 0, "middle": units // 2, "end": units - 1}[where]
    expected = needle.replace("{2i+1}", str(2 * i + 1)).replace("{2i}", str(2 * i)).replace("{i}", str(i))
    for vl in (128, 2048):
        proc = run_plain(exe, vl, size, params)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"{expected}:" in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_kernel_wrong_in_one_element_fails_in_a_batch_s_later_run(family_objects, all_sweep, tmp_path: Path,
                                                                      case: str) -> None:
    """In a batch the runs after the first of a size get their inputs, poison and expected
    output back from the kept preparations (a memfd read by the host): the check must be as
    strict there. The kernel is right in its first call and wrong in one element from then on."""
    family, source, params, size, units, needle = BROKEN[case]
    bd = all_sweep.build_dir
    src = tmp_path / "broken.c"
    src.write_text("static int calls;\n" + source.replace("if (n)", "if (n && calls++)"))
    drv = REPO / "kernels" / family / "driver.c"
    obj = tmp_path / "broken.o"
    assert run(build.compile_cmd(bd, "gcc", "vla", src, obj, (f"-I{drv.parent}", f"-DBAD(n)={WHERE['middle']}"))).returncode == 0
    *drivers, harness = family_objects(family)
    exe = tmp_path / "k"
    assert run(build.link_cmd("gcc", [*drivers, obj, harness, build.roi_object(bd, "gcc", "qemu")], exe)).returncode == 0
    first, second = run_plain_batch(exe, [(128, size, params), (2048, size, params)])[:2]
    assert first.passed(128), first
    i = units // 2
    expected = needle.replace("{2i+1}", str(2 * i + 1)).replace("{2i}", str(2 * i)).replace("{i}", str(i))
    assert second.returncode == 1 and f"{expected}:" in second.stderr, second


@pytest.mark.slow
def test_references_never_use_sve(binaries, all_sweep) -> None:
    """The drivers' references (pack/unpack block copy, reduction macros) may use Advanced SIMD
    but no SVE instruction: they must not share the code under test's vector unit or the
    compiler's SVE vectorizer."""
    for obj, pattern in (("driver_vector.o", r"<reference_\w+>:"), ("driver/reduce/reference.o", r"<ref_\w+>:")):
        text = _disassembly(all_sweep.build_dir / "gcc" / "vla" / "obj" / obj)
        bodies = [b for b in text.split("\n\n") if re.search(pattern, b)]
        assert bodies, f"{obj}: no reference function found"
        for body in bodies:
            assert not re.search(r"\b[zp]\d+\b|\bwhile|\bptrue|\bcnt[bhwd]\b", body), body
